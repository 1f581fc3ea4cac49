/* kern_threads.c: one thread count for every library the kernels call.
 * OpenMP drives our loops and oneDNN (built on OpenMP here).  OpenBLAS is held
 * at one thread: its threaded sgemm rounds differently with the thread count,
 * so kern_gemm splits products itself and runs the pieces on OpenMP threads.
 * Does not pin threads.
 */
#include "runtime/kern.h"

#include <cblas.h>
#include <omp.h>

void kern_set_threads(int n)
{
	if (n < 1)
		n = 1;
	omp_set_num_threads(n);
	openblas_set_num_threads(1);
}
