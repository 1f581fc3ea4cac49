/* ast.h: the syntax tree of a .net file, exactly as written.
 * The parser builds it through the ast_* constructors and nothing else; it
 * knows no layer, setting or device: meaning is the compiler's business.
 * All nodes live in the compilation's arena.  Lists are singly linked in
 * source order.
 */
#ifndef AST_H
#define AST_H
#include <stdbool.h>
#include <stdint.h>

#include "grammar/source.h"

struct arena;
struct diag;

enum ast_kind {
	AST_INT, AST_FLOAT, AST_STRING, AST_BOOL,
	AST_NAME,  /* a bare identifier: relu, mse, a block parameter */
	AST_CALL,  /* name(args) */
	AST_TUPLE, /* (a, b) */
	AST_LIST,  /* [a, b] */
	AST_BINOP, /* a op b, op one of + - * / % */
	AST_NEG,   /* -a */
};

struct ast_arg {
	const char *key; /* NULL for a positional argument */
	struct loc key_loc;
	struct ast *value;
	struct ast_arg *next;
	struct ast_arg *last; /* on a list's head: its tail, for O(1) appends */
};

struct ast {
	enum ast_kind kind;
	struct loc loc;
	int depth; /* nesting depth, bounded so later recursion is safe; a
	            * binary operator's left operand does not count, so walkers
	            * iterate down the left operands (a + b + ... + z is flat) */
	union {
		int64_t i;
		double f;
		bool b;
		const char *s;                      /* STRING, NAME */
		struct { const char *name; struct loc name_loc; struct ast_arg *args; } call;
		struct { struct ast_arg *items; int n; } seq; /* TUPLE, LIST (items unkeyed) */
		struct { char op; struct ast *l, *r; } bin;
		struct ast *neg;
	} u;
};

struct ast_annot {
	const char *name;
	struct loc loc;
	struct ast_arg *args;
	struct ast_annot *next;
	struct ast_annot *last;
};

/* [name =] value [@annot...] [{ body }] */
struct ast_stmt {
	const char *name; /* NULL when unnamed */
	struct loc name_loc;
	struct ast *value;
	struct ast_annot *annots;
	struct ast_stmt *body;
	bool has_body;
	struct loc loc;
	struct ast_stmt *next;
	struct ast_stmt *last;
};

/* kind [name | "string"] [(params)] [{ body }] */
struct ast_section {
	const char *kind;
	struct loc kind_loc;
	const char *name; /* model/block name, parallel mode, import path */
	struct loc name_loc;
	bool name_is_string;
	struct ast_arg *params;
	bool has_params;
	struct ast_stmt *body;
	bool has_body;
	struct loc open_loc; /* the '{' */
	struct ast_section *next;
	struct ast_section *last;
};

struct ast_file {
	const struct source *src;
	struct ast_section *sections;
};

enum { AST_MAX_DEPTH = 200 };

/* Parse one source; errors go to d.  Returns the file even after errors
 * (with what could be recovered); check d->errors. */
struct ast_file *ast_parse(struct arena *a, struct diag *d, const struct source *src);

/* Constructors used by the parser. */
struct ast *ast_int(struct arena *a, struct loc at, int64_t v);
struct ast *ast_float(struct arena *a, struct loc at, double v);
struct ast *ast_string(struct arena *a, struct loc at, const char *s);
struct ast *ast_bool(struct arena *a, struct loc at, bool v);
struct ast *ast_name(struct arena *a, struct loc at, const char *s);
struct ast *ast_call(struct arena *a, struct loc at, const char *name, struct loc name_loc, struct ast_arg *args);
struct ast *ast_seq(struct arena *a, struct loc at, enum ast_kind kind, struct ast_arg *items);
struct ast *ast_binop(struct arena *a, struct loc at, char op, struct ast *l, struct ast *r);
struct ast *ast_neg(struct arena *a, struct loc at, struct ast *v);
struct ast_arg *ast_arg(struct arena *a, const char *key, struct loc key_loc, struct ast *value);
struct ast_arg *ast_args_append(struct ast_arg *list, struct ast_arg *item);
struct ast_annot *ast_annot(struct arena *a, struct loc at, const char *name, struct ast_arg *args);
struct ast_annot *ast_annots_append(struct ast_annot *list, struct ast_annot *item);
struct ast_stmt *ast_stmt(struct arena *a, struct loc at, const char *name, struct loc name_loc, struct ast *value);
/* A holder for a { } body: its `body` field is the statement list. */
struct ast_stmt *ast_body(struct arena *a, struct loc open, struct ast_stmt *list);
struct ast_stmt *ast_stmt_finish(struct ast_stmt *s, struct ast_annot *annots, struct ast_stmt *holder);
struct ast_stmt *ast_stmts_append(struct ast_stmt *list, struct ast_stmt *item);
struct ast_section *ast_section(struct arena *a, const char *kind, struct loc kind_loc);
struct ast_section *ast_section_name(struct ast_section *s, const char *name, struct loc at, bool is_string);
struct ast_section *ast_section_params(struct ast_section *s, struct ast_arg *params);
struct ast_section *ast_section_body(struct ast_section *s, struct loc open, struct ast_stmt *body);
struct ast_section *ast_sections_append(struct ast_section *list, struct ast_section *item);
/* Number of items in an argument list. */
int ast_args_count(const struct ast_arg *list);
/* Short description of a value's kind for messages: "an integer", "a string". */
const char *ast_kind_name(enum ast_kind k);
#endif
