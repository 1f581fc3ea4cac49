/* loss_elem.h: the per-element arithmetic of the regression losses (mse,
 * l1, smooth_l1, huber), shared by the CPU loss (kern_loss.c), the CUDA
 * kernel (cuda/kernels_loss.cu), the one-kernel step (cuda/tiny.h) and the
 * host stand-in, so every path runs one formula; only their sums' order
 * differs.  Gradients are ATen's: sign(e) with 0 at 0, the kinks taken
 * with <= and >= (smooth_l1 at beta 0 gives PyTorch's -g at e = 0).
 * nvcc compiles every function for host and device; gcc sees plain static
 * inline C.  Nothing here loops or reads a thread index.
 */
#ifndef LOSS_ELEM_H
#define LOSS_ELEM_H
#include <math.h>
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

/* Element error e = x - target's term, and *d its gradient times g;
 * param is smooth_l1's beta or huber's delta. */
LOSS_FN double loss_regression_term(enum kern_regression kind, float param, float e, float g, float *d)
{
	float z = fabsf(e);
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
	case KERN_MSE:
		*d = g * e;
		return (double)e * e;
	}
	*d = 0;
	return 0;
}
#endif
