/* launch.h: the launcher: N worker processes as one job.
 * The launcher has already compiled the file (so every error came before
 * anything started); it serves the rendezvous store, spawns each worker by
 * re-executing trainc itself (fork + exec: no library state crosses a
 * fork), forwards output (rank 0 as is, other ranks prefixed), and
 * supervises: on the first failure it stops the rest (SIGTERM, a grace
 * period, SIGKILL) and names the root cause; SIGINT and SIGTERM are passed
 * on; a worker that shows no progress for the job timeout is a failure.
 * Workers learn their place from the environment, torchrun's names:
 * RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
 * MASTER_PORT, plus TRAINC_STORE_FD (or TRAINC_STORE_ADDR), TRAINC_BEAT_FD,
 * TRAINC_JOB_PID and TRAINC_RUN_DIR.
 * A job may span nodes (machines): one launcher per node, started by the
 * user with the same command line but for --node-rank.  Node 0's launcher
 * serves the store over TCP at the master address as well; the other
 * nodes' launchers and workers connect to it there.  The launchers agree
 * through the store: a node that fails sets a stop key that every other
 * launcher watches for (and a lost connection to node 0 is a stop too), and
 * node 0 ends only after every node has said how its ranks ended.
 */
#ifndef LAUNCH_H
#define LAUNCH_H
#include <stddef.h>

struct launch_opts {
	int world;          /* ranks on this node */
	double timeout_s;   /* a worker silent for this long has hung */
	double grace_s;     /* between SIGTERM and SIGKILL */
	const char *run_dir; /* the run directory claimed for the job, which rank 0 creates the run in */
	int nnodes, node;    /* nodes of the job (1: this machine alone), this one's index */
	const char *master_addr; /* with nnodes > 1: where node 0 serves the store */
	int master_port;
};

/* Run argv as `world` workers; returns the launcher's exit status: 0 when
 * every worker ended 0; 128 + the signal that stopped the job; else that
 * of the rank taken for the root cause (the first to fail, or one that
 * said why it ended, launch_worker_stop): its own where it said why or
 * refused what the user gave (2), else 1. */
int launch_run(const struct launch_opts *o, int argc, char **argv);

/* In a worker: its rank and world from the environment, or -1 when this
 * process is not a worker; readies launch_worker_note. */
int launch_worker_rank(int *world);
/* The ranks of the job on this machine: a worker's LOCAL_WORLD_SIZE, else
 * world. */
int launch_local_world(int world);
/* In a worker: tell the launcher it is making progress (cheap; call per step). */
void launch_beat(void);
/* In a worker: around waits for other ranks (collectives, barriers), so a
 * rank waiting for a hung peer is not itself taken for the hung one. */
void launch_wait_begin(void);
void launch_wait_end(void);
/* In a worker: launch_wait_begin, saying on what it waits ("NCCL's
 * ...").  Should the job be stopped as hung meanwhile, the launcher names
 * it: for the whole job where every rank waits on it. */
void launch_wait_on(const char *what);
/* In a worker: msg, whole lines (at most about 4 KB, ending in '\n'), its
 * last word before it exits: the launcher shows it once, as why the job
 * ended, and ends with that worker's exit status.  Without a launcher it
 * goes to standard error.  Async-signal-safe once launch_worker_rank ran. */
void launch_worker_note(const char *msg, size_t len);
/* In a worker: launch_worker_note of text, whose key names why this rank
 * stops ("nonfinite"), the same on every rank that stops for that reason:
 * the launcher says it once, rank 0's text where every rank gave the key,
 * else the lowest such rank's after "trainc: " and the ranks that gave it
 * ("trainc: ranks 1 and 3: ...").  Key "": the text as it is (a failure
 * the ranks agreed on, one of them saying it). */
void launch_worker_stop(const char *key, const char *text);
/* In a worker: the run directory the launcher claimed for the job, or NULL. */
const char *launch_run_dir(void);
/* In a worker: its connection to the job's store (inherited from its
 * launcher, or over TCP to node 0's), waiting up to timeout_s for node 0's
 * to be up; NULL with a message in err. */
struct store_client *launch_store(double timeout_s, char *err, size_t errlen);
/* In a worker: the address its collectives' sockets bind to, for peers to
 * reach, in *host: NULL (loopback) in a job on one machine, else the
 * IPv4 address of the interface GLOO_SOCKET_IFNAME names, else this
 * machine's address on the route to the master (in buf).  0, or -1 with a
 * message in err (an interface that is not there). */
int launch_comm_host(const char **host, char *buf, size_t n, char *err, size_t errlen);
/* The process that runs the job: the launcher (node 0's in a job of
 * several nodes), seen from a worker, else this process.  It outlives every
 * rank and holds the --save folder's lock. */
int launch_job_pid(void);
#endif
