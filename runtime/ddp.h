/* ddp.h: DistributedDataParallel over the comm layer.
 * Gradients live in one region laid out in reverse execution order, so the
 * plan's buckets are contiguous ranges of it, completed in order as the
 * backward pass runs.  Each bucket's all-reduce starts the moment the
 * backward of its last layer is done and runs on the comm thread while
 * the backward goes on; ddp_finish waits for them all.  Written once
 * against comm.h, whatever the engine.
 */
#ifndef DDP_H
#define DDP_H
#include <stdbool.h>

#include "compiler/ir.h"
#include "runtime/comm.h"

struct ddp {
	const struct plan *p;
	struct comm *c;
	float *grads;            /* the gradient region (trainable elements) */
	enum comm_op op;         /* AVG as PyTorch; SUM for global_batch with a sum loss */
	int nb;
	int *trigger;            /* per bucket: the node whose backward completes it */
	struct comm_work **work; /* per bucket, NULL until started */
	bool enabled;            /* false on micro-steps that only accumulate */
	double wait_s;           /* time spent in ddp_finish, for the report */
};

int ddp_init(struct ddp *d, const struct plan *p, struct comm *c, float *grads, enum comm_op op, char *err, size_t errlen);
/* The executor's hook after each layer's backward. */
void ddp_after_backward(void *ctx, int node);
/* Start what has not started, wait for everything: 0 or -1 with err. */
int ddp_finish(struct ddp *d, char *err, size_t errlen);
/* Every rank gets rank 0's copy of n floats at buf (parameters, buffers). */
int ddp_broadcast(struct ddp *d, float *buf, int64_t n, char *err, size_t errlen);
void ddp_free(struct ddp *d);
#endif
