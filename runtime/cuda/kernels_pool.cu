/* kernels_pool.cu: max, average and adaptive average pooling: a thread an
 * output element forward; the backwards gather each input element's windows in
 * the CPU's order instead of scattering, so they need no atomics.
 */
#include "runtime/cuda/kc_impl.cuh"

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

__global__ void adaptive_max_fwd_kernel(const float *x, float *y, int32_t *idx, int n, int c, int h, int w, int oh, int ow)
{
	int64_t plane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)n * c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		y[i] = body_adaptive_max_out(x + p * h * w, h, w, oh, ow, r / ow, r % ow, &idx[i]);
	}
}

__global__ void adaptive_max_bwd_kernel(const int32_t *idx, const float *dy, float *dx, int n, int c, int h, int w, int oh,
					int ow)
{
	int64_t plane = (int64_t)h * w, oplane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)n * c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		dx[i] = body_adaptive_max_grad(idx + p * oplane, dy + p * oplane, h, w, oh, ow, r / w, r % w);
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

void kc_adaptive_maxpool2d_fwd(cudaStream_t s, const float *x, float *y, int32_t *idx, int n, int c, int h, int w, int oh,
			       int ow)
{
	int64_t total = (int64_t)n * c * oh * ow;
	if (total > 0) adaptive_max_fwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(x, y, idx, n, c, h, w, oh, ow);
}

void kc_adaptive_maxpool2d_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dx, int n, int c, int h, int w,
			       int oh, int ow)
{
	int64_t total = (int64_t)n * c * h * w;
	if (total > 0) adaptive_max_bwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(idx, dy, dx, n, c, h, w, oh, ow);
}
