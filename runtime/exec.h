/* exec.h: one training or evaluation step of a compiled plan on the CPU.
 * The executor owns one allocation per region (parameters, gradients,
 * optimizer state, activations), sized and carved by the plan's offsets,
 * and prepares every convolution for each batch size it will see; after
 * exec_init nothing is allocated.
 */
#ifndef EXEC_H
#define EXEC_H
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "compiler/ir.h"
#include "runtime/init.h"
#include "runtime/kern.h"

struct backend_ops;

enum { EXEC_MAX_SIZES = 8 };

struct exec {
	const struct plan *p;
	float *params;   /* REG_PARAMS: trainables in reverse order, then buffers */
	float *grads;    /* REG_GRADS: same offsets as the trainables */
	float *optim;    /* REG_OPTIM: k planes of `trainable` floats */
	char *acts[PLAN_MAX_DEVICES]; /* REG_ACTS per device: activation buffers at the plan's byte offsets */
	int64_t act_stride[PLAN_MAX_DEVICES]; /* bytes from one micro-batch's copy to the next */
	int copies;                    /* activation copies: micro-batches in flight in a pipeline */
	int64_t trainable;
	int64_t sizes[EXEC_MAX_SIZES]; /* batch sizes convolutions are prepared for */
	int nsizes;
	const struct backend_ops *be;  /* where the layers run */
	void *be_state;                /* the backend's own (prepared convolutions, ...) */
	bool *written;                 /* (copies, nnodes): gradient written this backward */
	uint64_t seed;
	uint32_t rank;
	int64_t step;                  /* dropout stream of the current step */
	int64_t step_first;            /* samples of this step before the current micro-batch (dropout streams) */
	float loss_scale;              /* multiplies the loss's gradient (micro-steps) */
	void (*after_backward)(void *ctx, int node); /* called after each layer's backward */
	void *hook_ctx;
	/* FSDP: parameters and gradients of units live where fsdp.c gathers
	 * them; params holds only the buffers (running statistics) */
	bool fsdp;
	float **unit_param, **unit_grad; /* (nunits) current bases, set by fsdp.c */
	int64_t buffer_start;            /* unsharded offset of the first buffer */
	void (*phase_hook)(void *ctx, int node, int phase); /* EXEC_* below */
	void *phase_ctx;
	bool stop;                       /* set by a hook whose collective failed: the pass ends there */
	/* Each device of the rank owns a trainable range [t_lo, t_lo + t_n)
	 * and a buffer range [b_lo, b_lo + b_n) of the unsharded layout.  A
	 * backend with a memory per device (use_device) keeps each device's
	 * share in its own allocations (split); the CPU keeps one region. */
	int64_t t_lo[PLAN_MAX_DEVICES], t_n[PLAN_MAX_DEVICES], b_lo[PLAN_MAX_DEVICES], b_n[PLAN_MAX_DEVICES];
	bool split;
	float *dparams[PLAN_MAX_DEVICES], *dgrads[PLAN_MAX_DEVICES], *doptim[PLAN_MAX_DEVICES];
};

enum { EXEC_BEFORE_FWD, EXEC_AFTER_FWD, EXEC_BEFORE_BWD, EXEC_AFTER_BWD };

/* Allocate the regions and prepare kernels for the given batch sizes;
 * with fsdp, only buffers are held here (fsdp.c owns the units).
 * Returns 0, or -1 with a message in err: EXEC_REFUSED where what the user
 * set cannot be met (TRAINC_CONV_PATH: not a path, or one oneDNN lacks; a
 * placement over GPUs that cannot reach each other's memory). */
enum { EXEC_REFUSED = -2 };
int exec_init(struct exec *e, const struct plan *p, const int64_t *sizes, int nsizes, bool fsdp, int copies, char *err,
	      size_t errlen);
/* The same on a given backend (exec_init: the CPU's). */
int exec_init_on(struct exec *e, const struct backend_ops *be, const struct plan *p, const int64_t *sizes, int nsizes, bool fsdp,
		 int copies, char *err, size_t errlen);
/* Initialise parameters and buffers as PyTorch's defaults after
 * torch.manual_seed(seed) (with fsdp: the buffers only). */
void exec_init_params(struct exec *e, uint64_t seed);
/* The model's initial values are drawn tensor after tensor, in the plan's
 * order, from one generator (init.h); param_init is where it stands. */
struct param_init {
	struct init_gen g;
	uint64_t seed;
	int next; /* the tensor the generator is at */
};
void exec_param_init_begin(struct param_init *pi, uint64_t seed);
/* Parameter k of the plan, initialised as PyTorch would, written at dst:
 * the tensors between pi's place and k are drawn first (from the seed again
 * if pi is past k), so any order of k gives the same values, in plan order
 * at no extra cost. */
void exec_init_param(const struct plan *p, int k, struct param_init *pi, float *dst);
/* Where parameter k lives now (unsharded layout, a gathered unit, or the
 * buffers), or NULL for an FSDP unit that is not gathered. */
float *exec_param_ptr(struct exec *e, int k);
/* Forward over a batch of n samples in x (n, input...); train selects
 * dropout and batch statistics. */
void exec_forward(struct exec *e, const float *x, int n, bool train);
/* Loss of the last forward against y; in training also writes the
 * output's gradient.  Returns -1 with err on a bad target.  *correct gets
 * the argmax hits for class targets. */
int exec_loss(struct exec *e, const void *y, int n, bool train, double *loss, long *correct, char *err, size_t errlen);
/* Backward of the last training forward; parameter gradients accumulate. */
void exec_backward(struct exec *e, int n);
/* Pieces of the above for pipelines: the input, a range of layers forward,
 * the start of a backward and a range of layers backward (from end - 1
 * down to begin), on this thread's micro-batch (exec_set_micro). */
void exec_input(struct exec *e, const float *x, int n, bool train);
void exec_forward_range(struct exec *e, int begin, int end, int n, bool train);
void exec_backward_begin(struct exec *e);
void exec_backward_range(struct exec *e, int begin, int end, int n);
void exec_set_micro(int mb);
/* The same for a micro-batch whose first sample is first in its batch
 * (dropout draws by it: exec_dropout_seed). */
void exec_set_micro_at(int mb, int64_t first);
uint64_t exec_dropout_seed(const struct exec *e, int i);
bool *exec_written(struct exec *e);
/* Forward again, checking each layer's output: the first node whose output
 * holds a NaN or an infinity, or -1, and into *param the first of that
 * node's floating-point parameters and buffers (plan.params index) that
 * holds one too, or -1.  For reporting a non-finite loss. */
int exec_find_nonfinite(struct exec *e, const float *x, int n, int *param);
/* Where parameter k's gradient lives now, or NULL if it has none. */
float *exec_grad_ptr(struct exec *e, int k);
/* Device d's share (without FSDP): its trainable parameters, buffers,
 * gradients and optimizer planes (plane j at exec_dev_optim +
 * j * exec_dev_stride), each contiguous. */
float *exec_dev_trainables(struct exec *e, int d);
float *exec_dev_buffers(struct exec *e, int d);
float *exec_dev_grads(struct exec *e, int d);
float *exec_dev_optim(struct exec *e, int d);
int64_t exec_dev_stride(const struct exec *e, int d);
/* With split regions: where device d's buffers start in its parameter
 * region (after its trainables, 8-byte aligned). */
int64_t exec_dev_buffer_at(const struct exec *e, int d);
/* A layer's shape arguments for the kernels, at batch n: a pool's or a
 * zero pad's descriptor, a softmax's (outer, dim, inner), a layer norm's
 * row length. */
struct pool2d_desc exec_pool_desc(const struct plan *p, const struct node *nd, int64_t n);
struct pad2d_desc exec_pad_desc(const struct plan *p, const struct node *nd, int64_t n);
void exec_softmax_dims(const struct node *nd, int64_t n, int64_t *outer, int *dim, int64_t *inner);
int64_t exec_ln_row(const struct node *nd);
/* Where the backward of a node writes the gradient of its input j: the
 * gradient buffer of j (through views) on the first write of this pass,
 * else a scratch buffer that the caller then adds into exec_dx_home(e, j)
 * (*accumulate is set); NULL when j needs no gradient (the input, ids). */
float *exec_dx_target(struct exec *e, int j, bool *accumulate);
float *exec_dx_home(struct exec *e, int j);
/* The activation arena of node's device, and that device's scratch buffer. */
char *exec_act(struct exec *e, int node);
char *exec_scratch(struct exec *e, int node);
/* The plan's loss as one of kern_regression's (mse, l1, smooth_l1, huber,
 * bce, bce_with_logits, kl_div). */
static inline enum kern_regression exec_regression(const struct plan *p)
{
	_Static_assert(LOSS_SMOOTH_L1 - LOSS_L1 == KERN_SMOOTH_L1 && LOSS_HUBER - LOSS_L1 == KERN_HUBER &&
		       LOSS_BCE - LOSS_L1 == KERN_BCE && LOSS_BCE_LOGITS - LOSS_L1 == KERN_BCE_LOGITS &&
		       LOSS_KL_DIV - LOSS_L1 == KERN_KL_DIV, "keep in step");
	return p->train.loss == LOSS_MSE ? KERN_MSE : (enum kern_regression)(p->train.loss - LOSS_L1);
}
/* The reduction of the plan's loss in training (train) or evaluation: a
 * class loss is summed in evaluation, as the seed's test loop sums it
 * (reduction='sum') to divide by the set's size; a mean over the counted
 * rows times the rows would count the ignored ones too.  A regression
 * loss keeps its reduction (a mean over elements, weighed by the rows). */
static inline enum kern_reduction exec_reduction(const struct plan *p, bool train)
{
	bool classes = p->train.loss == LOSS_NLL || p->train.loss == LOSS_CROSS_ENTROPY;
	return p->train.reduction == RED_SUM || (!train && classes) ? KERN_REDUCE_SUM : KERN_REDUCE_MEAN;
}
/* kl_div's reduction="batchmean" divides the sum by the rows, which is
 * the mean over the values (KERN_REDUCE_MEAN, as exec_reduction gives)
 * times the values per row, per: the factor by which each backend
 * multiplies that mean and its gradient's scale.  1 for the others. */
static inline float exec_batchmean(const struct plan *p, int64_t per)
{
	return p->train.reduction == RED_BATCHMEAN ? (float)per : 1.0f;
}
/* An activation of OP_ACT_CASES as kern_act's, with its two numbers:
 * selu is elu scaled (ATen's elu with SELU's alpha and scale, their
 * product rounded to float32 as ATen rounds it), relu6 hardtanh(0, 6),
 * celu's b the float32 of 1 / alpha. */
static inline enum kern_act exec_act_kind(const struct node *nd, float *a, float *b)
{
	*a = (float)nd->a.act.a;
	*b = (float)nd->a.act.b;
	switch (nd->op) {
	case OP_LEAKY_RELU: return KERN_LEAKY_RELU;
	case OP_ELU: *b = 1; return KERN_ELU;
	case OP_SELU:
		*a = (float)KERN_SELU_ALPHA * (float)KERN_SELU_SCALE;
		*b = (float)KERN_SELU_SCALE;
		return KERN_ELU;
	case OP_SILU: return KERN_SILU;
	case OP_SOFTPLUS: return KERN_SOFTPLUS;
	case OP_HARDTANH: return KERN_HARDTANH;
	case OP_RELU6: *a = 0; *b = 6; return KERN_HARDTANH;
	case OP_HARDSIGMOID: return KERN_HARDSIGMOID;
	case OP_HARDSWISH: return KERN_HARDSWISH;
	case OP_MISH: return KERN_MISH;
	case OP_CELU: *b = (float)(1.0 / nd->a.act.a); return KERN_CELU; /* ATen's elu with input_scale 1 / alpha */
	case OP_LOGSIGMOID: return KERN_LOGSIGMOID;
	case OP_SOFTSIGN: return KERN_SOFTSIGN;
	case OP_TANHSHRINK: return KERN_TANHSHRINK;
	case OP_SOFTSHRINK: return KERN_SOFTSHRINK;
	case OP_HARDSHRINK: return KERN_HARDSHRINK;
	case OP_THRESHOLD: return KERN_THRESHOLD;
	default: break;
	}
	assert(0 && "not one of OP_ACT_CASES");
	return KERN_MISH;
}
/* PReLU's input as (n, c, inner) for kern_prelu_*: c its weights, one
 * for all or one per channel (the first per-sample dimension) */
static inline void exec_prelu_dims(const struct plan *p, const struct node *nd, int *c, int64_t *inner)
{
	*c = (int)nd->a.prelu.num;
	*inner = shape_numel(&p->nodes[nd->in].out) / *c;
}
/* The adaptive pools' input as (c, h, w): the 2-D ones' (C, H, W), the
 * 1-D ones' (C, L) at a height of 1, whose output height nd->a.apool.oh
 * is 1 too */
static inline void exec_apool_in(const struct plan *p, const struct node *nd, int64_t *c, int64_t *h, int64_t *w)
{
	const struct shape *in = &p->nodes[nd->in].out;
	shape_chw(in->d, in->rank, c, h, w);
}
/* Elements each dropout draw keeps or drops: 1, or for dropout1d and
 * dropout2d a channel's (a sample's elements over its first dimension) */
static inline int64_t exec_dropout_inner(const struct node *nd)
{
	return nd->variant == VAR_NONE ? 1 : shape_numel(&nd->out) / nd->out.d[0];
}
/* Pointer to node i's output of the last forward. */
float *exec_output(struct exec *e, int node, bool train);
void exec_free(struct exec *e);
#endif
