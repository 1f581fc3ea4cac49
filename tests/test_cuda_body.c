/* test_cuda_body.c: the per-element and per-row functions of the CUDA
 * kernels (runtime/cuda/body.h, runtime/optim_elem.h), run on the CPU over
 * every element or row as the kernels' grids would, against the CPU kernels
 * of kern.h and optim.h.  Needs no GPU: it checks the arithmetic the device
 * shares with the host, not the launches.
 * Tolerances: "same" is bit for bit (NaN matches NaN), where body.h repeats
 * the CPU's formula in the CPU's order; "close" (relative, stated at each
 * call; for normalised outputs relative to max(|value|, 1)) where the CPU
 * or the GPU sums in another order, the GPU's emulated here: a block's
 * strided per-thread sums and then a tree, or a warp's 32 lanes and a tree.
 */
#include "runtime/cuda/body.h"
#include "runtime/kern.h"
#include "runtime/optim.h"
#include "runtime/optim_elem.h"
#include "tests/check.h"

#include <stdlib.h>

#include "tests/scratch.h"

static int same_float(float a, float b)
{
	return (a != a && b != b) || memcmp(&a, &b, sizeof a) == 0;
}

/* Counts elements that differ by more than rtol * max(|want|, floor);
 * reports the first.  rtol 0: bit for bit. */
static int count_diff(const char *what, const float *got, const float *want, size_t n, double rtol, double floor)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		int ok = rtol == 0 ? same_float(got[i], want[i])
				   : (got[i] != got[i] && want[i] != want[i]) ||
					     fabs((double)got[i] - want[i]) <= rtol * fmax(fabs((double)want[i]), floor);
		if (!ok && bad++ == 0)
			fprintf(stderr, "%s[%zu]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
	}
	return bad;
}

#define CHECK_SAME(what, got, want, n) CHECK(count_diff(what, got, want, n, 0, 0) == 0)
#define CHECK_CLOSE(what, got, want, n, rtol) CHECK(count_diff(what, got, want, n, rtol, 1e-30) == 0)
/* outputs that are sums of O(1) terms: the error scales with the terms */
#define CHECK_CLOSE_UNIT(what, got, want, n, tol) CHECK(count_diff(what, got, want, n, tol, 1.0) == 0)

/* GPU order: T threads sum elements t, t + T, ... of f, then a tree. */
#define BLOCK_SUM(T, type, n, term, out) do { \
	type part_[T]; \
	for (int t_ = 0; t_ < (T); t_++) { \
		part_[t_] = 0; \
		for (int64_t e = t_; e < (n); e += (T)) part_[t_] += (term); \
	} \
	for (int s_ = (T) / 2; s_ > 0; s_ /= 2) \
		for (int t_ = 0; t_ < s_; t_++) part_[t_] += part_[t_ + s_]; \
	(out) = part_[0]; \
} while (0)

/* ---- activations, dropout ---- */

static void test_activations(void)
{
	size_t n = 4096;
	float *x = rand_floats(n, -8, 8, 1), *dy = rand_floats(n, -1, 1, 2);
	x[0] = 0.0f; x[1] = -0.0f; x[2] = NAN; x[3] = INFINITY; x[4] = -INFINITY; x[5] = 1e-30f;
	float *want = floats(n), *got = floats(n), *y = floats(n);
	for (int a = 0; a < 2; a++) {
		enum kern_gelu g = a ? KERN_GELU_TANH : KERN_GELU_NONE;
		kern_gelu_fwd(x, want, n, g);
		for (size_t i = 0; i < n; i++) got[i] = body_gelu_fwd(x[i], g);
		CHECK_SAME("gelu_fwd", got, want, n);
		kern_gelu_bwd(x, dy, want, n, g);
		for (size_t i = 0; i < n; i++) got[i] = body_gelu_bwd(x[i], dy[i], g);
		CHECK_SAME("gelu_bwd", got, want, n);
	}
	kern_relu_fwd(x, y, n);
	for (size_t i = 0; i < n; i++) got[i] = body_relu_fwd(x[i]);
	CHECK_SAME("relu_fwd", got, y, n);
	kern_relu_bwd(y, dy, want, n);
	for (size_t i = 0; i < n; i++) got[i] = body_relu_bwd(y[i], dy[i]);
	CHECK_SAME("relu_bwd", got, want, n);
	kern_tanh_fwd(x, y, n);
	for (size_t i = 0; i < n; i++) got[i] = body_tanh_fwd(x[i]);
	CHECK_SAME("tanh_fwd", got, y, n);
	kern_tanh_bwd(y, dy, want, n);
	for (size_t i = 0; i < n; i++) got[i] = body_tanh_bwd(y[i], dy[i]);
	CHECK_SAME("tanh_bwd", got, want, n);
	kern_sigmoid_fwd(x, y, n);
	for (size_t i = 0; i < n; i++) got[i] = body_sigmoid_fwd(x[i]);
	CHECK_SAME("sigmoid_fwd", got, y, n);
	kern_sigmoid_bwd(y, dy, want, n);
	for (size_t i = 0; i < n; i++) got[i] = body_sigmoid_bwd(y[i], dy[i]);
	CHECK_SAME("sigmoid_bwd", got, want, n);
}

static void test_dropout(void)
{
	size_t n = 1001; /* not a multiple of the CPU's 64-element groups */
	float *x = rand_floats(n, -1, 1, 3), *want = floats(n), *got = floats(n);
	uint8_t *mw = talloc(n), *mg = talloc(n);
	const float ps[] = { 0.0f, 0.3f, 0.9f, 1.0f };
	for (int k = 0; k < 4; k++) {
		struct rng r = rng_stream(42, RNG_DROPOUT, 1, 7 + (uint32_t)k);
		float scale = body_dropout_scale(ps[k]);
		kern_dropout_fwd(x, want, mw, n, ps[k], &r);
		for (size_t i = 0; i < n; i++) got[i] = body_dropout_fwd(&r, i, x[i], ps[k], scale, &mg[i]);
		CHECK_SAME("dropout_fwd", got, want, n);
		CHECK(memcmp(mw, mg, n) == 0);
		kern_dropout_bwd(x, mw, want, n, ps[k]);
		for (size_t i = 0; i < n; i++) got[i] = body_dropout_bwd(x[i], mw[i], scale);
		CHECK_SAME("dropout_bwd", got, want, n);
		/* dropout1d and dropout2d: 143 channels of 7, the kernel's i / inner */
		kern_dropout_runs_fwd(x, want, mw, n, 7, ps[k], &r);
		for (size_t i = 0; i < n; i++) got[i] = body_dropout_fwd(&r, i / 7, x[i], ps[k], scale, &mg[i]);
		CHECK_SAME("dropout_runs_fwd", got, want, n);
		CHECK(memcmp(mw, mg, n) == 0);
	}
}

/* ---- pooling ---- */

static void check_pool(struct pool2d_desc d, bool nan)
{
	scratch_reset();
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	CHECK(oh >= 1 && ow >= 1); /* every case has windows to compare */
	size_t in = (size_t)d.n * d.c * d.h * d.w, out = (size_t)d.n * d.c * oh * ow, hw = (size_t)d.h * d.w;
	float *x = rand_floats(in, -2, 2, 4), *dy = rand_floats(out, -1, 1, 5);
	if (nan) {
		x[3] = NAN;
		x[in / 2] = NAN;
		x[in / 2 + 1] = NAN;
		x[in - 1] = -INFINITY;
	}
	float *want = floats(out), *got = floats(out), *dwant = floats(in), *dgot = floats(in);
	int32_t *iw = talloc(out * 4), *ig = talloc(out * 4);
	kern_maxpool2d_fwd(&d, x, want, iw);
	for (size_t i = 0; i < out; i++) {
		size_t p = i / ((size_t)oh * ow), r = i % ((size_t)oh * ow);
		got[i] = body_maxpool_out(&d, x + p * hw, (int)r / ow, (int)r % ow, &ig[i]);
	}
	CHECK_SAME("maxpool_fwd", got, want, out);
	CHECK(memcmp(iw, ig, out * 4) == 0);
	kern_maxpool2d_bwd(&d, iw, dy, dwant);
	for (size_t i = 0; i < in; i++) {
		size_t p = i / hw, r = i % hw;
		dgot[i] = body_maxpool_grad(&d, oh, ow, iw + p * oh * ow, dy + p * oh * ow, (int)r / d.w, (int)r % d.w);
	}
	CHECK_SAME("maxpool_bwd", dgot, dwant, in);
	if (d.dh != 1 || d.dw != 1)
		return;
	for (int cip = 0; cip < 2; cip++) {
		d.count_include_pad = cip;
		kern_avgpool2d_fwd(&d, x, want);
		for (size_t i = 0; i < out; i++) {
			size_t p = i / ((size_t)oh * ow), r = i % ((size_t)oh * ow);
			got[i] = body_avgpool_out(&d, x + p * hw, (int)r / ow, (int)r % ow);
		}
		CHECK_SAME("avgpool_fwd", got, want, out);
		kern_avgpool2d_bwd(&d, dy, dwant);
		for (size_t i = 0; i < in; i++) {
			size_t p = i / hw, r = i % hw;
			dgot[i] = body_avgpool_grad(&d, oh, ow, dy + p * oh * ow, (int)r / d.w, (int)r % d.w);
		}
		CHECK_SAME("avgpool_bwd", dgot, dwant, in);
	}
}

static void test_pools(void)
{
	/* n c h w  kh kw sh sw ph pw dh dw ceil */
	const struct pool2d_desc ds[] = {
		{ 2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, false, true },  /* the CPU's 2x2 fast path */
		{ 2, 3, 9, 7, 2, 2, 2, 2, 0, 0, 1, 1, true, true },   /* ceil_mode: a clipped last window */
		{ 1, 2, 11, 10, 3, 3, 2, 2, 1, 1, 1, 1, true, true },
		{ 1, 2, 10, 9, 3, 2, 3, 2, 1, 1, 1, 1, false, true },
		{ 2, 2, 12, 13, 3, 3, 1, 2, 1, 1, 2, 2, false, true }, /* dilation */
		{ 1, 1, 6, 6, 5, 5, 3, 3, 2, 2, 1, 1, true, true },
		{ 1, 3, 5, 5, 1, 1, 2, 2, 0, 0, 1, 1, false, true },
		/* ceil_mode windows larger than the padded input */
		{ 2, 2, 3, 3, 4, 4, 2, 2, 0, 0, 1, 1, true, true },
		{ 2, 3, 7, 6, 10, 3, 4, 2, 1, 1, 1, 1, true, true },
		{ 1, 2, 4, 5, 3, 4, 3, 4, 1, 1, 3, 2, true, true }, /* dilated to 7 over 6 and 7 over 7 */
	};
	for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
		check_pool(ds[k], false);
		check_pool(ds[k], true);
	}
}

static void test_adaptive(void)
{
	const int sizes[][4] = { { 7, 7, 1, 1 }, { 7, 9, 3, 4 }, { 5, 5, 7, 6 }, { 8, 8, 8, 8 }, { 13, 6, 5, 2 } };
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		scratch_reset();
		int n = 2, c = 3, h = sizes[k][0], w = sizes[k][1], oh = sizes[k][2], ow = sizes[k][3];
		size_t in = (size_t)n * c * h * w, out = (size_t)n * c * oh * ow;
		float *x = rand_floats(in, -1, 1, 6), *dy = rand_floats(out, -1, 1, 7);
		float *want = floats(out), *got = floats(out), *dwant = floats(in), *dgot = floats(in);
		kern_adaptive_avgpool2d_fwd(x, want, n, c, h, w, oh, ow);
		for (size_t i = 0; i < out; i++) {
			size_t p = i / ((size_t)oh * ow), r = i % ((size_t)oh * ow);
			got[i] = body_adaptive_out(x + p * h * w, h, w, oh, ow, (int)r / ow, (int)r % ow);
		}
		CHECK_SAME("adaptive_fwd", got, want, out);
		kern_adaptive_avgpool2d_bwd(dy, dwant, n, c, h, w, oh, ow);
		for (size_t i = 0; i < in; i++) {
			size_t p = i / ((size_t)h * w), r = i % ((size_t)h * w);
			dgot[i] = body_adaptive_grad(dy + p * oh * ow, h, w, oh, ow, (int)r / w, (int)r % w);
		}
		CHECK_SAME("adaptive_bwd", dgot, dwant, in);
		/* the max over the same windows, a NaN in the first plane */
		int32_t *iw = talloc(out * sizeof(int32_t)), *ig = talloc(out * sizeof(int32_t));
		x[h * w / 2] = NAN;
		kern_adaptive_maxpool2d_fwd(x, want, iw, n, c, h, w, oh, ow);
		for (size_t i = 0; i < out; i++) {
			size_t p = i / ((size_t)oh * ow), r = i % ((size_t)oh * ow);
			got[i] = body_adaptive_max_out(x + p * h * w, h, w, oh, ow, (int)r / ow, (int)r % ow, &ig[i]);
		}
		CHECK_SAME("adaptive_max_fwd", got, want, out);
		CHECK(memcmp(iw, ig, out * sizeof(int32_t)) == 0);
		kern_adaptive_maxpool2d_bwd(iw, dy, dwant, n, c, h, w, oh, ow);
		for (size_t i = 0; i < in; i++) {
			size_t p = i / ((size_t)h * w), r = i % ((size_t)h * w);
			dgot[i] = body_adaptive_max_grad(iw + p * oh * ow, dy + p * oh * ow, h, w, oh, ow, (int)r / w, (int)r % w);
		}
		CHECK_SAME("adaptive_max_bwd", dgot, dwant, in);
	}
}

static void test_zeropad(void)
{
	/* left right top bottom: padding, cropping, both, and a crop past the input */
	const int sides[][4] = { { 1, 1, 1, 1 }, { 1, 2, 0, 1 }, { -1, 2, 3, -2 }, { 0, -3, -4, 0 }, { 6, -5, 0, 0 } };
	for (size_t k = 0; k < sizeof sides / sizeof sides[0]; k++) {
		scratch_reset();
		struct pad2d_desc d = { 2, 3, 5, 4, sides[k][0], sides[k][1], sides[k][2], sides[k][3] };
		int oh, ow;
		kern_pad2d_out(&d, &oh, &ow);
		size_t hw = (size_t)d.h * d.w, in = (size_t)d.n * d.c * hw, out = (size_t)d.n * d.c * oh * ow;
		float *x = rand_floats(in, -1, 1, 6), *dy = rand_floats(out, -1, 1, 7);
		float *want = floats(out), *got = floats(out), *dwant = floats(in), *dgot = floats(in);
		kern_zeropad2d_fwd(&d, x, want);
		for (size_t i = 0; i < out; i++) {
			size_t p = i / ((size_t)oh * ow), r = i % ((size_t)oh * ow);
			got[i] = body_zeropad_out(&d, x + p * hw, (int)r / ow, (int)r % ow);
		}
		CHECK_SAME("zeropad_fwd", got, want, out);
		kern_zeropad2d_bwd(&d, dy, dwant);
		for (size_t i = 0; i < in; i++) {
			size_t p = i / hw, r = i % hw;
			dgot[i] = body_zeropad_grad(&d, oh, ow, dy + p * oh * ow, (int)r / d.w, (int)r % d.w);
		}
		CHECK_SAME("zeropad_bwd", dgot, dwant, in);
	}
}

/* ---- softmax ---- */

/* The warp-per-row kernel's order for a contiguous row. */
static void softmax_row_warp(const float *x, float *y, int dim, bool log_out)
{
	float mx = -INFINITY;
	for (int k = 0; k < dim; k++) mx = fmaxf(mx, x[k]);
	double se;
	BLOCK_SUM(32, double, dim, expf(x[e] - mx), se);
	float f = body_softmax_factor(se, true, log_out);
	for (int k = 0; k < dim; k++) y[k] = body_softmax_out(x[k], mx, f, log_out);
}

static void test_softmax(void)
{
	const int shapes[][3] = { { 5, 37, 1 }, { 3, 1000, 1 }, { 3, 10, 70 }, { 2, 130, 65 }, { 4, 1, 3 } };
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		scratch_reset();
		int outer = shapes[k][0], dim = shapes[k][1], inner = shapes[k][2];
		size_t n = (size_t)outer * dim * inner;
		float *x = rand_floats(n, -20, 20, 8), *dy = rand_floats(n, -1, 1, 9);
		float *y = floats(n), *got = floats(n), *want = floats(n);
		for (int lo = 0; lo < 2; lo++) {
			(lo ? kern_log_softmax_fwd : kern_softmax_fwd)(x, y, outer, dim, inner);
			for (int o = 0; o < outer; o++)
				for (int i = 0; i < inner; i++) {
					size_t at = (size_t)o * dim * inner + i;
					body_softmax_row(x + at, got + at, dim, inner, lo);
				}
			CHECK_SAME("softmax_fwd", got, y, n);
			if (inner == 1) {
				for (int o = 0; o < outer; o++)
					softmax_row_warp(x + (size_t)o * dim, got + (size_t)o * dim, dim, lo);
				CHECK_CLOSE("softmax_fwd (warp order)", got, y, n, 1e-6);
			}
			(lo ? kern_log_softmax_bwd : kern_softmax_bwd)(y, dy, want, outer, dim, inner);
			for (int o = 0; o < outer; o++)
				for (int i = 0; i < inner; i++) {
					size_t at = (size_t)o * dim * inner + i;
					body_softmax_bwd_row(y + at, dy + at, got + at, dim, inner, lo);
				}
			CHECK_SAME("softmax_bwd", got, want, n);
		}
	}
}

/* ---- losses ---- */

/* kern_regression's loss and gradient against the kernel body's term,
 * summed in a block's order, at both reductions: the gradient the same bit
 * for bit */
static void check_regression(const char *what, enum kern_regression kind, float param, const float *x, const float *t, float *want,
			     float *got, size_t n)
{
	for (int red = 0; red < 2; red++) {
		double l = kern_regression(kind, param, x, t, want, n, red, 0.5f);
		float g = loss_regression_grad(kind, (int64_t)n, red, 0.5f);
		double s;
		BLOCK_SUM(1024, double, (int64_t)n, loss_regression_term(kind, param, x[e], t[e], g, &got[e]), s);
		double mine = red == KERN_REDUCE_MEAN ? s / (double)n : s;
		CHECK_SAME(what, got, want, n);
		CHECK_NEAR(mine, l, 1e-12 * fabs(l));
	}
}

static void test_mse(void)
{
	size_t n = 3001;
	float *x = rand_floats(n, -2, 2, 10), *t = rand_floats(n, -2, 2, 11), *want = floats(n), *got = floats(n);
	check_regression("mse dx", KERN_MSE, 0, x, t, want, got, n);
	CHECK_NEAR(kern_mse(x, t, want, n, KERN_REDUCE_SUM, 0.5f), kern_regression(KERN_MSE, 0, x, t, got, n, KERN_REDUCE_SUM, 0.5f), 0);
	/* l1, smooth_l1 and huber: the same gradients bit for bit, with some
	 * errors exactly 0 and exactly at the kinks (x = t +- param) */
	static const struct { enum kern_regression kind; float param; } reg[] = {
		{ KERN_MSE, 0 }, { KERN_L1, 0 }, { KERN_SMOOTH_L1, 1.0f }, { KERN_SMOOTH_L1, 0.25f }, { KERN_SMOOTH_L1, 0 }, { KERN_HUBER, 0.5f }, { KERN_HUBER, 3.0f },
	};
	for (size_t k = 0; k < sizeof reg / sizeof reg[0]; k++) {
		float pa = reg[k].param;
		for (size_t i = 0; i < 30; i++)
			x[i * 7] = t[i * 7] + (i % 3 == 0 ? 0.0f : i % 3 == 1 ? pa : -pa);
		check_regression("regression dx", reg[k].kind, pa, x, t, want, got, n);
	}
	/* bce on probabilities, 0 and 1 among them, and bce_with_logits on
	 * scores of either sign, against targets in [0, 1] */
	float *prob = rand_floats(n, 0, 1, 12), *logit = rand_floats(n, -30, 30, 13), *soft = rand_floats(n, 0, 1, 14);
	for (size_t i = 0; i < n; i += 50)
		prob[i] = (float)(i / 50 % 2);
	check_regression("bce dx", KERN_BCE, 0, prob, soft, want, got, n);
	check_regression("bce_with_logits dx", KERN_BCE_LOGITS, 1, logit, soft, want, got, n);
	check_regression("bce_with_logits pos_weight dx", KERN_BCE_LOGITS, 3.5f, logit, soft, want, got, n);
	/* kl_div on log-probabilities (scores below 0) against probabilities,
	 * 0 among them, and against log-probabilities (log_target) */
	for (size_t i = 0; i < n; i += 50)
		soft[i] = 0;
	float *logp = rand_floats(n, -12, 0, 15), *logt = rand_floats(n, -30, 1, 16);
	check_regression("kl_div dx", KERN_KL_DIV, 0, logp, soft, want, got, n);
	check_regression("kl_div log_target dx", KERN_KL_DIV, 1, logp, logt, want, got, n);
}

/* The loss kernels as one block: count, then rows; returns -1 on a bad
 * target.  eps: cross-entropy's label smoothing; w: class weights or NULL. */
static int class_loss(bool ce, const float *z, const int32_t *target, float *d, int n, int c, int ignore, float eps,
		      const float *w, enum kern_reduction red, float scale, double *loss)
{
	double count = 0;
	for (int i = 0; i < n; i++) {
		if (body_target_bad(target[i], c, ignore))
			return -1;
		if (target[i] != ignore)
			count += body_class_weight(w, target[i], true);
	}
	float g = body_class_grad(count, red, scale);
	double per_thread[1024] = { 0 }, wsum = w ? loss_class_weight_sum(w, c) : 0;
	for (int r = 0; r < n; r++) {
		bool on = target[r] != ignore;
		float wt = body_class_weight(w, target[r], on);
		if (ce) {
			per_thread[(r % 32) * 32] += body_ce_row(z + (size_t)r * c, c, target[r], on, g, eps, w, wsum, d + (size_t)r * c);
		} else {
			if (on)
				per_thread[r % 1024] -= wt * z[(size_t)r * c + target[r]];
			for (int k = 0; k < c; k++)
				d[(size_t)r * c + k] = body_nll_grad(k, target[r], on, g) * wt;
		}
	}
	for (int s = 512; s > 0; s /= 2)
		for (int t = 0; t < s; t++) per_thread[t] += per_thread[t + s];
	*loss = body_loss_reduce(per_thread[0], count, red);
	return 0;
}

static void test_class_losses(void)
{
	const int shapes[][2] = { { 7, 5 }, { 100, 10 }, { 3, 300 } };
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		scratch_reset();
		int n = shapes[k][0], c = shapes[k][1];
		float *z = rand_floats((size_t)n * c, -10, 10, 12), *want = floats((size_t)n * c), *got = floats((size_t)n * c);
		int32_t *t = talloc((size_t)n * 4);
		for (int i = 0; i < n; i++) t[i] = (i * 7 + 3) % c;
		t[1] = -100; /* ignored */
		if (n > 4) t[4] = -100;
		float *cw = rand_floats((size_t)c, 0, 3, 15);
		/* nll, cross-entropy, and cross-entropy with label smoothing;
		 * each without class weights and with them */
		for (int ce = 0; ce < 6; ce++)
			for (int red = 0; red < 2; red++) {
				double lw, lg;
				float eps = ce % 3 == 2 ? 0.3f : 0.0f, *w = ce >= 3 ? cw : NULL;
				int rw = ce % 3 ? kern_cross_entropy(z, t, want, n, c, -100, w, eps, red, 0.25f, &lw)
						: kern_nll(z, t, want, n, c, -100, w, red, 0.25f, &lw);
				int rg = class_loss(ce % 3, z, t, got, n, c, -100, eps, w, red, 0.25f, &lg);
				CHECK(rw == KERN_OK && rg == 0);
				CHECK_SAME(ce % 3 ? "ce grad" : "nll grad", got, want, (size_t)n * c);
				CHECK_NEAR(lg, lw, 1e-12 * fabs(lw));
			}
	}
	/* every row ignored: a NaN mean and a zero gradient; a bad target is an error */
	float z[6] = { 1, 2, 3, 4, 5, 6 }, d[6];
	int32_t t[2] = { 3, 3 };
	double l;
	CHECK(class_loss(true, z, t, d, 2, 3, 3, 0.0f, NULL, KERN_REDUCE_MEAN, 1.0f, &l) == 0);
	CHECK(isnan(l));
	for (int i = 0; i < 6; i++) CHECK(d[i] == 0.0f);
	t[1] = 4;
	CHECK(class_loss(true, z, t, d, 2, 3, -100, 0.0f, NULL, KERN_REDUCE_MEAN, 1.0f, &l) == -1);
	CHECK(kern_cross_entropy(z, t, d, 2, 3, -100, NULL, 0.0f, KERN_REDUCE_MEAN, 1.0f, &l) == KERN_ERR_INDEX);
}

static void test_argmax(void)
{
	int n = 300, c = 7;
	scratch_reset();
	float *z = rand_floats((size_t)n * c, -1, 1, 13);
	int32_t *t = talloc((size_t)n * 4);
	for (int i = 0; i < n; i++) t[i] = i % c;
	for (int i = 0; i < n; i += 5) z[(size_t)i * c + 2] = z[(size_t)i * c + 4] = 5.0f; /* ties: the first wins */
	long hits = 0;
	for (int i = 0; i < n; i++) hits += body_argmax_hit(z + (size_t)i * c, c, t[i]);
	CHECK(hits == kern_argmax_correct(z, t, n, c));
}

/* ---- normalisation ---- */

static void test_layernorm(void)
{
	int rows = 33, d = 200;
	scratch_reset();
	size_t n = (size_t)rows * d;
	float *x = rand_floats(n, -3, 5, 14), *gamma = rand_floats(d, 0.5f, 1.5f, 15), *beta = rand_floats(d, -1, 1, 16);
	float *dy = rand_floats(n, -1, 1, 17), *y = floats(n), *got = floats(n);
	float *mean = floats(rows), *inv = floats(rows), *gmean = floats(rows), *ginv = floats(rows);
	kern_layernorm_fwd(x, gamma, beta, y, mean, inv, rows, d, 1e-5f);
	for (int r = 0; r < rows; r++) /* the sequential row, and the warp's order */
		body_layernorm_row(x + (size_t)r * d, gamma, beta, got + (size_t)r * d, d, 1e-5f, &gmean[r], &ginv[r]);
	CHECK_CLOSE_UNIT("ln y", got, y, n, 1e-5);
	CHECK_CLOSE("ln mean", gmean, mean, rows, 1e-5);
	CHECK_CLOSE("ln invstd", ginv, inv, rows, 1e-5);
	for (int r = 0; r < rows; r++) {
		const float *in = x + (size_t)r * d;
		double s;
		float ss;
		BLOCK_SUM(32, double, d, in[e], s);
		float m = (float)(s / (double)d);
		BLOCK_SUM(32, float, d, (in[e] - m) * (in[e] - m), ss);
		gmean[r] = m;
		ginv[r] = body_ln_invstd(ss, d, 1e-5f);
		for (int j = 0; j < d; j++) got[(size_t)r * d + j] = body_ln_out(in[j], m, ginv[r], gamma, beta, j);
	}
	CHECK_CLOSE_UNIT("ln y (warp order)", got, y, n, 1e-5);
	CHECK_CLOSE("ln invstd (warp order)", ginv, inv, rows, 1e-5);
	float *dx = floats(n), *dg = floats(d), *db = floats(d), *gdg = floats(d), *gdb = floats(d);
	for (int aff = 0; aff < 2; aff++) {
		const float *g = aff ? gamma : NULL;
		memset(dg, 0, d * 4);
		memset(db, 0, d * 4);
		memset(gdg, 0, d * 4);
		memset(gdb, 0, d * 4);
		kern_layernorm_bwd(x, g, mean, inv, dy, dx, dg, db, rows, d);
		for (int r = 0; r < rows; r++)
			body_layernorm_bwd_row(x + (size_t)r * d, g, mean[r], inv[r], dy + (size_t)r * d, got + (size_t)r * d, d);
		CHECK_CLOSE_UNIT("ln dx", got, dx, n, 1e-5);
		for (int j = 0; j < d; j++) body_ln_param_col(x, dy, mean, inv, rows, d, j, gdg, gdb);
		CHECK_SAME("ln dgamma", gdg, dg, d);
		CHECK_SAME("ln dbeta", gdb, db, d);
	}
}

/* Group norm: body.h's rows and channel sums against kern_layernorm.c's,
 * with and without the affine parameters; groups of 3 channels of 7 x 5. */
static void test_groupnorm(void)
{
	int n = 5, groups = 4, cpg = 3, hw = 35, c = groups * cpg, rows = n * groups, d = cpg * hw;
	scratch_reset();
	size_t m = (size_t)rows * d;
	float *x = rand_floats(m, -3, 5, 24), *gamma = rand_floats(c, 0.5f, 1.5f, 25), *beta = rand_floats(c, -1, 1, 26);
	float *dy = rand_floats(m, -1, 1, 27), *y = floats(m), *got = floats(m), *dx = floats(m);
	float *mean = floats(rows), *inv = floats(rows), *gmean = floats(rows), *ginv = floats(rows);
	float *dg = floats(c), *db = floats(c), *gdg = floats(c), *gdb = floats(c);
	for (int aff = 0; aff < 2; aff++) {
		const float *g = aff ? gamma : NULL, *b = aff ? beta : NULL;
		kern_groupnorm_fwd(x, g, b, y, mean, inv, n, groups, cpg, hw, 1e-5f);
		for (int r = 0; r < rows; r++)
			body_groupnorm_row(x + (size_t)r * d, g, b, got + (size_t)r * d, body_gn_c0(r, groups, cpg), cpg, hw, 1e-5f,
					   &gmean[r], &ginv[r]);
		CHECK_CLOSE_UNIT("gn y", got, y, m, 1e-5);
		CHECK_CLOSE("gn mean", gmean, mean, rows, 1e-5);
		CHECK_CLOSE("gn invstd", ginv, inv, rows, 1e-5);
		/* channel 4 (group 1's second) of sample 2, by hand: the row's moments, then its own gamma and beta */
		{
			const float *in = x + (size_t)(2 * groups + 1) * d;
			double s = 0, q = 0;
			for (int j = 0; j < d; j++)
				s += in[j];
			s /= d;
			for (int j = 0; j < d; j++)
				q += (in[j] - s) * (in[j] - s);
			double is = 1 / sqrt(q / d + 1e-5), want = (in[hw + 3] - s) * is * (aff ? gamma[4] : 1) + (aff ? beta[4] : 0);
			CHECK_NEAR(y[(size_t)(2 * groups + 1) * d + hw + 3], want, 1e-5);
		}
		memset(dg, 0, c * 4);
		memset(db, 0, c * 4);
		memset(gdg, 0, c * 4);
		memset(gdb, 0, c * 4);
		kern_groupnorm_bwd(x, g, mean, inv, dy, dx, dg, db, n, groups, cpg, hw);
		for (int r = 0; r < rows; r++)
			body_groupnorm_bwd_row(x + (size_t)r * d, g, body_gn_c0(r, groups, cpg), cpg, hw, mean[r], inv[r],
					       dy + (size_t)r * d, got + (size_t)r * d);
		CHECK_CLOSE_UNIT("gn dx", got, dx, m, 1e-5);
		for (int ch = 0; ch < c; ch++)
			body_gn_param_chan(x, dy, mean, inv, n, groups, cpg, hw, ch, gdg, gdb);
		CHECK_SAME("gn dgamma", gdg, dg, c);
		CHECK_SAME("gn dbeta", gdb, db, c);
	}
}

/* bn_train_kernel's channel ch, in its order. */
static void bn_channel(const float *x, const float *gamma, const float *beta, float *y, float *rm, float *rv,
		       float *sm, float *si, int n, int c, int hw, float eps, float momentum, int ch)
{
	int64_t m = (int64_t)n * hw;
#define AT(e) ((((e) / hw) * c + ch) * hw + (e) % hw)
	double s, q;
	BLOCK_SUM(256, double, m, x[AT(e)], s);
	float mean = body_bn_mean(s, m);
	BLOCK_SUM(256, double, m, (x[AT(e)] - mean) * (x[AT(e)] - mean), q);
	double var = q / (double)m;
	float invstd = body_bn_invstd(var, eps), alpha, shift;
	body_bn_affine(mean, invstd, gamma, beta, ch, &alpha, &shift);
	for (int64_t e = 0; e < m; e++) y[AT(e)] = x[AT(e)] * alpha + shift;
	sm[ch] = mean;
	si[ch] = invstd;
	body_bn_running(&rm[ch], &rv[ch], mean, var, m, momentum);
#undef AT
}

/* eps, and with `constant` channel 1 all 0.1f: with eps 0 PyTorch's InvStd
 * makes it its bias, with dx 0 there, on both sides */
static void check_batchnorm(float eps, bool constant)
{
	int n = 5, c = 3, hw = 77;
	scratch_reset();
	size_t total = (size_t)n * c * hw;
	float *x = rand_floats(total, -2, 4, 18), *gamma = rand_floats(c, 0.5f, 1.5f, 19), *beta = rand_floats(c, -1, 1, 20);
	for (int i = 0; constant && i < n; i++)
		for (int j = 0; j < hw; j++)
			x[((size_t)i * c + 1) * hw + j] = 0.1f;
	float *dy = rand_floats(total, -1, 1, 21), *y = floats(total), *got = floats(total);
	float *rm = rand_floats(c, -1, 1, 22), *rv = rand_floats(c, 0.5f, 2, 23), *sm = floats(c), *si = floats(c);
	float *grm = floats(c), *grv = floats(c), *gsm = floats(c), *gsi = floats(c);
	memcpy(grm, rm, c * 4);
	memcpy(grv, rv, c * 4);
	kern_batchnorm2d_fwd_train(x, gamma, beta, y, rm, rv, sm, si, n, c, hw, eps, 0.1f);
	for (int ch = 0; ch < c; ch++) bn_channel(x, gamma, beta, got, grm, grv, gsm, gsi, n, c, hw, eps, 0.1f, ch);
	CHECK_CLOSE_UNIT("bn y", got, y, total, 1e-5);
	CHECK_CLOSE("bn mean", gsm, sm, c, 1e-6);
	CHECK_CLOSE("bn invstd", gsi, si, c, 1e-6);
	CHECK_CLOSE("bn running_mean", grm, rm, c, 1e-6);
	CHECK_CLOSE("bn running_var", grv, rv, c, 1e-6);
	if (constant && eps == 0)
		CHECK(si[1] == 0 && gsi[1] == 0 && y[hw] == beta[1] && got[hw] == beta[1]);
	/* evaluation: the same formula, exactly */
	kern_batchnorm2d_fwd_eval(x, gamma, beta, rm, rv, y, n, c, hw, eps);
	for (size_t i = 0; i < total; i++) {
		int ch = (int)((i / hw) % c);
		float alpha, shift;
		body_bn_affine(rm[ch], body_bn_eval_invstd(rv[ch], eps), gamma, beta, ch, &alpha, &shift);
		got[i] = x[i] * alpha + shift;
	}
	CHECK_SAME("bn eval", got, y, total);
	/* backward, in bn_bwd_kernel's order */
	float *dx = floats(total), *dg = floats(c), *db = floats(c), *gdg = floats(c), *gdb = floats(c);
	kern_batchnorm2d_bwd(x, gamma, sm, si, dy, dx, dg, db, n, c, hw);
	for (int ch = 0; ch < c; ch++) {
		int64_t m = (int64_t)n * hw;
#define AT(e) ((((e) / hw) * c + ch) * hw + (e) % hw)
		double sdy, sdyx;
		BLOCK_SUM(256, double, m, dy[AT(e)], sdy);
		BLOCK_SUM(256, double, m, dy[AT(e)] * (x[AT(e)] - sm[ch]), sdyx);
		gdg[ch] += (float)(sdyx * si[ch]);
		gdb[ch] += (float)sdy;
		float s, mdy, k;
		body_bn_bwd_coef(sdy, sdyx, m, gamma[ch], si[ch], &s, &mdy, &k);
		for (int64_t e = 0; e < m; e++) got[AT(e)] = body_bn_dx(x[AT(e)], dy[AT(e)], sm[ch], s, mdy, k);
#undef AT
	}
	CHECK_CLOSE_UNIT("bn dx", got, dx, total, 1e-5);
	CHECK_CLOSE("bn dgamma", gdg, dg, c, 1e-5);
	CHECK_CLOSE("bn dbeta", gdb, db, c, 1e-5);
	if (constant && eps == 0)
		CHECK(dx[hw] == 0 && got[hw] == 0 && dg[1] == 0 && gdg[1] == 0);
}

static void test_batchnorm(void)
{
	check_batchnorm(1e-5f, false);
	check_batchnorm(1e-5f, true);
	check_batchnorm(0.0f, true);
}

/* ---- embedding, bias ---- */

static void test_embedding(void)
{
	int n = 50, vocab = 11, dim = 13;
	scratch_reset();
	int32_t *idx = talloc((size_t)n * 4);
	for (int i = 0; i < n; i++) idx[i] = (i * 5 + 1) % vocab; /* repeats */
	float *w = rand_floats((size_t)vocab * dim, -1, 1, 24), *dy = rand_floats((size_t)n * dim, -1, 1, 25);
	float *want = floats((size_t)n * dim), *got = floats((size_t)n * dim);
	int32_t bad = 0;
	CHECK(kern_embedding_fwd(idx, w, want, n, vocab, dim) == KERN_OK);
	for (int64_t e = 0; e < (int64_t)n * dim; e++) got[e] = body_embedding_elem(idx, w, vocab, dim, e, &bad);
	CHECK_SAME("embedding fwd", got, want, (size_t)n * dim);
	CHECK(bad == 0);
	idx[7] = vocab;
	for (int64_t e = 0; e < (int64_t)n * dim; e++) got[e] = body_embedding_elem(idx, w, vocab, dim, e, &bad);
	CHECK(bad == 1 && got[7 * dim] == 0.0f);
	idx[7] = 2;
	/* backward: the kernel's scatter, in index order as the CPU's */
	float *dw = floats((size_t)vocab * dim), *gdw = floats((size_t)vocab * dim);
	CHECK(kern_embedding_bwd(idx, dy, dw, n, vocab, dim, 3) == KERN_OK);
	for (int64_t e = 0; e < (int64_t)n * dim; e++)
		if (idx[e / dim] != 3) gdw[(int64_t)idx[e / dim] * dim + e % dim] += dy[e];
	CHECK_SAME("embedding bwd", gdw, dw, (size_t)vocab * dim);
}

static void test_bias_grad(void)
{
	int rows = 301, m = 70;
	scratch_reset();
	float *dy = rand_floats((size_t)rows * m, -1, 1, 26), *db = rand_floats(m, -1, 1, 27), *got = floats(m);
	memcpy(got, db, m * 4);
	kern_linear_bwd(NULL, NULL, dy, NULL, NULL, db, rows, 1, m);
	for (int j = 0; j < m; j++) got[j] += body_bias_grad_col(dy, rows, m, j);
	CHECK_SAME("bias grad", got, db, m);
}

/* ---- optimizer ---- */

static void check_optim(struct optim_cfg c)
{
	enum { N = 777 };
	scratch_reset();
	int k = optim_state_floats(c.kind, &c);
	float *p0 = rand_floats(N, -1, 1, 28), *p1 = floats(N), *s0 = floats(3 * N), *s1 = floats(3 * N);
	memcpy(p1, p0, sizeof(float) * N);
	optim_state_init(&c, (struct optim_state_view){ s0, N }, N);
	optim_state_init(&c, (struct optim_state_view){ s1, N }, N);
	float *plane[3] = { NULL, NULL, NULL };
	for (int j = 0; j < k; j++) plane[j] = s1 + j * N;
	/* RAdam rectifies from step 6 on (at beta2 near 1: rho_t is about the step) */
	for (int step = 1; step <= (c.kind == OPTIM_RADAM ? 7 : 3); step++) {
		float *g = rand_floats(N, -1, 1, 29 + (uint32_t)step);
		g[5] = 0.0f;
		double lr = c.lr * (1.0 - 0.1 * step);
		optim_step(&c, (struct optim_state_view){ s0, N }, p0, g, N, step, lr);
		struct optim_coef co = optim_coef_of(&c, step, lr);
		for (int64_t i = 0; i < N; i++) optim_elem_apply(&co, p1, g, plane, i);
	}
	CHECK_SAME(optim_kind_name(c.kind), p1, p0, N);
	CHECK_SAME("state", s1, s0, (size_t)k * N);
}

static void test_optim(void)
{
	for (int kind = 0; kind < OPTIM_KIND_COUNT; kind++)
		for (int v = 0; v < 8; v++) {
			struct optim_cfg c = optim_cfg_default(kind);
			if (kind == OPTIM_SGD) c.lr = 0.1;
			c.weight_decay = (v & 1) ? 0.01 : 0;
			switch (kind) {
			case OPTIM_SGD:
				c.momentum = (v & 2) ? 0.9 : 0;
				c.nesterov = (v & 4) && c.momentum != 0;
				c.dampening = (v & 4) ? 0 : 0.1;
				break;
			case OPTIM_ADAM:
			case OPTIM_ADAMW: c.amsgrad = (v & 2) != 0; c.beta1 = (v & 4) ? 0.8 : 0.9; break;
			case OPTIM_ADADELTA: c.rho = (v & 2) ? 0.5 : 0.9; break;
			case OPTIM_ADAGRAD:
				c.lr_decay = (v & 2) ? 0.01 : 0;
				c.initial_accumulator_value = (v & 4) ? 0.1 : 0;
				break;
			case OPTIM_RMSPROP: c.momentum = (v & 2) ? 0.9 : 0; c.centered = (v & 4) != 0; break;
			case OPTIM_ADAMAX: c.beta1 = (v & 2) ? 0.8 : 0.9; c.eps = (v & 4) ? 0 : 1e-8; break;
			case OPTIM_RADAM: c.beta2 = (v & 2) ? 0.9 : 0.999; c.beta1 = (v & 4) ? 0.8 : 0.9; break;
			}
			CHECK(optim_cfg_check(&c) == NULL);
			check_optim(c);
		}
	const double norms[] = { 0.0, 0.5, 1.0, 3.0, 1e30, NAN };
	for (int i = 0; i < 6; i++) {
		float a = optim_elem_clip_coef(norms[i], 1.0), b = optim_clip_coef(norms[i], 1.0);
		CHECK(same_float(a, b));
	}
}

static void test_sumsq(void)
{
	enum { PARTS = 256 }; /* KC_SUMSQ_PARTS */
	int64_t n = 100003;
	scratch_reset();
	float *g = rand_floats((size_t)n, -1, 1, 40);
	double part[PARTS], total = 0;
	int64_t chunk = (n + PARTS - 1) / PARTS;
	for (int b = 0; b < PARTS; b++) {
		int64_t lo = b * chunk, len = lo >= n ? 0 : lo + chunk < n ? chunk : n - lo;
		BLOCK_SUM(256, double, len, (double)g[lo + e] * g[lo + e], part[b]);
	}
	for (int b = 0; b < PARTS; b++) total += part[b];
	double want = optim_sumsq(g, n);
	CHECK_NEAR(total, want, 1e-12 * want);
}

int main(void)
{
	RUN(test_activations);
	RUN(test_dropout);
	RUN(test_pools);
	RUN(test_adaptive);
	RUN(test_zeropad);
	RUN(test_softmax);
	RUN(test_mse);
	RUN(test_class_losses);
	RUN(test_argmax);
	RUN(test_layernorm);
	RUN(test_groupnorm);
	RUN(test_batchnorm);
	RUN(test_embedding);
	RUN(test_bias_grad);
	RUN(test_optim);
	RUN(test_sumsq);
	return check_done();
}
