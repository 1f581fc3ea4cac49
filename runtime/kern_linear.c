/* kern_linear.c: the fully connected layer y = x wᵀ + b and its gradients,
 * as three matrix products through kern_gemm.
 * Leading dimensions are flattened by the caller: x (B, T, K) is (B*T, K).
 * The bias gradient sums each column over rows in row order, columns split
 * across threads in fixed blocks, so no sum depends on the thread count.
 */
#include "runtime/kern.h"

#define COLS 64 /* columns of db per block: one thread's share, a few cache lines */

void kern_linear_fwd(const float *x, const float *w, const float *b, float *y, int n, int k, int m)
{
	kern_gemm(false, true, n, m, k, 1.0f, x, k, w, k, 0.0f, y, m);
	if (!b)
		return;
	#pragma omp parallel for schedule(static) if ((size_t)n * m > 65536)
	for (int r = 0; r < n; r++) {
		float *restrict row = y + (size_t)r * m;
		for (int j = 0; j < m; j++)
			row[j] += b[j];
	}
}

void kern_linear_bwd(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
		     int n, int k, int m)
{
	if (dx)
		kern_gemm(false, false, n, k, m, 1.0f, dy, m, w, k, 0.0f, dx, k);
	if (dw)
		kern_gemm(true, false, m, k, n, 1.0f, dy, m, x, k, 1.0f, dw, k);
	if (!db)
		return;
	int blocks = (m + COLS - 1) / COLS;
	#pragma omp parallel for schedule(static) if ((size_t)n * m > 65536)
	for (int bi = 0; bi < blocks; bi++) {
		int j0 = bi * COLS, len = m - j0 < COLS ? m - j0 : COLS;
		double acc[COLS] = { 0 };
		for (int r = 0; r < n; r++) {
			const float *row = dy + (size_t)r * m + j0;
			for (int j = 0; j < len; j++)
				acc[j] += row[j];
		}
		for (int j = 0; j < len; j++)
			db[j0 + j] += (float)acc[j];
	}
}
