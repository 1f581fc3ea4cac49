/* value.h: evaluated arguments.  The AST's expressions are evaluated once,
 * with block parameters substituted and integer arithmetic checked for
 * overflow, into values the passes read through typed getters that report
 * "expected an integer, found a string" at the value's own location.
 * Argument lists are bound to a callee's parameter names here, so every
 * op, block and setting reports unknown or repeated arguments alike.
 */
#ifndef VALUE_H
#define VALUE_H
#include <stdbool.h>
#include <stdint.h>

#include "grammar/ast.h"

struct arena;
struct diag;

enum val_kind { V_INT, V_FLOAT, V_STRING, V_BOOL, V_NAME, V_CALL, V_TUPLE, V_LIST };

struct val;
struct varg { const char *key; struct loc key_loc; struct val *v; };

struct val {
	enum val_kind kind;
	struct loc loc;
	int64_t i;
	double f;
	bool b;
	const char *s;     /* STRING, NAME, CALL (the callee) */
	struct loc name_loc;
	struct varg *items; /* TUPLE, LIST, CALL arguments */
	int n;
	const struct ast_section *scope; /* NAME: the block it was written in, else NULL */
	/* A block parameter's value where the body uses it: the value the
	 * parameter was bound to (a call's argument or the default), which may
	 * itself come from an outer block's parameter. */
	const struct val *from;
	const char *param, *param_block;
};

/* Block parameters in scope while a block body is expanded. */
struct env {
	const char *names[32];
	struct val *vals[32];
	int n;
	const struct ast_section *block; /* whose parameters these are */
};

struct evalctx {
	struct arena *a;
	struct diag *d;
};

/* Evaluate e; NULL after an error has been reported. */
struct val *val_eval(struct evalctx *c, const struct ast *e, const struct env *env);
/* Evaluate a call's (or annotation's) argument list. */
bool val_eval_args(struct evalctx *c, const struct ast_arg *args, const struct env *env, struct varg **out, int *n);

/* Bind args to the parameter names of a callee: slot[k] gets the argument
 * for names[k] (positional first, then by key) or NULL.  Reports unknown
 * keys (with the nearest name), repeats, surplus positionals and a
 * positional after a keyword. */
bool val_bind(struct diag *d, const char *callee, struct loc at, const struct varg *args, int nargs,
	      const char *const *names, int npos, int nnames, struct val **slot);

/* After an error about v: notes pointing at the call (or default) that
 * gave v to a block parameter, outermost call last. */
void val_note_origin(struct diag *d, const struct val *v);

/* Typed reads: report at v->loc and return false on a mismatch.  A name
 * where a value is expected is reported as not defined, with the nearest
 * parameter of its block suggested. */
bool val_int(struct diag *d, const struct val *v, const char *what, int64_t *out);
bool val_num(struct diag *d, const struct val *v, const char *what, double *out);
bool val_bool(struct diag *d, const struct val *v, const char *what, bool *out);
bool val_str(struct diag *d, const struct val *v, const char *what, const char **out);
/* An int, or a 2-tuple/list of ints (kernel, stride, padding...). */
bool val_pair(struct diag *d, const struct val *v, const char *what, int64_t out[2]);
/* An int for all four, or a 4-tuple/list of ints (zeropad2d's left, right,
 * top, bottom). */
bool val_quad(struct diag *d, const struct val *v, const char *what, int64_t out[4]);
/* A name or a call's callee: `mse` and `mse()` alike. */
const char *val_callee(const struct val *v);

/* Write v as .net source text. */
void val_print(const struct val *v, char *buf, int n);
/* f as Python's repr writes a float, the form PyTorch's module reprs show:
 * the fewest digits that read back, positional from 0.0001 to below 1e16
 * (0.0001, 100.0, 123456789012345.0), else with an exponent of at least
 * two digits (1e-05, 1.2345678e-05, 1e+16); buf holds >= 32. */
void val_float_repr(double f, char *buf, size_t n);
/* f for a message, exactly: an integer without a '.' (10000001, where %g
 * writes 1e+07), anything else in its fewest exact digits (0.999999999,
 * where %g writes 1); buf holds >= 32.  Returns buf. */
const char *val_number_text(double f, char *buf, size_t n);
#endif
