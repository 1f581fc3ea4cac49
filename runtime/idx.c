/* idx.c: IDX reader, raw or gzip (see idx.h for the format).
 * Raw files are read with stdio and their size is checked against the header
 * before any data is read, so truncation and trailing bytes are caught up
 * front.  Gzip files cannot tell their decompressed size, so the header's
 * size is bounded by what deflate can expand the file to (about 1032:1)
 * before the caller allocates, and truncation / trailing data / CRC errors
 * are caught while reading.
 * Does not: allocate; the caller owns the destination buffer.
 * Invariant: every message names the file and, where one applies, the byte
 * offset (counted in decompressed bytes for a gzip file).
 */
#include "runtime/idx.h"
#include "runtime/util.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* deflate's best case is 258 bytes from 2 bits, about 1032:1; the slack
 * covers the gzip header and trailer of tiny files */
#define GZIP_MAX_RATIO 1032
#define GZIP_SLACK 4096

/* Read up to n bytes; returns the count read, or -1 on an I/O or gzip error. */
static int64_t src_read(struct idx_file *f, void *dst, int64_t n)
{
	int64_t done = 0;
	while (done < n) {
		if (f->gzip) {
			/* gzread takes an unsigned count; chunks keep it in range */
			int64_t chunk = n - done > (1 << 30) ? (1 << 30) : n - done;
			int got = gzread((gzFile)f->gz, (char *)dst + done, (unsigned)chunk);
			if (got < 0)
				return -1;
			if (got == 0)
				break;
			done += got;
		} else {
			size_t got = fread((char *)dst + done, 1, (size_t)(n - done), f->raw);
			if (got == 0) {
				if (ferror(f->raw))
					return -1;
				break;
			}
			done += (int64_t)got;
		}
	}
	return done;
}

static const char *src_error(struct idx_file *f)
{
	if (f->gzip) {
		int code = 0;
		const char *msg = gzerror((gzFile)f->gz, &code);
		if (code == Z_ERRNO)
			return strerror(errno);
		/* zlib prefixes its own name for the file ("<fd:3>: "); ours is already there */
		const char *sep = msg ? strstr(msg, ": ") : NULL;
		if (sep)
			msg = sep + 2;
		return msg && *msg ? msg : "unexpected end of compressed data";
	}
	return strerror(errno);
}

/* A failed read.  zlib cannot say where in the stream it found the damage
 * (a bad checksum is only known at the end), so gzip errors carry no offset. */
static int read_failed(struct idx_file *f, int64_t at, char *err, size_t errlen)
{
	if (f->gzip)
		return util_fail(err, errlen, "%s: corrupt gzip data: %s; the file is damaged; re-download the dataset",
			    f->path, src_error(f));
	return util_fail(err, errlen, "%s: byte %lld: read failed: %s; check the disk and the file",
		    f->path, (long long)at, src_error(f));
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
	int in = util_open_file(path, &st, "check the path or download the dataset", err, errlen);
	FILE *fp = in < 0 ? NULL : fdopen(in, "rb");
	if (in >= 0 && !fp) {
		int e = errno;
		close(in);
		return util_fail(err, errlen, "%s: cannot open: %s", path, strerror(e));
	}
	if (!fp)
		return -1;
	unsigned char sig[2] = { 0, 0 };
	size_t got_sig = fread(sig, 1, 2, fp);
	if (got_sig == 2 && sig[0] == 0x1f && sig[1] == 0x8b) {
		/* reuse the descriptor already checked by fstat rather than reopen the path */
		int fd = dup(fileno(fp));
		fclose(fp);
		gzFile gz = fd < 0 || lseek(fd, 0, SEEK_SET) != 0 ? NULL : gzdopen(fd, "rb");
		if (!gz) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			return util_fail(err, errlen, "%s: cannot open as gzip: %s; check the file",
				    path, e ? strerror(e) : "out of memory");
		}
		gzbuffer(gz, 1 << 17);
		f->gz = gz;
		f->gzip = 1;
	} else {
		rewind(fp);
		f->raw = fp;
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
	if (got < f->count) {
		char dims[128];
		format_dims(f, dims, sizeof dims);
		return util_fail(err, errlen, "%s: byte %lld%s: data ends after %lld of the %lld bytes its header (%s) "
			    "promises%s%s; the file is truncated; re-download the dataset",
			    f->path, (long long)(f->header_len + got), f->gzip ? " (decompressed)" : "",
			    (long long)got, (long long)f->count, dims,
			    f->gzip ? ": " : "", f->gzip ? src_error(f) : "");
	}
	/* one more byte: finds trailing data, and for gzip reaches the member's
	 * trailer so zlib checks the CRC and length */
	unsigned char extra;
	int64_t more = src_read(f, &extra, 1);
	int64_t end = f->header_len + f->count;
	if (more < 0)
		return read_failed(f, end, err, errlen);
	if (more > 0)
		return util_fail(err, errlen, "%s: byte %lld%s: trailing data after the %lld bytes the header "
			    "describes; the file is corrupt; re-download the dataset",
			    f->path, (long long)end, f->gzip ? " (decompressed)" : "", (long long)end);
	return 0;
}

void idx_close(struct idx_file *f)
{
	if (f->raw)
		fclose(f->raw);
	if (f->gz)
		gzclose((gzFile)f->gz);
	f->raw = NULL;
	f->gz = NULL;
}
