/* comm_gloo.cc: Gloo behind a C API (see comm_gloo.h); the only file that
 * names Gloo.  Rendezvous goes through our store (a gloo::rendezvous::Store
 * that forwards to store_set/get/wait under a per-communicator prefix); the
 * transport is Gloo's TCP.  All-reduce, all-gather, broadcast and barrier
 * use Gloo's option-style collectives with a fresh tag per call and the
 * communicator's timeout.  Gloo has no option-style reduce-scatter: it is an
 * all-to-all (rank r receives every rank's r-th chunk, the bytes a ring
 * reduce-scatter moves) into one staging buffer, whose chunks are then summed
 * in rank order.  The buffer is as large as the largest input so far, so a
 * sharded model's staging is one unit, not several: Gloo's halving-doubling
 * reduce-scatter, used before, kept three copies of every distinct unit size
 * (the input and two receive buffers), 384 MiB per rank for a 50M-parameter
 * MLP of four units, which outgrew the shards themselves.
 * Gloo has no mean: AVG is a sum divided by the world size.
 * Does not: let an exception out (each becomes -1 and a message naming the
 * Gloo call, this file's line and a hint), or run from more than one thread.
 * Invariant: every rank issues the same calls in the same order, so tags
 * and the algorithms' slots agree across ranks without talking.
 */
#include "runtime/comm_gloo.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "runtime/comm.h"
#include "runtime/store.h"
}


/* Remember which Gloo call runs and where, for the error message; used on
 * the line of the call itself. */
#define AT(name) (call = (name), line = __LINE__)

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Gloo's rendezvous keys, kept in our store. */
class StoreShim : public gloo::rendezvous::Store {
public:
	StoreShim(struct store_client *c, const std::string &prefix, double timeout_s)
		: c_(c), prefix_(prefix), timeout_s_(timeout_s)
	{
	}

	void set(const std::string &key, const std::vector<char> &data) override
	{
		char err[512];
		if (store_set(c_, (prefix_ + key).c_str(), data.data(), data.size(), err, sizeof err) != 0)
			throw gloo::IoException(err);
	}

	std::vector<char> get(const std::string &key) override
	{
		char err[512];
		size_t len = 0;
		char *v = (char *)store_get(c_, (prefix_ + key).c_str(), &len, timeout_s_, err, sizeof err);
		if (!v)
			throw gloo::IoException(err);
		std::vector<char> out(v, v + len);
		free(v);
		return out;
	}

	void wait(const std::vector<std::string> &keys) override
	{
		wait(keys, std::chrono::milliseconds((long long)(timeout_s_ * 1e3)));
	}

	void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override
	{
		std::vector<std::string> full;
		std::vector<const char *> ptrs;
		for (const auto &k : keys)
			full.push_back(prefix_ + k);
		for (const auto &k : full)
			ptrs.push_back(k.c_str());
		char err[512];
		double t = timeout.count() > 0 ? timeout.count() / 1e3 : timeout_s_;
		if (store_wait(c_, ptrs.data(), (int)ptrs.size(), t, err, sizeof err) != 0)
			throw gloo::IoException(err);
	}

private:
	struct store_client *c_;
	std::string prefix_;
	double timeout_s_;
};

struct comm_gloo {
	std::shared_ptr<gloo::transport::Device> dev;
	std::shared_ptr<gloo::rendezvous::Context> ctx;
	std::chrono::milliseconds timeout;
	int rank, world;
	uint32_t tag;
	std::vector<float> stage; /* reduce-scatter's all-to-all lands here */
};

struct comm_gloo *comm_gloo_open(struct store_client *st, const char *prefix, int rank, int world,
				 const char *host, double timeout_s, char *err, size_t errlen)
{
	comm_gloo *g = new (std::nothrow) comm_gloo();
	if (!g) {
		fail(err, errlen, "gloo: out of memory");
		return NULL;
	}
	g->rank = rank, g->world = world;
	g->timeout = std::chrono::milliseconds((long long)(timeout_s * 1e3));
	const char *call = "?", *hint = "is the host address one of this machine's?";
	int line = 0;
	try {
		gloo::transport::tcp::attr attr;
		attr.hostname = host ? host : STORE_DEFAULT_HOST;
		AT("gloo::transport::tcp::CreateDevice"), g->dev = gloo::transport::tcp::CreateDevice(attr);
		hint = COMM_HINT_PEER;
		g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
		g->ctx->setTimeout(g->timeout);
		StoreShim store(st, std::string(prefix) + "main/", timeout_s);
		AT("gloo::rendezvous::Context::connectFullMesh"), g->ctx->connectFullMesh(store, g->dev);
	} catch (const std::exception &e) {
		fail(err, errlen, "%s:%d: %s (rank %d of %d, host %s) failed: %s (hint: %s)", __FILE__, line, call, rank,
		     world, host ? host : STORE_DEFAULT_HOST, e.what(), hint);
		delete g;
		return NULL;
	}
	return g;
}

template <typename T> static void divide(T *x, int64_t n, int world)
{
	for (int64_t i = 0; i < n; i++)
		x[i] /= (T)world;
}

template <typename T> static void all_reduce(comm_gloo *g, T *buf, int64_t n)
{
	gloo::AllreduceOptions o(g->ctx);
	o.setOutput(buf, (size_t)n);
	o.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<T>));
	o.setTag(g->tag++);
	o.setTimeout(g->timeout);
	gloo::allreduce(o);
}

int comm_gloo_run(struct comm_gloo *g, const struct comm_req *r, char *err, size_t errlen)
{
	const char *call = "?";
	int line = 0;
	int64_t n = r->n;
	try {
		switch (r->kind) {
		case COMM_ALL_REDUCE:
			if (r->dtype == COMM_F64) {
				AT("gloo::allreduce"), all_reduce(g, (double *)r->out, n);
				if (r->op == COMM_AVG)
					divide((double *)r->out, n, g->world);
			} else {
				AT("gloo::allreduce"), all_reduce(g, (float *)r->out, n);
				if (r->op == COMM_AVG)
					divide((float *)r->out, n, g->world);
			}
			break;
		case COMM_REDUCE_SCATTER: {
			size_t total = (size_t)(g->world * n);
			if (g->stage.size() < total)
				AT("std::vector::resize"), g->stage.resize(total);
			gloo::AlltoallOptions o(g->ctx);
			o.setInput(const_cast<float *>((const float *)r->in), total);
			o.setOutput(g->stage.data(), total);
			o.setTag(g->tag++);
			o.setTimeout(g->timeout);
			AT("gloo::alltoall"), gloo::alltoall(o);
			float *out = (float *)r->out;
			const float *chunk = g->stage.data();
			memcpy(out, chunk, (size_t)n * sizeof(float));
			for (int k = 1; k < g->world; k++) {
				chunk += n;
				for (int64_t i = 0; i < n; i++)
					out[i] += chunk[i];
			}
			if (r->op == COMM_AVG)
				divide(out, n, g->world);
			break;
		}
		case COMM_ALL_GATHER: {
			gloo::AllgatherOptions o(g->ctx);
			o.setInput(const_cast<float *>((const float *)r->in), (size_t)n);
			o.setOutput((float *)r->out, (size_t)(g->world * n));
			o.setTag(g->tag++);
			o.setTimeout(g->timeout);
			AT("gloo::allgather"), gloo::allgather(o);
			break;
		}
		case COMM_BROADCAST: {
			gloo::BroadcastOptions o(g->ctx);
			o.setOutput((float *)r->out, (size_t)n);
			o.setRoot(r->root);
			o.setTag(g->tag++);
			o.setTimeout(g->timeout);
			AT("gloo::broadcast"), gloo::broadcast(o);
			break;
		}
		case COMM_BARRIER: {
			gloo::BarrierOptions o(g->ctx);
			o.setTag(g->tag++);
			o.setTimeout(g->timeout);
			AT("gloo::barrier"), gloo::barrier(o);
			break;
		}
		}
	} catch (const std::exception &e) {
		return fail(err, errlen, "%s:%d: %s failed: %s (hint: %s)", __FILE__, line, call, e.what(), COMM_HINT_PEER);
	}
	return 0;
}

void comm_gloo_close(struct comm_gloo *g)
{
	try {
		g->ctx.reset();
		g->dev.reset();
	} catch (const std::exception &e) {
		fprintf(stderr, "%s:%d: closing the Gloo communicator: %s\n", __FILE__, __LINE__, e.what());
	}
	delete g;
}
