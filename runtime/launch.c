/* launch.c: spawning and supervising the workers of a job.
 * One poll loop watches every worker's stdout, stderr and heartbeat pipe
 * plus a self-pipe for signals; the store is served from its own thread.
 * The first failure is the root cause: later exits are consequences (a
 * collective whose peer died) and are not blamed, except a rank that said
 * why it ended (a note on its heartbeat pipe), which the first failure may
 * be a consequence of.  A rank whose collective broke as a peer went away
 * says so in a "peer" note, said only where no rank failed on its own
 * before the launcher signalled them.  Every wait is bounded.
 */
#include "runtime/launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/store.h"
#include "runtime/util.h"

/* a worker's line is passed on whole up to LINE_LIMIT bytes (longer ones
 * in pieces of that size); its stderr tail keeps LINE_MAX_LEN of each */
enum { TAIL_LINES = 12, LINE_MAX_LEN = 1024, LINE_LIMIT = 1 << 20 };
/* bytes on a worker's heartbeat pipe; BEAT_NOTE starts the worker's last
 * word, why it ends (a file that shrank under it, a non-finite loss): a
 * key up to '\n', then lines of text up to a NUL; BEAT_WAIT_ON is a
 * BEAT_WAIT followed by what the worker waits on, up to a NUL */
enum { BEAT_PROGRESS = 1, BEAT_WAIT = 2, BEAT_NOTE = 3, BEAT_WAIT_ON = 4 };
enum { NOTE_MAX = 4095, KEY_MAX = 63, WAIT_ON_MAX = 191 }; /* with its lead byte, one pipe write (PIPE_BUF): it comes whole */

struct worker {
	pid_t pid;
	int out, err, beat;      /* read ends; -1 once closed */
	bool exited;
	int status;
	double exit_t;           /* when it was seen to exit */
	double last_beat;
	bool waiting;            /* its last word: waiting for other ranks */
	char wait_on[WAIT_ON_MAX + 1]; /* on what, where it said so: "" else */
	int on_len;
	char *partial[2];        /* an unfinished line of stdout, stderr (grown as it needs) */
	int plen[2], pcap[2];
	char tail[TAIL_LINES][LINE_MAX_LEN]; /* last stderr lines, a ring */
	int ntail;
	char note[NOTE_MAX];     /* its BEAT_NOTE text */
	int note_len;
	char key[KEY_MAX + 1];   /* its key: "" for a word said as it is */
	int key_len;
	int in_note;             /* 1: reading its key, 2: its text, 3: what it waits on */
};

static int sig_pipe[2] = { -1, -1 };
static bool int_ignored, term_ignored, hup_ignored; /* SIGINT, SIGTERM, SIGHUP ignored when the job started */
/* on a terminal rank 0's stdout passes through as it comes, so that its
 * progress bar redraws in place (the other ranks' lines stay prefixed) */
static bool relay_raw;
static bool raw_mid_line, raw_bar; /* rank 0's output has an unfinished line; it holds a carriage return (a bar) */

/* Before another line reaches the terminal: a progress bar is cleared (its
 * next update redraws it), any other unfinished line of rank 0's is ended. */
static void end_raw_line(void)
{
	if (!raw_mid_line)
		return;
	fputs(raw_bar ? "\r\033[K" : "\n", stdout);
	fflush(stdout);
	raw_mid_line = raw_bar = false;
}

static void on_signal(int sig)
{
	int saved = errno;
	unsigned char b = (unsigned char)sig;
	if (write(sig_pipe[1], &b, 1) < 0) {
		/* the pipe is full: a signal is already pending */
	}
	errno = saved;
}

static void emit(struct worker *w, int rank, int stream, const char *line, int len)
{
	FILE *f = stream ? stderr : stdout;
	end_raw_line();
	if (rank == 0)
		fprintf(f, "%.*s\n", len, line);
	else
		fprintf(f, "[rank %d] %.*s\n", rank, len, line);
	fflush(f);
	if (stream) {
		int slot = w->ntail % TAIL_LINES;
		snprintf(w->tail[slot], LINE_MAX_LEN, "%.*s", len, line);
		w->ntail++;
	}
}

/* Whether w's unfinished line of stream has room for one more byte,
 * growing it up to LINE_LIMIT (false: it is full, pass on what it holds). */
static bool room(struct worker *w, int stream)
{
	if (w->plen[stream] < w->pcap[stream])
		return true;
	int cap = 2 * w->pcap[stream];
	char *p = cap <= LINE_LIMIT ? realloc(w->partial[stream], (size_t)cap) : NULL;
	if (!p)
		return false;
	w->partial[stream] = p;
	w->pcap[stream] = cap;
	return true;
}

/* Forward complete lines from fd; returns false at end of file. */
static bool pump(struct worker *w, int rank, int stream, int fd)
{
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (relay_raw && rank == 0 && stream == 0) {
		if (n <= 0)
			return false;
		fwrite(buf, 1, (size_t)n, stdout);
		fflush(stdout);
		for (ssize_t i = 0; i < n; i++) {
			raw_mid_line = buf[i] != '\n';
			raw_bar = buf[i] == '\r' || (raw_bar && raw_mid_line);
		}
		return true;
	}
	if (n <= 0) {
		if (w->plen[stream])
			emit(w, rank, stream, w->partial[stream], w->plen[stream]);
		w->plen[stream] = 0;
		return false;
	}
	for (ssize_t i = 0; i < n; i++) {
		char c = buf[i];
		/* a progress bar's carriage returns become line breaks for the other ranks */
		if (c == '\n' || (c == '\r' && rank != 0) || !room(w, stream)) {
			emit(w, rank, stream, w->partial[stream], w->plen[stream]);
			w->plen[stream] = 0;
			if (c == '\n' || c == '\r')
				continue;
		}
		w->partial[stream][w->plen[stream]++] = c;
	}
	return true;
}

/* Read what came on w's heartbeat pipe at time t: read()'s result, 0 at
 * its end. */
static ssize_t heed(struct worker *w, double t)
{
	char b[256];
	ssize_t k = read(w->beat, b, sizeof b);
	if (k > 0)
		w->last_beat = t;
	for (ssize_t i = 0; i < k; i++) {
		if (w->in_note == 1) {
			if (b[i] == '\n')
				w->in_note = 2;
			else if (w->key_len < KEY_MAX)
				w->key[w->key_len++] = b[i];
			w->key[w->key_len] = 0;
		} else if (w->in_note == 2) {
			if (b[i] == 0)
				w->in_note = 0;
			else if (w->note_len < NOTE_MAX)
				w->note[w->note_len++] = b[i];
		} else if (w->in_note == 3) {
			if (b[i] == 0)
				w->in_note = 0;
			else if (w->on_len < WAIT_ON_MAX)
				w->wait_on[w->on_len++] = b[i];
			w->wait_on[w->on_len] = 0;
		} else if (b[i] == BEAT_NOTE) {
			w->in_note = 1;
			w->note_len = w->key_len = 0;
			w->key[0] = 0;
		} else {
			w->waiting = b[i] == BEAT_WAIT || b[i] == BEAT_WAIT_ON;
			w->on_len = 0;
			w->wait_on[0] = 0;
			if (b[i] == BEAT_WAIT_ON)
				w->in_note = 3;
		}
	}
	return k;
}

/* The job's last word, from the failed rank's note: as it is, or for a
 * keyed one, rank 0's when every rank gave that key (they agree), else the
 * lowest such rank's, naming the ranks that gave it. */
static void say_note(const struct worker *ws, int n, int base, int failed)
{
	const char *key = ws[failed].key;
	bool *in = calloc((size_t)(base + n), sizeof *in);
	int who = failed, count = 0;
	for (int r = n - 1; key[0] && in && r >= 0; r--)
		if (ws[r].note_len && !strcmp(ws[r].key, key)) {
			in[base + r] = true;
			who = r;
			count++;
		}
	const char *text = ws[who].note, *lead = "trainc: ";
	int len = ws[who].note_len;
	while (len > 0 && text[len - 1] == '\n')
		len--;
	char ranks[256];
	size_t k = strlen(lead);
	if (!key[0] || !in || count == n)
		fprintf(stderr, "%.*s\n", len, text);
	else if (len >= (int)k && !strncmp(text, lead, k))
		fprintf(stderr, "%s%s: %.*s\n", lead, util_ranks(in, base + n, ranks, sizeof ranks), len - (int)k, text + k);
	else
		fprintf(stderr, "%s: %.*s\n", util_ranks(in, base + n, ranks, sizeof ranks), len, text);
	free(in);
}

static double signalled_t; /* when the launcher first signalled the workers (0: not yet) */

static void signal_all(struct worker *ws, int n, int sig)
{
	if (!signalled_t)
		signalled_t = util_now();
	for (int r = 0; r < n; r++)
		if (ws[r].pid > 0 && !ws[r].exited)
			kill(ws[r].pid, sig);
}

/* Whether process pid is stopped (Linux's /proc/PID/stat state T or t);
 * false where that cannot be read. */
static bool is_stopped(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t k = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[k] = 0;
	const char *close = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
}

static const char *describe_status(int status, char *buf, size_t n)
{
	if (WIFEXITED(status))
		snprintf(buf, n, "exit code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, n, "signal SIG%s (%d)", sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
			 WTERMSIG(status));
	else
		snprintf(buf, n, "status %d", status);
	return buf;
}

/* Append NAME=VALUE (fmt) to env as a string in own's free room. */
static void setting(char **env, size_t *k, char *own, size_t cap, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static void setting(char **env, size_t *k, char *own, size_t cap, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(own + *at, cap - *at, fmt, ap);
	va_end(ap);
	env[(*k)++] = own + *at;
	*at += (size_t)w + 1;
}

/* Where a worker stands in the job: what its environment tells it. */
struct place {
	int rank, local, world, nlocal, node; /* global rank, rank on this node, ranks in all, on this node */
	int store_fd;                         /* the inherited store socket, or -1: TCP to the master */
	const char *master_addr;              /* NULL: a job on this machine alone */
	int master_port;
	long job_pid;
	const char *run_dir;
};

/* A worker's environment: the launcher's, less the variables it sets,
 * then those (ranks, the store, the beat descriptor, the run directory),
 * built before fork: a child of a process with threads may call only
 * async-signal-safe functions until it execs, and setenv allocates (a
 * child forked while another thread held the allocator's lock waited for
 * it forever).  The strings set here live in *own, one block.  NULL if out
 * of memory; else free the array and *own. */
static char **worker_env(const struct place *pl, int beat_fd, char **own)
{
	static const char *const ours[] = { "TRAINC_TTY",     "RANK",	       "LOCAL_RANK",	  "WORLD_SIZE",	    "LOCAL_WORLD_SIZE",
					    "GROUP_RANK",     "MASTER_ADDR",   "MASTER_PORT",	  "TRAINC_STORE_FD", "TRAINC_BEAT_FD",
					    "TRAINC_WORKER",  "TRAINC_JOB_PID", "TRAINC_RUN_DIR" };
	enum { NOURS = sizeof ours / sizeof ours[0] };
	size_t n = 0;
	while (environ[n])
		n++;
	/* room for every NAME=VALUE below: 40 bytes each, the path and the address */
	size_t cap = NOURS * 40 + (pl->run_dir ? strlen(pl->run_dir) : 0) + (pl->master_addr ? strlen(pl->master_addr) : 0);
	size_t at = 0, k = 0;
	char **env = calloc(n + NOURS + 1, sizeof *env);
	*own = malloc(cap);
	if (!env || !*own) {
		free(env);
		free(*own);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		bool set_here = false;
		for (size_t j = 0; j < NOURS && !set_here; j++) {
			size_t len = strlen(ours[j]);
			set_here = strncmp(environ[i], ours[j], len) == 0 && environ[i][len] == '=';
		}
		if (!set_here)
			env[k++] = environ[i];
	}
	if (pl->rank == 0 && relay_raw) /* its stdout reaches the terminal as written */
		setting(env, &k, *own, cap, &at, "TRAINC_TTY=1");
	setting(env, &k, *own, cap, &at, "RANK=%d", pl->rank);
	setting(env, &k, *own, cap, &at, "LOCAL_RANK=%d", pl->local);
	setting(env, &k, *own, cap, &at, "WORLD_SIZE=%d", pl->world);
	setting(env, &k, *own, cap, &at, "LOCAL_WORLD_SIZE=%d", pl->nlocal);
	setting(env, &k, *own, cap, &at, "GROUP_RANK=%d", pl->node);
	if (pl->master_addr) {
		setting(env, &k, *own, cap, &at, "MASTER_ADDR=%s", pl->master_addr);
		setting(env, &k, *own, cap, &at, "MASTER_PORT=%d", pl->master_port);
	}
	if (pl->store_fd >= 0) /* else the store is node 0's, at MASTER_ADDR:MASTER_PORT */
		setting(env, &k, *own, cap, &at, "TRAINC_STORE_FD=%d", pl->store_fd);
	setting(env, &k, *own, cap, &at, "TRAINC_BEAT_FD=%d", beat_fd);
	setting(env, &k, *own, cap, &at, "TRAINC_WORKER=1");
	setting(env, &k, *own, cap, &at, "TRAINC_JOB_PID=%ld", pl->job_pid);
	if (pl->run_dir)
		setting(env, &k, *own, cap, &at, "TRAINC_RUN_DIR=%s", pl->run_dir);
	env[k] = NULL;
	return env;
}

static pid_t spawn(const struct place *pl, int out[2], int err[2], int beat[2], char **argv)
{
	char *own;
	char **env = worker_env(pl, beat[1], &own);
	if (!env) {
		errno = ENOMEM;
		return -1;
	}
	char fail[96];
	int nfail = snprintf(fail, sizeof fail, "trainc: cannot start worker %d: /proc/self/exe could not be run\n", pl->rank);
	pid_t parent = getpid();
	/* signals wait until the child has dropped the launcher's handlers: one
	 * that ran in the child would write to the launcher's signal pipe (a
	 * SIGTERM from a stop that came as it was forked, read as the
	 * launcher's own) */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid_t pid = fork();
	if (pid != 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		free(env);
		free(own);
		return pid;
	}
	/* from here to exec, async-signal-safe calls only */
	/* the worker dies with the launcher, even if the launcher is killed */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	dup2(out[1], STDOUT_FILENO);
	dup2(err[1], STDERR_FILENO);
	close(out[0]);
	close(err[0]);
	close(beat[0]);
	/* the launcher's handlers end with exec; a signal the job was started
	 * ignoring (nohup, a background job) stays ignored in the workers */
	if (!int_ignored)
		signal(SIGINT, SIG_DFL);
	if (!term_ignored)
		signal(SIGTERM, SIG_DFL);
	if (!hup_ignored)
		signal(SIGHUP, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, &old, NULL);
	execve("/proc/self/exe", argv, env);
	ssize_t w = write(STDERR_FILENO, fail, (size_t)nfail < sizeof fail ? (size_t)nfail : sizeof fail - 1);
	(void)w;
	_exit(127);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- a job of several nodes ---- */

static bool loopback(const char *addr);

/* One launcher's part in a job that spans nodes.  Keys in the store:
 * job/conf (node 0's shape of the job, which every node's must equal),
 * job/node/K (taken by node K's launcher), job/stop ("STATUS\tTEXT": the
 * first failure, which stops every node), job/done/K (node K's exit
 * status, which node 0 waits for before it ends). */
enum { STOP_MAX = 4096 }; /* job/stop's text: a failure and its rank's last lines */
struct nodes {
	int n, me;
	struct store_client *c;     /* this launcher's, used from its loop */
	struct store_client *watch; /* the watcher thread's, blocked in a get of job/stop */
	char said[STOP_MAX];        /* what stopped the job, from another node: "STATUS\tTEXT" */
	atomic_bool heard;          /* said is written */
	bool stopped;               /* this node set job/stop */
	bool outsider;              /* refused for a node rank another launcher has: it does not stop the job */
};

/* Connect to the job's store: node 0 to its own server over a socket
 * pair, the others over TCP to node 0, waiting up to timeout_s for it. */
static struct store_client *node_client(struct store_server *st, const struct launch_opts *o, char *err, size_t errlen)
{
	if (st) {
		int sp[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
			util_fail(err, errlen, "socketpair: %s", strerror(errno));
			return NULL;
		}
		store_server_add_client(st, sp[0]);
		struct store_client *c = store_client_open_fd(sp[1]);
		if (!c) {
			close(sp[1]);
			util_fail(err, errlen, "out of memory");
		}
		return c;
	}
	struct store_client *c = store_client_connect_tcp(o->master_addr, o->master_port, o->timeout_s < 2 ? o->timeout_s : 2, err, errlen);
	if (!c && o->timeout_s > 2) {
		fprintf(stderr, "trainc: node %d: waiting up to %.0f s (parallel.timeout) for node 0's launcher at %s:%d\n", o->node,
			o->timeout_s, o->master_addr, o->master_port);
		c = store_client_connect_tcp(o->master_addr, o->master_port, o->timeout_s, err, errlen);
	}
	return c;
}

static void *watch_stop(void *arg)
{
	struct nodes *nd = arg;
	char err[512];
	for (;;) {
		size_t len;
		char *v = store_get(nd->watch, "job/stop", &len, 3600, err, sizeof err);
		if (v) {
			snprintf(nd->said, sizeof nd->said, "%s", v);
			free(v);
			break;
		}
		if (store_client_broken(nd->watch)) {
			snprintf(nd->said, sizeof nd->said, "1\tlost the connection to node 0's launcher (%s)", err);
			break;
		}
	}
	atomic_store(&nd->heard, true);
	unsigned char b = 0; /* a byte no signal has: another node stopped the job */
	if (write(sig_pipe[1], &b, 1) < 0) {
		/* the pipe is full: the loop wakes anyway */
	}
	return NULL;
}

/* Join the job's nodes: 0, or with a message in err the exit status: 2
 * for a node that does not fit the job (another shape, a node rank
 * taken), 1 where node 0 cannot be reached or served. */
static int nodes_open(struct nodes *nd, struct store_server *st, const struct launch_opts *o, char *err, size_t errlen)
{
	nd->n = o->nnodes, nd->me = o->node;
	char e[512], conf[128], key[64];
	/* at a loopback master, on loopback alone; else on every interface, as
	 * torchrun's store: a host name may resolve to another address here
	 * (Debian's 127.0.1.1) than on the other nodes */
	bool lo = loopback(o->master_addr);
	if (st && (lo || store_server_listen_tcp(st, "::", o->master_port, e, sizeof e) < 0) &&
	    store_server_listen_tcp(st, lo ? o->master_addr : "0.0.0.0", o->master_port, e, sizeof e) < 0) {
		util_fail(err, errlen, "node 0 cannot serve the job's store at --master-addr %s --master-port %d: %s", o->master_addr,
			  o->master_port, e);
		return 1;
	}
	if (!(nd->c = node_client(st, o, e, sizeof e)) || !(nd->watch = node_client(st, o, e, sizeof e))) {
		util_fail(err, errlen, "node %d cannot reach the job's store: %s", o->node, e);
		return 1;
	}
	store_client_set_timeout(nd->c, o->timeout_s);
	snprintf(conf, sizeof conf, "%d nodes of %d rank%s", o->nnodes, o->world, o->world == 1 ? "" : "s");
	int64_t taken = 0;
	snprintf(key, sizeof key, "job/node/%d", o->node);
	if (store_add(nd->c, key, 1, &taken, e, sizeof e) != 0) {
		util_fail(err, errlen, "node %d: %s", o->node, e);
		return 1;
	}
	if (taken > 1) {
		nd->outsider = true;
		util_fail(err, errlen, "node %d: another launcher of this job took --node-rank %d already; give each node its own",
			  o->node, o->node);
		return 2;
	}
	if (o->node == 0) {
		char pid[32];
		snprintf(pid, sizeof pid, "%ld", (long)getpid());
		if (store_set(nd->c, "job/conf", conf, strlen(conf), e, sizeof e) != 0 ||
		    store_set(nd->c, "job/pid", pid, strlen(pid), e, sizeof e) != 0) {
			util_fail(err, errlen, "node 0: %s", e);
			return 1;
		}
	} else {
		size_t len;
		char *theirs = store_get(nd->c, "job/conf", &len, o->timeout_s, e, sizeof e);
		if (!theirs) {
			util_fail(err, errlen, "node %d: %s", o->node, e);
			return 1;
		}
		bool same = !strcmp(theirs, conf);
		if (!same)
			util_fail(err, errlen,
				  "node %d runs a job of %s, but node 0 one of %s; give every node the same --nnodes and --gpus or --cpus",
				  o->node, conf, theirs);
		free(theirs);
		if (!same)
			return 2;
	}
	pthread_t th;
	if (pthread_create(&th, NULL, watch_stop, nd) != 0) {
		util_fail(err, errlen, "node %d: cannot start a thread", o->node);
		return 1;
	}
	pthread_detach(th);
	return 0;
}

/* The job's PID as every node's workers name it: node 0's launcher's. */
static long nodes_job_pid(struct nodes *nd)
{
	if (!nd->c || nd->me == 0)
		return (long)getpid();
	char e[512];
	char *v = store_get(nd->c, "job/pid", NULL, 1, e, sizeof e);
	long pid = v ? strtol(v, NULL, 10) : (long)getpid();
	free(v);
	return pid;
}

/* Tell every other node to stop, once: rc is this node's exit status. */
static void nodes_stop(struct nodes *nd, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void nodes_stop(struct nodes *nd, int rc, const char *fmt, ...)
{
	if (!nd->c || nd->stopped || nd->outsider || atomic_load(&nd->heard))
		return;
	nd->stopped = true;
	char text[STOP_MAX], e[512], own[16];
	int k = snprintf(text, sizeof text, "%d\tnode %d: ", rc, nd->me);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text + k, sizeof text - (size_t)k, fmt, ap);
	va_end(ap);
	/* a text that names this node already is said as it is */
	int m = snprintf(own, sizeof own, "node %d", nd->me);
	if (!strncmp(text + k, own, (size_t)m))
		memmove(text + k - (m + 2), text + k, strlen(text + k) + 1);
	if (store_set(nd->c, "job/stop", text, strlen(text), e, sizeof e) != 0)
		fprintf(stderr, "trainc: node %d cannot tell the other nodes to stop: %s\n", nd->me, e);
}

/* Rank (this node's worker w) failed with why: why, followed by what the
 * rank said of it (its note, else its last lines of stderr), as the
 * other nodes are told: they may have stopped before a line of their own
 * said the same.  Its stderr is read first, as far as it has come. */
static void failure_text(struct worker *w, int rank, const char *why, char *text, size_t len)
{
	struct pollfd p = { w->err, POLLIN, 0 };
	while (w->err >= 0 && poll(&p, 1, 0) > 0)
		if (!pump(w, rank, 1, w->err))
			close_fd(&w->err);
	size_t k = (size_t)snprintf(text, len, "%s", why);
	int lines = w->ntail < 3 ? w->ntail : 3;
	if (w->note_len && strcmp(w->key, "peer") != 0) {
		int n = w->note_len;
		while (n > 0 && w->note[n - 1] == '\n')
			n--;
		snprintf(text + k, len - k, "\n%.*s", n, w->note);
	} else if (lines) {
		k += (size_t)snprintf(text + k, len - k, "\ntrainc: last lines of rank %d's stderr:", rank);
		for (int i = w->ntail - lines; i < w->ntail && k < len; i++)
			k += (size_t)snprintf(text + k, len - k, "\n    %s", w->tail[i % TAIL_LINES]);
	}
}

/* Say what another node stopped the job with; its exit status. */
static int nodes_heard(struct nodes *nd)
{
	char *tab = strchr(nd->said, '\t');
	int rc = atoi(nd->said);
	fprintf(stderr, "trainc: the job stopped: %s\n", tab ? tab + 1 : nd->said);
	return rc > 0 && rc < 256 ? rc : 1;
}

/* At the end of this node's ranks, which ended with rc: node K says so;
 * node 0 waits (up to timeout_s) until every node has, and ends with the
 * first failing node's status.  The job's exit status. */
static int nodes_finish(struct nodes *nd, int rc, double timeout_s)
{
	char key[64], e[512], v[16];
	if (!nd->c)
		return rc;
	if (nd->me != 0) {
		snprintf(key, sizeof key, "job/done/%d", nd->me);
		snprintf(v, sizeof v, "%d", rc);
		if (store_set(nd->c, key, v, strlen(v), e, sizeof e) != 0 && rc == 0 && !atomic_load(&nd->heard))
			fprintf(stderr, "trainc: node %d could not tell node 0 that its ranks ended: %s\n", nd->me, e);
		return rc;
	}
	double until = util_now() + timeout_s;
	int interrupted = 0; /* the signal that ended the wait */
	for (int k = 1; k < nd->n; k++) {
		snprintf(key, sizeof key, "job/done/%d", k);
		size_t len;
		char *got = NULL;
		/* in steps of a second, so that Ctrl-C ends the wait */
		while (!got && !interrupted && util_now() < until && !store_client_broken(nd->c)) {
			got = store_get(nd->c, key, &len, 1.0, e, sizeof e);
			unsigned char sig;
			while (!got && read(sig_pipe[0], &sig, 1) == 1)
				if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
					interrupted = sig;
		}
		if (interrupted)
			return rc ? rc : 128 + interrupted;
		bool said = got != NULL;
		int theirs = said ? atoi(got) : 1;
		free(got);
		if (!said)
			fprintf(stderr, "trainc: node %d's launcher did not say how its ranks ended within %.0f s%s; it may have been "
				"killed, or its machine lost\n", k, timeout_s, rc == 0 ? " (parallel.timeout)" : "");
		else if (theirs != 0 && rc == 0 && !nd->stopped && !atomic_load(&nd->heard))
			fprintf(stderr, "trainc: node %d's ranks ended with exit status %d\n", k, theirs);
		if (rc == 0)
			rc = theirs;
	}
	return rc;
}

int launch_run(const struct launch_opts *o, int argc, char **argv)
{
	(void)argc;
	int n = o->world, base = o->node * o->world; /* this node's ranks: base .. base + n - 1 */
	bool multi = o->nnodes > 1;
	relay_raw = isatty(STDOUT_FILENO) && !getenv("TRAINC_PLAIN");
	struct worker *ws = calloc((size_t)n, sizeof *ws);
	/* the store is served by node 0's launcher */
	struct store_server *store = o->node == 0 ? store_server_new() : NULL;
	static struct nodes nd; /* its watcher thread may outlive this call */
	char err[512];
	if (!ws || (o->node == 0 && !store) || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    (store && store_server_start(store, err, sizeof err) != 0)) {
		fprintf(stderr, "trainc: cannot start the launcher: %s\n", ws && (store || o->node) ? err : "out of memory");
		return 1;
	}
	int joined = multi ? nodes_open(&nd, store, o, err, sizeof err) : 0;
	if (joined != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		/* a node that cannot join stops the others, which would wait for its ranks */
		nodes_stop(&nd, joined, "%s", err);
		store_server_free(store);
		return joined;
	}
	long job_pid = nodes_job_pid(&nd);
	struct sigaction sa = { 0 }, old;
	sa.sa_handler = on_signal;
	/* an ignore the job was started with (nohup, `trap '' INT`, a
	 * background job of a shell without job control) holds, here and in
	 * the workers */
	int_ignored = sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
	term_ignored = sigaction(SIGTERM, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
	if (!int_ignored)
		sigaction(SIGINT, &sa, NULL);
	if (!term_ignored)
		sigaction(SIGTERM, &sa, NULL);
	hup_ignored = sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
	if (!hup_ignored)
		sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	double start = util_now();
	for (int r = 0; r < n; r++) {
		for (int k = 0; k < 2; k++) {
			ws[r].pcap[k] = LINE_MAX_LEN;
			if (!(ws[r].partial[k] = malloc(LINE_MAX_LEN))) {
				fprintf(stderr, "trainc: cannot start the launcher: out of memory\n");
				signal_all(ws, r, SIGKILL);
				return 1;
			}
		}
		int sp[2], out[2], er[2], beat[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(er, O_CLOEXEC) != 0 ||
		    pipe2(beat, O_CLOEXEC) != 0) {
			fprintf(stderr, "trainc: cannot create pipes for worker %d: %s\n", base + r, strerror(errno));
			signal_all(ws, r, SIGKILL);
			return 1;
		}
		/* the worker's ends must survive exec: drop close-on-exec in the child only */
		int keep[3] = { sp[1], beat[1], -1 };
		for (int k = 0; keep[k] >= 0; k++)
			fcntl(keep[k], F_SETFD, 0);
		struct place pl = { base + r, r, n * o->nnodes, n, o->node, store ? sp[1] : -1, multi ? o->master_addr : NULL,
				    o->master_port, job_pid, o->run_dir };
		ws[r].pid = spawn(&pl, out, er, beat, argv);
		for (int k = 0; keep[k] >= 0; k++)
			fcntl(keep[k], F_SETFD, FD_CLOEXEC);
		close(sp[1]);
		close(out[1]);
		close(er[1]);
		close(beat[1]);
		if (ws[r].pid < 0) {
			fprintf(stderr, "trainc: cannot fork worker %d: %s\n", base + r, strerror(errno));
			close(sp[0]);
			signal_all(ws, r, SIGKILL);
			nodes_stop(&nd, 1, "cannot fork worker %d", base + r);
			return 1;
		}
		if (store)
			store_server_add_client(store, sp[0]);
		else
			close(sp[0]);
		ws[r].out = out[0];
		ws[r].err = er[0];
		ws[r].beat = beat[0];
		fcntl(ws[r].beat, F_SETFL, O_NONBLOCK);
		ws[r].last_beat = start;
	}
	int failed = -1, stop_signal = 0, alive = n;
	bool hang = false, remote = false; /* remote: another node stopped the job */
	double kill_at = 0, term_at = 0, stop_at = 0; /* stop_at: when to tell the other nodes */
	char why[512] = "";
	struct pollfd *pfd = calloc((size_t)n * 3 + 1, sizeof *pfd);
	double last_round = util_now();
	while (alive > 0) {
		int np = 0;
		pfd[np++] = (struct pollfd){ sig_pipe[0], POLLIN, 0 };
		for (int r = 0; r < n; r++) {
			pfd[np++] = (struct pollfd){ ws[r].out, POLLIN, 0 };
			pfd[np++] = (struct pollfd){ ws[r].err, POLLIN, 0 };
			pfd[np++] = (struct pollfd){ ws[r].beat, POLLIN, 0 };
		}
		if (poll(pfd, (nfds_t)np, 200) < 0 && errno != EINTR)
			break;
		double t = util_now();
		/* a round far longer than the poll's 0.2 s: the whole job was
		 * suspended (Ctrl-Z, then fg); its silence was not a hang */
		if (t - last_round > 2.0)
			for (int r = 0; r < n; r++)
				ws[r].last_beat += t - last_round;
		last_round = t;
		for (int r = 0; r < n; r++) {
			struct pollfd *p = &pfd[1 + 3 * r];
			if (p[0].fd >= 0 && (p[0].revents & (POLLIN | POLLHUP)) && !pump(&ws[r], base + r, 0, ws[r].out))
				close_fd(&ws[r].out);
			if (p[1].fd >= 0 && (p[1].revents & (POLLIN | POLLHUP)) && !pump(&ws[r], base + r, 1, ws[r].err))
				close_fd(&ws[r].err);
			if (p[2].fd >= 0 && (p[2].revents & (POLLIN | POLLHUP)) && heed(&ws[r], t) == 0)
				close_fd(&ws[r].beat);
		}
		unsigned char sig;
		while (read(sig_pipe[0], &sig, 1) == 1) {
			if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP) && !stop_signal) {
				stop_signal = sig;
				end_raw_line();
				fprintf(stderr, "trainc: %s: stopping %d worker%s\n",
					sig == SIGINT ? "interrupted" : sig == SIGHUP ? "hung up (the terminal closed)" : "terminated", n,
					n == 1 ? "" : "s");
				signal_all(ws, n, SIGTERM);
				kill_at = t + o->grace_s;
				nodes_stop(&nd, 128 + sig, "%s", sig == SIGINT ? "interrupted" : sig == SIGHUP ? "hung up" : "terminated");
			}
			if (sig == 0 && atomic_load(&nd.heard) && !remote && !stop_signal && failed < 0) {
				/* another node failed (its launcher says how): ours stop */
				remote = true;
				signal_all(ws, n, SIGTERM);
				kill_at = t + o->grace_s;
			}
		}
		for (int r = 0; r < n; r++) {
			if (ws[r].exited)
				continue;
			int status;
			pid_t got = waitpid(ws[r].pid, &status, WNOHANG);
			if (got == ws[r].pid) {
				ws[r].exited = true;
				ws[r].status = status;
				ws[r].exit_t = t;
				alive--;
				bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
				/* its last word, if it is still in the pipe */
				while (ws[r].beat >= 0 && heed(&ws[r], t) > 0) {
				}
				if (!ok && failed < 0 && !stop_signal && !remote) {
					failed = r;
					char st[64];
					snprintf(why, sizeof why, "rank %d failed with %s", base + r, describe_status(status, st, sizeof st));
					/* a rank whose collective broke as a peer went away
					 * may be another node's consequence: that node's word
					 * is awaited a moment before this one is given */
					if (multi && ws[r].note_len && !strcmp(ws[r].key, "peer")) {
						stop_at = t + 2.0;
					} else if (multi) {
						char text[STOP_MAX - 64];
						failure_text(&ws[r], base + r, why, text, sizeof text);
						nodes_stop(&nd, 1, "%s", text);
					}
					/* the others a moment to end and say why on their own
					 * (a rank that failed first may be the second to exit),
					 * then SIGTERM, then SIGKILL after the grace */
					term_at = t + 1.0;
					kill_at = term_at + o->grace_s;
				}
			}
		}
		/* a hang: blame a silent rank that is stopped (SIGSTOP, a debugger),
		 * else one that is not itself waiting for others, else any; the
		 * longest silent of the first kind found.  In a job of several
		 * nodes, ranks that are all waiting wait a little longer: the hung
		 * rank may be another node's, which its launcher names */
		int hung = -1;
		for (int pass = 0; pass < 3 && hung < 0; pass++)
			for (int r = 0; r < n && failed < 0 && !stop_signal && !remote; r++)
				if (!ws[r].exited && t - ws[r].last_beat > o->timeout_s + (multi && pass == 2 ? 10 : 0) &&
				    (pass == 2 || (pass == 1 ? !ws[r].waiting : is_stopped(ws[r].pid))) &&
				    (hung < 0 || ws[r].last_beat < ws[hung].last_beat))
					hung = r;
		if (hung >= 0) {
			failed = hung;
			hang = true;
			/* ranks that all wait on the same thing: that is what hangs */
			const char *on = ws[hung].waiting ? ws[hung].wait_on : "";
			bool all = on[0] != 0;
			for (int r = 0; r < n && all; r++)
				all = ws[r].exited || (ws[r].waiting && !strcmp(ws[r].wait_on, on));
			if (all && !multi)
				snprintf(why, sizeof why, "every rank waited %.0f s (parallel.timeout) on %s; the job is stopped as hung",
					 t - ws[hung].last_beat, on);
			else if (on[0])
				snprintf(why, sizeof why, "rank %d made no progress for %.0f s (parallel.timeout), waiting on %s; it is stopped as hung",
					 base + hung, t - ws[hung].last_beat, on);
			else
				snprintf(why, sizeof why, "rank %d made no progress for %.0f s (parallel.timeout); it is stopped as hung", base + hung,
					 t - ws[hung].last_beat);
			nodes_stop(&nd, 1, "%s", why);
			signal_all(ws, n, SIGTERM);
			kill_at = t + o->grace_s;
			/* a stopped process takes no SIGTERM: end it now, not after the grace */
			for (int r = 0; r < n; r++)
				if (!ws[r].exited && is_stopped(ws[r].pid))
					kill(ws[r].pid, SIGKILL);
		}
		if (stop_at > 0 && t >= stop_at) {
			nodes_stop(&nd, 1, "%s", why);
			stop_at = 0;
		}
		if (term_at > 0 && t >= term_at) {
			signal_all(ws, n, SIGTERM);
			term_at = 0;
		}
		if (kill_at > 0 && t > kill_at) {
			signal_all(ws, n, SIGKILL);
			kill_at = t + 3600;
		}
	}
	/* drain what the workers wrote last */
	for (int r = 0; r < n; r++) {
		while (ws[r].out >= 0 && pump(&ws[r], base + r, 0, ws[r].out)) {
		}
		while (ws[r].err >= 0 && pump(&ws[r], base + r, 1, ws[r].err)) {
		}
		while (ws[r].beat >= 0 && heed(&ws[r], util_now()) > 0) {
		}
		close_fd(&ws[r].out);
		close_fd(&ws[r].err);
		close_fd(&ws[r].beat);
		free(ws[r].partial[0]);
		free(ws[r].partial[1]);
	}
	/* a rank that failed saying why (a note) is the root cause over one that
	 * failed without: the peer whose collective its end broke, if first;
	 * but a rank whose collective broke (a "peer" note) is a consequence of
	 * any other rank that failed on its own, before the launcher signalled */
	for (int r = 0; r < n && failed >= 0 && !hang && !ws[failed].note_len; r++)
		if (ws[r].note_len && strcmp(ws[r].key, "peer") != 0 && ws[r].exited &&
		    !(WIFEXITED(ws[r].status) && WEXITSTATUS(ws[r].status) == 0))
			failed = r;
	if (failed >= 0 && !hang && ws[failed].note_len && !strcmp(ws[failed].key, "peer")) {
		int cause = -1;
		for (int r = 0; r < n; r++) {
			const struct worker *w = &ws[r];
			bool own = w->exited && !(WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0) &&
				   (!signalled_t || w->exit_t <= signalled_t) && !(w->note_len && !strcmp(w->key, "peer"));
			if (own && (cause < 0 || w->exit_t < ws[cause].exit_t))
				cause = r;
		}
		if (cause >= 0) {
			char st[64];
			failed = cause;
			snprintf(why, sizeof why, "rank %d failed with %s", base + cause, describe_status(ws[cause].status, st, sizeof st));
		}
	}
	/* this node's ranks broke as a peer went away, and another node said
	 * why: its word is the job's */
	if (failed >= 0 && !hang && ws[failed].note_len && !strcmp(ws[failed].key, "peer") && !nd.stopped &&
	    atomic_load(&nd.heard)) {
		failed = -1;
		remote = true;
	}
	int rc = 0;
	if (stop_signal) {
		rc = 128 + stop_signal;
	} else if (failed >= 0 && ws[failed].note_len) {
		/* said once for the job, and its exit status is the job's */
		end_raw_line();
		say_note(ws, n, base, failed);
		rc = WIFEXITED(ws[failed].status) ? WEXITSTATUS(ws[failed].status) : 1;
	} else if (failed >= 0) {
		end_raw_line();
		fprintf(stderr, "trainc: %s\n", why);
		struct worker *w = &ws[failed];
		int k = w->ntail < TAIL_LINES ? w->ntail : TAIL_LINES;
		if (k) {
			fprintf(stderr, "trainc: last lines of rank %d's stderr:\n", base + failed);
			for (int i = w->ntail - k; i < w->ntail; i++)
				fprintf(stderr, "    %s\n", w->tail[i % TAIL_LINES]);
		}
		/* a rank that refused what the user gave (2) refuses the job; any
		 * other end (a crash, a signal, a failure) fails it */
		rc = WIFEXITED(w->status) && WEXITSTATUS(w->status) == 2 ? 2 : 1;
	} else if (remote) {
		end_raw_line();
		rc = nodes_heard(&nd);
	}
	/* node 0 serves the store until every node has said how it ended: a
	 * job that failed waits only as long as stopping ranks takes */
	if (multi)
		rc = nodes_finish(&nd, rc, rc == 0 ? o->timeout_s : o->grace_s + 3);
	store_server_free(store);
	free(pfd);
	free(ws);
	return rc;
}

static int beat_fd = -2; /* -2: not looked up yet */

static int beat_pipe(void)
{
	if (beat_fd == -2) {
		const char *s = getenv("TRAINC_BEAT_FD");
		beat_fd = s ? atoi(s) : -1;
	}
	return beat_fd;
}

int launch_worker_rank(int *world)
{
	const char *w = getenv("TRAINC_WORKER"), *r = getenv("RANK"), *ws = getenv("WORLD_SIZE");
	if (!w || !r || !ws)
		return -1;
	beat_pipe(); /* looked up now: launch_worker_note may run in a signal handler */
	*world = atoi(ws);
	return atoi(r);
}

int launch_local_world(int world)
{
	const char *n = getenv("LOCAL_WORLD_SIZE");
	return getenv("TRAINC_WORKER") && n && atoi(n) > 0 ? atoi(n) : world;
}

static void beat(char what)
{
	int fd = beat_pipe();
	if (fd >= 0 && write(fd, &what, 1) < 0)
		beat_fd = -1;
}

/* key and msg as one write to the launcher, else msg on standard error;
 * async-signal-safe */
static void note(int fd, const char *key, const char *msg, size_t len)
{
	char b[1 + NOTE_MAX];
	size_t k = strlen(key);
	k = k < KEY_MAX ? k : KEY_MAX;
	len = len < NOTE_MAX - 2 - k ? len : NOTE_MAX - 2 - k;
	b[0] = BEAT_NOTE;
	memcpy(b + 1, key, k);
	b[1 + k] = '\n';
	memcpy(b + 2 + k, msg, len);
	b[2 + k + len] = 0;
	if (fd >= 0 && write(fd, b, 3 + k + len) == (ssize_t)(3 + k + len))
		return;
	if (write(STDERR_FILENO, msg, len) < 0) {
		/* nowhere left to say it */
	}
}

void launch_worker_note(const char *msg, size_t len)
{
	note(beat_fd, "", msg, len);
}

void launch_worker_stop(const char *key, const char *text)
{
	note(beat_pipe(), key, text, strlen(text));
}

void launch_beat(void)
{
	beat(BEAT_PROGRESS);
}

void launch_wait_begin(void)
{
	beat(BEAT_WAIT);
}

void launch_wait_on(const char *what)
{
	char b[WAIT_ON_MAX + 2];
	size_t k = strlen(what);
	k = k < WAIT_ON_MAX ? k : WAIT_ON_MAX;
	b[0] = BEAT_WAIT_ON;
	memcpy(b + 1, what, k);
	b[1 + k] = 0;
	int fd = beat_pipe();
	if (fd >= 0 && write(fd, b, k + 2) < 0)
		beat_fd = -1;
}

void launch_wait_end(void)
{
	beat(BEAT_PROGRESS);
}

const char *launch_run_dir(void)
{
	return getenv("TRAINC_WORKER") ? getenv("TRAINC_RUN_DIR") : NULL;
}

struct store_client *launch_store(double timeout_s, char *err, size_t errlen)
{
	const char *fd = getenv("TRAINC_STORE_FD"), *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
	struct store_client *c = NULL;
	if (fd)
		c = store_client_open_fd(atoi(fd));
	else if (addr && port)
		return store_client_connect_tcp(addr, atoi(port), timeout_s, err, errlen);
	if (!c)
		util_fail(err, errlen, "this worker has no connection to the launcher's store%s", fd ? " (out of memory)" : "");
	return c;
}

/* Whether addr is written as a loopback address: localhost, 127.0.0.0/8
 * or ::1.  (A host name may resolve to one on its own machine alone, as
 * Debian's 127.0.1.1 for the machine's name, and to another address on the
 * other nodes: that is a job over a network.) */
static bool loopback(const char *addr)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (!strcmp(addr, "localhost"))
		return true;
	if (inet_pton(AF_INET, addr, &a4) == 1)
		return ntohl(a4.s_addr) >> 24 == 127;
	return inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* The first IPv4 address of an interface that is up and not loopback
 * into buf (or that of the interface named ifname): buf, or NULL. */
static const char *interface_addr(const char *ifname, char *buf, size_t n)
{
	struct ifaddrs *ifs = NULL;
	const char *host = NULL;
	if (getifaddrs(&ifs) != 0)
		return NULL;
	for (struct ifaddrs *i = ifs; i && !host; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    (ifname ? !strcmp(i->ifa_name, ifname) : (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK)) &&
		    getnameinfo(i->ifa_addr, sizeof(struct sockaddr_in), buf, (socklen_t)n, NULL, 0, NI_NUMERICHOST) == 0)
			host = buf;
	freeifaddrs(ifs);
	return host;
}


int launch_comm_host(const char **host, char *buf, size_t n, char *err, size_t errlen)
{
	const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT"), *ifname = getenv("GLOO_SOCKET_IFNAME");
	*host = NULL;
	if (!getenv("TRAINC_WORKER") || !addr || !port)
		return 0;
	/* PyTorch's setting: the interface to use, by name */
	if (ifname && ifname[0]) {
		*host = interface_addr(ifname, buf, n);
		if (!*host)
			return util_fail(err, errlen,
					 "GLOO_SOCKET_IFNAME=%s: this machine has no interface of that name with an IPv4 address; "
					 "name one that reaches the other nodes, or unset it",
					 ifname);
		return 0;
	}
	if (loopback(addr))
		return 0;
	/* the source address the kernel picks for a datagram to the master:
	 * the interface other nodes reach this one on (no packet is sent) */
	struct addrinfo hints = { 0 }, *ai = NULL;
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(addr, port, &hints, &ai) != 0)
		return 0; /* the store's connection says what is wrong with it */
	int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 &&
	    getnameinfo((struct sockaddr *)&sa, sl, buf, (socklen_t)n, NULL, 0, NI_NUMERICHOST) == 0)
		*host = buf;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	/* the master's name is this machine's loopback here (node 0 under
	 * Debian's 127.0.1.1): the machine's first network address instead */
	if (*host && loopback(*host))
		*host = interface_addr(NULL, buf, n);
	return 0;
}

int launch_job_pid(void)
{
	/* a worker's parent is its launcher: spawn() checked it, and a worker
	 * dies with it; in a job of several nodes, node 0's launcher, whose
	 * PID its launcher passes on */
	const char *job = getenv("TRAINC_JOB_PID");
	if (getenv("TRAINC_WORKER") && job && atoi(job) > 0)
		return atoi(job);
	return getenv("TRAINC_WORKER") ? (int)getppid() : (int)getpid();
}
