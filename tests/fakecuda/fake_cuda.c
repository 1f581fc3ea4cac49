/* fake_cuda.c: a host stand-in for the parts of the CUDA runtime, cuBLAS,
 * cuDNN and NCCL that trainc's GPU library calls, so that library's host
 * logic (the GPU trainer's setup, steps, streams and events, evaluation,
 * checkpoints, streamed data, several devices per rank) runs in tests on a
 * machine without a GPU.  Linked with the GPU library's own objects and
 * tests/fakecuda/fake_kc.c (the kernels on the host) into
 * build/tests/trainc-fakecuda.so, which trainc loads through
 * TRAINC_CUDA_LIB.
 * Every operation runs at once on the host; "device" memory is host
 * memory; streams and events only keep times.  Devices: TRAINC_FAKE_GPUS
 * (default 1); free memory: TRAINC_FAKE_GPU_MIB (default 16384); compute
 * capability: TRAINC_FAKE_CC (default 9.0); TRAINC_FAKE_HOST_LOCK=0 refuses
 * page-locked host memory; the driver's CUDA version: TRAINC_FAKE_DRIVER
 * (default the toolkit's; an older one is insufficient);
 * TRAINC_FAKE_NO_PEER=1: GPUs that cannot reach each other's memory;
 * TRAINC_FAKE_NCCL_PENDING=K or stuck: NCCL calls that stay in progress
 * (the NCCL section).
 * NCCL's collectives run over trainc's own Gloo communicator (rank 0's
 * unique id carries the port of a store it serves), so DDP and FSDP run
 * across worker processes too.
 * Stream capture records the operations (tape.h) and a graph launch
 * replays them, so the trainer's CUDA-graph path runs too.  With
 * TRAINC_FAKE_ASYNC=forward or reverse, streams run asynchronously (work
 * queued per stream, run in an adversarial order when the host waits), so
 * a missing event between streams shows (tests/cli/gpu_host_async.sh);
 * a queued copy from page-locked host memory (cudaHostAlloc) reads it when
 * it runs, so a buffer reused before its copy ran shows too.
 * Device memory is one reserved range that the host cannot touch except
 * while the stand-in itself runs device work (a copy, a kernel, a GEMM, a
 * collective): host code that reads or writes device memory directly,
 * which faults on a GPU, faults here too, with a message naming the
 * allocation.  A copy's ends must be where its kind says, and cuBLAS,
 * cuDNN and NCCL calls must be given device memory; cuBLAS's and cuDNN's
 * argument checks are made (leading dimensions; tensors, algorithm and
 * workspace of a convolution).  CUDA's rules for several GPUs hold: a
 * kernel launches only on a stream of the current GPU, an event records
 * only on a stream of its own GPU, a library handle serves the GPU it was
 * created on, a kernel reaches another GPU's memory only with peer access
 * and updates atomically only its own GPU's (as over PCIe),
 * NCCL's buffers and stream are its communicator's GPU's.  So do capture's:
 * a stream takes part only after waiting for an event of the capture, work
 * on any other stream while capturing is an error here, and every stream
 * that joined must rejoin the origin before the capture ends; allocating
 * or freeing memory (device or page-locked) and cuDNN's Find are refused
 * while capturing, as is a GEMM whose handle has no workspace of the
 * caller's (cublasSetStream drops it); an event last recorded while
 * capturing cannot be queried, waited for eagerly or timed, and one made
 * with cudaEventDisableTiming cannot be timed (tests/gpu_ops.c checks
 * these rules against a GPU's).
 * Beyond that it checks nothing about the real libraries: tests/gpu/run
 * does that on a GPU.
 * Past 1000 lines because it stands in for four libraries (the runtime,
 * cuBLAS, cuDNN, NCCL) and the rules they enforce; each has its section.
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include "runtime/comm.h"
#include "runtime/kern.h"
#include "runtime/store.h"
#include "runtime/util.h"
#include "tests/fakecuda/tape.h"

struct op {
	void (*replay)(const void *args);
	void *args;
};

/* a recording: a captured stream's operations in order, and the streams
 * that joined the capture (the origin first) */
struct tape {
	struct op *op;
	int n, cap;
	struct CUstream_st *joined[16];
	int njoined;
	long seq;
};

/* An operation queued on a stream in the asynchronous mode: run a
 * recording, mark an event, or wait for another stream's mark. */
struct qop {
	int kind; /* QOP_* */
	void (*replay)(const void *args);
	void *args;
	struct CUevent_st *ev;   /* QOP_RECORD */
	struct CUstream_st *on;  /* QOP_WAIT: until on has run past pos */
	int pos;
};
enum { QOP_RUN, QOP_RECORD, QOP_WAIT };

struct CUstream_st {
	int device, id;
	struct qop *q;
	int n, cap, done;        /* queued, room, run */
	/* stream capture: whether it is part of the one running now, the
	 * sequence number of its last captured operation, and of its last
	 * record that a captured stream has waited for (rejoined up to there) */
	bool captured;
	long last_seq, joined_seq;
};
struct CUevent_st {
	double t;
	struct CUstream_st *s;   /* the stream of its last record, or NULL */
	int pos;                 /* that record's place in s's queue */
	int device;              /* current when it was created */
	struct CUstream_st *cap_s; /* recorded while capturing: on this stream */
	long cap_seq;            /* and as that operation */
	long cap_gen;            /* of that capture */
	bool recorded;           /* ever recorded, on a stream or in a capture */
	unsigned flags;          /* cudaEventCreateWithFlags's (cudaEventDisableTiming) */
};
struct CUgraph_st { struct tape t; };
struct CUgraphExec_st { struct tape t; };
struct CUgraphNode_st { int unused; };

static _Thread_local struct tape *capturing;
static _Thread_local long capture_gen; /* captures begun on this thread */

/* A collective lost to TRAINC_FAKE_NCCL_FAIL (the NCCL section): 1 while
 * it holds this process's streams, 2 once a query has found them not
 * ready; 0 when none does, or after its communicator was aborted. */
static int stuck;

/* A query of a stream or event: not ready while a lost collective holds it. */
static cudaError_t stuck_query(void)
{
	if (!stuck)
		return cudaSuccess;
	stuck = 2;
	return cudaErrorNotReady;
}

/* A blocking wait: on a GPU it never returns behind a lost collective. */
static void stuck_wait(const char *call)
{
	if (stuck) {
		fprintf(stderr, "fake CUDA: %s waits behind a failed NCCL collective: on a GPU it never returns (query the stream "
				"and poll NCCL instead)\n", call);
		abort();
	}
}

/* ---- device memory: allocations are carved in order from one reserved
 * range (never reused; a freed block's pages are given back), kept
 * PROT_NONE while no device work runs.  Allocations of DEV_BIG bytes or
 * more (datasets, large parameter regions) are mapped apart and left
 * open: changing the protection of every page they hold around each
 * operation would cost more than the tests can spend. ---- */

enum { DEV_ALIGN = 256 };
static const size_t DEV_BIG = (size_t)1 << 20;
static const size_t dev_cap = (size_t)1 << 38; /* address space, not memory */
static char *dev_base;
static size_t dev_used; /* bytes carved so far, a multiple of the page size */
static int dev_opened;  /* device work running (nested, any thread) */
static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
struct dev_block { char *p; size_t size; bool apart; int device; };
static _Thread_local int current;
static bool peer_on[64][64]; /* [d][o]: device d's kernels may reach o's memory */
static struct dev_block *blocks;
static int nblocks, cap_blocks;

/* room for one more block (dev_lock held) */
static bool grow_blocks(void)
{
	if (nblocks < cap_blocks)
		return true;
	int cap = cap_blocks ? 2 * cap_blocks : 256;
	struct dev_block *b = realloc(blocks, (size_t)cap * sizeof *b);
	if (!b)
		return false;
	blocks = b, cap_blocks = cap;
	return true;
}

static void on_fault(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	char *at = si->si_addr;
	if (dev_base && at >= dev_base && at < dev_base + dev_cap) {
		char msg[256];
		long off = (long)(at - dev_base);
		long blk = -1, in = 0;
		for (int i = 0; i < nblocks; i++) /* not async-signal-safe in general; this process ends here */
			if (at >= blocks[i].p && at < blocks[i].p + blocks[i].size)
				blk = i, in = (long)(at - blocks[i].p);
		int n = snprintf(msg, sizeof msg,
				 "fake CUDA: host code touched device memory (offset %ld of the device range; allocation %ld, byte %ld): "
				 "on a GPU this faults; copy it with cudaMemcpy\n",
				 off, blk, in);
		if (n > 0 && write(2, msg, (size_t)n) < 0)
			_exit(134);
		abort();
	}
	signal(sig, SIG_DFL); /* not ours: fault as usual */
}

/* TRAINC_FAKE_GUARD=0 leaves device memory open to the host */
static bool guarded(void)
{
	static int guard = -1;
	if (guard < 0) {
		const char *v = getenv("TRAINC_FAKE_GUARD");
		guard = !v || strcmp(v, "0") != 0;
	}
	return guard;
}

static void dev_protect(int prot)
{
	if (guarded() && dev_used && mprotect(dev_base, dev_used, prot) != 0) {
		perror("fake CUDA: mprotect");
		abort();
	}
}

void fake_dev_open(void)
{
	pthread_mutex_lock(&dev_lock);
	if (dev_opened++ == 0)
		dev_protect(PROT_READ | PROT_WRITE);
	pthread_mutex_unlock(&dev_lock);
}

void fake_dev_close(void)
{
	pthread_mutex_lock(&dev_lock);
	if (--dev_opened == 0)
		dev_protect(PROT_NONE);
	pthread_mutex_unlock(&dev_lock);
}

static void *dev_alloc(size_t size)
{
	if (size >= DEV_BIG) {
		void *big = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (big == MAP_FAILED)
			return NULL;
		pthread_mutex_lock(&dev_lock);
		bool room = grow_blocks();
		if (room)
			blocks[nblocks++] = (struct dev_block){ big, size, true, current };
		pthread_mutex_unlock(&dev_lock);
		if (!room)
			munmap(big, size);
		return room ? big : NULL;
	}
	pthread_mutex_lock(&dev_lock);
	if (!dev_base) {
		void *p = mmap(NULL, dev_cap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_fault;
		sa.sa_flags = SA_SIGINFO;
		if (p == MAP_FAILED || sigaction(SIGSEGV, &sa, NULL) != 0) {
			pthread_mutex_unlock(&dev_lock);
			return NULL;
		}
		dev_base = p;
	}
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t need = (size ? size : 1) + DEV_ALIGN - 1;
	need = (need / page + 1) * page; /* whole pages, so a free gives them back */
	char *p = NULL;
	if (dev_used + need <= dev_cap && grow_blocks()) {
		p = dev_base + dev_used;
		dev_used += need;
		if ((dev_opened || !guarded()) && mprotect(p, need, PROT_READ | PROT_WRITE) != 0)
			abort();
		blocks[nblocks++] = (struct dev_block){ p, need, false, current };
	}
	pthread_mutex_unlock(&dev_lock);
	return p; /* fresh pages read as zeros */
}

/* the device whose memory q is in, or -1; *lo and *hi (when not NULL)
 * get the bounds of its allocation */
static int device_span(const void *q, const void **lo, const void **hi)
{
	const char *c = q;
	int d = -1;
	pthread_mutex_lock(&dev_lock);
	for (int i = 0; i < nblocks && d < 0; i++)
		if (c >= blocks[i].p && c < blocks[i].p + blocks[i].size) {
			d = blocks[i].device;
			if (lo && hi)
				*lo = blocks[i].p, *hi = blocks[i].p + blocks[i].size;
		}
	pthread_mutex_unlock(&dev_lock);
	return d;
}

static int device_of(const void *q)
{
	return device_span(q, NULL, NULL);
}

bool fake_is_device(const void *q)
{
	return device_of(q) >= 0;
}

bool fake_reachable(const void *q)
{
	int d = device_of(q);
	return d >= 0 && (d == current || peer_on[current][d]);
}

void fake_kernel_check(const char *name, cudaStream_t s)
{
	int sd = s ? s->device : current;
	if (sd != current) {
		fprintf(stderr, "fake CUDA: kernel %s launched on a stream of GPU %d while GPU %d is current: on a GPU the launch fails\n",
			name, sd, current);
		abort();
	}
}

int fake_stream_device(cudaStream_t s)
{
	return s ? s->device : current;
}

void fake_atomic_check(const char *name, int d, const void *p, const void **lo, const void **hi)
{
	int at = device_span(p, lo, hi);
	if (at != d) {
		fprintf(stderr, "fake CUDA: kernel %s on GPU %d made an atomic update of %s: atomics on a peer's memory are not "
				"guaranteed over PCIe (cudaDevP2PAttrNativeAtomicSupported); count on the kernel's own GPU and add "
				"the result over\n", name, d, at >= 0 ? "another GPU's memory" : "memory that is not device memory");
		abort();
	}
}

static void dev_free(void *q)
{
	pthread_mutex_lock(&dev_lock);
	for (int i = 0; i < nblocks; i++)
		if (blocks[i].p == q) {
			if (blocks[i].apart)
				munmap(blocks[i].p, blocks[i].size);
			else
				madvise(blocks[i].p, blocks[i].size, MADV_DONTNEED); /* reads as zeros if touched again */
			blocks[i] = blocks[--nblocks];
			break;
		}
	pthread_mutex_unlock(&dev_lock);
}

/* ---- asynchronous streams (TRAINC_FAKE_ASYNC=forward or reverse): work is
 * queued per stream and runs only when the host waits for it, streams in
 * creation order (forward) or its reverse, each as far as its event waits
 * allow.  A missing event between streams then shows as wrong results in
 * one of the two orders; a plain cudaMemcpy waits for the legacy stream
 * only, as CUDA's does for non-blocking streams. ---- */

static int async_mode = -1; /* 0 off, 1 forward, 2 reverse */
static struct CUstream_st legacy;
static struct CUstream_st **streams; /* every live stream, the legacy one first */
static int nstreams, next_id = 1;

static int async_on(void)
{
	if (async_mode < 0) {
		const char *v = getenv("TRAINC_FAKE_ASYNC");
		async_mode = !v ? 0 : !strcmp(v, "forward") ? 1 : !strcmp(v, "reverse") ? 2 : 0;
		streams = calloc(64, sizeof *streams);
		if (!streams)
			abort();
		streams[nstreams++] = &legacy;
	}
	return async_mode;
}

static struct CUstream_st *S(cudaStream_t s)
{
	return s ? s : &legacy;
}

static void enqueue(struct CUstream_st *st, struct qop op)
{
	if (st->n == st->cap) {
		int cap = st->cap ? 2 * st->cap : 64;
		struct qop *q = realloc(st->q, (size_t)cap * sizeof *q);
		if (!q)
			abort();
		st->q = q, st->cap = cap;
	}
	st->q[st->n++] = op;
}

/* Run st's next operation if nothing holds it: true when one ran. */
static bool step_stream(struct CUstream_st *st)
{
	if (st->done == st->n)
		return false;
	struct qop op = st->q[st->done]; /* a copy: running it may queue more */
	if (op.kind == QOP_WAIT && op.on->done <= op.pos)
		return false;
	st->done++;
	if (op.kind == QOP_RUN) {
		fake_dev_open();
		op.replay(op.args);
		fake_dev_close();
		free(op.args);
	} else if (op.kind == QOP_RECORD) {
		op.ev->t = util_now();
	}
	return true;
}

/* Run queued work until st has run past pos (st NULL: everything). */
static void drain(struct CUstream_st *st, int pos)
{
	if (async_mode <= 0)
		return;
	for (;;) {
		if (st ? st->done > pos : true) {
			bool pending = false;
			for (int i = 0; i < nstreams && !st; i++)
				pending |= streams[i]->done < streams[i]->n;
			if (!pending)
				return;
		}
		bool ran = false;
		for (int k = 0; k < nstreams && !ran; k++) {
			int i = async_mode == 1 ? k : nstreams - 1 - k;
			while (step_stream(streams[i]))
				ran = true;
		}
		if (!ran) {
			fprintf(stderr, "fake CUDA: the queued work waits on an event nothing will record (a cycle of stream waits)\n");
			abort();
		}
	}
}

static void drain_all(void)
{
	drain(NULL, 0);
}

bool tape_record_on(cudaStream_t s, void (*replay)(const void *args), const void *args, size_t size)
{
	struct tape *t = capturing;
	if (!t && async_on()) {
		void *copy = malloc(size);
		if (!copy)
			abort();
		memcpy(copy, args, size);
		enqueue(S(s), (struct qop){ QOP_RUN, replay, copy, NULL, NULL, 0 });
		return true;
	}
	if (!t)
		return false;
	struct CUstream_st *st = S(s);
	if (!st->captured) {
		fprintf(stderr, "fake CUDA: work queued on stream %d while another is captured, but this one never waited for an "
				"event of the capture: on a GPU it runs once, now, instead of in the graph\n", st->id);
		abort();
	}
	st->last_seq = ++t->seq;
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 64;
		struct op *op = realloc(t->op, (size_t)cap * sizeof *op);
		if (!op)
			abort(); /* a test machine out of memory */
		t->op = op, t->cap = cap;
	}
	void *copy = malloc(size);
	if (!copy)
		abort();
	memcpy(copy, args, size);
	t->op[t->n++] = (struct op){ replay, copy };
	return true;
}

/* What CUDA refuses while a stream is captured (synchronising, plain
 * copies and allocations) fails here too, so the trainer's captured step
 * is held to the same rules. */
#define NOT_WHILE_CAPTURING()                                           \
	do {                                                            \
		if (capturing)                                          \
			return fail(cudaErrorStreamCaptureUnsupported); \
	} while (0)

static void tape_free(struct tape *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->op[i].args);
	free(t->op);
	memset(t, 0, sizeof *t);
}

static _Thread_local cudaError_t last_error;

static cudaError_t fail(cudaError_t e)
{
	last_error = e;
	return e;
}

void fake_launch_failed(cudaError_t e)
{
	fail(e);
}

/* The CPU kernels that stand in for cuBLAS and cuDNN run on one thread:
 * a test runs beside others on few cores. */
__attribute__((constructor)) static void one_thread(void)
{
	kern_set_threads(1);
}

static int devices(void)
{
	const char *v = getenv("TRAINC_FAKE_GPUS");
	int n = v ? atoi(v) : 1;
	return n > 0 ? n : 1;
}

/* ---- the runtime ---- */

/* TRAINC_FAKE_DRIVER=major.minor: a driver supporting CUDA up to that
 * version (default: the CUDA this is built with); one older than that is
 * "insufficient" for the runtime, as CUDA's linked-in runtime finds it */
static int driver_version(void)
{
	int major, minor;
	const char *v = getenv("TRAINC_FAKE_DRIVER");
	return v && sscanf(v, "%d.%d", &major, &minor) == 2 ? major * 1000 + minor * 10 : CUDART_VERSION;
}

cudaError_t cudaDriverGetVersion(int *version)
{
	*version = driver_version();
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = 0;
	if (driver_version() < CUDART_VERSION)
		return fail(cudaErrorInsufficientDriver);
	*count = devices();
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	if (device < 0 || device >= devices())
		return fail(cudaErrorInvalidDevice);
	current = device;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	memset(prop, 0, sizeof *prop);
	snprintf(prop->name, sizeof prop->name, "host stand-in for a GPU %d", device);
	/* TRAINC_FAKE_CC=major.minor (default 9.0, a Hopper GPU) */
	const char *cc = getenv("TRAINC_FAKE_CC");
	if (!cc || sscanf(cc, "%d.%d", &prop->major, &prop->minor) != 2) {
		prop->major = 9;
		prop->minor = 0;
	}
	return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	const char *none = getenv("TRAINC_FAKE_NO_PEER");
	*can = device != peer && !(none && strcmp(none, "1") == 0);
	return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
	if (flags != 0 || peer < 0 || peer >= devices() || peer == current || peer >= 64)
		return fail(cudaErrorInvalidValue);
	if (peer_on[current][peer])
		return fail(cudaErrorPeerAccessAlreadyEnabled);
	peer_on[current][peer] = true;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	NOT_WHILE_CAPTURING();
	stuck_wait("cudaDeviceSynchronize");
	drain_all();
	return cudaSuccess;
}
cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "no error";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
	case cudaErrorNotSupported: return "operation not supported (by the host stand-in)";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
	case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
	default: return "error (host stand-in)";
	}
}

const char *cudaGetErrorName(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "cudaSuccess";
	case cudaErrorNotReady: return "cudaErrorNotReady";
	case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
	case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
	case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
	case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
	default: return "cudaError (host stand-in)";
	}
}

static size_t gpu_bytes(void)
{
	const char *v = getenv("TRAINC_FAKE_GPU_MIB");
	return (v ? (size_t)atol(v) : 16384) << 20;
}

/* bytes allocated on device d */
static size_t used_on(int d)
{
	size_t u = 0;
	pthread_mutex_lock(&dev_lock);
	for (int i = 0; i < nblocks; i++)
		u += blocks[i].device == d ? blocks[i].size : 0;
	pthread_mutex_unlock(&dev_lock);
	return u;
}

/* out of memory as a GPU of TRAINC_FAKE_GPU_MIB would be */
cudaError_t cudaMalloc(void **p, size_t size)
{
	*p = NULL;
	NOT_WHILE_CAPTURING();
	if (used_on(current) + size > gpu_bytes())
		return fail(cudaErrorMemoryAllocation);
	*p = dev_alloc(size);
	return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *p)
{
	NOT_WHILE_CAPTURING();
	drain_all(); /* CUDA's cudaFree waits for the device */
	if (p)
		dev_free(p);
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	*total = gpu_bytes();
	size_t u = used_on(current);
	*free_b = u < *total ? *total - u : 0;
	return cudaSuccess;
}

/* Page-locked host memory (cudaHostAlloc): a queued copy from it reads it
 * when the copy runs, as a DMA does on a GPU, where a copy from pageable
 * memory is staged when it is queued. */
enum { MAX_LOCKED = 64 };
static struct { char *p; size_t n; } locked[MAX_LOCKED];

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
	(void)flags;
	*p = NULL;
	NOT_WHILE_CAPTURING();
	const char *lock = getenv("TRAINC_FAKE_HOST_LOCK"); /* 0: a system that locks no more memory */
	if (lock && !strcmp(lock, "0"))
		return fail(cudaErrorMemoryAllocation);
	pthread_mutex_lock(&dev_lock);
	int slot = 0;
	while (slot < MAX_LOCKED && locked[slot].p)
		slot++;
	if (slot < MAX_LOCKED && (*p = malloc(size ? size : 1)) != NULL)
		locked[slot].p = *p, locked[slot].n = size;
	pthread_mutex_unlock(&dev_lock);
	return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *p)
{
	NOT_WHILE_CAPTURING();
	drain_all(); /* CUDA's waits for the device */
	pthread_mutex_lock(&dev_lock);
	int slot = 0;
	while (slot < MAX_LOCKED && locked[slot].p != p)
		slot++;
	if (slot < MAX_LOCKED)
		locked[slot].p = NULL;
	pthread_mutex_unlock(&dev_lock);
	if (slot == MAX_LOCKED) {
		fprintf(stderr, "fake CUDA: cudaFreeHost of %p, which cudaHostAlloc did not return\n", p);
		abort();
	}
	free(p);
	return cudaSuccess;
}

static bool is_locked(const void *p, size_t n)
{
	bool in = false;
	pthread_mutex_lock(&dev_lock);
	for (int i = 0; i < MAX_LOCKED && !in; i++)
		in = locked[i].p && (const char *)p >= locked[i].p && (const char *)p + n <= locked[i].p + locked[i].n;
	pthread_mutex_unlock(&dev_lock);
	return in;
}

/* A copy's ends must be where its kind says (a wrong kind is an error on a
 * GPU, or a fault); a whole range, not only its first byte. */
static bool ends_agree(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	if (count == 0 || kind == cudaMemcpyDefault)
		return true;
	bool dd = fake_is_device(dst) && fake_is_device((char *)dst + count - 1);
	bool sd = fake_is_device(src) && fake_is_device((const char *)src + count - 1);
	bool dh = !fake_is_device(dst), sh = !fake_is_device(src);
	switch (kind) {
	case cudaMemcpyHostToDevice: return dd && sh;
	case cudaMemcpyDeviceToHost: return dh && sd;
	case cudaMemcpyDeviceToDevice: return dd && sd;
	default: return dh && sh;
	}
}

/* Device pointers a library call was given (NULL allowed where optional):
 * memory of the current GPU or of one it has peer access to. */
static bool on_device(int n, const void *const *p)
{
	for (int i = 0; i < n; i++)
		if (p[i] && !fake_reachable(p[i]))
			return false;
	return true;
}

/* A library handle used on another GPU than it was created on, or given
 * a stream of another GPU. */
static bool wrong_device(const char *lib, int handle_device, cudaStream_t s)
{
	int sd = s ? s->device : current;
	if (handle_device == current && sd == current)
		return false;
	fprintf(stderr, "fake CUDA: a %s handle of GPU %d called while GPU %d is current, on a stream of GPU %d\n", lib, handle_device,
		current, sd);
	return true;
}
#define ON_DEVICE(...) on_device((int)(sizeof((const void *[]){ __VA_ARGS__ }) / sizeof(const void *)), (const void *[]){ __VA_ARGS__ })

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	NOT_WHILE_CAPTURING();
	if (!ends_agree(dst, src, count, kind))
		return fail(cudaErrorInvalidValue);
	drain(&legacy, legacy.n - 1); /* the legacy stream only: non-blocking streams are not waited for */
	fake_dev_open();
	memmove(dst, src, count);
	fake_dev_close();
	return cudaSuccess;
}

struct copy_args { void *dst; const void *src; size_t count; int value; void *owned; };

static void copy_replay(const void *q)
{
	const struct copy_args *a = q;
	memmove(a->dst, a->src, a->count);
	free(a->owned); /* a queued copy runs once */
}

static void set_replay(const void *q)
{
	const struct copy_args *a = q;
	memset(a->dst, a->value, a->count);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s)
{
	struct copy_args a = { dst, src, count, 0, NULL };
	if (!ends_agree(dst, src, count, kind))
		return fail(cudaErrorInvalidValue);
	if (kind == cudaMemcpyHostToDevice && capturing) /* host memory may change before a launch */
		return fail(cudaErrorStreamCaptureUnsupported);
	if (kind == cudaMemcpyHostToDevice && async_on() && !is_locked(src, count)) {
		/* CUDA stages pageable host memory before it returns: the caller
		 * may reuse the buffer at once */
		a.owned = malloc(count ? count : 1);
		if (!a.owned)
			abort();
		memcpy(a.owned, src, count);
		a.src = a.owned;
	}
	if (tape_record_on(s, copy_replay, &a, sizeof a))
		return cudaSuccess;
	free(a.owned);
	return cudaMemcpy(dst, src, count, kind);
}

cudaError_t cudaMemset(void *p, int value, size_t count)
{
	NOT_WHILE_CAPTURING();
	if (count && !ends_agree(p, p, count, cudaMemcpyDeviceToDevice))
		return fail(cudaErrorInvalidValue);
	drain(&legacy, legacy.n - 1);
	fake_dev_open();
	memset(p, value, count);
	fake_dev_close();
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t count, cudaStream_t s)
{
	struct copy_args a = { p, NULL, count, value, NULL };
	if (count && !ends_agree(p, p, count, cudaMemcpyDeviceToDevice))
		return fail(cudaErrorInvalidValue);
	if (tape_record_on(s, set_replay, &a, sizeof a))
		return cudaSuccess;
	return cudaMemset(p, value, count);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	(void)flags;
	*s = calloc(1, sizeof **s);
	if (!*s)
		return fail(cudaErrorMemoryAllocation);
	(*s)->device = current;
	(*s)->id = next_id++;
	if (async_on() && nstreams < 64)
		streams[nstreams++] = *s;
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	drain_all(); /* its work still runs; other streams may wait on it */
	for (int i = 0; i < nstreams; i++)
		if (streams[i] == s) {
			streams[i] = streams[--nstreams];
			break;
		}
	free(s->q);
	free(s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	NOT_WHILE_CAPTURING();
	stuck_wait("cudaStreamSynchronize");
	drain(S(s), S(s)->n - 1);
	return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
	NOT_WHILE_CAPTURING();
	drain(S(s), S(s)->n - 1);
	return stuck_query();
}

/* An event whose last record was made while capturing stands for a node of
 * that graph, not for work on a stream: CUDA refuses to query, wait for
 * or time it (cudaErrorCapturedEvent) until it is recorded again outside a
 * capture. */
static bool captured_event(cudaEvent_t e, const char *call)
{
	if (!e->cap_s)
		return false;
	fprintf(stderr, "fake CUDA: %s of an event last recorded while capturing a CUDA graph (CUDA: cudaErrorCapturedEvent); "
			"record it again outside the capture first\n", call);
	return true;
}

/* While capturing, a stream that waits for an event recorded in the
 * capture joins it (a fork), and the stream the event was recorded on has
 * rejoined up to that record.  A captured stream that waits for an event
 * last recorded outside this capture (eagerly, or in an earlier capture)
 * is refused with CUDA's error (cudaErrorStreamCaptureIsolation; CUDA also
 * invalidates the capture, which the stand-in does not): the wait must
 * follow a record in the capture, unless it is an external wait
 * (cudaEventWaitExternal), which CUDA allows. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
	struct tape *t = capturing;
	bool here = t && e->cap_s && e->cap_gen == capture_gen;
	if (t && !here && e->recorded && S(s)->captured && !(flags & cudaEventWaitExternal)) {
		fprintf(stderr, "fake CUDA: captured stream %d waits for an event recorded outside the capture (CUDA: "
				"cudaErrorStreamCaptureIsolation)\n", S(s)->id);
		return fail(cudaErrorStreamCaptureIsolation);
	}
	if (!here && captured_event(e, "cudaStreamWaitEvent"))
		return fail(cudaErrorCapturedEvent);
	if (t && here) {
		struct CUstream_st *st = S(s);
		if (!st->captured) {
			if (t->njoined == 16)
				return fail(cudaErrorNotSupported);
			st->captured = true;
			st->last_seq = st->joined_seq = 0;
			t->joined[t->njoined++] = st;
		}
		if (e->cap_seq > e->cap_s->joined_seq)
			e->cap_s->joined_seq = e->cap_seq;
		return cudaSuccess;
	}
	if (!capturing && async_on() && e->s && e->s != S(s))
		enqueue(S(s), (struct qop){ QOP_WAIT, NULL, NULL, NULL, e->s, e->pos });
	return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
	(void)mode;
	if (capturing)
		return fail(cudaErrorIllegalState);
	if (!s) /* the legacy stream cannot be captured */
		return fail(cudaErrorStreamCaptureUnsupported);
	capturing = calloc(1, sizeof *capturing);
	if (!capturing)
		return fail(cudaErrorMemoryAllocation);
	capture_gen++;
	s->captured = true;
	s->last_seq = s->joined_seq = 0;
	capturing->joined[capturing->njoined++] = s;
	return cudaSuccess;
}

/* Every stream that joined the capture must have rejoined the origin
 * after its last operation (CUDA: cudaErrorStreamCaptureUnjoined). */
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
	*g = NULL;
	if (!capturing || !s || capturing->joined[0] != s)
		return fail(cudaErrorIllegalState);
	struct CUstream_st *unjoined = NULL;
	for (int i = 0; i < capturing->njoined; i++) {
		struct CUstream_st *st = capturing->joined[i];
		if (i > 0 && st->last_seq > st->joined_seq && !unjoined)
			unjoined = st;
		st->captured = false;
	}
	if (unjoined) {
		fprintf(stderr, "fake CUDA: stream %d joined the capture but did not rejoin stream %d after its last operation\n",
			unjoined->id, s->id);
		tape_free(capturing);
		free(capturing);
		capturing = NULL;
		return fail(cudaErrorStreamCaptureUnjoined);
	}
	*g = calloc(1, sizeof **g);
	if (!*g)
		return fail(cudaErrorMemoryAllocation);
	(*g)->t = *capturing;
	free(capturing);
	capturing = NULL;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = calloc(1, sizeof **e);
	if (!*e)
		return fail(cudaErrorMemoryAllocation);
	(*e)->device = current;
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	cudaError_t r = cudaEventCreate(e);
	if (r == cudaSuccess)
		(*e)->flags = flags;
	return r;
}


cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free(e);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	if (e->device != (s ? s->device : current)) /* CUDA: the event and the stream of different devices */
		return fail(cudaErrorInvalidResourceHandle);
	e->recorded = true;
	if (capturing) {
		struct CUstream_st *st = S(s);
		if (!st->captured) {
			fprintf(stderr, "fake CUDA: an event recorded on stream %d, which is not part of the running capture\n", st->id);
			abort();
		}
		e->cap_s = st;
		e->cap_gen = capture_gen;
		e->cap_seq = st->last_seq = ++capturing->seq;
		return cudaSuccess;
	}
	e->cap_s = NULL;
	if (async_on()) {
		e->s = S(s);
		e->pos = e->s->n;
		enqueue(e->s, (struct qop){ QOP_RECORD, NULL, NULL, e, NULL, 0 });
		return cudaSuccess;
	}
	e->t = util_now();
	e->s = NULL;
	return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	NOT_WHILE_CAPTURING();
	if (captured_event(e, "cudaEventQuery"))
		return fail(cudaErrorCapturedEvent);
	if (e->s)
		drain(e->s, e->pos);
	return stuck_query();
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	NOT_WHILE_CAPTURING();
	if (captured_event(e, "cudaEventSynchronize"))
		return fail(cudaErrorCapturedEvent);
	stuck_wait("cudaEventSynchronize");
	if (e->s)
		drain(e->s, e->pos);
	return cudaSuccess;
}

/* CUDA's rules: both events recorded, both with timing (an event made with
 * cudaEventDisableTiming cannot be timed), both of one device, neither last
 * recorded in a capture, and both done (cudaErrorNotReady otherwise). */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	if (!a->recorded || !b->recorded || a->device != b->device || ((a->flags | b->flags) & cudaEventDisableTiming)) {
		fprintf(stderr, "fake CUDA: cudaEventElapsedTime of %s (CUDA: cudaErrorInvalidResourceHandle)\n",
			!a->recorded || !b->recorded ? "an event never recorded"
			: a->device != b->device     ? "events of two devices"
						     : "an event created with cudaEventDisableTiming");
		return fail(cudaErrorInvalidResourceHandle);
	}
	if (captured_event(a, "cudaEventElapsedTime") || captured_event(b, "cudaEventElapsedTime"))
		return fail(cudaErrorCapturedEvent);
	if ((a->s && a->s->done <= a->pos) || (b->s && b->s->done <= b->pos))
		return fail(cudaErrorNotReady);
	*ms = (float)((b->t - a->t) * 1000.0);
	return cudaSuccess;
}

cudaError_t cudaGraphCreate(cudaGraph_t *g, unsigned int flags)
{
	(void)flags;
	*g = calloc(1, sizeof **g);
	return *g ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps)
{
	(void)deps, (void)ndeps, (void)g;
	*node = NULL;
	return cudaSuccess;
}

/* the executable graph owns a copy of the recording */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ge, cudaGraph_t g, unsigned long long flags)
{
	(void)flags;
	*ge = calloc(1, sizeof **ge);
	if (!*ge)
		return fail(cudaErrorMemoryAllocation);
	struct tape *t = &(*ge)->t;
	t->n = t->cap = g->t.n;
	t->op = calloc((size_t)(t->n ? t->n : 1), sizeof *t->op);
	for (int i = 0; i < t->n && t->op; i++) {
		t->op[i].replay = g->t.op[i].replay;
		t->op[i].args = g->t.op[i].args;
		g->t.op[i].args = NULL; /* moved */
	}
	return t->op ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

static void graph_replay(const void *q)
{
	const struct CUgraphExec_st *ge = *(struct CUgraphExec_st *const *)q;
	for (int i = 0; i < ge->t.n; i++)
		ge->t.op[i].replay(ge->t.op[i].args);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s)
{
	if (capturing)
		return fail(cudaErrorStreamCaptureUnsupported);
	if (!tape_record_on(s, graph_replay, &ge, sizeof ge)) {
		fake_dev_open();
		graph_replay(&ge);
		fake_dev_close();
	}
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	if (g)
		tape_free(&g->t);
	free(g);
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ge)
{
	if (ge)
		tape_free(&ge->t);
	free(ge);
	return cudaSuccess;
}

/* ---- cuBLAS: column-major C = alpha op(A) op(B) + beta C through the
 * CPU's row-major kern_gemm (a column-major matrix is its transpose
 * row-major, so the operands swap) ---- */

/* ws: the user's workspace (cublasSetWorkspace), which cublasSetStream
 * drops, as cuBLAS's does: a call captured without one would leave cuBLAS
 * to find workspace of its own inside the graph */
struct cublasContext { cudaStream_t s; int device; void *ws; };

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
	*h = calloc(1, sizeof **h);
	if (!*h)
		return CUBLAS_STATUS_ALLOC_FAILED;
	(*h)->device = current;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
	return status == CUBLAS_STATUS_SUCCESS ? "success" : "cuBLAS error (host stand-in)";
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) { (void)h, (void)mode; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
	h->s = s;
	h->ws = NULL; /* "unconditionally resets the cuBLAS library workspace back to the default workspace pool" */
	return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS: a pointer aligned to 256 bytes (INVALID_VALUE otherwise) */
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *w, size_t n)
{
	if (((uintptr_t)w % 256) != 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (n && !ON_DEVICE(w))
		return CUBLAS_STATUS_EXECUTION_FAILED;
	h->ws = n ? w : NULL;
	return CUBLAS_STATUS_SUCCESS;
}

struct gemm_args { bool ta, tb; int m, n, k; float alpha, beta; const float *a, *b; float *c; int lda, ldb, ldc; };

static void gemm_replay(const void *q)
{
	const struct gemm_args *g = q;
	kern_gemm(g->tb, g->ta, g->n, g->m, g->k, g->alpha, g->b, g->ldb, g->a, g->lda, g->beta, g->c, g->ldc);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
			      const float *a, int lda, const float *b, int ldb, const float *beta, float *c, int ldc)
{
	/* cuBLAS's own checks of the shapes (column-major leading dimensions) */
	int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
	if (m < 0 || n < 0 || k < 0 || lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) || ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (!ON_DEVICE(a, b, c) || wrong_device("cuBLAS", h->device, h->s)) /* the scalars are host memory (the default pointer mode) */
		return CUBLAS_STATUS_EXECUTION_FAILED;
	if (capturing && !h->ws) {
		fprintf(stderr, "fake cuBLAS: a GEMM captured in a CUDA graph with no workspace of the caller's (cublasSetWorkspace "
				"after cublasSetStream, which drops it): cuBLAS would find its own inside the capture\n");
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	/* the scalars are copied: they point at the caller's stack */
	struct gemm_args g = { ta != CUBLAS_OP_N, tb != CUBLAS_OP_N, m, n, k, *alpha, *beta, a, b, c, lda, ldb, ldc };
	if (!tape_record_on(h->s, gemm_replay, &g, sizeof g)) {
		fake_dev_open();
		gemm_replay(&g);
		fake_dev_close();
	}
	return CUBLAS_STATUS_SUCCESS;
}

/* ---- cuDNN: NCHW float convolutions through the CPU's im2col kernel ---- */

struct cudnnContext { cudaStream_t s; int device; };

/* the stream of the cuDNN call being made (one thread calls cuDNN) */
static cudaStream_t conv_stream;
struct cudnnTensorStruct { int n, c, h, w; };
struct cudnnFilterStruct { int k, c, h, w; };
struct cudnnConvolutionStruct { int ph, pw, sh, sw, dh, dw, groups; cudnnMathType_t math; };

const char *cudnnGetErrorString(cudnnStatus_t status)
{
	return status == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "cuDNN error (host stand-in)";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
	*h = calloc(1, sizeof **h);
	if (!*h)
		return CUDNN_STATUS_ALLOC_FAILED;
	(*h)->device = current;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
	free(h);
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
	h->s = s;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
	*d = calloc(1, sizeof **d);
	return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
	free(d);
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
	*d = calloc(1, sizeof **d);
	return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
	free(d);
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
	*d = calloc(1, sizeof **d);
	if (!*d)
		return CUDNN_STATUS_ALLOC_FAILED;
	(*d)->groups = 1;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
	free(d);
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f, cudnnDataType_t t, int n, int c, int h, int w)
{
	if (f != CUDNN_TENSOR_NCHW || t != CUDNN_DATA_FLOAT)
		return CUDNN_STATUS_NOT_SUPPORTED;
	d->n = n, d->c = c, d->h = h, d->w = w;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t t, cudnnTensorFormat_t f, int k, int c, int h, int w)
{
	if (f != CUDNN_TENSOR_NCHW || t != CUDNN_DATA_FLOAT)
		return CUDNN_STATUS_NOT_SUPPORTED;
	d->k = k, d->c = c, d->h = h, d->w = w;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int sh, int sw, int dh, int dw,
					      cudnnConvolutionMode_t mode, cudnnDataType_t t)
{
	(void)t;
	if (mode != CUDNN_CROSS_CORRELATION)
		return CUDNN_STATUS_NOT_SUPPORTED;
	d->ph = ph, d->pw = pw, d->sh = sh, d->sw = sw, d->dh = dh, d->dw = dw;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups)
{
	d->groups = groups;
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
	d->math = m;
	return CUDNN_STATUS_SUCCESS;
}

static struct conv2d_desc desc_of(const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
				  const struct cudnnConvolutionStruct *c)
{
	struct conv2d_desc d = { 0 };
	d.n = x->n, d.c_in = x->c, d.h = x->h, d.w = x->w;
	d.c_out = w->k, d.kh = w->h, d.kw = w->w;
	d.sh = c->sh, d.sw = c->sw, d.ph = c->ph, d.pw = c->pw, d.dh = c->dh, d.dw = c->dw, d.groups = c->groups;
	d.path = KERN_CONV_IM2COL;
	return d;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t x,
						    const cudnnFilterDescriptor_t w, int *n, int *k, int *h, int *wd)
{
	*n = x->n, *k = w->k;
	*h = kern_window_out(x->h, w->h, c->sh, c->ph, c->dh, false);
	*wd = kern_window_out(x->w, w->w, c->sw, c->pw, c->dw, false);
	return CUDNN_STATUS_SUCCESS;
}

struct conv_args { struct conv2d_desc d; const float *x, *w, *dy; float *y, *dx, *dw; };

static cudnnStatus_t conv_now(struct conv2d_desc d, const float *x, const float *w, const float *dy, float *y, float *dx, float *dw);

static void conv_replay(const void *q)
{
	const struct conv_args *c = q;
	conv_now(c->d, c->x, c->w, c->dy, c->y, c->dx, c->dw);
}

static cudnnStatus_t conv(struct conv2d_desc d, const float *x, const float *w, const float *dy, float *y, float *dx, float *dw)
{
	struct conv_args c = { d, x, w, dy, y, dx, dw };
	return tape_record_on(conv_stream, conv_replay, &c, sizeof c) ? CUDNN_STATUS_SUCCESS : conv_now(d, x, w, dy, y, dx, dw);
}

/* Run one pass of the convolution: the kernel is prepared per call over
 * one workspace that grows as needed (the caller runs one at a time). */
static cudnnStatus_t conv_now(struct conv2d_desc d, const float *x, const float *w, const float *dy, float *y, float *dx, float *dw)
{
	static void *buf;
	static size_t cap;
	size_t ws = kern_conv2d_workspace(&d);
	if (ws > cap) {
		free(buf);
		buf = NULL;
		cap = 0;
		if (posix_memalign(&buf, 64, ws) != 0)
			return CUDNN_STATUS_ALLOC_FAILED;
		cap = ws;
	}
	struct kern_conv2d k;
	if (kern_conv2d_prepare(&k, &d, buf) != 0)
		return CUDNN_STATUS_BAD_PARAM;
	fake_dev_open();
	if (y)
		kern_conv2d_fwd(&k, x, w, NULL, y);
	else
		kern_conv2d_bwd(&k, x, w, dy, dx, dw, NULL);
	fake_dev_close();
	kern_conv2d_release(&k);
	return CUDNN_STATUS_SUCCESS;
}

/* What cuDNN checks of a call: the tensors agree with the convolution
 * (BAD_PARAM), the algorithm is one Find offered as working (the stand-in
 * offers one per direction: NOT_SUPPORTED otherwise), and the workspace
 * holds what that algorithm asked for (BAD_PARAM). */
static cudnnStatus_t conv_check(const struct cudnnTensorStruct *x, const struct cudnnFilterStruct *w,
				const struct cudnnConvolutionStruct *c, const struct cudnnTensorStruct *y, bool algo_ok,
				const void *ws, size_t wsb)
{
	int h = kern_window_out(x->h, w->h, c->sh, c->ph, c->dh, false), wd = kern_window_out(x->w, w->w, c->sw, c->pw, c->dw, false);
	if (x->c != w->c * c->groups || y->n != x->n || y->c != w->k || y->h != h || y->w != wd || h < 1 || wd < 1)
		return CUDNN_STATUS_BAD_PARAM;
	if (!algo_ok)
		return CUDNN_STATUS_NOT_SUPPORTED;
	struct conv2d_desc d = desc_of(x, w, c);
	size_t need = kern_conv2d_workspace(&d);
	return wsb < need || (need && !ws) ? CUDNN_STATUS_BAD_PARAM : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
				      const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cd,
				      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wsb, const void *beta,
				      const cudnnTensorDescriptor_t yd, void *y)
{
	conv_stream = h->s;
	(void)alpha;
	if (*(const float *)beta != 0.0f)
		return CUDNN_STATUS_NOT_SUPPORTED;
	if (!ON_DEVICE(x, w, y, ws) || wrong_device("cuDNN", h->device, h->s))
		return CUDNN_STATUS_EXECUTION_FAILED;
	cudnnStatus_t st = conv_check(xd, wd, cd, yd, algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws, wsb);
	return st != CUDNN_STATUS_SUCCESS ? st : conv(desc_of(xd, wd, cd), x, w, NULL, y, NULL, NULL);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd, const void *w,
					   const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
					   cudnnConvolutionBwdDataAlgo_t algo, void *ws, size_t wsb, const void *beta,
					   const cudnnTensorDescriptor_t dxd, void *dx)
{
	conv_stream = h->s;
	(void)alpha;
	if (*(const float *)beta != 0.0f) /* the CPU kernel writes dx */
		return CUDNN_STATUS_NOT_SUPPORTED;
	if (!ON_DEVICE(w, dy, dx, ws) || wrong_device("cuDNN", h->device, h->s))
		return CUDNN_STATUS_EXECUTION_FAILED;
	cudnnStatus_t st = conv_check(dxd, wd, cd, dyd, algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, ws, wsb);
	return st != CUDNN_STATUS_SUCCESS ? st : conv(desc_of(dxd, wd, cd), NULL, w, dy, NULL, dx, NULL);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd, const void *x,
					     const cudnnTensorDescriptor_t dyd, const void *dy, const cudnnConvolutionDescriptor_t cd,
					     cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t wsb, const void *beta,
					     const cudnnFilterDescriptor_t dwd, void *dw)
{
	conv_stream = h->s;
	(void)alpha;
	if (*(const float *)beta != 1.0f) /* the CPU kernel adds to dw */
		return CUDNN_STATUS_NOT_SUPPORTED;
	if (!ON_DEVICE(x, dy, dw, ws) || wrong_device("cuDNN", h->device, h->s))
		return CUDNN_STATUS_EXECUTION_FAILED;
	cudnnStatus_t st = conv_check(xd, dwd, cd, dyd, algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, ws, wsb);
	return st != CUDNN_STATUS_SUCCESS ? st : conv(desc_of(xd, dwd, cd), x, NULL, dy, NULL, NULL, dw);
}

/* Find's answer, fastest first as cuDNN sorts it: an algorithm that failed
 * to run, one that wants more workspace than anyone gives, and the one the
 * stand-in runs (with the descriptor's math type and the im2col workspace);
 * as many as the caller has room for. */
#define FIND_RESULTS(failing, greedy, working, xd, wd)                                                        \
	do {                                                                                                  \
		if (capturing) /* Find allocates, runs and times every algorithm, and waits for it */       \
			return CUDNN_STATUS_EXECUTION_FAILED;                                                  \
		struct conv2d_desc d_ = desc_of((xd), (wd), c);                                                \
		memset(perf, 0, (size_t)want * sizeof *perf);                                                  \
		int n_ = want < 3 ? want : 3;                                                                  \
		for (int i_ = 0; i_ < n_; i_++) {                                                              \
			perf[i_].mathType = c->math;                                                           \
			perf[i_].time = (float)(i_ + 1);                                                       \
		}                                                                                              \
		if (n_ > 0)                                                                                    \
			perf[0].algo = (failing), perf[0].status = CUDNN_STATUS_NOT_SUPPORTED, perf[0].time = -1;     \
		if (n_ > 1)                                                                                    \
			perf[1].algo = (greedy), perf[1].memory = (size_t)8 << 30;                            \
		if (n_ > 2)                                                                                    \
			perf[2].algo = (working), perf[2].memory = kern_conv2d_workspace(&d_);                \
		*got = n_;                                                                                     \
		return CUDNN_STATUS_SUCCESS;                                                                   \
	} while (0)

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
						   const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y, const int want,
						   int *got, cudnnConvolutionFwdAlgoPerf_t *perf)
{
	(void)h, (void)y;
	FIND_RESULTS(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
		     CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, x, w);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
							const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, const int want,
							int *got, cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
	(void)h, (void)dy;
	FIND_RESULTS(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
		     CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, dx, w);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
							  const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t c,
							  const cudnnFilterDescriptor_t dw, const int want, int *got,
							  cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
	(void)h, (void)dy;
	FIND_RESULTS(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
		     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, x, dw);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w,
						      const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t y,
						      cudnnConvolutionFwdAlgo_t algo, size_t *size)
{
	(void)h, (void)algo; (void)y;
	struct conv2d_desc d = desc_of(x, w, c);
	*size = kern_conv2d_workspace(&d);
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
							   const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t c,
							   const cudnnTensorDescriptor_t dx, cudnnConvolutionBwdDataAlgo_t algo, size_t *size)
{
	(void)h, (void)algo; (void)dy;
	struct conv2d_desc d = desc_of(dx, w, c);
	*size = kern_conv2d_workspace(&d);
	return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
							     const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t c,
							     const cudnnFilterDescriptor_t dw, cudnnConvolutionBwdFilterAlgo_t algo,
							     size_t *size)
{
	(void)h, (void)algo; (void)dy;
	struct conv2d_desc d = desc_of(x, dw, c);
	*size = kern_conv2d_workspace(&d);
	return CUDNN_STATUS_SUCCESS;
}

/* ---- NCCL over Gloo: the unique id carries the TCP port of a store that
 * rank 0 serves, every rank joins a Gloo communicator through it, and each
 * collective runs there at once ("device" memory is host memory).
 * TRAINC_FAKE_NCCL_FAIL=G:N loses the Nth collective of GPU G's
 * communicator as a real one is lost when a peer fails mid-way: the call
 * enqueues it and succeeds, it never completes, so every stream query of
 * the process says not ready (and a blocking wait stops it, as it would
 * hang on a GPU), and later collectives wait behind it, until that
 * communicator is aborted; its
 * ncclCommGetAsyncError reports the failure once a query has waited. ---- */

struct ncclComm {
	struct comm *c;
	struct store_client *st;
	int device, ncoll;
	bool lost;
	bool nonblocking; /* made with config.blocking = 0 */
	int pending;      /* ncclCommGetAsyncError's ncclInProgress answers still to give; -1: forever */
};

/* TRAINC_FAKE_NCCL_PENDING=K: a non-blocking communicator's calls return
 * ncclInProgress, as a real one's may while it enqueues, and its
 * ncclCommGetAsyncError says ncclInProgress K times before ncclSuccess;
 * =stuck: its initialisation never finishes (a peer that never joins). */
static int pending_knob(void)
{
	static int k = -2;
	if (k == -2) {
		const char *v = getenv("TRAINC_FAKE_NCCL_PENDING");
		k = !v ? 0 : strcmp(v, "stuck") == 0 ? -1 : atoi(v) > 0 ? atoi(v) : 0;
	}
	return k;
}

/* A call of c that succeeded: still in progress, where the knob says */
static ncclResult_t in_progress(ncclComm_t c)
{
	if (!c->nonblocking || pending_knob() <= 0)
		return ncclSuccess;
	c->pending = pending_knob();
	return ncclInProgress;
}

/* Whether this collective of c is the one TRAINC_FAKE_NCCL_FAIL loses
 * (or c already lost one: later ones never start either). */
static bool lose(struct ncclComm *c)
{
	static int gpu = -2, nth;
	if (gpu == -2) {
		const char *v = getenv("TRAINC_FAKE_NCCL_FAIL");
		if (!v || sscanf(v, "%d:%d", &gpu, &nth) != 2)
			gpu = -1;
	}
	if (c->lost || c->device != gpu || ++c->ncoll != nth)
		return c->lost;
	c->lost = true;
	stuck = 1;
	return true;
}

const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : "NCCL error (host stand-in)"; }
const char *ncclGetLastError(ncclComm_t c) { (void)c; return ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	char err[256];
	memset(id, 0, sizeof *id);
	struct store_server *srv = store_server_new(); /* serves until the process ends */
	int port = srv ? store_server_listen_tcp(srv, NULL, 0, err, sizeof err) : -1;
	if (port < 0 || store_server_start(srv, err, sizeof err) != 0)
		return ncclSystemError;
	memcpy(id->internal, &port, sizeof port);
	return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
	char err[512];
	struct ncclComm *c = calloc(1, sizeof *c);
	*out = c;
	if (!c)
		return ncclSystemError;
	c->device = current;
	c->nonblocking = config && !config->blocking;
	if (nranks == 1) {
		c->c = comm_open_single();
		if (c->c && c->nonblocking && pending_knob() == -1)
			return c->pending = -1, ncclInProgress;
		return c->c ? in_progress(c) : ncclSystemError;
	}
	int port;
	memcpy(&port, id.internal, sizeof port);
	c->st = store_client_connect_tcp("127.0.0.1", port, 60.0, err, sizeof err);
	c->c = c->st ? comm_open_gloo(c->st, rank, nranks, NULL, 60.0, err, sizeof err) : NULL;
	if (!c->c) {
		fprintf(stderr, "fake NCCL: rank %d of %d: %s\n", rank, nranks, err);
		return ncclSystemError;
	}
	if (c->nonblocking && pending_knob() == -1)
		return c->pending = -1, ncclInProgress;
	return in_progress(c);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r)
{
	if (c->pending != 0) {
		c->pending -= c->pending > 0;
		*r = ncclInProgress;
		return ncclSuccess;
	}
	*r = c->lost && stuck == 2 ? ncclSystemError : ncclSuccess;
	return ncclSuccess;
}
ncclResult_t ncclCommFinalize(ncclComm_t c) { return in_progress(c); }

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
	if (c) {
		comm_close(c->c);
		if (c->st)
			store_client_close(c->st);
		free(c);
	}
	return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
	if (c && c->lost)
		stuck = 0;
	return ncclCommDestroy(c);
}

static size_t type_size(ncclDataType_t t)
{
	return t == ncclFloat64 || t == ncclInt64 || t == ncclUint64 ? 8 : t == ncclFloat16 || t == ncclBfloat16 ? 2 : t == ncclInt8 || t == ncclUint8 ? 1 : 4;
}

static ncclResult_t done(struct comm_work *w)
{
	char err[512];
	if (comm_wait(w, err, sizeof err) != 0) {
		fprintf(stderr, "fake NCCL: %s\n", err);
		return ncclSystemError;
	}
	return ncclSuccess;
}

struct coll_args { int kind; const void *in; void *out; size_t n; ncclDataType_t t; ncclRedOp_t op; int root; ncclComm_t c; };

/* The launcher's hang detection (runtime/launch.c) blames a silent rank
 * that does not say it is waiting for others.  A real NCCL call only
 * enqueues, and the trainer waits later where it says so; here the
 * collective runs inside the call, so the call says so itself, through
 * trainc's own functions where the process has them. */
static void say_waiting(bool begin)
{
	static void (*wait_begin)(void), (*wait_end)(void);
	static bool looked;
	if (!looked) {
		looked = true;
		*(void **)&wait_begin = dlsym(RTLD_DEFAULT, "launch_wait_begin");
		*(void **)&wait_end = dlsym(RTLD_DEFAULT, "launch_wait_end");
	}
	if (begin && wait_begin)
		wait_begin();
	else if (!begin && wait_end)
		wait_end();
}

/* The collective itself, over Gloo. */
static ncclResult_t coll_now(const struct coll_args *a)
{
	enum comm_op o = a->op == ncclAvg ? COMM_AVG : COMM_SUM;
	switch (a->kind) {
	case 0: /* all-reduce */
		if (a->in != a->out)
			memmove(a->out, a->in, a->n * type_size(a->t));
		if (a->t == ncclFloat64)
			return done(comm_all_reduce_f64(a->c->c, a->out, (int64_t)a->n, o));
		return a->t == ncclFloat32 ? done(comm_all_reduce(a->c->c, a->out, (int64_t)a->n, o)) : ncclInvalidArgument;
	case 1: /* broadcast */
		if (a->in != a->out)
			memmove(a->out, a->in, a->n * type_size(a->t));
		return type_size(a->t) == 4 ? done(comm_broadcast(a->c->c, a->out, (int64_t)a->n, a->root)) : ncclInvalidArgument;
	case 2: /* reduce-scatter */
		return a->t == ncclFloat32 ? done(comm_reduce_scatter(a->c->c, a->in, a->out, (int64_t)a->n, o)) : ncclInvalidArgument;
	default: /* all-gather */
		return a->t == ncclFloat32 ? done(comm_all_gather(a->c->c, a->in, a->out, (int64_t)a->n)) : ncclInvalidArgument;
	}
}

static void coll_replay(const void *q)
{
	say_waiting(true);
	coll_now(q);
	say_waiting(false);
}

/* Queued or recorded on stream s, or run at once. */
static ncclResult_t coll(cudaStream_t s, struct coll_args a)
{
	/* NCCL's buffers and stream are the communicator's GPU's */
	int sd = s ? s->device : current;
	if ((a.in && device_of(a.in) != a.c->device) || device_of(a.out) != a.c->device || sd != a.c->device) {
		fprintf(stderr, "fake NCCL: a collective of GPU %d's communicator given memory or a stream of another GPU\n", a.c->device);
		return ncclInvalidArgument;
	}
	if (stuck || lose(a.c))
		return ncclSuccess; /* queued behind the lost collective: on a GPU the call would not wait for it */
	if (tape_record_on(s, coll_replay, &a, sizeof a))
		return in_progress(a.c);
	fake_dev_open();
	say_waiting(true);
	ncclResult_t r = coll_now(&a);
	say_waiting(false);
	fake_dev_close();
	return r == ncclSuccess ? in_progress(a.c) : r;
}

ncclResult_t ncclAllReduce(const void *in, void *out, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
	return coll(s, (struct coll_args){ 0, in, out, n, t, op, 0, c });
}

ncclResult_t ncclBroadcast(const void *in, void *out, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t s)
{
	return coll(s, (struct coll_args){ 1, in, out, n, t, ncclSum, root, c });
}

ncclResult_t ncclReduceScatter(const void *in, void *out, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
	return coll(s, (struct coll_args){ 2, in, out, n, t, op, 0, c });
}

ncclResult_t ncclAllGather(const void *in, void *out, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t s)
{
	return coll(s, (struct coll_args){ 3, in, out, n, t, ncclSum, 0, c });
}
