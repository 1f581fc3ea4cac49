/* kemu_check.cu: kemu's own checks (tests/fakecuda/kemu.h), run by
 * tests/cli/gpu_kemu_order.sh in each order (TRAINC_KEMU_ORDER): that
 * barriers and warp exchanges (shuffles of every kind, votes, many in a
 * row) answer as on a GPU in every order, block_sum over blocks of any
 * size; that a kernel missing a barrier answers wrongly (in every order
 * when no thread wrote what it reads, which poisoned shared memory shows;
 * in reverse and shuffled orders when the writer runs first in forward
 * order); and that a barrier not every thread reaches, threads at two
 * different barriers, a shuffle in a partial warp and a misaligned pointer
 * argument stop the process.
 * Linked without the stand-in (fake_cuda.c): the few functions kemu.cc
 * calls into it are defined below as a test of the emulator alone needs
 * them (launches run at once, every pointer is device memory, a refused
 * launch ends the test), and kernels write host memory.  Prints "ok"/"FAIL" lines; exits 1 on a
 * failure.
 */
#include "runtime/cuda/kc_impl.cuh"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include "tests/fakecuda/tape.h"

bool tape_record_on(cudaStream_t, void (*)(const void *), const void *, size_t)
{
	return false;
}
void fake_launch_failed(cudaError_t e)
{
	fprintf(stderr, "kemu_check: a launch was refused (%d)\n", (int)e);
	exit(1);
}
void fake_dev_open(void) {}
void fake_dev_close(void) {}
bool fake_is_device(const void *)
{
	return true;
}
bool fake_reachable(const void *)
{
	return true;
}
void fake_kernel_check(const char *, cudaStream_t) {}
int fake_stream_device(cudaStream_t)
{
	return 0;
}
void fake_atomic_check(const char *, int, const void *, const void **, const void **) {}
}

static int failed;

static void check(bool ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	failed += !ok;
}

/* ---- what must hold in every order ---- */
__global__ void sum_kernel(const double *in, double *out, int n)
{
	__shared__ double sh[1024];
	double v = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		v += in[i];
	double s = block_sum(v, sh);
	double again = block_sum(2 * v, sh); /* sh reused at once */
	out[blockIdx.x * blockDim.x + threadIdx.x] = s + again;
}

/* every lane of every warp, ten rounds of each exchange */
__global__ void warp_kernel(int *out)
{
	int lane = threadIdx.x & 31, bad = 0;
	for (int r = 0; r < 10; r++) {
		int v = lane * 100 + r;
		bad += __shfl_xor_sync(0xffffffffu, v, 5) != ((lane ^ 5) * 100 + r);
		bad += __shfl_sync(0xffffffffu, v, (lane + r) & 31) != (((lane + r) & 31) * 100 + r);
		bad += __shfl_down_sync(0xffffffffu, v, 3) != (lane + 3 < 32 ? (lane + 3) * 100 + r : v);
		bad += __shfl_up_sync(0xffffffffu, v, 2) != (lane >= 2 ? (lane - 2) * 100 + r : v);
		bad += __ballot_sync(0xffffffffu, (lane + r) % 3 == 0) != ((0x49249249u << ((3 - r % 3) % 3)) & 0xffffffffu);
		bad += __any_sync(0xffffffffu, lane == r) != 1;
		bad += __all_sync(0xffffffffu, lane != r) != 0;
		bad += warp_sum((double)lane) != 496.0;
		__syncwarp();
	}
	out[blockIdx.x * blockDim.x + threadIdx.x] = bad;
}

/* ---- kernels missing a barrier ---- */
/* each thread reads its neighbour's word, which no barrier orders */
__global__ void neighbour_kernel(int *out)
{
	__shared__ int s[256];
	s[threadIdx.x] = (int)threadIdx.x;
	out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

/* thread 0 writes what every thread reads: right in forward order only */
__global__ void broadcast_kernel(int *out)
{
	__shared__ int s;
	if (threadIdx.x == 0)
		s = 42;
	out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

/* shared memory no thread wrote */
__global__ void unwritten_kernel(float *out)
{
	__shared__ float s[8];
	out[threadIdx.x] = s[threadIdx.x & 7];
}

/* ---- what must stop the process ---- */
__global__ void divergent_barrier_kernel(int *out)
{
	if (threadIdx.x < 16)
		__syncthreads();
	out[threadIdx.x] = 1;
}

/* odd and even threads at two different barriers, as many each: the
 * waits are in functions of their own, so the compiler cannot merge them */
__device__ __attribute__((noinline)) void odd_wait(int *out)
{
	out[threadIdx.x] = 1;
	__syncthreads();
}

__device__ __attribute__((noinline)) void even_wait(int *out)
{
	out[threadIdx.x] = 2 * (int)threadIdx.x;
	__syncthreads();
	out[threadIdx.x] += 1;
}

__global__ void two_barriers_kernel(int *out)
{
	if (threadIdx.x & 1)
		odd_wait(out);
	else
		even_wait(out);
}

__global__ void partial_warp_kernel(int *out)
{
	out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

__global__ void misaligned_kernel(double *out)
{
	out[threadIdx.x] = 1.0;
}

/* Whether what() ends the process with SIGABRT (a child's stderr is shown). */
static bool stops(void (*what)(void))
{
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) {
		what();
		_exit(0);
	}
	int st = 0;
	return p > 0 && waitpid(p, &st, 0) == p && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static int ints[1024];
static double dbl[16];

static void run_divergent(void)
{
	divergent_barrier_kernel<<<1, 64, 0, 0>>>(ints);
}

static void run_two_barriers(void)
{
	two_barriers_kernel<<<1, 64, 0, 0>>>(ints);
}

static void run_partial(void)
{
	partial_warp_kernel<<<1, 40, 0, 0>>>(ints);
}

static void run_misaligned(void)
{
	misaligned_kernel<<<1, 2, 0, 0>>>((double *)(void *)((char *)dbl + 4));
}

int main(void)
{
	static double in[3000], out[4 * 1024];
	double want = 0;
	for (int i = 0; i < 3000; i++) {
		in[i] = i % 97;
		want += in[i];
	}
	static const unsigned sizes[] = { 1024, 256, 96, 100, 37, 1 };
	for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		unsigned b = sizes[k];
		sum_kernel<<<3, b, 0, 0>>>(in, out, 3000);
		bool ok = true;
		for (unsigned t = 0; t < 3 * b; t++)
			ok &= out[t] == 3 * want;
		char what[96];
		snprintf(what, sizeof what, "block_sum twice in a row, blocks of %u threads: every thread has the sums", b);
		check(ok, what);
	}
	warp_kernel<<<3, 96, 0, 0>>>(ints);
	int bad = 0;
	for (int t = 0; t < 3 * 96; t++)
		bad += ints[t];
	check(bad == 0, "warp exchanges (xor, indexed, down, up shuffles, ballot, any, all, warp_sum), ten rounds: as on a GPU");

	neighbour_kernel<<<1, 256, 0, 0>>>(ints);
	bad = 0;
	for (int t = 0; t < 256; t++)
		bad += ints[t] != (t + 1) % 256;
	check(bad > 0, "a neighbour's word read without a barrier: wrong");
	broadcast_kernel<<<2, 256, 0, 0>>>(ints);
	bad = 0;
	for (int t = 0; t < 2 * 256; t++)
		bad += ints[t] != 42;
	const char *o = getenv("TRAINC_KEMU_ORDER");
	if (o && (strcmp(o, "reverse") == 0 || strcmp(o, "shuffle") == 0))
		check(bad > 0, "thread 0's word read without a barrier: wrong in this order");
	static float f[64];
	unwritten_kernel<<<1, 64, 0, 0>>>(f);
	bool nan = true;
	for (int t = 0; t < 64; t++)
		nan &= f[t] != f[t];
	check(nan, "shared memory no thread wrote reads as NaN");

	check(stops(run_divergent), "a __syncthreads that half the block skips stops the process");
	check(stops(run_two_barriers), "odd and even threads at two different __syncthreads stop the process");
	check(stops(run_partial), "a full-warp shuffle in a warp of 8 lanes stops the process");
	check(stops(run_misaligned), "a double pointer 4 bytes off its alignment stops the process");
	return failed ? 1 : 0;
}
