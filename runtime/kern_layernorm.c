/* kern_layernorm.c: layer normalisation over the last d elements of each
 * row, with optional elementwise affine, forward and backward.
 * The mean sums in double, the variance in float.
 * Rows are independent and split across threads; dgamma and dbeta sum over
 * rows in row order within fixed column blocks, so no sum depends on the
 * thread count.  Group norm's rows are a sample's groups of channels, its
 * affine per channel; its parameter gradients sum a channel at a time.
 */
#include "runtime/kern.h"

#include <math.h>

#define PAR_MIN 32768
#define COLS 64 /* columns of dgamma/dbeta per block */

/* A row's mean and 1 / sqrt(biased variance + eps).  The mean's sum in
 * double: a row whose values are all equal gets their exact mean and a
 * variance of exactly 0 (NaN with eps=0, as PyTorch's row moments give). */
static inline void row_moments(const float *restrict in, int d, float eps, float *mean_out, float *invstd_out)
{
	double s = 0;
	float ss = 0;
	#pragma omp simd reduction(+:s)
	for (int j = 0; j < d; j++)
		s += in[j];
	float mean = (float)(s / (double)d);
	#pragma omp simd reduction(+:ss)
	for (int j = 0; j < d; j++)
		ss += (in[j] - mean) * (in[j] - mean);
	*mean_out = mean;
	*invstd_out = 1.0f / sqrtf(ss / (float)d + eps);
}

/* A row's dx from its dy (g; out may be g), the row's gamma at c0 + j / hw
 * for element j (a layer norm's: c0 0, hw 1). */
static inline void row_bwd(const float *in, const float *g, float *out, int d, float mean, float invstd, const float *gamma,
			   int c0, int hw)
{
	float a = 0, b = 0;
	/* a = Σ gamma dy, b = Σ gamma dy xhat */
	#pragma omp simd reduction(+:a, b)
	for (int j = 0; j < d; j++) {
		float gd = gamma ? gamma[c0 + j / hw] * g[j] : g[j];
		a += gd;
		b += gd * (in[j] - mean) * invstd;
	}
	a /= (float)d;
	b /= (float)d;
	for (int j = 0; j < d; j++) {
		float gd = gamma ? gamma[c0 + j / hw] * g[j] : g[j];
		out[j] = invstd * (gd - a - (in[j] - mean) * invstd * b);
	}
}

void kern_layernorm_fwd(const float *x, const float *gamma, const float *beta, float *y,
			float *save_mean, float *save_invstd, int rows, int d, float eps)
{
	#pragma omp parallel for schedule(static) if ((size_t)rows * d > PAR_MIN)
	for (int r = 0; r < rows; r++) {
		const float *restrict in = x + (size_t)r * d;
		float *restrict out = y + (size_t)r * d;
		float mean, invstd;
		row_moments(in, d, eps, &mean, &invstd);
		for (int j = 0; j < d; j++) {
			float g = gamma ? gamma[j] : 1.0f, b = beta ? beta[j] : 0.0f;
			out[j] = (in[j] - mean) * invstd * g + b;
		}
		save_mean[r] = mean;
		save_invstd[r] = invstd;
	}
}

void kern_layernorm_bwd(const float *x, const float *gamma, const float *save_mean,
			const float *save_invstd, const float *dy,
			float *dx, float *dgamma, float *dbeta, int rows, int d)
{
	if (dx) {
		#pragma omp parallel for schedule(static) if ((size_t)rows * d > PAR_MIN)
		for (int r = 0; r < rows; r++)
			row_bwd(x + (size_t)r * d, dy + (size_t)r * d, dx + (size_t)r * d, d, save_mean[r], save_invstd[r], gamma, 0, 1);
	}
	if (!dgamma && !dbeta)
		return;
	int blocks = (d + COLS - 1) / COLS;
	#pragma omp parallel for schedule(static) if ((size_t)rows * d > PAR_MIN)
	for (int bi = 0; bi < blocks; bi++) {
		int j0 = bi * COLS, len = d - j0 < COLS ? d - j0 : COLS;
		double sg[COLS] = { 0 }, sb[COLS] = { 0 };
		for (int r = 0; r < rows; r++) {
			const float *in = x + (size_t)r * d + j0, *g = dy + (size_t)r * d + j0;
			float mean = save_mean[r], invstd = save_invstd[r];
			for (int j = 0; j < len; j++) {
				sg[j] += g[j] * (in[j] - mean) * invstd;
				sb[j] += g[j];
			}
		}
		for (int j = 0; j < len; j++) {
			if (dgamma)
				dgamma[j0 + j] += (float)sg[j];
			if (dbeta)
				dbeta[j0 + j] += (float)sb[j];
		}
	}
}

/* Group norm: each (sample, group) row as a layer norm's, the affine per
 * channel of hw elements. */
void kern_groupnorm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
			float *save_invstd, int n, int groups, int cpg, int hw, float eps)
{
	int rows = n * groups, d = cpg * hw;
	#pragma omp parallel for schedule(static) if ((size_t)rows * d > PAR_MIN)
	for (int r = 0; r < rows; r++) {
		const float *restrict in = x + (size_t)r * d;
		float *restrict out = y + (size_t)r * d;
		float mean, invstd;
		row_moments(in, d, eps, &mean, &invstd);
		for (int k = 0, c = r % groups * cpg; k < cpg; k++, c++) {
			float g = gamma ? gamma[c] : 1.0f, b = beta ? beta[c] : 0.0f;
			for (int j = k * hw; j < (k + 1) * hw; j++)
				out[j] = (in[j] - mean) * invstd * g + b;
		}
		save_mean[r] = mean;
		save_invstd[r] = invstd;
	}
}

void kern_groupnorm_bwd(const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			const float *dy, float *dx, float *dgamma, float *dbeta, int n, int groups, int cpg, int hw)
{
	int rows = n * groups, d = cpg * hw, c = groups * cpg;
	/* parameter gradients first: dx may be dy */
	if (dgamma || dbeta) {
		#pragma omp parallel for schedule(static) if ((size_t)rows * d > PAR_MIN)
		for (int ch = 0; ch < c; ch++) {
			double sg = 0, sb = 0;
			for (int i = 0; i < n; i++) {
				int r = i * groups + ch / cpg;
				const float *in = x + ((size_t)i * c + ch) * hw, *g = dy + ((size_t)i * c + ch) * hw;
				float mean = save_mean[r], invstd = save_invstd[r];
				for (int j = 0; j < hw; j++) {
					sg += g[j] * (in[j] - mean) * invstd;
					sb += g[j];
				}
			}
			if (dgamma)
				dgamma[ch] += (float)sg;
			if (dbeta)
				dbeta[ch] += (float)sb;
		}
	}
	if (!dx)
		return;
	#pragma omp parallel for schedule(static) if ((size_t)rows * d > PAR_MIN)
	for (int r = 0; r < rows; r++)
		row_bwd(x + (size_t)r * d, dy + (size_t)r * d, dx + (size_t)r * d, d, save_mean[r], save_invstd[r], gamma,
			r % groups * cpg, hw);
}
