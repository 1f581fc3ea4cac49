/* ops.h: the layer vocabulary.  For each op: its name in .net files, its
 * PyTorch class, how its arguments are read, how its output shape follows
 * from its input (filling in omitted in-sizes, checking given ones) and
 * which parameters it owns with their state_dict suffixes and initialisers.
 * Shapes here are per sample; the batch dimension never appears.
 */
#ifndef OPS_H
#define OPS_H
#include <stdbool.h>

#include "compiler/ir.h"
#include "compiler/value.h"

struct diag;

struct op_info {
	const char *name;  /* as written in .net files */
	const char *torch; /* nn.Module class, for printing */
};
extern const struct op_info op_info[OP__COUNT];

/* The op called `name`, or -1; *var (when not NULL) is set to the variant
 * the name is of its op (conv1d: VAR_1D of OP_CONV2D). */
int op_lookup(const char *name);
int op_lookup_variant(const char *name, enum variant *var);
/* A node's layer name as written and its nn.Module class (Conv1d for a
 * conv1d) */
const char *op_name(const struct node *n);
const char *op_class(const struct node *n);
/* All op names (for suggestions); returns the count. */
int op_names(const char **out, int max);

/* Read a layer statement's arguments into n->a.  In-sizes that are omitted
 * stay 0 and are inferred later. */
bool op_configure(struct diag *d, struct node *n, const struct val *call);

/* Whether conv2d n, with padding="same", pads one side more than the
 * other (an odd dilation * (kernel - 1)): then it runs unpadded after a
 * zero pad of pad = (left, right, top, bottom), PyTorch's split. */
bool op_same_pad(const struct node *n, int64_t pad[4]);

/* Compute n->out from the input shape.  `prev` is the producer (its shape
 * and kind make shape errors say where a size came from). */
bool op_infer(struct diag *d, struct node *n, const struct node *prev, const struct node *prev_prev);
/* Warn about what n computes otherwise than meant (after op_infer; prev
 * as there): a max-pool window with no tap inside the input. */
void op_warn(struct diag *d, const struct node *n, const struct node *prev);

struct param_spec {
	const char *suffix;
	enum param_role role;
	struct shape shape;
	enum dtype dtype;
	enum init_kind init;
	int64_t fan_in;
	bool buffer;
};
/* Parameters and buffers of n (after op_infer), in state_dict order. */
int op_params(const struct node *n, struct param_spec out[5]);

/* PyTorch's repr of the module: "Linear(in_features=9216, out_features=128, bias=True)". */
void op_describe(const struct node *n, char *buf, int len);
/* Bytes kept from forward to backward beyond the output (masks, indices, statistics). */
int64_t op_saved_bytes(const struct node *n, int64_t batch);
/* Whether backward of n reads its input's forward output / its own output. */
bool op_needs_input(const struct node *n);
bool op_needs_output(const struct node *n);
#endif
