/* comm.h: collectives between the ranks of a job, behind one table with
 * three engines: a world of one (copies, no engine), Gloo on CPUs and NCCL
 * on GPUs.  DDP and FSDP are written once against this header.
 * Every collective is asynchronous: it returns a work handle at once and
 * comm_wait joins it.  On the CPU a comm thread per communicator runs the
 * collectives one at a time in the order they were started, so the caller
 * can start bucket k's all-reduce and keep computing; NCCL queues them on
 * its stream.  Buffers live where the engine reads them: host memory for the
 * world of one and Gloo, device memory for NCCL.  A buffer belongs to the
 * collective from its start until its comm_wait returns.
 * Does not: allocate per collective (work handles come from a fixed ring of
 * COMM_MAX_INFLIGHT), name Gloo or NCCL types, or retry a failed collective.
 * Invariant: every rank starts the same collectives in the same order with
 * the same sizes; every wait is bounded by the communicator's timeout; after
 * the first failure every later collective fails at once with that first
 * error, which says what failed where and why.
 */
#ifndef COMM_H
#define COMM_H
#include <stddef.h>
#include <stdint.h>

#define COMM_MAX_INFLIGHT 64
/* The hint every engine's message carries where a collective failed
 * because a peer went away or stalled: the trainers tell such a failure,
 * a consequence of another rank's, by it (train_fail_key). */
#define COMM_HINT_PEER "another rank died or stalled; the first rank to fail names the cause"

struct comm;      /* opaque */
struct comm_work; /* a collective in flight, valid until its comm_wait */
struct store_client;

enum comm_op { COMM_SUM, COMM_AVG };
enum comm_dtype { COMM_F32, COMM_F64 };

/* A world of one: collectives are copies or nothing.  NULL only when out of
 * memory. */
struct comm *comm_open_single(void);

/* A Gloo communicator over TCP.  The ranks meet through the store st, which
 * must stay open until comm_open_gloo returns; host is the address this rank
 * listens on for its peers (NULL: loopback, enough for one node).  Each rank
 * opens its communicators in the same order (their store keys are numbered
 * in that order).  Blocks until every rank has joined or timeout_s passed. */
struct comm *comm_open_gloo(struct store_client *st, int rank, int world, const char *host, double timeout_s,
			    char *err, size_t errlen);

/* An NCCL communicator on CUDA device `device`, running its collectives on
 * stream (a cudaStream_t; NULL: the default stream).  Rank 0 makes the
 * unique id and shares it through st. */
struct comm *comm_open_nccl(struct store_client *st, int rank, int world, int device, void *stream,
			    double timeout_s, char *err, size_t errlen);

/* Finish what is queued (a failed communicator: drop it), then free. */
void comm_close(struct comm *c);

int comm_rank(const struct comm *c);
int comm_world(const struct comm *c);
const char *comm_name(const struct comm *c); /* "single", "gloo", "nccl" */
/* Seconds the communicator has spent running collectives (on its thread:
 * the difference from the time callers waited is what overlap hid). */
double comm_busy(struct comm *c);

/* buf (n) := the sum (or mean) of buf over the ranks. */
struct comm_work *comm_all_reduce(struct comm *c, float *buf, int64_t n, enum comm_op op);

/* The same in double precision, for metrics (loss sums, correct counts). */
struct comm_work *comm_all_reduce_f64(struct comm *c, double *buf, int64_t n, enum comm_op op);

/* out (n) := block `rank` of the sum (or mean) over ranks of in (world * n). */
struct comm_work *comm_reduce_scatter(struct comm *c, const float *in, float *out, int64_t n, enum comm_op op);

/* out (world * n) := every rank's in (n), in rank order. */
struct comm_work *comm_all_gather(struct comm *c, const float *in, float *out, int64_t n);

/* buf (n) := root's buf on every rank. */
struct comm_work *comm_broadcast(struct comm *c, float *buf, int64_t n, int root);

/* Return once every rank has reached its barrier and everything it started
 * before has finished; 0, or -1 with the reason in err. */
int comm_barrier(struct comm *c, char *err, size_t errlen);

/* Order the device stream `stream` (a cudaStream_t) after w and release
 * w, without waiting on the host: later work queued on the stream sees the
 * collective's result.  Engines without streams (single, Gloo) wait as
 * comm_wait does.  0, or -1 with the reason in err. */
int comm_wait_on(struct comm_work *w, void *stream, char *err, size_t errlen);

/* Wait for w and release it: 0, or -1 with the reason in err (the first
 * failure of the communicator, a timeout, or bad arguments).  Bounded by the
 * communicator's timeout once w has started. */
int comm_wait(struct comm_work *w, char *err, size_t errlen);

/* ---- for engines only (comm.c, comm_nccl.c) ---- */

enum comm_kind { COMM_ALL_REDUCE, COMM_REDUCE_SCATTER, COMM_ALL_GATHER, COMM_BROADCAST, COMM_BARRIER };

struct comm_req {
	enum comm_kind kind;
	enum comm_op op;
	enum comm_dtype dtype;
	const void *in; /* reduce-scatter (world * n), all-gather (n); else NULL */
	void *out;      /* all-reduce and broadcast: in place (n); reduce-scatter (n); all-gather (world * n) */
	int64_t n;
	int root;
};

/* One static const table per engine.  run issues r as work `slot`
 * (0 <= slot < COMM_MAX_INFLIGHT).  With wait == NULL, run finishes r
 * before it returns; otherwise wait(slot) finishes it within timeout_s. */
struct comm_ops {
	const char *name;
	int (*run)(void *impl, const struct comm_req *r, int slot, char *err, size_t errlen);
	int (*wait)(void *impl, int slot, double timeout_s, char *err, size_t errlen);
	void (*close)(void *impl);
	/* optional: order a device stream after work `slot` (comm_wait_on) */
	int (*wait_on)(void *impl, int slot, void *stream, char *err, size_t errlen);
};

/* Wrap an engine that runs in the caller's thread; NULL when out of memory. */
struct comm *comm_new(const struct comm_ops *ops, void *impl, int rank, int world, double timeout_s);

/* The engine's own state when c runs engine `name`, else NULL. */
void *comm_engine(struct comm *c, const char *name);

/* ---- NCCL, stream-ordered (comm_nccl.c): for callers that order work on
 * their own CUDA streams, such as a step captured as a CUDA graph.  No
 * work handle: the caller orders and waits with CUDA events, and calls
 * comm_nccl_poll while it waits. ---- */
/* Queue buf (n values of dtype) := the sum (or mean) over ranks on stream; 0 or -1 with err. */
int comm_nccl_all_reduce_on(struct comm *c, void *buf, int64_t n, enum comm_dtype dtype, enum comm_op op, void *stream, char *err,
			    size_t errlen);
/* Every collective started through comm.h from now on first waits for
 * the work queued on `stream` (a cudaStream_t) when it starts: its inputs
 * may be written by kernels on that stream.  NULL: no such wait. */
int comm_nccl_follow(struct comm *c, void *stream, char *err, size_t errlen);
/* 0 while the communicator is healthy; -1 with NCCL's asynchronous error in
 * err (the communicator is then aborted). */
int comm_nccl_poll(struct comm *c, char *err, size_t errlen);
/* Abort the communicator: every collective it has queued ends (with an error). */
void comm_nccl_abort(struct comm *c);

/* The number of communicators this process opened before (store key prefix). */
int comm_next_id(void);

#endif
