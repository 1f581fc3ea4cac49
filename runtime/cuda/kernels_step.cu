/* kernels_step.cu: what a captured step needs besides layers: batches
 * gathered on the device, the step and position words, loss records, the fused
 * optimizer update, gradient clipping, and a small model's whole step as one
 * block (tiny.h).
 */
#include "runtime/cuda/kc_impl.cuh"

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

/* *counter is the step just taken, 1 at the first: optim_prepare_kernel
 * advanced it earlier in the step */
__global__ void record_kernel(const double *v, double *hist, const int64_t *counter, int64_t cap)
{
	hist[(*counter - 1) % cap] = *v;
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

/* ---- optimizer ---- */
struct planes { float *p[3]; }; /* optim_elem_apply's planes, by value */

__global__ void optim_prepare_kernel(struct optim_cfg cfg, const double *lr_table, int64_t period, int64_t *step,
				     struct optim_coef *coef)
{
	int64_t t = *step + 1;
	*step = t;
	*coef = optim_coef_of(&cfg, t, lr_table[(t - 1) % period]);
}

__global__ void optim_apply_kernel(const struct optim_coef *coef, float *param, const float *grad, struct planes pl, int64_t n)
{
	__shared__ struct optim_coef k;
	if (threadIdx.x == 0)
		k = *coef;
	__syncthreads();
	FOR_EACH(i, n) optim_elem_apply(&k, param, grad, pl.p, i);
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

void kc_optim_prepare(cudaStream_t s, struct optim_cfg cfg, const double *lr_table, int64_t period, int64_t *step, void *coef)
{
	assert(period > 0);
	optim_prepare_kernel<<<1, 1, 0, s>>>(cfg, lr_table, period, step, (struct optim_coef *)coef);
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
/* the program by value: __grid_constant__ lets tiny_run take its address
 * without a copy to local memory */
__global__ void __launch_bounds__(TINY_THREADS) tiny_step_kernel(const __grid_constant__ struct tiny_prog P)
{
	__shared__ double sh[TINY_THREADS];
	__shared__ struct optim_coef coef;
	__shared__ __align__(16) char smem[TINY_SMEM_BYTES];
	tiny_run((int)threadIdx.x, (int)blockDim.x, &P, sh, &coef, smem);
}

static_assert(sizeof(struct tiny_prog) <= 4000, "a tiny_prog must fit the 4 KB of a kernel's parameters");

void kc_tiny_step(cudaStream_t s, const void *prog)
{
	struct tiny_prog P = *(const struct tiny_prog *)prog;
	tiny_step_kernel<<<1, TINY_THREADS, 0, s>>>(P);
}
