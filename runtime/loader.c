/* loader.c: double-buffered batch prefetching on one thread (see loader.h).
 * Each slot cycles FREE -> (filled by the loader thread) -> READY -> (taken
 * by loader_next) -> HELD -> (loader_release) -> FREE.  Both sides walk the
 * slots in the same alternating order, so batch k always sits in slot k mod 2
 * and no queue is needed.  The consumer counts batches itself from the
 * sampler's num_batches, so it only ever waits for a batch that is coming;
 * the wait is bounded anyway, on the monotonic clock.
 * Does not: fill with more than one thread; filling runs outside the lock,
 * on the one slot the loader thread owns at that moment.
 * Invariant: a slot's buffers are written only while it is FREE and owned by
 * the loader thread, and read only while it is HELD.
 */
#include "runtime/loader.h"
#include "runtime/kern.h"
#include "runtime/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *produce(void *arg)
{
	struct loader *l = arg;
	kern_unpin_this_thread(); /* not only the main thread's CPU */
	struct sampler *s = l->s;
	struct sampler_pos pos = l->fill_pos;
	for (;;) {
		if (s->num_batches == 0)
			break;
		if (pos.batch >= s->num_batches) {
			pos.epoch += pos.batch / s->num_batches;
			pos.batch %= s->num_batches;
		}
		if (pos.epoch >= l->end_epoch)
			break;
		int slot = l->fill_slot;
		pthread_mutex_lock(&l->mu);
		while (!l->stop && l->state[slot] != SLOT_FREE)
			pthread_cond_wait(&l->cv, &l->mu);
		int stop = l->stop;
		pthread_mutex_unlock(&l->mu);
		if (stop)
			break;

		struct sampler_pos here = pos;
		int b = sampler_next(s, &pos, l->idx);
		if (dataset_fill(l->ds, l->idx, b, l->x[slot], l->y[slot]) != 0) {
			int64_t bad = -1;
			for (int j = 0; j < b; j++)
				if (l->idx[j] < 0 || l->idx[j] >= l->ds->n)
					bad = l->idx[j];
			pthread_mutex_lock(&l->mu);
			util_fail(l->err, sizeof l->err, "data loader: epoch %lld batch %lld: sample index %lld is outside the "
			     "dataset's %lld samples; the sampler was made for a different dataset",
			     (long long)here.epoch, (long long)here.batch, (long long)bad, (long long)l->ds->n);
			l->failed = 1;
			pthread_cond_broadcast(&l->cv);
			pthread_mutex_unlock(&l->mu);
			break;
		}
		pthread_mutex_lock(&l->mu);
		l->size[slot] = b;
		l->where[slot] = here;
		l->state[slot] = SLOT_READY;
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		l->fill_slot = slot ^ 1;
	}
	return NULL;
}

int loader_start(struct loader *l, const struct dataset *ds, struct sampler *s, float *x[2], void *y[2],
		 struct sampler_pos start, int64_t end_epoch, int timeout_ms, char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	if (!x[0] || !x[1] || !y[0] || !y[1] || x[0] == x[1] || y[0] == y[1])
		return util_fail(err, errlen, "data loader: needs two distinct x and two distinct y buffers");
	if (start.epoch < 0 || start.batch < 0)
		return util_fail(err, errlen, "data loader: start position epoch %lld batch %lld is negative",
			    (long long)start.epoch, (long long)start.batch);
	if (start.batch > s->num_batches)
		return util_fail(err, errlen, "data loader: start batch %lld is past the %lld batches of an epoch",
			    (long long)start.batch, (long long)s->num_batches);
	if (s->n != ds->n)
		return util_fail(err, errlen, "data loader: sampler covers %lld samples but the dataset has %lld",
			    (long long)s->n, (long long)ds->n);
	l->ds = ds;
	l->s = s;
	l->x[0] = x[0];
	l->x[1] = x[1];
	l->y[0] = y[0];
	l->y[1] = y[1];
	l->fill_pos = start;
	l->take_pos = start;
	l->end_epoch = end_epoch;
	l->timeout_ms = timeout_ms > 0 ? timeout_ms : LOADER_DEFAULT_TIMEOUT_MS;
	l->epoch = -1;
	l->batch = -1;
	l->idx = malloc((size_t)s->batch * sizeof *l->idx);
	if (!l->idx)
		return util_fail(err, errlen, "data loader: out of memory for %d indices", s->batch);

	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);
	if (rc == 0)
		rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0) {
		free(l->idx);
		l->idx = NULL;
		return util_fail(err, errlen, "data loader: pthread_cond_init: %s", strerror(rc));
	}
	pthread_mutex_init(&l->mu, NULL);
	rc = pthread_create(&l->thread, NULL, produce, l);
	if (rc != 0) {
		pthread_cond_destroy(&l->cv);
		pthread_mutex_destroy(&l->mu);
		free(l->idx);
		l->idx = NULL;
		return util_fail(err, errlen, "data loader: cannot start its thread: %s; raise the process or thread limit",
			    strerror(rc));
	}
	l->running = 1;
	return 0;
}

void loader_release(struct loader *l)
{
	if (!l->holding)
		return;
	int slot = l->take_slot ^ 1; /* loader_next already moved on */
	pthread_mutex_lock(&l->mu);
	l->state[slot] = SLOT_FREE;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	l->holding = 0;
}

int loader_next(struct loader *l, float **x, void **y, int *b)
{
	loader_release(l);
	if (!l->running) {
		util_fail(l->err, sizeof l->err, "data loader: loader_next on a loader that is not running");
		return -1;
	}
	int64_t nb = l->s->num_batches;
	if (l->take_pos.epoch >= l->end_epoch)
		return 0;
	if (l->take_pos.batch >= nb) {
		l->take_pos.epoch++;
		l->take_pos.batch = 0;
		return 0;
	}
	int slot = l->take_slot;
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += l->timeout_ms / 1000;
	deadline.tv_nsec += (long)(l->timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&l->mu);
	int rc = 0;
	while (!l->failed && l->state[slot] != SLOT_READY && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&l->cv, &l->mu, &deadline);
	int ready = l->state[slot] == SLOT_READY;
	if (ready)
		l->state[slot] = SLOT_HELD;
	else if (!l->failed)
		/* under the lock: the loader thread may yet fail and write err too */
		util_fail(l->err, sizeof l->err, "data loader: no batch for epoch %lld batch %lld within %d ms; "
		     "the loader thread is stuck (slow storage or an overloaded machine?)",
		     (long long)l->take_pos.epoch, (long long)l->take_pos.batch, l->timeout_ms);
	pthread_mutex_unlock(&l->mu);
	if (!ready)
		return -1;
	*x = l->x[slot];
	*y = l->y[slot];
	*b = l->size[slot];
	l->epoch = l->where[slot].epoch;
	l->batch = l->where[slot].batch;
	l->holding = 1;
	l->take_slot = slot ^ 1;
	l->take_pos.batch++;
	return 1;
}

void loader_stop(struct loader *l)
{
	if (!l->running)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l->idx);
	l->idx = NULL;
	l->running = 0;
	l->holding = 0;
}
