/* sched.c: closed forms of torch.optim.lr_scheduler's StepLR, MultiStepLR,
 * ExponentialLR and CosineAnnealingLR (with an optional linear warmup), in
 * double with the operation order of the Python they mirror.
 * Does not: keep state between calls or round to float (optim_step takes
 * the lr in double, as torch's param_groups hold it).
 * Invariant: sched_lr_at depends on its arguments only.
 */
#include "runtime/sched.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

/* sched_kind_table */
static const char *const kind_names[SCHED_KIND_COUNT] = {
	[SCHED_CONSTANT] = "constant", [SCHED_STEP] = "step", [SCHED_MULTISTEP] = "multistep",
	[SCHED_EXPONENTIAL] = "exponential", [SCHED_COSINE] = "cosine",
};

const char *sched_kind_name(enum sched_kind kind)
{
	assert(kind >= 0 && kind < SCHED_KIND_COUNT);
	return kind_names[kind];
}

struct sched_cfg sched_cfg_default(enum sched_kind kind)
{
	struct sched_cfg c = { .kind = kind, .unit = SCHED_PER_EPOCH, .step_size = 0, .gamma = 0.1,
			       .n_milestones = 0, .t_max = 0, .eta_min = 0, .warmup = 0 };
	if (kind == SCHED_EXPONENTIAL) c.gamma = NAN; /* ExponentialLR has no default gamma */
	return c;
}

const char *sched_cfg_check(const struct sched_cfg *c)
{
	switch (c->kind) {
	case SCHED_CONSTANT: return NULL;
	case SCHED_STEP:
		if (c->step_size < 1) return "step_size must be >= 1";
		break;
	case SCHED_MULTISTEP:
		if (c->n_milestones < 1 || c->n_milestones > SCHED_MAX_MILESTONES)
			return "milestones: between 1 and 16 of them";
		for (int i = 0; i < c->n_milestones; i++)
			if (c->milestones[i] < 0) return "milestones must be >= 0";
		break;
	case SCHED_EXPONENTIAL: break;
	case SCHED_COSINE:
		if (c->warmup < 0) return "warmup must be >= 0";
		if (c->t_max <= c->warmup) return "t_max must exceed warmup (and 0)";
		if (isnan(c->eta_min)) return "eta_min must be a number";
		return NULL;
	case SCHED_KIND_COUNT:
	default: return "unknown schedule";
	}
	if (isnan(c->gamma)) return "gamma is required";
	if (!(c->gamma >= 0)) return "gamma must be >= 0";
	return NULL;
}

double sched_lr_at(const struct sched_cfg *c, double base, int64_t t)
{
	assert(t >= 0);
	switch (c->kind) {
	case SCHED_CONSTANT: return base;
	case SCHED_STEP: return base * pow(c->gamma, (double)(t / c->step_size));
	case SCHED_MULTISTEP: {
		/* bisect_right over the sorted milestones counts those <= t */
		int k = 0;
		for (int i = 0; i < c->n_milestones; i++) k += c->milestones[i] <= t;
		return base * pow(c->gamma, (double)k);
	}
	case SCHED_EXPONENTIAL: return base * pow(c->gamma, (double)t);
	case SCHED_COSINE: {
		if (t < c->warmup) return base * (double)(t + 1) / (double)c->warmup;
		double u = (double)(t - c->warmup), period = (double)(c->t_max - c->warmup);
		const double pi = 3.141592653589793;
		return c->eta_min + (base - c->eta_min) * (1 + cos(pi * u / period)) / 2;
	}
	case SCHED_KIND_COUNT: break;
	}
	assert(0 && "not a schedule");
	return base;
}

double sched_lr(const struct sched_cfg *c, double base, int64_t epoch, int64_t step)
{
	return sched_lr_at(c, base, c->unit == SCHED_PER_EPOCH ? epoch : step);
}
