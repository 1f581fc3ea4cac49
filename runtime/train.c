/* train.c: one rank trains a plan.
 * Batches come from a loader thread over a DistributedSampler of this
 * rank; an optimizer step is one or more micro-batches (global_batch)
 * whose gradients accumulate, synchronised by DDP on the last one only;
 * the optimizer then updates the whole trainable region at once (the plan
 * lays parameters, gradients and state out alike).  The scheduler's rate
 * comes from its closed form, so a resumed run needs no scheduler state.
 * Rank 0 prints, records the run and writes checkpoints; every rank
 * evaluates its share of the test set and the sums are reduced.
 * A non-finite loss stops the run naming the step and the first layer
 * whose output went bad.  Longer than 600 lines: the loop, evaluation and
 * checkpoint protocol read best together.
 */
#include "runtime/train.h"

#include "compiler/compile.h"
#include "compiler/ops.h"
#include "compiler/print.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "runtime/dataset.h"
#include "runtime/exec.h"
#include "runtime/kern.h"
#include "runtime/loader.h"
#include "runtime/optim.h"
#include "runtime/safetensors.h"
#include "runtime/sampler.h"
#include "runtime/sched.h"
#include "runtime/rundir.h"
#include "runtime/weights.h"
#include "runtime/launch.h"
#include "runtime/ckpt.h"
#include "runtime/comm.h"
#include "runtime/ddp.h"
#include "runtime/fsdp.h"
#include "runtime/pipe.h"
#include "runtime/store.h"
#include "runtime/util.h"

/* The plan was made for the samples the .net file promised (mnist: 28 x 28
 * images); files of another size would be read past or short of every
 * planned input row. */
static int check_images(const struct plan_dataset *pd, struct dataset *ds, char *err, size_t n)
{
	const struct shape *want = &pd->sample;
	bool same = ds->ndim == want->rank;
	for (int i = 0; same && i < ds->ndim; i++)
		same = ds->shape[i] == want->d[i];
	if (same)
		return 0;
	char b[96], hw[64] = "that shape";
	if (want->rank == 3)
		snprintf(hw, sizeof hw, "%lld x %lld", (long long)want->d[1], (long long)want->d[2]);
	util_fail(err, n, "%s: byte 8: the images are %lld x %lld pixels, but the model is planned for mnist()'s %s samples (%s:%d:%d); "
		  "resize the images to %s",
		  ds->images_path, (long long)ds->shape[1], (long long)ds->shape[2], shape_str(want, b, sizeof b),
		  pd->loc.src ? pd->loc.src->path : "the .net file", pd->loc.line, pd->loc.col, hw);
	dataset_close(ds);
	return -1;
}

static void loc_str(const struct loc *l, char *buf, size_t n)
{
	snprintf(buf, n, "%s:%d:%d", l->src ? l->src->path : "the .net file", l->line, l->col);
}

int train_open_npy(const struct plan *p, const struct plan_dataset *pd, struct dataset *ds, bool headers_only, int *failed, char *err,
		   size_t n)
{
	const struct node *in = &p->nodes[0], *out = &p->nodes[p->nnodes - 1];
	char in_at[4200], out_at[4200];
	loc_str(&in->loc, in_at, sizeof in_at);
	loc_str(&out->loc, out_at, sizeof out_at);
	struct npy_spec sp = { .input = pd->npy_input, .target = pd->npy_target, .input_key = pd->npy_input_key,
			       .target_key = pd->npy_target_key, .norm_mean = pd->norm_mean, .norm_std = pd->norm_std,
			       .nnorm = pd->nnorm, .to_tensor = pd->to_tensor, .ndim = pd->sample.rank,
			       .target_kind = pd->target == TGT_CLASS ? TARGET_CLASS : TARGET_VECTOR, .num_classes = (int)pd->classes,
			       .ignore_index = p->train.ignore_index, .target_ndim = pd->target_shape.rank, .ids_below = pd->input_high, .input_at = in_at,
			       .output_at = out_at, .headers_only = headers_only };
	memcpy(sp.shape, pd->sample.d, sizeof(int64_t) * (size_t)pd->sample.rank);
	memcpy(sp.target_shape, pd->target_shape.d, sizeof(int64_t) * (size_t)pd->target_shape.rank);
	int rc = dataset_npy(ds, &sp, err, n);
	if (failed)
		*failed = sp.failed;
	return rc;
}

/* The headers of an mnist() or npy() test set, checked against the plan
 * before anything waits on it being loaded, and that it has samples. */
static int peek_data(const struct plan *p, const struct plan_dataset *pd, int64_t *samples, char *err, size_t n)
{
	struct dataset ds;
	*samples = pd->samples;
	if (pd->kind == DATA_NPY) {
		if (train_open_npy(p, pd, &ds, true, NULL, err, n) != 0)
			return -1;
		*samples = ds.n;
		int rc = train_check_test_samples(ds.images_path, *samples, err, n);
		dataset_close(&ds);
		return rc;
	}
	if (pd->kind != DATA_MNIST)
		return 0;
	if (dataset_mnist_peek(&ds, pd->root, pd->split, err, n) != 0 || check_images(pd, &ds, err, n) != 0)
		return -1;
	*samples = ds.n;
	return train_check_test_samples(ds.images_path, ds.n, err, n);
}

int train_open_data(const struct plan *p, const struct plan_dataset *pd, struct dataset *ds, char *err, size_t n)
{
	if (pd->kind == DATA_MNIST)
		return dataset_mnist(ds, pd->root, pd->split, (float)pd->mean, (float)pd->std, err, n) ? -1 : check_images(pd, ds, err, n);
	if (pd->kind == DATA_NPY)
		return train_open_npy(p, pd, ds, false, NULL, err, n);
	struct synthetic_spec sp = { 0 };
	sp.samples = pd->samples;
	sp.ndim = pd->sample.rank;
	memcpy(sp.shape, pd->sample.d, sizeof(int64_t) * (size_t)sp.ndim);
	sp.target = pd->target == TGT_CLASS ? TARGET_CLASS : TARGET_VECTOR;
	sp.num_classes = (int)pd->classes;
	sp.target_ndim = pd->target_shape.rank;
	memcpy(sp.target_shape, pd->target_shape.d, sizeof(int64_t) * (size_t)sp.target_ndim);
	sp.seed = p->train.seed;
	sp.split = pd == &p->test_data; /* a test set of its own samples, not the training set's first ones */
	sp.input_high = pd->input_high;
	sp.input_uniform = pd->input_rand;
	sp.target_uniform = pd->target_rand;
	return dataset_synthetic(ds, &sp, err, n);
}

struct optim_cfg train_optim_cfg(const struct plan_optim *o)
{
	static const enum optim_kind kinds[] = { [OPT_SGD] = OPTIM_SGD, [OPT_ADAM] = OPTIM_ADAM, [OPT_ADAMW] = OPTIM_ADAMW,
						 [OPT_ADADELTA] = OPTIM_ADADELTA, [OPT_ADAGRAD] = OPTIM_ADAGRAD, [OPT_RMSPROP] = OPTIM_RMSPROP,
						 [OPT_ADAMAX] = OPTIM_ADAMAX, [OPT_RADAM] = OPTIM_RADAM };
	struct optim_cfg c = optim_cfg_default(kinds[o->kind]);
	c.lr = o->lr;
	c.weight_decay = o->weight_decay;
	c.momentum = o->momentum;
	c.dampening = o->dampening;
	c.nesterov = o->nesterov;
	c.beta1 = o->beta1;
	c.beta2 = o->beta2;
	c.amsgrad = o->amsgrad;
	c.eps = o->eps;
	c.rho = o->rho;
	c.lr_decay = o->lr_decay;
	c.initial_accumulator_value = o->initial_accumulator;
	c.alpha = o->alpha;
	c.centered = o->centered;
	return c;
}

struct sched_cfg train_sched_cfg(const struct plan_sched *s)
{
	static const enum sched_kind kinds[] = { [LRS_CONSTANT] = SCHED_CONSTANT, [LRS_STEP] = SCHED_STEP,
						 [LRS_MULTISTEP] = SCHED_MULTISTEP, [LRS_EXPONENTIAL] = SCHED_EXPONENTIAL,
						 [LRS_COSINE] = SCHED_COSINE, [LRS_CONSTANT_LR] = SCHED_CONSTANT_LR,
						 [LRS_LINEAR] = SCHED_LINEAR, [LRS_POLYNOMIAL] = SCHED_POLYNOMIAL,
						 [LRS_COSINE_RESTARTS] = SCHED_COSINE_RESTARTS, [LRS_PLATEAU] = SCHED_PLATEAU,
						 [LRS_ONE_CYCLE] = SCHED_ONE_CYCLE };
	struct sched_cfg c = sched_cfg_default(kinds[s->kind]);
	c.unit = s->per_step ? SCHED_PER_STEP : SCHED_PER_EPOCH;
	c.step_size = s->step_size;
	c.gamma = s->gamma;
	c.n_milestones = s->nmilestones < SCHED_MAX_MILESTONES ? s->nmilestones : SCHED_MAX_MILESTONES;
	memcpy(c.milestones, s->milestones, sizeof(int64_t) * (size_t)c.n_milestones);
	c.t_max = s->t_max;
	c.eta_min = s->eta_min;
	c.warmup = s->warmup;
	c.factor = s->factor;
	c.start_factor = s->start_factor;
	c.end_factor = s->end_factor;
	c.power = s->power;
	c.total_iters = s->total_iters;
	c.t_0 = s->t_0;
	c.t_mult = s->t_mult;
	c.max_lr = s->max_lr;
	c.pct_start = s->pct_start;
	c.div_factor = s->div_factor;
	c.final_div_factor = s->final_div_factor;
	c.base_momentum = s->base_momentum;
	c.max_momentum = s->max_momentum;
	c.total = s->total_steps; /* 0: the run's, which train_one_cycle fills in */
	c.anneal_linear = s->anneal_linear;
	c.three_phase = s->three_phase;
	c.cycle_momentum = s->cycle_momentum;
	c.mode_max = s->mode_max;
	c.threshold_abs = s->threshold_abs;
	c.threshold = s->threshold;
	c.min_lr = s->min_lr;
	c.eps = s->eps;
	c.patience = s->patience;
	c.cooldown = s->cooldown;
	return c;
}

int train_one_cycle(const struct plan *p, struct sched_cfg *sc, struct ckpt_state *at, const char *resume, int64_t spe, char *err,
		    size_t n)
{
	if (sc->kind != SCHED_ONE_CYCLE)
		return 0;
	const struct plan_train *tr = &p->train;
	/* the run's ticks, and the cycle's where the file gives none: the
	 * checkpoint's, as OneCycleLR's state_dict keeps its total_steps, else
	 * its epochs' (OneCycleLR(epochs=, steps_per_epoch=)), or its steps'
	 * where those are more, so a run stopped early by `steps` and resumed
	 * follows the cycle it began */
	int64_t steps = tr->steps ? tr->steps : spe * tr->epochs, span = steps > spe * tr->epochs ? steps : spe * tr->epochs;
	bool per_step = sc->unit == SCHED_PER_STEP;
	int64_t ticks = per_step ? steps : (steps + spe - 1) / spe;
	const char *unit = per_step ? "optimizer steps" : "epochs";
	bool kept = !tr->sched.total_steps && at->cycle > 0;
	sc->total = tr->sched.total_steps ? tr->sched.total_steps : kept ? at->cycle : per_step ? span : (span + spe - 1) / spe;
	if (ticks > sc->total && kept)
		return util_fail(err, n, "the one_cycle of the checkpoint in %s spans %lld %s (the run that began it), but this run takes "
				 "%lld, and OneCycleLR has no rate past its last (\"Tried to step\"); resume with train.%s = %lld or fewer, "
				 "or start a new cycle from its weights with --init",
				 resume ? resume : "--resume", (long long)sc->total, unit, (long long)ticks, tr->steps ? "steps" : "epochs",
				 (long long)(tr->steps ? (per_step ? sc->total : sc->total * spe) : (per_step ? sc->total / spe : sc->total)));
	if (ticks > sc->total)
		return util_fail(err, n, "one_cycle's total_steps is %lld, but the run takes %lld %s, and OneCycleLR has no rate past "
				 "its last (\"Tried to step\"); raise total_steps, or leave it out to span the run",
				 (long long)sc->total, (long long)ticks, unit);
	at->cycle = sc->total;
	return 0;
}

bool train_cycles_momentum(const struct sched_cfg *sc)
{
	return sc->kind == SCHED_ONE_CYCLE && sc->cycle_momentum;
}

void train_momentum_fill(const struct sched_cfg *sc, int64_t spe, double *window, int64_t period, int64_t from, int64_t end)
{
	for (int64_t k = from; k < end; k++)
		window[k % period] = sched_momentum_at(sc, sc->unit == SCHED_PER_STEP ? k : k / spe);
}

double train_lr(const struct plan *p, const struct sched_cfg *sc, const struct ckpt_state *at, int64_t epoch, int64_t step)
{
	return sc->kind == SCHED_PLATEAU ? at->plateau.lr : sched_lr(sc, p->train.optim.lr, epoch, step);
}

bool train_plateau(const struct plan *p, const struct sched_cfg *sc, struct ckpt_state *at, bool epoch_done, double test_loss,
		   double train_loss, int rank)
{
	if (sc->kind != SCHED_PLATEAU || !epoch_done || at->epoch <= at->plateau.epochs)
		return false;
	double before = at->plateau.lr;
	if (!sched_plateau_step(sc, &at->plateau, p->train.sched.monitor_train ? train_loss : test_loss))
		return false;
	if (rank == 0) {
		printf("Epoch %lld: the %s has not improved for %lld epoch%s; learning rate %.4e -> %.4e\n", (long long)at->epoch,
		       p->train.sched.monitor_train ? "training loss" : "test loss", (long long)sc->patience + 1,
		       sc->patience == 0 ? "" : "s", before, at->plateau.lr);
		fflush(stdout);
	}
	return true;
}

/* One terminal line, redrawn: epoch, a bar, samples, loss, speed. */
void train_progress(int64_t epoch, int64_t seen, int64_t total, double loss, double rate)
{
	enum { WIDTH = 30 };
	int filled = total ? (int)(WIDTH * seen / total) : WIDTH;
	char bar[WIDTH + 1];
	for (int i = 0; i < WIDTH; i++)
		bar[i] = i < filled ? '#' : '.';
	bar[WIDTH] = 0;
	printf("\rEpoch %lld [%s] %lld/%lld  loss %.4f  %.0f images/s", (long long)epoch, bar, (long long)seen, (long long)total, loss, rate);
	fflush(stdout);
}

static void scale_grads(void *ctx, float coef)
{
	struct exec *e = ctx;
	optim_scale(e->grads, e->trainable, coef);
}


struct trainer {
	const struct plan *p;
	const struct train_opts *o;
	int rank, world;
	int threads; /* each kernel's OpenMP threads */
	struct dataset train, test;
	bool has_test;
	pthread_t test_thread;
	bool test_thread_on;
	atomic_bool test_done; /* the loader has set test_rc */
	int test_rc;
	char test_err[512];
	/* an mnist() training set loads on a thread of its own while the model
	 * is set up; train holds its header (dataset_mnist_peek) until then */
	pthread_t train_thread;
	bool train_thread_on;
	struct dataset train_loaded;
	int train_rc;
	char train_err[512];
	struct exec e;
	bool exec_ok;
	int64_t start_step; /* the optimizer step the run started at (a checkpoint's) */
	struct optim_cfg oc;
	struct optim_state_view sv;
	struct sched_cfg sc;
	struct sampler s;
	struct loader l;
	bool loader_ok;
	float *xb[2], *ex;
	void *yb[2], *ey;
	struct rundir rd;
	bool rd_ok;
	struct store_client *store;
	struct comm *comm;
	struct ddp ddp;
	bool ddp_ok;
	bool sharded;        /* FSDP with FULL_SHARD or SHARD_GRAD_OP over several ranks */
	struct fsdp fsdp;
	bool fsdp_ok;
	bool use_pipe;       /* several devices per rank, or micro-batches */
	struct pipe pipe;
	bool pipe_ok;
	int micro_pipe;      /* micro-batches of the pipeline */
	bool chunked;        /* FSDP with micro-batches: the chunks in turn on this thread */
	int64_t saved_step;  /* the step of the last checkpoint written */
	bool ckpt_pending;   /* a checkpoint_every save waits for the epoch's evaluation */
	bool ckpt_speak;     /* the last checkpoint failed: this rank says why for the job */
	int64_t micro;       /* samples per micro-batch on this rank */
	int accum;           /* micro-batches per optimizer step */
	int64_t epochs;
	struct ckpt_state at; /* where training stands: epoch, micro-batches of it, steps */
	int64_t test_n;       /* test samples, known from the headers before the set loads */
	double eval_busy;     /* seconds the communicator was busy during evaluation */
	bool eval_warned;     /* a test loss that is not finite was warned of */
	double test_loss, ep_mean; /* the last evaluation's loss, the last epoch's mean training loss (every rank's) */
	double momentum_now;  /* one_cycle's momentum of the step being taken, where it cycles it (oc.momentum_table) */
	int64_t spe;          /* optimizer steps per epoch */
	double ep_loss, ep_n; /* this rank's summed per-sample loss and samples of the epoch so far
			       * (rank 0's include a resumed checkpoint's, of every rank) */
	bool tty;
	const char *stop_key; /* what err says ends every rank that says it: the key fail gives launch_worker_stop */
	char err[1024];
};

/* Say what failed: on standard error, or with a stop_key set, as this
 * rank's last word to the launcher, which says it once for the job. */
static int fail(struct trainer *t, const char *what)
{
	char text[sizeof t->err + 128];
	snprintf(text, sizeof text, "trainc: %s%s%s\n", what ? what : "", what && t->err[0] ? ": " : "", t->err);
	const char *key = train_fail_key(t->stop_key, t->err, t->world);
	if (key)
		launch_worker_stop(key, text);
	else
		fputs(text, stderr);
	t->stop_key = NULL;
	return 1;
}

static void *load_test(void *arg)
{
	struct trainer *t = arg;
	kern_unpin_this_thread(); /* not only the main thread's CPU */
	t->test_rc = train_open_data(t->p, &t->p->test_data, &t->test, t->test_err, sizeof t->test_err);
	atomic_store_explicit(&t->test_done, true, memory_order_release);
	return NULL;
}

static void *load_train(void *arg)
{
	struct trainer *t = arg;
	kern_unpin_this_thread(); /* not only the main thread's CPU */
	t->train_rc = train_open_data(t->p, &t->p->train_data, &t->train_loaded, t->train_err, sizeof t->train_err);
	return NULL;
}

/* Join the training set's loader: 0 with the whole set in t->train, or
 * TRAIN_REFUSED with its error in t->err. */
static int train_ready(struct trainer *t)
{
	if (!t->train_thread_on)
		return 0;
	pthread_join(t->train_thread, NULL);
	t->train_thread_on = false;
	if (t->train_rc != 0) {
		snprintf(t->err, sizeof t->err, "%s", t->train_err);
		return TRAIN_REFUSED;
	}
	dataset_close(&t->train); /* the header */
	t->train = t->train_loaded;
	return 0;
}

/* Join the test set's loader; its error, if any, becomes the run's. */
static int test_ready(struct trainer *t)
{
	if (t->test_thread_on) {
		pthread_join(t->test_thread, NULL);
		t->test_thread_on = false;
		if (t->test_rc != 0)
			snprintf(t->err, sizeof t->err, "%s", t->test_err);
	}
	return t->test_rc;
}

/* True when the test set's loader has failed (a file damaged past the
 * header that was checked before training): the run stops at this step
 * instead of training the whole epoch to fail at its evaluation. */
static bool test_failed(struct trainer *t)
{
	return t->test_thread_on && atomic_load_explicit(&t->test_done, memory_order_acquire) && test_ready(t) != 0;
}

/* Sums over ranks (loss, counts); a world of one returns them as they are. */
static int reduce_sums(struct trainer *t, double *v, int n)
{
	if (t->world == 1)
		return 0;
	launch_wait_begin();
	int rc = comm_wait(comm_all_reduce_f64(t->comm, v, n, COMM_SUM), t->err, sizeof t->err);
	launch_wait_end();
	return rc;
}

static int evaluate_all(struct trainer *t);

/* Evaluation's collectives (FSDP's gathers, the sums) are not training's:
 * they leave the waiting and busy times the run's last lines report. */
static int evaluate(struct trainer *t)
{
	double wait0 = t->fsdp_ok ? t->fsdp.wait_s : 0, busy0 = t->comm ? comm_busy(t->comm) : 0;
	if (t->ddp_ok) {
		/* DDP (broadcast_buffers=True) gives every rank rank 0's buffers at
		 * each forward: evaluation sees rank 0's running statistics */
		int sent = 0;
		launch_wait_begin();
		for (int d = 0; d < t->p->ndevices && sent == 0; d++)
			sent = ddp_broadcast(&t->ddp, exec_dev_buffers(&t->e, d), t->e.b_n[d], t->err, sizeof t->err);
		launch_wait_end();
		if (sent != 0)
			return -1;
	}
	int rc = evaluate_all(t);
	if (t->fsdp_ok)
		t->fsdp.wait_s = wait0;
	if (t->comm)
		t->eval_busy += comm_busy(t->comm) - busy0;
	return rc;
}

/* Each rank takes test samples rank, rank + world, ...; sums are reduced. */
static int evaluate_all(struct trainer *t)
{
	const struct plan *p = t->p;
	if (test_ready(t) != 0)
		return -1;
	int64_t b = p->eval_batch, n = t->test.n;
	int64_t *idx = malloc((size_t)b * sizeof *idx);
	if (!idx)
		return -1;
	double sums[3] = { 0, 0, 0 }; /* loss, correct, samples */
	int64_t next = t->rank, chunks = 0;
	/* sharded FSDP all-gathers in every forward: each rank runs as many as
	 * rank 0, the one with the most test samples */
	int64_t rounds = t->sharded ? ((n + t->world - 1) / t->world + b - 1) / b : 0;
	while (next < n) {
		chunks++;
		int m = 0;
		for (; m < b && next < n; m++, next += t->world)
			idx[m] = next;
		/* a short last chunk has a size of its own (setup) */
		dataset_fill(&t->test, idx, m, t->ex, t->ey);
		exec_forward(&t->e, t->ex, m, false);
		if (t->e.stop) {
			snprintf(t->err, sizeof t->err, "%s", t->fsdp.err);
			free(idx);
			return -1;
		}
		double loss;
		long c;
		if (exec_loss(&t->e, t->ey, m, false, &loss, &c, t->err, sizeof t->err) != 0) {
			free(idx);
			return -1;
		}
		/* the seed sums per-sample losses and divides by the set size */
		sums[0] += exec_reduction(p, false) == KERN_REDUCE_SUM ? loss : loss * m;
		sums[1] += (double)c;
		sums[2] += m;
	}
	if (chunks < rounds) { /* chunks of sample 0, not counted */
		for (int64_t i = 0; i < b; i++)
			idx[i] = 0;
		dataset_fill(&t->test, idx, (int)b, t->ex, t->ey);
	}
	for (; chunks < rounds; chunks++) {
		exec_forward(&t->e, t->ex, (int)b, false);
		if (t->e.stop) {
			snprintf(t->err, sizeof t->err, "%s", t->fsdp.err);
			free(idx);
			return -1;
		}
	}
	free(idx);
	if (t->fsdp_ok)
		fsdp_release_all(&t->fsdp);
	if (reduce_sums(t, sums, 3) != 0)
		return -1;
	t->test_loss = sums[0] / sums[2];
	if (t->rank != 0)
		return 0;
	train_report_eval(p, t->rd_ok ? &t->rd : NULL, &t->at, sums, &t->eval_warned);
	return 0;
}

/* Why norm nd, with eps=0, may give NaN, into buf; NULL when it cannot. */
static const char *eps0_note(const struct node *nd, bool eval, char *buf, size_t n)
{
	if (nd->op == OP_LAYERNORM && nd->a.ln.eps == 0)
		snprintf(buf, n, "%s has eps=0, so a row whose values are all equal normalises to NaN, as in PyTorch; "
			 "give it an eps above 0", nd->what);
	else if (nd->op == OP_GROUPNORM && nd->a.gn.eps == 0)
		snprintf(buf, n, "%s has eps=0, so a %s whose values are all equal normalises to NaN, as in PyTorch; give it an eps "
			 "above 0", nd->what, nd->variant != VAR_NONE ? "sample's channel" : "group of channels");
	else if (eval && (nd->op == OP_BATCHNORM1D || nd->op == OP_BATCHNORM2D) && nd->a.bn.eps == 0 && nd->a.bn.track)
		snprintf(buf, n, "%s has eps=0, so in evaluation a channel whose running_var is 0 normalises to NaN, as in "
			 "PyTorch; give it an eps above 0", nd->what);
	else
		return NULL;
	return buf;
}

const char *train_eps0_note(const struct plan *p, bool eval, char *buf, size_t n)
{
	for (int i = 0; i < p->nnodes; i++)
		if (eps0_note(&p->nodes[i], eval, buf, n))
			return buf;
	return NULL;
}

void train_report_eval(const struct plan *p, struct rundir *rd, const struct ckpt_state *at, const double sums[3], bool *warned)
{
	double avg = sums[0] / sums[2];
	/* a checkpoint taken at an epoch's end holds the next epoch's start as
	 * its position; evaluating it alone names the epoch its weights ended,
	 * as that epoch's own evaluation in the training run did */
	int64_t epoch = p->train.eval_only && at->step > 0 && at->batch == 0 && at->epoch > 1 ? at->epoch - 1 : at->epoch;
	if (rd)
		rundir_metric_eval(rd, at->step, epoch, avg, p->test_data.target == TGT_CLASS ? sums[1] / sums[2] : NAN);
	if (isnan(avg))
		avg = fabs(avg); /* "nan", as Python prints it, not "-nan" */
	if (p->test_data.target == TGT_CLASS)
		printf("\nTest set: Average loss: %.4f, Accuracy: %.0f/%.0f (%.0f%%)\n\n", avg, sums[1], sums[2], 100.0 * sums[1] / sums[2]);
	else
		printf("\nTest set: Average loss: %.4f\n\n", avg);
	fflush(stdout);
	if (!isfinite(avg) && !*warned) { /* the lines of each evaluation show it after that */
		*warned = true;
		char note[512];
		const char *why = train_eps0_note(p, true, note, sizeof note);
		fprintf(stderr, "trainc: warning: the test set's loss is %s%s%s\n", isnan(avg) ? "NaN" : "infinite", why ? "; " : "",
			why ? why : "");
	}
}

void train_report_step(struct rundir *rd, bool tty, bool log, const struct ckpt_state *at, int64_t done, int64_t total, double loss,
		       double lr, double rate)
{
	if (log && rd)
		rundir_metric_step(rd, at->step, at->epoch, loss, lr, rate);
	done = done < total ? done : total;
	if (tty) {
		train_progress(at->epoch, done, total, loss, rate);
	} else if (log) {
		printf("Train Epoch: %lld [%lld/%lld (%.0f%%)]\tLoss: %.6f\n", (long long)at->epoch, (long long)done, (long long)total,
		       100.0 * (double)done / (double)total, loss);
		fflush(stdout);
	}
}

void train_progress_break(bool tty)
{
	if (tty) {
		fputs("\r\033[K", stdout);
		fflush(stdout);
	}
}

void train_report_epoch(struct rundir *rd, bool tty, const struct ckpt_state *at, const double sums[2], double rate)
{
	double avg = sums[1] ? sums[0] / sums[1] : 0.0;
	train_progress_break(tty);
	printf("Train Epoch: %lld\tAverage loss: %.6f\t%.0f images/s\n", (long long)at->epoch, avg, rate);
	if (rd)
		rundir_metric_epoch(rd, at->step, at->epoch, avg, rate);
}

int train_next_turn(struct comm *c, char *err, size_t errlen)
{
	launch_wait_begin();
	int rc = comm_barrier(c, err, errlen);
	launch_wait_end();
	return rc;
}

void train_report_spent(const struct plan *p)
{
	printf("Nothing to train: train.steps is %lld; raise it (--set train.steps=N) to go on, or evaluate the weights with "
	       "--set train.steps=0\n", (long long)p->train.steps);
}

void train_report_eval_only(const struct plan *p, const struct train_opts *o, int world, bool has_test)
{
	char c1[32];
	printf("%s: %s parameters, %d rank%s; train.steps = 0: nothing is trained, ", p->model_name,
	       print_count(p->total_params, c1, sizeof c1), world, world == 1 ? "" : "s");
	if (o->resume)
		printf("the weights of the checkpoint in %s", o->resume);
	else if (o->init)
		printf("the weights of %s", o->init);
	else
		printf("the initial weights (train.seed = %llu)", (unsigned long long)p->train.seed);
	printf(" %s\n", has_test ? "are evaluated as given" : "are kept as given: there is no test set to evaluate them on (data { test = ... })");
	fflush(stdout);
}

bool train_epochs_done(const struct plan *p, const struct ckpt_state *at, int64_t epochs, int rank)
{
	if (at->epoch <= epochs)
		return false;
	if (rank == 0)
		printf("Nothing to train: the run is past epoch %lld and train.epochs is %lld; raise it (--set train.epochs=N) to go on, or "
		       "evaluate the weights with --set train.steps=0\n",
		       (long long)at->epoch - 1, (long long)p->train.epochs);
	return true;
}

const char *train_batch_words(char *buf, size_t n, int64_t micro, int accum)
{
	if (accum > 1)
		snprintf(buf, n, "batch %lld per rank in %d micro-batches of %lld", (long long)micro * accum, accum, (long long)micro);
	else
		snprintf(buf, n, "batch %lld per rank", (long long)micro);
	return buf;
}

bool train_is_weights_file(const char *path)
{
	size_t n = strlen(path);
	return (n > 12 && strcasecmp(path + n - 12, ".safetensors") == 0) || weights_torch_name(path);
}

/* Whether every batch norm sees more than one value per channel at the
 * forward sizes: up to ntrain training sizes (sizes[0] a training batch's),
 * the rest evaluation's (which matter only without running statistics).
 * 0, or -1 with a message naming the layer's place in the .net file. */
static int check_bn_sizes(const struct plan *p, const int64_t *sizes, int ntrain, int nsizes, char *err, size_t errlen)
{
	for (int i = 0; i < p->nnodes; i++) {
		const struct node *nd = &p->nodes[i];
		if ((nd->op != OP_BATCHNORM1D && nd->op != OP_BATCHNORM2D) || shape_numel(&nd->out) != nd->a.bn.c)
			continue; /* more than one value per channel in each sample */
		/* batchnorm1d's (C,) input is the common case: an MLP's batch of 1 */
		char shape[96], each[128];
		if (nd->op == OP_BATCHNORM1D)
			snprintf(each, sizeof each, "%s, one value a channel,", shape_str(&nd->out, shape, sizeof shape));
		else
			snprintf(each, sizeof each, "1 x 1 a channel");
		/* evaluation runs in chunks of test_batch, or of what the
		 * memory planned for training holds where that is less */
		char test[160], fix[160];
		if (p->eval_batch < p->train.test_batch) {
			snprintf(test, sizeof test, "the last evaluation chunk (of %lld test samples each: the memory planned for evaluation holds no more)",
				 (long long)p->eval_batch);
			snprintf(fix, sizeof fix, "set train.test_batch to %lld or less, so that the last test batch holds 2 or more",
				 (long long)p->eval_batch);
		} else {
			snprintf(test, sizeof test, "the last test batch");
			snprintf(fix, sizeof fix, "set train.test_batch so that the last test batch holds 2 or more");
		}
		for (int k = 0; k < nsizes; k++) {
			bool train = k < ntrain;
			if (sizes[k] != 1 || (!train && nd->a.bn.track))
				continue;
			return util_fail(err, errlen,
					 "%s:%d:%d: %s would normalise over one value per channel: its input is %s "
					 "and %s holds 1 sample (PyTorch refuses this too: more than 1 value per channel is needed); %s",
					 nd->loc.src ? nd->loc.src->path : "the .net file", nd->loc.line, nd->loc.col, op_name(nd), each,
					 train ? (k == 0 ? "a training batch (or pipeline micro-batch)" : "the epoch's last training batch (or one of its pipeline micro-batches)") : test,
					 train ? (k == 0 ? "use a batch of at least 2" : "set train.drop_last = true, or a batch that leaves 2 or more")
					       : fix);
		}
	}
	return 0;
}

int train_batches(const struct plan *p, int world, int rank, int64_t train_n, int64_t test_n, struct train_batches *b, char *err,
		  size_t errlen)
{
	const struct plan_train *tr = &p->train;
	/* a training run's share is whole micro-batches; an evaluation's
	 * uneven one (train.steps = 0) counts its last, short one too */
	int64_t share = compile_rank_batch(tr, world, &b->micro);
	b->accum = (int)((share + b->micro - 1) / b->micro);
	b->chunks = p->parallel.microbatches > 1 ? (int)p->parallel.microbatches : 1;
	/* in the dataset's order: the sizes are any order's, and nothing is allocated */
	struct sampler s;
	if (sampler_init(&s, train_n, world, rank, (int)b->micro, 0, 0, tr->drop_last, 0, err, errlen) != 0)
		return -1;
	b->num_batches = s.num_batches;
	if (s.num_batches == 0 && !tr->eval_only)
		return util_fail(err, errlen, "rank %d's %lld training samples make no batch of %lld with drop_last; lower the batch or set "
				 "drop_last = false", rank, (long long)s.num_samples, (long long)b->micro);
	int64_t B = b->micro, last = sampler_batch_len(&s, s.num_batches - 1);
	int64_t chunk = (B + b->chunks - 1) / b->chunks, lchunk = (last + b->chunks - 1) / b->chunks;
	/* this rank's last test chunk runs at its own size: padding it would
	 * change batch statistics (batchnorm without running statistics) */
	int64_t mine = test_n > rank ? (test_n - rank + world - 1) / world : 0;
	int64_t sizes[TRAIN_NSIZES] = { chunk, B - chunk * ((B + chunk - 1) / chunk - 1), lchunk,
					last - lchunk * ((last + lchunk - 1) / lchunk - 1), p->eval_batch,
					mine % p->eval_batch ? mine % p->eval_batch : p->eval_batch };
	memcpy(b->sizes, sizes, sizeof sizes);
	bool has_test = p->test_data.kind != DATA_NONE;
	/* train.steps = 0 runs no training batch: only the test's sizes count */
	if (tr->eval_only)
		return check_bn_sizes(p, b->sizes + 4, 0, has_test ? 2 : 0, err, errlen);
	return check_bn_sizes(p, b->sizes, 4, has_test ? TRAIN_NSIZES : 4, err, errlen);
}

int train_check_batches(const struct plan *p, int world, int64_t train_n, int64_t test_n, char *err, size_t errlen)
{
	struct train_batches b;
	for (int r = 0; r < world; r++)
		if (train_batches(p, world, r, train_n, test_n, &b, err, errlen) != 0)
			return -1;
	return 0;
}

int train_check_samples(const struct dataset *ds, int world, char *err, size_t errlen)
{
	char where[4410] = "";
	if (ds->kind != DATASET_SYNTHETIC)
		snprintf(where, sizeof where, "%s: ", ds->images_path);
	if (ds->n == 0)
		return util_fail(err, errlen, "%sthe training set has no samples", where);
	if (ds->n < world)
		return util_fail(err, errlen, "%s%lld training samples cannot feed %d ranks; lower --cpus or --gpus", where, (long long)ds->n,
				 world);
	return 0;
}

int train_check_test_samples(const char *path, int64_t n, char *err, size_t errlen)
{
	if (n > 0)
		return 0;
	return util_fail(err, errlen, "%s%sthe test set has no samples; give it some, or leave data.test out", path ? path : "",
			 path ? ": " : "");
}

int train_agree_plan(struct store_client *st, const struct plan *p, int rank, int world, int *sharers, char *err, size_t errlen)
{
	double timeout = p->parallel.timeout_s;
	enum { HASH_LEN = 16 };
	char key[64], mine[HASH_LEN + 1 + 320];
	snprintf(key, sizeof key, "plan/%d", rank);
	snprintf(mine, sizeof mine, "%016llx ", (unsigned long long)p->hash);
	kern_cpus_name(mine + HASH_LEN + 1, sizeof mine - HASH_LEN - 1);
	if (store_set(st, key, mine, strlen(mine), err, errlen) != 0)
		return -1;
	*sharers = 0;
	for (int r = 0; r < world; r++) {
		snprintf(key, sizeof key, "plan/%d", r);
		size_t len;
		char *theirs = store_get(st, key, &len, timeout, err, errlen);
		if (!theirs)
			return -1;
		bool same = len > HASH_LEN && memcmp(theirs, mine, HASH_LEN) == 0;
		if (!same) {
			snprintf(err, errlen,
				 "rank %d compiled a different plan (%.*s) than rank %d (%.*s); every rank must run the same .net file and options",
				 r, len < HASH_LEN ? (int)len : HASH_LEN, theirs, rank, HASH_LEN, mine);
			free(theirs);
			return -1;
		}
		*sharers += len == strlen(mine) && memcmp(theirs, mine, len) == 0;
		free(theirs);
	}
	return 0;
}

int train_resume_world(const struct plan *p, const char *resume, const char *flag, const struct ckpt_state *at, int world,
		       int64_t micro, char *err, size_t errlen)
{
	/* the data order is the same at any world size only for a global
	 * batch; train.steps = 0 reads no training batch, in any order */
	int64_t samples = at->batch * at->micro * at->world;
	if (at->world != world && !p->train.eval_only &&
	    (!p->train.global_batch || (micro > 0 && samples % (micro * world) != 0)))
		return util_fail(err, errlen,
				 "%s was made by %d rank%s, this run has %d; with a per-rank batch the data order depends on the "
				 "rank count, so resume with %s %d, use global_batch, or start from its weights with --init",
				 resume, at->world, at->world == 1 ? "" : "s", world, flag, at->world);
	return 0;
}

int train_resume_at(const struct plan *p, const char *resume, const char *flag, struct ckpt_state *at, int world, int64_t micro,
		    int64_t num_batches, int rank, char *err, size_t errlen)
{
	if (train_resume_world(p, resume, flag, at, world, micro, err, errlen) != 0)
		return -1;
	if (p->train.eval_only && at->world != world) {
		/* no batch of this run's is read, and the checkpoint's batches
		 * need not map onto its: the position stays the checkpoint's,
		 * where it names the evaluation's step and epoch (an epoch's
		 * end is its last batch there, so that epoch is named) */
		if (rank == 0)
			printf("Resumed from %s at step %lld (epoch %lld, batch %lld of its %d rank%s)\n", resume, (long long)at->step,
			       (long long)at->epoch, (long long)at->batch, at->world, at->world == 1 ? "" : "s");
		return 0;
	}
	int64_t saved = at->batch;
	if (at->world != world)
		at->batch = at->batch * at->micro * at->world / (micro * world);
	/* an epoch's end is its last batch; past it is no position a run saves */
	if (at->batch > num_batches)
		return util_fail(err, errlen, "%s: the state.json of the checkpoint 'latest' names says \"batch\": %lld, past the end of "
				 "an epoch (%lld batches at this run's %d rank%s); the checkpoint is damaged", resume, (long long)saved,
				 (long long)num_batches, world, world == 1 ? "" : "s");
	at->world = world;
	at->micro = micro;
	if (at->batch == num_batches) { /* saved at an epoch's end */
		at->epoch++;
		at->batch = 0;
		at->loss_sum = at->loss_n = 0;
	}
	if (rank == 0)
		printf("Resumed from %s at step %lld (epoch %lld, batch %lld)\n", resume, (long long)at->step, (long long)at->epoch,
		       (long long)at->batch);
	return 0;
}

const char *train_fail_key(const char *key, const char *err, int world)
{
	if (key)
		return key;
	return world > 1 && strstr(err, COMM_HINT_PEER) ? "peer" : NULL;
}

int train_setup_failed(int rc, int world, const char **stop_key)
{
	if (rc != TRAIN_REFUSED)
		return 1;
	if (world > 1)
		*stop_key = "refused"; /* every rank that refuses says so: the launcher says it once */
	return util_refusal();
}

int train_load_given(const struct plan *p, const struct train_opts *o, const char *flag, int world, int64_t micro, struct sampler *s,
		     float *params, float *optim, int64_t trainable, struct ckpt_state *at, char *err, size_t errlen)
{
	int rc = 0;
	if (o->resume) {
		rc = ckpt_load(o->resume, p, o->rank, params, optim, trainable, p->train.optim.state_per_param, at, err, errlen);
		if (at->philox_order)
			sampler_keep_philox(s, p->train.seed);
		if (rc == 0)
			rc = train_resume_at(p, o->resume, flag, at, world, micro, s->num_batches, o->rank, err, errlen);
	} else if (o->init) {
		rc = weights_load(p, params, o->init, true, err, errlen);
		if (rc == 0 && o->rank == 0)
			printf("Initialised from %s\n", o->init);
	}
	return rc == 0 ? 0 : TRAIN_REFUSED;
}

/* The unsharded parameters (and optimizer state) on rank 0: the executor's
 * own regions, or with FSDP gathered into buffers the caller frees with
 * free_full.  Every rank calls it; only rank 0's pointers are valid. */
static int full_state(struct trainer *t, float **params, float **optim, bool with_optim)
{
	if (!t->sharded) {
		*params = t->e.params;
		*optim = t->e.optim;
		return 0;
	}
	*params = *optim = NULL;
	if (t->rank == 0) {
		*params = calloc((size_t)t->p->unsharded_elems + 1, 4);
		*optim = calloc((size_t)(t->e.trainable * t->p->train.optim.state_per_param) + 1, 4);
		if (!*params || !*optim) {
			snprintf(t->err, sizeof t->err, "out of memory gathering the full state dict");
			return -1;
		}
	}
	if (fsdp_gather_full(&t->fsdp, *params, *optim, with_optim) != 0) {
		snprintf(t->err, sizeof t->err, "%s", t->fsdp.err);
		return -1;
	}
	return 0;
}

static void free_full(struct trainer *t, float *params, float *optim)
{
	if (t->sharded) {
		free(params);
		free(optim);
	}
}


static float *buffer_at(void *ctx, int k)
{
	return exec_param_ptr(ctx, k);
}

static int sum_ranks(void *ctx, double *v, int n)
{
	return reduce_sums(ctx, v, n);
}

/* Whether every rank's part of a checkpoint went well: 0, TRAIN_CKPT_IO
 * when some rank's write failed (all ranks together, so training can go
 * on; one of them says why), -1 when the ranks could not even agree. */
static int ckpt_agree(struct trainer *t, int rc, bool shards)
{
	return train_ckpt_agree(rc, t->rank, t->world, shards, sum_ranks, t, &t->ckpt_speak, t->err, sizeof t->err);
}

int train_ckpt_save(const char *dir, const struct plan *p, const float *params, const float *optim, int64_t trainable,
		    const struct ckpt_state *at, bool tty, char *err, size_t errlen)
{
	launch_beat(); /* a long save is not a hang */
	int rc = ckpt_save(dir, p, params, optim, trainable, p->train.optim.state_per_param, at, err, errlen);
	launch_beat();
	if (rc == 0) {
		train_progress_break(tty);
		printf("Checkpoint: step %lld saved to %s\n", (long long)at->step, dir);
		fflush(stdout);
	}
	return rc;
}

int train_ckpt_agree(int rc, int rank, int world, bool shards, int (*sum)(void *ctx, double *v, int n), void *ctx, bool *speak,
		     char *err, size_t errlen)
{
	double *v = calloc((size_t)world, sizeof *v);
	bool *in = calloc((size_t)world, sizeof *in);
	int count = 0, first = -1;
	if (!v || !in) {
		free(v);
		free(in);
		return util_fail(err, errlen, "out of memory agreeing on the checkpoint");
	}
	v[rank] = rc != 0;
	if (sum(ctx, v, world) != 0) {
		free(v);
		free(in);
		return -1;
	}
	for (int r = 0; r < world; r++) {
		in[r] = v[r] != 0;
		count += in[r];
		first = first < 0 && in[r] ? r : first;
	}
	*speak = rank == first;
	if (*speak && shards && count < world) {
		char mine[1024], ranks[256];
		snprintf(mine, sizeof mine, "%s", err);
		util_ranks(in, world, ranks, sizeof ranks);
		if (count == 1)
			snprintf(err, errlen, "%s could not write its shard: %s", ranks, mine);
		else
			snprintf(err, errlen, "%s could not write their shards; rank %d's: %s", ranks, first, mine);
	}
	free(v);
	free(in);
	return count ? TRAIN_CKPT_IO : 0;
}

/* FSDP: every rank writes its shard, rank 0 commits the folder. */
static int sharded_checkpoint(struct trainer *t, const char *dir)
{
	t->at.micro = t->micro;
	int rc = t->rank == 0 ? ckpt_shard_begin(dir, t->at.step, t->err, sizeof t->err) : 0;
	if ((rc = ckpt_agree(t, rc, false)) != 0)
		return rc;
	rc = ckpt_shard_write(dir, t->p, t->at.step, t->rank, t->world, t->fsdp.shard, t->fsdp.optim, t->fsdp.total, t->fsdp.at,
			      buffer_at, &t->e, t->err, sizeof t->err);
	if ((rc = ckpt_agree(t, rc, true)) != 0) {
		if (rc == TRAIN_CKPT_IO && t->rank == 0)
			ckpt_shard_abort(dir, t->at.step);
		return rc;
	}
	if (t->rank == 0) {
		rc = ckpt_shard_commit(dir, t->p, &t->at, t->err, sizeof t->err);
		if (rc == 0) {
			train_progress_break(t->tty);
			printf("Checkpoint: step %lld saved to %s (%d shards)\n", (long long)t->at.step, dir, t->world);
			fflush(stdout);
		} else {
			ckpt_shard_abort(dir, t->at.step);
		}
	}
	return ckpt_agree(t, rc, false);
}

/* Rank 0 writes, every rank waits at the barrier: the seed's protocol.
 * Without FSDP the state is whole on every rank; with it, each rank writes
 * its own shard (sharded_checkpoint).  0, TRAIN_CKPT_IO (on every rank) when it
 * could not be written, -1 when the ranks failed. */
static int checkpoint(struct trainer *t, const char *dir)
{
	if (t->saved_step == t->at.step && t->at.step > 0)
		return 0; /* checkpoint_every just wrote this step */
	double v[2] = { t->ep_loss, t->ep_n }; /* so that a resumed epoch's average is the whole epoch's */
	if (reduce_sums(t, v, 2) != 0)
		return -1;
	t->at.loss_sum = v[0];
	t->at.loss_n = v[1];
	int rc;
	if (t->sharded) {
		rc = sharded_checkpoint(t, dir);
	} else {
		float *params, *optim;
		rc = full_state(t, &params, &optim, true);
		t->at.micro = t->micro;
		if (rc == 0 && t->rank == 0)
			rc = train_ckpt_save(dir, t->p, params, optim, t->e.trainable, &t->at, t->tty, t->err, sizeof t->err);
		free_full(t, params, optim);
		rc = ckpt_agree(t, rc, false);
	}
	if (rc == 0)
		t->saved_step = t->at.step;
	return rc;
}

/* A checkpoint_every save that could not be written: said, and training
 * goes on (the run directory gets the weights at the end). */
static void checkpoint_missed(struct trainer *t)
{
	if (t->ckpt_speak) {
		train_progress_break(t->tty);
		fprintf(stderr, "trainc: warning: the checkpoint of step %lld was not saved: %s; training goes on\n", (long long)t->at.step,
			t->err);
	}
	t->err[0] = 0;
}

/* Communicator, plan check and DDP for a world above one. */
static int join_job(struct trainer *t)
{
	double timeout = t->p->parallel.timeout_s;
	char e[512], hostbuf[256];
	if (!(t->store = launch_store(timeout, e, sizeof e))) {
		snprintf(t->err, sizeof t->err, "rank %d: %s", t->rank, e);
		return -1;
	}
	store_client_set_timeout(t->store, timeout);
	/* every rank must have compiled the same plan */
	int sharers;
	if (train_agree_plan(t->store, t->p, t->rank, t->world, &sharers, t->err, sizeof t->err) != 0)
		return -1;
	/* nodes of one job on one machine (or on CPUs a container shares)
	 * divide its CPUs between all their ranks, not each node's alone */
	if (t->o->threads <= 0 && sharers > launch_local_world(t->world)) {
		int threads = kern_cpus() / sharers;
		t->threads = threads > 0 ? threads : 1;
		kern_set_threads(t->threads);
	}
	/* collectives wait twice the job timeout: the launcher names a hung rank first */
	const char *host;
	if (launch_comm_host(&host, hostbuf, sizeof hostbuf, e, sizeof e) != 0) {
		snprintf(t->err, sizeof t->err, "rank %d: %s", t->rank, e);
		return -1;
	}
	t->comm = comm_open_gloo(t->store, t->rank, t->world, host, 2 * timeout, t->err, sizeof t->err);
	if (!t->comm)
		return -1;
	if (t->sharded) {
		if (fsdp_init(&t->fsdp, t->p, t->comm, &t->e, NULL, t->err, sizeof t->err) != 0)
			return -1;
		/* as DDP: averaged gradients, summed for a global batch of a sum loss */
		t->fsdp.op = t->p->train.global_batch && t->p->train.reduction == RED_SUM ? COMM_SUM : COMM_AVG;
		t->fsdp_ok = true;
		return 0;
	}
	enum comm_op op = t->p->train.global_batch && t->p->train.reduction == RED_SUM ? COMM_SUM : COMM_AVG;
	if (ddp_init(&t->ddp, t->p, t->comm, t->e.grads, op, t->err, sizeof t->err) != 0)
		return -1;
	t->ddp_ok = true;
	t->e.after_backward = ddp_after_backward;
	t->e.hook_ctx = &t->ddp;
	return 0;
}

/* Initial parameters and optimizer state: PyTorch's initialisation, a
 * weights file (--init) or a checkpoint (--resume), unsharded or sharded:
 * 0, -1, or TRAIN_REFUSED for a file that does not fit. */
static int load_state(struct trainer *t)
{
	const struct plan *p = t->p;
	const struct train_opts *o = t->o;
	int k = p->train.optim.state_per_param;
	float *params = t->e.params, *optim = t->e.optim;
	if (t->sharded && (o->resume || o->init)) {
		params = calloc((size_t)p->unsharded_elems + 1, 4);
		optim = calloc((size_t)(t->e.trainable * k) + 1, 4);
		if (!params || !optim) {
			snprintf(t->err, sizeof t->err, "out of memory loading the state");
			free(params);
			free(optim);
			return -1;
		}
	}
	if (t->sharded) {
		if (fsdp_init_params(&t->fsdp, p->train.seed) != 0) {
			snprintf(t->err, sizeof t->err, "%s", t->fsdp.err);
			return -1;
		}
		struct optim_state_view sv = { t->fsdp.optim, t->fsdp.total };
		optim_state_init(&t->oc, sv, t->fsdp.total);
	} else {
		exec_init_params(&t->e, p->train.seed);
		t->sv = (struct optim_state_view){ t->e.optim, t->e.trainable };
		optim_state_init(&t->oc, t->sv, t->e.trainable);
	}
	int rc = train_load_given(p, o, "--cpus", t->world, t->micro, &t->s, params, optim, t->e.trainable, &t->at, t->err, sizeof t->err);
	t->start_step = t->at.step;
	if (o->resume) { /* the epoch's sums so far, of every rank, count once: on rank 0 */
		t->ep_loss = t->rank == 0 ? t->at.loss_sum : 0;
		t->ep_n = t->rank == 0 ? t->at.loss_n : 0;
	}
	if (rc == 0 && t->sharded && (o->resume || o->init) && fsdp_load_full(&t->fsdp, params, o->resume ? optim : NULL) != 0) {
		snprintf(t->err, sizeof t->err, "%s", t->fsdp.err);
		rc = -1;
	}
	if (t->sharded && (o->resume || o->init)) {
		free(params);
		free(optim);
	}
	return rc;
}

/* Everything before the first step: 0, -1, or TRAIN_REFUSED where what the
 * user gave does not fit (the data, the checkpoint or weights, the run
 * directory), with the message in t->err. */
static int setup(struct trainer *t)
{
	const struct plan *p = t->p;
	const struct train_opts *o = t->o;
	/* rank 0's run.json asks git about the .net files meanwhile */
	if (t->rank == 0)
		rundir_git_begin(p);
	/* the ranks on this machine share its CPUs (a job over several
	 * machines has a part of its ranks on each; join_job counts nodes
	 * that share this machine) */
	int threads = o->threads > 0 ? o->threads : kern_cpus() / launch_local_world(t->world);
	t->threads = threads > 0 ? threads : 1;
	kern_set_threads(t->threads);
	/* one process with every CPU and no threads of its own to come (pipeline
	 * stages would inherit the main thread's CPU) */
	if (t->world == 1 && p->ndevices == 1 && p->parallel.microbatches <= 1)
		kern_pin_threads(t->threads);
	/* an mnist() training set is checked by its headers now and loaded
	 * (decompressed, or its cached copy checked) while the model is set up */
	if (p->train_data.kind == DATA_MNIST) {
		if (dataset_mnist_peek(&t->train, p->train_data.root, p->train_data.split, t->err, sizeof t->err) != 0 ||
		    check_images(&p->train_data, &t->train, t->err, sizeof t->err) != 0)
			return TRAIN_REFUSED;
		if (pthread_create(&t->train_thread, NULL, load_train, t) != 0) {
			snprintf(t->err, sizeof t->err, "cannot start the thread that loads the training set");
			return -1;
		}
		t->train_thread_on = true;
	} else if (train_open_data(p, &p->train_data, &t->train, t->err, sizeof t->err) != 0) {
		return TRAIN_REFUSED;
	}
	t->has_test = p->test_data.kind != DATA_NONE;
	/* the test set loads in the background: the first step need not wait
	 * for it, but wrong or missing files stop the run before it trains */
	if (t->has_test && peek_data(p, &p->test_data, &t->test_n, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	if (t->has_test && pthread_create(&t->test_thread, NULL, load_test, t) != 0) {
		snprintf(t->err, sizeof t->err, "cannot start the thread that loads the test set");
		return -1;
	}
	t->test_thread_on = t->has_test;
	const struct plan_train *tr = &p->train;
	/* train.steps = 0 reads no training batch: any rank count evaluates */
	if (train_check_samples(&t->train, p->train.eval_only ? 1 : t->world, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	/* every batch size convolutions will see: the training batch (or its
	 * micro-batches), the epoch's last batch (chunked alike), the test batches */
	struct train_batches bt;
	if (train_batches(p, t->world, t->rank, t->train.n, t->test_n, &bt, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	t->micro = bt.micro;
	t->accum = bt.accum;
	int64_t B = t->micro;
	if (sampler_init(&t->s, t->train.n, t->world, t->rank, (int)B, tr->shuffle, 0, tr->drop_last, tr->shuffle_seed, t->err, sizeof t->err) != 0)
		return -1;
	/* FSDP's hooks run on the executor's thread: with several devices a
	 * sharded rank runs its devices in turn, not as a threaded pipeline */
	bool sharding = p->parallel.mode == PAR_FSDP && p->parallel.shard != SHARD_NONE && t->world > 1;
	t->use_pipe = (p->parallel.microbatches > 1 || p->ndevices > 1) && !sharding;
	/* FSDP's hooks run on this thread: its micro-batches run in turn, each
	 * chunk's reduce-scatters before the next chunk's backward */
	t->chunked = p->parallel.microbatches > 1 && sharding;
	t->micro_pipe = bt.chunks;
	int copies = t->use_pipe ? t->micro_pipe : 1;
	t->sharded = p->parallel.mode == PAR_FSDP && p->parallel.shard != SHARD_NONE && t->world > 1;
	t->exec_ok = true; /* exec_free releases a partial exec_init too */
	int made = exec_init(&t->e, p, bt.sizes, TRAIN_NSIZES, t->sharded, copies, t->err, sizeof t->err);
	if (made != 0)
		return made == EXEC_REFUSED ? TRAIN_REFUSED : -1;
	t->e.seed = tr->seed;
	t->e.rank = (uint32_t)t->rank; /* dropout masks differ per step and per rank */
	t->oc = train_optim_cfg(&tr->optim);
	t->sc = train_sched_cfg(&tr->sched);
	t->at = (struct ckpt_state){ .epoch = 1, .world = t->world, .micro = t->micro, .plateau = sched_plateau_start(&t->sc, tr->optim.lr) };
	if (t->world > 1) {
		launch_wait_begin(); /* meeting the other ranks: a rank stopped meanwhile is the hung one */
		int joined = join_job(t);
		launch_wait_end();
		if (joined != 0)
			return -1;
	}
	int loaded = load_state(t);
	if (loaded != 0)
		return loaded;
	if (t->ddp_ok) { /* rank 0's parameters and buffers everywhere, as DDP's constructor does */
		launch_wait_begin();
		int sent = ddp_broadcast(&t->ddp, t->e.params, p->unsharded_elems, t->err, sizeof t->err);
		launch_wait_end();
		if (sent != 0)
			return -1;
	}
	if (t->use_pipe) {
		if (pipe_init(&t->pipe, &t->e, t->threads, t->err, sizeof t->err) != 0)
			return -1;
		t->pipe_ok = true;
		t->e.after_backward = NULL; /* buckets start after the last micro-batch, in ddp_finish */
	}
	/* the training set, whole, before a run record is made */
	int ready = train_ready(t);
	if (ready != 0)
		return ready;
	if (t->rank == 0) {
		if (rundir_create(&t->rd, o->run_dir, p, o->version, o->argc, o->argv, t->threads, t->err, sizeof t->err) != 0)
			return TRAIN_REFUSED; /* one that cannot be made where it is, or written (a full disk: 1) */
		t->rd_ok = true;
	}
	int64_t xmax = B * t->train.sample_numel;
	size_t ymax = dataset_target_bytes(&t->train, (int)B);
	for (int k = 0; k < 2; k++) {
		t->xb[k] = malloc((size_t)xmax * 4);
		t->yb[k] = malloc(ymax);
	}
	int64_t EB = p->eval_batch;
	const struct plan_dataset *td = &p->test_data;
	t->ex = malloc((size_t)EB * (size_t)shape_numel(&td->sample) * 4 + 64);
	t->ey = malloc((size_t)EB * (td->target == TGT_CLASS ? 4 : (size_t)shape_numel(&td->target_shape) * 4) + 64);
	if (!t->xb[0] || !t->xb[1] || !t->yb[0] || !t->yb[1] || !t->ex || !t->ey) {
		snprintf(t->err, sizeof t->err, "out of memory for batch buffers");
		return -1;
	}
	t->epochs = tr->epochs;
	int64_t steps_per_epoch = (t->s.num_batches + t->accum - 1) / t->accum;
	if (tr->steps)
		t->epochs = (tr->steps + steps_per_epoch - 1) / steps_per_epoch;
	t->spe = steps_per_epoch;
	if (train_one_cycle(p, &t->sc, &t->at, o->resume, steps_per_epoch, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	if (train_cycles_momentum(&t->sc)) { /* a window of one step, the one optim_step takes: filled before it */
		t->oc.momentum_table = &t->momentum_now;
		t->oc.momentum_period = 1;
	}
	struct sampler_pos start = { t->at.epoch - 1, t->at.batch };
	double wait_ms = p->parallel.timeout_s * 1000 < 2e9 ? p->parallel.timeout_s * 1000 : 2e9;
	/* train.steps = 0 reads no training batch */
	if (!tr->eval_only && loader_start(&t->l, &t->train, &t->s, t->xb, t->yb, start, t->epochs, (int)wait_ms, t->err,
					   sizeof t->err) != 0)
		return -1;
	t->loader_ok = !tr->eval_only;
	t->tty = t->rank == 0 && (isatty(STDOUT_FILENO) || getenv("TRAINC_TTY")) && !getenv("TRAINC_PLAIN");
	return 0;
}

int64_t train_zero_weight(const struct plan_train *tr)
{
	for (int64_t c = 0; tr->class_weights && c < tr->nclass_weights; c++)
		if (tr->class_weights[c] == 0)
			return c;
	return -1;
}

/* Whether one of the k pieces (first[i], size[i]) of a batch of class
 * targets y has every target at the loss's ignore_index (or of a class
 * weighing 0): its mean loss is over no target, NaN, as PyTorch's. */
static bool mean_of_none(const struct plan *p, const void *y, const int *first, const int *size, int k)
{
	const struct plan_train *tr = &p->train;
	if (tr->reduction != RED_MEAN || (tr->loss != LOSS_NLL && tr->loss != LOSS_CROSS_ENTROPY))
		return false;
	for (int j = 0; j < k; j++) {
		const int32_t *c = (const int32_t *)y + first[j];
		int i = 0;
		while (i < size[j] && (c[i] == tr->ignore_index || (tr->class_weights && tr->class_weights[c[i]] == 0)))
			i++;
		if (i == size[j])
			return true;
	}
	return false;
}

/* A non-finite loss stops the run: its report, naming the first layer
 * whose output went bad (x, the batch of b samples, shows which), into
 * err for fail to say; -1.  none: the batch (or a micro-batch of it) has
 * no target that counts. */
static int stop_nonfinite(struct trainer *t, double loss, const float *x, int b, bool none)
{
	int param = -1, bad = x && !none ? exec_find_nonfinite(&t->e, x, b, &param) : -1;
	char note[512], where[256] = "";
	bool bce = t->p->train.loss == LOSS_BCE;
	/* kl_div's first training sample with a target below 0, looked for once */
	int64_t neg = t->p->train.loss == LOSS_KL_DIV && !t->p->train.loss_param ? dataset_negative_target(&t->train) : -1;
	bool kl = neg >= 0;
	if (none) {
		long ig = (long)t->p->train.ignore_index;
		snprintf(where, sizeof where, "; every target of the %s is the loss's ignore_index (%ld)%s, and a mean over no target is "
			 "NaN, as in PyTorch", t->use_pipe || t->chunked || t->accum > 1 ? "micro-batch" : "batch", ig,
			 train_zero_weight(&t->p->train) >= 0 ? " or a class of weight 0" : "");
		snprintf(note, sizeof note, "shuffle the data (shuffle = true) or use a larger batch so each %s has a target "
			 "that counts, or give the loss reduction=\"sum\"", t->use_pipe || t->chunked || t->accum > 1 ? "micro-batch" : "batch");
	} else if (bad >= 0)
		snprintf(where, sizeof where, "; the first non-finite output is %s's", t->p->nodes[bad].what);
	else if (x && bce) /* its logs are clamped, so only a log of a value outside [0, 1] goes bad */
		snprintf(where, sizeof where, "; every layer's output is finite, so one of the model's outputs is outside [0, 1], "
			 "where bce's logarithms are NaN");
	else if (x && kl) /* finite log-probabilities: only the log of a target below 0 goes bad */
		snprintf(where, sizeof where, "; every layer's output is finite, so a target is below 0 (training sample %lld's is), "
			 "whose logarithm in kl_div is NaN", (long long)neg);
	else if (x)
		snprintf(where, sizeof where, "; every layer's output is finite, so the loss itself overflowed");
	/* a pipeline's stages keep no batch to look into: any norm of eps=0 may be why */
	const char *why = none ? note : bad >= 0 ? eps0_note(&t->p->nodes[bad], false, note, sizeof note)
			  : x && bce ? "bce takes probabilities: end the model in sigmoid, or use bce_with_logits on the raw scores"
			  : x && kl ? "kl_div takes probabilities as targets (each at least 0), or log-probabilities with log_target=true"
				     : x ? NULL : train_eps0_note(t->p, false, note, sizeof note);
	/* weights not finite from the start are the file's, not the rate's */
	const struct train_opts *o = t->o;
	if (!why && param >= 0 && t->at.step == t->start_step)
		why = note, snprintf(note, sizeof note, "%.160s is not finite in the weights the run started from (%s%.240s); give weights that are",
				     t->p->params[param].name, o->resume ? "the checkpoint in " : o->init ? "--init " : "train.seed",
				     o->resume ? o->resume : o->init ? o->init : "");
	const char *value = isnan(loss) ? "NaN" : loss > 0 ? "+infinity" : "-infinity";
	long long step = (long long)t->at.step + 1, epoch = (long long)t->at.epoch;
	if (x || none)
		snprintf(t->err, sizeof t->err, "the loss is %s at step %lld (epoch %lld)%s\ntrainc: %s\ntrainc: stopped at a non-finite loss",
			 value, step, epoch, where, why ? why : "lower the learning rate, clip gradients (clip_grad_norm) or check the data");
	else
		snprintf(t->err, sizeof t->err, "the loss is %s at step %lld (epoch %lld)\ntrainc: stopped at a non-finite loss; lower the "
			 "learning rate or check the data%s%s", value, step, epoch, why ? "; or: " : "", why ? why : "");
	t->stop_key = "nonfinite"; /* every rank whose loss went bad says so: the launcher says it once */
	return -1;
}

static void scale_shards(void *ctx, float coef)
{
	fsdp_scale_grads(ctx, coef);
}

/* Gradient clipping by the global norm; with FSDP the shards' sums of
 * squares are added over the ranks first. */
static int clip(struct trainer *t)
{
	double max = t->p->train.clip_grad_norm;
	if (!t->fsdp_ok) {
		optim_clip_grad_norm(optim_sumsq(t->e.grads, t->e.trainable), max, scale_grads, &t->e);
		return 0;
	}
	double sumsq = fsdp_grad_sumsq(&t->fsdp);
	if (reduce_sums(t, &sumsq, 1) != 0)
		return -1;
	optim_clip_grad_norm(sumsq, max, scale_shards, &t->fsdp);
	return 0;
}

/* FSDP with micro-batches: the batch in chunks of ceil(b / M) (torch.chunk),
 * one after the other, each chunk's gradients reduce-scattered and added
 * before the next chunk's backward; *loss is the batch's, as pipe_run's. */
static int run_chunks(struct trainer *t, const float *x, const void *y, int b, double *loss, long *correct)
{
	const struct plan *p = t->p;
	int c = (b + t->micro_pipe - 1) / t->micro_pipe;
	size_t xrow = (size_t)t->train.sample_numel, yrow = dataset_target_bytes(&t->train, 1);
	float base = t->e.loss_scale;
	*loss = 0;
	*correct = 0;
	int rc = 0;
	for (int at = 0; at < b && rc == 0; at += c) {
		int n = b - at < c ? b - at : c;
		const float *xc = x + (size_t)at * xrow;
		/* a mean over the batch: each chunk's gradient weighs n / b */
		t->e.loss_scale = base * (p->train.reduction == RED_SUM ? 1.0f : (float)n / (float)b);
		exec_set_micro_at(0, at); /* its own dropout masks */
		exec_forward(&t->e, xc, n, true);
		exec_set_micro(0);
		double l;
		long hits;
		if (t->e.stop) {
			rc = util_fail(t->err, sizeof t->err, "%s", t->fsdp.err);
		} else if (exec_loss(&t->e, (const char *)y + (size_t)at * yrow, n, true, &l, &hits, t->err, sizeof t->err) != 0) {
			rc = -1;
		} else if (!isfinite(l)) {
			rc = stop_nonfinite(t, l, xc, n, mean_of_none(p, (const char *)y + (size_t)at * yrow, (int[]){ 0 }, &n, 1));
		} else {
			exec_backward(&t->e, n);
			launch_wait_begin();
			rc = fsdp_finish_micro(&t->fsdp, t->err, sizeof t->err);
			launch_wait_end();
			*loss += p->train.reduction == RED_SUM ? l : l * n / b;
			*correct += hits;
		}
	}
	t->e.loss_scale = base;
	return rc;
}

/* The samples of this rank's optimizer step that starts at the current
 * batch: accum micro-batches, fewer at an epoch's end, the last one short. */
static int64_t step_size(const struct trainer *t)
{
	int64_t n = 0;
	for (int64_t k = t->at.batch; k < t->at.batch + t->accum && k < t->s.num_batches; k++)
		n += sampler_batch_len(&t->s, k);
	return n;
}

/* One epoch from the current position; returns 0, 1 when the step budget
 * is spent, or -1. */
static int run_epoch(struct trainer *t, double *train_time, int64_t *images)
{
	const struct plan *p = t->p;
	const struct plan_train *tr = &p->train;
	double te = util_now(), lr = 0;
	int64_t seen = 0;
	int in_step = 0;
	bool budget_spent = false;
	double step_loss = 0, step_n = 0; /* this optimizer step's loss over its micro-batches */
	int64_t step_samples = 0;	  /* this rank's samples in the step (a mean loss over micro-batches) */
	for (;;) {
		float *x;
		void *y;
		int b;
		int got = loader_next(&t->l, &x, &y, &b);
		if (got < 0) {
			snprintf(t->err, sizeof t->err, "%s", t->l.err);
			return -1;
		}
		if (got == 0)
			break;
		if (in_step == 0 && t->fsdp_ok)
			fsdp_begin_step(&t->fsdp);
		else if (in_step == 0)
			memset(t->e.grads, 0, (size_t)t->e.trainable * 4);
		if (in_step == 0 && tr->global_batch && tr->reduction != RED_SUM && t->accum > 1)
			step_samples = step_size(t);
		if (step_samples > 0) /* a mean over the step: each micro-batch weighs its share of it */
			t->e.loss_scale = (float)b / (float)step_samples;
		bool last_micro = in_step + 1 == t->accum || t->at.batch + 1 == t->s.num_batches;
		if (t->ddp_ok)
			t->ddp.enabled = last_micro;
		t->e.step = t->at.step + 1;
		t->e.step_first = (int64_t)in_step * t->micro; /* the micro-batches of a step draw their own dropout masks */
		double loss;
		long correct;
		if (t->use_pipe) {
			if (pipe_run(&t->pipe, x, y, b, t->micro_pipe, true, &loss, &correct, t->err, sizeof t->err) != 0) {
				loader_release(&t->l);
				return -1;
			}
			if (!isfinite(loss)) {
				bool none = mean_of_none(p, y, t->pipe.first, t->pipe.size, t->pipe.k);
				loader_release(&t->l);
				return stop_nonfinite(t, loss, NULL, b, none);
			}
		} else if (t->chunked) {
			if (run_chunks(t, x, y, b, &loss, &correct) != 0) {
				loader_release(&t->l);
				return -1;
			}
		} else {
			exec_forward(&t->e, x, b, true);
			if (t->e.stop) { /* a collective inside the forward failed */
				loader_release(&t->l);
				snprintf(t->err, sizeof t->err, "%s", t->fsdp.err);
				return -1;
			}
			if (exec_loss(&t->e, y, b, true, &loss, &correct, t->err, sizeof t->err) != 0) {
				loader_release(&t->l);
				return -1;
			}
			if (!isfinite(loss)) {
				int rc = stop_nonfinite(t, loss, x, b, mean_of_none(p, y, (int[]){ 0 }, &b, 1));
				loader_release(&t->l);
				return rc;
			}
			exec_backward(&t->e, b);
		}
		loader_release(&t->l);
		if (t->fsdp_ok) {
			launch_wait_begin();
			int done = fsdp_finish_micro(&t->fsdp, t->err, sizeof t->err);
			launch_wait_end();
			if (done != 0)
				return -1;
		}
		t->at.batch++;
		in_step++;
		seen += b;
		*images += b;
		double per_sample = tr->reduction == RED_SUM ? loss / b : loss;
		t->ep_loss += per_sample * b;
		t->ep_n += b;
		step_loss += per_sample * b;
		step_n += b;
		launch_beat();
		if (!last_micro)
			continue;
		launch_wait_begin();
		int synced = t->ddp_ok ? ddp_finish(&t->ddp, t->err, sizeof t->err) : 0;
		launch_wait_end();
		if (synced != 0)
			return -1;
		if (tr->clip_grad_norm > 0 && clip(t) != 0)
			return -1;
		lr = train_lr(p, &t->sc, &t->at, t->at.epoch - 1, t->at.step);
		if (t->oc.momentum_table)
			train_momentum_fill(&t->sc, t->spe, &t->momentum_now, 1, t->at.step, t->at.step + 1);
		t->at.step++;
		if (t->fsdp_ok)
			fsdp_optim_step(&t->fsdp, &t->oc, t->at.step, lr);
		else
			optim_step(&t->oc, t->sv, t->e.params, t->e.grads, t->e.trainable, t->at.step, lr);
		/* a step whose batches complete a multiple of log_interval batches
		 * of the epoch (counted from its start, so a run resumed mid-epoch
		 * logs where the uninterrupted one did; under micro_batch a step
		 * runs several), an epoch's last, and the run's last: as the GPU
		 * trainer logs */
		bool log = t->at.batch % tr->log_interval < in_step || t->at.batch == t->s.num_batches || (tr->steps && t->at.step >= tr->steps);
		if (log) {
			/* the logged loss is the step's mean over every rank's samples */
			double v[2] = { step_loss, step_n };
			if (reduce_sums(t, v, 2) != 0)
				return -1;
			per_sample = v[0] / v[1];
		}
		in_step = 0;
		step_loss = step_n = 0;
		if (t->rank == 0 && (log || t->tty))
			train_report_step(t->rd_ok ? &t->rd : NULL, t->tty, log, &t->at, t->at.batch * t->micro, t->s.num_samples, per_sample,
					  lr, (double)seen * t->world / (util_now() - te));
		if (tr->checkpoint_every && t->o->save && !train_is_weights_file(t->o->save) && t->at.step % tr->checkpoint_every == 0) {
			/* at an epoch's end, after its evaluation: a run stopped
			 * during the evaluation resumes to evaluate again */
			if (t->has_test && t->at.batch == t->s.num_batches) {
				t->ckpt_pending = true;
			} else {
				int ck = checkpoint(t, t->o->save);
				if (ck == TRAIN_CKPT_IO)
					checkpoint_missed(t);
				else if (ck != 0)
					return -1;
			}
		}
		if (tr->steps && t->at.step >= tr->steps) {
			budget_spent = true;
			break; /* the position stays mid-epoch, for a checkpoint */
		}
		if (test_failed(t))
			return -1;
	}
	double dt = util_now() - te;
	*train_time += dt;
	double sums[3] = { t->ep_loss, t->ep_n, (double)seen }; /* the rate counts this run's samples alone */
	if (reduce_sums(t, sums, 3) != 0)
		return -1;
	t->ep_mean = sums[0] / sums[1];
	if (t->rank == 0)
		train_report_epoch(t->rd_ok ? &t->rd : NULL, t->tty, &t->at, sums, sums[2] / dt);
	return budget_spent ? 1 : 0;
}

static void teardown(struct trainer *t)
{
	rundir_git_end();
	if (t->loader_ok)
		loader_stop(&t->l);
	if (t->ddp_ok)
		ddp_free(&t->ddp);
	if (t->fsdp_ok)
		fsdp_free(&t->fsdp);
	if (t->pipe_ok)
		pipe_free(&t->pipe);
	if (t->comm)
		comm_close(t->comm);
	if (t->store)
		store_client_close(t->store);
	if (t->rd_ok)
		rundir_close(&t->rd);
	for (int k = 0; k < 2; k++) {
		free(t->xb[k]);
		free(t->yb[k]);
	}
	free(t->ex);
	free(t->ey);
	sampler_free(&t->s);
	if (t->exec_ok)
		exec_free(&t->e);
	if (t->train_thread_on) { /* a run that failed while the training set loaded */
		pthread_join(t->train_thread, NULL);
		t->train_thread_on = false;
		dataset_close(&t->train_loaded);
	}
	dataset_close(&t->train);
	if (t->test_thread_on)
		test_ready(t);
	if (t->has_test && t->test_rc == 0)
		dataset_close(&t->test);
}

/* The process's peak resident set, from /proc (0 when unavailable). */
double train_peak_rss_mib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	double kib = 0;
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			kib = atof(line + 6);
	if (f)
		fclose(f);
	return kib / 1024.0;
}

/* This rank's own end-of-run lines: what it holds for parameters,
 * gradients and optimizer state, its peak memory and, under FSDP, its
 * waits for the gathers and reduce-scatters. */
static void report_rank(struct trainer *t, double train_time)
{
	int64_t state = t->fsdp_ok ? (2 * t->fsdp.total + t->fsdp.total * t->p->train.optim.state_per_param) * 4
				   : (t->p->unsharded_elems + t->e.trainable * (1 + t->p->train.optim.state_per_param)) * 4;
	printf("Rank %d: parameters, gradients and optimizer state %.2f MiB; peak resident memory %.1f MiB\n", t->rank,
	       (double)state / 1048576.0, train_peak_rss_mib());
	if (t->fsdp_ok && train_time > 0) {
		const struct devplan *dp = &t->p->dev[0];
		int64_t planned = dp->bytes[REG_PARAMS] + dp->bytes[REG_GRADS] + dp->bytes[REG_OPTIM] + dp->bytes[REG_COMM];
		double busy = comm_busy(t->comm) - t->eval_busy;
		printf("FSDP rank %d: %.1f%% of the training time waiting for all-gather / reduce-scatter (%.0f%% of their time "
		       "hidden behind compute); parameters, gradients, optimizer state and gather buffers: planned %.2f MiB, "
		       "allocated %.2f MiB\n",
		       t->rank, 100.0 * t->fsdp.wait_s / train_time,
		       busy > 0 ? 100.0 * (1.0 - (t->fsdp.wait_s < busy ? t->fsdp.wait_s : busy) / busy) : 0.0, (double)planned / 1048576.0,
		       (double)t->fsdp.peak_bytes / 1048576.0);
	}
	fflush(stdout);
}

static int finish(struct trainer *t, double t0, double train_time, int64_t images)
{
	const struct train_opts *o = t->o;
	if (t->rank == 0 && !t->p->train.eval_only && images > 0) /* not after "Nothing to train" */
		printf("Training loop elapsed time: %.3f sec (%.0f images/s while training)\n", util_now() - t0,
		       train_time > 0 ? (double)images * t->world / train_time : 0.0);
	if (t->pipe_ok && t->rank == 0) {
		printf("Pipeline: %d stage%s over %d device%s, %d micro-batch%s; idle share:", t->pipe.nst, t->pipe.nst == 1 ? "" : "s",
		       t->p->ndevices, t->p->ndevices == 1 ? "" : "s", t->micro_pipe, t->micro_pipe == 1 ? "" : "es");
		for (int d = 0; d < t->p->ndevices; d++)
			printf(" device %d %.0f%%", d, 100.0 * pipe_idle(&t->pipe, d));
		printf("\n");
	}
	if (t->ddp_ok && t->rank == 0 && train_time > 0) {
		double busy = comm_busy(t->comm) - t->eval_busy;
		printf("DDP: %.1f%% of the training time waiting for gradient all-reduce; %.0f%% of the all-reduce time hidden "
		       "behind the backward pass\n", 100.0 * t->ddp.wait_s / train_time,
		       busy > 0 ? 100.0 * (1.0 - (t->ddp.wait_s < busy ? t->ddp.wait_s : busy) / busy) : 0.0);
	}
	for (int r = 0; r < t->world; r++) {
		if (r == t->rank)
			report_rank(t, train_time);
		if (r + 1 < t->world && train_next_turn(t->comm, t->err, sizeof t->err) != 0)
			return fail(t, NULL);
	}
	/* a checkpoint that cannot be written still leaves the weights in the run directory */
	int ck = 0;
	if (o->save && !train_is_weights_file(o->save) && (ck = checkpoint(t, o->save)) != 0) {
		if (ck != TRAIN_CKPT_IO)
			return fail(t, "cannot save the checkpoint");
		if (t->ckpt_speak) {
			t->stop_key = ""; /* the job's last word, said once */
			fail(t, "cannot save the checkpoint");
		}
	}
	float *params, *optim;
	if (full_state(t, &params, &optim, false) != 0)
		return fail(t, "cannot gather the weights");
	int rc = 0;
	if (t->rank == 0) {
		char path[4200];
		snprintf(path, sizeof path, "%s/weights.safetensors", rundir_path(&t->rd));
		bool kept = weights_save(t->p, params, path, t->err, sizeof t->err) == 0;
		if (!kept)
			rc = fail(t, "cannot save the weights");
		if (o->save && train_is_weights_file(o->save)) {
			if (weights_save(t->p, params, o->save, t->err, sizeof t->err) != 0)
				rc = fail(t, "cannot save the weights");
			else
				printf("Saved the weights to %s\n", o->save);
		}
		if (kept)
			printf("Run directory: %s%s\n", rundir_path(&t->rd), ck ? " (the final weights are there)" : "");
	}
	free_full(t, params, optim);
	/* with the checkpoint failed every rank ends with status 1, but none
	 * before rank 0 has written the weights: the launcher stops the ranks
	 * still running once one has failed */
	if (ck && t->world > 1 && train_next_turn(t->comm, t->err, sizeof t->err) != 0) {
		/* another rank ended meanwhile: its own failure is said */
	}
	return rc || ck;
}

int train_run(const struct plan *p, const struct train_opts *o)
{
	struct trainer *t = calloc(1, sizeof *t);
	if (!t) {
		fprintf(stderr, "trainc: out of memory\n");
		return 1;
	}
	t->p = p;
	t->o = o;
	t->rank = o->rank;
	t->world = o->world > 0 ? o->world : 1;
	int rc = setup(t);
	if (rc != 0) {
		rc = train_setup_failed(rc, t->world, &t->stop_key);
		fail(t, NULL);
		teardown(t);
		free(t);
		return rc;
	}
	if (t->rank == 0 && p->train.eval_only) {
		train_report_eval_only(p, o, t->world, t->has_test);
	} else if (t->rank == 0) {
		char c1[32], c2[32];
		char bw[96];
		printf("%s: %s parameters, %s training samples, %d rank%s, %s, %lld epoch%s\n", p->model_name,
		       print_count(p->total_params, c1, sizeof c1), print_count(t->train.n, c2, sizeof c2), t->world, t->world == 1 ? "" : "s",
		       train_batch_words(bw, sizeof bw, t->micro, t->accum), (long long)t->epochs, t->epochs == 1 ? "" : "s");
		fflush(stdout);
	}
	double t0 = util_now(), train_time = 0;
	int64_t images = 0;
	/* a checkpoint taken at the last step, resumed, has nothing left to train */
	bool spent = p->train.eval_only || (p->train.steps && t->at.step >= p->train.steps);
	if (p->train.eval_only) {
		if (t->has_test && evaluate(t) != 0)
			rc = fail(t, "evaluation");
	} else if (spent && t->rank == 0) {
		train_report_spent(p);
	} else if (!spent) {
		spent = train_epochs_done(p, &t->at, t->epochs, t->rank);
	}
	while (!spent && t->at.epoch <= t->epochs && rc == 0) {
		int r = run_epoch(t, &train_time, &images);
		if (r < 0) {
			rc = fail(t, NULL);
			break;
		}
		if (t->has_test && evaluate(t) != 0) {
			rc = fail(t, "evaluation");
			break;
		}
		train_plateau(p, &t->sc, &t->at, t->at.batch == t->s.num_batches, t->test_loss, t->ep_mean, t->rank);
		if (t->ckpt_pending) { /* the epoch's last step's checkpoint_every save */
			t->ckpt_pending = false;
			int ck = checkpoint(t, o->save);
			if (ck == TRAIN_CKPT_IO) {
				checkpoint_missed(t);
			} else if (ck != 0) {
				rc = fail(t, NULL);
				break;
			}
		}
		if (r == 1)
			break; /* the step budget ended mid-epoch: keep the position */
		t->at.epoch++;
		t->at.batch = 0;
		t->ep_loss = t->ep_n = 0;
	}
	if (rc == 0)
		rc = finish(t, t0, train_time, images);
	teardown(t);
	free(t);
	return rc;
}
