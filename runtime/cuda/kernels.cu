/* kernels.cu: the CUDA kernels of kc.h and their launchers.  The arithmetic
 * of every element, window and row is body.h's (optim_elem.h's for the
 * optimizer), shared with the host test; this file only maps it onto
 * threads: grid-stride loops of THREADS-thread blocks, a warp per row where
 * a row is summed, a block per channel for batch norm, one block for a loss
 * that must count its rows before it writes a gradient.
 * Every sum runs in a fixed order (per-thread strided sums, then a tree in
 * shared memory or across a warp), so a result never depends on scheduling;
 * the only atomics are the embedding gradient's scatter (order-dependent in
 * the last bits when ids repeat) and argmax's integer counts (exact).  The
 * pool backwards gather instead of scattering, in the CPU's order.
 * Nothing allocates or synchronises; launch errors surface at the caller's
 * next cudaGetLastError.  Past 600 lines because it holds every op family
 * of the first GPU backend; split it by family as they grow.
 */
#include "runtime/cuda/kc.h"

#include <assert.h>

#include "runtime/cuda/body.h"
#include "runtime/cuda/tiny.h"
#include "runtime/optim_elem.h"

static_assert(sizeof(struct optim_coef) <= KC_OPTIM_COEF_BYTES, "optim_coef outgrew KC_OPTIM_COEF_BYTES");

enum {
	THREADS = 256,      /* per block of a grid-stride kernel; a power of two for the trees */
	MAX_BLOCKS = 16384, /* grid cap: a grid-stride loop covers the rest */
	LOSS_THREADS = 1024 /* the one block of a loss */
};

static unsigned blocks_for(int64_t n)
{
	int64_t b = (n + THREADS - 1) / THREADS;
	return (unsigned)(b < 1 ? 1 : b > (int64_t)MAX_BLOCKS ? (int64_t)MAX_BLOCKS : b);
}

/* blocks for `rows` rows at one warp each */
static unsigned warp_blocks_for(int64_t rows)
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
 * for s = blockDim/2 .. 1.  sh holds blockDim.x values. */
template <typename T> __device__ T block_sum(T v, T *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
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

__device__ float warp_max(float v)
{
	for (int s = 16; s > 0; s >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, s));
	return v;
}

/* ---- activations ---- */
enum act { ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_TANH, ACT_SIGMOID };

template <int A> __global__ void act_fwd_kernel(const float *x, float *y, int64_t n)
{
	FOR_EACH(i, n) {
		switch (A) {
		case ACT_RELU: y[i] = body_relu_fwd(x[i]); break;
		case ACT_GELU: y[i] = body_gelu_fwd(x[i], KERN_GELU_NONE); break;
		case ACT_GELU_TANH: y[i] = body_gelu_fwd(x[i], KERN_GELU_TANH); break;
		case ACT_TANH: y[i] = body_tanh_fwd(x[i]); break;
		case ACT_SIGMOID: y[i] = body_sigmoid_fwd(x[i]); break;
		}
	}
}

/* v is the saved output y, or for gelu the saved input x */
template <int A> __global__ void act_bwd_kernel(const float *v, const float *dy, float *dx, int64_t n)
{
	FOR_EACH(i, n) {
		switch (A) {
		case ACT_RELU: dx[i] = body_relu_bwd(v[i], dy[i]); break;
		case ACT_GELU: dx[i] = body_gelu_bwd(v[i], dy[i], KERN_GELU_NONE); break;
		case ACT_GELU_TANH: dx[i] = body_gelu_bwd(v[i], dy[i], KERN_GELU_TANH); break;
		case ACT_TANH: dx[i] = body_tanh_bwd(v[i], dy[i]); break;
		case ACT_SIGMOID: dx[i] = body_sigmoid_bwd(v[i], dy[i]); break;
		}
	}
}

void kc_relu_fwd(cudaStream_t s, const float *x, float *y, int64_t n)
{
	if (n > 0) act_fwd_kernel<ACT_RELU><<<blocks_for(n), THREADS, 0, s>>>(x, y, n);
}

void kc_relu_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n)
{
	if (n > 0) act_bwd_kernel<ACT_RELU><<<blocks_for(n), THREADS, 0, s>>>(y, dy, dx, n);
}

void kc_gelu_fwd(cudaStream_t s, const float *x, float *y, int64_t n, enum kern_gelu approx)
{
	if (n <= 0) return;
	if (approx == KERN_GELU_TANH)
		act_fwd_kernel<ACT_GELU_TANH><<<blocks_for(n), THREADS, 0, s>>>(x, y, n);
	else
		act_fwd_kernel<ACT_GELU><<<blocks_for(n), THREADS, 0, s>>>(x, y, n);
}

void kc_gelu_bwd(cudaStream_t s, const float *x, const float *dy, float *dx, int64_t n, enum kern_gelu approx)
{
	if (n <= 0) return;
	if (approx == KERN_GELU_TANH)
		act_bwd_kernel<ACT_GELU_TANH><<<blocks_for(n), THREADS, 0, s>>>(x, dy, dx, n);
	else
		act_bwd_kernel<ACT_GELU><<<blocks_for(n), THREADS, 0, s>>>(x, dy, dx, n);
}

void kc_tanh_fwd(cudaStream_t s, const float *x, float *y, int64_t n)
{
	if (n > 0) act_fwd_kernel<ACT_TANH><<<blocks_for(n), THREADS, 0, s>>>(x, y, n);
}

void kc_tanh_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n)
{
	if (n > 0) act_bwd_kernel<ACT_TANH><<<blocks_for(n), THREADS, 0, s>>>(y, dy, dx, n);
}

void kc_sigmoid_fwd(cudaStream_t s, const float *x, float *y, int64_t n)
{
	if (n > 0) act_fwd_kernel<ACT_SIGMOID><<<blocks_for(n), THREADS, 0, s>>>(x, y, n);
}

void kc_sigmoid_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n)
{
	if (n > 0) act_bwd_kernel<ACT_SIGMOID><<<blocks_for(n), THREADS, 0, s>>>(y, dy, dx, n);
}

/* ---- dropout ---- */
/* step: NULL, or the finished-step counter whose successor is r's step word */
__global__ void dropout_fwd_kernel(const float *x, float *y, uint8_t *mask, int64_t n, float p, struct rng r,
				   const int64_t *step)
{
	if (step)
		r.ctr_hi[1] = (uint32_t)(*step + 1);
	float scale = body_dropout_scale(p);
	FOR_EACH(i, n) {
		uint8_t keep;
		y[i] = body_dropout_fwd(&r, (uint64_t)i, x[i], p, scale, &keep);
		mask[i] = keep;
	}
}

__global__ void dropout_bwd_kernel(const float *dy, const uint8_t *mask, float *dx, int64_t n, float p)
{
	float scale = body_dropout_scale(p);
	FOR_EACH(i, n) dx[i] = body_dropout_bwd(dy[i], mask[i], scale);
}

void kc_dropout_fwd(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, float p, struct rng r)
{
	if (n > 0) dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, s>>>(x, y, mask, n, p, r, NULL);
}

void kc_dropout_fwd_at(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, float p, struct rng r,
		       const int64_t *step)
{
	assert(step);
	if (n > 0) dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, s>>>(x, y, mask, n, p, r, step);
}

void kc_dropout_bwd(cudaStream_t s, const float *dy, const uint8_t *mask, float *dx, int64_t n, float p)
{
	if (n > 0) dropout_bwd_kernel<<<blocks_for(n), THREADS, 0, s>>>(dy, mask, dx, n, p);
}

/* ---- sums ---- */
__global__ void add_kernel(const float *a, const float *b, float *y, int64_t n)
{
	FOR_EACH(i, n) y[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float *dst, const float *src, int64_t n)
{
	FOR_EACH(i, n) dst[i] += src[i];
}

__global__ void scale_kernel(float *x, int64_t n, float c)
{
	FOR_EACH(i, n) x[i] *= c;
}

void kc_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n)
{
	if (n > 0) add_kernel<<<blocks_for(n), THREADS, 0, s>>>(a, b, y, n);
}

void kc_accumulate(cudaStream_t s, float *dst, const float *src, int64_t n)
{
	if (n > 0) accumulate_kernel<<<blocks_for(n), THREADS, 0, s>>>(dst, src, n);
}

void kc_scale(cudaStream_t s, float *x, int64_t n, float c)
{
	if (n > 0) scale_kernel<<<blocks_for(n), THREADS, 0, s>>>(x, n, c);
}

/* ---- biases ---- */
__global__ void bias_add_kernel(float *y, const float *b, int64_t rows, int m)
{
	FOR_EACH(i, rows * m) y[i] += b[i % m];
}

/* one thread per column, rows in order: kern_linear_bwd's sum exactly */
__global__ void bias_grad_kernel(const float *dy, float *db, int64_t rows, int m)
{
	FOR_EACH(j, m) db[j] += body_bias_grad_col(dy, rows, m, (int)j);
}

__global__ void channel_bias_add_kernel(float *y, const float *b, int n, int c, int64_t hw)
{
	FOR_EACH(i, (int64_t)n * c * hw) y[i] += b[(i / hw) % c];
}

/* one block per channel */
__global__ void channel_bias_grad_kernel(const float *dy, float *db, int n, int c, int64_t hw)
{
	__shared__ double sh[THREADS];
	int ch = blockIdx.x;
	int64_t m = (int64_t)n * hw;
	double acc = 0;
	for (int64_t e = threadIdx.x; e < m; e += blockDim.x)
		acc += dy[((e / hw) * c + ch) * hw + e % hw];
	acc = block_sum(acc, sh);
	if (threadIdx.x == 0)
		db[ch] += (float)acc;
}

void kc_bias_add(cudaStream_t s, float *y, const float *b, int64_t rows, int m)
{
	if (rows > 0 && m > 0) bias_add_kernel<<<blocks_for(rows * m), THREADS, 0, s>>>(y, b, rows, m);
}

void kc_bias_grad(cudaStream_t s, const float *dy, float *db, int64_t rows, int m)
{
	if (db && m > 0) bias_grad_kernel<<<blocks_for(m), THREADS, 0, s>>>(dy, db, rows, m);
}

void kc_channel_bias_add(cudaStream_t s, float *y, const float *b, int n, int c, int64_t hw)
{
	int64_t total = (int64_t)n * c * hw;
	if (total > 0) channel_bias_add_kernel<<<blocks_for(total), THREADS, 0, s>>>(y, b, n, c, hw);
}

void kc_channel_bias_grad(cudaStream_t s, const float *dy, float *db, int n, int c, int64_t hw)
{
	if (db && c > 0) channel_bias_grad_kernel<<<c, THREADS, 0, s>>>(dy, db, n, c, hw);
}

/* ---- pooling: one thread per output element forward, per input element
 * backward (a gather, so dx is written whole, in the CPU's order) ---- */
__global__ void maxpool_fwd_kernel(struct pool2d_desc d, int oh, int ow, const float *x, float *y, int32_t *idx)
{
	int64_t plane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)d.n * d.c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		y[i] = body_maxpool_out(&d, x + p * d.h * d.w, r / ow, r % ow, &idx[i]);
	}
}

__global__ void maxpool_bwd_kernel(struct pool2d_desc d, int oh, int ow, const int32_t *idx, const float *dy,
				   float *dx)
{
	int64_t plane = (int64_t)d.h * d.w, oplane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)d.n * d.c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		dx[i] = body_maxpool_grad(&d, oh, ow, idx + p * oplane, dy + p * oplane, r / d.w, r % d.w);
	}
}

__global__ void avgpool_fwd_kernel(struct pool2d_desc d, int oh, int ow, const float *x, float *y)
{
	int64_t plane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)d.n * d.c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		y[i] = body_avgpool_out(&d, x + p * d.h * d.w, r / ow, r % ow);
	}
}

__global__ void avgpool_bwd_kernel(struct pool2d_desc d, int oh, int ow, const float *dy, float *dx)
{
	int64_t plane = (int64_t)d.h * d.w, oplane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)d.n * d.c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		dx[i] = body_avgpool_grad(&d, oh, ow, dy + p * oplane, r / d.w, r % d.w);
	}
}

__global__ void adaptive_fwd_kernel(const float *x, float *y, int n, int c, int h, int w, int oh, int ow)
{
	int64_t plane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)n * c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		y[i] = body_adaptive_out(x + p * h * w, h, w, oh, ow, r / ow, r % ow);
	}
}

__global__ void adaptive_bwd_kernel(const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow)
{
	int64_t plane = (int64_t)h * w, oplane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)n * c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		dx[i] = body_adaptive_grad(dy + p * oplane, h, w, oh, ow, r / w, r % w);
	}
}

void kc_maxpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y, int32_t *idx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	int64_t total = (int64_t)d.n * d.c * oh * ow;
	if (total > 0) maxpool_fwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(d, oh, ow, x, y, idx);
}

void kc_maxpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const int32_t *idx, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	int64_t total = (int64_t)d.n * d.c * d.h * d.w;
	if (total > 0) maxpool_bwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(d, oh, ow, idx, dy, dx);
}

void kc_avgpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	int64_t total = (int64_t)d.n * d.c * oh * ow;
	if (total > 0) avgpool_fwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(d, oh, ow, x, y);
}

void kc_avgpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	int64_t total = (int64_t)d.n * d.c * d.h * d.w;
	if (total > 0) avgpool_bwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(d, oh, ow, dy, dx);
}

void kc_adaptive_avgpool2d_fwd(cudaStream_t s, const float *x, float *y, int n, int c, int h, int w, int oh, int ow)
{
	int64_t total = (int64_t)n * c * oh * ow;
	if (total > 0) adaptive_fwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(x, y, n, c, h, w, oh, ow);
}

void kc_adaptive_avgpool2d_bwd(cudaStream_t s, const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow)
{
	int64_t total = (int64_t)n * c * h * w;
	if (total > 0) adaptive_bwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(dy, dx, n, c, h, w, oh, ow);
}

/* ---- batch norm: one block per channel; element e of a channel's m =
 * n * hw is (e / hw, ch, e % hw) ---- */
__device__ int64_t bn_at(int64_t e, int c, int ch, int64_t hw)
{
	return ((e / hw) * c + ch) * hw + e % hw;
}

__global__ void bn_train_kernel(const float *x, const float *gamma, const float *beta, float *y, float *running_mean,
				float *running_var, float *save_mean, float *save_invstd, int64_t *tracked, int n, int c,
				int64_t hw, float eps, float momentum)
{
	__shared__ double sh[THREADS];
	int ch = blockIdx.x;
	int64_t m = (int64_t)n * hw;
	double acc = 0;
	for (int64_t e = threadIdx.x; e < m; e += blockDim.x)
		acc += x[bn_at(e, c, ch, hw)];
	float mean = body_bn_mean(block_sum(acc, sh), m);
	acc = 0;
	for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
		float v = x[bn_at(e, c, ch, hw)] - mean;
		acc += v * v;
	}
	double var = block_sum(acc, sh) / (double)m; /* biased */
	float invstd = body_bn_invstd(var, eps), alpha, shift;
	body_bn_affine(mean, invstd, gamma, beta, ch, &alpha, &shift);
	for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
		int64_t at = bn_at(e, c, ch, hw);
		y[at] = x[at] * alpha + shift;
	}
	if (threadIdx.x != 0)
		return;
	save_mean[ch] = mean;
	save_invstd[ch] = invstd;
	if (running_mean)
		body_bn_running(&running_mean[ch], &running_var[ch], mean, var, m, momentum);
	if (tracked && ch == 0)
		*tracked += 1;
}

__global__ void bn_eval_kernel(const float *x, const float *gamma, const float *beta, const float *running_mean,
			       const float *running_var, float *y, int n, int c, int64_t hw, float eps)
{
	FOR_EACH(i, (int64_t)n * c * hw) {
		int ch = (int)((i / hw) % c);
		float alpha, shift;
		body_bn_affine(running_mean[ch], body_bn_eval_invstd(running_var[ch], eps), gamma, beta, ch, &alpha, &shift);
		y[i] = x[i] * alpha + shift;
	}
}

__global__ void bn_bwd_kernel(const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			      const float *dy, float *dx, float *dgamma, float *dbeta, int n, int c, int64_t hw)
{
	__shared__ double sh[THREADS];
	int ch = blockIdx.x;
	int64_t m = (int64_t)n * hw;
	float mean = save_mean[ch], invstd = save_invstd[ch];
	double sdy = 0, sdyx = 0;
	for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
		int64_t at = bn_at(e, c, ch, hw);
		sdy += dy[at];
		sdyx += dy[at] * (x[at] - mean);
	}
	sdy = block_sum(sdy, sh);
	sdyx = block_sum(sdyx, sh);
	if (threadIdx.x == 0) {
		if (dgamma)
			dgamma[ch] += (float)(sdyx * invstd);
		if (dbeta)
			dbeta[ch] += (float)sdy;
	}
	if (!dx)
		return;
	float sc, mdy, k;
	body_bn_bwd_coef(sdy, sdyx, m, gamma ? gamma[ch] : 1.0f, invstd, &sc, &mdy, &k);
	for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
		int64_t at = bn_at(e, c, ch, hw);
		dx[at] = body_bn_dx(x[at], dy[at], mean, sc, mdy, k);
	}
}

void kc_batchnorm2d_fwd_train(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y,
			      float *running_mean, float *running_var, float *save_mean, float *save_invstd, int64_t *tracked,
			      int n, int c, int64_t hw, float eps, float momentum)
{
	assert((int64_t)n * hw > 1);
	if (c > 0)
		bn_train_kernel<<<c, THREADS, 0, s>>>(x, gamma, beta, y, running_mean, running_var, save_mean, save_invstd,
						      tracked, n, c, hw, eps, momentum);
}

void kc_batchnorm2d_fwd_eval(cudaStream_t s, const float *x, const float *gamma, const float *beta, const float *running_mean,
			     const float *running_var, float *y, int n, int c, int64_t hw, float eps)
{
	int64_t total = (int64_t)n * c * hw;
	if (total > 0)
		bn_eval_kernel<<<blocks_for(total), THREADS, 0, s>>>(x, gamma, beta, running_mean, running_var, y, n, c, hw, eps);
}

void kc_batchnorm2d_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			const float *dy, float *dx, float *dgamma, float *dbeta, int n, int c, int64_t hw)
{
	if (c > 0 && (dx || dgamma || dbeta))
		bn_bwd_kernel<<<c, THREADS, 0, s>>>(x, gamma, save_mean, save_invstd, dy, dx, dgamma, dbeta, n, c, hw);
}

/* ---- layer norm: a warp per row; parameter gradients a thread per column ---- */
__global__ void ln_fwd_kernel(const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
			      float *save_invstd, int64_t rows, int d, float eps)
{
	int lane = threadIdx.x & 31;
	FOR_EACH_WARP_ROW(r, rows) {
		const float *in = x + r * d;
		float *out = y + r * d;
		float acc = 0;
		for (int j = lane; j < d; j += 32)
			acc += in[j];
		float mean = warp_sum(acc) / (float)d;
		acc = 0;
		for (int j = lane; j < d; j += 32)
			acc += (in[j] - mean) * (in[j] - mean);
		float invstd = body_ln_invstd(warp_sum(acc), d, eps);
		for (int j = lane; j < d; j += 32)
			out[j] = body_ln_out(in[j], mean, invstd, gamma, beta, j);
		if (lane == 0) {
			save_mean[r] = mean;
			save_invstd[r] = invstd;
		}
	}
}

__global__ void ln_bwd_dx_kernel(const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
				 const float *dy, float *dx, int64_t rows, int d)
{
	int lane = threadIdx.x & 31;
	FOR_EACH_WARP_ROW(r, rows) {
		const float *in = x + r * d, *g = dy + r * d;
		float *out = dx + r * d, mean = save_mean[r], invstd = save_invstd[r], a = 0, b = 0;
		for (int j = lane; j < d; j += 32) {
			float gd = body_ln_gd(gamma, g[j], j);
			a += gd;
			b += body_ln_gdx(gd, in[j], mean, invstd);
		}
		a = warp_sum(a) / (float)d;
		b = warp_sum(b) / (float)d;
		__syncwarp(); /* dx may be dy: every lane has read its g[j] */
		for (int j = lane; j < d; j += 32)
			out[j] = body_ln_dx(in[j], body_ln_gd(gamma, g[j], j), mean, invstd, a, b);
	}
}

__global__ void ln_param_kernel(const float *x, const float *dy, const float *save_mean, const float *save_invstd,
				float *dgamma, float *dbeta, int64_t rows, int d)
{
	FOR_EACH(j, d) body_ln_param_col(x, dy, save_mean, save_invstd, rows, d, (int)j, dgamma, dbeta);
}

void kc_layernorm_fwd(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
		      float *save_invstd, int64_t rows, int d, float eps)
{
	if (rows > 0 && d > 0)
		ln_fwd_kernel<<<warp_blocks_for(rows), THREADS, 0, s>>>(x, gamma, beta, y, save_mean, save_invstd, rows, d, eps);
}

void kc_layernorm_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
		      const float *dy, float *dx, float *dgamma, float *dbeta, int64_t rows, int d)
{
	if (rows <= 0 || d <= 0)
		return;
	/* parameter gradients first: dx may overwrite dy */
	if (dgamma || dbeta)
		ln_param_kernel<<<blocks_for(d), THREADS, 0, s>>>(x, dy, save_mean, save_invstd, dgamma, dbeta, rows, d);
	if (dx)
		ln_bwd_dx_kernel<<<warp_blocks_for(rows), THREADS, 0, s>>>(x, gamma, save_mean, save_invstd, dy, dx, rows, d);
}

/* ---- embedding ---- */
__global__ void embedding_fwd_kernel(const int32_t *idx, const float *w, float *y, int64_t n, int vocab, int dim,
				     int32_t *bad)
{
	int32_t any = 0;
	FOR_EACH(e, n * dim) y[e] = body_embedding_elem(idx, w, vocab, dim, e, &any);
	if (any && bad)
		*bad = 1;
}

__global__ void embedding_bwd_kernel(const int32_t *idx, const float *dy, float *dw, int64_t n, int vocab, int dim,
				     int padding_idx)
{
	FOR_EACH(e, n * dim) {
		int32_t id = idx[e / dim];
		if (id != padding_idx && id >= 0 && id < vocab)
			atomicAdd(&dw[(int64_t)id * dim + e % dim], dy[e]);
	}
}

void kc_embedding_fwd(cudaStream_t s, const int32_t *idx, const float *w, float *y, int64_t n, int vocab, int dim, int32_t *bad)
{
	if (n > 0 && dim > 0) embedding_fwd_kernel<<<blocks_for(n * dim), THREADS, 0, s>>>(idx, w, y, n, vocab, dim, bad);
}

void kc_embedding_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dw, int64_t n, int vocab, int dim,
		      int padding_idx)
{
	if (dw && n > 0 && dim > 0)
		embedding_bwd_kernel<<<blocks_for(n * dim), THREADS, 0, s>>>(idx, dy, dw, n, vocab, dim, padding_idx);
}

/* ---- softmax: a warp per contiguous row (double sum, as the CPU's row
 * path), a thread per strided row (body.h's row, the CPU's tile path) ---- */
__global__ void softmax_rows_kernel(const float *x, float *y, int64_t outer, int dim, bool log_out)
{
	int lane = threadIdx.x & 31;
	FOR_EACH_WARP_ROW(r, outer) {
		const float *in = x + r * dim;
		float *out = y + r * dim, mx = -INFINITY;
		for (int k = lane; k < dim; k += 32)
			mx = fmaxf(mx, in[k]);
		mx = warp_max(mx);
		double se = 0;
		for (int k = lane; k < dim; k += 32)
			se += expf(in[k] - mx);
		float f = body_softmax_factor(warp_sum(se), true, log_out);
		for (int k = lane; k < dim; k += 32)
			out[k] = body_softmax_out(in[k], mx, f, log_out);
	}
}

__global__ void softmax_cols_kernel(const float *x, float *y, int64_t outer, int dim, int64_t inner, bool log_out)
{
	FOR_EACH(t, outer * inner) {
		int64_t at = (t / inner) * dim * inner + t % inner;
		body_softmax_row(x + at, y + at, dim, inner, log_out);
	}
}

__global__ void softmax_bwd_rows_kernel(const float *y, const float *dy, float *dx, int64_t outer, int dim, bool log_out)
{
	int lane = threadIdx.x & 31;
	FOR_EACH_WARP_ROW(r, outer) {
		const float *yr = y + r * dim, *g = dy + r * dim;
		float *out = dx + r * dim, acc = 0;
		for (int k = lane; k < dim; k += 32)
			acc += body_softmax_bwd_term(yr[k], g[k], log_out);
		acc = warp_sum(acc);
		__syncwarp(); /* dx may be dy */
		for (int k = lane; k < dim; k += 32)
			out[k] = body_softmax_bwd_out(yr[k], g[k], acc, log_out);
	}
}

__global__ void softmax_bwd_cols_kernel(const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner,
					bool log_out)
{
	FOR_EACH(t, outer * inner) {
		int64_t at = (t / inner) * dim * inner + t % inner;
		body_softmax_bwd_row(y + at, dy + at, dx + at, dim, inner, log_out);
	}
}

static void softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner, bool log_out)
{
	if (outer <= 0 || dim <= 0 || inner <= 0)
		return;
	if (inner == 1)
		softmax_rows_kernel<<<warp_blocks_for(outer), THREADS, 0, s>>>(x, y, outer, dim, log_out);
	else
		softmax_cols_kernel<<<blocks_for(outer * inner), THREADS, 0, s>>>(x, y, outer, dim, inner, log_out);
}

static void softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner,
			bool log_out)
{
	if (outer <= 0 || dim <= 0 || inner <= 0)
		return;
	if (inner == 1)
		softmax_bwd_rows_kernel<<<warp_blocks_for(outer), THREADS, 0, s>>>(y, dy, dx, outer, dim, log_out);
	else
		softmax_bwd_cols_kernel<<<blocks_for(outer * inner), THREADS, 0, s>>>(y, dy, dx, outer, dim, inner, log_out);
}

void kc_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner)
{
	softmax_fwd(s, x, y, outer, dim, inner, false);
}

void kc_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner)
{
	softmax_bwd(s, y, dy, dx, outer, dim, inner, false);
}

void kc_log_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner)
{
	softmax_fwd(s, x, y, outer, dim, inner, true);
}

void kc_log_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner)
{
	softmax_bwd(s, y, dy, dx, outer, dim, inner, true);
}

/* ---- losses: one block each ---- */
__device__ void store_loss(double *loss, double l, double weight, bool add)
{
	*loss = (add ? *loss : 0.0) + weight * l;
}

__global__ void __launch_bounds__(LOSS_THREADS) mse_kernel(const float *x, const float *target, float *dx, int64_t n, enum kern_reduction red, float scale,
			   double *loss, double weight, bool add)
{
	__shared__ double sh[LOSS_THREADS];
	float g = body_mse_grad(n, red, scale);
	double acc = 0;
	for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
		float d;
		acc += body_mse_term(x[i], target[i], g, &d);
		if (dx)
			dx[i] = d;
	}
	acc = block_sum(acc, sh);
	if (threadIdx.x == 0)
		store_loss(loss, red == KERN_REDUCE_MEAN ? acc / (double)n : acc, weight, add);
}

/* Rows that count, the same in every thread; -1 if a target is bad. */
__device__ int64_t count_targets(const int32_t *target, int n, int c, int ignore_index, double *sh)
{
	double count = 0, bad = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		bad += body_target_bad(target[i], c, ignore_index);
		count += target[i] != ignore_index;
	}
	/* integers: exact in any order */
	count = block_sum(count, sh);
	bad = block_sum(bad, sh);
	return bad > 0 ? -1 : (int64_t)count;
}

__global__ void __launch_bounds__(LOSS_THREADS) nll_kernel(const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index,
			   enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad)
{
	__shared__ double sh[LOSS_THREADS];
	int64_t count = count_targets(target, n, c, ignore_index, sh);
	if (count < 0) {
		if (threadIdx.x == 0 && bad)
			*bad = 1;
		return;
	}
	float g = body_class_grad(count, red, scale);
	double acc = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		if (target[i] != ignore_index)
			acc -= logp[(int64_t)i * c + target[i]];
	acc = block_sum(acc, sh); /* also orders the reads of logp before dlogp's writes */
	if (dlogp)
		for (int64_t e = threadIdx.x; e < (int64_t)n * c; e += blockDim.x) {
			int32_t t = target[e / c];
			dlogp[e] = body_nll_grad((int)(e % c), t, t != ignore_index, g);
		}
	if (threadIdx.x == 0)
		store_loss(loss, body_loss_reduce(acc, count, red), weight, add);
}

/* a warp per row within the block */
__global__ void __launch_bounds__(LOSS_THREADS) cross_entropy_kernel(const float *logits, const int32_t *target, float *dlogits, int n, int c, int ignore_index,
				     enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad)
{
	__shared__ double sh[LOSS_THREADS];
	int64_t count = count_targets(target, n, c, ignore_index, sh);
	if (count < 0) {
		if (threadIdx.x == 0 && bad)
			*bad = 1;
		return;
	}
	float g = body_class_grad(count, red, scale);
	int lane = threadIdx.x & 31;
	double acc = 0;
	for (int r = threadIdx.x >> 5; r < n; r += blockDim.x >> 5) {
		const float *z = logits + (int64_t)r * c;
		int32_t t = target[r];
		bool on = t != ignore_index;
		float mx = -INFINITY;
		for (int k = lane; k < c; k += 32)
			mx = fmaxf(mx, z[k]);
		mx = warp_max(mx);
		double se = 0;
		for (int k = lane; k < c; k += 32)
			se += expf(z[k] - mx);
		float ls = body_ce_ls(warp_sum(se));
		if (lane == 0 && on)
			acc += body_ce_term(ls, z[t], mx);
		__syncwarp(); /* dlogits may be logits: z[t] is read */
		if (dlogits) {
			float *d = dlogits + (int64_t)r * c, gi = on ? g : 0.0f;
			for (int k = lane; k < c; k += 32)
				d[k] = body_ce_grad(z[k], mx, ls, gi, on && k == t);
		}
	}
	acc = block_sum(acc, sh);
	if (threadIdx.x == 0)
		store_loss(loss, body_loss_reduce(acc, count, red), weight, add);
}

__global__ void argmax_kernel(const float *logits, const int32_t *target, int n, int c, double *correct)
{
	__shared__ double sh[THREADS];
	double hits = 0;
	FOR_EACH(r, n) hits += body_argmax_hit(logits + r * c, c, target[r]);
	hits = block_sum(hits, sh);
	if (threadIdx.x == 0 && hits > 0)
		atomicAdd(correct, hits); /* integers: exact in any order */
}

void kc_mse(cudaStream_t s, const float *x, const float *target, float *dx, int64_t n, enum kern_reduction red, float scale,
	    double *loss, double weight, bool add)
{
	mse_kernel<<<1, LOSS_THREADS, 0, s>>>(x, target, dx, n, red, scale, loss, weight, add);
}

void kc_nll(cudaStream_t s, const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index,
	    enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad)
{
	nll_kernel<<<1, LOSS_THREADS, 0, s>>>(logp, target, dlogp, n, c, ignore_index, red, scale, loss, weight, add, bad);
}

void kc_cross_entropy(cudaStream_t s, const float *logits, const int32_t *target, float *dlogits, int n, int c, int ignore_index,
		      enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad)
{
	cross_entropy_kernel<<<1, LOSS_THREADS, 0, s>>>(logits, target, dlogits, n, c, ignore_index, red, scale, loss, weight,
							add, bad);
}

void kc_argmax_correct(cudaStream_t s, const float *logits, const int32_t *target, int n, int c, double *correct)
{
	if (n > 0) argmax_kernel<<<blocks_for(n), THREADS, 0, s>>>(logits, target, n, c, correct);
}

/* ---- data on the device ---- */
__global__ void gather_rows_kernel(uint32_t *dst, const uint32_t *src, int64_t row_words, const int64_t *order,
				   const int64_t *pos, int64_t n)
{
	int64_t at = *pos;
	FOR_EACH(e, n * row_words) dst[e] = src[order[at + e / row_words] * row_words + e % row_words];
}

__global__ void add_i64_kernel(int64_t *x, int64_t by)
{
	*x += by;
}

__global__ void f64_axpy_kernel(double *dst, const double *src, double a, bool add)
{
	*dst = (add ? *dst : 0.0) + a * *src;
}

__global__ void record_kernel(const double *v, double *hist, const int64_t *counter, int64_t cap)
{
	hist[(*counter - 1) % cap] = *v;
}

__global__ void find_nonfinite_kernel(const float *x, int64_t n, int32_t *flag)
{
	int32_t any = 0;
	FOR_EACH(i, n) any |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
	if (any)
		*flag = 1;
}

void kc_gather_rows(cudaStream_t s, void *dst, const void *src, int64_t row_words, const int64_t *order, const int64_t *pos,
		    int64_t n)
{
	if (n > 0 && row_words > 0)
		gather_rows_kernel<<<blocks_for(n * row_words), THREADS, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, row_words,
										 order, pos, n);
}

void kc_add_i64(cudaStream_t s, int64_t *x, int64_t by)
{
	add_i64_kernel<<<1, 1, 0, s>>>(x, by);
}

void kc_f64_axpy(cudaStream_t s, double *dst, const double *src, double a, bool add)
{
	f64_axpy_kernel<<<1, 1, 0, s>>>(dst, src, a, add);
}

void kc_record(cudaStream_t s, const double *v, double *hist, const int64_t *counter, int64_t cap)
{
	assert(cap > 0);
	record_kernel<<<1, 1, 0, s>>>(v, hist, counter, cap);
}

void kc_find_nonfinite(cudaStream_t s, const float *x, int64_t n, int32_t *flag)
{
	if (n > 0) find_nonfinite_kernel<<<blocks_for(n), THREADS, 0, s>>>(x, n, flag);
}

/* ---- optimizer ---- */
struct planes { float *p[3]; }; /* optim_elem_apply's planes, by value */

__global__ void optim_prepare_kernel(struct optim_cfg cfg, const double *lr_table, int64_t *step, struct optim_coef *coef)
{
	int64_t t = *step + 1;
	*step = t;
	*coef = optim_coef_of(&cfg, t, lr_table[t - 1]);
}

__global__ void optim_apply_kernel(const struct optim_coef *coef, float *param, const float *grad, struct planes pl, int64_t n)
{
	__shared__ struct optim_coef k;
	if (threadIdx.x == 0)
		k = *coef;
	__syncthreads();
	FOR_EACH(i, n) optim_elem_apply(&k, param, grad, pl.p, i);
}

__global__ void optim_state_init_kernel(float *state, int64_t plane_stride, int64_t n, int k, float first)
{
	FOR_EACH(e, (int64_t)k * n) {
		int64_t j = e / n;
		state[j * plane_stride + e % n] = j == 0 ? first : 0.0f;
	}
}

/* part b of KC_SUMSQ_PARTS: the block's fixed chunk */
__global__ void sumsq_part_kernel(const float *g, int64_t n, double *partials)
{
	__shared__ double sh[THREADS];
	int64_t chunk = (n + KC_SUMSQ_PARTS - 1) / KC_SUMSQ_PARTS, lo = blockIdx.x * chunk;
	int64_t hi = lo + chunk < n ? lo + chunk : n;
	double acc = 0;
	for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
		acc += (double)g[i] * g[i];
	acc = block_sum(acc, sh);
	if (threadIdx.x == 0)
		partials[blockIdx.x] = acc;
}

__global__ void sumsq_total_kernel(const double *partials, double *sumsq)
{
	double acc = 0;
	for (int b = 0; b < KC_SUMSQ_PARTS; b++)
		acc += partials[b];
	*sumsq = acc;
}

__global__ void clip_kernel(float *g, int64_t n, const double *sumsq, double max_norm)
{
	float coef = optim_elem_clip_coef(sqrt(*sumsq), max_norm);
	if (coef >= 1.0f) /* a factor of 1 changes nothing; a NaN goes through, as on the CPU */
		return;
	FOR_EACH(i, n) g[i] *= coef;
}

void kc_optim_prepare(cudaStream_t s, struct optim_cfg cfg, const double *lr_table, int64_t *step, void *coef)
{
	optim_prepare_kernel<<<1, 1, 0, s>>>(cfg, lr_table, step, (struct optim_coef *)coef);
}

void kc_optim_apply(cudaStream_t s, struct optim_cfg cfg, const void *coef, float *param, const float *grad, float *state,
		    int64_t plane_stride, int64_t n)
{
	int k = optim_state_floats(cfg.kind, &cfg);
	struct planes pl = { { NULL, NULL, NULL } };
	for (int j = 0; j < k; j++)
		pl.p[j] = state + j * plane_stride;
	if (n > 0)
		optim_apply_kernel<<<blocks_for(n), THREADS, 0, s>>>((const struct optim_coef *)coef, param, grad, pl, n);
}

void kc_optim_state_init(cudaStream_t s, struct optim_cfg cfg, float *state, int64_t plane_stride, int64_t n)
{
	int k = optim_state_floats(cfg.kind, &cfg);
	float first = cfg.kind == OPTIM_ADAGRAD ? (float)cfg.initial_accumulator_value : 0.0f;
	if (n > 0 && k > 0)
		optim_state_init_kernel<<<blocks_for((int64_t)k * n), THREADS, 0, s>>>(state, plane_stride, n, k, first);
}

void kc_sumsq(cudaStream_t s, const float *g, int64_t n, double *partials, double *sumsq)
{
	sumsq_part_kernel<<<KC_SUMSQ_PARTS, THREADS, 0, s>>>(g, n, partials);
	sumsq_total_kernel<<<1, 1, 0, s>>>(partials, sumsq);
}

void kc_clip(cudaStream_t s, float *g, int64_t n, const double *sumsq, double max_norm)
{
	if (n > 0) clip_kernel<<<blocks_for(n), THREADS, 0, s>>>(g, n, sumsq, max_norm);
}

/* ---- a whole step of a small model: one block (tiny.h) ---- */
__global__ void __launch_bounds__(TINY_THREADS) tiny_step_kernel(const struct tiny_prog *P)
{
	__shared__ double sh[TINY_THREADS];
	__shared__ struct optim_coef coef;
	tiny_run((int)threadIdx.x, (int)blockDim.x, P, sh, &coef);
}

void kc_tiny_step(cudaStream_t s, const void *prog)
{
	tiny_step_kernel<<<1, TINY_THREADS, 0, s>>>((const struct tiny_prog *)prog);
}
