/* rundir.c: the run directory (see rundir.h).
 * Names are claimed with mkdir, which fails if the name is taken, so two
 * runs started in the same second get different directories.  Git runs as
 * a child with stdin and stderr on /dev/null, no terminal prompt and no
 * optional locks (so it never takes the index lock from a user's own git),
 * under a time limit (3 s a call), past which its process group is killed.
 * JSON strings are escaped as RFC 8259 asks; bytes that are not UTF-8 (a
 * command line may hold any) become U+FFFD, so every file is valid JSON.
 * Does not: fsync; a crash may lose the last lines of metrics.jsonl.
 * Invariant: each metrics line is formatted whole, then written with one
 * fwrite and flushed.
 */
#include "runtime/rundir.h"
#include "runtime/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { GIT_TIMEOUT_MS = 3000 };

/* ---- JSON ------------------------------------------------------------ */

static void put_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t left = strlen(str);
	fputc('"', f);
	while (*s) {
		unsigned c = *s;
		int n = util_utf8_len(s, left);
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else if (n == 0)
			fputs("\\ufffd", f);
		else
			fwrite(s, 1, (size_t)n, f);
		s += n ? n : 1;
		left -= n ? (size_t)n : 1;
	}
	fputc('"', f);
}

/* the shortest of 15 to 17 digits that reads back as v; null if not finite */
static const char *number(char *buf, size_t n, double v)
{
	if (!isfinite(v)) {
		snprintf(buf, n, "null");
		return buf;
	}
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(buf, n, "%.*g", digits, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return buf;
}

/* ---- directories ----------------------------------------------------- */

/* Why mkdir of path failed with errno e, and what to do (hint, or for a
 * relative path under a current directory that was removed, a shell left
 * in a deleted checkout, that: ENOENT alone sends the user to the path). */
static const char *mkdir_why(const char *path, int e, const char *hint, char *buf, size_t n)
{
	char cwd[PATH_MAX];
	if (e == ENOENT && path[0] != '/' && !getcwd(cwd, sizeof cwd) && errno == ENOENT)
		return "the current directory no longer exists (it was deleted or moved); cd into an existing one";
	snprintf(buf, n, "%s; %s", strerror(util_os_error(e)), hint);
	return buf;
}

/* mkdir -p: every missing component of path */
static int make_dirs(const char *path, char *err, size_t errlen)
{
	char buf[RUNDIR_PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof buf)
		return util_fail(err, errlen, "%.200s...: path too long; use a shorter run directory", path);
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		char c = buf[i];
		buf[i] = 0;
		char why[256];
		if (mkdir(buf, 0777) != 0 && errno != EEXIST)
			return util_fail(err, errlen, "%s: cannot create directory %s: %s", path, buf,
					 mkdir_why(buf, errno, "check the path and permissions", why, sizeof why));
		buf[i] = c;
	}
	return 0;
}

/* 1 if dir holds nothing but . and .., 0 if it holds something, -1 on error */
static int is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *e;
	int empty = 1;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

static int not_empty(const char *dir, char *err, size_t errlen)
{
	return util_fail(err, errlen, "%s: the run directory is not empty; pick another one or remove it", dir);
}

int rundir_check(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	if (stat(dir, &st) != 0)
		return 0; /* made when the run starts */
	if (!S_ISDIR(st.st_mode))
		return util_fail(err, errlen, "%s: exists and is not a directory; pick another run directory", dir);
	int empty = is_empty(dir);
	if (empty < 0)
		return util_fail(err, errlen, "%s: cannot list the run directory: %s; check its permissions", dir,
				 strerror(util_os_error(errno)));
	if (!empty)
		return not_empty(dir, err, errlen);
	return 0;
}

/* A named directory is one job's: its launcher holds a lock on it (flock)
 * for the rest of its life, which its ranks live within, so a second job
 * started into it before the first wrote anything is refused as one
 * started after.  Where locks are not to be had, the emptiness check is all. */
static int lock_named(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0; /* fd stays open: the lock lasts until this process exits */
	int e = errno;
	close(fd);
	return e == EWOULDBLOCK ? not_empty(dir, err, errlen) : 0;
}

/* the user's directory: new, or existing and empty (and with lock, not
 * another job's): 0, -1 when it cannot be made, -2 when it is taken */
static int claim_named(struct rundir *r, const char *dir, bool lock, char *err, size_t errlen)
{
	if (snprintf(r->path, sizeof r->path, "%s", dir) >= (int)sizeof r->path)
		return util_fail(err, errlen, "%.200s...: path too long; use a shorter run directory", dir);
	if (make_dirs(dir, err, errlen) != 0)
		return -1;
	return (lock && lock_named(dir, err, errlen) != 0) || rundir_check(dir, err, errlen) != 0 ? -2 : 0;
}


/* runs/<model>-<stamp>, then -2, -3, ... until mkdir succeeds */
static int claim_default(struct rundir *r, const char *model, char *err, size_t errlen)
{
	char name[128], stamp[32];
	size_t k = 0;
	for (const char *s = model && *model ? model : "model"; *s && k < 64; s++)
		name[k++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
				    *s == '_' || *s == '-' || *s == '.' ? *s : '_';
	name[k] = 0;
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
	if (make_dirs("runs", err, errlen) != 0)
		return -1;
	for (int n = 1; n < 10000; n++) {
		if (n == 1)
			snprintf(r->path, sizeof r->path, "runs/%s-%s", name, stamp);
		else
			snprintf(r->path, sizeof r->path, "runs/%s-%s-%d", name, stamp, n);
		if (mkdir(r->path, 0777) == 0)
			return 0;
		char why[256];
		if (errno != EEXIST)
			return util_fail(err, errlen, "%s: cannot create the run directory: %s", r->path,
					 mkdir_why(r->path, errno, "check that runs/ is writable", why, sizeof why));
	}
	return util_fail(err, errlen, "%s: 9999 runs of %s started this second already; name a run directory", r->path,
		    name);
}

int rundir_claim(const char *dir, const char *model, bool lock, char *path, size_t pathlen, bool *made, char *err, size_t errlen)
{
	struct rundir r;
	struct stat st;
	memset(&r, 0, sizeof r);
	*made = !dir || stat(dir, &st) != 0;
	int rc = dir ? claim_named(&r, dir, lock, err, errlen) : claim_default(&r, model, err, errlen);
	if (rc != 0)
		return rc;
	if (snprintf(path, pathlen, "%s", r.path) >= (int)pathlen)
		return util_fail(err, errlen, "%.200s...: path too long; use a shorter run directory", r.path);
	return 0;
}

/* ---- git ------------------------------------------------------------- */

/* Run git with args, its stdout into out (NUL-terminated, cut at outlen - 1).
 * Returns git's exit status, or -1 if it could not run or ran out of time. */
static int run_git(const char *const *args, char *out, size_t outlen)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	/* its own process group, so a timeout can end whatever it started too */
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&attr, 0);
	size_t nenv = 0;
	while (environ && environ[nenv])
		nenv++;
	char **env = malloc((nenv + 3) * sizeof *env);
	size_t k = 0;
	for (size_t i = 0; env && i < nenv; i++)
		if (strncmp(environ[i], "GIT_OPTIONAL_LOCKS=", 19) && strncmp(environ[i], "GIT_TERMINAL_PROMPT=", 20))
			env[k++] = environ[i];
	pid_t pid = -1;
	int rc = -1;
	if (env) {
		env[k++] = (char *)"GIT_OPTIONAL_LOCKS=0";
		env[k++] = (char *)"GIT_TERMINAL_PROMPT=0";
		env[k] = NULL;
		rc = posix_spawnp(&pid, "git", &fa, &attr, (char *const *)(uintptr_t)args, env);
	}
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		return -1;
	}
	size_t len = 0;
	double deadline = util_now() + GIT_TIMEOUT_MS / 1000.0;
	bool timed_out = false;
	for (;;) {
		int left = (int)((deadline - util_now()) * 1000);
		struct pollfd pf = { fds[0], POLLIN, 0 };
		int ready = left > 0 ? poll(&pf, 1, left) : 0;
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0) {
			timed_out = true;
			break;
		}
		char buf[512];
		ssize_t got = read(fds[0], buf, sizeof buf);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		for (ssize_t i = 0; i < got && len + 1 < outlen; i++)
			out[len++] = buf[i];
	}
	out[len] = 0;
	close(fds[0]);
	if (timed_out)
		kill(-pid, SIGKILL);
	int status, w;
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (w < 0 || timed_out || !WIFEXITED(status)) /* w < 0: SIGCHLD ignored, the child reaped already */
		return -1;
	return WEXITSTATUS(status);
}

/* A .net file's directory and name, from its absolute path where realpath
 * finds it (so a link counts in the work tree that holds its target). */
struct git_path {
	char dir[PATH_MAX];
	char file[NAME_MAX + 1];
};

static bool split_path(const char *path, struct git_path *g)
{
	char abs[PATH_MAX];
	if (!realpath(path, abs))
		snprintf(abs, sizeof abs, "%s", path);
	const char *slash = strrchr(abs, '/');
	const char *file = slash ? slash + 1 : abs;
	int n = !slash ? snprintf(g->dir, sizeof g->dir, ".")
		: slash == abs ? snprintf(g->dir, sizeof g->dir, "/")
		: snprintf(g->dir, sizeof g->dir, "%.*s", (int)(slash - abs), abs);
	return n > 0 && (size_t)n < sizeof g->dir && snprintf(g->file, sizeof g->file, "%s", file) < (int)sizeof g->file;
}

/* The commit HEAD of the work tree holding dir (40 or 64 hex digits, or ""
 * if none) and whether any of the nfiles names in dir differs from it: 1,
 * 0, or -1 when unknown.  An untracked or ignored file counts as different:
 * the commit does not hold what ran.  Two git processes, however many files
 * (the .net files a run reads mostly share a directory). */
static void git_info(const char *dir, const char **files, int nfiles, char *commit, size_t clen, int *dirty)
{
	char out[256];
	commit[0] = 0;
	*dirty = -1;
	const char *head[] = { "git", "-C", dir, "rev-parse", "--verify", "-q", "HEAD", NULL };
	if (run_git(head, out, sizeof out) != 0)
		return;
	size_t n = strspn(out, "0123456789abcdef");
	if ((n != 40 && n != 64) || (out[n] != '\n' && out[n] != 0) || n >= clen)
		return;
	memcpy(commit, out, n);
	commit[n] = 0;
	const char **status = calloc((size_t)nfiles + 8, sizeof *status);
	if (!status)
		return;
	const char *args[] = { "git", "-C", dir, "status", "--porcelain", "--ignored", "--" };
	memcpy(status, args, sizeof args);
	memcpy(status + 7, files, (size_t)nfiles * sizeof *files);
	if (run_git(status, out, sizeof out) == 0)
		*dirty = out[0] != 0;
	free(status);
}

/* The main .net file's commit, and whether it or a file it imports differs
 * from the commit of the work tree holding that file (1, 0, -1 unknown):
 * each directory asked once, for all its files. */
static void git_state(const struct plan *p, char *commit, size_t clen, int *dirty)
{
	commit[0] = 0;
	*dirty = -1;
	int max = 1;
	for (const struct source *src = p->sources; src; src = src->next)
		max++;
	struct git_path *g = calloc((size_t)max, sizeof *g);
	bool *pending = calloc((size_t)max, sizeof *pending); /* split, and its directory not asked yet */
	const char **files = calloc((size_t)max, sizeof *files);
	int n = 0;
	if (g && pending && files) {
		pending[n] = split_path(p->path, &g[n]);
		n++;
		for (const struct source *src = p->sources; src; src = src->next)
			if (src->path && strcmp(src->path, "--set") != 0 && strcmp(src->path, p->path) != 0) {
				pending[n] = split_path(src->path, &g[n]);
				n++;
			}
	}
	for (int i = 0; i < n && (i == 0 || *dirty == 0); i++) {
		if (!pending[i])
			continue;
		int nf = 0;
		for (int j = i; j < n; j++)
			if (pending[j] && strcmp(g[i].dir, g[j].dir) == 0) {
				pending[j] = false;
				files[nf++] = g[j].file;
			}
		char c2[80];
		int d2;
		if (i == 0) {
			git_info(g[i].dir, files, nf, commit, clen, dirty);
		} else {
			git_info(g[i].dir, files, nf, c2, sizeof c2, &d2);
			*dirty = d2 == 1 ? 1 : *dirty;
		}
	}
	free(g);
	free(pending);
	free(files);
}

/* git_state on a thread of its own, started early (rundir_git_begin) so
 * that its processes run while the run sets up; write_run takes its
 * answer, or asks git itself where none was started. */
static struct {
	pthread_t th;
	bool on;
	const struct plan *p;
	char commit[80];
	int dirty;
} early;

static void *git_early(void *arg)
{
	(void)arg;
	git_state(early.p, early.commit, sizeof early.commit, &early.dirty);
	return NULL;
}

void rundir_git_begin(const struct plan *p)
{
	if (early.on || !p->path)
		return;
	early.p = p;
	early.on = pthread_create(&early.th, NULL, git_early, NULL) == 0;
}

void rundir_git_end(void)
{
	if (early.on)
		pthread_join(early.th, NULL);
	early.on = false;
}

/* ---- files ----------------------------------------------------------- */

static FILE *open_in(struct rundir *r, const char *name, const char *mode, char *file, size_t flen)
{
	if (snprintf(file, flen, "%s/%s", r->path, name) >= (int)flen) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return fopen(file, mode);
}

/* close f, reporting a failed write or close of file */
static int finish(FILE *f, const char *file, char *err, size_t errlen)
{
	int bad = ferror(f);
	int e = errno;
	if (fclose(f) != 0 && !bad)
		bad = 1, e = errno;
	if (bad)
		return util_fail(err, errlen, "%s: write failed: %s; check free disk space", file, strerror(util_os_error(e)));
	return 0;
}

static int write_model(struct rundir *r, const struct plan *p, char *err, size_t errlen)
{
	char file[RUNDIR_PATH_MAX + 32];
	FILE *f = open_in(r, "model.net", "w", file, sizeof file);
	if (!f)
		return util_fail(err, errlen, "%s: cannot create: %s", file, strerror(util_os_error(errno)));
	if (p->source)
		fputs(p->source, f);
	return finish(f, file, err, errlen);
}

static int write_run(struct rundir *r, const struct plan *p, const char *version, int argc, char **argv, int threads,
		     char *err, size_t errlen)
{
	char file[RUNDIR_PATH_MAX + 32], stamp[32], host[256], abs[PATH_MAX], cwd[PATH_MAX], commit[80];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (gethostname(host, sizeof host) != 0)
		host[0] = 0;
	host[sizeof host - 1] = 0;
	int dirty = -1;
	commit[0] = 0;
	/* the files it imports count too, each in the repository that holds it */
	if (early.on && early.p == p) {
		rundir_git_end();
		snprintf(commit, sizeof commit, "%s", early.commit);
		dirty = early.dirty;
	} else if (p->path) {
		git_state(p, commit, sizeof commit, &dirty);
	}

	FILE *f = open_in(r, "run.json", "w", file, sizeof file);
	if (!f)
		return util_fail(err, errlen, "%s: cannot create: %s", file, strerror(util_os_error(errno)));
	fputs("{\n  \"trainc_version\": ", f);
	put_string(f, version ? version : "");
	fputs(",\n  \"model\": ", f);
	put_string(f, p->model_name ? p->model_name : "");
	fprintf(f, ",\n  \"plan_hash\": \"%016llx\",\n  \"net_file\": ", (unsigned long long)p->hash);
	put_string(f, p->path ? p->path : "");
	fputs(",\n  \"net_file_abs\": ", f);
	if (p->path && realpath(p->path, abs))
		put_string(f, abs);
	else
		fputs("null", f);
	fputs(",\n  \"command\": [", f);
	for (int i = 0; i < argc; i++) {
		fputs(i ? ", " : "", f);
		put_string(f, argv[i] ? argv[i] : "");
	}
	fputs("],\n  \"cwd\": ", f);
	if (getcwd(cwd, sizeof cwd))
		put_string(f, cwd);
	else
		fputs("null", f);
	if (threads > 0)
		fprintf(f, ",\n  \"threads\": %d", threads);
	fprintf(f, ",\n  \"start_time\": \"%s\",\n  \"hostname\": ", stamp);
	put_string(f, host);
	fprintf(f, ",\n  \"pid\": %ld,\n  \"git_commit\": ", (long)getpid());
	if (commit[0])
		put_string(f, commit);
	else
		fputs("null", f);
	fprintf(f, ",\n  \"git_dirty\": %s\n}\n", dirty < 0 ? "null" : dirty ? "true" : "false");
	return finish(f, file, err, errlen);
}

int rundir_create(struct rundir *r, const char *dir, const struct plan *p, const char *version, int argc,
		  char **argv, int threads, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	r->t0 = util_now();
	if ((dir ? claim_named(r, dir, false, err, errlen) : claim_default(r, p->model_name, err, errlen)) != 0)
		return -1;
	if (write_model(r, p, err, errlen) != 0 || write_run(r, p, version, argc, argv, threads, err, errlen) != 0)
		return -1;
	char file[RUNDIR_PATH_MAX + 32];
	r->metrics = open_in(r, "metrics.jsonl", "a", file, sizeof file);
	if (!r->metrics)
		return util_fail(err, errlen, "%s: cannot create: %s", file, strerror(util_os_error(errno)));
	return 0;
}

int rundir_metric(struct rundir *r, const char *json_fields)
{
	if (!r->metrics)
		return util_fail(r->err, sizeof r->err, "%s/metrics.jsonl: not open; call rundir_create first", r->path);
	char time_s[32];
	snprintf(time_s, sizeof time_s, "%.3f", util_now() - r->t0);
	const char *sep = json_fields && *json_fields ? ", " : "";
	size_t need = strlen(time_s) + strlen(sep) + (json_fields ? strlen(json_fields) : 0) + 16;
	char *line = malloc(need);
	if (!line)
		return util_fail(r->err, sizeof r->err, "%s/metrics.jsonl: out of memory for a line", r->path);
	int n = snprintf(line, need, "{\"time\": %s%s%s}\n", time_s, sep, json_fields ? json_fields : "");
	/* one write of the whole line, straight to the file: a line that does
	 * not fit (a full disk) is cut back out, never left half written for
	 * the next one to be glued to */
	int fd = fileno(r->metrics);
	off_t end = lseek(fd, 0, SEEK_END);
	ssize_t wrote = write(fd, line, (size_t)n);
	int e = errno;
	free(line);
	if (wrote == n)
		return 0;
	if (wrote > 0 && end >= 0 && ftruncate(fd, end) != 0)
		e = errno;
	util_fail(r->err, sizeof r->err, "%s/metrics.jsonl: write failed: %s; check free disk space", r->path,
		  wrote < 0 ? strerror(e) : "the line did not fit");
	if (!r->warned) /* training goes on; once is enough to say so */
		fprintf(stderr, "trainc: warning: %s; training goes on, but metrics.jsonl lacks lines from here\n", r->err);
	r->warned = true;
	return -1;
}

int rundir_metric_step(struct rundir *r, int64_t step, int64_t epoch, double loss, double lr, double images_per_s)
{
	char fields[256], a[32], b[32], c[32];
	snprintf(fields, sizeof fields,
		 "\"kind\": \"step\", \"step\": %lld, \"epoch\": %lld, \"loss\": %s, \"lr\": %s, \"images_per_s\": %s",
		 (long long)step, (long long)epoch, number(a, sizeof a, loss), number(b, sizeof b, lr),
		 number(c, sizeof c, images_per_s));
	return rundir_metric(r, fields);
}

int rundir_metric_eval(struct rundir *r, int64_t step, int64_t epoch, double loss, double accuracy)
{
	char fields[224], a[32], b[32];
	snprintf(fields, sizeof fields, "\"kind\": \"eval\", \"step\": %lld, \"epoch\": %lld, \"loss\": %s, \"accuracy\": %s",
		 (long long)step, (long long)epoch, number(a, sizeof a, loss), number(b, sizeof b, accuracy));
	return rundir_metric(r, fields);
}

int rundir_metric_epoch(struct rundir *r, int64_t step, int64_t epoch, double loss, double images_per_s)
{
	char fields[224], a[32], b[32];
	snprintf(fields, sizeof fields, "\"kind\": \"epoch\", \"step\": %lld, \"epoch\": %lld, \"loss\": %s, \"images_per_s\": %s",
		 (long long)step, (long long)epoch, number(a, sizeof a, loss), number(b, sizeof b, images_per_s));
	return rundir_metric(r, fields);
}

const char *rundir_path(const struct rundir *r)
{
	return r->path;
}

void rundir_close(struct rundir *r)
{
	if (r->metrics)
		fclose(r->metrics);
	r->metrics = NULL;
}
