/* model_hash.c: what a checkpoint must be resumed with.  A checkpoint
 * records a hash of the model and of the settings that decide how it
 * trains; a resume must compile to the same hash, else it would go on
 * training another model, or the same one another way, from state made
 * for the first.
 * The hash covers the compiled plan's meaning, not its spelling: the
 * layers in execution order with every argument as resolved (defaults
 * filled in), their state_dict names, devices and FSDP units, the
 * parameters with their initialisers, the data, and every training
 * setting except those a resumed run may change (steps, epochs,
 * log_interval, checkpoint_every, test_batch, the parallel timeout).  So
 * `sgd(lr=0.1, nesterov=false)` resumes `sgd(lr=0.1)`, `linear(10, 5)`
 * resumes `linear(5)` after a 10-wide layer, `conv2d(4, kernel=3,
 * padding="same")` resumes `padding=1` (the padding is hashed as made; the
 * hidden zero pad before a "same" convolution that pads one side more is
 * a node like any other), arguments may be reordered or named, a model
 * renamed, a block renamed or a wrap policy rewritten as long as it makes
 * the same units.  Floats are hashed exactly (%a).
 * The data counts by what it is (kind, split, shapes, normalisation,
 * keys), not by its files' paths: a checkpoint resumes after its data
 * moved.  Earlier checkpoints carry form 3 of this hash, which covered the
 * paths too, and those made before the hash covered the meaning a hash of
 * the canonical text (the section-aware form, or the earlier one in which
 * a bodiless `parallel ddp` differed from none); all are still accepted.
 * Does not: cover the world size or anything that follows from it (FSDP
 * shard sizes, DDP buckets); ckpt.c checks the rank count on its own.
 */
#include "runtime/model_hash.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/ops.h"
#include "runtime/util.h"

/* ---- the meaning ---- */

/* One "key value" field into the hash, ended by a newline, so no two
 * different sequences of fields hash the same text. */
static void field(uint64_t *h, const char *fmt, ...)
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	*h = util_fnv1a(*h, b, (size_t)n < sizeof b ? (size_t)n : sizeof b - 1);
	*h = util_fnv1a(*h, "\n", 1);
}

/* A string of any length (paths, names): its length, then its bytes. */
static void text(uint64_t *h, const char *key, const char *s)
{
	s = s ? s : "";
	field(h, "%s %zu", key, strlen(s));
	*h = util_fnv1a(*h, s, strlen(s));
}

static void shape(uint64_t *h, const char *key, const struct shape *s)
{
	char b[160];
	field(h, "%s %s", key, shape_str(s, b, sizeof b));
}

static void node_args(uint64_t *h, const struct node *n)
{
	switch (n->op) {
	case OP_INPUT: break; /* its shape is the output's */
	case OP_LINEAR: field(h, "linear %" PRId64 " %" PRId64 " %d", n->a.linear.in, n->a.linear.out, n->a.linear.bias); break;
	case OP_CONV2D:
		field(h, "conv %" PRId64 " %" PRId64 " k %" PRId64 " %" PRId64 " s %" PRId64 " %" PRId64 " p %" PRId64 " %" PRId64
			 " d %" PRId64 " %" PRId64 " g %" PRId64 " %d",
		      n->a.conv.cin, n->a.conv.cout, n->a.conv.kh, n->a.conv.kw, n->a.conv.sh, n->a.conv.sw, n->a.conv.ph,
		      n->a.conv.pw, n->a.conv.dh, n->a.conv.dw, n->a.conv.groups, n->a.conv.bias);
		break;
	case OP_MAXPOOL2D:
	case OP_AVGPOOL2D:
		field(h, "pool k %" PRId64 " %" PRId64 " s %" PRId64 " %" PRId64 " p %" PRId64 " %" PRId64 " d %" PRId64 " %" PRId64
			 " %d %d",
		      n->a.pool.kh, n->a.pool.kw, n->a.pool.sh, n->a.pool.sw, n->a.pool.ph, n->a.pool.pw, n->a.pool.dh,
		      n->a.pool.dw, n->a.pool.ceil_mode, n->a.pool.count_include_pad);
		break;
	case OP_ADAPTIVE_AVGPOOL2D:
	case OP_ADAPTIVE_MAXPOOL2D: field(h, "apool %" PRId64 " %" PRId64, n->a.apool.oh, n->a.apool.ow); break;
	case OP_ZEROPAD2D:
		field(h, "pad %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, n->a.pad.left, n->a.pad.right, n->a.pad.top,
		      n->a.pad.bottom);
		break;
	case OP_BATCHNORM1D:
	case OP_BATCHNORM2D:
		field(h, "bn %" PRId64 " %a %a %d %d", n->a.bn.c, n->a.bn.eps, n->a.bn.momentum, n->a.bn.affine, n->a.bn.track);
		break;
	case OP_LAYERNORM: {
		struct shape s = { .rank = n->a.ln.nd };
		memcpy(s.d, n->a.ln.d, sizeof s.d);
		shape(h, "ln", &s);
		field(h, "ln %a %d", n->a.ln.eps, n->a.ln.affine);
		break;
	}
	case OP_GROUPNORM:
		field(h, "gn %" PRId64 " %" PRId64 " %a %d", n->a.gn.groups, n->a.gn.c, n->a.gn.eps, n->a.gn.affine);
		break;
	case OP_EMBEDDING:
		field(h, "emb %" PRId64 " %" PRId64 " %" PRId64, n->a.emb.num, n->a.emb.dim, n->a.emb.padding_idx);
		break;
	case OP_DROPOUT: field(h, "drop %a", n->a.drop.p); break;
	case OP_FLATTEN: field(h, "flat %d %d", n->a.flat.start, n->a.flat.end); break;
	case OP_GELU: field(h, "gelu %d", n->a.gelu.tanh); break;
	OP_ACT_CASES: field(h, "act %a %a", n->a.act.a, n->a.act.b); break;
	case OP_PRELU: field(h, "prelu %" PRId64 " %a", n->a.prelu.num, n->a.prelu.init); break;
	case OP_SOFTMAX:
	case OP_LOG_SOFTMAX: field(h, "softmax %d", n->a.softmax.dim); break;
	case OP_TRANSFER: field(h, "xfer %d %d", n->a.xfer.from, n->a.xfer.to); break;
	case OP_RELU:
	case OP_TANH:
	case OP_SIGMOID:
	case OP_ADD:
	case OP__COUNT: break;
	}
}

static void model(uint64_t *h, const struct plan *p)
{
	field(h, "nodes %d devices %d", p->nnodes, p->ndevices);
	for (int i = 0; i < p->nnodes; i++) {
		const struct node *n = &p->nodes[i];
		field(h, "node %s %d %d %d device %d unit %d frozen %d", op_name(n), n->in, n->in2, n->dtype, n->device,
		      n->unit, n->frozen);
		text(h, "path", n->path);
		shape(h, "out", &n->out);
		node_args(h, n);
	}
	field(h, "params %d", p->nparams);
	for (int k = 0; k < p->nparams; k++) {
		const struct param *q = &p->params[k];
		text(h, "param", q->name);
		field(h, "node %d role %d dtype %d trainable %d init %d fan_in %" PRId64 " device %d unit %d", q->node, q->role,
		      q->dtype, q->trainable, q->init, q->fan_in, q->device, q->unit);
		shape(h, "shape", &q->shape);
	}
	/* units as formed, not the policy that formed them; not their padded
	 * and shard sizes, which follow the world size */
	field(h, "units %d", p->nunits);
	for (int u = 0; u < p->nunits; u++) {
		const struct unit *un = &p->units[u];
		text(h, "unit", p->scopes[un->scope].path);
		field(h, "parent %d device %d nodes %d %d numel %" PRId64 " dtypes %d %d", un->parent, un->device, un->first_node,
		      un->last_node, un->numel, un->param_dtype, un->reduce_dtype);
	}
}

/* What the data is, not where it lies: form 3 (earlier checkpoints) also
 * hashed mnist's root and npy's paths, so moving the files blocked a
 * resume. */
static void dataset(uint64_t *h, const char *which, const struct plan_dataset *ds, bool paths)
{
	field(h, "data %s %d", which, ds->kind);
	if (ds->kind == DATA_NONE)
		return;
	if (paths)
		text(h, "root", ds->root);
	text(h, "split", ds->split);
	field(h, "norm %a %a high %" PRId64 " target %d classes %" PRId64, ds->mean, ds->std, ds->input_high, ds->target,
	      ds->classes);
	shape(h, "sample", &ds->sample);
	shape(h, "target", &ds->target_shape);
	if (ds->input_rand || ds->target_rand) /* absent for randn, so earlier checkpoints resume */
		field(h, "rand %d %d", ds->input_rand, ds->target_rand);
	if (ds->kind == DATA_NPY) {
		if (paths) {
			text(h, "npy input", ds->npy_input);
			text(h, "npy target", ds->npy_target);
		}
		for (int64_t c = 0; c < ds->nnorm; c++) /* absent without normalize, so earlier checkpoints resume */
			field(h, "npy norm %a %a", (double)ds->norm_mean[c], (double)ds->norm_std[c]);
		if (ds->to_tensor) /* absent without, so earlier checkpoints resume */
			field(h, "to_tensor");
		if (ds->npy_input_key) { /* absent for .npy files, so their checkpoints resume */
			text(h, "npz input", ds->npy_input_key);
			text(h, "npz target", ds->npy_target_key);
		}
	}
	/* mnist's and npy's counts are the files', known once they are read */
	if (ds->kind == DATA_SYNTHETIC)
		field(h, "samples %" PRId64, ds->samples);
}

/* Only what each optimizer and scheduler reads: a field another kind
 * uses may hold anything (`scheduler = constant` written out sets a gamma
 * the default leaves 0). */
static void optim(uint64_t *h, const struct plan_optim *o)
{
	field(h, "optim %d lr %a wd %a", o->kind, o->lr, o->weight_decay);
	switch (o->kind) {
	case OPT_SGD: field(h, "momentum %a dampening %a nesterov %d", o->momentum, o->dampening, o->nesterov); break;
	case OPT_ADAM:
	case OPT_ADAMW: field(h, "betas %a %a eps %a amsgrad %d", o->beta1, o->beta2, o->eps, o->amsgrad); break;
	case OPT_ADAMAX:
	case OPT_RADAM: field(h, "betas %a %a eps %a", o->beta1, o->beta2, o->eps); break;
	case OPT_ADADELTA: field(h, "rho %a eps %a", o->rho, o->eps); break;
	case OPT_ADAGRAD: field(h, "lr_decay %a acc %a eps %a", o->lr_decay, o->initial_accumulator, o->eps); break;
	case OPT_RMSPROP:
		field(h, "alpha %a eps %a momentum %a centered %d", o->alpha, o->eps, o->momentum, o->centered);
		break;
	}
}

static void sched(uint64_t *h, const struct plan_sched *s)
{
	field(h, "sched %d", s->kind);
	switch (s->kind) {
	case LRS_CONSTANT: return;
	case LRS_STEP: field(h, "step %" PRId64 " gamma %a", s->step_size, s->gamma); break;
	case LRS_MULTISTEP:
		field(h, "gamma %a", s->gamma);
		for (int i = 0; i < s->nmilestones; i++)
			field(h, "milestone %" PRId64, s->milestones[i]);
		break;
	case LRS_EXPONENTIAL: field(h, "gamma %a", s->gamma); break;
	case LRS_COSINE: field(h, "t_max %" PRId64 " eta_min %a warmup %" PRId64, s->t_max, s->eta_min, s->warmup); break;
	case LRS_CONSTANT_LR: field(h, "factor %a total %" PRId64, s->factor, s->total_iters); break;
	case LRS_LINEAR: field(h, "start %a end %a total %" PRId64, s->start_factor, s->end_factor, s->total_iters); break;
	case LRS_POLYNOMIAL: field(h, "power %a total %" PRId64, s->power, s->total_iters); break;
	case LRS_COSINE_RESTARTS: field(h, "t_0 %" PRId64 " t_mult %" PRId64 " eta_min %a", s->t_0, s->t_mult, s->eta_min); break;
	case LRS_ONE_CYCLE:
		field(h, "max_lr %a total %" PRId64 " pct %a linear %d cycle %d base %a max %a div %a final %a three %d", s->max_lr,
		      s->total_steps, s->pct_start, s->anneal_linear, s->cycle_momentum, s->base_momentum, s->max_momentum, s->div_factor,
		      s->final_div_factor, s->three_phase);
		break;
	case LRS_PLATEAU:
		field(h, "factor %a max %d patience %" PRId64 " threshold %a abs %d cooldown %" PRId64 " min_lr %a eps %a train %d", s->factor,
		      s->mode_max, s->patience, s->threshold, s->threshold_abs, s->cooldown, s->min_lr, s->eps, s->monitor_train);
		break;
	}
	field(h, "per_step %d", s->per_step);
}

static void settings(uint64_t *h, const struct plan *p)
{
	const struct plan_train *t = &p->train;
	field(h, "loss %d %d", t->loss, t->reduction);
	if (t->label_smoothing > 0) /* absent at 0, so earlier checkpoints resume */
		field(h, "label_smoothing %a", t->label_smoothing);
	if (t->ignore_index != -100) /* likewise at PyTorch's default */
		field(h, "ignore_index %d", (int)t->ignore_index);
	if (t->loss == LOSS_SMOOTH_L1 || t->loss == LOSS_HUBER || (t->loss == LOSS_BCE_LOGITS && t->loss_param != 1) ||
	    t->loss == LOSS_KL_DIV)
		field(h, "loss_param %a", t->loss_param);
	for (int64_t i = 0; i < t->nclass_weights; i++)
		field(h, "class_weight %a", (double)t->class_weights[i]);
	for (int64_t i = 0; i < t->npos_weights; i++)
		field(h, "pos_weight %a", (double)t->pos_weights[i]);
	optim(h, &t->optim);
	sched(h, &t->sched);
	field(h, "batch %" PRId64 " global %" PRId64 " micro %" PRId64 " seed %" PRIu64 " shuffle_seed %" PRIu64 " clip %a %d %d",
	      t->batch, t->global_batch, t->micro_batch, t->seed, t->shuffle_seed, t->clip_grad_norm, t->shuffle, t->drop_last);
	const struct plan_parallel *pp = &p->parallel;
	field(h, "parallel %d shard %d bucket_mb %a microbatches %" PRId64, pp->mode, pp->shard, pp->bucket_mb, pp->microbatches);
}

/* form 4, or form 3 with the data's paths */
static uint64_t meaning_hash(const struct plan *p, int form)
{
	uint64_t h = UTIL_FNV_BASIS;
	field(&h, "trainc model hash %d", form);
	model(&h, p);
	dataset(&h, "train", &p->train_data, form == 3);
	dataset(&h, "test", &p->test_data, form == 3);
	settings(&h, p);
	return h;
}

uint64_t model_hash(const struct plan *p)
{
	return meaning_hash(p, 4);
}

/* ---- the canonical text, as earlier checkpoints hashed it ---- */

/* Settings a resumed run may change: how long it trains and how it
 * reports.  Only statements of their own sections count (the canonical
 * text indents a section's statements by exactly four spaces): a layer
 * named `steps` in the model is part of the model. */
static bool resumable_setting(const char *section, const char *line, size_t len)
{
	static const char *const keys[][2] = {
		{ "train", "steps" },	     { "train", "epochs" },	{ "train", "log_interval" },
		{ "train", "checkpoint_every" }, { "train", "test_batch" }, { "parallel", "timeout" },
	};
	if (len < 5 || strncmp(line, "    ", 4) != 0 || line[4] == ' ')
		return false;
	line += 4, len -= 4;
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		size_t n = strlen(keys[k][1]);
		if (strcmp(section, keys[k][0]) == 0 && len > n + 2 && strncmp(line, keys[k][1], n) == 0 &&
		    strncmp(line + n, " =", 2) == 0)
			return true;
	}
	return false;
}

/* The lines of the canonical text that a resumed run may not change, each
 * ended by '\n', into a malloc'd string (NULL if out of memory):
 * resumable settings dropped, and a section they leave empty written
 * without its body (`parallel ddp { timeout = 60 }` is `parallel ddp`).
 * bare_ddp: also drop blank lines and a bodiless `parallel ddp`, which is
 * what a file without a parallel section runs. */
static char *kept_lines(const char *text, bool bare_ddp)
{
	size_t n = strlen(text), at = 0;
	char *out = malloc(n + 1), section[16] = "";
	if (!out)
		return NULL;
	for (const char *s = text; *s;) {
		const char *e = strchr(s, '\n');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		const char *next = s + len + (e ? 1 : 0);
		if (len && *s != ' ' && *s != '}') {
			size_t w = strcspn(s, " {\n");
			snprintf(section, sizeof section, "%.*s", (int)(w < sizeof section ? w : 0), s);
		}
		bool keep = !resumable_setting(section, s, len) && !(bare_ddp && len == 0);
		if (keep && len == 1 && *s == '}' && at >= 3 && !strncmp(out + at - 3, " {\n", 3)) {
			at -= 3; /* the body left nothing: `X {` + `}` is `X` */
			out[at++] = '\n';
			keep = false;
		}
		if (keep) {
			memcpy(out + at, s, len);
			at += len;
			out[at++] = '\n';
		}
		s = next;
	}
	out[at] = 0;
	if (bare_ddp) {
		char *b = strstr(out, "parallel ddp\n");
		if (b && (b == out || b[-1] == '\n'))
			memmove(b, b + 13, strlen(b + 13) + 1);
	}
	return out;
}

/* 0 if out of memory: then no checkpoint of that form matches */
static uint64_t text_hash(const struct plan *p, bool bare_ddp)
{
	char *k = kept_lines(p->text, bare_ddp);
	uint64_t h = k ? util_fnv1a(UTIL_FNV_BASIS, k, strlen(k)) : 0;
	free(k);
	return h;
}

bool model_hash_matches(const struct plan *p, uint64_t h)
{
	return h == model_hash(p) || h == meaning_hash(p, 3) || h == text_hash(p, true) || h == text_hash(p, false);
}
