/* ckpt.c: writing and reading checkpoint folders atomically.
 * Integrity: every file's size and CRC-32 are in the manifest, checked
 * before anything is used; a mismatch names the file.  The manifest itself
 * is written last inside the temporary folder, so a folder with a valid
 * manifest is complete.
 */
#include "runtime/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/launch.h"
#include "runtime/model_hash.h"
#include "runtime/safetensors.h"
#include "runtime/util.h"
#include "runtime/weights.h"

enum { PATH_LEN = 4096, KEEP = 2 };

static const char *const files[] = { "weights.safetensors", "optimizer.safetensors", "state.json" };
enum { NFILES = 3 };

/* state.json's text: the position, the epoch's sums, the shuffle order,
 * the shard count of a sharded checkpoint (shards > 0) and the hashes. */
/* A double as JSON writes it, Python's way for the infinities. */
static const char *json_double(double v, char *b, size_t n)
{
	if (isinf(v))
		snprintf(b, n, v > 0 ? "Infinity" : "-Infinity");
	else
		snprintf(b, n, "%.17g", v);
	return b;
}

static void state_text(char *text, size_t n, const struct plan *p, const struct ckpt_state *st, int shards)
{
	char extra[256] = ""; /* the lines some checkpoints have */
	size_t at = 0;
	if (shards > 0)
		at += (size_t)snprintf(extra, sizeof extra, "  \"shards\": %d,\n", shards);
	if (p->train.sched.kind == LRS_PLATEAU) {
		const struct sched_plateau *pl = &st->plateau;
		char lr[32], best[32];
		snprintf(extra + at, sizeof extra - at,
			 "  \"plateau_lr\": %s,\n  \"plateau_best\": %s,\n  \"plateau_bad\": %" PRId64 ",\n  \"plateau_cooldown\": %" PRId64
			 ",\n  \"plateau_epochs\": %" PRId64 ",\n",
			 json_double(pl->lr, lr, sizeof lr), json_double(pl->best, best, sizeof best), pl->bad, pl->cooldown, pl->epochs);
	}
	if (p->train.sched.kind == LRS_ONE_CYCLE && st->cycle > 0)
		snprintf(extra + at, sizeof extra - at, "  \"one_cycle_total\": %" PRId64 ",\n", st->cycle);
	snprintf(text, n,
		 "{\n  \"epoch\": %" PRId64 ",\n  \"batch\": %" PRId64 ",\n  \"step\": %" PRId64 ",\n  \"world\": %d,\n  \"micro\": %" PRId64 ",\n"
		 "  \"loss_sum\": %.17g,\n  \"loss_n\": %.17g,\n  \"shuffle_order\": \"%s\",\n"
		 "%s  \"model_hash\": \"%016" PRIx64 "\",\n  \"plan_hash\": \"%016" PRIx64 "\"\n}\n",
		 st->epoch, st->batch, st->step, st->world, st->micro, st->loss_sum, st->loss_n,
		 st->philox_order ? "philox" : "randperm", extra, model_hash(p), p->hash);
}

/* out := a/b; false when it does not fit (paths are checked up front). */
static bool join(char *out, size_t n, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la + 1 + lb + 1 > n)
		return false;
	memcpy(out, a, la);
	out[la] = '/';
	memcpy(out + la + 1, b, lb + 1);
	return true;
}

static int fsync_path(const char *path, bool dir)
{
	int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

/* A text file of a checkpoint opened for reading, or NULL with errno
 * set and err saying why (util_open_file: never waits on a FIFO). */
static FILE *open_text(const char *path, const char *what_to_do, char *err, size_t errlen)
{
	struct stat st;
	int fd = util_open_file(path, &st, what_to_do, err, errlen);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
	if (fd >= 0 && !f) {
		int e = util_os_error(errno);
		close(fd);
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
		errno = e;
	}
	return f;
}

/* Size and CRC-32 of a file: 0, or -1 with err saying why. */
static int file_crc(const char *path, int64_t *size, uint32_t *crc, const char *what_to_do, char *err, size_t errlen)
{
	struct stat st;
	int fd = util_open_file(path, &st, what_to_do, err, errlen);
	if (fd < 0)
		return -1;
	unsigned char buf[1 << 16];
	uLong c = crc32(0L, Z_NULL, 0);
	int64_t n = 0;
	ssize_t k;
	while ((k = read(fd, buf, sizeof buf)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = util_os_error(errno);
			close(fd);
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
			return -1;
		}
		c = crc32(c, buf, (uInt)k);
		n += (int64_t)k;
	}
	close(fd);
	*size = n;
	*crc = (uint32_t)c;
	return 0;
}

/* A file just written into a save's folder: on disk, then its manifest line. */
static int sync_line(const char *path, const char *name, char *line, size_t n, char *err, size_t errlen)
{
	int64_t size;
	uint32_t crc;
	if (fsync_path(path, false) != 0) {
		snprintf(err, errlen, "%s: cannot sync: %s", path, strerror(errno));
		return -1;
	}
	if (file_crc(path, &size, &crc, NULL, err, errlen) != 0)
		return -1;
	snprintf(line, n, "%s %" PRId64 " %08" PRIx32 "\n", name, size, crc);
	return 0;
}

static int write_text(const char *path, const char *text, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0) {
		snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	if (fclose(f) != 0) {
		snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Remove a save's folder and its files, or a file.  A symbolic link is
 * removed itself: the files of the folder it leads to are not trainc's. */
static void remove_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		unlink(path);
		return;
	}
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		char sub[PATH_LEN];
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			join(sub, sizeof sub, path, e->d_name);
			unlink(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

/* The length of the step number at s as trainc writes it (%08: eight
 * digits, or more without a leading zero, so that longer means later), or
 * 0 where s does not start with one. */
static size_t step_digits(const char *s)
{
	size_t n = strspn(s, "0123456789");
	return n == 8 || (n > 8 && s[0] != '0') ? n : 0;
}

static bool is_step_name(const char *name)
{
	return strncmp(name, "step-", 5) == 0 && step_digits(name + 5) && !name[5 + step_digits(name + 5)];
}

/* Two step folders' names in the order of their steps: step-100000000
 * comes after step-99999999, which strcmp would put first. */
static int step_cmp(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	return la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
}

/* Whether dir/name is a checkpoint folder's name in trainc's format and a
 * folder (not a link, whose target's files remove_tree would delete). */
static bool is_step_dir(const char *dir, const char *name)
{
	char path[PATH_LEN];
	struct stat st;
	return is_step_name(name) && join(path, sizeof path, dir, name) && lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The newest step folder of dir before `below` (of all, when NULL), into
 * out; false when there is none. */
static bool newest_step(const char *dir, const char *below, char *out, size_t n)
{
	out[0] = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strlen(e->d_name) < n && (!below || step_cmp(e->d_name, below) < 0) && (!out[0] || step_cmp(e->d_name, out) > 0) &&
		    is_step_dir(dir, e->d_name))
			strcpy(out, e->d_name);
	if (d)
		closedir(d);
	return out[0] != 0;
}

/* The writer's PID in one of trainc's temporary names (.tmp-step-N-PID,
 * .tmp-shards-N-PID, .tmp-latest-PID), or 0 for any other name. */
static long temp_writer(const char *name)
{
	static const char *const kinds[] = { ".tmp-step-", ".tmp-shards-", ".tmp-latest-" };
	for (int i = 0; i < 3; i++) {
		if (strncmp(name, kinds[i], strlen(kinds[i])) != 0)
			continue;
		const char *s = name + strlen(kinds[i]);
		if (i < 2 && (!step_digits(s) || s[step_digits(s)] != '-'))
			return 0;
		if (i < 2)
			s += step_digits(s) + 1;
		size_t n = strspn(s, "0123456789");
		return n && n < 10 && !s[n] && s[0] != '0' ? strtol(s, NULL, 10) : 0;
	}
	return 0;
}

/* Remove the step folders older than the KEEP newest, and what saves of
 * processes that no longer run left behind.  Nothing else in dir is
 * touched: names that only look like trainc's may be the user's. */
static void prune(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	char keep[KEEP][64] = { { 0 } }; /* the newest step folders, newest first */
	char path[PATH_LEN];
	struct dirent *e;
	while ((e = readdir(d))) {
		if (util_pid_gone(temp_writer(e->d_name)) && join(path, sizeof path, dir, e->d_name)) {
			remove_tree(path);
			continue;
		}
		if (strlen(e->d_name) >= sizeof keep[0] || !is_step_dir(dir, e->d_name))
			continue;
		for (int i = 0; i < KEEP; i++) {
			if (!keep[i][0] || step_cmp(e->d_name, keep[i]) > 0) {
				if (i + 1 < KEEP)
					memmove(keep[i + 1], keep[i], (size_t)(KEEP - 1 - i) * sizeof keep[0]);
				strcpy(keep[i], e->d_name);
				break;
			}
		}
	}
	rewinddir(d);
	while (keep[KEEP - 1][0] && (e = readdir(d)))
		if (step_cmp(e->d_name, keep[KEEP - 1]) < 0 && is_step_dir(dir, e->d_name) && join(path, sizeof path, dir, e->d_name))
			remove_tree(path);
	closedir(d);
}

/* Rename the finished folder tmp to final.  A folder final already there
 * (the same step saved again, as by a resume that trains nothing) is
 * swapped out in one step, so `latest` never names a missing folder. */
static int put_in_place(const char *tmp, const char *final)
{
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
		remove_tree(tmp); /* now the old folder */
		return 0;
	}
	if (errno != ENOENT) /* a file system without exchange: the old way */
		remove_tree(final);
	return rename(tmp, final);
}

/* Whether the file latest holds exactly line. */
static bool holds(const char *latest, const char *line)
{
	char got[64] = "";
	FILE *f = open_text(latest, NULL, NULL, 0);
	if (f) {
		if (!fgets(got, sizeof got, f))
			got[0] = 0;
		fclose(f);
	}
	return !strcmp(got, line);
}

/* Point `latest` at step-N, atomically, then drop old saves.  Where
 * `latest` cannot be replaced (a full disk), the new folder is taken out
 * again: a checkpoint is either in place and named by `latest` or not
 * saved at all, as the caller then says. */
static int point_latest(const char *dir, int64_t step, char *err, size_t errlen)
{
	char latest[PATH_LEN], latest_tmp[PATH_LEN], line[64], leaf[64], why[512], final[PATH_LEN];
	join(latest, sizeof latest, dir, "latest");
	snprintf(leaf, sizeof leaf, ".tmp-latest-%d", (int)getpid());
	join(latest_tmp, sizeof latest_tmp, dir, leaf);
	snprintf(line, sizeof line, "step-%08" PRId64 "\n", step);
	int rc = write_text(latest_tmp, line, why, sizeof why);
	if (rc == 0 && rename(latest_tmp, latest) != 0)
		rc = util_fail(why, sizeof why, "%s", strerror(errno));
	if (rc != 0) {
		unlink(latest_tmp);
		if (holds(latest, line)) /* the same step saved again: latest names it already */
			return 0;
		snprintf(leaf, sizeof leaf, "step-%08" PRId64, step);
		join(final, sizeof final, dir, leaf);
		remove_tree(final);
		bool before = access(latest, F_OK) == 0;
		snprintf(err, errlen, "%s cannot be made to name %s (%s), so %s is removed again%s", latest, leaf, why, final,
			 before ? " and latest still names the checkpoint before it" : "; the folder holds no checkpoint yet");
		return -1;
	}
	if (fsync_path(dir, true) != 0) {
		snprintf(err, errlen, "%s: cannot sync the folder after updating latest: %s", dir, strerror(errno));
		return -1;
	}
	prune(dir);
	return 0;
}

int ckpt_save(const char *dir, const struct plan *p, const float *params, const float *optim, int64_t trainable, int k,
	      const struct ckpt_state *st, char *err, size_t errlen)
{
	char tmp[PATH_LEN], final[PATH_LEN], path[PATH_LEN], err2[512];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create the checkpoint directory: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(tmp, sizeof tmp, "%s/.tmp-step-%08" PRId64 "-%d", dir, st->step, (int)getpid());
	snprintf(final, sizeof final, "%s/step-%08" PRId64, dir, st->step);
	remove_tree(tmp);
	if (mkdir(tmp, 0755) != 0) {
		snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
		return -1;
	}
	join(path, sizeof path, tmp, files[0]);
	if (weights_save(p, params, path, err2, sizeof err2) != 0) {
		snprintf(err, errlen, "%s", err2);
		goto fail;
	}
	/* optimizer state: one tensor per plane, over the trainable elements */
	struct safetensors_tensor planes[8];
	char names[8][32];
	for (int j = 0; j < k && j < 8; j++) {
		snprintf(names[j], sizeof names[j], "state.%d", j);
		planes[j] = (struct safetensors_tensor){ names[j], 1, { trainable }, optim + (size_t)j * (size_t)trainable };
	}
	join(path, sizeof path, tmp, files[1]);
	struct safetensors_meta meta[1] = { { "format", "trainc-optimizer" } };
	if (safetensors_write(path, planes, k, meta, 1, err2, sizeof err2) != 0) {
		snprintf(err, errlen, "%s", err2);
		goto fail;
	}
	char text[1024];
	state_text(text, sizeof text, p, st, 0);
	join(path, sizeof path, tmp, files[2]);
	if (write_text(path, text, err, errlen) != 0)
		goto fail;
	/* the manifest last: its presence means the folder is complete */
	char manifest[1024] = "";
	for (int i = 0; i < NFILES; i++) {
		size_t at = strlen(manifest);
		join(path, sizeof path, tmp, files[i]);
		if (sync_line(path, files[i], manifest + at, sizeof manifest - at, err, errlen) != 0)
			goto fail;
	}
	join(path, sizeof path, tmp, "manifest.txt");
	if (write_text(path, manifest, err, errlen) != 0 || fsync_path(tmp, true) != 0)
		goto fail;
	if (put_in_place(tmp, final) != 0 || fsync_path(dir, true) != 0) {
		snprintf(err, errlen, "%s: cannot move the checkpoint into place: %s", final, strerror(errno));
		goto fail;
	}
	return point_latest(dir, st->step, err, errlen);
fail:
	remove_tree(tmp);
	return -1;
}

/* ---- sharded checkpoints ---- */

/* Every rank writes into the same folder, so it carries the job's PID,
 * not a rank's: a later save tells a dead job's leftover by it. */
static void tmp_name(char *out, size_t n, const char *dir, int64_t step)
{
	char leaf[64];
	snprintf(leaf, sizeof leaf, ".tmp-shards-%08" PRId64 "-%d", step, launch_job_pid());
	join(out, n, dir, leaf);
}

int ckpt_shard_begin(const char *dir, int64_t step, char *err, size_t errlen)
{
	char tmp[PATH_LEN];
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create the checkpoint directory: %s", dir, strerror(errno));
		return -1;
	}
	tmp_name(tmp, sizeof tmp, dir, step);
	remove_tree(tmp);
	if (mkdir(tmp, 0755) != 0) {
		snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
		return -1;
	}
	return 0;
}

int ckpt_shard_write(const char *dir, const struct plan *p, int64_t step, int rank, int world, const float *shard,
		     const float *optim, int64_t total, const int64_t *at, float *(*buffer)(void *ctx, int k), void *ctx,
		     char *err, size_t errlen)
{
	char tmp[PATH_LEN], path[PATH_LEN], leaf[64];
	tmp_name(tmp, sizeof tmp, dir, step);
	snprintf(leaf, sizeof leaf, "shard-%05d-of-%05d.safetensors", rank, world);
	join(path, sizeof path, tmp, leaf);
	int kopt = p->train.optim.state_per_param;
	int cap = p->nunits * (1 + kopt) + p->nparams + 1, n = 0;
	struct safetensors_typed *t = calloc((size_t)cap, sizeof *t);
	char (*names)[96] = calloc((size_t)cap, sizeof *names);
	if (!t || !names) {
		free(t);
		free(names);
		snprintf(err, errlen, "out of memory writing %s", path);
		return -1;
	}
	for (int u = 0; u < p->nunits; u++) {
		if (!p->units[u].shard)
			continue;
		for (int j = -1; j < kopt; j++) {
			if (j < 0)
				snprintf(names[n], sizeof names[n], "unit.%d.param", u);
			else
				snprintf(names[n], sizeof names[n], "unit.%d.state.%d", u, j);
			const float *src = j < 0 ? shard : optim + (size_t)j * (size_t)total;
			t[n] = (struct safetensors_typed){ names[n], ST_F32, 1, { p->units[u].shard }, src + at[u] };
			n++;
		}
	}
	/* the buffers (batch-norm statistics): each rank's own, as FSDP keeps
	 * them; a checkpoint of earlier trainc has rank 0's only */
	for (int k = 0; k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		if (pr->unit_offset >= 0)
			continue;
		snprintf(names[n], sizeof names[n], "buffer.%s", pr->name);
		t[n] = (struct safetensors_typed){ names[n], pr->dtype == DT_I64 ? ST_I64 : ST_F32, pr->shape.rank, { 0 }, buffer(ctx, k) };
		memcpy(t[n].shape, pr->shape.d, sizeof(int64_t) * (size_t)pr->shape.rank);
		n++;
	}
	char meta_world[32], meta_rank[32];
	snprintf(meta_world, sizeof meta_world, "%d", world);
	snprintf(meta_rank, sizeof meta_rank, "%d", rank);
	struct safetensors_meta meta[3] = { { "format", "trainc-fsdp-shard" }, { "world", meta_world }, { "rank", meta_rank } };
	int rc = safetensors_write_typed(path, t, n, meta, 3, err, errlen);
	free(t);
	free(names);
	return rc;
}

void ckpt_shard_abort(const char *dir, int64_t step)
{
	char tmp[PATH_LEN];
	tmp_name(tmp, sizeof tmp, dir, step);
	remove_tree(tmp);
}

int ckpt_shard_commit(const char *dir, const struct plan *p, const struct ckpt_state *st, char *err, size_t errlen)
{
	char tmp[PATH_LEN], final[PATH_LEN], path[PATH_LEN], leaf[64];
	tmp_name(tmp, sizeof tmp, dir, st->step);
	snprintf(leaf, sizeof leaf, "step-%08" PRId64, st->step);
	join(final, sizeof final, dir, leaf);
	char text[1024];
	state_text(text, sizeof text, p, st, st->world);
	join(path, sizeof path, tmp, "state.json");
	if (write_text(path, text, err, errlen) != 0)
		return -1;
	size_t cap = 64 + (size_t)st->world * 96;
	char *manifest = calloc(cap, 1);
	if (!manifest) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int r = -1; r < st->world; r++) {
		if (r < 0)
			snprintf(leaf, sizeof leaf, "state.json");
		else
			snprintf(leaf, sizeof leaf, "shard-%05d-of-%05d.safetensors", r, st->world);
		size_t len = strlen(manifest);
		join(path, sizeof path, tmp, leaf);
		if (sync_line(path, leaf, manifest + len, cap - len, err, errlen) != 0) {
			free(manifest);
			return -1;
		}
	}
	join(path, sizeof path, tmp, "manifest.txt");
	int rc = write_text(path, manifest, err, errlen);
	free(manifest);
	if (rc != 0 || fsync_path(tmp, true) != 0)
		return -1;
	if (put_in_place(tmp, final) != 0 || fsync_path(dir, true) != 0) {
		snprintf(err, errlen, "%s: cannot move the checkpoint into place: %s", final, strerror(errno));
		return -1;
	}
	return point_latest(dir, st->step, err, errlen);
}

/* Unsharded parameters and optimizer planes from a sharded checkpoint
 * written at `world` ranks. */
static int load_shards(const char *folder, const struct plan *p, int world, int rank, float *params, float *optim, int64_t trainable,
		       int k, char *err, size_t errlen)
{
	int64_t biggest = 1;
	for (int u = 0; u < p->nunits; u++) {
		int64_t padded = (p->units[u].numel + world - 1) / world * world;
		if (padded > biggest)
			biggest = padded;
	}
	float *full = calloc((size_t)biggest, 4);
	struct safetensors_file *sf = calloc((size_t)world, sizeof *sf);
	if (!full || !sf) {
		free(full);
		free(sf);
		util_os_error(ENOMEM);
		snprintf(err, errlen, "out of memory reading %s", folder);
		return -1;
	}
	int opened = 0, rc = 0;
	char path[PATH_LEN], leaf[64], name[96];
	for (int r = 0; r < world && rc == 0; r++, opened++) {
		snprintf(leaf, sizeof leaf, "shard-%05d-of-%05d.safetensors", r, world);
		join(path, sizeof path, folder, leaf);
		rc = safetensors_open(&sf[r], path, err, errlen);
		/* the rank the part was written by (absent before it was recorded):
		 * a renamed shard file would put its part in another's place */
		const char *by = rc == 0 ? safetensors_meta_get(&sf[r], "rank") : NULL;
		char want[16];
		snprintf(want, sizeof want, "%d", r);
		if (by && strcmp(by, want) != 0) {
			snprintf(err, errlen, "%s holds rank %s's part, not rank %d's; the shard files were renamed: give each its own name back",
				 path, by, r);
			rc = -1; /* the loop counts it opened, to be closed */
		}
	}
	for (int u = 0; u < p->nunits && rc == 0; u++) {
		const struct unit *un = &p->units[u];
		int64_t shard = (un->numel + world - 1) / world;
		if (!un->numel)
			continue;
		for (int j = -1; j < k && rc == 0; j++) {
			for (int r = 0; r < world && rc == 0; r++) {
				if (j < 0)
					snprintf(name, sizeof name, "unit.%d.param", u);
				else
					snprintf(name, sizeof name, "unit.%d.state.%d", u, j);
				int64_t shape[1] = { shard };
				rc = safetensors_read_f32(&sf[r], name, 1, shape, full + (size_t)r * (size_t)shard, err, errlen);
			}
			for (int q = 0; q < p->nparams && rc == 0; q++) {
				const struct param *pr = &p->params[q];
				if (pr->unit != u || pr->unit_offset < 0 || (j >= 0 && !pr->trainable))
					continue;
				float *dst = j < 0 ? params + pr->offset : optim + (size_t)j * (size_t)trainable + pr->offset;
				memcpy(dst, full + pr->unit_offset, (size_t)pr->numel * 4);
			}
		}
	}
	for (int q = 0; q < p->nparams && rc == 0; q++) {
		const struct param *pr = &p->params[q];
		if (pr->unit_offset >= 0)
			continue;
		snprintf(name, sizeof name, "buffer.%s", pr->name);
		int from = rank > 0 && rank < world && safetensors_find(&sf[rank], name) ? rank : 0;
		const struct safetensors_entry *en = safetensors_find(&sf[from], name);
		size_t bytes = pr->dtype == DT_I64 ? 8 : (size_t)pr->numel * 4;
		if (!en || en->end - en->begin != bytes) {
			snprintf(err, errlen, "%s: shard %d lacks the buffer '%s' (or its size differs)", folder, from, pr->name);
			rc = -1;
			break;
		}
		memcpy(params + pr->offset, en->data, bytes);
	}
	for (int r = 0; r < opened; r++)
		safetensors_close(&sf[r]);
	free(sf);
	free(full);
	return rc;
}

static int check_manifest(const char *folder, char *err, size_t errlen)
{
	char path[PATH_LEN];
	join(path, sizeof path, folder, "manifest.txt");
	FILE *f = open_text(path, "the checkpoint is damaged", err, errlen);
	if (!f) {
		if (errno == ENOENT)
			snprintf(err, errlen, "%s: missing: the checkpoint is incomplete", path);
		return -1;
	}
	char name[128];
	int64_t size;
	uint32_t crc;
	int seen = 0;
	while (fscanf(f, "%127s %" SCNd64 " %" SCNx32, name, &size, &crc) == 3) {
		int64_t got_size;
		uint32_t got_crc;
		char file[PATH_LEN];
		join(file, sizeof file, folder, name);
		if (file_crc(file, &got_size, &got_crc, "the checkpoint is damaged", err, errlen) != 0) {
			fclose(f);
			return -1;
		}
		if (got_size != size) {
			snprintf(err, errlen, "%s: %" PRId64 " bytes, but the manifest says %" PRId64 ": the file is truncated or was replaced",
				 file, got_size, size);
			fclose(f);
			return -1;
		}
		if (got_crc != crc) {
			snprintf(err, errlen, "%s: checksum %08" PRIx32 " does not match the manifest's %08" PRIx32 ": the file is corrupt", file,
				 got_crc, crc);
			fclose(f);
			return -1;
		}
		seen++;
	}
	fclose(f);
	if (seen < 2) {
		snprintf(err, errlen, "%s: lists %d files; the checkpoint is damaged", path, seen);
		return -1;
	}
	return 0;
}

static int64_t json_int(const char *text, const char *key, bool *ok)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *at = strstr(text, pat);
	if (!at) {
		*ok = false;
		return 0;
	}
	/* a whole number in range, ended by what ends a JSON value: 1e30 or
	 * 99999999999999999999 is damage, not 1 or INT64_MAX */
	char *end;
	errno = 0;
	long long v = strtoll(at + strlen(pat), &end, 10);
	end += strspn(end, " \t\r");
	if (errno == ERANGE || end == at + strlen(pat) || (*end != ',' && *end != '}' && *end != '\n'))
		*ok = false;
	return v;
}

/* The string value of "key" in text, into out; false if the key is absent
 * or its value is not a string that fits. */
static bool json_str(const char *text, const char *key, char *out, size_t n)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\"", key);
	const char *at = strstr(text, pat);
	if (!at)
		return false;
	at += strlen(pat);
	at += strspn(at, " \t\r\n");
	if (*at++ != ':')
		return false;
	at += strspn(at, " \t\r\n");
	if (*at++ != '"')
		return false;
	size_t len = strcspn(at, "\"");
	if (at[len] != '"' || len >= n)
		return false;
	memcpy(out, at, len);
	out[len] = 0;
	return true;
}

/* The first key state.json holds more than once, or NULL: a hand edit
 * that added a line would otherwise be read by its first copy alone. */
static const char *key_twice(const char *text)
{
	static const char *const keys[] = { "epoch",	"batch",	 "step",	"world",     "micro", "loss_sum",
					    "loss_n", "shuffle_order", "model_hash", "plan_hash", "shards", "plateau_lr",
					    "plateau_best", "plateau_bad", "plateau_cooldown", "plateau_epochs", "one_cycle_total" };
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		char pat[32];
		snprintf(pat, sizeof pat, "\"%s\"", keys[k]);
		const char *at = strstr(text, pat);
		if (at && strstr(at + 1, pat))
			return keys[k];
	}
	return NULL;
}

enum { STATE_LEN = 2048 };

/* A number's value of "key" in text (Infinity as Python writes it). */
static bool json_number(const char *text, const char *key, double *v)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *at = strstr(text, pat);
	if (!at)
		return false;
	char *end;
	*v = strtod(at + strlen(pat), &end);
	end += strspn(end, " \t\r");
	return end != at + strlen(pat) && (*end == ',' || *end == '}' || *end == '\n');
}

/* reduce_on_plateau's state; -1 where absent or no state a run reaches. */
static int read_plateau(const char *text, struct sched_plateau *pl)
{
	bool here = true;
	pl->bad = json_int(text, "plateau_bad", &here);
	pl->cooldown = json_int(text, "plateau_cooldown", &here);
	pl->epochs = json_int(text, "plateau_epochs", &here);
	here &= json_number(text, "plateau_lr", &pl->lr) && json_number(text, "plateau_best", &pl->best);
	return here && pl->lr >= 0 && isfinite(pl->lr) && !isnan(pl->best) && pl->bad >= 0 && pl->cooldown >= 0 && pl->epochs >= 0 ? 0 : -1;
}

/* After a message that dir's newest checkpoint cannot be resumed: the
 * newest step folder before `below` (or of all, when NULL) whose files
 * all check out, and how to resume from it, as --resume reads the folder
 * `latest` names.  Nothing is added where there is none. */
static void offer_whole(const char *dir, const char *below, char *err, size_t errlen)
{
	char prev[128], folder[PATH_LEN], why[1024];
	size_t at = strlen(err);
	if (newest_step(dir, below, prev, sizeof prev) && join(folder, sizeof folder, dir, prev) &&
	    check_manifest(folder, why, sizeof why) == 0)
		snprintf(err + at, errlen - at, "; %s is a whole checkpoint: write %s into %s/latest to resume from it", folder, prev, dir);
}

/* The newest checkpoint of dir: its folder, its state.json text and the
 * position in it, checked for completeness and for this model. */
static int read_state(const char *dir, const struct plan *p, char *folder, char *text, struct ckpt_state *st, char *err,
		      size_t errlen)
{
	char path[PATH_LEN], name[128] = "";
	join(path, sizeof path, dir, "latest");
	FILE *f = open_text(path, "make it a one-line file naming the step-* folder to resume from", err, errlen);
	if (!f && errno != ENOENT && errno != ENOTDIR)
		return -1; /* not a regular file, or unreadable: err says so */
	if (!f) {
		int e = errno;
		join(path, sizeof path, dir, "state.json");
		if (access(path, F_OK) == 0) /* one step's folder of a checkpoint */
			snprintf(err, errlen, "%s: is one step of a checkpoint; resume from the folder that holds it (its 'latest' names the step "
				 "to continue from)", dir);
		else if (access(dir, F_OK) != 0)
			snprintf(err, errlen, "%s: no such folder; --resume takes the folder a run's --save wrote", dir);
		else if (e == ENOTDIR && strlen(dir) > 12 && !strcasecmp(dir + strlen(dir) - 12, ".safetensors"))
			snprintf(err, errlen, "%s: is a weights file, not a checkpoint; start from it with --init %s", dir,
				 util_shell_word(dir, path, sizeof path));
		else if (e == ENOTDIR)
			snprintf(err, errlen, "%s: is a file, not a checkpoint; --resume takes the folder a run's --save wrote", dir);
		else {
			/* a step written whole, its 'latest' not (a run killed between
			 * the two, or a file removed by hand), or a run's record */
			snprintf(err, errlen, "%s: no checkpoint here (no 'latest' file)", dir);
			size_t at = strlen(err);
			offer_whole(dir, NULL, err, errlen);
			char w[PATH_LEN];
			if (strlen(err) == at && join(path, sizeof path, dir, "run.json") && access(path, F_OK) == 0 &&
			    join(w, sizeof w, dir, "weights.safetensors") && access(w, F_OK) == 0)
				snprintf(err + at, errlen - at, "; it is a run's record: start from its weights with --init %s",
					 util_shell_word(w, path, sizeof path));
			else if (strlen(err) == at)
				snprintf(err + at, errlen - at, "; --resume takes the folder a run's --save wrote");
		}
		return -1;
	}
	if (fscanf(f, "%127s", name) != 1 || !is_step_name(name)) {
		fclose(f);
		snprintf(err, errlen, "%s: does not name a checkpoint folder", path);
		return -1;
	}
	fclose(f);
	join(folder, PATH_LEN, dir, name);
	struct stat fst;
	if (stat(folder, &fst) != 0) { /* removed by hand: name what is left */
		char other[128];
		if (newest_step(dir, NULL, other, sizeof other))
			snprintf(err, errlen, "%s names %s, which is gone; the folder still holds %s: write that name into %s to resume "
				 "from it", path, name, other, path);
		else
			snprintf(err, errlen, "%s names %s, which is gone, and no other checkpoint is left in %s", path, name, dir);
		return -1;
	}
	if (!S_ISDIR(fst.st_mode)) {
		snprintf(err, errlen, "%s names %s, which is not a folder, so not a checkpoint", path, name);
		offer_whole(dir, NULL, err, errlen);
		return -1;
	}
	if (check_manifest(folder, err, errlen) != 0) {
		offer_whole(dir, name, err, errlen);
		return -1;
	}
	join(path, sizeof path, folder, "state.json");
	f = open_text(path, "the checkpoint is damaged", err, errlen);
	if (!f)
		return -1;
	size_t n = fread(text, 1, STATE_LEN - 1, f);
	bool longer = n == STATE_LEN - 1 && fgetc(f) != EOF;
	fclose(f);
	text[n] = 0;
	if (longer) {
		snprintf(err, errlen, "%s: more than %d bytes, longer than any state.json trainc writes; the checkpoint is damaged", path,
			 STATE_LEN - 1);
		return -1;
	}
	const char *twice = key_twice(text);
	if (twice) {
		snprintf(err, errlen, "%s: \"%s\" is given twice; the checkpoint is damaged", path, twice);
		return -1;
	}
	bool ok = true;
	st->epoch = json_int(text, "epoch", &ok);
	st->batch = json_int(text, "batch", &ok);
	st->step = json_int(text, "step", &ok);
	int64_t world = json_int(text, "world", &ok); /* an int: 4294967297 is damage, not 1 */
	st->micro = json_int(text, "micro", &ok);
	/* absent from checkpoints made before they were kept: the epoch's
	 * average then covers the batches after the resume */
	const char *ls = strstr(text, "\"loss_sum\":"), *ln = strstr(text, "\"loss_n\":");
	st->loss_sum = ls ? strtod(ls + 11, NULL) : 0;
	st->loss_n = ln ? strtod(ln + 9, NULL) : 0;
	if (!isfinite(st->loss_sum) || !(st->loss_n >= 0))
		st->loss_sum = st->loss_n = 0;
	/* absent from checkpoints made before trainc shuffled as torch.randperm:
	 * their runs go on in the order they began with */
	char order[16] = "philox";
	if (strstr(text, "\"shuffle_order\"") && (!json_str(text, "shuffle_order", order, sizeof order) ||
						    (strcmp(order, "randperm") && strcmp(order, "philox")))) {
		snprintf(err, errlen, "%s: shuffle_order is not \"randperm\" or \"philox\"; the checkpoint is damaged", path);
		return -1;
	}
	st->philox_order = !strcmp(order, "philox");
	if (p->train.sched.kind == LRS_PLATEAU && read_plateau(text, &st->plateau) != 0) {
		snprintf(err, errlen, "%s: reduce_on_plateau's state (plateau_lr, plateau_best, plateau_bad, plateau_cooldown, "
			 "plateau_epochs) is missing or out of range; the checkpoint is damaged", path);
		return -1;
	}
	/* absent from checkpoints made before the cycle's length was kept:
	 * their runs take it from the resumed run's length */
	st->cycle = 0;
	if (p->train.sched.kind == LRS_ONE_CYCLE && strstr(text, "\"one_cycle_total\":")) {
		bool here = true;
		st->cycle = json_int(text, "one_cycle_total", &here);
		if (!here || st->cycle < 1) {
			snprintf(err, errlen, "%s: one_cycle_total is not a whole number of at least 1; the checkpoint is damaged", path);
			return -1;
		}
	}
	const char *mh = strstr(text, "\"model_hash\": \"");
	if (!ok || !mh) {
		snprintf(err, errlen, "%s: a field is missing or not a whole number in range; the checkpoint is damaged", path);
		return -1;
	}
	if (st->epoch < 1 || st->batch < 0 || st->step < 0 || world < 1 || world > INT_MAX || st->micro < 1) {
		snprintf(err, errlen, "%s: a position no run reaches (epoch %lld, batch %lld, step %lld, %lld ranks, micro-batch %lld); "
			 "the checkpoint is damaged", path, (long long)st->epoch, (long long)st->batch, (long long)st->step, (long long)world,
			 (long long)st->micro);
		return -1;
	}
	st->world = (int)world;
	uint64_t hash = strtoull(mh + 15, NULL, 16);
	bool same = model_hash_matches(p, hash);
	char weights[PATH_LEN + 32], word[2 * PATH_LEN];
	snprintf(weights, sizeof weights, "%s/weights.safetensors", folder);
	if (!same && strstr(text, "\"shards\":")) {
		/* no weights file to offer: the other settings can write one */
		snprintf(err, errlen,
			 "%s was made by a different model or settings (hash %016" PRIx64 ", this run %016" PRIx64 "); resume with the same "
			 ".net file and --set options, or write its weights with those (trainc FILE.net --resume %s --set train.steps=%lld "
			 "--save weights.safetensors trains nothing more) and start from them with --init weights.safetensors",
			 folder, hash, model_hash(p), util_shell_word(dir, word, sizeof word), (long long)st->step);
		return -1;
	}
	if (!same) {
		snprintf(err, errlen,
			 "%s was made by a different model or settings (hash %016" PRIx64 ", this run %016" PRIx64 "); resume with the same "
			 ".net file and --set options, or start from its weights with --init %s",
			 folder, hash, model_hash(p), util_shell_word(weights, word, sizeof word));
		return -1;
	}
	/* the samples of a rank's micro-batch follow from the settings and
	 * the rank count the checkpoint was made at */
	const struct plan_train *tr = &p->train;
	int64_t micro = tr->global_batch ? (tr->micro_batch ? tr->micro_batch : tr->global_batch / world) : tr->batch;
	if (st->micro != micro || (tr->global_batch && tr->global_batch % world)) {
		snprintf(err, errlen, "%s: \"micro\": %lld at %lld rank%s, where these settings take %lld samples per micro-batch; the "
			 "checkpoint is damaged", path, (long long)st->micro, (long long)world, world == 1 ? "" : "s", (long long)micro);
		return -1;
	}
	return 0;
}

int ckpt_check(const char *dir, const struct plan *p, struct ckpt_state *st, char *err, size_t errlen)
{
	char folder[PATH_LEN], text[STATE_LEN];
	return read_state(dir, p, folder, text, st, err, errlen);
}

int ckpt_load(const char *dir, const struct plan *p, int rank, float *params, float *optim, int64_t trainable, int k,
	      struct ckpt_state *st, char *err, size_t errlen)
{
	char path[PATH_LEN], folder[PATH_LEN], text[STATE_LEN];
	if (read_state(dir, p, folder, text, st, err, errlen) != 0)
		return -1;
	int64_t shards = 0;
	if (strstr(text, "\"shards\":")) {
		bool ok2 = true;
		shards = json_int(text, "shards", &ok2);
		if (shards < 1 || shards > 65536) {
			snprintf(err, errlen, "%s: bad shard count %lld", folder, (long long)shards);
			return -1;
		}
		return load_shards(folder, p, (int)shards, rank, params, optim, trainable, k, err, errlen);
	}
	join(path, sizeof path, folder, "weights.safetensors");
	if (weights_load(p, params, path, true, err, errlen) != 0)
		return -1;
	join(path, sizeof path, folder, "optimizer.safetensors");
	struct safetensors_file sf;
	if (safetensors_open(&sf, path, err, errlen) != 0)
		return -1;
	for (int j = 0; j < k; j++) {
		char tn[32];
		int64_t shape[1] = { trainable };
		snprintf(tn, sizeof tn, "state.%d", j);
		if (safetensors_read_f32(&sf, tn, 1, shape, optim + (size_t)j * (size_t)trainable, err, errlen) != 0) {
			safetensors_close(&sf);
			return -1;
		}
	}
	safetensors_close(&sf);
	return 0;
}
