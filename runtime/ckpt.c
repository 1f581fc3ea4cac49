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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/safetensors.h"
#include "runtime/weights.h"

enum { PATH_LEN = 4096, KEEP = 2 };

static const char *const files[] = { "weights.safetensors", "optimizer.safetensors", "state.json" };
enum { NFILES = 3 };

/* Settings a resumed run may change: how long it trains and how it reports. */
static bool resumable_setting(const char *line, size_t len)
{
	static const char *const keys[] = { "steps", "epochs", "log_interval", "checkpoint_every", "test_batch" };
	while (len && (*line == ' ' || *line == '\t'))
		line++, len--;
	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		size_t n = strlen(keys[k]);
		if (len > n + 2 && strncmp(line, keys[k], n) == 0 && strncmp(line + n, " =", 2) == 0)
			return true;
	}
	return false;
}

uint64_t ckpt_model_hash(const struct plan *p)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *s = p->text;
	while (*s) {
		const char *e = strchr(s, '\n');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (!resumable_setting(s, len)) {
			for (size_t i = 0; i <= len && s[i]; i++) {
				h ^= (unsigned char)s[i];
				h *= 0x100000001b3ull;
			}
		}
		s += len + (e ? 1 : 0);
	}
	return h;
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

/* Size and CRC-32 of a file, or -1. */
static int file_crc(const char *path, int64_t *size, uint32_t *crc)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	unsigned char buf[1 << 16];
	uLong c = crc32(0L, Z_NULL, 0);
	int64_t n = 0;
	size_t k;
	while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
		c = crc32(c, buf, (uInt)k);
		n += (int64_t)k;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad)
		return -1;
	*size = n;
	*crc = (uint32_t)c;
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

static void remove_tree(const char *path)
{
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

/* Remove folders older than the KEEP newest complete ones, and leftovers of
 * interrupted saves. */
static void prune(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	char names[256][64];
	int n = 0;
	struct dirent *e;
	char path[PATH_LEN];
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, ".tmp-", 5) == 0) {
			join(path, sizeof path, dir, e->d_name);
			remove_tree(path);
		} else if (strncmp(e->d_name, "step-", 5) == 0 && n < 256 && strlen(e->d_name) < 64) {
			strcpy(names[n++], e->d_name);
		}
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
	for (int i = 0; i + KEEP < n; i++) {
		join(path, sizeof path, dir, names[i]);
		remove_tree(path);
	}
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
	snprintf(text, sizeof text,
		 "{\n  \"epoch\": %" PRId64 ",\n  \"batch\": %" PRId64 ",\n  \"step\": %" PRId64 ",\n  \"world\": %d,\n  \"micro\": %" PRId64 ",\n"
		 "  \"model_hash\": \"%016" PRIx64 "\",\n  \"plan_hash\": \"%016" PRIx64 "\"\n}\n",
		 st->epoch, st->batch, st->step, st->world, st->micro, ckpt_model_hash(p), p->hash);
	join(path, sizeof path, tmp, files[2]);
	if (write_text(path, text, err, errlen) != 0)
		goto fail;
	/* the manifest last: its presence means the folder is complete */
	char manifest[1024] = "";
	for (int i = 0; i < NFILES; i++) {
		int64_t size;
		uint32_t crc;
		join(path, sizeof path, tmp, files[i]);
		if (fsync_path(path, false) != 0 || file_crc(path, &size, &crc) != 0) {
			snprintf(err, errlen, "%s: cannot read back: %s", path, strerror(errno));
			goto fail;
		}
		size_t at = strlen(manifest);
		snprintf(manifest + at, sizeof manifest - at, "%s %" PRId64 " %08" PRIx32 "\n", files[i], size, crc);
	}
	join(path, sizeof path, tmp, "manifest.txt");
	if (write_text(path, manifest, err, errlen) != 0 || fsync_path(tmp, true) != 0)
		goto fail;
	remove_tree(final);
	if (rename(tmp, final) != 0 || fsync_path(dir, true) != 0) {
		snprintf(err, errlen, "%s: cannot move the checkpoint into place: %s", final, strerror(errno));
		goto fail;
	}
	/* point `latest` at it, atomically */
	char latest[PATH_LEN], latest_tmp[PATH_LEN], line[64];
	join(latest, sizeof latest, dir, "latest");
	snprintf(latest_tmp, sizeof latest_tmp, "%s/.tmp-latest-%d", dir, (int)getpid());
	snprintf(line, sizeof line, "step-%08" PRId64 "\n", st->step);
	if (write_text(latest_tmp, line, err, errlen) != 0)
		return -1;
	if (rename(latest_tmp, latest) != 0 || fsync_path(dir, true) != 0) {
		snprintf(err, errlen, "%s: cannot update: %s", latest, strerror(errno));
		return -1;
	}
	prune(dir);
	return 0;
fail:
	remove_tree(tmp);
	return -1;
}

static int check_manifest(const char *folder, char *err, size_t errlen)
{
	char path[PATH_LEN];
	join(path, sizeof path, folder, "manifest.txt");
	FILE *f = fopen(path, "r");
	if (!f) {
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
		if (file_crc(file, &got_size, &got_crc) != 0) {
			snprintf(err, errlen, "%s: cannot read: %s", file, strerror(errno));
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
	if (seen != NFILES) {
		snprintf(err, errlen, "%s: lists %d of the %d files; the checkpoint is damaged", path, seen, NFILES);
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
	return strtoll(at + strlen(pat), NULL, 10);
}

int ckpt_load(const char *dir, const struct plan *p, float *params, float *optim, int64_t trainable, int k,
	      struct ckpt_state *st, char *err, size_t errlen)
{
	char path[PATH_LEN], folder[PATH_LEN], name[128] = "";
	join(path, sizeof path, dir, "latest");
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: no checkpoint here (no 'latest' file: %s)", dir, strerror(errno));
		return -1;
	}
	if (fscanf(f, "%127s", name) != 1 || strncmp(name, "step-", 5) != 0 || strchr(name, '/')) {
		fclose(f);
		snprintf(err, errlen, "%s: does not name a checkpoint folder", path);
		return -1;
	}
	fclose(f);
	join(folder, sizeof folder, dir, name);
	if (check_manifest(folder, err, errlen) != 0)
		return -1;
	join(path, sizeof path, folder, "state.json");
	char text[2048] = "";
	f = fopen(path, "r");
	size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	bool ok = true;
	st->epoch = json_int(text, "epoch", &ok);
	st->batch = json_int(text, "batch", &ok);
	st->step = json_int(text, "step", &ok);
	st->world = (int)json_int(text, "world", &ok);
	st->micro = json_int(text, "micro", &ok);
	const char *mh = strstr(text, "\"model_hash\": \"");
	if (!ok || !mh) {
		snprintf(err, errlen, "%s: missing fields", path);
		return -1;
	}
	uint64_t hash = strtoull(mh + 15, NULL, 16);
	if (hash != ckpt_model_hash(p)) {
		snprintf(err, errlen,
			 "%s was made by a different model or settings (hash %016" PRIx64 ", this run %016" PRIx64 "); resume with the same "
			 ".net file and --set options, or start from its weights with --init %s/weights.safetensors",
			 folder, hash, ckpt_model_hash(p), folder);
		return -1;
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
