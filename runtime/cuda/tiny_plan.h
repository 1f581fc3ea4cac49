/* tiny_plan.h: choosing and building the one-block training step (tiny.h). */
#ifndef TINY_PLAN_H
#define TINY_PLAN_H
#include "compiler/ir.h"
#include "runtime/cuda/tiny.h"

struct exec;

/* NULL when the plan's step can run as one block at this world size,
 * micro-batch count and batch; else why not (for the log). */
const char *tiny_refusal(const struct plan *p, int world, int accum, int64_t batch);
/* Fill P's layers, loss and optimizer pointers from e's memory for a batch
 * of `batch`, and the ranges kept in shared memory; the caller sets the
 * data (ybuf, yw), the step words and P->cfg first.  loss_w: where the
 * step reads the plan's pos_weight or class weights (the GPU's copy; the
 * plan's own on the host), unread for a plan without them. */
void tiny_build(struct tiny_prog *P, struct exec *e, int64_t batch, const float *loss_w);
#endif
