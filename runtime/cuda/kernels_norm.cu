/* kernels_norm.cu: batch norm (a block a channel), layer norm (a warp a
 * row; parameter gradients a thread a column) and the embedding (its gradient
 * the only float atomics: order-dependent in the last bits when ids repeat).
 */
#include "runtime/cuda/kc_impl.cuh"

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
		double sum = 0;
		for (int j = lane; j < d; j += 32)
			sum += in[j];
		float mean = (float)(warp_sum(sum) / (double)d), acc = 0;
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
