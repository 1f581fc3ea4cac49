/* body.h: the per-element and per-row arithmetic of the CUDA kernels, as
 * functions nvcc compiles for host and device and gcc sees as plain static
 * inline C, so tests/test_cuda_body.c checks them against kern.h on the CPU.
 * Each follows the CPU kernel of the same name in runtime/kern_*.c: same
 * formulas, same float/double choices, same window and ignore rules.  What
 * differs on the GPU is only summation order (tree reductions instead of
 * sequential loops) and libm's last-bit rounding (expf, tanhf, erff).
 * The regression losses' element term is loss_elem.h's and the activations
 * with parameters are act_elem.h's, shared with the CPU outright.
 * Nothing here loops over more than one row, window or channel, or reads a
 * thread id.
 * Past ~150 lines because it is the arithmetic of every kernel of kc.h.
 */
#ifndef CUDA_BODY_H
#define CUDA_BODY_H
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/act_elem.h"
#include "runtime/kern.h"
#include "runtime/loss_elem.h"
#include "runtime/philox.h"

#ifdef __CUDACC__
#define BODY_FN static inline __host__ __device__
#else
#define BODY_FN static inline
#endif

/* kern_act.c's constants; keep in step with it */
#define BODY_SQRT_2_OVER_PI 0.7978845608028654f
#define BODY_INV_SQRT_2 0.7071067811865476f
#define BODY_INV_SQRT_2PI 0.3989422804014327f
#define BODY_GELU_C 0.044715f

/* ---- activations (kern_act.c) ---- */
BODY_FN float body_relu_fwd(float x) { return x < 0.0f ? 0.0f : x; } /* NaN passes */
BODY_FN float body_relu_bwd(float y, float dy) { return y <= 0.0f ? 0.0f : dy; }
BODY_FN float body_tanh_fwd(float x) { return tanhf(x); }
BODY_FN float body_tanh_bwd(float y, float dy) { return dy * (1.0f - y * y); }
BODY_FN float body_sigmoid_fwd(float x) { return 1.0f / (1.0f + expf(-x)); }
BODY_FN float body_sigmoid_bwd(float y, float dy) { return dy * y * (1.0f - y); }

BODY_FN float body_gelu_fwd(float v, enum kern_gelu approx)
{
	if (approx == KERN_GELU_TANH)
		return 0.5f * v * (1.0f + tanhf(BODY_SQRT_2_OVER_PI * (v + BODY_GELU_C * v * v * v)));
	return 0.5f * v * (1.0f + erff(v * BODY_INV_SQRT_2));
}

BODY_FN float body_gelu_bwd(float v, float dy, enum kern_gelu approx)
{
	if (approx == KERN_GELU_TANH) {
		float t = tanhf(BODY_SQRT_2_OVER_PI * (v + BODY_GELU_C * v * v * v));
		float dt = BODY_SQRT_2_OVER_PI * (1.0f + 3.0f * BODY_GELU_C * v * v);
		return dy * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dt);
	}
	float cdf = 0.5f * (1.0f + erff(v * BODY_INV_SQRT_2)), pdf = BODY_INV_SQRT_2PI * expf(-0.5f * v * v);
	return dy * (cdf + v * pdf);
}

/* ---- dropout (kern_dropout.c): kept iff rng_uniform(r, i) >= p ---- */
BODY_FN float body_dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

BODY_FN float body_dropout_fwd(const struct rng *r, uint64_t i, float x, float p, float scale, uint8_t *keep)
{
	uint8_t k = rng_uniform(r, i) >= p;
	*keep = k;
	return x * ((float)k * scale);
}

BODY_FN float body_dropout_bwd(float dy, uint8_t keep, float scale) { return keep ? dy * scale : 0.0f; }

/* ---- pooling (kern_pool.c); `in` and `out` are one (image, channel) plane ---- */
/* floor(a / b) for b > 0 and any a */
BODY_FN int body_floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Outputs [*lo, *hi) of `out` whose window [o*s - p, o*s - p + span) holds i. */
BODY_FN void body_cover(int i, int span, int s, int p, int out, int *lo, int *hi)
{
	int a = body_floor_div(i + p - span, s) + 1, b = body_floor_div(i + p, s) + 1;
	*lo = a > 0 ? a : 0;
	*hi = b < out ? b : out;
}

/* First in-bounds tap of a dilated window starting at s, and the bound past it. */
BODY_FN void body_taps(int s, int k, int dil, int n, int *lo, int *hi)
{
	*hi = s + (k - 1) * dil + 1 < n ? s + (k - 1) * dil + 1 : n;
	while (s < 0)
		s += dil;
	*lo = s;
}

/* Max over window (oy, ox), padding as -inf; the first tap wins ties and
 * all -inf, any NaN wins; *idx := iy * W + ix of the winner (-1: empty). */
BODY_FN float body_maxpool_out(const struct pool2d_desc *d, const float *in, int oy, int ox, int32_t *idx)
{
	int y0, y1, x0, x1;
	body_taps(oy * d->sh - d->ph, d->kh, d->dh, d->h, &y0, &y1);
	body_taps(ox * d->sw - d->pw, d->kw, d->dw, d->w, &x0, &x1);
	float best = -INFINITY;
	int at = y0 < y1 && x0 < x1 ? y0 * d->w + x0 : -1;
	for (int iy = y0; iy < y1; iy += d->dh)
		for (int ix = x0; ix < x1; ix += d->dw) {
			float v = in[iy * d->w + ix];
			if (v > best || v != v) {
				best = v;
				at = iy * d->w + ix;
			}
		}
	*idx = at;
	return best;
}

/* The sum of dy over outputs [oy0, oy1) x [ox0, ox1) (rows of ow) whose
 * idx is me, in output order: the max pools' gradient at input me, added
 * in the order of their CPU scatter. */
BODY_FN float body_argmax_sum(const int32_t *idx, const float *dy, int ow, int oy0, int oy1, int ox0, int ox1, int me)
{
	float g = 0.0f;
	for (int oy = oy0; oy < oy1; oy++)
		for (int ox = ox0; ox < ox1; ox++)
			if (idx[oy * ow + ox] == me)
				g += dy[oy * ow + ox];
	return g;
}

/* dx at (iy, ix): the sum of dy over the outputs that picked it, in output
 * order, which is the order of kern_maxpool2d_bwd's scatter. */
BODY_FN float body_maxpool_grad(const struct pool2d_desc *d, int oh, int ow, const int32_t *idx, const float *dy,
				int iy, int ix)
{
	int oy0, oy1, ox0, ox1;
	body_cover(iy, (d->kh - 1) * d->dh + 1, d->sh, d->ph, oh, &oy0, &oy1);
	body_cover(ix, (d->kw - 1) * d->dw + 1, d->sw, d->pw, ow, &ox0, &ox1);
	return body_argmax_sum(idx, dy, ow, oy0, oy1, ox0, ox1, iy * d->w + ix);
}

/* The clipped window [*y0,*y1) x [*x0,*x1) of output (oy, ox) and its divisor. */
BODY_FN float body_avg_window(const struct pool2d_desc *d, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
	int hs = oy * d->sh - d->ph, ws = ox * d->sw - d->pw;
	int he = hs + d->kh < d->h + d->ph ? hs + d->kh : d->h + d->ph;
	int we = ws + d->kw < d->w + d->pw ? ws + d->kw : d->w + d->pw;
	int padded = (he - hs) * (we - ws);
	*y0 = hs > 0 ? hs : 0;
	*x0 = ws > 0 ? ws : 0;
	*y1 = he < d->h ? he : d->h;
	*x1 = we < d->w ? we : d->w;
	return (float)(d->count_include_pad ? padded : (*y1 - *y0) * (*x1 - *x0));
}

BODY_FN float body_avgpool_out(const struct pool2d_desc *d, const float *in, int oy, int ox)
{
	int y0, y1, x0, x1;
	float div = body_avg_window(d, oy, ox, &y0, &y1, &x0, &x1), s = 0;
	for (int iy = y0; iy < y1; iy++)
		for (int ix = x0; ix < x1; ix++)
			s += in[iy * d->w + ix];
	return y0 < y1 && x0 < x1 ? s / div : 0.0f;
}

/* dx at (iy, ix), summed in kern_avgpool2d_bwd's scatter order. */
BODY_FN float body_avgpool_grad(const struct pool2d_desc *d, int oh, int ow, const float *dy, int iy, int ix)
{
	int oy0, oy1, ox0, ox1;
	body_cover(iy, d->kh, d->sh, d->ph, oh, &oy0, &oy1);
	body_cover(ix, d->kw, d->sw, d->pw, ow, &ox0, &ox1);
	float g = 0.0f;
	for (int oy = oy0; oy < oy1; oy++)
		for (int ox = ox0; ox < ox1; ox++) {
			int y0, y1, x0, x1;
			g += dy[oy * ow + ox] / body_avg_window(d, oy, ox, &y0, &y1, &x0, &x1);
		}
	return g;
}

/* Adaptive window i of `out` over `in`: [floor(i*in/out), ceil((i+1)*in/out)). */
BODY_FN int body_adaptive_start(int i, int in, int out) { return (int)((int64_t)i * in / out); }
BODY_FN int body_adaptive_end(int i, int in, int out) { return (int)(((int64_t)(i + 1) * in + out - 1) / out); }

BODY_FN float body_adaptive_out(const float *in, int h, int w, int oh, int ow, int oy, int ox)
{
	int y0 = body_adaptive_start(oy, h, oh), y1 = body_adaptive_end(oy, h, oh);
	int x0 = body_adaptive_start(ox, w, ow), x1 = body_adaptive_end(ox, w, ow);
	float s = 0;
	for (int iy = y0; iy < y1; iy++)
		for (int ix = x0; ix < x1; ix++)
			s += in[iy * w + ix];
	return s / (float)((y1 - y0) * (x1 - x0));
}

/* The adaptive windows [*lo, *hi) of `out` that hold input position i. */
BODY_FN void body_adaptive_cover(int i, int in, int out, int *lo, int *hi)
{
	/* o = floor(i * out / in) is the first: o * in / out <= i, so window
	 * o - 1 ends at or before i, and (o + 1) * in / out > i, so window o
	 * ends past it */
	int o = body_adaptive_start(i, out, in);
	*lo = o;
	while (o < out && body_adaptive_start(o, in, out) <= i)
		o++;
	*hi = o;
}

BODY_FN float body_adaptive_grad(const float *dy, int h, int w, int oh, int ow, int iy, int ix)
{
	int oy0, oy1, ox0, ox1;
	body_adaptive_cover(iy, h, oh, &oy0, &oy1);
	body_adaptive_cover(ix, w, ow, &ox0, &ox1);
	float g = 0.0f;
	for (int oy = oy0; oy < oy1; oy++) {
		int ny = body_adaptive_end(oy, h, oh) - body_adaptive_start(oy, h, oh);
		for (int ox = ox0; ox < ox1; ox++) {
			int nx = body_adaptive_end(ox, w, ow) - body_adaptive_start(ox, w, ow);
			g += dy[oy * ow + ox] / (float)(ny * nx);
		}
	}
	return g;
}

/* Max over adaptive window (oy, ox), as kern_adaptive_maxpool2d_fwd: the
 * first element wins ties, any NaN wins; *idx := iy * W + ix of the winner */
BODY_FN float body_adaptive_max_out(const float *in, int h, int w, int oh, int ow, int oy, int ox, int32_t *idx)
{
	int y0 = body_adaptive_start(oy, h, oh), y1 = body_adaptive_end(oy, h, oh);
	int x0 = body_adaptive_start(ox, w, ow), x1 = body_adaptive_end(ox, w, ow);
	float best = -INFINITY;
	int at = y0 * w + x0;
	for (int iy = y0; iy < y1; iy++)
		for (int ix = x0; ix < x1; ix++) {
			float v = in[iy * w + ix];
			if (v > best || v != v) {
				best = v;
				at = iy * w + ix;
			}
		}
	*idx = at;
	return best;
}

/* dx at (iy, ix): the sum of dy over the adaptive windows that picked it,
 * in output order, as kern_adaptive_maxpool2d_bwd's scatter adds them */
BODY_FN float body_adaptive_max_grad(const int32_t *idx, const float *dy, int h, int w, int oh, int ow, int iy, int ix)
{
	int oy0, oy1, ox0, ox1;
	body_adaptive_cover(iy, h, oh, &oy0, &oy1);
	body_adaptive_cover(ix, w, ow, &ox0, &ox1);
	return body_argmax_sum(idx, dy, ow, oy0, oy1, ox0, ox1, iy * w + ix);
}

/* ---- zero padding (kern_pad.c): output (oy, ox) of a plane is input
 * (oy - top, ox - left) or 0; the input's gradient at (iy, ix) is the
 * output's at (iy + top, ix + left), or 0 where that was cropped away ---- */
BODY_FN float body_zeropad_out(const struct pad2d_desc *d, const float *in, int oy, int ox)
{
	int iy = oy - d->top, ix = ox - d->left;
	return iy >= 0 && iy < d->h && ix >= 0 && ix < d->w ? in[iy * d->w + ix] : 0.0f;
}

BODY_FN float body_zeropad_grad(const struct pad2d_desc *d, int oh, int ow, const float *dy, int iy, int ix)
{
	int oy = iy + d->top, ox = ix + d->left;
	return oy >= 0 && oy < oh && ox >= 0 && ox < ow ? dy[oy * ow + ox] : 0.0f;
}

/* ---- softmax over one row of dim elements, inner apart (kern_softmax.c).
 * A contiguous row (inner == 1) sums in double, a strided one in float, as
 * the CPU's two paths do. ---- */
/* The row's factor from its sum of exp(x - max): 1/sum, or log(sum). */
BODY_FN float body_softmax_factor(double sum, bool dsum, bool log_out)
{
	if (dsum)
		return log_out ? (float)log(sum) : (float)(1.0 / sum);
	return log_out ? logf((float)sum) : 1.0f / (float)sum;
}

BODY_FN float body_softmax_out(float x, float mx, float factor, bool log_out)
{
	return log_out ? (x - mx) - factor : expf(x - mx) * factor;
}

BODY_FN void body_softmax_row(const float *x, float *y, int dim, int64_t inner, bool log_out)
{
	float mx = -INFINITY, fs = 0;
	double ds = 0;
	for (int k = 0; k < dim; k++)
		mx = fmaxf(mx, x[k * inner]);
	for (int k = 0; k < dim; k++) {
		float e = expf(x[k * inner] - mx);
		if (inner == 1)
			ds += e;
		else
			fs += e;
	}
	float f = body_softmax_factor(inner == 1 ? ds : (double)fs, inner == 1, log_out);
	for (int k = 0; k < dim; k++)
		y[k * inner] = body_softmax_out(x[k * inner], mx, f, log_out);
}

/* softmax: dx = y (dy - Σ dy y); log-softmax: dx = dy - exp(y) Σ dy.  s is the sum. */
BODY_FN float body_softmax_bwd_term(float y, float dy, bool log_out) { return log_out ? dy : dy * y; }
BODY_FN float body_softmax_bwd_out(float y, float dy, float s, bool log_out)
{
	return log_out ? dy - expf(y) * s : y * (dy - s);
}

BODY_FN void body_softmax_bwd_row(const float *y, const float *dy, float *dx, int dim, int64_t inner, bool log_out)
{
	float s = 0;
	for (int k = 0; k < dim; k++)
		s += body_softmax_bwd_term(y[k * inner], dy[k * inner], log_out);
	for (int k = 0; k < dim; k++)
		dx[k * inner] = body_softmax_bwd_out(y[k * inner], dy[k * inner], s, log_out);
}

/* ---- losses (kern_loss.c) ---- */
/* PyTorch's mean over zero counted rows (or weight) is 0/0: NaN loss,
 * zero gradient.  count: the rows, or their class weights' sum. */
BODY_FN double body_loss_reduce(double sum, double count, enum kern_reduction red)
{
	return red == KERN_REDUCE_MEAN ? (count != 0 ? sum / count : (double)NAN) : sum;
}

/* The factor of a counted row's gradient: scale / count for a mean. */
BODY_FN float body_class_grad(double count, enum kern_reduction red, float scale)
{
	return red == KERN_REDUCE_MEAN ? (count != 0 ? scale / (float)count : 0.0f) : scale;
}

/* A row's class weight: w[t], or 1 without weights. */
BODY_FN float body_class_weight(const float *w, int32_t t, bool on) { return on && w ? w[t] : 1.0f; }

/* 1 if target t is neither ignore_index nor a class of c (an error). */
BODY_FN int body_target_bad(int32_t t, int c, int ignore_index) { return t != ignore_index && (t < 0 || t >= c); }

/* What target t adds to a class loss's count: its class weight (1
 * without weights), 0 for ignore_index; *bad set for a class outside
 * 0..c-1 (which counts nothing). */
BODY_FN double body_target_count(const float *w, int32_t t, int c, int ignore_index, int *bad)
{
	if (body_target_bad(t, c, ignore_index)) {
		*bad = 1;
		return 0;
	}
	return t != ignore_index ? body_class_weight(w, t, true) : 0;
}

/* nll's gradient at class k of a row with target t: -g at t if counted. */
BODY_FN float body_nll_grad(int k, int32_t t, bool on, float g) { return on && k == t ? -g : 0.0f; }

/* Cross-entropy of a row: mx its max, ls = log Σ exp(z - mx) (the sum in
 * double); the loss term ls - (z_t - mx), the gradient gi softmax - gi onehot.
 * With label smoothing eps (kern_cross_entropy): the term is (1 - eps) of
 * that plus eps of ls - zc / c, zc = Σ (z - mx) in double, and the gradient
 * gives gt = gi (1 - eps) at the target and gu = gi eps / c at every class;
 * at eps 0, gt is gi and gu 0, the same bits as without. */
BODY_FN float body_ce_ls(double se) { return (float)log(se); }
BODY_FN float body_ce_term(float ls, float zt, float mx) { return ls - (zt - mx); }
BODY_FN double body_ce_smooth_term(float ls, float zt, float mx, double zc, int c, float eps)
{
	double nll = body_ce_term(ls, zt, mx);
	return eps > 0 ? (1 - (double)eps) * nll + eps * (ls - zc / c) : nll;
}
BODY_FN float body_ce_gt(float gi, float eps) { return gi * (1.0f - eps); }
BODY_FN float body_ce_gu(float gi, float eps, int c) { return gi * eps / (float)c; }
BODY_FN float body_ce_grad(float z, float mx, float ls, float gi, float gt, float gu, bool target)
{
	float d = gi * expf((z - mx) - ls) - gu;
	return target ? d - gt : d;
}

/* Class weights w (NULL: none), W their sum (loss_elem.h): zc's element
 * is w_k (z_k - mx), the term loss_ce_weighted_term's, and the gradient's
 * factors gs on softmax, gu w_k at class k, gt w_t at the target. */
BODY_FN double body_ce_zc(const float *w, int k, float z, float mx) { return w ? (double)(w[k] * (z - mx)) : z - mx; }
BODY_FN double body_ce_any_term(float ls, float zt, float mx, double zc, int c, float eps, const float *w, float wt, double wsum)
{
	return w ? loss_ce_weighted_term(ls, zt, mx, zc, wt, wsum, c, eps) : body_ce_smooth_term(ls, zt, mx, zc, c, eps);
}
BODY_FN float body_ce_gs(float gi, float eps, const float *w, float wt, double wsum, int c)
{
	return w ? loss_ce_weighted_gs(gi, eps, wt, wsum, c) : gi;
}
BODY_FN float body_ce_guk(float gu, const float *w, int k) { return w ? gu * w[k] : gu; }

/* One whole row, as the CPU's loop; returns the loss term (0 if not on). */
BODY_FN double body_ce_row(const float *z, int c, int32_t t, bool on, float g, float eps, const float *w, double wsum, float *d)
{
	float mx = -INFINITY;
	for (int k = 0; k < c; k++)
		mx = fmaxf(mx, z[k]);
	double se = 0, zc = 0;
	for (int k = 0; k < c; k++)
		se += expf(z[k] - mx);
	if (eps > 0)
		for (int k = 0; k < c; k++)
			zc += body_ce_zc(w, k, z[k], mx);
	float ls = body_ce_ls(se), gi = on ? g : 0.0f, wt = body_class_weight(w, t, on);
	/* the loss before the gradient: d may be z */
	double term = on ? body_ce_any_term(ls, z[t], mx, zc, c, eps, w, wt, wsum) : 0.0;
	float gs = body_ce_gs(gi, eps, w, wt, wsum, c), gt = body_ce_gt(gi, eps) * wt, gu = body_ce_gu(gi, eps, c);
	if (d)
		for (int k = 0; k < c; k++)
			d[k] = body_ce_grad(z[k], mx, ls, gs, gt, body_ce_guk(gu, w, k), on && k == t);
	return term;
}

/* 1 if the row's first maximal logit is at class t. */
BODY_FN int body_argmax_hit(const float *z, int c, int32_t t)
{
	int best = 0;
	for (int k = 1; k < c; k++)
		if (z[k] > z[best])
			best = k;
	return best == t;
}

/* ---- layer norm over rows of d (kern_layernorm.c): the mean's sum in
 * double, the variance's in float ---- */
BODY_FN float body_ln_invstd(float ss, int d, float eps) { return 1.0f / sqrtf(ss / (float)d + eps); }
BODY_FN float body_ln_out(float x, float mean, float invstd, const float *gamma, const float *beta, int j)
{
	float g = gamma ? gamma[j] : 1.0f, b = beta ? beta[j] : 0.0f;
	return (x - mean) * invstd * g + b;
}

/* a row's mean and invstd, its sums in order */
BODY_FN void body_ln_moments(const float *in, int d, float eps, float *mean_out, float *invstd_out)
{
	double s = 0;
	float ss = 0;
	for (int j = 0; j < d; j++)
		s += in[j];
	float mean = (float)(s / (double)d);
	for (int j = 0; j < d; j++)
		ss += (in[j] - mean) * (in[j] - mean);
	*mean_out = mean;
	*invstd_out = body_ln_invstd(ss, d, eps);
}


/* gamma dy, and its product with xhat: the two sums of the row's dx */
BODY_FN float body_ln_gd(const float *gamma, float dy, int j) { return gamma ? gamma[j] * dy : dy; }
BODY_FN float body_ln_gdx(float gd, float x, float mean, float invstd) { return gd * (x - mean) * invstd; }
/* a, b: the row's mean of gd and of gd xhat */
BODY_FN float body_ln_dx(float x, float gd, float mean, float invstd, float a, float b)
{
	return invstd * (gd - a - (x - mean) * invstd * b);
}


/* Column j of dgamma and dbeta: sums over rows in row order, in double. */
BODY_FN void body_ln_param_col(const float *x, const float *dy, const float *save_mean, const float *save_invstd,
			       int64_t rows, int d, int j, float *dgamma, float *dbeta)
{
	double sg = 0, sb = 0;
	for (int64_t r = 0; r < rows; r++) {
		float g = dy[r * d + j];
		sg += g * (x[r * d + j] - save_mean[r]) * save_invstd[r];
		sb += g;
	}
	if (dgamma)
		dgamma[j] += (float)sg;
	if (dbeta)
		dbeta[j] += (float)sb;
}

/* ---- group norm (kern_layernorm.c): a sample's group of cpg channels of
 * hw elements is a layer norm's row of cpg * hw, its affine per channel:
 * element j of row r scales by gamma[c0 + j / hw], c0 its group's first
 * channel ---- */
BODY_FN int body_gn_c0(int64_t r, int groups, int cpg) { return (int)(r % groups) * cpg; }

BODY_FN void body_groupnorm_row(const float *in, const float *gamma, const float *beta, float *out, int c0, int cpg, int hw,
				float eps, float *mean_out, float *invstd_out)
{
	body_ln_moments(in, cpg * hw, eps, mean_out, invstd_out);
	for (int j = 0; j < cpg * hw; j++)
		out[j] = body_ln_out(in[j], *mean_out, *invstd_out, gamma, beta, c0 + j / hw);
}

BODY_FN void body_groupnorm_bwd_row(const float *in, const float *gamma, int c0, int cpg, int hw, float mean, float invstd,
				    const float *g, float *out)
{
	int d = cpg * hw;
	float a = 0, b = 0;
	for (int j = 0; j < d; j++) {
		float gd = body_ln_gd(gamma, g[j], c0 + j / hw);
		a += gd;
		b += body_ln_gdx(gd, in[j], mean, invstd);
	}
	a /= (float)d;
	b /= (float)d;
	for (int j = 0; j < d; j++)
		out[j] = body_ln_dx(in[j], body_ln_gd(gamma, g[j], c0 + j / hw), mean, invstd, a, b);
}

/* Channel ch of dgamma and dbeta over n samples of c = groups * cpg
 * channels: sums over the samples in order, within each over its hw
 * elements, in double. */
BODY_FN void body_gn_param_chan(const float *x, const float *dy, const float *save_mean, const float *save_invstd, int n,
				int groups, int cpg, int hw, int ch, float *dgamma, float *dbeta)
{
	int c = groups * cpg;
	double sg = 0, sb = 0;
	for (int i = 0; i < n; i++) {
		int64_t r = (int64_t)i * groups + ch / cpg, at = ((int64_t)i * c + ch) * hw;
		float mean = save_mean[r], invstd = save_invstd[r];
		for (int j = 0; j < hw; j++) {
			float g = dy[at + j];
			sg += g * (x[at + j] - mean) * invstd;
			sb += g;
		}
	}
	if (dgamma)
		dgamma[ch] += (float)sg;
	if (dbeta)
		dbeta[ch] += (float)sb;
}

/* a layer norm's row: a group norm's of one channel of d, gamma by element */
BODY_FN void body_layernorm_row(const float *in, const float *gamma, const float *beta, float *out, int d, float eps,
				float *mean_out, float *invstd_out)
{
	body_groupnorm_row(in, gamma, beta, out, 0, d, 1, eps, mean_out, invstd_out);
}

BODY_FN void body_layernorm_bwd_row(const float *in, const float *gamma, float mean, float invstd, const float *g,
				    float *out, int d)
{
	body_groupnorm_bwd_row(in, gamma, 0, d, 1, mean, invstd, g, out);
}


/* ---- batch norm per channel (kern_batchnorm.c): sums in double over
 * m = n * hw elements, biased variance to normalise, unbiased for running_var ---- */
BODY_FN float body_bn_mean(double sum, int64_t m) { return (float)(sum / (double)m); }
BODY_FN float body_bn_invstd(double var, float eps) { return var == 0 && eps == 0 ? 0.0f : (float)(1.0 / sqrt(var + eps)); }

/* y = x * alpha + beta for channel statistics mean and invstd */
BODY_FN void body_bn_affine(float mean, float invstd, const float *gamma, const float *beta, int ch, float *alpha,
			    float *shift)
{
	float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
	*alpha = invstd * g;
	*shift = b - mean * invstd * g;
}

/* Moves the running stats towards mean and the unbiased variance. */
BODY_FN void body_bn_running(float *rm, float *rv, float mean, double var, int64_t m, float momentum)
{
	*rm = (1 - momentum) * *rm + momentum * mean;
	*rv = (1 - momentum) * *rv + momentum * (float)(var * (double)m / (double)(m - 1));
}

BODY_FN float body_bn_eval_invstd(float rv, float eps) { return 1.0f / sqrtf(rv + eps); }

/* Channel ch's sum over (n, c, hw), kern_batchnorm.c's order: Σ x in
 * double element by element, the others a float sum within each plane,
 * the planes added in double. */
enum body_csum {
	BODY_CSUM_X,     /* Σ x */
	BODY_CSUM_PRELU, /* Σ act_prelu_dw(x, dy), in double as Σ x */
	BODY_CSUM_DEV2,  /* Σ (x - mean)^2 */
	BODY_CSUM_DY_DEV /* Σ dy (x - mean) */
};

BODY_FN double body_channel_sum(enum body_csum k, const float *x, const float *dy, float mean, int n, int c, int64_t hw,
				int ch)
{
	double s = 0;
	for (int i = 0; i < n; i++) {
		int64_t at = ((int64_t)i * c + ch) * hw;
		const float *p = x + at;
		float part = 0;
		for (int64_t j = 0; j < hw; j++)
			if (k == BODY_CSUM_X || k == BODY_CSUM_PRELU)
				s += k == BODY_CSUM_X ? p[j] : act_prelu_dw(p[j], dy[at + j]);
			else
				part += k == BODY_CSUM_DEV2 ? (p[j] - mean) * (p[j] - mean) : dy[at + j] * (p[j] - mean);
		s += part;
	}
	return s;
}


/* Backward from the channel's sums sdy = Σ dy, sdyx = Σ dy (x - mean):
 * dx = s (dy - mdy - (x - mean) k). */
BODY_FN void body_bn_bwd_coef(double sdy, double sdyx, int64_t m, float gamma, float invstd, float *s, float *mdy,
			      float *k)
{
	*mdy = (float)(sdy / (double)m);
	*k = (float)(sdyx / (double)m) * invstd * invstd;
	*s = gamma * invstd;
}

BODY_FN float body_bn_dx(float x, float dy, float mean, float s, float mdy, float k)
{
	return s * (dy - mdy - (x - mean) * k);
}

/* Channel ch of a training batch norm: its statistics into *mean and
 * *invstd, y, and the running statistics (rm NULL: none). */
BODY_FN void body_bn_train_channel(const float *x, const float *gamma, const float *beta, float *y, float *rm, float *rv, int n,
				   int c, int64_t hw, int ch, float eps, float momentum, float *mean, float *invstd)
{
	int64_t m = (int64_t)n * hw;
	float mu = body_bn_mean(body_channel_sum(BODY_CSUM_X, x, NULL, 0.0f, n, c, hw, ch), m);
	double var = body_channel_sum(BODY_CSUM_DEV2, x, NULL, mu, n, c, hw, ch) / (double)m; /* biased */
	float is = body_bn_invstd(var, eps), alpha, shift;
	body_bn_affine(mu, is, gamma, beta, ch, &alpha, &shift);
	for (int i = 0; i < n; i++)
		for (int64_t j = 0, at = ((int64_t)i * c + ch) * hw; j < hw; j++)
			y[at + j] = x[at + j] * alpha + shift;
	*mean = mu;
	*invstd = is;
	if (rm)
		body_bn_running(&rm[ch], &rv[ch], mu, var, m, momentum);
}

/* Channel ch of a batch norm's backward: dx (NULL: none), and the sums
 * of dgamma (*sdyx times invstd) and dbeta (*sdy). */
BODY_FN void body_bn_bwd_channel(const float *x, const float *gamma, float mean, float invstd, const float *dy, float *dx, int n,
				 int c, int64_t hw, int ch, double *sdy, double *sdyx)
{
	*sdy = body_channel_sum(BODY_CSUM_X, dy, NULL, 0.0f, n, c, hw, ch);
	*sdyx = body_channel_sum(BODY_CSUM_DY_DEV, x, dy, mean, n, c, hw, ch);
	if (!dx)
		return;
	float s, mdy, k;
	body_bn_bwd_coef(*sdy, *sdyx, (int64_t)n * hw, gamma ? gamma[ch] : 1.0f, invstd, &s, &mdy, &k);
	for (int i = 0; i < n; i++)
		for (int64_t j = 0, at = ((int64_t)i * c + ch) * hw; j < hw; j++)
			dx[at + j] = body_bn_dx(x[at + j], dy[at + j], mean, s, mdy, k);
}

/* ---- embedding (kern_embedding.c) ---- */
/* y element e of (n, dim): row idx[e / dim] of w, or 0 and *bad for an id out of range. */
BODY_FN float body_embedding_elem(const int32_t *idx, const float *w, int vocab, int dim, int64_t e, int32_t *bad)
{
	int32_t id = idx[e / dim];
	if (id < 0 || id >= vocab) {
		*bad = 1;
		return 0.0f;
	}
	return w[(int64_t)id * dim + e % dim];
}

/* ---- linear's bias gradient: column j summed over rows in row order, in
 * double (kern_linear.c) ---- */
BODY_FN float body_bias_grad_col(const float *dy, int64_t rows, int m, int j)
{
	double acc = 0;
	for (int64_t r = 0; r < rows; r++)
		acc += dy[r * m + j];
	return (float)acc;
}
#endif
