/* kemu.h: CUDA's thread model on the host, so the kernel files themselves
 * (runtime/cuda/kernels_*.cu) run in tests on a machine without a GPU.
 * tests/fakecuda/kemu-launch rewrites each `kernel<<<grid, block, shared,
 * stream>>>(args);` into a kemu_launch of a closure, and the result is
 * compiled as C++ with this header forced in first.
 * A block's threads are fibers on their own stacks (kemu.cc): each runs
 * until it reaches __syncthreads, __syncwarp or a warp exchange (shuffle
 * or vote), and waits there until every live thread of its block (or lane
 * of its warp) has arrived, so the kernels' barriers, shared memory and
 * warp exchanges mean what they mean on a GPU.  Blocks run one after
 * another, one launch at a time in the process, so a __shared__ variable
 * is a static, live for one block at a time.
 * TRAINC_KEMU_ORDER=forward|reverse|shuffle (TRAINC_KEMU_SEED) sets the
 * order of blocks and of threads between waits; shared memory starts each
 * block as NaN bytes; kemu.cc's header lists what else is checked and
 * what is not.
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
/* every __shared__ variable of the kernel files in one section, which
 * kemu.cc fills with NaN bytes at each block's start (TRAINC_KEMU_POISON) */
#define __shared__ static __attribute__((section("kemu_shared")))
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

/* barriers: the block's live threads, the warp's 32 lanes.  Every
 * exchange takes the full mask and width 32 (the kernels' only use; a
 * partial mask or narrower width stops the process as not emulated);
 * kemu_warp_exchange hands this lane's value in and returns the 32 lanes'
 * values of that exchange (KEMU_SLOT bytes apart), valid until the lane's
 * next exchange.  site: the call's place in the kernel (NULL: the caller),
 * for the check that every lane waits at the same one. */
enum { KEMU_SLOT = 16 };
void __syncthreads(void);
const unsigned char *kemu_warp_exchange(const void *v, size_t size, unsigned mask, int width, const void *site);
void __syncwarp(unsigned mask = 0xffffffffu);

template <typename T> T kemu_lane_value(const unsigned char *all, int lane)
{
	static_assert(sizeof(T) <= KEMU_SLOT, "a warp exchange of more than 16 bytes");
	T got;
	memcpy(&got, all + lane * KEMU_SLOT, sizeof got);
	return got;
}

static inline int kemu_lane(void)
{
	return (int)(kemu_now.tid & 31);
}

/* a source lane outside the warp reads the lane's own value, as on a GPU */
template <typename T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	const unsigned char *all = kemu_warp_exchange(&v, sizeof v, mask, width, nullptr);
	int from = kemu_lane() ^ lane_mask;
	return kemu_lane_value<T>(all, from >= 0 && from < 32 ? from : kemu_lane());
}

template <typename T> T __shfl_sync(unsigned mask, T v, int lane, int width = 32)
{
	return kemu_lane_value<T>(kemu_warp_exchange(&v, sizeof v, mask, width, nullptr), lane & 31);
}

template <typename T> T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	const unsigned char *all = kemu_warp_exchange(&v, sizeof v, mask, width, nullptr);
	unsigned from = (unsigned)kemu_lane() + delta;
	return kemu_lane_value<T>(all, from < 32 ? (int)from : kemu_lane());
}

template <typename T> T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	const unsigned char *all = kemu_warp_exchange(&v, sizeof v, mask, width, nullptr);
	int from = kemu_lane() - (int)delta;
	return kemu_lane_value<T>(all, from >= 0 ? from : kemu_lane());
}

/* votes: every lane's predicate through one exchange */
static inline unsigned __ballot_sync(unsigned mask, int pred)
{
	int p = pred != 0;
	const unsigned char *all = kemu_warp_exchange(&p, sizeof p, mask, 32, nullptr);
	unsigned bits = 0;
	for (int l = 0; l < 32; l++)
		bits |= (unsigned)(kemu_lane_value<int>(all, l) != 0) << l;
	return bits;
}

static inline int __any_sync(unsigned mask, int pred)
{
	return __ballot_sync(mask, pred) != 0;
}

static inline int __all_sync(unsigned mask, int pred)
{
	return __ballot_sync(mask, pred) == 0xffffffffu;
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
 * memory (or be NULL): a host pointer given to a kernel faults on a GPU.
 * misaligned: the first one (from 1) not aligned for its pointee type, as
 * a GPU's loads need (0: none), and that alignment. */
struct kemu_ptrs {
	const void *p[32];
	int n = 0;
	int misaligned = 0;
	size_t align = 0;
};

template <typename T> void kemu_ptr_of(kemu_ptrs &l, const T &v)
{
	if constexpr (std::is_pointer<T>::value) {
		using P = typename std::remove_cv<typename std::remove_pointer<T>::type>::type;
		if constexpr (!std::is_void<P>::value && !std::is_function<P>::value)
			if (!l.misaligned && l.n < 32 && (uintptr_t)v % alignof(P) != 0) {
				l.misaligned = l.n + 1;
				l.align = alignof(P);
			}
		if (l.n < 32)
			l.p[l.n++] = (const void *)v;
	}
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
