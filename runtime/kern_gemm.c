/* kern_gemm.c: single-precision matrix product whose result does not depend
 * on the thread count.  OpenBLAS's own threading changes the rounding of
 * sgemm with the number of threads (measured: conv outputs differed between 1
 * and 2 threads), so OpenBLAS runs single-threaded and the product is cut
 * here into a fixed set of row or column blocks, a function of the shape
 * only, which OpenMP threads take in any order.  Each block is one
 * independent sgemm call, so every element is rounded the same way however
 * many threads run.
 */
#include "runtime/kern.h"

#include <cblas.h>

#define BLOCK_MIN 64   /* narrowest block: thinner ones lose more to packing than they gain */
#define BLOCKS_MAX 16  /* most blocks, so at most 16 threads share one product */
#define SPLIT_FLOPS 4e6 /* below this a product is one call */

void kern_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
	       const float *b, int ldb, float beta, float *c, int ldc)
{
	if (m <= 0 || n <= 0)
		return;
	bool split_n = n >= m;
	int dim = split_n ? n : m;
	/* small products stay whole: one call beats several, and one thread suffices */
	int blocks = 2.0 * m * n * k < SPLIT_FLOPS ? 1 : dim / BLOCK_MIN;
	blocks = blocks < 1 ? 1 : blocks > BLOCKS_MAX ? BLOCKS_MAX : blocks;
	int step = (dim + blocks - 1) / blocks;
	step = (step + 15) & ~15; /* whole vectors per block */
	blocks = (dim + step - 1) / step;
	#pragma omp parallel for schedule(static) if (blocks > 1)
	for (int i = 0; i < blocks; i++) {
		int lo = i * step, len = dim - lo < step ? dim - lo : step;
		const float *ab = a, *bb = b;
		float *cb;
		if (split_n) {
			bb = tb ? b + (size_t)lo * ldb : b + lo;
			cb = c + lo;
		} else {
			ab = ta ? a + lo : a + (size_t)lo * lda;
			cb = c + (size_t)lo * ldc;
		}
		cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
			    split_n ? m : len, split_n ? len : n, k, alpha, ab, lda, bb, ldb, beta, cb, ldc);
	}
}
