/* npz_write: .npz archives for the tests, as numpy.savez (stored) and
 * numpy.savez_compressed (deflated) write them through Python's zipfile:
 * each member KEY.npy with a ZIP64 extra field in its local header (numpy
 * forces ZIP64 there), sizes in the central directory, and an end record.
 *   npz_write [options] OUT KEY=FILE.npy ...
 *   --deflate 1     deflate every member (savez_compressed)
 *   --zip64 1       as an archive past 4 GiB is written: every directory
 *                   entry's sizes and offset in its ZIP64 extra field, and
 *                   a ZIP64 end record with its locator
 *   --crc K         XOR member K's (from 0) CRC with 1: a damaged archive
 *   --comment TEXT  an archive comment after the end record
 *   --method M      the directory says method M (the data stays as written)
 *   --flags F       the directory's general purpose flags (1: encrypted)
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void die(const char *m)
{
	fprintf(stderr, "npz_write: %s\n", m);
	exit(2);
}

static FILE *out;
static uint64_t pos;

static void put(const void *p, size_t n)
{
	if (fwrite(p, 1, n, out) != n)
		die("cannot write");
	pos += n;
}
static void u16(uint32_t v) { uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) }; put(b, 2); }
static void u32(uint32_t v) { u16(v & 0xffff), u16(v >> 16); }
static void u64(uint64_t v) { u32((uint32_t)v), u32((uint32_t)(v >> 32)); }

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die("cannot open an input .npy file");
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)len + 1);
	if (!b || fread(b, 1, (size_t)len, f) != (size_t)len)
		die("cannot read an input .npy file");
	fclose(f);
	*n = (size_t)len;
	return b;
}

int main(int argc, char **argv)
{
	bool squeeze = false, zip64 = false;
	long bad_crc = -1;
	const char *comment = "";
	long method = -1, flags = 0;
	int a = 1;
	for (; a + 1 < argc && argv[a][0] == '-' && argv[a][1] == '-'; a += 2) {
		const char *o = argv[a] + 2, *v = argv[a + 1];
		if (!strcmp(o, "deflate"))
			squeeze = !strcmp(v, "1");
		else if (!strcmp(o, "zip64"))
			zip64 = !strcmp(v, "1");
		else if (!strcmp(o, "crc"))
			bad_crc = atol(v);
		else if (!strcmp(o, "comment"))
			comment = v;
		else if (!strcmp(o, "method"))
			method = atol(v);
		else if (!strcmp(o, "flags"))
			flags = atol(v);
		else
			die("unknown option");
	}
	if (argc - a < 2)
		die("usage: npz_write [options] OUT KEY=FILE.npy ...");
	out = fopen(argv[a], "wb");
	if (!out)
		die("cannot create the archive");
	int n = argc - a - 1;
	struct { char name[256]; uint64_t local, csize, usize; uint32_t crc; } *m = calloc((size_t)n, sizeof *m);
	for (int k = 0; k < n; k++) {
		const char *arg = argv[a + 1 + k], *eq = strchr(arg, '=');
		if (!eq || eq - arg > 200)
			die("members are KEY=FILE.npy");
		snprintf(m[k].name, sizeof m[k].name, "%.*s.npy", (int)(eq - arg), arg);
		size_t len;
		uint8_t *data = slurp(eq + 1, &len), *body = data;
		m[k].usize = len;
		m[k].crc = (uint32_t)crc32(0L, data, (uInt)len) ^ (k == bad_crc ? 1u : 0u);
		m[k].csize = len;
		if (squeeze) {
			uLong cap = compressBound((uLong)len);
			body = malloc(cap);
			z_stream s = { 0 };
			if (!body || deflateInit2(&s, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
				die("deflate");
			s.next_in = data, s.avail_in = (uInt)len, s.next_out = body, s.avail_out = (uInt)cap;
			if (deflate(&s, Z_FINISH) != Z_STREAM_END)
				die("deflate");
			m[k].csize = s.total_out;
			deflateEnd(&s);
		}
		m[k].local = pos;
		size_t nl = strlen(m[k].name);
		u32(0x04034b50), u16(45), u16(0), u16(squeeze ? 8 : 0), u16(0), u16(0x21); /* version, flags, method, time, date */
		u32(m[k].crc), u32(0xffffffff), u32(0xffffffff), u16((uint32_t)nl), u16(20);
		put(m[k].name, nl);
		u16(1), u16(16), u64(m[k].usize), u64(m[k].csize); /* the ZIP64 extra field numpy forces */
		put(body, (size_t)m[k].csize);
		if (body != data)
			free(body);
		free(data);
	}
	uint64_t dir = pos;
	for (int k = 0; k < n; k++) {
		size_t nl = strlen(m[k].name);
		u32(0x02014b50), u16(45), u16(45), u16((uint32_t)flags), u16(method >= 0 ? (uint32_t)method : squeeze ? 8 : 0), u16(0), u16(0x21);
		u32(m[k].crc);
		u32(zip64 ? 0xffffffff : (uint32_t)m[k].csize), u32(zip64 ? 0xffffffff : (uint32_t)m[k].usize);
		u16((uint32_t)nl), u16(zip64 ? 28 : 0), u16(0), u16(0), u16(0), u32(0x1800000);
		u32(zip64 ? 0xffffffff : (uint32_t)m[k].local);
		put(m[k].name, nl);
		if (zip64)
			u16(1), u16(24), u64(m[k].usize), u64(m[k].csize), u64(m[k].local);
	}
	uint64_t dir_size = pos - dir;
	if (zip64) {
		uint64_t rec = pos;
		u32(0x06064b50), u64(44), u16(45), u16(45), u32(0), u32(0), u64((uint64_t)n), u64((uint64_t)n), u64(dir_size), u64(dir);
		u32(0x07064b50), u32(0), u64(rec), u32(1);
	}
	u32(0x06054b50), u16(0), u16(0), u16(zip64 ? 0xffff : (uint32_t)n), u16(zip64 ? 0xffff : (uint32_t)n);
	u32(zip64 ? 0xffffffff : (uint32_t)dir_size), u32(zip64 ? 0xffffffff : (uint32_t)dir), u16((uint32_t)strlen(comment));
	put(comment, strlen(comment));
	if (fclose(out) != 0)
		die("cannot write the archive");
	free(m);
	return 0;
}
