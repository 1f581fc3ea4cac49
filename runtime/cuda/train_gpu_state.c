/* train_gpu_state.c: parameters and optimizer state in and out of the
 * GPUs for the GPU trainer: PyTorch's initialisation, --init weights,
 * --resume checkpoints (resharded for FSDP), DDP's broadcast from rank 0,
 * checkpoints (whole from rank 0, or a shard per rank with FSDP) and the
 * full state dict gathered for the weights file.  The host copies in
 * struct gt are the only staging; nothing here runs during a step.
 */
#include "runtime/cuda/train_gpu_impl.h"

static int upload_state(struct gt *t)
{
	struct exec *e = &t->e;
	int k = t->p->train.optim.state_per_param;
	for (int d = 0; d < t->ngpu; d++) {
		if (tg_put_on(t, d, exec_dev_trainables(e, d), t->h_params + e->t_lo[d], (size_t)e->t_n[d] * 4) != 0 ||
		    tg_put_on(t, d, exec_dev_buffers(e, d), t->h_params + e->b_lo[d], (size_t)e->b_n[d] * 4) != 0)
			return -1;
		for (int j = 0; j < k; j++)
			if (tg_put_on(t, d, exec_dev_optim(e, d) + j * exec_dev_stride(e, d), t->h_optim + j * e->trainable + e->t_lo[d],
				   (size_t)e->t_n[d] * 4) != 0)
				return -1;
	}
	return tg_put(t, &t->w->step, &t->at.step, sizeof t->at.step);
}

static int download_state(struct gt *t, bool with_optim)
{
	struct exec *e = &t->e;
	int k = t->p->train.optim.state_per_param;
	if (tg_wait(t, "the step before saving") != 0)
		return -1;
	for (int d = 0; d < t->ngpu; d++) {
		if (tg_get_on(t, d, t->h_params + e->t_lo[d], exec_dev_trainables(e, d), (size_t)e->t_n[d] * 4) != 0 ||
		    tg_get_on(t, d, t->h_params + e->b_lo[d], exec_dev_buffers(e, d), (size_t)e->b_n[d] * 4) != 0)
			return -1;
		for (int j = 0; with_optim && j < k; j++)
			if (tg_get_on(t, d, t->h_optim + j * e->trainable + e->t_lo[d], exec_dev_optim(e, d) + j * exec_dev_stride(e, d),
				   (size_t)e->t_n[d] * 4) != 0)
				return -1;
	}
	return 0;
}

int tg_load_state(struct gt *t)
{
	const struct plan *p = t->p;
	const struct train_opts *o = t->o;
	struct exec *e = &t->e;
	int k = p->train.optim.state_per_param;
	struct param_init pi;
	exec_param_init_begin(&pi, p->train.seed);
	for (int j = 0; j < p->nparams; j++)
		exec_init_param(p, j, &pi, t->h_params + p->params[j].offset);
	optim_state_init(&t->oc, (struct optim_state_view){ t->h_optim, e->trainable }, e->trainable);
	if (t->sharded && k > 0) {
		/* the optimizer state of this rank's shards; the shards themselves
		 * come from the model drawn above (fsdp_load_full below) */
		float *st = calloc((size_t)(t->fsdp.total * k) + 1, 4);
		if (!st)
			return util_fail(t->err, sizeof t->err, "out of memory");
		optim_state_init(&t->oc, (struct optim_state_view){ st, t->fsdp.total }, t->fsdp.total);
		int r = tg_put(t, t->fsdp.optim, st, (size_t)(t->fsdp.total * k) * 4);
		free(st);
		if (r != 0)
			return -1;
	}
	int rc = train_load_given(p, o, "--gpus", t->world, t->micro, &t->smp, t->h_params, t->h_optim, e->trainable, &t->at, t->err,
				  sizeof t->err);
	if (o->resume) { /* the epoch's sums so far, of every rank, count once: on rank 0 */
		t->ep_loss = t->rank == 0 ? t->at.loss_sum : 0;
		t->ep_n = t->rank == 0 ? t->at.loss_n : 0;
	}
	if (rc != 0)
		return rc;
	if (t->sharded) { /* shards of the loaded state; the step counter */
		if (fsdp_load_full(&t->fsdp, t->h_params, o->resume ? t->h_optim : NULL) != 0)
			return util_fail(t->err, sizeof t->err, "%s", t->fsdp.err);
		return tg_put(t, &t->w->step, &t->at.step, sizeof t->at.step);
	}
	if (upload_state(t) != 0)
		return -1;
	if (t->comm) { /* rank 0's parameters and buffers everywhere, as DDP's constructor */
		launch_wait_begin();
		if (!e->split)
			rc = comm_wait(comm_broadcast(t->comm, e->params, p->unsharded_elems, 0), t->err, sizeof t->err);
		for (int d = 0; e->split && d < t->ngpu && rc == 0; d++)
			rc = comm_wait(comm_broadcast(t->dcomm[d], e->dparams[d], exec_dev_buffer_at(e, d) + e->b_n[d], 0), t->err, sizeof t->err);
		launch_wait_end();
	}
	return rc;
}

/* DDP (broadcast_buffers=True) gives every rank rank 0's buffers (batch
 * norm's running statistics) at each forward; evaluation is where another
 * rank's own would show. */
int tg_broadcast_buffers(struct gt *t)
{
	struct exec *e = &t->e;
	int rc = 0;
	launch_wait_begin();
	for (int d = 0; d < t->ngpu && rc == 0; d++)
		if (e->b_n[d] > 0)
			rc = comm_wait(comm_broadcast(e->split ? t->dcomm[d] : t->comm, exec_dev_buffers(e, d), e->b_n[d], 0), t->err,
				       sizeof t->err);
	launch_wait_end();
	return rc;
}

static float *host_buffer_at(void *ctx, int k)
{
	struct gt *t = ctx;
	return t->h_buffers + (t->p->params[k].offset - t->e.buffer_start);
}

/* tg_reduce_host of n doubles, in turns of what its device buffer holds */
static int sum_ranks(void *ctx, double *v, int n)
{
	struct gt *t = ctx;
	enum { TURN = sizeof t->w->sums / sizeof t->w->sums[0] };
	for (int i = 0; i < n; i += TURN)
		if (tg_reduce_host(t, v + i, n - i < TURN ? n - i : TURN) != 0)
			return -1;
	return 0;
}

/* Whether every rank's part of a checkpoint was written: 0, TRAIN_CKPT_IO
 * on every rank when some rank's was not (one of them says why), -1 when
 * the ranks failed. */
static int ckpt_agree(struct gt *t, int rc, bool shards)
{
	return train_ckpt_agree(rc, t->rank, t->world, shards, sum_ranks, t, &t->ckpt_speak, t->err, sizeof t->err);
}

/* FSDP: every rank writes its shard (copied to the host), rank 0 commits. */
static int sharded_checkpoint(struct gt *t, const char *dir)
{
	const struct plan *p = t->p;
	int k = p->train.optim.state_per_param;
	int64_t total = t->fsdp.total;
	float *shard = malloc((size_t)total * 4 + 4), *optim = malloc((size_t)(total * k) * 4 + 4);
	int rc = !shard || !optim ? util_fail(t->err, sizeof t->err, "out of memory copying the shards") : 0;
	if (rc == 0 && (tg_wait(t, "the step before saving") != 0 || tg_get(t, shard, t->fsdp.shard, (size_t)total * 4) != 0 ||
			(k > 0 && tg_get(t, optim, t->fsdp.optim, (size_t)(total * k) * 4) != 0) ||
			tg_get(t, t->h_buffers, t->e.params, (size_t)(p->unsharded_elems - t->e.buffer_start) * 4) != 0))
		rc = -1;
	t->at.micro = t->micro;
	double v = rc != 0; /* a rank that could not copy its shard out stops the run */
	if (tg_reduce_host(t, &v, 1) != 0 || v != 0) {
		free(shard), free(optim);
		return rc != 0 ? -1 : util_fail(t->err, sizeof t->err, "another rank could not prepare its shard");
	}
	rc = t->rank == 0 ? ckpt_shard_begin(dir, t->at.step, t->err, sizeof t->err) : 0;
	if ((rc = ckpt_agree(t, rc, false)) == 0)
		rc = ckpt_agree(t,
				ckpt_shard_write(dir, p, t->at.step, t->rank, t->world, shard, optim, total, t->fsdp.at, host_buffer_at, t,
						 t->err, sizeof t->err),
				true);
	free(shard), free(optim);
	if (rc == 0 && t->rank == 0) {
		rc = ckpt_shard_commit(dir, p, &t->at, t->err, sizeof t->err);
		if (rc == 0) {
			train_progress_break(t->tty);
			printf("Checkpoint: step %lld saved to %s (%d shards)\n", (long long)t->at.step, dir, t->world);
			fflush(stdout);
		}
		rc = ckpt_agree(t, rc, false);
	} else if (rc == 0) {
		rc = ckpt_agree(t, 0, false);
	}
	if (rc == TRAIN_CKPT_IO && t->rank == 0)
		ckpt_shard_abort(dir, t->at.step);
	return rc;
}

/* The unsharded parameters (and optimizer state) in the host copies, on
 * rank 0; every rank takes part. */
int tg_full_state(struct gt *t, bool with_optim)
{
	if (!t->sharded)
		return download_state(t, with_optim);
	if (tg_wait(t, "the step before saving") != 0)
		return -1;
	if (fsdp_gather_full(&t->fsdp, t->rank == 0 ? t->h_params : NULL, t->rank == 0 ? t->h_optim : NULL, with_optim) != 0)
		return util_fail(t->err, sizeof t->err, "%s", t->fsdp.err);
	return 0;
}

/* Rank 0 writes, every rank waits at the barrier: the seed's protocol.
 * With FSDP each rank writes its own shard instead. */
int tg_checkpoint(struct gt *t, const char *dir)
{
	if (t->saved_step == t->at.step && t->at.step > 0)
		return 0; /* checkpoint_every just wrote this step */
	double v[2] = { t->ep_loss, t->ep_n }; /* so that a resumed epoch's average is the whole epoch's */
	if (tg_reduce_host(t, v, 2) != 0)
		return -1;
	t->at.loss_sum = v[0];
	t->at.loss_n = v[1];
	int rc;
	if (t->sharded) {
		rc = sharded_checkpoint(t, dir);
	} else {
		if (download_state(t, true) != 0)
			return -1;
		t->at.micro = t->micro;
		rc = t->rank == 0 ? train_ckpt_save(dir, t->p, t->h_params, t->h_optim, t->e.trainable, &t->at, t->tty, t->err, sizeof t->err)
				  : 0;
		rc = ckpt_agree(t, rc, false);
	}
	if (rc == 0)
		t->saved_step = t->at.step;
	return rc;
}
