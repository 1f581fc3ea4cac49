/* comm.c: the communicator wrapper (see comm.h), the world of one, and the
 * comm thread that runs a blocking engine (Gloo) asynchronously.
 * A work handle is one of COMM_MAX_INFLIGHT slots in the communicator; it
 * cycles FREE -> QUEUED -> RUNNING -> DONE or FAILED (threaded engines) or
 * FREE -> ISSUED (stream engines) and back to FREE in comm_wait.  The comm
 * thread takes slots from a FIFO in start order, so every rank runs the same
 * sequence.  A waiter gives up when the collective running now has run for
 * the timeout plus a grace: the engines time out by themselves, so that is
 * the backstop for an engine that hangs, and it fails the communicator.
 * Bad arguments, too many collectives in flight and engine errors fail the
 * communicator too: the other ranks are inside a collective this rank will
 * never join, so going on would only turn a clear error into a timeout.
 * Does not: name Gloo or NCCL (comm_gloo.cc, comm_nccl.c do), or allocate
 * after open.
 * Invariant: a slot's request is written only while the slot is FREE and by
 * the starting thread, and read by the engine only while QUEUED..FAILED.
 */
#include "runtime/comm.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/comm_gloo.h"
#include "runtime/util.h"

#define ERRLEN 1024
#define GRACE_S 5.0 /* past the timeout, before a waiter stops trusting the engine */

enum wstate { W_FREE, W_QUEUED, W_RUNNING, W_ISSUED, W_DONE, W_FAILED };

struct comm_work {
	struct comm *c;
	int slot;
	enum wstate state;
	struct comm_req req;
	double t0; /* when the comm thread started it */
};

struct gloo_args { /* comm_open_gloo's arguments, for the comm thread */
	struct store_client *st;
	char prefix[64];
	const char *host;
	int opened; /* 0 while opening, 1 open, -1 failed */
};

struct comm {
	const struct comm_ops *ops;
	void *impl;
	int rank, world;
	double timeout_s;
	int threaded;
	pthread_mutex_t mu;
	pthread_cond_t wake; /* to the comm thread: work queued or stop */
	pthread_cond_t done; /* to waiters: a slot finished */
	pthread_t thread;
	int stop;
	int queue[COMM_MAX_INFLIGHT]; /* slots in start order */
	int qhead, qlen;
	struct comm_work *running;
	int next;                     /* where the search for a free slot starts */
	int failed;
	char fail_msg[ERRLEN];        /* the first failure */
	struct gloo_args *gloo;
	struct comm_work work[COMM_MAX_INFLIGHT];
	struct comm_work bad;         /* handed out when a collective cannot start */
	double busy_s;                /* time spent running collectives */
};

static const char *kind_name(enum comm_kind k)
{
	switch (k) {
	case COMM_ALL_REDUCE: return "all_reduce";
	case COMM_REDUCE_SCATTER: return "reduce_scatter";
	case COMM_ALL_GATHER: return "all_gather";
	case COMM_BROADCAST: return "broadcast";
	case COMM_BARRIER: return "barrier";
	}
	return "?";
}

/* Record the communicator's first failure (under c->mu). */
static void set_failed(struct comm *c, const struct comm_req *r, const char *why)
{
	if (c->failed)
		return;
	c->failed = 1;
	if (r)
		snprintf(c->fail_msg, sizeof c->fail_msg, "comm %s, rank %d of %d: %s of %lld %s: %s", c->ops->name,
			 c->rank, c->world, kind_name(r->kind), (long long)r->n, r->dtype == COMM_F64 ? "doubles" : "floats",
			 why);
	else
		snprintf(c->fail_msg, sizeof c->fail_msg, "comm %s, rank %d of %d: %s", c->ops->name, c->rank, c->world,
			 why);
}

int comm_next_id(void)
{
	static atomic_int next;
	return atomic_fetch_add(&next, 1);
}

static struct comm *alloc_comm(const struct comm_ops *ops, void *impl, int rank, int world, double timeout_s)
{
	struct comm *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->ops = ops, c->impl = impl;
	c->rank = rank, c->world = world;
	c->timeout_s = timeout_s;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->done, &ca);
	pthread_condattr_destroy(&ca);
	for (int i = 0; i < COMM_MAX_INFLIGHT; i++)
		c->work[i].c = c, c->work[i].slot = i;
	c->bad.c = c, c->bad.slot = -1;
	return c;
}

static void free_comm(struct comm *c)
{
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->done);
	free(c);
}

struct comm *comm_new(const struct comm_ops *ops, void *impl, int rank, int world, double timeout_s)
{
	return alloc_comm(ops, impl, rank, world, timeout_s);
}

int comm_rank(const struct comm *c) { return c->rank; }
void *comm_engine(struct comm *c, const char *name) { return strcmp(c->ops->name, name) == 0 ? c->impl : NULL; }
double comm_busy(struct comm *c)
{
	pthread_mutex_lock(&c->mu);
	double b = c->busy_s;
	pthread_mutex_unlock(&c->mu);
	return b;
}

int comm_world(const struct comm *c) { return c->world; }
const char *comm_name(const struct comm *c) { return c->ops->name; }

/* ---- world of one ---- */

static int single_run(void *impl, const struct comm_req *r, int slot, char *err, size_t errlen)
{
	(void)impl, (void)slot, (void)err, (void)errlen;
	size_t bytes = (size_t)r->n * (r->dtype == COMM_F64 ? sizeof(double) : sizeof(float));
	if ((r->kind == COMM_REDUCE_SCATTER || r->kind == COMM_ALL_GATHER) && r->out != r->in && bytes)
		memmove(r->out, r->in, bytes);
	return 0; /* all-reduce, broadcast (root 0), barrier: nothing to do */
}

static void single_close(void *impl)
{
	(void)impl;
}

static const struct comm_ops single_ops = { "single", single_run, NULL, single_close, NULL };

struct comm *comm_open_single(void)
{
	return alloc_comm(&single_ops, NULL, 0, 1, 1e9);
}

/* ---- Gloo on the comm thread ---- */

static int gloo_run(void *impl, const struct comm_req *r, int slot, char *err, size_t errlen)
{
	(void)slot;
	return comm_gloo_run(impl, r, err, errlen);
}

static void gloo_close(void *impl)
{
	comm_gloo_close(impl);
}

static const struct comm_ops gloo_ops = { "gloo", gloo_run, NULL, gloo_close, NULL };

static void *comm_thread(void *arg)
{
	struct comm *c = arg;
	char err[ERRLEN];
	sigset_t pipe;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);

	struct gloo_args *a = c->gloo;
	void *impl = comm_gloo_open(a->st, a->prefix, c->rank, c->world, a->host, c->timeout_s, err, sizeof err);
	pthread_mutex_lock(&c->mu);
	c->impl = impl;
	a->opened = impl ? 1 : -1;
	if (!impl)
		snprintf(c->fail_msg, sizeof c->fail_msg, "%s", err);
	pthread_cond_broadcast(&c->done);
	c->gloo = NULL; /* a lives on the opener's stack */
	pthread_mutex_unlock(&c->mu);
	if (!impl)
		return NULL;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->qlen && !c->stop)
			pthread_cond_wait(&c->wake, &c->mu);
		if (!c->qlen)
			break;
		struct comm_work *w = &c->work[c->queue[c->qhead]];
		c->qhead = (c->qhead + 1) % COMM_MAX_INFLIGHT;
		c->qlen--;
		w->state = W_RUNNING;
		w->t0 = util_now();
		c->running = w;
		int rc = -1;
		if (!c->failed) {
			pthread_mutex_unlock(&c->mu);
			rc = c->ops->run(c->impl, &w->req, w->slot, err, sizeof err);
			pthread_mutex_lock(&c->mu);
			if (rc != 0)
				set_failed(c, &w->req, err);
		}
		c->busy_s += util_now() - w->t0;
		c->running = NULL;
		w->state = rc == 0 ? W_DONE : W_FAILED;
		pthread_cond_broadcast(&c->done);
	}
	pthread_mutex_unlock(&c->mu);
	c->ops->close(c->impl);
	return NULL;
}

struct comm *comm_open_gloo(struct store_client *st, int rank, int world, const char *host, double timeout_s,
			    char *err, size_t errlen)
{
	if (world < 1 || rank < 0 || rank >= world || timeout_s <= 0) {
		util_fail(err, errlen, "comm_open_gloo: rank %d of world %d, timeout %g s: out of range", rank, world,
		     timeout_s);
		return NULL;
	}
	struct gloo_args a = { st, "", host, 0 };
	snprintf(a.prefix, sizeof a.prefix, "comm%d/gloo/", comm_next_id());
	struct comm *c = alloc_comm(&gloo_ops, NULL, rank, world, timeout_s);
	if (!c) {
		util_fail(err, errlen, "comm_open_gloo: out of memory");
		return NULL;
	}
	c->threaded = 1;
	c->gloo = &a;
	int rc = pthread_create(&c->thread, NULL, comm_thread, c);
	if (rc != 0) {
		util_fail(err, errlen, "comm_open_gloo: pthread_create failed: %s", strerror(rc));
		free_comm(c);
		return NULL;
	}
	/* Unbounded here: the store's waits and Gloo's connects are bounded by
	 * timeout_s themselves. */
	pthread_mutex_lock(&c->mu);
	while (!a.opened)
		pthread_cond_wait(&c->done, &c->mu);
	pthread_mutex_unlock(&c->mu);
	if (a.opened < 0) {
		util_fail(err, errlen, "%s", c->fail_msg);
		pthread_join(c->thread, NULL);
		free_comm(c);
		return NULL;
	}
	return c;
}

/* ---- the wrapper ---- */

static const char *check_req(const struct comm *c, const struct comm_req *r)
{
	if (r->n < 0)
		return "negative element count";
	if (r->n > 0 && (!r->out || ((r->kind == COMM_REDUCE_SCATTER || r->kind == COMM_ALL_GATHER) && !r->in)))
		return "NULL buffer";
	if (r->kind == COMM_BROADCAST && (r->root < 0 || r->root >= c->world))
		return "root rank out of range";
	return NULL;
}

static struct comm_work *start(struct comm *c, const struct comm_req *r)
{
	char err[ERRLEN];
	pthread_mutex_lock(&c->mu);
	const char *bad = check_req(c, r);
	if (bad)
		set_failed(c, r, bad);
	if (c->failed) {
		pthread_mutex_unlock(&c->mu);
		return &c->bad;
	}
	struct comm_work *w = NULL;
	for (int k = 0; k < COMM_MAX_INFLIGHT && !w; k++) {
		int i = (c->next + k) % COMM_MAX_INFLIGHT;
		if (c->work[i].state == W_FREE)
			w = &c->work[i], c->next = (i + 1) % COMM_MAX_INFLIGHT;
	}
	if (!w) {
		set_failed(c, r, "more than 64 collectives in flight (wait for some before starting more)");
		pthread_mutex_unlock(&c->mu);
		return &c->bad;
	}
	w->req = *r;
	if (c->threaded) {
		w->state = W_QUEUED;
		c->queue[(c->qhead + c->qlen) % COMM_MAX_INFLIGHT] = w->slot;
		c->qlen++;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->mu);
		return w;
	}
	w->state = W_ISSUED;
	pthread_mutex_unlock(&c->mu);
	int rc = c->ops->run(c->impl, r, w->slot, err, sizeof err);
	pthread_mutex_lock(&c->mu);
	if (rc != 0)
		set_failed(c, r, err);
	w->state = rc != 0 ? W_FAILED : c->ops->wait ? W_ISSUED : W_DONE;
	pthread_mutex_unlock(&c->mu);
	return w;
}

struct comm_work *comm_all_reduce(struct comm *c, float *buf, int64_t n, enum comm_op op)
{
	struct comm_req r = { COMM_ALL_REDUCE, op, COMM_F32, NULL, buf, n, 0 };
	return start(c, &r);
}

struct comm_work *comm_all_reduce_f64(struct comm *c, double *buf, int64_t n, enum comm_op op)
{
	struct comm_req r = { COMM_ALL_REDUCE, op, COMM_F64, NULL, buf, n, 0 };
	return start(c, &r);
}

struct comm_work *comm_reduce_scatter(struct comm *c, const float *in, float *out, int64_t n, enum comm_op op)
{
	struct comm_req r = { COMM_REDUCE_SCATTER, op, COMM_F32, in, out, n, 0 };
	return start(c, &r);
}

struct comm_work *comm_all_gather(struct comm *c, const float *in, float *out, int64_t n)
{
	struct comm_req r = { COMM_ALL_GATHER, COMM_SUM, COMM_F32, in, out, n, 0 };
	return start(c, &r);
}

struct comm_work *comm_broadcast(struct comm *c, float *buf, int64_t n, int root)
{
	struct comm_req r = { COMM_BROADCAST, COMM_SUM, COMM_F32, NULL, buf, n, root };
	return start(c, &r);
}

int comm_barrier(struct comm *c, char *err, size_t errlen)
{
	struct comm_req r = { COMM_BARRIER, COMM_SUM, COMM_F32, NULL, NULL, 0, 0 };
	return comm_wait(start(c, &r), err, errlen);
}

int comm_wait_on(struct comm_work *w, void *stream, char *err, size_t errlen)
{
	if (!w)
		return util_fail(err, errlen, "comm_wait_on: no work handle");
	struct comm *c = w->c;
	pthread_mutex_lock(&c->mu);
	int ordered = w != &c->bad && w->state == W_ISSUED && c->ops->wait_on;
	pthread_mutex_unlock(&c->mu);
	if (!ordered)
		return comm_wait(w, err, errlen);
	char why[ERRLEN];
	int rc = c->ops->wait_on(c->impl, w->slot, stream, why, sizeof why);
	pthread_mutex_lock(&c->mu);
	if (rc != 0) {
		set_failed(c, &w->req, why);
		util_fail(err, errlen, "%s", c->fail_msg);
	}
	w->state = W_FREE;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

int comm_wait(struct comm_work *w, char *err, size_t errlen)
{
	if (!w)
		return util_fail(err, errlen, "comm_wait: no work handle");
	struct comm *c = w->c;
	pthread_mutex_lock(&c->mu);
	if (w == &c->bad || w->state == W_FREE) {
		if (w != &c->bad)
			set_failed(c, NULL, "comm_wait on a handle already waited for (a bug in the caller)");
		util_fail(err, errlen, "%s", c->fail_msg);
		pthread_mutex_unlock(&c->mu);
		return -1;
	}
	if (w->state == W_ISSUED) {
		pthread_mutex_unlock(&c->mu);
		char why[ERRLEN];
		int rc = c->ops->wait(c->impl, w->slot, c->timeout_s, why, sizeof why);
		pthread_mutex_lock(&c->mu);
		if (rc != 0)
			set_failed(c, &w->req, why);
		w->state = rc != 0 ? W_FAILED : W_DONE;
	}
	while (w->state == W_QUEUED || w->state == W_RUNNING) {
		struct comm_work *r = c->running;
		if (r && util_now() > r->t0 + c->timeout_s + GRACE_S) {
			char why[128];
			snprintf(why, sizeof why, "the engine did not return within the timeout of %g s", c->timeout_s);
			set_failed(c, &r->req, why);
			util_fail(err, errlen, "%s", c->fail_msg);
			pthread_mutex_unlock(&c->mu); /* the slot stays taken: the engine may still write it */
			return -1;
		}
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += 200 * 1000 * 1000;
		if (t.tv_nsec >= 1000000000)
			t.tv_sec++, t.tv_nsec -= 1000000000;
		pthread_cond_timedwait(&c->done, &c->mu, &t);
	}
	int rc = w->state == W_DONE ? 0 : -1;
	if (rc != 0)
		util_fail(err, errlen, "%s", c->fail_msg);
	w->state = W_FREE;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void comm_close(struct comm *c)
{
	if (!c)
		return;
	if (c->threaded) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	} else {
		c->ops->close(c->impl);
	}
	free_comm(c);
}
