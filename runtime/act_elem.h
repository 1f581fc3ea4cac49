/* act_elem.h: the per-element arithmetic of the activations with a
 * parameter (leaky_relu, elu, silu, softplus), shared by the CPU loops
 * (kern_act.c), the CUDA kernel (cuda/kernels_ew.cu) and the host stand-in,
 * so every path runs one formula.  Each is ATen's CPU kernel of the same
 * name, forward and backward from the input x (PyTorch's autograd saves
 * the input for all four): the same comparisons at the kinks, so
 * leaky_relu and elu take the negative side at x = 0, and softplus is x
 * itself where x * beta is above the threshold.  elu computes exp(x) - 1
 * as expm1 (PyTorch 2's; 1.13 subtracts, within 6e-8 of it).
 * nvcc compiles every function for host and device; gcc sees plain static
 * inline C.  Nothing here loops or reads a thread index.
 */
#ifndef ACT_ELEM_H
#define ACT_ELEM_H
#include <math.h>

#include "runtime/kern.h"

#ifdef __CUDACC__
#define ACT_FN static inline __host__ __device__
#else
#define ACT_FN static inline
#endif

/* a: leaky_relu's negative_slope, elu's alpha, softplus's beta; b: softplus's threshold */
ACT_FN float act_elem_fwd(enum kern_act k, float x, float a, float b)
{
	switch (k) {
	case KERN_LEAKY_RELU: return x > 0.0f ? x : x * a;
	case KERN_ELU: return x <= 0.0f ? expm1f(x) * a : x;
	case KERN_SILU: return x / (1.0f + expf(-x));
	case KERN_SOFTPLUS: return x * a > b ? x : log1pf(expf(x * a)) / a;
	}
	return x;
}

ACT_FN float act_elem_bwd(enum kern_act k, float x, float dy, float a, float b)
{
	switch (k) {
	case KERN_LEAKY_RELU: return x > 0.0f ? dy : dy * a;
	case KERN_ELU: return x <= 0.0f ? dy * a * expf(x) : dy;
	case KERN_SILU: {
		float s = 1.0f / (1.0f + expf(-x));
		return dy * s * (1.0f + x * (1.0f - s));
	}
	case KERN_SOFTPLUS: {
		float z = expf(x * a);
		return x * a > b ? dy : dy * z / (z + 1.0f);
	}
	}
	return dy;
}
#endif
