/* fake_kc.c: a host stand-in for the CUDA kernel files
 * (runtime/cuda/kernels_*.cu), so the GPU trainer's host logic
 * (train_gpu*.c, backend_cuda.c) runs in tests on a machine without a
 * GPU.  Every kc_* of kc.h runs at once, on the calling thread, over
 * ordinary host memory (or is recorded while a stream is captured, see
 * tape.h); the stream is ignored.
 * Each function applies the kernel's own per-element or per-row code
 * (body.h, act_elem.h, optim_elem.h, tiny.h) to every element, row or channel in turn,
 * with the kernel's aliasing rules (y may be x, dx may be dy).  Where the
 * GPU sums as a tree, this file sums in the order of the CPU kernel of
 * runtime/kern_*.c instead (losses in kern_loss.c's 64 slices, channels
 * plane by plane): losses, activations, pools, zero pads, softmax and the
 * optimizer equal the CPU backend bit for bit; normalisation differs from
 * it only by its vectorised float sums.  Neither matches the GPU's last
 * bits.
 * The checks it makes beyond fake_cuda.c's launch rules: a kernel that
 * adds with atomics (argmax hits) updates memory of its own stream's GPU,
 * and the embedding's gradient is given as much scratch as its kernel
 * sorts in.
 * Does not: check launches, emulate device memory, or run concurrently.
 */
#include "runtime/cuda/kc.h"
#include "tests/fakecuda/tape.h"

#include <assert.h>
#include <string.h>

#include "compiler/emb_sort.h"
#include "runtime/act_elem.h"
#include "runtime/cuda/body.h"
#include "runtime/cuda/tiny.h"
#include "runtime/optim_elem.h"

static_assert(sizeof(struct optim_coef) <= KC_OPTIM_COEF_BYTES, "optim_coef outgrew KC_OPTIM_COEF_BYTES");

/* ---- activations ---- */
enum act { ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_TANH, ACT_SIGMOID };

static enum act gelu_act(enum kern_gelu approx)
{
	return approx == KERN_GELU_TANH ? ACT_GELU_TANH : ACT_GELU;
}

static void act_fwd(enum act a, const float *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		switch (a) {
		case ACT_RELU: y[i] = body_relu_fwd(x[i]); break;
		case ACT_GELU: y[i] = body_gelu_fwd(x[i], KERN_GELU_NONE); break;
		case ACT_GELU_TANH: y[i] = body_gelu_fwd(x[i], KERN_GELU_TANH); break;
		case ACT_TANH: y[i] = body_tanh_fwd(x[i]); break;
		case ACT_SIGMOID: y[i] = body_sigmoid_fwd(x[i]); break;
		}
	}
}

/* v is the saved output y, or for gelu the saved input x */
static void act_bwd(enum act a, const float *v, const float *dy, float *dx, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		switch (a) {
		case ACT_RELU: dx[i] = body_relu_bwd(v[i], dy[i]); break;
		case ACT_GELU: dx[i] = body_gelu_bwd(v[i], dy[i], KERN_GELU_NONE); break;
		case ACT_GELU_TANH: dx[i] = body_gelu_bwd(v[i], dy[i], KERN_GELU_TANH); break;
		case ACT_TANH: dx[i] = body_tanh_bwd(v[i], dy[i]); break;
		case ACT_SIGMOID: dx[i] = body_sigmoid_bwd(v[i], dy[i]); break;
		}
	}
}

static void host_relu_fwd(cudaStream_t s, const float *x, float *y, int64_t n) { act_fwd(ACT_RELU, x, y, n); }
static void host_relu_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n) { act_bwd(ACT_RELU, y, dy, dx, n); }
static void host_tanh_fwd(cudaStream_t s, const float *x, float *y, int64_t n) { act_fwd(ACT_TANH, x, y, n); }
static void host_tanh_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n) { act_bwd(ACT_TANH, y, dy, dx, n); }
static void host_sigmoid_fwd(cudaStream_t s, const float *x, float *y, int64_t n) { act_fwd(ACT_SIGMOID, x, y, n); }
static void host_sigmoid_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n)
{
	act_bwd(ACT_SIGMOID, y, dy, dx, n);
}

static void host_gelu_fwd(cudaStream_t s, const float *x, float *y, int64_t n, enum kern_gelu approx)
{
	act_fwd(gelu_act(approx), x, y, n);
}

static void host_gelu_bwd(cudaStream_t s, const float *x, const float *dy, float *dx, int64_t n, enum kern_gelu approx)
{
	act_bwd(gelu_act(approx), x, dy, dx, n);
}

static void host_act_fwd(cudaStream_t s, enum kern_act k, const float *x, float *y, int64_t n, float a, float b)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = act_elem_fwd(k, x[i], a, b);
}

static void host_act_bwd(cudaStream_t s, enum kern_act k, const float *x, const float *dy, float *dx, int64_t n, float a, float b)
{
	for (int64_t i = 0; i < n; i++)
		dx[i] = act_elem_bwd(k, x[i], dy[i], a, b);
}

/* ---- dropout ---- */
static void dropout_fwd(const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p, const struct rng *r)
{
	float scale = body_dropout_scale(p);
	for (int64_t i = 0; i < n; i++)
		y[i] = body_dropout_fwd(r, (uint64_t)(i / inner), x[i], p, scale, &mask[i]);
}

static void host_dropout_fwd(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p,
			     struct rng r)
{
	dropout_fwd(x, y, mask, n, inner, p, &r);
}

static void host_dropout_fwd_at(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, int64_t inner, float p,
				struct rng r, const int64_t *step)
{
	assert(step);
	r.ctr_hi[1] = (uint32_t)(*step + 1);
	dropout_fwd(x, y, mask, n, inner, p, &r);
}

static void host_dropout_bwd(cudaStream_t s, const float *dy, const uint8_t *mask, float *dx, int64_t n, float p)
{
	float scale = body_dropout_scale(p);
	for (int64_t i = 0; i < n; i++)
		dx[i] = body_dropout_bwd(dy[i], mask[i], scale);
}

/* ---- sums ---- */
static void host_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}

static void host_accumulate(cudaStream_t s, float *dst, const float *src, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] += src[i];
}

static void host_scale(cudaStream_t s, float *x, int64_t n, float c)
{
	for (int64_t i = 0; i < n; i++)
		x[i] *= c;
}

/* ---- biases ---- */
static void host_bias_add(cudaStream_t s, float *y, const float *b, int64_t rows, int m)
{
	for (int64_t i = 0; i < rows * m; i++)
		y[i] += b[i % m];
}

static void host_bias_grad(cudaStream_t s, const float *dy, float *db, int64_t rows, int m)
{
	for (int j = 0; db && j < m; j++)
		db[j] += body_bias_grad_col(dy, rows, m, j);
}

static void host_channel_bias_add(cudaStream_t s, float *y, const float *b, int n, int c, int64_t hw)
{
	for (int64_t i = 0; i < (int64_t)n * c * hw; i++)
		y[i] += b[(i / hw) % c];
}

static void host_bias_relu(cudaStream_t s, float *y, const float *b, float *r, int64_t total, int m, int64_t inner)
{
	for (int64_t i = 0; i < total; i++) {
		float v = y[i] + b[(i / inner) % m];
		y[i] = v;
		r[i] = body_relu_fwd(v);
	}
}

/* kern_conv2d.c's order, the same as batch norm's */
static void host_channel_bias_grad(cudaStream_t s, const float *dy, float *db, int n, int c, int64_t hw)
{
	for (int ch = 0; db && ch < c; ch++)
		db[ch] += (float)body_channel_sum(BODY_CSUM_X, dy, NULL, 0.0f, n, c, hw, ch);
}

/* PReLU as the kernels map it: an element a thread, a block a weight's sum */
static void host_prelu_fwd(cudaStream_t s, const float *x, const float *w, float *y, int n, int c, int64_t inner)
{
	for (int64_t i = 0; i < (int64_t)n * c * inner; i++)
		y[i] = act_elem_fwd(KERN_LEAKY_RELU, x[i], w[i / inner % c], 0.0f);
}

static void host_prelu_bwd(cudaStream_t s, const float *x, const float *w, const float *dy, float *dx, float *dw, int n,
			   int c, int64_t inner)
{
	for (int ch = 0; dw && ch < c; ch++)
		dw[ch] += (float)body_channel_sum(BODY_CSUM_PRELU, x, dy, 0.0f, n, c, inner, ch);
	for (int64_t i = 0; dx && i < (int64_t)n * c * inner; i++)
		dx[i] = act_elem_bwd(KERN_LEAKY_RELU, x[i], dy[i], w[i / inner % c], 0.0f);
}

/* ---- pooling: forward one output at a time, backward a gather per input
 * element (dx written whole), as the kernels map them ---- */
enum pool { POOL_MAX, POOL_AVG, POOL_ADAPTIVE, POOL_ADAPTIVE_MAX };

/* d: the input shape and, but for the adaptive pools, the window */
static void pool_fwd(enum pool k, const struct pool2d_desc *d, int oh, int ow, const float *x, float *y, int32_t *idx)
{
	int64_t plane = (int64_t)oh * ow, in = (int64_t)d->h * d->w;
	for (int64_t i = 0; i < (int64_t)d->n * d->c * plane; i++) {
		const float *xp = x + i / plane * in;
		int r = (int)(i % plane);
		switch (k) {
		case POOL_MAX: y[i] = body_maxpool_out(d, xp, r / ow, r % ow, &idx[i]); break;
		case POOL_AVG: y[i] = body_avgpool_out(d, xp, r / ow, r % ow); break;
		case POOL_ADAPTIVE: y[i] = body_adaptive_out(xp, d->h, d->w, oh, ow, r / ow, r % ow); break;
		case POOL_ADAPTIVE_MAX: y[i] = body_adaptive_max_out(xp, d->h, d->w, oh, ow, r / ow, r % ow, &idx[i]); break;
		}
	}
}

static void pool_bwd(enum pool k, const struct pool2d_desc *d, int oh, int ow, const int32_t *idx, const float *dy,
		     float *dx)
{
	int64_t plane = (int64_t)d->h * d->w, oplane = (int64_t)oh * ow;
	for (int64_t i = 0; i < (int64_t)d->n * d->c * plane; i++) {
		int64_t o = i / plane * oplane;
		int r = (int)(i % plane), iy = r / d->w, ix = r % d->w;
		switch (k) {
		case POOL_MAX: dx[i] = body_maxpool_grad(d, oh, ow, idx + o, dy + o, iy, ix); break;
		case POOL_AVG: dx[i] = body_avgpool_grad(d, oh, ow, dy + o, iy, ix); break;
		case POOL_ADAPTIVE: dx[i] = body_adaptive_grad(dy + o, d->h, d->w, oh, ow, iy, ix); break;
		case POOL_ADAPTIVE_MAX: dx[i] = body_adaptive_max_grad(idx + o, dy + o, d->h, d->w, oh, ow, iy, ix); break;
		}
	}
}

static void host_maxpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y, int32_t *idx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_fwd(POOL_MAX, &d, oh, ow, x, y, idx);
}

static void host_maxpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const int32_t *idx, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_bwd(POOL_MAX, &d, oh, ow, idx, dy, dx);
}

static void host_avgpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_fwd(POOL_AVG, &d, oh, ow, x, y, NULL);
}

static void host_avgpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_bwd(POOL_AVG, &d, oh, ow, NULL, dy, dx);
}

static void host_adaptive_avgpool2d_fwd(cudaStream_t s, const float *x, float *y, int n, int c, int h, int w, int oh, int ow)
{
	struct pool2d_desc d = { .n = n, .c = c, .h = h, .w = w };
	pool_fwd(POOL_ADAPTIVE, &d, oh, ow, x, y, NULL);
}

static void host_adaptive_avgpool2d_bwd(cudaStream_t s, const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow)
{
	struct pool2d_desc d = { .n = n, .c = c, .h = h, .w = w };
	pool_bwd(POOL_ADAPTIVE, &d, oh, ow, NULL, dy, dx);
}

static void host_adaptive_maxpool2d_fwd(cudaStream_t s, const float *x, float *y, int32_t *idx, int n, int c, int h, int w,
					int oh, int ow)
{
	struct pool2d_desc d = { .n = n, .c = c, .h = h, .w = w };
	pool_fwd(POOL_ADAPTIVE_MAX, &d, oh, ow, x, y, idx);
}

static void host_adaptive_maxpool2d_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dx, int n, int c, int h,
					int w, int oh, int ow)
{
	struct pool2d_desc d = { .n = n, .c = c, .h = h, .w = w };
	pool_bwd(POOL_ADAPTIVE_MAX, &d, oh, ow, idx, dy, dx);
}

/* ---- zero padding: a gather per element each way, as the kernels ---- */
static void host_zeropad2d_fwd(cudaStream_t s, struct pad2d_desc d, const float *x, float *y)
{
	int oh, ow;
	kern_pad2d_out(&d, &oh, &ow);
	int64_t plane = (int64_t)oh * ow, in = (int64_t)d.h * d.w;
	for (int64_t i = 0; i < (int64_t)d.n * d.c * plane; i++) {
		int r = (int)(i % plane);
		y[i] = body_zeropad_out(&d, x + i / plane * in, r / ow, r % ow);
	}
}

static void host_zeropad2d_bwd(cudaStream_t s, struct pad2d_desc d, const float *dy, float *dx)
{
	int oh, ow;
	kern_pad2d_out(&d, &oh, &ow);
	int64_t plane = (int64_t)d.h * d.w, oplane = (int64_t)oh * ow;
	for (int64_t i = 0; i < (int64_t)d.n * d.c * plane; i++) {
		int r = (int)(i % plane);
		dx[i] = body_zeropad_grad(&d, oh, ow, dy + i / plane * oplane, r / d.w, r % d.w);
	}
}

/* ---- batch norm, channel by channel; element j of plane i of channel ch
 * is ((i * c + ch) * hw + j) ---- */
static void host_batchnorm2d_fwd_train(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y,
			      float *running_mean, float *running_var, float *save_mean, float *save_invstd, int64_t *tracked,
			      int n, int c, int64_t hw, float eps, float momentum)
{
	assert((int64_t)n * hw > 1);
	for (int ch = 0; ch < c; ch++)
		body_bn_train_channel(x, gamma, beta, y, running_mean, running_var, n, c, hw, ch, eps, momentum, &save_mean[ch],
				      &save_invstd[ch]);
	if (tracked && c > 0)
		*tracked += 1;
}

static void host_batchnorm2d_fwd_eval(cudaStream_t s, const float *x, const float *gamma, const float *beta, const float *running_mean,
			     const float *running_var, float *y, int n, int c, int64_t hw, float eps)
{
	for (int64_t i = 0; i < (int64_t)n * c * hw; i++) {
		int ch = (int)((i / hw) % c);
		float alpha, shift;
		body_bn_affine(running_mean[ch], body_bn_eval_invstd(running_var[ch], eps), gamma, beta, ch, &alpha, &shift);
		y[i] = x[i] * alpha + shift;
	}
}

static void host_batchnorm2d_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			const float *dy, float *dx, float *dgamma, float *dbeta, int n, int c, int64_t hw)
{
	for (int ch = 0; ch < c; ch++) {
		double sdy, sdyx;
		body_bn_bwd_channel(x, gamma, save_mean[ch], save_invstd[ch], dy, dx, n, c, hw, ch, &sdy, &sdyx);
		if (dgamma)
			dgamma[ch] += (float)(sdyx * save_invstd[ch]);
		if (dbeta)
			dbeta[ch] += (float)sdy;
	}
}

/* ---- layer norm: body.h's rows are kern_layernorm.c's ---- */
static void host_layernorm_fwd(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
		      float *save_invstd, int64_t rows, int d, float eps)
{
	for (int64_t r = 0; d > 0 && r < rows; r++)
		body_layernorm_row(x + r * d, gamma, beta, y + r * d, d, eps, &save_mean[r], &save_invstd[r]);
}

static void host_layernorm_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
		      const float *dy, float *dx, float *dgamma, float *dbeta, int64_t rows, int d)
{
	if (rows <= 0 || d <= 0)
		return;
	/* parameter gradients first: dx may overwrite dy */
	for (int j = 0; (dgamma || dbeta) && j < d; j++)
		body_ln_param_col(x, dy, save_mean, save_invstd, rows, d, j, dgamma, dbeta);
	for (int64_t r = 0; dx && r < rows; r++)
		body_layernorm_bwd_row(x + r * d, gamma, save_mean[r], save_invstd[r], dy + r * d, dx + r * d, d);
}

/* ---- group norm: body.h's rows ---- */
static void host_groupnorm_fwd(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
			       float *save_invstd, int n, int groups, int cpg, int hw, float eps)
{
	int64_t d = (int64_t)cpg * hw;
	for (int64_t r = 0; d > 0 && r < (int64_t)n * groups; r++)
		body_groupnorm_row(x + r * d, gamma, beta, y + r * d, body_gn_c0(r, groups, cpg), cpg, hw, eps, &save_mean[r],
				   &save_invstd[r]);
}

static void host_groupnorm_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			       const float *dy, float *dx, float *dgamma, float *dbeta, int n, int groups, int cpg, int hw)
{
	int64_t d = (int64_t)cpg * hw;
	if (n <= 0 || d <= 0)
		return;
	/* parameter gradients first: dx may overwrite dy */
	for (int ch = 0; (dgamma || dbeta) && ch < groups * cpg; ch++)
		body_gn_param_chan(x, dy, save_mean, save_invstd, n, groups, cpg, hw, ch, dgamma, dbeta);
	for (int64_t r = 0; dx && r < (int64_t)n * groups; r++)
		body_groupnorm_bwd_row(x + r * d, gamma, body_gn_c0(r, groups, cpg), cpg, hw, save_mean[r], save_invstd[r], dy + r * d,
				       dx + r * d);
}

/* ---- embedding ---- */
static void host_embedding_fwd(cudaStream_t s, const int32_t *idx, const float *w, float *y, int64_t n, int vocab, int dim, int32_t *bad)
{
	int32_t any = 0;
	for (int64_t e = 0; dim > 0 && e < n * dim; e++)
		y[e] = body_embedding_elem(idx, w, vocab, dim, e, &any);
	if (any && bad)
		*bad = 1;
}

/* rows in index order, as kern_embedding_bwd and the kernel add them; the
 * scratch the kernel sorts in must hold the plan's keys (EMBEDDING_SORT) */
static void host_embedding_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dw, int64_t n, int vocab, int dim,
		      int padding_idx, void *scratch, int64_t scratch_bytes)
{
	assert(!dw || n <= 0 || dim <= 0 || (scratch && scratch_bytes >= emb_sort_bytes(n)));
	for (int64_t e = 0; dw && dim > 0 && e < n * dim; e++) {
		int32_t id = idx[e / dim];
		if (id != padding_idx && id >= 0 && id < vocab)
			dw[(int64_t)id * dim + e % dim] += dy[e];
	}
}

/* ---- softmax: body.h's row is kern_softmax.c's, contiguous or strided ---- */
static void softmax_fwd(const float *x, float *y, int64_t outer, int dim, int64_t inner, bool log_out)
{
	for (int64_t t = 0; dim > 0 && t < outer * inner; t++) {
		int64_t at = (t / inner) * dim * inner + t % inner;
		body_softmax_row(x + at, y + at, dim, inner, log_out);
	}
}

static void softmax_bwd(const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner, bool log_out)
{
	for (int64_t t = 0; dim > 0 && t < outer * inner; t++) {
		int64_t at = (t / inner) * dim * inner + t % inner;
		body_softmax_bwd_row(y + at, dy + at, dx + at, dim, inner, log_out);
	}
}

static void host_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner)
{
	softmax_fwd(x, y, outer, dim, inner, false);
}

static void host_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner)
{
	softmax_bwd(y, dy, dx, outer, dim, inner, false);
}

static void host_log_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner)
{
	softmax_fwd(x, y, outer, dim, inner, true);
}

static void host_log_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner)
{
	softmax_bwd(y, dy, dx, outer, dim, inner, true);
}

/* ---- losses: item i (element or row) of n adds to slice i / ceil(n /
 * PARTS), the slices then added in order: kern_loss.c's sum exactly ---- */
enum { PARTS = 64 }; /* kern_loss.c's PARTS; keep in step */

struct slices {
	double part[PARTS];
	int64_t len; /* items per slice */
};

static void slices_init(struct slices *sl, int64_t n)
{
	memset(sl->part, 0, sizeof sl->part);
	sl->len = n > 0 ? (n + PARTS - 1) / PARTS : 1;
}

static double slices_total(const struct slices *sl)
{
	double t = 0;
	for (int p = 0; p < PARTS; p++)
		t += sl->part[p];
	return t;
}

static void store_loss(double *loss, double l, double weight, bool add)
{
	*loss = (add ? *loss : 0.0) + weight * l;
}

/* Rows that count (their class weights' sum where w is not NULL); -1 if
 * a target is bad. */
static double count_targets(const int32_t *target, int n, int c, int ignore_index, const float *w)
{
	double count = 0;
	int bad = 0;
	for (int i = 0; i < n && !bad; i++)
		count += body_target_count(w, target[i], c, ignore_index, &bad);
	return bad ? -1 : count;
}

/* Set for tests/gpu_ops.c, which checks the kernel files' grid of blocks
 * for a large loss only where they run: this file's losses sum as the
 * CPU's, and leave parts unwritten. */
const int fake_kc_losses_on_host = 1;

/* A loss is given device memory for its block sums, which a grid of
 * blocks writes (kernels_loss.cu), whatever this loss's size. */
static void parts_check(const double *parts)
{
	assert(parts && fake_is_device(parts));
}

static void host_regression(cudaStream_t s, enum kern_regression kind, float param, const float *per, int64_t nper,
			    const float *x, const float *target, float *dx, int64_t n, enum kern_reduction red, float scale,
			    double *loss, double weight, bool add, double *parts)
{
	parts_check(parts);
	float g = loss_regression_grad(kind, n, red, scale);
	struct slices sl;
	slices_init(&sl, n);
	for (int64_t i = 0; i < n; i++) {
		float d;
		sl.part[i / sl.len] += loss_regression_term(kind, per ? per[i % nper] : param, x[i], target[i], g, &d);
		if (dx)
			dx[i] = d;
	}
	double acc = slices_total(&sl);
	store_loss(loss, red == KERN_REDUCE_MEAN ? acc / (double)n : acc, weight, add);
}

/* A class loss's start: the rows that count and the gradient's factor g;
 * false, with *bad raised, if a target is out of range. */
static bool class_start(const int32_t *target, int n, int c, int ignore_index, const float *w, enum kern_reduction red,
			float scale, int32_t *bad, double *count, float *g)
{
	*count = count_targets(target, n, c, ignore_index, w);
	if (*count < 0) {
		if (bad)
			*bad = 1;
		return false;
	}
	*g = body_class_grad(*count, red, scale);
	return true;
}

static void host_nll(cudaStream_t s, const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index,
	    const float *w, enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad, double *parts)
{
	parts_check(parts);
	double count;
	float g;
	if (!class_start(target, n, c, ignore_index, w, red, scale, bad, &count, &g))
		return;
	struct slices sl;
	slices_init(&sl, n);
	for (int i = 0; i < n; i++)
		if (target[i] != ignore_index)
			sl.part[i / sl.len] -= body_class_weight(w, target[i], true) * logp[(int64_t)i * c + target[i]];
	/* after every read of logp: dlogp may be logp */
	for (int64_t e = 0; dlogp && e < (int64_t)n * c; e++) {
		int32_t t = target[e / c];
		dlogp[e] = body_nll_grad((int)(e % c), t, t != ignore_index, g) * body_class_weight(w, t, t != ignore_index);
	}
	store_loss(loss, body_loss_reduce(slices_total(&sl), count, red), weight, add);
}

static void host_cross_entropy(cudaStream_t s, const float *logits, const int32_t *target, float *dlogits, int n, int c, int ignore_index,
		      const float *w, double wsum, float eps, enum kern_reduction red, float scale, double *loss, double weight,
		      bool add, int32_t *bad, double *parts)
{
	parts_check(parts);
	double count;
	float g;
	if (!class_start(target, n, c, ignore_index, w, red, scale, bad, &count, &g))
		return;
	struct slices sl;
	slices_init(&sl, n);
	for (int r = 0; r < n; r++) {
		const float *z = logits + (int64_t)r * c;
		int32_t t = target[r];
		bool on = t != ignore_index;
		float mx = -INFINITY;
		for (int k = 0; k < c; k++)
			mx = fmaxf(mx, z[k]);
		double se = 0, zc = 0;
		for (int k = 0; k < c; k++)
			se += expf(z[k] - mx);
		if (eps > 0)
			for (int k = 0; k < c; k++)
				zc += body_ce_zc(w, k, z[k], mx);
		float ls = body_ce_ls(se), wt = body_class_weight(w, t, on);
		/* z[t] before the row's gradient: dlogits may be logits */
		if (on)
			sl.part[r / sl.len] += body_ce_any_term(ls, z[t], mx, zc, c, eps, w, wt, wsum);
		if (dlogits) {
			float *d = dlogits + (int64_t)r * c, gi = on ? g : 0.0f, gs = body_ce_gs(gi, eps, w, wt, wsum, c);
			float gt = body_ce_gt(gi, eps) * wt, gu = body_ce_gu(gi, eps, c);
			for (int k = 0; k < c; k++)
				d[k] = body_ce_grad(z[k], mx, ls, gs, gt, body_ce_guk(gu, w, k), on && k == t);
		}
	}
	store_loss(loss, body_loss_reduce(slices_total(&sl), count, red), weight, add);
}

static void host_argmax_correct(cudaStream_t s, const float *logits, const int32_t *target, int n, int c, double *correct)
{
	if (n > 0) /* the kernel adds with an atomic */
		fake_atomic_check("argmax_correct", fake_stream_device(s), correct, NULL, NULL);
	double hits = 0;
	for (int r = 0; r < n; r++)
		hits += body_argmax_hit(logits + (int64_t)r * c, c, target[r]);
	if (hits > 0)
		*correct += hits;
}

/* ---- data ---- */
static void host_gather_rows(cudaStream_t s, void *dst, const void *src, int64_t row_words, const int64_t *order, const int64_t *pos,
		    int64_t n)
{
	size_t row = (size_t)row_words * sizeof(uint32_t);
	for (int64_t r = 0; row_words > 0 && r < n; r++)
		memcpy((char *)dst + (size_t)r * row, (const char *)src + (size_t)order[*pos + r] * row, row);
}

static void host_add_i64(cudaStream_t s, int64_t *x, int64_t by) { *x += by; }

static void host_f64_axpy(cudaStream_t s, double *dst, const double *src, double a, bool add)
{
	*dst = (add ? *dst : 0.0) + a * *src;
}

static void host_record(cudaStream_t s, const double *v, double *hist, const int64_t *counter, int64_t cap)
{
	assert(cap > 0);
	hist[(*counter - 1) % cap] = *v;
}

/* ---- optimizer; coef is copied, as it is raw bytes of the caller's ---- */
static void host_optim_prepare(cudaStream_t s, struct optim_cfg cfg, const double *lr_table, int64_t period, int64_t *step,
			       void *coef)
{
	assert(period > 0);
	int64_t t = *step + 1;
	*step = t;
	struct optim_coef k = optim_coef_of(&cfg, t, lr_table[(t - 1) % period]);
	memcpy(coef, &k, sizeof k);
}

static void host_optim_apply(cudaStream_t s, struct optim_cfg cfg, const void *coef, float *param, const float *grad, float *state,
		    int64_t plane_stride, int64_t n)
{
	struct optim_coef k;
	memcpy(&k, coef, sizeof k);
	float *planes[3] = { NULL, NULL, NULL };
	for (int j = 0; j < optim_state_floats(cfg.kind, &cfg); j++)
		planes[j] = state + j * plane_stride;
	for (int64_t i = 0; i < n; i++)
		optim_elem_apply(&k, param, grad, planes, i);
}

/* the kernels' KC_SUMSQ_PARTS fixed chunks, each summed in order */
static void host_sumsq(cudaStream_t s, const float *g, int64_t n, double *partials, double *sumsq)
{
	int64_t chunk = (n + KC_SUMSQ_PARTS - 1) / KC_SUMSQ_PARTS;
	double total = 0;
	for (int b = 0; b < KC_SUMSQ_PARTS; b++) {
		int64_t lo = b * chunk, hi = lo + chunk < n ? lo + chunk : n;
		double acc = 0;
		for (int64_t i = lo; i < hi; i++)
			acc += (double)g[i] * g[i];
		partials[b] = acc;
		total += acc;
	}
	*sumsq = total;
}

static void host_clip(cudaStream_t s, float *g, int64_t n, const double *sumsq, double max_norm)
{
	float coef = optim_elem_clip_coef(sqrt(*sumsq), max_norm);
	if (coef >= 1.0f) /* a factor of 1 changes nothing; a NaN goes through, as on the CPU */
		return;
	for (int64_t i = 0; i < n; i++)
		g[i] *= coef;
}

/* ---- a whole step of a small model: tiny.h's interpreter as one thread ---- */
static void host_tiny_step(cudaStream_t s, const void *prog)
{
	double sh[1];
	struct optim_coef coef;
	static _Alignas(16) char smem[TINY_SMEM_BYTES];
	tiny_run(0, 1, prog, sh, &coef, smem);
}

/* ---- the public launchers: each runs its host_ version at once, or,
 * while a stream is being captured (tape.h), records its arguments for
 * the graph to replay.  One line per launcher lists kc.h's parameters
 * after the stream. ---- */
#define FIELD(T, v) T v;
#define PARAM(T, v) , T v
#define SET(T, v) rec_.v = v;
#define ARG(T, v) , args_->v
#define PASS(T, v) , v
#define WRAP(name, LIST)                                                                  \
	struct name##_args {                                                              \
		cudaStream_t s;                                                           \
		LIST(FIELD)                                                               \
	};                                                                                \
	static void name##_replay(const void *q_)                                         \
	{                                                                                 \
		const struct name##_args *args_ = q_;                                     \
		host_##name(args_->s LIST(ARG));                                          \
	}                                                                                 \
	void kc_##name(cudaStream_t s LIST(PARAM))                                        \
	{                                                                                 \
		struct name##_args rec_;                                                  \
		memset(&rec_, 0, sizeof rec_);                                            \
		rec_.s = s;                                                               \
		fake_kernel_check(#name, s);                                              \
		LIST(SET)                                                                 \
		if (!tape_record_on(s, name##_replay, &rec_, sizeof rec_)) {              \
			fake_dev_open();                                                  \
			host_##name(s LIST(PASS));                                        \
			fake_dev_close();                                                 \
		}                                                                         \
	}

#define L_relu_fwd(X) X(const float *, x) X(float *, y) X(int64_t, n)
WRAP(relu_fwd, L_relu_fwd)
#define L_relu_bwd(X) X(const float *, y) X(const float *, dy) X(float *, dx) X(int64_t, n)
WRAP(relu_bwd, L_relu_bwd)
#define L_gelu_fwd(X) X(const float *, x) X(float *, y) X(int64_t, n) X(enum kern_gelu, approx)
WRAP(gelu_fwd, L_gelu_fwd)
#define L_gelu_bwd(X) X(const float *, x) X(const float *, dy) X(float *, dx) X(int64_t, n) X(enum kern_gelu, approx)
WRAP(gelu_bwd, L_gelu_bwd)
#define L_tanh_fwd(X) X(const float *, x) X(float *, y) X(int64_t, n)
WRAP(tanh_fwd, L_tanh_fwd)
#define L_tanh_bwd(X) X(const float *, y) X(const float *, dy) X(float *, dx) X(int64_t, n)
WRAP(tanh_bwd, L_tanh_bwd)
#define L_sigmoid_fwd(X) X(const float *, x) X(float *, y) X(int64_t, n)
WRAP(sigmoid_fwd, L_sigmoid_fwd)
#define L_sigmoid_bwd(X) X(const float *, y) X(const float *, dy) X(float *, dx) X(int64_t, n)
WRAP(sigmoid_bwd, L_sigmoid_bwd)
#define L_act_fwd(X) X(enum kern_act, k) X(const float *, x) X(float *, y) X(int64_t, n) X(float, a) X(float, b)
WRAP(act_fwd, L_act_fwd)
#define L_act_bwd(X) X(enum kern_act, k) X(const float *, x) X(const float *, dy) X(float *, dx) X(int64_t, n) X(float, a) X(float, b)
WRAP(act_bwd, L_act_bwd)
#define L_prelu_fwd(X) X(const float *, x) X(const float *, w) X(float *, y) X(int, n) X(int, c) X(int64_t, inner)
WRAP(prelu_fwd, L_prelu_fwd)
#define L_prelu_bwd(X) X(const float *, x) X(const float *, w) X(const float *, dy) X(float *, dx) X(float *, dw) X(int, n) \
	X(int, c) X(int64_t, inner)
WRAP(prelu_bwd, L_prelu_bwd)
#define L_dropout_fwd(X) X(const float *, x) X(float *, y) X(uint8_t *, mask) X(int64_t, n) X(int64_t, inner) X(float, p) \
	X(struct rng, r)
WRAP(dropout_fwd, L_dropout_fwd)
#define L_dropout_fwd_at(X) X(const float *, x) X(float *, y) X(uint8_t *, mask) X(int64_t, n) X(int64_t, inner) X(float, p) \
	X(struct rng, r) X(const int64_t *, step)
WRAP(dropout_fwd_at, L_dropout_fwd_at)
#define L_dropout_bwd(X) X(const float *, dy) X(const uint8_t *, mask) X(float *, dx) X(int64_t, n) X(float, p)
WRAP(dropout_bwd, L_dropout_bwd)
#define L_add(X) X(const float *, a) X(const float *, b) X(float *, y) X(int64_t, n)
WRAP(add, L_add)
#define L_accumulate(X) X(float *, dst) X(const float *, src) X(int64_t, n)
WRAP(accumulate, L_accumulate)
#define L_scale(X) X(float *, x) X(int64_t, n) X(float, c)
WRAP(scale, L_scale)
#define L_bias_add(X) X(float *, y) X(const float *, b) X(int64_t, rows) X(int, m)
WRAP(bias_add, L_bias_add)
#define L_bias_grad(X) X(const float *, dy) X(float *, db) X(int64_t, rows) X(int, m)
WRAP(bias_grad, L_bias_grad)
#define L_channel_bias_add(X) X(float *, y) X(const float *, b) X(int, n) X(int, c) X(int64_t, hw)
WRAP(channel_bias_add, L_channel_bias_add)
#define L_bias_relu(X) X(float *, y) X(const float *, b) X(float *, r) X(int64_t, total) X(int, m) X(int64_t, inner)
WRAP(bias_relu, L_bias_relu)
#define L_channel_bias_grad(X) X(const float *, dy) X(float *, db) X(int, n) X(int, c) X(int64_t, hw)
WRAP(channel_bias_grad, L_channel_bias_grad)
#define L_maxpool2d_fwd(X) X(struct pool2d_desc, d) X(const float *, x) X(float *, y) X(int32_t *, idx)
WRAP(maxpool2d_fwd, L_maxpool2d_fwd)
#define L_maxpool2d_bwd(X) X(struct pool2d_desc, d) X(const int32_t *, idx) X(const float *, dy) X(float *, dx)
WRAP(maxpool2d_bwd, L_maxpool2d_bwd)
#define L_avgpool2d_fwd(X) X(struct pool2d_desc, d) X(const float *, x) X(float *, y)
WRAP(avgpool2d_fwd, L_avgpool2d_fwd)
#define L_avgpool2d_bwd(X) X(struct pool2d_desc, d) X(const float *, dy) X(float *, dx)
WRAP(avgpool2d_bwd, L_avgpool2d_bwd)
#define L_adaptive_avgpool2d_fwd(X) X(const float *, x) X(float *, y) X(int, n) X(int, c) X(int, h) X(int, w) \
	X(int, oh) X(int, ow)
WRAP(adaptive_avgpool2d_fwd, L_adaptive_avgpool2d_fwd)
#define L_adaptive_avgpool2d_bwd(X) X(const float *, dy) X(float *, dx) X(int, n) X(int, c) X(int, h) \
	X(int, w) X(int, oh) X(int, ow)
WRAP(adaptive_avgpool2d_bwd, L_adaptive_avgpool2d_bwd)
#define L_adaptive_maxpool2d_fwd(X) X(const float *, x) X(float *, y) X(int32_t *, idx) X(int, n) X(int, c) X(int, h) \
	X(int, w) X(int, oh) X(int, ow)
WRAP(adaptive_maxpool2d_fwd, L_adaptive_maxpool2d_fwd)
#define L_adaptive_maxpool2d_bwd(X) X(const int32_t *, idx) X(const float *, dy) X(float *, dx) X(int, n) X(int, c) \
	X(int, h) X(int, w) X(int, oh) X(int, ow)
WRAP(adaptive_maxpool2d_bwd, L_adaptive_maxpool2d_bwd)
#define L_zeropad2d_fwd(X) X(struct pad2d_desc, d) X(const float *, x) X(float *, y)
WRAP(zeropad2d_fwd, L_zeropad2d_fwd)
#define L_zeropad2d_bwd(X) X(struct pad2d_desc, d) X(const float *, dy) X(float *, dx)
WRAP(zeropad2d_bwd, L_zeropad2d_bwd)
#define L_batchnorm2d_fwd_train(X) X(const float *, x) X(const float *, gamma) X(const float *, beta) \
	X(float *, y) X(float *, running_mean) X(float *, running_var) X(float *, save_mean) X(float *, save_invstd) \
	X(int64_t *, tracked) X(int, n) X(int, c) X(int64_t, hw) X(float, eps) X(float, momentum)
WRAP(batchnorm2d_fwd_train, L_batchnorm2d_fwd_train)
#define L_batchnorm2d_fwd_eval(X) X(const float *, x) X(const float *, gamma) X(const float *, beta) \
	X(const float *, running_mean) X(const float *, running_var) X(float *, y) X(int, n) X(int, c) X(int64_t, hw) \
	X(float, eps)
WRAP(batchnorm2d_fwd_eval, L_batchnorm2d_fwd_eval)
#define L_batchnorm2d_bwd(X) X(const float *, x) X(const float *, gamma) X(const float *, save_mean) \
	X(const float *, save_invstd) X(const float *, dy) X(float *, dx) X(float *, dgamma) X(float *, dbeta) \
	X(int, n) X(int, c) X(int64_t, hw)
WRAP(batchnorm2d_bwd, L_batchnorm2d_bwd)
#define L_layernorm_fwd(X) X(const float *, x) X(const float *, gamma) X(const float *, beta) X(float *, y) \
	X(float *, save_mean) X(float *, save_invstd) X(int64_t, rows) X(int, d) X(float, eps)
WRAP(layernorm_fwd, L_layernorm_fwd)
#define L_layernorm_bwd(X) X(const float *, x) X(const float *, gamma) X(const float *, save_mean) \
	X(const float *, save_invstd) X(const float *, dy) X(float *, dx) X(float *, dgamma) X(float *, dbeta) \
	X(int64_t, rows) X(int, d)
WRAP(layernorm_bwd, L_layernorm_bwd)
#define L_groupnorm_fwd(X) X(const float *, x) X(const float *, gamma) X(const float *, beta) X(float *, y) \
	X(float *, save_mean) X(float *, save_invstd) X(int, n) X(int, groups) X(int, cpg) X(int, hw) X(float, eps)
WRAP(groupnorm_fwd, L_groupnorm_fwd)
#define L_groupnorm_bwd(X) X(const float *, x) X(const float *, gamma) X(const float *, save_mean) \
	X(const float *, save_invstd) X(const float *, dy) X(float *, dx) X(float *, dgamma) X(float *, dbeta) \
	X(int, n) X(int, groups) X(int, cpg) X(int, hw)
WRAP(groupnorm_bwd, L_groupnorm_bwd)
#define L_embedding_fwd(X) X(const int32_t *, idx) X(const float *, w) X(float *, y) X(int64_t, n) \
	X(int, vocab) X(int, dim) X(int32_t *, bad)
WRAP(embedding_fwd, L_embedding_fwd)
#define L_embedding_bwd(X) X(const int32_t *, idx) X(const float *, dy) X(float *, dw) X(int64_t, n) \
	X(int, vocab) X(int, dim) X(int, padding_idx) X(void *, scratch) X(int64_t, scratch_bytes)
WRAP(embedding_bwd, L_embedding_bwd)
#define L_softmax_fwd(X) X(const float *, x) X(float *, y) X(int64_t, outer) X(int, dim) X(int64_t, inner)
WRAP(softmax_fwd, L_softmax_fwd)
#define L_softmax_bwd(X) X(const float *, y) X(const float *, dy) X(float *, dx) X(int64_t, outer) X(int, dim) \
	X(int64_t, inner)
WRAP(softmax_bwd, L_softmax_bwd)
#define L_log_softmax_fwd(X) X(const float *, x) X(float *, y) X(int64_t, outer) X(int, dim) X(int64_t, inner)
WRAP(log_softmax_fwd, L_log_softmax_fwd)
#define L_log_softmax_bwd(X) X(const float *, y) X(const float *, dy) X(float *, dx) X(int64_t, outer) \
	X(int, dim) X(int64_t, inner)
WRAP(log_softmax_bwd, L_log_softmax_bwd)
#define L_regression(X) X(enum kern_regression, kind) X(float, param) X(const float *, per) X(int64_t, nper) \
	X(const float *, x) X(const float *, target) \
	X(float *, dx) X(int64_t, n) X(enum kern_reduction, red) X(float, scale) X(double *, loss) X(double, weight) \
	X(bool, add) X(double *, parts)
WRAP(regression, L_regression)
#define L_nll(X) X(const float *, logp) X(const int32_t *, target) X(float *, dlogp) X(int, n) X(int, c) \
	X(int, ignore_index) X(const float *, w) X(enum kern_reduction, red) X(float, scale) X(double *, loss) \
	X(double, weight) X(bool, add) X(int32_t *, bad) X(double *, parts)
WRAP(nll, L_nll)
#define L_cross_entropy(X) X(const float *, logits) X(const int32_t *, target) X(float *, dlogits) X(int, n) \
	X(int, c) X(int, ignore_index) X(const float *, w) X(double, wsum) X(float, eps) X(enum kern_reduction, red) \
	X(float, scale) X(double *, loss) X(double, weight) X(bool, add) X(int32_t *, bad) X(double *, parts)
WRAP(cross_entropy, L_cross_entropy)
#define L_argmax_correct(X) X(const float *, logits) X(const int32_t *, target) X(int, n) X(int, c) X(double *, correct)
WRAP(argmax_correct, L_argmax_correct)
#define L_gather_rows(X) X(void *, dst) X(const void *, src) X(int64_t, row_words) X(const int64_t *, order) \
	X(const int64_t *, pos) X(int64_t, n)
WRAP(gather_rows, L_gather_rows)
#define L_add_i64(X) X(int64_t *, x) X(int64_t, by)
WRAP(add_i64, L_add_i64)
#define L_f64_axpy(X) X(double *, dst) X(const double *, src) X(double, a) X(bool, add)
WRAP(f64_axpy, L_f64_axpy)
#define L_record(X) X(const double *, v) X(double *, hist) X(const int64_t *, counter) X(int64_t, cap)
WRAP(record, L_record)
#define L_optim_prepare(X) X(struct optim_cfg, cfg) X(const double *, lr_table) X(int64_t, period) X(int64_t *, step) X(void *, coef)
WRAP(optim_prepare, L_optim_prepare)
#define L_optim_apply(X) X(struct optim_cfg, cfg) X(const void *, coef) X(float *, param) \
	X(const float *, grad) X(float *, state) X(int64_t, plane_stride) X(int64_t, n)
WRAP(optim_apply, L_optim_apply)
#define L_sumsq(X) X(const float *, g) X(int64_t, n) X(double *, partials) X(double *, sumsq)
WRAP(sumsq, L_sumsq)
#define L_clip(X) X(float *, g) X(int64_t, n) X(const double *, sumsq) X(double, max_norm)
WRAP(clip, L_clip)
#define L_tiny_step(X) X(const void *, prog)
WRAP(tiny_step, L_tiny_step)
