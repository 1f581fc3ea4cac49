/* ast.c: constructors for the syntax tree, and the parse driver.
 * Constructors only allocate and link; list appends walk to the tail, which
 * is fine for the few hundred statements a model file holds.
 */
#include "grammar/ast.h"

#include <stdio.h>
#include <stdlib.h>

#include "grammar/arena.h"
#include "grammar/diag.h"
#include "grammar/lex_state.h"
#include "grammar/parser.h"

int net_raw_lex_init_extra(struct lex_state *extra, yyscan_t *scanner);
int net_raw_lex_destroy(yyscan_t scanner);
void *net_raw__scan_bytes(const char *bytes, int len, yyscan_t scanner);
int net_raw_lex(NET_STYPE *lval, NET_LTYPE *lloc, yyscan_t scanner);
struct lex_state *net_raw_get_extra(yyscan_t scanner);

struct lex_hold {
	bool held;
	int tok;
	NET_STYPE val;
	NET_LTYPE loc;
};

/* The parser's scanner: the raw one, with the newlines before a '{'
 * dropped, so `model Net` and `{` may sit on separate lines.  One token of
 * lookahead is held back; nothing is scanned twice. */
int net_lex(NET_STYPE *lval, NET_LTYPE *lloc, yyscan_t scanner)
{
	struct lex_hold *h = net_raw_get_extra(scanner)->hold;
	if (h->held) {
		h->held = false;
		*lval = h->val;
		*lloc = h->loc;
		return h->tok;
	}
	int t = net_raw_lex(lval, lloc, scanner);
	if (t != NL)
		return t;
	NET_STYPE nl_val = *lval;
	NET_LTYPE nl_loc = *lloc;
	do
		t = net_raw_lex(&h->val, &h->loc, scanner);
	while (t == NL);
	if (t == '{') {
		*lval = h->val;
		*lloc = h->loc;
		return t;
	}
	h->held = true;
	h->tok = t;
	*lval = nl_val;
	*lloc = nl_loc;
	return NL;
}

static struct ast *node(struct arena *a, enum ast_kind kind, struct loc at)
{
	struct ast *e = arena_alloc(a, sizeof *e);
	e->kind = kind;
	e->loc = at;
	e->depth = 1;
	return e;
}

struct ast *ast_int(struct arena *a, struct loc at, int64_t v)
{
	struct ast *e = node(a, AST_INT, at);
	e->u.i = v;
	return e;
}

struct ast *ast_float(struct arena *a, struct loc at, double v)
{
	struct ast *e = node(a, AST_FLOAT, at);
	e->u.f = v;
	return e;
}

struct ast *ast_string(struct arena *a, struct loc at, const char *s)
{
	struct ast *e = node(a, AST_STRING, at);
	e->u.s = s;
	return e;
}

struct ast *ast_bool(struct arena *a, struct loc at, bool v)
{
	struct ast *e = node(a, AST_BOOL, at);
	e->u.b = v;
	return e;
}

struct ast *ast_name(struct arena *a, struct loc at, const char *s)
{
	struct ast *e = node(a, AST_NAME, at);
	e->u.s = s;
	return e;
}

static int args_depth(const struct ast_arg *args)
{
	int d = 0;
	for (; args; args = args->next)
		if (args->value && args->value->depth > d)
			d = args->value->depth;
	return d;
}

struct ast *ast_call(struct arena *a, struct loc at, const char *name, struct loc name_loc, struct ast_arg *args)
{
	struct ast *e = node(a, AST_CALL, at);
	e->u.call.name = name;
	e->u.call.name_loc = name_loc;
	e->u.call.args = args;
	e->depth = args_depth(args) + 1;
	return e;
}

struct ast *ast_seq(struct arena *a, struct loc at, enum ast_kind kind, struct ast_arg *items)
{
	struct ast *e = node(a, kind, at);
	e->u.seq.items = items;
	e->u.seq.n = ast_args_count(items);
	e->depth = args_depth(items) + 1;
	return e;
}

struct ast *ast_binop(struct arena *a, struct loc at, char op, struct ast *l, struct ast *r)
{
	struct ast *e = node(a, AST_BINOP, at);
	e->u.bin.op = op;
	e->u.bin.l = l;
	e->u.bin.r = r;
	/* a left operand continues a flat chain (a + b + c), which walkers
	 * iterate; only the right operand nests */
	e->depth = l->depth > r->depth + 1 ? l->depth : r->depth + 1;
	return e;
}

struct ast *ast_neg(struct arena *a, struct loc at, struct ast *v)
{
	struct ast *e = node(a, AST_NEG, at);
	e->u.neg = v;
	e->depth = v->depth + 1;
	return e;
}

struct ast_arg *ast_arg(struct arena *a, const char *key, struct loc key_loc, struct ast *value)
{
	struct ast_arg *g = arena_alloc(a, sizeof *g);
	g->key = key;
	g->key_loc = key_loc;
	g->value = value;
	return g;
}

/* Lists keep their tail in the head's `last`, so long files append in
 * constant time. */
#define APPEND(list, item) do { \
	if (!(item)) return list; \
	if (!(list)) { (item)->last = item; return item; } \
	if (!(list)->last) { (list)->last = list; while ((list)->last->next) (list)->last = (list)->last->next; } \
	(list)->last->next = item; \
	(list)->last = item; \
	return list; } while (0)

struct ast_arg *ast_args_append(struct ast_arg *list, struct ast_arg *item)
{
	APPEND(list, item);
}

struct ast_annot *ast_annot(struct arena *a, struct loc at, const char *name, struct ast_arg *args)
{
	struct ast_annot *n = arena_alloc(a, sizeof *n);
	n->name = name;
	n->loc = at;
	n->args = args;
	return n;
}

struct ast_annot *ast_annots_append(struct ast_annot *list, struct ast_annot *item)
{
	APPEND(list, item);
}

struct ast_stmt *ast_stmt(struct arena *a, struct loc at, const char *name, struct loc name_loc, struct ast *value)
{
	struct ast_stmt *s = arena_alloc(a, sizeof *s);
	s->loc = at;
	s->name = name;
	s->name_loc = name_loc;
	s->value = value;
	return s;
}

struct ast_stmt *ast_body(struct arena *a, struct loc open, struct ast_stmt *list)
{
	struct ast_stmt *h = ast_stmt(a, open, NULL, open, NULL);
	h->body = list;
	h->has_body = true;
	return h;
}

struct ast_stmt *ast_stmt_finish(struct ast_stmt *s, struct ast_annot *annots, struct ast_stmt *holder)
{
	s->annots = annots;
	if (holder) {
		s->has_body = true;
		s->body = holder->body;
	}
	return s;
}

struct ast_stmt *ast_stmts_append(struct ast_stmt *list, struct ast_stmt *item)
{
	APPEND(list, item);
}

struct ast_section *ast_section(struct arena *a, const char *kind, struct loc kind_loc)
{
	struct ast_section *s = arena_alloc(a, sizeof *s);
	s->kind = kind;
	s->kind_loc = kind_loc;
	return s;
}

struct ast_section *ast_section_name(struct ast_section *s, const char *name, struct loc at, bool is_string)
{
	s->name = name;
	s->name_loc = at;
	s->name_is_string = is_string;
	return s;
}

struct ast_section *ast_section_params(struct ast_section *s, struct ast_arg *params)
{
	s->params = params;
	s->has_params = true;
	return s;
}

struct ast_section *ast_section_body(struct ast_section *s, struct loc open, struct ast_stmt *body)
{
	s->body = body;
	s->has_body = true;
	s->open_loc = open;
	return s;
}

struct ast_section *ast_sections_append(struct ast_section *list, struct ast_section *item)
{
	APPEND(list, item);
}

int ast_args_count(const struct ast_arg *list)
{
	int n = 0;
	for (; list; list = list->next)
		n++;
	return n;
}

const char *ast_kind_name(enum ast_kind k)
{
	switch (k) {
	case AST_INT: return "an integer";
	case AST_FLOAT: return "a number";
	case AST_STRING: return "a string";
	case AST_BOOL: return "a boolean";
	case AST_NAME: return "a name";
	case AST_CALL: return "a call";
	case AST_TUPLE: return "a tuple";
	case AST_LIST: return "a list";
	case AST_BINOP: case AST_NEG: return "an expression";
	}
	return "a value";
}

struct ast_file *ast_parse(struct arena *a, struct diag *d, const struct source *src)
{
	struct lex_state ls = { 0 };
	ls.arena = a;
	ls.diag = d;
	ls.src = src;
	ls.line = 1;
	ls.col = 1;
	ls.last_was_nl = true; /* no statement to end before the first token */
	ls.file = arena_alloc(a, sizeof *ls.file);
	ls.file->src = src;
	struct lex_hold hold = { 0 };
	ls.hold = &hold;
	yyscan_t scanner;
	if (net_raw_lex_init_extra(&ls, &scanner) != 0) {
		fprintf(stderr, "trainc: cannot start the lexer\n");
		exit(70);
	}
	net_raw__scan_bytes(src->text, (int)src->len, scanner);
	net_parse(scanner, &ls);
	net_raw_lex_destroy(scanner);
	return ls.file;
}
