/* value.c: evaluation of expressions and binding of arguments.
 * Integer arithmetic is exact or an error: overflow, division by zero and
 * negative modulus are reported where they happen.  Division of integers
 * floors, as Python's // does, since block parameters come from Python
 * habits ("c // 2").  Expressions deeper than AST_MAX_DEPTH are refused
 * before any recursion, so hostile input cannot exhaust the stack; a flat
 * chain a + b + ... + z is walked in a loop, not by recursion.
 */
#include "compiler/value.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/ops.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

static struct val *mk(struct evalctx *c, enum val_kind k, struct loc at)
{
	struct val *v = arena_alloc(c->a, sizeof *v);
	v->kind = k;
	v->loc = at;
	return v;
}

static const char *kind_name(enum val_kind k)
{
	switch (k) {
	case V_INT: return "an integer";
	case V_FLOAT: return "a decimal number";
	case V_STRING: return "a string";
	case V_BOOL: return "a boolean";
	case V_NAME: return "a name";
	case V_CALL: return "a call";
	case V_TUPLE: return "a tuple";
	case V_LIST: return "a list";
	}
	return "a value";
}

void val_note_origin(struct diag *d, const struct val *v)
{
	for (int k = 0; v && v->from && k < 64; v = v->from, k++) {
		char text[64];
		val_print(v->from, text, sizeof text);
		if (strlen(text) == sizeof text - 1)
			strcpy(text + sizeof text - 4, "...");
		diag_note(d, v->from->loc, "block %s's parameter '%s' gets %s here", v->param_block, v->param, text);
	}
}

/* The parameters of the block a name was written in. */
static int scope_params(const struct val *v, const char **names, struct loc *locs, int max)
{
	int n = 0;
	for (const struct ast_arg *g = v->scope ? v->scope->params : NULL; g && n < max; g = g->next) {
		if (g->key) {
			names[n] = g->key;
			locs[n] = g->key_loc;
			locs[n].len = (int)strlen(g->key);
		} else if (g->value->kind == AST_NAME) {
			names[n] = g->value->u.s;
			locs[n] = g->value->loc;
		} else {
			continue;
		}
		n++;
	}
	return n;
}

/* A name written where a value is expected, close to a parameter of its
 * block: most likely that parameter misspelt.  Reports it and returns true. */
static bool suggest_param(struct diag *d, const struct val *v)
{
	const char *names[32] = { 0 };
	struct loc locs[32];
	if (v->kind != V_NAME || v->from)
		return false;
	int n = scope_params(v, names, locs, 32);
	const char *near = diag_nearest(v->s, names, n);
	if (!near)
		return false;
	diag_error(d, v->loc, "name '%s' is not defined; did you mean '%s'?", v->s, near);
	for (int k = 0; k < n; k++)
		if (names[k] == near)
			diag_note(d, locs[k], "'%s' is a parameter of block %s", near, v->scope->name);
	return true;
}

static struct val *arith(struct evalctx *c, const struct ast *e, struct val *l, struct val *r)
{
	char op = e->u.bin.op;
	bool lnum = l->kind == V_INT || l->kind == V_FLOAT, rnum = r->kind == V_INT || r->kind == V_FLOAT;
	if (!lnum || !rnum) {
		struct val *bad = lnum ? r : l;
		if (bad == l && l->kind == V_NAME && op == '-' && rnum &&
		    (op_lookup(l->s) >= 0 || !strcmp(l->s, "repeat") || !strcmp(l->s, "residual"))) {
			/* `linear -5`, `repeat -1 { }`: a negative argument without parentheses */
			char num[32];
			if (r->kind == V_INT)
				snprintf(num, sizeof num, "%lld", (long long)r->i);
			else
				val_float_repr(r->f, num, sizeof num);
			diag_error(c->d, bad->loc, "'%s -%s' reads as a subtraction; a negative argument goes in parentheses: %s(-%s)", l->s,
				   num, l->s, num);
		} else if (!suggest_param(c->d, bad)) {
			diag_error(c->d, bad->loc, "arithmetic needs numbers, but this is %s", kind_name(bad->kind));
			val_note_origin(c->d, bad);
		}
		return NULL;
	}
	if (l->kind == V_INT && r->kind == V_INT) {
		int64_t a = l->i, b = r->i, out = 0;
		bool ovf = false;
		switch (op) {
		case '+': ovf = __builtin_add_overflow(a, b, &out); break;
		case '-': ovf = __builtin_sub_overflow(a, b, &out); break;
		case '*': ovf = __builtin_mul_overflow(a, b, &out); break;
		case '/': case '%':
			if (b == 0) {
				diag_error(c->d, r->loc, "division by zero");
				return NULL;
			}
			if (a == INT64_MIN && b == -1) { ovf = true; break; }
			out = op == '/' ? a / b : a % b;
			if (op == '/' && (a % b != 0) && ((a < 0) != (b < 0)))
				out--;
			if (op == '%' && out != 0 && ((out < 0) != (b < 0)))
				out += b;
			break;
		}
		if (ovf) {
			diag_error(c->d, e->loc, "integer overflow in %" PRId64 " %c %" PRId64, a, op, b);
			return NULL;
		}
		struct val *v = mk(c, V_INT, loc_span(l->loc, r->loc));
		v->i = out;
		return v;
	}
	double a = l->kind == V_INT ? (double)l->i : l->f, b = r->kind == V_INT ? (double)r->i : r->f, out;
	switch (op) {
	case '+': out = a + b; break;
	case '-': out = a - b; break;
	case '*': out = a * b; break;
	case '/':
		if (b == 0) {
			diag_error(c->d, r->loc, "division by zero");
			return NULL;
		}
		out = a / b;
		break;
	default:
		if (b == 0) {
			diag_error(c->d, r->loc, "division by zero");
			return NULL;
		}
		out = fmod(a, b);
		if (out != 0 && ((out < 0) != (b < 0)))
			out += b; /* the sign of the divisor, as for integers */
		break;
	}
	if (!isfinite(out)) {
		diag_error(c->d, e->loc, "result is not a finite number");
		return NULL;
	}
	struct val *v = mk(c, V_FLOAT, loc_span(l->loc, r->loc));
	v->f = out;
	return v;
}

static struct val *eval(struct evalctx *c, const struct ast *e, const struct env *env);
static struct val *chain(struct evalctx *c, const struct ast *e, const struct env *env);

static bool eval_args(struct evalctx *c, const struct ast_arg *args, const struct env *env, struct varg **out, int *n)
{
	int cnt = ast_args_count(args);
	struct varg *items = arena_array(c->a, (size_t)(cnt ? cnt : 1), sizeof *items);
	bool ok = true;
	int k = 0;
	for (const struct ast_arg *g = args; g; g = g->next, k++) {
		items[k].key = g->key;
		items[k].key_loc = g->key_loc;
		items[k].v = eval(c, g->value, env);
		if (!items[k].v)
			ok = false;
	}
	*out = items;
	*n = cnt;
	return ok;
}

static struct val *eval(struct evalctx *c, const struct ast *e, const struct env *env)
{
	struct val *v, *l;
	switch (e->kind) {
	case AST_INT: v = mk(c, V_INT, e->loc); v->i = e->u.i; return v;
	case AST_FLOAT: v = mk(c, V_FLOAT, e->loc); v->f = e->u.f; return v;
	case AST_STRING: v = mk(c, V_STRING, e->loc); v->s = e->u.s; return v;
	case AST_BOOL: v = mk(c, V_BOOL, e->loc); v->b = e->u.b; return v;
	case AST_NAME:
		for (int k = 0; env && k < env->n; k++) {
			if (strcmp(env->names[k], e->u.s) == 0) {
				v = arena_alloc(c->a, sizeof *v);
				*v = *env->vals[k];
				v->loc = e->loc;
				v->from = env->vals[k];
				v->param = env->names[k];
				v->param_block = env->block->name;
				return v;
			}
		}
		v = mk(c, V_NAME, e->loc);
		v->s = e->u.s;
		v->name_loc = e->loc;
		v->scope = env ? env->block : NULL;
		return v;
	case AST_CALL:
		v = mk(c, V_CALL, e->loc);
		v->s = e->u.call.name;
		v->name_loc = e->u.call.name_loc;
		if (!eval_args(c, e->u.call.args, env, &v->items, &v->n))
			return NULL;
		return v;
	case AST_TUPLE: case AST_LIST:
		v = mk(c, e->kind == AST_TUPLE ? V_TUPLE : V_LIST, e->loc);
		if (!eval_args(c, e->u.seq.items, env, &v->items, &v->n))
			return NULL;
		return v;
	case AST_NEG:
		l = eval(c, e->u.neg, env);
		if (!l)
			return NULL;
		if (l->kind == V_INT && l->i != INT64_MIN) { v = mk(c, V_INT, e->loc); v->i = -l->i; return v; }
		if (l->kind == V_FLOAT) { v = mk(c, V_FLOAT, e->loc); v->f = -l->f; return v; }
		diag_error(c->d, l->loc, "cannot negate %s", kind_name(l->kind));
		return NULL;
	case AST_BINOP:
		return chain(c, e, env);
	}
	return NULL;
}

/* a + b + ... + z: the operators down the left operands, folded from the
 * innermost out, each right operand evaluated even after an error so that
 * every mistake in the chain is reported. */
static struct val *chain(struct evalctx *c, const struct ast *e, const struct env *env)
{
	const struct ast *few[16], **ops = few;
	int n = 0;
	for (const struct ast *x = e; x->kind == AST_BINOP; x = x->u.bin.l)
		n++;
	if (n > 16)
		ops = arena_array(c->a, (size_t)n, sizeof *ops);
	int k = n;
	const struct ast *x = e;
	for (; x->kind == AST_BINOP; x = x->u.bin.l)
		ops[--k] = x;
	struct val *acc = eval(c, x, env);
	for (k = 0; k < n; k++) {
		struct val *r = eval(c, ops[k]->u.bin.r, env);
		acc = acc && r ? arith(c, ops[k], acc, r) : NULL;
	}
	return acc;
}

static bool too_deep(struct evalctx *c, const struct ast *e)
{
	if (e->depth <= AST_MAX_DEPTH)
		return false;
	diag_error(c->d, e->loc, "expression nested more than %d deep", AST_MAX_DEPTH);
	return true;
}

struct val *val_eval(struct evalctx *c, const struct ast *e, const struct env *env)
{
	return too_deep(c, e) ? NULL : eval(c, e, env);
}

bool val_eval_args(struct evalctx *c, const struct ast_arg *args, const struct env *env, struct varg **out, int *n)
{
	for (const struct ast_arg *g = args; g; g = g->next)
		if (too_deep(c, g->value))
			return false;
	return eval_args(c, args, env, out, n);
}

/* The text of v as written, where it lies on one line of its file. */
static bool source_text(const struct val *v, char *buf, size_t n)
{
	const char *line;
	size_t len;
	if (!v->loc.src || !source_line(v->loc.src, v->loc.line, &line, &len))
		return false;
	size_t at = 0;
	for (int col = 1; at < len && col < v->loc.col; col++) /* columns count characters */
		for (at++; at < len && ((unsigned char)line[at] & 0xC0) == 0x80; at++)
			;
	size_t end = at;
	for (int k = 0; end < len && k < v->loc.len; k++)
		for (end++; end < len && ((unsigned char)line[end] & 0xC0) == 0x80; end++)
			;
	if (end == at || end - at >= n)
		return false;
	memcpy(buf, line + at, end - at);
	buf[end - at] = 0;
	return true;
}

/* names[0..n) into buf, separated by ", " */
static const char *joined(char *buf, size_t len, const char *const *names, int n)
{
	buf[0] = 0;
	for (size_t i = 0, at = 0; (int)i < n && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", names[i]);
		at += w > 0 ? (size_t)w : len;
	}
	return buf;
}

/* Positional arguments past the npos a callee takes, args[0..n) from the
 * first of them: said once, under all of them, with the keyword of the
 * first.  PyTorch's own calls give more by position (Conv2d(3, 8, 3,
 * 1, 1), SGD(params, 0.1, 0.9)); the name after the positional ones is
 * PyTorch's next positional parameter for every layer and optimizer, so
 * the first surplus value is shown under that keyword. */
static void surplus(struct diag *d, const char *callee, const struct varg *args, int n, const char *const *names, int npos,
		    int nnames)
{
	struct loc at = args[0].v->loc;
	for (int i = 1; i < n && !args[i].key; i++)
		at = loc_span(at, args[i].v->loc);
	char taken[160], text[48], hint[96] = "";
	joined(taken, sizeof taken, names, npos);
	const struct val *v = args[0].v;
	bool pybool = v->kind == V_NAME && (!strcmp(v->s, "True") || !strcmp(v->s, "False"));
	if (npos < nnames && (pybool || source_text(v, text, sizeof text)))
		snprintf(hint, sizeof hint, "; give %s by keyword, as %s=%s", npos ? "the others" : "them", names[npos],
			 pybool ? (v->s[0] == 'T' ? "true" : "false") : text);
	if (npos == 0)
		diag_error(d, at, "%s takes no positional arguments%s", callee, hint);
	else
		diag_error(d, at, "%s takes at most %d positional argument%s (%s)%s", callee, npos, npos == 1 ? "" : "s", taken, hint);
}

bool val_bind(struct diag *d, const char *callee, struct loc at, const struct varg *args, int nargs,
	      const char *const *names, int npos, int nnames, struct val **slot)
{
	bool ok = true;
	for (int k = 0; k < nnames; k++)
		slot[k] = NULL;
	int pos = 0;
	const struct varg *keyword = NULL;
	for (int i = 0; i < nargs; i++) {
		const struct varg *g = &args[i];
		if (!g->key && keyword) {
			diag_error(d, g->v->loc, "positional argument follows keyword argument '%s='; positional arguments come first",
				   keyword->key);
			ok = false;
			continue;
		}
		if (!g->key) {
			if (pos >= npos) {
				if (pos == npos)
					surplus(d, callee, args + i, nargs - i, names, npos, nnames);
				pos++;
				ok = false;
				continue;
			}
			slot[pos++] = g->v;
			continue;
		}
		keyword = g;
		int k = 0;
		while (k < nnames && strcmp(names[k], g->key) != 0)
			k++;
		if (k == nnames) {
			const char *near = diag_nearest(g->key, names, nnames);
			struct loc kl = g->key_loc;
			kl.len = (int)strlen(g->key);
			char known[160];
			joined(known, sizeof known, names, nnames);
			if (near)
				diag_error(d, kl, "%s has no argument '%s'; did you mean '%s'?", callee, g->key, near);
			else if (!strcmp(g->key, "inplace"))
				diag_error(d, kl, "%s has no argument 'inplace': trainc plans where every result is stored; leave it out", callee);
			else if (nnames == 0)
				diag_error(d, kl, "%s takes no arguments", callee);
			else
				diag_error(d, kl, "%s has no argument '%s'; it takes %s", callee, g->key, known);
			ok = false;
			continue;
		}
		if (slot[k]) {
			struct loc kl = g->key_loc;
			kl.len = (int)strlen(g->key);
			if (k < pos) {
				diag_error(d, kl, "argument '%s' of %s given twice, by position and by keyword", g->key, callee);
				diag_note(d, slot[k]->loc, "'%s' is given by position here", g->key);
			} else {
				diag_error(d, kl, "argument '%s' of %s given twice", g->key, callee);
			}
			ok = false;
			continue;
		}
		slot[k] = g->v;
	}
	(void)at;
	return ok;
}

static bool mismatch(struct diag *d, const struct val *v, const char *what, const char *want)
{
	if (suggest_param(d, v))
		return false;
	bool pybool = v->kind == V_NAME && (!strcmp(v->s, "True") || !strcmp(v->s, "False"));
	if (pybool && !strcmp(want, "true or false"))
		diag_error(d, v->loc, "%s must be true or false: write %s, not %s", what, v->s[0] == 'T' ? "true" : "false", v->s);
	else if (pybool)
		diag_error(d, v->loc, "%s must be %s, not %s (booleans are written true and false)", what, want, v->s);
	else if (v->kind == V_NAME && !strcmp(v->s, "None") && !strcmp(what, "bias"))
		diag_error(d, v->loc, "there is no None; for a layer without a bias write bias=false");
	else if (v->kind == V_NAME && !strcmp(v->s, "None"))
		diag_error(d, v->loc, "there is no None; leave %s out to get its default", what);
	else if (v->kind == V_NAME && !v->from && op_lookup(v->s) >= 0) /* a layer where a value goes */
		diag_error(d, v->loc, "%s must be %s, not the layer '%s'", what, want, v->s);
	else if (v->kind == V_NAME && !v->from)
		diag_error(d, v->loc, "name '%s' is not defined; %s must be %s", v->s, what, want);
	else if ((v->kind == V_TUPLE || v->kind == V_LIST) && v->n > 0) {
		/* what the items are: ("same", 1) is a tuple, but of the wrong things */
		char items[192];
		size_t k = 0;
		for (int i = 0; i < v->n && k < sizeof items; i++) {
			int w = i < 6 ? snprintf(items + k, sizeof items - k, "%s%s", i ? ", " : "", kind_name(v->items[i].v->kind))
				      : snprintf(items + k, sizeof items - k, ", ...");
			k += w > 0 ? (size_t)w : 0;
			if (i >= 6)
				break;
		}
		diag_error(d, v->loc, "%s must be %s, not %s of %d (%s)", what, want, kind_name(v->kind), v->n, items);
	} else
		diag_error(d, v->loc, "%s must be %s, not %s", what, want, kind_name(v->kind));
	val_note_origin(d, v);
	return false;
}

bool val_int(struct diag *d, const struct val *v, const char *what, int64_t *out)
{
	if (v->kind != V_INT)
		return mismatch(d, v, what, "an integer");
	*out = v->i;
	return true;
}

bool val_num(struct diag *d, const struct val *v, const char *what, double *out)
{
	if (v->kind == V_INT)
		*out = (double)v->i;
	else if (v->kind == V_FLOAT)
		*out = v->f;
	else
		return mismatch(d, v, what, "a number");
	return true;
}

bool val_bool(struct diag *d, const struct val *v, const char *what, bool *out)
{
	if (v->kind != V_BOOL)
		return mismatch(d, v, what, "true or false");
	*out = v->b;
	return true;
}

bool val_str(struct diag *d, const struct val *v, const char *what, const char **out)
{
	if (v->kind != V_STRING)
		return mismatch(d, v, what, "a string");
	*out = v->s;
	return true;
}

bool val_pair(struct diag *d, const struct val *v, const char *what, int64_t out[2])
{
	if (v->kind == V_INT) {
		out[0] = out[1] = v->i;
		return true;
	}
	if ((v->kind == V_TUPLE || v->kind == V_LIST) && v->n == 2 && v->items[0].v->kind == V_INT && v->items[1].v->kind == V_INT) {
		out[0] = v->items[0].v->i;
		out[1] = v->items[1].v->i;
		return true;
	}
	return mismatch(d, v, what, "an integer or a pair of integers");
}

bool val_quad(struct diag *d, const struct val *v, const char *what, int64_t out[4])
{
	if (v->kind == V_INT) {
		out[0] = out[1] = out[2] = out[3] = v->i;
		return true;
	}
	if (v->kind != V_TUPLE && v->kind != V_LIST)
		return mismatch(d, v, what, "an integer or 4 integers (left, right, top, bottom)");
	if (v->n != 4) {
		diag_error(d, v->loc, "%s must be an integer or 4 integers (left, right, top, bottom), not %s of %d", what,
			   kind_name(v->kind), v->n);
		val_note_origin(d, v);
		return false;
	}
	for (int k = 0; k < 4; k++)
		if (!val_int(d, v->items[k].v, what, &out[k]))
			return false;
	return true;
}

const char *val_callee(const struct val *v)
{
	return v && (v->kind == V_NAME || v->kind == V_CALL) ? v->s : NULL;
}

static int put(char *buf, int n, int at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int put(char *buf, int n, int at, const char *fmt, ...)
{
	if (at >= n)
		return at;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf + at, (size_t)(n - at), fmt, ap);
	va_end(ap);
	return k < 0 ? at : at + k;
}

/* The fewest significant digits that read back as a (finite, >= 0), as
 * Python's repr finds them: a = d.ddd * 10^x; returns how many. */
static int shortest_digits(double a, char dig[24], int *x)
{
	char e[40], up[40];
	for (int p = 0;; p++) {
		snprintf(e, sizeof e, "%.*e", p, a);
		int nd = 0;
		for (const char *c = e; *c != 'e'; c++)
			if (*c != '.')
				dig[nd++] = *c;
		dig[nd] = 0;
		*x = atoi(strchr(e, 'e') + 1);
		if (p == 16 || strtod(e, NULL) == a)
			return nd; /* 17 digits always read back */
		/* at a power of two the doubles below a lie half as far apart as
		 * those above, so the p + 1 digits just above a may read back
		 * where the nearest ones, below it, do not */
		snprintf(up, sizeof up, "%llde%d", atoll(dig) + 1, *x - p);
		if (strtod(up, NULL) == a) {
			nd = snprintf(dig, 24, "%lld", atoll(dig) + 1);
			if (nd > p + 1)
				(*x)++;
			while (nd > 1 && dig[nd - 1] == '0')
				dig[--nd] = 0;
			return nd;
		}
	}
}

void val_float_repr(double f, char *buf, size_t n)
{
	static const char zeros[] = "0000000000000000";
	if (!isfinite(f)) {
		snprintf(buf, n, "%s", isnan(f) ? "nan" : f > 0 ? "inf" : "-inf");
		return;
	}
	char dig[24];
	int x, nd = shortest_digits(fabs(f), dig, &x);
	int at = snprintf(buf, n, "%s", signbit(f) ? "-" : "");
	size_t left = n > (size_t)at ? n - (size_t)at : 0;
	if (x < -4 || x >= 16)
		snprintf(buf + at, left, "%c%s%se%c%02d", dig[0], nd > 1 ? "." : "", dig + 1, x < 0 ? '-' : '+', abs(x));
	else if (x < 0)
		snprintf(buf + at, left, "0.%.*s%s", -x - 1, zeros, dig);
	else if (x + 1 >= nd)
		snprintf(buf + at, left, "%s%.*s.0", dig, x + 1 - nd, zeros);
	else
		snprintf(buf + at, left, "%.*s.%s", x + 1, dig, dig + x + 1);
}

const char *val_number_text(double f, char *buf, size_t n)
{
	if (f == floor(f) && fabs(f) < 0x1p53)
		snprintf(buf, n, "%.0f", f);
	else
		val_float_repr(f, buf, n);
	return buf;
}

static int print(const struct val *v, char *buf, int n, int at)
{
	switch (v->kind) {
	case V_INT: return put(buf, n, at, "%" PRId64, v->i);
	case V_FLOAT: {
		char tmp[40];
		val_float_repr(v->f, tmp, sizeof tmp);
		return put(buf, n, at, "%s", tmp);
	}
	case V_STRING: return put(buf, n, at, "\"%s\"", v->s);
	case V_BOOL: return put(buf, n, at, "%s", v->b ? "true" : "false");
	case V_NAME: return put(buf, n, at, "%s", v->s);
	case V_CALL: case V_TUPLE: case V_LIST:
		if (v->kind == V_CALL)
			at = put(buf, n, at, "%s", v->s);
		at = put(buf, n, at, "%c", v->kind == V_LIST ? '[' : '(');
		for (int k = 0; k < v->n; k++) {
			if (k)
				at = put(buf, n, at, ", ");
			if (v->items[k].key)
				at = put(buf, n, at, "%s=", v->items[k].key);
			at = print(v->items[k].v, buf, n, at);
		}
		if (v->kind == V_TUPLE && v->n == 1)
			at = put(buf, n, at, ",");
		return put(buf, n, at, "%c", v->kind == V_LIST ? ']' : ')');
	}
	return at;
}

void val_print(const struct val *v, char *buf, int n)
{
	if (n > 0)
		buf[0] = 0;
	print(v, buf, n, 0);
}
