/* fsdp.h: FullyShardedDataParallel over the comm layer, driven by the plan.
 * Each unit's parameters are one flat buffer, padded to a multiple of the
 * world size; a rank keeps its 1/N shard of the parameters, gradients and
 * optimizer state.  Before a unit's forward (and again before its backward
 * under FULL_SHARD) its shards are all-gathered into a buffer from a small
 * pool, the next unit's gather is started ahead, the gathered copy is
 * released after use, and right after a unit's backward its gradients are
 * reduce-scattered to the shards.  The root unit, whose layers open and
 * close the model, stays gathered from the start of the forward to the end
 * of the backward, as PyTorch's root does.  SHARD_GRAD_OP keeps every unit
 * gathered from forward to backward.  Written once against comm.h.
 */
#ifndef FSDP_H
#define FSDP_H
#include <stdbool.h>
#include <stdint.h>

#include "compiler/ir.h"
#include "runtime/comm.h"
#include "runtime/exec.h"
#include "runtime/optim.h"

/* Where the shards live when not in host memory: a device's allocator,
 * its stream-ordered zero, copy and sum on the compute stream, and
 * synchronous copies to and from the host (done after the stream's work).
 * Collectives are then waited for by ordering that stream after them
 * (comm_wait_on), so nothing in a step blocks the host. */
struct fsdp_dev {
	void *(*alloc)(int64_t bytes); /* zeroed; NULL when out of memory */
	void (*free)(void *p);
	void (*zero)(void *ctx, float *p, int64_t n);
	void (*copy)(void *ctx, float *dst, const float *src, int64_t n);
	void (*add)(void *ctx, float *dst, const float *src, int64_t n);
	int (*to_host)(void *ctx, void *dst, const void *src, size_t bytes);
	int (*from_host)(void *ctx, void *dst, const void *src, size_t bytes);
	/* optional, for ranks of several devices whose layers read and write
	 * the units on the first: order the first device's stream after every
	 * device's queued work before a collective starts (join), and every
	 * device's stream after the first's once a collective is waited for (fork) */
	void (*join)(void *ctx);
	void (*fork)(void *ctx);
	void *stream;
	void *ctx;
};

struct fsdp_segment {
	int64_t at, n; /* a run of trainable elements in the shard arrays */
};

struct fsdp {
	const struct plan *p;
	struct comm *c;
	struct exec *e;
	const struct fsdp_dev *dev;  /* NULL: host memory */
	int world, rank, nu;
	bool keep_gathered;          /* SHARD_GRAD_OP */
	enum comm_op op;             /* of the reduce-scatter: COMM_AVG as PyTorch */
	int64_t total;               /* elements of this rank's shards, all units */
	int64_t *at;                 /* (nu) offset of unit u's shard in the arrays below */
	float *shard;                /* (total) parameters */
	float *grad;                 /* (total) gradients */
	float *stage;                /* (total) reduce-scatter results of this micro-step; NULL where a step has one (plan's fsdp_stage): they land in grad */
	float *optim;                /* (k, total) optimizer state */
	int nslots;
	int64_t slot_elems;
	float **slot_p, **slot_g;    /* (nslots) gathered parameters, unsharded gradients */
	int *slot_p_unit, *slot_g_unit;
	float *root_p, *root_g;      /* the root unit's own buffers */
	int *p_slot, *g_slot;        /* (nu) slot held, -1 none, -2 the root buffers */
	struct comm_work **gather, **scatter; /* (nu) in flight */
	bool *fresh;                 /* (nu) the next reduce-scatter starts the step's sum */
	int *order;                  /* units by first layer */
	struct fsdp_segment *seg;
	int nseg;
	double wait_s;               /* time blocked on collectives */
	int64_t peak_bytes;          /* everything fsdp allocated per rank */
	char err[512];
	bool failed;
};

/* dev: where the shards live (NULL: host memory, the CPU backend). */
int fsdp_init(struct fsdp *f, const struct plan *p, struct comm *c, struct exec *e, const struct fsdp_dev *dev, char *err,
	      size_t errlen);
/* Initialise every unit as PyTorch would (each rank keeps its shard);
 * 0, or -1 with f->err. */
int fsdp_init_params(struct fsdp *f, uint64_t seed);
/* Take shards (and buffers) from an unsharded layout: weights from a file
 * or a checkpoint; optim_full may be NULL. */
int fsdp_load_full(struct fsdp *f, const float *params_full, const float *optim_full);
/* Gather the unsharded layout: every rank takes part; rank 0 gets the
 * parameters (and, with with_optim, the optimizer state), others pass NULL. */
int fsdp_gather_full(struct fsdp *f, float *params_full, float *optim_full, bool with_optim);
/* Drop every gathered copy (after evaluation, before parameters change). */
void fsdp_release_all(struct fsdp *f);
/* The executor's hook. */
void fsdp_phase(void *ctx, int node, int phase);
/* Before a step's first micro-batch. */
void fsdp_begin_step(struct fsdp *f);
/* After a micro-batch's backward: wait for the reduce-scatters, add them. */
int fsdp_finish_micro(struct fsdp *f, char *err, size_t errlen);
/* The optimizer on this rank's shards. */
void fsdp_optim_step(struct fsdp *f, const struct optim_cfg *oc, int64_t step, double lr);
/* Sum of squares of this rank's gradient shards (for clipping). */
double fsdp_grad_sumsq(struct fsdp *f);
void fsdp_scale_grads(struct fsdp *f, float coef);
void fsdp_free(struct fsdp *f);
#endif
