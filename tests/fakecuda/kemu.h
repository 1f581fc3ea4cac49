/* kemu.h: CUDA's thread model on the host, so the kernel files themselves
 * (runtime/cuda/kernels_*.cu) run in tests on a machine without a GPU.
 * tests/fakecuda/kemu-launch rewrites each `kernel<<<grid, block, shared,
 * stream>>>(args);` into a kemu_launch of a closure, and the result is
 * compiled as C++ with this header forced in first.
 * A block's threads are fibers on their own stacks (kemu.cc): each runs
 * until it reaches __syncthreads, __syncwarp or a warp shuffle, and waits
 * there until every live thread of its block (or lane of its warp) has
 * arrived, so the kernels' barriers, shared memory and warp exchanges mean
 * what they mean on a GPU.  Blocks run one after another, one launch at a
 * time in the process, so a __shared__ variable is a static, live for one
 * block at a time.
 * A barrier that can never complete (a thread waiting where the others
 * have exited or wait elsewhere) stops the process with the kernel's name.
 * Launch shapes are checked as CUDA checks them (cudaErrorInvalidConfiguration
 * at the next cudaGetLastError), and every pointer argument must point
 * into memory cudaMalloc gave (a host pointer stops the process); an
 * atomic must update memory of its own stream's GPU.
 * TRAINC_KEMU_ORDER=reverse runs the blocks and, between barriers, the
 * threads in reverse order: a kernel whose result depends on the order of
 * its threads (a race) answers differently in the two orders;
 * TRAINC_KEMU_ONLY=NAME (as `kernel_name<ARGS>` in the source) reverses that
 * kernel only.
 * Does not: emulate memory spaces (device pointers are host pointers),
 * run blocks concurrently, or model warps beyond their exchanges.
 */
#ifndef KEMU_H
#define KEMU_H
#include <cuda_runtime_api.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <type_traits>

/* what nvcc gives the kernel files, without its meaning on the host */
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
/* the project's headers take their nvcc branches (tiny.h's barriers) and
 * their device branches: the kernels are compiled with a * b + c fused
 * where the compiler likes (-ffp-contract=fast, FMA where the machine has
 * it), as nvcc does by default, and __fmul_rn / __dmul_rn, which the
 * optimizer uses to keep a product rounded on its own, are calls that
 * nothing fuses across */
#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
float __fmul_rn(float a, float b);
double __dmul_rn(double a, double b);

/* the running thread: set by kemu.cc around every thread's turn */
struct kemu_now {
	unsigned tid;
	uint3 block, grid, block_dim;
};
extern __thread struct kemu_now kemu_now;

static inline uint3 kemu_uint3(unsigned x, unsigned y, unsigned z)
{
	uint3 u;
	u.x = x;
	u.y = y;
	u.z = z;
	return u;
}
#define threadIdx kemu_uint3(kemu_now.tid, 0, 0)
#define blockIdx kemu_uint3(kemu_now.block.x, 0, 0)
#define blockDim kemu_now.block_dim
#define gridDim kemu_now.grid

/* barriers: the block's live threads, the warp's 32 lanes */
void __syncthreads(void);
void kemu_warp_exchange(const void *v, void *got, size_t size, int from_lane);
void __syncwarp(unsigned mask = 0xffffffffu);

template <typename T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	(void)mask;
	(void)width;
	T got;
	kemu_warp_exchange(&v, &got, sizeof v, (int)(kemu_now.tid & 31) ^ lane_mask);
	return got;
}

template <typename T> T __shfl_sync(unsigned mask, T v, int lane, int width = 32)
{
	(void)mask;
	(void)width;
	T got;
	kemu_warp_exchange(&v, &got, sizeof v, lane & 31);
	return got;
}

/* Stops the process unless p is memory of the running kernel's own GPU:
 * atomics on a peer's memory are not guaranteed over PCIe. */
void kemu_atomic_at(const void *p);

/* one block runs at a time on one OS thread, so a plain update is atomic */
template <typename T> T atomicAdd(T *p, T v)
{
	kemu_atomic_at(p);
	T old = *p;
	*p = old + v;
	return old;
}

static inline unsigned __float_as_uint(float f)
{
	unsigned u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float __uint_as_float(unsigned u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* The pointers among a launch's arguments, which must point into device
 * memory (or be NULL): a host pointer given to a kernel faults on a GPU. */
struct kemu_ptrs {
	const void *p[32];
	int n = 0;
};

template <typename T> void kemu_ptr_of(kemu_ptrs &l, const T &v)
{
	if constexpr (std::is_pointer<T>::value)
		if (l.n < 32)
			l.p[l.n++] = (const void *)v;
}

template <typename... A> kemu_ptrs kemu_ptrs_of(const A &...a)
{
	kemu_ptrs l;
	(kemu_ptr_of(l, a), ...);
	return l;
}

/* Queue body as a kernel of grid x block threads on stream s (run now,
 * recorded while s is captured, or queued in the stand-in's asynchronous
 * mode); name is the kernel's, for messages; ptrs: its pointer arguments. */
void kemu_launch(const char *name, dim3 grid, dim3 block, size_t shared, cudaStream_t s, std::function<void()> body,
		 const kemu_ptrs &ptrs);
#endif
