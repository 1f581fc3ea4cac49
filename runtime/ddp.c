/* ddp.c: bucketed, overlapped gradient all-reduce.
 * A bucket is complete once the backward of the earliest layer owning one
 * of its parameters has run, since backward visits layers in reverse; the
 * hook starts it then.  Buckets start in the same order on every rank
 * because every rank runs the same plan.
 */
#include "runtime/ddp.h"
#include "runtime/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ddp_init(struct ddp *d, const struct plan *p, struct comm *c, float *grads, enum comm_op op, char *err, size_t errlen)
{
	memset(d, 0, sizeof *d);
	d->p = p;
	d->c = c;
	d->grads = grads;
	d->op = op;
	d->nb = p->nbuckets;
	d->enabled = true;
	d->trigger = calloc((size_t)(d->nb ? d->nb : 1), sizeof *d->trigger);
	d->work = calloc((size_t)(d->nb ? d->nb : 1), sizeof *d->work);
	if (!d->trigger || !d->work) {
		snprintf(err, errlen, "out of memory for %d DDP buckets", d->nb);
		return -1;
	}
	for (int b = 0; b < d->nb; b++)
		d->trigger[b] = p->params[p->buckets[b].first_param].node;
	return 0;
}

static void start(struct ddp *d, int b)
{
	const struct bucket *bk = &d->p->buckets[b];
	d->work[b] = comm_all_reduce(d->c, d->grads + bk->offset, bk->numel, d->op);
}

void ddp_after_backward(void *ctx, int node)
{
	struct ddp *d = ctx;
	if (!d->enabled)
		return;
	for (int b = 0; b < d->nb; b++)
		if (!d->work[b] && d->trigger[b] == node)
			start(d, b);
}

int ddp_finish(struct ddp *d, char *err, size_t errlen)
{
	double t0 = util_now();
	int rc = 0;
	for (int b = 0; b < d->nb; b++) {
		if (!d->work[b])
			start(d, b); /* parameters unused by this step's graph */
		if (comm_wait(d->work[b], err, errlen) != 0 && rc == 0)
			rc = -1;
		d->work[b] = NULL;
	}
	d->wait_s += util_now() - t0;
	return rc;
}

int ddp_broadcast(struct ddp *d, float *buf, int64_t n, char *err, size_t errlen)
{
	if (n <= 0)
		return 0;
	return comm_wait(comm_broadcast(d->c, buf, n, 0), err, errlen);
}

void ddp_free(struct ddp *d)
{
	free(d->trigger);
	free(d->work);
	memset(d, 0, sizeof *d);
}
