/* comm_nccl.c: the NCCL engine (see comm.h); the only file that names NCCL.
 * Rank 0 makes the unique id and shares it through the store; the
 * communicator is non-blocking (ncclConfig_t.blocking = 0), so that
 * initialisation and every call can be watched with ncclCommGetAsyncError
 * and aborted at the timeout instead of hanging.  Collectives are queued on
 * the caller's stream and each records the CUDA event of its work slot;
 * comm_wait polls that event and NCCL's asynchronous error until either
 * says done, or aborts the communicator at the deadline.  The barrier is an
 * all-reduce of one float in a device scratch word, waited for on the host.
 * Does not: choose the device (the worker does before any CUDA call), copy
 * host buffers (all buffers are device memory), or recover after an abort.
 * Invariant: every NCCL and CUDA call is checked; its failure names the
 * call, this file's line, the library's own message and a hint.
 */
#include "runtime/comm.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/store.h"
#include "runtime/util.h"

#define HINT_PEER COMM_HINT_PEER

struct nccl {
	ncclComm_t comm;
	cudaStream_t stream;
	int device;
	int aborted;
	double timeout_s;
	float *scratch;                      /* (1) device word for the barrier */
	cudaEvent_t ev[COMM_MAX_INFLIGHT];   /* end of each work slot's collective */
	int nev;
	cudaStream_t follow;                 /* collectives wait for this stream's work first (comm_nccl_follow) */
	cudaEvent_t follow_ev;
};

static void nap(double s)
{
	struct timespec t = { 0, (long)(s * 1e9) };
	nanosleep(&t, NULL);
}

/* Check a CUDA call: on failure write the call, the line, CUDA's message and
 * a hint into err and return -1 from the caller. */
#define CUDA_CHECK(call, hint)                                                                               \
	do {                                                                                                 \
		cudaError_t e_ = (call);                                                                     \
		if (e_ != cudaSuccess)                                                                       \
			return util_fail(err, errlen, "%s:%d: %s failed: %s (hint: %s)", __FILE__, __LINE__, #call, \
				    cudaGetErrorString(e_), hint);                                           \
	} while (0)

/* Check an NCCL call the same way; ncclInProgress is not a failure for a
 * non-blocking communicator: settle() waits it out. */
#define NCCL_CHECK(comm, call, hint)                                                                         \
	do {                                                                                                 \
		ncclResult_t r_ = (call);                                                                    \
		if (r_ != ncclSuccess && r_ != ncclInProgress)                                               \
			return util_fail(err, errlen, "%s:%d: %s failed: %s: %s (hint: %s)", __FILE__, __LINE__,   \
				    #call, ncclGetErrorString(r_), ncclGetLastError(comm), hint);            \
	} while (0)

/* Issue a collective in nccl_run: remember which call and where for
 * settle(), then check it. */
#define NCCL_ISSUE(call)                                    \
	do {                                                \
		what = #call, line = __LINE__;              \
		NCCL_CHECK(g->comm, call, HINT_PEER);       \
	} while (0)

/* Wait until the communicator leaves ncclInProgress; abort at the deadline.
 * `what` and `line` name the call that left it in progress. */
static int settle(struct nccl *g, double deadline, const char *what, int line, char *err, size_t errlen)
{
	for (double pause = 1e-5;; pause = pause < 1e-3 ? 2 * pause : 1e-3) {
		ncclResult_t st = ncclInProgress;
		ncclResult_t r = ncclCommGetAsyncError(g->comm, &st);
		if (r != ncclSuccess)
			st = r;
		if (st == ncclSuccess)
			return 0;
		if (st != ncclInProgress) {
			util_fail(err, errlen, "%s:%d: %s failed: %s: %s (hint: %s)", __FILE__, line, what, ncclGetErrorString(st),
			     ncclGetLastError(g->comm), HINT_PEER);
			ncclCommAbort(g->comm);
			g->aborted = 1;
			return -1;
		}
		if (util_now() > deadline) {
			ncclCommAbort(g->comm);
			g->aborted = 1;
			return util_fail(err, errlen, "%s:%d: %s did not finish within the timeout; communicator aborted (hint: %s)",
				    __FILE__, line, what, HINT_PEER);
		}
		nap(pause);
	}
}

static ncclDataType_t dtype_of(enum comm_dtype t)
{
	return t == COMM_F64 ? ncclFloat64 : ncclFloat32;
}

static ncclRedOp_t op_of(enum comm_op op)
{
	return op == COMM_AVG ? ncclAvg : ncclSum;
}

static int nccl_run(void *impl, const struct comm_req *r, int slot, char *err, size_t errlen)
{
	struct nccl *g = impl;
	size_t n = (size_t)r->n;
	if (g->aborted)
		return util_fail(err, errlen, "the NCCL communicator was aborted after an earlier failure");
	CUDA_CHECK(cudaSetDevice(g->device), "the device went away?");
	if (g->follow) {
		CUDA_CHECK(cudaEventRecord(g->follow_ev, g->follow), "is the followed stream on this rank's device?");
		CUDA_CHECK(cudaStreamWaitEvent(g->stream, g->follow_ev, 0), "is the followed stream on this rank's device?");
	}
	const char *what = "?";
	int line = 0;
	switch (r->kind) {
	case COMM_ALL_REDUCE:
		NCCL_ISSUE(ncclAllReduce(r->out, r->out, n, dtype_of(r->dtype), op_of(r->op), g->comm, g->stream));
		break;
	case COMM_REDUCE_SCATTER:
		NCCL_ISSUE(ncclReduceScatter(r->in, r->out, n, ncclFloat32, op_of(r->op), g->comm, g->stream));
		break;
	case COMM_ALL_GATHER:
		NCCL_ISSUE(ncclAllGather(r->in, r->out, n, ncclFloat32, g->comm, g->stream));
		break;
	case COMM_BROADCAST:
		NCCL_ISSUE(ncclBroadcast(r->out, r->out, n, ncclFloat32, r->root, g->comm, g->stream));
		break;
	case COMM_BARRIER:
		NCCL_ISSUE(ncclAllReduce(g->scratch, g->scratch, 1, ncclFloat32, ncclSum, g->comm, g->stream));
		break;
	}
	/* A non-blocking communicator may still be enqueuing; nothing else may
	 * be called on it until it is done. */
	if (settle(g, util_now() + g->timeout_s, what, line, err, errlen) != 0)
		return -1;
	CUDA_CHECK(cudaEventRecord(g->ev[slot], g->stream), "is the stream on this rank's device?");
	return 0;
}

/* NCCL's asynchronous error, if any, into err; the communicator is then
 * aborted (later calls fail at once).  0 while healthy. */
static int async_error(struct nccl *g, char *err, size_t errlen)
{
	ncclResult_t st = ncclSuccess;
	NCCL_CHECK(g->comm, ncclCommGetAsyncError(g->comm, &st), "the communicator is corrupt?");
	if (st == ncclSuccess || st == ncclInProgress)
		return 0;
	util_fail(err, errlen, "%s:%d: NCCL reported an asynchronous error: %s: %s (hint: %s)", __FILE__, __LINE__,
		  ncclGetErrorString(st), ncclGetLastError(g->comm), HINT_PEER);
	ncclCommAbort(g->comm);
	g->aborted = 1;
	return -1;
}

static int nccl_wait(void *impl, int slot, double timeout_s, char *err, size_t errlen)
{
	struct nccl *g = impl;
	double deadline = util_now() + timeout_s;
	if (g->aborted)
		return util_fail(err, errlen, "the NCCL communicator was aborted after an earlier failure");
	for (double pause = 1e-5;; pause = pause < 1e-3 ? 2 * pause : 1e-3) {
		cudaError_t q = cudaEventQuery(g->ev[slot]);
		if (q == cudaSuccess)
			return 0;
		if (q != cudaErrorNotReady)
			return util_fail(err, errlen, "%s:%d: cudaEventQuery failed: %s (hint: a kernel on this stream failed)",
				    __FILE__, __LINE__, cudaGetErrorString(q));
		if (async_error(g, err, errlen) != 0)
			return -1;
		if (util_now() > deadline) {
			ncclCommAbort(g->comm);
			g->aborted = 1;
			return util_fail(err, errlen, "%s:%d: the collective did not finish within %g s; NCCL communicator aborted "
				    "(hint: %s)", __FILE__, __LINE__, timeout_s, HINT_PEER);
		}
		nap(pause);
	}
}

static int nccl_wait_on(void *impl, int slot, void *stream, char *err, size_t errlen)
{
	struct nccl *g = impl;
	if (g->aborted)
		return util_fail(err, errlen, "the NCCL communicator was aborted after an earlier failure");
	CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)stream, g->ev[slot], 0), "is the stream on this rank's device?");
	return 0;
}

static void nccl_close(void *impl)
{
	struct nccl *g = impl;
	char err[512];
	if (g->comm && !g->aborted) {
		ncclResult_t r = ncclCommFinalize(g->comm);
		if ((r == ncclSuccess || r == ncclInProgress) &&
		    settle(g, util_now() + g->timeout_s, "ncclCommFinalize", __LINE__, err, sizeof err) == 0)
			ncclCommDestroy(g->comm);
		else if (!g->aborted)
			ncclCommAbort(g->comm);
	}
	for (int i = 0; i < g->nev; i++)
		cudaEventDestroy(g->ev[i]);
	if (g->scratch)
		cudaFree(g->scratch);
	if (g->follow_ev)
		cudaEventDestroy(g->follow_ev);
	free(g);
}

int comm_nccl_follow(struct comm *c, void *stream, char *err, size_t errlen)
{
	struct nccl *g = comm_engine(c, "nccl");
	if (!g)
		return util_fail(err, errlen, "comm_nccl_follow: the communicator is %s, not NCCL", comm_name(c));
	if (!g->follow_ev)
		CUDA_CHECK(cudaEventCreateWithFlags(&g->follow_ev, cudaEventDisableTiming), "out of device resources?");
	g->follow = (cudaStream_t)stream;
	return 0;
}

int comm_nccl_all_reduce_on(struct comm *c, void *buf, int64_t n, enum comm_dtype dtype, enum comm_op op, void *stream, char *err,
			    size_t errlen)
{
	struct nccl *g = comm_engine(c, "nccl");
	if (!g)
		return util_fail(err, errlen, "comm_nccl_all_reduce_on: the communicator is %s, not NCCL", comm_name(c));
	if (g->aborted)
		return util_fail(err, errlen, "the NCCL communicator was aborted after an earlier failure");
	const char *what = "?";
	int line = 0;
	NCCL_ISSUE(ncclAllReduce(buf, buf, (size_t)n, dtype_of(dtype), op_of(op), g->comm, (cudaStream_t)stream));
	return settle(g, util_now() + g->timeout_s, what, line, err, errlen);
}

int comm_nccl_poll(struct comm *c, char *err, size_t errlen)
{
	struct nccl *g = comm_engine(c, "nccl");
	if (!g)
		return 0;
	if (g->aborted)
		return util_fail(err, errlen, "the NCCL communicator was aborted after an earlier failure");
	return async_error(g, err, errlen);
}

void comm_nccl_abort(struct comm *c)
{
	struct nccl *g = comm_engine(c, "nccl");
	if (g && !g->aborted) {
		ncclCommAbort(g->comm);
		g->aborted = 1;
	}
}

static const struct comm_ops nccl_ops = { "nccl", nccl_run, nccl_wait, nccl_close, nccl_wait_on };

/* Everything of comm_open_nccl that can fail, on g; the caller cleans up. */
static int open_nccl(struct nccl *g, struct store_client *st, int rank, int world, double timeout_s, char *err,
		     size_t errlen)
{
	double deadline = util_now() + timeout_s;
	char key[64];
	snprintf(key, sizeof key, "comm%d/nccl/id", comm_next_id());
	CUDA_CHECK(cudaSetDevice(g->device), "is the device index below the number of visible GPUs?");
	ncclUniqueId id;
	if (rank == 0) {
		NCCL_CHECK(NULL, ncclGetUniqueId(&id), "NCCL could not find a network interface (see NCCL_SOCKET_IFNAME)");
		if (store_set(st, key, &id, sizeof id, err, errlen) != 0)
			return -1;
	} else {
		size_t len = 0;
		void *v = store_get(st, key, &len, timeout_s, err, errlen);
		if (!v)
			return -1;
		if (len != sizeof id) {
			free(v);
			return util_fail(err, errlen, "%s:%d: the NCCL unique id in the store has %zu bytes, expected %zu "
				    "(hint: do all ranks run the same NCCL?)", __FILE__, __LINE__, len, sizeof id);
		}
		memcpy(&id, v, sizeof id);
		free(v);
	}
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	NCCL_CHECK(NULL, ncclCommInitRankConfig(&g->comm, world, id, rank, &cfg), "check NCCL_DEBUG=WARN output");
	if (settle(g, deadline, "ncclCommInitRankConfig", __LINE__, err, errlen) != 0)
		return -1;
	for (; g->nev < COMM_MAX_INFLIGHT; g->nev++)
		CUDA_CHECK(cudaEventCreateWithFlags(&g->ev[g->nev], cudaEventDisableTiming), "out of device resources?");
	CUDA_CHECK(cudaMalloc((void **)&g->scratch, sizeof(float)), "out of device memory?");
	CUDA_CHECK(cudaMemset(g->scratch, 0, sizeof(float)), "out of device memory?");
	return 0;
}

struct comm *comm_open_nccl(struct store_client *st, int rank, int world, int device, void *stream,
			    double timeout_s, char *err, size_t errlen)
{
	if (world < 1 || rank < 0 || rank >= world || device < 0 || timeout_s <= 0) {
		util_fail(err, errlen, "comm_open_nccl: rank %d of world %d, device %d, timeout %g s: out of range", rank, world,
		     device, timeout_s);
		return NULL;
	}
	struct nccl *g = calloc(1, sizeof *g);
	if (!g) {
		util_fail(err, errlen, "comm_open_nccl: out of memory");
		return NULL;
	}
	g->device = device;
	g->timeout_s = timeout_s;
	g->stream = (cudaStream_t)stream;
	if (open_nccl(g, st, rank, world, timeout_s, err, errlen) != 0) {
		nccl_close(g);
		return NULL;
	}
	struct comm *c = comm_new(&nccl_ops, g, rank, world, timeout_s);
	if (!c) {
		nccl_close(g);
		util_fail(err, errlen, "comm_open_nccl: out of memory");
	}
	return c;
}
