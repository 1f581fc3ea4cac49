/* kern_batchnorm.c: batch normalisation over (N, C, HW): per-channel
 * statistics of the batch in training, running statistics in evaluation.
 * Training saves the batch mean and 1/sqrt(var + eps) (0 when both are 0,
 * PyTorch's InvStd) for backward and moves the running stats towards the
 * batch's mean and unbiased variance, as PyTorch does.  Each channel is one
 * thread's: its sums run in one order (the mean's in double, the others in
 * float within a plane and double across planes), whatever the thread count.
 * Does not support momentum=None (cumulative averaging).
 */
#include "runtime/kern.h"

#include <assert.h>
#include <math.h>

#define PAR_MIN 32768

/* Σ over the n planes of channel ch, in double element by element (as
 * PyTorch's acc_type and the CUDA kernel): a channel whose values are all
 * equal gets their exact mean, so each (x - mean) below is 0 and its
 * variance exactly 0, which eps=0 depends on. */
static double sum_channel(const float *x, int n, int c, int hw, int ch)
{
	double s = 0;
	for (int i = 0; i < n; i++) {
		const float *p = x + ((size_t)i * c + ch) * hw;
		#pragma omp simd reduction(+:s)
		for (int j = 0; j < hw; j++)
			s += p[j];
	}
	return s;
}

/* Σ (x - mean)^2: a float sum within each plane, the planes in double. */
static double sumsq_channel(const float *x, int n, int c, int hw, int ch, float mean)
{
	double s = 0;
	for (int i = 0; i < n; i++) {
		const float *p = x + ((size_t)i * c + ch) * hw;
		float part = 0;
		#pragma omp simd reduction(+:part)
		for (int j = 0; j < hw; j++)
			part += (p[j] - mean) * (p[j] - mean);
		s += part;
	}
	return s;
}

/* y = x * alpha + beta over channel ch. */
static void scale_channel(const float *x, float *y, int n, int c, int hw, int ch, float alpha, float beta)
{
	for (int i = 0; i < n; i++) {
		const float *p = x + ((size_t)i * c + ch) * hw;
		float *q = y + ((size_t)i * c + ch) * hw;
		#pragma omp simd
		for (int j = 0; j < hw; j++)
			q[j] = p[j] * alpha + beta;
	}
}

void kern_batchnorm2d_fwd_train(const float *x, const float *gamma, const float *beta, float *y,
				float *running_mean, float *running_var, float *save_mean, float *save_invstd,
				int n, int c, int hw, float eps, float momentum)
{
	size_t m = (size_t)n * hw;
	assert(m > 1);
	#pragma omp parallel for schedule(static) if (m * c > PAR_MIN)
	for (int ch = 0; ch < c; ch++) {
		float mean = (float)(sum_channel(x, n, c, hw, ch) / (double)m);
		double var = sumsq_channel(x, n, c, hw, ch, mean) / (double)m; /* biased */
		/* a channel whose values are all equal normalises to its bias
		 * when eps is 0 (and backward gives it dx = 0) */
		float invstd = var == 0 && eps == 0 ? 0.0f : (float)(1.0 / sqrt(var + eps));
		float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
		scale_channel(x, y, n, c, hw, ch, invstd * g, b - mean * invstd * g);
		save_mean[ch] = mean;
		save_invstd[ch] = invstd;
		if (running_mean) {
			running_mean[ch] = (1 - momentum) * running_mean[ch] + momentum * mean;
			running_var[ch] = (1 - momentum) * running_var[ch] +
					  momentum * (float)(var * (double)m / (double)(m - 1));
		}
	}
}

void kern_batchnorm2d_fwd_eval(const float *x, const float *gamma, const float *beta,
			       const float *running_mean, const float *running_var, float *y,
			       int n, int c, int hw, float eps)
{
	#pragma omp parallel for schedule(static) if ((size_t)n * hw * c > PAR_MIN)
	for (int ch = 0; ch < c; ch++) {
		float invstd = 1.0f / sqrtf(running_var[ch] + eps);
		float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
		scale_channel(x, y, n, c, hw, ch, invstd * g, b - running_mean[ch] * invstd * g);
	}
}

void kern_batchnorm2d_bwd(const float *x, const float *gamma, const float *save_mean,
			  const float *save_invstd, const float *dy,
			  float *dx, float *dgamma, float *dbeta, int n, int c, int hw)
{
	size_t m = (size_t)n * hw;
	#pragma omp parallel for schedule(static) if (m * c > PAR_MIN)
	for (int ch = 0; ch < c; ch++) {
		float mean = save_mean[ch], invstd = save_invstd[ch];
		double sdy = 0, sdyx = 0; /* Σ dy and Σ dy * (x - mean) */
		for (int i = 0; i < n; i++) {
			const float *p = x + ((size_t)i * c + ch) * hw, *g = dy + ((size_t)i * c + ch) * hw;
			float a = 0, b = 0;
			#pragma omp simd reduction(+:a, b)
			for (int j = 0; j < hw; j++) {
				a += g[j];
				b += g[j] * (p[j] - mean);
			}
			sdy += a;
			sdyx += b;
		}
		float gm = gamma ? gamma[ch] : 1.0f;
		if (dgamma)
			dgamma[ch] += (float)(sdyx * invstd);
		if (dbeta)
			dbeta[ch] += (float)sdy;
		if (!dx)
			continue;
		/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) */
		float mdy = (float)(sdy / (double)m), k = (float)(sdyx / (double)m) * invstd * invstd;
		float s = gm * invstd;
		for (int i = 0; i < n; i++) {
			const float *p = x + ((size_t)i * c + ch) * hw, *g = dy + ((size_t)i * c + ch) * hw;
			float *q = dx + ((size_t)i * c + ch) * hw;
			#pragma omp simd
			for (int j = 0; j < hw; j++)
				q[j] = s * (g[j] - mdy - (p[j] - mean) * k);
		}
	}
}
