/* test_safetensors.c: safetensors round trips, files written by the
 * reference library, hostile headers, and a file truncated while mapped.
 * The two byte arrays below were written once by the official safetensors
 * Python package (0.8.0, with torch 1.13) and pasted here, so the test needs
 * no Python.  Hostile files are built in memory and parsed with
 * safetensors_parse; the writer's files go to a fresh mkdtemp directory.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/filemap.h"
#include "runtime/safetensors.h"
#include "tests/check.h"

/* save_file({"fc.weight": torch.arange(6.).reshape(2, 3) / 4, "fc.bias": torch.tensor([-1.5, 2.0]),
 *            "step": torch.tensor([7]), "a.half": torch.tensor([1.0, -2.0], dtype=torch.float16),
 *            "scalar": torch.tensor(3.25)}, path, metadata={"format": "pt", "epoch": "3"}) */
static const unsigned char reference_mixed[] = {
	0x58, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x22, 0x5f, 0x5f, 0x6d, 0x65, 0x74, 0x61,
	0x64, 0x61, 0x74, 0x61, 0x5f, 0x5f, 0x22, 0x3a, 0x7b, 0x22, 0x65, 0x70, 0x6f, 0x63, 0x68, 0x22,
	0x3a, 0x22, 0x33, 0x22, 0x2c, 0x22, 0x66, 0x6f, 0x72, 0x6d, 0x61, 0x74, 0x22, 0x3a, 0x22, 0x70,
	0x74, 0x22, 0x7d, 0x2c, 0x22, 0x73, 0x74, 0x65, 0x70, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79,
	0x70, 0x65, 0x22, 0x3a, 0x22, 0x49, 0x36, 0x34, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65,
	0x22, 0x3a, 0x5b, 0x31, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73,
	0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x30, 0x2c, 0x38, 0x5d, 0x7d, 0x2c, 0x22, 0x66, 0x63, 0x2e,
	0x62, 0x69, 0x61, 0x73, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22,
	0x46, 0x33, 0x32, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x5d,
	0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a,
	0x5b, 0x38, 0x2c, 0x31, 0x36, 0x5d, 0x7d, 0x2c, 0x22, 0x66, 0x63, 0x2e, 0x77, 0x65, 0x69, 0x67,
	0x68, 0x74, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x33,
	0x32, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x2c, 0x33, 0x5d,
	0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a,
	0x5b, 0x31, 0x36, 0x2c, 0x34, 0x30, 0x5d, 0x7d, 0x2c, 0x22, 0x73, 0x63, 0x61, 0x6c, 0x61, 0x72,
	0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x33, 0x32, 0x22,
	0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74,
	0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x34, 0x30, 0x2c, 0x34,
	0x34, 0x5d, 0x7d, 0x2c, 0x22, 0x61, 0x2e, 0x68, 0x61, 0x6c, 0x66, 0x22, 0x3a, 0x7b, 0x22, 0x64,
	0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x31, 0x36, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61,
	0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66,
	0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x34, 0x34, 0x2c, 0x34, 0x38, 0x5d, 0x7d, 0x7d,
	0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xbf, 0x00, 0x00, 0x00, 0x40,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x40, 0x3f,
	0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0xa0, 0x3f, 0x00, 0x00, 0x50, 0x40, 0x00, 0x3c, 0x00, 0xc0,
};

/* save_file({"w": torch.ones(1), "b2": torch.tensor([0.5, -2.0])}, path): F32 only, no metadata */
static const unsigned char reference_f32[] = {
	0x70, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x22, 0x62, 0x32, 0x22, 0x3a, 0x7b, 0x22,
	0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x33, 0x32, 0x22, 0x2c, 0x22, 0x73, 0x68,
	0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f,
	0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x30, 0x2c, 0x38, 0x5d, 0x7d, 0x2c, 0x22,
	0x77, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x33, 0x32,
	0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x31, 0x5d, 0x2c, 0x22, 0x64,
	0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x38, 0x2c,
	0x31, 0x32, 0x5d, 0x7d, 0x7d, 0x20, 0x20, 0x20, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x00, 0xc0,
	0x00, 0x00, 0x80, 0x3f,
};

static char tmp[256];
static char err[1024];

static const char *at(const char *name)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
	return buf[k];
}

static int contains(const char *s, const char *sub)
{
	if (!strstr(s, sub)) {
		fprintf(stderr, "  message: %s\n  lacks:   %s\n", s, sub);
		return 0;
	}
	return 1;
}

static unsigned char *read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static unsigned char buf[1 << 16];
	*n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	return buf;
}

static void test_reference_file(void)
{
	struct safetensors_file f;
	CHECK(safetensors_parse(&f, reference_mixed, sizeof reference_mixed, "ref.safetensors", err, sizeof err) == 0);
	CHECK(f.n == 5 && f.nmeta == 2);
	CHECK_STR(safetensors_meta_get(&f, "format"), "pt");
	CHECK_STR(safetensors_meta_get(&f, "epoch"), "3");
	CHECK(safetensors_meta_get(&f, "nope") == NULL);

	float w[6], bias[2], sc;
	CHECK(safetensors_read_f32(&f, "fc.weight", 2, (int64_t[]){ 2, 3 }, w, err, sizeof err) == 0);
	for (int i = 0; i < 6; i++)
		CHECK(w[i] == (float)i / 4);
	CHECK(safetensors_read_f32(&f, "fc.bias", 1, (int64_t[]){ 2 }, bias, err, sizeof err) == 0);
	CHECK(bias[0] == -1.5f && bias[1] == 2.0f);
	CHECK(safetensors_read_f32(&f, "scalar", 0, NULL, &sc, err, sizeof err) == 0 && sc == 3.25f);

	const struct safetensors_entry *e = safetensors_find(&f, "step");
	CHECK(e && e->dtype == ST_I64 && e->ndim == 1 && e->shape[0] == 1 && e->numel == 1);
	int64_t step;
	if (e)
		memcpy(&step, e->data, 8);
	CHECK(e && step == 7);
	e = safetensors_find(&f, "a.half");
	CHECK(e && e->dtype == ST_F16 && e->end - e->begin == 4);
	CHECK(e && e->data[0] == 0x00 && e->data[1] == 0x3c && e->data[3] == 0xc0); /* 1.0, -2.0 in binary16 */
	CHECK_STR(safetensors_dtype_name(ST_BF16), "BF16");
	CHECK(safetensors_dtype_size(ST_F64) == 8);

	CHECK(safetensors_read_f32(&f, "a.half", -1, NULL, w, err, sizeof err) == -1);
	CHECK(contains(err, "ref.safetensors: byte ") && contains(err, "tensor 'a.half' is F16, expected F32"));
	CHECK(safetensors_read_f32(&f, "fc.weight", 2, (int64_t[]){ 3, 2 }, w, err, sizeof err) == -1);
	CHECK(contains(err, "tensor 'fc.weight' has shape [2, 3], expected [3, 2]"));
	CHECK(safetensors_read_f32(&f, "fc.wieght", -1, NULL, w, err, sizeof err) == -1);
	CHECK(contains(err, "ref.safetensors: no tensor 'fc.wieght' among its 5"));
	safetensors_close(&f);
	safetensors_close(&f);
}

static void test_round_trip(void)
{
	float w[6] = { 1, -2, 3.5f, 1e-30f, -0.0f, 65504 }, b[2] = { 0.25f, -8 }, s = 42, none[1] = { 0 };
	struct safetensors_tensor t[] = {
		{ "layers.0.weight", 2, { 2, 3 }, w },
		{ "layers.0.bias", 1, { 2 }, b },
		{ "scale", 0, { 0 }, &s },
		{ "empty", 2, { 0, 4 }, NULL },
		{ "q\"uo\\te\n\x01 \xc3\xa9", 1, { 1 }, none },
	};
	struct safetensors_meta m[] = { { "format", "pt" }, { "step", "12" } };
	CHECK(safetensors_write(at("rt.safetensors"), t, 5, m, 2, err, sizeof err) == 0);

	size_t n = 0;
	const unsigned char *bytes = read_all(at("rt.safetensors"), &n);
	CHECK(bytes && n > 8);
	uint64_t hl = 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | bytes[i];
	CHECK(hl % 8 == 0 && n == 8 + hl + 4 * (6 + 2 + 1 + 1));
	const char *want = "{\"__metadata__\":{\"format\":\"pt\",\"step\":\"12\"},"
			   "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[0,0]},"
			   "\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
			   "\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
			   "\"q\\\"uo\\\\te\\n\\u0001 \xc3\xa9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[32,36]},"
			   "\"scale\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[36,40]}}";
	CHECK(hl >= strlen(want) && memcmp(bytes + 8, want, strlen(want)) == 0);
	for (size_t i = 8 + strlen(want); i < 8 + hl; i++)
		CHECK(bytes[i] == ' ');

	struct safetensors_file f;
	CHECK(safetensors_open(&f, at("rt.safetensors"), err, sizeof err) == 0);
	CHECK(f.n == 5);
	float w2[6], b2[2], s2, q;
	CHECK(safetensors_read_f32(&f, "layers.0.weight", 2, (int64_t[]){ 2, 3 }, w2, err, sizeof err) == 0);
	CHECK(memcmp(w, w2, sizeof w) == 0);
	CHECK(safetensors_read_f32(&f, "layers.0.bias", 1, (int64_t[]){ 2 }, b2, err, sizeof err) == 0);
	CHECK(memcmp(b, b2, sizeof b) == 0);
	CHECK(safetensors_read_f32(&f, "scale", 0, NULL, &s2, err, sizeof err) == 0 && s2 == 42);
	CHECK(safetensors_read_f32(&f, "q\"uo\\te\n\x01 \xc3\xa9", 1, (int64_t[]){ 1 }, &q, err, sizeof err) == 0);
	const struct safetensors_entry *e = safetensors_find(&f, "empty");
	CHECK(e && e->numel == 0 && e->ndim == 2 && e->shape[1] == 4);
	CHECK_STR(safetensors_meta_get(&f, "step"), "12");
	safetensors_close(&f);

	/* the reference library's bytes, exactly, for F32 tensors without metadata */
	float ones = 1, b2v[2] = { 0.5f, -2 };
	struct safetensors_tensor r[] = { { "w", 1, { 1 }, &ones }, { "b2", 1, { 2 }, b2v } };
	CHECK(safetensors_write(at("same.safetensors"), r, 2, NULL, 0, err, sizeof err) == 0);
	bytes = read_all(at("same.safetensors"), &n);
	CHECK(bytes && n == sizeof reference_f32 && memcmp(bytes, reference_f32, n) == 0);

	/* overwrite in place: the new file replaces the old and no temporary is left */
	CHECK(safetensors_write(at("rt.safetensors"), r, 1, NULL, 0, err, sizeof err) == 0);
	CHECK(safetensors_open(&f, at("rt.safetensors"), err, sizeof err) == 0 && f.n == 1);
	safetensors_close(&f);
	DIR *d = opendir(tmp);
	struct dirent *de;
	int leftovers = 0;
	while (d && (de = readdir(d)))
		leftovers += strstr(de->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	CHECK(leftovers == 0);
	struct stat st;
	CHECK(stat(at("rt.safetensors"), &st) == 0 && (st.st_mode & 0777) == 0644);

	/* an empty checkpoint is valid: "{}" padded to 8 */
	CHECK(safetensors_write(at("none.safetensors"), NULL, 0, NULL, 0, err, sizeof err) == 0);
	bytes = read_all(at("none.safetensors"), &n);
	CHECK(bytes && n == 16 && bytes[0] == 8 && memcmp(bytes + 8, "{}      ", 8) == 0);
}

static void test_write_errors(void)
{
	float v[2] = { 1, 2 };
	struct safetensors_tensor dup[] = { { "a", 1, { 2 }, v }, { "a", 1, { 1 }, v } };
	CHECK(safetensors_write(at("x.safetensors"), dup, 2, NULL, 0, err, sizeof err) == -1);
	CHECK(contains(err, "x.safetensors: tensor name 'a' given twice"));
	struct safetensors_tensor meta_name[] = { { "__metadata__", 1, { 2 }, v } };
	CHECK(safetensors_write(at("x.safetensors"), meta_name, 1, NULL, 0, err, sizeof err) == -1);
	CHECK(contains(err, "name '__metadata__' is not a valid UTF-8 tensor name"));
	struct safetensors_tensor bad_utf8[] = { { "\xff", 1, { 2 }, v } };
	CHECK(safetensors_write(at("x.safetensors"), bad_utf8, 1, NULL, 0, err, sizeof err) == -1);
	struct safetensors_tensor neg[] = { { "n", 1, { -1 }, v } };
	CHECK(safetensors_write(at("x.safetensors"), neg, 1, NULL, 0, err, sizeof err) == -1);
	CHECK(contains(err, "tensor 'n': dimension 0 is -1"));
	struct safetensors_meta m[] = { { "k", "1" }, { "k", "2" } };
	CHECK(safetensors_write(at("x.safetensors"), NULL, 0, m, 2, err, sizeof err) == -1);
	CHECK(contains(err, "metadata key \"k\" given twice"));
	CHECK(safetensors_write(at("no/such/dir/x.safetensors"), NULL, 0, NULL, 0, err, sizeof err) == -1);
	CHECK(contains(err, "cannot create a temporary file in ") && contains(err, "no/such/dir: No such file"));
	CHECK(access(at("x.safetensors"), F_OK) != 0);
}

/* touch dir/name, an empty file */
static void touch(const char *name)
{
	int fd = open(at(name), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

/* A writer killed while it wrote left its temporary file: the next write
 * to the same path removes it, and only it (before, such files stayed for
 * good).  A live writer's, another path's and a name without a PID stay. */
static void test_write_sweeps_leftovers(void)
{
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	CHECK(child > 0 && waitpid(child, NULL, 0) == child); /* a PID that no longer runs */
	char dead[64], live[64], other[64];
	snprintf(dead, sizeof dead, "sw.safetensors.tmp.%d.Ab12Cd", (int)child);
	snprintf(live, sizeof live, "sw.safetensors.tmp.%d.Ab12Cd", (int)getppid());
	snprintf(other, sizeof other, "sw2.safetensors.tmp.%d.Ab12Cd", (int)child);
	const char *names[] = { dead, live, other, "sw.safetensors.tmp.Ab12Cd" };
	for (int i = 0; i < 4; i++)
		touch(names[i]);
	float v = 1;
	struct safetensors_tensor t[] = { { "w", 1, { 1 }, &v } };
	CHECK(safetensors_write(at("sw.safetensors"), t, 1, NULL, 0, err, sizeof err) == 0);
	CHECK(access(at(dead), F_OK) != 0);
	for (int i = 1; i < 4; i++)
		CHECK(access(at(names[i]), F_OK) == 0);
}

/* parse a file made of an 8-byte length, header, then data_len bytes */
static int parse(const char *header, size_t data_len)
{
	static unsigned char buf[4096];
	size_t h = strlen(header);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
	memcpy(buf + 8, header, h);
	memset(buf + 8 + h, 0, data_len);
	struct safetensors_file f;
	err[0] = 0;
	int rc = safetensors_parse(&f, buf, 8 + h + data_len, "bad.safetensors", err, sizeof err);
	safetensors_close(&f);
	return rc;
}

static void hostile(const char *header, size_t data_len, const char *sub)
{
	if (parse(header, data_len) != -1) {
		fprintf(stderr, "  accepted: %s\n", header);
		CHECK(!"hostile header accepted");
		return;
	}
	CHECK(contains(err, "bad.safetensors: byte ") && contains(err, sub));
}

#define T(name, dtype, shape, offsets) "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offsets "}"

static void test_hostile_headers(void)
{
	struct safetensors_file f;
	unsigned char raw[64] = { 0 };
	CHECK(safetensors_parse(&f, raw, 7, "bad.safetensors", err, sizeof err) == -1);
	CHECK(contains(err, "bad.safetensors: byte 0: file is 7 bytes, too short for the 8-byte header length"));
	raw[0] = 0x01, raw[3] = 0x10; /* 0x10000001 > 100 MB */
	CHECK(safetensors_parse(&f, raw, 64, "bad.safetensors", err, sizeof err) == -1);
	CHECK(contains(err, "byte 0: header length 268435457 is over the 100000000-byte limit"));
	memset(raw, 0, 8);
	raw[0] = 57;
	CHECK(safetensors_parse(&f, raw, 64, "bad.safetensors", err, sizeof err) == -1);
	CHECK(contains(err, "byte 0: header length 57 runs past the end of the 64-byte file"));

	/* valid baselines, so the failures below are for the stated reason */
	CHECK(parse("{" T("a", "F32", "[2]", "[0,8]") "}", 8) == 0);
	CHECK(parse("{}", 0) == 0);
	CHECK(parse(" {}", 0) == -1 && contains(err, "byte 8: header does not start with '{'"));
	CHECK(parse("{\"__metadata__\":{}," T("\\u00e9\\ud83d\\ude00", "U8", "[3]", "[0,3]") "}  \n ", 3) == 0);

	hostile("[]", 0, "byte 8: header does not start with '{'");
	hostile("{\"a\" {}}", 0, "byte 13: invalid header JSON: expected ':', found '{'");
	hostile("{\"a\":{\"dtype\":\"F32}}", 0, "byte 22: invalid header JSON: string never ends");
	hostile("{" T("a", "F32", "[2]", "[0,8]") ",}", 8, "expected a string, found '}'");
	hostile("{" T("a", "F32", "[2]", "[0,8]") "}x", 8, "unexpected 'x' after the header's JSON object");
	hostile("{" T("a", "F32", "[2]", "[0,8]") "", 8, "expected ',' or '}', found the end of the header");
	hostile("{\"a\\q\":{}}", 0, "byte 11: invalid header JSON: bad escape in a string");
	hostile("{\"a\\ud800\":{}}", 0, "unpaired surrogate escape");
	hostile("{\"a\\u0000\":{}}", 0, "holds \\u0000");
	hostile("{\"\xc3\x28\":{}}", 0, "byte 10: invalid UTF-8 in a header string");
	hostile("{\"\xed\xa0\x80\":{}}", 0, "invalid UTF-8"); /* an encoded surrogate */
	hostile("{\"a\tb\":{}}", 0, "control byte 0x09 inside a string");
	hostile("{" T("a", "F32", "[2]", "[0,8]") "," T("a", "F32", "[2]", "[8,16]") "}", 16,
		"tensor 'a' appears twice (first at byte 9)");
	hostile("{" T("a", "Q7", "[2]", "[0,8]") "}", 8, "tensor 'a': unknown dtype \"Q7\"");
	hostile("{" T("a", "F32", "[4294967296,4294967296]", "[0,8]") "}", 8,
		"tensor 'a': shape [4294967296, 4294967296] overflows a 64-bit element count");
	hostile("{" T("a", "F64", "[2147483648,2147483648]", "[0,8]") "}", 8, "of F64 overflows a 64-bit byte count");
	hostile("{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, "shape has more than 8 entries");
	hostile("{" T("a", "F32", "[-2]", "[0,8]") "}", 8, "expected a non-negative integer, found a negative number");
	hostile("{" T("a", "F32", "[2.0]", "[0,8]") "}", 8, "expected an integer, found a fraction or exponent");
	hostile("{" T("a", "F32", "[02]", "[0,8]") "}", 8, "number with a leading zero");
	hostile("{" T("a", "F32", "[2]", "[0,99999999999999999999]") "}", 8, "number too large");
	hostile("{" T("a", "F32", "[2]", "[8,0]") "}", 8, "tensor 'a': data_offsets [8, 0] run backwards");
	hostile("{" T("a", "F32", "[2]", "[0,8]") "}", 4,
		"byte 9: tensor 'a': data_offsets [0, 8] run past the end of the 4-byte data section");
	hostile("{" T("a", "F32", "[3]", "[0,8]") "}", 8,
		"tensor 'a': data_offsets [0, 8] hold 8 bytes but F32 shape [3] needs 12");
	hostile("{" T("a", "F32", "[2]", "[0,8,16]") "}", 16, "data_offsets has more than 2 entries");
	hostile("{" T("a", "F32", "[2]", "[0]") "}", 16, "data_offsets has 1 entries, not 2");
	hostile("{" T("a", "F32", "[2]", "[0,8]") "," T("b", "F32", "[2]", "[4,12]") "}", 12,
		"tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
	hostile("{" T("a", "F32", "[2]", "[0,8]") "," T("b", "F32", "[2]", "[12,20]") "}", 20,
		"data bytes 8 to 12 belong to no tensor");
	hostile("{" T("b", "F32", "[2]", "[4,12]") "}", 12, "data bytes 0 to 4 belong to no tensor");
	hostile("{" T("a", "F32", "[2]", "[0,8]") "}", 9, "1 bytes after the last tensor's data belong to no tensor");
	hostile("{}", 3, "3 bytes after the last tensor's data");
	hostile("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8,
		"tensor 'a': unexpected field \"extra\"");
	hostile("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "tensor 'a' has no shape");
	hostile("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
		"tensor 'a': field \"dtype\" given twice");
	hostile("{\"a\":[]}", 0, "expected '{' to open a tensor entry, found '['");
	hostile("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ value of \"k\" is not a string");
	hostile("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "__metadata__ key \"k\" given twice");
	hostile("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ given twice");
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *fp = fopen(path, "wb");
	CHECK(fp != NULL);
	if (!fp)
		return;
	CHECK(fwrite(p, 1, n, fp) == n);
	CHECK(fclose(fp) == 0);
}

static void test_open_errors(void)
{
	struct safetensors_file f;
	CHECK(safetensors_open(&f, at("missing.safetensors"), err, sizeof err) == -1);
	CHECK(contains(err, "missing.safetensors: cannot open: No such file or directory"));
	CHECK(safetensors_open(&f, tmp, err, sizeof err) == -1 && contains(err, "is not a regular file (a directory)"));
	/* a FIFO is refused, not opened: open() of one waits for a writer for ever */
	CHECK(mkfifo(at("fifo.safetensors"), 0600) == 0);
	alarm(30);
	CHECK(safetensors_open(&f, at("fifo.safetensors"), err, sizeof err) == -1);
	alarm(0);
	CHECK(contains(err, "fifo.safetensors is not a regular file (a FIFO); give the path of a .safetensors file"));
	unlink(at("fifo.safetensors"));
	write_file(at("short.safetensors"), "abc", 3);
	CHECK(safetensors_open(&f, at("short.safetensors"), err, sizeof err) == -1);
	CHECK(contains(err, "short.safetensors: byte 0: file is 3 bytes, too short"));
	/* a file cut short: the last tensor runs past the data */
	write_file(at("cut.safetensors"), reference_f32, sizeof reference_f32 - 2);
	CHECK(safetensors_open(&f, at("cut.safetensors"), err, sizeof err) == -1);
	CHECK(contains(err, "tensor 'w': data_offsets [8, 12] run past the end of the 10-byte data section"));
}

/* Run fn in a child with SIGBUS caught as trainc catches it: its wait
 * status, and what it wrote to stderr in out. */
static int in_child(void (*fn)(void), char *out, size_t n)
{
	int p[2];
	out[0] = 0;
	if (pipe(p) != 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }); /* the crashes expected here leave no core */
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		filemap_catch(NULL);
		fn();
		_exit(0);
	}
	close(p[1]);
	size_t k = 0;
	ssize_t r;
	while (k < n - 1 && (r = read(p[0], out + k, n - 1 - k)) > 0)
		k += (size_t)r;
	out[k] = 0;
	close(p[0]);
	int st = -1;
	waitpid(pid, &st, 0);
	return st;
}

/* a 2-page tensor, mapped; more files opened and closed first than the
 * table has slots, so each close must free its slot; then truncated */
static void read_truncated(void)
{
	struct safetensors_file f;
	for (int i = 0; i < 2 * FILEMAP_SLOTS; i++) {
		if (safetensors_open(&f, at("big.safetensors"), err, sizeof err) != 0)
			_exit(10);
		safetensors_close(&f);
	}
	if (safetensors_open(&f, at("big.safetensors"), err, sizeof err) != 0 || truncate(at("big.safetensors"), 0) != 0)
		_exit(11);
	static float back[2048];
	safetensors_read_f32(&f, "w", 1, (int64_t[]){ 2048 }, back, err, sizeof err);
}

/* the same through a mapping of its own, which no table knows */
static void read_truncated_unknown(void)
{
	int fd = open(at("big2.safetensors"), O_RDONLY);
	const volatile char *m = fd < 0 ? MAP_FAILED : mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED || truncate(at("big2.safetensors"), 0) != 0)
		_exit(11);
	(void)m[4096];
}

static void sent_sigbus(void)
{
	raise(SIGBUS);
}

/* Another program truncating a mapped file in place: the run ends saying
 * which file, with exit status 3, instead of dying of SIGBUS unexplained;
 * a SIGBUS of any other cause still ends it as before. */
static void test_truncated_while_mapped(void)
{
	static float w[2048];
	struct safetensors_tensor t[] = { { "w", 1, { 2048 }, w } };
	CHECK(safetensors_write(at("big.safetensors"), t, 1, NULL, 0, err, sizeof err) == 0);
	CHECK(safetensors_write(at("big2.safetensors"), t, 1, NULL, 0, err, sizeof err) == 0);
	char out[8192], want[1024];
	int st = in_child(read_truncated, out, sizeof out);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == FILEMAP_EXIT_SHRANK);
	snprintf(want, sizeof want, "trainc: %s shrank while this run was reading it (another program truncated or rewrote it in place); "
		 "let whatever rewrites it finish (or put it back as it was), then run again\n", at("big.safetensors"));
	CHECK_STR(out, want);
	st = in_child(read_truncated_unknown, out, sizeof out);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS && out[0] == 0);
	st = in_child(sent_sigbus, out, sizeof out);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS && out[0] == 0);
}

int main(void)
{
	snprintf(tmp, sizeof tmp, "%s/trainc-st-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_reference_file);
	RUN(test_round_trip);
	RUN(test_write_errors);
	RUN(test_write_sweeps_leftovers);
	RUN(test_hostile_headers);
	RUN(test_open_errors);
	RUN(test_truncated_while_mapped);
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return check_done();
}
