/* kern_softmax.c: softmax and log-softmax along one axis of a tensor viewed
 * as (OUTER, DIM, INNER), forward and backward from the saved output.
 * Numerically stable: the maximum along the axis is subtracted before exp.
 * Rows along the axis are independent; INNER > 1 is walked in tiles of
 * TILE positions so the loops run along contiguous memory.  No thread
 * dependence: each row is one thread's, summed in one order.
 */
#include "runtime/kern.h"

#include <math.h>

#define PAR_MIN 32768
#define TILE 64

/* One tile of up to TILE rows along the axis, starting at x[o][0][i0]. */
static void fwd_tile(const float *x, float *y, int dim, int inner, int len, bool log_out)
{
	float mx[TILE], sum[TILE];
	for (int i = 0; i < len; i++) {
		mx[i] = -INFINITY;
		sum[i] = 0;
	}
	for (int k = 0; k < dim; k++)
		for (int i = 0; i < len; i++)
			mx[i] = fmaxf(mx[i], x[(size_t)k * inner + i]);
	for (int k = 0; k < dim; k++)
		for (int i = 0; i < len; i++) {
			float e = expf(x[(size_t)k * inner + i] - mx[i]);
			sum[i] += e;
			if (!log_out)
				y[(size_t)k * inner + i] = e;
		}
	/* log-softmax as (x - max) - log Σ, as PyTorch: x - (max + log Σ) loses
	 * the low bits of x when |x| is large */
	for (int i = 0; i < len; i++)
		sum[i] = log_out ? logf(sum[i]) : 1.0f / sum[i];
	for (int k = 0; k < dim; k++)
		for (int i = 0; i < len; i++) {
			size_t at = (size_t)k * inner + i;
			y[at] = log_out ? (x[at] - mx[i]) - sum[i] : y[at] * sum[i];
		}
}

/* A contiguous row (INNER == 1): the sum in double, as dim may be a vocabulary. */
static void fwd_row(const float *restrict x, float *restrict y, int dim, bool log_out)
{
	float mx = -INFINITY;
	for (int k = 0; k < dim; k++)
		mx = fmaxf(mx, x[k]);
	double s = 0;
	for (int k = 0; k < dim; k++) {
		float e = expf(x[k] - mx);
		s += e;
		if (!log_out)
			y[k] = e;
	}
	if (log_out) {
		float ls = (float)log(s);
		for (int k = 0; k < dim; k++)
			y[k] = (x[k] - mx) - ls;
	} else {
		float r = (float)(1.0 / s);
		for (int k = 0; k < dim; k++)
			y[k] *= r;
	}
}

static void fwd(const float *x, float *y, int outer, int dim, int inner, bool log_out)
{
	if (inner == 1) {
		#pragma omp parallel for schedule(static) if ((size_t)outer * dim > PAR_MIN)
		for (int o = 0; o < outer; o++)
			fwd_row(x + (size_t)o * dim, y + (size_t)o * dim, dim, log_out);
		return;
	}
	int tiles = (inner + TILE - 1) / TILE;
	#pragma omp parallel for collapse(2) schedule(static) if ((size_t)outer * dim * inner > PAR_MIN)
	for (int o = 0; o < outer; o++)
		for (int t = 0; t < tiles; t++) {
			size_t at = (size_t)o * dim * inner + (size_t)t * TILE;
			int len = inner - t * TILE < TILE ? inner - t * TILE : TILE;
			fwd_tile(x + at, y + at, dim, inner, len, log_out);
		}
}

/* softmax: dx = y (dy - Σ dy y); log-softmax: dx = dy - exp(y) Σ dy. */
static void bwd_tile(const float *y, const float *dy, float *dx, int dim, int inner, int len, bool log_out)
{
	float s[TILE];
	for (int i = 0; i < len; i++)
		s[i] = 0;
	for (int k = 0; k < dim; k++)
		for (int i = 0; i < len; i++) {
			size_t at = (size_t)k * inner + i;
			s[i] += log_out ? dy[at] : dy[at] * y[at];
		}
	for (int k = 0; k < dim; k++)
		for (int i = 0; i < len; i++) {
			size_t at = (size_t)k * inner + i;
			dx[at] = log_out ? dy[at] - expf(y[at]) * s[i] : y[at] * (dy[at] - s[i]);
		}
}

static void bwd(const float *y, const float *dy, float *dx, int outer, int dim, int inner, bool log_out)
{
	int tiles = (inner + TILE - 1) / TILE;
	#pragma omp parallel for collapse(2) schedule(static) if ((size_t)outer * dim * inner > PAR_MIN)
	for (int o = 0; o < outer; o++)
		for (int t = 0; t < tiles; t++) {
			size_t at = (size_t)o * dim * inner + (size_t)t * TILE;
			int len = inner - t * TILE < TILE ? inner - t * TILE : TILE;
			bwd_tile(y + at, dy + at, dx + at, dim, inner, len, log_out);
		}
}

void kern_softmax_fwd(const float *x, float *y, int outer, int dim, int inner)
{
	fwd(x, y, outer, dim, inner, false);
}

void kern_softmax_bwd(const float *y, const float *dy, float *dx, int outer, int dim, int inner)
{
	bwd(y, dy, dx, outer, dim, inner, false);
}

void kern_log_softmax_fwd(const float *x, float *y, int outer, int dim, int inner)
{
	fwd(x, y, outer, dim, inner, true);
}

void kern_log_softmax_bwd(const float *y, const float *dy, float *dx, int outer, int dim, int inner)
{
	bwd(y, dy, dx, outer, dim, inner, true);
}
