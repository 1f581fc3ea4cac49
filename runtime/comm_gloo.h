/* comm_gloo.h: the C face of the Gloo shim (comm_gloo.cc), the project's
 * only C++.  comm.c runs a Gloo communicator on its comm thread through
 * these three calls; nothing else includes this header.
 * Does not: queue, time or order collectives (comm.c does), or let a C++
 * exception cross into C.
 * Invariant: open, run and close of one communicator happen on one thread,
 * which blocks SIGPIPE before open so that Gloo's own I/O thread inherits
 * the mask and a dead peer is an error, not a signal.
 */
#ifndef COMM_GLOO_H
#define COMM_GLOO_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct comm_gloo;
struct comm_req;
struct store_client;

/* Join rank `rank` of `world` through the store (keys under prefix) and
 * connect a TCP pair to every peer, listening on host.  Bounded by
 * timeout_s, which also bounds every later collective. */
struct comm_gloo *comm_gloo_open(struct store_client *st, const char *prefix, int rank, int world,
				 const char *host, double timeout_s, char *err, size_t errlen);

/* Run one collective to completion: 0, or -1 with Gloo's error in err. */
int comm_gloo_run(struct comm_gloo *g, const struct comm_req *r, char *err, size_t errlen);

void comm_gloo_close(struct comm_gloo *g);

#ifdef __cplusplus
}
#endif
#endif
