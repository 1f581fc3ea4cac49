/* kern.h: the CPU compute kernels, forward and backward, one call per layer.
 * Plain functions over contiguous float32 arrays, batch first, NCHW, with
 * PyTorch's numerics and defaults.  No call allocates (conv2d takes its
 * buffers from a caller-sized workspace at setup) and no result depends on the
 * thread count: every reduction runs over fixed chunks summed in a fixed order.
 * Gradients: backward calls WRITE dx and ACCUMULATE (+=) into parameter
 * gradients, as PyTorch's .grad does; the caller zeroes those.  Any gradient
 * pointer may be NULL to skip it (dx of the first layer, frozen parameters).
 * This header is past ~150 lines because it is the whole kernel contract.
 */
#ifndef KERN_H
#define KERN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/philox.h"

enum kern_status { KERN_OK = 0, KERN_ERR_INDEX = -1, KERN_ERR_SHAPE = -2, KERN_ERR_UNSUPPORTED = -3, KERN_ERR_WORKSPACE = -4 };
enum kern_reduction { KERN_REDUCE_MEAN, KERN_REDUCE_SUM };
enum kern_gelu { KERN_GELU_NONE, KERN_GELU_TANH }; /* PyTorch's approximate= */
/* activations of act_elem.h */
enum kern_act {
	KERN_LEAKY_RELU, KERN_ELU, KERN_SILU, KERN_SOFTPLUS, KERN_HARDTANH, KERN_HARDSIGMOID, KERN_HARDSWISH, KERN_MISH,
	KERN_CELU, KERN_LOGSIGMOID, KERN_SOFTSIGN, KERN_TANHSHRINK, KERN_SOFTSHRINK, KERN_HARDSHRINK, KERN_THRESHOLD
};
#define KERN_ACT_LAST KERN_THRESHOLD
#define KERN_SELU_ALPHA 1.6732632423543772848170429916717 /* torch.nn.SELU's */
#define KERN_SELU_SCALE 1.0507009873554804934193349852946

/* Threads for every kernel: OpenMP's, which oneDNN shares; OpenBLAS is held at
 * one because kern_gemm splits products itself.  Results do not change with n. */
void kern_set_threads(int n);

/* Ends the thread pool OpenBLAS starts as it loads, which trainc never uses
 * (see kern_set_threads); called first thing in main. */
void kern_quiet_blas(void);

/* The CPUs this process may run on (its affinity mask; taskset and cgroup
 * cpusets narrow it), at least 1. */
int kern_cpus(void);

/* Names the CPUs this process may run on, machine and all, in buf (the
 * kernel's boot id and the affinity mask): two processes with the same
 * name compete for the same CPUs, whichever node of a job started them. */
void kern_cpus_name(char *buf, size_t n);

/* Put each of the n kernel threads on a CPU of its own when n > 1 threads
 * are exactly the CPUs the process may run on, unless OMP_PROC_BIND,
 * OMP_PLACES or GOMP_CPU_AFFINITY is set (OpenMP's own placement; set
 * OMP_PROC_BIND=false for none); otherwise leave placement to the
 * scheduler.  Threads created afterwards inherit the calling thread's CPU:
 * one with work of its own (a loader) calls kern_unpin_this_thread first;
 * a caller whose threads run kernels (pipeline stages) must not pin.
 * Returns whether it pinned all n. */
bool kern_pin_threads(int n);

/* Give the calling thread every CPU the process had before
 * kern_pin_threads (nothing if it did not pin). */
void kern_unpin_this_thread(void);

/* Output length of a sliding window (conv, pools): PyTorch's formula, with
 * ceil_mode's rounding up (the last window may overhang the padded input by
 * up to s - 1) and its rule that the last window must start inside input or
 * left pad; 0 when no window fits. */
int kern_window_out(int in, int k, int s, int p, int d, bool ceil_mode);

/* Row-major C = alpha op(A) op(B) + beta C, op(X) = Xᵀ when tX; C (M, N).
 * OpenBLAS on a fixed split of C, so results do not change with threads. */
void kern_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
	       const float *b, int ldb, float beta, float *c, int ldc);

/* ---- linear: y = x wᵀ + b, through kern_gemm ---- */
void kern_linear_fwd(const float *x, // (N, K)
		     const float *w, // (M, K)
		     const float *b, // (M) or NULL
		     float *y,       // (N, M)
		     int n, int k, int m);
void kern_linear_bwd(const float *x, const float *w, const float *dy, // dy (N, M)
		     float *dx, float *dw, float *db, int n, int k, int m);

/* ---- conv2d: prepared once per exact shape, then run every step ---- */
/* AUTO: oneDNN where it measured faster and accepts the shape (Winograd where
 * oneDNN has it, else direct), else im2col; the others force a path (tests,
 * comparisons; DNNL is oneDNN's direct algorithm). */
enum kern_conv_path { KERN_CONV_AUTO, KERN_CONV_IM2COL, KERN_CONV_DNNL, KERN_CONV_WINOGRAD };
struct conv2d_desc {
	int n, c_in, h, w;   /* input (n, c_in, h, w); n is the batch */
	int c_out, kh, kw;   /* weight (c_out, c_in / groups, kh, kw) */
	int sh, sw, ph, pw, dh, dw, groups;
	bool bias;           /* bias (c_out) */
	enum kern_conv_path path;
};
struct conv2d_dnnl;
/* Set up by prepare; callers read oh and ow, the rest is the kernel's. */
struct kern_conv2d {
	struct conv2d_desc d;
	int oh, ow;          /* output (n, c_out, oh, ow) */
	float *col;          /* (c_in * kh * kw, oh * ow) im2col buffer, or NULL if unused */
	bool direct;         /* 1x1, stride 1, no padding: the input is its own unfolding */
	bool winograd;       /* oneDNN runs it as Winograd F(4x4, 3x3) */
	int slots;           /* oneDNN chunks in flight at once, one per thread; 0 without oneDNN */
	struct conv2d_dnnl *dnnl; /* oneDNN primitives and staging, or NULL */
};
/* Bytes of workspace kern_conv2d_prepare needs for d; 0 if d is invalid.
 * The workspace is scratch during a call only: layers may share one, as
 * long as no two of them run at once (the CPU backend shares one per
 * device, whose layers run one at a time). */
size_t kern_conv2d_workspace(const struct conv2d_desc *d);
/* Check d, create the primitives and set k up over workspace (64-byte
 * aligned, kern_conv2d_workspace(d) bytes).  KERN_ERR_SHAPE if d is not a
 * valid conv, KERN_ERR_UNSUPPORTED if path is KERN_CONV_DNNL or _WINOGRAD and
 * oneDNN refuses it.  Allocates (oneDNN handles); kern_conv2d_release frees.
 * One fwd or bwd call at a time per k. */
int kern_conv2d_prepare(struct kern_conv2d *k, const struct conv2d_desc *d, void *workspace);
/* The same within `bytes` of workspace: where the full layout does not fit,
 * oneDNN runs fewer chunks at once, else AUTO takes direct over Winograd,
 * then im2col; results are the same.  KERN_ERR_WORKSPACE if the forced path,
 * or im2col's column buffer, does not fit. */
int kern_conv2d_prepare_within(struct kern_conv2d *k, const struct conv2d_desc *d, void *workspace, size_t bytes);
void kern_conv2d_fwd(const struct kern_conv2d *k,
		     const float *x, // (N, C_in, H, W)
		     const float *w, // (C_out, C_in/groups, KH, KW)
		     const float *b, // (C_out), used iff d.bias
		     float *y);      // (N, C_out, OH, OW)
void kern_conv2d_bwd(const struct kern_conv2d *k, const float *x, const float *w,
		     const float *dy, // (N, C_out, OH, OW)
		     float *dx, float *dw, float *db);
void kern_conv2d_release(struct kern_conv2d *k);

/* ---- pooling ---- */
struct pool2d_desc {
	int n, c, h, w;      /* input (n, c, h, w) */
	int kh, kw, sh, sw, ph, pw, dh, dw; /* dilation >= 1, and 1 for avg pooling */
	bool ceil_mode;
	bool count_include_pad; /* avg pooling's divisor counts padding (PyTorch default true) */
};
/* Output height and width of a pool. */
void kern_pool2d_out(const struct pool2d_desc *d, int *oh, int *ow);
/* Max over each window, padding as -inf; NaN wins as in PyTorch.  idx holds
 * the winner's offset h * W + w within its plane. */
void kern_maxpool2d_fwd(const struct pool2d_desc *d, const float *x, // (N, C, H, W)
			float *y, int32_t *idx);                      // (N, C, OH, OW) each
void kern_maxpool2d_bwd(const struct pool2d_desc *d, const int32_t *idx, const float *dy, float *dx);
void kern_avgpool2d_fwd(const struct pool2d_desc *d, const float *x, float *y);
void kern_avgpool2d_bwd(const struct pool2d_desc *d, const float *dy, float *dx);
/* Window i covers [floor(i*H/OH), ceil((i+1)*H/OH)), as PyTorch. */
void kern_adaptive_avgpool2d_fwd(const float *x, // (N, C, H, W)
				 float *y,       // (N, C, OH, OW)
				 int n, int c, int h, int w, int oh, int ow);
void kern_adaptive_avgpool2d_bwd(const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow);
/* Max over the same windows, as kern_maxpool2d_fwd takes it over its own:
 * NaN wins, ties go to the first; idx as kern_maxpool2d_fwd's */
void kern_adaptive_maxpool2d_fwd(const float *x, float *y, int32_t *idx, int n, int c, int h, int w, int oh, int ow);
void kern_adaptive_maxpool2d_bwd(const int32_t *idx, const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow);

/* ---- zero padding (ZeroPad2d): each side apart, a negative one crops ---- */
struct pad2d_desc {
	int n, c, h, w;                /* input (n, c, h, w) */
	int left, right, top, bottom;  /* output (n, c, h + top + bottom, w + left + right), at least 1 x 1 */
};
void kern_pad2d_out(const struct pad2d_desc *d, int *oh, int *ow);
/* y is x placed at (top, left), zeros around it. */
void kern_zeropad2d_fwd(const struct pad2d_desc *d, const float *x, // (N, C, H, W)
			float *y);                                   // (N, C, OH, OW)
/* dx is dy where x landed, 0 where x was cropped away. */
void kern_zeropad2d_bwd(const struct pad2d_desc *d, const float *dy, float *dx);

/* ---- normalisation; gamma/beta NULL means no affine part ---- */
/* Training: batch mean and biased variance normalise; the running stats (NULL
 * if not tracked) move by momentum towards mean and the unbiased variance.
 * Needs n * hw > 1, as PyTorch does. */
void kern_batchnorm2d_fwd_train(const float *x, // (N, C, HW)
				const float *gamma, const float *beta, // (C) each
				float *y,                              // (N, C, HW)
				float *running_mean, float *running_var, // (C) each
				float *save_mean, float *save_invstd,    // (C) each, for bwd
				int n, int c, int hw, float eps, float momentum);
void kern_batchnorm2d_fwd_eval(const float *x, const float *gamma, const float *beta,
			       const float *running_mean, const float *running_var, float *y,
			       int n, int c, int hw, float eps);
/* Backward of the training forward. */
void kern_batchnorm2d_bwd(const float *x, const float *gamma, const float *save_mean,
			  const float *save_invstd, const float *dy,
			  float *dx, float *dgamma, float *dbeta, int n, int c, int hw);
/* Normalise each row of d elements; biased variance, as PyTorch. */
void kern_layernorm_fwd(const float *x, // (ROWS, D)
			const float *gamma, const float *beta, // (D) each
			float *y,                              // (ROWS, D)
			float *save_mean, float *save_invstd,  // (ROWS) each
			int rows, int d, float eps);
void kern_layernorm_bwd(const float *x, const float *gamma, const float *save_mean,
			const float *save_invstd, const float *dy,
			float *dx, float *dgamma, float *dbeta, int rows, int d);
/* Group normalisation of n samples of c channels of hw elements, the
 * channels in groups of cpg: each sample's group (row r = sample * groups +
 * group, cpg * hw contiguous elements) normalised as a layer norm's row,
 * then channel k scaled by gamma[k] and shifted by beta[k] (NULL: 1 and
 * 0).  save_mean and save_invstd hold n * groups values.  The backward
 * adds to dgamma and dbeta (NULL: not wanted), summing each channel over
 * samples in order and within a sample over its elements, in double; dx
 * NULL: not wanted. */
void kern_groupnorm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
			float *save_invstd, int n, int groups, int cpg, int hw, float eps);
void kern_groupnorm_bwd(const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			const float *dy, float *dx, float *dgamma, float *dbeta, int n, int groups, int cpg, int hw);

/* ---- embedding: KERN_ERR_INDEX if an index is outside [0, vocab); then
 * nothing is written ---- */
int kern_embedding_fwd(const int32_t *idx, // (N)
		       const float *w,     // (VOCAB, DIM)
		       float *y,           // (N, DIM)
		       int n, int vocab, int dim);
/* dw += dy scattered by idx; rows equal to padding_idx (-1: none) get nothing. */
int kern_embedding_bwd(const int32_t *idx, const float *dy, float *dw,
		       int n, int vocab, int dim, int padding_idx);

/* ---- dropout (training; evaluation is the identity) ---- */
/* Element i is kept iff rng_uniform(r, i) >= p, and scaled by 1/(1-p). */
void kern_dropout_fwd(const float *x, float *y, uint8_t *mask, // (n) each
		      size_t n, float p, const struct rng *r);
/* dropout1d and dropout2d: x as n / inner runs of inner elements (a
 * channel each), run k kept iff rng_uniform(r, k) >= p; the mask is per
 * element, as kern_dropout_bwd reads it */
void kern_dropout_runs_fwd(const float *x, float *y, uint8_t *mask, size_t n, size_t inner, float p, const struct rng *r);
void kern_dropout_bwd(const float *dy, const uint8_t *mask, float *dx, size_t n, float p);

/* ---- activations, elementwise over n; y may be x and dx may be dy ---- */
void kern_relu_fwd(const float *x, float *y, size_t n);
void kern_relu_bwd(const float *y, const float *dy, float *dx, size_t n); /* from output y */
void kern_gelu_fwd(const float *x, float *y, size_t n, enum kern_gelu approx);
void kern_gelu_bwd(const float *x, const float *dy, float *dx, size_t n, enum kern_gelu approx); /* from input x */
void kern_tanh_fwd(const float *x, float *y, size_t n);
void kern_tanh_bwd(const float *y, const float *dy, float *dx, size_t n); /* from output y */
void kern_sigmoid_fwd(const float *x, float *y, size_t n);
void kern_sigmoid_bwd(const float *y, const float *dy, float *dx, size_t n); /* from output y */
/* leaky_relu, elu, silu, softplus, hardtanh, hardsigmoid, hardswish and
 * mish (act_elem.h's formulas, where a and b are what each takes); bwd from
 * input x */
void kern_act_fwd(enum kern_act k, const float *x, float *y, size_t n, float a, float b);
void kern_act_bwd(enum kern_act k, const float *x, const float *dy, float *dx, size_t n, float a, float b);
/* PReLU over x (n, c, inner) with weight w (c): c 1 shares one weight;
 * backward from the input x, dx written (NULL: skipped), dw accumulated
 * (NULL: skipped); dx may be dy */
void kern_prelu_fwd(const float *x, const float *w, float *y, int n, int c, int64_t inner);
void kern_prelu_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, int n, int c, int64_t inner);

/* ---- softmax over the middle axis of (OUTER, DIM, INNER); bwd from output y ---- */
void kern_softmax_fwd(const float *x, float *y, int outer, int dim, int inner);
void kern_softmax_bwd(const float *y, const float *dy, float *dx, int outer, int dim, int inner);
void kern_log_softmax_fwd(const float *x, float *y, int outer, int dim, int inner);
void kern_log_softmax_bwd(const float *y, const float *dy, float *dx, int outer, int dim, int inner);

/* ---- residuals and gradient sums ---- */
void kern_add(const float *a, const float *b, float *y, size_t n); /* y may be a or b */
void kern_accumulate(float *dst, const float *src, size_t n);      /* dst += src */

/* ---- losses: return the loss; dx (NULL: skip) = scale * dloss/dx.
 * A mean over zero elements or rows is NaN with a zero gradient, as PyTorch. ---- */
double kern_mse(const float *x, const float *target, float *dx, size_t n,
		enum kern_reduction red, float scale);
/* The elementwise losses against real targets, e = x - target, as
 * PyTorch's MSELoss (kern_mse's), L1Loss (|e|, gradient sign(e), 0 at 0), SmoothL1Loss(beta)
 * (e²/(2 beta) below beta, else |e| - beta/2; at beta 0 the L1 loss, but
 * for its gradient at e = 0, which is PyTorch's -1, not 0) and
 * HuberLoss(delta) (e²/2 below delta, else delta (|e| - delta/2)); and
 * BCELoss (x probabilities: -(t log x + (1 - t) log(1 - x)), each log
 * clamped at -100, the gradient's denominator x(1 - x) at 1e-12) and
 * BCEWithLogitsLoss (x raw scores: the gradient sigmoid(x) - t); each
 * term in float, summed in double as kern_mse's. */
/* KLDivLoss (x log-probabilities: t (log t - x), 0 where t is 0, or with
 * log_target, param 1, e^t (t - x); the gradient -t or -e^t) likewise. */
enum kern_regression { KERN_L1, KERN_SMOOTH_L1, KERN_HUBER, KERN_BCE, KERN_BCE_LOGITS, KERN_KL_DIV, KERN_MSE };
double kern_regression(enum kern_regression kind, float param, const float *x, const float *target, float *dx, size_t n,
		       enum kern_reduction red, float scale);
/* The same with a param per element of the last dimension where per is
 * not NULL: element i's is per[i % nper] (bce_with_logits' pos_weight of
 * one weight per output). */
double kern_regression_per(enum kern_regression kind, float param, const float *per, int64_t nper, const float *x,
			   const float *target, float *dx, size_t n, enum kern_reduction red, float scale);
/* Rows whose target is ignore_index (PyTorch: -100) add nothing and do not
 * count in the mean.  w: a weight per class, or NULL (each 1): a row of
 * target t weighs w[t], and a mean divides by the counted rows' weights
 * (loss_elem.h).  KERN_ERR_INDEX, nothing written, if another target is
 * outside [0, c). */
int kern_nll(const float *logp,      // (N, C)
	     const int32_t *target,  // (N)
	     float *dlogp,           // (N, C)
	     int n, int c, int ignore_index, const float *w, enum kern_reduction red, float scale, double *loss);
/* log_softmax and nll in one pass over logits (N, C); with label smoothing
 * eps in (0, 1], PyTorch's (1 - eps) nll + eps (mean over classes of -log p)
 * per row, whose gradient is softmax - (1 - eps) onehot - eps / C. */
int kern_cross_entropy(const float *logits, const int32_t *target, float *dlogits,
		       int n, int c, int ignore_index, const float *w, float smoothing, enum kern_reduction red, float scale,
		       double *loss);
/* Rows whose first maximal logit is at the target class. */
long kern_argmax_correct(const float *logits, const int32_t *target, int n, int c);
#endif
