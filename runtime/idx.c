/* idx.c: IDX reader, raw or gzip (see idx.h for the format).
 * Raw files are read with stdio and their size is checked against the header
 * before any data is read, so truncation and trailing bytes are caught up
 * front.  Gzip files cannot tell their decompressed size, so the header's
 * size is bounded by what deflate can expand the file to (about 1032:1)
 * before the caller allocates, and truncation (a cut trailer included),
 * bytes after the gzip data and CRC errors are caught while reading.
 * Does not: allocate the data; the caller owns the destination buffer.
 * Invariant: every message names the file and, where one applies, the byte
 * offset (counted in decompressed bytes for a gzip file, and in compressed
 * bytes where the damage is in the gzip data itself). */
#include "runtime/idx.h"
#include "runtime/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* deflate's best case is 258 bytes from 2 bits, about 1032:1; the slack
 * covers the gzip header and trailer of tiny files */
#define GZIP_MAX_RATIO 1032
#define GZIP_SLACK 4096

/* A gzip file is inflated here rather than through gzread: gzread
 * ignores whatever follows the last member and reports nothing when the
 * file ends before a member's trailer (CRC-32 and length), and neither is
 * a whole file.  Members written one after another (cat a.gz b.gz) are
 * valid gzip, as gunzip reads them, and are read the same way. */
struct gz_in {
	z_stream z;
	int fd;
	int64_t size;       /* compressed bytes, from fstat */
	int64_t taken;      /* of them read into buf so far */
	bool eof;           /* read() has returned 0 */
	bool between;       /* a member has ended: another one or the file's end follows */
	bool done;          /* the last member ended where the file does */
	bool cut;           /* the file ends inside a member */
	int eno;            /* after a failure: the I/O error, 0 for damage */
	int64_t fail_at;    /* compressed offset of the failure */
	char msg[160];
	unsigned char buf[1 << 17];
};

/* Compressed offset of the next byte inflate has not taken. */
static int64_t gz_at(const struct gz_in *g)
{
	return g->taken - (int64_t)g->z.avail_in;
}

static int gz_fault(struct gz_in *g, int eno, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int gz_fault(struct gz_in *g, int eno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g->msg, sizeof g->msg, fmt, ap);
	va_end(ap);
	g->eno = eno;
	g->fail_at = gz_at(g);
	return -1;
}

/* Move what inflate has not taken to the front of buf and read more. */
static int gz_fill(struct gz_in *g)
{
	if (g->z.avail_in) /* next_in is NULL before the first read */
		memmove(g->buf, g->z.next_in, g->z.avail_in);
	g->z.next_in = g->buf;
	ssize_t k;
	do
		k = read(g->fd, g->buf + g->z.avail_in, sizeof g->buf - g->z.avail_in);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return gz_fault(g, util_os_error(errno), "read failed: %s", strerror(errno));
	g->eof = k == 0;
	g->z.avail_in += (uInt)k;
	g->taken += k;
	return 0;
}

/* Inflate up to n bytes: the count, short at the end of the data or where
 * the file is cut off (g->cut), or -1 with g->msg. */
static int64_t gz_read(struct gz_in *g, unsigned char *dst, int64_t n)
{
	int64_t done = 0;
	while (done < n && !g->done && !g->cut) {
		if (g->z.avail_in < 2 && !g->eof && gz_fill(g) != 0)
			return -1;
		if (g->between) {
			if (g->z.avail_in == 0) {
				g->done = true;
				break;
			}
			if (g->z.avail_in < 2 || g->z.next_in[0] != 0x1f || g->z.next_in[1] != 0x8b)
				return gz_fault(g, 0, "%lld byte%s after the end of the gzip data %s not another gzip member",
						(long long)(g->size - gz_at(g)), g->size - gz_at(g) == 1 ? "" : "s",
						g->size - gz_at(g) == 1 ? "is" : "are");
			inflateReset(&g->z);
			g->between = false;
		}
		/* avail_out is an unsigned int; chunks keep it in range */
		uInt chunk = n - done > (1 << 30) ? 1u << 30 : (uInt)(n - done);
		g->z.next_out = dst + done;
		g->z.avail_out = chunk;
		int rc = inflate(&g->z, Z_NO_FLUSH);
		done += chunk - g->z.avail_out;
		if (rc == Z_STREAM_END)
			g->between = true;
		else if (rc == Z_BUF_ERROR && g->eof && g->z.avail_in == 0)
			g->cut = true;
		else if (rc != Z_OK) {
			gz_fault(g, 0, "corrupt gzip data: %s", g->z.msg ? g->z.msg : "inflate failed");
			/* a trailer field found wrong has just been read: point at its start */
			if (g->z.msg && (!strcmp(g->z.msg, "incorrect data check") || !strcmp(g->z.msg, "incorrect length check")))
				g->fail_at -= 4;
			return -1;
		}
	}
	return done;
}

/* Read up to n bytes; returns the count read, or -1 on an I/O or gzip error. */
static int64_t src_read(struct idx_file *f, void *dst, int64_t n)
{
	if (f->gzip)
		return gz_read(f->gz, dst, n);
	int64_t done = 0;
	while (done < n) {
		size_t got = fread((char *)dst + done, 1, (size_t)(n - done), f->raw);
		if (got == 0) {
			if (ferror(f->raw))
				return -1;
			break;
		}
		done += (int64_t)got;
	}
	return done;
}

/* A failed read: for a gzip file at the compressed offset of the damage. */
static int read_failed(struct idx_file *f, int64_t at, char *err, size_t errlen)
{
	struct gz_in *g = f->gz;
	if (f->gzip && !g->eno)
		return util_fail(err, errlen, "%s: compressed byte %lld: %s; the file is damaged; re-download the dataset",
			    f->path, (long long)g->fail_at, g->msg);
	if (f->gzip)
		return util_fail(err, errlen, "%s: compressed byte %lld: %s; check the disk and the file",
			    f->path, (long long)g->fail_at, g->msg);
	return util_fail(err, errlen, "%s: byte %lld: read failed: %s; check the disk and the file",
		    f->path, (long long)at, strerror(util_os_error(errno)));
}

static void format_dims(const struct idx_file *f, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
	for (int i = 0; i < f->ndim && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%lld", i ? " x " : "", (long long)f->dims[i]);
		if (w < 0)
			break;
		at += (size_t)w;
	}
}

int idx_open(struct idx_file *f, const char *path, int want_ndim, char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	if (strlen(path) >= sizeof f->path)
		return util_fail(err, errlen, "%.200s...: path longer than %zu bytes; use a shorter path",
			    path, sizeof f->path - 1);
	strcpy(f->path, path);

	struct stat st;
	int fd = util_open_file(path, &st, "check the path or download the dataset", err, errlen);
	if (fd < 0)
		return -1;
	unsigned char sig[2] = { 0, 0 };
	if (pread(fd, sig, 2, 0) == 2 && sig[0] == 0x1f && sig[1] == 0x8b) {
		struct gz_in *g = calloc(1, sizeof *g);
		if (!g || inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK) { /* 16: gzip framing only */
			free(g);
			close(fd);
			util_os_error(ENOMEM);
			return util_fail(err, errlen, "%s: out of memory opening the gzip file", path);
		}
		g->fd = fd;
		g->size = (int64_t)st.st_size;
		f->gz = g;
		f->gzip = 1;
	} else if (!(f->raw = fdopen(fd, "rb"))) {
		int e = util_os_error(errno);
		close(fd);
		return util_fail(err, errlen, "%s: cannot open: %s", path, strerror(e));
	}

	unsigned char head[4 + 4 * IDX_MAX_DIMS] = { 0 };
	int64_t got = src_read(f, head, 4);
	if (got < 0) {
		read_failed(f, 0, err, errlen);
		goto bad;
	}
	if (got < 4) {
		util_fail(err, errlen, "%s: byte %lld: file ends inside the 4-byte IDX magic; re-download the dataset",
		     path, (long long)got);
		goto bad;
	}
	uint32_t magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
	int ndim = head[3];
	if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || ndim < 1 || ndim > IDX_MAX_DIMS ||
	    (want_ndim && ndim != want_ndim)) {
		if (want_ndim)
			util_fail(err, errlen, "%s: byte 0: magic 0x%08x is not an IDX file of unsigned bytes with %d "
			     "dimension%s (expected 0x%08x); check that this is the right file",
			     path, magic, want_ndim, want_ndim == 1 ? "" : "s", 0x800u | (unsigned)want_ndim);
		else
			util_fail(err, errlen, "%s: byte 0: magic 0x%08x is not an IDX file of unsigned bytes with 1 to %d "
			     "dimensions; check that this is the right file", path, magic, IDX_MAX_DIMS);
		goto bad;
	}
	f->ndim = ndim;
	f->header_len = 4 + 4 * (int64_t)ndim;
	got = src_read(f, head + 4, 4 * (int64_t)ndim);
	if (got < 0) {
		read_failed(f, 4, err, errlen);
		goto bad;
	}
	if (got < 4 * ndim) {
		util_fail(err, errlen, "%s: byte %lld: file ends inside the header's %d dimensions; re-download the dataset",
		     path, (long long)(4 + got), ndim);
		goto bad;
	}
	int64_t count = 1;
	int overflow = 0;
	for (int i = 0; i < ndim; i++) {
		const unsigned char *p = head + 4 + 4 * i;
		f->dims[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
		if (f->dims[i] != 0 && count > INT64_MAX / f->dims[i])
			overflow = 1;
		else
			count *= f->dims[i];
	}
	char dims[128];
	format_dims(f, dims, sizeof dims);
	if (overflow || count > INT64_MAX - f->header_len) {
		util_fail(err, errlen, "%s: byte 4: dimensions %s overflow a 64-bit byte count; the file is corrupt",
		     path, dims);
		goto bad;
	}
	f->count = count;

	if (!f->gzip) {
		int64_t want = f->header_len + count;
		if ((int64_t)st.st_size < want) {
			util_fail(err, errlen, "%s: byte %lld: file has %lld bytes but its header (%s) needs %lld; "
			     "the file is truncated; re-download the dataset",
			     path, (long long)st.st_size, (long long)st.st_size, dims, (long long)want);
			goto bad;
		}
		if ((int64_t)st.st_size > want) {
			util_fail(err, errlen, "%s: byte %lld: %lld bytes of trailing data after the %lld bytes its "
			     "header (%s) describes; the file is corrupt; re-download the dataset",
			     path, (long long)want, (long long)(st.st_size - want), (long long)want, dims);
			goto bad;
		}
	} else {
		int64_t bound = (int64_t)st.st_size > (INT64_MAX - GZIP_SLACK) / GZIP_MAX_RATIO
					? INT64_MAX : (int64_t)st.st_size * GZIP_MAX_RATIO + GZIP_SLACK;
		if (count > bound) {
			util_fail(err, errlen, "%s: byte 4: header (%s) promises %lld bytes but a %lld-byte gzip file "
			     "cannot hold more than %lld; the file is corrupt; re-download the dataset",
			     path, dims, (long long)count, (long long)st.st_size, (long long)bound);
			goto bad;
		}
	}
	return 0;
bad:
	idx_close(f);
	return -1;
}

int idx_read(struct idx_file *f, uint8_t *dst, char *err, size_t errlen)
{
	if (!f->raw && !f->gz)
		return util_fail(err, errlen, "%s: idx_read on a closed file", f->path);
	int64_t got = src_read(f, dst, f->count);
	if (got < 0)
		return read_failed(f, f->header_len, err, errlen);
	struct gz_in *g = f->gz;
	if (got < f->count) {
		char dims[128], where[64] = "";
		format_dims(f, dims, sizeof dims);
		if (f->gzip)
			snprintf(where, sizeof where, ": the gzip data stops at compressed byte %lld", (long long)g->taken);
		return util_fail(err, errlen, "%s: byte %lld%s: data ends after %lld of the %lld bytes its header (%s) "
			    "promises%s; the file is truncated; re-download the dataset",
			    f->path, (long long)(f->header_len + got), f->gzip ? " (decompressed)" : "",
			    (long long)got, (long long)f->count, dims, where);
	}
	/* one more byte: finds trailing data, and for gzip reaches the member's
	 * trailer, so that inflate checks the CRC and length, and what follows it */
	unsigned char extra;
	int64_t more = src_read(f, &extra, 1);
	int64_t end = f->header_len + f->count;
	if (more < 0)
		return read_failed(f, end, err, errlen);
	if (more > 0)
		return util_fail(err, errlen, "%s: byte %lld%s: trailing data after the %lld bytes the header "
			    "describes; the file is corrupt; re-download the dataset",
			    f->path, (long long)end, f->gzip ? " (decompressed)" : "", (long long)end);
	if (f->gzip && g->cut)
		return util_fail(err, errlen, "%s: compressed byte %lld: the file ends inside its gzip data, after all %lld "
			    "bytes the header describes (the CRC-32 and length that check them are cut off); the file is "
			    "truncated; re-download the dataset", f->path, (long long)g->taken, (long long)end);
	return 0;
}

void idx_close(struct idx_file *f)
{
	if (f->raw)
		fclose(f->raw);
	if (f->gz) {
		struct gz_in *g = f->gz;
		inflateEnd(&g->z);
		close(g->fd);
		free(g);
	}
	f->raw = NULL;
	f->gz = NULL;
}
