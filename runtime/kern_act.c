/* kern_act.c: elementwise activations relu, gelu (exact erf or tanh
 * approximation), tanh, sigmoid, and those of act_elem.h (leaky_relu, elu,
 * silu, softplus, hardtanh, hardsigmoid, hardswish, mish) and prelu,
 * forward and backward.
 * Backward of relu, tanh and sigmoid reads the saved output y (so relu may run
 * in place); the others' read the saved input x.  Outputs may alias inputs
 * element for element.  Each element is independent: no thread dependence.
 */
#include "runtime/kern.h"
#include "runtime/act_elem.h"

#include <math.h>

#define PAR_MIN 65536
#define SQRT_2_OVER_PI 0.7978845608028654f
#define INV_SQRT_2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f
#define GELU_C 0.044715f

void kern_relu_fwd(const float *x, float *y, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
	for (size_t i = 0; i < n; i++)
		y[i] = x[i] < 0.0f ? 0.0f : x[i]; /* NaN passes, as torch.relu */
}

void kern_relu_bwd(const float *y, const float *dy, float *dx, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
	for (size_t i = 0; i < n; i++)
		dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

void kern_gelu_fwd(const float *x, float *y, size_t n, enum kern_gelu approx)
{
	if (approx == KERN_GELU_TANH) {
		#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
		for (size_t i = 0; i < n; i++) {
			float v = x[i];
			y[i] = 0.5f * v * (1.0f + tanhf(SQRT_2_OVER_PI * (v + GELU_C * v * v * v)));
		}
	} else {
		#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
		for (size_t i = 0; i < n; i++) {
			float v = x[i];
			y[i] = 0.5f * v * (1.0f + erff(v * INV_SQRT_2));
		}
	}
}

void kern_gelu_bwd(const float *x, const float *dy, float *dx, size_t n, enum kern_gelu approx)
{
	if (approx == KERN_GELU_TANH) {
		#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
		for (size_t i = 0; i < n; i++) {
			float v = x[i], t = tanhf(SQRT_2_OVER_PI * (v + GELU_C * v * v * v));
			float dt = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_C * v * v);
			dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt);
		}
	} else {
		#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
		for (size_t i = 0; i < n; i++) {
			float v = x[i];
			float cdf = 0.5f * (1.0f + erff(v * INV_SQRT_2)), pdf = INV_SQRT_2PI * expf(-0.5f * v * v);
			dx[i] = dy[i] * (cdf + v * pdf);
		}
	}
}

void kern_tanh_fwd(const float *x, float *y, size_t n)
{
	#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
	for (size_t i = 0; i < n; i++)
		y[i] = tanhf(x[i]);
}

void kern_tanh_bwd(const float *y, const float *dy, float *dx, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
	for (size_t i = 0; i < n; i++)
		dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

void kern_sigmoid_fwd(const float *x, float *y, size_t n)
{
	#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
	for (size_t i = 0; i < n; i++)
		y[i] = 1.0f / (1.0f + expf(-x[i]));
}

void kern_sigmoid_bwd(const float *y, const float *dy, float *dx, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
	for (size_t i = 0; i < n; i++)
		dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

void kern_act_fwd(enum kern_act k, const float *x, float *y, size_t n, float a, float b)
{
	#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
	for (size_t i = 0; i < n; i++)
		y[i] = act_elem_fwd(k, x[i], a, b);
}

void kern_act_bwd(enum kern_act k, const float *x, const float *dy, float *dx, size_t n, float a, float b)
{
	#pragma omp parallel for schedule(static) if (n > PAR_MIN / 8)
	for (size_t i = 0; i < n; i++)
		dx[i] = act_elem_bwd(k, x[i], dy[i], a, b);
}

void kern_prelu_fwd(const float *x, const float *w, float *y, int n, int c, int64_t inner)
{
	int64_t total = (int64_t)n * c * inner;
	#pragma omp parallel for schedule(static) if (total > PAR_MIN)
	for (int64_t i = 0; i < total; i++)
		y[i] = act_elem_fwd(KERN_LEAKY_RELU, x[i], w[i / inner % c], 0.0f);
}

void kern_prelu_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, int n, int c, int64_t inner)
{
	/* the weight's gradient first: dx may overwrite dy */
	#pragma omp parallel for schedule(static) if (dw && (int64_t)n * c * inner > PAR_MIN && c > 1)
	for (int ch = 0; ch < (dw ? c : 0); ch++) {
		double acc = 0;
		for (int b = 0; b < n; b++) {
			int64_t at = ((int64_t)b * c + ch) * inner;
			for (int64_t j = 0; j < inner; j++)
				acc += act_prelu_dw(x[at + j], dy[at + j]);
		}
		dw[ch] += (float)acc;
	}
	int64_t total = (int64_t)n * c * inner;
	#pragma omp parallel for schedule(static) if (dx && total > PAR_MIN)
	for (int64_t i = 0; i < (dx ? total : 0); i++)
		dx[i] = act_elem_bwd(KERN_LEAKY_RELU, x[i], dy[i], w[i / inner % c], 0.0f);
}
