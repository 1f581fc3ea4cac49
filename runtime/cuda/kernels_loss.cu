/* kernels_loss.cu: softmax and log-softmax (a warp a contiguous row, a
 * thread a strided row) and the losses (one block, or a grid of blocks
 * for a large one, each counting the rows before it writes a gradient),
 * argmax hits (integer atomics, exact).
 */
#include "runtime/cuda/kc_impl.cuh"

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

/* ---- losses ----
 * A loss of up to KC_LOSS_CHUNK elements is one block, which stores the
 * loss itself.  A larger one is a grid of blocks, block b taking rows
 * [n b / G, n (b + 1) / G) (elements, for mse) and writing its sum in
 * parts[b], and one thread then adds parts[0 .. G) in order: the same
 * sum for the same shape on every run, as the one block's tree is.  A
 * block reads and writes only its own rows, so dx may be x across blocks
 * as within one. */
__device__ void store_loss(double *loss, double l, double weight, bool add)
{
	*loss = (add ? *loss : 0.0) + weight * l;
}

/* this block's rows [*lo, *hi) of n */
__device__ void block_rows(int64_t n, int64_t *lo, int64_t *hi)
{
	*lo = n * blockIdx.x / gridDim.x;
	*hi = n * (blockIdx.x + 1) / gridDim.x;
}

/* The block's sum, the same in every thread: the loss of a grid of one,
 * else the block's part; block 0 also keeps the rows that count (-1: a
 * bad target, and no loss). */
__device__ void finish_block(double acc, double count, enum kern_reduction red, double *loss, double weight, bool add,
			     double *parts)
{
	if (threadIdx.x != 0)
		return;
	if (gridDim.x == 1) {
		if (count >= 0)
			store_loss(loss, body_loss_reduce(acc, count, red), weight, add);
		return;
	}
	parts[blockIdx.x] = acc;
	if (blockIdx.x == 0)
		parts[KC_LOSS_PARTS] = count;
}

__global__ void loss_total_kernel(const double *parts, int nparts, enum kern_reduction red, double *loss, double weight,
				  bool add)
{
	double count = parts[KC_LOSS_PARTS];
	if (count < 0)
		return;
	double acc = 0;
	for (int b = 0; b < nparts; b++)
		acc += parts[b];
	store_loss(loss, body_loss_reduce(acc, count, red), weight, add);
}

/* mse, l1, smooth_l1, huber, bce and bce_with_logits: a thread an
 * element, loss_elem.h's term (its param per output where per is given) */
__global__ void __launch_bounds__(LOSS_THREADS) regression_kernel(enum kern_regression kind, float param, const float *per,
				  int64_t nper, const float *x, const float *target, float *dx, int64_t n,
				  enum kern_reduction red, float scale, double *loss, double weight, bool add,
				  double *parts)
{
	__shared__ double sh[LOSS_THREADS];
	float g = loss_regression_grad(kind, n, red, scale);
	int64_t lo, hi;
	block_rows(n, &lo, &hi);
	double acc = 0;
	for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
		float d;
		acc += loss_regression_term(kind, per ? per[i % nper] : param, x[i], target[i], g, &d);
		if (dx)
			dx[i] = d;
	}
	acc = block_sum(acc, sh);
	finish_block(acc, n, red, loss, weight, add, parts);
}

/* Rows that count (their class weights' sum where w is not NULL), the
 * same in every thread; -1 if a target is bad.  Every block counts all n,
 * which the grid's size keeps below its own work. */
__device__ double count_targets(const int32_t *target, int n, int c, int ignore_index, const float *w, double *sh)
{
	double count = 0, bad = 0;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		int b = 0;
		count += body_target_count(w, target[i], c, ignore_index, &b);
		bad += b;
	}
	/* integers without weights: exact in any order */
	count = block_sum(count, sh);
	bad = block_sum(bad, sh);
	return bad > 0 ? -1 : count;
}

/* A class loss's start, the same in every thread: the rows that count and
 * the gradient's factor g; false, with *bad raised and block 0's part
 * saying so, if a target is out of range. */
__device__ bool class_start(const int32_t *target, int n, int c, int ignore_index, const float *w, enum kern_reduction red,
			    float scale, double *sh, int32_t *bad, double *count, float *g, double *parts)
{
	*count = count_targets(target, n, c, ignore_index, w, sh);
	if (*count < 0) {
		if (threadIdx.x == 0 && bad)
			*bad = 1;
		if (threadIdx.x == 0 && blockIdx.x == 0 && gridDim.x > 1)
			parts[KC_LOSS_PARTS] = -1.0;
		return false;
	}
	*g = body_class_grad(*count, red, scale);
	return true;
}

__global__ void __launch_bounds__(LOSS_THREADS) nll_kernel(const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index,
			   const float *w, enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad,
			   double *parts)
{
	__shared__ double sh[LOSS_THREADS];
	int64_t lo, hi;
	double count;
	float g;
	if (!class_start(target, n, c, ignore_index, w, red, scale, sh, bad, &count, &g, parts))
		return;
	block_rows(n, &lo, &hi);
	double acc = 0;
	for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
		if (target[i] != ignore_index)
			acc -= body_class_weight(w, target[i], true) * logp[i * c + target[i]];
	acc = block_sum(acc, sh); /* also orders the reads of the block's rows of logp before dlogp's writes */
	if (dlogp)
		for (int64_t e = lo * c + threadIdx.x; e < hi * c; e += blockDim.x) {
			int32_t t = target[e / c];
			dlogp[e] = body_nll_grad((int)(e % c), t, t != ignore_index, g) * body_class_weight(w, t, t != ignore_index);
		}
	finish_block(acc, count, red, loss, weight, add, parts);
}

/* a warp per row within the block */
__global__ void __launch_bounds__(LOSS_THREADS) cross_entropy_kernel(const float *logits, const int32_t *target, float *dlogits, int n, int c, int ignore_index,
				     const float *w, double wsum, float eps, enum kern_reduction red, float scale, double *loss,
				     double weight, bool add, int32_t *bad, double *parts)
{
	__shared__ double sh[LOSS_THREADS];
	int64_t lo, hi;
	double count;
	float g;
	if (!class_start(target, n, c, ignore_index, w, red, scale, sh, bad, &count, &g, parts))
		return;
	block_rows(n, &lo, &hi);
	int lane = threadIdx.x & 31;
	double acc = 0;
	for (int64_t r = lo + (threadIdx.x >> 5); r < hi; r += blockDim.x >> 5) {
		const float *z = logits + r * c;
		int32_t t = target[r];
		bool on = t != ignore_index;
		float mx = -INFINITY;
		for (int k = lane; k < c; k += 32)
			mx = fmaxf(mx, z[k]);
		mx = warp_max(mx);
		double se = 0, zc = 0;
		for (int k = lane; k < c; k += 32)
			se += expf(z[k] - mx);
		if (eps > 0) { /* the same in every thread: the warps' exchanges stay whole */
			for (int k = lane; k < c; k += 32)
				zc += body_ce_zc(w, k, z[k], mx);
			zc = warp_sum(zc);
		}
		float ls = body_ce_ls(warp_sum(se)), wt = body_class_weight(w, t, on);
		if (lane == 0 && on)
			acc += body_ce_any_term(ls, z[t], mx, zc, c, eps, w, wt, wsum);
		__syncwarp(); /* dlogits may be logits: z[t] is read */
		if (dlogits) {
			float *d = dlogits + r * c, gi = on ? g : 0.0f, gs = body_ce_gs(gi, eps, w, wt, wsum, c);
			float gt = body_ce_gt(gi, eps) * wt, gu = body_ce_gu(gi, eps, c);
			for (int k = lane; k < c; k += 32)
				d[k] = body_ce_grad(z[k], mx, ls, gs, gt, body_ce_guk(gu, w, k), on && k == t);
		}
	}
	acc = block_sum(acc, sh);
	finish_block(acc, count, red, loss, weight, add, parts);
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

/* Blocks for a loss over work elements: one per KC_LOSS_CHUNK, at most
 * KC_LOSS_PARTS, and at most `most`: the rows (a block has one at least),
 * and for a class loss the classes too, as every block of one counts all
 * the targets. */
static unsigned loss_blocks(int64_t work, int64_t most)
{
	int64_t b = (work + KC_LOSS_CHUNK - 1) / KC_LOSS_CHUNK;
	b = b < most ? b : most;
	b = b < (int64_t)KC_LOSS_PARTS ? b : (int64_t)KC_LOSS_PARTS;
	return b < 1 ? 1u : (unsigned)b;
}

static void loss_total(cudaStream_t s, unsigned blocks, const double *parts, enum kern_reduction red, double *loss,
		       double weight, bool add)
{
	if (blocks > 1)
		loss_total_kernel<<<1, 1, 0, s>>>(parts, (int)blocks, red, loss, weight, add);
}

void kc_regression(cudaStream_t s, enum kern_regression kind, float param, const float *per, int64_t nper, const float *x,
		   const float *target, float *dx, int64_t n, enum kern_reduction red, float scale, double *loss, double weight,
		   bool add, double *parts)
{
	unsigned b = loss_blocks(n, n);
	regression_kernel<<<b, LOSS_THREADS, 0, s>>>(kind, param, per, nper, x, target, dx, n, red, scale, loss, weight, add,
						     parts);
	loss_total(s, b, parts, red, loss, weight, add);
}

void kc_nll(cudaStream_t s, const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index,
	    const float *w, enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad, double *parts)
{
	unsigned b = loss_blocks((int64_t)n * c, n < c ? n : c);
	nll_kernel<<<b, LOSS_THREADS, 0, s>>>(logp, target, dlogp, n, c, ignore_index, w, red, scale, loss, weight, add, bad, parts);
	loss_total(s, b, parts, red, loss, weight, add);
}

void kc_cross_entropy(cudaStream_t s, const float *logits, const int32_t *target, float *dlogits, int n, int c, int ignore_index,
		      const float *w, double wsum, float smoothing, enum kern_reduction red, float scale, double *loss, double weight,
		      bool add, int32_t *bad, double *parts)
{
	unsigned b = loss_blocks((int64_t)n * c, n < c ? n : c);
	cross_entropy_kernel<<<b, LOSS_THREADS, 0, s>>>(logits, target, dlogits, n, c, ignore_index, w, wsum, smoothing, red, scale, loss,
							weight, add, bad, parts);
	loss_total(s, b, parts, red, loss, weight, add);
}

void kc_argmax_correct(cudaStream_t s, const float *logits, const int32_t *target, int n, int c, double *correct)
{
	if (n > 0) argmax_kernel<<<blocks_for(n), THREADS, 0, s>>>(logits, target, n, c, correct);
}
