/* kc_impl.cuh: what the CUDA kernel files share: the launch shapes
 * (grid-stride loops of THREADS-thread blocks, a warp per row) and the
 * fixed-order sums of a block and of a warp.  The arithmetic of every
 * element, window and row is body.h's (optim_elem.h's for the optimizer,
 * act_elem.h's for the activations with a parameter),
 * shared with the host tests; the kernel files only map it onto threads.
 * Every sum runs in a fixed order (per-thread strided sums, then a tree in
 * shared memory or across a warp; the embedding's gradient in token order
 * after a sort, kernels_norm.cu), so a result never depends on
 * scheduling; the only atomics add whole numbers (argmax hits, in a
 * double), exact in any order.  Nothing allocates or synchronises; launch
 * errors surface at the caller's next cudaGetLastError.
 */
#ifndef KC_IMPL_CUH
#define KC_IMPL_CUH
#include "runtime/cuda/kc.h"

#include <assert.h>

#include "runtime/cuda/body.h"
#include "runtime/cuda/tiny.h"
#include "runtime/act_elem.h"
#include "runtime/optim_elem.h"

static_assert(sizeof(struct optim_coef) <= KC_OPTIM_COEF_BYTES, "optim_coef outgrew KC_OPTIM_COEF_BYTES");

enum {
	THREADS = 256,      /* per block of a grid-stride kernel */
	MAX_BLOCKS = 16384, /* grid cap: a grid-stride loop covers the rest */
	LOSS_THREADS = 1024 /* a block of a loss */
};
/* whole warps: the warp-per-row kernels and the losses shuffle with every
 * lane of a warp, which a partial last warp would leave undefined */
static_assert(THREADS % 32 == 0 && LOSS_THREADS % 32 == 0 && LOSS_THREADS <= 1024, "blocks of whole warps");

static inline unsigned blocks_for(int64_t n)
{
	int64_t b = (n + THREADS - 1) / THREADS;
	return (unsigned)(b < 1 ? 1 : b > (int64_t)MAX_BLOCKS ? (int64_t)MAX_BLOCKS : b);
}

/* blocks for `rows` rows at one warp each */
static inline unsigned warp_blocks_for(int64_t rows)
{
	return blocks_for(rows * 32);
}

#define FOR_EACH(i, n) \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* rows of a warp-per-row kernel: warp w takes rows w, w + warps, ... */
#define FOR_EACH_WARP_ROW(r, rows) \
	for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < (rows); \
	     r += ((int64_t)blockDim.x * gridDim.x) >> 5)

/* Sum of v over the block, the same in every thread: sh[t] += sh[t + s]
 * for s = half the block size rounded up to a power of two, .. 1, pairs
 * past the block's end skipped, so a block of any size sums every value
 * (of a power of two, the plain tree).  sh holds blockDim.x values. */
template <typename T> __device__ T block_sum(T v, T *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	unsigned top = 1;
	while (top < blockDim.x)
		top <<= 1;
	for (unsigned s = top / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s && threadIdx.x + s < blockDim.x)
			sh[threadIdx.x] += sh[threadIdx.x + s];
		__syncthreads();
	}
	T r = sh[0];
	__syncthreads();
	return r;
}

/* Sum over the warp, the same in every lane and equal to block_sum's tree
 * over 32 values (the butterfly adds the same pairs, and + commutes). */
template <typename T> __device__ T warp_sum(T v)
{
	for (int s = 16; s > 0; s >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, s);
	return v;
}

static inline __device__ float warp_max(float v)
{
	for (int s = 16; s > 0; s >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, s));
	return v;
}
#endif
