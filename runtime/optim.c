/* optim.c: the update loops of torch.optim's eight optimizers, and global-norm
 * gradient clipping, over flat float ranges.
 * Each loop replays the tensor operations of PyTorch 1.13's single-tensor
 * path element by element, in the same order and precision: hyperparameters
 * are rounded to float where torch passes them as scalars, step-dependent
 * factors are computed in double as torch computes them in Python, and
 * fmaf stands wherever torch's vectorised CPU kernels fuse (add with alpha,
 * addcmul) and nowhere else (addcdiv, div, sqrt round separately); checked
 * bit for bit against torch 1.13's AVX2 kernels.  C11 mode turns off the
 * compiler's own contraction, so the fusions are exactly these, and a host
 * without FMA gets the same bits from libm's fmaf, only slower.
 * Does not: allocate, pick the lr, reduce across ranks, support maximize.
 * Invariant: element i's update reads and writes only element i, so results
 * are independent of range splits and thread count.
 */
#include "runtime/optim.h"
#include "runtime/optim_elem.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN 32768

/* optim_kind_table */
static const char *const kind_names[OPTIM_KIND_COUNT] = {
	[OPTIM_SGD] = "sgd", [OPTIM_ADAM] = "adam", [OPTIM_ADAMW] = "adamw",
	[OPTIM_ADADELTA] = "adadelta", [OPTIM_ADAGRAD] = "adagrad", [OPTIM_RMSPROP] = "rmsprop",
	[OPTIM_ADAMAX] = "adamax", [OPTIM_RADAM] = "radam",
};

const char *optim_kind_name(enum optim_kind kind)
{
	assert(kind >= 0 && kind < OPTIM_KIND_COUNT);
	return kind_names[kind];
}

struct optim_cfg optim_cfg_default(enum optim_kind kind)
{
	/* Fields a kind ignores still hold the default of the kind that uses
	 * them, so switching kind keeps sensible values. */
	struct optim_cfg c = {
		.kind = kind, .lr = 1e-3, .weight_decay = 0, .momentum = 0, .dampening = 0, .nesterov = 0,
		.beta1 = 0.9, .beta2 = 0.999, .amsgrad = 0, .eps = 1e-8, .rho = 0.9, .lr_decay = 0,
		.initial_accumulator_value = 0, .alpha = 0.99, .centered = 0,
	};
	switch (kind) {
	case OPTIM_SGD: c.lr = NAN; break; /* torch.optim.SGD requires lr; optim_cfg_check says so */
	case OPTIM_ADAM: break;
	case OPTIM_ADAMW: c.weight_decay = 1e-2; break;
	case OPTIM_ADADELTA: c.lr = 1.0; c.eps = 1e-6; break;
	case OPTIM_ADAGRAD: c.lr = 1e-2; c.eps = 1e-10; break;
	case OPTIM_RMSPROP: c.lr = 1e-2; c.eps = 1e-8; break;
	case OPTIM_ADAMAX: c.lr = 2e-3; break;
	case OPTIM_RADAM: break;
	case OPTIM_KIND_COUNT: assert(0 && "not an optimizer"); break;
	}
	return c;
}

const char *optim_cfg_check(const struct optim_cfg *c)
{
	if (c->kind < 0 || c->kind >= OPTIM_KIND_COUNT) return "unknown optimizer";
	if (isnan(c->lr)) return "lr is required";
	if (!(c->lr >= 0)) return "lr must be >= 0";
	if (!(c->weight_decay >= 0)) return "weight_decay must be >= 0";
	switch (c->kind) {
	case OPTIM_SGD:
		if (!(c->momentum >= 0)) return "momentum must be >= 0";
		if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
			return "nesterov requires momentum > 0 and dampening = 0";
		break;
	case OPTIM_ADAM:
	case OPTIM_ADAMW:
	case OPTIM_ADAMAX:
	case OPTIM_RADAM:
		if (!(c->eps >= 0)) return "eps must be >= 0";
		if (!(c->beta1 >= 0 && c->beta1 < 1)) return "beta1 must be in [0, 1)";
		if (!(c->beta2 >= 0 && c->beta2 < 1)) return "beta2 must be in [0, 1)";
		break;
	case OPTIM_ADADELTA:
		if (!(c->eps >= 0)) return "eps must be >= 0";
		if (!(c->rho >= 0 && c->rho <= 1)) return "rho must be in [0, 1]";
		break;
	case OPTIM_ADAGRAD:
		if (!(c->eps >= 0)) return "eps must be >= 0";
		if (!(c->lr_decay >= 0)) return "lr_decay must be >= 0";
		if (!(c->initial_accumulator_value >= 0)) return "initial_accumulator_value must be >= 0";
		break;
	case OPTIM_RMSPROP:
		if (!(c->eps >= 0)) return "eps must be >= 0";
		if (!(c->momentum >= 0)) return "momentum must be >= 0";
		if (!(c->alpha >= 0)) return "alpha must be >= 0";
		break;
	case OPTIM_KIND_COUNT: break;
	}
	return NULL;
}

int optim_state_floats(enum optim_kind kind, const struct optim_cfg *cfg)
{
	struct optim_cfg d;
	if (!cfg) {
		d = optim_cfg_default(kind);
		cfg = &d;
	}
	assert(cfg->kind == kind);
	switch (kind) {
	case OPTIM_SGD: return cfg->momentum != 0;
	case OPTIM_ADAM:
	case OPTIM_ADAMW: return 2 + (cfg->amsgrad != 0);
	case OPTIM_ADADELTA: return 2;
	case OPTIM_ADAGRAD: return 1;
	case OPTIM_RMSPROP: return 1 + (cfg->momentum > 0) + (cfg->centered != 0);
	case OPTIM_ADAMAX:
	case OPTIM_RADAM: return 2;
	case OPTIM_KIND_COUNT: break;
	}
	assert(0 && "not an optimizer");
	return 0;
}

void optim_state_init(const struct optim_cfg *cfg, struct optim_state_view st, int64_t n)
{
	int k = optim_state_floats(cfg->kind, cfg);
	float first = cfg->kind == OPTIM_ADAGRAD ? (float)cfg->initial_accumulator_value : 0.0f;
	for (int j = 0; j < k; j++) {
		float *plane = st.base + j * st.plane_stride, v = j == 0 ? first : 0.0f;
		for (int64_t i = 0; i < n; i++) plane[i] = v;
	}
}

/* The update loops.  Each optimizer has a constants struct and an element
 * function (optim_elem.h, shared with the CUDA kernel), and here a loop
 * function whose restrict pointers let the compiler
 * vectorise without run-time alias checks (too many pointers for those
 * otherwise).  Optional state planes are NULL when absent, and each
 * combination gets its own loop in which the element function sees the
 * choice as a literal: a branch left in the loop is if-converted into masked
 * loads and stores, which ran 15-50 times slower on an AVX-512 host.
 * Options that only choose between values in registers stay flags. */
struct job {
	const void *k;    /* the optimizer's constants: struct optim_sgd_k... */
	float *p;         /* (n,) parameters */
	const float *g;   /* (n,) gradients */
	float *s[3];      /* (n,) each: state planes in optim.h's order, NULL where absent;
			   * RMSprop's are unpacked: square_avg, momentum_buffer, grad_avg */
};

/* Calls range(job, lo, hi) over a split of [0, n) into one contiguous
 * piece per thread. */
static void run_ranges(int64_t n, void (*range)(const struct job *, int64_t, int64_t), const struct job *job)
{
	if (n < PAR_MIN) {
		range(job, 0, n);
		return;
	}
#pragma omp parallel
	{
		int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
		range(job, n * t / nt, n * (t + 1) / nt);
	}
}

static float *plane_at(float *plane, int64_t lo)
{
	return plane ? plane + lo : NULL;
}

static void sgd_loop(const struct optim_sgd_k *kp, float *restrict p, const float *restrict g, float *restrict buf,
		     int64_t n)
{
	const struct optim_sgd_k k = *kp; /* a local copy, which stores through p cannot change */
	if (buf)
		for (int64_t i = 0; i < n; i++) optim_sgd_at(&k, 1, p, g, buf, i);
	else
		for (int64_t i = 0; i < n; i++) optim_sgd_at(&k, 0, p, g, NULL, i);
}

static void sgd_range(const struct job *j, int64_t lo, int64_t hi)
{
	sgd_loop(j->k, j->p + lo, j->g + lo, plane_at(j->s[0], lo), hi - lo);
}

static void adam_loop(const struct optim_adam_k *kp, float *restrict p, const float *restrict g, float *restrict m,
		      float *restrict v, float *restrict vmax, int64_t n)
{
	const struct optim_adam_k k = *kp;
	if (vmax)
		for (int64_t i = 0; i < n; i++) optim_adam_at(&k, 1, p, g, m, v, vmax, i);
	else
		for (int64_t i = 0; i < n; i++) optim_adam_at(&k, 0, p, g, m, v, NULL, i);
}

static void adam_range(const struct job *j, int64_t lo, int64_t hi)
{
	adam_loop(j->k, j->p + lo, j->g + lo, j->s[0] + lo, j->s[1] + lo, plane_at(j->s[2], lo), hi - lo);
}

static void adadelta_loop(const struct optim_adadelta_k *kp, float *restrict p, const float *restrict g,
			  float *restrict sq, float *restrict acc, int64_t n)
{
	const struct optim_adadelta_k k = *kp;
	for (int64_t i = 0; i < n; i++) optim_adadelta_at(&k, p, g, sq, acc, i);
}

static void adadelta_range(const struct job *j, int64_t lo, int64_t hi)
{
	adadelta_loop(j->k, j->p + lo, j->g + lo, j->s[0] + lo, j->s[1] + lo, hi - lo);
}

static void adagrad_loop(const struct optim_adagrad_k *kp, float *restrict p, const float *restrict g,
			 float *restrict sum, int64_t n)
{
	const struct optim_adagrad_k k = *kp;
	for (int64_t i = 0; i < n; i++) optim_adagrad_at(&k, p, g, sum, i);
}

static void adagrad_range(const struct job *j, int64_t lo, int64_t hi)
{
	adagrad_loop(j->k, j->p + lo, j->g + lo, j->s[0] + lo, hi - lo);
}

static void rmsprop_loop(const struct optim_rmsprop_k *kp, float *restrict p, const float *restrict g,
			 float *restrict sq, float *restrict buf, float *restrict gavg, int64_t n)
{
	const struct optim_rmsprop_k k = *kp;
	if (buf && gavg)
		for (int64_t i = 0; i < n; i++) optim_rmsprop_at(&k, 1, 1, p, g, sq, buf, gavg, i);
	else if (buf)
		for (int64_t i = 0; i < n; i++) optim_rmsprop_at(&k, 1, 0, p, g, sq, buf, NULL, i);
	else if (gavg)
		for (int64_t i = 0; i < n; i++) optim_rmsprop_at(&k, 0, 1, p, g, sq, NULL, gavg, i);
	else
		for (int64_t i = 0; i < n; i++) optim_rmsprop_at(&k, 0, 0, p, g, sq, NULL, NULL, i);
}

static void rmsprop_range(const struct job *j, int64_t lo, int64_t hi)
{
	rmsprop_loop(j->k, j->p + lo, j->g + lo, j->s[0] + lo, plane_at(j->s[1], lo), plane_at(j->s[2], lo),
		     hi - lo);
}

static void adamax_loop(const struct optim_adamax_k *kp, float *restrict p, const float *restrict g, float *restrict m,
			float *restrict u, int64_t n)
{
	const struct optim_adamax_k k = *kp;
	for (int64_t i = 0; i < n; i++) optim_adamax_at(&k, p, g, m, u, i);
}

static void adamax_range(const struct job *j, int64_t lo, int64_t hi)
{
	adamax_loop(j->k, j->p + lo, j->g + lo, j->s[0] + lo, j->s[1] + lo, hi - lo);
}

static void radam_loop(const struct optim_radam_k *kp, float *restrict p, const float *restrict g, float *restrict m,
		       float *restrict v, int64_t n)
{
	const struct optim_radam_k k = *kp;
	if (k.rectify)
		for (int64_t i = 0; i < n; i++) optim_radam_at(&k, 1, p, g, m, v, i);
	else
		for (int64_t i = 0; i < n; i++) optim_radam_at(&k, 0, p, g, m, v, i);
}

static void radam_range(const struct job *j, int64_t lo, int64_t hi)
{
	radam_loop(j->k, j->p + lo, j->g + lo, j->s[0] + lo, j->s[1] + lo, hi - lo);
}

void optim_step(const struct optim_cfg *c, struct optim_state_view st, float *param, const float *grad,
		int64_t n, int64_t step, double lr)
{
	assert(step >= 1 && n >= 0);
	/* state plane j of this range, or NULL past the kind's count */
	int k = optim_state_floats(c->kind, c);
	float *plane[3] = { NULL, NULL, NULL };
	for (int j = 0; j < k; j++) plane[j] = st.base + j * st.plane_stride;
	const struct optim_coef co = optim_coef_of(c, step, lr);
	struct job job = { .p = param, .g = grad, .s = { plane[0], plane[1], plane[2] } };
	switch (c->kind) {
	case OPTIM_SGD:
		job.k = &co.sgd;
		run_ranges(n, sgd_range, &job);
		return;
	case OPTIM_ADAM:
	case OPTIM_ADAMW:
		job.k = &co.adam;
		run_ranges(n, adam_range, &job);
		return;
	case OPTIM_ADADELTA:
		job.k = &co.adadelta;
		run_ranges(n, adadelta_range, &job);
		return;
	case OPTIM_ADAGRAD:
		job.k = &co.adagrad;
		run_ranges(n, adagrad_range, &job);
		return;
	case OPTIM_RMSPROP:
		/* the planes after square_avg are packed: grad_avg moves up when
		 * there is no momentum buffer */
		job.s[1] = co.mom_buf ? plane[1] : NULL;
		job.s[2] = co.centered ? plane[1 + co.mom_buf] : NULL;
		job.k = &co.rmsprop;
		run_ranges(n, rmsprop_range, &job);
		return;
	case OPTIM_ADAMAX:
		job.k = &co.adamax;
		run_ranges(n, adamax_range, &job);
		return;
	case OPTIM_RADAM:
		job.k = &co.radam;
		run_ranges(n, radam_range, &job);
		return;
	case OPTIM_KIND_COUNT: break;
	}
	assert(0 && "not an optimizer");
}

/* optim_sumsq splits x into at most SUMSQ_PARTS chunks whose size depends
 * only on n; each chunk is summed in 8 fixed lanes, and the chunk sums are
 * added in order.  Threads take whole chunks, so they change nothing. */
#define SUMSQ_PARTS 256
#define SUMSQ_MIN_CHUNK 4096

static double chunk_sumsq(const float *x, int64_t n)
{
	double lane[8] = { 0 };
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++) lane[j] += (double)x[i + j] * (double)x[i + j];
	for (int j = 0; i < n; i++, j++) lane[j] += (double)x[i] * (double)x[i];
	return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

double optim_sumsq(const float *x, int64_t n)
{
	double part[SUMSQ_PARTS];
	int64_t chunk = (n + SUMSQ_PARTS - 1) / SUMSQ_PARTS;
	if (chunk < SUMSQ_MIN_CHUNK) chunk = SUMSQ_MIN_CHUNK;
	int64_t parts = (n + chunk - 1) / chunk;
#pragma omp parallel for if (parts > 1) schedule(static)
	for (int64_t k = 0; k < parts; k++) {
		int64_t lo = k * chunk, len = n - lo < chunk ? n - lo : chunk;
		part[k] = chunk_sumsq(x + lo, len);
	}
	double s = 0;
	for (int64_t k = 0; k < parts; k++) s += part[k];
	return s;
}

void optim_scale(float *x, int64_t n, float c)
{
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++) x[i] *= c;
}

float optim_clip_coef(double total_norm, double max_norm)
{
	return optim_elem_clip_coef(total_norm, max_norm);
}

double optim_clip_grad_norm(double sumsq, double max_norm, void (*scale)(void *ctx, float coef), void *ctx)
{
	double total = sqrt(sumsq);
	float coef = optim_clip_coef(total, max_norm);
	/* torch multiplies by the clamped factor unconditionally; a factor of
	 * exactly 1 changes nothing, so skip it, but let a NaN through. */
	if (!(coef >= 1.0f)) scale(ctx, coef);
	return total;
}
