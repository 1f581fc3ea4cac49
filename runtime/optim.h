/* optim.h: optimizer updates and gradient clipping over flat float ranges.
 * optim_step applies one step of SGD, Adam, AdamW, Adadelta, Adagrad,
 * RMSprop, Adamax or RAdam to a contiguous range of parameter elements, with PyTorch 1.13's
 * formulas, defaults and float rounding (the single-tensor, foreach=False
 * path, fused multiply-adds where its CPU kernels use them).  It does not
 * allocate, schedule the lr (sched.h) or reduce gradients across ranks.
 * Invariant: the new value of element i depends only on element i of param,
 * grad and the state planes, so any split of a buffer into ranges (FSDP
 * shards, threads) gives bit-identical results.
 */
#ifndef OPTIM_H
#define OPTIM_H
#include <stdint.h>

/* Tables indexed by this enum are tagged optim_kind_table. */
enum optim_kind { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW, OPTIM_ADADELTA, OPTIM_ADAGRAD, OPTIM_RMSPROP, OPTIM_ADAMAX, OPTIM_RADAM,
		  OPTIM_KIND_COUNT };

/* Hyperparameters; fields a kind does not use are ignored.  Start from
 * optim_cfg_default so unused fields hold PyTorch's defaults. */
struct optim_cfg {
	enum optim_kind kind;
	double lr;           /* base lr handed to the scheduler; optim_step takes the scheduled one */
	double weight_decay; /* L2 added to the gradient, except AdamW: p *= 1 - lr * weight_decay */
	double momentum;     /* SGD, RMSprop */
	double dampening;    /* SGD */
	int nesterov;        /* SGD */
	double beta1, beta2; /* Adam, AdamW, Adamax, RAdam */
	int amsgrad;         /* Adam, AdamW */
	double eps;          /* all but SGD */
	double rho;          /* Adadelta */
	double lr_decay;     /* Adagrad */
	double initial_accumulator_value; /* Adagrad */
	double alpha;        /* RMSprop */
	int centered;        /* RMSprop */
	/* one_cycle's cycled momentum (Adam's beta1) of step s at
	 * momentum_table[(s - 1) % momentum_period], in place of momentum
	 * (beta1), or NULL; a window of the run's steps that whoever runs the
	 * update refills as it goes, in its own memory (the GPU's for its
	 * kernels) */
	const double *momentum_table;
	int64_t momentum_period;
};

/* Optimizer state of one range.  Plane j of element i is at
 * base[j * plane_stride + i]; the caller sizes each plane for the whole
 * buffer and points base at the range's first element, so sub-ranges of one
 * buffer share one allocation.  Planes, in order:
 *   SGD      momentum_buffer (if momentum != 0)
 *   Adam(W)  exp_avg, exp_avg_sq, max_exp_avg_sq (if amsgrad)
 *   Adadelta square_avg, acc_delta
 *   Adagrad  sum
 *   RMSprop  square_avg, momentum_buffer (if momentum > 0), grad_avg (if centered)
 *   Adamax   exp_avg, exp_inf
 *   RAdam    exp_avg, exp_avg_sq */
struct optim_state_view {
	float *base;          /* (k, plane_stride) from the range's first element */
	int64_t plane_stride; /* elements from one plane to the next */
};

/* kind with every hyperparameter at torch.optim's default, lr included;
 * SGD, whose lr torch requires, gets NaN, which optim_cfg_check rejects. */
struct optim_cfg optim_cfg_default(enum optim_kind kind);

/* NULL if cfg is acceptable, else a message naming the bad field, with the
 * same bounds torch.optim's constructors check. */
const char *optim_cfg_check(const struct optim_cfg *cfg);

/* Lower-case name of kind ("sgd", "adamw"...), as torch.optim spells it
 * without capitals. */
const char *optim_kind_name(enum optim_kind kind);

/* State floats per parameter element (the number of planes).  cfg may be
 * NULL for kind's defaults; otherwise cfg->kind must equal kind. */
int optim_state_floats(enum optim_kind kind, const struct optim_cfg *cfg);

/* Sets the state of n elements to its value before the first step: zeros,
 * except Adagrad's sum, which starts at initial_accumulator_value. */
void optim_state_init(const struct optim_cfg *cfg, struct optim_state_view st, int64_t n);

/* One update of n elements.  param: (n,), grad: (n,), st: this range's
 * state.  step counts steps including this one (1 on the first step): Adam's
 * bias corrections, Adagrad's lr_decay and SGD's first momentum step read
 * it.  lr is the scheduled lr, in double as torch keeps it. */
void optim_step(const struct optim_cfg *cfg, struct optim_state_view st, float *param, const float *grad,
		int64_t n, int64_t step, double lr);

/* Sum of squares of x (n,), accumulated in double in an order fixed by n
 * alone, so the result does not depend on the thread count. */
double optim_sumsq(const float *x, int64_t n);

/* x (n,) *= c. */
void optim_scale(float *x, int64_t n, float c);

/* Clipping factor of torch.nn.utils.clip_grad_norm_ (norm_type 2) for a
 * total norm: max_norm / (norm + 1e-6), rounded in float as torch does, at
 * most 1. */
float optim_clip_coef(double total_norm, double max_norm);

/* Global-norm clipping.  sumsq is the sum of squares of every gradient
 * (optim_sumsq over each range, summed or all-reduced by the caller); when
 * the factor is below 1, scale(ctx, factor) is called once to multiply all
 * gradients by it.  Returns the total norm, sqrt(sumsq), as torch does. */
double optim_clip_grad_norm(double sumsq, double max_norm, void (*scale)(void *ctx, float coef), void *ctx);
#endif
