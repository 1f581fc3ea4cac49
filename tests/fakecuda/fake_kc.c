/* fake_kc.c: a host stand-in for runtime/cuda/kernels.cu, so the GPU
 * trainer's host logic (train_gpu.c, backend_cuda.c) runs in tests on a
 * machine without a GPU.  Every kc_* of kc.h runs at once, on the calling
 * thread, over ordinary host memory; the stream is ignored.
 * Each function applies the kernel's own per-element or per-row code
 * (body.h, optim_elem.h, tiny.h) to every element, row or channel in turn,
 * with the kernel's aliasing rules (y may be x, dx may be dy).  Where the
 * GPU sums as a tree, this file sums in the order of the CPU kernel of
 * runtime/kern_*.c instead (losses in kern_loss.c's 64 slices, channels
 * plane by plane): losses, activations, pools, softmax and the optimizer
 * equal the CPU backend bit for bit; normalisation differs from it only by
 * its vectorised float sums.  Neither matches the GPU's last bits.
 * Does not: check launches, emulate device memory, or run concurrently.
 */
#include "runtime/cuda/kc.h"

#include <assert.h>
#include <string.h>

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

void kc_relu_fwd(cudaStream_t s, const float *x, float *y, int64_t n) { act_fwd(ACT_RELU, x, y, n); }
void kc_relu_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n) { act_bwd(ACT_RELU, y, dy, dx, n); }
void kc_tanh_fwd(cudaStream_t s, const float *x, float *y, int64_t n) { act_fwd(ACT_TANH, x, y, n); }
void kc_tanh_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n) { act_bwd(ACT_TANH, y, dy, dx, n); }
void kc_sigmoid_fwd(cudaStream_t s, const float *x, float *y, int64_t n) { act_fwd(ACT_SIGMOID, x, y, n); }
void kc_sigmoid_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t n)
{
	act_bwd(ACT_SIGMOID, y, dy, dx, n);
}

void kc_gelu_fwd(cudaStream_t s, const float *x, float *y, int64_t n, enum kern_gelu approx)
{
	act_fwd(gelu_act(approx), x, y, n);
}

void kc_gelu_bwd(cudaStream_t s, const float *x, const float *dy, float *dx, int64_t n, enum kern_gelu approx)
{
	act_bwd(gelu_act(approx), x, dy, dx, n);
}

/* ---- dropout ---- */
static void dropout_fwd(const float *x, float *y, uint8_t *mask, int64_t n, float p, const struct rng *r)
{
	float scale = body_dropout_scale(p);
	for (int64_t i = 0; i < n; i++)
		y[i] = body_dropout_fwd(r, (uint64_t)i, x[i], p, scale, &mask[i]);
}

void kc_dropout_fwd(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, float p, struct rng r)
{
	dropout_fwd(x, y, mask, n, p, &r);
}

void kc_dropout_fwd_at(cudaStream_t s, const float *x, float *y, uint8_t *mask, int64_t n, float p, struct rng r,
		       const int64_t *step)
{
	assert(step);
	r.ctr_hi[1] = (uint32_t)(*step + 1);
	dropout_fwd(x, y, mask, n, p, &r);
}

void kc_dropout_bwd(cudaStream_t s, const float *dy, const uint8_t *mask, float *dx, int64_t n, float p)
{
	float scale = body_dropout_scale(p);
	for (int64_t i = 0; i < n; i++)
		dx[i] = body_dropout_bwd(dy[i], mask[i], scale);
}

/* ---- sums ---- */
void kc_add(cudaStream_t s, const float *a, const float *b, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}

void kc_accumulate(cudaStream_t s, float *dst, const float *src, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		dst[i] += src[i];
}

void kc_scale(cudaStream_t s, float *x, int64_t n, float c)
{
	for (int64_t i = 0; i < n; i++)
		x[i] *= c;
}

/* ---- per-channel sums over (n, c, hw), kern_batchnorm.c's order: a float
 * sum within each plane, the planes added in double ---- */
enum csum {
	CSUM_X,     /* Σ x */
	CSUM_DEV2,  /* Σ (x - mean)^2 */
	CSUM_DY_DEV /* Σ dy (x - mean) */
};

static double channel_sum(enum csum k, const float *x, const float *dy, float mean, int n, int c, int64_t hw, int ch)
{
	double s = 0;
	for (int i = 0; i < n; i++) {
		int64_t at = ((int64_t)i * c + ch) * hw;
		const float *p = x + at;
		float part = 0;
		for (int64_t j = 0; j < hw; j++)
			part += k == CSUM_X ? p[j] : k == CSUM_DEV2 ? (p[j] - mean) * (p[j] - mean) : dy[at + j] * (p[j] - mean);
		s += part;
	}
	return s;
}

/* ---- biases ---- */
void kc_bias_add(cudaStream_t s, float *y, const float *b, int64_t rows, int m)
{
	for (int64_t i = 0; i < rows * m; i++)
		y[i] += b[i % m];
}

void kc_bias_grad(cudaStream_t s, const float *dy, float *db, int64_t rows, int m)
{
	for (int j = 0; db && j < m; j++)
		db[j] += body_bias_grad_col(dy, rows, m, j);
}

void kc_channel_bias_add(cudaStream_t s, float *y, const float *b, int n, int c, int64_t hw)
{
	for (int64_t i = 0; i < (int64_t)n * c * hw; i++)
		y[i] += b[(i / hw) % c];
}

/* kern_conv2d.c's order, the same as batch norm's */
void kc_channel_bias_grad(cudaStream_t s, const float *dy, float *db, int n, int c, int64_t hw)
{
	for (int ch = 0; db && ch < c; ch++)
		db[ch] += (float)channel_sum(CSUM_X, dy, NULL, 0.0f, n, c, hw, ch);
}

/* ---- pooling: forward one output at a time, backward a gather per input
 * element (dx written whole), as the kernels map them ---- */
enum pool { POOL_MAX, POOL_AVG, POOL_ADAPTIVE };

/* d: the input shape and, but for POOL_ADAPTIVE, the window */
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
		}
	}
}

void kc_maxpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y, int32_t *idx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_fwd(POOL_MAX, &d, oh, ow, x, y, idx);
}

void kc_maxpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const int32_t *idx, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_bwd(POOL_MAX, &d, oh, ow, idx, dy, dx);
}

void kc_avgpool2d_fwd(cudaStream_t s, struct pool2d_desc d, const float *x, float *y)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_fwd(POOL_AVG, &d, oh, ow, x, y, NULL);
}

void kc_avgpool2d_bwd(cudaStream_t s, struct pool2d_desc d, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	pool_bwd(POOL_AVG, &d, oh, ow, NULL, dy, dx);
}

void kc_adaptive_avgpool2d_fwd(cudaStream_t s, const float *x, float *y, int n, int c, int h, int w, int oh, int ow)
{
	struct pool2d_desc d = { .n = n, .c = c, .h = h, .w = w };
	pool_fwd(POOL_ADAPTIVE, &d, oh, ow, x, y, NULL);
}

void kc_adaptive_avgpool2d_bwd(cudaStream_t s, const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow)
{
	struct pool2d_desc d = { .n = n, .c = c, .h = h, .w = w };
	pool_bwd(POOL_ADAPTIVE, &d, oh, ow, NULL, dy, dx);
}

/* ---- batch norm, channel by channel; element j of plane i of channel ch
 * is ((i * c + ch) * hw + j) ---- */
void kc_batchnorm2d_fwd_train(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y,
			      float *running_mean, float *running_var, float *save_mean, float *save_invstd, int64_t *tracked,
			      int n, int c, int64_t hw, float eps, float momentum)
{
	int64_t m = (int64_t)n * hw;
	assert(m > 1);
	for (int ch = 0; ch < c; ch++) {
		float mean = body_bn_mean(channel_sum(CSUM_X, x, NULL, 0.0f, n, c, hw, ch), m);
		double var = channel_sum(CSUM_DEV2, x, NULL, mean, n, c, hw, ch) / (double)m; /* biased */
		float invstd = body_bn_invstd(var, eps), alpha, shift;
		body_bn_affine(mean, invstd, gamma, beta, ch, &alpha, &shift);
		for (int i = 0; i < n; i++)
			for (int64_t j = 0, at = ((int64_t)i * c + ch) * hw; j < hw; j++)
				y[at + j] = x[at + j] * alpha + shift;
		save_mean[ch] = mean;
		save_invstd[ch] = invstd;
		if (running_mean)
			body_bn_running(&running_mean[ch], &running_var[ch], mean, var, m, momentum);
	}
	if (tracked && c > 0)
		*tracked += 1;
}

void kc_batchnorm2d_fwd_eval(cudaStream_t s, const float *x, const float *gamma, const float *beta, const float *running_mean,
			     const float *running_var, float *y, int n, int c, int64_t hw, float eps)
{
	for (int64_t i = 0; i < (int64_t)n * c * hw; i++) {
		int ch = (int)((i / hw) % c);
		float alpha, shift;
		body_bn_affine(running_mean[ch], body_bn_eval_invstd(running_var[ch], eps), gamma, beta, ch, &alpha, &shift);
		y[i] = x[i] * alpha + shift;
	}
}

void kc_batchnorm2d_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
			const float *dy, float *dx, float *dgamma, float *dbeta, int n, int c, int64_t hw)
{
	int64_t m = (int64_t)n * hw;
	for (int ch = 0; ch < c; ch++) {
		float mean = save_mean[ch], invstd = save_invstd[ch];
		double sdy = channel_sum(CSUM_X, dy, NULL, 0.0f, n, c, hw, ch);
		double sdyx = channel_sum(CSUM_DY_DEV, x, dy, mean, n, c, hw, ch);
		if (dgamma)
			dgamma[ch] += (float)(sdyx * invstd);
		if (dbeta)
			dbeta[ch] += (float)sdy;
		if (!dx)
			continue;
		float sc, mdy, k;
		body_bn_bwd_coef(sdy, sdyx, m, gamma ? gamma[ch] : 1.0f, invstd, &sc, &mdy, &k);
		for (int i = 0; i < n; i++)
			for (int64_t j = 0, at = ((int64_t)i * c + ch) * hw; j < hw; j++)
				dx[at + j] = body_bn_dx(x[at + j], dy[at + j], mean, sc, mdy, k);
	}
}

/* ---- layer norm: body.h's rows are kern_layernorm.c's ---- */
void kc_layernorm_fwd(cudaStream_t s, const float *x, const float *gamma, const float *beta, float *y, float *save_mean,
		      float *save_invstd, int64_t rows, int d, float eps)
{
	for (int64_t r = 0; d > 0 && r < rows; r++)
		body_layernorm_row(x + r * d, gamma, beta, y + r * d, d, eps, &save_mean[r], &save_invstd[r]);
}

void kc_layernorm_bwd(cudaStream_t s, const float *x, const float *gamma, const float *save_mean, const float *save_invstd,
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

/* ---- embedding ---- */
void kc_embedding_fwd(cudaStream_t s, const int32_t *idx, const float *w, float *y, int64_t n, int vocab, int dim, int32_t *bad)
{
	int32_t any = 0;
	for (int64_t e = 0; dim > 0 && e < n * dim; e++)
		y[e] = body_embedding_elem(idx, w, vocab, dim, e, &any);
	if (any && bad)
		*bad = 1;
}

/* rows in index order, as kern_embedding_bwd adds them */
void kc_embedding_bwd(cudaStream_t s, const int32_t *idx, const float *dy, float *dw, int64_t n, int vocab, int dim,
		      int padding_idx)
{
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

void kc_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner)
{
	softmax_fwd(x, y, outer, dim, inner, false);
}

void kc_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner)
{
	softmax_bwd(y, dy, dx, outer, dim, inner, false);
}

void kc_log_softmax_fwd(cudaStream_t s, const float *x, float *y, int64_t outer, int dim, int64_t inner)
{
	softmax_fwd(x, y, outer, dim, inner, true);
}

void kc_log_softmax_bwd(cudaStream_t s, const float *y, const float *dy, float *dx, int64_t outer, int dim, int64_t inner)
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

/* Rows that count; -1 if a target is bad. */
static int64_t count_targets(const int32_t *target, int n, int c, int ignore_index)
{
	int64_t count = 0;
	for (int i = 0; i < n; i++) {
		if (body_target_bad(target[i], c, ignore_index))
			return -1;
		count += target[i] != ignore_index;
	}
	return count;
}

void kc_mse(cudaStream_t s, const float *x, const float *target, float *dx, int64_t n, enum kern_reduction red, float scale,
	    double *loss, double weight, bool add)
{
	float g = body_mse_grad(n, red, scale);
	struct slices sl;
	slices_init(&sl, n);
	for (int64_t i = 0; i < n; i++) {
		float d;
		sl.part[i / sl.len] += body_mse_term(x[i], target[i], g, &d);
		if (dx)
			dx[i] = d;
	}
	double acc = slices_total(&sl);
	store_loss(loss, red == KERN_REDUCE_MEAN ? acc / (double)n : acc, weight, add);
}

void kc_nll(cudaStream_t s, const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index,
	    enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad)
{
	int64_t count = count_targets(target, n, c, ignore_index);
	if (count < 0) {
		if (bad)
			*bad = 1;
		return;
	}
	float g = body_class_grad(count, red, scale);
	struct slices sl;
	slices_init(&sl, n);
	for (int i = 0; i < n; i++)
		if (target[i] != ignore_index)
			sl.part[i / sl.len] -= logp[(int64_t)i * c + target[i]];
	/* after every read of logp: dlogp may be logp */
	for (int64_t e = 0; dlogp && e < (int64_t)n * c; e++) {
		int32_t t = target[e / c];
		dlogp[e] = body_nll_grad((int)(e % c), t, t != ignore_index, g);
	}
	store_loss(loss, body_loss_reduce(slices_total(&sl), count, red), weight, add);
}

void kc_cross_entropy(cudaStream_t s, const float *logits, const int32_t *target, float *dlogits, int n, int c, int ignore_index,
		      enum kern_reduction red, float scale, double *loss, double weight, bool add, int32_t *bad)
{
	int64_t count = count_targets(target, n, c, ignore_index);
	if (count < 0) {
		if (bad)
			*bad = 1;
		return;
	}
	float g = body_class_grad(count, red, scale);
	struct slices sl;
	slices_init(&sl, n);
	for (int r = 0; r < n; r++) {
		const float *z = logits + (int64_t)r * c;
		int32_t t = target[r];
		bool on = t != ignore_index;
		float mx = -INFINITY;
		for (int k = 0; k < c; k++)
			mx = fmaxf(mx, z[k]);
		double se = 0;
		for (int k = 0; k < c; k++)
			se += expf(z[k] - mx);
		float ls = body_ce_ls(se);
		/* z[t] before the row's gradient: dlogits may be logits */
		if (on)
			sl.part[r / sl.len] += body_ce_term(ls, z[t], mx);
		if (dlogits) {
			float *d = dlogits + (int64_t)r * c, gi = on ? g : 0.0f;
			for (int k = 0; k < c; k++)
				d[k] = body_ce_grad(z[k], mx, ls, gi, on && k == t);
		}
	}
	store_loss(loss, body_loss_reduce(slices_total(&sl), count, red), weight, add);
}

void kc_argmax_correct(cudaStream_t s, const float *logits, const int32_t *target, int n, int c, double *correct)
{
	double hits = 0;
	for (int r = 0; r < n; r++)
		hits += body_argmax_hit(logits + (int64_t)r * c, c, target[r]);
	if (hits > 0)
		*correct += hits;
}

/* ---- data ---- */
void kc_gather_rows(cudaStream_t s, void *dst, const void *src, int64_t row_words, const int64_t *order, const int64_t *pos,
		    int64_t n)
{
	size_t row = (size_t)row_words * sizeof(uint32_t);
	for (int64_t r = 0; row_words > 0 && r < n; r++)
		memcpy((char *)dst + (size_t)r * row, (const char *)src + (size_t)order[*pos + r] * row, row);
}

void kc_add_i64(cudaStream_t s, int64_t *x, int64_t by) { *x += by; }

void kc_f64_axpy(cudaStream_t s, double *dst, const double *src, double a, bool add)
{
	*dst = (add ? *dst : 0.0) + a * *src;
}

void kc_record(cudaStream_t s, const double *v, double *hist, const int64_t *counter, int64_t cap)
{
	assert(cap > 0);
	hist[(*counter - 1) % cap] = *v;
}

void kc_find_nonfinite(cudaStream_t s, const float *x, int64_t n, int32_t *flag)
{
	for (int64_t i = 0; i < n; i++)
		if (!isfinite(x[i])) {
			*flag = 1;
			return;
		}
}

/* ---- optimizer; coef is copied, as it is raw bytes of the caller's ---- */
void kc_optim_prepare(cudaStream_t s, struct optim_cfg cfg, const double *lr_table, int64_t *step, void *coef)
{
	int64_t t = *step + 1;
	*step = t;
	struct optim_coef k = optim_coef_of(&cfg, t, lr_table[t - 1]);
	memcpy(coef, &k, sizeof k);
}

void kc_optim_apply(cudaStream_t s, struct optim_cfg cfg, const void *coef, float *param, const float *grad, float *state,
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

void kc_optim_state_init(cudaStream_t s, struct optim_cfg cfg, float *state, int64_t plane_stride, int64_t n)
{
	int k = optim_state_floats(cfg.kind, &cfg);
	float first = cfg.kind == OPTIM_ADAGRAD ? (float)cfg.initial_accumulator_value : 0.0f;
	for (int j = 0; j < k; j++)
		for (int64_t i = 0; i < n; i++)
			state[j * plane_stride + i] = j == 0 ? first : 0.0f;
}

/* the kernels' KC_SUMSQ_PARTS fixed chunks, each summed in order */
void kc_sumsq(cudaStream_t s, const float *g, int64_t n, double *partials, double *sumsq)
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

void kc_clip(cudaStream_t s, float *g, int64_t n, const double *sumsq, double max_norm)
{
	float coef = optim_elem_clip_coef(sqrt(*sumsq), max_norm);
	if (coef >= 1.0f) /* a factor of 1 changes nothing; a NaN goes through, as on the CPU */
		return;
	for (int64_t i = 0; i < n; i++)
		g[i] *= coef;
}

/* ---- a whole step of a small model: tiny.h's interpreter as one thread ---- */
void kc_tiny_step(cudaStream_t s, const void *prog)
{
	double sh[1];
	struct optim_coef coef;
	tiny_run(0, 1, prog, sh, &coef);
}
