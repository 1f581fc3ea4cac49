/* sched.h: learning-rate schedules as pure functions of a tick count.
 * A tick is an epoch or an optimizer step, as the config says; the lr for
 * tick t is what torch.optim.lr_scheduler gives after t calls to
 * scheduler.step(), computed by the schedulers' closed forms
 * (_get_closed_form_lr) rather than their chained updates, so any tick can be
 * asked for in any order (resuming, several ranks) in O(milestones).
 * The chained form multiplies lr by gamma at each boundary instead of taking
 * a power (LinearLR and PolynomialLR by ratios of their factors); the two
 * agree to a few ulps of a double, far below float.  CosineAnnealingWarmRestarts
 * has no closed form in PyTorch: its restarts are counted here in integers,
 * as its step() counts them.
 * ReduceLROnPlateau is the exception: its rate follows the metric of each
 * epoch, so it is a state (struct sched_plateau) that sched_plateau_step
 * moves on, as its step(metric) does; the checkpoint keeps it.
 */
#ifndef SCHED_H
#define SCHED_H
#include <stdbool.h>
#include <stdint.h>

/* Tables indexed by this enum are tagged sched_kind_table. */
enum sched_kind {
	SCHED_CONSTANT, SCHED_STEP, SCHED_MULTISTEP, SCHED_EXPONENTIAL, SCHED_COSINE,
	SCHED_CONSTANT_LR, SCHED_LINEAR, SCHED_POLYNOMIAL, SCHED_COSINE_RESTARTS, SCHED_PLATEAU, SCHED_ONE_CYCLE, SCHED_KIND_COUNT
};

/* What a tick counts: PyTorch's usual loop calls scheduler.step() once per
 * epoch; per-step schedules call it after every optimizer step. */
enum sched_unit { SCHED_PER_EPOCH, SCHED_PER_STEP };

#define SCHED_MAX_MILESTONES 16

struct sched_cfg {
	enum sched_kind kind;
	enum sched_unit unit;
	int64_t step_size;  /* STEP: ticks between decays */
	double gamma;       /* STEP, MULTISTEP, EXPONENTIAL: factor per decay */
	int n_milestones;   /* MULTISTEP */
	/* (n_milestones,) ticks at which lr decays, increasing: the compiler
	 * refuses a repeated milestone (MultiStepLR would decay twice there) */
	int64_t milestones[SCHED_MAX_MILESTONES];
	int64_t t_max;      /* COSINE: ticks from base lr to eta_min, warmup included */
	double eta_min;     /* COSINE, COSINE_RESTARTS: floor */
	int64_t warmup;     /* COSINE: lr = base * (t + 1) / warmup for t < warmup; 0 for none */
	double factor;      /* CONSTANT_LR: multiplies lr for the first total_iters ticks */
	double start_factor, end_factor; /* LINEAR: lr's factor at tick 0 and from total_iters on */
	double power;       /* POLYNOMIAL */
	int64_t total_iters; /* CONSTANT_LR, LINEAR, POLYNOMIAL */
	int64_t t_0, t_mult; /* COSINE_RESTARTS: the first period, and each next one's multiple of it */
	/* PLATEAU (with factor, the rate's multiplier on a plateau): a metric
	 * improves on the best when below best (1 - threshold), or best -
	 * threshold with threshold_abs (above, with mode_max); after more than
	 * patience epochs without improvement the rate is multiplied, then
	 * cooldown epochs pass uncounted; the rate stays at least min_lr and
	 * changes only by more than eps */
	bool mode_max, threshold_abs;
	double threshold, min_lr, eps;
	int64_t patience, cooldown;
	/* ONE_CYCLE over total ticks (the trainer fills in the run's where the
	 * file gave none): from max_lr / div_factor up to max_lr in the first
	 * pct_start of them, then down to max_lr / div_factor /
	 * final_div_factor (three_phase: back to the start first), cosine or
	 * linear (anneal_linear); the momentum from max_momentum to
	 * base_momentum and back where cycle_momentum */
	double max_lr, pct_start, div_factor, final_div_factor, base_momentum, max_momentum;
	int64_t total;
	bool anneal_linear, three_phase, cycle_momentum;
};

/* ReduceLROnPlateau's state after `epochs` calls of step(metric). */
struct sched_plateau {
	double lr, best;          /* the rate now; the best metric (+-inf before the first) */
	int64_t bad, cooldown;    /* num_bad_epochs, cooldown_counter */
	int64_t epochs;           /* epochs stepped */
};

/* kind with torch's defaults (gamma 0.1 for STEP and MULTISTEP, eta_min 0,
 * factor and start_factor 1/3, end_factor 1, total_iters 5, power 1,
 * t_mult 1), per epoch; the fields torch requires (step_size, milestones,
 * gamma of EXPONENTIAL, t_max, t_0) are left invalid until set. */
struct sched_cfg sched_cfg_default(enum sched_kind kind);

/* NULL if cfg is acceptable, else a message naming the bad field. */
const char *sched_cfg_check(const struct sched_cfg *cfg);

/* Lower-case name of kind: "constant", "step", "multistep", "exponential",
 * "cosine", "constant_lr", "linear", "polynomial", "cosine_restarts". */
const char *sched_kind_name(enum sched_kind kind);

/* lr after t >= 0 ticks, starting from base_lr:
 *   CONSTANT     base
 *   STEP         base * gamma^(t / step_size)                 (StepLR)
 *   MULTISTEP    base * gamma^(number of milestones <= t)     (MultiStepLR)
 *   EXPONENTIAL  base * gamma^t                               (ExponentialLR)
 *   COSINE       base * (t + 1) / warmup while t < warmup, then, with
 *                u = t - warmup and T = t_max - warmup,
 *                eta_min + (base - eta_min) * (1 + cos(pi * u / T)) / 2
 *                (CosineAnnealingLR; like it, rises again past t_max)
 *   CONSTANT_LR  base * factor while t < total_iters, then base   (ConstantLR)
 *   LINEAR       base * (start_factor + (end_factor - start_factor)
 *                        * min(total_iters, t) / total_iters)      (LinearLR)
 *   POLYNOMIAL   base * (1 - min(total_iters, t) / total_iters)^power
 *                                                                 (PolynomialLR)
 *   COSINE_RESTARTS  eta_min + (base - eta_min) * (1 + cos(pi * t_cur / t_i)) / 2
 *                with periods t_i of t_0, t_0 * t_mult, t_0 * t_mult^2, ...
 *                and t_cur the ticks into the current one
 *                (CosineAnnealingWarmRestarts)
 *   PLATEAU      base (the trainer takes struct sched_plateau's rate)
 *   ONE_CYCLE    OneCycleLR's phases over cfg->total ticks (base unused) */
double sched_lr_at(const struct sched_cfg *cfg, double base_lr, int64_t t);

/* ONE_CYCLE's momentum (Adam's beta1) after t ticks (OneCycleLR's
 * computed_momentum); cfg->cycle_momentum is set. */
double sched_momentum_at(const struct sched_cfg *cfg, int64_t t);

/* The state before the first step: lr base_lr, best the worst value. */
struct sched_plateau sched_plateau_start(const struct sched_cfg *cfg, double base_lr);
/* ReduceLROnPlateau.step(metric) at the end of an epoch; true if the rate
 * changed.  A NaN metric is no improvement, as in PyTorch. */
bool sched_plateau_step(const struct sched_cfg *cfg, struct sched_plateau *s, double metric);

/* lr for the optimizer step taken in epoch `epoch` after `step` earlier
 * optimizer steps (both from 0): sched_lr_at at the tick cfg->unit counts. */
double sched_lr(const struct sched_cfg *cfg, double base_lr, int64_t epoch, int64_t step);
#endif
