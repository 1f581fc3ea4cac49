/* act_elem.h: the per-element arithmetic of the activations of
 * OP_ACT_CASES (leaky_relu, elu and selu, silu, softplus, hardtanh and
 * relu6, hardsigmoid, hardswish, mish, celu, logsigmoid, softsign,
 * tanhshrink, softshrink, hardshrink, threshold), shared by the CPU loops
 * (kern_act.c), the CUDA kernel (cuda/kernels_ew.cu), the one-kernel step
 * (cuda/tiny.h) and the host stand-in, so every path runs one formula.
 * Each is ATen's CPU kernel of the same name, forward and backward from
 * the input x (PyTorch's autograd saves the input for all of them), with
 * its comparisons at the kinks: leaky_relu and elu take the negative side
 * at x = 0, hardtanh's gradient is 0 at either bound, hardsigmoid's at
 * +-3, hardswish's is x / 3 + 1/2 from -3 to 3 inclusive, and softplus is
 * x itself where x * beta is above the threshold; the shrinks' gradient
 * is 0 from -lambd to lambd inclusive, threshold's at and below it.
 * softsign and tanhshrink are compositions in PyTorch (x / (|x| + 1),
 * x - tanh x): their gradients are autograd's sums of the parts.  NaN
 * passes through each, as through ATen's (its clamps test for it; the
 * comparisons here let it through; softshrink keeps it as PyTorch 2
 * does, where 1.13 gave 0).  elu computes exp(x) - 1 as expm1 (PyTorch 2's; 1.13
 * subtracts, within 6e-8 of it).
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

/* min(max(v, lo), hi), NaN passing */
ACT_FN float act_clamp(float v, float lo, float hi)
{
	v = v < lo ? lo : v;
	return hi < v ? hi : v;
}

/* a and b: leaky_relu's negative_slope; elu's alpha and scale, both times
 * its scale (1, or selu's); softplus's beta and threshold; hardtanh's
 * min_val and max_val; celu's alpha and 1 / alpha; the shrinks' lambd;
 * threshold's threshold and value */
ACT_FN float act_elem_fwd(enum kern_act k, float x, float a, float b)
{
	switch (k) {
	case KERN_LEAKY_RELU: return x > 0.0f ? x : x * a;
	case KERN_ELU: return x <= 0.0f ? expm1f(x) * a : x * b;
	case KERN_SILU: return x / (1.0f + expf(-x));
	case KERN_SOFTPLUS: return x * a > b ? x : log1pf(expf(x * a)) / a;
	case KERN_HARDTANH: return act_clamp(x, a, b);
	case KERN_HARDSIGMOID: return act_clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f;
	case KERN_HARDSWISH: return x * act_clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f;
	case KERN_MISH: return x * tanhf(log1pf(expf(x)));
	case KERN_CELU: return x <= 0.0f ? expm1f(x * b) * a : x;
	case KERN_LOGSIGMOID: return (x < 0.0f ? x : 0.0f) - log1pf(expf(-fabsf(x)));
	case KERN_SOFTSIGN: return x / (fabsf(x) + 1.0f);
	case KERN_TANHSHRINK: return x - tanhf(x);
	case KERN_SOFTSHRINK: return x > a ? x - a : x < -a ? x + a : x * 0.0f;
	case KERN_HARDSHRINK: return x >= -a && x <= a ? 0.0f : x;
	case KERN_THRESHOLD: return x <= a ? b : x;
	}
	return x;
}

ACT_FN float act_elem_bwd(enum kern_act k, float x, float dy, float a, float b)
{
	switch (k) {
	case KERN_LEAKY_RELU: return x > 0.0f ? dy : dy * a;
	case KERN_ELU: return x <= 0.0f ? dy * a * expf(x) : dy * b;
	case KERN_SILU: {
		float s = 1.0f / (1.0f + expf(-x));
		return dy * s * (1.0f + x * (1.0f - s));
	}
	case KERN_SOFTPLUS: {
		float z = expf(x * a);
		return x * a > b ? dy : dy * z / (z + 1.0f);
	}
	case KERN_HARDTANH: return x <= a || x >= b ? 0.0f : dy;
	case KERN_HARDSIGMOID: return x > -3.0f && x < 3.0f ? dy * (1.0f / 6.0f) : 0.0f;
	case KERN_HARDSWISH: return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
	case KERN_MISH: {
		float s = 1.0f / (1.0f + expf(-x)), t = tanhf(log1pf(expf(x)));
		return dy * (t + x * s * (1.0f - t * t));
	}
	case KERN_CELU: return x <= 0.0f ? dy * b * a * expf(x * b) : dy;
	case KERN_LOGSIGMOID: {
		float z = expf(-fabsf(x));
		return x < 0.0f ? (1.0f - z / (1.0f + z)) * dy : z / (1.0f + z) * dy;
	}
	case KERN_SOFTSIGN: {
		/* autograd's through x / (|x| + 1): the quotient's two terms, the
		 * second through abs's sign (0 at 0) */
		float d = fabsf(x) + 1.0f, sg = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
		return dy / d + -dy * (x / d / d) * sg;
	}
	case KERN_TANHSHRINK: {
		float t = tanhf(x);
		return dy + -dy * (1.0f - t * t);
	}
	case KERN_SOFTSHRINK: case KERN_HARDSHRINK: return x >= -a && x <= a ? 0.0f : dy;
	case KERN_THRESHOLD: return x <= a ? 0.0f : dy;
	}
	return dy;
}

/* PReLU is leaky_relu with its weight w as the slope, forward and for dx
 * (ATen's prelu computes x > 0 ? x : w * x); this is an element's term of
 * the weight's gradient, summed over the elements w scales */
ACT_FN float act_prelu_dw(float x, float dy)
{
	return x > 0.0f ? 0.0f : x * dy;
}
#endif
