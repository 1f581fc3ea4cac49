/* print_train.c: the training section of `trainc print`: the run's length
 * and order, then the loss, the optimizer and the scheduler as the
 * PyTorch constructor calls that would train alike, every argument
 * resolved (defaults filled in, one_cycle's momentum as it sets it), so a
 * reader sees what a file's short `adadelta` or `one_cycle(max_lr=0.1)`
 * means without the reference at hand.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "compiler/print.h"
#include "compiler/value.h"

/* A growing line of arguments: "name=value, " each, the last comma dropped. */
struct args {
	char s[768];
	size_t at;
};

static void arg(struct args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(struct args *a, const char *fmt, ...)
{
	if (a->at >= sizeof a->s)
		return;
	if (a->at)
		a->at += (size_t)snprintf(a->s + a->at, sizeof a->s - a->at, ", ");
	va_list ap;
	va_start(ap, fmt);
	if (a->at < sizeof a->s)
		a->at += (size_t)vsnprintf(a->s + a->at, sizeof a->s - a->at, fmt, ap);
	va_end(ap);
}

/* name=x as Python's repr writes a float (1.0, 1e-06) */
static void real(struct args *a, const char *name, double x)
{
	char b[40];
	val_float_repr(x, b, sizeof b);
	arg(a, "%s=%s", name, b);
}

static void flag(struct args *a, const char *name, bool v)
{
	arg(a, "%s=%s", name, v ? "True" : "False");
}

/* name=[w0, w1, ...], or name=None without weights */
static void weights(struct args *a, const char *name, const float *w, int64_t n)
{
	if (!w) {
		arg(a, "%s=None", name);
		return;
	}
	arg(a, "%s=[", name);
	for (int64_t i = 0; i < n && a->at < sizeof a->s; i++) {
		char b[40];
		val_float_repr(w[i], b, sizeof b);
		a->at += (size_t)snprintf(a->s + a->at, sizeof a->s - a->at, "%s%s", i ? ", " : "", b);
	}
	if (a->at < sizeof a->s)
		a->at += (size_t)snprintf(a->s + a->at, sizeof a->s - a->at, "]");
}

static const char *reduction(const struct plan_train *t)
{
	return t->reduction == RED_SUM ? "'sum'" : t->reduction == RED_BATCHMEAN ? "'batchmean'" : "'mean'";
}

static const char *loss_line(const struct plan_train *t, struct args *a)
{
	static const char *const names[] = { [LOSS_MSE] = "MSELoss",		 [LOSS_NLL] = "NLLLoss",
					     [LOSS_CROSS_ENTROPY] = "CrossEntropyLoss", [LOSS_L1] = "L1Loss",
					     [LOSS_SMOOTH_L1] = "SmoothL1Loss",	 [LOSS_HUBER] = "HuberLoss",
					     [LOSS_BCE] = "BCELoss",		 [LOSS_BCE_LOGITS] = "BCEWithLogitsLoss",
					     [LOSS_KL_DIV] = "KLDivLoss" };
	bool classes = t->loss == LOSS_NLL || t->loss == LOSS_CROSS_ENTROPY;
	if (classes) {
		weights(a, "weight", t->class_weights, t->nclass_weights);
		arg(a, "ignore_index=%d", (int)t->ignore_index);
	}
	arg(a, "reduction=%s", reduction(t));
	if (t->loss == LOSS_CROSS_ENTROPY)
		real(a, "label_smoothing", t->label_smoothing);
	if (t->loss == LOSS_SMOOTH_L1)
		real(a, "beta", t->loss_param);
	if (t->loss == LOSS_HUBER)
		real(a, "delta", t->loss_param);
	if (t->loss == LOSS_KL_DIV)
		flag(a, "log_target", t->loss_param != 0);
	if (t->loss == LOSS_BCE_LOGITS && t->npos_weights)
		weights(a, "pos_weight", t->pos_weights, t->npos_weights);
	else if (t->loss == LOSS_BCE_LOGITS && t->loss_param != 1)
		weights(a, "pos_weight", &(float){ (float)t->loss_param }, 1);
	else if (t->loss == LOSS_BCE_LOGITS)
		arg(a, "pos_weight=None");
	return names[t->loss];
}

/* An optimizer's arguments in PyTorch's order: a real (r), a flag (b) or
 * Adam's betas (p, from beta1), each a field of struct plan_optim. */
struct optim_arg {
	const char *name;
	size_t off;
	char kind;
};
#define OA(name, field, kind) { name, offsetof(struct plan_optim, field), kind }

static const char *optim_line(const struct plan_optim *o, struct args *a)
{
	static const struct optim_arg sgd[] = { OA("lr", lr, 'r'), OA("momentum", momentum, 'r'), OA("dampening", dampening, 'r'),
						OA("weight_decay", weight_decay, 'r'), OA("nesterov", nesterov, 'b'), { 0 } };
	static const struct optim_arg adam[] = { OA("lr", lr, 'r'), OA("betas", beta1, 'p'), OA("eps", eps, 'r'),
						 OA("weight_decay", weight_decay, 'r'), OA("amsgrad", amsgrad, 'b'), { 0 } };
	static const struct optim_arg adadelta[] = { OA("lr", lr, 'r'), OA("rho", rho, 'r'), OA("eps", eps, 'r'),
						     OA("weight_decay", weight_decay, 'r'), { 0 } };
	static const struct optim_arg adagrad[] = { OA("lr", lr, 'r'), OA("lr_decay", lr_decay, 'r'), OA("weight_decay", weight_decay, 'r'),
						    OA("initial_accumulator_value", initial_accumulator, 'r'), OA("eps", eps, 'r'), { 0 } };
	static const struct optim_arg rmsprop[] = { OA("lr", lr, 'r'), OA("alpha", alpha, 'r'), OA("eps", eps, 'r'),
						    OA("weight_decay", weight_decay, 'r'), OA("momentum", momentum, 'r'),
						    OA("centered", centered, 'b'), { 0 } };
	static const struct optim_arg adamax[] = { OA("lr", lr, 'r'), OA("betas", beta1, 'p'), OA("eps", eps, 'r'),
						   OA("weight_decay", weight_decay, 'r'), { 0 } };
	static const struct { const char *name; const struct optim_arg *args; } kinds[] = {
		[OPT_SGD] = { "SGD", sgd },		[OPT_ADAM] = { "Adam", adam },	     [OPT_ADAMW] = { "AdamW", adam },
		[OPT_ADADELTA] = { "Adadelta", adadelta }, [OPT_ADAGRAD] = { "Adagrad", adagrad }, [OPT_RMSPROP] = { "RMSprop", rmsprop },
		[OPT_ADAMAX] = { "Adamax", adamax }, [OPT_RADAM] = { "RAdam", adamax },
	};
	const char *base = (const char *)o;
	for (const struct optim_arg *g = kinds[o->kind].args; g->name; g++) {
		if (g->kind == 'b') {
			flag(a, g->name, *(const bool *)(const void *)(base + g->off));
		} else if (g->kind == 'p') {
			char b1[40], b2[40];
			val_float_repr(o->beta1, b1, sizeof b1);
			val_float_repr(o->beta2, b2, sizeof b2);
			arg(a, "betas=(%s, %s)", b1, b2);
		} else {
			real(a, g->name, *(const double *)(const void *)(base + g->off));
		}
	}
	return kinds[o->kind].name;
}

static const char *sched_line(const struct plan_train *t, struct args *a)
{
	const struct plan_sched *s = &t->sched;
	switch (s->kind) {
	case LRS_CONSTANT: return NULL;
	case LRS_STEP:
		arg(a, "step_size=%" PRId64, s->step_size);
		real(a, "gamma", s->gamma);
		return "StepLR";
	case LRS_MULTISTEP:
		arg(a, "milestones=[");
		for (int i = 0; i < s->nmilestones && a->at < sizeof a->s; i++)
			a->at += (size_t)snprintf(a->s + a->at, sizeof a->s - a->at, "%s%" PRId64, i ? ", " : "", s->milestones[i]);
		if (a->at < sizeof a->s)
			a->at += (size_t)snprintf(a->s + a->at, sizeof a->s - a->at, "]");
		real(a, "gamma", s->gamma);
		return "MultiStepLR";
	case LRS_EXPONENTIAL: real(a, "gamma", s->gamma); return "ExponentialLR";
	case LRS_COSINE:
		arg(a, "T_max=%" PRId64, s->t_max);
		real(a, "eta_min", s->eta_min);
		return "CosineAnnealingLR";
	case LRS_CONSTANT_LR:
		real(a, "factor", s->factor);
		arg(a, "total_iters=%" PRId64, s->total_iters);
		return "ConstantLR";
	case LRS_LINEAR:
		real(a, "start_factor", s->start_factor);
		real(a, "end_factor", s->end_factor);
		arg(a, "total_iters=%" PRId64, s->total_iters);
		return "LinearLR";
	case LRS_POLYNOMIAL:
		arg(a, "total_iters=%" PRId64, s->total_iters);
		real(a, "power", s->power);
		return "PolynomialLR";
	case LRS_COSINE_RESTARTS:
		arg(a, "T_0=%" PRId64 ", T_mult=%" PRId64, s->t_0, s->t_mult);
		real(a, "eta_min", s->eta_min);
		return "CosineAnnealingWarmRestarts";
	case LRS_PLATEAU:
		arg(a, "mode='%s'", s->mode_max ? "max" : "min");
		real(a, "factor", s->factor);
		arg(a, "patience=%" PRId64, s->patience);
		real(a, "threshold", s->threshold);
		arg(a, "threshold_mode='%s', cooldown=%" PRId64, s->threshold_abs ? "abs" : "rel", s->cooldown);
		real(a, "min_lr", s->min_lr);
		real(a, "eps", s->eps);
		return "ReduceLROnPlateau";
	case LRS_ONE_CYCLE:
		real(a, "max_lr", s->max_lr);
		if (s->total_steps)
			arg(a, "total_steps=%" PRId64, s->total_steps);
		else if (t->steps) /* train_one_cycle's span */
			arg(a, "total_steps=max(%" PRId64 ", %" PRId64 " * len(loader))", t->steps, t->epochs);
		else
			arg(a, "epochs=%" PRId64 ", steps_per_epoch=len(loader)", t->epochs);
		real(a, "pct_start", s->pct_start);
		arg(a, "anneal_strategy='%s'", s->anneal_linear ? "linear" : "cos");
		flag(a, "cycle_momentum", s->cycle_momentum);
		real(a, "base_momentum", s->base_momentum);
		real(a, "max_momentum", s->max_momentum);
		real(a, "div_factor", s->div_factor);
		real(a, "final_div_factor", s->final_div_factor);
		flag(a, "three_phase", s->three_phase);
		return "OneCycleLR";
	}
	return NULL;
}

void print_training(FILE *out, const struct plan *p)
{
	const struct plan_train *t = &p->train;
	if (!t->present)
		return;
	char c[32];
	fprintf(out, "\nTraining: ");
	if (t->eval_only)
		fprintf(out, "none (steps = 0: the test set is evaluated)");
	else if (t->steps)
		fprintf(out, "%s optimizer step%s", print_count(t->steps, c, sizeof c), t->steps == 1 ? "" : "s");
	else
		fprintf(out, "%s epoch%s", print_count(t->epochs, c, sizeof c), t->epochs == 1 ? "" : "s");
	if (t->micro_batch)
		fprintf(out, " in micro-batches of %" PRId64, t->micro_batch);
	fprintf(out, ", seed %" PRIu64 ", ", t->seed);
	if (t->shuffle)
		fprintf(out, "shuffled each epoch (shuffle_seed %" PRIu64 ")", t->shuffle_seed);
	else
		fprintf(out, "in the dataset's order");
	fprintf(out, "%s\n", t->drop_last ? ", the last incomplete batch dropped" : "");
	struct args a = { .at = 0 };
	const char *name = loss_line(t, &a);
	fprintf(out, "  loss:       %s(%s)\n", name, a.s);
	a.at = 0, a.s[0] = 0;
	name = optim_line(&t->optim, &a);
	fprintf(out, "  optimizer:  %s(%s)\n", name, a.s);
	a.at = 0, a.s[0] = 0;
	const struct plan_sched *s = &t->sched;
	name = sched_line(t, &a);
	if (!name)
		fprintf(out, "  scheduler:  none (the rate stays lr)\n");
	else if (s->kind == LRS_PLATEAU)
		fprintf(out, "  scheduler:  %s(%s), stepped after each epoch on the %s loss\n", name, a.s, s->monitor_train ? "training" : "test");
	else
		fprintf(out, "  scheduler:  %s(%s)%s, stepped each %s\n", name, a.s,
			s->kind == LRS_COSINE && s->warmup ? ", after a linear warm-up" : "", s->per_step ? "optimizer step" : "epoch");
	if (s->kind == LRS_COSINE && s->warmup)
		fprintf(out, "  warm-up:    the rate rises as lr·(t + 1)/%" PRId64 " over the first %" PRId64 " %s%s; the cosine spans the %" PRId64
			" after\n", s->warmup, s->warmup, s->per_step ? "optimizer step" : "epoch", s->warmup == 1 ? "" : "s",
			s->t_max - s->warmup);
	if (t->clip_grad_norm > 0) {
		char b[40];
		val_float_repr(t->clip_grad_norm, b, sizeof b);
		fprintf(out, "  clipping:   clip_grad_norm_(max_norm=%s) after the ranks' gradients are combined\n", b);
	}
}
