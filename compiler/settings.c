/* settings.c: the data, train and parallel sections as typed settings.
 * Each section has a fixed list of keys; each value is checked for its
 * type and range where it is written.  Defaults are PyTorch's (and the
 * seed programs'): optimizers' own defaults, test batch 1000, log every 10
 * batches, seed 1, DDP buckets of 25 MiB.  A file without data or train
 * sections still compiles (a model library); training then says what is
 * missing.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "compiler/compile_impl.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

struct reader {
	struct arena *a;
	struct diag *d;
	struct evalctx ec;
	/* the section read_keys read last: its unknown keys are reported in
	 * step with its settings' errors, in the order they are written */
	const struct ast_section *sec;
	const char *const *keys;
	int nkeys;
	const struct ast_stmt *pending; /* the first statement not yet reported */
};

/* Settings PyTorch users look for in a section that are arguments of
 * something in it: where they go. */
static const char *elsewhere(const char *section, const char *key)
{
	static const struct {
		const char *section, *key, *hint;
	} moved[] = {
		{ "train", "lr", "the learning rate is the optimizer's: optimizer = sgd(lr=0.01)" },
		{ "train", "learning_rate", "the learning rate is the optimizer's: optimizer = sgd(lr=0.01)" },
		{ "train", "momentum", "momentum is the optimizer's: optimizer = sgd(lr=0.01, momentum=0.9)" },
		{ "train", "weight_decay", "weight decay is the optimizer's: optimizer = adam(lr=1e-3, weight_decay=0.01)" },
		{ "train", "gamma", "gamma is the scheduler's: scheduler = step_lr(step=1, gamma=0.7)" },
		{ "parallel", "min_params", "the minimum is the size policy's: wrap = size(min_params=20000)" },
		{ "parallel", "min_num_params", "the minimum is the size policy's: wrap = size(min_params=20000)" },
	};
	for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++)
		if (strcmp(moved[i].section, section) == 0 && strcmp(moved[i].key, key) == 0)
			return moved[i].hint;
	return NULL;
}

static bool known(const char *const *keys, int nkeys, const char *name)
{
	for (int k = 0; k < nkeys; k++)
		if (strcmp(keys[k], name) == 0)
			return true;
	return false;
}

static void unknown_key(struct reader *r, const struct ast_stmt *st)
{
	const char *kind = r->sec->kind;
	const char *near = diag_nearest(st->name, r->keys, r->nkeys);
	const char *hint = elsewhere(kind, st->name);
	if (hint)
		diag_error(r->d, st->name_loc, "unknown %s setting '%s'; %s", kind, st->name, hint);
	else if (near)
		diag_error(r->d, st->name_loc, "unknown %s setting '%s'; did you mean '%s'?", kind, st->name, near);
	else
		diag_error(r->d, st->name_loc, "unknown %s setting '%s'", kind, st->name);
}

/* Report the unknown keys of r's section written before `at` (all that
 * are left, for NULL), so that they come among the other settings' errors
 * in the order of the file. */
static void unknown_until(struct reader *r, const struct loc *at)
{
	for (; r->pending; r->pending = r->pending->next) {
		const struct ast_stmt *st = r->pending;
		const struct loc *l = &st->name_loc;
		if (at && (l->src != at->src || l->line > at->line || (l->line == at->line && l->col > at->col)))
			return;
		if (st->value && st->name && !st->annots && !st->has_body && !known(r->keys, r->nkeys, st->name))
			unknown_key(r, st);
	}
}

/* The statements of a section as (key, value) after evaluation; reports
 * repeated keys, and leaves unknown ones to unknown_until. */
static bool read_keys(struct reader *r, const struct ast_section *sec, const char *const *keys, int nkeys, struct val **out)
{
	bool ok = true;
	r->sec = sec;
	r->keys = keys;
	r->nkeys = nkeys;
	r->pending = sec ? sec->body : NULL;
	for (int k = 0; k < nkeys; k++)
		out[k] = NULL;
	for (const struct ast_stmt *st = sec ? sec->body : NULL; st; st = st->next) {
		if (!st->value)
			continue;
		if (!st->name) {
			diag_error(r->d, st->loc, "a %s section holds settings: write key = value", sec->kind);
			ok = false;
			continue;
		}
		if (st->annots || st->has_body) {
			diag_error(r->d, st->loc, "a setting takes no annotation or body");
			ok = false;
			continue;
		}
		int k = 0;
		while (k < nkeys && strcmp(keys[k], st->name) != 0)
			k++;
		if (k == nkeys) {
			ok = false;
			continue;
		}
		if (out[k]) {
			diag_error(r->d, st->name_loc, "'%s' is set twice", st->name);
			diag_note(r->d, out[k]->loc, "first set here");
			ok = false;
			continue;
		}
		out[k] = val_eval(&r->ec, st->value, NULL);
		if (!out[k])
			ok = false;
	}
	return ok;
}

static bool int_between(struct reader *r, const struct val *v, const char *what, int64_t min, int64_t max, int64_t *out)
{
	if (!v)
		return true;
	if (!val_int(r->d, v, what, out))
		return false;
	if (*out < min || *out > max) {
		diag_error(r->d, v->loc, "%s must be %s%" PRId64 ", not %" PRId64, what, *out < min ? "at least " : "at most ",
			   *out < min ? min : max, *out);
		return false;
	}
	return true;
}

static bool int_at_least(struct reader *r, const struct val *v, const char *what, int64_t min, int64_t *out)
{
	return int_between(r, v, what, min, (int64_t)1 << 40, out);
}

static bool num_range(struct reader *r, const struct val *v, const char *what, double lo, double hi, double *out)
{
	if (!v)
		return true;
	if (!val_num(r->d, v, what, out))
		return false;
	if (!(*out >= lo && *out <= hi)) {
		char l[32], h[32], x[32];
		val_number_text(lo, l, sizeof l);
		val_number_text(hi, h, sizeof h);
		val_number_text(*out, x, sizeof x);
		if (isinf(hi))
			diag_error(r->d, v->loc, "%s must be at least %s, not %s", what, l, x);
		else if (isinf(lo))
			diag_error(r->d, v->loc, "%s must be at most %s, not %s", what, h, x);
		else
			diag_error(r->d, v->loc, "%s must be between %s and %s, not %s", what, l, h, x);
		return false;
	}
	return true;
}

/* Bind a call's (or bare name's) arguments. */
static bool bind(struct reader *r, const struct val *v, const char *const *names, int npos, int n, struct val **slot)
{
	return val_bind(r->d, v->s, v->loc, v->kind == V_CALL ? v->items : NULL, v->kind == V_CALL ? v->n : 0, names, npos, n, slot);
}

static bool choose(struct reader *r, const struct val *v, const char *what, const char *const *names, int n, int *out)
{
	const char *callee = val_callee(v);
	if (!callee) {
		diag_error(r->d, v->loc, "%s must be one of its names, e.g. %s", what, names[0]);
		return false;
	}
	for (int k = 0; k < n; k++) {
		if (strcmp(names[k], callee) == 0) {
			*out = k;
			return true;
		}
	}
	const char *near = diag_nearest(callee, names, n);
	char list[256] = "";
	for (int k = 0; k < n; k++) {
		strcat(list, k ? (k == n - 1 ? " or " : ", ") : "");
		strcat(list, names[k]);
	}
	if (near)
		diag_error(r->d, v->name_loc, "unknown %s '%s'; did you mean '%s'?", what, callee, near);
	else
		diag_error(r->d, v->name_loc, "unknown %s '%s'; choose %s", what, callee, list);
	return false;
}

/* The indices of the settings given, in the order they are written, so
 * that their errors come in the order of the file. */
static int source_order(struct val *const *v, int n, int *order)
{
	int m = 0;
	for (int k = 0; k < n; k++) {
		if (!v[k])
			continue;
		int at = m++;
		while (at > 0) {
			const struct loc *a = &v[order[at - 1]]->loc, *b = &v[k]->loc;
			if (a->src != b->src || a->line < b->line || (a->line == b->line && a->col < b->col))
				break;
			order[at] = order[at - 1];
			at--;
		}
		order[at] = k;
	}
	return m;
}

const char *const loss_names[LOSS_KL_DIV + 1] = { "mse", "nll", "cross_entropy", "l1", "smooth_l1", "huber", "bce",
						       "bce_with_logits", "kl_div" };

/* A loss's number argument, name, in its range: PyTorch's beta >= 0 (0 is
 * the L1 loss), delta > 0; a pos_weight below 0 would reward missing the
 * positives */
static bool loss_number(struct reader *r, const struct val *v, const char *name, enum loss_kind loss, double *x)
{
	if (!val_num(r->d, v, name, x))
		return false;
	bool huber = loss == LOSS_HUBER;
	if (!(huber ? *x > 0 : *x >= 0) || isinf(*x)) {
		char b[32];
		val_number_text(*x, b, sizeof b);
		diag_error(r->d, v->loc, "%s must be %s, not %s", name,
			   huber ? "a finite number above 0" : loss == LOSS_SMOOTH_L1 ? "a finite number, at least 0 (0 is l1)"
								       : "a finite number, at least 0", b);
		return false;
	}
	return true;
}

/* bce_with_logits' pos_weight as a list or tuple: a weight per output
 * along the last dimension, as PyTorch's tensor broadcasts (infer.c checks
 * the count against the output); one alone is every output's */
static bool pos_weights(struct reader *r, const struct val *v, struct plan_train *t)
{
	if (v->n < 1) {
		diag_error(r->d, v->loc, "pos_weight needs a weight per output, or one number: pos_weight=[1, 4, 2]");
		return false;
	}
	float *w = arena_array(r->a, (size_t)v->n, sizeof *w);
	for (int i = 0; i < v->n; i++) {
		double x;
		if (!loss_number(r, v->items[i].v, "a pos_weight", LOSS_BCE_LOGITS, &x))
			return false;
		w[i] = (float)x;
	}
	t->pos_weight_loc = v->loc;
	if (v->n == 1)
		t->loss_param = w[0];
	else
		t->pos_weights = w, t->npos_weights = v->n;
	return true;
}

/* A keyword only some losses take, given to another: what to write
 * instead.  False (reported) where v's call has name but loss k lacks it. */
static bool loss_lacks(struct reader *r, const struct val *v, enum loss_kind k, const char *name, bool has)
{
	if (has || v->kind != V_CALL)
		return true;
	for (int i = 0; i < v->n; i++) {
		if (!v->items[i].key || strcmp(v->items[i].key, name) != 0)
			continue;
		if (name[0] == 'l') /* label_smoothing */
			diag_error(r->d, v->items[i].key_loc, "%s has no label_smoothing; cross_entropy has (PyTorch's "
				   "CrossEntropyLoss)%s", loss_names[k],
				   k == LOSS_NLL ? ", and on a model that ends in log_softmax its loss is nll's: "
				   "loss = cross_entropy(label_smoothing=0.1)" : "");
		else /* ignore_index */
			diag_error(r->d, v->items[i].key_loc, "%s has no ignore_index: its targets are values, not classes; nll and "
				   "cross_entropy take one (PyTorch's NLLLoss and CrossEntropyLoss)", loss_names[k]);
		return false;
	}
	return true;
}

/* ignore_index: the class target whose rows count for nothing (PyTorch's
 * ignore_index, any integer; labels are read as int32, so one of those) */
static bool read_ignore(struct reader *r, const struct val *v, struct plan_train *t)
{
	int64_t k;
	if (!val_int(r->d, v, "ignore_index", &k))
		return false;
	if (k < INT32_MIN || k > INT32_MAX) {
		diag_error(r->d, v->loc, "ignore_index must be between %ld and %ld, not %lld; class labels are 32-bit integers",
			   (long)INT32_MIN, (long)INT32_MAX, (long long)k);
		return false;
	}
	t->ignore_index = (int32_t)k;
	return true;
}

/* nll's and cross_entropy's weight: a list or tuple of a weight per
 * class (infer.c checks the count against the model's classes), each a
 * finite number at least 0, as PyTorch's weight tensor of C values */
static bool class_weights(struct reader *r, const struct val *v, struct plan_train *t)
{
	if ((v->kind != V_LIST && v->kind != V_TUPLE) || v->n < 1) {
		diag_error(r->d, v->loc, "weight needs a weight per class: weight=[1, 2, 1] for three classes");
		return false;
	}
	float *w = arena_array(r->a, (size_t)v->n, sizeof *w);
	for (int i = 0; i < v->n; i++) {
		double x;
		if (!loss_number(r, v->items[i].v, "a class weight", t->loss, &x))
			return false;
		w[i] = (float)x;
	}
	t->class_weights = w;
	t->nclass_weights = v->n;
	t->class_weight_loc = v->loc;
	return true;
}

static bool read_loss(struct reader *r, const struct val *v, struct plan_train *t)
{
	int k;
	if (!choose(r, v, "loss", loss_names, LOSS_KL_DIV + 1, &k))
		return false;
	t->loss = (enum loss_kind)k;
	t->loss_loc = v->loc;
	/* as in PyTorch: label smoothing is nn.CrossEntropyLoss's alone,
	 * ignore_index NLLLoss's and CrossEntropyLoss's; SmoothL1Loss has
	 * beta, HuberLoss delta, BCEWithLogitsLoss pos_weight, KLDivLoss
	 * log_target */
	bool logits = t->loss == LOSS_BCE_LOGITS, ce = t->loss == LOSS_CROSS_ENTROPY, classes = ce || t->loss == LOSS_NLL;
	bool kl = t->loss == LOSS_KL_DIV;
	const char *names[4] = { "reduction", t->loss == LOSS_SMOOTH_L1 ? "beta"
					     : t->loss == LOSS_HUBER ? "delta"
					     : logits ? "pos_weight" : kl ? "log_target" : ce ? "label_smoothing" : "ignore_index",
				 ce ? "ignore_index" : "weight", "weight" };
	struct val *s[4] = { NULL, NULL, NULL, NULL };
	if (!loss_lacks(r, v, t->loss, "label_smoothing", ce) || !loss_lacks(r, v, t->loss, "ignore_index", classes))
		return false;
	if (!bind(r, v, names, 0, ce ? 4 : t->loss == LOSS_NLL ? 3 : t->loss == LOSS_MSE || t->loss == LOSS_L1 || t->loss == LOSS_BCE ? 1 : 2,
		  s))
		return false;
	t->reduction = RED_MEAN;
	t->label_smoothing = 0;
	t->ignore_index = -100;
	t->loss_param = t->loss == LOSS_SMOOTH_L1 || t->loss == LOSS_HUBER || logits ? 1.0 : 0.0;
	t->pos_weights = NULL;
	t->npos_weights = 0;
	t->class_weights = NULL;
	t->nclass_weights = 0;
	if (t->loss == LOSS_NLL) /* reduction, ignore_index, weight */
		s[3] = s[2], s[2] = s[1], s[1] = NULL;
	if (s[3] && !class_weights(r, s[3], t))
		return false;
	if (s[2] && !read_ignore(r, s[2], t))
		return false;
	if (s[1] && kl) {
		bool log_target;
		if (!val_bool(r->d, s[1], "log_target", &log_target))
			return false;
		t->loss_param = log_target;
		s[1] = NULL;
	}
	if (s[1] && !ce) {
		if (logits && (s[1]->kind == V_LIST || s[1]->kind == V_TUPLE)) {
			if (!pos_weights(r, s[1], t))
				return false;
		} else if (!loss_number(r, s[1], names[1], t->loss, &t->loss_param)) {
			return false;
		}
		s[1] = NULL;
	}
	if (s[1]) {
		double eps;
		if (!val_num(r->d, s[1], "label_smoothing", &eps))
			return false;
		if (!(eps >= 0 && eps <= 1)) {
			char x[32];
			val_number_text(eps, x, sizeof x);
			diag_error(r->d, s[1]->loc, "label_smoothing must be between 0 and 1, not %s", x);
			return false;
		}
		t->label_smoothing = eps;
	}
	if (s[0]) {
		const char *red;
		if (!val_str(r->d, s[0], "reduction", &red))
			return false;
		if (strcmp(red, "sum") == 0)
			t->reduction = RED_SUM;
		else if (kl && strcmp(red, "batchmean") == 0)
			t->reduction = RED_BATCHMEAN;
		else if (strcmp(red, "batchmean") == 0) { /* PyTorch's other losses refuse it too */
			diag_error(r->d, s[0]->loc, "reduction \"batchmean\" is kl_div's alone; %s takes \"mean\" or \"sum\"",
				   loss_names[t->loss]);
			return false;
		} else if (strcmp(red, "mean") != 0) {
			diag_error(r->d, s[0]->loc, kl ? "reduction must be \"mean\", \"batchmean\" or \"sum\""
						       : "reduction must be \"mean\" or \"sum\"");
			return false;
		}
	}
	return true;
}

/* One of Adam's betas: in [0, 1), as torch.optim.Adam checks; at 1 the
 * average would never leave zero and its bias correction would divide by
 * zero.  Any number below 1 is taken, however close. */
static bool beta(struct reader *r, const struct val *v, const char *what, double *out)
{
	if (!val_num(r->d, v, what, out))
		return false;
	if (*out >= 0 && *out < 1)
		return true;
	char x[32];
	val_number_text(*out, x, sizeof x);
	diag_error(r->d, v->loc, "%s must be at least 0 and less than 1, not %s", what, x);
	return false;
}

static bool betas(struct reader *r, const struct val *v, double *b1, double *b2)
{
	if (!v)
		return true;
	if ((v->kind != V_TUPLE && v->kind != V_LIST) || v->n != 2) {
		diag_error(r->d, v->loc, "betas must be a pair like (0.9, 0.999)");
		return false;
	}
	return beta(r, v->items[0].v, "beta1", b1) && beta(r, v->items[1].v, "beta2", b2);
}

static bool read_optim(struct reader *r, const struct val *v, struct plan_optim *o)
{
	static const char *const kinds[] = { "sgd", "adam", "adamw", "adadelta", "adagrad", "rmsprop", "adamax", "radam" };
	/* torch.optim's others, which the nearest known name would misname */
	static const char *const absent[][2] = { { "nadam", "NAdam" }, { "asgd", "ASGD" }, { "rprop", "Rprop" },
						 { "lbfgs", "LBFGS" }, { "sparse_adam", "SparseAdam" } };
	const char *callee = val_callee(v);
	for (size_t a = 0; callee && a < sizeof absent / sizeof absent[0]; a++)
		if (strcmp(callee, absent[a][0]) == 0) {
			diag_error(r->d, v->name_loc, "trainc has no %s (torch.optim.%s); choose sgd, adam, adamw, adadelta, adagrad, "
				   "rmsprop, adamax or radam", callee, absent[a][1]);
			return false;
		}
	int k;
	if (!choose(r, v, "optimizer", kinds, 8, &k))
		return false;
	memset(o, 0, sizeof *o);
	o->kind = (enum opt_kind)k;
	struct val *s[8];
	bool ok = true;
	double inf = HUGE_VAL;
	switch (o->kind) {
	case OPT_SGD: {
		static const char *const names[] = { "lr", "momentum", "dampening", "nesterov", "weight_decay" };
		if (!bind(r, v, names, 1, 5, s))
			return false;
		if (!s[0]) {
			diag_error(r->d, v->loc, "sgd needs a learning rate: sgd(lr=0.01)");
			return false;
		}
		ok = num_range(r, s[0], "lr", 0, inf, &o->lr) && num_range(r, s[1], "momentum", 0, inf, &o->momentum) &&
		     num_range(r, s[2], "dampening", -inf, inf, &o->dampening) && num_range(r, s[4], "weight_decay", 0, inf, &o->weight_decay) &&
		     (!s[3] || val_bool(r->d, s[3], "nesterov", &o->nesterov));
		if (ok && o->nesterov && (o->momentum <= 0 || o->dampening != 0)) {
			diag_error(r->d, s[3]->loc, "Nesterov momentum needs momentum > 0 and dampening = 0");
			return false;
		}
		o->state_per_param = o->momentum != 0 ? 1 : 0;
		break;
	}
	case OPT_ADAM: case OPT_ADAMW: {
		static const char *const names[] = { "lr", "betas", "eps", "weight_decay", "amsgrad" };
		if (!bind(r, v, names, 1, 5, s))
			return false;
		o->lr = 1e-3;
		o->beta1 = 0.9;
		o->beta2 = 0.999;
		o->eps = 1e-8;
		o->weight_decay = o->kind == OPT_ADAMW ? 1e-2 : 0;
		ok = num_range(r, s[0], "lr", 0, inf, &o->lr) && betas(r, s[1], &o->beta1, &o->beta2) &&
		     num_range(r, s[2], "eps", 0, inf, &o->eps) && num_range(r, s[3], "weight_decay", 0, inf, &o->weight_decay) &&
		     (!s[4] || val_bool(r->d, s[4], "amsgrad", &o->amsgrad));
		o->state_per_param = o->amsgrad ? 3 : 2;
		break;
	}
	case OPT_ADADELTA: {
		static const char *const names[] = { "lr", "rho", "eps", "weight_decay" };
		if (!bind(r, v, names, 1, 4, s))
			return false;
		o->lr = 1.0;
		o->rho = 0.9;
		o->eps = 1e-6;
		ok = num_range(r, s[0], "lr", 0, inf, &o->lr) && num_range(r, s[1], "rho", 0, 1, &o->rho) &&
		     num_range(r, s[2], "eps", 0, inf, &o->eps) && num_range(r, s[3], "weight_decay", 0, inf, &o->weight_decay);
		o->state_per_param = 2;
		break;
	}
	case OPT_ADAGRAD: {
		static const char *const names[] = { "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps" };
		if (!bind(r, v, names, 1, 5, s))
			return false;
		o->lr = 1e-2;
		o->eps = 1e-10;
		ok = num_range(r, s[0], "lr", 0, inf, &o->lr) && num_range(r, s[1], "lr_decay", 0, inf, &o->lr_decay) &&
		     num_range(r, s[2], "weight_decay", 0, inf, &o->weight_decay) &&
		     num_range(r, s[3], "initial_accumulator_value", 0, inf, &o->initial_accumulator) &&
		     num_range(r, s[4], "eps", 0, inf, &o->eps);
		o->state_per_param = 1;
		break;
	}
	case OPT_RMSPROP: {
		static const char *const names[] = { "lr", "alpha", "eps", "weight_decay", "momentum", "centered" };
		if (!bind(r, v, names, 1, 6, s))
			return false;
		o->lr = 1e-2;
		o->alpha = 0.99;
		o->eps = 1e-8;
		ok = num_range(r, s[0], "lr", 0, inf, &o->lr) && num_range(r, s[1], "alpha", 0, inf, &o->alpha) &&
		     num_range(r, s[2], "eps", 0, inf, &o->eps) && num_range(r, s[3], "weight_decay", 0, inf, &o->weight_decay) &&
		     num_range(r, s[4], "momentum", 0, inf, &o->momentum) && (!s[5] || val_bool(r->d, s[5], "centered", &o->centered));
		o->state_per_param = 1 + (o->momentum > 0) + o->centered;
		break;
	}
	case OPT_ADAMAX: case OPT_RADAM: {
		static const char *const names[] = { "lr", "betas", "eps", "weight_decay" };
		if (!bind(r, v, names, 1, 4, s))
			return false;
		o->lr = o->kind == OPT_ADAMAX ? 2e-3 : 1e-3;
		o->beta1 = 0.9;
		o->beta2 = 0.999;
		o->eps = 1e-8;
		ok = num_range(r, s[0], "lr", 0, inf, &o->lr) && betas(r, s[1], &o->beta1, &o->beta2) &&
		     num_range(r, s[2], "eps", 0, inf, &o->eps) && num_range(r, s[3], "weight_decay", 0, inf, &o->weight_decay);
		o->state_per_param = 2;
		break;
	}
	}
	return ok;
}

/* A string argument that must be one of n words; *k its index. */
static bool word_of(struct reader *r, const struct val *v, const char *what, const char *const *words, int n, int *k)
{
	const char *w;
	if (!v)
		return true;
	if (!val_str(r->d, v, what, &w))
		return false;
	for (*k = 0; *k < n; (*k)++)
		if (strcmp(w, words[*k]) == 0)
			return true;
	char list[128] = "";
	for (int i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? (i == n - 1 ? " or " : ", ") : "", words[i]);
	diag_error(r->d, v->loc, "%s must be %s", what, list);
	return false;
}

/* monitor: a validation loss by a PyTorch script's names is the test
 * set's here; false (reported) for those. */
static bool validation_is_test(struct reader *r, const struct val *v)
{
	static const char *const names[] = { "val_loss", "valid_loss", "validation_loss", "eval_loss", "loss" };
	if (!v || v->kind != V_STRING)
		return true;
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
		if (strcmp(v->s, names[k]) == 0) {
			diag_error(r->d, v->loc, "monitor must be \"test_loss\" or \"train_loss\"; the set evaluated after each epoch "
				   "(what a PyTorch script calls its validation set) is data.test, whose loss is \"test_loss\"");
			return false;
		}
	return true;
}

/* reduce_on_plateau's own arguments, bound in s: mode, patience,
 * threshold, threshold_mode, cooldown, min_lr, eps, monitor (factor is
 * read with the other schedulers') */
static bool read_plateau(struct reader *r, struct val *const *s, struct plan_sched *sc)
{
	static const char *const modes[] = { "min", "max" }, *const tmodes[] = { "rel", "abs" };
	static const char *const monitors[] = { "test_loss", "train_loss" };
	sc->patience = 10; /* PyTorch's defaults */
	sc->threshold = 1e-4;
	sc->eps = 1e-8;
	int mode = 0, tmode = 0, monitor = 0;
	bool ok = word_of(r, s[0], "mode", modes, 2, &mode) && int_at_least(r, s[1], "patience", 0, &sc->patience) &&
		  num_range(r, s[2], "threshold", 0, HUGE_VAL, &sc->threshold) && word_of(r, s[3], "threshold_mode", tmodes, 2, &tmode) &&
		  int_at_least(r, s[4], "cooldown", 0, &sc->cooldown) && num_range(r, s[5], "min_lr", 0, HUGE_VAL, &sc->min_lr) &&
		  num_range(r, s[6], "eps", 0, HUGE_VAL, &sc->eps) && validation_is_test(r, s[7]) &&
		  word_of(r, s[7], "monitor", monitors, 2, &monitor);
	sc->mode_max = mode == 1;
	sc->threshold_abs = tmode == 1;
	sc->monitor_train = monitor == 1;
	return ok;
}

/* one_cycle's arguments, bound in s: max_lr, total_steps, pct_start,
 * anneal_strategy, cycle_momentum, base_momentum, max_momentum,
 * div_factor, final_div_factor, three_phase; OneCycleLR's defaults */
static bool read_one_cycle(struct reader *r, const struct val *v, struct val *const *s, struct plan_sched *sc)
{
	static const char *const anneal[] = { "cos", "linear" };
	sc->pct_start = 0.3;
	sc->cycle_momentum = true;
	sc->base_momentum = 0.85;
	sc->max_momentum = 0.95;
	sc->div_factor = 25;
	sc->final_div_factor = 1e4;
	sc->per_step = true; /* OneCycleLR is stepped after every batch */
	int a = 0;
	if (!s[0]) {
		diag_error(r->d, v->loc, "one_cycle needs max_lr, the rate at the top of the cycle: one_cycle(max_lr=0.1)");
		return false;
	}
	bool ok = num_range(r, s[0], "max_lr", 0, HUGE_VAL, &sc->max_lr) && int_at_least(r, s[1], "total_steps", 1, &sc->total_steps) &&
		  num_range(r, s[2], "pct_start", 0, 1, &sc->pct_start) && word_of(r, s[3], "anneal_strategy", anneal, 2, &a) &&
		  (!s[4] || val_bool(r->d, s[4], "cycle_momentum", &sc->cycle_momentum)) &&
		  num_range(r, s[5], "base_momentum", 0, 1, &sc->base_momentum) && num_range(r, s[6], "max_momentum", 0, 1, &sc->max_momentum) &&
		  num_range(r, s[7], "div_factor", 0, HUGE_VAL, &sc->div_factor) &&
		  num_range(r, s[8], "final_div_factor", 0, HUGE_VAL, &sc->final_div_factor) &&
		  (!s[9] || val_bool(r->d, s[9], "three_phase", &sc->three_phase));
	sc->anneal_linear = a == 1;
	for (int k = 7; ok && k <= 8; k++)
		if (s[k] && (k == 7 ? sc->div_factor : sc->final_div_factor) == 0) {
			diag_error(r->d, s[k]->loc, "%s must be above 0: the cycle's lowest rates are max_lr divided by it",
				   k == 7 ? "div_factor" : "final_div_factor");
			ok = false;
		}
	return ok;
}

static bool read_sched(struct reader *r, const struct val *v, struct plan_sched *sc, struct loc *t_max_loc)
{
	static const char *const kinds[] = { "constant",    "step_lr",   "multistep_lr",  "exponential_lr",      "cosine",
					     "constant_lr", "linear_lr", "polynomial_lr", "cosine_warm_restarts", "reduce_on_plateau",
					     "one_cycle" };
	enum { NK = sizeof kinds / sizeof kinds[0] };
	int k;
	if (!choose(r, v, "scheduler", kinds, NK, &k))
		return false;
	memset(sc, 0, sizeof *sc);
	sc->kind = (enum lrs_kind)k;
	sc->gamma = 0.1;
	sc->factor = sc->start_factor = 1.0 / 3; /* PyTorch's defaults */
	sc->end_factor = sc->power = 1;
	sc->total_iters = 5;
	sc->t_mult = 1;
	static const char *const names[] = { "step",	    "gamma",	   "milestones",  "t_max", "eta_min", "warmup", "factor",
					     "start_factor", "end_factor", "total_iters", "power", "t_0",     "t_mult",
					     "mode", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps", "monitor",
					     "max_lr", "total_steps", "pct_start", "anneal_strategy", "cycle_momentum", "base_momentum",
					     "max_momentum", "div_factor", "final_div_factor", "three_phase", "every" };
	enum { NA = sizeof names / sizeof names[0] - 1 }; /* every scheduler takes every= */
	enum { PLATEAU_ARGS = 13, ONE_CYCLE_ARGS = 21 };   /* names[13..20]: read_plateau's, [21..30] read_one_cycle's */
	if (sc->kind == LRS_PLATEAU)
		sc->factor = 0.1; /* ReduceLROnPlateau's */
	struct val *s[NA + 1];
	if (!bind(r, v, names, 0, NA + 1, s))
		return false;
	/* which arguments each scheduler takes */
	static const bool takes[NK][NA] = {
		[LRS_STEP] = { [0] = 1, [1] = 1 },
		[LRS_MULTISTEP] = { [1] = 1, [2] = 1 },
		[LRS_EXPONENTIAL] = { [1] = 1 },
		[LRS_COSINE] = { [3] = 1, [4] = 1, [5] = 1 },
		[LRS_CONSTANT_LR] = { [6] = 1, [9] = 1 },
		[LRS_LINEAR] = { [7] = 1, [8] = 1, [9] = 1 },
		[LRS_POLYNOMIAL] = { [9] = 1, [10] = 1 },
		[LRS_COSINE_RESTARTS] = { [4] = 1, [11] = 1, [12] = 1 },
		[LRS_PLATEAU] = { [6] = 1, [13] = 1, [14] = 1, [15] = 1, [16] = 1, [17] = 1, [18] = 1, [19] = 1, [20] = 1 },
		[LRS_ONE_CYCLE] = { [21] = 1, [22] = 1, [23] = 1, [24] = 1, [25] = 1, [26] = 1, [27] = 1, [28] = 1, [29] = 1, [30] = 1 },
	};
	for (int i = 0; i < NA; i++) {
		if (s[i] && !takes[k][i]) {
			diag_error(r->d, s[i]->loc, "%s takes no '%s' argument", kinds[k], names[i]);
			return false;
		}
	}
	bool ok = num_range(r, s[1], "gamma", 0, HUGE_VAL, &sc->gamma) && int_at_least(r, s[0], "step", 1, &sc->step_size) &&
		  int_at_least(r, s[3], "t_max", 1, &sc->t_max) && num_range(r, s[4], "eta_min", 0, HUGE_VAL, &sc->eta_min) &&
		  int_at_least(r, s[5], "warmup", 0, &sc->warmup) && num_range(r, s[6], "factor", 0, 1, &sc->factor) &&
		  num_range(r, s[7], "start_factor", 0, 1, &sc->start_factor) && num_range(r, s[8], "end_factor", 0, 1, &sc->end_factor) &&
		  int_at_least(r, s[9], "total_iters", 1, &sc->total_iters) && num_range(r, s[10], "power", 0, HUGE_VAL, &sc->power) &&
		  int_at_least(r, s[11], "t_0", 1, &sc->t_0) && int_at_least(r, s[12], "t_mult", 1, &sc->t_mult);
	if (!ok || (sc->kind == LRS_PLATEAU && !read_plateau(r, s + PLATEAU_ARGS, sc)) ||
	    (sc->kind == LRS_ONE_CYCLE && !read_one_cycle(r, v, s + ONE_CYCLE_ARGS, sc)))
		return false;
	if (sc->kind == LRS_PLATEAU && sc->factor >= 1) {
		diag_error(r->d, s[6]->loc, "reduce_on_plateau's factor must be below 1, as ReduceLROnPlateau requires: the rate is "
			   "multiplied by it on a plateau (0.1 by default)");
		return false;
	}
	if (s[NA] && sc->kind == LRS_ONE_CYCLE)
		sc->per_step = false; /* every="step" is the default; "epoch" below */
	if (s[NA] && sc->kind == LRS_PLATEAU) {
		diag_error(r->d, s[NA]->loc, "reduce_on_plateau steps once per epoch, after the epoch's evaluation, on its metric; "
			   "it takes no every=");
		return false;
	}
	if (s[6] && sc->factor == 0 && sc->kind == LRS_CONSTANT_LR) {
		diag_error(r->d, s[6]->loc, "constant_lr's factor must be above 0: ConstantLR divides the rate by it where total_iters ends");
		return false;
	}
	if (s[7] && sc->start_factor == 0) {
		diag_error(r->d, s[7]->loc, "linear_lr's start_factor must be above 0, as LinearLR requires; a small one such as 1e-3 starts near 0");
		return false;
	}
	if (sc->kind == LRS_COSINE_RESTARTS && !s[11]) {
		diag_error(r->d, v->loc, "cosine_warm_restarts needs t_0, the length of the first period: cosine_warm_restarts(t_0=10)");
		return false;
	}
	if (sc->kind == LRS_STEP && !s[0]) {
		diag_error(r->d, v->loc, "step_lr needs a step size: step_lr(step=1, gamma=0.7)");
		return false;
	}
	if (sc->kind == LRS_EXPONENTIAL && !s[1]) {
		diag_error(r->d, v->loc, "exponential_lr needs gamma: exponential_lr(gamma=0.95)");
		return false;
	}
	if (s[3])
		*t_max_loc = s[3]->loc;
	if (sc->kind == LRS_COSINE && !s[3]) {
		diag_error(r->d, v->loc, "cosine needs t_max, the length of the schedule: cosine(t_max=10)");
		return false;
	}
	if (sc->kind == LRS_COSINE && sc->warmup >= sc->t_max) {
		diag_error(r->d, s[5]->loc, "warmup must be shorter than t_max");
		return false;
	}
	if (sc->kind == LRS_MULTISTEP) {
		if (!s[2] || (s[2]->kind != V_LIST && s[2]->kind != V_TUPLE) || s[2]->n < 1 || s[2]->n > PLAN_MAX_MILESTONES) {
			diag_error(r->d, s[2] ? s[2]->loc : v->loc,
				   "multistep_lr needs milestones, a list or tuple of 1 to %d epochs (or steps): milestones=[30, 80]",
				   PLAN_MAX_MILESTONES);
			return false;
		}
		for (int i = 0; i < s[2]->n; i++) {
			if (!int_at_least(r, s[2]->items[i].v, "a milestone", 1, &sc->milestones[i]))
				return false;
			if (i && sc->milestones[i] <= sc->milestones[i - 1]) {
				diag_error(r->d, s[2]->items[i].v->loc, "milestones must increase");
				return false;
			}
		}
		sc->nmilestones = s[2]->n;
	}
	if (s[NA]) {
		const char *e;
		if (!val_str(r->d, s[NA], "every", &e))
			return false;
		if (strcmp(e, "step") == 0)
			sc->per_step = true;
		else if (strcmp(e, "epoch") != 0) {
			diag_error(r->d, s[NA]->loc, "every must be \"epoch\" or \"step\"");
			return false;
		}
	}
	return true;
}

/* randn(sizes...) or rand(sizes...) (*uniform): real values of that
 * shape.  what: "input" or "target"; forms: what else it may be, e.g.
 * "randint(high, sizes...)" */
static bool random_shape(struct reader *r, const struct val *v, const char *what, const char *forms, struct shape *out,
			 bool *uniform)
{
	bool real = v && v->kind == V_CALL && (strcmp(v->s, "randn") == 0 || strcmp(v->s, "rand") == 0);
	if (!real || v->n < 1 || v->n > SHAPE_MAX) {
		struct loc at = v ? v->loc : (struct loc){ 0 };
		if (real && v->n > SHAPE_MAX)
			diag_error(r->d, at, "%s has %d sizes; at most %d", what, v->n, SHAPE_MAX);
		else if (v && v->kind == V_CALL && strcmp(v->s, "randint") == 0 && !strcmp(what, "target"))
			diag_error(r->d, at, "class targets are drawn with classes(N), e.g. target=classes(10); randint is for input token ids");
		else
			diag_error(r->d, at, "%s must be randn(sizes...), rand(sizes...) or %s, e.g. %s=randn(10)", what, forms, what);
		return false;
	}
	*uniform = strcmp(v->s, "rand") == 0;
	out->rank = v->n;
	for (int k = 0; k < v->n; k++) {
		if (v->items[k].key) {
			diag_error(r->d, v->items[k].key_loc, "%s takes only sizes", v->s);
			return false;
		}
		if (!int_at_least(r, v->items[k].v, "a size", 1, &out->d[k]))
			return false;
	}
	return true;
}

/* npy's and npz's normalize=(mean, std): torchvision's Normalize on the
 * input as read, each a number, or a list or tuple of one per channel
 * (the sample's first dimension, checked against the model in infer.c);
 * a number with a list is that number for every channel. */
static bool read_npy_normalize(struct reader *r, const struct val *v, struct plan_dataset *ds)
{
	if (v->kind != V_TUPLE || v->n != 2) {
		diag_error(r->d, v->loc, "normalize must be (mean, std), each a number or one per channel: (0.2860, 0.3530), or "
			   "([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])");
		return false;
	}
	int64_t n = 1;
	for (int i = 0; i < 2; i++) {
		const struct val *x = v->items[i].v;
		if (x->kind != V_TUPLE && x->kind != V_LIST)
			continue;
		if (x->n < 1 || (n > 1 && x->n != n)) {
			diag_error(r->d, x->loc, x->n < 1 ? "the %s has no value; give one per channel" :
				   "the %s has %d values but the mean %lld; give both one per channel", i ? "std" : "mean", x->n,
				   (long long)n);
			return false;
		}
		n = x->n;
	}
	float *w = arena_array(r->a, (size_t)(2 * n), sizeof *w);
	for (int i = 0; i < 2; i++) {
		const struct val *x = v->items[i].v;
		bool list = x->kind == V_TUPLE || x->kind == V_LIST;
		for (int64_t c = 0; c < n; c++) {
			double y;
			const struct val *e = list ? x->items[c].v : x;
			if (!(i ? num_range(r, e, "a std", 1e-12, 1e6, &y) : num_range(r, e, "a mean", -1e6, 1e6, &y)))
				return false;
			w[i * n + c] = (float)y;
		}
	}
	ds->norm_mean = w;
	ds->norm_std = w + n;
	ds->nnorm = n;
	ds->norm_loc = v->loc;
	return true;
}

/* npy(input="x.npy", target="y.npy"): the sample shape and the targets
 * are the model's and the loss's (infer.c), checked against the files'
 * headers before a run (compile_check_data) and as it opens them. */
static bool read_npy(struct reader *r, const struct val *v, struct plan_dataset *ds)
{
	static const char *const names[] = { "input", "target", "normalize", "to_tensor" };
	struct val *s[4];
	if (!bind(r, v, names, 0, 4, s))
		return false;
	ds->kind = DATA_NPY;
	if ((s[2] && !read_npy_normalize(r, s[2], ds)) || (s[3] && !val_bool(r->d, s[3], "to_tensor", &ds->to_tensor)))
		return false;
	const char **paths[2] = { &ds->npy_input, &ds->npy_target };
	struct loc *locs[2] = { &ds->input_loc, &ds->target_loc };
	for (int i = 0; i < 2; i++) {
		if (!s[i]) {
			diag_error(r->d, v->loc, "npy needs the %s array's file: npy(input=\"x.npy\", target=\"y.npy\")", names[i]);
			return false;
		}
		*locs[i] = s[i]->loc;
		if (s[i]->kind == V_CALL) {
			diag_error(r->d, s[i]->loc, "npy reads arrays from files, so %s is a path such as \"%s.npy\"; "
				   "random data is synthetic(...)'s", names[i], i ? "y" : "x");
			return false;
		}
		if (!val_str(r->d, s[i], names[i], paths[i]))
			return false;
		if (!(*paths[i])[0]) {
			diag_error(r->d, s[i]->loc, "the %s's path is empty; give the .npy file numpy.save wrote", names[i]);
			return false;
		}
	}
	return true;
}

/* npz("d.npz", input="arr_0", target="arr_1"): two arrays of one archive
 * numpy.savez wrote, as np.load(path)[key] gives them; the keys default
 * to the names savez gives arrays passed without one.  Otherwise npy's. */
static bool read_npz(struct reader *r, const struct val *v, struct plan_dataset *ds)
{
	static const char *const names[] = { "path", "input", "target", "normalize", "to_tensor" };
	struct val *s[5];
	if (!bind(r, v, names, 1, 5, s))
		return false;
	ds->kind = DATA_NPY;
	if ((s[3] && !read_npy_normalize(r, s[3], ds)) || (s[4] && !val_bool(r->d, s[4], "to_tensor", &ds->to_tensor)))
		return false;
	if (!s[0]) {
		diag_error(r->d, v->loc, "npz needs the archive's path: npz(\"data.npz\", input=\"x\", target=\"y\")");
		return false;
	}
	if (s[0]->kind == V_CALL) {
		diag_error(r->d, s[0]->loc, "npz reads arrays from an archive, so its path is a string such as \"data.npz\"; "
			   "random data is synthetic(...)'s");
		return false;
	}
	if (!val_str(r->d, s[0], "path", &ds->npy_input))
		return false;
	if (!ds->npy_input[0]) {
		diag_error(r->d, s[0]->loc, "the archive's path is empty; give the .npz file numpy.savez wrote");
		return false;
	}
	ds->npy_target = ds->npy_input;
	ds->input_loc = ds->target_loc = s[0]->loc;
	const char **keys[2] = { &ds->npy_input_key, &ds->npy_target_key };
	static const char *const dflt[2] = { "arr_0", "arr_1" };
	for (int i = 0; i < 2; i++) {
		*keys[i] = dflt[i];
		if (!s[i + 1])
			continue;
		if (!val_str(r->d, s[i + 1], names[i + 1], keys[i]))
			return false;
		if (!(*keys[i])[0]) {
			diag_error(r->d, s[i + 1]->loc, "the %s's key is empty; give the name the array was saved under, "
				   "numpy.savez(path, x=a) saving a as \"x\"", names[i + 1]);
			return false;
		}
	}
	if (!strcmp(ds->npy_input_key, ds->npy_target_key)) {
		diag_error(r->d, s[2] ? s[2]->loc : v->loc, "input and target are both the array \"%s\"; give the targets' key",
			   ds->npy_input_key);
		return false;
	}
	return true;
}

static bool read_dataset(struct reader *r, const struct val *v, const char *which, struct plan_dataset *ds)
{
	static const char *const kinds[] = { "mnist", "synthetic", "npy", "npz" };
	int k;
	if (v->kind == V_STRING) {
		diag_error(r->d, v->loc, "a dataset is a call, not a path; for arrays saved with numpy.save write "
			   "npy(input=\"x.npy\", target=\"y.npy\")");
		return false;
	}
	if (!choose(r, v, "dataset", kinds, 4, &k))
		return false;
	memset(ds, 0, sizeof *ds);
	ds->loc = v->loc;
	ds->std = 1;
	if (k == 2)
		return read_npy(r, v, ds);
	if (k == 3)
		return read_npz(r, v, ds);
	if (k == 0) {
		static const char *const names[] = { "root", "split", "normalize" };
		struct val *s[3];
		for (int i = 0; v->kind == V_CALL && i < v->n; i++) {
			/* torchvision's MNIST(root, train=True) */
			const struct varg *g = &v->items[i];
			if (g->key && !strcmp(g->key, "train")) {
				struct loc kl = g->key_loc;
				kl.len = 5;
				bool is_true = (g->v->kind == V_BOOL && g->v->b) || (g->v->kind == V_NAME && !strcmp(g->v->s, "True"));
				bool is_false = (g->v->kind == V_BOOL && !g->v->b) || (g->v->kind == V_NAME && !strcmp(g->v->s, "False"));
				if (is_true || is_false)
					diag_error(r->d, kl, "mnist has no argument 'train'; the split is named: split=\"%s\"", is_true ? "train" : "test");
				else
					diag_error(r->d, kl, "mnist has no argument 'train'; the split is named: split=\"train\" or split=\"test\"");
				return false;
			}
		}
		if (!bind(r, v, names, 1, 3, s))
			return false;
		ds->kind = DATA_MNIST;
		if (!s[0]) {
			diag_error(r->d, v->loc, "mnist needs the folder of its IDX files: mnist(\"data/mnist\", split=\"%s\")", which);
			return false;
		}
		if (!val_str(r->d, s[0], "the dataset folder", &ds->root))
			return false;
		if (!ds->root[0]) {
			diag_error(r->d, s[0]->loc, "the dataset folder is empty; give the folder of the IDX files, e.g. mnist(\"data/mnist\")");
			return false;
		}
		ds->split = which;
		if (s[1]) {
			if (!val_str(r->d, s[1], "split", &ds->split))
				return false;
			if (strcmp(ds->split, "train") != 0 && strcmp(ds->split, "test") != 0) {
				diag_error(r->d, s[1]->loc, "split must be \"train\" or \"test\"");
				return false;
			}
		}
		if (s[2]) {
			if (s[2]->kind == V_LIST && s[2]->n == 2) {
				char text[96];
				val_print(s[2], text, sizeof text);
				size_t len = strlen(text);
				text[0] = '(';
				text[len - 1] = ')';
				if (len + 1 < sizeof text)
					diag_error(r->d, s[2]->loc, "normalize must be a tuple, not a list: write %s", text);
				else
					diag_error(r->d, s[2]->loc, "normalize must be a tuple, not a list: write (mean, std)");
				return false;
			}
			if (s[2]->kind != V_TUPLE || s[2]->n != 2) {
				diag_error(r->d, s[2]->loc, "normalize must be (mean, std), e.g. (0.1307, 0.3081)");
				return false;
			}
			/* torchvision's Normalize((mean,), (std,)) takes one value per
			 * channel; MNIST has one channel, so a one-element tuple or
			 * list is the number it holds */
			const struct val *ms[2];
			for (int i = 0; i < 2; i++) {
				ms[i] = s[2]->items[i].v;
				if ((ms[i]->kind == V_TUPLE || ms[i]->kind == V_LIST) && ms[i]->n == 1)
					ms[i] = ms[i]->items[0].v;
				else if ((ms[i]->kind == V_TUPLE || ms[i]->kind == V_LIST) && ms[i]->n > 1) {
					diag_error(r->d, ms[i]->loc, "MNIST images have one channel, so the %s is one number, not %d",
						   i ? "std" : "mean", ms[i]->n);
					return false;
				}
			}
			if (!num_range(r, ms[0], "the mean", -1e6, 1e6, &ds->mean) || !num_range(r, ms[1], "the std", 1e-12, 1e6, &ds->std))
				return false;
		}
		ds->sample = (struct shape){ 3, { 1, 28, 28 } };
		ds->target = TGT_CLASS;
		ds->classes = 10;
		return true;
	}
	static const char *const names[] = { "input", "target", "samples" };
	struct val *s[3];
	if (!bind(r, v, names, 0, 3, s))
		return false;
	ds->kind = DATA_SYNTHETIC;
	for (int i = 0; i < 2; i++)
		if (s[i] && s[i]->kind == V_STRING) {
			diag_error(r->d, s[i]->loc, "synthetic draws random data; for arrays saved in .npy files write "
				   "npy(input=\"x.npy\", target=\"y.npy\")");
			return false;
		}
	if (s[0])
		ds->input_loc = s[0]->loc;
	if (s[0] && s[0]->kind == V_CALL && strcmp(s[0]->s, "randint") == 0) {
		/* randint(high, sizes...): integer token ids, as torch.randint */
		if (s[0]->n < 2 || s[0]->n > SHAPE_MAX + 1 || s[0]->items[0].key) {
			diag_error(r->d, s[0]->loc, "randint takes the upper bound then the sizes: randint(1000, 16)");
			return false;
		}
		if (!int_at_least(r, s[0]->items[0].v, "randint's upper bound", 1, &ds->input_high))
			return false;
		if (ds->input_high > (1 << 24)) {
			diag_error(r->d, s[0]->items[0].v->loc, "randint's upper bound must be at most 16777216");
			return false;
		}
		ds->sample.rank = s[0]->n - 1;
		for (int i = 1; i < s[0]->n; i++)
			if (s[0]->items[i].key || !int_at_least(r, s[0]->items[i].v, "a size", 1, &ds->sample.d[i - 1]))
				return false;
	} else if (!random_shape(r, s[0], "input", "randint(high, sizes...)", &ds->sample, &ds->input_rand)) {
		return false;
	}
	if (s[1])
		ds->target_loc = s[1]->loc;
	if (s[1] && s[1]->kind == V_CALL && strcmp(s[1]->s, "classes") == 0) {
		ds->target = TGT_CLASS;
		if (s[1]->n != 1 || !int_at_least(r, s[1]->items[0].v, "the class count", 2, &ds->classes))
			return false;
	} else {
		ds->target = TGT_VECTOR;
		if (!random_shape(r, s[1], "target", "classes(N)", &ds->target_shape, &ds->target_rand))
			return false;
	}
	if (!s[2]) {
		diag_error(r->d, v->loc, "synthetic needs a sample count: samples=N");
		return false;
	}
	ds->samples_loc = s[2]->loc;
	return int_at_least(r, s[2], "samples", 1, &ds->samples);
}

static bool read_data(struct reader *r, const struct ast_section *sec, struct plan *p)
{
	static const char *const keys[] = { "train", "test" };
	struct val *v[2];
	bool ok = read_keys(r, sec, keys, 2, v);
	if (sec && !v[0] && ok) {
		diag_error(r->d, sec->kind_loc, "the data section needs a training set: train = mnist(...), npy(...) or synthetic(...)");
		return false;
	}
	int order[2], m = source_order(v, 2, order);
	for (int i = 0; i < m; i++) {
		int k = order[i];
		unknown_until(r, &v[k]->loc);
		ok &= read_dataset(r, v[k], keys[k], k == 0 ? &p->train_data : &p->test_data);
	}
	unknown_until(r, NULL);
	return ok;
}

/* one_cycle's momentum: OneCycleLR sets the optimizer's momentum (Adam's
 * beta1) to max_momentum and cycles it, so SGD and RMSprop keep a
 * momentum buffer even where their own momentum was 0; an optimizer
 * without one is refused, as OneCycleLR refuses it. */
static bool cycled_momentum(struct reader *r, struct plan_train *t)
{
	const struct plan_sched *sc = &t->sched;
	struct plan_optim *o = &t->optim;
	if (sc->kind != LRS_ONE_CYCLE || !sc->cycle_momentum)
		return true;
	/* a momentum the file gave, which the cycle replaces (OneCycleLR
	 * does so silently): Adam's beta1 other than its default */
	bool adam = o->kind == OPT_ADAM || o->kind == OPT_ADAMW || o->kind == OPT_ADAMAX || o->kind == OPT_RADAM;
	double own = adam ? o->beta1 : o->momentum;
	if ((o->kind == OPT_SGD || o->kind == OPT_RMSPROP) ? own != 0 : adam && own != 0.9) {
		char b[32], lo[32], hi[32];
		val_number_text(own, b, sizeof b);
		val_number_text(sc->base_momentum, lo, sizeof lo);
		val_number_text(sc->max_momentum, hi, sizeof hi);
		diag_warning(r->d, t->sched_loc, "one_cycle cycles the optimizer's %s between base_momentum (%s) and max_momentum (%s), "
			     "as OneCycleLR does, so its %s of %s is not used; give one_cycle(..., cycle_momentum=false) to keep it",
			     adam ? "beta1" : "momentum", lo, hi, adam ? "beta1" : "momentum", b);
	}
	switch (o->kind) {
	case OPT_SGD:
		o->momentum = sc->max_momentum;
		o->state_per_param = o->momentum != 0 ? 1 : 0;
		return true;
	case OPT_RMSPROP:
		o->momentum = sc->max_momentum;
		o->state_per_param = 1 + (o->momentum > 0) + o->centered;
		return true;
	case OPT_ADAM:
	case OPT_ADAMW:
	case OPT_ADAMAX:
	case OPT_RADAM: o->beta1 = sc->max_momentum; return true;
	case OPT_ADADELTA:
	case OPT_ADAGRAD: break;
	}
	diag_error(r->d, t->sched_loc, "one_cycle cycles the optimizer's momentum, but %s has none (OneCycleLR refuses it); give "
		   "one_cycle(..., cycle_momentum=false)", o->kind == OPT_ADADELTA ? "adadelta" : "adagrad");
	return false;
}

static bool read_train(struct reader *r, const struct ast_section *sec, struct plan *p)
{
	static const char *const keys[] = { "loss", "optimizer", "scheduler", "batch", "global_batch", "test_batch", "epochs",
					    "steps", "seed", "log_interval", "clip_grad_norm", "checkpoint_every", "shuffle", "drop_last",
					    "micro_batch", "shuffle_seed" };
	enum { NK = sizeof keys / sizeof keys[0] };
	struct val *v[NK];
	struct plan_train *t = &p->train;
	memset(t, 0, sizeof *t);
	t->batch = 1;
	t->test_batch = 1000;
	t->epochs = 1;
	t->seed = 1;
	t->log_interval = 10;
	t->shuffle = true;
	t->loss = LOSS_MSE;
	t->ignore_index = -100;
	t->optim.kind = OPT_SGD;
	t->optim.lr = 0.01;
	t->sched.kind = LRS_CONSTANT;
	bool ok = read_keys(r, sec, keys, NK, v);
	if (!sec)
		return true;
	t->present = true;
	int64_t seed = 1, shuffle_seed = 0;
	/* a key whose value failed is absent here: do not call it missing too */
	bool keys_ok = ok;
	if (!v[0] && keys_ok) {
		diag_error(r->d, sec->kind_loc, "the train section needs a loss: loss = cross_entropy (or mse, nll)");
		ok = false;
	}
	if (!v[1] && keys_ok) {
		diag_error(r->d, sec->kind_loc, "the train section needs an optimizer, e.g. optimizer = sgd(lr=0.01)");
		ok = false;
	}
	if (!v[3] && !v[4] && keys_ok) {
		diag_error(r->d, sec->kind_loc, "the train section needs a batch size: batch = 64 (per rank) or global_batch = N");
		ok = false;
	}
	/* each setting on its own, so that one run reports every bad one, in
	 * the order they are written (batch sizes index samples within a batch
	 * as int, as DataLoader's do) */
	int order[NK], m = source_order(v, NK, order);
	for (int i = 0; i < m; i++) {
		int k = order[i];
		unknown_until(r, &v[k]->loc);
		switch (k) {
		case 0: ok &= read_loss(r, v[0], t); break;
		case 1: ok &= read_optim(r, v[1], &t->optim); break;
		case 2:
			ok &= read_sched(r, v[2], &t->sched, &t->t_max_loc);
			t->sched_loc = v[2]->loc;
			break;
		case 3: ok &= int_between(r, v[3], "batch", 1, INT32_MAX, &t->batch); break;
		case 4: ok &= int_between(r, v[4], "global_batch", 1, INT32_MAX, &t->global_batch); break;
		case 5: ok &= int_between(r, v[5], "test_batch", 1, INT32_MAX, &t->test_batch); break;
		case 6: ok &= int_at_least(r, v[6], "epochs", 1, &t->epochs); break;
		case 7: ok &= int_at_least(r, v[7], "steps", 0, &t->steps); break;
		case 8: ok &= int_at_least(r, v[8], "seed", 0, &seed); break;
		case 9: ok &= int_at_least(r, v[9], "log_interval", 1, &t->log_interval); break;
		case 10: ok &= num_range(r, v[10], "clip_grad_norm", 1e-12, HUGE_VAL, &t->clip_grad_norm); break;
		case 11: ok &= int_at_least(r, v[11], "checkpoint_every", 1, &t->checkpoint_every); break;
		case 12: ok &= val_bool(r->d, v[12], "shuffle", &t->shuffle); break;
		case 13: ok &= val_bool(r->d, v[13], "drop_last", &t->drop_last); break;
		case 14: ok &= int_between(r, v[14], "micro_batch", 1, INT32_MAX, &t->micro_batch); break;
		default: ok &= int_at_least(r, v[15], "shuffle_seed", 0, &shuffle_seed); break;
		}
	}
	unknown_until(r, NULL);
	if (v[3] && v[4]) {
		diag_error(r->d, v[4]->loc, "set batch (per rank) or global_batch (fixed over ranks), not both");
		diag_note(r->d, v[3]->loc, "batch is set here");
		ok = false;
	}
	if (v[14] && !v[4]) {
		diag_error(r->d, v[14]->loc, "micro_batch splits a global_batch; with a per-rank batch, lower batch instead");
		ok = false;
	}
	/* steps = 0 trains nothing: the run evaluates the weights it starts
	 * from, as a PyTorch script calling only its test() would */
	t->eval_only = v[7] && t->steps == 0;
	if (v[3] || v[4])
		t->batch_loc = (v[3] ? v[3] : v[4])->loc;
	t->seed = (uint64_t)seed;
	t->shuffle_seed = (uint64_t)shuffle_seed;
	if (t->global_batch)
		t->batch = t->global_batch; /* per rank: divided by the world size when the plan is made */
	return ok && cycled_momentum(r, t);
}

/* param_dtype, reduce_dtype: trainc trains in float32 only */
static bool read_dtype(struct reader *r, const struct val *v, const char *key)
{
	const char *name;
	if (!val_str(r->d, v, key, &name))
		return false;
	if (strcmp(name, "float32") == 0)
		return true;
	if (!strcmp(name, "bfloat16") || !strcmp(name, "float16"))
		diag_error(r->d, v->loc, "%s \"%s\": trainc trains in float32 only (no mixed precision); use \"float32\"", key, name);
	else
		diag_error(r->d, v->loc, "%s must be \"float32\", not \"%s\": trainc trains in float32 only", key, name);
	return false;
}

static bool read_wrap(struct reader *r, const struct val *v, struct plan_parallel *pp)
{
	static const char *const policies[] = { "none", "size", "blocks" };
	int k;
	if (!choose(r, v, "wrap policy", policies, 3, &k))
		return false;
	pp->wrap = (enum wrap_kind)k;
	if (k == WRAP_SIZE) {
		static const char *const names[] = { "min_params" };
		struct val *s[1];
		if (!bind(r, v, names, 1, 1, s))
			return false;
		if (!s[0]) {
			diag_error(r->d, v->loc, "size needs min_params: size(min_params=20000)");
			return false;
		}
		return int_at_least(r, s[0], "min_params", 1, &pp->min_params);
	}
	if (k == WRAP_BLOCKS) {
		if (v->kind != V_CALL || v->n < 1) {
			diag_error(r->d, v->loc, "blocks needs the block names to wrap: blocks(ResBlock)");
			return false;
		}
		if (v->n > PLAN_MAX_WRAP_BLOCKS) {
			diag_error(r->d, v->items[PLAN_MAX_WRAP_BLOCKS].v->loc, "blocks takes at most %d block names", PLAN_MAX_WRAP_BLOCKS);
			return false;
		}
		for (int i = 0; i < v->n; i++) {
			const struct val *b = v->items[i].v;
			if (b->kind != V_NAME || v->items[i].key) {
				diag_error(r->d, b->loc, "blocks takes block names");
				return false;
			}
			for (int j = 0; j < i; j++) {
				if (strcmp(v->items[j].v->s, b->s) == 0) {
					diag_error(r->d, b->loc, "block %s is named twice in the wrap policy", b->s);
					diag_note(r->d, v->items[j].v->loc, "first named here");
					return false;
				}
			}
			pp->wrap_block_locs[pp->nwrap_blocks] = b->loc;
			pp->wrap_blocks[pp->nwrap_blocks++] = b->s;
		}
		return true;
	}
	if (v->kind == V_CALL && v->n) {
		diag_error(r->d, v->loc, "none takes no arguments");
		return false;
	}
	return true;
}

static bool read_shard(struct reader *r, const struct val *v, struct plan_parallel *pp)
{
	static const char *const shards[] = { "full", "grad_op", "none" };
	/* PyTorch's ShardingStrategy names, as people copy them */
	static const char *const torch_names[] = { "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD" };
	const char *sname;
	if (!val_str(r->d, v, "shard", &sname))
		return false;
	for (int k = 0; k < 3; k++) {
		if (strcmp(shards[k], sname) == 0) {
			pp->shard = (enum shard_kind)k;
			return true;
		}
		if (strcmp(torch_names[k], sname) == 0) {
			diag_error(r->d, v->loc, "shard \"%s\" is PyTorch's name; write shard = \"%s\"", sname, shards[k]);
			return false;
		}
	}
	diag_error(r->d, v->loc, "shard must be \"full\" (FULL_SHARD), \"grad_op\" (SHARD_GRAD_OP) or \"none\" (NO_SHARD)");
	return false;
}

static bool read_parallel(struct reader *r, const struct ast_section *sec, struct plan *p)
{
	struct plan_parallel *pp = &p->parallel;
	memset(pp, 0, sizeof *pp);
	pp->mode = PAR_DDP;
	pp->bucket_mb = 25;
	pp->microbatches = 1;
	pp->timeout_s = 1800;
	pp->wrap = WRAP_NONE;
	if (!sec)
		return true;
	pp->loc = sec->kind_loc;
	if (!sec->name) {
		diag_error(r->d, sec->kind_loc, "name the parallel mode: parallel ddp or parallel fsdp");
		return false;
	}
	static const char *const modes[] = { "ddp", "fsdp" };
	if (strcmp(sec->name, "ddp") == 0) {
		pp->mode = PAR_DDP;
	} else if (strcmp(sec->name, "fsdp") == 0) {
		pp->mode = PAR_FSDP;
	} else {
		const char *near = diag_nearest(sec->name, modes, 2);
		diag_error(r->d, sec->name_loc, "unknown parallel mode '%s'; %s%s%s", sec->name, near ? "did you mean '" : "choose ddp or fsdp",
			   near ? near : "", near ? "'?" : "");
		return false;
	}
	static const char *const keys[] = { "wrap", "shard", "bucket_mb", "microbatches", "timeout", "param_dtype", "reduce_dtype" };
	struct val *v[7];
	bool ok = read_keys(r, sec, keys, 7, v);
	pp->param_dtype = pp->reduce_dtype = DT_F32;
	/* each setting on its own, so that one run reports every bad one, in
	 * the order they are written */
	int order[7], m = source_order(v, 7, order);
	for (int i = 0; i < m; i++) {
		int k = order[i];
		unknown_until(r, &v[k]->loc);
		bool fsdp_only = k == 0 || k == 1 || k >= 5;
		if (pp->mode == PAR_DDP && fsdp_only) {
			diag_error(r->d, v[k]->loc, "'%s' is an FSDP setting; this section is parallel ddp", keys[k]);
			ok = false;
		} else if (pp->mode == PAR_FSDP && k == 2) {
			diag_error(r->d, v[2]->loc, "bucket_mb is a DDP setting; FSDP communicates per unit");
			ok = false;
		} else if (k >= 5) {
			ok &= read_dtype(r, v[k], keys[k]);
		} else if (k == 0) {
			ok &= read_wrap(r, v[0], pp);
		} else if (k == 1) {
			ok &= read_shard(r, v[1], pp);
		} else if (k == 2) {
			ok &= num_range(r, v[2], "bucket_mb", 0.001, 65536, &pp->bucket_mb);
		} else if (k == 3) {
			ok &= int_at_least(r, v[3], "microbatches", 1, &pp->microbatches);
		} else {
			ok &= num_range(r, v[4], "timeout", 1, 1e7, &pp->timeout_s);
		}
	}
	unknown_until(r, NULL);
	return ok;
}

bool settings_read(struct arena *a, struct diag *d, const struct sections *s, struct plan *p)
{
	struct reader r = { .a = a, .d = d, .ec = { a, d } };
	bool ok = read_data(&r, s->data, p);
	ok &= read_train(&r, s->train, p);
	ok &= read_parallel(&r, s->parallel, p);
	if (ok && p->parallel.wrap == WRAP_BLOCKS) {
		for (int i = 0; i < p->parallel.nwrap_blocks; i++) {
			bool found = false;
			for (int b = 0; b < s->nblocks; b++)
				found |= strcmp(s->blocks[b]->name, p->parallel.wrap_blocks[i]) == 0;
			if (!found) {
				const char *names[MAX_BLOCKS];
				for (int b = 0; b < s->nblocks; b++)
					names[b] = s->blocks[b]->name;
				const char *near = diag_nearest(p->parallel.wrap_blocks[i], names, s->nblocks);
				diag_error(d, p->parallel.wrap_block_locs[i], "there is no block named %s to wrap%s%s%s", p->parallel.wrap_blocks[i],
					   near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
				ok = false;
			}
		}
	}
	return ok;
}
