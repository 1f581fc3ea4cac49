/* train_gpu_data.c: what moves between host and GPU for the GPU trainer:
 * copies ordered on a GPU's compute stream and complete on return, waits
 * on the GPU bounded by the job timeout, metric sums over ranks, datasets
 * uploaded once (or streamed when they do not fit), each epoch's order, the
 * batches gathered on the device or copied in, and FSDP's memory table.
 * Does not decide when anything runs (train_gpu.c does).
 */
#include "runtime/cuda/train_gpu_impl.h"

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
int tg_put(struct gt *t, void *dev, const void *host, size_t bytes)
{
	return copy_on(t, 0, dev, host, bytes, cudaMemcpyHostToDevice);
}

int tg_get(struct gt *t, void *host, const void *dev, size_t bytes)
{
	return copy_on(t, 0, host, dev, bytes, cudaMemcpyDeviceToHost);
}

int tg_put_on(struct gt *t, int d, void *dev, const void *host, size_t bytes)
{
	return copy_on(t, d, dev, host, bytes, cudaMemcpyHostToDevice);
}

int tg_get_on(struct gt *t, int d, void *host, const void *dev, size_t bytes)
{
	return copy_on(t, d, host, dev, bytes, cudaMemcpyDeviceToHost);
}

static void nap(double s)
{
	struct timespec ts = { 0, (long)(s * 1e9) };
	nanosleep(&ts, NULL);
}

/* Abort every NCCL communicator of the rank (one per GPU). */
static void abort_comms(struct gt *t)
{
	for (int d = 0; d < t->ngpu; d++)
		if (t->dcomm[d])
			comm_nccl_abort(t->dcomm[d]);
}

/* Poll every NCCL communicator of the rank: a collective of any of them
 * may hold the compute stream (the first GPU's waits for every GPU's last
 * bucket).  On an error, all are aborted and t->err names the GPU whose
 * communicator failed; -1. */
static int poll_comms(struct gt *t, const char *what)
{
	for (int d = 0; d < t->ngpu; d++) {
		char why[sizeof t->err - 128];
		if (t->dcomm[d] && comm_nccl_poll(t->dcomm[d], why, sizeof why) != 0) {
			abort_comms(t);
			return util_fail(t->err, sizeof t->err, "rank %d: the NCCL communicator of GPU %d failed during %s: %s", t->rank,
					 t->base + d, what, why);
		}
	}
	return 0;
}

/* Wait for ev (NULL: the whole compute stream), watching NCCL, polling at
 * most every `most` seconds; bounded by the job timeout. */
static int wait_for(struct gt *t, cudaEvent_t ev, double most, const char *what)
{
	double deadline = util_now() + 2 * t->p->parallel.timeout_s;
	launch_wait_begin();
	int rc = 0;
	for (double pause = 1e-5;; pause = pause < most ? 2 * pause : most) {
		cudaError_t q = ev ? cudaEventQuery(ev) : cudaStreamQuery(t->s);
		if (q == cudaSuccess)
			break;
		if (q != cudaErrorNotReady) {
			rc = util_fail(t->err, sizeof t->err, "rank %d: the GPU failed during %s: %s", t->rank, what, cudaGetErrorString(q));
			break;
		}
		if (poll_comms(t, what) != 0) {
			rc = -1;
			break;
		}
		if (util_now() > deadline) {
			abort_comms(t);
			rc = util_fail(t->err, sizeof t->err,
				       "rank %d: %s did not finish within %g s; a collective is stuck (%s; another rank died or stalled), "
				       "%s aborted", t->rank, what, 2 * t->p->parallel.timeout_s,
				       t->sharded ? "FSDP's all-gathers and reduce-scatters" : t->comm ? "the DDP gradient all-reduce"
				       : "no collective runs here, so the GPU itself hangs",
				       t->ngpu > 1 ? "the communicators of all the rank's GPUs" : "its communicator");
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

int tg_wait(struct gt *t, const char *what)
{
	return wait_for(t, NULL, 1e-3, what);
}

/* The copies of the next batch wait in the stream behind this one's
 * compute: the trainer waits here when it runs a step ahead of the GPU,
 * and polls often, so the GPU does not idle for the wait's pauses. */
int tg_return_batch(struct gt *t)
{
	if (!t->fed_pending)
		return 0;
	if (wait_for(t, t->ev_fed, 5e-5, "copying a streamed batch in") != 0)
		return -1;
	t->fed_pending = false;
	loader_release(&t->l);
	return 0;
}

/* Sums over ranks of host values, through NCCL in device memory. */
int tg_reduce_host(struct gt *t, double *v, int n)
{
	if (t->world == 1)
		return 0;
	if (tg_put(t, t->w->sums, v, (size_t)n * sizeof *v) != 0)
		return -1;
	launch_wait_begin();
	int rc = comm_wait(comm_all_reduce_f64(t->comm, t->w->sums, n, COMM_SUM), t->err, sizeof t->err);
	launch_wait_end();
	if (rc != 0)
		return -1;
	return tg_get(t, v, t->w->sums, (size_t)n * sizeof *v);
}

/* ---- FSDP's memory on the rank's GPUs (struct fsdp_dev) ----
 * FSDP calls these between layers, after a layer on any GPU of the rank:
 * each makes the first GPU current, whose stream the shards' work goes on
 * (a kernel launched on another GPU's stream fails).  The table returns no
 * status: a failure becomes the executor's (cuda_note), which the step
 * reports, so no step goes on with stale gradients. */

static void fdev_zero(void *ctx, float *p, int64_t n)
{
	struct gt *t = ctx;
	cuda_note(&t->e, cudaSetDevice(t->base), "cudaSetDevice before zeroing FSDP gradients");
	cuda_note(&t->e, cudaMemsetAsync(p, 0, (size_t)n * 4, t->s), "cudaMemsetAsync zeroing FSDP gradients");
}

static void fdev_copy(void *ctx, float *dst, const float *src, int64_t n)
{
	struct gt *t = ctx;
	cuda_note(&t->e, cudaSetDevice(t->base), "cudaSetDevice before copying FSDP gradients");
	cuda_note(&t->e, cudaMemcpyAsync(dst, src, (size_t)n * 4, cudaMemcpyDeviceToDevice, t->s), "cudaMemcpyAsync of FSDP gradients");
}

static void fdev_add(void *ctx, float *dst, const float *src, int64_t n)
{
	struct gt *t = ctx;
	cuda_note(&t->e, cudaSetDevice(t->base), "cudaSetDevice before adding FSDP gradients");
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
	return tg_get(ctx, dst, src, bytes);
}

static int fdev_from_host(void *ctx, void *dst, const void *src, size_t bytes)
{
	return tg_put(ctx, dst, src, bytes);
}

struct fsdp_dev tg_fsdp_dev(struct gt *t)
{
	/* a rank of several GPUs keeps its units on the first; the others
	 * read and write them over peer access */
	return (struct fsdp_dev){ backend_cuda.alloc, backend_cuda.free, fdev_zero, fdev_copy, fdev_add, fdev_to_host, fdev_from_host,
				  t->ngpu > 1 ? fdev_join : NULL, t->ngpu > 1 ? fdev_fork : NULL, t->s, t };
}

/* ---- data ---- */

/* The whole dataset to the device: inputs as the model's input takes them
 * (token ids as int32), targets as the loss reads them. */
int tg_upload(struct gt *t, const struct dataset *ds, struct ddata *d)
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
		if (tg_put(t, (char *)d->x + (size_t)at * (size_t)d->xw * 4, hx, (size_t)b * (size_t)d->xw * 4) != 0 ||
		    tg_put(t, (char *)d->y + (size_t)at * (size_t)d->yw * 4, hy, (size_t)b * (size_t)d->yw * 4) != 0)
			rc = -1;
	}
	free(hx), free(hy), free(idx);
	return rc;
}

/* This epoch's order of this rank's samples, to the device. */
int tg_set_epoch(struct gt *t, int64_t epoch)
{
	if (t->dtrain.streamed)
		return 0; /* the loader thread owns the sampler and keeps the order */
	sampler_set_epoch(&t->smp, epoch - 1);
	for (int64_t i = 0; i < t->smp.num_samples; i++)
		t->host_order[i] = sampler_index(&t->smp, i);
	int64_t pos = t->at.batch * t->micro;
	if (tg_put(t, t->order, t->host_order, (size_t)t->smp.num_samples * sizeof *t->order) != 0)
		return -1;
	return tg_put(t, &t->w->pos, &pos, sizeof pos);
}

/* A host batch of b samples to the input and target buffers, on the
 * compute stream.  From pageable memory the copies are staged before the
 * call returns; from the page-locked batches of a streamed set they read
 * the host buffers when the stream reaches them (tg_return_batch). */
int tg_host_batch_in(struct gt *t, const float *x, const void *y, int64_t b, int64_t xw, int64_t yw, float *in, void *ybuf)
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
 * the targets at ybuf, gathered on the first GPU (a pipeline's last chunk
 * left another current). */
int tg_feed(struct gt *t, int64_t b, void *ybuf)
{
	float *in = exec_output(&t->e, 0, true);
	CK(t, cudaSetDevice(t->base));
	kc_gather_rows(t->s, in, t->dtrain.x, t->dtrain.xw, t->order, &t->w->pos, b);
	kc_gather_rows(t->s, ybuf, t->dtrain.y, t->dtrain.yw, t->order, &t->w->pos, b);
	kc_add_i64(t->s, &t->w->pos, b);
	return 0;
}

/* A streamed set's next micro-batch of b samples from the loader: chunk j
 * (first[j], size[j]) into copy j's input, the targets at ybuf. */
int tg_feed_streamed(struct gt *t, int64_t b, const int64_t *first, const int64_t *size, int k, char *ybuf)
{
	float *x;
	void *y;
	int got = 0;
	if (tg_return_batch(t) != 0)
		return -1;
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
		rc = tg_host_batch_in(t, x + first[j] * xw, (const char *)y + (size_t)(first[j] * yw) * 4, size[j], xw, yw,
				   exec_output(&t->e, 0, true), ybuf + (size_t)(first[j] * yw) * 4);
	}
	exec_set_micro(0);
	if (rc == 0 && t->pinned) { /* the copies read the batch later: it goes back once they have */
		CK(t, cudaEventRecord(t->ev_fed, t->s));
		t->fed_pending = true;
		return 0;
	}
	loader_release(&t->l);
	return rc;
}
