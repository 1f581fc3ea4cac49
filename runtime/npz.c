/* npz.c: finding and reading one .npy member of a .npz archive (npz.h).
 * The end-of-central-directory record is found from the end; the central
 * directory gives each member's method, sizes, CRC and local header (their
 * 64-bit values in the ZIP64 extra field where numpy's zipfile puts them);
 * the local header's name and extra lengths give where the data begins.
 * Every offset and size is checked against the archive's length before it
 * is read.
 */
#include "runtime/npz.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "runtime/util.h"

enum {
	EOCD_SIG = 0x06054b50, EOCD_LEN = 22,
	Z64_LOC_SIG = 0x07064b50, Z64_LOC_LEN = 20,
	Z64_EOCD_SIG = 0x06064b50, Z64_EOCD_LEN = 56,
	CDIR_SIG = 0x02014b50, CDIR_LEN = 46,
	LOCAL_SIG = 0x04034b50, LOCAL_LEN = 30,
};

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return le16(p) | le16(p + 2) << 16; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* [at, at + n) lies inside the archive */
static bool inside(size_t len, uint64_t at, uint64_t n)
{
	return at <= len && n <= len - at;
}

/* The central directory's offset, size and entries, from the end record
 * (and its ZIP64 record where the 32-bit fields say so). */
static int directory(const uint8_t *z, size_t len, uint64_t *at, uint64_t *size, uint64_t *entries, char *err, size_t errlen)
{
	if (len < EOCD_LEN)
		return util_fail(err, errlen, "byte %zu: the archive is shorter than a ZIP file's end record; save it again with "
				 "numpy.savez", len);
	/* the record ends the file, but for a comment of up to 65535 bytes */
	size_t e = len - EOCD_LEN, stop = e > 65535 ? e - 65535 : 0;
	for (;; e--) {
		if (le32(z + e) == EOCD_SIG && e + EOCD_LEN + le16(z + e + 20) == len)
			break;
		if (e == stop)
			return util_fail(err, errlen, "byte %zu: no ZIP end record; the archive is cut short or not a ZIP file (save "
					 "it again with numpy.savez)", len);
	}
	if (le16(z + e + 4) != 0 || le16(z + e + 6) != 0)
		return util_fail(err, errlen, "byte %zu: the archive is split over several disks; trainc reads one file", e);
	*entries = le16(z + e + 10);
	*size = le32(z + e + 12);
	*at = le32(z + e + 16);
	if (*entries != 0xffff && *size != 0xffffffff && *at != 0xffffffff)
		return 0;
	/* ZIP64: a locator just before the end record names its record */
	if (e < Z64_LOC_LEN || le32(z + e - Z64_LOC_LEN) != Z64_LOC_SIG)
		return util_fail(err, errlen, "byte %zu: the end record defers to a ZIP64 record, but there is none; the archive "
				 "is damaged", e);
	uint64_t r = le64(z + e - Z64_LOC_LEN + 8);
	if (!inside(len, r, Z64_EOCD_LEN) || le32(z + r) != Z64_EOCD_SIG)
		return util_fail(err, errlen, "byte %" PRIu64 ": no ZIP64 end record where its locator says; the archive is "
				 "damaged", r);
	*entries = le64(z + r + 32);
	*size = le64(z + r + 40);
	*at = le64(z + r + 48);
	return 0;
}

/* The 64-bit values of a central directory entry's extra field (id 1),
 * each present only where its 32-bit field is all ones. */
static int zip64_extra(const uint8_t *x, uint32_t n, uint64_t *usize, uint64_t *csize, uint64_t *local, uint64_t entry,
		       char *err, size_t errlen)
{
	for (uint32_t i = 0; i + 4 <= n;) {
		uint32_t id = le16(x + i), k = le16(x + i + 2);
		if (i + 4 + k > n)
			break;
		if (id == 1) {
			const uint8_t *v = x + i + 4;
			uint32_t used = 0;
			uint64_t *f[3] = { usize, csize, local };
			for (int j = 0; j < 3; j++) {
				if (*f[j] != 0xffffffff)
					continue;
				if (used + 8 > k)
					return util_fail(err, errlen, "byte %" PRIu64 ": a ZIP64 field is missing from the member's "
							 "directory entry; the archive is damaged", entry);
				*f[j] = le64(v + used);
				used += 8;
			}
			return 0;
		}
		i += 4 + k;
	}
	if (*usize == 0xffffffff || *csize == 0xffffffff || *local == 0xffffffff)
		return util_fail(err, errlen, "byte %" PRIu64 ": the member's directory entry defers to a ZIP64 field it lacks; "
				 "the archive is damaged", entry);
	return 0;
}

void npz_member_name(const char *key, char *buf, size_t n)
{
	size_t kl = strlen(key);
	snprintf(buf, n, "%.*s%s", (int)(n > 5 ? n - 5 : 0), key, kl > 4 && !strcmp(key + kl - 4, ".npy") ? "" : ".npy");
}

int npz_find(const uint8_t *z, size_t len, const char *key, struct npz_member *m, char *err, size_t errlen)
{
	uint64_t at = 0, size = 0, entries = 0;
	if (directory(z, len, &at, &size, &entries, err, errlen) != 0)
		return -1;
	if (!inside(len, at, size))
		return util_fail(err, errlen, "byte %" PRIu64 ": the ZIP directory runs past the end of the file (%zu bytes); the "
				 "archive is cut short", at, len);
	char *want = m->name;
	npz_member_name(key, want, sizeof m->name);
	char keys[400] = "";
	size_t shown = 0;
	uint64_t p = at;
	for (uint64_t k = 0; k < entries; k++) {
		if (!inside(len, p, CDIR_LEN) || p + CDIR_LEN > at + size || le32(z + p) != CDIR_SIG)
			return util_fail(err, errlen, "byte %" PRIu64 ": ZIP directory entry %" PRIu64 " is not where the directory "
					 "says; the archive is damaged", p, k);
		uint32_t nl = le16(z + p + 28), xl = le16(z + p + 30), cl = le16(z + p + 32);
		if (!inside(len, p + CDIR_LEN, (uint64_t)nl + xl + cl))
			return util_fail(err, errlen, "byte %" PRIu64 ": ZIP directory entry %" PRIu64 " runs past the end of the file",
					 p, k);
		const char *name = (const char *)z + p + CDIR_LEN;
		if (nl == strlen(want) && !memcmp(name, want, nl)) {
			uint32_t flags = le16(z + p + 8);
			m->method = (int)le16(z + p + 10);
			m->crc = le32(z + p + 16);
			m->csize = le32(z + p + 20);
			m->usize = le32(z + p + 24);
			uint64_t local = le32(z + p + 42);
			if (zip64_extra(z + p + CDIR_LEN + nl, xl, &m->usize, &m->csize, &local, p, err, errlen) != 0)
				return -1;
			if (flags & 1)
				return util_fail(err, errlen, "byte %" PRIu64 ": %s is encrypted; save the arrays with numpy.savez, "
						 "which does not encrypt", p, want);
			if (m->method != 0 && m->method != 8)
				return util_fail(err, errlen, "byte %" PRIu64 ": %s is compressed with ZIP method %d; trainc reads stored "
						 "and deflated members (numpy.savez, numpy.savez_compressed)", p, want, m->method);
			if (!inside(len, local, LOCAL_LEN) || le32(z + local) != LOCAL_SIG)
				return util_fail(err, errlen, "byte %" PRIu64 ": %s's local header is not where the directory says; "
						 "the archive is damaged", local, want);
			m->at = local + LOCAL_LEN + le16(z + local + 26) + le16(z + local + 28);
			if (!inside(len, m->at, m->csize))
				return util_fail(err, errlen, "byte %" PRIu64 ": %s's %" PRIu64 " bytes run past the end of the file (%zu "
						 "bytes); the archive is cut short", m->at, want, m->csize, len);
			if (m->method == 0 && m->csize != m->usize)
				return util_fail(err, errlen, "byte %" PRIu64 ": %s is stored, but its sizes differ (%" PRIu64 " and %"
						 PRIu64 "); the archive is damaged", p, want, m->csize, m->usize);
			return 0;
		}
		/* the keys there are, for the message when none is the one */
		if (nl > 4 && !memcmp(name + nl - 4, ".npy", 4) && shown + nl + 2 < sizeof keys) {
			snprintf(keys + shown, sizeof keys - shown, "%s%.*s", shown ? ", " : "", (int)(nl - 4), name);
			shown = strlen(keys);
		}
		p += CDIR_LEN + (uint64_t)nl + xl + cl;
	}
	if (!shown)
		return util_fail(err, errlen, "the archive holds no .npy member, so no array '%s'; save the arrays with "
				 "numpy.savez(path, %s=a, ...)", key, key);
	return util_fail(err, errlen, "the archive holds no array '%s'; its arrays are %s (the keys np.load(path) gives)", key,
			 keys);
}

const uint8_t *npz_bytes(const uint8_t *z, const struct npz_member *m, bool check, void **own, char *err, size_t errlen)
{
	*own = NULL;
	const uint8_t *b = z + m->at;
	if (m->method == 8) {
		if (m->usize > SIZE_MAX - 1 || !(*own = malloc((size_t)m->usize + 1))) {
			util_fail(err, errlen, "out of memory for the %" PRIu64 " bytes of %s inflated; save the arrays with "
				  "numpy.savez, whose members trainc reads in place", m->usize, m->name);
			return NULL;
		}
		z_stream s = { 0 };
		int rc = inflateInit2(&s, -MAX_WBITS); /* raw deflate, as ZIP holds it */
		uint64_t in = 0, out = 0;
		while (rc == Z_OK) {
			/* zlib counts in uInt: feed and drain at most 1 GiB a turn */
			uInt ni = (uInt)(m->csize - in < (1u << 30) ? m->csize - in : 1u << 30);
			uInt no = (uInt)(m->usize - out < (1u << 30) ? m->usize - out : 1u << 30);
			s.next_in = (Bytef *)(uintptr_t)(b + in), s.avail_in = ni;
			s.next_out = (Bytef *)*own + out, s.avail_out = no;
			if (!ni && !no)
				break;
			rc = inflate(&s, Z_NO_FLUSH);
			in += ni - s.avail_in, out += no - s.avail_out;
			if (rc == Z_BUF_ERROR && out < m->usize && in < m->csize)
				rc = Z_OK;
		}
		const char *why = s.msg ? s.msg : rc == Z_STREAM_END ? "it ends early" : "it is cut short";
		inflateEnd(&s);
		if (rc != Z_STREAM_END || out != m->usize) {
			free(*own);
			*own = NULL;
			util_fail(err, errlen, "byte %" PRIu64 ": %s does not inflate to its %" PRIu64 " bytes (%s); the "
				  "archive is damaged", m->at + in, m->name, m->usize, why);
			return NULL;
		}
		b = *own;
	}
	if (!check)
		return b;
	/* the CRC in 1 GiB turns, as zlib counts in uInt */
	uLong c = crc32(0L, Z_NULL, 0);
	for (uint64_t at = 0; at < m->usize; at += 1u << 30)
		c = crc32(c, b + at, (uInt)(m->usize - at < (1u << 30) ? m->usize - at : 1u << 30));
	if ((uint32_t)c != m->crc) {
		free(*own);
		*own = NULL;
		util_fail(err, errlen, "byte %" PRIu64 ": %s's CRC-32 is %08" PRIx32 ", but its bytes give %08" PRIx32
			  "; the archive is damaged (copy or save it again)", m->at, m->name, m->crc, (uint32_t)c);
		return NULL;
	}
	return b;
}
