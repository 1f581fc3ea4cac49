/* store.h: the rendezvous key-value store that bootstraps a job's
 * communicators (Gloo addresses, the NCCL unique id) and small agreements
 * between ranks (plan hash, counters).
 * The launcher serves it (store_server_*): workers reach it over socket pairs
 * they inherit, or over TCP for jobs that span nodes; both carry the same
 * length-prefixed protocol.  Keys are strings of at most STORE_MAX_KEY bytes,
 * values byte strings of at most STORE_MAX_VALUE bytes; a client that sends
 * more is answered with an error and dropped.
 * Does not: persist anything, delete keys, or carry training data.
 * Invariant: every call that waits is bounded by a timeout, and its error
 * names the key it was waiting for.  Functions that fail return -1 (or NULL)
 * with a message in err.
 */
#ifndef STORE_H
#define STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_MAX_KEY 256
#define STORE_MAX_VALUE (16u << 20)
#define STORE_MAX_WAIT_KEYS 1024
#define STORE_DEFAULT_HOST "127.0.0.1"

struct store_server;
struct store_client;

/* ---- server (the launcher) ---- */

/* An empty store with no clients; NULL only when out of memory. */
struct store_server *store_server_new(void);

/* Serve a connected socket (one end of a socket pair); the server owns fd
 * from now on, and closes it when the client goes away. */
int store_server_add_client(struct store_server *s, int fd);

/* Also accept clients over TCP on host (NULL: loopback) and port (0: an
 * ephemeral one).  Returns the port it listens on, or -1. */
int store_server_listen_tcp(struct store_server *s, const char *host, int port, char *err, size_t errlen);

/* Wait up to timeout_ms for traffic, then answer every complete request and
 * expire waits past their deadline.  For a launcher that drives its own
 * loop; must not be mixed with store_server_start.  Returns 0, or -1 when
 * poll itself fails. */
int store_server_poll_once(struct store_server *s, int timeout_ms);

/* Serve from a thread of the server's own until store_server_stop; clients
 * may still be added from other threads. */
int store_server_start(struct store_server *s, char *err, size_t errlen);
void store_server_stop(struct store_server *s);

/* Clients connected now (the TCP listener not counted). */
int store_server_clients(struct store_server *s);

/* Where the server reports clients it drops for a protocol error (default:
 * stderr with a "store: " prefix). */
void store_server_set_log(struct store_server *s, void (*log)(void *ctx, const char *msg), void *ctx);

/* Stop the thread if any, close every client, free all keys. */
void store_server_free(struct store_server *s);

/* ---- client (a worker) ---- */

/* A client over an inherited, connected socket; the client owns fd.  NULL
 * only when out of memory. */
struct store_client *store_client_open_fd(int fd);

/* Connect over TCP, retrying until timeout_s while the server is not up yet. */
struct store_client *store_client_connect_tcp(const char *host, int port, double timeout_s, char *err,
					      size_t errlen);

/* Timeout of calls that do not take one (set, add, sending a request);
 * default 60 s. */
void store_client_set_timeout(struct store_client *c, double timeout_s);

void store_client_close(struct store_client *c);

/* Whether the connection failed (the server went away, a reply broke the
 * protocol): every later call fails.  A wait that timed out is not one. */
bool store_client_broken(struct store_client *c);

/* Set key to the len bytes at val, replacing any earlier value. */
int store_set(struct store_client *c, const char *key, const void *val, size_t len, char *err, size_t errlen);

/* The value of key, waiting up to timeout_s for some rank to set it: a
 * malloc'd copy (followed by a NUL not counted in *len) or NULL. */
void *store_get(struct store_client *c, const char *key, size_t *len, double timeout_s, char *err,
		size_t errlen);

/* Wait up to timeout_s until every one of the nkeys keys is set. */
int store_wait(struct store_client *c, const char *const *keys, int nkeys, double timeout_s, char *err,
	       size_t errlen);

/* Add delta to the integer at key (absent: 0) and give the new value in
 * *value.  The value is stored as decimal text, so store_get reads it. */
int store_add(struct store_client *c, const char *key, int64_t delta, int64_t *value, char *err, size_t errlen);

#endif
