/* pipe.c: device threads and their schedule.
 * A device thread takes its stages' forward items in order of (stage,
 * micro-batch) and waits only on the previous stage's same micro-batch,
 * which lives on a lower stage of some thread that never waits on a higher
 * one: no cycle, so no deadlock.  Backward items go in (stage descending,
 * micro-batch) order the same way.  One mutex and condition variable cover
 * the small completion tables.
 */
#include "runtime/pipe.h"
#include "runtime/util.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct arg {
	struct pipe *pp;
	int dev;
};
static struct arg args[PLAN_MAX_DEVICES];

static void wait_for(struct pipe *pp, const bool *flag)
{
	pthread_mutex_lock(&pp->mu);
	while (!*flag)
		pthread_cond_wait(&pp->cv, &pp->mu);
	pthread_mutex_unlock(&pp->mu);
}

static void mark(struct pipe *pp, bool *flag)
{
	pthread_mutex_lock(&pp->mu);
	*flag = true;
	pthread_cond_broadcast(&pp->cv);
	pthread_mutex_unlock(&pp->mu);
}

static void run_job(struct pipe *pp, int d)
{
	struct exec *e = pp->e;
	int last = pp->nst - 1;
	for (int s = 0; s < pp->nst; s++) {
		if (pp->st[s].dev != d)
			continue;
		for (int mb = 0; mb < pp->k; mb++) {
			if (s > 0)
				wait_for(pp, &pp->fdone[s - 1][mb]);
			exec_set_micro_at(mb, pp->first[mb]);
			double t0 = util_now();
			exec_forward_range(e, pp->st[s].begin, pp->st[s].end, pp->size[mb], pp->train);
			if (s == last) {
				char err[64];
				const char *y = (const char *)pp->y + (size_t)pp->first[mb] * pp->y_row;
				/* a mean over the batch: each micro-batch's gradient weighs size / n */
				float total = 0;
				for (int i = 0; i < pp->k; i++)
					total += (float)pp->size[i];
				e->loss_scale = pp->base_scale *
						(e->p->train.reduction == RED_SUM ? 1.0f : (float)pp->size[mb] / total);
				if (exec_loss(e, y, pp->size[mb], pp->train, &pp->loss[mb], &pp->correct[mb], err, sizeof err) != 0)
					pp->bad_target = mb;
				if (pp->train)
					exec_backward_begin(e);
			}
			pp->busy[d] += util_now() - t0;
			mark(pp, &pp->fdone[s][mb]);
		}
	}
	if (!pp->train)
		return;
	for (int s = last; s >= 0; s--) {
		if (pp->st[s].dev != d)
			continue;
		for (int mb = 0; mb < pp->k; mb++) {
			if (s < last)
				wait_for(pp, &pp->bdone[s + 1][mb]);
			exec_set_micro(mb);
			double t0 = util_now();
			exec_backward_range(e, pp->st[s].begin, pp->st[s].end, pp->size[mb]);
			pp->busy[d] += util_now() - t0;
			mark(pp, &pp->bdone[s][mb]);
		}
	}
}

static void *device_thread(void *argp)
{
	struct arg *a = argp;
	struct pipe *pp = a->pp;
	omp_set_num_threads(pp->threads_per_dev);
	int seen = 0;
	for (;;) {
		pthread_mutex_lock(&pp->mu);
		while (pp->generation == seen && !pp->quit)
			pthread_cond_wait(&pp->cv, &pp->mu);
		if (pp->quit) {
			pthread_mutex_unlock(&pp->mu);
			return NULL;
		}
		seen = pp->generation;
		pthread_mutex_unlock(&pp->mu);
		run_job(pp, a->dev);
		pthread_mutex_lock(&pp->mu);
		pp->finished++;
		pthread_cond_broadcast(&pp->cv);
		pthread_mutex_unlock(&pp->mu);
	}
}

int pipe_init(struct pipe *pp, struct exec *e, int threads, char *err, size_t errlen)
{
	memset(pp, 0, sizeof *pp);
	pp->e = e;
	const struct plan *p = e->p;
	pp->ndev = p->ndevices;
	pp->threads_per_dev = threads / pp->ndev > 0 ? threads / pp->ndev : 1;
	for (int i = 1; i < p->nnodes; i++) {
		int d = p->nodes[i].device;
		if (pp->nst > 0 && pp->st[pp->nst - 1].dev == d) {
			pp->st[pp->nst - 1].end = i + 1;
			continue;
		}
		if (pp->nst == PIPE_MAX_STAGES) {
			snprintf(err, errlen, "the placement makes more than %d pipeline stages", PIPE_MAX_STAGES);
			return -1;
		}
		pp->st[pp->nst++] = (struct pipe_stage){ i, i + 1, d };
	}
	pthread_mutex_init(&pp->mu, NULL);
	pthread_cond_init(&pp->cv, NULL);
	for (int d = 0; d < pp->ndev; d++) {
		args[d] = (struct arg){ pp, d };
		if (pthread_create(&pp->th[d], NULL, device_thread, &args[d]) != 0) {
			snprintf(err, errlen, "cannot start the thread of device %d", d);
			pipe_free(pp);
			return -1;
		}
		pp->started[d] = true;
	}
	return 0;
}

int pipe_run(struct pipe *pp, const float *x, const void *y, int n, int micro, bool train, double *loss, long *correct,
	     char *err, size_t errlen)
{
	struct exec *e = pp->e;
	const struct plan *p = e->p;
	/* torch.chunk's split: chunks of ceil(n / micro), the last one smaller */
	int chunk = (n + micro - 1) / micro;
	pp->k = 0;
	for (int at = 0; at < n && pp->k < PIPE_MAX_MICRO; at += chunk) {
		pp->first[pp->k] = at;
		pp->size[pp->k] = n - at < chunk ? n - at : chunk;
		pp->k++;
	}
	pp->x = x;
	pp->y = y;
	pp->x_row = (size_t)shape_numel(&p->nodes[0].out) * sizeof(float);
	const struct plan_dataset *ds = &p->train_data;
	pp->y_row = ds->target == TGT_CLASS ? sizeof(int32_t) : (size_t)shape_numel(&ds->target_shape) * sizeof(float);
	pp->train = train;
	pp->bad_target = -1;
	pp->base_scale = e->loss_scale;
	memset(pp->fdone, 0, sizeof pp->fdone);
	memset(pp->bdone, 0, sizeof pp->bdone);
	for (int mb = 0; mb < pp->k; mb++) {
		exec_set_micro(mb);
		exec_input(e, (const float *)(const void *)((const char *)x + (size_t)pp->first[mb] * pp->x_row), pp->size[mb], train);
	}
	double t0 = util_now();
	pthread_mutex_lock(&pp->mu);
	pp->finished = 0;
	pp->generation++;
	pthread_cond_broadcast(&pp->cv);
	while (pp->finished < pp->ndev)
		pthread_cond_wait(&pp->cv, &pp->mu);
	pthread_mutex_unlock(&pp->mu);
	pp->wall += util_now() - t0;
	e->loss_scale = pp->base_scale;
	exec_set_micro(0);
	if (pp->bad_target >= 0) {
		snprintf(err, errlen, "a target class is outside 0..%lld, the model's output classes",
			 (long long)shape_numel(&p->nodes[p->nnodes - 1].out) - 1);
		return -1;
	}
	*loss = 0;
	*correct = 0;
	for (int mb = 0; mb < pp->k; mb++) {
		/* a mean loss: the micro-batches' means weighted by their sizes */
		*loss += p->train.reduction == RED_SUM ? pp->loss[mb] : pp->loss[mb] * pp->size[mb] / n;
		*correct += pp->correct[mb];
	}
	return 0;
}

double pipe_idle(const struct pipe *pp, int d)
{
	return pp->wall > 0 ? 1.0 - pp->busy[d] / pp->wall : 0;
}

void pipe_free(struct pipe *pp)
{
	pthread_mutex_lock(&pp->mu);
	pp->quit = true;
	pthread_cond_broadcast(&pp->cv);
	pthread_mutex_unlock(&pp->mu);
	for (int d = 0; d < pp->ndev; d++)
		if (pp->started[d])
			pthread_join(pp->th[d], NULL);
	pthread_mutex_destroy(&pp->mu);
	pthread_cond_destroy(&pp->cv);
}
