/* kern_conv2d.c: 2-D convolution, forward and backward, by oneDNN or by
 * im2col + sgemm, set up once per exact shape.
 *
 * oneDNN path: primitives for a chunk of images (compiler/conv_chunk.h's
 * rule), created for one thread and run on the chunks in parallel, each
 * chunk on its own stream, staging copies and scratchpad (a "slot" of the
 * workspace).  The library picks its blocked layouts; reorders stage x, dy
 * and w in and y, dx, dw out.
 * The weight gradient of each chunk is summed into the total in chunk order.
 * im2col path: one image at a time unfolded into the workspace's column
 * buffer and multiplied per group through kern_gemm; backward reuses the
 * buffer, first for dw, then for the unfolded dx that col2im folds back.  It
 * serves every shape oneDNN rejects, and backward-data where c_in/groups < 16
 * (the first layer), whose blocked form pads channels to 16 and ran 3x slower.
 *
 * Measured at 1 thread on this machine (AVX-512), GFLOP/s fwd / bwd-data / bwd-w:
 *   conv1 (64, 1->32, 28x28, k3):  im2col 53 / 53 / 37,   oneDNN 94 / 14 / 82
 *   conv2 (64, 32->64, 26x26, k3): im2col 94 / 101 / 87,  oneDNN 222 / 219 / 203
 * oneDNN timed with its reorders, in chunks of 4.  On the whole batch at once it
 * ran conv2 at 193 / 180 / 172; with plain nchw/oihw layouts (its gemm
 * implementation) at 144 / 123 / 101.  So AUTO takes oneDNN for all three
 * passes but conv1's backward-data.
 *
 * Winograd F(4x4, 3x3) (oneDNN's jit_wino_4x3, for 3x3 stride-1 ungrouped
 * convolutions with channels in 16s) does conv2 in 2.25x fewer multiplies:
 * 2.3 / 3.3 / 3.0 ms per 64 images against direct's 5.7 / 5.6 / 5.7 (primitive
 * alone, chunks of 16; chunks of 4 cost it 10-30%), and took the seed CNN
 * from 2150 to 2900 images/s at 1 thread.  On conv1 (1 input channel, padded
 * to 16) it ran 7x slower than direct, hence the channel rule.  Its
 * transforms cost about a digit of precision (2e-5 against 1e-5 on sums of
 * 144 products of values in [-1, 1]), as with cuDNN's Winograd on GPUs.  AUTO
 * takes it where oneDNN has it; TRAINC_CONV_PATH=onednn keeps direct.
 *
 * Invariant: results do not depend on the thread count.  Every oneDNN chunk is
 * computed by a single-threaded primitive and chunk partial dw are added in
 * chunk order; im2col's gemms go through kern_gemm (fixed split), dw sums
 * images in batch order, col2im gives each channel to one thread, db sums each
 * channel serially.  The workspace is scratch only during a call, so layers
 * may share one; one call at a time per kern_conv2d.  No allocation after
 * prepare.  Given less workspace than the full layout, fewer slots run at
 * once (the same sums in the same order); compiler/memplan.c sizes the
 * backend's shared workspace from this layout (tag: CONV_WORKSPACE).  Past
 * 600 lines: the two paths share setup, workspace layout and dispatch, and
 * splitting them would put oneDNN's state in a shared header.
 */
#include "runtime/kern.h"
#include "compiler/conv_chunk.h"

#include <assert.h>
#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_W, N_PASS };

/* One tensor argument: the caller's plain memory and, when the primitive
 * wants another layout, a staging copy in the workspace. */
struct port {
	dnnl_memory_t user;       /* plain layout over the caller's pointer, set per call */
	dnnl_memory_t prim;       /* the primitive's layout; the same object when plain */
	dnnl_primitive_t reorder; /* user->prim for inputs, prim->user for outputs; NULL if plain */
};

struct slot {
	dnnl_stream_t stream;
	struct port x_fwd, y_fwd, x_bww, dy_bww, dy_bwd, dx_bwd;
	dnnl_memory_t dw_part;    /* this slot's chunk of the weight gradient */
	dnnl_memory_t pad[N_PASS];
};

struct conv2d_dnnl {
	dnnl_engine_t engine;
	dnnl_stream_t stream;     /* for the staging outside the chunk loop */
	int chunk, nchunks, nslots;
	bool winograd;
	bool dy_shared;           /* bwd-data reads dy in the layout bwd-w staged it */
	dnnl_primitive_t prim[N_PASS];
	struct port w_fwd, w_bwd, dw;
	dnnl_memory_t bias;
	float *dw_sum;            /* the weight gradient summed over chunks, in bwd-w's layout */
	float *dw_plain;          /* dw_sum reordered to (C_out, C_in/groups, KH, KW) */
	size_t dw_floats;         /* floats of dw_sum, padding included */
	struct slot slot[CONV_SLOTS];
};

/* oneDNN failing on a primitive it accepted at setup is the environment's fault */
#define DNNL_CHECK(call) do { dnnl_status_t st_ = (call); if (st_ != dnnl_success) { \
	fprintf(stderr, "%s:%d: %s failed: oneDNN: %s (hint: the conv path KERN_CONV_IM2COL " \
		"avoids oneDNN)\n", __FILE__, __LINE__, #call, dnnl_status2str(st_)); exit(1); } } while (0)
#define TRY(call) do { if ((call) != dnnl_success) goto fail; } while (0)

/* ---- shapes ---- */

static bool valid(const struct conv2d_desc *d)
{
	return d->n >= 1 && d->c_in >= 1 && d->h >= 1 && d->w >= 1 && d->c_out >= 1 && d->kh >= 1 &&
	       d->kw >= 1 && d->sh >= 1 && d->sw >= 1 && d->ph >= 0 && d->pw >= 0 && d->dh >= 1 &&
	       d->dw >= 1 && d->groups >= 1 && d->c_in % d->groups == 0 && d->c_out % d->groups == 0 &&
	       kern_window_out(d->h, d->kh, d->sh, d->ph, d->dh, false) >= 1 &&
	       kern_window_out(d->w, d->kw, d->sw, d->pw, d->dw, false) >= 1;
}

static size_t align64(size_t bytes)
{
	return (bytes + 63) & ~(size_t)63;
}

/* ---- oneDNN plan: primitive descriptors and the workspace they need ---- */

struct plan {
	int chunk;                      /* images per primitive call */
	int slots;                      /* chunks in flight, as many as the workspace holds */
	bool winograd;                  /* all three passes by Winograd F(4x4, 3x3) */
	bool use[N_PASS];
	dnnl_primitive_desc_t pd[N_PASS];
	dnnl_memory_desc_t x, w, b, y;  /* plain layouts of one chunk */
	size_t x_bytes, y_bytes, pad_bytes, dw_bytes, w_bytes; /* staging, 64-aligned */
};

static const dnnl_memory_desc_t *md_of(dnnl_primitive_desc_t pd, dnnl_query_t q)
{
	return dnnl_primitive_desc_query_md(pd, q, 0);
}

/* Staging bytes for md if it differs from the plain layout. */
static size_t staged(const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *plain)
{
	return dnnl_memory_desc_equal(md, plain) ? 0 : align64(dnnl_memory_desc_get_size(md));
}

static size_t max_size(size_t a, size_t b)
{
	return a > b ? a : b;
}

static void plan_free(struct plan *p)
{
	for (int i = 0; i < N_PASS; i++)
		if (p->pd[i])
			dnnl_primitive_desc_destroy(p->pd[i]);
	memset(p->pd, 0, sizeof p->pd);
}

/* Primitive descriptors for one chunk of the algorithm's size, made while
 * OpenMP allows one thread so that oneDNN plans each for a single thread.
 * False if oneDNN refuses any of the passes. */
static bool plan_try(struct plan *p, const struct conv2d_desc *d, dnnl_engine_t engine, bool winograd)
{
	memset(p, 0, sizeof *p);
	bool all = d->path != KERN_CONV_AUTO || winograd;
	dnnl_alg_kind_t alg = winograd ? dnnl_convolution_winograd : dnnl_convolution_direct;
	p->winograd = winograd;
	int oh = kern_window_out(d->h, d->kh, d->sh, d->ph, d->dh, false);
	int ow = kern_window_out(d->w, d->kw, d->sw, d->pw, d->dw, false);
	int64_t image = ((int64_t)d->c_in * d->h * d->w + (int64_t)d->c_out * oh * ow) * (int64_t)sizeof(float);
	p->chunk = (int)conv_chunk(d->n, image, winograd);
	p->use[PASS_FWD] = p->use[PASS_BWD_W] = true;
	p->use[PASS_BWD_DATA] = all || d->c_in / d->groups >= 16;
	int g = d->groups, b = p->chunk;
	dnnl_dims_t xd = { b, d->c_in, d->h, d->w }, yd = { b, d->c_out, oh, ow }, bd = { d->c_out };
	dnnl_dims_t wd = { g, d->c_out / g, d->c_in / g, d->kh, d->kw };
	dnnl_dims_t st = { d->sh, d->sw }, dil = { d->dh - 1, d->dw - 1 }, pad = { d->ph, d->pw };
	dnnl_memory_desc_t ax, aw, ay;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_convolution_desc_t cd;
	int threads = omp_get_max_threads();
	bool ok = false;
	omp_set_num_threads(1);
	TRY(dnnl_memory_desc_init_by_tag(&p->x, 4, xd, dnnl_f32, dnnl_nchw));
	TRY(dnnl_memory_desc_init_by_tag(&p->y, 4, yd, dnnl_f32, dnnl_nchw));
	TRY(dnnl_memory_desc_init_by_tag(&p->b, 1, bd, dnnl_f32, dnnl_x));
	TRY(dnnl_memory_desc_init_by_tag(&p->w, 5, wd, dnnl_f32, dnnl_goihw));
	TRY(dnnl_memory_desc_init_by_tag(&ax, 4, xd, dnnl_f32, dnnl_format_tag_any));
	TRY(dnnl_memory_desc_init_by_tag(&ay, 4, yd, dnnl_f32, dnnl_format_tag_any));
	TRY(dnnl_memory_desc_init_by_tag(&aw, 5, wd, dnnl_f32, dnnl_format_tag_any));
	TRY(dnnl_primitive_attr_create(&attr));
	TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
	TRY(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, alg,
						       &ax, &aw, d->bias ? &p->b : NULL, &ay, st, dil, pad, pad));
	TRY(dnnl_primitive_desc_create(&p->pd[PASS_FWD], &cd, attr, engine, NULL));
	if (p->use[PASS_BWD_DATA]) {
		TRY(dnnl_dilated_convolution_backward_data_desc_init(&cd, alg, &ax, &aw, &ay,
								     st, dil, pad, pad));
		TRY(dnnl_primitive_desc_create(&p->pd[PASS_BWD_DATA], &cd, attr, engine, p->pd[PASS_FWD]));
	}
	/* no diff bias: db is summed here, in a fixed order */
	TRY(dnnl_dilated_convolution_backward_weights_desc_init(&cd, alg, &ax, &aw, NULL,
								&ay, st, dil, pad, pad));
	TRY(dnnl_primitive_desc_create(&p->pd[PASS_BWD_W], &cd, attr, engine, p->pd[PASS_FWD]));

	dnnl_primitive_desc_t f = p->pd[PASS_FWD], bw = p->pd[PASS_BWD_W], bdt = p->pd[PASS_BWD_DATA];
	p->x_bytes = max_size(staged(md_of(f, dnnl_query_src_md), &p->x), staged(md_of(bw, dnnl_query_src_md), &p->x));
	p->y_bytes = max_size(staged(md_of(f, dnnl_query_dst_md), &p->y), staged(md_of(bw, dnnl_query_diff_dst_md), &p->y));
	p->w_bytes = staged(md_of(f, dnnl_query_weights_md), &p->w);
	p->dw_bytes = align64(dnnl_memory_desc_get_size(md_of(bw, dnnl_query_diff_weights_md)));
	p->pad_bytes = max_size(dnnl_memory_desc_get_size(md_of(f, dnnl_query_scratchpad_md)),
				dnnl_memory_desc_get_size(md_of(bw, dnnl_query_scratchpad_md)));
	if (bdt) {
		p->x_bytes = max_size(p->x_bytes, staged(md_of(bdt, dnnl_query_diff_src_md), &p->x));
		p->y_bytes = max_size(p->y_bytes, staged(md_of(bdt, dnnl_query_diff_dst_md), &p->y));
		p->w_bytes = max_size(p->w_bytes, staged(md_of(bdt, dnnl_query_weights_md), &p->w));
		p->pad_bytes = max_size(p->pad_bytes, dnnl_memory_desc_get_size(md_of(bdt, dnnl_query_scratchpad_md)));
	}
	p->pad_bytes = align64(p->pad_bytes);
	ok = true;
fail:
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	omp_set_num_threads(threads);
	if (!ok)
		plan_free(p);
	return ok;
}

static int slots_of(const struct plan *p, int n)
{
	return conv_slots(n, p->chunk);
}

static size_t weight_floats(const struct conv2d_desc *d)
{
	return (size_t)d->c_out * (d->c_in / d->groups) * d->kh * d->kw;
}

static size_t col_bytes(const struct conv2d_desc *d)
{
	int oh = kern_window_out(d->h, d->kh, d->sh, d->ph, d->dh, false);
	int ow = kern_window_out(d->w, d->kw, d->sw, d->pw, d->dw, false);
	return align64((size_t)d->c_in * d->kh * d->kw * oh * ow * sizeof(float));
}

/* The workspace of a oneDNN plan: shared are the weights staging, the dw
 * sum and its plain copy, and the column buffer when backward-data runs by
 * im2col; then each slot holds x and y staging, scratchpad and a partial dw. */
static size_t shared_bytes(const struct plan *p, const struct conv2d_desc *d)
{
	return p->w_bytes + p->dw_bytes + align64(weight_floats(d) * sizeof(float)) +
	       (p->use[PASS_BWD_DATA] ? 0 : col_bytes(d));
}

static size_t slot_bytes(const struct plan *p)
{
	return p->x_bytes + p->y_bytes + p->pad_bytes + p->dw_bytes;
}

/* Slots up to one per chunk (and CONV_SLOTS), fewer if bytes holds fewer;
 * false if it does not hold one.  Fewer slots run fewer chunks at once and
 * change no result. */
static bool plan_fit(struct plan *p, const struct conv2d_desc *d, size_t bytes)
{
	size_t shared = shared_bytes(p, d), slot = slot_bytes(p);
	if (bytes < shared + slot)
		return false;
	size_t fit = (bytes - shared) / slot;
	int most = slots_of(p, d->n);
	p->slots = fit < (size_t)most ? (int)fit : most;
	return true;
}

/* Winograd where oneDNN has it for the shape (3x3, stride 1, undilated,
 * ungrouped, channels in 16s) unless the path forces direct; else direct.
 * Each only if bytes of workspace hold it (*too_big says one was refused
 * for that alone). */
static bool plan_make(struct plan *p, const struct conv2d_desc *d, dnnl_engine_t engine, size_t bytes, bool *too_big)
{
	bool wino_shape = d->kh == 3 && d->kw == 3 && d->sh == 1 && d->sw == 1 && d->dh == 1 && d->dw == 1 &&
			  d->groups == 1 && d->c_in % 16 == 0 && d->c_out % 16 == 0;
	*too_big = false;
	for (int wino = 1; wino >= 0; wino--) {
		if (wino ? d->path == KERN_CONV_DNNL || !wino_shape : d->path == KERN_CONV_WINOGRAD)
			continue;
		if (!plan_try(p, d, engine, wino))
			continue;
		if (plan_fit(p, d, bytes))
			return true;
		*too_big = true;
		plan_free(p);
	}
	return false;
}

size_t kern_conv2d_workspace(const struct conv2d_desc *d)
{
	if (!valid(d))
		return 0;
	struct plan p = { 0 };
	bool have = false, too_big;
	dnnl_engine_t engine = NULL;
	if (d->path != KERN_CONV_IM2COL && dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success)
		have = plan_make(&p, d, engine, SIZE_MAX, &too_big);
	/* im2col alone, or room for it should oneDNN fail after planning */
	size_t bytes = col_bytes(d);
	if (have) {
		bytes = max_size(bytes, shared_bytes(&p, d) + (size_t)p.slots * slot_bytes(&p));
		plan_free(&p);
	}
	if (engine)
		dnnl_engine_destroy(engine);
	return bytes;
}

/* ---- oneDNN state: memory objects over the workspace, one set per slot ---- */

static dnnl_status_t port_make(struct port *pt, dnnl_engine_t e, const dnnl_memory_desc_t *plain,
			       const dnnl_memory_desc_t *md, void *staging, bool input)
{
	dnnl_status_t st = dnnl_memory_create(&pt->user, plain, e, DNNL_MEMORY_NONE);
	if (st != dnnl_success || dnnl_memory_desc_equal(plain, md)) {
		pt->prim = pt->user;
		return st;
	}
	dnnl_primitive_desc_t rpd;
	if ((st = dnnl_memory_create(&pt->prim, md, e, staging)) != dnnl_success ||
	    (st = dnnl_reorder_primitive_desc_create(&rpd, input ? plain : md, e, input ? md : plain, e, NULL)))
		return st;
	/* the library-managed scratchpad of a plain<->blocked f32 reorder is empty */
	if (dnnl_memory_desc_get_size(md_of(rpd, dnnl_query_scratchpad_md)) != 0)
		st = dnnl_unimplemented;
	else
		st = dnnl_primitive_create(&pt->reorder, rpd);
	dnnl_primitive_desc_destroy(rpd);
	return st;
}

static void port_free(struct port *pt)
{
	if (pt->reorder)
		dnnl_primitive_destroy(pt->reorder);
	if (pt->prim && pt->prim != pt->user)
		dnnl_memory_destroy(pt->prim);
	if (pt->user)
		dnnl_memory_destroy(pt->user);
	memset(pt, 0, sizeof *pt);
}

static void dnnl_free(struct conv2d_dnnl *s)
{
	for (int i = 0; i < CONV_SLOTS; i++) {
		struct slot *sl = &s->slot[i];
		struct port *ports[] = { &sl->x_fwd, &sl->y_fwd, &sl->x_bww, &sl->dy_bww, &sl->dy_bwd, &sl->dx_bwd };
		for (size_t j = 0; j < sizeof ports / sizeof *ports; j++)
			port_free(ports[j]);
		if (sl->dw_part)
			dnnl_memory_destroy(sl->dw_part);
		for (int j = 0; j < N_PASS; j++)
			if (sl->pad[j])
				dnnl_memory_destroy(sl->pad[j]);
		if (sl->stream)
			dnnl_stream_destroy(sl->stream);
	}
	port_free(&s->w_fwd);
	port_free(&s->w_bwd);
	port_free(&s->dw);
	if (s->bias)
		dnnl_memory_destroy(s->bias);
	for (int i = 0; i < N_PASS; i++)
		if (s->prim[i])
			dnnl_primitive_destroy(s->prim[i]);
	if (s->stream)
		dnnl_stream_destroy(s->stream);
	if (s->engine)
		dnnl_engine_destroy(s->engine);
	free(s);
}

/* Carve bytes from *ws; NULL when bytes is 0. */
static void *carve(char **ws, size_t bytes)
{
	void *p = bytes ? *ws : NULL;
	*ws += bytes;
	return p;
}

static struct conv2d_dnnl *dnnl_make(const struct conv2d_desc *d, char **ws, size_t bytes, bool *too_big)
{
	struct conv2d_dnnl *s = calloc(1, sizeof *s);
	struct plan p;
	bool have_plan = false;
	*too_big = false;
	if (!s || dnnl_engine_create(&s->engine, dnnl_cpu, 0) != dnnl_success ||
	    !(have_plan = plan_make(&p, d, s->engine, bytes, too_big)))
		goto fail;
	dnnl_engine_t e = s->engine;
	dnnl_primitive_desc_t f = p.pd[PASS_FWD], bw = p.pd[PASS_BWD_W], bd = p.pd[PASS_BWD_DATA];
	s->chunk = p.chunk;
	s->winograd = p.winograd;
	s->nchunks = d->n / s->chunk;
	s->nslots = p.slots;
	for (int i = 0; i < N_PASS; i++)
		if (p.pd[i])
			TRY(dnnl_primitive_create(&s->prim[i], p.pd[i]));
	TRY(dnnl_stream_create(&s->stream, e, dnnl_stream_default_flags));
	/* shared: weights staging (fwd and bwd-data take turns), dw sum, plain dw */
	char *w_stage = carve(ws, p.w_bytes);
	TRY(port_make(&s->w_fwd, e, &p.w, md_of(f, dnnl_query_weights_md), w_stage, true));
	if (bd)
		TRY(port_make(&s->w_bwd, e, &p.w, md_of(bd, dnnl_query_weights_md), w_stage, true));
	const dnnl_memory_desc_t *dw_md = md_of(bw, dnnl_query_diff_weights_md);
	s->dw_sum = carve(ws, p.dw_bytes);
	s->dw_floats = dnnl_memory_desc_get_size(dw_md) / sizeof(float);
	s->dw_plain = carve(ws, align64(weight_floats(d) * sizeof(float)));
	TRY(port_make(&s->dw, e, &p.w, dw_md, s->dw_sum, false));
	if (s->dw.reorder)
		TRY(dnnl_memory_set_data_handle(s->dw.user, s->dw_plain));
	if (d->bias)
		TRY(dnnl_memory_create(&s->bias, &p.b, e, DNNL_MEMORY_NONE));
	s->dy_shared = bd && dnnl_memory_desc_equal(md_of(bw, dnnl_query_diff_dst_md), md_of(bd, dnnl_query_diff_dst_md));
	for (int i = 0; i < s->nslots; i++) {
		struct slot *sl = &s->slot[i];
		char *xs = carve(ws, p.x_bytes), *ys = carve(ws, p.y_bytes), *pad = carve(ws, p.pad_bytes);
		TRY(dnnl_stream_create(&sl->stream, e, dnnl_stream_default_flags));
		TRY(port_make(&sl->x_fwd, e, &p.x, md_of(f, dnnl_query_src_md), xs, true));
		TRY(port_make(&sl->y_fwd, e, &p.y, md_of(f, dnnl_query_dst_md), ys, false));
		TRY(port_make(&sl->x_bww, e, &p.x, md_of(bw, dnnl_query_src_md), xs, true));
		TRY(port_make(&sl->dy_bww, e, &p.y, md_of(bw, dnnl_query_diff_dst_md), ys, true));
		TRY(dnnl_memory_create(&sl->dw_part, dw_md, e, carve(ws, p.dw_bytes)));
		if (bd) {
			TRY(port_make(&sl->dy_bwd, e, &p.y, md_of(bd, dnnl_query_diff_dst_md), ys, true));
			TRY(port_make(&sl->dx_bwd, e, &p.x, md_of(bd, dnnl_query_diff_src_md), xs, false));
		}
		for (int j = 0; j < N_PASS; j++)
			if (p.pd[j])
				TRY(dnnl_memory_create(&sl->pad[j], md_of(p.pd[j], dnnl_query_scratchpad_md), e, pad));
	}
	plan_free(&p);
	return s;
fail:
	if (have_plan)
		plan_free(&p);
	if (s)
		dnnl_free(s);
	return NULL;
}

/* ---- oneDNN passes ---- */

static void set_handle(dnnl_memory_t m, const void *p)
{
	DNNL_CHECK(dnnl_memory_set_data_handle(m, (void *)p));
}

static void reorder(const struct port *pt, dnnl_stream_t stream, bool input)
{
	if (!pt->reorder)
		return;
	dnnl_exec_arg_t args[2] = { { DNNL_ARG_FROM, input ? pt->user : pt->prim },
				    { DNNL_ARG_TO, input ? pt->prim : pt->user } };
	DNNL_CHECK(dnnl_primitive_execute(pt->reorder, stream, 2, args));
}

static void run(dnnl_primitive_t prim, dnnl_stream_t stream, dnnl_exec_arg_t *args, int nargs)
{
	DNNL_CHECK(dnnl_primitive_execute(prim, stream, nargs, args));
	DNNL_CHECK(dnnl_stream_wait(stream));
}

/* Threads for the chunk loop, each with a slot of its own. */
static int loop_threads(const struct conv2d_dnnl *s)
{
	int t = omp_get_max_threads();
	return t < s->nslots ? t : s->nslots;
}

static void dnnl_fwd(const struct kern_conv2d *k, const float *x, const float *w, const float *b, float *y)
{
	const struct conv2d_dnnl *s = k->dnnl;
	size_t x_chunk = (size_t)s->chunk * k->d.c_in * k->d.h * k->d.w;
	size_t y_chunk = (size_t)s->chunk * k->d.c_out * k->oh * k->ow;
	set_handle(s->w_fwd.user, w);
	reorder(&s->w_fwd, s->stream, true);
	if (s->bias)
		set_handle(s->bias, b);
	#pragma omp parallel for schedule(static, 1) num_threads(loop_threads(s))
	for (int c = 0; c < s->nchunks; c++) {
		omp_set_num_threads(1); /* oneDNN's own loops inside stay on this thread */
		const struct slot *sl = &s->slot[omp_get_thread_num()];
		set_handle(sl->x_fwd.user, x + c * x_chunk);
		set_handle(sl->y_fwd.user, y + c * y_chunk);
		reorder(&sl->x_fwd, sl->stream, true);
		dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, sl->x_fwd.prim }, { DNNL_ARG_WEIGHTS, s->w_fwd.prim },
					    { DNNL_ARG_DST, sl->y_fwd.prim }, { DNNL_ARG_SCRATCHPAD, sl->pad[PASS_FWD] },
					    { DNNL_ARG_BIAS, s->bias } };
		run(s->prim[PASS_FWD], sl->stream, args, s->bias ? 5 : 4);
		reorder(&sl->y_fwd, sl->stream, false);
	}
}

static void dnnl_bwd(const struct kern_conv2d *k, const float *x, const float *w, const float *dy,
		     float *dx, float *dw)
{
	const struct conv2d_dnnl *s = k->dnnl;
	size_t x_chunk = (size_t)s->chunk * k->d.c_in * k->d.h * k->d.w;
	size_t y_chunk = (size_t)s->chunk * k->d.c_out * k->oh * k->ow;
	if (dx) {
		set_handle(s->w_bwd.user, w);
		reorder(&s->w_bwd, s->stream, true);
	}
	#pragma omp parallel for ordered schedule(static, 1) num_threads(loop_threads(s))
	for (int c = 0; c < s->nchunks; c++) {
		omp_set_num_threads(1);
		const struct slot *sl = &s->slot[omp_get_thread_num()];
		if (dw) {
			set_handle(sl->x_bww.user, x + c * x_chunk);
			set_handle(sl->dy_bww.user, dy + c * y_chunk);
			reorder(&sl->x_bww, sl->stream, true);
			reorder(&sl->dy_bww, sl->stream, true);
			dnnl_exec_arg_t args[4] = { { DNNL_ARG_SRC, sl->x_bww.prim }, { DNNL_ARG_DIFF_DST, sl->dy_bww.prim },
						    { DNNL_ARG_DIFF_WEIGHTS, sl->dw_part },
						    { DNNL_ARG_SCRATCHPAD, sl->pad[PASS_BWD_W] } };
			run(s->prim[PASS_BWD_W], sl->stream, args, 4);
		}
		if (dx) {
			set_handle(sl->dy_bwd.user, dy + c * y_chunk);
			set_handle(sl->dx_bwd.user, dx + c * x_chunk);
			if (!dw || !s->dy_shared)
				reorder(&sl->dy_bwd, sl->stream, true);
			dnnl_exec_arg_t args[4] = { { DNNL_ARG_DIFF_DST, sl->dy_bwd.prim }, { DNNL_ARG_WEIGHTS, s->w_bwd.prim },
						    { DNNL_ARG_DIFF_SRC, sl->dx_bwd.prim },
						    { DNNL_ARG_SCRATCHPAD, sl->pad[PASS_BWD_DATA] } };
			run(s->prim[PASS_BWD_DATA], sl->stream, args, 4);
			reorder(&sl->dx_bwd, sl->stream, false);
		}
		#pragma omp ordered
		if (dw) {
			void *h;
			DNNL_CHECK(dnnl_memory_get_data_handle(sl->dw_part, &h));
			const float *restrict part = h;
			float *restrict sum = s->dw_sum;
			if (c == 0)
				memcpy(sum, part, s->dw_floats * sizeof(float));
			else
				for (size_t i = 0; i < s->dw_floats; i++)
					sum[i] += part[i];
		}
	}
	if (dw) {
		reorder(&s->dw, s->stream, false);
		kern_accumulate(dw, s->dw.reorder ? s->dw_plain : s->dw_sum, weight_floats(&k->d));
	}
}

/* ---- im2col path ---- */

/* The output range [*lo, *hi) of o for which o*s + off lies in [0, n). */
static void valid_range(int off, int s, int n, int out, int *lo, int *hi)
{
	int a = off < 0 ? (-off + s - 1) / s : 0;
	int b = n - off <= 0 ? 0 : (n - off + s - 1) / s;
	*lo = a < out ? a : out;
	*hi = b < out ? b : out;
	if (*hi < *lo)
		*hi = *lo;
}

static void im2col(const struct kern_conv2d *k, const float *restrict x, // (C_in, H, W)
		   float *restrict col)                                     // (C_in*KH*KW, OH*OW)
{
	const struct conv2d_desc *d = &k->d;
	int oh = k->oh, ow = k->ow, rows = d->c_in * d->kh * d->kw;
	#pragma omp parallel for schedule(static) if (rows * oh * ow > 32768)
	for (int r = 0; r < rows; r++) {
		int c = r / (d->kh * d->kw), i = r / d->kw % d->kh, j = r % d->kw;
		const float *plane = x + (size_t)c * d->h * d->w;
		float *out = col + (size_t)r * oh * ow;
		int xoff = j * d->dw - d->pw, lo, hi;
		valid_range(xoff, d->sw, d->w, ow, &lo, &hi);
		for (int oy = 0; oy < oh; oy++) {
			int iy = oy * d->sh - d->ph + i * d->dh;
			float *o = out + (size_t)oy * ow;
			if (iy < 0 || iy >= d->h || lo == hi) {
				memset(o, 0, sizeof(float) * ow);
				continue;
			}
			const float *src = plane + (size_t)iy * d->w + xoff;
			memset(o, 0, sizeof(float) * lo);
			if (d->sw == 1)
				memcpy(o + lo, src + lo, sizeof(float) * (hi - lo));
			else
				for (int ox = lo; ox < hi; ox++)
					o[ox] = src[ox * d->sw];
			memset(o + hi, 0, sizeof(float) * (ow - hi));
		}
	}
}

/* dx = fold(col): every channel by one thread, so each sum keeps one order. */
static void col2im(const struct kern_conv2d *k, const float *restrict col, // (C_in*KH*KW, OH*OW)
		   float *restrict dx)                                      // (C_in, H, W)
{
	const struct conv2d_desc *d = &k->d;
	int oh = k->oh, ow = k->ow;
	#pragma omp parallel for schedule(static) if (d->c_in * d->kh * d->kw * oh * ow > 32768)
	for (int c = 0; c < d->c_in; c++) {
		float *plane = dx + (size_t)c * d->h * d->w;
		memset(plane, 0, sizeof(float) * d->h * d->w);
		for (int i = 0; i < d->kh; i++)
			for (int j = 0; j < d->kw; j++) {
				const float *in = col + ((size_t)(c * d->kh + i) * d->kw + j) * oh * ow;
				int xoff = j * d->dw - d->pw, lo, hi;
				valid_range(xoff, d->sw, d->w, ow, &lo, &hi);
				for (int oy = 0; oy < oh; oy++) {
					int iy = oy * d->sh - d->ph + i * d->dh;
					if (iy < 0 || iy >= d->h || lo == hi)
						continue;
					float *dst = plane + (size_t)iy * d->w + xoff;
					const float *src = in + (size_t)oy * ow;
					if (d->sw == 1)
						for (int ox = lo; ox < hi; ox++)
							dst[ox] += src[ox];
					else
						for (int ox = lo; ox < hi; ox++)
							dst[ox * d->sw] += src[ox];
				}
			}
	}
}

static void im2col_fwd(const struct kern_conv2d *k, const float *x, const float *w, const float *b, float *y)
{
	const struct conv2d_desc *d = &k->d;
	int hw_out = k->oh * k->ow, g = d->groups;
	int cout_g = d->c_out / g, kg = d->c_in / g * d->kh * d->kw;
	for (int n = 0; n < d->n; n++) {
		const float *xn = x + (size_t)n * d->c_in * d->h * d->w; // (C_in, H, W)
		float *yn = y + (size_t)n * d->c_out * hw_out;           // (C_out, OH*OW)
		const float *col = xn;
		if (!k->direct) {
			im2col(k, xn, k->col);
			col = k->col;
		}
		for (int gi = 0; gi < g; gi++)
			kern_gemm(false, false, cout_g, hw_out, kg, 1.0f,
				    w + (size_t)gi * cout_g * kg, kg, col + (size_t)gi * kg * hw_out, hw_out,
				    0.0f, yn + (size_t)gi * cout_g * hw_out, hw_out);
		if (b) {
			#pragma omp parallel for schedule(static) if (d->c_out * hw_out > 32768)
			for (int co = 0; co < d->c_out; co++) {
				float *row = yn + (size_t)co * hw_out, bc = b[co];
				for (int i = 0; i < hw_out; i++)
					row[i] += bc;
			}
		}
	}
}

static void im2col_bwd(const struct kern_conv2d *k, const float *x, const float *w, const float *dy,
		       float *dx, float *dw)
{
	const struct conv2d_desc *d = &k->d;
	int hw_out = k->oh * k->ow, g = d->groups;
	int cout_g = d->c_out / g, kg = d->c_in / g * d->kh * d->kw;
	for (int n = 0; n < d->n; n++) {
		const float *xn = x + (size_t)n * d->c_in * d->h * d->w; // (C_in, H, W)
		const float *dyn = dy + (size_t)n * d->c_out * hw_out;   // (C_out, OH*OW)
		if (dw) {
			const float *col = xn;
			if (!k->direct) {
				im2col(k, xn, k->col);
				col = k->col;
			}
			for (int gi = 0; gi < g; gi++)
				kern_gemm(false, true, cout_g, kg, hw_out, 1.0f,
					    dyn + (size_t)gi * cout_g * hw_out, hw_out,
					    col + (size_t)gi * kg * hw_out, hw_out,
					    1.0f, dw + (size_t)gi * cout_g * kg, kg);
		}
		if (dx) {
			float *dxn = dx + (size_t)n * d->c_in * d->h * d->w;
			float *dcol = k->direct ? dxn : k->col;
			for (int gi = 0; gi < g; gi++)
				kern_gemm(true, false, kg, hw_out, cout_g, 1.0f,
					    w + (size_t)gi * cout_g * kg, kg, dyn + (size_t)gi * cout_g * hw_out, hw_out,
					    0.0f, dcol + (size_t)gi * kg * hw_out, hw_out);
			if (!k->direct)
				col2im(k, dcol, dxn);
		}
	}
}

/* ---- entry points ---- */

int kern_conv2d_prepare(struct kern_conv2d *k, const struct conv2d_desc *d, void *workspace)
{
	return kern_conv2d_prepare_within(k, d, workspace, SIZE_MAX);
}

int kern_conv2d_prepare_within(struct kern_conv2d *k, const struct conv2d_desc *d, void *workspace, size_t bytes)
{
	memset(k, 0, sizeof *k);
	if (!valid(d))
		return KERN_ERR_SHAPE;
	assert(((uintptr_t)workspace & 63) == 0);
	k->d = *d;
	k->oh = kern_window_out(d->h, d->kh, d->sh, d->ph, d->dh, false);
	k->ow = kern_window_out(d->w, d->kw, d->sw, d->pw, d->dw, false);
	k->direct = d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0;
	char *ws = workspace;
	if (d->path != KERN_CONV_IM2COL) {
		bool too_big;
		k->dnnl = dnnl_make(d, &ws, bytes, &too_big);
		if (!k->dnnl && (d->path == KERN_CONV_DNNL || d->path == KERN_CONV_WINOGRAD))
			return too_big ? KERN_ERR_WORKSPACE : KERN_ERR_UNSUPPORTED;
		if (!k->dnnl) {
			ws = workspace;
		} else {
			k->winograd = k->dnnl->winograd;
			k->slots = k->dnnl->nslots;
		}
	}
	if (!k->dnnl || !k->dnnl->prim[PASS_BWD_DATA]) {
		if (!k->dnnl && col_bytes(d) > bytes)
			return KERN_ERR_WORKSPACE;
		k->col = carve(&ws, col_bytes(d));
	}
	return KERN_OK;
}

void kern_conv2d_release(struct kern_conv2d *k)
{
	if (k->dnnl)
		dnnl_free(k->dnnl);
	memset(k, 0, sizeof *k);
}

void kern_conv2d_fwd(const struct kern_conv2d *k, const float *x, const float *w, const float *b, float *y)
{
	assert(!k->d.bias || b);
	if (k->dnnl)
		dnnl_fwd(k, x, w, k->d.bias ? b : NULL, y);
	else
		im2col_fwd(k, x, w, k->d.bias ? b : NULL, y);
}

void kern_conv2d_bwd(const struct kern_conv2d *k, const float *x, const float *w, const float *dy,
		     float *dx, float *dw, float *db)
{
	const struct conv2d_desc *d = &k->d;
	if (!k->dnnl) {
		im2col_bwd(k, x, w, dy, dx, dw);
	} else if (k->dnnl->prim[PASS_BWD_DATA]) {
		if (dx || dw)
			dnnl_bwd(k, x, w, dy, dx, dw);
	} else {
		if (dw)
			dnnl_bwd(k, x, w, dy, NULL, dw);
		if (dx)
			im2col_bwd(k, x, w, dy, dx, NULL);
	}
	int hw_out = k->oh * k->ow;
	if (db && d->bias) {
		#pragma omp parallel for schedule(static) if (d->n * d->c_out * hw_out > 32768)
		for (int co = 0; co < d->c_out; co++) {
			double s = 0;
			for (int n = 0; n < d->n; n++) {
				const float *row = dy + ((size_t)n * d->c_out + co) * hw_out;
				float part = 0;
				#pragma omp simd reduction(+:part)
				for (int i = 0; i < hw_out; i++)
					part += row[i];
				s += part;
			}
			db[co] += (float)s;
		}
	}
}
