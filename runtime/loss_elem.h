/* loss_elem.h: the per-element arithmetic of the losses against real
 * targets (mse, l1, smooth_l1, huber, bce, bce_with_logits), and the
 * class weights of nll and cross_entropy, shared by the CPU loss (kern_loss.c), the CUDA
 * kernel (cuda/kernels_loss.cu), the one-kernel step (cuda/tiny.h) and the
 * host stand-in, so every path runs one formula; only their sums' order
 * differs.  Gradients are ATen's: sign(e) with 0 at 0, the kinks taken
 * with <= and >= (smooth_l1 at beta 0 gives PyTorch's -g at e = 0); bce's
 * and bce_with_logits' are ATen's too, clamps and all.
 * nvcc compiles every function for host and device; gcc sees plain static
 * inline C.  Nothing here loops or reads a thread index.
 */
#ifndef LOSS_ELEM_H
#define LOSS_ELEM_H
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/kern.h"

#ifdef __CUDACC__
#define LOSS_FN static inline __host__ __device__
#else
#define LOSS_FN static inline
#endif

/* The factor every element's gradient carries: d e^2/de = 2e for mse, then
 * 1/n for a mean, times the caller's scale. */
LOSS_FN float loss_regression_grad(enum kern_regression kind, int64_t n, enum kern_reduction red, float scale)
{
	float k = kind == KERN_MSE ? 2.0f : 1.0f;
	return (red == KERN_REDUCE_MEAN ? k / (float)n : k) * scale;
}

/* bce: -(t log x + (1 - t) log(1 - x)), each log at least -100, as
 * ATen's BCELoss (log(1 - x), not log1p(-x), as PyTorch 1.13); a NaN log
 * (x outside [0, 1]) stays NaN.  *d its gradient times g. */
LOSS_FN double loss_bce_term(float x, float t, float g, float *d)
{
	float lx = logf(x), l1x = logf(1.0f - x);
	lx = lx < -100.0f ? -100.0f : lx;
	l1x = l1x < -100.0f ? -100.0f : l1x;
	float den = (1.0f - x) * x;
	*d = g * (x - t) / (den < 1e-12f ? 1e-12f : den);
	return (t - 1.0f) * l1x - t * lx;
}

/* bce_with_logits: (1 - t) x + m + log(e^-m + e^(-x-m)), m = max(-x, 0),
 * as ATen's BCEWithLogitsLoss; the gradient sigmoid(x) - t.  With
 * pos_weight p other than 1, ATen's weighted form: the log term times
 * 1 + (p - 1) t, the gradient (p t + 1 - t) sigmoid(x) - p t. */
LOSS_FN double loss_bce_logits_term(float p, float x, float t, float g, float *d)
{
	float m = -x > 0.0f ? -x : 0.0f, lse = logf(expf(-m) + expf(-x - m)), sig = 1.0f / (1.0f + expf(-x));
	if (p == 1.0f) {
		*d = g * (sig - t);
		return (1.0f - t) * x + m + lse;
	}
	float pt = p * t;
	*d = g * ((pt + 1.0f - t) * sig - pt);
	return (1.0f - t) * x + ((p - 1.0f) * t + 1.0f) * (lse + m);
}

/* kl_div: ATen's xlogy(t, t) - t x (0 - 0 x where t is 0, NaN where t is
 * below 0), or with log_target e^t (t - x); the gradient -t or -e^t. */
LOSS_FN double loss_kl_div_term(bool log_target, float x, float t, float g, float *d)
{
	if (log_target) {
		float et = expf(t);
		*d = -g * et;
		return et * (t - x);
	}
	float xlogy = t == 0.0f ? 0.0f : t * logf(t); /* NaN t stays NaN */
	*d = -g * t;
	return xlogy - t * x;
}

/* The term of output x against target t, and *d its gradient times g;
 * param is smooth_l1's beta, huber's delta, bce_with_logits' pos_weight or
 * kl_div's log_target (1: true).
 * The regression losses read the error e = x - t alone. */
LOSS_FN double loss_regression_term(enum kern_regression kind, float param, float x, float t, float g, float *d)
{
	float e = x - t, z = fabsf(e);
	float sign = e > 0 ? 1.0f : e < 0 ? -1.0f : e; /* 0 at 0; NaN stays NaN */
	switch (kind) {
	case KERN_L1:
		*d = g * sign;
		return z;
	case KERN_SMOOTH_L1:
		*d = e <= -param ? -g : e >= param ? g : g * e / param; /* PyTorch's: -g at 0 when beta is 0 */
		return z < param ? 0.5f * z * z / param : z - 0.5f * param;
	case KERN_HUBER:
		*d = e <= -param ? -g * param : e >= param ? g * param : g * e;
		return z < param ? 0.5f * z * z : param * (z - 0.5f * param);
	case KERN_BCE:
		return loss_bce_term(x, t, g, d);
	case KERN_BCE_LOGITS:
		return loss_bce_logits_term(param, x, t, g, d);
	case KERN_KL_DIV:
		return loss_kl_div_term(param != 0.0f, x, t, g, d);
	case KERN_MSE:
		*d = g * e;
		return (double)e * e;
	}
	*d = 0;
	return 0;
}
/* Class weights (nll's and cross_entropy's weight=, w[c] per class): a row
 * of target t weighs w[t], and a mean divides by the counted rows' sum of
 * w[t], as ATen's total_weight.  With label smoothing eps over C classes
 * (ATen: the smoothed part is -Σ_c w_c log p_c, over the same total) the
 * row's term is (1 - eps) w_t (ls - (z_t - mx)) + eps (ls W - zw) / C,
 * W = Σ_c w_c (loss_class_weight_sum) and zw = Σ_c w_c (z_c - mx) in
 * double; its gradient at class k is gs softmax_k - gi eps w_k / C, less
 * gi (1 - eps) w_t at the target, gs = gi ((1 - eps) w_t + eps W / C). */
LOSS_FN double loss_class_weight_sum(const float *w, int c)
{
	double s = 0;
	for (int k = 0; k < c; k++)
		s += w[k];
	return s;
}
LOSS_FN double loss_ce_weighted_term(float ls, float zt, float mx, double zw, float wt, double wsum, int c, float eps)
{
	double nll = (double)wt * (ls - (zt - mx));
	return eps > 0 ? (1 - (double)eps) * nll + eps * ((double)ls * wsum - zw) / c : nll;
}
LOSS_FN float loss_ce_weighted_gs(float gi, float eps, float wt, double wsum, int c)
{
	return gi * ((1.0f - eps) * wt + eps * (float)wsum / (float)c);
}
#endif
