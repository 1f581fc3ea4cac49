/* loader.h: a thread that fills the next batch while the current one trains.
 * Two caller-provided buffers alternate: the loader thread fills one while
 * the training thread holds the other (producer / consumer over a mutex and
 * a condition variable).  Batches come in sampler order from a start
 * position (for resume) up to an end epoch; loader_next reports each epoch's
 * end once, then goes on with the next epoch, which is already prefetched.
 * Does not: allocate per batch (one index buffer at start), touch the
 * buffers the consumer holds, or wait without bound.
 * Invariant: batches are delivered in exactly the order sampler_next gives,
 * each equal to what dataset_fill writes for its indices.
 */
#ifndef LOADER_H
#define LOADER_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/dataset.h"
#include "runtime/sampler.h"

#define LOADER_DEFAULT_TIMEOUT_MS 60000

enum loader_slot_state { SLOT_FREE, SLOT_READY, SLOT_HELD };

struct loader {
	const struct dataset *ds;
	struct sampler *s;        /* used by the loader thread alone until loader_stop */
	float *x[2];              /* each (batch, sample shape...) */
	void *y[2];               /* each (batch) int32 or (batch, target shape...) float */
	int64_t *idx;             /* (batch) the loader thread's indices */
	enum loader_slot_state state[2];
	int size[2];              /* samples in each ready slot */
	struct sampler_pos where[2];
	int fill_slot, take_slot; /* next slot each side uses; both alternate 0, 1, 0, ... */
	struct sampler_pos fill_pos, take_pos;
	int64_t end_epoch;
	int timeout_ms;
	int stop, failed, running, holding;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int64_t epoch, batch;     /* position of the batch last returned by loader_next */
	char err[512];            /* why loader_next returned -1 */
};

/* Start the loader thread over epochs start.epoch .. end_epoch-1, beginning
 * at batch start.batch.  x[i] must hold batch * ds->sample_numel floats and
 * y[i] dataset_target_bytes(ds, batch) bytes; the loader owns s until
 * loader_stop.  timeout_ms bounds each wait for a batch (0: the default).
 * Returns 0, or -1 with a message in err. */
int loader_start(struct loader *l, const struct dataset *ds, struct sampler *s, float *x[2], void *y[2],
		 struct sampler_pos start, int64_t end_epoch, int timeout_ms, char *err, size_t errlen);

/* Take the next batch: 1 with *x, *y, *b set and l->epoch, l->batch telling
 * which; 0 at the end of an epoch (once per epoch, no batch; the next call
 * goes on with the next epoch) and for every call after the last epoch; -1 on
 * failure or timeout, with the message in l->err.  Releases a batch still
 * held. */
int loader_next(struct loader *l, float **x, void **y, int *b);

/* Hand the batch taken by loader_next back for refilling. */
void loader_release(struct loader *l);

/* Stop and join the thread; safe to call twice and after a failed start. */
void loader_stop(struct loader *l);

#endif
