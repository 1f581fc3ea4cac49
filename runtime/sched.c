/* sched.c: closed forms of torch.optim.lr_scheduler's StepLR, MultiStepLR,
 * ExponentialLR, CosineAnnealingLR (with an optional linear warmup),
 * ConstantLR, LinearLR, PolynomialLR and CosineAnnealingWarmRestarts, in
 * double with the operation order of the Python they mirror.
 * ReduceLROnPlateau's step(metric) on its state (sched_plateau_step).
 * Does not: round to float (optim_step takes the lr in double, as torch's
 * param_groups hold it).
 * Invariant: sched_lr_at depends on its arguments only.
 */
#include "runtime/sched.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

/* sched_kind_table */
static const char *const kind_names[SCHED_KIND_COUNT] = {
	[SCHED_CONSTANT] = "constant", [SCHED_STEP] = "step", [SCHED_MULTISTEP] = "multistep",
	[SCHED_EXPONENTIAL] = "exponential", [SCHED_COSINE] = "cosine", [SCHED_CONSTANT_LR] = "constant_lr",
	[SCHED_LINEAR] = "linear", [SCHED_POLYNOMIAL] = "polynomial", [SCHED_COSINE_RESTARTS] = "cosine_restarts",
	[SCHED_PLATEAU] = "plateau", [SCHED_ONE_CYCLE] = "one_cycle",
};

const char *sched_kind_name(enum sched_kind kind)
{
	assert(kind >= 0 && kind < SCHED_KIND_COUNT);
	return kind_names[kind];
}

struct sched_cfg sched_cfg_default(enum sched_kind kind)
{
	struct sched_cfg c = { .kind = kind, .unit = SCHED_PER_EPOCH, .step_size = 0, .gamma = 0.1,
			       .n_milestones = 0, .t_max = 0, .eta_min = 0, .warmup = 0, .factor = 1.0 / 3,
			       .start_factor = 1.0 / 3, .end_factor = 1.0, .power = 1.0, .total_iters = 5, .t_0 = 0, .t_mult = 1 };
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
	case SCHED_CONSTANT_LR:
		if (!(c->factor > 0 && c->factor <= 1)) return "factor must be above 0 and at most 1";
		return c->total_iters < 1 ? "total_iters must be >= 1" : NULL;
	case SCHED_LINEAR:
		if (!(c->start_factor > 0 && c->start_factor <= 1)) return "start_factor must be above 0 and at most 1";
		if (!(c->end_factor >= 0 && c->end_factor <= 1)) return "end_factor must be between 0 and 1";
		return c->total_iters < 1 ? "total_iters must be >= 1" : NULL;
	case SCHED_POLYNOMIAL:
		if (!(c->power >= 0 && isfinite(c->power))) return "power must be a number >= 0";
		return c->total_iters < 1 ? "total_iters must be >= 1" : NULL;
	case SCHED_COSINE_RESTARTS:
		if (c->t_0 < 1) return "t_0 must be >= 1";
		if (c->t_mult < 1) return "t_mult must be >= 1";
		return isnan(c->eta_min) ? "eta_min must be a number" : NULL;
	case SCHED_PLATEAU:
		if (!(c->factor >= 0 && c->factor < 1)) return "factor must be at least 0 and below 1";
		if (c->patience < 0 || c->cooldown < 0) return "patience and cooldown must be >= 0";
		if (!(c->threshold >= 0) || !(c->min_lr >= 0) || !(c->eps >= 0)) return "threshold, min_lr and eps must be >= 0";
		return NULL;
	case SCHED_ONE_CYCLE:
		if (c->total < 1) return "total_steps must be >= 1";
		if (!(c->pct_start >= 0 && c->pct_start <= 1)) return "pct_start must be between 0 and 1";
		if (!(c->div_factor > 0 && c->final_div_factor > 0)) return "div_factor and final_div_factor must be above 0";
		return c->max_lr >= 0 ? NULL : "max_lr must be >= 0";
	case SCHED_KIND_COUNT:
	default: return "unknown schedule";
	}
	if (isnan(c->gamma)) return "gamma is required";
	if (!(c->gamma >= 0)) return "gamma must be >= 0";
	return NULL;
}

/* OneCycleLR.get_lr's phases: each (end step, start and end rate or
 * momentum), the first whose end is not before t (or the last) annealed
 * from the one before's end; ends as floats, as OneCycleLR keeps them. */
static double one_cycle(const struct sched_cfg *c, int64_t t, bool momentum)
{
	double initial = c->max_lr / c->div_factor, min = initial / c->final_div_factor, n = (double)c->total;
	double lo = c->base_momentum, hi = c->max_momentum;
	struct phase { double end, from, to, mfrom, mto; } ph[3];
	int k = 0;
	ph[k++] = (struct phase){ c->pct_start * n - 1, initial, c->max_lr, hi, lo };
	if (c->three_phase) {
		ph[k++] = (struct phase){ 2 * c->pct_start * n - 2, c->max_lr, initial, lo, hi };
		ph[k++] = (struct phase){ n - 1, initial, min, hi, hi };
	} else {
		ph[k++] = (struct phase){ n - 1, c->max_lr, min, lo, hi };
	}
	double start = 0, x = (double)t;
	for (int i = 0; i < k; i++) {
		if (x <= ph[i].end || i == k - 1) {
			double span = ph[i].end - start, pct = span != 0 ? (x - start) / span : 0; /* OneCycleLR divides by 0 there */
			double a = momentum ? ph[i].mfrom : ph[i].from, b = momentum ? ph[i].mto : ph[i].to;
			if (c->anneal_linear)
				return (b - a) * pct + a;
			const double pi = 3.141592653589793;
			return b + (a - b) / 2.0 * (cos(pi * pct) + 1);
		}
		start = ph[i].end;
	}
	return 0;
}

double sched_momentum_at(const struct sched_cfg *c, int64_t t)
{
	return one_cycle(c, t, true);
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
	case SCHED_CONSTANT_LR: return base * (c->factor + (double)(t >= c->total_iters) * (1 - c->factor));
	case SCHED_LINEAR: {
		double done = (double)(t < c->total_iters ? t : c->total_iters);
		return base * (c->start_factor + (c->end_factor - c->start_factor) * done / (double)c->total_iters);
	}
	case SCHED_POLYNOMIAL: {
		double done = (double)(t < c->total_iters ? t : c->total_iters);
		return base * pow(1.0 - done / (double)c->total_iters, c->power);
	}
	case SCHED_COSINE_RESTARTS: {
		/* step()'s count: t_cur + 1, and past the period t_cur - t_i, t_i * t_mult */
		int64_t t_i = c->t_0, t_cur = t;
		if (c->t_mult == 1)
			t_cur = t % t_i;
		else
			while (t_cur >= t_i) {
				t_cur -= t_i;
				t_i = t_i > INT64_MAX / c->t_mult ? INT64_MAX : t_i * c->t_mult;
			}
		const double pi = 3.141592653589793;
		return c->eta_min + (base - c->eta_min) * (1 + cos(pi * (double)t_cur / (double)t_i)) / 2;
	}
	case SCHED_PLATEAU: return base;
	case SCHED_ONE_CYCLE: return one_cycle(c, t, false);
	case SCHED_KIND_COUNT: break;
	}
	assert(0 && "not a schedule");
	return base;
}

double sched_lr(const struct sched_cfg *c, double base, int64_t epoch, int64_t step)
{
	return sched_lr_at(c, base, c->unit == SCHED_PER_EPOCH ? epoch : step);
}

struct sched_plateau sched_plateau_start(const struct sched_cfg *c, double base)
{
	return (struct sched_plateau){ .lr = base, .best = c->mode_max ? -INFINITY : INFINITY };
}

/* ReduceLROnPlateau.is_better, in its operation order */
static bool improves(const struct sched_cfg *c, double a, double best)
{
	if (c->mode_max)
		return c->threshold_abs ? a > best + c->threshold : a > best * (c->threshold + 1.0);
	return c->threshold_abs ? a < best - c->threshold : a < best * (1.0 - c->threshold);
}

bool sched_plateau_step(const struct sched_cfg *c, struct sched_plateau *s, double metric)
{
	s->epochs++;
	if (improves(c, metric, s->best)) {
		s->best = metric;
		s->bad = 0;
	} else {
		s->bad++;
	}
	if (s->cooldown > 0) { /* bad epochs in a cooldown are not counted */
		s->cooldown--;
		s->bad = 0;
	}
	if (s->bad <= c->patience)
		return false;
	s->cooldown = c->cooldown;
	s->bad = 0;
	double lr = fmax(s->lr * c->factor, c->min_lr); /* max(old * factor, min_lr) */
	if (!(s->lr - lr > c->eps))
		return false;
	s->lr = lr;
	return true;
}
