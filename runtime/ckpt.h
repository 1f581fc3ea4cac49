/* ckpt.h: training checkpoints that survive faults.
 * A checkpoint directory holds one folder per save (step-00000123/) with
 * weights.safetensors (PyTorch names), optimizer.safetensors (the state
 * planes), state.json (epoch, position in it, step, model hash, world size,
 * reduce_on_plateau's state)
 * and manifest.txt (size and CRC-32 of each file), plus `latest`, naming
 * the newest complete folder.  A save writes a temporary folder, fsyncs
 * every file, renames it into place, fsyncs the directory and only then
 * replaces `latest` the same way: a kill at any moment leaves the previous
 * checkpoint loadable.  The two newest saves are kept.
 */
#ifndef CKPT_H
#define CKPT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler/ir.h"
#include "runtime/sched.h"

struct ckpt_state {
	int64_t epoch;  /* the epoch in progress, from 1 */
	int64_t batch;  /* micro-batches of it already consumed */
	int64_t step;   /* optimizer steps done */
	int world;
	int64_t micro;  /* samples per micro-batch per rank */
	double loss_sum, loss_n; /* the epoch in progress so far, over every rank: summed per-sample loss, samples */
	bool philox_order; /* the run shuffles in earlier trainc's order (sampler.h's SAMPLER_PHILOX), not torch.randperm's */
	struct sched_plateau plateau; /* reduce_on_plateau's state (its plan's alone: kept and read for it only) */
	int64_t cycle;     /* one_cycle's total_steps as the run that began it fixed them; 0 where unknown (a
			    * checkpoint written before they were kept, or another scheduler) */
};

/* Save params (the unsharded layout) and the optimizer's k planes of
 * `trainable` floats. */
int ckpt_save(const char *dir, const struct plan *p, const float *params, const float *optim, int64_t trainable, int k,
	      const struct ckpt_state *st, char *err, size_t errlen);
/* The checks of ckpt_load without loading: complete, this model's; the
 * position in st. */
int ckpt_check(const char *dir, const struct plan *p, struct ckpt_state *st, char *err, size_t errlen);
/* Load the newest complete checkpoint in dir, checking every file's size
 * and checksum and the model (the caller checks the world size).  rank:
 * whose buffers a sharded checkpoint gives (each rank saved its own batch
 * statistics; a rank the checkpoint did not have takes rank 0's). */
int ckpt_load(const char *dir, const struct plan *p, int rank, float *params, float *optim, int64_t trainable, int k,
	      struct ckpt_state *st, char *err, size_t errlen);
/* Sharded checkpoints (FSDP): every rank writes its own shard file into the
 * same temporary folder, then rank 0 commits it.  The calls, in order, with
 * a barrier between them: ckpt_shard_begin (rank 0), ckpt_shard_write
 * (every rank), ckpt_shard_commit (rank 0).  ckpt_load reads either kind
 * and gives the unsharded layout, so a sharded checkpoint reshards to any
 * world size. */
int ckpt_shard_begin(const char *dir, int64_t step, char *err, size_t errlen);
/* shard (total) and optim (k planes of total) are the rank's FSDP arrays,
 * unit u's part at at[u]; rank 0 also writes the buffers from params_at. */
int ckpt_shard_write(const char *dir, const struct plan *p, int64_t step, int rank, int world, const float *shard,
		     const float *optim, int64_t total, const int64_t *at, float *(*buffer)(void *ctx, int k), void *ctx,
		     char *err, size_t errlen);
/* Remove a sharded checkpoint's temporary folder after a failed write (rank 0). */
void ckpt_shard_abort(const char *dir, int64_t step);
int ckpt_shard_commit(const char *dir, const struct plan *p, const struct ckpt_state *st, char *err, size_t errlen);
#endif
