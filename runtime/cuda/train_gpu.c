/* train_gpu.c: one rank trains a plan on its GPU.
 * The static plan is used to the full: both datasets are copied to device
 * memory once; each epoch's DistributedSampler order is uploaded once and
 * every batch is gathered on the device from it, at a position the step
 * itself advances; the lr of every step is computed up front (the
 * scheduler is a closed form) and the optimizer step counter lives on the
 * device.  So a whole optimizer step (gathers, forward, loss, backward, the
 * DDP buckets' NCCL all-reduces on a second stream, clipping, the fused
 * optimizer update, the loss record) has no host inputs and is captured
 * once as a CUDA graph and replayed; only an epoch's short last step runs
 * eagerly.  The host waits only at log intervals, evaluation and
 * checkpoints, and every wait is bounded: a collective that does not end
 * within the job timeout aborts NCCL and fails the run naming this rank.
 * A small model (a chain of linear layers, activations and norms: tiny.h) runs
 * its whole step as one thread block, one kernel per step.
 * With FSDP (FULL_SHARD, SHARD_GRAD_OP) fsdp.c drives the units on device
 * memory: its gathers and reduce-scatters run on the collectives' stream,
 * ordered after the compute stream and waited for by ordering it after
 * them, so a sharded step is captured the same way.
 * Output lines are train.c's, plus the seed's CUDA event timing.
 * A rank of several GPUs (@device) runs each layer on its GPU's stream; a
 * step forks from the first GPU's stream and joins back to it, every GPU
 * updates its own parameters, and DDP keeps one communicator per GPU.
 * A dataset too large for half the free device memory is streamed
 * instead: a loader thread fills host batches that are copied in as each
 * micro-batch starts, and steps run one by one (no graph).
 * parallel.microbatches pipelines a rank's GPUs (GPipe): each micro-batch
 * is cut into chunks with activation copies of their own, all forwards are
 * queued and then all backwards, and the GPUs' streams overlap.
 * FSDP on a rank of several GPUs keeps the rank's units on its first GPU;
 * the others read and write them over peer access, and every collective
 * is ordered after all the rank's streams (fsdp_dev's join and fork).
 * FSDP with micro-batches runs each chunk's reduce-scatters before the
 * next chunk's backward (one host thread queues everything, in order).
 * Copies, waits and data are in train_gpu_data.c, parameters and state in
 * and out in train_gpu_state.c.  Longer than 600 lines: setup, the
 * captured step and the loop read best together.
 */
#include "runtime/cuda/train_gpu_impl.h"

#include <dlfcn.h>

#include "runtime/gpu.h"

uint64_t trainc_cuda_abi(void)
{
	return gpu_abi();
}

int trainc_cuda_probe(int *count, char *err, size_t errlen)
{
	*count = 0;
	cudaError_t r = cudaGetDeviceCount(count);
	if (r != cudaSuccess) {
		*count = 0;
		/* a driver older than the CUDA this library was built with (its
		 * runtime is linked in): the driver's own version says so, where
		 * 0 means no driver at all */
		int drv_v = 0, rt_v = 0;
		if (r == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv_v) == cudaSuccess && drv_v > 0 &&
		    cudaRuntimeGetVersion(&rt_v) == cudaSuccess && drv_v < rt_v)
			return util_fail(err, errlen, "the NVIDIA driver supports CUDA up to %d.%d, and trainc's GPU library was built with "
					 "CUDA %d.%d (cudaGetDeviceCount: %s); update the driver, or rebuild trainc with a CUDA toolkit "
					 "the driver supports", drv_v / 1000, drv_v % 1000 / 10, rt_v / 1000, rt_v % 1000 / 10,
					 cudaGetErrorString(r));
		/* without a driver CUDA says the driver is "insufficient": say what is missing */
		void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
		if (!drv)
			return util_fail(err, errlen, "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded), so no usable CUDA device");
		dlclose(drv);
		return util_fail(err, errlen, "no usable CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(r));
	}
	if (*count == 0)
		return util_fail(err, errlen, "no CUDA device is visible");
	/* the kernels are built for sm_75 and later (runtime/cuda/build.ninja) */
	for (int d = 0; d < *count; d++) {
		struct cudaDeviceProp prop;
		if (cudaGetDeviceProperties(&prop, d) == cudaSuccess && prop.major * 10 + prop.minor < 75)
			return util_fail(err, errlen, "GPU %d (%s) has compute capability %d.%d, and trainc's GPU kernels need 7.5 "
					 "(Turing) or later; hide it with CUDA_VISIBLE_DEVICES", d, prop.name, prop.major, prop.minor);
	}
	return 0;
}

/* ---- the step ---- */

/* The executor's hook after each layer's backward: a bucket whose last
 * layer is done starts its all-reduce on the collectives' stream. */
static void after_backward(void *ctx, int node)
{
	struct gt *t = ctx;
	if (!t->ddp_on)
		return;
	const struct plan *p = t->p;
	for (int b = 0; b < p->nbuckets; b++) {
		if (t->trigger[b] != node)
			continue;
		char err[512];
		int d = p->buckets[b].device;
		float *g = exec_dev_grads(&t->e, d) + (p->buckets[b].offset - t->e.t_lo[d]);
		if (cudaSetDevice(t->base + d) != cudaSuccess || cudaEventRecord(t->ev_bucket[b], cuda_stream_of(&t->e, d)) != cudaSuccess ||
		    cudaStreamWaitEvent(t->cs[d], t->ev_bucket[b], 0) != cudaSuccess ||
		    comm_nccl_all_reduce_on(t->dcomm[d], g, p->buckets[b].numel, COMM_F32, t->op, t->cs[d], err, sizeof err) != 0) {
			snprintf(t->err, sizeof t->err, "rank %d: starting the all-reduce of gradient bucket %d: %s", t->rank, b, err);
			t->e.stop = true;
			return;
		}
		t->issued[d] = true;
	}
}

/* Queue one optimizer step over micro-batches of the given sizes. */
static int issue_step(struct gt *t, const int64_t *sizes, int count)
{
	const struct plan *p = t->p;
	struct exec *e = &t->e;
	struct words *w = t->w;
	cudaStream_t s = t->s;
	if (t->tiny && count == 1 && sizes[0] == t->micro) { /* a small model: the whole step in one kernel */
		kc_tiny_step(s, t->tiny);
		const char *ce = cuda_error(e);
		return ce ? util_fail(t->err, sizeof t->err, "the one-kernel training step: %s", ce) : 0;
	}
	cuda_fork(e); /* every GPU of the rank after the last step's end */
	if (t->sharded) {
		fsdp_begin_step(&t->fsdp);
	} else {
		for (int d = 0; d < t->ngpu; d++) {
			CK(t, cudaSetDevice(t->base + d));
			CK(t, cudaMemsetAsync(exec_dev_grads(e, d), 0, (size_t)e->t_n[d] * 4, cuda_stream_of(e, d)));
		}
		CK(t, cudaSetDevice(t->base));
	}
	memset(t->issued, 0, sizeof t->issued);
	/* a mean loss over a step of micro-batches: each weighs its share of
	 * the step's samples (1 / count when all are full) */
	int64_t total = 0;
	for (int m = 0; m < count; m++)
		total += sizes[m];
	bool share = p->train.global_batch && p->train.reduction != RED_SUM && count > 1;
	e->step_first = 0;
	for (int m = 0; m < count; m++) {
		int64_t b = sizes[m];
		float base_scale = share ? (float)b / (float)total : 1.0f;
		cuda_join(e); /* the last micro-batch's loss read the targets this one overwrites */
		/* a pipeline: chunks of ceil(b / M) (torch.chunk), each in its own
		 * activation copy; all forwards, then all backwards, so each GPU
		 * works on one chunk while the next GPU works on the one before */
		int64_t first[PLAN_MAX_DEVICES * 8], size[PLAN_MAX_DEVICES * 8], c = (b + t->pipe_m - 1) / t->pipe_m;
		int k = 0;
		for (int64_t at = 0; at < b && k < (int)(sizeof first / sizeof *first); at += c, k++) {
			first[k] = at;
			size[k] = b - at < c ? b - at : c;
		}
		char *yb = t->ybuf;
		if (t->dtrain.streamed && tg_feed_streamed(t, b, first, size, k, yb) != 0)
			return -1;
		for (int j = 0; j < k; j++) {
			exec_set_micro_at(j, first[j]); /* each chunk draws its own dropout masks */
			if (!t->dtrain.streamed && tg_feed(t, size[j], yb + (size_t)(first[j] * t->dtrain.yw) * 4) != 0)
				return -1;
			exec_forward_range(e, 1, p->nnodes, (int)size[j], true);
			/* a mean over the micro-batch: each chunk's gradient weighs size / b */
			e->loss_scale = base_scale * (p->train.reduction == RED_SUM ? 1.0f : (float)size[j] / (float)b);
			cuda_loss(e, yb + (size_t)(first[j] * t->dtrain.yw) * 4, (int)size[j], true, &w->step_loss,
				  p->train.reduction == RED_SUM ? 1.0 : (double)size[j], m > 0 || j > 0, NULL);
		}
		e->loss_scale = 1.0f;
		for (int j = 0; j < k; j++) {
			exec_set_micro(j);
			t->ddp_on = t->comm && m == count - 1 && j == k - 1; /* buckets sync after the step's last backward */
			exec_backward(e, (int)size[j]);
			if (e->stop)
				break;
			/* FSDP: this chunk's reduce-scatters, added to the shards'
			 * gradients before the next chunk reuses the buffers */
			if (t->sharded && fsdp_finish_micro(&t->fsdp, t->err, sizeof t->err) != 0) {
				exec_set_micro(0);
				return -1;
			}
		}
		exec_set_micro(0);
		if (e->stop) {
			if (t->sharded)
				snprintf(t->err, sizeof t->err, "rank %d: %s", t->rank, t->fsdp.err);
			return -1;
		}
		e->step_first += b;
	}
	for (int d = 0; d < t->ngpu; d++) /* each GPU's optimizer waits for its last bucket */
		if (t->issued[d]) {
			CK(t, cudaSetDevice(t->base + d));
			CK(t, cudaEventRecord(t->ev_comm[d], t->cs[d]));
			CK(t, cudaStreamWaitEvent(cuda_stream_of(e, d), t->ev_comm[d], 0));
		}
	CK(t, cudaSetDevice(t->base));
	if (p->train.clip_grad_norm > 0) {
		if (t->sharded) { /* the norm is over every rank's shards */
			kc_sumsq(s, t->fsdp.grad, t->fsdp.total, w->partials[0], &w->sumsq);
			if (comm_nccl_all_reduce_on(t->comm, &w->sumsq, 1, COMM_F64, COMM_SUM, s, t->err, sizeof t->err) != 0)
				return -1;
		} else { /* the norm is over every GPU of the rank */
			for (int d = 0; d < t->ngpu; d++) {
				CK(t, cudaSetDevice(t->base + d));
				kc_sumsq(cuda_stream_of(e, d), exec_dev_grads(e, d), e->t_n[d], w->partials[d], &w->dsum[d]);
			}
			CK(t, cudaSetDevice(t->base));
			cuda_join(e);
			for (int d = 0; d < t->ngpu; d++)
				kc_f64_axpy(s, &w->sumsq, &w->dsum[d], 1.0, d > 0);
		}
	}
	cuda_join(e);
	kc_optim_prepare(s, t->oc, t->lr_table, t->steps_per_epoch, &w->step, w->coef);
	cuda_fork(e);
	for (int i = 0; t->sharded && i < t->fsdp.nseg; i++) {
		const struct fsdp_segment *sg = &t->fsdp.seg[i];
		if (p->train.clip_grad_norm > 0 && i == 0)
			kc_clip(s, t->fsdp.grad, t->fsdp.total, &w->sumsq, p->train.clip_grad_norm);
		kc_optim_apply(s, t->oc, w->coef, t->fsdp.shard + sg->at, t->fsdp.grad + sg->at, t->fsdp.optim + sg->at, t->fsdp.total, sg->n);
	}
	for (int d = 0; !t->sharded && d < t->ngpu; d++) {
		CK(t, cudaSetDevice(t->base + d));
		cudaStream_t sd = cuda_stream_of(e, d);
		if (p->train.clip_grad_norm > 0)
			kc_clip(sd, exec_dev_grads(e, d), e->t_n[d], &w->sumsq, p->train.clip_grad_norm);
		kc_optim_apply(sd, t->oc, w->coef, exec_dev_trainables(e, d), exec_dev_grads(e, d), exec_dev_optim(e, d), exec_dev_stride(e, d),
			       e->t_n[d]);
	}
	CK(t, cudaSetDevice(t->base));
	cuda_join(e);
	kc_record(s, &w->step_loss, t->hist, &w->step, t->steps_per_epoch);
	const char *ce = cuda_error(e);
	if (ce)
		return util_fail(t->err, sizeof t->err, "%s", ce);
	return 0;
}

/* Capture the full step once; later full steps replay it. */
static int capture(struct gt *t, const int64_t *sizes, int count)
{
	cudaGraph_t g = NULL;
	CK(t, cudaStreamBeginCapture(t->s, cudaStreamCaptureModeThreadLocal));
	int rc = issue_step(t, sizes, count);
	cudaError_t r = cudaStreamEndCapture(t->s, &g);
	if (rc != 0) {
		/* a graph left behind would hold NCCL's communicators open */
		if (g)
			cudaGraphDestroy(g);
		return rc;
	}
	if (r != cudaSuccess)
		return util_fail(t->err, sizeof t->err, "capturing the training step as a CUDA graph failed: %s (set TRAINC_CUDA_GRAPH=0 "
				 "to run steps one by one)", cudaGetErrorString(r));
	r = cudaGraphInstantiate(&t->graph, g, 0);
	cudaGraphDestroy(g);
	if (r != cudaSuccess)
		return util_fail(t->err, sizeof t->err, "instantiating the training step's CUDA graph failed: %s", cudaGetErrorString(r));
	t->graph_ok = true;
	return 0;
}

/* The floor of a step: launching a graph that does nothing, back to back. */
static int launch_floor(struct gt *t)
{
	cudaGraph_t g;
	cudaGraphNode_t node;
	cudaGraphExec_t ge;
	CK(t, cudaGraphCreate(&g, 0));
	CK(t, cudaGraphAddEmptyNode(&node, g, NULL, 0));
	CK(t, cudaGraphInstantiate(&ge, g, 0));
	enum { N = 200 };
	for (int i = 0; i < 10; i++)
		CK(t, cudaGraphLaunch(ge, t->s));
	CK(t, cudaEventRecord(t->ev_t0, t->s));
	for (int i = 0; i < N; i++)
		CK(t, cudaGraphLaunch(ge, t->s));
	CK(t, cudaEventRecord(t->ev_t1, t->s));
	CK(t, cudaEventSynchronize(t->ev_t1));
	float ms = 0;
	CK(t, cudaEventElapsedTime(&ms, t->ev_t0, t->ev_t1));
	t->floor_us = 1000.0 * ms / N;
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	return 0;
}

/* ---- evaluation ---- */

static int evaluate(struct gt *t)
{
	const struct plan *p = t->p;
	struct exec *e = &t->e;
	struct words *w = t->w;
	int64_t EB = p->eval_batch;
	if (t->comm && !t->sharded && tg_broadcast_buffers(t) != 0)
		return -1;
	CK(t, cudaMemsetAsync(w->sums, 0, sizeof w->sums, t->s));
	float *in = exec_output(e, 0, false);
	for (int64_t at = 0; at < t->eval_count; at += EB) {
		int m = (int)(t->eval_count - at < EB ? t->eval_count - at : EB);
		cuda_join(e); /* the last chunk's loss read the targets this one overwrites */
		if (t->dtest.streamed) {
			/* this chunk's samples, the short last one filled up with its first (the forward reads m) */
			for (int64_t k = 0; k < EB; k++)
				t->hidx[k] = k < m ? t->rank + (at + k) * t->world : t->rank + at * t->world;
			dataset_fill(&t->test, t->hidx, (int)EB, t->htx, t->hty);
			CK(t, cudaStreamSynchronize(t->s)); /* the host buffers of the last chunk are free */
			if (tg_host_batch_in(t, t->htx, t->hty, EB, t->dtest.xw, t->dtest.yw, in, t->eval_ybuf) != 0)
				return -1;
		} else {
			kc_gather_rows(t->s, in, t->dtest.x, t->dtest.xw, t->eval_order + at, &w->zero, EB);
			kc_gather_rows(t->s, t->eval_ybuf, t->dtest.y, t->dtest.yw, t->eval_order + at, &w->zero, EB);
		}
		exec_forward_range(e, 1, p->nnodes, m, false); /* the padding rows of a short chunk are not read */
		/* the seed sums per-sample losses and divides by the set size */
		cuda_loss(e, t->eval_ybuf, m, false, &w->sums[0], exec_reduction(p, false) == KERN_REDUCE_SUM ? 1.0 : (double)m, true,
			  &w->sums[1]);
	}
	/* sharded FSDP all-gathers in every forward: a rank with fewer test
	 * chunks than rank 0 runs uncounted ones on zeros until it has as many */
	int64_t n = t->has_test ? t->test.n : 0, mine = (t->eval_count + EB - 1) / EB;
	int64_t rounds = t->sharded ? ((n + t->world - 1) / t->world + EB - 1) / EB : 0;
	for (; mine < rounds; mine++) {
		cuda_join(e);
		CK(t, cudaMemsetAsync(in, 0, (size_t)EB * (size_t)t->dtest.xw * 4, t->s));
		exec_forward_range(e, 1, p->nnodes, (int)EB, false);
	}
	cuda_join(e);
	if (t->fsdp_ok) {
		fsdp_release_all(&t->fsdp);
		if (t->fsdp.failed)
			return util_fail(t->err, sizeof t->err, "rank %d: %s", t->rank, t->fsdp.err);
	}
	if (tg_wait(t, "evaluation") != 0)
		return -1;
	double sums[3];
	if (tg_get(t, sums, w->sums, 2 * sizeof *sums) != 0)
		return -1;
	sums[2] = (double)t->eval_count;
	if (tg_reduce_host(t, sums, 3) != 0)
		return -1;
	t->test_loss = sums[0] / sums[2];
	if (t->rank != 0)
		return 0;
	train_report_eval(p, t->rd_ok ? &t->rd : NULL, &t->at, sums, &t->eval_warned);
	return 0;
}

/* ---- setup ---- */

/* The rate of each step from `from` to its epoch's end (the schedule's,
 * or reduce_on_plateau's as it stands), and one_cycle's momentum where it
 * cycles it, into the device's tables of an epoch's steps (step k at
 * k % steps_per_epoch), which the captured step reads at its step word.
 * Written at each epoch's start, in the compute stream's order, so the
 * last epoch's steps have read theirs first. */
static int put_step_tables(struct gt *t, int64_t from)
{
	int64_t spe = t->steps_per_epoch, end = (from / spe + 1) * spe;
	if (end > t->total_steps)
		end = t->total_steps;
	int64_t n = end - from;
	if (n <= 0)
		return 0;
	double *lr = malloc((size_t)spe * sizeof *lr);
	if (!lr)
		return util_fail(t->err, sizeof t->err, "out of memory");
	for (int64_t k = from; k < end; k++)
		lr[k % spe] = train_lr(t->p, &t->sc, &t->at, k / spe, k);
	int rc = tg_put(t, t->lr_table + from % spe, lr + from % spe, (size_t)n * sizeof *lr);
	if (rc == 0 && t->momentum_table) {
		train_momentum_fill(&t->sc, spe, lr, spe, from, end);
		rc = tg_put(t, t->momentum_table + from % spe, lr + from % spe, (size_t)n * sizeof *lr);
	}
	free(lr);
	return rc;
}

static int join_job(struct gt *t)
{
	double timeout = t->p->parallel.timeout_s;
	char e[512];
	if (!(t->store = launch_store(timeout, e, sizeof e)))
		return util_fail(t->err, sizeof t->err, "rank %d: %s", t->rank, e);
	store_client_set_timeout(t->store, timeout);
	if (train_agree_plan(t->store, t->p, t->rank, t->world, &(int){ 0 }, t->err, sizeof t->err) != 0)
		return -1;
	/* one communicator per GPU of the rank, as ProcessGroupNCCL keeps one
	 * per device; a start-up that never ends is named by the launcher, at
	 * the timeout, before comm_nccl's own wait of twice that runs out */
	launch_wait_on("NCCL's start-up of the job's communicators (ncclCommInitRankConfig; NCCL_DEBUG=INFO shows how far it got)");
	for (int d = 0; d < t->ngpu; d++) {
		t->dcomm[d] = comm_open_nccl(t->store, t->rank, t->world, t->base + d, t->cs[d], 2 * timeout, t->err, sizeof t->err);
		if (!t->dcomm[d])
			return -1;
		if (d > 0 && comm_nccl_follow(t->dcomm[d], cuda_stream_of(&t->e, d), t->err, sizeof t->err) != 0)
			return -1;
	}
	launch_wait_begin(); /* still meeting the others, no longer in NCCL's start-up */
	CK(t, cudaSetDevice(t->base));
	t->comm = t->dcomm[0];
	const struct plan *p = t->p;
	t->op = p->train.global_batch && p->train.reduction == RED_SUM ? COMM_SUM : COMM_AVG;
	/* collectives started through comm.h read what the compute stream wrote */
	if (comm_nccl_follow(t->comm, t->s, t->err, sizeof t->err) != 0)
		return -1;
	if (t->sharded) {
		t->fdev = tg_fsdp_dev(t);
		if (fsdp_init(&t->fsdp, p, t->comm, &t->e, &t->fdev, t->err, sizeof t->err) != 0)
			return -1;
		t->fsdp.op = t->op; /* as DDP: averaged gradients, summed for a global batch of a sum loss */
		t->fsdp_ok = true;
		t->h_buffers = calloc((size_t)(p->unsharded_elems - t->e.buffer_start) + 1, 4);
		if (!t->h_buffers)
			return util_fail(t->err, sizeof t->err, "out of memory");
		return 0;
	}
	t->trigger = calloc((size_t)p->nbuckets + 1, sizeof *t->trigger);
	t->ev_bucket = calloc((size_t)p->nbuckets + 1, sizeof *t->ev_bucket);
	if (!t->trigger || !t->ev_bucket)
		return util_fail(t->err, sizeof t->err, "out of memory");
	for (int b = 0; b < p->nbuckets; b++) {
		t->trigger[b] = p->params[p->buckets[b].first_param].node;
		CK(t, cudaSetDevice(t->base + p->buckets[b].device));
		CK(t, cudaEventCreateWithFlags(&t->ev_bucket[b], cudaEventDisableTiming));
	}
	CK(t, cudaSetDevice(t->base));
	t->e.after_backward = after_backward;
	t->e.hook_ctx = t;
	return 0;
}

/* The streamed set's host batches: page-locked ones only once no copy
 * still reads them (after a failure the GPU may never get there: they
 * are left to the process's exit). */
static void free_batches(struct gt *t)
{
	bool idle = !t->fed_pending || cudaEventQuery(t->ev_fed) == cudaSuccess;
	for (int k = 0; k < 2; k++) {
		if (!t->pinned) {
			free(t->hx[k]);
			free(t->hy[k]);
		} else if (idle) {
			if (t->hx[k])
				cudaFreeHost(t->hx[k]);
			if (t->hy[k])
				cudaFreeHost(t->hy[k]);
		}
		t->hx[k] = NULL;
		t->hy[k] = NULL;
	}
	if (t->ev_fed && idle)
		cudaEventDestroy(t->ev_fed);
	t->ev_fed = NULL;
	t->pinned = t->fed_pending = false;
}

/* Everything before the first step: 0, -1, or TRAIN_REFUSED where what the
 * user gave does not fit (the data, the checkpoint or weights, the run
 * directory), with the message in t->err. */
static int setup(struct gt *t)
{
	const struct plan *p = t->p;
	const struct plan_train *tr = &p->train;
	t->ngpu = p->ndevices;
	t->base = t->device * p->ndevices; /* rank r owns GPUs r*D .. r*D + D - 1 */
	cuda_set_device_base(t->base);
	CK(t, cudaSetDevice(t->base));
	if (train_open_data(p, &p->train_data, &t->train, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	t->train_open = true;
	t->has_test = p->test_data.kind != DATA_NONE;
	if (t->has_test) {
		if (train_open_data(p, &p->test_data, &t->test, t->err, sizeof t->err) != 0)
			return TRAIN_REFUSED;
		t->test_open = true;
		if (train_check_test_samples(t->test.kind != DATASET_SYNTHETIC ? t->test.images_path : NULL, t->test.n, t->err,
					     sizeof t->err) != 0)
			return TRAIN_REFUSED;
	}
	/* train.steps = 0 reads no training batch: any rank count evaluates */
	if (train_check_samples(&t->train, t->p->train.eval_only ? 1 : t->world, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	/* every batch size convolutions will see: the micro-batch (or its
	 * pipeline chunks), the epoch's last one (chunked alike), the test batch
	 * and this rank's last test chunk */
	struct train_batches bt;
	if (train_batches(p, t->world, t->rank, t->train.n, t->has_test ? t->test.n : 0, &bt, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	t->micro = bt.micro;
	t->accum = bt.accum;
	t->pipe_m = bt.chunks;
	if (sampler_init(&t->smp, t->train.n, t->world, t->rank, (int)t->micro, tr->shuffle, 0, tr->drop_last, tr->shuffle_seed, t->err,
			 sizeof t->err) != 0)
		return -1;
	t->smp_ok = true;
	for (int d = 0; d < t->ngpu; d++) {
		CK(t, cudaSetDevice(t->base + d));
		CK(t, cudaStreamCreateWithFlags(&t->cs[d], cudaStreamNonBlocking));
		CK(t, cudaEventCreateWithFlags(&t->ev_comm[d], cudaEventDisableTiming));
	}
	CK(t, cudaSetDevice(t->base));
	t->sharded = p->parallel.mode == PAR_FSDP && p->parallel.shard != SHARD_NONE && t->world > 1;
	t->exec_ok = true; /* exec_free releases a partial exec_init_on too */
	/* what the GPU had before the plan took any: a failed setup's partial
	 * allocations are still held when it says so */
	size_t free_b = 0, total_b = 0;
	CK(t, cudaMemGetInfo(&free_b, &total_b));
	int made = exec_init_on(&t->e, &backend_cuda, p, bt.sizes, TRAIN_NSIZES, t->sharded, t->pipe_m, t->err, sizeof t->err);
	if (made != 0) {
		char what[sizeof t->err];
		memcpy(what, t->err, sizeof what);
		/* what fails the same way every time (GPUs the placement spans
		 * that cannot reach each other): a refusal (2), as too few GPUs is */
		if (made == EXEC_REFUSED)
			return TRAIN_REFUSED;
		if (strncmp(what, "out of memory", 13) == 0)
			util_fail(t->err, sizeof t->err,
				  "rank %d, GPU %d: %s, with %.1f MiB of its %.1f MiB free; lower the batch, shard the model over "
				  "several GPUs (parallel fsdp), or place its layers on several GPUs (@device)",
				  t->rank, t->base, what, (double)free_b / 1048576.0, (double)total_b / 1048576.0);
		return -1;
	}
	t->s = cuda_stream(&t->e);
	t->e.seed = tr->seed;
	t->e.rank = (uint32_t)t->rank;
	t->oc = train_optim_cfg(&tr->optim);
	t->sc = train_sched_cfg(&tr->sched);
	t->at = (struct ckpt_state){ .epoch = 1, .world = t->world, .micro = t->micro, .plateau = sched_plateau_start(&t->sc, tr->optim.lr) };
	CK(t, cudaMalloc((void **)&t->w, sizeof *t->w));
	CK(t, cudaMemsetAsync(t->w, 0, sizeof *t->w, t->s));
	cuda_use_step(&t->e, &t->w->step);
	/* the run's length and every step's lr */
	t->epochs_total = (int)tr->epochs;
	int64_t spe = (t->smp.num_batches + t->accum - 1) / t->accum;
	if (tr->steps)
		t->epochs_total = (int)((tr->steps + spe - 1) / spe);
	t->total_steps = spe * t->epochs_total;
	t->steps_per_epoch = spe;
	/* each step's loss, and below its rate, in tables of an epoch's steps
	 * (step k at k % spe): the host reads the losses back by the epoch's
	 * end at the latest, and writes the next epoch's rates in stream order */
	CK(t, cudaMalloc((void **)&t->hist, (size_t)spe * sizeof *t->hist));
	/* data on the device */
	if (tg_upload(t, &t->train, &t->dtrain) != 0 || (t->has_test && tg_upload(t, &t->test, &t->dtest) != 0))
		return -1;
	t->host_order = malloc((size_t)t->smp.num_samples * sizeof *t->host_order);
	if (!t->host_order)
		return util_fail(t->err, sizeof t->err, "out of memory");
	CK(t, cudaMalloc((void **)&t->order, (size_t)t->smp.num_samples * sizeof *t->order));
	CK(t, cudaMalloc(&t->ybuf, (size_t)t->micro * (size_t)t->dtrain.yw * 4 + 4));
	if (t->has_test) {
		int64_t EB = p->eval_batch, n = t->test.n;
		t->eval_count = n > t->rank ? (n - t->rank + t->world - 1) / t->world : 0;
		t->eval_len = (t->eval_count + EB - 1) / EB * EB;
		int64_t *h = malloc((size_t)(t->eval_len + 1) * sizeof *h);
		if (!h)
			return util_fail(t->err, sizeof t->err, "out of memory");
		/* a short last chunk's gather fills the rest with its first sample; the forward reads m rows */
		for (int64_t i = 0; i < t->eval_len; i++)
			h[i] = i < t->eval_count ? t->rank + i * t->world : t->rank + (t->eval_count - 1) / EB * EB * t->world;
		cudaError_t r2 = cudaMalloc((void **)&t->eval_order, (size_t)(t->eval_len + 1) * sizeof *h);
		int rc = r2 == cudaSuccess ? tg_put(t, t->eval_order, h, (size_t)(t->eval_len + 1) * sizeof *h) : 0;
		free(h);
		CK(t, r2);
		if (rc != 0)
			return -1;
		CK(t, cudaMalloc(&t->eval_ybuf, (size_t)EB * (size_t)t->dtest.yw * 4 + 4));
	}
	CK(t, cudaEventCreate(&t->ev_t0));
	CK(t, cudaEventCreate(&t->ev_t1));
	CK(t, cudaEventCreate(&t->ev_e0));
	CK(t, cudaEventCreate(&t->ev_e1));
	t->events = true;
	if (t->world > 1) {
		launch_wait_begin(); /* meeting the other ranks: a rank stopped meanwhile is the hung one */
		int joined = join_job(t);
		launch_wait_end();
		if (joined != 0)
			return -1;
	}
	int k = p->train.optim.state_per_param;
	t->h_params = calloc((size_t)p->unsharded_elems + 1, 4);
	t->h_optim = calloc((size_t)(t->e.trainable * k) + 1, 4);
	if (!t->h_params || !t->h_optim)
		return util_fail(t->err, sizeof t->err, "out of memory for the host copy of the parameters");
	int loaded = tg_load_state(t);
	if (loaded != 0)
		return loaded;
	/* how long a resumed one_cycle is; the tables of an epoch's rates (the
	 * schedule's, or the one the checkpoint's plateau reached) and of
	 * one_cycle's momentum, read by the optimizer's coefficients, are
	 * filled at each epoch's start (run_epoch) */
	if (train_one_cycle(p, &t->sc, &t->at, t->o->resume, spe, t->err, sizeof t->err) != 0)
		return TRAIN_REFUSED;
	if (train_cycles_momentum(&t->sc)) {
		CK(t, cudaMalloc((void **)&t->momentum_table, (size_t)spe * sizeof *t->momentum_table));
		t->oc.momentum_table = t->momentum_table;
		t->oc.momentum_period = spe;
	}
	CK(t, cudaMalloc((void **)&t->lr_table, (size_t)spe * sizeof *t->lr_table));
	if (t->rank == 0) {
		if (rundir_create(&t->rd, t->o->run_dir, p, t->o->version, t->o->argc, t->o->argv, 0, t->err, sizeof t->err) != 0)
			return TRAIN_REFUSED; /* one that cannot be made where it is, or written (a full disk: 1) */
		t->rd_ok = true;
	}
	if (t->dtrain.streamed) { /* a loader thread fills host batches; no graph, no one-block step */
		size_t xbytes = (size_t)(t->micro * t->dtrain.xw) * 4 + 4, ybytes = (size_t)(t->micro * t->dtrain.yw) * 4 + 4;
		/* page-locked, as PyTorch's pin_memory: the copies run as DMA
		 * behind the compute, with no staging through a driver buffer;
		 * pageable memory where the system will not lock that much */
		bool locked = true;
		t->pinned = true;
		for (int slot = 0; slot < 2 && locked; slot++)
			locked = cudaHostAlloc((void **)&t->hx[slot], xbytes, cudaHostAllocDefault) == cudaSuccess &&
				 cudaHostAlloc(&t->hy[slot], ybytes, cudaHostAllocDefault) == cudaSuccess;
		if (locked) {
			CK(t, cudaEventCreateWithFlags(&t->ev_fed, cudaEventDisableTiming));
		} else {
			(void)cudaGetLastError(); /* the failed lock is not the run's error */
			free_batches(t);
			for (int slot = 0; slot < 2; slot++) {
				t->hx[slot] = malloc(xbytes);
				t->hy[slot] = malloc(ybytes);
				if (!t->hx[slot] || !t->hy[slot])
					return util_fail(t->err, sizeof t->err, "out of memory for batch buffers");
			}
		}
		struct sampler_pos start = { t->at.epoch - 1, t->at.batch };
		double wait_ms = p->parallel.timeout_s * 1000 < 2e9 ? p->parallel.timeout_s * 1000 : 2e9;
		if (loader_start(&t->l, &t->train, &t->smp, t->hx, t->hy, start, t->epochs_total, (int)wait_ms, t->err, sizeof t->err) != 0)
			return -1;
		t->loader_ok = true;
	}
	size_t conv = (size_t)((t->micro > p->eval_batch ? t->micro : p->eval_batch) * t->dtrain.xw) * 4 + 4;
	t->hconv = p->nodes[0].dtype == DT_I64 ? malloc(conv) : NULL;
	if (p->nodes[0].dtype == DT_I64 && !t->hconv)
		return util_fail(t->err, sizeof t->err, "out of memory");
	if (t->has_test && t->dtest.streamed) {
		int64_t EB = p->eval_batch;
		t->hidx = malloc((size_t)EB * sizeof *t->hidx);
		t->htx = malloc((size_t)(EB * t->dtest.xw) * 4 + 4);
		t->hty = malloc((size_t)(EB * t->dtest.yw) * 4 + 4);
		if (!t->hidx || !t->htx || !t->hty)
			return util_fail(t->err, sizeof t->err, "out of memory for test batch buffers");
	}
	/* a small model's step as one block, where the plan allows */
	if (!t->dtrain.streamed && !tiny_refusal(p, t->world, t->accum, t->micro)) {
		struct tiny_prog *h = calloc(1, sizeof *h);
		if (!h)
			return util_fail(t->err, sizeof t->err, "out of memory");
		h->data_x = t->dtrain.x, h->data_y = t->dtrain.y, h->xw = t->dtrain.xw, h->yw = t->dtrain.yw;
		h->order = t->order, h->pos = &t->w->pos, h->ybuf = t->ybuf;
		h->step_loss = &t->w->step_loss, h->bad_target = &cuda_dev_words(&t->e)->bad_target;
		h->cfg = t->oc, h->lr_table = t->lr_table, h->step = &t->w->step, h->hist = t->hist, h->cap = t->steps_per_epoch;
		tiny_build(h, &t->e, t->micro, cuda_loss_weights(&t->e));
		t->tiny = h; /* each launch copies it into the kernel's parameters */
	}
	/* NCCL: whether a collective is captured must be the same on every
	 * rank, so a rank that streams its data (its GPU had less memory free)
	 * turns the graph off everywhere; and it warns of deadlocks when one
	 * thread captures collectives of several GPUs */
	const char *g = getenv("TRAINC_CUDA_GRAPH");
	double streams[1] = { t->dtrain.streamed ? 1 : 0 };
	if (tg_reduce_host(t, streams, 1) != 0)
		return -1;
	t->no_graph = g && strcmp(g, "0") == 0 ? "TRAINC_CUDA_GRAPH=0"
		      : t->dtrain.streamed	   ? "streamed data"
		      : streams[0] > 0		   ? "another rank streams its data"
		      : t->world > 1 && t->ngpu > 1 ? "NCCL over several GPUs of a rank"
						   : NULL;
	t->use_graph = t->no_graph == NULL;
	t->read_step = t->at.step;
	t->tty = t->rank == 0 && (isatty(STDOUT_FILENO) || getenv("TRAINC_TTY")) && !getenv("TRAINC_PLAIN");
	return launch_floor(t);
}

/* ---- the loop ---- */

/* Read back the losses of steps read_step+1 .. at.step; the last one's
 * per-sample mean (over every rank) goes to *last, their sum to *sum. */
static int read_losses(struct gt *t, int64_t last_samples, double *last, double *sum)
{
	int64_t n = t->at.step - t->read_step;
	*sum = 0;
	if (n <= 0)
		return 0;
	if (tg_wait(t, "the training steps") != 0)
		return -1;
	struct cuda_dev flags;
	if (tg_get(t, &flags, cuda_dev_words(&t->e), sizeof flags) != 0)
		return -1;
	if (flags.bad_target)
		return util_fail(t->err, sizeof t->err, "a target class of the training data is outside 0..%lld, the model's output classes "
				 "(between steps %lld and %lld)", (long long)shape_numel(&t->p->nodes[t->p->nnodes - 1].out) - 1,
				 (long long)t->read_step + 1, (long long)t->at.step);
	if (flags.bad_id)
		return util_fail(t->err, sizeof t->err, "a token id of the training data is outside an embedding's rows (between steps "
				 "%lld and %lld)", (long long)t->read_step + 1, (long long)t->at.step);
	double *h = malloc((size_t)n * sizeof *h);
	if (!h)
		return util_fail(t->err, sizeof t->err, "out of memory");
	/* steps of one epoch, read by its end: a run of the table */
	if (tg_get(t, h, t->hist + t->read_step % t->steps_per_epoch, (size_t)n * sizeof *h) != 0) {
		free(h);
		return -1;
	}
	for (int64_t k = 0; k < n; k++) {
		if (!isfinite(h[k])) {
			double bad = h[k];
			char note[512];
			const char *why = train_eps0_note(t->p, false, note, sizeof note);
			const struct plan_train *tr = &t->p->train;
			/* a mean over no target is NaN only where the data has
			 * targets that do not count: ignored, or of a class of weight 0 */
			bool mean = !why && isnan(bad) && tr->reduction == RED_MEAN && (tr->loss == LOSS_NLL || tr->loss == LOSS_CROSS_ENTROPY);
			bool ign = mean && dataset_count_label(&t->train, tr->ignore_index) > 0, zero = false;
			for (int64_t c = train_zero_weight(tr); mean && c >= 0 && c < tr->nclass_weights && !zero; c++)
				zero = tr->class_weights[c] == 0 && dataset_count_label(&t->train, (int32_t)c) > 0;
			if (ign || zero) {
				char what[96] = "of a class of weight 0";
				if (ign)
					snprintf(what, sizeof what, "the loss's ignore_index (%ld)%s", (long)tr->ignore_index,
						 zero ? " or of a class of weight 0" : "");
				why = note, snprintf(note, sizeof note, "a batch whose every target is %s has a NaN mean, as in PyTorch: "
						     "shuffle the data, use a larger batch, or give the loss reduction=\"sum\"", what);
			}
			int64_t neg = !why && tr->loss == LOSS_KL_DIV && !tr->loss_param ? dataset_negative_target(&t->train) : -1;
			if (neg >= 0)
				why = note, snprintf(note, sizeof note, "training sample %lld's target has a value below 0, whose logarithm in "
						     "kl_div is NaN: kl_div takes probabilities as targets (each at least 0), or "
						     "log-probabilities with log_target=true", (long long)neg);
			free(h);
			t->stop_key = "nonfinite"; /* every rank whose loss went bad says so: the launcher says it once */
			return util_fail(t->err, sizeof t->err,
					 "the loss is %s at step %lld (epoch %lld); lower the learning rate, clip gradients "
					 "(clip_grad_norm) or check the data (train with --cpus to name the first layer that overflows)%s%s",
					 isnan(bad) ? "NaN" : bad > 0 ? "+infinity" : "-infinity", (long long)(t->read_step + k + 1),
					 (long long)t->at.epoch, why ? "; or: " : "", why ? why : "");
		}
		*sum += h[k];
	}
	double v[2] = { h[n - 1], (double)last_samples };
	free(h);
	t->read_step = t->at.step;
	if (tg_reduce_host(t, v, 2) != 0)
		return -1;
	*last = v[0] / v[1];
	return 0;
}

/* End a span of replayed steps timed with CUDA events: its time and step
 * count go to the step-time figure. */
static int close_span(struct gt *t, bool *timing, int64_t *steps)
{
	if (!*timing)
		return 0;
	*timing = false;
	CK(t, cudaEventRecord(t->ev_t1, t->s));
	if (tg_wait(t, "the training steps") != 0)
		return -1;
	float ms = 0;
	CK(t, cudaEventElapsedTime(&ms, t->ev_t0, t->ev_t1));
	t->graph_ms += ms;
	t->graph_steps += *steps;
	*steps = 0;
	return 0;
}

/* A checkpoint_every save: one that could not be written is said, and
 * training goes on. */
static int periodic_checkpoint(struct gt *t)
{
	int ck = tg_checkpoint(t, t->o->save);
	if (ck == TRAIN_CKPT_IO && t->ckpt_speak) {
		train_progress_break(t->tty);
		fprintf(stderr, "trainc: warning: the checkpoint of step %lld was not saved: %s; training goes on\n", (long long)t->at.step,
			t->err);
	}
	return ck == TRAIN_CKPT_IO ? 0 : ck;
}

/* One epoch from the current position: 0, 1 when the step budget is spent, -1. */
static int run_epoch(struct gt *t, double *train_time, int64_t *images)
{
	const struct plan *p = t->p;
	const struct plan_train *tr = &p->train;
	int64_t nb = t->smp.num_batches, B = t->micro;
	if (tg_set_epoch(t, t->at.epoch) != 0 || put_step_tables(t, t->at.step) != 0)
		return -1;
	double te = util_now();
	int64_t seen = 0, graph_steps = 0;
	bool budget_spent = false, timing = false;
	while (t->at.batch < nb) {
		int64_t sizes[64];
		int count = 0;
		bool full = true;
		for (int64_t k = t->at.batch; k < nb && count < t->accum && count < 64; k++) {
			int64_t b = sampler_batch_len(&t->smp, k);
			sizes[count++] = b;
			full &= b == B;
		}
		full &= count == t->accum;
		int64_t samples = 0;
		for (int k = 0; k < count; k++)
			samples += sizes[k];
		if (full && t->graph_ok) {
			if (!timing) {
				CK(t, cudaEventRecord(t->ev_t0, t->s));
				timing = true;
			}
			CK(t, cudaGraphLaunch(t->graph, t->s));
			graph_steps++;
		} else if (full && t->use_graph && t->warmed) {
			/* the first full step ran eagerly (cuBLAS and cuDNN settle
			 * their workspaces); this one is captured, then launched */
			if (capture(t, sizes, count) != 0)
				return -1;
			CK(t, cudaGraphLaunch(t->graph, t->s));
		} else {
			if (close_span(t, &timing, &graph_steps) != 0)
				return -1;
			if (issue_step(t, sizes, count) != 0)
				return -1;
			t->warmed |= full;
		}
		t->at.batch += count;
		t->at.step++;
		seen += samples;
		t->ep_n += (double)samples;
		*images += samples;
		launch_beat();
		bool log = t->at.batch % tr->log_interval < (int64_t)count || t->at.batch == nb || (tr->steps && t->at.step >= tr->steps);
		if (log) {
			/* the wait would be timed as a step: close the span first */
			if (close_span(t, &timing, &graph_steps) != 0)
				return -1;
			double last = 0, sum = 0;
			if (read_losses(t, samples, &last, &sum) != 0)
				return -1;
			t->ep_loss += sum;
			if (t->rank == 0)
				train_report_step(t->rd_ok ? &t->rd : NULL, t->tty, true, &t->at, t->at.batch * B, t->smp.num_samples, last,
						  train_lr(p, &t->sc, &t->at, t->at.epoch - 1, t->at.step - 1),
						  (double)seen * t->world / (util_now() - te));
		}
		if (tr->checkpoint_every && t->o->save && !train_is_weights_file(t->o->save) && t->at.step % tr->checkpoint_every == 0) {
			/* the losses so far, for the epoch's sums the checkpoint keeps */
			double last, sum;
			if (close_span(t, &timing, &graph_steps) != 0 || read_losses(t, samples, &last, &sum) != 0)
				return -1;
			t->ep_loss += sum;
			/* at an epoch's end, after its evaluation: a run stopped
			 * during the evaluation resumes to evaluate again */
			if (t->has_test && t->at.batch == nb)
				t->ckpt_pending = true;
			else if (periodic_checkpoint(t) != 0)
				return -1;
		}
		if (tr->steps && t->at.step >= tr->steps) {
			budget_spent = true;
			break;
		}
	}
	if (close_span(t, &timing, &graph_steps) != 0)
		return -1;
	if (t->loader_ok && !budget_spent) { /* the loader's end-of-epoch mark */
		float *x;
		void *y;
		int got;
		if (tg_return_batch(t) != 0)
			return -1;
		if (loader_next(&t->l, &x, &y, &got) != 0)
			return util_fail(t->err, sizeof t->err, "internal: the loader did not end the epoch with the sampler");
	}
	double last, sum;
	if (read_losses(t, 1, &last, &sum) != 0)
		return -1;
	t->ep_loss += sum;
	if (tg_wait(t, "the epoch") != 0)
		return -1;
	double dt = util_now() - te;
	*train_time += dt;
	double sums[3] = { t->ep_loss, t->ep_n, (double)seen }; /* the rate counts this run's samples alone */
	if (tg_reduce_host(t, sums, 3) != 0)
		return -1;
	t->ep_mean = sums[0] / sums[1];
	if (t->rank == 0)
		train_report_epoch(t->rd_ok ? &t->rd : NULL, t->tty, &t->at, sums, sums[2] / dt);
	return budget_spent ? 1 : 0;
}

static int finish(struct gt *t, float loop_ms, double train_time, int64_t images)
{
	const struct train_opts *o = t->o;
	const struct plan *p = t->p;
	if (t->rank == 0 && !p->train.eval_only && images > 0) { /* not after "Nothing to train" */
		printf("CUDA event elapsed time: %.4f sec\n", loop_ms / 1000.0);
		printf("Training loop: %.0f images/s while training\n", train_time > 0 ? (double)images * t->world / train_time : 0.0);
		if (t->graph_steps > 0) {
			double us = 1000.0 * t->graph_ms / (double)t->graph_steps;
			printf("Step time: %.1f us per step (CUDA graph%s, %lld steps); CUDA graph launch floor: %.1f us (ratio %.2f)\n", us,
			       t->tiny ? " of one kernel" : "", (long long)t->graph_steps, t->floor_us, t->floor_us > 0 ? us / t->floor_us : 0.0);
		} else {
			if (!t->use_graph)
				printf("Step time: no step ran as a CUDA graph (%s)\n", t->no_graph);
			else
				printf("Step time: no step ran as a CUDA graph (the first full-batch step runs eagerly, later ones replay a "
				       "graph; this run had fewer than two)\n");
		}
	}
	size_t free_b = 0, total_b = 0;
	cudaMemGetInfo(&free_b, &total_b);
	int64_t state = t->sharded ? (2 * t->fsdp.total + t->fsdp.total * p->train.optim.state_per_param) * 4
				   : (p->unsharded_elems + t->e.trainable * (1 + p->train.optim.state_per_param)) * 4;
	char gpus[32];
	if (t->ngpu > 1)
		snprintf(gpus, sizeof gpus, "GPUs %d-%d", t->base, t->base + t->ngpu - 1);
	else
		snprintf(gpus, sizeof gpus, "GPU %d", t->base);
	for (int r = 0; r < t->world; r++) {
		if (r == t->rank) {
			printf("Rank %d: %s, parameters, gradients and optimizer state %.2f MiB; GPU memory in use %.1f MiB of %.1f MiB "
			       "(first GPU)\n", t->rank, gpus, (double)state / 1048576.0, (double)(total_b - free_b) / 1048576.0,
			       (double)total_b / 1048576.0);
			fflush(stdout);
		}
		if (r + 1 < t->world && train_next_turn(t->comm, t->err, sizeof t->err) != 0)
			return -1;
	}
	/* a checkpoint that cannot be written still leaves the weights in the run directory */
	int ck = o->save && !train_is_weights_file(o->save) ? tg_checkpoint(t, o->save) : 0;
	if (ck != 0 && ck != TRAIN_CKPT_IO)
		return -1;
	char ck_err[sizeof t->err + 40] = ""; /* said by one rank for the job */
	if (ck && t->ckpt_speak)
		snprintf(ck_err, sizeof ck_err, "cannot save the checkpoint: %s", t->err);
	if (tg_full_state(t, false) != 0)
		return -1;
	int rc = 0;
	if (t->rank == 0) {
		char path[4200];
		snprintf(path, sizeof path, "%s/weights.safetensors", rundir_path(&t->rd));
		rc = weights_save(p, t->h_params, path, t->err, sizeof t->err);
		if (rc == 0 && o->save && train_is_weights_file(o->save) && (rc = weights_save(p, t->h_params, o->save, t->err, sizeof t->err)) == 0)
			printf("Saved the weights to %s\n", o->save);
		if (rc == 0)
			printf("Run directory: %s%s\n", rundir_path(&t->rd), ck ? " (the final weights are there)" : "");
	}
	/* with the checkpoint failed every rank ends failed, but none before
	 * rank 0 has written the weights: the launcher stops the ranks still
	 * running once one has failed */
	char turn_err[256];
	if (ck && t->world > 1 && train_next_turn(t->comm, turn_err, sizeof turn_err) != 0) {
		/* another rank ended meanwhile: its own failure is said */
	}
	if (rc != 0 || !ck)
		return rc;
	t->stop_key = ""; /* the job's last word: nothing from the ranks that do not say it */
	return util_fail(t->err, sizeof t->err, "%s", ck_err);
}

static void teardown(struct gt *t)
{
	if (t->graph_ok)
		cudaGraphExecDestroy(t->graph);
	if (t->loader_ok)
		loader_stop(&t->l);
	free_batches(t);
	free(t->hconv);
	free(t->hidx);
	free(t->htx);
	free(t->hty);
	if (t->fsdp_ok)
		fsdp_free(&t->fsdp);
	free(t->h_buffers);
	for (int d = PLAN_MAX_DEVICES - 1; d >= 0; d--)
		if (t->dcomm[d])
			comm_close(t->dcomm[d]);
	if (t->store)
		store_client_close(t->store);
	if (t->rd_ok)
		rundir_close(&t->rd);
	for (int b = 0; t->ev_bucket && b < t->p->nbuckets; b++)
		if (t->ev_bucket[b])
			cudaEventDestroy(t->ev_bucket[b]);
	free(t->ev_bucket);
	free(t->trigger);
	if (t->events) {
		cudaEventDestroy(t->ev_t0);
		cudaEventDestroy(t->ev_t1);
		cudaEventDestroy(t->ev_e0);
		cudaEventDestroy(t->ev_e1);
	}
	free(t->tiny);
	void *dev[] = { t->dtrain.x, t->dtrain.y, t->dtest.x, t->dtest.y, t->order, t->eval_order, t->ybuf, t->eval_ybuf, t->w, t->lr_table, t->hist,
		       t->momentum_table };
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		if (dev[i])
			cudaFree(dev[i]);
	if (t->exec_ok)
		exec_free(&t->e);
	for (int d = 0; d < PLAN_MAX_DEVICES; d++) {
		if (t->cs[d])
			cudaStreamDestroy(t->cs[d]);
		if (t->ev_comm[d])
			cudaEventDestroy(t->ev_comm[d]);
	}
	free(t->host_order);
	free(t->h_params);
	free(t->h_optim);
	if (t->smp_ok)
		sampler_free(&t->smp);
	if (t->train_open)
		dataset_close(&t->train);
	if (t->test_open)
		dataset_close(&t->test);
}

int trainc_cuda_train(const struct plan *p, const struct train_opts *o, int device)
{
	struct gt *t = calloc(1, sizeof *t);
	if (!t) {
		fprintf(stderr, "trainc: out of memory\n");
		return 1;
	}
	t->p = p;
	t->o = o;
	t->rank = o->rank;
	t->world = o->world > 0 ? o->world : 1;
	t->device = device;
	int rc = setup(t), status = rc != 0 ? train_setup_failed(rc, t->world, &t->stop_key) : 1;
	if (rc == 0 && t->rank == 0 && p->train.eval_only) {
		train_report_eval_only(p, o, t->world, t->has_test);
	} else if (rc == 0 && t->rank == 0) {
		char c1[32], c2[32];
		char bw[96];
		printf("%s: %s parameters, %s training samples, %d rank%s on GPU%s, %s, %d epoch%s\n", p->model_name,
		       print_count(p->total_params, c1, sizeof c1), print_count(t->train.n, c2, sizeof c2), t->world, t->world == 1 ? "" : "s",
		       t->world == 1 ? "" : "s", train_batch_words(bw, sizeof bw, t->micro, t->accum), t->epochs_total,
		       t->epochs_total == 1 ? "" : "s");
		struct cudaDeviceProp prop;
		if (cudaGetDeviceProperties(&prop, t->base) != cudaSuccess)
			snprintf(prop.name, sizeof prop.name, "?");
		printf("GPU: %s, %d per rank; data %s; steps %s%s%s\n", prop.name, t->ngpu,
		       !t->dtrain.streamed ? "in device memory"
		       : t->pinned	   ? "copied in per batch from page-locked memory"
					   : "copied in per batch from pageable memory (the system would not page-lock it)", t->use_graph ? "replayed as a CUDA graph" : "one by one",
		       t->tiny ? ", one kernel each" : "", t->pipe_m > 1 ? ", pipelined" : "");
		fflush(stdout);
	}
	double train_time = 0;
	int64_t images = 0;
	float loop_ms = 0;
	if (rc == 0 && cudaEventRecord(t->ev_e0, t->s) != cudaSuccess)
		rc = util_fail(t->err, sizeof t->err, "cudaEventRecord failed");
	/* a checkpoint taken at the last step, resumed, has nothing left to train */
	bool spent = p->train.eval_only || (p->train.steps && t->at.step >= p->train.steps);
	if (p->train.eval_only) {
		if (rc == 0 && t->has_test && evaluate(t) != 0)
			rc = -1;
	} else if (rc == 0 && spent && t->rank == 0) {
		train_report_spent(p);
	} else if (rc == 0 && !spent) {
		spent = train_epochs_done(p, &t->at, t->epochs_total, t->rank);
	}
	while (!spent && rc == 0 && t->at.epoch <= t->epochs_total) {
		int r = run_epoch(t, &train_time, &images);
		if (r < 0 || (t->has_test && evaluate(t) != 0)) {
			rc = -1;
			break;
		}
		/* a rate the plateau lowers reaches the table at the next epoch's start */
		train_plateau(p, &t->sc, &t->at, t->at.batch == t->smp.num_batches, t->test_loss, t->ep_mean, t->rank);
		if (t->ckpt_pending) { /* the epoch's last step's checkpoint_every save */
			t->ckpt_pending = false;
			if (periodic_checkpoint(t) != 0) {
				rc = -1;
				break;
			}
		}
		if (r == 1)
			break;
		t->at.epoch++;
		t->at.batch = 0;
		t->ep_loss = t->ep_n = 0;
	}
	if (rc == 0 && (cudaEventRecord(t->ev_e1, t->s) != cudaSuccess || cudaEventSynchronize(t->ev_e1) != cudaSuccess ||
			cudaEventElapsedTime(&loop_ms, t->ev_e0, t->ev_e1) != cudaSuccess))
		rc = util_fail(t->err, sizeof t->err, "timing the training loop with CUDA events failed");
	if (rc == 0)
		rc = finish(t, loop_ms, train_time, images);
	if (rc != 0 && t->err[0]) {
		char text[sizeof t->err + 16];
		snprintf(text, sizeof text, "trainc: %s\n", t->err);
		const char *key = train_fail_key(t->stop_key, t->err, t->world);
		if (key)
			launch_worker_stop(key, text);
		else
			fputs(text, stderr);
	}
	teardown(t);
	free(t);
	return rc != 0 ? status : 0;
}
