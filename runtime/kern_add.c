/* kern_add.c: elementwise sums for residual connections and for gathering
 * gradients that reach one tensor along several paths.
 * Does not broadcast: both operands have the same shape.  Each element is
 * one addition, so the thread split cannot change a result.
 */
#include "runtime/kern.h"

/* below this many elements a parallel region costs more than it saves */
#define PAR_MIN 65536

void kern_add(const float *a, const float *b, float *y, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}

void kern_accumulate(float *restrict dst, const float *restrict src, size_t n)
{
	#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
}
