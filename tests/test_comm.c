/* test_comm.c: the rendezvous store and the communicators, across real
 * processes.  A job forks one child per rank; each child talks to a store
 * server that the parent drives from its poll loop over socket pairs (or
 * TCP), runs its part and exits non-zero if one of its checks failed.
 * Values are small integers in floats, so every sum is exact and compared
 * with ==.  A job is killed after a limit, so a hang is a failure, not a
 * stuck CI.  Also how a job's messages name a set of its ranks.  Built
 * with -DNCCL_LINK_CHECK this file is instead a program that only
 * references comm_open_nccl, to prove the NCCL engine links.
 */
#include "runtime/comm.h"
#include "runtime/store.h"

#ifdef NCCL_LINK_CHECK
#include <stddef.h>

int main(void)
{
	struct comm *(*volatile open)(struct store_client *, int, int, int, void *, double, char *, size_t) =
		comm_open_nccl;
	return open == NULL;
}
#else
#include "runtime/util.h"
#include "tests/check.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORLD 8

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
	struct timespec t = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	nanosleep(&t, NULL);
}

typedef void (*rank_fn)(int rank, int world, struct store_client *st, void *arg);

struct job {
	int world;
	rank_fn fn;
	void *arg;
	double limit_s; /* kill the ranks after this */
	int tcp;        /* ranks connect over TCP instead of socket pairs */
};

static void child(const struct job *j, int rank, struct store_client *st)
{
	check_failed_now = 0;
	if (!st) {
		fprintf(stderr, "rank %d: no store client\n", rank);
		_exit(1);
	}
	j->fn(rank, j->world, st, j->arg);
	store_client_close(st);
	fflush(stdout), fflush(stderr);
	_exit(check_failed_now ? 1 : 0);
}

/* Run a job; returns how many ranks failed (exit status or killed). */
static int run_job(const struct job *j)
{
	char err[512];
	pid_t pid[MAX_WORLD];
	int done[MAX_WORLD] = { 0 }, bad = 0, port = 0;
	struct store_server *s = store_server_new();
	if (j->tcp) {
		port = store_server_listen_tcp(s, "127.0.0.1", 0, err, sizeof err);
		if (port <= 0) {
			fprintf(stderr, "%s\n", err);
			store_server_free(s);
			return j->world;
		}
	}
	fflush(stdout), fflush(stderr);
	for (int r = 0; r < j->world; r++) {
		int sv[2] = { -1, -1 };
		if (!j->tcp && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
			perror("socketpair");
			abort();
		}
		pid[r] = fork();
		if (pid[r] == 0) {
			if (j->tcp) {
				struct store_client *st = store_client_connect_tcp("127.0.0.1", port, 5, err, sizeof err);
				if (!st)
					fprintf(stderr, "rank %d: %s\n", r, err);
				child(j, r, st);
			}
			close(sv[0]);
			child(j, r, store_client_open_fd(sv[1]));
		}
		if (!j->tcp) {
			close(sv[1]);
			store_server_add_client(s, sv[0]);
		}
	}
	double deadline = now_s() + j->limit_s;
	for (int left = j->world; left > 0;) {
		store_server_poll_once(s, 5);
		for (int r = 0; r < j->world; r++) {
			int st;
			if (done[r] || waitpid(pid[r], &st, WNOHANG) != pid[r])
				continue;
			done[r] = 1, left--;
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "rank %d of %d failed (status %d)\n", r, j->world, st);
				bad++;
			}
		}
		if (left && now_s() > deadline) {
			for (int r = 0; r < j->world; r++)
				if (!done[r]) {
					fprintf(stderr, "rank %d of %d still running after %g s: killed\n", r, j->world,
						j->limit_s);
					kill(pid[r], SIGKILL);
					waitpid(pid[r], NULL, 0);
					done[r] = 1, left--, bad++;
				}
		}
	}
	store_server_free(s);
	return bad;
}

/* ------------------------------------------------------------------ store */

static void store_ranks(int rank, int world, struct store_client *st, void *arg)
{
	char err[512], key[32], val[32];
	int64_t v = 0;
	(void)arg;
	CHECK(store_add(st, "counter", rank + 1, &v, err, sizeof err) == 0);
	CHECK(v >= rank + 1 && v <= world * (world + 1) / 2);
	snprintf(key, sizeof key, "k%d", rank);
	snprintf(val, sizeof val, "value of %d", rank);
	CHECK(store_set(st, key, val, strlen(val), err, sizeof err) == 0);
	const char *keys[MAX_WORLD];
	char names[MAX_WORLD][16];
	for (int r = 0; r < world; r++) {
		snprintf(names[r], sizeof names[r], "k%d", r);
		keys[r] = names[r];
	}
	CHECK(store_wait(st, keys, world, 5, err, sizeof err) == 0);
	for (int r = 0; r < world; r++) { /* every key is set once the wait returns */
		size_t len = 0;
		char *got = store_get(st, keys[r], &len, 0, err, sizeof err);
		snprintf(val, sizeof val, "value of %d", r);
		CHECK(got && len == strlen(val) && strcmp(got, val) == 0);
		free(got);
	}
	char *sum = store_get(st, "counter", NULL, 5, err, sizeof err); /* adds came before the sets */
	CHECK(sum && atoi(sum) == world * (world + 1) / 2);
	free(sum);
	if (rank == 0) { /* a get that blocks until another rank sets the key */
		sleep_s(0.2);
		CHECK(store_set(st, "late", "x", 1, err, sizeof err) == 0);
	} else {
		double t0 = now_s();
		char *late = store_get(st, "late", NULL, 5, err, sizeof err);
		CHECK(late && strcmp(late, "x") == 0);
		CHECK(now_s() - t0 > 0.1);
		free(late);
	}
	CHECK(store_set(st, "empty", "", 0, err, sizeof err) == 0);
}

static void test_store_across_processes(void)
{
	struct job j = { 4, store_ranks, NULL, 10, 0 };
	CHECK(run_job(&j) == 0);
}

static void test_store_tcp(void)
{
	struct job j = { 4, store_ranks, NULL, 10, 1 };
	CHECK(run_job(&j) == 0);
	char err[512];
	/* nothing listens on the port of a server just freed */
	struct store_server *s = store_server_new();
	int port = store_server_listen_tcp(s, NULL, 0, err, sizeof err);
	CHECK(port > 0);
	store_server_free(s);
	double t0 = now_s();
	struct store_client *c = store_client_connect_tcp("127.0.0.1", port, 0.3, err, sizeof err);
	CHECK(c == NULL);
	CHECK(strstr(err, "cannot connect") != NULL);
	CHECK(now_s() - t0 < 2);
}

/* An in-process server thread and one client on a socket pair. */
static struct store_server *serve_one(struct store_client **c, int *raw)
{
	char err[256];
	int sv[2];
	struct store_server *s = store_server_new();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	store_server_add_client(s, sv[0]);
	if (store_server_start(s, err, sizeof err) != 0)
		abort();
	if (c)
		*c = store_client_open_fd(sv[1]);
	if (raw)
		*raw = sv[1];
	return s;
}

static void test_store_timeout(void)
{
	char err[512];
	struct store_client *c;
	struct store_server *s = serve_one(&c, NULL);
	double t0 = now_s();
	void *v = store_get(c, "missing", NULL, 0.3, err, sizeof err);
	double dt = now_s() - t0;
	CHECK(v == NULL);
	CHECK(strstr(err, "timed out") && strstr(err, "'missing'"));
	CHECK(dt >= 0.29 && dt < 2);
	CHECK(store_set(c, "there", "1", 1, err, sizeof err) == 0);
	const char *keys[] = { "there", "absent" };
	CHECK(store_wait(c, keys, 2, 0.2, err, sizeof err) != 0);
	CHECK(strstr(err, "'absent'") && strstr(err, "1 of 2 keys missing"));
	/* the connection is still good after a timeout */
	char *there = store_get(c, "there", NULL, 1, err, sizeof err);
	CHECK(there && strcmp(there, "1") == 0);
	free(there);
	int64_t v2 = 0;
	CHECK(store_add(c, "there", 41, &v2, err, sizeof err) == 0 && v2 == 42);
	CHECK(store_set(c, "text", "abc", 3, err, sizeof err) == 0);
	CHECK(store_add(c, "text", 1, &v2, err, sizeof err) != 0 && strstr(err, "not an integer"));
	store_client_close(c);
	store_server_free(s);
}

static char logged[1024];
static void keep_log(void *ctx, const char *msg)
{
	(void)ctx;
	snprintf(logged, sizeof logged, "%s", msg);
}

static ssize_t read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)got;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static void test_store_oversized(void)
{
	char err[512];
	int fd;
	struct store_server *s = serve_one(NULL, &fd);
	store_server_set_log(s, keep_log, NULL);
	/* a header that announces 17 MiB: refused and dropped before the body */
	uint32_t big = 17u << 20;
	unsigned char hdr[4] = { (unsigned char)big, (unsigned char)(big >> 8), (unsigned char)(big >> 16),
				 (unsigned char)(big >> 24) };
	CHECK(write(fd, hdr, 4) == 4);
	unsigned char rep[512];
	CHECK(read_all(fd, rep, 4) == 4);
	size_t len = rep[0] | rep[1] << 8 | rep[2] << 16;
	CHECK(len > 1 && len < sizeof rep);
	if (len > 1 && len < sizeof rep) {
		CHECK(read_all(fd, rep, len) == (ssize_t)len);
		rep[len] = 0;
		CHECK(rep[0] == 2); /* ERROR */
		CHECK(strstr((char *)rep + 1, "over the store's limit") != NULL);
	}
	CHECK(read(fd, rep, 1) == 0); /* dropped */
	CHECK(strstr(logged, "over the store's limit") != NULL);
	for (int i = 0; i < 100 && store_server_clients(s) != 0; i++)
		sleep_s(0.01);
	CHECK(store_server_clients(s) == 0);
	close(fd);

	/* the client refuses to send what the server would refuse */
	struct store_client *c;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	store_server_add_client(s, sv[0]);
	c = store_client_open_fd(sv[1]);
	char longkey[STORE_MAX_KEY + 2];
	memset(longkey, 'k', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = 0;
	CHECK(store_set(c, longkey, "v", 1, err, sizeof err) != 0 && strstr(err, "key of 257 bytes"));
	char *huge = calloc(1, STORE_MAX_VALUE + 1);
	CHECK(store_set(c, "huge", huge, STORE_MAX_VALUE + 1, err, sizeof err) != 0 && strstr(err, "over the limit"));
	CHECK(store_set(c, "max", huge, STORE_MAX_VALUE, err, sizeof err) == 0); /* the limit itself is fine */
	size_t got = 0;
	void *back = store_get(c, "max", &got, 5, err, sizeof err);
	CHECK(back && got == STORE_MAX_VALUE);
	free(back), free(huge);
	store_client_close(c);
	store_server_free(s);
}

static void test_store_client_death(void)
{
	char err[512];
	struct store_client *c;
	struct store_server *s = serve_one(&c, NULL);
	int sv[2][2];
	pid_t pid[2];
	fflush(stdout), fflush(stderr);
	for (int k = 0; k < 2; k++) {
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[k]) == 0);
		pid[k] = fork();
		if (pid[k] == 0) {
			close(sv[k][0]);
			if (k == 0) { /* half a request, then gone */
				unsigned char part[6] = { 40, 0, 0, 0, 'S', 3 };
				ssize_t w = write(sv[k][1], part, sizeof part);
				_exit(w == (ssize_t)sizeof part ? 0 : 1);
			}
			struct store_client *cc = store_client_open_fd(sv[k][1]); /* parked in a get, then killed */
			store_get(cc, "never", NULL, 30, err, sizeof err);
			_exit(0);
		}
		close(sv[k][1]);
		store_server_add_client(s, sv[k][0]);
	}
	waitpid(pid[0], NULL, 0);
	sleep_s(0.1);
	kill(pid[1], SIGKILL);
	waitpid(pid[1], NULL, 0);
	for (int i = 0; i < 200 && store_server_clients(s) != 1; i++)
		sleep_s(0.01);
	CHECK(store_server_clients(s) == 1);
	CHECK(store_set(c, "never", "now", 3, err, sizeof err) == 0); /* would have answered the dead client */
	char *v = store_get(c, "never", NULL, 1, err, sizeof err);
	CHECK(v && strcmp(v, "now") == 0);
	free(v);
	store_client_close(c);
	store_server_free(s);

	/* a client whose server dies gets an error, not a hang */
	s = serve_one(&c, NULL);
	store_server_free(s);
	double t0 = now_s();
	CHECK(store_get(c, "x", NULL, 5, err, sizeof err) == NULL);
	CHECK(strstr(err, "closed the connection") || strstr(err, "gone"));
	CHECK(now_s() - t0 < 1);
	store_client_close(c);
}

/* ------------------------------------------------------------------- comm */

static void test_comm_single(void)
{
	char err[512];
	struct comm *c = comm_open_single();
	CHECK(c && comm_rank(c) == 0 && comm_world(c) == 1);
	CHECK_STR(comm_name(c), "single");
	float a[4] = { 1, 2, 3, 4 }, b[4] = { 0 };
	CHECK(comm_wait(comm_all_reduce(c, a, 4, COMM_AVG), err, sizeof err) == 0);
	CHECK(a[0] == 1 && a[3] == 4);
	CHECK(comm_wait(comm_reduce_scatter(c, a, b, 4, COMM_SUM), err, sizeof err) == 0);
	CHECK(b[0] == 1 && b[3] == 4);
	memset(b, 0, sizeof b);
	CHECK(comm_wait(comm_all_gather(c, a, b, 4), err, sizeof err) == 0);
	CHECK(b[1] == 2 && b[2] == 3);
	CHECK(comm_wait(comm_broadcast(c, a, 4, 0), err, sizeof err) == 0);
	double d[2] = { 1.5, 2.5 };
	CHECK(comm_wait(comm_all_reduce_f64(c, d, 2, COMM_SUM), err, sizeof err) == 0);
	CHECK(d[0] == 1.5 && d[1] == 2.5);
	CHECK(comm_barrier(c, err, sizeof err) == 0);
	/* 64 in flight is the limit; waiting frees the handles */
	struct comm_work *w[COMM_MAX_INFLIGHT];
	for (int i = 0; i < COMM_MAX_INFLIGHT; i++)
		w[i] = comm_all_reduce(c, a, 4, COMM_SUM);
	for (int i = 0; i < COMM_MAX_INFLIGHT; i++)
		CHECK(comm_wait(w[i], err, sizeof err) == 0);
	CHECK(comm_wait(comm_all_reduce(c, a, 0, COMM_SUM), err, sizeof err) == 0);
	/* a bad argument fails the communicator for good */
	CHECK(comm_wait(comm_broadcast(c, a, 4, 1), err, sizeof err) != 0);
	CHECK(strstr(err, "root rank out of range") != NULL);
	CHECK(comm_wait(comm_all_reduce(c, a, 4, COMM_SUM), err, sizeof err) != 0);
	CHECK(strstr(err, "root rank out of range") != NULL);
	comm_close(c);
}

struct gloo_arg {
	double timeout_s;
	int64_t big;  /* elements of the large all-reduce, 0 for none */
	int die_rank; /* this rank exits after open (-1: none) */
	double stall; /* rank 1 sleeps this long before its collective */
};

static struct comm *open_gloo(int rank, int world, struct store_client *st, double timeout_s)
{
	char err[1024];
	struct comm *c = comm_open_gloo(st, rank, world, NULL, timeout_s, err, sizeof err);
	if (!c)
		fprintf(stderr, "rank %d: %s\n", rank, err);
	CHECK(c != NULL);
	return c;
}

static void gloo_collectives(int rank, int world, struct store_client *st, void *argp)
{
	const struct gloo_arg *arg = argp;
	char err[1024];
	struct comm *c = open_gloo(rank, world, st, arg->timeout_s);
	if (!c)
		return;
	CHECK(comm_rank(c) == rank && comm_world(c) == world);
	const int n = 1000;
	const float tri = (float)(world * (world + 1) / 2); /* sum over ranks of rank + 1 */
	float *x = malloc(sizeof(float) * (size_t)(world * n)), *y = malloc(sizeof(float) * (size_t)(world * n));

	for (int i = 0; i < n; i++)
		x[i] = (float)((rank + 1) * (i % 7 + 1));
	int rc = comm_wait(comm_all_reduce(c, x, n, COMM_SUM), err, sizeof err);
	CHECK(rc == 0);
	if (rc)
		fprintf(stderr, "rank %d: %s\n", rank, err);
	int ok = 1;
	for (int i = 0; i < n; i++)
		ok &= x[i] == tri * (float)(i % 7 + 1);
	CHECK(ok);

	for (int i = 0; i < n; i++)
		x[i] = (float)((rank + 1) * (i % 7 + 1));
	CHECK(comm_wait(comm_all_reduce(c, x, n, COMM_AVG), err, sizeof err) == 0);
	ok = 1;
	for (int i = 0; i < n; i++)
		ok &= x[i] == tri * (float)(i % 7 + 1) / (float)world;
	CHECK(ok);

	/* reduce-scatter: block `rank` of the sum, at sizes that shrink and grow
	 * again (the staging buffer is kept at the largest), the input left as
	 * it was */
	const int rs_n[] = { n / 2, n, 7, n };
	for (int k = 0; k < 4; k++)
		for (int op = COMM_SUM; op <= COMM_AVG; op++) {
			int m = rs_n[k];
			for (int i = 0; i < world * m; i++)
				x[i] = (float)((rank + 1) * (i % 5) + i / m);
			memset(y, 0, sizeof(float) * (size_t)n);
			CHECK(comm_wait(comm_reduce_scatter(c, x, y, m, (enum comm_op)op), err, sizeof err) == 0);
			ok = 1;
			for (int i = 0; i < m; i++) {
				int j = rank * m + i;
				float want = tri * (float)(j % 5) + (float)(world * (j / m));
				ok &= y[i] == (op == COMM_AVG ? want / (float)world : want);
			}
			for (int i = m; i < n; i++)
				ok &= y[i] == 0.0f;
			for (int i = 0; i < world * m; i++)
				ok &= x[i] == (float)((rank + 1) * (i % 5) + i / m);
			CHECK(ok);
		}

	for (int i = 0; i < n; i++)
		x[i] = (float)(rank * 100000 + i);
	CHECK(comm_wait(comm_all_gather(c, x, y, n), err, sizeof err) == 0);
	ok = 1;
	for (int r = 0; r < world; r++)
		for (int i = 0; i < n; i++)
			ok &= y[r * n + i] == (float)(r * 100000 + i);
	CHECK(ok);

	for (int i = 0; i < n; i++)
		x[i] = rank == 1 ? (float)(42 + i) : -1.0f;
	CHECK(comm_wait(comm_broadcast(c, x, n, 1), err, sizeof err) == 0);
	ok = 1;
	for (int i = 0; i < n; i++)
		ok &= x[i] == (float)(42 + i);
	CHECK(ok);

	CHECK(comm_barrier(c, err, sizeof err) == 0);

	/* several in flight, waited in order; each its own size */
	enum { K = 6 };
	float *b[K];
	struct comm_work *w[K];
	for (int k = 0; k < K; k++) {
		b[k] = malloc(sizeof(float) * (size_t)(n + k * 300));
		for (int i = 0; i < n + k * 300; i++)
			b[k][i] = (float)((rank + 1) * (k + 1));
		w[k] = comm_all_reduce(c, b[k], n + k * 300, COMM_SUM);
	}
	for (int k = 0; k < K; k++) {
		CHECK(comm_wait(w[k], err, sizeof err) == 0);
		ok = 1;
		for (int i = 0; i < n + k * 300; i++)
			ok &= b[k][i] == tri * (float)(k + 1);
		CHECK(ok);
		free(b[k]);
	}

	double d[3] = { (rank + 1) * 1e10 + 0.5, rank + 0.25, -(double)rank };
	CHECK(comm_wait(comm_all_reduce_f64(c, d, 3, COMM_SUM), err, sizeof err) == 0);
	CHECK(d[0] == tri * 1e10 + 0.5 * world);
	CHECK(d[1] == world * (world - 1) / 2 + 0.25 * world);
	d[2] = -(double)rank;
	CHECK(comm_wait(comm_all_reduce_f64(c, d + 2, 1, COMM_AVG), err, sizeof err) == 0);
	CHECK(d[2] == -(double)(world * (world - 1) / 2) / world);

	if (arg->big) {
		int64_t m = arg->big;
		float *z = malloc(sizeof(float) * (size_t)m);
		double best = 1e9;
		for (int rep = 0; rep < 2; rep++) {
			for (int64_t i = 0; i < m; i++)
				z[i] = (float)((rank + 1) * (i % 13));
			double t0 = now_s();
			CHECK(comm_wait(comm_all_reduce(c, z, m, COMM_SUM), err, sizeof err) == 0);
			double dt = now_s() - t0;
			best = dt < best ? dt : best;
			if (getenv("TEST_COMM_VERBOSE"))
				fprintf(stderr, "rank %d rep %d: %.1f ms\n", rank, rep, dt * 1e3);
			ok = 1;
			for (int64_t i = 0; i < m; i++)
				ok &= z[i] == tri * (float)(i % 13);
			CHECK(ok);
		}
		if (rank == 0)
			printf("# gloo all_reduce of %lld floats at world %d: %.1f ms (%.2f GB/s algorithm bandwidth)\n",
			       (long long)m, world, best * 1e3, (double)m * 4 / best / 1e9);
		free(z);
	}
	free(x), free(y);
	comm_close(c);
}

static void test_gloo_world2(void)
{
	struct gloo_arg a = { 10, 8 << 20, -1, 0 };
	struct job j = { 2, gloo_collectives, &a, 30, 0 };
	CHECK(run_job(&j) == 0);
}

static void test_gloo_world4(void)
{
	struct gloo_arg a = { 10, 1 << 20, -1, 0 };
	struct job j = { 4, gloo_collectives, &a, 30, 0 };
	CHECK(run_job(&j) == 0);
}

static void test_gloo_world3_tcp_store(void)
{
	struct gloo_arg a = { 10, 0, -1, 0 }; /* not a power of two */
	struct job j = { 3, gloo_collectives, &a, 30, 1 };
	CHECK(run_job(&j) == 0);
}

/* One rank dies (or stalls) after joining; the others must get an error in
 * bounded time, and every later collective must fail at once. */
static void gloo_failure(int rank, int world, struct store_client *st, void *argp)
{
	const struct gloo_arg *arg = argp;
	char err[1024];
	struct comm *c = open_gloo(rank, world, st, arg->timeout_s);
	if (!c)
		return;
	/* every rank has finished opening before one dies: its death must hit
	 * a collective, not a peer's connection setup */
	char key[32], serr[256];
	const char *keys[16];
	char names[16][32];
	snprintf(key, sizeof key, "opened/%d", rank);
	CHECK(store_set(st, key, "1", 1, serr, sizeof serr) == 0);
	for (int r = 0; r < world && r < 16; r++) {
		snprintf(names[r], sizeof names[r], "opened/%d", r);
		keys[r] = names[r];
	}
	CHECK(store_wait(st, keys, world, 10, serr, sizeof serr) == 0);
	if (rank == arg->die_rank) {
		fflush(stderr);
		_exit(0); /* no goodbye: sockets close with the process */
	}
	if (rank == 1 && arg->stall > 0)
		sleep_s(arg->stall);
	float x[256];
	for (int i = 0; i < 256; i++)
		x[i] = 1;
	double t0 = now_s();
	int rc = comm_wait(comm_all_reduce(c, x, 256, COMM_SUM), err, sizeof err);
	double dt = now_s() - t0;
	CHECK(rc != 0);
	CHECK(dt < arg->timeout_s + 1.5);
	CHECK(strstr(err, "all_reduce of 256 floats") != NULL);
	CHECK(strstr(err, "gloo") != NULL);
	char again[1024];
	t0 = now_s();
	CHECK(comm_wait(comm_broadcast(c, x, 256, 0), again, sizeof again) != 0);
	CHECK(now_s() - t0 < 0.5);
	CHECK(strcmp(again, err) == 0); /* the first error, again */
	if (rank == 0 && getenv("TEST_COMM_VERBOSE"))
		fprintf(stderr, "rank %d after %.2f s: %s\n", rank, dt, err);
	comm_close(c);
}

static void test_gloo_rank_dies(void)
{
	struct gloo_arg a = { 3, 0, 2, 0 };
	struct job j = { 4, gloo_failure, &a, 15, 0 };
	CHECK(run_job(&j) == 0);
}

static void test_gloo_rank_stalls(void)
{
	struct gloo_arg a = { 1, 0, -1, 2.5 };
	struct job j = { 2, gloo_failure, &a, 15, 0 };
	CHECK(run_job(&j) == 0);
}

static void gloo_bad_join(int rank, int world, struct store_client *st, void *argp)
{
	char err[1024];
	(void)argp;
	if (rank == 1)
		return; /* never joins */
	double t0 = now_s();
	struct comm *c = comm_open_gloo(st, rank, world, NULL, 1, err, sizeof err);
	CHECK(c == NULL);
	CHECK(now_s() - t0 < 3);
	CHECK(strstr(err, "connectFullMesh") != NULL);
	if (c)
		comm_close(c);
}

static void test_gloo_open_timeout(void)
{
	struct job j = { 2, gloo_bad_join, NULL, 15, 0 };
	CHECK(run_job(&j) == 0);
}

/* which ranks a job's message names (util_ranks), from a string of 0s and 1s */
static const char *ranks_of(const char *bits)
{
	static char buf[128];
	bool in[MAX_WORLD * 2];
	int n = (int)strlen(bits);
	for (int r = 0; r < n; r++)
		in[r] = bits[r] == '1';
	return util_ranks(in, n, buf, sizeof buf);
}

static void test_rank_names(void)
{
	CHECK_STR(ranks_of("01"), "rank 1");
	CHECK_STR(ranks_of("11"), "ranks 0 and 1");
	CHECK_STR(ranks_of("0101"), "ranks 1 and 3");
	CHECK_STR(ranks_of("1110"), "ranks 0-2");
	CHECK_STR(ranks_of("1101011"), "ranks 0, 1, 3, 5 and 6");
	CHECK_STR(ranks_of("0111110111"), "ranks 1-5 and 7-9");
}

int main(void)
{
	double t0 = now_s();
	RUN(test_rank_names);
	RUN(test_store_across_processes);
	RUN(test_store_tcp);
	RUN(test_store_timeout);
	RUN(test_store_oversized);
	RUN(test_store_client_death);
	RUN(test_comm_single);
	RUN(test_gloo_world2);
	RUN(test_gloo_world4);
	RUN(test_gloo_world3_tcp_store);
	RUN(test_gloo_rank_dies);
	RUN(test_gloo_rank_stalls);
	RUN(test_gloo_open_timeout);
	printf("# test_comm: %.1f s\n", now_s() - t0);
	return check_done();
}
#endif
