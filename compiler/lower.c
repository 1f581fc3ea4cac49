/* lower.c: the model section expanded into a flat list of layers.
 * Blocks are instantiated with their arguments bound (so arithmetic like
 * 4*d is evaluated here), `repeat N { }` makes N copies named 0..N-1 and
 * `residual { }` adds its input to its body's output.  Each layer and each
 * block, repeat or named residual is a scope of the equivalent nn.Module
 * tree; an unnamed layer takes its index in its scope, as nn.Sequential
 * names children, and an unnamed residual adds no level to names.
 * A conv2d(padding="same") that pads one side more than the other becomes
 * two nodes, a hidden zero pad and the unpadded convolution, in the one
 * scope of the Conv2d the user wrote.
 * The output is in execution order; node i's main input is always an
 * earlier node, so every later pass is a forward walk.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "compiler/compile_impl.h"
#include "compiler/ops.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

enum { MAX_BLOCK_DEPTH = 32, MAX_LAYERS = 8192 };

struct lower {
	struct arena *a;
	struct diag *d;
	struct evalctx ec;
	const struct sections *s;
	struct plan *p;
	int cap_nodes, cap_scopes;
	int cur;          /* node whose output feeds the next layer */
	const struct ast_section *active[MAX_BLOCK_DEPTH];
	int nactive;
	bool used[MAX_BLOCKS]; /* blocks instantiated, by index in s->blocks */
	bool failed_size;
	int max_device; /* highest @device index + 1 seen */
};

/* Placement and freezing flow from a scope to everything inside it. */
struct inherit {
	int device;  /* -1: follow the data */
	bool frozen;
	struct loc device_loc;
};

static int new_scope(struct lower *L, int parent, const char *name, const char *type, struct loc at)
{
	struct plan *p = L->p;
	if (p->nscopes == L->cap_scopes) {
		int cap = L->cap_scopes ? L->cap_scopes * 2 : 64;
		p->scopes = arena_realloc(L->a, p->scopes, (size_t)L->cap_scopes * sizeof *p->scopes, (size_t)cap * sizeof *p->scopes);
		L->cap_scopes = cap;
	}
	struct scope *sc = &p->scopes[p->nscopes];
	sc->name = name;
	sc->type = type;
	sc->parent = parent;
	sc->node = -1;
	sc->device = -1;
	sc->loc = at;
	sc->call = (struct loc){ 0 };
	if (parent < 0) {
		sc->path = "";
		sc->depth = 0;
	} else {
		const struct scope *up = &p->scopes[parent];
		sc->path = up->path[0] ? arena_printf(L->a, "%s.%s", up->path, name) : name;
		sc->depth = up->depth + 1;
	}
	return p->nscopes++;
}

static int new_node(struct lower *L, enum op op, struct loc at, int scope)
{
	struct plan *p = L->p;
	/* the input is a node but not a layer */
	if (p->nnodes == MAX_LAYERS + 1) {
		if (!L->failed_size)
			diag_error(L->d, at, "the model expands to more than %d layers", MAX_LAYERS);
		L->failed_size = true;
		return -1;
	}
	if (p->nnodes == L->cap_nodes) {
		int cap = L->cap_nodes ? L->cap_nodes * 2 : 64;
		p->nodes = arena_realloc(L->a, p->nodes, (size_t)L->cap_nodes * sizeof *p->nodes, (size_t)cap * sizeof *p->nodes);
		L->cap_nodes = cap;
	}
	struct node *n = &p->nodes[p->nnodes];
	memset(n, 0, sizeof *n);
	n->op = op;
	n->loc = at;
	n->in = L->cur;
	n->in2 = -1;
	n->unit = -1;
	n->alias = -1;
	n->device = -1;
	n->scope = scope;
	n->path = p->scopes[scope].path;
	n->what = n->path;
	return p->nnodes++;
}

static const struct ast_section *find_block(const struct sections *s, const char *name)
{
	for (int i = 0; i < s->nblocks; i++)
		if (strcmp(s->blocks[i]->name, name) == 0)
			return s->blocks[i];
	return NULL;
}

static bool annotations(struct lower *L, const struct ast_stmt *st, const struct env *env, struct inherit *inh, bool *wrap)
{
	static const char *const known[] = { "device", "wrap", "frozen" };
	bool ok = true;
	*wrap = false;
	for (const struct ast_annot *an = st->annots; an; an = an->next) {
		const struct ast_annot *first = st->annots;
		while (first != an && strcmp(first->name, an->name) != 0)
			first = first->next;
		if (first != an) {
			diag_error(L->d, an->loc, "@%s is given twice; keep one", an->name);
			diag_note(L->d, first->loc, "first given here");
			ok = false;
			continue;
		}
		struct varg *args;
		int n;
		if (!val_eval_args(&L->ec, an->args, env, &args, &n)) {
			ok = false;
			continue;
		}
		if (strcmp(an->name, "device") == 0) {
			static const char *const names[] = { "index" };
			struct val *s[1];
			if (!val_bind(L->d, "@device", an->loc, args, n, names, 1, 1, s)) {
				ok = false;
				continue;
			}
			int64_t k;
			if (!s[0]) {
				diag_error(L->d, an->loc, "@device needs a device index: @device(0)");
				ok = false;
			} else if (val_int(L->d, s[0], "the device index", &k)) {
				if (k < 0 || k >= PLAN_MAX_DEVICES) {
					diag_error(L->d, s[0]->loc, "device index %" PRId64 " is out of range; a rank owns at most %d devices, numbered from 0",
						   k, PLAN_MAX_DEVICES);
					val_note_origin(L->d, s[0]);
					ok = false;
				} else {
					inh->device = (int)k;
					inh->device_loc = an->loc;
					if (k >= L->max_device) {
						L->max_device = (int)k + 1;
						L->p->device_loc = an->loc;
					}
				}
			} else {
				ok = false;
			}
		} else if (strcmp(an->name, "wrap") == 0 || strcmp(an->name, "frozen") == 0) {
			if (n) {
				diag_error(L->d, an->loc, "@%s takes no arguments", an->name);
				ok = false;
			}
			if (an->name[0] == 'w')
				*wrap = true;
			else
				inh->frozen = true;
		} else {
			const char *near = diag_nearest(an->name, known, 3);
			if (near)
				diag_error(L->d, an->loc, "unknown annotation '@%s'; did you mean '@%s'?", an->name, near);
			else
				diag_error(L->d, an->loc, "unknown annotation '@%s'; the annotations are @device(k), @wrap and @frozen", an->name);
			ok = false;
		}
	}
	return ok;
}

static bool lower_body(struct lower *L, const struct ast_stmt *body, int scope, const struct env *env, struct inherit inh,
		       int *counter, bool top);

static const char *child_name(struct lower *L, const struct ast_stmt *st, int *counter)
{
	int idx = (*counter)++;
	return st->name ? st->name : arena_printf(L->a, "%d", idx);
}

/* The scope whose names a child of `s` joins: unnamed residuals add no level. */
static int naming_scope(const struct plan *p, int s)
{
	while (s > 0 && !p->scopes[s].name[0])
		s = p->scopes[s].parent;
	return s;
}

/* Unique child names per naming scope: a second `conv1 =` is an error. */
static bool unique(struct lower *L, int scope, const char *name, struct loc at)
{
	scope = naming_scope(L->p, scope);
	for (int i = L->p->nscopes - 1; i > scope; i--) {
		const struct scope *sc = &L->p->scopes[i];
		if (sc->name[0] && naming_scope(L->p, sc->parent) == scope && strcmp(sc->name, name) == 0) {
			diag_error(L->d, at, "'%s' is already a name in this %s", name, scope == 0 ? "model" : "block");
			diag_note(L->d, sc->loc, "first used here");
			return false;
		}
	}
	return true;
}

static bool instantiate(struct lower *L, const struct ast_section *blk, const struct val *call, const struct ast_stmt *st,
			int scope, struct inherit inh)
{
	for (int i = 0; i < L->nactive; i++) {
		if (L->active[i] == blk) {
			diag_error(L->d, call->name_loc, "block %s uses itself; blocks cannot be recursive", blk->name);
			diag_note(L->d, blk->name_loc, "block %s is defined here", blk->name);
			return false;
		}
	}
	if (L->nactive == MAX_BLOCK_DEPTH) {
		diag_error(L->d, call->name_loc, "blocks nested more than %d deep", MAX_BLOCK_DEPTH);
		return false;
	}
	for (int i = 0; i < L->s->nblocks; i++)
		L->used[i] |= L->s->blocks[i] == blk;
	/* bind the call's arguments to the block's parameters */
	struct env env = { { 0 }, { 0 }, 0, blk };
	const char *names[32];
	struct val *defaults[32];
	int np = 0;
	bool ok = true;
	for (const struct ast_arg *g = blk->params; g; g = g->next) {
		if (np == 32) {
			diag_error(L->d, blk->name_loc, "block %s has more than 32 parameters", blk->name);
			return false;
		}
		if (g->key) {
			names[np] = g->key;
			defaults[np] = val_eval(&L->ec, g->value, NULL);
			if (!defaults[np])
				return false;
		} else if (g->value->kind == AST_NAME) {
			names[np] = g->value->u.s;
			defaults[np] = NULL;
		} else {
			diag_error(L->d, g->value->loc, "a block parameter is a name, or name=default");
			return false;
		}
		np++;
	}
	int npos = 0;
	while (npos < np && !defaults[npos])
		npos++;
	struct val *slot[32];
	if (!val_bind(L->d, blk->name, call->loc, call->kind == V_CALL ? call->items : NULL, call->kind == V_CALL ? call->n : 0,
		      names, np, np, slot))
		return false;
	for (int k = 0; k < np; k++) {
		struct val *v = slot[k] ? slot[k] : defaults[k];
		if (!v) {
			diag_error(L->d, call->loc, "block %s needs a value for '%s'", blk->name, names[k]);
			diag_note(L->d, blk->name_loc, "block %s is defined here", blk->name);
			ok = false;
			continue;
		}
		env.names[env.n] = names[k];
		env.vals[env.n++] = v;
	}
	if (!ok)
		return false;
	L->active[L->nactive++] = blk;
	int counter = 0;
	ok = lower_body(L, blk->body, scope, &env, inh, &counter, false);
	L->nactive--;
	(void)st;
	return ok;
}

static void unknown_layer(struct lower *L, const char *callee, struct loc at)
{
	const char *cands[128];
	int nops = op_names(cands, 80), n = nops;
	for (int i = 0; i < L->s->nblocks && n < 126; i++)
		cands[n++] = L->s->blocks[i]->name;
	cands[n++] = "residual";
	cands[n++] = "repeat";
	const char *near = diag_nearest(callee, cands, n);
	if (near) {
		diag_error(L->d, at, "unknown layer '%s'; did you mean '%s'?", callee, near);
		return;
	}
	/* no likely typo: what there is, for a PyTorch layer trainc lacks */
	char list[1024], blocks[256] = "";
	size_t k = 0, kb = 0;
	for (int i = 0; i < nops && k < sizeof list; i++)
		if (strcmp(cands[i], "input") != 0)
			k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", cands[i]);
	for (int i = nops; i < n - 2 && kb < sizeof blocks; i++)
		kb += (size_t)snprintf(blocks + kb, sizeof blocks - kb, "%s%s", kb ? ", " : "; this file's blocks: ", cands[i]);
	diag_error(L->d, at, "unknown layer '%s'; the layers are %s%s", callee, list, blocks);
}

/* A block the model never uses is still read for what needs no argument
 * values: its parameter list and the layers it names (a typo in a block
 * kept for later should not wait for its first use). */
static bool check_unused_block(struct lower *L, const struct ast_section *blk, const struct ast_stmt *body)
{
	bool ok = true;
	if (body == blk->body) {
		int np = 0;
		for (const struct ast_arg *g = blk->params; g; g = g->next)
			np++;
		if (np > 32) {
			diag_error(L->d, blk->name_loc, "block %s has more than 32 parameters", blk->name);
			ok = false;
		}
	}
	for (const struct ast_stmt *st = body; st; st = st->next) {
		const struct ast *e = st->value;
		const char *callee = !e ? NULL : e->kind == AST_CALL ? e->u.call.name : e->kind == AST_NAME ? e->u.s : NULL;
		struct loc at = e && e->kind == AST_CALL ? e->u.call.name_loc : e ? e->loc : st->loc;
		bool param = false;
		for (const struct ast_arg *g = blk->params; callee && g; g = g->next)
			param |= strcmp(g->key ? g->key : g->value->kind == AST_NAME ? g->value->u.s : "", callee) == 0;
		if (callee && !param && strcmp(callee, "residual") != 0 && strcmp(callee, "repeat") != 0 && !find_block(L->s, callee) &&
		    op_lookup(callee) < 0) {
			unknown_layer(L, callee, at);
			ok = false;
		}
		if (st->has_body)
			ok &= check_unused_block(L, blk, st->body);
	}
	return ok;
}

/* Node conv (the last made) gets a hidden zero pad of pad = (left, right,
 * top, bottom) before it.  The pad has no scope of its own, so it is no
 * module and takes no index among unnamed layers (PyTorch's numbering);
 * it shares the conv's scope, path, placement and messages, so transfers
 * into it and errors about it read as about the conv. */
static bool hidden_pad(struct lower *L, int conv, const int64_t pad[4])
{
	struct plan *p = L->p;
	int id = new_node(L, OP_ZEROPAD2D, p->nodes[conv].loc, p->nodes[conv].scope);
	if (id < 0)
		return false;
	struct node z = p->nodes[id];
	const struct node *c = &p->nodes[conv];
	z.in = c->in;
	z.path = c->path;
	z.what = c->what;
	z.device = c->device;
	z.frozen = c->frozen;
	z.hidden = true;
	z.a.pad.left = pad[0];
	z.a.pad.right = pad[1];
	z.a.pad.top = pad[2];
	z.a.pad.bottom = pad[3];
	p->nodes[id] = *c;
	p->nodes[id].in = conv;
	p->nodes[conv] = z;
	p->scopes[p->nodes[id].scope].node = id;
	L->cur = id;
	return true;
}

static bool lower_stmt(struct lower *L, const struct ast_stmt *st, int scope, const struct env *env, struct inherit inh,
		       int *counter, const char *forced_name)
{
	if (!st->value)
		return true;
	struct val *v = val_eval(&L->ec, st->value, env);
	if (!v)
		return false;
	const char *callee = val_callee(v);
	if (!callee) {
		diag_error(L->d, v->loc, "expected a layer, block, residual or repeat, found %s",
			   v->kind == V_INT || v->kind == V_FLOAT ? "a number" : v->kind == V_STRING ? "a string" : "a value");
		val_note_origin(L->d, v);
		return false;
	}
	bool wrap;
	if (!annotations(L, st, env, &inh, &wrap))
		return false;
	const char *name = forced_name ? forced_name : NULL;
	struct loc name_at = st->name ? st->name_loc : v->name_loc;

	if (strcmp(callee, "input") == 0) {
		diag_error(L->d, v->name_loc, "input(...) must be the first line of the model");
		return false;
	}
	if (strcmp(callee, "residual") == 0 || strcmp(callee, "repeat") == 0) {
		bool rep = callee[1] == 'e' && callee[2] == 'p';
		if (!st->has_body) {
			diag_error(L->d, v->name_loc, "%s needs a body: %s { ... }", callee, rep ? "repeat N" : "residual");
			return false;
		}
		if (!st->body) {
			diag_error(L->d, v->name_loc, "%s has an empty body", callee);
			return false;
		}
		int64_t times = 1;
		if (rep) {
			static const char *const names[] = { "times" };
			struct val *s[1];
			if (!val_bind(L->d, "repeat", v->loc, v->kind == V_CALL ? v->items : NULL, v->kind == V_CALL ? v->n : 0, names, 1, 1, s))
				return false;
			if (!s[0]) {
				diag_error(L->d, v->name_loc, "repeat needs a count: repeat 4 { ... }");
				return false;
			}
			if (!val_int(L->d, s[0], "the repeat count", &times))
				return false;
			if (times < 1 || times > 100000) {
				diag_error(L->d, s[0]->loc, "repeat count must be between 1 and 100000, not %" PRId64, times);
				val_note_origin(L->d, s[0]);
				return false;
			}
		} else if (v->kind == V_CALL && v->n) {
			diag_error(L->d, v->items[0].v->loc, "residual takes no arguments");
			return false;
		}
		int sc;
		int *inner_counter = counter, own_counter = 0;
		if (!rep && !st->name && !forced_name) {
			/* an unnamed residual adds no level to parameter names */
			sc = new_scope(L, scope, "", "Residual", v->name_loc);
			L->p->scopes[sc].path = L->p->scopes[scope].path;
		} else {
			if (!name)
				name = child_name(L, st, counter);
			if (!unique(L, scope, name, name_at))
				return false;
			sc = new_scope(L, scope, name, rep ? "Sequential" : "Residual", name_at);
			inner_counter = &own_counter;
		}
		L->p->scopes[sc].wrap = wrap;
		L->p->scopes[sc].device = inh.device;
		if (!rep) {
			int x0 = L->cur;
			if (!lower_body(L, st->body, sc, env, inh, inner_counter, false))
				return false;
			int add = new_node(L, OP_ADD, v->name_loc, sc);
			if (add < 0)
				return false;
			L->p->nodes[add].in2 = x0;
			L->p->nodes[add].what = "the residual sum";
			L->p->nodes[add].device = inh.device;
			L->p->nodes[add].frozen = inh.frozen;
			L->cur = add;
			return true;
		}
		bool single = !st->body->next && !st->body->name;
		for (int64_t i = 0; i < times; i++) {
			const char *iname = arena_printf(L->a, "%" PRId64, i);
			if (single) {
				if (!lower_stmt(L, st->body, sc, env, inh, &own_counter, iname))
					return false;
			} else {
				int isc = new_scope(L, sc, iname, "Sequential", v->name_loc);
				int c2 = 0;
				if (!lower_body(L, st->body, isc, env, inh, &c2, false))
					return false;
			}
			if (L->failed_size)
				return false;
		}
		return true;
	}
	if (st->has_body) {
		diag_error(L->d, v->name_loc, "%s takes no body; only residual and repeat do", callee);
		return false;
	}
	const struct ast_section *blk = find_block(L->s, callee);
	if (blk) {
		if (!name)
			name = child_name(L, st, counter);
		if (!unique(L, scope, name, name_at))
			return false;
		int sc = new_scope(L, scope, name, blk->name, name_at);
		L->p->scopes[sc].call = v->name_loc;
		L->p->scopes[sc].wrap = wrap;
		L->p->scopes[sc].device = inh.device;
		return instantiate(L, blk, v, st, sc, inh);
	}
	enum variant var;
	int op = op_lookup_variant(callee, &var);
	if (op < 0) {
		unknown_layer(L, callee, v->name_loc);
		return false;
	}
	if (!name)
		name = child_name(L, st, counter);
	if (!unique(L, scope, name, name_at))
		return false;
	struct node probe = { .op = (enum op)op, .variant = var };
	int sc = new_scope(L, scope, name, op_class(&probe), name_at);
	int id = new_node(L, (enum op)op, v->name_loc, sc);
	if (id < 0)
		return false;
	struct node *n = &L->p->nodes[id];
	n->variant = var;
	n->loc = loc_span(v->name_loc, v->loc);
	if (v->kind == V_CALL)
		n->loc = v->loc;
	n->loc.col = v->name_loc.col;
	n->loc.len = v->name_loc.len;
	n->device = inh.device;
	n->frozen = inh.frozen;
	n->what = st->name || forced_name ? n->path : arena_printf(L->a, "layer %s (%s)", n->path, callee);
	L->p->scopes[sc].node = id;
	L->p->scopes[sc].wrap = wrap;
	L->p->scopes[sc].device = inh.device;
	L->cur = id;
	struct val bare = *v; /* `relu` reads as `relu()`, located where it is written */
	bare.kind = V_CALL;
	bare.n = 0;
	if (!op_configure(L->d, n, v->kind == V_CALL ? v : &bare))
		return false;
	int64_t pad[4];
	return !op_same_pad(n, pad) || hidden_pad(L, id, pad);
}

static bool lower_body(struct lower *L, const struct ast_stmt *body, int scope, const struct env *env, struct inherit inh,
		       int *counter, bool top)
{
	bool ok = true;
	for (const struct ast_stmt *st = body; st; st = st->next) {
		if (top && st == body)
			continue; /* the input statement, handled by lower_model */
		if (!lower_stmt(L, st, scope, env, inh, counter, NULL)) {
			ok = false;
			if (L->failed_size)
				return false;
		}
	}
	return ok;
}

bool lower_model(struct arena *a, struct diag *d, const struct sections *s, struct plan *p)
{
	struct lower L = { 0 };
	L.a = a;
	L.d = d;
	L.ec.a = a;
	L.ec.d = d;
	L.s = s;
	L.p = p;
	L.cur = -1;
	const struct ast_section *m = s->model;
	p->model_name = m->name;
	new_scope(&L, -1, "", m->name, m->name_loc);
	const struct ast_stmt *first = m->body;
	struct val *v = first && first->value ? val_eval(&L.ec, first->value, NULL) : NULL;
	const char *callee = val_callee(v);
	if (!callee || strcmp(callee, "input") != 0) {
		struct loc at = first ? first->loc : m->open_loc;
		diag_error(d, at, "model %s must start with its per-sample input shape, e.g. input(1, 28, 28)", m->name);
		return false;
	}
	if (first->name || first->annots || first->has_body) {
		diag_error(d, first->loc, "input(...) takes no name, annotation or body");
		return false;
	}
	int id = new_node(&L, OP_INPUT, v->name_loc, 0);
	p->nodes[id].in = -1;
	p->nodes[id].path = "input";
	p->nodes[id].what = "input";
	struct val bare = *v;
	bare.kind = V_CALL;
	bare.n = 0;
	if (!op_configure(d, &p->nodes[id], v->kind == V_CALL ? v : &bare))
		return false;
	L.cur = id;
	int counter = 0;
	struct inherit inh = { -1, false, { 0 } };
	bool ok = lower_body(&L, m->body, 0, NULL, inh, &counter, true);
	if (ok && p->nnodes == 1) {
		diag_error(d, m->name_loc, "model %s has no layers after its input", m->name);
		return false;
	}
	for (int i = 0; ok && i < s->nblocks; i++)
		if (!L.used[i])
			ok &= check_unused_block(&L, s->blocks[i], s->blocks[i]->body);
	return ok;
}
