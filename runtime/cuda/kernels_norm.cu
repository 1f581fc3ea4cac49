/* kernels_norm.cu: batch norm (a block a channel), layer norm (a warp a
 * row; parameter gradients a thread a column) and the embedding (its
 * gradient by a sort of the tokens by id, then a thread a row's column
 * adding its tokens in order: bit for bit kern_embedding_bwd, without
 * atomics).
 */
#include "runtime/cuda/kc_impl.cuh"

#include "compiler/emb_sort.h"

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
/* A row's mean and invstd, summed by the warp's lanes */
__device__ void warp_row_moments(const float *in, int d, int lane, float eps, float *mean_out, float *invstd_out)
{
	double sum = 0;
	for (int j = lane; j < d; j += 32)
		sum += in[j];
	float mean = (float)(warp_sum(sum) / (double)d), acc = 0;
	for (int j = lane; j < d; j += 32)
		acc += (in[j] - mean) * (in[j] - mean);
	*mean_out = mean;
	*invstd_out = body_ln_invstd(warp_sum(acc), d, eps);
}

__global__ void ln_fwd_kernel(const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
			      float *save_invstd, int64_t rows, int d, float eps)
{
	int lane = threadIdx.x & 31;
	FOR_EACH_WARP_ROW(r, rows) {
		const float *in = x + r * d;
		float *out = y + r * d;
		float mean, invstd;
		warp_row_moments(in, d, lane, eps, &mean, &invstd);
		for (int j = lane; j < d; j += 32)
			out[j] = body_ln_out(in[j], mean, invstd, gamma, beta, j);
		if (lane == 0) {
			save_mean[r] = mean;
			save_invstd[r] = invstd;
		}
	}
}

/* A row's dx by the warp's lanes, gamma at c0 + j / hw for element j (a
 * layer norm's: c0 0, hw 1) */
__device__ void warp_row_bwd(const float *in, const float *g, float *out, int d, float mean, float invstd, const float *gamma,
			     int c0, int hw, int lane)
{
	float a = 0, b = 0;
	for (int j = lane; j < d; j += 32) {
		float gd = body_ln_gd(gamma, g[j], c0 + j / hw);
		a += gd;
		b += body_ln_gdx(gd, in[j], mean, invstd);
	}
	a = warp_sum(a) / (float)d;
	b = warp_sum(b) / (float)d;
	__syncwarp(); /* dx may be dy: every lane has read its g[j] */
	for (int j = lane; j < d; j += 32)
		out[j] = body_ln_dx(in[j], body_ln_gd(gamma, g[j], c0 + j / hw), mean, invstd, a, b);
}

__global__ void ln_bwd_dx_kernel(const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
				 const float *dy, float *dx, int64_t rows, int d)
{
	int lane = threadIdx.x & 31;
	FOR_EACH_WARP_ROW(r, rows)
		warp_row_bwd(x + r * d, dy + r * d, dx + r * d, d, save_mean[r], save_invstd[r], gamma, 0, 1, lane);
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

/* ---- group norm: a warp per (sample, group) row, as layer norm's;
 * parameter gradients a thread per channel ---- */
__global__ void gn_fwd_kernel(const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
			      float *save_invstd, int64_t rows, int groups, int cpg, int hw, float eps)
{
	int lane = threadIdx.x & 31, d = cpg * hw;
	FOR_EACH_WARP_ROW(r, rows) {
		const float *in = x + r * d;
		float *out = y + r * d;
		int c0 = body_gn_c0(r, groups, cpg);
		float mean, invstd;
		warp_row_moments(in, d, lane, eps, &mean, &invstd);
		for (int j = lane; j < d; j += 32)
			out[j] = body_ln_out(in[j], mean, invstd, gamma, beta, c0 + j / hw);
		if (lane == 0) {
			save_mean[r] = mean;
			save_invstd[r] = invstd;
		}
	}
}

__global__ void gn_bwd_dx_kernel(const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
				 const float *dy, float *dx, int64_t rows, int groups, int cpg, int hw)
{
	int lane = threadIdx.x & 31, d = cpg * hw;
	FOR_EACH_WARP_ROW(r, rows)
		warp_row_bwd(x + r * d, dy + r * d, dx + r * d, d, save_mean[r], save_invstd[r], gamma, body_gn_c0(r, groups, cpg), hw,
			     lane);
}

__global__ void gn_param_kernel(const float *x, const float *dy, const float *save_mean, const float *save_invstd,
				float *dgamma, float *dbeta, int n, int groups, int cpg, int hw)
{
	FOR_EACH(ch, (int64_t)groups * cpg)
		body_gn_param_chan(x, dy, save_mean, save_invstd, n, groups, cpg, hw, (int)ch, dgamma, dbeta);
}

void kc_groupnorm_fwd(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
		      float *save_invstd, int n, int groups, int cpg, int hw, float eps)
{
	int64_t rows = (int64_t)n * groups;
	if (rows > 0 && cpg > 0 && hw > 0)
		gn_fwd_kernel<<<warp_blocks_for(rows), THREADS, 0, s>>>(x, gamma, beta, y, save_mean, save_invstd, rows, groups, cpg,
									 hw, eps);
}

void kc_groupnorm_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
		      const float *dy, float *dx, float *dgamma, float *dbeta, int n, int groups, int cpg, int hw)
{
	int64_t rows = (int64_t)n * groups;
	if (rows <= 0 || cpg <= 0 || hw <= 0)
		return;
	/* parameter gradients first: dx may overwrite dy */
	if (dgamma || dbeta)
		gn_param_kernel<<<blocks_for((int64_t)groups * cpg), THREADS, 0, s>>>(x, dy, save_mean, save_invstd, dgamma, dbeta, n,
										      groups, cpg, hw);
	if (dx)
		gn_bwd_dx_kernel<<<warp_blocks_for(rows), THREADS, 0, s>>>(x, gamma, save_mean, save_invstd, dy, dx, rows, groups,
									    cpg, hw);
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

/* The gradient, bit for bit kern_embedding_bwd's: that adds dy's rows
 * into dw in token order (dw[v] += dy[i0], then += dy[i1], ...), so each
 * element of dw[v] is summed by one thread, in that order, from its old
 * value.  The thread must find v's tokens in order: scanning the tokens
 * before each one costs O(n^2), and counting tokens per id needs vocab
 * counters (2^24 and more) and a scan over them, so the tokens are sorted
 * instead, as keys id << 32 | position: unique, so any correct sort
 * leaves them in one order, by id and within an id by position.  The sort
 * is a bitonic network in the plan's scratch (compiler/emb_sort.h, tag:
 * EMBEDDING_SORT): no atomics, O(n log^2 n) compare-exchanges in a launch
 * sequence fixed by n, so a captured step replays it; each block runs the
 * stages whose pairs lie in its tile of SORT_TILE keys in shared memory,
 * and only the wider stages are a launch each (28 sort launches for 100k
 * tokens).  Then one thread per (sorted token, column) whose token starts
 * its id's run adds the run's rows.  A run of r tokens is r dependent adds
 * in one thread, the price of the CPU's order; nvcc unrolls that loop, so
 * the rows' loads overlap.  Ids that are padding_idx or outside [0, vocab)
 * get the key EMB_NONE, sorted last, and add nothing. */
enum { SORT_THREADS = 1024, SORT_TILE = 2 * SORT_THREADS };
#define EMB_NONE UINT64_MAX /* no id: above every id << 32 (ids are below 2^31) */

__global__ void emb_keys_kernel(const int32_t *idx, uint64_t *keys, int64_t n, int64_t m, int vocab, int padding_idx)
{
	FOR_EACH(i, m) {
		int32_t id = i < n ? idx[i] : -1;
		bool adds = id != padding_idx && id >= 0 && id < vocab;
		keys[i] = adds ? (uint64_t)id << 32 | (uint64_t)i : EMB_NONE;
	}
}

/* Pair t of a stage that compares keys j apart (j a power of two): keys i
 * and i + j, where i is t with a zero inserted at j's bit. */
__device__ int64_t bitonic_first(int64_t t, int64_t j)
{
	return ((t & ~(j - 1)) << 1) | (t & (j - 1));
}

/* Order the pair (*a, *b): ascending where `up`, else descending. */
__device__ void bitonic_order(uint64_t *a, uint64_t *b, bool up)
{
	uint64_t x = *a, y = *b;
	if ((x > y) == up) {
		*a = y;
		*b = x;
	}
}

/* Merges k = k_first .. k_last (powers of two) over the block's tile of
 * 2 * blockDim.x keys, each from the stage whose pairs fit the tile: the
 * first launch sorts every tile (k from 2), the later ones finish a wider
 * merge after emb_merge_kernel's stages.  A merge's direction is bit k of
 * the key's place in the whole array, so tiles alternate as the network
 * needs.  Every thread takes one pair per stage; the loops' bounds are the
 * launch's, so every barrier is reached by the whole block. */
__global__ void __launch_bounds__(SORT_THREADS) emb_sort_tile_kernel(uint64_t *keys, int64_t k_first, int64_t k_last)
{
	__shared__ uint64_t sh[SORT_TILE];
	int64_t tile = 2 * (int64_t)blockDim.x, base = (int64_t)blockIdx.x * tile;
	for (int64_t t = threadIdx.x; t < tile; t += blockDim.x)
		sh[t] = keys[base + t];
	__syncthreads();
	for (int64_t k = k_first; k <= k_last; k <<= 1)
		for (int64_t j = (k < tile ? k : tile) / 2; j > 0; j >>= 1) {
			int64_t i = bitonic_first(threadIdx.x, j);
			bitonic_order(&sh[i], &sh[i + j], ((base + i) & k) == 0);
			__syncthreads();
		}
	for (int64_t t = threadIdx.x; t < tile; t += blockDim.x)
		keys[base + t] = sh[t];
}

/* One stage of merge k whose pairs, j apart, span tiles: a pair a thread. */
__global__ void emb_merge_kernel(uint64_t *keys, int64_t m, int64_t k, int64_t j)
{
	FOR_EACH(t, m / 2) {
		int64_t i = bitonic_first(t, j);
		bitonic_order(&keys[i], &keys[i + j], (i & k) == 0);
	}
}

/* dw[id][c] += the run's rows in token order, by the thread of the run's
 * first key and column c */
__global__ void emb_sum_kernel(const uint64_t *keys, const float *dy, float *dw, int64_t n, int dim)
{
	FOR_EACH(e, n * dim) {
		int64_t s = e / dim;
		uint64_t id = keys[s] >> 32;
		if (keys[s] == EMB_NONE || (s > 0 && keys[s - 1] >> 32 == id))
			continue;
		int64_t end = s + 1, c = e % dim;
		while (end < n && keys[end] >> 32 == id)
			end++;
		float *w = dw + (int64_t)id * dim + c;
		float acc = *w;
		for (int64_t q = s; q < end; q++)
			acc += dy[(int64_t)(uint32_t)keys[q] * dim + c];
		*w = acc;
	}
}

void kc_embedding_fwd(cudaStream_t s, const int32_t *idx, const float *w, float *y, int64_t n, int vocab, int dim, int32_t *bad)
{
	if (n > 0 && dim > 0) embedding_fwd_kernel<<<blocks_for(n * dim), THREADS, 0, s>>>(idx, w, y, n, vocab, dim, bad);
}

void kc_embedding_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dw, int64_t n, int vocab, int dim,
		      int padding_idx, void *scratch, int64_t scratch_bytes)
{
	if (!dw || n <= 0 || dim <= 0)
		return;
	/* a position takes a key's low 32 bits */
	assert(n <= (int64_t)UINT32_MAX && scratch_bytes >= emb_sort_bytes(n));
	uint64_t *keys = (uint64_t *)scratch;
	int64_t m = emb_sort_keys(n), tile = m < (int64_t)SORT_TILE ? m : (int64_t)SORT_TILE;
	unsigned tiles = (unsigned)(m / tile), threads = (unsigned)(tile / 2);
	emb_keys_kernel<<<blocks_for(m), THREADS, 0, s>>>(idx, keys, n, m, vocab, padding_idx);
	if (m > 1)
		emb_sort_tile_kernel<<<tiles, threads, 0, s>>>(keys, 2, tile);
	for (int64_t k = 2 * tile; k <= m; k <<= 1) {
		for (int64_t j = k / 2; j >= tile; j >>= 1)
			emb_merge_kernel<<<blocks_for(m / 2), THREADS, 0, s>>>(keys, m, k, j);
		emb_sort_tile_kernel<<<tiles, threads, 0, s>>>(keys, k, k);
	}
	emb_sum_kernel<<<blocks_for(n * dim), THREADS, 0, s>>>(keys, dy, dw, n, dim);
}
