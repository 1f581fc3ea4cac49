/* unparse.c: the canonical text of a compilation: the sections in force
 * after imports, replacement and --set, written back as .net source in a
 * fixed layout (comments dropped).  The plan hash and a checkpoint's
 * model hash cover it with every float in 17 digits (the form they have
 * always covered, so hashes stay stable); a run directory records it with
 * each float in its fewest exact digits (lr = 0.01), which reads back as
 * the same doubles.  Two files that mean the same thing hash the same and
 * either text reruns exactly what ran.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "compiler/compile_impl.h"
#include "compiler/value.h"
#include "grammar/arena.h"

struct out {
	struct arena *a;
	bool shortest; /* floats in their fewest exact digits, else always 17 */
	char *buf;
	size_t len, cap;
};

static void put(struct out *o, const char *s)
{
	size_t n = strlen(s);
	if (o->len + n + 1 > o->cap) {
		size_t cap = (o->cap + n + 1) * 2;
		o->buf = arena_realloc(o->a, o->buf, o->len, cap);
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n + 1);
	o->len += n;
}

static void expr(struct out *o, const struct ast *e);

static void args(struct out *o, const struct ast_arg *g)
{
	for (; g; g = g->next) {
		if (g->key) {
			put(o, g->key);
			put(o, "=");
		}
		expr(o, g->value);
		if (g->next)
			put(o, ", ");
	}
}

static void expr(struct out *o, const struct ast *e)
{
	char b[64];
	switch (e->kind) {
	case AST_INT: snprintf(b, sizeof b, "%" PRId64, e->u.i); put(o, b); return;
	case AST_FLOAT:
		if (o->shortest) {
			val_float_repr(e->u.f, b, sizeof b); /* reads back as the same double */
		} else {
			snprintf(b, sizeof b, "%.17g", e->u.f);
			if (!strpbrk(b, ".en"))
				strcat(b, ".0");
		}
		put(o, b);
		return;
	case AST_STRING:
		put(o, "\"");
		for (const char *s = e->u.s; *s; s++) {
			char c[3] = { *s, 0, 0 };
			if (*s == '"' || *s == '\\') { c[0] = '\\'; c[1] = *s; }
			else if (*s == '\n') { c[0] = '\\'; c[1] = 'n'; }
			else if (*s == '\t') { c[0] = '\\'; c[1] = 't'; }
			put(o, c);
		}
		put(o, "\"");
		return;
	case AST_BOOL: put(o, e->u.b ? "true" : "false"); return;
	case AST_NAME: put(o, e->u.s); return;
	case AST_CALL: put(o, e->u.call.name); put(o, "("); args(o, e->u.call.args); put(o, ")"); return;
	case AST_TUPLE: put(o, "("); args(o, e->u.seq.items); put(o, e->u.seq.n == 1 ? ",)" : ")"); return;
	case AST_LIST: put(o, "["); args(o, e->u.seq.items); put(o, "]"); return;
	case AST_BINOP: {
		/* ((a + b) + c): a flat chain in a loop, as value.c evaluates it */
		int n = 0;
		const struct ast *x = e;
		for (; x->kind == AST_BINOP; x = x->u.bin.l, n++)
			put(o, "(");
		const struct ast **ops = arena_array(o->a, (size_t)n, sizeof *ops);
		for (int k = n; k > 0; e = e->u.bin.l)
			ops[--k] = e;
		expr(o, x);
		for (int k = 0; k < n; k++) {
			snprintf(b, sizeof b, " %c ", ops[k]->u.bin.op);
			put(o, b);
			expr(o, ops[k]->u.bin.r);
			put(o, ")");
		}
		return;
	}
	case AST_NEG: put(o, "-"); expr(o, e->u.neg); return;
	}
}

static void indent(struct out *o, int depth)
{
	for (int i = 0; i < depth; i++)
		put(o, "    ");
}

static void stmts(struct out *o, const struct ast_stmt *s, int depth)
{
	for (; s; s = s->next) {
		if (!s->value)
			continue;
		indent(o, depth);
		if (s->name) {
			put(o, s->name);
			put(o, " = ");
		}
		expr(o, s->value);
		for (const struct ast_annot *an = s->annots; an; an = an->next) {
			put(o, " @");
			put(o, an->name);
			if (an->args) {
				put(o, "(");
				args(o, an->args);
				put(o, ")");
			}
		}
		if (s->has_body) {
			put(o, " {\n");
			stmts(o, s->body, depth + 1);
			indent(o, depth);
			put(o, "}");
		}
		put(o, "\n");
	}
}

static void section(struct out *o, const struct ast_section *sec)
{
	if (!sec)
		return;
	put(o, sec->kind);
	if (sec->name) {
		put(o, " ");
		put(o, sec->name);
	}
	if (sec->has_params) {
		put(o, "(");
		args(o, sec->params);
		put(o, ")");
	}
	if (sec->has_body) {
		put(o, " {\n");
		stmts(o, sec->body, 1);
		put(o, "}");
	}
	put(o, "\n");
}

const char *unparse_sections(struct arena *a, const struct sections *s, bool shortest)
{
	struct out o = { a, shortest, NULL, 0, 0 };
	put(&o, "");
	for (int i = 0; i < s->nblocks; i++) {
		section(&o, s->blocks[i]);
		put(&o, "\n");
	}
	section(&o, s->model);
	if (s->data) { put(&o, "\n"); section(&o, s->data); }
	if (s->train) { put(&o, "\n"); section(&o, s->train); }
	if (s->parallel) { put(&o, "\n"); section(&o, s->parallel); }
	return o.buf;
}

const char *unparse_args(struct arena *a, const struct ast_arg *g, const char *skip)
{
	struct out o = { a, true, NULL, 0, 0 };
	put(&o, "");
	for (; g; g = g->next) {
		if (g->key && strcmp(g->key, skip) == 0)
			continue;
		if (o.len)
			put(&o, ", ");
		if (g->key) {
			put(&o, g->key);
			put(&o, "=");
		}
		expr(&o, g->value);
	}
	return o.buf;
}
