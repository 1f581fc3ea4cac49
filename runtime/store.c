/* store.c: the rendezvous store's server and client (see store.h).
 * Wire format, both directions: a 4-byte little-endian body length, then the
 * body.  Requests start with an op byte:
 *   'S' key value        'G' timeout_ms key        'A' delta key
 *   'W' timeout_ms nkeys key...
 * where a key is a 2-byte length and its bytes, timeout_ms 4 bytes and delta
 * 8 bytes (two's complement), all little-endian; a set's value is the rest
 * of the body.  Replies are a status byte (OK, TIMEOUT, ERROR) and a payload:
 * the value for a get, 8 bytes for an add, a message for TIMEOUT and ERROR.
 * The server is one poll() loop with non-blocking I/O and per-client
 * buffers, so a slow or huge client never stalls the others; a get or wait
 * that cannot be answered yet parks its client until a set, an add or its
 * deadline.  A client has one request in flight at a time (under a mutex).
 * One file past 1000 lines on purpose: both ends of one protocol, so the
 * encoder and the parser of each message read side by side.
 * Does not: hash keys (a job has tens of them; a linear scan is enough).
 * Invariant: a client's bytes are parsed only within the length its header
 * declared, and that length is checked against STORE_MAX_VALUE first.
 */
#include "runtime/store.h"
#include "runtime/util.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (STORE_MAX_VALUE + 4096u) /* the largest body: a set of the largest value */
#define REPLY_GRACE_MS 5000                 /* how long past its own deadline a client waits for the reply */

enum { ST_OK, ST_TIMEOUT, ST_ERROR };

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A cursor over one request body; every read checks the bytes left. */
struct rd {
	const uint8_t *p;
	size_t left;
};

static int rd_u16(struct rd *r, uint32_t *v)
{
	if (r->left < 2)
		return -1;
	*v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8;
	r->p += 2, r->left -= 2;
	return 0;
}

static int rd_u32(struct rd *r, uint32_t *v)
{
	if (r->left < 4)
		return -1;
	*v = get32(r->p);
	r->p += 4, r->left -= 4;
	return 0;
}

/* A key: 1..STORE_MAX_KEY bytes, no NUL, copied out NUL-terminated. */
static int rd_key(struct rd *r, char key[STORE_MAX_KEY + 1])
{
	uint32_t n;
	if (rd_u16(r, &n) || n == 0 || n > STORE_MAX_KEY || n > r->left || memchr(r->p, 0, n))
		return -1;
	memcpy(key, r->p, n);
	key[n] = 0;
	r->p += n, r->left -= n;
	return 0;
}

/* ---------------------------------------------------------------- server */

struct kv {
	char *key;
	uint8_t *val;
	size_t len;
};

struct client {
	int fd;
	int dead;
	uint8_t *in;         /* received bytes not yet handled: whole or partial frames */
	size_t in_len, in_cap;
	uint8_t *out;        /* reply bytes not yet sent, from out_off */
	size_t out_len, out_off, out_cap;
	uint8_t *parked;     /* body of a get or wait that waits for keys, or NULL */
	size_t parked_len;
	int64_t deadline_ms; /* of the parked request */
};

struct store_server {
	pthread_mutex_t mu;  /* everything below; poll() runs outside it */
	struct client **cl;
	int ncl, capcl;
	struct kv *kv;
	int nkv, capkv;
	int listen_fd;
	int wake[2];         /* a byte here interrupts poll() after add_client or stop */
	pthread_t thread;
	int running, stop;
	void (*log)(void *ctx, const char *msg);
	void *log_ctx;
};

static void log_stderr(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "store: %s\n", msg);
}

struct store_server *store_server_new(void)
{
	struct store_server *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	if (pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	s->listen_fd = -1;
	s->log = log_stderr;
	return s;
}

void store_server_set_log(struct store_server *s, void (*log)(void *ctx, const char *msg), void *ctx)
{
	pthread_mutex_lock(&s->mu);
	s->log = log ? log : log_stderr;
	s->log_ctx = ctx;
	pthread_mutex_unlock(&s->mu);
}

static void say(struct store_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct store_server *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	s->log(s->log_ctx, msg);
}

static void poke(struct store_server *s)
{
	char b = 1;
	ssize_t r = write(s->wake[1], &b, 1);
	(void)r; /* a full pipe already wakes poll() */
}

int store_server_add_client(struct store_server *s, int fd)
{
	struct client *c = calloc(1, sizeof *c);
	if (!c)
		return -1;
	c->fd = fd;
	pthread_mutex_lock(&s->mu);
	if (s->ncl == s->capcl) {
		int cap = s->capcl ? 2 * s->capcl : 16;
		struct client **n = realloc(s->cl, (size_t)cap * sizeof *n);
		if (!n) {
			pthread_mutex_unlock(&s->mu);
			free(c);
			return -1;
		}
		s->cl = n, s->capcl = cap;
	}
	s->cl[s->ncl++] = c;
	pthread_mutex_unlock(&s->mu);
	poke(s);
	return 0;
}

int store_server_clients(struct store_server *s)
{
	pthread_mutex_lock(&s->mu);
	int n = 0;
	for (int i = 0; i < s->ncl; i++)
		n += !s->cl[i]->dead;
	pthread_mutex_unlock(&s->mu);
	return n;
}

static struct kv *find(struct store_server *s, const char *key)
{
	for (int i = 0; i < s->nkv; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return &s->kv[i];
	return NULL;
}

/* Set key to a copy of val; -1 when out of memory. */
static int put(struct store_server *s, const char *key, const void *val, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy)
		return -1;
	memcpy(copy, val, len);
	struct kv *e = find(s, key);
	if (!e) {
		if (s->nkv == s->capkv) {
			int cap = s->capkv ? 2 * s->capkv : 64;
			struct kv *n = realloc(s->kv, (size_t)cap * sizeof *n);
			if (!n) {
				free(copy);
				return -1;
			}
			s->kv = n, s->capkv = cap;
		}
		char *k = strdup(key);
		if (!k) {
			free(copy);
			return -1;
		}
		e = &s->kv[s->nkv++];
		e->key = k, e->val = NULL;
	}
	free(e->val);
	e->val = copy, e->len = len;
	return 0;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 4096;
	while (n < need)
		n *= 2;
	uint8_t *p = realloc(*buf, n);
	if (!p)
		return -1;
	*buf = p, *cap = n;
	return 0;
}

static void drop(struct client *c)
{
	if (c->dead)
		return;
	close(c->fd);
	c->dead = 1;
	free(c->parked);
	c->parked = NULL;
}

/* Send what the socket takes now; the rest waits for POLLOUT. */
static void flush(struct client *c)
{
	while (!c->dead && c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			c->out_off += (size_t)w;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			return;
		} else {
			drop(c); /* the peer is gone; a read will not tell us more */
			return;
		}
	}
	c->out_off = c->out_len = 0;
}

static void reply(struct client *c, int status, const void *payload, size_t len)
{
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (reserve(&c->out, &c->out_cap, c->out_len + 5 + len) != 0) {
		drop(c);
		return;
	}
	uint8_t *p = c->out + c->out_len;
	put32(p, (uint32_t)(1 + len));
	p[4] = (uint8_t)status;
	if (len)
		memcpy(p + 5, payload, len);
	c->out_len += 5 + len;
	flush(c);
}

static void reply_msg(struct client *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_msg(struct client *c, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	reply(c, status, msg, n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

/* Refuse a request the protocol does not allow: answer, log, drop. */
static void refuse(struct store_server *s, struct client *c, const char *why)
{
	reply_msg(c, ST_ERROR, "%s", why);
	say(s, "dropping client (fd %d): %s", c->fd, why);
	drop(c);
}

/* Answer a get or wait if its keys are there, or time it out at
 * now >= deadline.  Returns 1 when answered. */
static int try_answer(struct store_server *s, struct client *c, const uint8_t *body, size_t len, int64_t deadline,
		      int64_t now)
{
	struct rd r = { body + 1, len - 1 };
	char key[STORE_MAX_KEY + 1];
	uint32_t ms = 0, nkeys = 0;
	rd_u32(&r, &ms); /* validated when the request came in */
	if (body[0] == 'G') {
		rd_key(&r, key);
		struct kv *e = find(s, key);
		if (e) {
			reply(c, ST_OK, e->val, e->len);
			return 1;
		}
		if (now >= deadline) {
			reply_msg(c, ST_TIMEOUT, "timed out after %.3g s waiting for key '%s'", ms / 1e3, key);
			return 1;
		}
		return 0;
	}
	rd_u16(&r, &nkeys);
	uint32_t missing = 0;
	char first[STORE_MAX_KEY + 1] = "";
	for (uint32_t i = 0; i < nkeys; i++) {
		rd_key(&r, key);
		if (!find(s, key) && missing++ == 0)
			memcpy(first, key, sizeof first);
	}
	if (missing == 0) {
		reply(c, ST_OK, NULL, 0);
		return 1;
	}
	if (now >= deadline) {
		reply_msg(c, ST_TIMEOUT, "timed out after %.3g s waiting for key '%s' (%u of %u keys missing)",
			  ms / 1e3, first, missing, nkeys);
		return 1;
	}
	return 0;
}

/* Handle one complete request.  Returns 1 when it changed a key. */
static int handle(struct store_server *s, struct client *c, const uint8_t *body, size_t len)
{
	struct rd r = { body + 1, len - 1 };
	char key[STORE_MAX_KEY + 1];
	uint32_t ms, nkeys;
	if (len == 0) {
		refuse(s, c, "empty request");
		return 0;
	}
	switch (body[0]) {
	case 'S':
		if (rd_key(&r, key)) {
			refuse(s, c, "set: malformed key (1 to 256 bytes, no NUL)");
			return 0;
		}
		if (r.left > STORE_MAX_VALUE) {
			refuse(s, c, "set: value over the store's limit of 16 MiB");
			return 0;
		}
		if (put(s, key, r.p, r.left) != 0) {
			reply_msg(c, ST_ERROR, "set '%s': the store server is out of memory", key);
			return 0;
		}
		reply(c, ST_OK, NULL, 0);
		return 1;
	case 'A': {
		if (r.left < 8) {
			refuse(s, c, "add: malformed request");
			return 0;
		}
		int64_t delta = (int64_t)get64(r.p), v = 0;
		r.p += 8, r.left -= 8;
		if (rd_key(&r, key) || r.left) {
			refuse(s, c, "add: malformed key (1 to 256 bytes, no NUL)");
			return 0;
		}
		struct kv *e = find(s, key);
		if (e) {
			char text[32], *end;
			if (e->len == 0 || e->len >= sizeof text) {
				reply_msg(c, ST_ERROR, "add '%s': the key holds a value that is not an integer", key);
				return 0;
			}
			memcpy(text, e->val, e->len);
			text[e->len] = 0;
			errno = 0;
			v = strtoll(text, &end, 10);
			if (*end || errno) {
				reply_msg(c, ST_ERROR, "add '%s': the key holds a value that is not an integer", key);
				return 0;
			}
		}
		v = (int64_t)((uint64_t)v + (uint64_t)delta);
		char text[32];
		int n = snprintf(text, sizeof text, "%lld", (long long)v);
		if (put(s, key, text, (size_t)n) != 0) {
			reply_msg(c, ST_ERROR, "add '%s': the store server is out of memory", key);
			return 0;
		}
		uint8_t out[8];
		put64(out, (uint64_t)v);
		reply(c, ST_OK, out, 8);
		return 1;
	}
	case 'G':
	case 'W':
		if (rd_u32(&r, &ms)) {
			refuse(s, c, "malformed request");
			return 0;
		}
		if (body[0] == 'G') {
			if (rd_key(&r, key) || r.left) {
				refuse(s, c, "get: malformed key (1 to 256 bytes, no NUL)");
				return 0;
			}
		} else {
			if (rd_u16(&r, &nkeys) || nkeys > STORE_MAX_WAIT_KEYS) {
				refuse(s, c, "wait: malformed request or more than 1024 keys");
				return 0;
			}
			for (uint32_t i = 0; i < nkeys; i++)
				if (rd_key(&r, key)) {
					refuse(s, c, "wait: malformed key (1 to 256 bytes, no NUL)");
					return 0;
				}
			if (r.left) {
				refuse(s, c, "wait: malformed request");
				return 0;
			}
		}
		int64_t now = now_ms();
		if (try_answer(s, c, body, len, now + ms, now))
			return 0;
		c->parked = malloc(len);
		if (!c->parked) {
			reply_msg(c, ST_ERROR, "the store server is out of memory");
			return 0;
		}
		memcpy(c->parked, body, len);
		c->parked_len = len;
		c->deadline_ms = now + ms;
		return 0;
	default:
		refuse(s, c, "unknown request");
		return 0;
	}
}

/* Handle the complete requests at the front of c's input, stopping at a
 * parked one.  Returns 1 when some key changed. */
static int handle_input(struct store_server *s, struct client *c)
{
	int changed = 0;
	size_t off = 0;
	while (!c->dead && !c->parked && c->in_len - off >= 4) {
		uint32_t len = get32(c->in + off);
		if (len > MAX_FRAME) {
			char why[128];
			snprintf(why, sizeof why, "a request of %u bytes is over the store's limit (16 MiB value)", len);
			refuse(s, c, why);
			break;
		}
		if (c->in_len - off - 4 < len)
			break;
		changed |= handle(s, c, c->in + off + 4, len);
		off += 4 + (size_t)len;
	}
	if (!c->dead && off) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	return changed;
}

static void read_client(struct store_server *s, struct client *c)
{
	for (;;) {
		size_t want = 65536;
		if (c->in_len >= 4) { /* read the whole frame at once when its size is known and allowed */
			uint32_t len = get32(c->in);
			if (len <= MAX_FRAME && c->in_len < 4 + (size_t)len)
				want = 4 + (size_t)len - c->in_len;
		}
		if (c->in_len > 2 * ((size_t)MAX_FRAME + 4)) {
			refuse(s, c, "the client sends requests without reading the replies");
			return;
		}
		if (reserve(&c->in, &c->in_cap, c->in_len + want) != 0) {
			refuse(s, c, "the store server is out of memory");
			return;
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, want, MSG_DONTWAIT);
		if (n > 0) {
			c->in_len += (size_t)n;
			if (c->in_len >= 4 && get32(c->in) > MAX_FRAME)
				return; /* handle_input refuses it */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		drop(c); /* end of stream or a reset: the worker is gone */
		return;
	}
}

static void accept_clients(struct store_server *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		pthread_mutex_unlock(&s->mu);
		store_server_add_client(s, fd);
		pthread_mutex_lock(&s->mu);
	}
}

int store_server_poll_once(struct store_server *s, int timeout_ms)
{
	pthread_mutex_lock(&s->mu);
	int n = s->ncl;
	struct pollfd *pf = calloc((size_t)n + 2, sizeof *pf);
	if (!pf) {
		pthread_mutex_unlock(&s->mu);
		return -1;
	}
	int64_t now = now_ms(), first = -1;
	for (int i = 0; i < n; i++) {
		struct client *c = s->cl[i];
		pf[i].fd = c->dead ? -1 : c->fd;
		pf[i].events = (short)(POLLIN | (c->out_off < c->out_len ? POLLOUT : 0));
		if (c->parked && (first < 0 || c->deadline_ms < first))
			first = c->deadline_ms;
	}
	pf[n].fd = s->wake[0], pf[n].events = POLLIN;
	pf[n + 1].fd = s->listen_fd, pf[n + 1].events = POLLIN;
	if (first >= 0 && (timeout_ms < 0 || first - now < timeout_ms))
		timeout_ms = first > now ? (int)(first - now) : 0;
	pthread_mutex_unlock(&s->mu);

	int r = poll(pf, (nfds_t)n + 2, timeout_ms);
	if (r < 0 && errno != EINTR) {
		free(pf);
		return -1;
	}
	pthread_mutex_lock(&s->mu);
	if (r > 0 && (pf[n].revents & POLLIN)) {
		char buf[64];
		while (read(s->wake[0], buf, sizeof buf) > 0) {
		}
	}
	if (r > 0 && s->listen_fd >= 0 && (pf[n + 1].revents & POLLIN))
		accept_clients(s);
	for (int i = 0; r > 0 && i < n; i++) {
		struct client *c = s->cl[i];
		if (c->dead)
			continue;
		if (pf[i].revents & POLLOUT)
			flush(c);
		if (!c->dead && (pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
			read_client(s, c);
	}
	free(pf);

	/* Answer until nothing changes: a set may release a parked get, whose
	 * client may have a set queued behind it, and so on. */
	int changed = 1;
	while (changed) {
		changed = 0;
		now = now_ms();
		for (int i = 0; i < s->ncl; i++) {
			struct client *c = s->cl[i];
			if (c->dead)
				continue;
			if (c->parked && try_answer(s, c, c->parked, c->parked_len, c->deadline_ms, now)) {
				free(c->parked);
				c->parked = NULL;
			}
			changed |= handle_input(s, c);
		}
	}
	int k = 0; /* forget dropped clients */
	for (int i = 0; i < s->ncl; i++) {
		if (s->cl[i]->dead) {
			free(s->cl[i]->in), free(s->cl[i]->out), free(s->cl[i]);
		} else {
			s->cl[k++] = s->cl[i];
		}
	}
	s->ncl = k;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int store_server_listen_tcp(struct store_server *s, const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	char sport[16];
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(sport, sizeof sport, "%d", port);
	if (!host)
		host = STORE_DEFAULT_HOST;
	int rc = getaddrinfo(host, sport, &hints, &ai);
	if (rc != 0)
		return util_fail(err, errlen, "store: getaddrinfo(%s) failed: %s (hint: check the host name)", host,
			    gai_strerror(rc));
	int fd = -1, e = 0;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
			e = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return util_fail(err, errlen, "store: cannot listen on %s:%d: %s (hint: is the port in use?)", host, port,
			    strerror(e));
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	int bound = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
						   : ((struct sockaddr_in *)&sa)->sin_port);
	pthread_mutex_lock(&s->mu);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	s->listen_fd = fd;
	pthread_mutex_unlock(&s->mu);
	poke(s);
	return bound;
}

static void *serve(void *arg)
{
	struct store_server *s = arg;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop || store_server_poll_once(s, 1000) != 0)
			break;
	}
	return NULL;
}

int store_server_start(struct store_server *s, char *err, size_t errlen)
{
	s->stop = 0;
	int rc = pthread_create(&s->thread, NULL, serve, s);
	if (rc != 0)
		return util_fail(err, errlen, "store: pthread_create failed: %s", strerror(rc));
	s->running = 1;
	return 0;
}

void store_server_stop(struct store_server *s)
{
	if (!s->running)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_mutex_unlock(&s->mu);
	poke(s);
	pthread_join(s->thread, NULL);
	s->running = 0;
}

void store_server_free(struct store_server *s)
{
	if (!s)
		return;
	store_server_stop(s);
	for (int i = 0; i < s->ncl; i++) {
		drop(s->cl[i]);
		free(s->cl[i]->in), free(s->cl[i]->out), free(s->cl[i]);
	}
	for (int i = 0; i < s->nkv; i++)
		free(s->kv[i].key), free(s->kv[i].val);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	close(s->wake[0]), close(s->wake[1]);
	pthread_mutex_destroy(&s->mu);
	free(s->cl), free(s->kv), free(s);
}

/* ---------------------------------------------------------------- client */

struct store_client {
	pthread_mutex_t mu; /* one request in flight */
	int fd;
	double timeout_s;
	char broken[256];   /* why the connection can no longer be trusted, or "" */
};

struct store_client *store_client_open_fd(int fd)
{
	struct store_client *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	c->fd = fd;
	c->timeout_s = 60;
	return c;
}

void store_client_set_timeout(struct store_client *c, double timeout_s)
{
	c->timeout_s = timeout_s;
}

void store_client_close(struct store_client *c)
{
	if (!c)
		return;
	close(c->fd);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Move len bytes to (dir 0) or from (dir 1) the server by deadline.
 * Returns 0, or -1 with a reason in why. */
static int io_all(struct store_client *c, int dir, void *buf, size_t len, int64_t deadline, char *why, size_t wl)
{
	uint8_t *p = buf;
	while (len) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return util_fail(why, wl, "no reply from the store server in time (is the launcher alive?)");
		struct pollfd pf = { c->fd, dir ? POLLIN : POLLOUT, 0 };
		int r = poll(&pf, 1, left > 60000 ? 60000 : (int)left);
		if (r < 0 && errno != EINTR)
			return util_fail(why, wl, "poll: %s", strerror(errno));
		if (r <= 0)
			continue;
		ssize_t n = dir ? recv(c->fd, p, len, MSG_DONTWAIT) : send(c->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			p += n, len -= (size_t)n;
		} else if (n == 0 && dir) {
			return util_fail(why, wl, "the store server closed the connection");
		} else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
			return util_fail(why, wl, "%s: %s (the store server is gone?)", dir ? "recv" : "send", strerror(errno));
		}
	}
	return 0;
}

/* Send one request and read its reply into *payload (malloc'd, NUL-ended).
 * Returns the reply's status, or -1 with err naming what (e.g. "get 'k'"). */
static int request(struct store_client *c, const uint8_t *body, size_t len, double wait_s, const char *what,
		   uint8_t **payload, size_t *plen, char *err, size_t errlen)
{
	char why[200];
	uint8_t hdr[4];
	*payload = NULL;
	pthread_mutex_lock(&c->mu);
	if (c->broken[0]) {
		pthread_mutex_unlock(&c->mu);
		return util_fail(err, errlen, "store: %s: the connection failed earlier: %s", what, c->broken);
	}
	int64_t t0 = now_ms();
	int64_t send_by = t0 + (int64_t)(c->timeout_s * 1e3);
	int64_t reply_by = t0 + (int64_t)((wait_s > c->timeout_s ? wait_s : c->timeout_s) * 1e3) + REPLY_GRACE_MS;
	put32(hdr, (uint32_t)len);
	uint32_t rlen = 0;
	uint8_t *p = NULL;
	if (io_all(c, 0, hdr, 4, send_by, why, sizeof why) || io_all(c, 0, (void *)body, len, send_by, why, sizeof why) ||
	    io_all(c, 1, hdr, 4, reply_by, why, sizeof why))
		goto broken;
	rlen = get32(hdr);
	if (rlen == 0 || rlen > MAX_FRAME) {
		snprintf(why, sizeof why, "a reply of %u bytes does not follow the protocol", rlen);
		goto broken;
	}
	p = malloc((size_t)rlen + 1);
	if (!p) {
		snprintf(why, sizeof why, "out of memory for a reply of %u bytes", rlen);
		goto broken;
	}
	if (io_all(c, 1, p, rlen, reply_by, why, sizeof why))
		goto broken;
	pthread_mutex_unlock(&c->mu);
	int status = p[0];
	memmove(p, p + 1, rlen - 1);
	p[rlen - 1] = 0;
	*payload = p;
	*plen = rlen - 1;
	return status;
broken:
	free(p);
	snprintf(c->broken, sizeof c->broken, "%s", why);
	pthread_mutex_unlock(&c->mu);
	return util_fail(err, errlen, "store: %s: %s", what, why);
}

bool store_client_broken(struct store_client *c)
{
	pthread_mutex_lock(&c->mu);
	bool broken = c->broken[0] != 0;
	pthread_mutex_unlock(&c->mu);
	return broken;
}

static int check_key(const char *op, const char *key, char *err, size_t errlen)
{
	size_t n = key ? strlen(key) : 0;
	if (n == 0 || n > STORE_MAX_KEY)
		return util_fail(err, errlen, "store: %s: key of %zu bytes (1 to %d allowed)", op, n, STORE_MAX_KEY);
	return 0;
}

static size_t put_key(uint8_t *p, const char *key)
{
	size_t n = strlen(key);
	p[0] = (uint8_t)n, p[1] = (uint8_t)(n >> 8);
	memcpy(p + 2, key, n);
	return 2 + n;
}

/* Interpret a reply that is not OK (or a failed request) as an error. */
static int not_ok(int status, uint8_t *payload, const char *what, const char *hint, char *err, size_t errlen)
{
	if (status >= 0)
		util_fail(err, errlen, "store: %s: %s%s", what, payload ? (char *)payload : "", hint);
	free(payload);
	return -1;
}

static uint32_t ms_of(double s)
{
	return s <= 0 ? 0 : s > 4e6 ? 4000000000u : (uint32_t)(s * 1e3);
}

int store_set(struct store_client *c, const char *key, const void *val, size_t len, char *err, size_t errlen)
{
	char what[300];
	if (check_key("set", key, err, errlen))
		return -1;
	snprintf(what, sizeof what, "set '%s'", key);
	if (len > STORE_MAX_VALUE)
		return util_fail(err, errlen, "store: %s: a value of %zu bytes is over the limit of %u", what, len,
			    STORE_MAX_VALUE);
	size_t n = 1 + 2 + strlen(key) + len;
	uint8_t *body = malloc(n), *payload;
	size_t plen;
	if (!body)
		return util_fail(err, errlen, "store: %s: out of memory", what);
	body[0] = 'S';
	size_t k = 1 + put_key(body + 1, key);
	if (len)
		memcpy(body + k, val, len);
	int st = request(c, body, n, 0, what, &payload, &plen, err, errlen);
	free(body);
	if (st != ST_OK)
		return not_ok(st, payload, what, "", err, errlen);
	free(payload);
	return 0;
}

void *store_get(struct store_client *c, const char *key, size_t *len, double timeout_s, char *err, size_t errlen)
{
	char what[300];
	uint8_t body[1 + 4 + 2 + STORE_MAX_KEY], *payload;
	size_t plen;
	if (check_key("get", key, err, errlen))
		return NULL;
	snprintf(what, sizeof what, "get '%s'", key);
	body[0] = 'G';
	put32(body + 1, ms_of(timeout_s));
	size_t n = 5 + put_key(body + 5, key);
	int st = request(c, body, n, timeout_s, what, &payload, &plen, err, errlen);
	if (st != ST_OK) {
		not_ok(st, payload, what, st == ST_TIMEOUT ? " (hint: the rank that sets it failed or runs another plan?)" : "",
		       err, errlen);
		return NULL;
	}
	if (len)
		*len = plen;
	return payload;
}

int store_wait(struct store_client *c, const char *const *keys, int nkeys, double timeout_s, char *err,
	       size_t errlen)
{
	if (nkeys < 0 || nkeys > STORE_MAX_WAIT_KEYS)
		return util_fail(err, errlen, "store: wait: %d keys (0 to %d allowed)", nkeys, STORE_MAX_WAIT_KEYS);
	size_t n = 1 + 4 + 2;
	for (int i = 0; i < nkeys; i++) {
		if (check_key("wait", keys[i], err, errlen))
			return -1;
		n += 2 + strlen(keys[i]);
	}
	char what[300];
	snprintf(what, sizeof what, "wait for %d key%s from '%s'", nkeys, nkeys == 1 ? "" : "s", nkeys ? keys[0] : "");
	uint8_t *body = malloc(n), *payload;
	size_t plen;
	if (!body)
		return util_fail(err, errlen, "store: %s: out of memory", what);
	body[0] = 'W';
	put32(body + 1, ms_of(timeout_s));
	body[5] = (uint8_t)nkeys, body[6] = (uint8_t)(nkeys >> 8);
	size_t k = 7;
	for (int i = 0; i < nkeys; i++)
		k += put_key(body + k, keys[i]);
	int st = request(c, body, n, timeout_s, what, &payload, &plen, err, errlen);
	free(body);
	if (st != ST_OK)
		return not_ok(st, payload, what,
			      st == ST_TIMEOUT ? " (hint: the rank that sets it failed or runs another plan?)" : "", err,
			      errlen);
	free(payload);
	return 0;
}

int store_add(struct store_client *c, const char *key, int64_t delta, int64_t *value, char *err, size_t errlen)
{
	char what[300];
	uint8_t body[1 + 8 + 2 + STORE_MAX_KEY], *payload;
	size_t plen;
	if (check_key("add", key, err, errlen))
		return -1;
	snprintf(what, sizeof what, "add '%s'", key);
	body[0] = 'A';
	put64(body + 1, (uint64_t)delta);
	size_t n = 9 + put_key(body + 9, key);
	int st = request(c, body, n, 0, what, &payload, &plen, err, errlen);
	if (st != ST_OK)
		return not_ok(st, payload, what, "", err, errlen);
	if (plen != 8) {
		free(payload);
		return util_fail(err, errlen, "store: %s: a reply of %zu bytes, expected 8", what, plen);
	}
	if (value)
		*value = (int64_t)get64(payload);
	free(payload);
	return 0;
}

struct store_client *store_client_connect_tcp(const char *host, int port, double timeout_s, char *err,
					      size_t errlen)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	char sport[16];
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(sport, sizeof sport, "%d", port);
	if (!host)
		host = STORE_DEFAULT_HOST;
	int rc = getaddrinfo(host, sport, &hints, &ai);
	if (rc != 0) {
		util_fail(err, errlen, "store: getaddrinfo(%s) failed: %s (hint: check MASTER_ADDR)", host, gai_strerror(rc));
		return NULL;
	}
	int64_t deadline = now_ms() + (int64_t)(timeout_s * 1e3);
	int e = 0;
	for (;;) {
		for (struct addrinfo *a = ai; a; a = a->ai_next) {
			int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
			if (fd < 0) {
				e = errno;
				continue;
			}
			int r = connect(fd, a->ai_addr, a->ai_addrlen);
			if (r != 0 && errno == EINPROGRESS) {
				int64_t left = deadline - now_ms();
				struct pollfd pf = { fd, POLLOUT, 0 };
				socklen_t sl = sizeof e;
				if (poll(&pf, 1, left > 0 ? (int)left : 0) == 1 &&
				    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) == 0 && e == 0)
					r = 0;
				else if (e == 0)
					e = ETIMEDOUT;
			} else if (r != 0) {
				e = errno;
			}
			if (r == 0) {
				freeaddrinfo(ai);
				fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
				int one = 1;
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
				struct store_client *c = store_client_open_fd(fd);
				if (!c) {
					close(fd);
					util_fail(err, errlen, "store: out of memory");
				}
				return c;
			}
			close(fd);
		}
		if (now_ms() >= deadline)
			break;
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	freeaddrinfo(ai);
	util_fail(err, errlen,
	     "store: cannot connect to %s:%d within %.3g s: %s (hint: is the launcher up, and MASTER_ADDR/MASTER_PORT "
	     "right?)",
	     host, port, timeout_s, strerror(e));
	return NULL;
}
