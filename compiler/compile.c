/* compile.c: the compiler driver: the passes in order, then the hash.
 * A pass runs only when the ones before it succeeded, since each relies on
 * what the earlier ones established; within a pass, errors are collected
 * so one run reports as many as can be trusted.  The plan hash covers the
 * canonical text and the world size, so every rank of a job can check at
 * rendezvous that it compiled the same plan.
 */
#include "compiler/compile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/compile_impl.h"
#include "compiler/ops.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/mnist_files.h"
#include "runtime/util.h"

/* Whether a rank's memory can be counted in bytes at all: the plan's sums
 * are int64, and a batch of 2^31 samples of a large layer would wrap them.
 * Counted in double, with room to spare: every activation and its gradient,
 * parameters with gradients and optimizer state. */
static bool plan_fits(struct diag *d, const struct plan *p, int64_t per_rank)
{
	double acts = 0, params = 0;
	for (int i = 0; i < p->nnodes; i++)
		acts += (double)shape_numel(&p->nodes[i].out);
	for (int k = 0; k < p->nparams; k++)
		params += (double)p->params[k].numel;
	double bytes = 4.0 * (2.0 * acts * (double)per_rank + params * (3.0 + p->train.optim.state_per_param));
	if (bytes < 0x1p56)
		return true;
	diag_error(d, p->train.batch_loc.src ? p->train.batch_loc : p->nodes[0].loc,
		   "a batch of %lld per rank could need up to %.0f PiB, beyond what any machine holds; lower the batch or the layer sizes",
		   (long long)per_rank, bytes / 0x1p50);
	return false;
}

int64_t compile_rank_batch(const struct plan_train *t, int world, int64_t *micro)
{
	if (!t->global_batch) {
		*micro = t->batch;
		return t->batch;
	}
	/* rounded up: a training run's split is even (compile_file refuses
	 * others), so this is its share.  train.steps = 0 splits nothing and
	 * may run at a rank count that does not divide global_batch; its plan
	 * is made for the largest share a rank would take were the samples
	 * dealt out, as DistributedSampler pads every rank to ceil(n / world):
	 * never 0 where global_batch is below the rank count, and never less
	 * memory than any rank's share */
	int64_t share = (t->global_batch + world - 1) / world;
	*micro = t->micro_batch && t->micro_batch < share ? t->micro_batch : share;
	return share;
}

/* The layer whose output the loss reads: the last, past device transfers. */
static const struct node *last_layer(const struct plan *p)
{
	int i = p->nnodes - 1;
	while (i > 0 && p->nodes[i].op == OP_TRANSFER)
		i--;
	return &p->nodes[i];
}

/* Optimizer steps of the whole run, when the file fixes them: steps =,
 * or epochs of a synthetic training set (its size is known); 0 when not
 * known before the data is read. */
static int64_t run_steps(const struct plan *p)
{
	const struct plan_train *t = &p->train;
	if (t->steps)
		return t->steps;
	if (p->train_data.kind != DATA_SYNTHETIC)
		return 0;
	/* as DistributedSampler pads, every rank takes ceil(n / world) */
	int64_t n = (p->train_data.samples + p->world - 1) / p->world, micro;
	int64_t b = compile_rank_batch(t, p->world, &micro);
	int64_t per_epoch = t->drop_last ? n / b : (n + b - 1) / b;
	return per_epoch * t->epochs;
}

/* An mnist() set whose files are not there, or cannot be read, stops a
 * run only when it opens them, with no place in the file: say it here, at
 * the data statement, after the same search the reader makes. */
static bool check_files(struct diag *d, const struct plan_dataset *ds)
{
	if (ds->kind != DATA_MNIST)
		return true;
	char images[4200], labels[4200], err[5000];
	if (mnist_find(ds->root, ds->split, images, labels, sizeof images, err, sizeof err) != 0) {
		diag_error(d, ds->loc, "%s", err);
		return false;
	}
	const char *paths[2] = { images, labels };
	for (int i = 0; i < 2; i++) {
		if (access(paths[i], R_OK) != 0) {
			diag_error(d, ds->loc, "cannot read %s: %s", paths[i], strerror(errno));
			return false;
		}
	}
	return true;
}

bool compile_check_data(struct diag *d, const struct plan *p)
{
	bool train_ok = check_files(d, &p->train_data); /* both sets are checked, each said */
	bool test_ok = check_files(d, &p->test_data);
	return train_ok && test_ok;
}

/* The layer whose values nd gives: nd, or the one before the views
 * (flatten, unflatten, identity, transfers) that end the model. */
static const struct node *past_views(const struct plan *p, const struct node *nd)
{
	while (nd->op == OP_FLATTEN || nd->op == OP_TRANSFER)
		nd = &p->nodes[nd->in];
	return nd;
}

/* What compiles but trains otherwise than meant.  Warnings do not stop a
 * run. */
static void warn_plan(struct diag *d, const struct plan *p)
{
	for (int i = 0; i < p->nnodes; i++)
		if (p->nodes[i].in >= 0)
			op_warn(d, &p->nodes[i], &p->nodes[p->nodes[i].in]);
	const struct plan_train *t = &p->train;
	if (!t->present)
		return;
	const struct node *last = last_layer(p);
	if (t->loss == LOSS_NLL && last->op != OP_LOG_SOFTMAX) {
		if (last->op == OP_SOFTMAX)
			diag_warning(d, t->loss_loc, "nll takes log-probabilities, but the model ends in softmax, which gives probabilities; "
				     "end it in log_softmax(dim=1) instead, or drop the softmax and use cross_entropy");
		else
			diag_warning(d, t->loss_loc, "nll takes log-probabilities, but the model does not end in log_softmax: on raw scores "
				     "the loss falls without bound; use cross_entropy, or end the model in log_softmax(dim=1)");
		diag_note(d, last->loc, "the model's last layer is here");
	} else if (t->loss == LOSS_CROSS_ENTROPY && last->op == OP_SOFTMAX) {
		diag_warning(d, t->loss_loc, "cross_entropy applies log_softmax itself, but the model already ends in softmax: softmax "
			     "is applied twice and learning slows; drop the softmax");
		diag_note(d, last->loc, "the model's last layer is here");
	} else if (t->loss == LOSS_BCE || t->loss == LOSS_BCE_LOGITS) {
		const struct node *v = past_views(p, last);
		bool unit = v->op == OP_SIGMOID || v->op == OP_HARDSIGMOID || v->op == OP_SOFTMAX;
		if (t->loss == LOSS_BCE && !unit) {
			diag_warning(d, t->loss_loc, "bce takes probabilities, but the model does not end in sigmoid: an output outside "
				     "[0, 1] makes the loss NaN and stops the run; end the model in sigmoid, or use bce_with_logits "
				     "on the raw scores");
			diag_note(d, v->loc, "the model's last layer is here");
		} else if (t->loss == LOSS_BCE_LOGITS && v->op == OP_SIGMOID) {
			diag_warning(d, t->loss_loc, "bce_with_logits applies sigmoid itself, but the model already ends in sigmoid: "
				     "sigmoid is applied twice and learning slows; drop the sigmoid, or use bce");
			diag_note(d, v->loc, "the model's last layer is here");
		}
	}
	if (t->loss == LOSS_KL_DIV) {
		const struct node *v = past_views(p, last);
		if (v->op != OP_LOG_SOFTMAX && v->op != OP_LOGSIGMOID) {
			diag_warning(d, t->loss_loc, "kl_div takes log-probabilities, but the model %s",
				     v->op == OP_SOFTMAX ? "ends in softmax, which gives probabilities; end it in log_softmax instead"
							 : "does not end in log_softmax: on raw scores the loss falls without bound; "
							   "end the model in log_softmax");
			diag_note(d, v->loc, "the model's last layer is here");
		}
		if (t->reduction == RED_MEAN)
			diag_warning(d, t->loss_loc, "kl_div's reduction \"mean\" divides by every value of the batch, not by its "
				     "samples, so the loss is not the KL divergence's mean; reduction=\"batchmean\" gives that (as "
				     "PyTorch warns)");
	}
	const struct plan_sched *sc = &t->sched;
	if (sc->kind == LRS_COSINE && !sc->per_step && !t->steps && sc->t_max > t->epochs)
		diag_warning(d, t->t_max_loc, "cosine's t_max is %lld epochs (every=\"epoch\"), but the run has %lld epoch%s: the rate "
			     "never comes down to eta_min; to count t_max in optimizer steps, add every=\"step\"",
			     (long long)sc->t_max, (long long)t->epochs, t->epochs == 1 ? "" : "s");
	int64_t steps = run_steps(p);
	if (sc->kind == LRS_COSINE && sc->per_step && steps && sc->t_max > steps)
		diag_warning(d, t->t_max_loc, "cosine's t_max is %lld steps, but the run has %lld optimizer steps, so the rate does not "
			     "come down to eta_min; make t_max at most %lld", (long long)sc->t_max, (long long)steps, (long long)steps);
}

struct plan *compile_file(struct arena *a, struct diag *d, const struct compile_opts *o)
{
	struct sections s;
	int before = d->errors;
	if (!sections_gather(a, d, o->path, o->sets, o->nsets, &s) || d->errors > before)
		return NULL;
	struct plan *p = arena_alloc(a, sizeof *p);
	p->path = o->path;
	p->sources = s.sources;
	p->world = o->world > 0 ? o->world : 1;
	p->gpu = o->gpu;
	/* the model usually comes first in a file: report its errors first */
	bool ok = lower_model(a, d, &s, p);
	ok &= settings_read(a, d, &s, p);
	if (!ok || d->errors > before)
		return NULL;
	const struct plan_train *t = &p->train;
	if (t->sched.kind == LRS_PLATEAU && !t->sched.monitor_train && p->test_data.kind == DATA_NONE) {
		diag_error(d, t->sched_loc, "reduce_on_plateau watches the test loss, but the data section has no test set; add one "
			   "(test = ...), or watch the epoch's training loss: reduce_on_plateau(monitor=\"train_loss\")");
		return NULL;
	}
	int64_t per_rank, share = compile_rank_batch(t, p->world, &per_rank);
	/* train.steps = 0 splits no training batch: only a training run needs
	 * whole shares and micro-batches */
	bool splits = !o->world_unknown && !t->eval_only;
	if (t->global_batch && splits) {
		if (t->global_batch % p->world != 0 || share % (t->micro_batch ? t->micro_batch : share) != 0) {
			struct loc nowhere = { 0 };
			if (t->micro_batch)
				diag_error(d, s.train ? s.train->kind_loc : nowhere,
					   "global_batch %lld does not split into %d rank%s of whole micro-batches of %lld; choose sizes that divide it",
					   (long long)t->global_batch, p->world, p->world == 1 ? "" : "s", (long long)t->micro_batch);
			else
				diag_error(d, s.train ? s.train->kind_loc : nowhere,
					   "global_batch %lld does not split evenly over %d ranks; choose a multiple of the rank count",
					   (long long)t->global_batch, p->world);
			return NULL;
		}
	}
	int64_t m = p->parallel.microbatches;
	if (m > 64) {
		struct loc nowhere = { 0 };
		diag_error(d, s.parallel ? s.parallel->kind_loc : nowhere, "microbatches = %lld: at most 64 micro-batches", (long long)m);
		return NULL;
	}
	if (m > 1 && per_rank % m != 0 && splits) {
		struct loc nowhere = { 0 };
		diag_error(d, s.parallel ? s.parallel->kind_loc : nowhere,
			   "microbatches = %lld does not divide the %s of %lld per rank; choose a divisor", (long long)m,
			   t->micro_batch ? "micro_batch" : "batch", (long long)per_rank);
		return NULL;
	}
	const struct plan_dataset *td = &p->train_data;
	/* train.steps = 0 reads no training batch: any rank count evaluates */
	if (td->kind == DATA_SYNTHETIC && td->samples < p->world && !o->world_unknown && !t->eval_only) {
		diag_error(d, td->samples_loc, "%lld training samples cannot feed %d ranks; lower --cpus or --gpus, or add samples",
			   (long long)td->samples, p->world);
		return NULL;
	}
	if (!place_nodes(a, d, p) || !infer_shapes(a, d, p) || !plan_fits(d, p, per_rank) || !wrap_units(a, d, p) ||
	    !memplan_build(a, d, p) || d->errors > before)
		return NULL;
	/* once per command: not on the first look before the rank count is
	 * known, nor in the workers a launcher starts (it has warned) */
	if (!o->world_unknown && !getenv("TRAINC_WORKER"))
		warn_plan(d, p);
	p->text = unparse_sections(a, &s, false);
	p->source = unparse_sections(a, &s, true);
	uint64_t h = util_fnv1a(UTIL_FNV_BASIS, p->text, strlen(p->text));
	h = util_fnv1a(h, &p->world, sizeof p->world);
	p->hash = h;
	return p;
}
