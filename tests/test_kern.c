/* test_kern.c: every CPU kernel against central finite differences, against
 * reference numbers, and against itself on 1 and 2 threads.
 * Gradient checks perturb each input and parameter element by ±eps and take
 * the objective sum(y * r) (in double) for a fixed random r; the analytic
 * gradient comes from the backward kernel fed dy = r.  An element fails if
 * |numeric - analytic| > tol * max(max|analytic|, 0.01): relative to the
 * largest gradient, because float forward passes make the finite difference
 * noisy in absolute terms (about 1e-5 at eps 1e-2).  Reference numbers were
 * computed with PyTorch 1.13 (torch.nn.functional, float32) unless the
 * comment says "by hand".  Past 600 lines because it covers every kernel.
 */
#include "runtime/kern.h"
#include "tests/check.h"

#include <dirent.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>

#define SCRATCH_BYTES (64 << 20)
#include "tests/scratch.h"

/* Distinct values 0.05 apart in scrambled order, so a max never changes
 * under a perturbation of 0.01. */
static float *distinct_floats(size_t n)
{
	float *p = floats(n);
	for (size_t i = 0; i < n; i++)
		p[i] = 0.05f * (float)((i * 37 + 11) % n) - 0.025f * (float)n;
	return p;
}

static double dot(const float *a, const float *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

static double max_abs(const float *a, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = fabs(a[i]) > m ? fabs(a[i]) : m;
	return m;
}

/* ---- the gradient check ---- */

typedef double (*objective_fn)(void *ctx);

static void gradcheck(const char *what, objective_fn f, void *ctx, float *param, const float *analytic,
		      size_t n, float eps, double tol)
{
	double bound = tol * fmax(max_abs(analytic, n), 0.01), worst = 0;
	size_t at = 0;
	double worst_num = 0;
	for (size_t i = 0; i < n; i++) {
		float keep = param[i], up = keep + eps, down = keep - eps;
		param[i] = up;
		double fu = f(ctx);
		param[i] = down;
		double fd = f(ctx);
		param[i] = keep;
		double num = (fu - fd) / ((double)up - (double)down);
		double err = fabs(num - analytic[i]);
		if (!(err <= worst)) {
			worst = err;
			at = i;
			worst_num = num;
		}
	}
	if (!(worst <= bound))
		fprintf(stderr, "gradcheck %s: element %zu numeric %.7g analytic %.7g (bound %.3g)\n", what, at,
			worst_num, analytic[at], bound);
	CHECK(worst <= bound);
	CHECK(max_abs(analytic, n) > 0); /* a gradient of zeros checks nothing */
}

static void begin(void)
{
	scratch_reset();
	kern_set_threads(1);
}

/* ---- linear and gemm ---- */

struct lin { float *x, *w, *b, *y, *r; int n, k, m; };

static double lin_obj(void *p)
{
	struct lin *c = p;
	kern_linear_fwd(c->x, c->w, c->b, c->y, c->n, c->k, c->m);
	return dot(c->y, c->r, (size_t)c->n * c->m);
}

static void test_linear(void)
{
	begin();
	/* by hand: x (2, 2), w (3, 2) */
	float x0[] = { 1, 2, 3, 4 }, w0[] = { 1, 0, 0, 1, 1, 1 }, b0[] = { 0.5f, -1, 0 }, y0[6];
	float want[] = { 1.5f, 1, 3, 3.5f, 3, 7 };
	kern_linear_fwd(x0, w0, b0, y0, 2, 2, 3);
	for (int i = 0; i < 6; i++)
		CHECK_NEAR(y0[i], want[i], 0);

	struct lin c = { .n = 3, .k = 5, .m = 4 };
	c.x = rand_floats(15, -1, 1, 1);
	c.w = rand_floats(20, -1, 1, 2);
	c.b = rand_floats(4, -1, 1, 3);
	c.y = floats(12);
	c.r = rand_floats(12, -1, 1, 4);
	float *dx = floats(15), *dw = floats(20), *db = floats(4);
	kern_linear_bwd(c.x, c.w, c.r, dx, dw, db, c.n, c.k, c.m);
	gradcheck("linear x", lin_obj, &c, c.x, dx, 15, 1e-2f, 1e-3);
	gradcheck("linear w", lin_obj, &c, c.w, dw, 20, 1e-2f, 1e-3);
	gradcheck("linear b", lin_obj, &c, c.b, db, 4, 1e-2f, 1e-3);
	/* parameter gradients accumulate; dx may be skipped */
	float dw1 = dw[7], db1 = db[2];
	kern_linear_bwd(c.x, c.w, c.r, NULL, dw, db, c.n, c.k, c.m);
	CHECK_NEAR(dw[7], 2 * dw1, 0);
	CHECK_NEAR(db[2], 2 * db1, 0);
}

static void test_gemm_transposes(void)
{
	begin();
	int m = 70, n = 150, k = 33; /* several blocks, ragged edges */
	float *a = rand_floats((size_t)m * k, -1, 1, 5), *b = rand_floats((size_t)k * n, -1, 1, 6);
	for (int ta = 0; ta < 2; ta++)
		for (int tb = 0; tb < 2; tb++) {
			float *c = rand_floats((size_t)m * n, -1, 1, 7), *c0 = floats((size_t)m * n);
			memcpy(c0, c, sizeof(float) * m * n);
			int lda = ta ? m : k, ldb = tb ? k : n;
			kern_gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 2.0f, c, n);
			double worst = 0;
			for (int i = 0; i < m; i++)
				for (int j = 0; j < n; j++) {
					double s = 0;
					for (int l = 0; l < k; l++)
						s += (double)(ta ? a[l * lda + i] : a[i * lda + l]) *
						     (tb ? b[j * ldb + l] : b[l * ldb + j]);
					worst = fmax(worst, fabs(c[i * n + j] - (0.5 * s + 2.0 * c0[i * n + j])));
				}
			CHECK(worst < 1e-4);
		}
}

/* ---- conv2d ---- */

struct conv {
	struct kern_conv2d k;
	float *x, *w, *b, *y, *r;
	size_t nx, nw, ny;
};

static double conv_obj(void *p)
{
	struct conv *c = p;
	kern_conv2d_fwd(&c->k, c->x, c->w, c->b, c->y);
	return dot(c->y, c->r, c->ny);
}

/* Set c up for d with seeded random tensors; false if prepare refuses. */
static bool conv_setup(struct conv *c, const struct conv2d_desc *d, uint32_t seed)
{
	memset(c, 0, sizeof *c);
	size_t ws = kern_conv2d_workspace(d);
	CHECK(ws > 0);
	int rc = kern_conv2d_prepare(&c->k, d, talloc(ws));
	CHECK(rc == KERN_OK);
	if (rc != KERN_OK)
		return false;
	c->nx = (size_t)d->n * d->c_in * d->h * d->w;
	c->nw = (size_t)d->c_out * (d->c_in / d->groups) * d->kh * d->kw;
	c->ny = (size_t)d->n * d->c_out * c->k.oh * c->k.ow;
	c->x = rand_floats(c->nx, -1, 1, seed);
	c->w = rand_floats(c->nw, -1, 1, seed + 1);
	c->b = d->bias ? rand_floats(d->c_out, -1, 1, seed + 2) : NULL;
	c->y = floats(c->ny);
	c->r = rand_floats(c->ny, -1, 1, seed + 3);
	return true;
}

/* Direct convolution in double: the definition, for comparison. */
static double conv_ref(const struct conv *c, int n, int co, int oy, int ox)
{
	const struct conv2d_desc *d = &c->k.d;
	int cig = d->c_in / d->groups, g = co / (d->c_out / d->groups);
	double s = c->b ? c->b[co] : 0;
	for (int ci = 0; ci < cig; ci++)
		for (int i = 0; i < d->kh; i++)
			for (int j = 0; j < d->kw; j++) {
				int iy = oy * d->sh - d->ph + i * d->dh, ix = ox * d->sw - d->pw + j * d->dw;
				if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w)
					continue;
				s += (double)c->x[(((size_t)n * d->c_in + g * cig + ci) * d->h + iy) * d->w + ix] *
				     c->w[(((size_t)co * cig + ci) * d->kh + i) * d->kw + j];
			}
	return s;
}

static const struct conv2d_desc conv_cases[] = {
	/* stride, padding, dilation and groups all at once, uneven in h and w */
	{ .n = 2, .c_in = 4, .h = 7, .w = 6, .c_out = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .pw = 2,
	  .dh = 2, .dw = 1, .groups = 2, .bias = true },
	/* 1x1: im2col's no-unfold case */
	{ .n = 3, .c_in = 5, .h = 4, .w = 5, .c_out = 3, .kh = 1, .kw = 1, .sh = 1, .sw = 1, .dh = 1, .dw = 1,
	  .groups = 1 },
	/* depthwise with a channel multiplier, stride 2 in both */
	{ .n = 2, .c_in = 3, .h = 5, .w = 5, .c_out = 6, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1,
	  .dh = 1, .dw = 1, .groups = 3, .bias = true },
	/* 10 images: oneDNN runs two chunks of 5 and sums their dw */
	{ .n = 10, .c_in = 2, .h = 4, .w = 4, .c_out = 3, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1,
	  .dh = 1, .dw = 1, .groups = 1, .bias = true },
	/* 16 input channels: AUTO's backward-data goes through oneDNN */
	{ .n = 2, .c_in = 16, .h = 5, .w = 4, .c_out = 4, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1,
	  .dh = 1, .dw = 1, .groups = 1, .bias = true },
	/* channels in 16s, 3x3, stride 1: AUTO takes Winograd; 7x6 outputs cut
	 * 4x4 tiles short, 18 images make a chunk of 9 */
	{ .n = 18, .c_in = 16, .h = 9, .w = 6, .c_out = 32, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 0, .pw = 1,
	  .dh = 1, .dw = 1, .groups = 1, .bias = true },
};

/* The shapes oneDNN's Winograd takes. */
static bool winograd_shape(const struct conv2d_desc *d)
{
	return d->kh == 3 && d->kw == 3 && d->sh == 1 && d->sw == 1 && d->dh == 1 && d->dw == 1 && d->groups == 1 &&
	       d->c_in % 16 == 0 && d->c_out % 16 == 0;
}

static void test_conv2d_grad(void)
{
	static const char *path_name[] = { "auto", "im2col", "dnnl", "winograd" };
	for (size_t ci = 0; ci < sizeof conv_cases / sizeof *conv_cases; ci++)
		for (int path = KERN_CONV_AUTO; path <= KERN_CONV_WINOGRAD; path++) {
			begin();
			struct conv2d_desc d = conv_cases[ci];
			d.path = path;
			struct conv c;
			if (path == KERN_CONV_WINOGRAD && !winograd_shape(&d))
				continue;
			if (!conv_setup(&c, &d, 10 + (uint32_t)ci * 10))
				continue;
			/* AUTO takes Winograd exactly where oneDNN has it */
			CHECK(c.k.winograd == (path == KERN_CONV_WINOGRAD || (path == KERN_CONV_AUTO && winograd_shape(&d))));
			char what[64];
			/* forward against the definition */
			conv_obj(&c);
			double worst = 0;
			for (int n = 0; n < d.n; n++)
				for (int co = 0; co < d.c_out; co++)
					for (int oy = 0; oy < c.k.oh; oy++)
						for (int ox = 0; ox < c.k.ow; ox++) {
							size_t at = (((size_t)n * d.c_out + co) * c.k.oh + oy) * c.k.ow + ox;
							worst = fmax(worst, fabs(c.y[at] - conv_ref(&c, n, co, oy, ox)));
						}
			/* Winograd's transforms cost about a digit: 2e-5 on case 5's sums
			 * of 144 products of values in [-1, 1] */
			double tol = c.k.winograd ? 5e-5 : 1e-5;
			if (worst > tol)
				fprintf(stderr, "conv case %zu %s: forward off by %g\n", ci, path_name[path], worst);
			CHECK(worst <= tol);
			float *dx = floats(c.nx), *dw = floats(c.nw), *db = floats(d.c_out);
			kern_conv2d_bwd(&c.k, c.x, c.w, c.r, dx, dw, d.bias ? db : NULL);
			snprintf(what, sizeof what, "conv case %zu %s x", ci, path_name[path]);
			gradcheck(what, conv_obj, &c, c.x, dx, c.nx, 1e-2f, 1e-3);
			snprintf(what, sizeof what, "conv case %zu %s w", ci, path_name[path]);
			gradcheck(what, conv_obj, &c, c.w, dw, c.nw, 1e-2f, 1e-3);
			if (d.bias) {
				snprintf(what, sizeof what, "conv case %zu %s b", ci, path_name[path]);
				gradcheck(what, conv_obj, &c, c.b, db, d.c_out, 1e-2f, 1e-3);
			}
			/* dw and db accumulate; dx alone works too */
			float dw0 = dw[1], db0 = db[0], *dx2 = floats(c.nx);
			kern_conv2d_bwd(&c.k, c.x, c.w, c.r, NULL, dw, d.bias ? db : NULL);
			CHECK_NEAR(dw[1], 2 * dw0, 1e-6 * fabs(dw0));
			CHECK_NEAR(db[0], d.bias ? 2 * db0 : 0, 1e-6 * fabs(db0));
			kern_conv2d_bwd(&c.k, c.x, c.w, c.r, dx2, NULL, NULL);
			CHECK(memcmp(dx, dx2, c.nx * sizeof(float)) == 0);
			kern_conv2d_release(&c.k);
		}
}

static void test_conv2d_reference(void)
{
	begin();
	/* PyTorch: x = arange(200).reshape(2,4,5,5).sin(), w = arange(72).reshape(6,2,3,2).cos(),
	 * b as below, stride (2,1), padding (1,2), dilation (2,1), groups 2 */
	struct conv2d_desc d = { .n = 2, .c_in = 4, .h = 5, .w = 5, .c_out = 6, .kh = 3, .kw = 2, .sh = 2, .sw = 1,
				 .ph = 1, .pw = 2, .dh = 2, .dw = 1, .groups = 2, .bias = true };
	float want0[18] = { 0.1f, 2.137312889f, 0.154933065f, -0.2f, 0.493700743f, -1.504845381f,
			    0.3f, -0.566548824f, -1.957130909f, 0.0f, -2.492194414f, -3.435304165f,
			    0.5f, -2.584945679f, -2.352184534f, -1.0f, -3.714293003f, -2.378350019f };
	for (int path = KERN_CONV_AUTO; path <= KERN_CONV_DNNL; path++) {
		d.path = path;
		struct conv c;
		if (!conv_setup(&c, &d, 1))
			continue;
		CHECK(c.k.oh == 2 && c.k.ow == 8);
		for (int i = 0; i < 200; i++)
			c.x[i] = sinf((float)i);
		for (int i = 0; i < 72; i++)
			c.w[i] = cosf((float)i);
		float b[6] = { 0.1f, -0.2f, 0.3f, 0, 0.5f, -1 };
		memcpy(c.b, b, sizeof b);
		kern_conv2d_fwd(&c.k, c.x, c.w, c.b, c.y);
		for (int co = 0; co < 6; co++)
			for (int j = 0; j < 3; j++)
				CHECK_NEAR(c.y[co * 16 + j], want0[co * 3 + j], 2e-5);
		CHECK_NEAR(c.y[191], -1.0, 2e-5);
		double s = 0;
		for (int i = 0; i < 192; i++)
			s += c.y[i];
		CHECK_NEAR(s, 10.344518728554249, 1e-4);
		kern_conv2d_release(&c.k);
	}
	/* Winograd on large images takes fewer per chunk: its workspace stays
	 * within direct's bounds (64 images of 64 channels at 112x112) */
	struct conv2d_desc big = { .n = 64, .c_in = 64, .h = 112, .w = 112, .c_out = 64, .kh = 3, .kw = 3, .sh = 1,
				   .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .groups = 1, .path = KERN_CONV_WINOGRAD };
	size_t wino = kern_conv2d_workspace(&big);
	big.path = KERN_CONV_DNNL;
	size_t direct = kern_conv2d_workspace(&big);
	fprintf(stderr, "workspace for 64x64x112x112, 3x3: Winograd %.1f MiB, direct %.1f MiB\n", wino / 1048576.0,
		direct / 1048576.0);
	CHECK(wino > 0 && wino <= direct);
	/* invalid shapes are refused */
	struct kern_conv2d k;
	struct conv2d_desc bad = d;
	bad.groups = 3;
	CHECK(kern_conv2d_workspace(&bad) == 0);
	CHECK(kern_conv2d_prepare(&k, &bad, NULL) == KERN_ERR_SHAPE);
	bad = d;
	bad.kh = 9;
	CHECK(kern_conv2d_prepare(&k, &bad, NULL) == KERN_ERR_SHAPE);
}

/* y, dx, dw, db of d on 1 and on 2 threads are bit for bit the same. */
static void test_conv2d_threads(void)
{
	struct conv2d_desc cases[] = {
		{ .n = 16, .c_in = 32, .h = 10, .w = 10, .c_out = 64, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
		  .dw = 1, .groups = 1, .bias = true },
		/* 13 images: chunks of one, summed across threads in order */
		{ .n = 13, .c_in = 16, .h = 9, .w = 8, .c_out = 24, .kh = 3, .kw = 3, .sh = 2, .sw = 1, .ph = 1,
		  .pw = 1, .dh = 1, .dw = 1, .groups = 2, .bias = true },
		{ .n = 8, .c_in = 1, .h = 28, .w = 28, .c_out = 32, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
		  .dw = 1, .groups = 1, .bias = true },
	};
	float *first[4];
	begin();
	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
		for (int path = KERN_CONV_AUTO; path <= KERN_CONV_IM2COL; path++) {
			kern_set_threads(1);
			struct conv2d_desc d = cases[ci];
			d.path = path;
			float *out[2][4];
			struct conv c;
			if (!conv_setup(&c, &d, 40))
				continue;
			for (int t = 0; t < 2; t++) {
				kern_set_threads(t + 1);
				out[t][0] = floats(c.ny);
				out[t][1] = floats(c.nx);
				out[t][2] = floats(c.nw);
				out[t][3] = floats(d.c_out);
				kern_conv2d_fwd(&c.k, c.x, c.w, c.b, out[t][0]);
				kern_conv2d_bwd(&c.k, c.x, c.w, c.r, out[t][1], out[t][2], out[t][3]);
			}
			CHECK(memcmp(out[0][0], out[1][0], c.ny * sizeof(float)) == 0);
			CHECK(memcmp(out[0][1], out[1][1], c.nx * sizeof(float)) == 0);
			CHECK(memcmp(out[0][2], out[1][2], c.nw * sizeof(float)) == 0);
			CHECK(memcmp(out[0][3], out[1][3], d.c_out * sizeof(float)) == 0);
			CHECK(max_abs(out[0][2], c.nw) > 0);
			/* and oneDNN's chunked sums agree with im2col's */
			size_t sizes[4] = { c.ny, c.nx, c.nw, d.c_out };
			for (int i = 0; i < 4; i++) {
				if (path == KERN_CONV_AUTO)
					first[i] = out[0][i];
				else {
					double tol = 1e-5 * fmax(1, max_abs(first[i], sizes[i]));
					for (size_t j = 0; j < sizes[i]; j++)
						CHECK_NEAR(out[0][i][j], first[i][j], tol);
				}
			}
			kern_conv2d_release(&c.k);
		}
	kern_set_threads(1);
}

/* Given less workspace than its full layout, a convolution runs fewer oneDNN
 * chunks at once with the same results bit for bit; with no room for one
 * chunk AUTO takes im2col and a forced oneDNN path is refused, as is a
 * workspace without room for im2col's column buffer. */
static void test_conv2d_within(void)
{
	struct conv2d_desc cases[] = {
		/* Winograd, two chunks of 16 */
		{ .n = 32, .c_in = 16, .h = 8, .w = 8, .c_out = 16, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1,
		  .pw = 1, .dh = 1, .dw = 1, .groups = 1, .bias = true, .path = KERN_CONV_AUTO },
		/* direct, four chunks of 4 */
		{ .n = 16, .c_in = 16, .h = 7, .w = 7, .c_out = 24, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
		  .pw = 1, .dh = 1, .dw = 1, .groups = 1, .bias = true, .path = KERN_CONV_DNNL },
	};
	kern_set_threads(2);
	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
		begin();
		struct conv2d_desc d = cases[ci];
		struct conv c;
		if (!conv_setup(&c, &d, 50))
			continue;
		int full_slots = c.k.slots;
		CHECK(c.k.dnnl && full_slots >= 2 && c.k.winograd == (ci == 0));
		size_t sizes[4] = { c.ny, c.nx, c.nw, (size_t)d.c_out };
		float *ref[4], *got[4];
		for (int i = 0; i < 4; i++) {
			ref[i] = floats(sizes[i]);
			got[i] = floats(sizes[i]);
		}
		kern_conv2d_fwd(&c.k, c.x, c.w, c.b, ref[0]);
		kern_conv2d_bwd(&c.k, c.x, c.w, c.r, ref[1], ref[2], ref[3]);
		/* a byte short of the full layout: one chunk fewer at once */
		size_t full = kern_conv2d_workspace(&d);
		struct kern_conv2d k;
		CHECK(kern_conv2d_prepare_within(&k, &d, talloc(full - 1), full - 1) == KERN_OK);
		CHECK(k.dnnl && k.slots == full_slots - 1 && k.winograd == c.k.winograd);
		kern_conv2d_fwd(&k, c.x, c.w, c.b, got[0]);
		kern_conv2d_bwd(&k, c.x, c.w, c.r, got[1], got[2], got[3]);
		for (int i = 0; i < 4; i++)
			CHECK(memcmp(got[i], ref[i], sizes[i] * sizeof(float)) == 0);
		kern_conv2d_release(&k);
		/* room for im2col's column buffer only */
		size_t col = ((size_t)d.c_in * d.kh * d.kw * c.k.oh * c.k.ow * sizeof(float) + 63) & ~(size_t)63;
		struct conv2d_desc forced = d;
		forced.path = c.k.winograd ? KERN_CONV_WINOGRAD : KERN_CONV_DNNL;
		CHECK(kern_conv2d_prepare_within(&k, &forced, talloc(col), col) == KERN_ERR_WORKSPACE);
		struct conv2d_desc a = d;
		a.path = KERN_CONV_AUTO;
		CHECK(kern_conv2d_prepare_within(&k, &a, talloc(col), col) == KERN_OK);
		CHECK(!k.dnnl && k.slots == 0);
		for (int i = 0; i < 4; i++)
			memset(got[i], 0, sizes[i] * sizeof(float));
		kern_conv2d_fwd(&k, c.x, c.w, c.b, got[0]);
		kern_conv2d_bwd(&k, c.x, c.w, c.r, got[1], got[2], got[3]);
		for (int i = 0; i < 4; i++) {
			double tol = 1e-5 * fmax(1, max_abs(ref[i], sizes[i]));
			for (size_t j = 0; j < sizes[i]; j++)
				CHECK_NEAR(got[i][j], ref[i][j], tol);
		}
		kern_conv2d_release(&k);
		CHECK(kern_conv2d_prepare_within(&k, &a, talloc(64), col - 64) == KERN_ERR_WORKSPACE);
		kern_conv2d_release(&c.k);
	}
	kern_set_threads(1);
}

/* ---- pooling ---- */

struct pool { struct pool2d_desc d; int kind, oh, ow; float *x, *y, *r; int32_t *idx; };
enum { POOL_MAX, POOL_AVG, POOL_ADAPTIVE, POOL_ADAPTIVE_MAX };

static double pool_obj(void *p)
{
	struct pool *c = p;
	if (c->kind == POOL_MAX)
		kern_maxpool2d_fwd(&c->d, c->x, c->y, c->idx);
	else if (c->kind == POOL_AVG)
		kern_avgpool2d_fwd(&c->d, c->x, c->y);
	else if (c->kind == POOL_ADAPTIVE)
		kern_adaptive_avgpool2d_fwd(c->x, c->y, c->d.n, c->d.c, c->d.h, c->d.w, c->oh, c->ow);
	else
		kern_adaptive_maxpool2d_fwd(c->x, c->y, c->idx, c->d.n, c->d.c, c->d.h, c->d.w, c->oh, c->ow);
	return dot(c->y, c->r, (size_t)c->d.n * c->d.c * c->oh * c->ow);
}

static void pool_grad(const char *what, struct pool *c)
{
	size_t nx = (size_t)c->d.n * c->d.c * c->d.h * c->d.w, ny = (size_t)c->d.n * c->d.c * c->oh * c->ow;
	c->x = distinct_floats(nx);
	c->y = floats(ny);
	c->r = rand_floats(ny, -1, 1, 50);
	c->idx = talloc(ny * sizeof(int32_t));
	float *dx = floats(nx);
	pool_obj(c);
	if (c->kind == POOL_MAX)
		kern_maxpool2d_bwd(&c->d, c->idx, c->r, dx);
	else if (c->kind == POOL_AVG)
		kern_avgpool2d_bwd(&c->d, c->r, dx);
	else if (c->kind == POOL_ADAPTIVE)
		kern_adaptive_avgpool2d_bwd(c->r, dx, c->d.n, c->d.c, c->d.h, c->d.w, c->oh, c->ow);
	else
		kern_adaptive_maxpool2d_bwd(c->idx, c->r, dx, c->d.n, c->d.c, c->d.h, c->d.w, c->oh, c->ow);
	gradcheck(what, pool_obj, c, c->x, dx, nx, 1e-2f, 1e-3);
}

static void test_pool_grad(void)
{
	begin();
	struct pool2d_desc base = { .n = 2, .c = 3, .h = 7, .w = 6, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
				    .pw = 1, .dh = 1, .dw = 1, .ceil_mode = true, .count_include_pad = true };
	struct pool c = { .d = base, .kind = POOL_MAX };
	kern_pool2d_out(&c.d, &c.oh, &c.ow);
	pool_grad("maxpool ceil pad", &c);
	c.d.kh = 2; c.d.kw = 3; c.d.sh = 1; c.d.sw = 2; c.d.ph = 0; c.d.pw = 1; c.d.dh = 2; c.d.ceil_mode = false;
	kern_pool2d_out(&c.d, &c.oh, &c.ow);
	pool_grad("maxpool dilated", &c);
	c.d.ph = 1; c.d.dw = 2; c.d.ceil_mode = true; /* dilated windows that start in the padding */
	kern_pool2d_out(&c.d, &c.oh, &c.ow);
	pool_grad("maxpool dilated padded", &c);
	c = (struct pool){ .d = base, .kind = POOL_AVG };
	kern_pool2d_out(&c.d, &c.oh, &c.ow);
	pool_grad("avgpool ceil pad", &c);
	c.d.count_include_pad = false;
	pool_grad("avgpool exclude pad", &c);
	/* ceil_mode: windows 10 high over 7 rows padded to 9, the width's last
	 * window clipped */
	struct pool2d_desc over = base;
	over.kh = 10; over.sh = 4; over.kw = 3; over.sw = 2;
	c = (struct pool){ .d = over, .kind = POOL_MAX };
	kern_pool2d_out(&c.d, &c.oh, &c.ow);
	CHECK(c.oh == 1 && c.ow == 4);
	pool_grad("maxpool kernel over the padded input", &c);
	c.kind = POOL_AVG;
	pool_grad("avgpool kernel over the padded input", &c);
	c.d.count_include_pad = false;
	pool_grad("avgpool kernel over the padded input, exclude pad", &c);
	c = (struct pool){ .d = base, .kind = POOL_ADAPTIVE, .oh = 3, .ow = 4 };
	pool_grad("adaptive avgpool overlapping", &c);
	c.kind = POOL_ADAPTIVE_MAX;
	pool_grad("adaptive maxpool overlapping", &c);
	c.oh = 9; /* more outputs than rows: each row the max of several */
	pool_grad("adaptive maxpool upsampling", &c);
}

static void test_pool_reference(void)
{
	begin();
	/* output sizes, PyTorch max_pool2d(zeros(1,1,H,H), k, s, p, ceil_mode) */
	CHECK(kern_window_out(5, 3, 3, 1, 1, true) == 2); /* the last window would start in the right pad */
	CHECK(kern_window_out(6, 3, 2, 1, 1, true) == 4);
	CHECK(kern_window_out(5, 2, 2, 0, 1, true) == 3);
	CHECK(kern_window_out(7, 3, 2, 1, 1, false) == 4);
	CHECK(kern_window_out(4, 2, 2, 1, 1, true) == 3);

	float x[16] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3 }, y[9];
	int32_t idx[9];
	struct pool2d_desc d = { .n = 1, .c = 1, .h = 4, .w = 4, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
				 .pw = 1, .dh = 1, .dw = 1, .ceil_mode = true, .count_include_pad = true };
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	CHECK(oh == 3 && ow == 3);
	/* max_pool2d(x, 3, 2, 1, 1, ceil_mode=True, return_indices=True) */
	float want_max[9] = { 9, 9, 6, 9, 9, 8, 9, 9, 3 };
	int32_t want_idx[9] = { 5, 5, 7, 5, 5, 11, 12, 14, 15 };
	kern_maxpool2d_fwd(&d, x, y, idx);
	for (int i = 0; i < 9; i++) {
		CHECK_NEAR(y[i], want_max[i], 0);
		CHECK(idx[i] == want_idx[i]);
	}
	/* adaptive_max_pool2d(x, (3, 3) and (3, 5), return_indices=True): ties to
	 * the first, and with NaN at (1, 1) and (2, 2) the last NaN of a window */
	{
		float ay[15], xn[16];
		int32_t ai[15];
		const float want_a[9] = { 9, 9, 6, 9, 9, 8, 9, 9, 9 };
		const int32_t want_ai[9] = { 5, 5, 7, 5, 5, 11, 12, 14, 14 };
		kern_adaptive_maxpool2d_fwd(x, ay, ai, 1, 1, 4, 4, 3, 3);
		for (int i = 0; i < 9; i++)
			CHECK(ay[i] == want_a[i] && ai[i] == want_ai[i]);
		const float want_w[15] = { 5, 9, 9, 6, 6, 5, 9, 9, 8, 8, 9, 9, 9, 9, 8 };
		const int32_t want_wi[15] = { 4, 5, 5, 7, 7, 4, 5, 5, 11, 11, 12, 12, 14, 14, 11 };
		kern_adaptive_maxpool2d_fwd(x, ay, ai, 1, 1, 4, 4, 3, 5);
		for (int i = 0; i < 15; i++)
			CHECK(ay[i] == want_w[i] && ai[i] == want_wi[i]);
		memcpy(xn, x, sizeof xn);
		xn[5] = xn[10] = NAN;
		const int32_t want_ni[9] = { 5, 5, 7, 5, 10, 10, 12, 10, 10 };
		kern_adaptive_maxpool2d_fwd(xn, ay, ai, 1, 1, 4, 4, 3, 3);
		for (int i = 0; i < 9; i++)
			CHECK(ai[i] == want_ni[i] && (isnan(ay[i]) == (i != 2 && i != 6)));
	}
	/* avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True / False) */
	float want_in[9] = { 2.0f, 2.555555582f, 1.166666627f, 4.222222328f, 5.777777672f, 2.833333254f,
			     2.666666746f, 3.166666746f, 0.75f };
	float want_ex[9] = { 4.5f, 3.833333254f, 3.5f, 6.333333492f, 5.777777672f, 5.666666508f, 8.0f,
			     6.333333492f, 3.0f };
	kern_avgpool2d_fwd(&d, x, y);
	for (int i = 0; i < 9; i++)
		CHECK_NEAR(y[i], want_in[i], 1e-6);
	d.count_include_pad = false;
	kern_avgpool2d_fwd(&d, x, y);
	for (int i = 0; i < 9; i++)
		CHECK_NEAR(y[i], want_ex[i], 1e-6);
	/* max_pool2d(x, 2, 1, 0, dilation 2) */
	d = (struct pool2d_desc){ .n = 1, .c = 1, .h = 4, .w = 4, .kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 2, .dw = 2 };
	float want_dil[4] = { 5, 8, 9, 9 };
	int32_t want_dil_idx[4] = { 8, 11, 12, 5 };
	kern_maxpool2d_fwd(&d, x, y, idx);
	for (int i = 0; i < 4; i++) {
		CHECK_NEAR(y[i], want_dil[i], 0);
		CHECK(idx[i] == want_dil_idx[i]);
	}
	/* max_pool2d(x, 2, 1, 1, dilation 2, ceil_mode=True): windows starting in the padding */
	d.ph = d.pw = 1;
	d.ceil_mode = true;
	kern_pool2d_out(&d, &oh, &ow);
	CHECK(oh == 4 && ow == 4);
	float want_dp[16] = { 9, 5, 9, 2, 3, 5, 8, 5, 9, 9, 9, 9, 3, 5, 8, 5 }, yd[16];
	int32_t want_dp_idx[16] = { 5, 4, 5, 6, 9, 8, 11, 10, 5, 12, 5, 14, 9, 8, 11, 10 }, idxd[16];
	kern_maxpool2d_fwd(&d, x, yd, idxd);
	for (int i = 0; i < 16; i++) {
		CHECK_NEAR(yd[i], want_dp[i], 0);
		CHECK(idxd[i] == want_dp_idx[i]);
	}
	/* pairs whose two values differ, each used along its own axis:
	 * max_pool2d(x6, (2, 2), (1, 2), (1, 0), (1, 2)) of a 4x6 plane and
	 * avg_pool2d(x, (3, 2), (2, 1), (1, 0)) */
	float x6[24] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4 };
	d = (struct pool2d_desc){ .n = 1, .c = 1, .h = 4, .w = 6, .kh = 2, .kw = 2, .sh = 1, .sw = 2, .ph = 1, .dh = 1, .dw = 2 };
	kern_pool2d_out(&d, &oh, &ow);
	CHECK(oh == 5 && ow == 2);
	float want_pm[10] = { 4, 5, 5, 5, 9, 9, 9, 9, 8, 6 };
	int32_t want_pm_idx[10] = { 2, 4, 8, 4, 12, 14, 12, 14, 18, 20 };
	kern_maxpool2d_fwd(&d, x6, yd, idxd);
	for (int i = 0; i < 10; i++) {
		CHECK_NEAR(yd[i], want_pm[i], 0);
		CHECK(idxd[i] == want_pm_idx[i]);
	}
	d = (struct pool2d_desc){ .n = 1, .c = 1, .h = 4, .w = 4, .kh = 3, .kw = 2, .sh = 2, .sw = 1, .ph = 1, .dh = 1, .dw = 1,
				  .count_include_pad = true };
	kern_pool2d_out(&d, &oh, &ow);
	CHECK(oh == 2 && ow == 3);
	float want_pa[6] = { 3, 2.66666675f, 2.16666675f, 6.33333349f, 5.83333349f, 5.5f };
	kern_avgpool2d_fwd(&d, x, y);
	for (int i = 0; i < 6; i++)
		CHECK_NEAR(y[i], want_pa[i], 1e-6);
	/* adaptive_avg_pool2d(arange(35).reshape(1,1,5,7), (3,2)) */
	float a[35], want_ad[6] = { 5, 8, 15.5f, 18.5f, 26, 29 };
	for (int i = 0; i < 35; i++)
		a[i] = (float)i;
	kern_adaptive_avgpool2d_fwd(a, y, 1, 1, 5, 7, 3, 2);
	for (int i = 0; i < 6; i++)
		CHECK_NEAR(y[i], want_ad[i], 1e-6);
	/* NaN wins a max window, as in PyTorch */
	x[5] = NAN;
	d = (struct pool2d_desc){ .n = 1, .c = 1, .h = 4, .w = 4, .kh = 2, .kw = 2, .sh = 2, .sw = 2, .dh = 1, .dw = 1 };
	kern_maxpool2d_fwd(&d, x, y, idx);
	CHECK(isnan(y[0]) && idx[0] == 5);
}

/* ceil_mode windows larger than the padded input, as PyTorch 1.13 sizes
 * and computes them: the last window may overhang the padded input by up to
 * stride - 1; max and the sums clip it to the input, the divisor with
 * count_include_pad to the input and its padding. */
static void test_pool_overhang(void)
{
	begin();
	/* max_pool2d(zeros(1,1,H,H), k, s, p, dilation, ceil_mode=True).shape[-1]; 0: "Output size is too small" */
	static const int sizes[][6] = {
		/* H, k, s, p, dilation, output */
		{ 3, 4, 2, 0, 1, 1 }, { 3, 4, 1, 0, 1, 0 }, { 3, 3, 3, 0, 2, 1 }, /* the last dilated to 5 */
		{ 2, 5, 2, 2, 1, 2 }, { 4, 6, 3, 3, 1, 3 }, { 1, 3, 2, 1, 1, 1 },
	};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		CHECK(kern_window_out(sizes[i][0], sizes[i][1], sizes[i][2], sizes[i][3], sizes[i][4], true) == sizes[i][5]);
	CHECK(kern_window_out(3, 4, 2, 0, 1, false) == 0); /* no overhang without ceil_mode */

	float x[16] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3 }, y[4];
	int32_t idx[4];
	/* kernel (6, 5), stride (3, 2), padding (1, 2) over 4 x 4: one row of
	 * windows 6 high over 6 padded rows, three 5 wide, the last over 2 + 2 */
	struct pool2d_desc d = { .n = 1, .c = 1, .h = 4, .w = 4, .kh = 6, .kw = 5, .sh = 3, .sw = 2, .ph = 1,
				 .pw = 2, .dh = 1, .dw = 1, .ceil_mode = true, .count_include_pad = true };
	int oh, ow;
	kern_pool2d_out(&d, &oh, &ow);
	CHECK(oh == 1 && ow == 3);
	float want_max[3] = { 9, 9, 9 };
	int32_t want_idx[3] = { 5, 5, 14 };
	kern_maxpool2d_fwd(&d, x, y, idx);
	for (int i = 0; i < 3; i++) {
		CHECK_NEAR(y[i], want_max[i], 0);
		CHECK(idx[i] == want_idx[i]);
	}
	/* avg_pool2d: divisors 30, 30, 24 (the last window's 7 columns cut to
	 * the 6 of input and padding), then 12, 16, 8 without the padding */
	float want_in[3] = { 2.0666666f, 2.66666675f, 1.58333337f }, want_ex[3] = { 5.16666651f, 5.0f, 4.75f };
	float dy[3] = { 1, 2, 3 }, dx[16];
	float want_din[4] = { 0.100000009f, 0.100000009f, 0.225000009f, 0.191666663f }; /* each row's */
	float want_dex[4] = { 0.208333343f, 0.208333343f, 0.583333373f, 0.5f };
	for (int cip = 1; cip >= 0; cip--) {
		d.count_include_pad = cip;
		kern_avgpool2d_fwd(&d, x, y);
		for (int i = 0; i < 3; i++)
			CHECK_NEAR(y[i], cip ? want_in[i] : want_ex[i], 1e-6);
		kern_avgpool2d_bwd(&d, dy, dx);
		for (int i = 0; i < 16; i++)
			CHECK_NEAR(dx[i], cip ? want_din[i % 4] : want_dex[i % 4], 1e-6);
	}
	/* max_pool2d(x, (2, 3), (3, 3), (1, 1), dilation (3, 2)): taps 5 wide
	 * over 6 padded columns, the last window from column 2 to 6 */
	d = (struct pool2d_desc){ .n = 1, .c = 1, .h = 4, .w = 4, .kh = 2, .kw = 3, .sh = 3, .sw = 3, .ph = 1, .pw = 1,
				  .dh = 3, .dw = 2, .ceil_mode = true };
	kern_pool2d_out(&d, &oh, &ow);
	CHECK(oh == 2 && ow == 2);
	float want_dil[4] = { 8, 5, 8, 5 };
	int32_t want_dil_idx[4] = { 11, 10, 11, 10 };
	kern_maxpool2d_fwd(&d, x, y, idx);
	for (int i = 0; i < 4; i++) {
		CHECK_NEAR(y[i], want_dil[i], 0);
		CHECK(idx[i] == want_dil_idx[i]);
	}
}

/* ---- zero padding ---- */

struct zpad { struct pad2d_desc d; int oh, ow; float *x, *y, *r; };

static double zpad_obj(void *p)
{
	struct zpad *c = p;
	kern_zeropad2d_fwd(&c->d, c->x, c->y);
	return dot(c->y, c->r, (size_t)c->d.n * c->d.c * c->oh * c->ow);
}

/* Each side alike: padding, cropping and both; against differences, the
 * reference of PyTorch (by hand for sides that leave only zeros), and dx
 * written whole over whatever it held. */
static void test_zeropad(void)
{
	begin();
	static const int sides[][4] = { { 1, 2, 3, 0 }, { -1, 2, 0, -3 }, { 2, -3, -1, 1 } };
	for (size_t k = 0; k < sizeof sides / sizeof sides[0]; k++) {
		struct zpad c = { .d = { .n = 2, .c = 3, .h = 5, .w = 4, .left = sides[k][0], .right = sides[k][1],
					 .top = sides[k][2], .bottom = sides[k][3] } };
		kern_pad2d_out(&c.d, &c.oh, &c.ow);
		CHECK(c.oh == 5 + sides[k][2] + sides[k][3] && c.ow == 4 + sides[k][0] + sides[k][1]);
		size_t nx = (size_t)2 * 3 * 5 * 4, ny = (size_t)2 * 3 * c.oh * c.ow;
		c.x = rand_floats(nx, -1, 1, 7);
		c.y = floats(ny);
		c.r = rand_floats(ny, -1, 1, 8);
		float *dx = rand_floats(nx, -1, 1, 9);
		kern_zeropad2d_bwd(&c.d, c.r, dx);
		gradcheck("zeropad2d", zpad_obj, &c, c.x, dx, nx, 1e-2f, 1e-3);
	}
	/* F.pad(arange(12.).reshape(1,1,3,4), (1,-2,-1,2)), and the input's
	 * gradient for dy = 1, 2, ..., 12 */
	struct pad2d_desc d = { .n = 1, .c = 1, .h = 3, .w = 4, .left = 1, .right = -2, .top = -1, .bottom = 2 };
	float x[12], y[12], dy[12], dx[12];
	float want_y[12] = { 0, 4, 5, 0, 8, 9, 0, 0, 0, 0, 0, 0 }, want_dx[12] = { 0, 0, 0, 0, 2, 3, 0, 0, 5, 6, 0, 0 };
	for (int i = 0; i < 12; i++) {
		x[i] = (float)i;
		dy[i] = (float)(i + 1);
		dx[i] = NAN;
	}
	int oh, ow;
	kern_pad2d_out(&d, &oh, &ow);
	CHECK(oh == 4 && ow == 3);
	kern_zeropad2d_fwd(&d, x, y);
	kern_zeropad2d_bwd(&d, dy, dx);
	for (int i = 0; i < 12; i++) {
		CHECK(y[i] == want_y[i]);
		CHECK(dx[i] == want_dx[i]);
	}
	/* ZeroPad2d((3, -2, 0, 0)) of a row of 2: the crop leaves only padding */
	d = (struct pad2d_desc){ .n = 1, .c = 1, .h = 1, .w = 2, .left = 3, .right = -2 };
	x[0] = x[1] = 1;
	y[0] = y[1] = y[2] = NAN;
	dx[0] = dx[1] = NAN;
	kern_zeropad2d_fwd(&d, x, y);
	kern_zeropad2d_bwd(&d, dy, dx);
	CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0 && dx[0] == 0 && dx[1] == 0);
}

/* ---- normalisation ---- */

struct norm { float *x, *g, *b, *y, *r, *mean, *invstd; int n, c, hw; bool layer; };

static double norm_obj(void *p)
{
	struct norm *c = p;
	if (c->layer)
		kern_layernorm_fwd(c->x, c->g, c->b, c->y, c->mean, c->invstd, c->n, c->c, 1e-5f);
	else
		kern_batchnorm2d_fwd_train(c->x, c->g, c->b, c->y, NULL, NULL, c->mean, c->invstd, c->n, c->c,
					   c->hw, 1e-5f, 0.1f);
	return dot(c->y, c->r, (size_t)c->n * c->c * c->hw);
}

static void norm_grad(bool layer, bool affine)
{
	struct norm c = { .n = 3, .c = layer ? 7 : 2, .hw = layer ? 1 : 5, .layer = layer };
	size_t nx = (size_t)c.n * c.c * c.hw, np = layer ? (size_t)c.c : (size_t)c.c, ns = layer ? c.n : c.c;
	c.x = rand_floats(nx, -2, 2, 60);
	c.g = affine ? rand_floats(np, 0.5f, 1.5f, 61) : NULL;
	c.b = affine ? rand_floats(np, -1, 1, 62) : NULL;
	c.y = floats(nx);
	c.r = rand_floats(nx, -1, 1, 63);
	c.mean = floats(ns);
	c.invstd = floats(ns);
	float *dx = floats(nx), *dg = floats(np), *db = floats(np);
	norm_obj(&c);
	if (layer)
		kern_layernorm_bwd(c.x, c.g, c.mean, c.invstd, c.r, dx, affine ? dg : NULL, affine ? db : NULL, c.n, c.c);
	else
		kern_batchnorm2d_bwd(c.x, c.g, c.mean, c.invstd, c.r, dx, affine ? dg : NULL, affine ? db : NULL,
				     c.n, c.c, c.hw);
	const char *name = layer ? "layernorm" : "batchnorm";
	gradcheck(name, norm_obj, &c, c.x, dx, nx, 1e-2f, 2e-3);
	if (affine) {
		gradcheck(name, norm_obj, &c, c.g, dg, np, 1e-2f, 1e-3);
		gradcheck(name, norm_obj, &c, c.b, db, np, 1e-2f, 1e-3);
	}
}

static void test_norm_grad(void)
{
	begin();
	norm_grad(false, true);
	norm_grad(false, false);
	norm_grad(true, true);
	norm_grad(true, false);
}

static void test_batchnorm_reference(void)
{
	begin();
	/* BatchNorm2d(2), weight (1.5, -0.5), bias (0.25, 1), running_mean (0.1, -0.2),
	 * running_var (2, 0.5), on x (3, 2, 2, 1) below; train, then eval */
	float x[12] = { 1, 2, 3, 4, -1, 0.5f, 2, -3, 0, 1, 1, 7 }, g[2] = { 1.5f, -0.5f }, b[2] = { 0.25f, 1 };
	float rm[2] = { 0.1f, -0.2f }, rv[2] = { 2, 0.5f }, mean[2], invstd[2], y[12];
	float want[12] = { 0.920816541f, 2.530776024f, 0.890235782f, 0.725589514f, -2.299102783f, 0.115836740f,
			   1.054882050f, 1.878113627f, -0.689143062f, 0.920816541f, 1.219528437f, 0.231650621f };
	float want_eval[12] = { 1.175778985f, 2.262799263f, -0.180869281f, -0.581616759f, -0.998261631f,
				0.632268786f, 0.219878197f, 2.223615646f, 0.088758670f, 1.175778985f,
				0.620625675f, -1.783859253f };
	kern_batchnorm2d_fwd_train(x, g, b, y, rm, rv, mean, invstd, 3, 2, 2, 1e-5f, 0.1f);
	for (int i = 0; i < 12; i++)
		CHECK_NEAR(y[i], want[i], 2e-6);
	CHECK_NEAR(rm[0], 0.148333326f, 1e-6);
	CHECK_NEAR(rm[1], 0.053333342f, 1e-6);
	CHECK_NEAR(rv[0], 1.904166579f, 1e-6);
	CHECK_NEAR(rv[1], 1.556666613f, 1e-6);
	kern_batchnorm2d_fwd_eval(x, g, b, rm, rv, y, 3, 2, 2, 1e-5f);
	for (int i = 0; i < 12; i++)
		CHECK_NEAR(y[i], want_eval[i], 2e-6);
	/* LayerNorm(4), weight (1, 2, -1, 0.5), bias (0, 0.1, 0.2, 0.3) */
	float lx[8] = { 1, 2, 3, 5, -2, 0, 0, 4 }, lg[4] = { 1, 2, -1, 0.5f }, lb[4] = { 0, 0.1f, 0.2f, 0.3f };
	float want_ln[8] = { -1.183213234f, -0.914182782f, 0.030969575f, 1.060636997f, -1.147077560f,
			     -0.358831018f, 0.429415524f, 1.102954268f };
	kern_layernorm_fwd(lx, lg, lb, y, mean, invstd, 2, 4, 1e-5f);
	for (int i = 0; i < 8; i++)
		CHECK_NEAR(y[i], want_ln[i], 2e-6);
}

/* eps=0 as PyTorch 1.13 takes it: a batch norm channel whose values are
 * all equal (0.1f, which float sums do not hold exactly) gives its bias in
 * training, with no gradient to its input or weight (InvStd = 0); a layer
 * norm row whose values are all equal gives NaN, and with eps > 0 its bias */
static void test_norm_eps0(void)
{
	begin();
	enum { N = 4, C = 2, HW = 9 };
	float x[N * C * HW], dy[N * C * HW], y[N * C * HW], dx[N * C * HW];
	float g[C] = { 1.5f, 0.5f }, b[C] = { 0.25f, -1 }, rm[C] = { 0 }, rv[C] = { 1, 1 }, mean[C], invstd[C], dg[C] = { 0 }, db[C] = { 0 };
	for (int i = 0; i < N * C * HW; i++) {
		x[i] = (i / HW) % C ? 0.1f : (float)(i % 7) - 3;
		dy[i] = (float)(i % 5) - 2;
	}
	kern_batchnorm2d_fwd_train(x, g, b, y, rm, rv, mean, invstd, N, C, HW, 0.0f, 0.1f);
	CHECK(mean[1] == 0.1f && invstd[1] == 0);
	kern_batchnorm2d_bwd(x, g, mean, invstd, dy, dx, dg, db, N, C, HW);
	float sdy = 0;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < HW; j++) {
			CHECK(y[(i * C + 1) * HW + j] == b[1]);
			CHECK(dx[(i * C + 1) * HW + j] == 0);
			CHECK(isfinite(y[i * C * HW + j]) && isfinite(dx[i * C * HW + j]));
			sdy += dy[(i * C + 1) * HW + j];
		}
	CHECK(dg[1] == 0 && db[1] == sdy);
	CHECK_NEAR(rv[1], 0.9f, 0);
	for (int d = 1; d <= 40; d++) {
		float row[40], out[40], lb[40];
		for (int j = 0; j < d; j++) {
			row[j] = 0.1f;
			lb[j] = (float)j;
		}
		kern_layernorm_fwd(row, NULL, lb, out, mean, invstd, 1, d, 0.0f);
		CHECK(isnan(out[0]) && isnan(out[d - 1]));
		kern_layernorm_fwd(row, NULL, lb, out, mean, invstd, 1, d, 1e-5f);
		CHECK(out[0] == 0 && out[d - 1] == lb[d - 1]);
	}
}

/* ---- embedding and dropout ---- */

struct emb { int32_t *idx; float *w, *y, *r; int n, vocab, dim; };

static double emb_obj(void *p)
{
	struct emb *c = p;
	CHECK(kern_embedding_fwd(c->idx, c->w, c->y, c->n, c->vocab, c->dim) == KERN_OK);
	return dot(c->y, c->r, (size_t)c->n * c->dim);
}

static void test_embedding(void)
{
	begin();
	int32_t idx[6] = { 2, 0, 2, 4, 1, 2 };
	struct emb c = { .idx = idx, .n = 6, .vocab = 5, .dim = 3 };
	c.w = rand_floats(15, -1, 1, 70);
	c.y = floats(18);
	c.r = rand_floats(18, -1, 1, 71);
	emb_obj(&c);
	CHECK(memcmp(c.y + 3, c.w, 3 * sizeof(float)) == 0);
	CHECK(memcmp(c.y + 9, c.w + 12, 3 * sizeof(float)) == 0);
	float *dw = floats(15);
	CHECK(kern_embedding_bwd(idx, c.r, dw, 6, 5, 3, -1) == KERN_OK);
	gradcheck("embedding", emb_obj, &c, c.w, dw, 15, 1e-2f, 1e-3);
	/* repeated index 2 sums three rows; padding_idx 2 gets nothing */
	float *dwp = floats(15);
	CHECK(kern_embedding_bwd(idx, c.r, dwp, 6, 5, 3, 2) == KERN_OK);
	CHECK_NEAR(dw[6], (double)c.r[0] + c.r[6] + c.r[15], 1e-6);
	CHECK(dwp[6] == 0 && dwp[7] == 0 && dwp[8] == 0);
	CHECK(dwp[0] == dw[0] && dwp[12] == dw[12]);
	/* an index out of range is refused and nothing is written */
	int32_t bad[3] = { 1, 5, 0 }, neg[2] = { 0, -1 };
	float sentinel[9] = { 7, 7, 7, 7, 7, 7, 7, 7, 7 };
	CHECK(kern_embedding_fwd(bad, c.w, sentinel, 3, 5, 3) == KERN_ERR_INDEX);
	CHECK(kern_embedding_fwd(neg, c.w, sentinel, 2, 5, 3) == KERN_ERR_INDEX);
	CHECK(kern_embedding_bwd(bad, c.r, sentinel, 3, 5, 3, -1) == KERN_ERR_INDEX);
	for (int i = 0; i < 9; i++)
		CHECK(sentinel[i] == 7);
}

struct drop { float *x, *y, *r; uint8_t *mask; size_t n; float p; struct rng rng; };

static double drop_obj(void *p)
{
	struct drop *c = p;
	kern_dropout_fwd(c->x, c->y, c->mask, c->n, c->p, &c->rng);
	return dot(c->y, c->r, c->n);
}

static void test_dropout(void)
{
	begin();
	size_t n = 20000;
	float p = 0.3f;
	float *x = rand_floats(n, -1, 1, 80), *y = floats(n), *y2 = floats(n);
	uint8_t *m = talloc(n), *m2 = talloc(n);
	struct rng r = rng_stream(1234, RNG_DROPOUT, 0, 7);
	kern_dropout_fwd(x, y, m, n, p, &r);
	size_t kept = 0, agree = 0;
	for (size_t i = 0; i < n; i++) {
		kept += m[i];
		agree += m[i] == (rng_uniform(&r, i) >= p);
		if (m[i])
			CHECK_NEAR(y[i], x[i] * (1.0f / (1.0f - p)), 0);
		else
			CHECK(y[i] == 0);
	}
	CHECK(agree == n);
	/* keep rate 0.7; 4 standard deviations of a binomial over 20000 is 0.013 */
	CHECK_NEAR((double)kept / n, 0.7, 0.013);
	/* the same key gives the same mask on any thread count; the next step another */
	kern_set_threads(2);
	kern_dropout_fwd(x, y2, m2, n, p, &r);
	CHECK(memcmp(m, m2, n) == 0 && memcmp(y, y2, n * sizeof(float)) == 0);
	struct rng next = rng_stream(1234, RNG_DROPOUT, 0, 8);
	kern_dropout_fwd(x, y2, m2, n, p, &next);
	CHECK(memcmp(m, m2, n) != 0);
	kern_set_threads(1);
	/* p = 0 keeps everything unscaled; p = 1 drops everything without NaN */
	kern_dropout_fwd(x, y2, m2, n, 0.0f, &r);
	CHECK(memcmp(x, y2, n * sizeof(float)) == 0);
	kern_dropout_fwd(x, y2, m2, n, 1.0f, &r);
	CHECK(max_abs(y2, n) == 0 && m2[0] == 0 && m2[n - 1] == 0);
	kern_dropout_bwd(x, m2, y2, n, 1.0f);
	CHECK(max_abs(y2, n) == 0);
	/* backward against the forward with its mask fixed by the key */
	struct drop c = { .n = 50, .p = 0.4f, .rng = r };
	c.x = rand_floats(50, -1, 1, 81);
	c.y = floats(50);
	c.r = rand_floats(50, -1, 1, 82);
	c.mask = talloc(50);
	float *dx = floats(50);
	drop_obj(&c);
	kern_dropout_bwd(c.r, c.mask, dx, 50, c.p);
	gradcheck("dropout", drop_obj, &c, c.x, dx, 50, 1e-2f, 1e-3);
}

/* dropout1d and dropout2d: 4000 channels of 7 elements, each channel kept
 * or dropped whole by draw k of the stream, on any thread count */
static void test_dropout_runs(void)
{
	begin();
	size_t runs = 4000, inner = 7, n = runs * inner;
	float p = 0.4f, scale = 1.0f / (1.0f - p);
	float *x = rand_floats(n, -1, 1, 83), *y = floats(n), *y2 = floats(n), *dx = floats(n);
	uint8_t *m = talloc(n), *m2 = talloc(n);
	struct rng r = rng_stream(99, RNG_DROPOUT, 1, 3);
	kern_dropout_runs_fwd(x, y, m, n, inner, p, &r);
	size_t kept = 0, bad = 0;
	for (size_t k = 0; k < runs; k++) {
		uint8_t want = rng_uniform(&r, k) >= p;
		kept += want;
		for (size_t j = 0; j < inner; j++) {
			size_t i = k * inner + j;
			bad += m[i] != want || y[i] != (want ? x[i] * scale : 0.0f);
		}
	}
	CHECK(bad == 0);
	/* keep rate 0.6; 4 standard deviations of a binomial over 4000 is 0.031 */
	CHECK_NEAR((double)kept / runs, 0.6, 0.031);
	kern_set_threads(2);
	kern_dropout_runs_fwd(x, y2, m2, n, inner, p, &r);
	kern_set_threads(1);
	CHECK(memcmp(m, m2, n) == 0 && memcmp(y, y2, n * sizeof(float)) == 0);
	/* backward through the element mask: a dropped channel passes nothing */
	kern_dropout_bwd(x, m, dx, n, p);
	for (size_t i = 0; i < n; i++)
		CHECK(dx[i] == (m[i] ? x[i] * scale : 0.0f));
	/* p = 1 drops everything, p = 0 keeps everything unscaled */
	kern_dropout_runs_fwd(x, y2, m2, n, inner, 1.0f, &r);
	CHECK(max_abs(y2, n) == 0 && m2[0] == 0 && m2[n - 1] == 0);
	kern_dropout_runs_fwd(x, y2, m2, n, inner, 0.0f, &r);
	CHECK(memcmp(x, y2, n * sizeof(float)) == 0);
}

/* ---- activations and softmax ---- */

enum { ACT_RELU, ACT_GELU, ACT_GELU_TANH, ACT_TANH, ACT_SIGMOID, ACT_SOFTMAX, ACT_LOG_SOFTMAX };
struct act { int kind; float *x, *y, *r; size_t n; int outer, dim, inner; };

static void act_fwd(struct act *c)
{
	switch (c->kind) {
	case ACT_RELU: kern_relu_fwd(c->x, c->y, c->n); break;
	case ACT_GELU: kern_gelu_fwd(c->x, c->y, c->n, KERN_GELU_NONE); break;
	case ACT_GELU_TANH: kern_gelu_fwd(c->x, c->y, c->n, KERN_GELU_TANH); break;
	case ACT_TANH: kern_tanh_fwd(c->x, c->y, c->n); break;
	case ACT_SIGMOID: kern_sigmoid_fwd(c->x, c->y, c->n); break;
	case ACT_SOFTMAX: kern_softmax_fwd(c->x, c->y, c->outer, c->dim, c->inner); break;
	case ACT_LOG_SOFTMAX: kern_log_softmax_fwd(c->x, c->y, c->outer, c->dim, c->inner); break;
	}
}

static double act_obj(void *p)
{
	struct act *c = p;
	act_fwd(c);
	return dot(c->y, c->r, c->n);
}

static void act_grad(const char *what, int kind, int outer, int dim, int inner)
{
	struct act c = { .kind = kind, .n = (size_t)outer * dim * inner, .outer = outer, .dim = dim, .inner = inner };
	c.x = rand_floats(c.n, -3, 3, 90);
	for (size_t i = 0; i < c.n; i++) /* keep relu's kink out of reach of eps */
		if (fabsf(c.x[i]) < 0.1f)
			c.x[i] += 0.2f;
	c.y = floats(c.n);
	c.r = rand_floats(c.n, -1, 1, 91);
	float *dx = floats(c.n);
	act_fwd(&c);
	switch (kind) {
	case ACT_RELU: kern_relu_bwd(c.y, c.r, dx, c.n); break;
	case ACT_GELU: kern_gelu_bwd(c.x, c.r, dx, c.n, KERN_GELU_NONE); break;
	case ACT_GELU_TANH: kern_gelu_bwd(c.x, c.r, dx, c.n, KERN_GELU_TANH); break;
	case ACT_TANH: kern_tanh_bwd(c.y, c.r, dx, c.n); break;
	case ACT_SIGMOID: kern_sigmoid_bwd(c.y, c.r, dx, c.n); break;
	case ACT_SOFTMAX: kern_softmax_bwd(c.y, c.r, dx, outer, dim, inner); break;
	case ACT_LOG_SOFTMAX: kern_log_softmax_bwd(c.y, c.r, dx, outer, dim, inner); break;
	}
	gradcheck(what, act_obj, &c, c.x, dx, c.n, 1e-2f, 1e-3);
}

static void test_activation_grad(void)
{
	begin();
	act_grad("relu", ACT_RELU, 1, 40, 1);
	act_grad("gelu", ACT_GELU, 1, 40, 1);
	act_grad("gelu tanh", ACT_GELU_TANH, 1, 40, 1);
	act_grad("tanh", ACT_TANH, 1, 40, 1);
	act_grad("sigmoid", ACT_SIGMOID, 1, 40, 1);
	act_grad("softmax rows", ACT_SOFTMAX, 3, 4, 1);
	act_grad("softmax inner", ACT_SOFTMAX, 2, 5, 3);
	act_grad("softmax two tiles", ACT_SOFTMAX, 1, 3, 70);
	act_grad("log_softmax rows", ACT_LOG_SOFTMAX, 3, 4, 1);
	act_grad("log_softmax inner", ACT_LOG_SOFTMAX, 2, 5, 3);
	act_grad("log_softmax two tiles", ACT_LOG_SOFTMAX, 1, 3, 70);
}

/* act_elem.h's activations: gradients by finite differences, the inputs
 * kept 0.1 from the kinks lo and hi (0, softplus's threshold / beta, the
 * bounds of the hard ones) */
struct pact { enum kern_act k; float a, b; float *x, *y, *r; size_t n; };

static double pact_obj(void *p)
{
	struct pact *c = p;
	kern_act_fwd(c->k, c->x, c->y, c->n, c->a, c->b);
	return dot(c->y, c->r, c->n);
}

static void pact_grad(const char *what, enum kern_act k, float a, float b, float lo, float hi)
{
	struct pact c = { .k = k, .a = a, .b = b, .n = 60 };
	c.x = rand_floats(c.n, -4, 4, 92);
	for (size_t i = 0; i < c.n; i++)
		if (fabsf(c.x[i] - lo) < 0.1f || fabsf(c.x[i] - hi) < 0.1f)
			c.x[i] += 0.2f;
	c.y = floats(c.n);
	c.r = rand_floats(c.n, -1, 1, 93);
	float *dx = floats(c.n);
	kern_act_bwd(k, c.x, c.r, dx, c.n, a, b);
	gradcheck(what, pact_obj, &c, c.x, dx, c.n, 1e-2f, 1e-3);
}

static void test_param_activation_grad(void)
{
	begin();
	pact_grad("leaky_relu", KERN_LEAKY_RELU, 0.01f, 0, 0, 0);
	pact_grad("leaky_relu, a negative slope", KERN_LEAKY_RELU, -0.5f, 0, 0, 0);
	pact_grad("elu", KERN_ELU, 1, 1, 0, 0);
	pact_grad("elu alpha 0.7", KERN_ELU, 0.7f, 1, 0, 0);
	pact_grad("silu", KERN_SILU, 0, 0, 100, 100);
	pact_grad("softplus", KERN_SOFTPLUS, 1, 20, 20, 20);
	pact_grad("softplus beta 2 threshold 3", KERN_SOFTPLUS, 2, 3, 1.5f, 1.5f);
	pact_grad("softplus beta -1", KERN_SOFTPLUS, -1, 20, -20, -20);
	pact_grad("hardtanh", KERN_HARDTANH, -1, 1, -1, 1);
	pact_grad("hardtanh -0.5 2", KERN_HARDTANH, -0.5f, 2, -0.5f, 2);
	pact_grad("hardsigmoid", KERN_HARDSIGMOID, 0, 0, -3, 3);
	pact_grad("hardswish", KERN_HARDSWISH, 0, 0, -3, 3);
	pact_grad("mish", KERN_MISH, 0, 0, 100, 100);
	pact_grad("selu", KERN_ELU, (float)KERN_SELU_ALPHA * (float)KERN_SELU_SCALE, (float)KERN_SELU_SCALE, 0, 0);
	pact_grad("celu", KERN_CELU, 1, 1, 0, 0);
	pact_grad("celu alpha 0.5", KERN_CELU, 0.5f, 2, 0, 0);
	pact_grad("celu alpha -2", KERN_CELU, -2, -0.5f, 0, 0);
	pact_grad("logsigmoid", KERN_LOGSIGMOID, 0, 0, 100, 100);
	pact_grad("softsign", KERN_SOFTSIGN, 0, 0, 0, 0);
	pact_grad("tanhshrink", KERN_TANHSHRINK, 0, 0, 100, 100);
	pact_grad("softshrink", KERN_SOFTSHRINK, 0.5f, 0, -0.5f, 0.5f);
	pact_grad("hardshrink", KERN_HARDSHRINK, 1.5f, 0, -1.5f, 1.5f);
	pact_grad("threshold", KERN_THRESHOLD, 0.3f, -2, 0.3f, 0.3f);
}

/* PyTorch 1.13's F.leaky_relu, F.elu, F.silu, F.softplus (x7), F.hardtanh,
 * F.relu6, F.hardsigmoid, F.hardswish, F.mish and F.selu (x12), F.celu,
 * F.logsigmoid, F.softsign, F.tanhshrink (x7), F.softshrink, F.hardshrink
 * and F.threshold (xs: both sides of each lambd, at it) of x and the
 * gradient of their sum: far out, near 0 and at 0 (the negative side's
 * slope, as PyTorch's), at the bounds and kinks of the hard ones, softplus
 * over its threshold too.  selu is elu at exec_act_kind's numbers (the
 * test_exec checks that a plan's selu gets them), relu6 hardtanh(0, 6). */
static void test_param_activation_reference(void)
{
	begin();
	static const float x7[12] = { -30, -1.5f, -0.2f, 0, 0.7f, 2, 30 };
	static const float x12[12] = { -30, -3, -1.5f, -1, -0.2f, 0, 0.7f, 1, 2, 3, 6, 30 };
	static const float xs[12] = { -30, -1.5f, -0.5f, -0.3f, -0.2f, 0, 0.1f, 0.2f, 0.5f, 0.7f, 2, 30 };
	float selu_a = (float)KERN_SELU_ALPHA * (float)KERN_SELU_SCALE, selu_b = (float)KERN_SELU_SCALE;
	const struct {
		const char *what;
		enum kern_act k;
		float a, b;
		const float *x;
		int n;
		float y[12], g[12];
	} c[] = {
		{ "leaky_relu 0.01", KERN_LEAKY_RELU, 0.01f, 0, x7, 7,
		  { -0.299999982f, -0.0149999997f, -0.00200000009f, 0, 0.699999988f, 2, 30 },
		  { 0.00999999978f, 0.00999999978f, 0.00999999978f, 0.00999999978f, 1, 1, 1 } },
		{ "leaky_relu -0.5", KERN_LEAKY_RELU, -0.5f, 0, x7, 7, { 15, 0.75f, 0.100000001f, -0.0f, 0.699999988f, 2, 30 },
		  { -0.5f, -0.5f, -0.5f, -0.5f, 1, 1, 1 } },
		{ "elu 1", KERN_ELU, 1, 1, x7, 7, { -1, -0.776869833f, -0.181269228f, 0, 0.699999988f, 2, 30 },
		  { 9.35762291e-14f, 0.223130167f, 0.818730772f, 1, 1, 1, 1 } },
		{ "elu 0.7", KERN_ELU, 0.7f, 1, x7, 7, { -0.699999988f, -0.543808877f, -0.126888454f, 0, 0.699999988f, 2, 30 },
		  { 6.55033617e-14f, 0.156191111f, 0.573111534f, 0.699999988f, 1, 1, 1 } },
		{ "silu", KERN_SILU, 0, 0, x7, 7, { -2.80728695e-12f, -0.273638278f, -0.0900332034f, 0, 0.467731416f, 1.76159406f, 30 },
		  { -2.71371077e-12f, -0.0412941612f, 0.40066269f, 0.5f, 0.823386729f, 1.09078431f, 1 } },
		{ "softplus 1 20", KERN_SOFTPLUS, 1, 20, x7, 7,
		  { 9.35762291e-14f, 0.201413289f, 0.598138869f, 0.693147182f, 1.10318601f, 2.12692809f, 30 },
		  { 9.35762291e-14f, 0.182425514f, 0.450165987f, 0.5f, 0.668187797f, 0.880797088f, 1 } },
		{ "softplus 2 0.2", KERN_SOFTPLUS, 2, 0.2f, x7, 7,
		  { 4.37825545e-27f, 0.024293676f, 0.256507635f, 0.346573591f, 0.699999988f, 2, 30 },
		  { 8.75651089e-27f, 0.0474258736f, 0.401312321f, 0.5f, 1, 1, 1 } },
		{ "softplus -1 20", KERN_SOFTPLUS, -1, 20, x7, 7,
		  { -30, -1.70141327f, -0.798138857f, -0.693147182f, -0.403186053f, -0.126928002f, -9.35762291e-14f },
		  { 1, 0.817574501f, 0.549834013f, 0.5f, 0.331812203f, 0.119202919f, 9.35762291e-14f } },
		{ "hardtanh -1 1", KERN_HARDTANH, -1, 1, x12, 12, { -1, -1, -1, -1, -0.200000003f, 0, 0.699999988f, 1, 1, 1, 1, 1 },
		  { 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0 } },
		{ "hardtanh -0.5 2", KERN_HARDTANH, -0.5f, 2, x12, 12,
		  { -0.5f, -0.5f, -0.5f, -0.5f, -0.200000003f, 0, 0.699999988f, 1, 2, 2, 2, 2 }, { 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0 } },
		{ "relu6", KERN_HARDTANH, 0, 6, x12, 12, { 0, 0, 0, 0, 0, 0, 0.699999988f, 1, 2, 3, 6, 6 },
		  { 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0 } },
		{ "hardsigmoid", KERN_HARDSIGMOID, 0, 0, x12, 12,
		  { 0, 0, 0.25f, 0.333333343f, 0.466666669f, 0.5f, 0.616666675f, 0.666666687f, 0.833333313f, 1, 1, 1 },
		  { 0, 0, 0.166666672f, 0.166666672f, 0.166666672f, 0.166666672f, 0.166666672f, 0.166666672f, 0.166666672f, 0, 0, 0 } },
		{ "hardswish", KERN_HARDSWISH, 0, 0, x12, 12,
		  { -0.0f, -0.0f, -0.375f, -0.333333343f, -0.0933333337f, 0, 0.431666642f, 0.666666687f, 1.66666663f, 3, 6, 30 },
		  { 0, -0.5f, 0, 0.166666657f, 0.433333337f, 0.5f, 0.733333349f, 0.833333373f, 1.16666675f, 1.5f, 1, 1 } },
		{ "mish", KERN_MISH, 0, 0, x12, 12,
		  { -2.80728695e-12f, -0.145647466f, -0.298099756f, -0.30340144f, -0.107144788f, 0, 0.561148345f, 0.865098357f, 1.943959f,
		    2.98653507f, 5.99992657f, 30 },
		  { -2.71371098e-12f, -0.0933931246f, -0.0640978143f, 0.0592167303f, 0.471530259f, 0.600000024f, 0.968794882f, 1.04903626f,
		    1.06931794f, 1.02110696f, 1.00013399f, 1 } },
		{ "selu", KERN_ELU, selu_a, selu_b, x12, 12,
		  { -1.75809932f, -1.6705687f, -1.36581433f, -1.11133075f, -0.318689317f, 0, 0.73549068f, 1.05070102f, 2.10140204f,
		    3.15210295f, 6.30420589f, 31.5210304f },
		  { 1.64516309e-13f, 0.0875306055f, 0.392284989f, 0.64676863f, 1.43940997f, 1.75809932f, 1.05070102f, 1.05070102f,
		    1.05070102f, 1.05070102f, 1.05070102f, 1.05070102f } },
		{ "celu 1", KERN_CELU, 1, 1, x7, 7,
		  { -1, -0.776869833f, -0.181269228f, 0, 0.699999988f, 2, 30 },
		  { 9.35762291e-14f, 0.223130167f, 0.818730772f, 1, 1, 1, 1 } },
		{ "celu 0.5", KERN_CELU, 0.5f, 2, x7, 7,
		  { -0.5f, -0.475106478f, -0.164839983f, 0, 0.699999988f, 2, 30 },
		  { 8.75651089e-27f, 0.0497870669f, 0.670320034f, 1, 1, 1, 1 } },
		{ "logsigmoid", KERN_LOGSIGMOID, 0, 0, x7, 7,
		  { -30, -1.70141327f, -0.798138857f, -0.693147182f, -0.403186053f, -0.126928017f, -9.35762291e-14f },
		  { 1, 0.817574501f, 0.549834013f, 0.5f, 0.331812203f, 0.119202919f, 9.35762291e-14f } },
		{ "softsign", KERN_SOFTSIGN, 0, 0, x7, 7,
		  { -0.967741907f, -0.600000024f, -0.166666657f, 0, 0.411764681f, 0.666666687f, 0.967741907f },
		  { 0.00104058348f, 0.159999996f, 0.694444418f, 1, 0.346020758f, 0.111111119f, 0.00104058348f } },
		{ "tanhshrink", KERN_TANHSHRINK, 0, 0, x7, 7,
		  { -29, -0.594851732f, -0.00262467563f, 0, 0.0956321955f, 1.03597236f, 29 },
		  { 1, 0.81929338f, 0.0389569998f, 0, 0.365260422f, 0.929349184f, 1 } },
		{ "softshrink 0.5", KERN_SOFTSHRINK, 0.5f, 0, xs, 12,
		  { -29.5f, -1, 0, 0, 0, 0, 0, 0, 0, 0.199999988f, 1.5f, 29.5f },
		  { 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1 } },
		{ "softshrink 0.2", KERN_SOFTSHRINK, 0.2f, 0, xs, 12,
		  { -29.7999992f, -1.29999995f, -0.300000012f, -0.100000009f, 0, 0, 0, 0, 0.300000012f, 0.5f, 1.79999995f, 29.7999992f },
		  { 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1 } },
		{ "hardshrink 0.5", KERN_HARDSHRINK, 0.5f, 0, xs, 12,
		  { -30, -1.5f, 0, 0, 0, 0, 0, 0, 0, 0.699999988f, 2, 30 },
		  { 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1 } },
		{ "hardshrink -1", KERN_HARDSHRINK, -1, 0, xs, 12,
		  { -30, -1.5f, -0.5f, -0.300000012f, -0.200000003f, 0, 0.100000001f, 0.200000003f, 0.5f, 0.699999988f, 2, 30 },
		  { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 } },
		{ "threshold 0.1 20", KERN_THRESHOLD, 0.1f, 20, xs, 12,
		  { 20, 20, 20, 20, 20, 20, 20, 0.200000003f, 0.5f, 0.699999988f, 2, 30 },
		  { 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1 } },
		{ "threshold 0.1 -0.5", KERN_THRESHOLD, 0.1f, -0.5f, xs, 12,
		  { -0.5f, -0.5f, -0.5f, -0.5f, -0.5f, -0.5f, -0.5f, 0.200000003f, 0.5f, 0.699999988f, 2, 30 },
		  { 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1 } },
	};
	static const float ones[12] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
		float y[12], g[12];
		int n = c[k].n;
		kern_act_fwd(c[k].k, c[k].x, y, (size_t)n, c[k].a, c[k].b);
		kern_act_bwd(c[k].k, c[k].x, ones, g, (size_t)n, c[k].a, c[k].b);
		for (int i = 0; i < n; i++) {
			if (fabsf(y[i] - c[k].y[i]) > 2e-7f * (1 + fabsf(c[k].y[i])) ||
			    fabsf(g[i] - c[k].g[i]) > 2e-7f * (1 + fabsf(c[k].g[i])))
				fprintf(stderr, "%s at %g: %.9g and gradient %.9g, PyTorch %.9g and %.9g\n", c[k].what, (double)c[k].x[i],
					(double)y[i], (double)g[i], (double)c[k].y[i], (double)c[k].g[i]);
			CHECK_NEAR(y[i], c[k].y[i], 2e-7 * (1 + fabsf(c[k].y[i])));
			CHECK_NEAR(g[i], c[k].g[i], 2e-7 * (1 + fabsf(c[k].g[i])));
		}
	}
	/* in place: y may be x */
	float v[7];
	memcpy(v, x7, sizeof v);
	kern_act_fwd(KERN_SILU, v, v, 7, 0, 0);
	CHECK_NEAR(v[4], 0.467731416f, 1e-7);
	/* NaN passes through each, as PyTorch's */
	float nan_in = NAN, out;
	for (int k = KERN_LEAKY_RELU; k <= KERN_ACT_LAST; k++) {
		kern_act_fwd((enum kern_act)k, &nan_in, &out, 1, k == KERN_HARDTANH ? -1 : 1, k == KERN_HARDTANH ? 1 : 20);
		CHECK(isnan(out));
	}
}

static void test_activation_reference(void)
{
	begin();
	float x[5] = { -1.5f, -0.2f, 0, 0.7f, 2 }, y[6];
	float gelu[5] = { -0.100210860f, -0.084148049f, 0, 0.530625463f, 1.954499960f };
	float gelu_t[5] = { -0.100428432f, -0.084148571f, 0, 0.530570149f, 1.954597712f };
	float tanh_r[5] = { -0.905148268f, -0.197375327f, 0, 0.604367793f, 0.964027584f };
	float sig[5] = { 0.182425529f, 0.450166017f, 0.5f, 0.668187737f, 0.880797029f };
	kern_gelu_fwd(x, y, 5, KERN_GELU_NONE);
	for (int i = 0; i < 5; i++)
		CHECK_NEAR(y[i], gelu[i], 1e-6);
	kern_gelu_fwd(x, y, 5, KERN_GELU_TANH);
	for (int i = 0; i < 5; i++)
		CHECK_NEAR(y[i], gelu_t[i], 1e-6);
	kern_tanh_fwd(x, y, 5);
	for (int i = 0; i < 5; i++)
		CHECK_NEAR(y[i], tanh_r[i], 1e-6);
	kern_sigmoid_fwd(x, y, 5);
	for (int i = 0; i < 5; i++)
		CHECK_NEAR(y[i], sig[i], 1e-6);
	kern_relu_fwd(x, y, 5);
	CHECK(y[0] == 0 && y[1] == 0 && y[3] == 0.7f && y[4] == 2);
	/* softmax([1, 2, 3]); shifted by 1000 it must not overflow */
	float s[3] = { 1, 2, 3 }, big[3] = { 1001, 1002, 1003 }, want[3] = { 0.090030573f, 0.244728476f, 0.665240943f };
	float want_log[3] = { -2.407605886f, -1.407605886f, -0.407605946f };
	kern_softmax_fwd(s, y, 1, 3, 1);
	for (int i = 0; i < 3; i++)
		CHECK_NEAR(y[i], want[i], 1e-7);
	kern_softmax_fwd(big, y, 1, 3, 1);
	for (int i = 0; i < 3; i++)
		CHECK_NEAR(y[i], want[i], 1e-7);
	kern_log_softmax_fwd(big, y, 1, 3, 1);
	for (int i = 0; i < 3; i++)
		CHECK_NEAR(y[i], want_log[i], 1e-5);
	/* the same over a middle axis: (outer 1, dim 3, inner 2) */
	float s2[6] = { 1, 3, 2, 2, 3, 1 };
	kern_softmax_fwd(s2, y, 1, 3, 2);
	CHECK_NEAR(y[0], want[0], 1e-7);
	CHECK_NEAR(y[4], want[2], 1e-7);
	CHECK_NEAR(y[1], want[2], 1e-7);
	/* add and accumulate, by hand */
	float a[3] = { 1, 2, 3 }, b[3] = { 0.5f, -2, 4 };
	kern_add(a, b, y, 3);
	CHECK(y[0] == 1.5f && y[1] == 0 && y[2] == 7);
	kern_accumulate(a, b, 3);
	CHECK(a[0] == 1.5f && a[1] == 0 && a[2] == 7);
}

/* ---- losses ---- */

enum { LOSS_MSE, LOSS_NLL, LOSS_CE, LOSS_CE_SMOOTH, LOSS_L1, LOSS_SMOOTH_L1, LOSS_HUBER };
struct loss { int kind; enum kern_reduction red; float *x, *t; int32_t *target; int n, c; };

static double loss_eval(struct loss *l, float *dx, float scale)
{
	double v = 0;
	if (l->kind == LOSS_MSE)
		return kern_mse(l->x, l->t, dx, (size_t)l->n * l->c, l->red, scale);
	if (l->kind >= LOSS_L1) /* beta 0.7 and delta 1.3 put elements on both sides */
		return kern_regression((enum kern_regression)(KERN_L1 + l->kind - LOSS_L1), l->kind == LOSS_HUBER ? 1.3f : 0.7f, l->x, l->t,
				       dx, (size_t)l->n * l->c, l->red, scale);
	int rc = l->kind == LOSS_NLL ? kern_nll(l->x, l->target, dx, l->n, l->c, -100, NULL, l->red, scale, &v)
				     : kern_cross_entropy(l->x, l->target, dx, l->n, l->c, -100, NULL, l->kind == LOSS_CE_SMOOTH ? 0.2f : 0.0f,
							  l->red, scale, &v);
	CHECK(rc == KERN_OK);
	return v;
}

static double loss_obj(void *p)
{
	return loss_eval(p, NULL, 1.0f);
}

static void test_loss_grad(void)
{
	static const char *names[7][2] = { { "mse mean", "mse sum" }, { "nll mean", "nll sum" },
					   { "cross_entropy mean", "cross_entropy sum" },
					   { "cross_entropy smoothed mean", "cross_entropy smoothed sum" }, { "l1 mean", "l1 sum" },
					   { "smooth_l1 mean", "smooth_l1 sum" }, { "huber mean", "huber sum" } };
	begin();
	int32_t target[5] = { 2, -100, 0, 3, 2 };
	for (int kind = LOSS_MSE; kind <= LOSS_HUBER; kind++)
		for (int red = 0; red < 2; red++) {
			struct loss l = { .kind = kind, .red = red, .n = 5, .c = 4, .target = target };
			l.x = rand_floats(20, -2, 2, 100);
			l.t = rand_floats(20, -2, 2, 101);
			float *dx = floats(20), *half = floats(20);
			loss_eval(&l, dx, 1.0f);
			gradcheck(names[kind][red], loss_obj, &l, l.x, dx, 20, 1e-2f, 1e-3);
			/* the gradient is scaled, the loss is not */
			double v1 = loss_eval(&l, dx, 1.0f), v2 = loss_eval(&l, half, 0.5f);
			CHECK(v1 == v2);
			for (int i = 0; i < 20; i++)
				CHECK_NEAR(half[i], 0.5f * dx[i], 1e-7);
			if (kind >= LOSS_NLL && kind <= LOSS_CE_SMOOTH) /* ignored rows get no gradient */
				CHECK(dx[4] == 0 && dx[5] == 0 && dx[6] == 0 && dx[7] == 0);
		}
}

static void test_loss_reference(void)
{
	begin();
	/* cross_entropy(logits, target) with target -100 ignored */
	float z[12] = { 2, 1, 0.1f, 0.5f, 2.5f, -1, 1, 1, 3, 0, 0, 0 }, dz[12], lp[12], dlp[12];
	int32_t t[4] = { 0, 2, -100, 1 };
	float want_grad[12] = { -0.113666281f, 0.080810994f, 0.032855302f, 0.038704846f, 0.285992265f,
				-0.324697137f, 0, 0, 0, 0.111111104f, -0.222222239f, 0.111111104f };
	double v;
	CHECK(kern_cross_entropy(z, t, dz, 4, 3, -100, NULL, 0.0f, KERN_REDUCE_MEAN, 1.0f, &v) == KERN_OK);
	CHECK_NEAR(v, 1.7229400873184204, 1e-6);
	for (int i = 0; i < 12; i++)
		CHECK_NEAR(dz[i], want_grad[i], 1e-7);
	CHECK(kern_cross_entropy(z, t, NULL, 4, 3, -100, NULL, 0.0f, KERN_REDUCE_SUM, 1.0f, &v) == KERN_OK);
	CHECK_NEAR(v, 5.168820381164551, 1e-5);
	/* with label_smoothing 0.1 and 1 (every class weighed alike), PyTorch's
	 * losses and gradients; an ignored row still has none */
	static const struct { float eps; enum kern_reduction red; double loss; float grad[12]; } smooth[] = {
		{ 0.1f, KERN_REDUCE_MEAN, 1.6996067762374878,
		  { -0.0914440453f, 0.069699876f, 0.0217441861f, 0.0275937319f, 0.274881124f, -0.302474886f, 0, 0, 0,
		    0.0999999866f, -0.199999988f, 0.0999999866f } },
		{ 0.1f, KERN_REDUCE_SUM, 5.098820686340332,
		  { -0.274332166f, 0.20909965f, 0.06523256f, 0.0827811956f, 0.824643433f, -0.907424688f, 0, 0, 0,
		    0.299999982f, -0.600000024f, 0.299999982f } },
		{ 1.0f, KERN_REDUCE_MEAN, 1.4896068572998047,
		  { 0.10855595f, -0.0303001162f, -0.0782558098f, -0.0724062696f, 0.17488116f, -0.102474891f, 0, 0, 0, 0, 0, 0 } },
		{ 1.0f, KERN_REDUCE_SUM, 4.468820571899414,
		  { 0.325667828f, -0.0909003615f, -0.234767437f, -0.217218816f, 0.524643421f, -0.307424694f, 0, 0, 0, 0, 0, 0 } },
	};
	for (size_t k = 0; k < sizeof smooth / sizeof smooth[0]; k++) {
		CHECK(kern_cross_entropy(z, t, dz, 4, 3, -100, NULL, smooth[k].eps, smooth[k].red, 1.0f, &v) == KERN_OK);
		CHECK_NEAR(v, smooth[k].loss, 1e-6 * (1 + smooth[k].loss));
		for (int i = 0; i < 12; i++)
			CHECK_NEAR(dz[i], smooth[k].grad[i], 1e-7);
		CHECK(dz[6] == 0 && dz[7] == 0 && dz[8] == 0);
	}
	/* nll over log_softmax is the same loss */
	kern_log_softmax_fwd(z, lp, 4, 3, 1);
	CHECK(kern_nll(lp, t, dlp, 4, 3, -100, NULL, KERN_REDUCE_MEAN, 1.0f, &v) == KERN_OK);
	CHECK_NEAR(v, 1.7229400873184204, 1e-6);
	CHECK(dlp[0] == -1.0f / 3 && dlp[1] == 0 && dlp[6] == 0);
	/* mse_loss([1, 2, 3, 4], [1.5, 2, 2, 5]) */
	float x[4] = { 1, 2, 3, 4 }, tt[4] = { 1.5f, 2, 2, 5 };
	CHECK_NEAR(kern_mse(x, tt, NULL, 4, KERN_REDUCE_MEAN, 1.0f), 0.5625, 1e-12);
	CHECK_NEAR(kern_mse(x, tt, NULL, 4, KERN_REDUCE_SUM, 1.0f), 2.25, 1e-12);
	/* l1_loss, smooth_l1_loss and huber_loss: PyTorch 1.13's losses and
	 * gradients, the element at 0.3 - 0.3 exactly 0 (its gradient 0, but
	 * -1 in smooth_l1 at beta 0, as PyTorch's) */
	float rx[6] = { 1.0f, -2.0f, 0.3f, 4.0f, 0.5f, -0.25f }, rt[6] = { 0.5f, 1.0f, 0.3f, -1.0f, 0.0f, 0.5f }, rd[6];
	static const struct { enum kern_regression kind; float param; double mean, sum; float grad[6]; } reg[] = {
		{ KERN_L1, 0, 1.625, 9.75, { 1, -1, 0, 1, 1, -1 } },
		{ KERN_SMOOTH_L1, 1.0f, 1.2552083730697632, 7.53125, { 0.5f, -1, 0, 1, 0.5f, -0.75f } },
		{ KERN_SMOOTH_L1, 0.6f, 1.3777776956558228, 8.266666412353516, { 0.833333313f, -1, 0, 1, 0.833333313f, -1 } },
		{ KERN_SMOOTH_L1, 0.0f, 1.625, 9.75, { 1, -1, -1, 1, 1, -1 } },
		{ KERN_HUBER, 1.0f, 1.2552083730697632, 7.53125, { 0.5f, -1, 0, 1, 0.5f, -0.75f } },
		{ KERN_HUBER, 2.5f, 2.3802082538604736, 14.28125, { 0.5f, -2.5f, 0, 2.5f, 0.5f, -0.75f } },
	};
	for (size_t k = 0; k < sizeof reg / sizeof reg[0]; k++) {
		CHECK_NEAR(kern_regression(reg[k].kind, reg[k].param, rx, rt, rd, 6, KERN_REDUCE_SUM, 1.0f), reg[k].sum, 1e-6 * reg[k].sum);
		for (int i = 0; i < 6; i++)
			CHECK_NEAR(rd[i], reg[k].grad[i], 1e-7);
		CHECK_NEAR(kern_regression(reg[k].kind, reg[k].param, rx, rt, rd, 6, KERN_REDUCE_MEAN, 1.0f), reg[k].mean, 1e-6 * reg[k].mean);
		for (int i = 0; i < 6; i++)
			CHECK_NEAR(rd[i], reg[k].grad[i] / 6, 1e-7);
	}
	/* binary_cross_entropy and binary_cross_entropy_with_logits, PyTorch
	 * 1.13's: at 0 and 1 the logs clamped at -100 (the gradient 0 there
	 * with the target equal), at 1e-7 log(1 - x), not log1p(-x); the
	 * logits far out on both sides */
	float bx[8] = { 0, 1, 0.3f, 0.9f, 1e-7f, 0.5f, 0.99999994f, 0.25f }, bt[8] = { 0, 1, 1, 0.2f, 0, 0.5f, 0, 0.75f }, bd[8];
	float lz[8] = { 0, -100, 100, 3.5f, -2.25f, 0.5f, 20, -1e-3f };
	/* (bce_with_logits' param is pos_weight: 1 is none, 0 drops the positive terms) */
	const struct { enum kern_regression kind; float param; const float *x; double sum, mean; float grad[8]; } bin[] = {
		{ KERN_BCE, 0, bx, 21.50743293762207, 2.688429117202759,
		  { 0, 0, -3.3333332538604736f, 7.77777624130249f, 1.0000001192092896f, 0, 16777216.0f, -2.6666667461395264f } },
		{ KERN_BCE_LOGITS, 1, lz, 125.04057312011719, 15.630071640014648,
		  { 0.5f, -1, 0, 0.7706877589225769f, 0.09534946829080582f, 0.12245935201644897f, 1, -0.250249981880188f } },
		{ KERN_BCE_LOGITS, 2.5f, lz, 276.1854248046875, 276.1854248046875 / 8,
		  { 0.5f, -2.5f, 0, 0.7618939876556396f, 0.09534946829080582f, -0.1606961488723755f, 1, -0.8130311965942383f } },
		{ KERN_BCE_LOGITS, 0, lz, 24.277355194091797, 24.277355194091797 / 8,
		  { 0.5f, 0, 0, 0.7765502333641052f, 0.09534946829080582f, 0.3112296760082245f, 1, 0.124937504529953f } },
	};
	for (size_t k = 0; k < sizeof bin / sizeof bin[0]; k++) {
		float pw = bin[k].param;
		CHECK_NEAR(kern_regression(bin[k].kind, pw, bin[k].x, bt, bd, 8, KERN_REDUCE_SUM, 1.0f), bin[k].sum, 1e-6 * bin[k].sum);
		for (int i = 0; i < 8; i++)
			CHECK_NEAR(bd[i], bin[k].grad[i], 1e-6 * (1 + fabsf(bin[k].grad[i])));
		CHECK_NEAR(kern_regression(bin[k].kind, pw, bin[k].x, bt, bd, 8, KERN_REDUCE_MEAN, 1.0f), bin[k].mean, 1e-6 * bin[k].mean);
		for (int i = 0; i < 8; i++)
			CHECK_NEAR(bd[i], bin[k].grad[i] / 8, 1e-6 * (1 + fabsf(bin[k].grad[i])));
	}
	/* kl_div, PyTorch 1.13's: targets of 0 (their terms 0, their
	 * gradients -0) and of 1e-30, and with log_target a log-probability of
	 * -100, whose e^t is below float's normal range */
	float kx[8] = { -1, -2, 0.3f, -4, -0.5f, -0.25f, -3, 0 }, kt[8] = { 0.5f, 1, 0, 0.2f, 1e-30f, 0.25f, 2, 0 },
	      klt[8] = { -0.5f, 1, 0, -20, -3, 0.25f, 2, -100 }, kd[8];
	const struct { float log_target; const float *t; double sum; float grad[8]; } kl[] = {
		{ 0, kt, 9.733759880065918, { -0.5f, -1, 0, -0.2f, -1e-30f, -0.25f, -2, 0 } },
		{ 1, klt, 45.62093734741211,
		  { -0.6065306663513184f, -2.7182817459106445f, -1, -2.06115369216775e-09f, -0.049787066876888275f, -1.2840254306793213f,
		    -7.389056205749512f, -3.783505853677006e-44f } },
	};
	for (size_t k = 0; k < sizeof kl / sizeof kl[0]; k++) {
		CHECK_NEAR(kern_regression(KERN_KL_DIV, kl[k].log_target, kx, kl[k].t, kd, 8, KERN_REDUCE_SUM, 1.0f), kl[k].sum, 1e-6 * kl[k].sum);
		for (int i = 0; i < 8; i++)
			CHECK_NEAR(kd[i], kl[k].grad[i], 1e-6 * fabsf(kl[k].grad[i]) + 1e-45);
		CHECK_NEAR(kern_regression(KERN_KL_DIV, kl[k].log_target, kx, kl[k].t, kd, 8, KERN_REDUCE_MEAN, 1.0f), kl[k].sum / 8,
			   1e-6 * kl[k].sum);
		for (int i = 0; i < 8; i++)
			CHECK_NEAR(kd[i], kl[k].grad[i] / 8, 1e-6 * fabsf(kl[k].grad[i]) + 1e-45);
	}
	/* a target below 0 has no logarithm, and a target of 0 against an
	 * output of -infinity is 0 * -infinity: NaN, as in PyTorch */
	float kneg[1] = { -0.1f }, kinf[1] = { -INFINITY };
	CHECK(isnan(kern_regression(KERN_KL_DIV, 0, kx, kneg, kd, 1, KERN_REDUCE_SUM, 1.0f)));
	CHECK(isnan(kern_regression(KERN_KL_DIV, 0, kinf, kt + 2, kd, 1, KERN_REDUCE_SUM, 1.0f)));
	/* outside [0, 1] bce's loss is NaN, as PyTorch's logs are (it also
	 * refuses such an input) */
	float out1[1] = { 1.5f }, t0[1] = { 0 };
	CHECK(isnan(kern_regression(KERN_BCE, 0, out1, t0, bd, 1, KERN_REDUCE_MEAN, 1.0f)));
	/* log(1 - x) at x = 1e-7 is -2^-23 in float, log1p(-x) -1.0e-7 */
	float tiny[1] = { 1e-7f };
	CHECK(kern_regression(KERN_BCE, 0, tiny, t0, bd, 1, KERN_REDUCE_SUM, 1.0f) == 1.1920928955078125e-07);
	/* a class out of range is refused before anything is written */
	int32_t bad[4] = { 0, 3, 1, 1 }, neg[4] = { 0, -1, 1, 1 };
	dz[0] = 42;
	CHECK(kern_cross_entropy(z, bad, dz, 4, 3, -100, NULL, 0.0f, KERN_REDUCE_MEAN, 1.0f, &v) == KERN_ERR_INDEX);
	CHECK(kern_nll(lp, neg, dz, 4, 3, -100, NULL, KERN_REDUCE_MEAN, 1.0f, &v) == KERN_ERR_INDEX);
	CHECK(dz[0] == 42);
	/* every row ignored: PyTorch's mean is NaN, the gradient zero */
	int32_t none[4] = { -100, -100, -100, -100 };
	CHECK(kern_cross_entropy(z, none, dz, 4, 3, -100, NULL, 0.0f, KERN_REDUCE_MEAN, 1.0f, &v) == KERN_OK);
	CHECK(isnan(v) && max_abs(dz, 12) == 0);
	/* rows 0 and 1 argmax at their target, row 2 at class 2, row 3 ties at class 0 */
	int32_t acc_t[4] = { 0, 1, 2, 0 }, acc_u[4] = { 1, 1, 0, 2 };
	CHECK(kern_argmax_correct(z, acc_t, 4, 3) == 4);
	CHECK(kern_argmax_correct(z, acc_u, 4, 3) == 1);
}

/* ---- thread independence of the reductions outside conv ---- */

static void test_threads_reductions(void)
{
	begin();
	int n = 256, k = 300, m = 200, c = 64, hw = 50;
	size_t nm = (size_t)n * m, nk = (size_t)n * k, mk = (size_t)m * k, nx = (size_t)n * c * hw;
	float *x = rand_floats(nk, -1, 1, 110), *w = rand_floats(mk, -1, 1, 111);
	float *dy = rand_floats(nm, -1, 1, 112), *bx = rand_floats(nx, -1, 1, 113), *t2 = rand_floats(nk, -1, 1, 114);
	int32_t *t = talloc(n * sizeof(int32_t));
	for (int i = 0; i < n; i++)
		t[i] = (i * 7) % m;
	/* every output of the kernels below that sum across rows or channels */
	enum { Y, DX, DW, DB, BN_Y, BN_STAT, BN_DX, BN_DP, LN_Y, LN_STAT, LN_DX, LN_DP, CE_D, MSE_D, OUTS };
	size_t sizes[OUTS] = { nm, nk, mk, m, nx, 2 * c, nx, 2 * c, nk, 2 * (size_t)n, nk, 2 * (size_t)k, nm, nk };
	float *out[2][OUTS];
	double loss[2][2];
	for (int th = 0; th < 2; th++) {
		kern_set_threads(th + 1);
		float **o = out[th];
		for (int i = 0; i < OUTS; i++)
			o[i] = floats(sizes[i]);
		kern_linear_fwd(x, w, w, o[Y], n, k, m);
		kern_linear_bwd(x, w, dy, o[DX], o[DW], o[DB], n, k, m);
		kern_batchnorm2d_fwd_train(bx, NULL, NULL, o[BN_Y], NULL, NULL, o[BN_STAT], o[BN_STAT] + c,
					   n, c, hw, 1e-5f, 0.1f);
		kern_batchnorm2d_bwd(bx, NULL, o[BN_STAT], o[BN_STAT] + c, bx, o[BN_DX], o[BN_DP], o[BN_DP] + c,
				     n, c, hw);
		kern_layernorm_fwd(x, w, w, o[LN_Y], o[LN_STAT], o[LN_STAT] + n, n, k, 1e-5f);
		kern_layernorm_bwd(x, w, o[LN_STAT], o[LN_STAT] + n, t2, o[LN_DX], o[LN_DP], o[LN_DP] + k, n, k);
		CHECK(kern_cross_entropy(dy, t, o[CE_D], n, m, -100, NULL, 0.0f, KERN_REDUCE_MEAN, 1.0f, &loss[th][0]) == KERN_OK);
		loss[th][1] = kern_mse(x, t2, o[MSE_D], nk, KERN_REDUCE_SUM, 1.0f);
	}
	for (int i = 0; i < OUTS; i++) {
		if (memcmp(out[0][i], out[1][i], sizes[i] * sizeof(float)) != 0)
			fprintf(stderr, "output %d differs between 1 and 2 threads\n", i);
		CHECK(memcmp(out[0][i], out[1][i], sizes[i] * sizeof(float)) == 0);
		CHECK(max_abs(out[0][i], sizes[i]) > 0);
	}
	CHECK(loss[0][0] == loss[1][0] && loss[0][1] == loss[1][1]);
	kern_set_threads(1);
}

/* Threads of this process allowed on a single CPU, from /proc. */
static int single_cpu_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int count = 0;
	struct dirent *t;
	while ((t = readdir(d))) {
		char path[300], line[256];
		snprintf(path, sizeof path, "/proc/self/task/%s/status", t->d_name);
		FILE *f = t->d_name[0] != '.' ? fopen(path, "r") : NULL;
		while (f && fgets(line, sizeof line, f))
			if (strncmp(line, "Cpus_allowed_list:", 18) == 0)
				count += !strpbrk(line + 18, ",-");
		if (f)
			fclose(f);
	}
	closedir(d);
	return count;
}

/* A thread started after pinning, as a loader is: its CPUs once it unpins. */
static void *unpinned_cpus(void *arg)
{
	kern_unpin_this_thread();
	cpu_set_t mine;
	*(int *)arg = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : -1;
	return NULL;
}

/* Threads are pinned only when they are exactly the process's CPUs, one
 * each, and not where the user has OpenMP place them; a thread started
 * afterwards gets every CPU back. */
static void test_pin_threads(void)
{
	int n = kern_cpus();
	CHECK(n >= 1);
	CHECK(!kern_pin_threads(1));
	CHECK(!kern_pin_threads(n + 1));
	if (n < 2)
		return;
	if (getenv("OMP_PROC_BIND") || getenv("OMP_PLACES") || getenv("GOMP_CPU_AFFINITY")) {
		CHECK(!kern_pin_threads(n));
		return;
	}
	CHECK(single_cpu_threads() == 0);
	kern_set_threads(n);
	CHECK(kern_pin_threads(n));
	CHECK(single_cpu_threads() >= n);
	int cpus = 0;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, unpinned_cpus, &cpus) == 0 && pthread_join(th, NULL) == 0);
	CHECK(cpus == n);
	kern_set_threads(1);
}

int main(void)
{
	RUN(test_linear);
	RUN(test_gemm_transposes);
	RUN(test_conv2d_grad);
	RUN(test_conv2d_reference);
	RUN(test_conv2d_threads);
	RUN(test_conv2d_within);
	RUN(test_pool_grad);
	RUN(test_pool_reference);
	RUN(test_pool_overhang);
	RUN(test_zeropad);
	RUN(test_norm_grad);
	RUN(test_batchnorm_reference);
	RUN(test_norm_eps0);
	RUN(test_embedding);
	RUN(test_dropout);
	RUN(test_dropout_runs);
	RUN(test_activation_grad);
	RUN(test_activation_reference);
	RUN(test_param_activation_grad);
	RUN(test_param_activation_reference);
	RUN(test_loss_grad);
	RUN(test_loss_reference);
	RUN(test_threads_reductions);
	RUN(test_pin_threads);
	return check_done();
}
