/* sections.c: the first pass: which sections are in force.
 * `import "file.net"` brings in another file's sections, resolved relative
 * to the importing file; a later section of the same kind (and, for
 * blocks, the same name) replaces an earlier one, so an experiment file
 * can import a model and restate only its data or training settings.
 * `--set section.key=value` then replaces or adds one statement.  Cycles
 * and over-deep import chains are errors, not recursion.
 */
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compile_impl.h"
#include "compiler/ops.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

static const char *const kinds[] = { "model", "block", "data", "train", "parallel", "import" };

struct gather {
	struct arena *a;
	struct diag *d;
	struct sections *s;
	const char *stack[MAX_IMPORT_DEPTH + 1]; /* the file named on the command line, then its imports */
	int depth;
	struct source *last;
	bool too_many_blocks;
};

static bool add(struct gather *g, const struct ast_section *sec)
{
	struct sections *s = g->s;
	const char *k = sec->kind;
	if (strcmp(k, "model") == 0) {
		if (!sec->name) {
			diag_error(g->d, sec->kind_loc, "a model needs a name: model NAME { ... }");
			return false;
		}
		if (!sec->has_body) {
			diag_error(g->d, sec->name_loc, "model %s has no body; write its layers between { and }", sec->name);
			return false;
		}
		if (s->model && strcmp(s->model->name, sec->name) != 0 && s->model->kind_loc.src == sec->kind_loc.src) {
			diag_error(g->d, sec->name_loc, "a file holds one model, but this is a second one ('%s')", sec->name);
			diag_note(g->d, s->model->name_loc, "the first model, '%s', is here", s->model->name);
			return false;
		}
		s->model = sec;
	} else if (strcmp(k, "block") == 0) {
		if (!sec->name) {
			diag_error(g->d, sec->kind_loc, "a block needs a name: block NAME(params) { ... }");
			return false;
		}
		if (!sec->has_body) {
			diag_error(g->d, sec->name_loc, "block %s has no body", sec->name);
			return false;
		}
		for (int i = 0; i < s->nblocks; i++) {
			if (strcmp(s->blocks[i]->name, sec->name) == 0) {
				if (s->blocks[i]->kind_loc.src == sec->kind_loc.src) {
					diag_error(g->d, sec->name_loc, "block %s is defined twice in this file", sec->name);
					diag_note(g->d, s->blocks[i]->name_loc, "first defined here");
					return false;
				}
				s->blocks[i] = sec;
				return true;
			}
		}
		if (s->nblocks == MAX_BLOCKS) {
			if (!g->too_many_blocks) /* once, at the first block past the limit */
				diag_error(g->d, sec->name_loc, "more than %d blocks; a model and its imports define at most %d", MAX_BLOCKS, MAX_BLOCKS);
			g->too_many_blocks = true;
			return false;
		}
		s->blocks[s->nblocks++] = sec;
	} else {
		const struct ast_section **slot = strcmp(k, "data") == 0 ? &s->data : strcmp(k, "train") == 0 ? &s->train : &s->parallel;
		if (*slot && (*slot)->kind_loc.src == sec->kind_loc.src) {
			diag_error(g->d, sec->kind_loc, "a second '%s' section in this file", k);
			diag_note(g->d, (*slot)->kind_loc, "the first one is here; merge them");
			return false;
		}
		if (strcmp(k, "parallel") != 0 && sec->name) {
			diag_error(g->d, sec->name_loc, "a %s section has no name; write %s { ... }", k, k);
			return false;
		}
		if (strcmp(k, "parallel") != 0 && !sec->has_body) {
			diag_error(g->d, sec->kind_loc, "%s section has no body; write %s { key = value ... }", k, k);
			return false;
		}
		*slot = sec;
	}
	return true;
}

static bool gather_file(struct gather *g, const char *path, const struct loc *from);

/* dir/name without "." components ("./a.net" imported from "./b.net" is
 * "a.net", not "././a.net"); ".." stays, as a symbolic link may need it. */
static const char *join_path(struct arena *a, const char *dir, const char *name)
{
	const char *full = arena_printf(a, "%s/%s", dir, name);
	char *out = arena_alloc(a, strlen(full) + 2);
	size_t n = 0;
	const char *p = full;
	if (*p == '/')
		out[n++] = *p++;
	while (*p) {
		const char *end = strchr(p, '/');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > 0 && !(len == 1 && p[0] == '.')) {
			if (n > 0 && out[n - 1] != '/')
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p += len + (end ? 1 : 0);
	}
	out[n] = 0;
	return n ? out : ".";
}

/* A second section of the same kind (blocks: of the same name) in one
 * file is a mistake; across files it is the replacement rule. */
static bool first_in_file(struct gather *g, const struct ast_file *f, const struct ast_section *sec)
{
	for (const struct ast_section *o = f->sections; o && o != sec; o = o->next) {
		if (strcmp(o->kind, sec->kind) != 0 || strcmp(o->kind, "import") == 0)
			continue;
		if (strcmp(o->kind, "block") == 0 && (!o->name || !sec->name || strcmp(o->name, sec->name) != 0))
			continue;
		if (strcmp(o->kind, "block") == 0) {
			diag_error(g->d, sec->name_loc, "block %s is defined twice in this file", sec->name);
			diag_note(g->d, o->name_loc, "first defined here");
		} else if (strcmp(o->kind, "model") == 0 && o->name && sec->name) {
			diag_error(g->d, sec->name_loc, "a file holds one model, but this is a second one ('%s')", sec->name);
			diag_note(g->d, o->name_loc, "the first model, '%s', is here", o->name);
		} else {
			diag_error(g->d, sec->kind_loc, "a second '%s' section in this file", sec->kind);
			diag_note(g->d, o->kind_loc, "the first one is here; merge them");
		}
		return false;
	}
	return true;
}

/* A block parameter's name (`n` or `n=default`), or NULL for a mistake
 * reported when the block is used. */
static const char *param_name(const struct ast_arg *a, struct loc *at)
{
	if (a->key) {
		*at = a->key_loc;
		at->len = (int)strlen(a->key);
		return a->key;
	}
	*at = a->value->loc;
	return a->value->kind == AST_NAME ? a->value->u.s : NULL;
}

static bool check_block(struct gather *g, const struct ast_section *sec)
{
	static const char *const reserved[] = { "residual", "repeat", "input" };
	if (!sec->name)
		return true;
	bool bad = op_lookup(sec->name) >= 0;
	for (int i = 0; i < 3; i++)
		bad |= strcmp(sec->name, reserved[i]) == 0;
	if (bad) {
		diag_error(g->d, sec->name_loc, "'%s' is a built-in name; give the block another name", sec->name);
		return false;
	}
	bool keyed = false;
	for (const struct ast_arg *a = sec->params; a; a = a->next) {
		if (a->key)
			keyed = true;
		else if (keyed) {
			diag_error(g->d, a->value->loc, "a parameter without a default cannot follow one with a default");
			return false;
		}
		struct loc at;
		const char *name = param_name(a, &at);
		for (const struct ast_arg *b = sec->params; name && b != a; b = b->next) {
			struct loc first;
			const char *other = param_name(b, &first);
			if (other && strcmp(other, name) == 0) {
				diag_error(g->d, at, "duplicate parameter '%s' in block %s", name, sec->name);
				diag_note(g->d, first, "'%s' is first declared here", name);
				return false;
			}
		}
	}
	return true;
}

static bool take(struct gather *g, const struct ast_file *f)
{
	bool ok = true;
	for (const struct ast_section *sec = f->sections; sec; sec = sec->next) {
		const char *k = sec->kind;
		int known = 0;
		while (known < 6 && strcmp(kinds[known], k) != 0)
			known++;
		if (known == 6) {
			const char *near = diag_nearest(k, kinds, 6);
			if (near)
				diag_error(g->d, sec->kind_loc, "unknown section '%s'; did you mean '%s'?", k, near);
			else
				diag_error(g->d, sec->kind_loc, "unknown section '%s'; a file holds model, block, data, train, parallel and import sections", k);
			ok = false;
			continue;
		}
		if (strcmp(k, "import") == 0) {
			if (!sec->name || !sec->name_is_string || sec->has_body || sec->has_params) {
				diag_error(g->d, sec->kind_loc, "write an import as: import \"other.net\"");
				ok = false;
				continue;
			}
			char *dir = arena_strdup(g->a, f->src->path);
			const char *resolved = sec->name[0] == '/' ? sec->name : join_path(g->a, dirname(dir), sec->name);
			if (!gather_file(g, resolved, &sec->name_loc))
				ok = false;
			continue;
		}
		if (!first_in_file(g, f, sec)) {
			ok = false;
			continue;
		}
		if (sec->name_is_string && (strcmp(k, "data") == 0 || strcmp(k, "train") == 0)) {
			diag_error(g->d, sec->name_loc, "a %s section has no name; write %s { ... }", k, k);
			ok = false;
			continue;
		}
		if (sec->name_is_string) {
			diag_error(g->d, sec->name_loc, "a %s's name is written without quotes", k);
			ok = false;
			continue;
		}
		if (strcmp(k, "block") == 0 && !check_block(g, sec)) {
			ok = false;
			continue;
		}
		if (sec->has_params && strcmp(k, "block") != 0) {
			diag_error(g->d, sec->kind_loc, "only blocks take parameters");
			ok = false;
			continue;
		}
		if (!add(g, sec))
			ok = false;
	}
	return ok;
}

static bool gather_file(struct gather *g, const char *path, const struct loc *from)
{
	char real[PATH_MAX];
	const char *key = realpath(path, real) ? real : path;
	for (int i = 0; i < g->depth; i++) {
		if (strcmp(g->stack[i], key) == 0) {
			diag_error(g->d, *from, "import cycle: '%s' imports itself through this chain", path);
			return false;
		}
	}
	/* depth counts the files open around this one, the first not imported */
	if (g->depth == MAX_IMPORT_DEPTH + 1) {
		diag_error(g->d, *from, "imports nested more than %d deep", MAX_IMPORT_DEPTH);
		return false;
	}
	struct source *src = source_load(g->a, g->d, path, from);
	if (!src)
		return false;
	if (from)
		src->imported_at = *from;
	src->next = g->s->sources;
	g->s->sources = src;
	int before = g->d->errors;
	struct ast_file *f = ast_parse(g->a, g->d, src);
	if (g->d->errors > before)
		return false;
	g->stack[g->depth++] = arena_strdup(g->a, key);
	bool ok = take(g, f);
	g->depth--;
	return ok;
}

/* "train.epochs=1" → a parsed `train { epochs = 1 }` whose one statement
 * replaces or joins the section's own. */
static bool apply_set(struct gather *g, const char *set)
{
	const char *dot = strchr(set, '.'), *eq = strchr(set, '=');
	struct loc nowhere = { 0 };
	if (!dot || !eq || dot > eq || dot == set || eq == dot + 1) {
		diag_error(g->d, nowhere, "--set takes section.key=value, e.g. --set train.epochs=1; got '%s'", set);
		return false;
	}
	char *sec_name = arena_strndup(g->a, set, (size_t)(dot - set));
	char *key = arena_strndup(g->a, dot + 1, (size_t)(eq - dot - 1));
	const struct ast_section **slot = strcmp(sec_name, "data") == 0 ? &g->s->data : strcmp(sec_name, "train") == 0 ? &g->s->train
		: strcmp(sec_name, "parallel") == 0 ? &g->s->parallel : NULL;
	if (!slot) {
		static const char *const overridable[] = { "data", "train", "parallel" };
		const char *near = diag_nearest(sec_name, overridable, 3);
		if (near)
			diag_error(g->d, nowhere, "--set %s: no section '%s'; did you mean '%s'?", set, sec_name, near);
		else
			diag_error(g->d, nowhere, "--set %s: only data, train and parallel settings can be overridden", set);
		return false;
	}
	const char *sub = strchr(key, '.');
	if (sub) {
		/* train.optimizer.lr=0.1: the optimizer is one value, given whole */
		char *setting = arena_strndup(g->a, key, (size_t)(sub - key));
		const char *callee = "NAME", *others = "";
		for (const struct ast_stmt *st = *slot ? (*slot)->body : NULL; st; st = st->next) {
			if (!st->name || strcmp(st->name, setting) != 0)
				continue;
			if (st->value->kind == AST_NAME)
				callee = st->value->u.s;
			if (st->value->kind == AST_CALL) {
				callee = st->value->u.call.name;
				others = unparse_args(g->a, st->value->u.call.args, sub + 1);
			}
		}
		diag_error(g->d, nowhere, "--set %s: a setting is replaced whole, with all its arguments: --set '%s.%s=%s(%s%s%s=%s)'", set,
			   sec_name, setting, callee, others, *others ? ", " : "", sub + 1, eq + 1);
		return false;
	}
	if (strcmp(sec_name, "parallel") == 0 && strcmp(key, "mode") == 0) {
		diag_error(g->d, nowhere, "--set %s: the parallel mode is the section's name (parallel fsdp { ... }) and --set cannot change it; "
			   "edit the file", set);
		return false;
	}
	const char *text = arena_printf(g->a, "%s { %s = %s\n}\n", sec_name, key, eq + 1); /* a comment ends at the line */
	struct source *src = source_from_string(g->a, "--set", text);
	int before = g->d->errors;
	struct ast_file *f = ast_parse(g->a, g->d, src);
	if (g->d->errors > before || !f->sections || !f->sections->body || f->sections->body->next) {
		if (g->d->errors == before)
			diag_error(g->d, nowhere, "--set %s: the value is not a single expression", set);
		return false;
	}
	const struct ast_stmt *repl = f->sections->body;
	struct ast_section *sec = arena_alloc(g->a, sizeof *sec);
	if (*slot) {
		*sec = **slot;
	} else {
		*sec = *f->sections;
		sec->body = NULL;
		if (strcmp(sec_name, "parallel") == 0) {
			sec->name = "ddp";
		}
	}
	/* copy the statement list, replacing the one with this key */
	struct ast_stmt *head = NULL, *tail = NULL;
	bool replaced = false;
	for (const struct ast_stmt *st = sec->body; st; st = st->next) {
		struct ast_stmt *c = arena_alloc(g->a, sizeof *c);
		*c = (st->name && strcmp(st->name, key) == 0) ? *repl : *st;
		replaced |= st->name && strcmp(st->name, key) == 0;
		c->next = NULL;
		if (tail)
			tail->next = c;
		else
			head = c;
		tail = c;
	}
	if (!replaced) {
		struct ast_stmt *c = arena_alloc(g->a, sizeof *c);
		*c = *repl;
		c->next = NULL;
		if (tail)
			tail->next = c;
		else
			head = c;
	}
	sec->body = head;
	sec->has_body = true;
	*slot = sec;
	return true;
}

bool sections_gather(struct arena *a, struct diag *d, const char *path, const char *const *sets, int nsets, struct sections *out)
{
	struct gather g = { .a = a, .d = d, .s = out };
	memset(out, 0, sizeof *out);
	if (!gather_file(&g, path, NULL))
		return false;
	if (!out->model) {
		struct loc at = { out->sources, 1, 1, 1 };
		diag_error(d, at, "no model section; a .net file needs model NAME { ... }");
		return false;
	}
	bool ok = true;
	for (int i = 0; i < nsets; i++)
		ok &= apply_set(&g, sets[i]);
	return ok;
}
