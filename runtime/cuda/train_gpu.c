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
 * A small model (a chain of linear layers and activations: tiny.h) runs
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
 * next chunk's backward (one host thread queues everything, in order).  Longer than 600 lines: setup,
 * the captured step and the loop read best together.
 */
#include "runtime/cuda/cuda.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compiler/print.h"
#include "runtime/backend.h"
#include "runtime/ckpt.h"
#include "runtime/comm.h"
#include "runtime/cuda/kc.h"
#include "runtime/cuda/tiny_plan.h"
#include "runtime/dataset.h"
#include "runtime/exec.h"
#include "runtime/fsdp.h"
#include "runtime/launch.h"
#include "runtime/loader.h"
#include "runtime/rundir.h"
#include "runtime/sampler.h"
#include "runtime/store.h"
#include "runtime/util.h"
#include "runtime/weights.h"

/* Device words of the trainer. */
struct words {
	int64_t pos;        /* next sample of this epoch's order */
	int64_t step;       /* finished optimizer steps */
	int64_t zero;       /* a constant 0, for gathers at fixed places */
	int64_t pad;
	double step_loss;   /* this step's sum of per-sample losses */
	double sums[4];     /* evaluation: loss, correct, samples; reductions of host values */
	double sumsq;
	double dsum[PLAN_MAX_DEVICES];                    /* each GPU's sum of squares */
	double partials[PLAN_MAX_DEVICES][KC_SUMSQ_PARTS];
	_Alignas(16) char coef[KC_OPTIM_COEF_BYTES];
};

/* One dataset in device memory: inputs (rows of xw words), targets (rows
 * of yw words); or, when it does not fit (streamed), on the host, each
 * batch copied in as it is used. */
struct ddata {
	void *x, *y;
	int64_t n, xw, yw;
	bool streamed;
};

struct gt {
	const struct plan *p;
	const struct train_opts *o;
	int rank, world, device;
	struct dataset train, test;
	bool has_test, train_open, test_open;
	struct exec e;
	bool exec_ok;
	cudaStream_t s;          /* compute, on the rank's first GPU */
	cudaStream_t cs[PLAN_MAX_DEVICES]; /* collectives, one stream per GPU of the rank */
	int ngpu, base;          /* the rank's GPUs: base .. base + ngpu - 1 */
	struct optim_cfg oc;
	struct sched_cfg sc;
	struct sampler smp;
	bool smp_ok;
	struct ddata dtrain, dtest;
	int64_t *order;          /* (num_samples) this epoch's order on the device */
	int64_t *host_order;
	int64_t *eval_order;     /* (eval_len) this rank's test samples, chunks padded */
	int64_t eval_len, eval_count;
	void *ybuf, *eval_ybuf;  /* targets of the current batch */
	struct words *w;
	double *lr_table, *hist;
	int64_t total_steps;
	float *h_params, *h_optim; /* host copies for initialisation, checkpoints, weights */
	struct store_client *store;
	struct comm *comm;       /* the first GPU's communicator (metrics, barriers, FSDP) */
	struct comm *dcomm[PLAN_MAX_DEVICES]; /* DDP: one communicator per GPU of the rank, [0] = comm */
	enum comm_op op;
	bool sharded;            /* FSDP FULL_SHARD or SHARD_GRAD_OP over several ranks */
	struct fsdp fsdp;
	bool fsdp_ok;
	struct fsdp_dev fdev;    /* the shards' memory: this GPU's, on the compute stream */
	float *h_buffers;        /* host copy of the buffers (running statistics) for sharded checkpoints */
	int *trigger;            /* per bucket: the node whose backward completes it */
	cudaEvent_t *ev_bucket, ev_comm[PLAN_MAX_DEVICES], ev_t0, ev_t1, ev_e0, ev_e1;
	bool events;
	bool ddp_on, issued[PLAN_MAX_DEVICES];
	cudaGraphExec_t graph;
	bool graph_ok, use_graph, warmed;
	int64_t saved_step;      /* the step of the last checkpoint written */
	int pipe_m;              /* pipeline chunks of each micro-batch (parallel.microbatches), 1: none */
	struct tiny_prog *tiny;  /* a small model's whole step as one block (tiny.h), on the device; NULL: layer by layer */
	/* a streamed training set: a loader thread fills host batches */
	struct loader l;
	bool loader_ok;
	float *hx[2], *hconv;    /* host batches; ids converted for the embedding */
	void *hy[2];
	int64_t *hidx;           /* a streamed test set: one chunk's indices and values */
	float *htx;
	void *hty;
	int64_t graph_steps;
	float graph_ms;
	double floor_us;
	struct rundir rd;
	bool rd_ok;
	int64_t micro;           /* samples per micro-batch */
	int accum, epochs_total;
	int64_t read_step;       /* steps whose losses were read back */
	struct ckpt_state at;
	bool tty;
	char err[1024];
};

#define CK(t, call)                                                                                                    \
	do {                                                                                                           \
		cudaError_t r_ = (call);                                                                               \
		if (r_ != cudaSuccess)                                                                                 \
			return util_fail((t)->err, sizeof(t)->err, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call,   \
					 cudaGetErrorString(r_));                                                      \
	} while (0)

/* Copies between host and device, ordered on the compute stream and
 * finished when they return.  (A plain cudaMemcpy runs on the legacy
 * stream, which a non-blocking stream does not wait for, and from pageable
 * memory it may return before the device has the data.) */
static int copy_on(struct gt *t, int d, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	if (bytes == 0)
		return 0;
	cudaStream_t s = t->exec_ok ? cuda_stream_of(&t->e, d) : t->s;
	cudaError_t r = cudaSetDevice(t->base + d);
	if (r == cudaSuccess)
		r = cudaMemcpyAsync(dst, src, bytes, kind, s);
	if (r == cudaSuccess)
		r = cudaStreamSynchronize(s);
	if (r == cudaSuccess)
		r = cudaSetDevice(t->base);
	if (r != cudaSuccess)
		return util_fail(t->err, sizeof t->err, "copying %zu bytes %s GPU %d failed: %s", bytes,
				 kind == cudaMemcpyHostToDevice ? "to" : "from", t->base + d, cudaGetErrorString(r));
	return 0;
}

/* to and from memory of the rank's first GPU, or of its GPU d */
static int put(struct gt *t, void *dev, const void *host, size_t bytes)
{
	return copy_on(t, 0, dev, host, bytes, cudaMemcpyHostToDevice);
}

static int get(struct gt *t, void *host, const void *dev, size_t bytes)
{
	return copy_on(t, 0, host, dev, bytes, cudaMemcpyDeviceToHost);
}

static int put_on(struct gt *t, int d, void *dev, const void *host, size_t bytes)
{
	return copy_on(t, d, dev, host, bytes, cudaMemcpyHostToDevice);
}

static int get_on(struct gt *t, int d, void *host, const void *dev, size_t bytes)
{
	return copy_on(t, d, host, dev, bytes, cudaMemcpyDeviceToHost);
}

int trainc_cuda_probe(int *count, char *err, size_t errlen)
{
	*count = 0;
	cudaError_t r = cudaGetDeviceCount(count);
	if (r != cudaSuccess) {
		*count = 0;
		/* without a driver CUDA says the driver is "insufficient": say what is missing */
		void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
		if (!drv)
			return util_fail(err, errlen, "no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded), so no usable CUDA device");
		dlclose(drv);
		return util_fail(err, errlen, "no usable CUDA device (cudaGetDeviceCount: %s)", cudaGetErrorString(r));
	}
	if (*count == 0)
		return util_fail(err, errlen, "no CUDA device is visible");
	return 0;
}

static void nap(double s)
{
	struct timespec ts = { 0, (long)(s * 1e9) };
	nanosleep(&ts, NULL);
}

/* Wait for the compute stream, watching NCCL; bounded by the job timeout. */
static int gpu_wait(struct gt *t, const char *what)
{
	double deadline = util_now() + 2 * t->p->parallel.timeout_s;
	launch_wait_begin();
	int rc = 0;
	for (double pause = 1e-5;; pause = pause < 1e-3 ? 2 * pause : 1e-3) {
		cudaError_t q = cudaStreamQuery(t->s);
		if (q == cudaSuccess)
			break;
		if (q != cudaErrorNotReady) {
			rc = util_fail(t->err, sizeof t->err, "rank %d: the GPU failed during %s: %s", t->rank, what, cudaGetErrorString(q));
			break;
		}
		if (t->comm && comm_nccl_poll(t->comm, t->err, sizeof t->err) != 0) {
			rc = -1;
			break;
		}
		if (util_now() > deadline) {
			if (t->comm)
				comm_nccl_abort(t->comm);
			rc = util_fail(t->err, sizeof t->err,
				       "rank %d: %s did not finish within %g s; a collective is stuck (%s; another rank died or stalled), "
				       "communicator aborted", t->rank, what, 2 * t->p->parallel.timeout_s,
				       t->sharded ? "FSDP's all-gathers and reduce-scatters" : t->comm ? "the DDP gradient all-reduce"
				       : "no collective runs here, so the GPU itself hangs");
			break;
		}
		nap(pause);
	}
	launch_wait_end();
	const char *ce = cuda_error(&t->e);
	if (rc == 0 && ce)
		rc = util_fail(t->err, sizeof t->err, "%s", ce);
	return rc;
}

/* Sums over ranks of host values, through NCCL in device memory. */
static int reduce_host(struct gt *t, double *v, int n)
{
	if (t->world == 1)
		return 0;
	if (put(t, t->w->sums, v, (size_t)n * sizeof *v) != 0)
		return -1;
	launch_wait_begin();
	int rc = comm_wait(comm_all_reduce_f64(t->comm, t->w->sums, n, COMM_SUM), t->err, sizeof t->err);
	launch_wait_end();
	if (rc != 0)
		return -1;
	return get(t, v, t->w->sums, (size_t)n * sizeof *v);
}

/* ---- FSDP's memory on this GPU (struct fsdp_dev) ---- */

static void fdev_zero(void *ctx, float *p, int64_t n)
{
	struct gt *t = ctx;
	cudaMemsetAsync(p, 0, (size_t)n * 4, t->s);
}

static void fdev_copy(void *ctx, float *dst, const float *src, int64_t n)
{
	struct gt *t = ctx;
	cudaMemcpyAsync(dst, src, (size_t)n * 4, cudaMemcpyDeviceToDevice, t->s);
}

static void fdev_add(void *ctx, float *dst, const float *src, int64_t n)
{
	struct gt *t = ctx;
	kc_accumulate(t->s, dst, src, n);
}

static void fdev_join(void *ctx)
{
	struct gt *t = ctx;
	cuda_join(&t->e);
}

static void fdev_fork(void *ctx)
{
	struct gt *t = ctx;
	cuda_fork(&t->e);
}

static int fdev_to_host(void *ctx, void *dst, const void *src, size_t bytes)
{
	return get(ctx, dst, src, bytes);
}

static int fdev_from_host(void *ctx, void *dst, const void *src, size_t bytes)
{
	return put(ctx, dst, src, bytes);
}

/* ---- data ---- */

/* The whole dataset to the device: inputs as the model's input takes them
 * (token ids as int32), targets as the loss reads them. */
static int upload(struct gt *t, const struct dataset *ds, struct ddata *d)
{
	const struct plan *p = t->p;
	d->n = ds->n;
	d->xw = ds->sample_numel;
	d->yw = (int64_t)dataset_target_bytes(ds, 1) / 4;
	size_t xb = (size_t)d->n * (size_t)d->xw * 4, yb = (size_t)d->n * (size_t)d->yw * 4;
	size_t free_b = 0, total_b = 0;
	CK(t, cudaMemGetInfo(&free_b, &total_b));
	const char *force = getenv("TRAINC_GPU_STREAM");
	if (xb + yb > free_b / 2 || (force && strcmp(force, "1") == 0)) {
		d->streamed = true; /* batches are copied in from the host as they are used */
		if (t->rank == 0 && !(force && strcmp(force, "1") == 0))
			printf("The %s set needs %.1f MiB and the GPU has %.1f MiB free: its batches are copied in as they are used\n",
			       ds == &t->train ? "training" : "test", (double)(xb + yb) / 1048576.0, (double)free_b / 1048576.0);
		return 0;
	}
	CK(t, cudaMalloc(&d->x, xb + 4));
	CK(t, cudaMalloc(&d->y, yb + 4));
	enum { CHUNK = 4096 };
	float *hx = malloc((size_t)CHUNK * (size_t)d->xw * 4);
	void *hy = malloc((size_t)CHUNK * (size_t)d->yw * 4 + 4);
	int64_t *idx = malloc(CHUNK * sizeof *idx);
	if (!hx || !hy || !idx) {
		free(hx), free(hy), free(idx);
		return util_fail(t->err, sizeof t->err, "out of memory staging the dataset");
	}
	bool ids = p->nodes[0].dtype == DT_I64;
	int rc = 0;
	for (int64_t at = 0; at < d->n && rc == 0; at += CHUNK) {
		int b = (int)(d->n - at < CHUNK ? d->n - at : CHUNK);
		for (int k = 0; k < b; k++)
			idx[k] = at + k;
		dataset_fill(ds, idx, b, hx, hy);
		if (ids) /* the embedding's index type, as exec.c's copy_input */
			for (int64_t k = 0; k < (int64_t)b * d->xw; k++)
				((int32_t *)(void *)hx)[k] = (int32_t)hx[k];
		if (put(t, (char *)d->x + (size_t)at * (size_t)d->xw * 4, hx, (size_t)b * (size_t)d->xw * 4) != 0 ||
		    put(t, (char *)d->y + (size_t)at * (size_t)d->yw * 4, hy, (size_t)b * (size_t)d->yw * 4) != 0)
			rc = -1;
	}
	free(hx), free(hy), free(idx);
	return rc;
}

/* This epoch's order of this rank's samples, to the device. */
static int set_epoch(struct gt *t, int64_t epoch)
{
	if (t->dtrain.streamed)
		return 0; /* the loader thread owns the sampler and keeps the order */
	sampler_set_epoch(&t->smp, epoch - 1);
	for (int64_t i = 0; i < t->smp.num_samples; i++)
		t->host_order[i] = sampler_index(&t->smp, i);
	int64_t pos = t->at.batch * t->micro;
	if (put(t, t->order, t->host_order, (size_t)t->smp.num_samples * sizeof *t->order) != 0)
		return -1;
	return put(t, &t->w->pos, &pos, sizeof pos);
}

/* A host batch of b samples to the input and target buffers, on the
 * compute stream; the host buffers may be reused on return (pageable
 * copies are staged before the call returns). */
static int host_batch_in(struct gt *t, const float *x, const void *y, int64_t b, int64_t xw, int64_t yw, float *in, void *ybuf)
{
	const float *src = x;
	if (t->p->nodes[0].dtype == DT_I64) { /* the embedding's index type, as exec.c's copy_input */
		for (int64_t k = 0; k < b * xw; k++)
			((int32_t *)(void *)t->hconv)[k] = (int32_t)x[k];
		src = t->hconv;
	}
	CK(t, cudaMemcpyAsync(in, src, (size_t)(b * xw) * 4, cudaMemcpyHostToDevice, t->s));
	CK(t, cudaMemcpyAsync(ybuf, y, (size_t)(b * yw) * 4, cudaMemcpyHostToDevice, t->s));
	return 0;
}

/* The next b samples into the current copy's input (exec_set_micro) and
 * the targets at ybuf, gathered on the device. */
static void feed(struct gt *t, int64_t b, void *ybuf)
{
	float *in = exec_output(&t->e, 0, true);
	kc_gather_rows(t->s, in, t->dtrain.x, t->dtrain.xw, t->order, &t->w->pos, b);
	kc_gather_rows(t->s, ybuf, t->dtrain.y, t->dtrain.yw, t->order, &t->w->pos, b);
	kc_add_i64(t->s, &t->w->pos, b);
}

/* A streamed set's next micro-batch of b samples from the loader: chunk j
 * (first[j], size[j]) into copy j's input, the targets at ybuf. */
static int feed_streamed(struct gt *t, int64_t b, const int64_t *first, const int64_t *size, int k, char *ybuf)
{
	float *x;
	void *y;
	int got = 0;
	launch_wait_begin();
	int r = loader_next(&t->l, &x, &y, &got);
	launch_wait_end();
	if (r < 0)
		return util_fail(t->err, sizeof t->err, "%s", t->l.err);
	if (r == 0 || got != b)
		return util_fail(t->err, sizeof t->err, "internal: the loader gave %d samples where the step expects %lld", r ? got : 0,
				 (long long)b);
	int rc = 0;
	int64_t xw = t->dtrain.xw, yw = t->dtrain.yw;
	for (int j = 0; j < k && rc == 0; j++) {
		exec_set_micro(j);
		rc = host_batch_in(t, x + first[j] * xw, (const char *)y + (size_t)(first[j] * yw) * 4, size[j], xw, yw,
				   exec_output(&t->e, 0, true), ybuf + (size_t)(first[j] * yw) * 4);
	}
	exec_set_micro(0);
	loader_release(&t->l);
	return rc;
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
	float base_scale = e->loss_scale;
	for (int m = 0; m < count; m++) {
		int64_t b = sizes[m];
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
		if (t->dtrain.streamed && feed_streamed(t, b, first, size, k, yb) != 0)
			return -1;
		for (int j = 0; j < k; j++) {
			exec_set_micro(j);
			if (!t->dtrain.streamed)
				feed(t, size[j], yb + (size_t)(first[j] * t->dtrain.yw) * 4);
			exec_forward_range(e, 1, p->nnodes, (int)size[j], true);
			/* a mean over the micro-batch: each chunk's gradient weighs size / b */
			e->loss_scale = base_scale * (p->train.reduction == RED_SUM ? 1.0f : (float)size[j] / (float)b);
			cuda_loss(e, yb + (size_t)(first[j] * t->dtrain.yw) * 4, (int)size[j], true, &w->step_loss,
				  p->train.reduction == RED_SUM ? 1.0 : (double)size[j], m > 0 || j > 0, NULL);
		}
		e->loss_scale = base_scale;
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
	kc_optim_prepare(s, t->oc, t->lr_table, &w->step, w->coef);
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
	kc_record(s, &w->step_loss, t->hist, &w->step, t->total_steps);
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
	if (rc != 0)
		return rc;
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
	CK(t, cudaMemsetAsync(w->sums, 0, sizeof w->sums, t->s));
	float *in = exec_output(e, 0, false);
	for (int64_t at = 0; at < t->eval_count; at += EB) {
		int m = (int)(t->eval_count - at < EB ? t->eval_count - at : EB);
		cuda_join(e); /* the last chunk's loss read the targets this one overwrites */
		if (t->dtest.streamed) {
			/* this chunk's samples, the short last one padded with its first (as train.c) */
			for (int64_t k = 0; k < EB; k++)
				t->hidx[k] = k < m ? t->rank + (at + k) * t->world : t->rank + at * t->world;
			dataset_fill(&t->test, t->hidx, (int)EB, t->htx, t->hty);
			CK(t, cudaStreamSynchronize(t->s)); /* the host buffers of the last chunk are free */
			if (host_batch_in(t, t->htx, t->hty, EB, t->dtest.xw, t->dtest.yw, in, t->eval_ybuf) != 0)
				return -1;
		} else {
			kc_gather_rows(t->s, in, t->dtest.x, t->dtest.xw, t->eval_order + at, &w->zero, EB);
			kc_gather_rows(t->s, t->eval_ybuf, t->dtest.y, t->dtest.yw, t->eval_order + at, &w->zero, EB);
		}
		exec_forward_range(e, 1, p->nnodes, (int)EB, false);
		/* the seed sums per-sample losses and divides by the set size */
		cuda_loss(e, t->eval_ybuf, m, false, &w->sums[0], p->train.reduction == RED_SUM ? 1.0 : (double)m, true, &w->sums[1]);
	}
	cuda_join(e);
	if (t->fsdp_ok) {
		fsdp_release_all(&t->fsdp);
		if (t->fsdp.failed)
			return util_fail(t->err, sizeof t->err, "rank %d: %s", t->rank, t->fsdp.err);
	}
	if (gpu_wait(t, "evaluation") != 0)
		return -1;
	double sums[3];
	if (get(t, sums, w->sums, 2 * sizeof *sums) != 0)
		return -1;
	sums[2] = (double)t->eval_count;
	if (reduce_host(t, sums, 3) != 0)
		return -1;
	if (t->rank != 0)
		return 0;
	train_report_eval(p, t->rd_ok ? &t->rd : NULL, t->at.epoch, sums);
	return 0;
}

/* ---- state: initialisation, checkpoints, weights ---- */

static int upload_state(struct gt *t)
{
	struct exec *e = &t->e;
	int k = t->p->train.optim.state_per_param;
	for (int d = 0; d < t->ngpu; d++) {
		if (put_on(t, d, exec_dev_trainables(e, d), t->h_params + e->t_lo[d], (size_t)e->t_n[d] * 4) != 0 ||
		    put_on(t, d, exec_dev_buffers(e, d), t->h_params + e->b_lo[d], (size_t)e->b_n[d] * 4) != 0)
			return -1;
		for (int j = 0; j < k; j++)
			if (put_on(t, d, exec_dev_optim(e, d) + j * exec_dev_stride(e, d), t->h_optim + j * e->trainable + e->t_lo[d],
				   (size_t)e->t_n[d] * 4) != 0)
				return -1;
	}
	return put(t, &t->w->step, &t->at.step, sizeof t->at.step);
}

static int download_state(struct gt *t, bool with_optim)
{
	struct exec *e = &t->e;
	int k = t->p->train.optim.state_per_param;
	if (gpu_wait(t, "the step before saving") != 0)
		return -1;
	for (int d = 0; d < t->ngpu; d++) {
		if (get_on(t, d, t->h_params + e->t_lo[d], exec_dev_trainables(e, d), (size_t)e->t_n[d] * 4) != 0 ||
		    get_on(t, d, t->h_params + e->b_lo[d], exec_dev_buffers(e, d), (size_t)e->b_n[d] * 4) != 0)
			return -1;
		for (int j = 0; with_optim && j < k; j++)
			if (get_on(t, d, t->h_optim + j * e->trainable + e->t_lo[d], exec_dev_optim(e, d) + j * exec_dev_stride(e, d),
				   (size_t)e->t_n[d] * 4) != 0)
				return -1;
	}
	return 0;
}

static int load_state(struct gt *t)
{
	const struct plan *p = t->p;
	const struct train_opts *o = t->o;
	struct exec *e = &t->e;
	int k = p->train.optim.state_per_param;
	for (int j = 0; j < p->nparams; j++)
		exec_init_param(p, j, p->train.seed, t->h_params + p->params[j].offset);
	optim_state_init(&t->oc, (struct optim_state_view){ t->h_optim, e->trainable }, e->trainable);
	if (t->sharded) {
		/* each rank initialises its own shards and the optimizer state of them */
		float *st = calloc((size_t)(t->fsdp.total * k) + 1, 4);
		if (!st)
			return util_fail(t->err, sizeof t->err, "out of memory");
		optim_state_init(&t->oc, (struct optim_state_view){ st, t->fsdp.total }, t->fsdp.total);
		int r = fsdp_init_params(&t->fsdp, p->train.seed) != 0 || (k > 0 && put(t, t->fsdp.optim, st, (size_t)(t->fsdp.total * k) * 4) != 0);
		free(st);
		if (r)
			return util_fail(t->err, sizeof t->err, "%s", t->fsdp.err[0] ? t->fsdp.err : "initialising the shards failed");
	}
	int rc = 0;
	if (o->resume) {
		rc = ckpt_load(o->resume, p, t->h_params, t->h_optim, e->trainable, k, &t->at, t->err, sizeof t->err);
		if (rc == 0)
			rc = train_resume_at(p, o->resume, "--gpus", &t->at, t->world, t->micro, t->smp.num_batches, t->rank, t->err,
					     sizeof t->err);
	} else if (o->init) {
		rc = weights_load(p, t->h_params, o->init, true, t->err, sizeof t->err);
		if (rc == 0 && t->rank == 0)
			printf("Initialised from %s\n", o->init);
	}
	if (rc != 0)
		return -1;
	if (t->sharded) { /* shards of the loaded state; the step counter */
		if ((o->resume || o->init) && fsdp_load_full(&t->fsdp, t->h_params, o->resume ? t->h_optim : NULL) != 0)
			return util_fail(t->err, sizeof t->err, "%s", t->fsdp.err);
		return put(t, &t->w->step, &t->at.step, sizeof t->at.step);
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

static int barrier(struct gt *t)
{
	if (!t->comm)
		return 0;
	launch_wait_begin();
	int rc = comm_barrier(t->comm, t->err, sizeof t->err);
	launch_wait_end();
	return rc;
}

static float *host_buffer_at(void *ctx, int k)
{
	struct gt *t = ctx;
	return t->h_buffers + (t->p->params[k].offset - t->e.buffer_start);
}

/* FSDP: every rank writes its shard (copied to the host), rank 0 commits. */
static int sharded_checkpoint(struct gt *t, const char *dir)
{
	const struct plan *p = t->p;
	int k = p->train.optim.state_per_param;
	int64_t total = t->fsdp.total;
	float *shard = malloc((size_t)total * 4 + 4), *optim = malloc((size_t)(total * k) * 4 + 4);
	int rc = !shard || !optim ? util_fail(t->err, sizeof t->err, "out of memory copying the shards") : 0;
	if (rc == 0 && (gpu_wait(t, "the step before saving") != 0 || get(t, shard, t->fsdp.shard, (size_t)total * 4) != 0 ||
			(k > 0 && get(t, optim, t->fsdp.optim, (size_t)(total * k) * 4) != 0) ||
			get(t, t->h_buffers, t->e.params, (size_t)(p->unsharded_elems - t->e.buffer_start) * 4) != 0))
		rc = -1;
	t->at.micro = t->micro;
	if (rc == 0 && t->rank == 0)
		rc = ckpt_shard_begin(dir, t->at.step, t->err, sizeof t->err);
	double v = rc != 0;
	if (reduce_host(t, &v, 1) != 0 || v != 0) {
		free(shard), free(optim);
		return rc != 0 ? -1 : util_fail(t->err, sizeof t->err, "another rank could not prepare its shard");
	}
	rc = ckpt_shard_write(dir, p, t->at.step, t->rank, t->world, shard, optim, total, t->fsdp.at, host_buffer_at, t, t->err, sizeof t->err);
	free(shard), free(optim);
	v = rc != 0;
	if (reduce_host(t, &v, 1) != 0 || v != 0)
		return rc != 0 ? -1 : util_fail(t->err, sizeof t->err, "another rank could not write its shard");
	if (t->rank == 0) {
		rc = ckpt_shard_commit(dir, p, &t->at, t->err, sizeof t->err);
		if (rc == 0)
			printf("Checkpoint: step %lld saved to %s (%d shards)\n", (long long)t->at.step, dir, t->world);
	}
	v = rc != 0;
	if (reduce_host(t, &v, 1) != 0 || v != 0)
		return rc != 0 ? -1 : util_fail(t->err, sizeof t->err, "rank 0 could not commit the checkpoint");
	return 0;
}

/* The unsharded parameters (and optimizer state) in the host copies, on
 * rank 0; every rank takes part. */
static int full_state(struct gt *t, bool with_optim)
{
	if (!t->sharded)
		return download_state(t, with_optim);
	if (gpu_wait(t, "the step before saving") != 0)
		return -1;
	if (fsdp_gather_full(&t->fsdp, t->rank == 0 ? t->h_params : NULL, t->rank == 0 ? t->h_optim : NULL, with_optim) != 0)
		return util_fail(t->err, sizeof t->err, "%s", t->fsdp.err);
	return 0;
}

/* Rank 0 writes, every rank waits at the barrier: the seed's protocol.
 * With FSDP each rank writes its own shard instead. */
static int checkpoint(struct gt *t, const char *dir)
{
	if (t->saved_step == t->at.step && t->at.step > 0)
		return 0; /* checkpoint_every just wrote this step */
	t->saved_step = t->at.step;
	if (t->sharded)
		return sharded_checkpoint(t, dir);
	if (download_state(t, true) != 0)
		return -1;
	t->at.micro = t->micro;
	int rc = 0;
	if (t->rank == 0) {
		launch_beat();
		rc = ckpt_save(dir, t->p, t->h_params, t->h_optim, t->e.trainable, t->p->train.optim.state_per_param, &t->at, t->err,
			       sizeof t->err);
		launch_beat();
		if (rc == 0)
			printf("Checkpoint: step %lld saved to %s\n", (long long)t->at.step, dir);
	}
	if (rc != 0) {
		barrier(t); /* the others wait there; rank 0's own error is the one to report */
		return -1;
	}
	return barrier(t);
}

/* ---- setup ---- */

static int join_job(struct gt *t)
{
	int fd = launch_store_fd();
	t->store = fd >= 0 ? store_client_open_fd(fd) : NULL;
	if (!t->store)
		return util_fail(t->err, sizeof t->err, "rank %d has no connection to the launcher's store", t->rank);
	double timeout = t->p->parallel.timeout_s;
	store_client_set_timeout(t->store, timeout);
	if (train_agree_plan(t->store, t->p, t->rank, t->world, t->err, sizeof t->err) != 0)
		return -1;
	/* one communicator per GPU of the rank, as ProcessGroupNCCL keeps one per device */
	for (int d = 0; d < t->ngpu; d++) {
		t->dcomm[d] = comm_open_nccl(t->store, t->rank, t->world, t->base + d, t->cs[d], 2 * timeout, t->err, sizeof t->err);
		if (!t->dcomm[d])
			return -1;
		if (d > 0 && comm_nccl_follow(t->dcomm[d], cuda_stream_of(&t->e, d), t->err, sizeof t->err) != 0)
			return -1;
	}
	CK(t, cudaSetDevice(t->base));
	t->comm = t->dcomm[0];
	const struct plan *p = t->p;
	t->op = p->train.global_batch && p->train.reduction == RED_SUM ? COMM_SUM : COMM_AVG;
	/* collectives started through comm.h read what the compute stream wrote */
	if (comm_nccl_follow(t->comm, t->s, t->err, sizeof t->err) != 0)
		return -1;
	if (t->sharded) {
		/* a rank of several GPUs keeps its units on the first; the others
		 * read and write them over peer access */
		t->fdev = (struct fsdp_dev){ backend_cuda.alloc, backend_cuda.free, fdev_zero, fdev_copy, fdev_add, fdev_to_host,
					     fdev_from_host, t->ngpu > 1 ? fdev_join : NULL, t->ngpu > 1 ? fdev_fork : NULL, t->s, t };
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

static int setup(struct gt *t)
{
	const struct plan *p = t->p;
	const struct plan_train *tr = &p->train;
	t->ngpu = p->ndevices;
	t->base = t->device * p->ndevices; /* rank r owns GPUs r*D .. r*D + D - 1 */
	cuda_set_device_base(t->base);
	CK(t, cudaSetDevice(t->base));
	if (train_open_data(p, &p->train_data, &t->train, t->err, sizeof t->err) != 0)
		return -1;
	t->train_open = true;
	t->has_test = p->test_data.kind != DATA_NONE;
	if (t->has_test) {
		if (train_open_data(p, &p->test_data, &t->test, t->err, sizeof t->err) != 0)
			return -1;
		t->test_open = true;
	}
	if (tr->global_batch) {
		int64_t share = tr->global_batch / t->world;
		t->micro = tr->micro_batch ? tr->micro_batch : share;
		t->accum = (int)(share / t->micro);
	} else {
		t->micro = tr->batch;
		t->accum = 1;
	}
	if (t->train.n < t->world)
		return util_fail(t->err, sizeof t->err, "%lld training samples cannot feed %d ranks", (long long)t->train.n, t->world);
	if (sampler_init(&t->smp, t->train.n, t->world, t->rank, (int)t->micro, tr->shuffle, 0, tr->drop_last, tr->seed, t->err,
			 sizeof t->err) != 0)
		return -1;
	t->smp_ok = true;
	if (t->smp.num_batches == 0)
		return util_fail(t->err, sizeof t->err, "rank %d's %lld training samples make no batch of %lld with drop_last; lower the "
				 "batch or set drop_last = false", t->rank, (long long)t->smp.num_samples, (long long)t->micro);
	int64_t B = t->micro, last = t->smp.num_samples % B ? t->smp.num_samples % B : B;
	/* every batch size convolutions will see: the micro-batch (or its
	 * pipeline chunks), the epoch's last one (chunked alike), the test batch */
	t->pipe_m = p->parallel.microbatches > 1 ? (int)p->parallel.microbatches : 1;
	int64_t lchunk = (last + t->pipe_m - 1) / t->pipe_m, chunk = (B + t->pipe_m - 1) / t->pipe_m;
	int64_t sizes[5] = { chunk, B - chunk * ((B + chunk - 1) / chunk - 1), lchunk, last - lchunk * ((last + lchunk - 1) / lchunk - 1),
			     p->eval_batch };
	for (int d = 0; d < t->ngpu; d++) {
		CK(t, cudaSetDevice(t->base + d));
		CK(t, cudaStreamCreateWithFlags(&t->cs[d], cudaStreamNonBlocking));
		CK(t, cudaEventCreateWithFlags(&t->ev_comm[d], cudaEventDisableTiming));
	}
	CK(t, cudaSetDevice(t->base));
	t->sharded = p->parallel.mode == PAR_FSDP && p->parallel.shard != SHARD_NONE && t->world > 1;
	if (exec_init_on(&t->e, &backend_cuda, p, sizes, 5, t->sharded, t->pipe_m, t->err, sizeof t->err) != 0)
		return -1;
	t->exec_ok = true;
	t->s = cuda_stream(&t->e);
	t->e.seed = tr->seed;
	t->e.rank = (uint32_t)t->rank;
	if (tr->global_batch && tr->reduction == RED_MEAN)
		t->e.loss_scale = 1.0f / (float)t->accum;
	t->oc = train_optim_cfg(&tr->optim);
	t->sc = train_sched_cfg(&tr->sched);
	t->at = (struct ckpt_state){ 1, 0, 0, t->world, t->micro };
	CK(t, cudaMalloc((void **)&t->w, sizeof *t->w));
	CK(t, cudaMemsetAsync(t->w, 0, sizeof *t->w, t->s));
	cuda_use_step(&t->e, &t->w->step);
	/* the run's length and every step's lr */
	t->epochs_total = (int)tr->epochs;
	int64_t spe = (t->smp.num_batches + t->accum - 1) / t->accum;
	if (tr->steps)
		t->epochs_total = (int)((tr->steps + spe - 1) / spe);
	t->total_steps = spe * t->epochs_total;
	double *lr = malloc((size_t)t->total_steps * sizeof *lr);
	if (!lr)
		return util_fail(t->err, sizeof t->err, "out of memory");
	for (int64_t k = 0; k < t->total_steps; k++)
		lr[k] = sched_lr(&t->sc, tr->optim.lr, k / spe, k);
	cudaError_t r1 = cudaMalloc((void **)&t->lr_table, (size_t)t->total_steps * sizeof *lr);
	int rc = r1 == cudaSuccess ? put(t, t->lr_table, lr, (size_t)t->total_steps * sizeof *lr) : 0;
	free(lr);
	CK(t, r1);
	if (rc != 0)
		return -1;
	CK(t, cudaMalloc((void **)&t->hist, (size_t)t->total_steps * sizeof *t->hist));
	/* data on the device */
	if (upload(t, &t->train, &t->dtrain) != 0 || (t->has_test && upload(t, &t->test, &t->dtest) != 0))
		return -1;
	t->host_order = malloc((size_t)t->smp.num_samples * sizeof *t->host_order);
	if (!t->host_order)
		return util_fail(t->err, sizeof t->err, "out of memory");
	CK(t, cudaMalloc((void **)&t->order, (size_t)t->smp.num_samples * sizeof *t->order));
	CK(t, cudaMalloc(&t->ybuf, (size_t)B * (size_t)t->dtrain.yw * 4 + 4));
	if (t->has_test) {
		int64_t EB = p->eval_batch, n = t->test.n;
		t->eval_count = n > t->rank ? (n - t->rank + t->world - 1) / t->world : 0;
		t->eval_len = (t->eval_count + EB - 1) / EB * EB;
		int64_t *h = malloc((size_t)(t->eval_len + 1) * sizeof *h);
		if (!h)
			return util_fail(t->err, sizeof t->err, "out of memory");
		/* a short last chunk is padded with its first sample, as train.c */
		for (int64_t i = 0; i < t->eval_len; i++)
			h[i] = i < t->eval_count ? t->rank + i * t->world : t->rank + (t->eval_count - 1) / EB * EB * t->world;
		cudaError_t r2 = cudaMalloc((void **)&t->eval_order, (size_t)(t->eval_len + 1) * sizeof *h);
		rc = r2 == cudaSuccess ? put(t, t->eval_order, h, (size_t)(t->eval_len + 1) * sizeof *h) : 0;
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
	if (t->world > 1 && join_job(t) != 0)
		return -1;
	int k = p->train.optim.state_per_param;
	t->h_params = calloc((size_t)p->unsharded_elems + 1, 4);
	t->h_optim = calloc((size_t)(t->e.trainable * k) + 1, 4);
	if (!t->h_params || !t->h_optim)
		return util_fail(t->err, sizeof t->err, "out of memory for the host copy of the parameters");
	if (load_state(t) != 0)
		return -1;
	if (t->rank == 0) {
		if (rundir_create(&t->rd, t->o->run_dir, p, t->o->version, t->o->argc, t->o->argv, t->err, sizeof t->err) != 0)
			return -1;
		t->rd_ok = true;
	}
	if (t->dtrain.streamed) { /* a loader thread fills host batches; no graph, no one-block step */
		size_t xbytes = (size_t)(t->micro * t->dtrain.xw) * 4 + 4, ybytes = (size_t)(t->micro * t->dtrain.yw) * 4 + 4;
		for (int slot = 0; slot < 2; slot++) {
			t->hx[slot] = malloc(xbytes);
			t->hy[slot] = malloc(ybytes);
			if (!t->hx[slot] || !t->hy[slot])
				return util_fail(t->err, sizeof t->err, "out of memory for batch buffers");
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
		h->cfg = t->oc, h->lr_table = t->lr_table, h->step = &t->w->step, h->hist = t->hist, h->cap = t->total_steps;
		tiny_build(h, &t->e, t->micro);
		cudaError_t r = cudaMalloc((void **)&t->tiny, sizeof *h);
		rc = r == cudaSuccess ? put(t, t->tiny, h, sizeof *h) : 0;
		free(h);
		CK(t, r);
		if (rc != 0)
			return -1;
	}
	const char *g = getenv("TRAINC_CUDA_GRAPH");
	t->use_graph = (!g || strcmp(g, "0") != 0) && !t->dtrain.streamed;
	t->read_step = t->at.step;
	t->tty = t->rank == 0 && isatty(STDOUT_FILENO) && !getenv("TRAINC_PLAIN");
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
	if (gpu_wait(t, "the training steps") != 0)
		return -1;
	struct cuda_dev flags;
	if (get(t, &flags, cuda_dev_words(&t->e), sizeof flags) != 0)
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
	if (get(t, h, t->hist + t->read_step, (size_t)n * sizeof *h) != 0) {
		free(h);
		return -1;
	}
	for (int64_t k = 0; k < n; k++) {
		if (!isfinite(h[k])) {
			double bad = h[k];
			free(h);
			return util_fail(t->err, sizeof t->err,
					 "the loss is %s at step %lld (epoch %lld); lower the learning rate, clip gradients "
					 "(clip_grad_norm) or check the data (train with --cpus to name the first layer that overflows)",
					 isnan(bad) ? "NaN" : bad > 0 ? "+infinity" : "-infinity", (long long)(t->read_step + k + 1),
					 (long long)t->at.epoch);
		}
		*sum += h[k];
	}
	double v[2] = { h[n - 1], (double)last_samples };
	free(h);
	t->read_step = t->at.step;
	if (reduce_host(t, v, 2) != 0)
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
	if (gpu_wait(t, "the training steps") != 0)
		return -1;
	float ms = 0;
	CK(t, cudaEventElapsedTime(&ms, t->ev_t0, t->ev_t1));
	t->graph_ms += ms;
	t->graph_steps += *steps;
	*steps = 0;
	return 0;
}

/* One epoch from the current position: 0, 1 when the step budget is spent, -1. */
static int run_epoch(struct gt *t, double *train_time, int64_t *images)
{
	const struct plan *p = t->p;
	const struct plan_train *tr = &p->train;
	int64_t nb = t->smp.num_batches, B = t->micro;
	if (set_epoch(t, t->at.epoch) != 0)
		return -1;
	double te = util_now(), loss_sum = 0;
	int64_t seen = 0, micro_done = 0, graph_steps = 0;
	bool budget_spent = false, timing = false;
	while (t->at.batch < nb) {
		int64_t sizes[64];
		int count = 0;
		bool full = true;
		for (int64_t k = t->at.batch; k < nb && count < t->accum && count < 64; k++) {
			int64_t b = k + 1 < nb || t->smp.num_samples % B == 0 ? B : t->smp.num_samples % B;
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
		micro_done += count;
		seen += samples;
		*images += samples;
		launch_beat();
		bool log = micro_done % tr->log_interval < (int64_t)count || t->at.batch == nb;
		if (log) {
			/* the wait would be timed as a step: close the span first */
			if (close_span(t, &timing, &graph_steps) != 0)
				return -1;
			double last = 0, sum = 0;
			if (read_losses(t, samples, &last, &sum) != 0)
				return -1;
			loss_sum += sum;
			if (t->rank == 0) {
				double rate = (double)seen * t->world / (util_now() - te);
				double lr = sched_lr(&t->sc, tr->optim.lr, t->at.epoch - 1, t->at.step - 1);
				if (t->rd_ok)
					rundir_metric_step(&t->rd, t->at.step, t->at.epoch, last, lr, rate);
				if (t->tty) {
					train_progress(t->at.epoch, t->at.batch * B, t->smp.num_samples, last, rate);
				} else {
					int64_t done = t->at.batch * B < t->smp.num_samples ? t->at.batch * B : t->smp.num_samples;
					printf("Train Epoch: %lld [%lld/%lld (%.0f%%)]\tLoss: %.6f\n", (long long)t->at.epoch, (long long)done,
					       (long long)t->smp.num_samples, 100.0 * (double)done / (double)t->smp.num_samples, last);
					fflush(stdout);
				}
			}
		}
		if (tr->checkpoint_every && t->o->save && !train_is_weights_file(t->o->save) && t->at.step % tr->checkpoint_every == 0 &&
		    (close_span(t, &timing, &graph_steps) != 0 || checkpoint(t, t->o->save) != 0))
			return -1;
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
		if (loader_next(&t->l, &x, &y, &got) != 0)
			return util_fail(t->err, sizeof t->err, "internal: the loader did not end the epoch with the sampler");
	}
	double last, sum;
	if (read_losses(t, 1, &last, &sum) != 0)
		return -1;
	loss_sum += sum;
	if (gpu_wait(t, "the epoch") != 0)
		return -1;
	if (t->tty)
		fputs("\r\033[K", stdout);
	double dt = util_now() - te;
	*train_time += dt;
	double sums[2] = { loss_sum, (double)seen };
	if (reduce_host(t, sums, 2) != 0)
		return -1;
	if (t->rank == 0)
		printf("Train Epoch: %lld\tAverage loss: %.6f\t%.0f images/s\n", (long long)t->at.epoch, sums[1] ? sums[0] / sums[1] : 0.0,
		       sums[1] / dt);
	return budget_spent ? 1 : 0;
}

static int finish(struct gt *t, float loop_ms, double train_time, int64_t images)
{
	const struct train_opts *o = t->o;
	const struct plan *p = t->p;
	if (t->rank == 0) {
		printf("CUDA event elapsed time: %.4f sec\n", loop_ms / 1000.0);
		printf("Training loop: %.0f images/s while training\n", train_time > 0 ? (double)images * t->world / train_time : 0.0);
		if (t->graph_steps > 0) {
			double us = 1000.0 * t->graph_ms / (double)t->graph_steps;
			printf("Step time: %.1f us per step (CUDA graph%s, %lld steps); CUDA graph launch floor: %.1f us (ratio %.2f)\n", us,
			       t->tiny ? " of one kernel" : "", (long long)t->graph_steps, t->floor_us, t->floor_us > 0 ? us / t->floor_us : 0.0);
		} else {
			printf("Step time: no step ran as a CUDA graph%s\n",
			       !t->use_graph ? (t->dtrain.streamed ? " (streamed data)" : " (TRAINC_CUDA_GRAPH=0)")
					     : " (the first full-batch step runs eagerly, later ones replay a graph; this run had fewer than two)");
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
	printf("Rank %d: %s, parameters, gradients and optimizer state %.2f MiB; GPU memory in use %.1f MiB of %.1f MiB (first GPU)\n",
	       t->rank, gpus, (double)state / 1048576.0, (double)(total_b - free_b) / 1048576.0, (double)total_b / 1048576.0);
	fflush(stdout);
	if (o->save && !train_is_weights_file(o->save) && checkpoint(t, o->save) != 0)
		return -1;
	if (full_state(t, false) != 0)
		return -1;
	if (t->rank == 0) {
		char path[4200];
		snprintf(path, sizeof path, "%s/weights.safetensors", rundir_path(&t->rd));
		if (weights_save(p, t->h_params, path, t->err, sizeof t->err) != 0)
			return -1;
		if (o->save && train_is_weights_file(o->save)) {
			if (weights_save(p, t->h_params, o->save, t->err, sizeof t->err) != 0)
				return -1;
			printf("Saved the weights to %s\n", o->save);
		}
		printf("Run directory: %s\n", rundir_path(&t->rd));
	}
	return 0;
}

static void teardown(struct gt *t)
{
	if (t->graph_ok)
		cudaGraphExecDestroy(t->graph);
	if (t->loader_ok)
		loader_stop(&t->l);
	for (int k = 0; k < 2; k++) {
		free(t->hx[k]);
		free(t->hy[k]);
	}
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
	void *dev[] = { t->dtrain.x, t->dtrain.y, t->dtest.x, t->dtest.y, t->order, t->eval_order, t->ybuf, t->eval_ybuf, t->w, t->lr_table, t->hist,
			t->tiny };
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
	int rc = setup(t);
	if (rc == 0 && t->rank == 0) {
		char c1[32], c2[32];
		printf("%s: %s parameters, %s training samples, %d rank%s on GPU%s, batch %lld per rank%s, %d epoch%s\n", p->model_name,
		       print_count(p->total_params, c1, sizeof c1), print_count(t->train.n, c2, sizeof c2), t->world, t->world == 1 ? "" : "s",
		       t->world == 1 ? "" : "s", (long long)t->micro, t->accum > 1 ? " (accumulated)" : "", t->epochs_total,
		       t->epochs_total == 1 ? "" : "s");
		struct cudaDeviceProp prop;
		if (cudaGetDeviceProperties(&prop, t->base) != cudaSuccess)
			snprintf(prop.name, sizeof prop.name, "?");
		printf("GPU: %s, %d per rank; data %s; steps %s%s%s\n", prop.name, t->ngpu,
		       t->dtrain.streamed ? "copied in per batch" : "in device memory", t->use_graph ? "replayed as a CUDA graph" : "one by one",
		       t->tiny ? ", one kernel each" : "", t->pipe_m > 1 ? ", pipelined" : "");
		fflush(stdout);
	}
	double train_time = 0;
	int64_t images = 0;
	float loop_ms = 0;
	if (rc == 0 && cudaEventRecord(t->ev_e0, t->s) != cudaSuccess)
		rc = util_fail(t->err, sizeof t->err, "cudaEventRecord failed");
	while (rc == 0 && t->at.epoch <= t->epochs_total) {
		int r = run_epoch(t, &train_time, &images);
		if (r < 0 || (t->has_test && evaluate(t) != 0)) {
			rc = -1;
			break;
		}
		if (r == 1)
			break;
		t->at.epoch++;
		t->at.batch = 0;
	}
	if (rc == 0 && (cudaEventRecord(t->ev_e1, t->s) != cudaSuccess || cudaEventSynchronize(t->ev_e1) != cudaSuccess ||
			cudaEventElapsedTime(&loop_ms, t->ev_e0, t->ev_e1) != cudaSuccess))
		rc = util_fail(t->err, sizeof t->err, "timing the training loop with CUDA events failed");
	if (rc == 0)
		rc = finish(t, loop_ms, train_time, images);
	if (rc != 0)
		fprintf(stderr, "trainc: %s\n", t->err);
	teardown(t);
	free(t);
	return rc != 0 ? 1 : 0;
}
