/* train.c: one process trains a plan.
 * Batches come from a loader thread over a DistributedSampler at world
 * size 1; each step zeroes the gradients, runs forward, loss and backward,
 * clips if asked and steps the optimizer over the whole trainable region
 * at once (the plan lays parameters, gradients and state out alike).  The
 * scheduler's rate is recomputed per epoch or per step from its closed
 * form.  A non-finite loss stops the run naming the step.
 */
#include "runtime/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int open_data(const struct plan *p, const struct plan_dataset *pd, struct dataset *ds, char *err, size_t n)
{
	if (pd->kind == DATA_MNIST)
		return dataset_mnist(ds, pd->root, pd->split, (float)pd->mean, (float)pd->std, err, n);
	struct synthetic_spec sp = { 0 };
	sp.samples = pd->samples;
	sp.ndim = pd->sample.rank;
	memcpy(sp.shape, pd->sample.d, sizeof(int64_t) * (size_t)sp.ndim);
	sp.target = pd->target == TGT_CLASS ? TARGET_CLASS : TARGET_VECTOR;
	sp.num_classes = (int)pd->classes;
	sp.target_ndim = pd->target_shape.rank;
	memcpy(sp.target_shape, pd->target_shape.d, sizeof(int64_t) * (size_t)sp.target_ndim);
	sp.seed = p->train.seed;
	return dataset_synthetic(ds, &sp, err, n);
}

static struct optim_cfg optim_of(const struct plan_optim *o)
{
	static const enum optim_kind kinds[] = { [OPT_SGD] = OPTIM_SGD, [OPT_ADAM] = OPTIM_ADAM, [OPT_ADAMW] = OPTIM_ADAMW,
						 [OPT_ADADELTA] = OPTIM_ADADELTA, [OPT_ADAGRAD] = OPTIM_ADAGRAD, [OPT_RMSPROP] = OPTIM_RMSPROP };
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

static struct sched_cfg sched_of(const struct plan_sched *s)
{
	static const enum sched_kind kinds[] = { [LRS_CONSTANT] = SCHED_CONSTANT, [LRS_STEP] = SCHED_STEP,
						 [LRS_MULTISTEP] = SCHED_MULTISTEP, [LRS_EXPONENTIAL] = SCHED_EXPONENTIAL,
						 [LRS_COSINE] = SCHED_COSINE };
	struct sched_cfg c = sched_cfg_default(kinds[s->kind]);
	c.unit = s->per_step ? SCHED_PER_STEP : SCHED_PER_EPOCH;
	c.step_size = s->step_size;
	c.gamma = s->gamma;
	c.n_milestones = s->nmilestones < SCHED_MAX_MILESTONES ? s->nmilestones : SCHED_MAX_MILESTONES;
	memcpy(c.milestones, s->milestones, sizeof(int64_t) * (size_t)c.n_milestones);
	c.t_max = s->t_max;
	c.eta_min = s->eta_min;
	c.warmup = s->warmup;
	return c;
}

/* One terminal line, redrawn: epoch, a bar, samples, loss, speed. */
static void progress(int64_t epoch, int64_t seen, int64_t total, double loss, double rate)
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

static int evaluate(struct exec *e, const struct plan *p, const struct dataset *ds, float *x, void *y, struct rundir *rd,
		    int64_t epoch)
{
	int64_t b = p->train.test_batch, n = ds->n;
	int64_t *idx = malloc((size_t)b * sizeof *idx);
	if (!idx)
		return -1;
	double total = 0;
	long correct = 0;
	char err[256];
	for (int64_t s = 0; s < n; s += b) {
		int m = (int)(n - s < b ? n - s : b);
		for (int i = 0; i < m; i++)
			idx[i] = s + i;
		dataset_fill(ds, idx, m, x, y);
		exec_forward(e, x, m, false);
		double loss;
		long c;
		if (exec_loss(e, y, m, false, &loss, &c, err, sizeof err) != 0) {
			fprintf(stderr, "trainc: test set: %s\n", err);
			free(idx);
			return -1;
		}
		/* the seed sums per-sample losses and divides by the set size */
		total += p->train.reduction == RED_SUM ? loss : loss * m;
		correct += c;
	}
	free(idx);
	rundir_metric_eval(rd, epoch, total / (double)n, p->test_data.target == TGT_CLASS ? (double)correct / (double)n : NAN);
	if (p->test_data.target == TGT_CLASS)
		printf("\nTest set: Average loss: %.4f, Accuracy: %ld/%lld (%.0f%%)\n\n", total / (double)n, correct, (long long)n,
		       100.0 * (double)correct / (double)n);
	else
		printf("\nTest set: Average loss: %.4f\n\n", total / (double)n);
	fflush(stdout);
	return 0;
}

int train_run(const struct plan *p, const struct train_opts *o)
{
	char err[1024];
	if (p->train_data.kind == DATA_NONE) {
		fprintf(stderr, "trainc: %s has no data section with a training set; add data { train = ... }\n", p->path);
		return 2;
	}
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	kern_set_threads(o->threads > 0 ? o->threads : (int)(cores > 0 ? cores : 1));
	struct dataset train = { 0 }, test = { 0 };
	if (open_data(p, &p->train_data, &train, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		return 1;
	}
	bool has_test = p->test_data.kind != DATA_NONE;
	if (has_test && open_data(p, &p->test_data, &test, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		dataset_close(&train);
		return 1;
	}
	int64_t B = p->train.global_batch ? p->train.global_batch : p->train.batch, TB = p->train.test_batch;
	int64_t sizes[4] = { B, train.n % B ? train.n % B : B, TB, has_test && test.n % TB ? test.n % TB : TB };
	struct exec e;
	if (exec_init(&e, p, sizes, 4, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		return 1;
	}
	e.seed = p->train.seed;
	exec_init_params(&e, p->train.seed);
	if (o->init && weights_load(p, e.params, o->init, true, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: --init: %s\n", err);
		exec_free(&e);
		return 1;
	}
	struct rundir rd;
	if (rundir_create(&rd, o->run_dir, p, o->version, o->argc, o->argv, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		exec_free(&e);
		return 1;
	}
	struct optim_cfg oc = optim_of(&p->train.optim);
	struct optim_state_view sv = { e.optim, e.trainable };
	optim_state_init(&oc, sv, e.trainable);
	struct sched_cfg sc = sched_of(&p->train.sched);

	int64_t xmax = (B > TB ? B : TB) * train.sample_numel;
	float *xb[2] = { malloc((size_t)xmax * 4), malloc((size_t)xmax * 4) };
	size_t ybytes = dataset_target_bytes(&train, (int)(B > TB ? B : TB));
	void *yb[2] = { malloc(ybytes), malloc(ybytes) };
	struct sampler s = { 0 };
	if (!xb[0] || !xb[1] || !yb[0] || !yb[1] ||
	    sampler_init(&s, train.n, 1, 0, (int)B, p->train.shuffle, 0, p->train.drop_last, p->train.seed, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err[0] ? err : "out of memory");
		return 1;
	}
	int64_t epochs = p->train.epochs;
	if (p->train.steps)
		epochs = (p->train.steps + s.num_batches - 1) / s.num_batches;
	struct loader l = { 0 };
	struct sampler_pos start = { 0, 0 };
	if (loader_start(&l, &train, &s, xb, yb, start, epochs, 0, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		return 1;
	}
	printf("%s: %lld parameters, %lld training samples, batch %lld, %lld epoch%s\n", p->model_name, (long long)p->total_params,
	       (long long)train.n, (long long)B, (long long)epochs, epochs == 1 ? "" : "s");
	fflush(stdout);
	/* a progress bar on a terminal; log lines as PyTorch's example prints them otherwise */
	bool tty = isatty(STDOUT_FILENO) && !getenv("TRAINC_PLAIN");
	double t0 = now(), train_time = 0;
	int64_t step = 0, images = 0;
	int rc = 0;
	float *ex = malloc((size_t)TB * (size_t)test.sample_numel * 4 + 64);
	void *ey = malloc(has_test ? dataset_target_bytes(&test, (int)TB) : 16);
	for (int64_t epoch = 1; epoch <= epochs && rc == 0; epoch++) {
		double te = now(), loss_sum = 0;
		int64_t seen = 0, batches = 0;
		for (;;) {
			float *x;
			void *y;
			int b;
			int got = loader_next(&l, &x, &y, &b);
			if (got < 0) {
				fprintf(stderr, "trainc: %s\n", l.err);
				rc = 1;
				break;
			}
			if (got == 0)
				break;
			if (p->train.steps && step >= p->train.steps) {
				loader_release(&l);
				continue;
			}
			step++;
			e.step = step;
			memset(e.grads, 0, (size_t)e.trainable * 4);
			exec_forward(&e, x, b, true);
			double loss;
			long correct;
			if (exec_loss(&e, y, b, true, &loss, &correct, err, sizeof err) != 0) {
				fprintf(stderr, "trainc: step %lld: %s\n", (long long)step, err);
				rc = 1;
				break;
			}
			if (!isfinite(loss)) {
				int bad = exec_find_nonfinite(&e, x, b);
				fprintf(stderr, "trainc: the loss is %g at step %lld (epoch %lld)", loss, (long long)step, (long long)epoch);
				if (bad >= 0)
					fprintf(stderr, "; the first non-finite output is %s's", p->nodes[bad].what);
				else
					fprintf(stderr, "; every layer's output is finite, so the loss itself overflowed");
				fprintf(stderr, "\ntrainc: lower the learning rate, clip gradients (clip_grad_norm) or check the data\n");
				loader_release(&l);
				rc = 1;
				break;
			}
			exec_backward(&e, b);
			loader_release(&l);
			if (p->train.clip_grad_norm > 0)
				optim_clip_grad_norm(optim_sumsq(e.grads, e.trainable), p->train.clip_grad_norm, scale_grads, &e);
			double lr = sched_lr(&sc, p->train.optim.lr, epoch - 1, step - 1);
			optim_step(&oc, sv, e.params, e.grads, e.trainable, step, lr);
			double per_sample = p->train.reduction == RED_SUM ? loss / b : loss;
			loss_sum += per_sample * b;
			launch_beat();
			seen += b;
			batches++;
			images += b;
			if (batches % p->train.log_interval == 0 || seen == s.num_samples)
				rundir_metric_step(&rd, step, epoch, per_sample, lr, (double)seen / (now() - te));
			if (tty) {
				progress(epoch, seen, s.num_samples, per_sample, (double)seen / (now() - te));
			} else if (batches % p->train.log_interval == 0 || seen == s.num_samples) {
				printf("Train Epoch: %lld [%lld/%lld (%.0f%%)]\tLoss: %.6f\n", (long long)epoch, (long long)seen,
				       (long long)s.num_samples, 100.0 * (double)seen / (double)s.num_samples, per_sample);
				fflush(stdout);
			}
		}
		if (tty)
			fputs("\r\033[K", stdout);
		if (rc)
			break;
		double dt = now() - te;
		train_time += dt;
		printf("Train Epoch: %lld\tAverage loss: %.6f\t%.0f images/s\n", (long long)epoch, seen ? loss_sum / (double)seen : 0.0,
		       (double)seen / dt);
		if (has_test && evaluate(&e, p, &test, ex, ey, &rd, epoch) != 0)
			rc = 1;
	}
	loader_stop(&l);
	if (rc == 0) {
		printf("Training loop elapsed time: %.3f sec (%.0f images/s while training)\n", now() - t0, (double)images / train_time);
		char path[4200];
		snprintf(path, sizeof path, "%s/weights.safetensors", rundir_path(&rd));
		const char *targets[2] = { path, o->save };
		for (int k = 0; k < 2 && rc == 0; k++) {
			if (!targets[k])
				continue;
			if (weights_save(p, e.params, targets[k], err, sizeof err) != 0) {
				fprintf(stderr, "trainc: cannot save the weights: %s\n", err);
				rc = 1;
			} else if (k == 1) {
				printf("Saved the weights to %s\n", targets[k]);
			}
		}
		printf("Run directory: %s\n", rundir_path(&rd));
	}
	free(ex);
	free(ey);
	free(xb[0]);
	free(xb[1]);
	free(yb[0]);
	free(yb[1]);
	sampler_free(&s);
	rundir_close(&rd);
	exec_free(&e);
	dataset_close(&train);
	if (has_test)
		dataset_close(&test);
	return rc;
}
