/* kernels_pad.cu: zero padding (ZeroPad2d, a negative side cropping): a
 * thread an output element forward, an input element backward.  Both are
 * gathers (body.h), so dx is written whole without atomics, each element
 * a copy or a zero, as the CPU's row copies write it.
 */
#include "runtime/cuda/kc_impl.cuh"

__global__ void zeropad_fwd_kernel(struct pad2d_desc d, int oh, int ow, const float *x, float *y)
{
	int64_t plane = (int64_t)oh * ow;
	FOR_EACH(i, (int64_t)d.n * d.c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		y[i] = body_zeropad_out(&d, x + p * d.h * d.w, r / ow, r % ow);
	}
}

__global__ void zeropad_bwd_kernel(struct pad2d_desc d, int oh, int ow, const float *dy, float *dx)
{
	int64_t plane = (int64_t)d.h * d.w;
	FOR_EACH(i, (int64_t)d.n * d.c * plane) {
		int64_t p = i / plane;
		int r = (int)(i % plane);
		dx[i] = body_zeropad_grad(&d, oh, ow, dy + p * oh * ow, r / d.w, r % d.w);
	}
}

void kc_zeropad2d_fwd(cudaStream_t s, struct pad2d_desc d, const float *x, float *y)
{
	int oh, ow;
	kern_pad2d_out(&d, &oh, &ow);
	int64_t total = (int64_t)d.n * d.c * oh * ow;
	if (total > 0) zeropad_fwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(d, oh, ow, x, y);
}

void kc_zeropad2d_bwd(cudaStream_t s, struct pad2d_desc d, const float *dy, float *dx)
{
	int oh, ow;
	kern_pad2d_out(&d, &oh, &ow);
	int64_t total = (int64_t)d.n * d.c * d.h * d.w;
	if (total > 0) zeropad_bwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(d, oh, ow, dy, dx);
}
