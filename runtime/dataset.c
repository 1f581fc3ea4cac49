/* dataset.c: IDX image/label datasets and synthetic data (see dataset.h).
 * An IDX dataset is one allocation: labels as int32 first (so they are
 * aligned), then the images as uint8; the labels are read as bytes into the
 * start of their own region and widened in place from the back.  Pixels
 * become floats through a 256-entry table computed with the same float32
 * operations as torchvision's ToTensor + Normalize, so the values are equal
 * bit for bit.
 * Does not: look at file names to decide compression (idx.c does that), or
 * download anything.
 * Invariant: every size product is checked for overflow before it is used.
 */
#include "runtime/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/filemap.h"
#include "runtime/idx.h"
#include "runtime/mnist_files.h"
#include "runtime/philox.h"
#include "runtime/util.h"

/* the rank field of the Philox key picks the substream of a synthetic set */
enum { SYNTH_INPUT = 0, SYNTH_TARGET = 1 };

static int mul_ok(int64_t a, int64_t b, int64_t *out)
{
	if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a))
		return 0;
	*out = a * b;
	return 1;
}

/* Decompressed copies of gzip'd IDX files, so a run after the first
 * starts without inflating them: $XDG_CACHE_HOME/trainc (or
 * ~/.cache/trainc), keyed by both files' paths, sizes and modification
 * times, checked by size and a trailer holding a hash of the contents
 * (a copy damaged on disk would otherwise train on whatever it holds); a
 * copy that fails the check, or holds a label out of range, makes the files
 * be read again and the copy rewritten.  Any failure only means no cache;
 * TRAINC_NO_CACHE turns it off.  A copy is only ever replaced by a rename,
 * never rewritten in place, so a run that has one mapped keeps reading it;
 * another program truncating it is said by filemap's handler. */
static bool cache_path(char *out, size_t n, const char *images, const char *labels)
{
	if (getenv("TRAINC_NO_CACHE"))
		return false;
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char base[4096];
	if (xdg && *xdg)
		snprintf(base, sizeof base, "%s/trainc", xdg);
	else if (home && *home)
		snprintf(base, sizeof base, "%s/.cache/trainc", home);
	else
		return false;
	struct stat a, b;
	char ra[4096], rb[4096];
	if (stat(images, &a) != 0 || stat(labels, &b) != 0 || !realpath(images, ra) || !realpath(labels, rb))
		return false;
	uint64_t h = 0xcbf29ce484222325ull;
	const char *parts[2] = { ra, rb };
	for (int i = 0; i < 2; i++)
		for (const char *s = parts[i]; *s; s++)
			h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	int64_t meta[6] = { (int64_t)a.st_size, (int64_t)a.st_mtim.tv_sec, (int64_t)a.st_mtim.tv_nsec,
			    (int64_t)b.st_size, (int64_t)b.st_mtim.tv_sec, (int64_t)b.st_mtim.tv_nsec };
	for (int i = 0; i < 6; i++)
		h = (h ^ (uint64_t)meta[i]) * 0x100000001b3ull;
	char parent[4096];
	snprintf(parent, sizeof parent, "%s", base);
	char *slash = strrchr(parent, '/');
	if (slash) {
		*slash = 0;
		mkdir(parent, 0755);
	}
	if (mkdir(base, 0755) != 0 && errno != EEXIST)
		return false;
	int w = snprintf(out, n, "%s/idx-%016llx.raw", base, (unsigned long long)h);
	return w > 0 && (size_t)w < n;
}

/* The copy's last 16 bytes: a hash of what comes before, then a mark. */
struct cache_trailer {
	uint64_t hash, mark;
};
static const uint64_t CACHE_MARK = 0x3263787464696174ull; /* "taidtxc2": the copy with a hash */

/* A 64-bit FNV-1a over 8-byte words in four interleaved lanes (so the
 * multiplies overlap: a 47 MB copy hashes in a few milliseconds), then the
 * bytes past the last whole group of 32. */
static uint64_t cache_hash(const uint8_t *p, size_t n)
{
	const uint64_t prime = 0x100000001b3ull;
	uint64_t h[4] = { 0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9ce484222325cbf2ull, 0x2325cbf29ce48422ull };
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		for (int k = 0; k < 4; k++) {
			uint64_t w;
			memcpy(&w, p + i + 8 * k, 8);
			h[k] = (h[k] ^ w) * prime;
		}
	}
	uint64_t r = h[0];
	for (int k = 1; k < 4; k++)
		r = (r ^ h[k]) * prime;
	for (; i < n; i++)
		r = (r ^ p[i]) * prime;
	return (r ^ n) * prime;
}

/* Map the cached copy privately (the label conversion writes copy-on-write
 * pages, never the file) once its trailer and hash check: the mapping or
 * NULL, also where something that is not a regular file has the copy's name. */
static void *cache_map(const char *path, size_t total)
{
	struct stat st;
	int fd = util_open_file(path, &st, NULL, NULL, 0);
	if (fd < 0)
		return NULL;
	void *m = NULL;
	struct cache_trailer tr;
	if ((size_t)st.st_size == total + sizeof tr) {
		m = filemap_map(fd, (size_t)st.st_size, PROT_READ | PROT_WRITE, path,
				"it is trainc's decompressed copy of a gzip'd data set: run again and trainc makes it anew from the .gz files");
		if (m == MAP_FAILED) {
			m = NULL;
		} else if (memcpy(&tr, (char *)m + total, sizeof tr), tr.mark != CACHE_MARK || tr.hash != cache_hash(m, total)) {
			filemap_unmap(m, (size_t)st.st_size);
			m = NULL;
		} else {
			futimens(fd, NULL); /* in use: not swept as unused */
		}
	}
	close(fd);
	return m;
}

enum { CACHE_UNUSED_DAYS = 30 };

/* idx-<16 hex digits>.raw: a copy's name, as cache_path makes it */
static bool cache_name(const char *name)
{
	size_t n = strlen(name);
	return n == 24 && strncmp(name, "idx-", 4) == 0 && strspn(name + 4, "0123456789abcdef") == 16 && !strcmp(name + 20, ".raw");
}

/* The PID of the writer of name, one of cache_write's temporary files
 * (COPY.PID.tmp, COPY a copy's name), or 0 for any other name. */
static long cache_writer(const char *name)
{
	enum { COPY_LEN = 24 };
	char copy[COPY_LEN + 1], *end;
	if (strlen(name) < COPY_LEN + 2 || name[COPY_LEN] != '.')
		return 0;
	memcpy(copy, name, COPY_LEN);
	copy[COPY_LEN] = 0;
	long pid = strtol(name + COPY_LEN + 1, &end, 10);
	return cache_name(copy) && end != name + COPY_LEN + 1 && strcmp(end, ".tmp") == 0 ? pid : 0;
}

/* Remove what writers that no longer run left behind (COPY.PID.tmp of a
 * run interrupted while writing a copy, of any copy: once another run has
 * written that copy, nothing would write it again and sweep it then), and
 * copies no run has used for CACHE_UNUSED_DAYS (cache_map dates each use):
 * those of files since moved, changed or deleted, which nothing would use
 * again.  path, the copy in use, stays. */
static void cache_sweep(const char *path)
{
	char dir[4200];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return;
	*slash = 0;
	const char *leaf = slash + 1;
	DIR *d = opendir(dir);
	struct dirent *de;
	time_t old = time(NULL) - (time_t)CACHE_UNUSED_DAYS * 24 * 3600;
	while (d && (de = readdir(d))) {
		struct stat st;
		if (cache_name(de->d_name) && strcmp(de->d_name, leaf) != 0 && fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && st.st_mtime < old) {
			unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		long pid = cache_writer(de->d_name);
		if (pid > 0 && util_pid_gone(pid)) /* a live writer's file is its own */
			unlinkat(dirfd(d), de->d_name, 0);
	}
	if (d)
		closedir(d);
}

static void cache_write(const char *path, const void *block, size_t total)
{
	struct stat st;
	if (!path[0] || (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
		return; /* not a copy of ours there (a folder, a FIFO): leave it, go without */
	cache_sweep(path);
	char tmp[4300];
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
	FILE *f = fopen(tmp, "wb");
	if (!f)
		return;
	struct cache_trailer tr = { cache_hash(block, total), CACHE_MARK };
	bool ok = fwrite(block, 1, total, f) == total && fwrite(&tr, sizeof tr, 1, f) == 1;
	ok &= fclose(f) == 0;
	if (!ok || rename(tmp, path) != 0)
		unlink(tmp);
}

/* Open an image/label pair and check their headers agree; the data is
 * not read.  Returns 0 with both open, or -1 with both closed. */
static int open_pair(struct idx_file *im, struct idx_file *lb, const char *images_path, const char *labels_path,
		     char *err, size_t errlen)
{
	if (idx_open(im, images_path, 3, err, errlen) != 0)
		return -1;
	if (idx_open(lb, labels_path, 1, err, errlen) != 0) {
		idx_close(im);
		return -1;
	}
	if (im->dims[1] < 1 || im->dims[2] < 1) {
		util_fail(err, errlen, "%s: byte 8: images of %lld x %lld pixels; the file is corrupt; re-download the dataset",
			  images_path, (long long)im->dims[1], (long long)im->dims[2]);
	} else if (lb->dims[0] != im->dims[0]) {
		util_fail(err, errlen, "%s: byte 4: image count %lld disagrees with label count %lld in %s; "
			  "re-download the dataset", images_path, (long long)im->dims[0], (long long)lb->dims[0], labels_path);
	} else {
		return 0;
	}
	idx_close(im);
	idx_close(lb);
	return -1;
}

/* The sample shape and count of a pair, from the headers alone. */
static void describe(struct dataset *ds, const struct idx_file *im, const char *images_path, int num_classes)
{
	ds->kind = DATASET_IDX;
	snprintf(ds->images_path, sizeof ds->images_path, "%s", images_path);
	ds->n = im->dims[0];
	ds->ndim = 3;
	ds->shape[0] = 1;
	ds->shape[1] = im->dims[1];
	ds->shape[2] = im->dims[2];
	ds->sample_numel = im->dims[1] * im->dims[2];
	ds->target = TARGET_CLASS;
	ds->num_classes = num_classes;
	ds->target_numel = 1;
}

/* use_cache false: read the files themselves (and write the cache anew). */
static int load_idx(struct dataset *ds, const char *images_path, const char *labels_path, int num_classes, float mean, float std,
		    bool use_cache, char *err, size_t errlen)
{
	memset(ds, 0, sizeof *ds);
	if (!isfinite(mean) || !isfinite(std) || std == 0.0f)
		return util_fail(err, errlen, "normalize: mean %g and std %g must be finite and std nonzero",
			    (double)mean, (double)std);
	if (num_classes < 1)
		return util_fail(err, errlen, "%s: num_classes %d must be at least 1", labels_path, num_classes);

	struct idx_file im, lb;
	if (open_pair(&im, &lb, images_path, labels_path, err, errlen) != 0)
		return -1;
	int64_t n = im.dims[0], h = im.dims[1], w = im.dims[2], pixels, label_bytes, total;
	/* im.count = n*h*w was checked by idx_open; the labels need 4n more bytes */
	pixels = im.count;
	if (!mul_ok(n, 4, &label_bytes) || label_bytes > INT64_MAX - pixels ||
	    (uint64_t)(total = label_bytes + pixels) > SIZE_MAX) {
		util_fail(err, errlen, "%s: byte 4: %lld images of %lld x %lld do not fit in memory",
		     images_path, (long long)n, (long long)h, (long long)w);
		goto bad;
	}
	char cache[4200] = "";
	void *block = NULL;
	if ((im.gzip || lb.gzip) && cache_path(cache, sizeof cache, images_path, labels_path) && total > 0 && use_cache) {
		block = cache_map(cache, (size_t)total);
		if (block)
			ds->map_len = (size_t)total + sizeof(struct cache_trailer);
	}
	bool cached = block != NULL;
	if (cached)
		cache_sweep(cache);
	if (!block)
		block = malloc(total ? (size_t)total : 1);
	if (!block) {
		util_os_error(ENOMEM);
		util_fail(err, errlen, "%s: out of memory allocating %lld bytes for %lld images and labels",
		     images_path, (long long)total, (long long)n);
		goto bad;
	}
	ds->labels = block;                       /* (n) */
	ds->images = (uint8_t *)block + label_bytes; /* (n, h, w) */
	if (!cached) {
		if (idx_read(&im, ds->images, err, errlen) != 0 || idx_read(&lb, (uint8_t *)ds->labels, err, errlen) != 0) {
			free(block);
			goto bad;
		}
		if (im.gzip || lb.gzip) {
			/* the labels' int32 room past their n bytes: zeros in the copy, not what malloc left */
			memset((uint8_t *)ds->labels + n, 0, (size_t)(label_bytes - n));
			cache_write(cache, block, (size_t)total);
		}
	}
	idx_close(&im);
	idx_close(&lb);
	const uint8_t *raw = (const uint8_t *)ds->labels;
	for (int64_t i = n - 1; i >= 0; i--) {
		uint8_t v = raw[i];
		if (v >= num_classes) {
			if (ds->map_len)
				filemap_unmap(block, ds->map_len);
			else
				free(block);
			memset(ds, 0, sizeof *ds);
			if (cached) /* the copy is damaged, not (as far as we know) the file: read the file */
				return load_idx(ds, images_path, labels_path, num_classes, mean, std, false, err, errlen);
			return util_fail(err, errlen, "%s: byte %lld: label %u of sample %lld is not below the %d classes; "
				    "the file is corrupt or not this dataset's", labels_path,
				    (long long)(lb.header_len + i), v, (long long)i, num_classes);
		}
		ds->labels[i] = v;
	}
	describe(ds, &im, images_path, num_classes);
	for (int p = 0; p < 256; p++)
		ds->lut[p] = ((float)p / 255.0f - mean) / std;
	return 0;
bad:
	idx_close(&im);
	idx_close(&lb);
	memset(ds, 0, sizeof *ds);
	return -1;
}

int dataset_idx(struct dataset *ds, const char *images_path, const char *labels_path, int num_classes, float mean, float std,
		char *err, size_t errlen)
{
	return load_idx(ds, images_path, labels_path, num_classes, mean, std, true, err, errlen);
}

int dataset_mnist(struct dataset *ds, const char *root, const char *split, float mean, float std,
		  char *err, size_t errlen)
{
	char images[4200], labels[4200];
	memset(ds, 0, sizeof *ds);
	if (mnist_find(root, split, images, labels, sizeof images, err, errlen) != 0)
		return -1;
	return dataset_idx(ds, images, labels, 10, mean, std, err, errlen);
}

int dataset_mnist_peek(struct dataset *ds, const char *root, const char *split, char *err, size_t errlen)
{
	char images[4200], labels[4200];
	struct idx_file im, lb;
	memset(ds, 0, sizeof *ds);
	if (mnist_find(root, split, images, labels, sizeof images, err, errlen) != 0 ||
	    open_pair(&im, &lb, images, labels, err, errlen) != 0)
		return -1;
	idx_close(&im);
	idx_close(&lb);
	describe(ds, &im, images, 10);
	return 0;
}

static int check_shape(const char *what, int ndim, const int64_t *shape, int64_t *numel, char *err, size_t errlen)
{
	if (ndim < 1 || ndim > DATASET_MAX_DIMS)
		return util_fail(err, errlen, "synthetic data: %s has %d dimensions; use 1 to %d", what, ndim, DATASET_MAX_DIMS);
	int64_t p = 1;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 1)
			return util_fail(err, errlen, "synthetic data: %s dimension %d is %lld; sizes must be positive",
				    what, i, (long long)shape[i]);
		if (!mul_ok(p, shape[i], &p))
			return util_fail(err, errlen, "synthetic data: %s shape overflows a 64-bit element count", what);
	}
	*numel = p;
	return 0;
}

int dataset_synthetic(struct dataset *ds, const struct synthetic_spec *spec, char *err, size_t errlen)
{
	memset(ds, 0, sizeof *ds);
	int64_t total;
	if (spec->samples < 0)
		return util_fail(err, errlen, "synthetic data: samples %lld must not be negative", (long long)spec->samples);
	if (check_shape("input", spec->ndim, spec->shape, &ds->sample_numel, err, errlen) != 0)
		return -1;
	if (!mul_ok(spec->samples, ds->sample_numel, &total))
		return util_fail(err, errlen, "synthetic data: %lld samples of %lld values overflow the stream counter",
			    (long long)spec->samples, (long long)ds->sample_numel);
	if (spec->target == TARGET_CLASS) {
		if (spec->num_classes < 1)
			return util_fail(err, errlen, "synthetic data: classes(%d) must be at least 1", spec->num_classes);
		ds->num_classes = spec->num_classes;
		ds->target_numel = 1;
	} else if (spec->target == TARGET_VECTOR) {
		if (check_shape("target", spec->target_ndim, spec->target_shape, &ds->target_numel, err, errlen) != 0)
			return -1;
		if (!mul_ok(spec->samples, ds->target_numel, &total))
			return util_fail(err, errlen, "synthetic data: %lld targets of %lld values overflow the stream counter",
				    (long long)spec->samples, (long long)ds->target_numel);
		ds->target_ndim = spec->target_ndim;
		memcpy(ds->target_shape, spec->target_shape, sizeof ds->target_shape);
	} else {
		return util_fail(err, errlen, "synthetic data: unknown target kind %d", (int)spec->target);
	}
	ds->kind = DATASET_SYNTHETIC;
	ds->target = spec->target;
	ds->n = spec->samples;
	ds->ndim = spec->ndim;
	memcpy(ds->shape, spec->shape, sizeof ds->shape);
	ds->seed = spec->seed;
	ds->split = spec->split;
	if (spec->input_high < 0 || spec->input_high > (1 << 24))
		return util_fail(err, errlen, "synthetic data: randint(%lld, ...) must draw below 2^24", (long long)spec->input_high);
	ds->input_high = spec->input_high;
	ds->input_uniform = spec->input_uniform;
	ds->target_uniform = spec->target_uniform;
	return 0;
}

size_t dataset_target_bytes(const struct dataset *ds, int b)
{
	return (size_t)b * (size_t)ds->target_numel * (ds->target == TARGET_CLASS ? sizeof(int32_t) : sizeof(float));
}

static void fill_idx(const struct dataset *ds, const int64_t *idx, int b, float *x, int32_t *y)
{
	int64_t m = ds->sample_numel;
	for (int s = 0; s < b; s++) {
		const uint8_t *src = ds->images + idx[s] * m; /* (h, w) */
		float *dst = x + (int64_t)s * m;              /* (1, h, w) */
		for (int64_t j = 0; j < m; j++)
			dst[j] = ds->lut[src[j]];
		y[s] = ds->labels[idx[s]];
	}
}

/* Sample i's class: multiply-shift maps 32 random bits onto 0..C-1
 * without a division. */
static int32_t synthetic_class(const struct dataset *ds, struct rng *tg, int64_t i)
{
	uint64_t u = rng_u32(tg, (uint64_t)i);
	return (int32_t)((u * (uint64_t)ds->num_classes) >> 32);
}

static void fill_synthetic(const struct dataset *ds, const int64_t *idx, int b, float *x, void *y)
{
	struct rng in = rng_stream(ds->seed, RNG_DATA, SYNTH_INPUT, ds->split);
	struct rng tg = rng_stream(ds->seed, RNG_DATA, SYNTH_TARGET, ds->split);
	int64_t m = ds->sample_numel, k = ds->target_numel;
	for (int s = 0; s < b; s++) {
		uint64_t base = (uint64_t)idx[s] * (uint64_t)m;
		if (ds->input_high > 0) {
			/* token ids, exact in a float below 2^24 */
			for (int64_t j = 0; j < m; j++)
				x[(int64_t)s * m + j] = (float)((rng_u32(&in, base + (uint64_t)j) * (uint64_t)ds->input_high) >> 32);
		} else {
			for (int64_t j = 0; j < m; j++)
				x[(int64_t)s * m + j] = ds->input_uniform ? rng_uniform(&in, base + (uint64_t)j)
									  : rng_normal(&in, base + (uint64_t)j);
		}
		if (ds->target == TARGET_CLASS) {
			((int32_t *)y)[s] = synthetic_class(ds, &tg, idx[s]);
		} else {
			float *t = (float *)y + (int64_t)s * k;
			for (int64_t j = 0; j < k; j++) {
				uint64_t at = (uint64_t)idx[s] * (uint64_t)k + (uint64_t)j;
				t[j] = ds->target_uniform ? rng_uniform(&tg, at) : rng_normal(&tg, at);
			}
		}
	}
}

int dataset_fill(const struct dataset *ds, const int64_t *idx, int b, float *x, void *y)
{
	for (int s = 0; s < b; s++)
		if (idx[s] < 0 || idx[s] >= ds->n)
			return -1;
	switch (ds->kind) {
	case DATASET_IDX:
		fill_idx(ds, idx, b, x, y);
		return 0;
	case DATASET_SYNTHETIC:
		fill_synthetic(ds, idx, b, x, y);
		return 0;
	case DATASET_NPY:
		dataset_npy_fill(ds, idx, b, x, y);
		return 0;
	}
	return -1;
}

int64_t dataset_count_label(const struct dataset *ds, int32_t v)
{
	if (ds->target != TARGET_CLASS)
		return 0;
	int64_t k = 0;
	struct rng tg = rng_stream(ds->seed, RNG_DATA, SYNTH_TARGET, ds->split);
	for (int64_t i = 0; i < ds->n; i++)
		k += (ds->kind == DATASET_SYNTHETIC ? synthetic_class(ds, &tg, i) : ds->labels[i]) == v;
	return k;
}

int64_t dataset_negative_target(const struct dataset *ds)
{
	enum { CHUNK = 64 };
	if (ds->target == TARGET_CLASS || ds->n <= 0)
		return -1;
	float *x = malloc((size_t)(CHUNK * ds->sample_numel) * sizeof *x), *y = malloc((size_t)(CHUNK * ds->target_numel) * sizeof *y);
	int64_t found = -1, idx[CHUNK];
	for (int64_t at = 0; x && y && found < 0 && at < ds->n; at += CHUNK) {
		int b = ds->n - at < CHUNK ? (int)(ds->n - at) : CHUNK;
		for (int i = 0; i < b; i++)
			idx[i] = at + i;
		if (dataset_fill(ds, idx, b, x, y) != 0)
			break;
		for (int64_t k = 0; k < b * ds->target_numel && found < 0; k++)
			if (y[k] < 0)
				found = at + k / ds->target_numel;
	}
	free(x);
	free(y);
	return found;
}

void dataset_close(struct dataset *ds)
{
	/* labels start the one allocation (or mapping); images point inside it */
	if (ds->map_len)
		filemap_unmap(ds->labels, ds->map_len);
	else
		free(ds->labels);
	for (int i = 0; i < 2; i++) {
		if (ds->npy_map[i])
			filemap_unmap(ds->npy_map[i], ds->npy_len[i]);
		free(ds->npy_own[i]);
	}
	free(ds->ids);
	free(ds->npy_norm);
	memset(ds, 0, sizeof *ds);
}
