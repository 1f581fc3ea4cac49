/* ckpt.h: training checkpoints that survive faults.
 * A checkpoint directory holds one folder per save (step-00000123/) with
 * weights.safetensors (PyTorch names), optimizer.safetensors (the state
 * planes), state.json (epoch, position in it, step, model hash, world size)
 * and manifest.txt (size and CRC-32 of each file), plus `latest`, naming
 * the newest complete folder.  A save writes a temporary folder, fsyncs
 * every file, renames it into place, fsyncs the directory and only then
 * replaces `latest` the same way: a kill at any moment leaves the previous
 * checkpoint loadable.  The two newest saves are kept.
 */
#ifndef CKPT_H
#define CKPT_H
#include <stddef.h>
#include <stdint.h>

#include "compiler/ir.h"

struct ckpt_state {
	int64_t epoch;  /* the epoch in progress, from 1 */
	int64_t batch;  /* micro-batches of it already consumed */
	int64_t step;   /* optimizer steps done */
	int world;
	int64_t micro;  /* samples per micro-batch per rank */
};

/* Save params (the unsharded layout) and the optimizer's k planes of
 * `trainable` floats. */
int ckpt_save(const char *dir, const struct plan *p, const float *params, const float *optim, int64_t trainable, int k,
	      const struct ckpt_state *st, char *err, size_t errlen);
/* Load the newest complete checkpoint in dir, checking every file's size
 * and checksum and the model (the caller checks the world size). */
int ckpt_load(const char *dir, const struct plan *p, float *params, float *optim, int64_t trainable, int k,
	      struct ckpt_state *st, char *err, size_t errlen);
/* A hash of the model and settings that ran, independent of the world size
 * and of the settings a resumed run may change (steps, epochs, logging). */
uint64_t ckpt_model_hash(const struct plan *p);
#endif
