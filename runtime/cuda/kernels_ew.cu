/* kernels_ew.cu: activations, dropout, residual sums and biases:
 * elementwise, a thread an element (bias gradients: a thread a column, a block
 * a channel).
 */
#include "runtime/cuda/kc_impl.cuh"

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

/* act_elem.h's activations (leaky_relu, elu, silu, softplus, hardtanh, ...), a thread an element */
__global__ void param_act_fwd_kernel(enum kern_act k, const float *x, float *y, int64_t n, float a, float b)
{
	FOR_EACH(i, n) y[i] = act_elem_fwd(k, x[i], a, b);
}

__global__ void param_act_bwd_kernel(enum kern_act k, const float *x, const float *dy, float *dx, int64_t n, float a, float b)
{
	FOR_EACH(i, n) dx[i] = act_elem_bwd(k, x[i], dy[i], a, b);
}

void kc_act_fwd(cudaStream_t s, enum kern_act k, const float *x, float *y, int64_t n, float a, float b)
{
	if (n > 0) param_act_fwd_kernel<<<blocks_for(n), THREADS, 0, s>>>(k, x, y, n, a, b);
}

void kc_act_bwd(cudaStream_t s, enum kern_act k, const float *x, const float *dy, float *dx, int64_t n, float a, float b)
{
	if (n > 0) param_act_bwd_kernel<<<blocks_for(n), THREADS, 0, s>>>(k, x, dy, dx, n, a, b);
}

/* ---- dropout ---- */
/* step: NULL, or the finished-step counter whose successor is r's step word */
__global__ void dropout_fwd_kernel(const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p,
				   struct rng r, const int64_t *step)
{
	if (step)
		r.ctr_hi[1] = (uint32_t)(*step + 1);
	float scale = body_dropout_scale(p);
	FOR_EACH(i, n) {
		uint8_t keep;
		y[i] = body_dropout_fwd(&r, (uint64_t)(inner == 1 ? i : i / inner), x[i], p, scale, &keep);
		mask[i] = keep;
	}
}

__global__ void dropout_bwd_kernel(const float *dy, const uint8_t *mask, float *dx, int64_t n, float p)
{
	float scale = body_dropout_scale(p);
	FOR_EACH(i, n) dx[i] = body_dropout_bwd(dy[i], mask[i], scale);
}

void kc_dropout_fwd(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p,
		    struct rng r)
{
	if (n > 0) dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, s>>>(x, y, mask, n, inner, p, r, NULL);
}

void kc_dropout_fwd_at(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p,
		       struct rng r, const int64_t *step)
{
	assert(step);
	if (n > 0) dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, s>>>(x, y, mask, n, inner, p, r, step);
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

__global__ void bias_relu_kernel(float *y, const float *b, float *r, int64_t total, int m, int64_t inner)
{
	FOR_EACH(i, total) {
		float v = y[i] + b[(i / inner) % m];
		y[i] = v;
		r[i] = body_relu_fwd(v);
	}
}

/* one block per channel, out[ch] += the sum over its n runs of hw elements
 * of dy (a bias's gradient), or with x of act_prelu_dw(x, dy) (PReLU's) */
__global__ void channel_sum_kernel(const float *x, const float *dy, float *out, int n, int c, int64_t hw)
{
	__shared__ double sh[THREADS];
	int ch = blockIdx.x;
	int64_t m = (int64_t)n * hw;
	double acc = 0;
	for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
		int64_t at = ((e / hw) * c + ch) * hw + e % hw;
		acc += x ? act_prelu_dw(x[at], dy[at]) : dy[at];
	}
	acc = block_sum(acc, sh);
	if (threadIdx.x == 0)
		out[ch] += (float)acc;
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

void kc_bias_relu(cudaStream_t s, float *y, const float *b, float *r, int64_t total, int m, int64_t inner)
{
	if (total > 0 && m > 0 && inner > 0) bias_relu_kernel<<<blocks_for(total), THREADS, 0, s>>>(y, b, r, total, m, inner);
}

void kc_channel_bias_grad(cudaStream_t s, const float *dy, float *db, int n, int c, int64_t hw)
{
	if (db && c > 0) channel_sum_kernel<<<c, THREADS, 0, s>>>(NULL, dy, db, n, c, hw);
}

/* ---- PReLU: leaky_relu with the weight of element i's channel as its slope ---- */
__global__ void prelu_fwd_kernel(const float *x, const float *w, float *y, int64_t total, int c, int64_t inner)
{
	FOR_EACH(i, total) y[i] = act_elem_fwd(KERN_LEAKY_RELU, x[i], w[i / inner % c], 0.0f);
}

__global__ void prelu_dx_kernel(const float *x, const float *w, const float *dy, float *dx, int64_t total, int c,
				int64_t inner)
{
	FOR_EACH(i, total) dx[i] = act_elem_bwd(KERN_LEAKY_RELU, x[i], dy[i], w[i / inner % c], 0.0f);
}

void kc_prelu_fwd(cudaStream_t s, const float *x, const float *w, float *y, int n, int c, int64_t inner)
{
	int64_t total = (int64_t)n * c * inner;
	if (total > 0) prelu_fwd_kernel<<<blocks_for(total), THREADS, 0, s>>>(x, w, y, total, c, inner);
}

void kc_prelu_bwd(cudaStream_t s, const float *x, const float *w, const float *dy, float *dx, float *dw, int n, int c,
		  int64_t inner)
{
	int64_t total = (int64_t)n * c * inner;
	if (total <= 0)
		return;
	if (dw) /* before dx, which may overwrite dy */
		channel_sum_kernel<<<c, THREADS, 0, s>>>(x, dy, dw, n, c, inner);
	if (dx)
		prelu_dx_kernel<<<blocks_for(total), THREADS, 0, s>>>(x, w, dy, dx, total, c, inner);
}
