/* ops.c: arguments, shapes and parameters of every layer.
 * Defaults are PyTorch's (Conv2d stride 1, padding 0; MaxPool2d stride =
 * kernel; BatchNorm eps 1e-5, momentum 0.1; Dropout p 0.5 ...).  Shape
 * arithmetic is done in int64 with overflow checks, so a hostile file gets
 * "too large" instead of wrapped sizes.  Messages name the layer by its
 * state_dict path so users can find it in both worlds.
 */
#include "compiler/ops.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "grammar/diag.h"

/* tag: OP_TABLE (keep in step with enum op) */
const struct op_info op_info[OP__COUNT] = {
	[OP_INPUT] = { "input", "Input" },
	[OP_LINEAR] = { "linear", "Linear" },
	[OP_CONV2D] = { "conv2d", "Conv2d" },
	[OP_MAXPOOL2D] = { "maxpool2d", "MaxPool2d" },
	[OP_AVGPOOL2D] = { "avgpool2d", "AvgPool2d" },
	[OP_ADAPTIVE_AVGPOOL2D] = { "adaptive_avgpool2d", "AdaptiveAvgPool2d" },
	[OP_ADAPTIVE_MAXPOOL2D] = { "adaptive_maxpool2d", "AdaptiveMaxPool2d" },
	[OP_ZEROPAD2D] = { "zeropad2d", "ZeroPad2d" },
	[OP_BATCHNORM1D] = { "batchnorm1d", "BatchNorm1d" },
	[OP_BATCHNORM2D] = { "batchnorm2d", "BatchNorm2d" },
	[OP_LAYERNORM] = { "layernorm", "LayerNorm" },
	[OP_GROUPNORM] = { "groupnorm", "GroupNorm" },
	[OP_EMBEDDING] = { "embedding", "Embedding" },
	[OP_DROPOUT] = { "dropout", "Dropout" },
	[OP_FLATTEN] = { "flatten", "Flatten" },
	[OP_RELU] = { "relu", "ReLU" },
	[OP_GELU] = { "gelu", "GELU" },
	[OP_TANH] = { "tanh", "Tanh" },
	[OP_SIGMOID] = { "sigmoid", "Sigmoid" },
	[OP_LEAKY_RELU] = { "leaky_relu", "LeakyReLU" },
	[OP_ELU] = { "elu", "ELU" },
	[OP_SELU] = { "selu", "SELU" },
	[OP_SILU] = { "silu", "SiLU" },
	[OP_SOFTPLUS] = { "softplus", "Softplus" },
	[OP_HARDTANH] = { "hardtanh", "Hardtanh" },
	[OP_RELU6] = { "relu6", "ReLU6" },
	[OP_HARDSIGMOID] = { "hardsigmoid", "Hardsigmoid" },
	[OP_HARDSWISH] = { "hardswish", "Hardswish" },
	[OP_MISH] = { "mish", "Mish" },
	[OP_CELU] = { "celu", "CELU" },
	[OP_LOGSIGMOID] = { "logsigmoid", "LogSigmoid" },
	[OP_SOFTSIGN] = { "softsign", "Softsign" },
	[OP_TANHSHRINK] = { "tanhshrink", "Tanhshrink" },
	[OP_SOFTSHRINK] = { "softshrink", "Softshrink" },
	[OP_HARDSHRINK] = { "hardshrink", "Hardshrink" },
	[OP_THRESHOLD] = { "threshold", "Threshold" },
	[OP_PRELU] = { "prelu", "PReLU" },
	[OP_SOFTMAX] = { "softmax", "Softmax" },
	[OP_LOG_SOFTMAX] = { "log_softmax", "LogSoftmax" },
	[OP_ADD] = { "+", "Add" },
	[OP_TRANSFER] = { "transfer", "Transfer" },
};

/* the layers that are another op under their own name */
static const struct {
	enum op op;
	enum variant var;
	struct op_info info;
} op_variants[] = {
	{ OP_CONV2D, VAR_1D, { "conv1d", "Conv1d" } },
	{ OP_MAXPOOL2D, VAR_1D, { "maxpool1d", "MaxPool1d" } },
	{ OP_AVGPOOL2D, VAR_1D, { "avgpool1d", "AvgPool1d" } },
	{ OP_ADAPTIVE_AVGPOOL2D, VAR_1D, { "adaptive_avgpool1d", "AdaptiveAvgPool1d" } },
	{ OP_ADAPTIVE_MAXPOOL2D, VAR_1D, { "adaptive_maxpool1d", "AdaptiveMaxPool1d" } },
	{ OP_FLATTEN, VAR_UNFLATTEN, { "unflatten", "Unflatten" } },
	{ OP_FLATTEN, VAR_IDENTITY, { "identity", "Identity" } },
	{ OP_DROPOUT, VAR_1D, { "dropout1d", "Dropout1d" } },
	{ OP_DROPOUT, VAR_2D, { "dropout2d", "Dropout2d" } },
	{ OP_GROUPNORM, VAR_1D, { "instancenorm1d", "InstanceNorm1d" } },
	{ OP_GROUPNORM, VAR_2D, { "instancenorm2d", "InstanceNorm2d" } },
};
enum { N_VARIANTS = sizeof op_variants / sizeof op_variants[0] };

int op_lookup_variant(const char *name, enum variant *var)
{
	if (var)
		*var = VAR_NONE;
	for (int k = 0; k < OP__COUNT; k++)
		if (k != OP_ADD && k != OP_TRANSFER && strcmp(op_info[k].name, name) == 0)
			return k;
	for (int k = 0; k < N_VARIANTS; k++)
		if (strcmp(op_variants[k].info.name, name) == 0) {
			if (var)
				*var = op_variants[k].var;
			return (int)op_variants[k].op;
		}
	return -1;
}

int op_lookup(const char *name)
{
	return op_lookup_variant(name, NULL);
}

static bool one_d(const struct node *n)
{
	return n->variant == VAR_1D;
}

static const struct op_info *info_of(const struct node *n)
{
	for (int k = 0; n->variant != VAR_NONE && k < N_VARIANTS; k++)
		if (op_variants[k].op == n->op && op_variants[k].var == n->variant)
			return &op_variants[k].info;
	return &op_info[n->op];
}

const char *op_name(const struct node *n)
{
	return info_of(n)->name;
}

const char *op_class(const struct node *n)
{
	return info_of(n)->torch;
}

/* the layers' names, each op's variants beside it in alphabetical order:
 * conv1d before conv2d, flatten before unflatten, dropout before dropout1d */
int op_names(const char **out, int max)
{
	int n = 0;
	for (int k = 0; k < OP__COUNT && n < max; k++) {
		if (k == OP_ADD || k == OP_TRANSFER)
			continue;
		for (int pass = 0; pass < 2; pass++) {
			for (int j = 0; j < N_VARIANTS && n < max; j++)
				if ((int)op_variants[j].op == k && (strcmp(op_variants[j].info.name, op_info[k].name) < 0) == (pass == 0))
					out[n++] = op_variants[j].info.name;
			if (pass == 0 && n < max)
				out[n++] = op_info[k].name;
		}
	}
	return n;
}

/* input's dtypes: "long" (or "int64") for token ids, "float" (or "float32") */
static bool is_dtype(const char *s)
{
	return !strcmp(s, "long") || !strcmp(s, "int64") || !strcmp(s, "float") || !strcmp(s, "float32");
}

#define BIND(...) \
	static const char *const names[] = { __VA_ARGS__ }; \
	enum { NN = sizeof names / sizeof names[0] }; \
	struct val *s[NN]; \
	if (!val_bind(d, callee, call->loc, call->items, call->n, names, npos, NN, s)) return false

/* The longest side, padded, or dilated kernel extent the kernels index
 * (their sizes are int); values up to 2^40 pass alone, so products of two
 * are checked against this before they are formed. */
#define EXTENT_MAX ((int64_t)INT32_MAX)

static bool positive(struct diag *d, const struct val *v, const char *what, int64_t x, int64_t min)
{
	if (x < min) {
		diag_error(d, v->loc, "%s must be at least %" PRId64 ", not %" PRId64, what, min, x);
		val_note_origin(d, v);
		return false;
	}
	if (x > ((int64_t)1 << 40)) {
		diag_error(d, v->loc, "%s %" PRId64 " is too large", what, x);
		val_note_origin(d, v);
		return false;
	}
	return true;
}

static bool get_int(struct diag *d, struct val *v, const char *what, int64_t *out, int64_t min)
{
	return val_int(d, v, what, out) && positive(d, v, what, *out, min);
}

static bool get_pair(struct diag *d, struct val *v, const char *what, int64_t *a, int64_t *b, int64_t min)
{
	int64_t p[2];
	if (!val_pair(d, v, what, p))
		return false;
	if (!positive(d, v, what, p[0], min) || !positive(d, v, what, p[1], min))
		return false;
	*a = p[0];
	*b = p[1];
	return true;
}

/* A 2-D layer's size argument; for a 1-D one an integer or a tuple of
 * one, with the height's size `unit` (1 for kernel, stride and dilation,
 * 0 for padding). */
static bool get_size(struct diag *d, struct val *v, const char *what, const struct node *n, int64_t unit, int64_t *h,
		     int64_t *w, int64_t min)
{
	if (!one_d(n))
		return get_pair(d, v, what, h, w, min);
	const struct val *x = v;
	if ((v->kind == V_TUPLE || v->kind == V_LIST) && v->n == 1)
		x = v->items[0].v;
	int64_t k;
	if (x->kind != V_INT) {
		diag_error(d, v->loc, "%s's %s must be an integer or a tuple of one, as (3,)", op_name(n), what);
		val_note_origin(d, v);
		return false;
	}
	k = x->i;
	if (!positive(d, v, what, k, min))
		return false;
	*h = unit;
	*w = k;
	return true;
}

/* A layer written bare or with empty parentheses: any argument is an error */
static bool no_arguments(struct diag *d, const char *callee, const struct val *call)
{
	static const char *const none[1] = { "" };
	struct val *s[1];
	return val_bind(d, callee, call->loc, call->items, call->n, none, 0, 0, s);
}

static bool missing(struct diag *d, const struct val *call, const char *callee, const char *arg)
{
	diag_error(d, call->loc, "%s needs %s", callee, arg);
	return false;
}

/* Sizes with an optional leading in-size: f(out) or f(in, out). */
static bool keyed(const struct val *call, const char *key)
{
	for (int k = 0; k < call->n; k++)
		if (call->items[k].key && strcmp(call->items[k].key, key) == 0)
			return true;
	return false;
}

static bool in_out(struct diag *d, struct val **s, const char *callee, const struct val *call, int64_t *in, int64_t *out)
{
	if ((!s[0] && !s[1]) || (!s[1] && keyed(call, "in")))
		return missing(d, call, callee, "an output size");
	if (s[0] && s[1])
		return get_int(d, s[0], "the input size", in, 1) && get_int(d, s[1], "the output size", out, 1);
	*in = 0; /* linear(out) or linear(out=n): inferred from the input */
	return get_int(d, s[0] ? s[0] : s[1], "the output size", out, 1);
}

static enum size_form size_form(const struct val *v)
{
	return v->kind == V_INT ? FORM_INT : v->kind == V_LIST ? FORM_LIST : FORM_TUPLE;
}

static struct int_form int_form(const struct val *v)
{
	return (struct int_form){ v && v->kind == V_INT, v && v->kind == V_INT ? v->i : 0 };
}

/* A norm's eps, as PyTorch takes it: 0 too (a channel or row whose values
 * are all equal then normalises to NaN, or in batch norm training to its
 * bias); the kernels add it in float32, so it must be one. */
static bool get_eps(struct diag *d, const struct val *v, double *eps, struct int_form *form)
{
	char x[32];
	if (!val_num(d, v, "eps", eps))
		return false;
	*form = int_form(v);
	if (*eps >= 0 && *eps <= FLT_MAX)
		return true;
	val_number_text(*eps, x, sizeof x);
	if (*eps < 0)
		diag_error(d, v->loc, "eps must be at least 0, not %s", x);
	else
		diag_error(d, v->loc, "eps must be at most 3.4e+38, the largest float32, not %s", x);
	return false;
}

/* An activation's number (negative_slope, alpha, beta, threshold): the
 * kernels compute in float32, so it must be one. */
static bool get_act_num(struct diag *d, const struct val *v, const char *what, double *out, struct int_form *form)
{
	char x[32];
	if (!val_num(d, v, what, out))
		return false;
	*form = int_form(v);
	if (fabs(*out) <= FLT_MAX)
		return true;
	diag_error(d, v->loc, "%s must be within float32's range, at most 3.4e+38 either way, not %s", what,
		   val_number_text(*out, x, sizeof x));
	val_note_origin(d, v);
	return false;
}

static bool configure_pool(struct diag *d, struct node *n, struct val **s, const struct val *call, const char *callee, bool avg)
{
	if (!s[0])
		return missing(d, call, callee, "a kernel size");
	if (!get_size(d, s[0], "kernel", n, 1, &n->a.pool.kh, &n->a.pool.kw, 1))
		return false;
	/* PyTorch keeps each argument as given, stride defaulting to the
	 * kernel size itself */
	n->a.pool.kform = size_form(s[0]);
	n->a.pool.sh = n->a.pool.kh;
	n->a.pool.sw = n->a.pool.kw;
	n->a.pool.sform = n->a.pool.kform;
	n->a.pool.dh = n->a.pool.dw = 1;
	n->a.pool.count_include_pad = true;
	if (s[1] && !get_size(d, s[1], "stride", n, 1, &n->a.pool.sh, &n->a.pool.sw, 1))
		return false;
	if (s[1])
		n->a.pool.sform = size_form(s[1]);
	if (s[2] && !get_size(d, s[2], "padding", n, 0, &n->a.pool.ph, &n->a.pool.pw, 0))
		return false;
	n->a.pool.pform = s[2] ? size_form(s[2]) : FORM_INT;
	if (s[3] && !val_bool(d, s[3], "ceil_mode", &n->a.pool.ceil_mode))
		return false;
	if (s[4] && !avg && !get_size(d, s[4], "dilation", n, 1, &n->a.pool.dh, &n->a.pool.dw, 1))
		return false;
	n->a.pool.dform = s[4] && !avg ? size_form(s[4]) : FORM_INT;
	if (s[4] && avg && !val_bool(d, s[4], "count_include_pad", &n->a.pool.count_include_pad))
		return false;
	if (n->a.pool.ph * 2 > n->a.pool.kh || n->a.pool.pw * 2 > n->a.pool.kw) {
		diag_error(d, s[2]->loc, "padding must be at most half the kernel size (PyTorch's rule)");
		return false;
	}
	return true;
}

/* conv2d(padding="same"): the output keeps the input's size, as in
 * PyTorch, which takes it only at stride 1 and pads dilation * (kernel - 1)
 * in all: half of it on the left and top, the rest (one more where it is
 * odd) on the right and bottom. */
static void same_total(const struct node *n, int64_t *th, int64_t *tw)
{
	*th = n->a.conv.dh * (n->a.conv.kh - 1);
	*tw = n->a.conv.dw * (n->a.conv.kw - 1);
}

/* Where the totals are even in both dimensions the convolution pads both
 * sides alike itself; else it stays unpadded, and the lowering puts a
 * hidden zero pad before it (op_same_pad). */
static bool same_padding(struct diag *d, struct node *n, const struct val *stride)
{
	if (n->a.conv.sh != 1 || n->a.conv.sw != 1) {
		diag_error(d, stride->loc, "padding=\"same\" needs stride 1 (as in PyTorch); give the padding as numbers instead");
		return false;
	}
	if (n->a.conv.kh - 1 > EXTENT_MAX / n->a.conv.dh || n->a.conv.kw - 1 > EXTENT_MAX / n->a.conv.dw) {
		diag_error(d, n->loc, "%s: padding=\"same\" pads dilation * (kernel - 1) in all, here more than 2^31 - 1, the longest "
			   "side trainc's kernels index; lower the dilation or the kernel", n->what);
		return false;
	}
	int64_t th, tw;
	same_total(n, &th, &tw);
	if (th % 2 == 0 && tw % 2 == 0) {
		n->a.conv.ph = th / 2;
		n->a.conv.pw = tw / 2;
	}
	return true;
}

bool op_same_pad(const struct node *n, int64_t pad[4])
{
	int64_t th, tw;
	if (n->op != OP_CONV2D || !n->a.conv.same)
		return false;
	same_total(n, &th, &tw);
	if (th % 2 == 0 && tw % 2 == 0)
		return false;
	pad[0] = tw / 2;
	pad[1] = tw - tw / 2;
	pad[2] = th / 2;
	pad[3] = th - th / 2;
	return true;
}

/* unflatten(dim, sizes): nn.Unflatten(dim, unflattened_size), the sizes a
 * tuple or list of ints of which one may be -1 (inferred by op_infer) */
static bool configure_unflatten(struct diag *d, struct node *n, const struct val *call, const char *callee)
{
	int npos = 2;
	BIND("dim", "sizes");
	if (!s[0] || !s[1])
		return missing(d, call, callee, "the dimension to split and its sizes, e.g. unflatten(1, (28, 28))");
	int64_t dim;
	if (!val_int(d, s[0], "dim", &dim))
		return false;
	if (dim < -8 || dim > 8) {
		diag_error(d, s[0]->loc, "unflatten's dimension %" PRId64 " is out of range", dim);
		return false;
	}
	const struct val *v = s[1];
	if (v->kind != V_TUPLE && v->kind != V_LIST) {
		diag_error(d, v->loc, "unflatten's sizes must be a tuple of ints, as (28, 28): nn.Unflatten's unflattened_size");
		val_note_origin(d, v);
		return false;
	}
	if (v->n < 1 || v->n > SHAPE_MAX) {
		diag_error(d, v->loc, "unflatten splits a dimension into 1 to %d sizes, not %d", SHAPE_MAX, v->n);
		return false;
	}
	int inferred = 0;
	for (int k = 0; k < v->n; k++) {
		const struct val *x = v->items[k].v;
		if (x->kind != V_INT) {
			diag_error(d, x->loc, "unflatten's sizes must be ints, but size %d is not", k + 1);
			val_note_origin(d, x);
			return false;
		}
		if (x->i == -1 && inferred++) {
			diag_error(d, x->loc, "only one of unflatten's sizes can be -1 (inferred)");
			return false;
		}
		if (x->i != -1 && !positive(d, x, "an unflatten size", x->i, 1))
			return false;
		n->a.flat.sizes[k] = x->i;
	}
	n->a.flat.nsizes = v->n;
	n->a.flat.sform = size_form(v);
	n->a.flat.start = n->a.flat.start_arg = (int)dim; /* batch-inclusive; normalised by op_infer */
	return true;
}

bool op_configure(struct diag *d, struct node *n, const struct val *call)
{
	const char *callee = op_name(n);
	int npos;
	switch (n->op) {
	case OP_INPUT: {
		npos = SHAPE_MAX;
		n->dtype = DT_F32;
		const struct val *dt = NULL;
		n->out.rank = 0;
		for (int k = 0; k < call->n; k++) {
			struct varg *g = &call->items[k];
			if (g->key && strcmp(g->key, "dtype") == 0) {
				dt = g->v;
				continue;
			}
			if (g->key) {
				diag_error(d, g->key_loc, "input takes sizes and dtype=, not '%s'", g->key);
				return false;
			}
			if (dt) {
				diag_error(d, g->v->loc, "positional argument follows keyword argument 'dtype='; give the sizes first");
				return false;
			}
			if (n->out.rank == SHAPE_MAX) {
				diag_error(d, g->v->loc, "input has more than %d dimensions", SHAPE_MAX);
				return false;
			}
			if (!get_int(d, g->v, "an input size", &n->out.d[n->out.rank], 1))
				return false;
			n->out.rank++;
		}
		if (n->out.rank == 0)
			return missing(d, call, callee, "its per-sample shape, e.g. input(1, 28, 28)");
		if (dt) {
			const char *t;
			if (dt->kind == V_NAME && !dt->from && is_dtype(dt->s)) {
				diag_error(d, dt->loc, "a dtype is a string: dtype=\"%s\"", dt->s);
				return false;
			}
			if (!val_str(d, dt, "dtype", &t))
				return false;
			if (!is_dtype(t)) {
				diag_error(d, dt->loc, "dtype must be \"float\" or \"long\"");
				return false;
			}
			if (strcmp(t, "long") == 0 || strcmp(t, "int64") == 0)
				n->dtype = DT_I64;
		}
		return true;
	}
	case OP_LINEAR: {
		npos = 2;
		BIND("in", "out", "bias");
		n->a.linear.bias = true;
		if (s[2] && !val_bool(d, s[2], "bias", &n->a.linear.bias))
			return false;
		n->in_arg = s[0] && s[1] ? s[0] : NULL;
		return in_out(d, s, callee, call, &n->a.linear.in, &n->a.linear.out);
	}
	case OP_CONV2D: {
		npos = 3;
		BIND("in", "out", "kernel", "stride", "padding", "dilation", "groups", "bias");
		/* conv2d(in, out, kernel) or conv2d(out, kernel=k): in is then inferred (conv1d alike) */
		struct val *kernel = s[2];
		if (!kernel)
			return missing(d, call, callee, one_d(n) ? "a kernel size: conv1d(in, out, kernel=3)"
								: "a kernel size: conv2d(in, out, kernel=3)");
		if (s[0] && s[1]) {
			if (!get_int(d, s[0], "in_channels", &n->a.conv.cin, 1) || !get_int(d, s[1], "out_channels", &n->a.conv.cout, 1))
				return false;
			n->in_arg = s[0];
		} else if (!s[1] && keyed(call, "in")) {
			return missing(d, call, callee, "an output channel count");
		} else if (s[0] || s[1]) {
			if (!get_int(d, s[0] ? s[0] : s[1], "out_channels", &n->a.conv.cout, 1))
				return false;
		} else {
			return missing(d, call, callee, "an output channel count");
		}
		if (!get_size(d, kernel, "kernel", n, 1, &n->a.conv.kh, &n->a.conv.kw, 1))
			return false;
		n->a.conv.sh = n->a.conv.sw = n->a.conv.dh = n->a.conv.dw = n->a.conv.groups = 1;
		n->a.conv.bias = true;
		if (s[3] && !get_size(d, s[3], "stride", n, 1, &n->a.conv.sh, &n->a.conv.sw, 1))
			return false;
		if (s[4] && s[4]->kind == V_STRING) {
			n->a.conv.valid = strcmp(s[4]->s, "valid") == 0;
			n->a.conv.same = strcmp(s[4]->s, "same") == 0;
			if (!n->a.conv.valid && !n->a.conv.same) {
				diag_error(d, s[4]->loc, "padding must be an integer%s, \"valid\" or \"same\"", one_d(n) ? "" : ", a pair");
				return false;
			}
		} else if (s[4] && s[4]->kind == V_NAME && !s[4]->from && (!strcmp(s[4]->s, "same") || !strcmp(s[4]->s, "valid"))) {
			/* PyTorch's padding="same" written without its quotes */
			diag_error(d, s[4]->loc, "name '%s' is not defined; padding=\"%s\" is a string: write it in quotes", s[4]->s,
				   s[4]->s);
			return false;
		} else if (s[4] && !get_size(d, s[4], "padding", n, 0, &n->a.conv.ph, &n->a.conv.pw, 0)) {
			return false;
		}
		if (s[5] && !get_size(d, s[5], "dilation", n, 1, &n->a.conv.dh, &n->a.conv.dw, 1))
			return false;
		if (n->a.conv.same && !same_padding(d, n, s[3]))
			return false;
		if (s[6] && !get_int(d, s[6], "groups", &n->a.conv.groups, 1))
			return false;
		if (s[7] && !val_bool(d, s[7], "bias", &n->a.conv.bias))
			return false;
		if (n->a.conv.cout % n->a.conv.groups != 0) {
			diag_error(d, (s[6] ? s[6] : call)->loc, "out_channels %" PRId64 " is not divisible by groups %" PRId64,
				   n->a.conv.cout, n->a.conv.groups);
			return false;
		}
		return true;
	}
	case OP_MAXPOOL2D: {
		npos = 2;
		BIND("kernel", "stride", "padding", "ceil_mode", "dilation");
		return configure_pool(d, n, s, call, callee, false);
	}
	case OP_AVGPOOL2D: {
		npos = 2;
		BIND("kernel", "stride", "padding", "ceil_mode", "count_include_pad");
		return configure_pool(d, n, s, call, callee, true);
	}
	case OP_ADAPTIVE_AVGPOOL2D: case OP_ADAPTIVE_MAXPOOL2D: {
		npos = 1;
		BIND("output");
		if (!s[0])
			return missing(d, call, callee, "an output size");
		n->a.apool.form = size_form(s[0]);
		return get_size(d, s[0], "output size", n, 1, &n->a.apool.oh, &n->a.apool.ow, 1);
	}
	case OP_ZEROPAD2D: {
		npos = 1;
		BIND("padding");
		int64_t side[4];
		if (!s[0])
			return missing(d, call, callee, "a padding: zeropad2d(1) or zeropad2d((left, right, top, bottom))");
		if (!val_quad(d, s[0], "zeropad2d's padding", side))
			return false;
		for (int k = 0; k < 4; k++) {
			if (side[k] > ((int64_t)1 << 40) || side[k] < -((int64_t)1 << 40)) {
				const struct val *v = s[0]->kind == V_INT ? s[0] : s[0]->items[k].v;
				diag_error(d, v->loc, "padding %" PRId64 " is too large; a side pads or crops at most 2^40", side[k]);
				val_note_origin(d, v);
				return false;
			}
		}
		n->a.pad.left = side[0];
		n->a.pad.right = side[1];
		n->a.pad.top = side[2];
		n->a.pad.bottom = side[3];
		return true;
	}
	case OP_BATCHNORM1D: case OP_BATCHNORM2D: {
		npos = 1;
		BIND("channels", "eps", "momentum", "affine", "track_running_stats");
		n->a.bn.eps = 1e-5;
		n->a.bn.momentum = 0.1;
		n->a.bn.affine = n->a.bn.track = true;
		if (s[0] && !get_int(d, s[0], "channels", &n->a.bn.c, 1))
			return false;
		n->in_arg = s[0];
		if (s[1] && !get_eps(d, s[1], &n->a.bn.eps, &n->a.bn.eps_form))
			return false;
		if (s[2] && !val_num(d, s[2], "momentum", &n->a.bn.momentum))
			return false;
		n->a.bn.momentum_form = int_form(s[2]);
		if (s[3] && !val_bool(d, s[3], "affine", &n->a.bn.affine))
			return false;
		return !s[4] || val_bool(d, s[4], "track_running_stats", &n->a.bn.track);
	}
	case OP_LAYERNORM: {
		npos = 1;
		BIND("shape", "eps", "affine");
		n->a.ln.eps = 1e-5;
		n->a.ln.affine = true;
		n->in_arg = s[0];
		if (s[0]) {
			if (s[0]->kind == V_INT) {
				n->a.ln.nd = 1;
				if (!get_int(d, s[0], "normalized shape", &n->a.ln.d[0], 1))
					return false;
			} else if ((s[0]->kind == V_LIST || s[0]->kind == V_TUPLE) && s[0]->n >= 1 && s[0]->n <= SHAPE_MAX) {
				n->a.ln.nd = s[0]->n;
				for (int k = 0; k < s[0]->n; k++)
					if (!get_int(d, s[0]->items[k].v, "normalized shape", &n->a.ln.d[k], 1))
						return false;
			} else if (s[0]->kind == V_NAME) {
				return val_int(d, s[0], "layernorm's shape", &n->a.ln.d[0]); /* reports the name */
			} else {
				diag_error(d, s[0]->loc, "layernorm's shape must be an integer or a list of integers");
				val_note_origin(d, s[0]);
				return false;
			}
		}
		if (s[1] && !get_eps(d, s[1], &n->a.ln.eps, &n->a.ln.eps_form))
			return false;
		return !s[2] || val_bool(d, s[2], "affine", &n->a.ln.affine);
	}
	case OP_GROUPNORM: {
		n->a.gn.eps = 1e-5;
		n->a.gn.momentum = 0.1;
		if (n->variant != VAR_NONE) {
			/* InstanceNorm1d/2d: a group per channel (the channels known
			 * once the input's shape is), no affine parameters unless asked */
			npos = 1;
			BIND("channels", "eps", "momentum", "affine", "track_running_stats");
			if (s[0] && !get_int(d, s[0], "channels", &n->a.gn.c, 1))
				return false;
			n->in_arg = s[0];
			if (s[1] && !get_eps(d, s[1], &n->a.gn.eps, &n->a.gn.eps_form))
				return false;
			if (s[2] && !val_num(d, s[2], "momentum", &n->a.gn.momentum))
				return false;
			n->a.gn.momentum_form = int_form(s[2]);
			if (s[3] && !val_bool(d, s[3], "affine", &n->a.gn.affine))
				return false;
			bool track = false;
			if (s[4] && !val_bool(d, s[4], "track_running_stats", &track))
				return false;
			if (track) {
				diag_error(d, s[4]->loc, "trainc's %s keeps no running statistics: it normalises each sample by its own, "
					   "in training and in evaluation (PyTorch's default, track_running_stats=False); leave "
					   "track_running_stats out, or use batchnorm%s for statistics kept across batches",
					   callee, n->variant == VAR_1D ? "1d" : "2d");
				return false;
			}
			return true;
		}
		npos = 2;
		BIND("groups", "channels", "eps", "affine");
		n->a.gn.affine = true;
		if (!s[0])
			return missing(d, call, callee, "a number of groups: groupnorm(groups) or groupnorm(groups, channels)");
		if (!get_int(d, s[0], "groups", &n->a.gn.groups, 1))
			return false;
		if (s[1] && !get_int(d, s[1], "channels", &n->a.gn.c, 1))
			return false;
		n->in_arg = s[1] ? s[1] : s[0];
		if (s[2] && !get_eps(d, s[2], &n->a.gn.eps, &n->a.gn.eps_form))
			return false;
		return !s[3] || val_bool(d, s[3], "affine", &n->a.gn.affine);
	}
	case OP_EMBEDDING: {
		npos = 2;
		BIND("num", "dim", "padding_idx");
		if (!s[0] || !s[1])
			return missing(d, call, callee, "a vocabulary size and a dimension: embedding(num, dim)");
		if (!get_int(d, s[0], "num_embeddings", &n->a.emb.num, 1) || !get_int(d, s[1], "embedding_dim", &n->a.emb.dim, 1))
			return false;
		n->a.emb.padding_idx = -1;
		if (s[2]) {
			int64_t p;
			if (!val_int(d, s[2], "padding_idx", &p))
				return false;
			if (p < 0)
				p += n->a.emb.num;
			if (p < 0 || p >= n->a.emb.num) {
				diag_error(d, s[2]->loc, "padding_idx must be within the %" PRId64 " embeddings", n->a.emb.num);
				return false;
			}
			n->a.emb.padding_idx = p;
		}
		return true;
	}
	case OP_DROPOUT: {
		npos = 1;
		BIND("p");
		n->a.drop.p = 0.5;
		if (s[0] && !val_num(d, s[0], "p", &n->a.drop.p))
			return false;
		n->a.drop.p_form = int_form(s[0]);
		if (n->a.drop.p < 0 || n->a.drop.p > 1) {
			char f[32];
			diag_error(d, s[0]->loc, "dropout probability must be between 0 and 1, not %s",
				   val_number_text(n->a.drop.p, f, sizeof f));
			val_note_origin(d, s[0]);
			return false;
		}
		return true;
	}
	case OP_FLATTEN: {
		npos = 2;
		if (n->variant == VAR_UNFLATTEN)
			return configure_unflatten(d, n, call, callee);
		if (n->variant == VAR_IDENTITY) {
			/* nn.Identity ignores what it is given; here an argument
			 * would only mislead the reader */
			n->a.flat.start = n->a.flat.start_arg = n->a.flat.end = n->a.flat.end_arg = 1;
			return no_arguments(d, callee, call);
		}
		BIND("start", "end");
		int64_t st = 1, en = -1;
		if (s[0] && !val_int(d, s[0], "start", &st))
			return false;
		if (s[1] && !val_int(d, s[1], "end", &en))
			return false;
		if (st < -8 || st > 8 || en < -8 || en > 8) {
			diag_error(d, call->loc, "flatten's dimensions are out of range");
			return false;
		}
		n->a.flat.start = n->a.flat.start_arg = (int)st; /* batch-inclusive; normalised by op_infer */
		n->a.flat.end = n->a.flat.end_arg = (int)en;
		return true;
	}
	case OP_GELU: {
		npos = 1;
		BIND("approximate");
		if (s[0]) {
			const char *m;
			if (!val_str(d, s[0], "approximate", &m))
				return false;
			if (strcmp(m, "tanh") == 0)
				n->a.gelu.tanh = true;
			else if (strcmp(m, "none") != 0) {
				diag_error(d, s[0]->loc, "approximate must be \"none\" or \"tanh\"");
				return false;
			}
		}
		return true;
	}
	case OP_LEAKY_RELU: {
		npos = 1;
		BIND("negative_slope");
		n->a.act.a = 0.01;
		return !s[0] || get_act_num(d, s[0], "negative_slope", &n->a.act.a, &n->a.act.a_form);
	}
	case OP_ELU: {
		npos = 1;
		BIND("alpha");
		n->a.act.a = 1.0;
		return !s[0] || get_act_num(d, s[0], "alpha", &n->a.act.a, &n->a.act.a_form);
	}
	case OP_SOFTPLUS: {
		npos = 2;
		BIND("beta", "threshold");
		n->a.act.a = 1;
		n->a.act.b = 20;
		n->a.act.a_form = (struct int_form){ true, 1 }; /* PyTorch's defaults are the integers 1 and 20 */
		n->a.act.b_form = (struct int_form){ true, 20 };
		if (s[0] && !get_act_num(d, s[0], "beta", &n->a.act.a, &n->a.act.a_form))
			return false;
		if (n->a.act.a == 0) {
			diag_error(d, s[0]->loc, "softplus's beta must not be 0: it divides by beta");
			val_note_origin(d, s[0]);
			return false;
		}
		return !s[1] || get_act_num(d, s[1], "threshold", &n->a.act.b, &n->a.act.b_form);
	}
	case OP_HARDTANH: {
		npos = 2;
		BIND("min_val", "max_val");
		n->a.act.a = -1;
		n->a.act.b = 1;
		if (s[0] && !get_act_num(d, s[0], "min_val", &n->a.act.a, &n->a.act.a_form))
			return false;
		if (s[1] && !get_act_num(d, s[1], "max_val", &n->a.act.b, &n->a.act.b_form))
			return false;
		if (n->a.act.b > n->a.act.a)
			return true;
		char lo[32], hi[32];
		const struct val *at = s[1] ? s[1] : s[0];
		diag_error(d, at->loc, "hardtanh's max_val (%s) must be above its min_val (%s), as nn.Hardtanh asserts",
			   val_number_text(n->a.act.b, hi, sizeof hi), val_number_text(n->a.act.a, lo, sizeof lo));
		val_note_origin(d, at);
		return false;
	}
	case OP_CELU: {
		npos = 1;
		BIND("alpha");
		n->a.act.a = 1.0;
		if (s[0] && !get_act_num(d, s[0], "alpha", &n->a.act.a, &n->a.act.a_form))
			return false;
		/* ATen's celu is elu with input_scale 1 / alpha, taken as a float32 */
		if (fabs(1.0 / n->a.act.a) <= FLT_MAX)
			return true;
		diag_error(d, s[0]->loc, "celu's alpha must not be 0%s: it divides by alpha",
			   n->a.act.a == 0 ? "" : " nor so small that 1 / alpha is beyond float32");
		val_note_origin(d, s[0]);
		return false;
	}
	case OP_SOFTSHRINK: case OP_HARDSHRINK: {
		npos = 1;
		BIND("lambd");
		n->a.act.a = 0.5;
		if (s[0] && !get_act_num(d, s[0], "lambd", &n->a.act.a, &n->a.act.a_form))
			return false;
		if (n->op == OP_HARDSHRINK || n->a.act.a >= 0)
			return true;
		char x[32];
		diag_error(d, s[0]->loc, "softshrink's lambd must be 0 or more, not %s, as PyTorch requires",
			   val_number_text(n->a.act.a, x, sizeof x));
		val_note_origin(d, s[0]);
		return false;
	}
	case OP_THRESHOLD: {
		npos = 2;
		BIND("threshold", "value");
		if (!s[0] || !s[1])
			return missing(d, call, callee, "a threshold and the value that replaces what is not above it: threshold(0.1, 0)");
		return get_act_num(d, s[0], "threshold", &n->a.act.a, &n->a.act.a_form) &&
		       get_act_num(d, s[1], "value", &n->a.act.b, &n->a.act.b_form);
	}
	case OP_PRELU: {
		/* nn.PReLU(num_parameters=1, init=0.25) */
		npos = 2;
		BIND("num_parameters", "init");
		n->a.prelu.num = 1;
		n->a.prelu.init = 0.25;
		if (s[0] && !get_int(d, s[0], "num_parameters", &n->a.prelu.num, 1))
			return false;
		return !s[1] || get_act_num(d, s[1], "init", &n->a.prelu.init, &n->a.prelu.init_form);
	}
	case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
		npos = 1;
		BIND("dim");
		int64_t dim = -1;
		if (s[0] && !val_int(d, s[0], "dim", &dim))
			return false;
		if (dim < -8 || dim > 8) {
			diag_error(d, s[0]->loc, "dim %" PRId64 " is out of range", dim);
			return false;
		}
		n->a.softmax.dim = n->a.softmax.written = (int)dim;
		return true;
	}
	case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SELU: case OP_SILU: case OP_RELU6: case OP_HARDSIGMOID:
	case OP_HARDSWISH: case OP_MISH: case OP_LOGSIGMOID: case OP_SOFTSIGN: case OP_TANHSHRINK:
		return no_arguments(d, callee, call);
	case OP_ADD: case OP_TRANSFER: case OP__COUNT:
		break;
	}
	return true;
}

static bool mul(int64_t a, int64_t b, int64_t *out)
{
	return !__builtin_mul_overflow(a, b, out) && *out <= ((int64_t)1 << 50);
}

int64_t shape_numel(const struct shape *s)
{
	int64_t n = 1;
	for (int k = 0; k < s->rank; k++)
		if (__builtin_mul_overflow(n, s->d[k], &n))
			return INT64_MAX; /* saturates: callers compare against their limits */
	return n;
}

const char *shape_str(const struct shape *s, char *buf, int n)
{
	int at = snprintf(buf, (size_t)n, "(");
	for (int k = 0; k < s->rank && at < n; k++)
		at += snprintf(buf + at, (size_t)(n - at), "%s%" PRId64, k ? ", " : "", s->d[k]);
	if (at < n)
		snprintf(buf + at, (size_t)(n - at), "%s)", s->rank == 1 ? "," : "");
	return buf;
}

/* "9216 = 64x12x12" when the producer flattened a shape, else "9216". */
static const char *size_origin(const struct node *prev, const struct node *pp, int64_t size, char *buf, int n)
{
	int at = snprintf(buf, (size_t)n, "%" PRId64, size);
	if (prev && prev->op == OP_FLATTEN && prev->variant == VAR_NONE && pp && pp->out.rank > 1) {
		at += snprintf(buf + at, (size_t)(n - at), " = ");
		for (int k = 0; k < pp->out.rank && at < n; k++)
			at += snprintf(buf + at, (size_t)(n - at), "%s%" PRId64, k ? "x" : "", pp->out.d[k]);
	}
	return buf;
}

static bool need_rank(struct diag *d, const struct node *n, const struct shape *in, int rank, const char *what)
{
	char b[96];
	if (in->rank != rank) {
		diag_error(d, n->loc, "%s expects %s input per sample, but the layer before it gives %s", n->what, what,
			   shape_str(in, b, sizeof b));
		return false;
	}
	return true;
}

/* Output length of a window of k taps (dilation dil) sliding by s over size
 * plus padding p each side: PyTorch's pooling_output_shape.  With ceil_mode
 * the division rounds up, so the last window may overhang the padded input
 * by up to s - 1 (a kernel larger than the padded input still gives one
 * output), but it must start inside the input or its left padding. */
static bool window(struct diag *d, const struct node *n, int64_t size, int64_t k, int64_t s, int64_t p, int64_t dil,
		   bool ceil_mode, int64_t *out)
{
	if (k - 1 > (EXTENT_MAX - 1) / dil || size + 2 * p > EXTENT_MAX) {
		diag_error(d, n->loc, "%s: kernel %" PRId64 " at dilation %" PRId64 " over %" PRId64 " padded by %" PRId64
			   " each side spans more than 2^31 - 1, the longest side trainc's kernels index", n->what, k, dil, size, p);
		return false;
	}
	int64_t eff = dil * (k - 1) + 1;
	int64_t span = size + 2 * p - eff + (ceil_mode ? s - 1 : 0);
	char dilated[48] = "";
	if (dil > 1)
		snprintf(dilated, sizeof dilated, " (dilated to %" PRId64 ")", eff);
	if (span < 0 && !ceil_mode) {
		diag_error(d, n->loc, "%s: kernel %" PRId64 "%s is larger than its padded input %" PRId64, n->what, k, dilated,
			   size + 2 * p);
		return false;
	}
	if (span < 0) {
		/* the largest kernel at this dilation, and the smallest stride, that fit */
		diag_error(d, n->loc, "%s: kernel %" PRId64 "%s is larger than its padded input %" PRId64 " by %" PRId64
			   ", more than the stride - 1 = %" PRId64 " that ceil_mode lets the last window overhang; use a kernel "
			   "of at most %" PRId64 " or a stride of at least %" PRId64,
			   n->what, k, dilated, size + 2 * p, eff - size - 2 * p, s - 1, (size + 2 * p + s - 2) / dil + 1,
			   eff - size - 2 * p + 1);
		return false;
	}
	int64_t o = span / s + 1;
	if (ceil_mode && (o - 1) * s >= size + p)
		o--;
	*out = o;
	return true;
}

/* Output length of a zero pad: size plus both sides, a negative side
 * cropping, as in PyTorch.  PyTorch takes crops down to an empty output,
 * which no later layer can take: at least one row and column must remain. */
static bool padded(struct diag *d, const struct node *n, const char *dim, const char *a, const char *b, int64_t size,
		   int64_t pa, int64_t pb, int64_t *out)
{
	*out = size + pa + pb;
	if (*out >= 1)
		return true;
	diag_error(d, n->loc, "%s: padding %s %" PRId64 " and %s %" PRId64 " take the input's %s of %" PRId64 " to %" PRId64
		   "; a negative padding crops, and at least 1 must remain", n->what, a, pa, b, pb, dim, size, *out);
	return false;
}

/* Token ids (input(..., dtype="long")) are carried as integers: only an
 * embedding reads them, and flatten (a view) and a transfer (a copy) pass
 * them on; every other layer computes on float values. */
static bool takes_ids(enum op op)
{
	return op == OP_EMBEDDING || op == OP_FLATTEN || op == OP_TRANSFER;
}

static bool need_float(struct diag *d, const struct node *n, const struct node *src)
{
	if (!src || src->dtype == DT_F32 || takes_ids(n->op))
		return true;
	diag_error(d, n->loc, "%s needs float input, but %s gives it long (int64) token ids; turn the ids into vectors with an embedding first",
		   n->what, src->op == OP_INPUT ? "the model's input" : src->what);
	return false;
}

static const char *sizes_str(const struct node *n, char *buf, int l)
{
	int at = snprintf(buf, (size_t)l, "%s", n->a.flat.sform == FORM_LIST ? "[" : "(");
	for (int k = 0; k < n->a.flat.nsizes && at < l; k++)
		at += snprintf(buf + at, (size_t)(l - at), "%s%" PRId64, k ? ", " : "", n->a.flat.sizes[k]);
	if (at < l)
		snprintf(buf + at, (size_t)(l - at), "%s", n->a.flat.sform == FORM_LIST ? "]" : n->a.flat.nsizes == 1 ? ",)" : ")");
	return buf;
}

/* unflatten splits per-sample dimension dim - 1 (dim counts the batch as
 * 0, as Tensor.unflatten's does) into its sizes, -1 taking the rest. */
static bool infer_unflatten(struct diag *d, struct node *n, const struct shape *in)
{
	char b1[96], b2[96];
	int full = in->rank + 1;
	int dim = n->a.flat.start < 0 ? n->a.flat.start + full : n->a.flat.start;
	if (dim < 1 || dim >= full) {
		char dims[64];
		if (in->rank == 1)
			snprintf(dims, sizeof dims, "dimension is 1 (or -1)");
		else
			snprintf(dims, sizeof dims, "dimensions are 1 to %d (or -%d to -1)", in->rank, in->rank);
		diag_error(d, n->loc, "%s: cannot split dimension %d of a batch of %s samples: dimension 0 is the batch, which "
			   "stays whole, and a sample's %s", n->what, n->a.flat.start, shape_str(in, b1, sizeof b1), dims);
		return false;
	}
	int k = dim - 1, ns = n->a.flat.nsizes;
	if (in->rank - 1 + ns > SHAPE_MAX) {
		diag_error(d, n->loc, "%s: its output would have %d dimensions per sample, more than trainc's %d", n->what,
			   in->rank - 1 + ns, SHAPE_MAX);
		return false;
	}
	int64_t known = 1, size = in->d[k];
	int hole = -1;
	for (int j = 0; j < ns; j++)
		if (n->a.flat.sizes[j] < 0)
			hole = j;
		else if (known <= size && !mul(known, n->a.flat.sizes[j], &known))
			known = size + 1; /* past it either way */
	int64_t fill = size % known == 0 ? size / known : 0;
	if (hole < 0 ? known != size : fill == 0) {
		diag_error(d, n->loc, "%s: sizes %s %s the size of the dimension it splits, %" PRId64 " (of %s)", n->what,
			   sizes_str(n, b2, sizeof b2), hole < 0 ? "do not multiply up to" : "cannot be completed to", size,
			   shape_str(in, b1, sizeof b1));
		return false;
	}
	struct shape o = { 0, { 0 } };
	for (int j = 0; j < k; j++)
		o.d[o.rank++] = in->d[j];
	for (int j = 0; j < ns; j++)
		o.d[o.rank++] = j == hole ? fill : n->a.flat.sizes[j];
	for (int j = k + 1; j < in->rank; j++)
		o.d[o.rank++] = in->d[j];
	n->out = o;
	n->a.flat.start = n->a.flat.end = k;
	n->alias = n->in;
	return true;
}

bool op_infer(struct diag *d, struct node *n, const struct node *prev, const struct node *pp)
{
	struct shape in = prev ? prev->out : n->out;
	char b1[96], b2[96];
	n->out = in;
	if (!need_float(d, n, prev) || (n->op == OP_ADD && !need_float(d, n, pp)))
		return false;
	switch (n->op) {
	case OP_INPUT:
		n->out = n->out; /* set by op_configure */
		return true;
	case OP_LINEAR: {
		int64_t f = in.d[in.rank - 1];
		if (n->a.linear.in && n->a.linear.in != f && in.rank > 1) {
			/* most often a flatten left out after a conv or pool: say
			 * what flattening would give, and whether it fits */
			int64_t all = shape_numel(&in);
			char prod[96];
			int at = 0;
			for (int k = 0; k < in.rank && at < (int)sizeof prod; k++)
				at += snprintf(prod + at, sizeof prod - (size_t)at, "%s%" PRId64, k ? "x" : "", in.d[k]);
			if (all == n->a.linear.in)
				diag_error(d, n->loc, "%s expects %" PRId64 " input features, but its input is %s and linear works on the last "
					   "dimension (%" PRId64 "); add flatten before it: %s = %" PRId64,
					   n->what, n->a.linear.in, shape_str(&in, b1, sizeof b1), f, prod, all);
			else
				diag_error(d, n->loc, "%s expects %" PRId64 " input features, but its input is %s and linear works on the last "
					   "dimension (%" PRId64 "); a flatten before it would give %s = %" PRId64 ", not %" PRId64 " either",
					   n->what, n->a.linear.in, shape_str(&in, b1, sizeof b1), f, prod, all, n->a.linear.in);
			n->blame = n->in_arg;
			return false;
		}
		if (n->a.linear.in && n->a.linear.in != f) {
			diag_error(d, n->loc, "%s expects %" PRId64 " input features, but the layer before it gives %s", n->what,
				   n->a.linear.in, size_origin(prev, pp, f, b1, sizeof b1));
			n->blame = n->in_arg;
			return false;
		}
		n->a.linear.in = f;
		n->out.d[in.rank - 1] = n->a.linear.out;
		return true;
	}
	case OP_CONV2D: {
		if (!need_rank(d, n, &in, one_d(n) ? 2 : 3, one_d(n) ? "(channels, length)" : "(channels, height, width)"))
			return false;
		if (n->a.conv.cin && n->a.conv.cin != in.d[0]) {
			diag_error(d, n->loc, "%s expects %" PRId64 " input channels, but the layer before it gives %" PRId64 " (shape %s)",
				   n->what, n->a.conv.cin, in.d[0], shape_str(&in, b1, sizeof b1));
			n->blame = n->in_arg;
			return false;
		}
		n->a.conv.cin = in.d[0];
		if (n->a.conv.cin % n->a.conv.groups != 0) {
			diag_error(d, n->loc, "%s: in_channels %" PRId64 " is not divisible by groups %" PRId64, n->what, n->a.conv.cin,
				   n->a.conv.groups);
			return false;
		}
		n->out.d[0] = n->a.conv.cout;
		if (one_d(n))
			return window(d, n, in.d[1], n->a.conv.kw, n->a.conv.sw, n->a.conv.pw, n->a.conv.dw, false, &n->out.d[1]);
		return window(d, n, in.d[1], n->a.conv.kh, n->a.conv.sh, n->a.conv.ph, n->a.conv.dh, false, &n->out.d[1]) &&
		       window(d, n, in.d[2], n->a.conv.kw, n->a.conv.sw, n->a.conv.pw, n->a.conv.dw, false, &n->out.d[2]);
	}
	case OP_MAXPOOL2D: case OP_AVGPOOL2D:
		if (!need_rank(d, n, &in, one_d(n) ? 2 : 3, one_d(n) ? "(channels, length)" : "(channels, height, width)"))
			return false;
		if (one_d(n))
			return window(d, n, in.d[1], n->a.pool.kw, n->a.pool.sw, n->a.pool.pw, n->a.pool.dw, n->a.pool.ceil_mode,
				      &n->out.d[1]);
		return window(d, n, in.d[1], n->a.pool.kh, n->a.pool.sh, n->a.pool.ph, n->a.pool.dh, n->a.pool.ceil_mode, &n->out.d[1]) &&
		       window(d, n, in.d[2], n->a.pool.kw, n->a.pool.sw, n->a.pool.pw, n->a.pool.dw, n->a.pool.ceil_mode, &n->out.d[2]);
	case OP_ADAPTIVE_AVGPOOL2D: case OP_ADAPTIVE_MAXPOOL2D:
		if (!need_rank(d, n, &in, one_d(n) ? 2 : 3, one_d(n) ? "(channels, length)" : "(channels, height, width)"))
			return false;
		if (one_d(n))
			n->out.d[1] = n->a.apool.ow;
		else {
			n->out.d[1] = n->a.apool.oh;
			n->out.d[2] = n->a.apool.ow;
		}
		return true;
	case OP_ZEROPAD2D: {
		/* the last two dimensions, as F.pad pads them, whatever comes
		 * before them: (height, width), (channels, height, width), ... */
		if (in.rank < 2) {
			diag_error(d, n->loc, "%s expects (height, width) input per sample, or more dimensions before them, but the "
				   "layer before it gives %s", n->what, shape_str(&in, b1, sizeof b1));
			return false;
		}
		int h = in.rank - 2, w = in.rank - 1;
		return padded(d, n, "height", "top", "bottom", in.d[h], n->a.pad.top, n->a.pad.bottom, &n->out.d[h]) &&
		       padded(d, n, "width", "left", "right", in.d[w], n->a.pad.left, n->a.pad.right, &n->out.d[w]);
	}
	case OP_BATCHNORM1D: case OP_BATCHNORM2D:
		/* BatchNorm1d takes (N, C) or (N, C, L): per sample (C,) or
		 * (C, L), the channels first either way */
		if (n->op == OP_BATCHNORM1D && in.rank != 1 && in.rank != 2) {
			diag_error(d, n->loc, "%s expects (channels,) or (channels, length) input per sample, but the layer before it gives %s%s",
				   n->what, shape_str(&in, b1, sizeof b1), in.rank == 3 ? "; batchnorm2d takes (channels, height, width)" : "");
			return false;
		}
		if (n->op == OP_BATCHNORM2D && in.rank != 3) {
			diag_error(d, n->loc, "%s expects (channels, height, width) input per sample, but the layer before it gives %s%s",
				   n->what, shape_str(&in, b1, sizeof b1),
				   in.rank <= 2 ? "; batchnorm1d takes (channels,) or (channels, length)" : "");
			return false;
		}
		if (n->a.bn.c && n->a.bn.c != in.d[0]) {
			diag_error(d, n->loc, "%s expects %" PRId64 " channels, but the layer before it gives %" PRId64, n->what, n->a.bn.c,
				   in.d[0]);
			n->blame = n->in_arg;
			return false;
		}
		n->a.bn.c = in.d[0];
		return true;
	case OP_LAYERNORM:
		if (n->a.ln.nd == 0) {
			n->a.ln.nd = 1;
			n->a.ln.d[0] = in.d[in.rank - 1];
		}
		if (n->a.ln.nd > in.rank) {
			diag_error(d, n->loc, "%s normalizes %d dimensions, but its input %s has only %d", n->what, n->a.ln.nd,
				   shape_str(&in, b1, sizeof b1), in.rank);
			n->blame = n->in_arg;
			return false;
		}
		for (int k = 0; k < n->a.ln.nd; k++) {
			if (n->a.ln.d[k] != in.d[in.rank - n->a.ln.nd + k]) {
				struct shape ns = { n->a.ln.nd, { 0 } };
				memcpy(ns.d, n->a.ln.d, sizeof ns.d);
				diag_error(d, n->loc, "%s normalizes over %s, but its input ends in a different shape: %s", n->what,
					   shape_str(&ns, b1, sizeof b1), shape_str(&in, b2, sizeof b2));
				n->blame = n->in_arg;
				return false;
			}
		}
		return true;
	case OP_GROUPNORM:
		/* GroupNorm takes (N, C, *): per sample the channels first;
		 * InstanceNorm1d (N, C, L) and InstanceNorm2d (N, C, H, W) */
		if (n->variant != VAR_NONE && in.rank != (n->variant == VAR_1D ? 2 : 3)) {
			diag_error(d, n->loc, "%s expects %s input per sample, but the layer before it gives %s%s", n->what,
				   n->variant == VAR_1D ? "(channels, length)" : "(channels, height, width)", shape_str(&in, b1, sizeof b1),
				   n->variant == VAR_1D && in.rank == 3 ? "; instancenorm2d takes (channels, height, width)"
				   : n->variant == VAR_2D && in.rank == 2 ? "; instancenorm1d takes (channels, length)" : "");
			return false;
		}
		if (n->a.gn.c && n->a.gn.c != in.d[0]) {
			diag_error(d, n->loc, "%s expects %" PRId64 " channels, but the layer before it gives %" PRId64, n->what, n->a.gn.c,
				   in.d[0]);
			n->blame = n->in_arg;
			return false;
		}
		n->a.gn.c = in.d[0];
		if (n->variant != VAR_NONE)
			n->a.gn.groups = n->a.gn.c;
		if (n->a.gn.c % n->a.gn.groups != 0) {
			diag_error(d, n->loc, "%s splits %" PRId64 " channels into %" PRId64 " groups, which does not divide them; give a "
				   "number of groups that divides the channels", n->what, n->a.gn.c, n->a.gn.groups);
			n->blame = n->in_arg;
			return false;
		}
		if (shape_numel(&in) / n->a.gn.groups > INT32_MAX) {
			diag_error(d, n->loc, "%s: a group of %" PRId64 " elements is more than the kernels index (2^31 - 1)", n->what,
				   shape_numel(&in) / n->a.gn.groups);
			return false;
		}
		return true;
	case OP_EMBEDDING:
		if (prev && prev->dtype != DT_I64) {
			diag_error(d, n->loc, "%s needs integer token ids; declare the model's input as input(..., dtype=\"long\")", n->what);
			return false;
		}
		if (in.rank == SHAPE_MAX) {
			diag_error(d, n->loc, "%s: input has too many dimensions", n->what);
			return false;
		}
		n->out.d[n->out.rank++] = n->a.emb.dim;
		n->dtype = DT_F32;
		return true;
	case OP_FLATTEN: {
		if (n->variant == VAR_UNFLATTEN)
			return infer_unflatten(d, n, &in);
		/* dims count the batch as 0, as torch.flatten does */
		int full = in.rank + 1;
		int st = n->a.flat.start < 0 ? n->a.flat.start + full : n->a.flat.start;
		int en = n->a.flat.end < 0 ? n->a.flat.end + full : n->a.flat.end;
		if (st < 1 || en >= full || st > en) {
			diag_error(d, n->loc, "%s: cannot flatten dimensions %d..%d of a %d-dimensional batch (the batch is dimension 0)",
				   n->what, n->a.flat.start, n->a.flat.end, full);
			return false;
		}
		n->a.flat.start = st - 1;
		n->a.flat.end = en - 1;
		struct shape o = { 0, { 0 } };
		for (int k = 0; k < st - 1; k++)
			o.d[o.rank++] = in.d[k];
		int64_t m = 1;
		for (int k = st - 1; k <= en - 1; k++)
			if (!mul(m, in.d[k], &m)) {
				diag_error(d, n->loc, "%s: flattened size is too large", n->what);
				return false;
			}
		o.d[o.rank++] = m;
		for (int k = en; k < in.rank; k++)
			o.d[o.rank++] = in.d[k];
		n->out = o;
		n->alias = n->in;
		return true;
	}
	case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
		int full = in.rank + 1;
		int dim = n->a.softmax.dim < 0 ? n->a.softmax.dim + full : n->a.softmax.dim;
		if (dim < 1 || dim >= full) {
			diag_error(d, n->loc, "%s: dim %d is %s for a %d-dimensional batch", n->what, n->a.softmax.dim,
				   dim == 0 ? "the batch dimension, which cannot be normalized" : "out of range", full);
			return false;
		}
		n->a.softmax.dim = dim - 1;
		return true;
	}
	case OP_DROPOUT:
		/* a mask per (sample, channel): PyTorch 1.13 takes other ranks with
		 * a warning and drops along dimension 1 anyway */
		if (n->variant != VAR_NONE && in.rank != (n->variant == VAR_1D ? 2 : 3)) {
			bool one = n->variant == VAR_1D;
			diag_error(d, n->loc, "%s drops whole channels of a %s sample, but its input is %s; %s", n->what,
				   one ? "(channels, length)" : "(channels, height, width)", shape_str(&in, b1, sizeof b1),
				   in.rank == 2 ? "use dropout1d for the channels of (C, L)"
				   : in.rank == 3 ? "use dropout2d for the channels of (C, H, W)"
						  : "use dropout for one draw per element");
			return false;
		}
		return true;
	case OP_RELU: case OP_GELU: case OP_TANH: case OP_SIGMOID: case OP_TRANSFER:
	OP_ACT_CASES:
		return true;
	case OP_PRELU:
		/* one weight, or one per channel: the first per-sample dimension,
		 * as F.prelu takes dimension 1 of the batch */
		if (n->a.prelu.num != 1 && n->a.prelu.num != in.d[0]) {
			diag_error(d, n->loc, "%s has %" PRId64 " weights, one per channel, but its input %s has %" PRId64
				   " channels (its first dimension); use num_parameters=%" PRId64 ", or 1 for one weight shared by all",
				   n->what, n->a.prelu.num, shape_str(&in, b1, sizeof b1), in.d[0], in.d[0]);
			return false;
		}
		return true;
	case OP_ADD:
		if (pp && (pp->out.rank != in.rank || memcmp(pp->out.d, in.d, sizeof in.d) != 0)) {
			diag_error(d, n->loc, "residual body changes the shape from %s to %s; the sum needs them equal",
				   shape_str(&pp->out, b1, sizeof b1), shape_str(&in, b2, sizeof b2));
			return false;
		}
		return true;
	case OP__COUNT:
		break;
	}
	return true;
}

static struct shape sh1(int64_t a)
{
	struct shape s = { 1, { a } };
	return s;
}

/* A dilated max-pool window that starts in the left padding can step over
 * the whole input (every start is below the input's end, and a window
 * starting inside holds its first tap): PyTorch gives -inf there. */
static bool warn_empty_window(struct diag *d, const struct node *n, const char *axis, const char *dim, int64_t size,
			      int64_t k, int64_t s, int64_t p, int64_t dil, int64_t out)
{
	for (int64_t o = 0; o < out && o * s < p; o++) {
		int64_t start = o * s - p, first = start + (-start + dil - 1) / dil * dil; /* the first tap at or past 0 */
		if (first < size && first <= start + (k - 1) * dil)
			continue;
		diag_warning(d, n->loc, "%s: output %s %" PRId64 "'s window has no tap inside the input (%s %" PRId64 ", padding %" PRId64
			     ", dilation %" PRId64 "): its value is -inf, as in PyTorch, and the loss will not be finite; use less "
			     "padding or dilation", n->what, axis, o, dim, size, p, dil);
		return true;
	}
	return false;
}

void op_warn(struct diag *d, const struct node *n, const struct node *prev)
{
	if (n->op != OP_MAXPOOL2D)
		return;
	const struct shape *in = &prev->out;
	if (one_d(n)) {
		warn_empty_window(d, n, "position", "length", in->d[1], n->a.pool.kw, n->a.pool.sw, n->a.pool.pw, n->a.pool.dw,
				  n->out.d[1]);
		return;
	}
	if (!warn_empty_window(d, n, "row", "height", in->d[1], n->a.pool.kh, n->a.pool.sh, n->a.pool.ph, n->a.pool.dh, n->out.d[1]))
		warn_empty_window(d, n, "column", "width", in->d[2], n->a.pool.kw, n->a.pool.sw, n->a.pool.pw, n->a.pool.dw, n->out.d[2]);
}

int op_params(const struct node *n, struct param_spec out[5])
{
	int k = 0;
	switch (n->op) {
	case OP_LINEAR:
		out[k++] = (struct param_spec){ "weight", ROLE_WEIGHT, { 2, { n->a.linear.out, n->a.linear.in } }, DT_F32,
						INIT_KAIMING_UNIFORM, n->a.linear.in, false };
		if (n->a.linear.bias)
			out[k++] = (struct param_spec){ "bias", ROLE_BIAS, sh1(n->a.linear.out), DT_F32, INIT_BIAS_UNIFORM, n->a.linear.in, false };
		break;
	case OP_CONV2D: {
		int64_t fan = n->a.conv.cin / n->a.conv.groups * n->a.conv.kh * n->a.conv.kw;
		struct shape w = { 4, { n->a.conv.cout, n->a.conv.cin / n->a.conv.groups, n->a.conv.kh, n->a.conv.kw } };
		if (one_d(n)) /* Conv1d's (out, in / groups, kernel): the same floats */
			w = (struct shape){ 3, { n->a.conv.cout, n->a.conv.cin / n->a.conv.groups, n->a.conv.kw } };
		out[k++] = (struct param_spec){ "weight", ROLE_WEIGHT, w, DT_F32, INIT_KAIMING_UNIFORM, fan, false };
		if (n->a.conv.bias)
			out[k++] = (struct param_spec){ "bias", ROLE_BIAS, sh1(n->a.conv.cout), DT_F32, INIT_BIAS_UNIFORM, fan, false };
		break;
	}
	case OP_BATCHNORM1D: case OP_BATCHNORM2D:
		if (n->a.bn.affine) {
			out[k++] = (struct param_spec){ "weight", ROLE_WEIGHT, sh1(n->a.bn.c), DT_F32, INIT_ONES, 0, false };
			out[k++] = (struct param_spec){ "bias", ROLE_BIAS, sh1(n->a.bn.c), DT_F32, INIT_ZEROS, 0, false };
		}
		if (n->a.bn.track) {
			out[k++] = (struct param_spec){ "running_mean", ROLE_RUNNING_MEAN, sh1(n->a.bn.c), DT_F32, INIT_ZEROS, 0, true };
			out[k++] = (struct param_spec){ "running_var", ROLE_RUNNING_VAR, sh1(n->a.bn.c), DT_F32, INIT_ONES, 0, true };
			out[k++] = (struct param_spec){ "num_batches_tracked", ROLE_NUM_BATCHES, { 0, { 0 } }, DT_I64, INIT_ZEROS, 0, true };
		}
		break;
	case OP_LAYERNORM:
		if (n->a.ln.affine) {
			struct shape s = { n->a.ln.nd, { 0 } };
			memcpy(s.d, n->a.ln.d, sizeof s.d);
			out[k++] = (struct param_spec){ "weight", ROLE_WEIGHT, s, DT_F32, INIT_ONES, 0, false };
			out[k++] = (struct param_spec){ "bias", ROLE_BIAS, s, DT_F32, INIT_ZEROS, 0, false };
		}
		break;
	case OP_GROUPNORM:
		if (n->a.gn.affine) {
			out[k++] = (struct param_spec){ "weight", ROLE_WEIGHT, sh1(n->a.gn.c), DT_F32, INIT_ONES, 0, false };
			out[k++] = (struct param_spec){ "bias", ROLE_BIAS, sh1(n->a.gn.c), DT_F32, INIT_ZEROS, 0, false };
		}
		break;
	case OP_EMBEDDING:
		out[k++] = (struct param_spec){ "weight", ROLE_WEIGHT, { 2, { n->a.emb.num, n->a.emb.dim } }, DT_F32, INIT_NORMAL, 0, false };
		break;
	case OP_PRELU:
		out[k++] = (struct param_spec){ "weight", ROLE_WEIGHT, sh1(n->a.prelu.num), DT_F32, INIT_PRELU, 0, false };
		break;
	default:
		break;
	}
	return k;
}

static const char *pybool(bool b)
{
	return b ? "True" : "False";
}

/* A size as PyTorch's repr shows it: 2, (2, 3) or [2, 3], as written. */
static const char *pysize(int64_t a, int64_t b, enum size_form form, char *buf, int n)
{
	if (form == FORM_INT)
		snprintf(buf, (size_t)n, "%" PRId64, a);
	else
		snprintf(buf, (size_t)n, form == FORM_LIST ? "[%" PRId64 ", %" PRId64 "]" : "(%" PRId64 ", %" PRId64 ")", a, b);
	return buf;
}

/* a 1-D layer's size as PyTorch keeps it: 3, (3,) or [3] */
static const char *pysize1(int64_t a, enum size_form form, char *buf, int n)
{
	snprintf(buf, (size_t)n, form == FORM_INT ? "%" PRId64 : form == FORM_LIST ? "[%" PRId64 "]" : "(%" PRId64 ",)", a);
	return buf;
}

/* Python's repr of a number argument as PyTorch keeps it: an integer as
 * written (eps=0, p=1), a float as Python's repr writes it (1e-05,
 * 0.30000000000000004, 0.0). */
static const char *pynum(double v, struct int_form form, char *buf, int n)
{
	if (form.is_int)
		snprintf(buf, (size_t)n, "%" PRId64, form.i);
	else
		val_float_repr(v, buf, (size_t)n);
	return buf;
}

/* A conv's size as its repr shows it: (w,) for Conv1d, as _single makes
 * it, (h, w) for Conv2d */
static const char *conv_size(const struct node *c, int64_t h, int64_t w, char *buf, int n)
{
	if (one_d(c))
		snprintf(buf, (size_t)n, "(%" PRId64 ",)", w);
	else
		snprintf(buf, (size_t)n, "(%" PRId64 ", %" PRId64 ")", h, w);
	return buf;
}

void op_describe(const struct node *n, char *buf, int len)
{
	const char *t = op_class(n);
	char f1[32], f2[32];
	size_t l = (size_t)len;
	switch (n->op) {
	case OP_INPUT: {
		char b[96];
		snprintf(buf, l, "Input(shape=%s%s)", shape_str(&n->out, b, sizeof b), n->dtype == DT_I64 ? ", dtype=long" : "");
		return;
	}
	case OP_LINEAR:
		snprintf(buf, l, "%s(in_features=%" PRId64 ", out_features=%" PRId64 ", bias=%s)", t, n->a.linear.in, n->a.linear.out,
			 pybool(n->a.linear.bias));
		return;
	case OP_CONV2D: {
		/* a 1-D conv's height sizes are 1 and its padding 0 */
		const struct node *c = n;
		char k[48], st[48], x[48];
		int at = snprintf(buf, l, "%s(%" PRId64 ", %" PRId64 ", kernel_size=%s, stride=%s", t, c->a.conv.cin, c->a.conv.cout,
				  conv_size(c, c->a.conv.kh, c->a.conv.kw, k, sizeof k),
				  conv_size(c, c->a.conv.sh, c->a.conv.sw, st, sizeof st));
		if ((c->a.conv.valid || c->a.conv.same) && at < len)
			at += snprintf(buf + at, l - (size_t)at, ", padding=%s", c->a.conv.valid ? "valid" : "same");
		else if ((c->a.conv.ph || c->a.conv.pw) && at < len)
			at += snprintf(buf + at, l - (size_t)at, ", padding=%s", conv_size(c, c->a.conv.ph, c->a.conv.pw, x, sizeof x));
		if ((c->a.conv.dh != 1 || c->a.conv.dw != 1) && at < len)
			at += snprintf(buf + at, l - (size_t)at, ", dilation=%s", conv_size(c, c->a.conv.dh, c->a.conv.dw, x, sizeof x));
		if (c->a.conv.groups != 1 && at < len)
			at += snprintf(buf + at, l - (size_t)at, ", groups=%" PRId64, c->a.conv.groups);
		if (!c->a.conv.bias && at < len)
			at += snprintf(buf + at, l - (size_t)at, ", bias=False");
		if (at < len)
			snprintf(buf + at, l - (size_t)at, ")");
		return;
	}
	case OP_MAXPOOL2D: case OP_AVGPOOL2D: {
		const struct node *c = n;
		char k[48], s[48], p[48], dl[48];
		if (one_d(c)) {
			/* AvgPool1d makes each a tuple of one; MaxPool1d keeps them as given */
			bool avg = n->op == OP_AVGPOOL2D;
			pysize1(c->a.pool.kw, avg ? FORM_TUPLE : c->a.pool.kform, k, sizeof k);
			pysize1(c->a.pool.sw, avg ? FORM_TUPLE : c->a.pool.sform, s, sizeof s);
			pysize1(c->a.pool.pw, avg ? FORM_TUPLE : c->a.pool.pform, p, sizeof p);
			pysize1(c->a.pool.dw, c->a.pool.dform, dl, sizeof dl);
		} else {
			pysize(c->a.pool.kh, c->a.pool.kw, c->a.pool.kform, k, sizeof k);
			pysize(c->a.pool.sh, c->a.pool.sw, c->a.pool.sform, s, sizeof s);
			pysize(c->a.pool.ph, c->a.pool.pw, c->a.pool.pform, p, sizeof p);
			pysize(c->a.pool.dh, c->a.pool.dw, c->a.pool.dform, dl, sizeof dl);
		}
		if (n->op == OP_MAXPOOL2D)
			snprintf(buf, l, "%s(kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s)", t, k, s, p, dl,
				 pybool(c->a.pool.ceil_mode));
		else
			snprintf(buf, l, "%s(kernel_size=%s, stride=%s, padding=%s)", t, k, s, p);
		return;
	}
	case OP_ADAPTIVE_AVGPOOL2D: case OP_ADAPTIVE_MAXPOOL2D:
		snprintf(buf, l, "%s(output_size=%s)", t,
			 one_d(n) ? pysize1(n->a.apool.ow, n->a.apool.form, f1, sizeof f1)
				  : pysize(n->a.apool.oh, n->a.apool.ow, n->a.apool.form, f1, sizeof f1));
		return;
	case OP_ZEROPAD2D: /* PyTorch keeps the four sides as a tuple, whatever was given */
		snprintf(buf, l, "%s((%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "))", t, n->a.pad.left, n->a.pad.right,
			 n->a.pad.top, n->a.pad.bottom);
		return;
	case OP_BATCHNORM1D: case OP_BATCHNORM2D:
		snprintf(buf, l, "%s(%" PRId64 ", eps=%s, momentum=%s, affine=%s, track_running_stats=%s)", t, n->a.bn.c,
			 pynum(n->a.bn.eps, n->a.bn.eps_form, f1, sizeof f1), pynum(n->a.bn.momentum, n->a.bn.momentum_form, f2, sizeof f2), pybool(n->a.bn.affine),
			 pybool(n->a.bn.track));
		return;
	case OP_LAYERNORM: {
		struct shape s = { n->a.ln.nd, { 0 } };
		char b[96];
		memcpy(s.d, n->a.ln.d, sizeof s.d);
		snprintf(buf, l, "%s(%s, eps=%s, elementwise_affine=%s)", t, shape_str(&s, b, sizeof b), pynum(n->a.ln.eps, n->a.ln.eps_form, f1, sizeof f1),
			 pybool(n->a.ln.affine));
		return;
	}
	case OP_GROUPNORM:
		if (n->variant != VAR_NONE)
			snprintf(buf, l, "%s(%" PRId64 ", eps=%s, momentum=%s, affine=%s, track_running_stats=False)", t, n->a.gn.c,
				 pynum(n->a.gn.eps, n->a.gn.eps_form, f1, sizeof f1),
				 pynum(n->a.gn.momentum, n->a.gn.momentum_form, f2, sizeof f2), pybool(n->a.gn.affine));
		else
			snprintf(buf, l, "%s(%" PRId64 ", %" PRId64 ", eps=%s, affine=%s)", t, n->a.gn.groups, n->a.gn.c,
				 pynum(n->a.gn.eps, n->a.gn.eps_form, f1, sizeof f1), pybool(n->a.gn.affine));
		return;
	case OP_EMBEDDING:
		if (n->a.emb.padding_idx >= 0)
			snprintf(buf, l, "%s(%" PRId64 ", %" PRId64 ", padding_idx=%" PRId64 ")", t, n->a.emb.num, n->a.emb.dim, n->a.emb.padding_idx);
		else
			snprintf(buf, l, "%s(%" PRId64 ", %" PRId64 ")", t, n->a.emb.num, n->a.emb.dim);
		return;
	case OP_DROPOUT:
		snprintf(buf, l, "%s(p=%s, inplace=False)", t, pynum(n->a.drop.p, n->a.drop.p_form, f1, sizeof f1));
		return;
	case OP_FLATTEN:
		if (n->variant == VAR_UNFLATTEN) {
			char sz[96];
			snprintf(buf, l, "%s(dim=%d, unflattened_size=%s)", t, n->a.flat.start_arg, sizes_str(n, sz, sizeof sz));
		} else if (n->variant == VAR_IDENTITY)
			snprintf(buf, l, "%s()", t);
		else
			snprintf(buf, l, "%s(start_dim=%d, end_dim=%d)", t, n->a.flat.start_arg, n->a.flat.end_arg);
		return;
	case OP_GELU:
		snprintf(buf, l, "%s(approximate='%s')", t, n->a.gelu.tanh ? "tanh" : "none");
		return;
	case OP_LEAKY_RELU:
		snprintf(buf, l, "%s(negative_slope=%s)", t, pynum(n->a.act.a, n->a.act.a_form, f1, sizeof f1));
		return;
	case OP_ELU: case OP_CELU:
		snprintf(buf, l, "%s(alpha=%s)", t, pynum(n->a.act.a, n->a.act.a_form, f1, sizeof f1));
		return;
	case OP_SOFTSHRINK: case OP_HARDSHRINK: /* PyTorch prints the bare number */
		snprintf(buf, l, "%s(%s)", t, pynum(n->a.act.a, n->a.act.a_form, f1, sizeof f1));
		return;
	case OP_THRESHOLD:
		snprintf(buf, l, "%s(threshold=%s, value=%s)", t, pynum(n->a.act.a, n->a.act.a_form, f1, sizeof f1),
			 pynum(n->a.act.b, n->a.act.b_form, f2, sizeof f2));
		return;
	case OP_HARDTANH:
		snprintf(buf, l, "%s(min_val=%s, max_val=%s)", t, pynum(n->a.act.a, n->a.act.a_form, f1, sizeof f1),
			 pynum(n->a.act.b, n->a.act.b_form, f2, sizeof f2));
		return;
	case OP_SOFTPLUS:
		snprintf(buf, l, "%s(beta=%s, threshold=%s)", t, pynum(n->a.act.a, n->a.act.a_form, f1, sizeof f1),
			 pynum(n->a.act.b, n->a.act.b_form, f2, sizeof f2));
		return;
	case OP_PRELU:
		snprintf(buf, l, "%s(num_parameters=%" PRId64 ")", t, n->a.prelu.num);
		return;
	case OP_SOFTMAX: case OP_LOG_SOFTMAX:
		snprintf(buf, l, "%s(dim=%d)", t, n->a.softmax.written); /* as written, as PyTorch prints it */
		return;
	case OP_TRANSFER:
		snprintf(buf, l, "Transfer(device %d -> device %d)", n->a.xfer.from, n->a.xfer.to);
		return;
	default:
		snprintf(buf, l, "%s()", t);
		return;
	}
}

int64_t op_saved_bytes(const struct node *n, int64_t batch)
{
	int64_t numel = shape_numel(&n->out) * batch;
	switch (n->op) {
	case OP_DROPOUT: return numel;                    /* uint8 mask */
	case OP_MAXPOOL2D: case OP_ADAPTIVE_MAXPOOL2D: return numel * 4; /* int32 argmax */
	case OP_BATCHNORM1D: case OP_BATCHNORM2D: return 2 * n->a.bn.c * 4; /* mean, invstd */
	case OP_LAYERNORM: {
		int64_t row = 1;
		for (int k = 0; k < n->a.ln.nd; k++)
			row *= n->a.ln.d[k];
		return 2 * (numel / row) * 4;                 /* mean, invstd per row */
	}
	case OP_GROUPNORM: return 2 * batch * n->a.gn.groups * 4; /* mean, invstd per sample and group */
	default: return 0;
	}
}

bool op_needs_input(const struct node *n)
{
	switch (n->op) {
	case OP_LINEAR: case OP_CONV2D: case OP_BATCHNORM1D: case OP_BATCHNORM2D: case OP_LAYERNORM: case OP_GROUPNORM: case OP_EMBEDDING:
	case OP_GELU:
	case OP_PRELU:
	OP_ACT_CASES:
		return true;
	default:
		return false;
	}
}

bool op_needs_output(const struct node *n)
{
	switch (n->op) {
	case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_SOFTMAX: case OP_LOG_SOFTMAX:
		return true;
	default:
		return false;
	}
}
