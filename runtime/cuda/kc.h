/* kc.h: the CUDA kernels of the GPU backend, as C functions that launch
 * them.  Every call queues work on stream s and returns at once; pointers
 * are device memory unless a comment says otherwise; nothing allocates, so
 * every call may sit inside a captured CUDA graph.  Shapes, layouts and
 * numerics are those of kern.h (the CPU reference): float32, batch first,
 * NCHW; backward calls WRITE dx and ACCUMULATE (+=) parameter gradients; a
 * NULL gradient pointer skips it.  Values that change from step to step
 * (the batch position, the optimizer step, the lr) are read from device
 * memory, never passed by value, so one captured step replays correctly.
 * Errors the host must see (a target or token id out of range) raise a
 * device flag that the trainer reads when it next synchronises.
 */
#ifndef KC_H
#define KC_H
#include <math.h> /* before extern "C": in C++ it declares templates */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

/* The project's headers go inside the block: the launchers are C++ and
 * call C functions they declare (kern_pool2d_out, optim_state_floats). */
#ifdef __cplusplus
extern "C" {
#endif
#include "runtime/kern.h"
#include "runtime/optim.h"
#include "runtime/philox.h"

/* ---- activations, elementwise over n; y may be x and dx may be dy ---- */
void kc_relu_fwd(cudaStream_t s, const float *x, float *y, int64_t n);
void kc_relu_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n);
void kc_gelu_fwd(cudaStream_t s, const float *x, float *y, int64_t n, enum kern_gelu approx);
void kc_gelu_bwd(cudaStream_t s, const float *x, const float *dy, float *dx, int64_t n, enum kern_gelu approx);
void kc_tanh_fwd(cudaStream_t s, const float *x, float *y, int64_t n);
void kc_tanh_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n);
void kc_sigmoid_fwd(cudaStream_t s, const float *x, float *y, int64_t n);
void kc_sigmoid_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n);
/* act_elem.h's activations, as kern_act_fwd and kern_act_bwd (from input x) */
void kc_act_fwd(cudaStream_t s, enum kern_act k, const float *x, float *y, int64_t n, float a, float b);
void kc_act_bwd(cudaStream_t s, enum kern_act k, const float *x, const float *dy, float *dx, int64_t n, float a, float b);
/* PReLU, as kern_prelu_fwd and kern_prelu_bwd (dw summed in double, a block
 * a weight, then dx, which may be dy) */
void kc_prelu_fwd(cudaStream_t s, const float *x, const float *w, float *y, int n, int c, int64_t inner);
void kc_prelu_bwd(cudaStream_t s, const float *x, const float *w, const float *dy, float *dx, float *dw, int n, int c,
		  int64_t inner);

/* Dropout with the CPU's mask: element i is kept iff rng_uniform(&r, i / inner)
 * >= p (inner 1: dropout's draw per element; a channel's elements:
 * dropout1d's and dropout2d's, kern_dropout_runs_fwd's).
 * The stream r is passed by value: the caller derives it from the step
 * counter it keeps on the host (eager steps) or, in a captured step, from
 * *step (see kc_dropout_fwd_at). */
void kc_dropout_fwd(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p,
		    struct rng r);
/* As kc_dropout_fwd, with the stream's step word (r.ctr_hi[1]) taken at run
 * time as *step + 1: *step counts finished optimizer steps, the CPU's
 * e->step is the step being computed. */
void kc_dropout_fwd_at(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p,
		       struct rng r, const int64_t *step);
void kc_dropout_bwd(cudaStream_t s, const float *dy, const uint8_t *mask, float *dx, int64_t n, float p);

/* ---- sums ---- */
void kc_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n); /* y may be a or b */
void kc_accumulate(cudaStream_t s, float *dst, const float *src, int64_t n);      /* dst += src */
void kc_scale(cudaStream_t s, float *x, int64_t n, float c);                      /* x *= c */

/* ---- linear's bias (the GEMMs are cuBLAS's) ---- */
void kc_bias_add(cudaStream_t s, float *y, const float *b, int64_t rows, int m);        /* y (rows, m) += b (m) */
void kc_bias_grad(cudaStream_t s, const float *dy, float *db, int64_t rows, int m);     /* db (m) += sum over rows of dy */
/* y (n, c, hw) += b (c), for convolutions whose bias cuDNN does not add */
void kc_channel_bias_add(cudaStream_t s, float *y, const float *b, int n, int c, int64_t hw);
/* A bias and the ReLU after it in one pass: y (total) += b[(i / inner) % m],
 * then r := relu(y) (r may be y).  Linear: inner 1, m features; conv2d:
 * inner H*W, m channels.  The same arithmetic as the two kernels apart. */
void kc_bias_relu(cudaStream_t s, float *y, const float *b, float *r, int64_t total, int m, int64_t inner);
void kc_channel_bias_grad(cudaStream_t s, const float *dy, float *db, int n, int c, int64_t hw);

/* ---- pooling (struct pool2d_desc of kern.h, passed by value) ---- */
void kc_maxpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y, int32_t *idx);
void kc_maxpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const int32_t *idx, const float *dy, float *dx); /* writes all of dx */
void kc_avgpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y);
void kc_avgpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const float *dy, float *dx);                  /* writes all of dx */
void kc_adaptive_avgpool2d_fwd(cudaStream_t s, const float *x, float *y, int n, int c, int h, int w, int oh, int ow);
void kc_adaptive_avgpool2d_bwd(cudaStream_t s, const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow);
void kc_adaptive_maxpool2d_fwd(cudaStream_t s, const float *x, float *y, int32_t *idx, int n, int c, int h, int w, int oh,
			       int ow);
void kc_adaptive_maxpool2d_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dx, int n, int c, int h, int w,
			       int oh, int ow); /* writes all of dx */

/* ---- zero padding (struct pad2d_desc of kern.h, passed by value) ---- */
void kc_zeropad2d_fwd(cudaStream_t s, struct pad2d_desc d, const float *x, float *y);
void kc_zeropad2d_bwd(cudaStream_t s, struct pad2d_desc d, const float *dy, float *dx); /* writes all of dx */

/* ---- normalisation (kern.h's contracts); *tracked (int64, NULL: none)
 * counts training batches as num_batches_tracked ---- */
void kc_batchnorm2d_fwd_train(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y,
			      float *running_mean, float *running_var, float *save_mean, float *save_invstd, int64_t *tracked,
			      int n, int c, int64_t hw, float eps, float momentum);
void kc_batchnorm2d_fwd_eval(cudaStream_t s, const float *x, const float *gamma, const float *beta, const float *running_mean,
			     const float *running_var, float *y, int n, int c, int64_t hw, float eps);
void kc_batchnorm2d_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			const float *dy, float *dx, float *dgamma, float *dbeta, int n, int c, int64_t hw);
void kc_layernorm_fwd(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
		      float *save_invstd, int64_t rows, int d, float eps);
void kc_layernorm_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
		      const float *dy, float *dx, float *dgamma, float *dbeta, int64_t rows, int d);
/* group norm of n samples of groups * cpg channels of hw elements
 * (kern_groupnorm_fwd's); save_mean and save_invstd hold n * groups values */
void kc_groupnorm_fwd(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
		      float *save_invstd, int n, int groups, int cpg, int hw, float eps);
void kc_groupnorm_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
		      const float *dy, float *dx, float *dgamma, float *dbeta, int n, int groups, int cpg, int hw);

/* ---- embedding: an id outside [0, vocab) sets *bad to 1 and writes a zero row ---- */
void kc_embedding_fwd(cudaStream_t s, const int32_t *idx, const float *w, float *y, int64_t n, int vocab, int dim, int32_t *bad);
/* dw += dy's rows by id, bit for bit kern_embedding_bwd (each row's tokens
 * added in order, no atomics), skipping padding_idx and ids outside
 * [0, vocab); sorts the tokens in scratch, scratch_bytes of device memory
 * of at least emb_sort_bytes(n) (compiler/emb_sort.h), which it overwrites */
void kc_embedding_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dw, int64_t n, int vocab, int dim,
		      int padding_idx, void *scratch, int64_t scratch_bytes);

/* ---- softmax over the middle axis of (outer, dim, inner); bwd from output y ---- */
void kc_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner);
void kc_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner);
void kc_log_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner);
void kc_log_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner);

/* ---- losses.  The loss L (kern.h's value, in double) lands in *loss as
 * *loss = (add ? *loss : 0) + weight * L; dx (NULL: skip) = scale * dL/dx.
 * A target outside [0, c) other than ignore_index sets *bad to 1, and
 * leaves *loss as it was.  dx may be x.  A loss over more than
 * KC_LOSS_CHUNK elements is summed by up to KC_LOSS_PARTS blocks in parts
 * (KC_LOSS_PARTS + 1 doubles of the stream's GPU, which no other stream
 * uses meanwhile), then in block order: the same bits on every run of a
 * shape. ---- */
enum { KC_LOSS_CHUNK = 32768, KC_LOSS_PARTS = 128 };
/* kern_regression_per's losses: mse, l1, smooth_l1 (param beta), huber
 * (delta), bce, bce_with_logits (pos_weight; per, in device memory: one
 * per element of the last dimension, or NULL) */
void kc_regression(cudaStream_t s, enum kern_regression kind, float param, const float *per, int64_t nper, const float *x,
		   const float *target, float *dx, int64_t n, enum kern_reduction red, float scale, double *loss, double weight,
		   bool add, double *parts);
/* w: kern_nll's class weights, in device memory, or NULL */
void kc_nll(cudaStream_t s, const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index,
	    const float *w, enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad, double *parts);
/* smoothing: label smoothing in [0, 1], kern_cross_entropy's; w its class
 * weights (device memory, or NULL) and wsum loss_class_weight_sum's of them */
void kc_cross_entropy(cudaStream_t s, const float *logits, const int32_t *target, float *dlogits, int n, int c, int ignore_index,
		      const float *w, double wsum, float smoothing, enum kern_reduction red, float scale, double *loss, double weight,
		      bool add, int32_t *bad, double *parts);
/* *correct += rows whose first maximal logit is at the target class; an
 * atomic add, so correct is memory of the stream's own GPU (a peer's takes
 * no atomics over PCIe) */
void kc_argmax_correct(cudaStream_t s, const float *logits, const int32_t *target, int n, int c, double *correct);

/* ---- data on the device ---- */
/* dst row r (row_words 32-bit words) := src row order[*pos + r], r < n. */
void kc_gather_rows(cudaStream_t s, void *dst, const void *src, int64_t row_words, const int64_t *order, const int64_t *pos,
		    int64_t n);
void kc_add_i64(cudaStream_t s, int64_t *x, int64_t by); /* *x += by */
/* dst = (add ? dst : 0) + a * src, one double */
void kc_f64_axpy(cudaStream_t s, double *dst, const double *src, double a, bool add);
/* hist[(*counter - 1) % cap] = *v, for losses read back at log intervals */
void kc_record(cudaStream_t s, const double *v, double *hist, const int64_t *counter, int64_t cap);

/* ---- optimizer: one fused update over a flat range, PyTorch 1.13's
 * formulas with optim.c's float rounding (the per-element code is shared,
 * runtime/optim_elem.h), so a step on the GPU equals the CPU's bit for bit
 * where the compilers agree on fma contraction. ---- */
/* Room for the coefficients of one step (struct optim_coef of optim_elem.h). */
enum { KC_OPTIM_COEF_BYTES = 256 };
/* *step += 1; coef := the coefficients of step *step with lr
 * lr_table[(*step - 1) % period] (a table of period steps, an epoch's). */
void kc_optim_prepare(cudaStream_t s, struct optim_cfg cfg, const double *lr_table, int64_t period, int64_t *step, void *coef);
/* One update of n elements with the coefficients kc_optim_prepare wrote;
 * state planes as optim.h's optim_state_view (plane_stride elements apart). */
void kc_optim_apply(cudaStream_t s, struct optim_cfg cfg, const void *coef, float *param, const float *grad, float *state,
		    int64_t plane_stride, int64_t n);
/* Global-norm clipping: *sumsq := sum of squares of g (n) (fixed order,
 * partials is KC_SUMSQ_PARTS doubles of scratch), then g *= optim_clip_coef
 * when that is below 1. */
enum { KC_SUMSQ_PARTS = 256 };
void kc_sumsq(cudaStream_t s, const float *g, int64_t n, double *partials, double *sumsq);
void kc_clip(cudaStream_t s, float *g, int64_t n, const double *sumsq, double max_norm);

/* ---- a whole training step of a small model (runtime/cuda/tiny.h) ---- */
/* One block runs the step of the program at prog (a struct tiny_prog in
 * HOST memory, copied into the kernel's parameters at the launch, so its
 * fields are read from the constant bank, not through a pointer to global
 * memory): gather, forward, loss, backward, optimizer, loss record, step
 * and position advanced. */
void kc_tiny_step(cudaStream_t s, const void *prog);

#ifdef __cplusplus
}
#endif
#endif
