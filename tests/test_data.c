/* test_data.c: IDX files, datasets, the sampler and the loader thread.
 * Fixtures are written by the test itself into a fresh mkdtemp directory
 * (raw and gzip IDX files, good and broken, and a tiny torchvision layout);
 * the real Fashion-MNIST files come from the Debian package that configure
 * installs.  Expected values from PyTorch (DistributedSampler orders,
 * ToTensor + Normalize floats, Fashion-MNIST labels) were computed once with
 * torch 1.13 and are written here as constants.
 * Does not: need Python or a network.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/dataset.h"
#include "runtime/npy.h"
#include "runtime/idx.h"
#include "runtime/loader.h"
#include "runtime/sampler.h"
#include "tests/check.h"

#define FASHION "/usr/share/datasets/fashion-mnist"

static char tmp[256];
static char err[1024];

static const char *at(const char *name)
{
	static char buf[8][512];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
	return buf[k];
}

static void write_bytes(const char *path, const void *p, size_t n, int gz)
{
	if (gz) {
		gzFile g = gzopen(path, "wb");
		if (!g || (n && gzwrite(g, p, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
			fprintf(stderr, "cannot write fixture %s\n", path);
			exit(1);
		}
		return;
	}
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "cannot write fixture %s\n", path);
		exit(1);
	}
}

/* An IDX file of unsigned bytes: header for dims, then `data_len` bytes. */
static size_t make_idx(uint8_t *buf, int ndim, const uint32_t *dims, const uint8_t *data, size_t data_len)
{
	buf[0] = 0, buf[1] = 0, buf[2] = 8, buf[3] = (uint8_t)ndim;
	for (int i = 0; i < ndim; i++) {
		buf[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
		buf[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
		buf[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
		buf[7 + 4 * i] = (uint8_t)dims[i];
	}
	memcpy(buf + 4 + 4 * ndim, data, data_len);
	return 4 + 4 * (size_t)ndim + data_len;
}

static long long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int contains(const char *s, const char *sub)
{
	if (!strstr(s, sub)) {
		fprintf(stderr, "  message: %s\n  lacks:   %s\n", s, sub);
		return 0;
	}
	return 1;
}

/* idx_open + idx_read of path into dst (cap bytes); returns 0 or -1 with err set */
static int load(const char *path, int ndim, uint8_t *dst, size_t cap, struct idx_file *f)
{
	if (idx_open(f, path, ndim, err, sizeof err) != 0)
		return -1;
	if ((uint64_t)f->count > cap) {
		snprintf(err, sizeof err, "test fixture %s holds more than %zu bytes", path, cap);
		idx_close(f);
		return -2;
	}
	int rc = idx_read(f, dst, err, sizeof err);
	idx_close(f);
	return rc;
}

static void test_idx_raw_and_gzip(void)
{
	uint8_t buf[256], got[64];
	uint8_t labels[5] = { 9, 0, 3, 7, 1 }, pixels[12];
	for (int i = 0; i < 12; i++)
		pixels[i] = (uint8_t)(20 * i + 1);
	struct idx_file f;
	size_t n = make_idx(buf, 1, (uint32_t[]){ 5 }, labels, 5);
	write_bytes(at("l-raw"), buf, n, 0);
	CHECK(load(at("l-raw"), 1, got, sizeof got, &f) == 0);
	CHECK(f.ndim == 1 && f.dims[0] == 5 && f.count == 5 && f.header_len == 8 && !f.gzip);
	CHECK(memcmp(got, labels, 5) == 0);

	n = make_idx(buf, 3, (uint32_t[]){ 3, 2, 2 }, pixels, 12);
	write_bytes(at("i.gz"), buf, n, 1);
	memset(got, 0, sizeof got);
	CHECK(load(at("i.gz"), 3, got, sizeof got, &f) == 0);
	CHECK(f.gzip && f.ndim == 3 && f.dims[0] == 3 && f.dims[1] == 2 && f.dims[2] == 2 && f.count == 12);
	CHECK(memcmp(got, pixels, 12) == 0);

	/* compression is told by the bytes, not the name */
	write_bytes(at("gz-named-plain"), buf, n, 1);
	CHECK(load(at("gz-named-plain"), 3, got, sizeof got, &f) == 0 && f.gzip);
	write_bytes(at("plain-named.gz"), buf, n, 0);
	CHECK(load(at("plain-named.gz"), 3, got, sizeof got, &f) == 0 && !f.gzip);
	CHECK(memcmp(got, pixels, 12) == 0);
	/* rank 0 asks for any rank */
	CHECK(load(at("plain-named.gz"), 0, got, sizeof got, &f) == 0 && f.ndim == 3);
}

static void expect_fail(const char *path, int ndim, const char *sub)
{
	static uint8_t got[1 << 20];
	struct idx_file f;
	err[0] = 0;
	CHECK(load(path, ndim, got, sizeof got, &f) == -1);
	CHECK(contains(err, path));
	CHECK(contains(err, sub));
}

static void test_idx_errors(void)
{
	uint8_t buf[512], data[64] = { 0 };
	size_t n;
	expect_fail(at("missing"), 1, "cannot open: No such file or directory; check the path or download the dataset");

	n = make_idx(buf, 3, (uint32_t[]){ 1, 2, 2 }, data, 4);
	write_bytes(at("images-as-labels"), buf, n, 0);
	expect_fail(at("images-as-labels"), 1, "byte 0: magic 0x00000803 is not an IDX file of unsigned bytes "
		    "with 1 dimension (expected 0x00000801)");
	buf[2] = 0x0d; /* float elements */
	write_bytes(at("floats"), buf, n, 0);
	expect_fail(at("floats"), 3, "magic 0x00000d03 is not an IDX file");

	n = make_idx(buf, 1, (uint32_t[]){ 5 }, data, 3);
	write_bytes(at("short"), buf, n, 0);
	expect_fail(at("short"), 1, "byte 11: file has 11 bytes but its header (5) needs 13; the file is truncated");
	write_bytes(at("short.gz"), buf, n, 1);
	expect_fail(at("short.gz"), 1, "byte 11 (decompressed): data ends after 3 of the 5 bytes its header (5) "
		    "promises");

	n = make_idx(buf, 1, (uint32_t[]){ 5 }, data, 7);
	write_bytes(at("long"), buf, n, 0);
	expect_fail(at("long"), 1, "byte 13: 2 bytes of trailing data after the 13 bytes its header (5) describes");
	write_bytes(at("long.gz"), buf, n, 1);
	expect_fail(at("long.gz"), 1, "byte 13 (decompressed): trailing data after the 13 bytes");

	n = make_idx(buf, 3, (uint32_t[]){ 0xffffffffu, 0xffffffffu, 0xffffffffu }, data, 0);
	write_bytes(at("huge"), buf, n, 0);
	expect_fail(at("huge"), 3, "byte 4: dimensions 4294967295 x 4294967295 x 4294967295 overflow");
	n = make_idx(buf, 3, (uint32_t[]){ 4000000, 1000, 1000 }, data, 16);
	write_bytes(at("bomb.gz"), buf, n, 1);
	expect_fail(at("bomb.gz"), 3, "promises 4000000000000 bytes but a");

	write_bytes(at("empty"), buf, 0, 0);
	expect_fail(at("empty"), 1, "byte 0: file ends inside the 4-byte IDX magic");
	n = make_idx(buf, 3, (uint32_t[]){ 1, 2, 2 }, data, 0);
	write_bytes(at("cut-header"), buf, 10, 0);
	expect_fail(at("cut-header"), 3, "byte 10: file ends inside the header's 3 dimensions");
	CHECK(mkdir(at("a-dir"), 0700) == 0);
	expect_fail(at("a-dir"), 1, "not a regular file");

	/* a flipped CRC in the gzip trailer is caught, whether zlib meets it
	 * reading the header (small file) or the data (large file) */
	n = make_idx(buf, 1, (uint32_t[]){ 5 }, data, 5);
	write_bytes(at("crc.gz"), buf, n, 1);
	FILE *f = fopen(at("crc.gz"), "r+b");
	CHECK(f && fseek(f, -8, SEEK_END) == 0);
	int c = fgetc(f);
	CHECK(fseek(f, -8, SEEK_END) == 0 && fputc(c ^ 0xff, f) != EOF && fclose(f) == 0);
	char want[256];
	snprintf(want, sizeof want, "crc.gz: compressed byte %lld: corrupt gzip data: incorrect data check; the file is "
		 "damaged; re-download the dataset", (long long)file_size(at("crc.gz")) - 8);
	expect_fail(at("crc.gz"), 1, want);

	/* the same where the data does not fit zlib's buffer */
	enum { BIG = 300000 };
	static uint8_t big[BIG + 16];
	uint32_t lcg = 1;
	for (int i = 0; i < BIG; i++)
		lcg = lcg * 1664525u + 1013904223u, big[i] = (uint8_t)(lcg >> 24);
	static uint8_t file[BIG + 32];
	n = make_idx(file, 1, (uint32_t[]){ BIG }, big, BIG);
	write_bytes(at("big-crc.gz"), file, n, 1);
	f = fopen(at("big-crc.gz"), "r+b");
	CHECK(f && fseek(f, -8, SEEK_END) == 0);
	c = fgetc(f);
	CHECK(fseek(f, -8, SEEK_END) == 0 && fputc(c ^ 0xff, f) != EOF && fclose(f) == 0);
	snprintf(want, sizeof want, "big-crc.gz: compressed byte %lld: corrupt gzip data: incorrect data check",
		 (long long)file_size(at("big-crc.gz")) - 8);
	expect_fail(at("big-crc.gz"), 1, want);

	/* a gzip file cut in the middle */
	write_bytes(at("cut.gz"), file, n, 1);
	CHECK(truncate(at("cut.gz"), 150000) == 0);
	expect_fail(at("cut.gz"), 1, "(decompressed): data ends after ");
	CHECK(contains(err, "of the 300000 bytes its header (300000) promises: the gzip data stops at compressed byte 150000; "
		       "the file is truncated; re-download the dataset"));
	/* a FIFO is refused, not opened: open() of one waits for a writer for ever */
	CHECK(mkfifo(at("fifo"), 0600) == 0);
	alarm(30);
	expect_fail(at("fifo"), 1, "fifo is not a regular file (a FIFO); check the path or download the dataset");
	alarm(0);
}

/* The end of a gzip file: a cut trailer and bytes after the gzip data are
 * damage (before, zlib's gzread passed over both), while members written
 * one after another are read as gunzip reads them. */
static void test_idx_gzip_end(void)
{
	uint8_t buf[64], data[5] = { 9, 0, 3, 7, 1 }, got[16];
	size_t n = make_idx(buf, 1, (uint32_t[]){ 5 }, data, 5);
	char want[256];
	struct idx_file f;
	for (int cut = 1; cut <= 8; cut++) { /* into the CRC-32 and length */
		write_bytes(at("trailer.gz"), buf, n, 1);
		long long size = file_size(at("trailer.gz"));
		CHECK(truncate(at("trailer.gz"), size - cut) == 0);
		snprintf(want, sizeof want, "trailer.gz: compressed byte %lld: the file ends inside its gzip data, after all 13 "
			 "bytes the header describes (the CRC-32 and length that check them are cut off); the file is truncated; "
			 "re-download the dataset", size - cut);
		expect_fail(at("trailer.gz"), 1, want);
	}
	static const struct { const char *bytes; size_t len; } tails[] = { { "garbage!", 8 }, { "\0\0\0\0\0", 5 }, { "\x1f", 1 } };
	for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
		write_bytes(at("tail.gz"), buf, n, 1);
		long long size = file_size(at("tail.gz"));
		FILE *fp = fopen(at("tail.gz"), "ab");
		CHECK(fp && fwrite(tails[i].bytes, 1, tails[i].len, fp) == tails[i].len && fclose(fp) == 0);
		snprintf(want, sizeof want, "tail.gz: compressed byte %lld: %zu byte%s after the end of the gzip data %s not another "
			 "gzip member; the file is damaged; re-download the dataset", size, tails[i].len, tails[i].len == 1 ? "" : "s",
			 tails[i].len == 1 ? "is" : "are");
		expect_fail(at("tail.gz"), 1, want);
	}
	/* two members, the data split between them, and an empty third */
	write_bytes(at("m1.gz"), buf, 10, 1);
	write_bytes(at("m2.gz"), buf + 10, n - 10, 1);
	write_bytes(at("m3.gz"), buf, 0, 1);
	FILE *out = fopen(at("members.gz"), "wb");
	CHECK(out != NULL);
	for (int i = 1; out && i <= 3; i++) {
		char name[16], part[64];
		snprintf(name, sizeof name, "m%d.gz", i);
		FILE *in = fopen(at(name), "rb");
		size_t k = in ? fread(part, 1, sizeof part, in) : 0;
		CHECK(in && k > 0 && fwrite(part, 1, k, out) == k);
		if (in)
			fclose(in);
	}
	CHECK(out && fclose(out) == 0);
	memset(got, 0, sizeof got);
	CHECK(load(at("members.gz"), 1, got, sizeof got, &f) == 0 && f.gzip && memcmp(got, data, 5) == 0);
}

/* a tiny MNIST-like pair: n images of 28 x 28, pixel (i, j) = (i + j + s) % 256 */
static void make_mnist(const char *dir, const char *prefix, int n, int nlabels, int bad_label, int gz)
{
	static uint8_t buf[16 + 8 * 784], img[8 * 784];
	uint8_t lab[8];
	char path[512];
	for (int s = 0; s < n; s++)
		for (int j = 0; j < 784; j++)
			img[s * 784 + j] = (uint8_t)((s * 784 + j) % 256);
	for (int s = 0; s < nlabels; s++)
		lab[s] = (uint8_t)((s * 3) % 10);
	if (bad_label >= 0)
		lab[bad_label] = 10;
	size_t m = make_idx(buf, 3, (uint32_t[]){ (uint32_t)n, 28, 28 }, img, (size_t)n * 784);
	snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte%s", dir, prefix, gz ? ".gz" : "");
	write_bytes(path, buf, m, gz);
	m = make_idx(buf, 1, (uint32_t[]){ (uint32_t)nlabels }, lab, (size_t)nlabels);
	snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte%s", dir, prefix, gz ? ".gz" : "");
	write_bytes(path, buf, m, gz);
}

static void test_mnist_layouts(void)
{
	struct dataset ds;
	CHECK(mkdir(at("tv"), 0700) == 0 && mkdir(at("tv/FashionMNIST"), 0700) == 0 &&
	      mkdir(at("tv/FashionMNIST/raw"), 0700) == 0);
	make_mnist(at("tv/FashionMNIST/raw"), "train", 3, 3, -1, 1);
	make_mnist(at("tv/FashionMNIST/raw"), "t10k", 2, 2, -1, 0);
	CHECK(dataset_mnist(&ds, at("tv"), "train", 0, 1, err, sizeof err) == 0);
	CHECK(ds.n == 3 && ds.ndim == 3 && ds.shape[0] == 1 && ds.shape[1] == 28 && ds.shape[2] == 28);
	CHECK(ds.sample_numel == 784 && ds.target == TARGET_CLASS && ds.num_classes == 10);
	CHECK(ds.labels[0] == 0 && ds.labels[1] == 3 && ds.labels[2] == 6);
	CHECK(ds.images[784 + 5] == (784 + 5) % 256);
	dataset_close(&ds);
	CHECK(dataset_mnist(&ds, at("tv"), "test", 0, 1, err, sizeof err) == 0 && ds.n == 2);
	dataset_close(&ds);

	/* root/ itself wins over the torchvision folders */
	CHECK(mkdir(at("tv/MNIST"), 0700) == 0 && mkdir(at("tv/MNIST/raw"), 0700) == 0);
	make_mnist(at("tv/MNIST/raw"), "train", 4, 4, -1, 0);
	make_mnist(at("tv"), "train", 5, 5, -1, 1);
	CHECK(dataset_mnist(&ds, at("tv"), "train", 0, 1, err, sizeof err) == 0 && ds.n == 5);
	dataset_close(&ds);
	CHECK(dataset_mnist(&ds, at("tv/MNIST/.."), "train", 0, 1, err, sizeof err) == 0 && ds.n == 5);
	dataset_close(&ds);

	CHECK(mkdir(at("none"), 0700) == 0);
	CHECK(dataset_mnist(&ds, at("none"), "train", 0, 1, err, sizeof err) == -1);
	char want[1024];
	snprintf(want, sizeof want, "no train split of MNIST found; tried %s/train-images-idx3-ubyte[.gz], "
		 "%s/MNIST/raw/train-images-idx3-ubyte[.gz] and %s/FashionMNIST/raw/train-images-idx3-ubyte[.gz]",
		 at("none"), at("none"), at("none"));
	CHECK(contains(err, want));
	CHECK(dataset_mnist(&ds, at("tv"), "validation", 0, 1, err, sizeof err) == -1);
	CHECK(contains(err, "unknown split 'validation'; use \"train\" or \"test\""));

	CHECK(mkdir(at("half"), 0700) == 0);
	make_mnist(at("half"), "train", 2, 2, -1, 0);
	CHECK(unlink(at("half/train-labels-idx1-ubyte")) == 0);
	CHECK(dataset_mnist(&ds, at("half"), "train", 0, 1, err, sizeof err) == -1);
	CHECK(contains(err, "found ") && contains(err, "half/train-images-idx3-ubyte but not ") &&
	      contains(err, "half/train-labels-idx1-ubyte[.gz]"));
	/* a link to nothing is named as one, not taken for a missing file */
	CHECK(symlink(at("gone/train-labels-idx1-ubyte.gz"), at("half/train-labels-idx1-ubyte.gz")) == 0);
	CHECK(dataset_mnist(&ds, at("half"), "train", 0, 1, err, sizeof err) == -1);
	char link[1200];
	snprintf(link, sizeof link, "%s is a symbolic link to %s, which does not exist (a dangling link); point it at the file "
		 "or re-download the dataset", at("half/train-labels-idx1-ubyte.gz"), at("gone/train-labels-idx1-ubyte.gz"));
	CHECK(contains(err, link));
}

static void test_mnist_errors(void)
{
	struct dataset ds;
	CHECK(mkdir(at("count"), 0700) == 0);
	make_mnist(at("count"), "train", 3, 2, -1, 1);
	CHECK(dataset_mnist(&ds, at("count"), "train", 0, 1, err, sizeof err) == -1);
	char want[1024];
	snprintf(want, sizeof want, "%s: byte 4: image count 3 disagrees with label count 2 in %s; "
		 "re-download the dataset", at("count/train-images-idx3-ubyte.gz"), at("count/train-labels-idx1-ubyte.gz"));
	CHECK(contains(err, want));

	CHECK(mkdir(at("label"), 0700) == 0);
	make_mnist(at("label"), "train", 3, 3, 1, 0);
	CHECK(dataset_mnist(&ds, at("label"), "train", 0, 1, err, sizeof err) == -1);
	CHECK(contains(err, "train-labels-idx1-ubyte: byte 9: label 10 of sample 1 is not below the 10 classes"));
	/* the general form takes the class count */
	CHECK(dataset_idx(&ds, at("label/train-images-idx3-ubyte"), at("label/train-labels-idx1-ubyte"), 11, 0, 1,
			  err, sizeof err) == 0 && ds.labels[1] == 10);
	dataset_close(&ds);
	CHECK(dataset_idx(&ds, at("label/train-images-idx3-ubyte"), at("label/train-labels-idx1-ubyte"), 10, 0, 0,
			  err, sizeof err) == -1);
	CHECK(contains(err, "std 0 must be finite and std nonzero"));
	/* labels where images belong: the rank is wrong */
	CHECK(dataset_idx(&ds, at("label/train-labels-idx1-ubyte"), at("label/train-labels-idx1-ubyte"), 10, 0, 1,
			  err, sizeof err) == -1);
	CHECK(contains(err, "magic 0x00000801 is not an IDX file of unsigned bytes with 3 dimensions"));
}

/* A damaged cached copy of gzip'd files (a label out of range, pixels that
 * fail the copy's hash) is read past and rewritten, not blamed on the files. */
static void test_dataset_cache(void)
{
	struct dataset ds;
	char *was = strdup(getenv("XDG_CACHE_HOME"));
	setenv("XDG_CACHE_HOME", at("cache-own"), 1); /* this test's copy alone */
	CHECK(mkdir(at("cached"), 0700) == 0);
	make_mnist(at("cached"), "train", 3, 3, -1, 1);
	CHECK(dataset_mnist(&ds, at("cached"), "train", 0, 1, err, sizeof err) == 0 && ds.labels[0] == 0);
	dataset_close(&ds);
	DIR *d = opendir(at("cache-own/trainc"));
	struct dirent *de;
	char raw[1200] = "";
	while (d && (de = readdir(d)))
		if (strncmp(de->d_name, "idx-", 4) == 0)
			snprintf(raw, sizeof raw, "%s/%s", at("cache-own/trainc"), de->d_name);
	if (d)
		closedir(d);
	CHECK(raw[0] != 0); /* the first load wrote the copy */
	/* what an interrupted writer left (a dead PID), and a live writer's */
	char dead[1300], live[1300];
	snprintf(dead, sizeof dead, "%s.2000000000.tmp", raw);
	snprintf(live, sizeof live, "%s.%d.tmp", raw, (int)getppid()); /* not ours: ours is the one being written */
	FILE *f = fopen(dead, "w");
	CHECK(f && fclose(f) == 0);
	f = fopen(live, "w");
	CHECK(f && fclose(f) == 0);
	/* copies unused for 30 days go when a copy is written; the others and
	 * files not named as copies stay */
	char stale[1300], recent[1300], other[1300];
	snprintf(stale, sizeof stale, "%s/idx-0123456789abcdef.raw", at("cache-own/trainc"));
	snprintf(recent, sizeof recent, "%s/idx-fedcba9876543210.raw", at("cache-own/trainc"));
	snprintf(other, sizeof other, "%s/idx-notes.raw", at("cache-own/trainc"));
	struct timespec days40[2] = { { time(NULL) - 40 * 86400, 0 }, { time(NULL) - 40 * 86400, 0 } };
	const char *made[3] = { stale, recent, other };
	for (int i = 0; i < 3; i++) {
		f = fopen(made[i], "w");
		CHECK(f && fclose(f) == 0);
		if (i != 1)
			CHECK(utimensat(AT_FDCWD, made[i], days40, 0) == 0);
	}
	f = fopen(raw, "r+b");
	CHECK(f && fputc(255, f) == 255 && fclose(f) == 0); /* sample 0's label */
	CHECK(dataset_mnist(&ds, at("cached"), "train", 0, 1, err, sizeof err) == 0 && ds.labels[0] == 0 && ds.labels[1] == 3);
	dataset_close(&ds);
	f = fopen(raw, "rb");
	CHECK(f && fgetc(f) == 0); /* and rewrote it */
	if (f)
		fclose(f);
	/* an intact copy is used; one whose pixels changed on disk fails its
	 * hash (the pixels are no label, so nothing else would notice) and is
	 * read past and rewritten too.  Using a copy removes what dead writers
	 * left, of it and of other copies: once a copy is whole, nothing would
	 * write it again and sweep its leftovers then */
	char dead_other[1300];
	snprintf(dead_other, sizeof dead_other, "%s/idx-00000000000000aa.raw.2000000001.tmp", at("cache-own/trainc"));
	const char *left[2] = { dead, dead_other };
	for (int i = 0; i < 2; i++) {
		f = fopen(left[i], "w");
		CHECK(f && fclose(f) == 0);
	}
	CHECK(dataset_mnist(&ds, at("cached"), "train", 0, 1, err, sizeof err) == 0 && ds.map_len > 0 && ds.images[5] == 5);
	dataset_close(&ds);
	CHECK(access(dead, F_OK) != 0 && access(dead_other, F_OK) != 0 && access(live, F_OK) == 0);
	f = fopen(raw, "r+b");
	CHECK(f && fseek(f, 3 * 4 + 5, SEEK_SET) == 0 && fputc(0, f) == 0 && fclose(f) == 0); /* sample 0's pixel 5 */
	CHECK(dataset_mnist(&ds, at("cached"), "train", 0, 1, err, sizeof err) == 0 && ds.map_len == 0 && ds.images[5] == 5);
	dataset_close(&ds);
	f = fopen(raw, "rb");
	CHECK(f && fseek(f, 3 * 4 + 5, SEEK_SET) == 0 && fgetc(f) == 5);
	if (f)
		fclose(f);
	CHECK(access(dead, F_OK) != 0 && access(live, F_OK) == 0); /* the dead writer's leftover went */
	CHECK(access(stale, F_OK) != 0 && access(recent, F_OK) == 0 && access(other, F_OK) == 0);
	unlink(recent);
	unlink(other);
	unlink(live);
	setenv("XDG_CACHE_HOME", was, 1);
	free(was);
}

static void test_normalize(void)
{
	/* torch: ToTensor()(p) then Normalize((0.1307,), (0.3081,)) for p = 0, 1, 127, 128, 254, 255 */
	static const uint32_t want[6] = { 0xbed93271, 0xbed2ae20, 0x3f989c64, 0x3f9a3d7a, 0x4033c2b3, 0x4034933d };
	static const int pixel[6] = { 0, 1, 127, 128, 254, 255 };
	struct dataset ds;
	CHECK(mkdir(at("norm"), 0700) == 0);
	make_mnist(at("norm"), "train", 1, 1, -1, 0);
	CHECK(dataset_mnist(&ds, at("norm"), "train", 0.1307f, 0.3081f, err, sizeof err) == 0);
	for (int i = 0; i < 6; i++) {
		uint32_t bits;
		memcpy(&bits, &ds.lut[pixel[i]], 4);
		CHECK(bits == want[i]);
	}
	/* the batch is (b, 1, 28, 28): sample 0's pixel j is j % 256 */
	static float x[784];
	int32_t y;
	CHECK(dataset_fill(&ds, (int64_t[]){ 0 }, 1, x, &y) == 0);
	CHECK(x[255] == ds.lut[255] && x[256] == ds.lut[0] && x[128] == ds.lut[128] && y == 0);
	CHECK(dataset_fill(&ds, (int64_t[]){ 1 }, 1, x, &y) == -1);
	CHECK(dataset_fill(&ds, (int64_t[]){ -1 }, 1, x, &y) == -1);
	dataset_close(&ds);
}

static void test_fashion_mnist(void)
{
	struct dataset tr, te;
	int ok = dataset_mnist(&tr, FASHION, "train", 0.2860f, 0.3530f, err, sizeof err) == 0;
	if (!ok)
		fprintf(stderr, "  %s (./configure --deps installs dataset-fashion-mnist)\n", err);
	CHECK(ok);
	if (!ok)
		return;
	/* from the files with Python's gzip module */
	static const int32_t head[10] = { 9, 0, 0, 3, 0, 2, 7, 2, 5, 5 }, tail[5] = { 5, 1, 3, 0, 5 };
	CHECK(tr.n == 60000);
	for (int i = 0; i < 10; i++)
		CHECK(tr.labels[i] == head[i]);
	for (int i = 0; i < 5; i++)
		CHECK(tr.labels[59995 + i] == tail[i]);
	int64_t sum = 0;
	for (int j = 0; j < 784; j++)
		sum += tr.images[j];
	CHECK(sum == 76247);
	static float x[2 * 784];
	int32_t y[2];
	CHECK(dataset_fill(&tr, (int64_t[]){ 59999, 0 }, 2, x, y) == 0);
	CHECK(y[0] == 5 && y[1] == 9);
	/* row 14, column 12 of image 0 is 237; torch gives 1.8226962089538574 */
	CHECK(x[784 + 14 * 28 + 12] == 1.8226962089538574f);
	CHECK(x[784 + 0] == (0.0f - 0.2860f) / 0.3530f);
	dataset_close(&tr);

	CHECK(dataset_mnist(&te, FASHION, "test", 0, 1, err, sizeof err) == 0);
	static const int32_t thead[10] = { 9, 2, 1, 1, 6, 1, 4, 6, 5, 7 };
	CHECK(te.n == 10000);
	for (int i = 0; i < 10; i++)
		CHECK(te.labels[i] == thead[i]);
	CHECK(te.images[14 * 28 + 12] == 98);
	dataset_close(&te);
}

static void test_synthetic(void)
{
	struct synthetic_spec spec = { .samples = 1000, .ndim = 2, .shape = { 3, 4 }, .target = TARGET_VECTOR,
				       .target_ndim = 1, .target_shape = { 2 }, .seed = 42 };
	struct dataset a, b;
	CHECK(dataset_synthetic(&a, &spec, err, sizeof err) == 0);
	CHECK(a.n == 1000 && a.sample_numel == 12 && a.target_numel == 2 && a.target == TARGET_VECTOR);
	CHECK(dataset_target_bytes(&a, 5) == 40);
	float x1[12], y1[2], x3[3 * 12], y3[3 * 2];
	CHECK(dataset_fill(&a, (int64_t[]){ 7 }, 1, x1, y1) == 0);
	CHECK(dataset_fill(&a, (int64_t[]){ 999, 7, 0 }, 3, x3, y3) == 0);
	CHECK(memcmp(x1, x3 + 12, sizeof x1) == 0 && memcmp(y1, y3 + 2, sizeof y1) == 0);
	CHECK(memcmp(x3, x3 + 12, sizeof x1) != 0);
	CHECK(dataset_synthetic(&b, &spec, err, sizeof err) == 0);
	CHECK(dataset_fill(&b, (int64_t[]){ 7 }, 1, x3, y3) == 0 && memcmp(x1, x3, sizeof x1) == 0);
	spec.seed = 43;
	CHECK(dataset_synthetic(&b, &spec, err, sizeof err) == 0);
	CHECK(dataset_fill(&b, (int64_t[]){ 7 }, 1, x3, y3) == 0 && memcmp(x1, x3, sizeof x1) != 0);
	/* a test set's samples are its own, not the training set's first ones */
	spec.seed = 42;
	spec.split = 1;
	CHECK(dataset_synthetic(&b, &spec, err, sizeof err) == 0);
	CHECK(dataset_fill(&b, (int64_t[]){ 7 }, 1, x3, y3) == 0 && memcmp(x1, x3, sizeof x1) != 0 && memcmp(y1, y3, sizeof y1) != 0);
	spec.split = 0;

	/* standard normal: mean 0, variance 1 over 12000 values */
	double s = 0, s2 = 0;
	for (int64_t i = 0; i < a.n; i++) {
		CHECK(dataset_fill(&a, &i, 1, x1, y1) == 0);
		for (int j = 0; j < 12; j++)
			s += x1[j], s2 += (double)x1[j] * x1[j];
	}
	CHECK_NEAR(s / 12000, 0.0, 0.04);
	CHECK_NEAR(s2 / 12000, 1.0, 0.05);
	dataset_close(&a);

	/* rand(): uniform in [0, 1) (mean 1/2, variance 1/12), inputs and
	 * targets each where asked, the other drawn as randn() draws it */
	struct dataset un, ut;
	spec.input_uniform = true;
	CHECK(dataset_synthetic(&un, &spec, err, sizeof err) == 0);
	spec.input_uniform = false;
	spec.target_uniform = true;
	CHECK(dataset_synthetic(&ut, &spec, err, sizeof err) == 0);
	spec.target_uniform = false;
	CHECK(dataset_synthetic(&b, &spec, err, sizeof err) == 0);
	double su[2] = { 0, 0 }, su2[2] = { 0, 0 };
	bool inside = true, others = true;
	for (int64_t i = 0; i < b.n; i++) {
		float xn[12], yn[2], xt[12], yt[2];
		CHECK(dataset_fill(&un, &i, 1, xn, yn) == 0 && dataset_fill(&ut, &i, 1, xt, yt) == 0 &&
		      dataset_fill(&b, &i, 1, x1, y1) == 0);
		others = others && memcmp(yn, y1, sizeof yn) == 0 && memcmp(xt, x1, sizeof xt) == 0;
		for (int j = 0; j < 14; j++) {
			float v = j < 12 ? xn[j] : yt[j - 12];
			inside = inside && v >= 0 && v < 1;
			su[j >= 12] += v, su2[j >= 12] += (double)v * v;
		}
	}
	CHECK(inside && others);
	CHECK_NEAR(su[0] / 12000, 0.5, 0.01);
	CHECK_NEAR(su2[0] / 12000 - (su[0] / 12000) * (su[0] / 12000), 1.0 / 12, 0.005);
	CHECK_NEAR(su[1] / 2000, 0.5, 0.02);
	CHECK_NEAR(su2[1] / 2000 - (su[1] / 2000) * (su[1] / 2000), 1.0 / 12, 0.01);
	dataset_close(&un);
	dataset_close(&ut);
	dataset_close(&b);

	struct synthetic_spec cls = { .samples = 3000, .ndim = 1, .shape = { 5 }, .target = TARGET_CLASS,
				      .num_classes = 3, .seed = 1 };
	CHECK(dataset_synthetic(&a, &cls, err, sizeof err) == 0 && dataset_target_bytes(&a, 4) == 16);
	int count[3] = { 0 }, bad = 0;
	for (int64_t i = 0; i < a.n; i++) {
		int32_t c;
		CHECK(dataset_fill(&a, &i, 1, x1, &c) == 0);
		if (c < 0 || c >= 3)
			bad = 1;
		else
			count[c]++;
	}
	CHECK(!bad && count[0] > 900 && count[1] > 900 && count[2] > 900);
	CHECK(dataset_fill(&a, (int64_t[]){ 3000 }, 1, x1, y1) == -1);

	cls.shape[0] = 0;
	CHECK(dataset_synthetic(&a, &cls, err, sizeof err) == -1 && contains(err, "input dimension 0 is 0"));
	cls.shape[0] = INT64_MAX / 2;
	CHECK(dataset_synthetic(&a, &cls, err, sizeof err) == -1 && contains(err, "overflow"));
	cls.shape[0] = 5;
	cls.num_classes = 0;
	CHECK(dataset_synthetic(&a, &cls, err, sizeof err) == -1 && contains(err, "classes(0) must be at least 1"));
}

/* DistributedSampler written out as PyTorch does it: list, pad or cut, slice */
static int64_t reference_order(const int64_t *perm, int64_t n, int world, int rank, int drop_last, int64_t *out)
{
	static int64_t full[4096];
	/* num_samples = math.ceil((n - world) / world) with drop_last and a remainder, else math.ceil(n / world) */
	int64_t a = drop_last && n % world ? n - world : n;
	int64_t num = a >= 0 ? (a + world - 1) / world : -(-a / world);
	int64_t total = num * world, len = 0;
	for (int64_t i = 0; i < n && len < total; i++)
		full[len++] = perm[i];
	while (len < total) /* indices += indices[:padding], repeated while padding > n */
		full[len] = full[len - n], len++;
	int64_t k = 0;
	for (int64_t g = rank; g < total; g += world)
		out[k++] = full[g];
	return k;
}

/* .npy headers as numpy writes them and as its reader takes them, and
 * elements of each type as float32. */
static size_t npy_file(uint8_t *buf, int version, const char *dict, const void *data, size_t bytes)
{
	size_t pre = version == 1 ? 10 : 12, hl = strlen(dict);
	memcpy(buf, "\x93NUMPY", 6);
	buf[6] = (uint8_t)version;
	buf[7] = 0;
	for (size_t k = 0; k < pre - 8; k++)
		buf[8 + k] = (uint8_t)(hl >> (8 * k));
	memcpy(buf + pre, dict, hl);
	memcpy(buf + pre + hl, data, bytes);
	return pre + hl + bytes;
}

static void test_npy(void)
{
	uint8_t buf[512];
	char why[600];
	struct npy_head h;
	int64_t i8[3] = { 7, -2, 1LL << 40 };
	size_t n = npy_file(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }\n", i8, sizeof i8);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0);
	CHECK(h.type == NPY_I64 && h.ndim == 1 && h.shape[0] == 3 && h.numel == 3 && h.data_at == n - sizeof i8);
	int64_t v = 0;
	CHECK(npy_integer(&h, buf + h.data_at, 2, &v) && v == 1LL << 40);
	CHECK(npy_integer(&h, buf + h.data_at, 1, &v) && v == -2);
	/* double quotes, no trailing comma, Python 2's sizes, keys in any order, format 3.0 */
	float f4[6] = { 1, 2, 3, 4, 5, 6 };
	n = npy_file(buf, 3, "{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<f4\"}", f4, sizeof f4);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0);
	CHECK(h.type == NPY_F32 && h.ndim == 2 && h.shape[1] == 3 && h.numel == 6);
	char sh[64];
	CHECK_STR(npy_shape_str(&h, 0, sh, sizeof sh), "(2, 3)");
	CHECK_STR(npy_shape_str(&h, 1, sh, sizeof sh), "(3,)");
	/* a 1-d array in Fortran order is the same bytes */
	n = npy_file(buf, 2, "{'descr': '<f4', 'fortran_order': True, 'shape': (6,), }", f4, sizeof f4);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0);
	/* float16: 1, -2, 0.5, the smallest subnormal, 65504, inf */
	uint16_t f2[6] = { 0x3c00, 0xc000, 0x3800, 0x0001, 0x7bff, 0x7c00 };
	n = npy_file(buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (6,), }", f2, sizeof f2);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0);
	float out[6];
	npy_to_float(&h, buf + h.data_at, 6, out);
	CHECK(out[0] == 1 && out[1] == -2 && out[2] == 0.5f && out[3] == ldexpf(1, -24) && out[4] == 65504 && isinf(out[5]));
	/* big-endian float64 and int16, bool */
	uint8_t be8[8] = { 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18 }; /* pi */
	n = npy_file(buf, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", be8, 8);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0 && h.swap);
	npy_to_float(&h, buf + h.data_at, 1, out);
	CHECK(out[0] == (float)3.141592653589793);
	uint8_t be2[4] = { 0xff, 0xfe, 0x01, 0x00 };
	n = npy_file(buf, 1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", be2, 4);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0);
	CHECK(npy_integer(&h, buf + h.data_at, 0, &v) && v == -2);
	CHECK(npy_integer(&h, buf + h.data_at, 1, &v) && v == 256);
	uint8_t b1[3] = { 0, 1, 1 };
	n = npy_file(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b1, 3);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0 && !npy_is_integer(h.type));
	npy_to_float(&h, buf + h.data_at, 3, out);
	CHECK(out[0] == 0 && out[1] == 1 && out[2] == 1);
	uint64_t u8 = UINT64_MAX;
	n = npy_file(buf, 1, "{'descr': '<u8', 'fortran_order': False, 'shape': (), }", &u8, 8);
	CHECK(npy_parse(buf, n, &h, why, sizeof why) == 0 && h.ndim == 0 && h.numel == 1);
	CHECK(!npy_integer(&h, buf + h.data_at, 0, &v));
	/* faults, each at its byte */
	static const struct {
		const char *dict, *want;
	} bad[] = {
		{ "{'descr': '<f4', 'fortran_order': False}", "byte 50: the header has no shape" },
		{ "{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", "byte 44: fortran_order is not True or False" },
		{ "{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}", "byte 26: the header's entries are not separated by commas" },
		{ "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'shape': (6,)}", "byte 66: the header names a key twice" },
		{ "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", "byte 61: the shape holds something other than a size" },
		{ "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}", "byte 20: the array is a structured one" },
		{ "{'descr': '<f4', 'fortran_order': False, 'shape': (7,)}", "byte 89: the file ends 24 bytes into the array's data" },
		{ "['descr']", "byte 10: the header is not a Python dict" },
	};
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		n = npy_file(buf, 1, bad[k].dict, f4, sizeof f4);
		why[0] = '\0';
		CHECK(npy_parse(buf, n, &h, why, sizeof why) != 0);
		if (strncmp(why, bad[k].want, strlen(bad[k].want)) != 0) {
			fprintf(stderr, "npy fault %zu: \"%s\", expected \"%s...\"\n", k, why, bad[k].want);
			CHECK(!"the fault's message");
		}
	}
	CHECK(npy_parse((const uint8_t *)"\x93NUMPY\1", 7, &h, why, sizeof why) != 0 && strstr(why, "cut short"));
	n = npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", f4, sizeof f4);
	buf[8] = 200; /* a header longer than the file */
	CHECK(npy_parse(buf, n, &h, why, sizeof why) != 0 && strstr(why, "byte 8: the header is 200 bytes"));
}

static void test_sampler_no_shuffle(void)
{
	/* torch.utils.data.distributed.DistributedSampler(range(n), world, rank, shuffle=False, drop_last) */
	static const struct { int n, world, drop_last; int64_t want[5][4]; int len; } cases[] = {
		{ 10, 3, 0, { { 0, 3, 6, 9 }, { 1, 4, 7, 0 }, { 2, 5, 8, 1 } }, 4 },
		{ 10, 3, 1, { { 0, 3, 6 }, { 1, 4, 7 }, { 2, 5, 8 } }, 3 },
		{ 5, 4, 0, { { 0, 4 }, { 1, 0 }, { 2, 1 }, { 3, 2 } }, 2 },
		{ 2, 5, 0, { { 0 }, { 1 }, { 0 }, { 1 }, { 0 } }, 1 },
		{ 1, 4, 1, { { 0 } }, 0 },
		{ 7, 2, 0, { { 0, 2, 4, 6 }, { 1, 3, 5, 0 } }, 4 },
		{ 0, 2, 0, { { 0 } }, 0 },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
		for (int r = 0; r < cases[c].world; r++) {
			struct sampler s;
			CHECK(sampler_init(&s, cases[c].n, cases[c].world, r, 3, 0, cases[c].drop_last, 0, 0, err,
					   sizeof err) == 0);
			sampler_set_epoch(&s, 0);
			CHECK(s.num_samples == cases[c].len);
			for (int i = 0; i < cases[c].len; i++)
				CHECK(sampler_index(&s, i) == cases[c].want[r][i]);
			sampler_free(&s);
		}

	/* batching: 10 samples on 1 rank in batches of 4 -> 4, 4, 2 (or 4, 4 dropping the last) */
	struct sampler s;
	int64_t idx[4];
	CHECK(sampler_init(&s, 10, 1, 0, 4, 0, 0, 0, 0, err, sizeof err) == 0);
	CHECK(s.num_batches == 3);
	sampler_set_epoch(&s, 0);
	CHECK(sampler_batch(&s, 2, idx) == 2 && idx[0] == 8 && idx[1] == 9);
	CHECK(sampler_batch(&s, 1, idx) == 4 && idx[0] == 4 && idx[3] == 7);
	sampler_free(&s);
	CHECK(sampler_init(&s, 10, 1, 0, 4, 0, 0, 1, 0, err, sizeof err) == 0 && s.num_batches == 2);
	CHECK(sampler_init(&s, 10, 2, 2, 4, 0, 0, 1, 0, err, sizeof err) == -1 &&
	      contains(err, "rank 2 is outside a world of 2"));
	CHECK(sampler_init(&s, 10, 2, 0, 0, 0, 0, 1, 0, err, sizeof err) == -1 && contains(err, "batch size 0"));
}

/* Whether epoch's permutation begins with want (n,). */
static bool epoch_order_is(struct sampler *s, int64_t epoch, const int64_t *want, int n)
{
	sampler_set_epoch(s, epoch);
	return memcmp(s->perm, want, (size_t)n * sizeof *want) == 0;
}

static void test_sampler_shuffle(void)
{
	/* PyTorch 1.13's torch.randperm(10, generator=torch.Generator().manual_seed(1)):
	 * DistributedSampler(seed=0) after set_epoch(1), the order of trainc's
	 * epoch 1 (epoch 0 here).  A change here changes every shuffled run */
	static const int64_t golden[10] = { 5, 6, 1, 2, 0, 8, 9, 3, 7, 4 };
	struct sampler s;
	CHECK(sampler_init(&s, 10, 1, 0, 10, 1, 0, 0, 0, err, sizeof err) == 0 && s.order == SAMPLER_RANDPERM);
	CHECK(epoch_order_is(&s, 0, golden, 10));
	sampler_free(&s);
	/* Fashion-MNIST's size, manual_seed(2): the 32-bit draws' moduli reach 60000 */
	CHECK(sampler_init(&s, 60000, 1, 0, 64, 1, 0, 0, 1, err, sizeof err) == 0);
	sampler_set_epoch(&s, 0);
	CHECK(s.perm[0] == 43848 && s.perm[1] == 54736 && s.perm[2] == 56013 && s.perm[3] == 37602 && s.perm[4] == 59754 &&
	      s.perm[5] == 51214 && s.perm[30000] == 50644 && s.perm[59999] == 43029);
	sampler_free(&s);
	/* list(DistributedSampler(range(10), num_replicas=3, rank=1, seed=5)) after
	 * set_epoch(2), and with num_replicas=4, rank=3, drop_last=True */
	CHECK(sampler_init(&s, 10, 3, 1, 4, 1, 0, 0, 5, err, sizeof err) == 0);
	sampler_set_epoch(&s, 1);
	CHECK(s.num_samples == 4 && sampler_index(&s, 0) == 0 && sampler_index(&s, 1) == 1 && sampler_index(&s, 2) == 6 &&
	      sampler_index(&s, 3) == 5);
	sampler_free(&s);
	CHECK(sampler_init(&s, 10, 4, 3, 4, 1, 1, 0, 5, err, sizeof err) == 0);
	sampler_set_epoch(&s, 1);
	CHECK(s.num_samples == 2 && sampler_index(&s, 0) == 4 && sampler_index(&s, 1) == 6);
	sampler_free(&s);
	/* earlier trainc's order, for its checkpoints: the Fisher-Yates order of
	 * Philox (seed 0, RNG_SHUFFLE, 0, epoch 0) for n = 10, checked against a
	 * Python transcription of Philox4x32-10 */
	static const int64_t philox[10] = { 6, 8, 3, 0, 9, 4, 1, 7, 2, 5 };
	CHECK(sampler_init(&s, 10, 1, 0, 10, 1, 0, 0, 0, err, sizeof err) == 0);
	s.order = SAMPLER_PHILOX;
	CHECK(epoch_order_is(&s, 0, philox, 10));
	sampler_free(&s);
	/* a resumed Philox run keys the order by train.seed, whatever shuffle_seed is */
	CHECK(sampler_init(&s, 10, 1, 0, 10, 1, 0, 0, 5, err, sizeof err) == 0);
	sampler_set_epoch(&s, 0);
	sampler_keep_philox(&s, 0);
	CHECK(epoch_order_is(&s, 0, philox, 10));
	sampler_free(&s);

	for (int n = 1; n <= 23; n += 2)
		for (int world = 1; world <= 5; world++)
			for (int drop = 0; drop < 2; drop++)
				for (int64_t epoch = 0; epoch < 3; epoch++) {
					static int64_t perm[32], want[32], seen[32];
					int cover[32] = { 0 }, dup = 0;
					int64_t total = 0;
					for (int r = 0; r < world; r++) {
						CHECK(sampler_init(&s, n, world, r, 2, 1, drop, 0, 7, err, sizeof err) == 0);
						sampler_set_epoch(&s, epoch);
						if (r == 0)
							memcpy(perm, s.perm, (size_t)n * sizeof *perm);
						/* the same permutation on every rank */
						CHECK(memcmp(perm, s.perm, (size_t)n * sizeof *perm) == 0);
						int64_t k = reference_order(perm, n, world, r, drop, want);
						CHECK(k == s.num_samples);
						for (int64_t i = 0; i < k; i++) {
							seen[i] = sampler_index(&s, i);
							CHECK(seen[i] == want[i]);
							if (cover[seen[i]]++)
								dup++;
						}
						total += k;
						sampler_free(&s);
					}
					int covered = 0;
					for (int i = 0; i < n; i++)
						covered += cover[i] > 0;
					/* disjoint apart from padding; all covered unless dropped */
					if (drop) {
						CHECK(dup == 0 && covered == (n / world) * world);
					} else {
						CHECK(covered == n && dup == total - n);
					}
				}

	/* epochs differ; a permutation is a permutation */
	int64_t e0[100];
	CHECK(sampler_init(&s, 100, 1, 0, 10, 1, 0, 0, 5, err, sizeof err) == 0);
	sampler_set_epoch(&s, 0);
	memcpy(e0, s.perm, sizeof e0);
	sampler_set_epoch(&s, 1);
	CHECK(memcmp(e0, s.perm, sizeof e0) != 0);
	int mark[100] = { 0 }, ok = 1;
	for (int i = 0; i < 100; i++)
		ok &= s.perm[i] >= 0 && s.perm[i] < 100 && !mark[s.perm[i]]++;
	CHECK(ok);
	/* padding repeats the head of the permutation: n = 10, world = 4 pads with perm[0], perm[1] */
	sampler_free(&s);
	CHECK(sampler_init(&s, 10, 4, 2, 10, 1, 0, 0, 5, err, sizeof err) == 0);
	sampler_set_epoch(&s, 3);
	CHECK(s.num_samples == 3 && sampler_index(&s, 2) == s.perm[0]);
	sampler_free(&s);
}

static void test_sampler_resume(void)
{
	/* 2 ranks over 11 samples in batches of 2: rank 1 has 6 indices -> 3 batches */
	struct sampler s, t;
	int64_t a[2], b[2];
	CHECK(sampler_init(&s, 11, 2, 1, 2, 1, 0, 0, 9, err, sizeof err) == 0 && s.num_batches == 3);
	CHECK(sampler_init(&t, 11, 2, 1, 2, 1, 0, 0, 9, err, sizeof err) == 0);
	struct sampler_pos p = { 0, 0 }, q = { 1, 1 };
	for (int k = 0; k < 4; k++) /* epoch 0 batches 0..2, epoch 1 batch 0 */
		CHECK(sampler_next(&s, &p, a) == 2);
	CHECK(p.epoch == 1 && p.batch == 1);
	for (int k = 0; k < 5; k++) {
		int na = sampler_next(&s, &p, a), nb = sampler_next(&t, &q, b);
		CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0);
	}
	CHECK(p.epoch == 3 && p.batch == 0);
	struct sampler_pos far = { 0, 7 }; /* normalised to epoch 2 batch 1 */
	CHECK(sampler_next(&t, &far, b) == 2 && far.epoch == 2 && far.batch == 2);
	sampler_free(&s);
	sampler_free(&t);
	CHECK(sampler_init(&s, 3, 1, 0, 4, 0, 0, 1, 0, err, sizeof err) == 0 && s.num_batches == 0);
	CHECK(sampler_next(&s, &p, a) == 0);
	sampler_free(&s);
}

/* the loader must give exactly what filling directly from the sampler gives */
static void run_loader(const struct dataset *ds, int world, int rank, int batch, int drop_last_batch,
		       struct sampler_pos start, int64_t end_epoch, int stop_after)
{
	struct sampler s, ref;
	CHECK(sampler_init(&s, ds->n, world, rank, batch, 1, 0, drop_last_batch, 3, err, sizeof err) == 0);
	CHECK(sampler_init(&ref, ds->n, world, rank, batch, 1, 0, drop_last_batch, 3, err, sizeof err) == 0);
	size_t xn = (size_t)batch * (size_t)ds->sample_numel, yb = dataset_target_bytes(ds, batch);
	float *xs[2] = { malloc(xn * 4), malloc(xn * 4) }, *xr = malloc(xn * 4);
	void *ys[2] = { malloc(yb), malloc(yb) }, *yr = malloc(yb);
	int64_t *idx = malloc((size_t)batch * sizeof *idx);
	struct loader l;
	CHECK(loader_start(&l, ds, &s, xs, ys, start, end_epoch, 0, err, sizeof err) == 0);
	int delivered = 0, ends = 0;
	for (int64_t e = start.epoch; e < end_epoch && delivered != stop_after; e++) {
		int64_t k = e == start.epoch ? start.batch : 0;
		float *x;
		void *y;
		int b, r = 0;
		while (delivered != stop_after && (r = loader_next(&l, &x, &y, &b)) == 1) {
			sampler_set_epoch(&ref, e);
			int nb = sampler_batch(&ref, k, idx);
			CHECK(dataset_fill(ds, idx, nb, xr, yr) == 0);
			CHECK(l.epoch == e && l.batch == k && b == nb);
			CHECK(memcmp(x, xr, (size_t)nb * (size_t)ds->sample_numel * 4) == 0);
			CHECK(memcmp(y, yr, dataset_target_bytes(ds, nb)) == 0);
			loader_release(&l);
			k++;
			delivered++;
		}
		if (delivered != stop_after) {
			CHECK(r == 0 && k == ref.num_batches);
			ends++;
		}
	}
	if (stop_after < 0) {
		float *x;
		void *y;
		int b;
		CHECK(ends == end_epoch - start.epoch);
		CHECK(loader_next(&l, &x, &y, &b) == 0); /* after the last epoch: nothing more */
	}
	loader_stop(&l);
	loader_stop(&l);
	sampler_free(&s);
	sampler_free(&ref);
	free(xs[0]), free(xs[1]), free(xr), free(ys[0]), free(ys[1]), free(yr), free(idx);
}

static void test_loader(void)
{
	struct synthetic_spec spec = { .samples = 103, .ndim = 3, .shape = { 1, 4, 4 }, .target = TARGET_CLASS,
				       .num_classes = 10, .seed = 11 };
	struct dataset ds;
	CHECK(dataset_synthetic(&ds, &spec, err, sizeof err) == 0);
	run_loader(&ds, 1, 0, 8, 0, (struct sampler_pos){ 0, 0 }, 3, -1);
	run_loader(&ds, 3, 2, 5, 1, (struct sampler_pos){ 1, 4 }, 4, -1);  /* resumed mid-epoch */
	run_loader(&ds, 1, 0, 8, 0, (struct sampler_pos){ 2, 13 }, 4, -1); /* resumed at an epoch's end */
	run_loader(&ds, 2, 1, 7, 0, (struct sampler_pos){ 0, 0 }, 5, 3);   /* stopped early */
	run_loader(&ds, 1, 0, 200, 1, (struct sampler_pos){ 0, 0 }, 2, -1); /* no batches at all */

	spec.target = TARGET_VECTOR;
	spec.target_ndim = 2;
	spec.target_shape[0] = 2;
	spec.target_shape[1] = 3;
	CHECK(dataset_synthetic(&ds, &spec, err, sizeof err) == 0);
	run_loader(&ds, 2, 0, 16, 0, (struct sampler_pos){ 0, 0 }, 2, -1);

	struct sampler s;
	float a[1], b[1];
	float *xs[2] = { a, b };
	void *ys[2] = { a, b };
	struct loader l;
	CHECK(sampler_init(&s, 50, 1, 0, 8, 0, 0, 0, 0, err, sizeof err) == 0);
	CHECK(loader_start(&l, &ds, &s, xs, ys, (struct sampler_pos){ 0, 0 }, 1, 0, err, sizeof err) == -1);
	CHECK(contains(err, "sampler covers 50 samples but the dataset has 103"));
	CHECK(loader_start(&l, &ds, &s, (float *[2]){ a, a }, ys, (struct sampler_pos){ 0, 0 }, 1, 0, err,
			   sizeof err) == -1 && contains(err, "two distinct x and two distinct y buffers"));
	sampler_free(&s);
	CHECK(sampler_init(&s, 103, 1, 0, 8, 0, 0, 0, 0, err, sizeof err) == 0);
	CHECK(loader_start(&l, &ds, &s, xs, ys, (struct sampler_pos){ 0, 14 }, 1, 0, err, sizeof err) == -1);
	CHECK(contains(err, "start batch 14 is past the 13 batches of an epoch"));
	sampler_free(&s);
}

/* a wait is bounded, and stopping joins a thread that is still filling */
static void test_loader_timeout(void)
{
	/* 4 samples of 2^20 normals: filling one takes tens of milliseconds */
	struct synthetic_spec spec = { .samples = 4, .ndim = 1, .shape = { 1 << 20 }, .target = TARGET_CLASS,
				       .num_classes = 2, .seed = 5 };
	struct dataset ds;
	struct sampler s;
	struct loader l;
	CHECK(dataset_synthetic(&ds, &spec, err, sizeof err) == 0);
	CHECK(sampler_init(&s, 4, 1, 0, 1, 0, 0, 0, 0, err, sizeof err) == 0);
	float *xs[2] = { malloc(4 << 20), malloc(4 << 20) };
	int32_t ya[1], yb[1];
	void *ys[2] = { ya, yb };
	CHECK(loader_start(&l, &ds, &s, xs, ys, (struct sampler_pos){ 0, 0 }, 1, 1, err, sizeof err) == 0);
	float *x;
	void *y;
	int b;
	CHECK(loader_next(&l, &x, &y, &b) == -1);
	CHECK(contains(l.err, "data loader: no batch for epoch 0 batch 0 within 1 ms; the loader thread is stuck"));
	loader_stop(&l);
	CHECK(loader_next(&l, &x, &y, &b) == -1 && contains(l.err, "not running"));
	sampler_free(&s);
	free(xs[0]);
	free(xs[1]);
}

/* npy's normalize=: per channel (the sample's first dimension) as
 * torchvision's Normalize, (x - mean) / std in float; one pair for all;
 * classes read alongside. */
static void test_npy_normalize(void)
{
	uint8_t buf[512];
	float x[12];
	for (int i = 0; i < 12; i++)
		x[i] = (float)i * 0.75f - 2.0f;
	int64_t y[2] = { 1, 0 };
	write_bytes(at("nx.npy"), buf, npy_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 2), }\n", x, sizeof x), 0);
	write_bytes(at("ny.npy"), buf, npy_file(buf, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", y, sizeof y), 0);
	static const float mean[3] = { 0.5f, -1.0f, 0.25f }, std[3] = { 2.0f, 0.3f, 1.5f };
	for (int per = 0; per < 2; per++) {
		struct npy_spec sp = { .input = at("nx.npy"), .target = at("ny.npy"), .ndim = 2, .shape = { 3, 2 },
				       .target_kind = TARGET_CLASS, .num_classes = 2, .ignore_index = -100, .norm_mean = mean,
				       .norm_std = std, .nnorm = per ? 3 : 1, .input_at = "m.net:1:1", .output_at = "m.net:2:1" };
		struct dataset ds;
		char why[600];
		CHECK(dataset_npy(&ds, &sp, why, sizeof why) == 0);
		int64_t idx[2] = { 1, 0 };
		float got[12];
		int32_t lab[2];
		CHECK(dataset_fill(&ds, idx, 2, got, lab) == 0);
		for (int s = 0; s < 2; s++)
			for (int j = 0; j < 6; j++) {
				int c = per ? j / 2 : 0;
				CHECK(got[s * 6 + j] == (x[(1 - s) * 6 + j] - mean[c]) / std[c]);
			}
		CHECK(lab[0] == 0 && lab[1] == 1);
		dataset_close(&ds);
	}
}

int main(void)
{
	snprintf(tmp, sizeof tmp, "%s/trainc-data-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	/* the copies of gzip'd files go here, not to the user's cache */
	char cache[sizeof tmp + 16];
	snprintf(cache, sizeof cache, "%s/cache", tmp);
	setenv("XDG_CACHE_HOME", cache, 1);
	unsetenv("TRAINC_NO_CACHE");
	RUN(test_idx_raw_and_gzip);
	RUN(test_idx_errors);
	RUN(test_idx_gzip_end);
	RUN(test_mnist_layouts);
	RUN(test_mnist_errors);
	RUN(test_dataset_cache);
	RUN(test_normalize);
	RUN(test_fashion_mnist);
	RUN(test_synthetic);
	RUN(test_npy);
	RUN(test_npy_normalize);
	RUN(test_sampler_no_shuffle);
	RUN(test_sampler_shuffle);
	RUN(test_sampler_resume);
	RUN(test_loader);
	RUN(test_loader_timeout);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return check_done();
}
