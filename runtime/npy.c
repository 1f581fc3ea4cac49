/* npy.c: .npy headers and elements (see npy.h).
 * The header is read as numpy.lib.format writes it and as its reader
 * takes it: a dict of exactly the keys descr, fortran_order and shape, in
 * any order, with Python's single or double quotes, a trailing comma where
 * Python allows one, and sizes with Python 2's L suffix.
 * Does not: evaluate Python (the dict is parsed, never run).
 */
#include "runtime/npy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "runtime/util.h"

struct lex {
	const uint8_t *s;
	size_t at, end;  /* offsets in the file */
	char *err;
	size_t errlen;
};

static int bad(struct lex *x, const char *what)
{
	return util_fail(x->err, x->errlen, "byte %zu: %s; write the file with numpy.save", x->at, what);
}

static void blank(struct lex *x)
{
	while (x->at < x->end && (x->s[x->at] == ' ' || x->s[x->at] == '\t' || x->s[x->at] == '\n' || x->s[x->at] == '\r'))
		x->at++;
}

/* c next, past blanks */
static bool take(struct lex *x, char c)
{
	blank(x);
	if (x->at < x->end && x->s[x->at] == c) {
		x->at++;
		return true;
	}
	return false;
}

static int string(struct lex *x, char *out, size_t n)
{
	blank(x);
	if (x->at >= x->end || (x->s[x->at] != '\'' && x->s[x->at] != '"'))
		return bad(x, "the header holds something other than a quoted string here");
	char q = (char)x->s[x->at++];
	size_t len = 0;
	while (x->at < x->end && x->s[x->at] != q) {
		if (len + 1 >= n)
			return bad(x, "the header holds a string longer than any of numpy's");
		out[len++] = (char)x->s[x->at++];
	}
	if (x->at >= x->end)
		return bad(x, "the header ends inside a string");
	x->at++;
	out[len] = '\0';
	return 0;
}

static bool word(struct lex *x, const char *w)
{
	size_t k = strlen(w);
	blank(x);
	if (x->end - x->at >= k && memcmp(x->s + x->at, w, k) == 0) {
		x->at += k;
		return true;
	}
	return false;
}

static int shape(struct lex *x, struct npy_head *h)
{
	if (!take(x, '('))
		return bad(x, "the shape is not a tuple");
	h->ndim = 0;
	for (;;) {
		if (take(x, ')'))
			return 0;
		blank(x);
		if (x->at >= x->end || x->s[x->at] < '0' || x->s[x->at] > '9')
			return bad(x, "the shape holds something other than a size");
		if (h->ndim == NPY_MAX_DIMS)
			return bad(x, "the array has more than 8 dimensions");
		int64_t v = 0;
		while (x->at < x->end && x->s[x->at] >= '0' && x->s[x->at] <= '9') {
			if (v > (INT64_MAX - 9) / 10)
				return bad(x, "a size in the shape is beyond 2^63");
			v = v * 10 + (x->s[x->at++] - '0');
		}
		if (x->at < x->end && x->s[x->at] == 'L') /* Python 2's long */
			x->at++;
		h->shape[h->ndim++] = v;
		if (take(x, ')'))
			return 0;
		if (!take(x, ','))
			return bad(x, "the shape's sizes are not separated by commas");
	}
}

static const struct {
	char kind;
	int size;
	enum npy_type type;
	const char *name;
} types[] = {
	{ 'b', 1, NPY_BOOL, "bool" },   { 'i', 1, NPY_I8, "int8" },     { 'i', 2, NPY_I16, "int16" },
	{ 'i', 4, NPY_I32, "int32" },   { 'i', 8, NPY_I64, "int64" },   { 'u', 1, NPY_U8, "uint8" },
	{ 'u', 2, NPY_U16, "uint16" },  { 'u', 4, NPY_U32, "uint32" },  { 'u', 8, NPY_U64, "uint64" },
	{ 'f', 2, NPY_F16, "float16" }, { 'f', 4, NPY_F32, "float32" }, { 'f', 8, NPY_F64, "float64" },
};

static int descr(struct lex *x, struct npy_head *h)
{
	size_t at = (blank(x), x->at);
	if (x->at < x->end && x->s[x->at] == '[')
		return bad(x, "the array is a structured one (fields of their own types); save each field as an array of its own");
	char d[32];
	if (string(x, d, sizeof d) != 0)
		return -1;
	char end = d[0], kind = end ? d[1] : 0;
	int size = 0;
	bool digits = kind && d[2];
	for (const char *c = kind ? d + 2 : d; *c && digits; c++)
		if (*c < '0' || *c > '9' || (size = size * 10 + (*c - '0')) > 64)
			digits = false;
	if (strchr("<>|=", end) && digits)
		for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
			if (types[i].kind == kind && types[i].size == size) {
				h->type = types[i].type;
				h->size = size;
				h->swap = end == '>' && size > 1;
				snprintf(h->dtype, sizeof h->dtype, "%s%s", types[i].name, h->swap ? " (big-endian)" : "");
				return 0;
			}
	x->at = at;
	char msg[160];
	if (kind == 'U' || kind == 'S')
		snprintf(msg, sizeof msg, "the array holds strings (dtype '%s'), not numbers", d);
	else if (kind == 'O')
		snprintf(msg, sizeof msg, "the array holds Python objects (dtype '%s'), not numbers", d);
	else
		snprintf(msg, sizeof msg, "dtype '%s' is not one trainc reads: store bool, an integer type, float16, float32 or float64 "
			 "(a.astype(numpy.float32))", d);
	return util_fail(x->err, x->errlen, "byte %zu: %s", at, msg);
}

static uint32_t le(const uint8_t *p, int n)
{
	uint32_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int npy_parse(const uint8_t *buf, size_t len, struct npy_head *h, char *err, size_t errlen)
{
	memset(h, 0, sizeof *h);
	if (len >= 4 && memcmp(buf, "PK\3\4", 4) == 0)
		return util_fail(err, errlen, "byte 0: this is a ZIP archive (an .npz, or a torch.save file), not a .npy file; "
				 "read an .npz with npz(\"path.npz\", input=\"x\", target=\"y\"), or save each array alone with "
				 "numpy.save");
	if (len < 6 || memcmp(buf, "\x93NUMPY", 6) != 0)
		return util_fail(err, errlen, "byte 0: not a .npy file (it does not begin with \\x93NUMPY); write it with numpy.save");
	if (len < 10)
		return util_fail(err, errlen, "byte %zu: the file ends inside the .npy preamble; it is cut short", len);
	int major = buf[6], minor = buf[7];
	if ((major != 1 && major != 2 && major != 3) || minor != 0)
		return util_fail(err, errlen, "byte 6: .npy format version %d.%d is not one trainc reads (1.0, 2.0 or 3.0)", major, minor);
	size_t start = major == 1 ? 10 : 12;
	if (len < start)
		return util_fail(err, errlen, "byte %zu: the file ends inside the .npy preamble; it is cut short", len);
	uint64_t hlen = le(buf + 8, major == 1 ? 2 : 4);
	if (start + hlen > len)
		return util_fail(err, errlen, "byte 8: the header is %" PRIu64 " bytes, but the file ends %zu bytes after it begins; "
				 "the file is cut short", hlen, len - start);
	struct lex x = { buf, start, start + (size_t)hlen, err, errlen };
	if (!take(&x, '{'))
		return bad(&x, "the header is not a Python dict");
	bool seen[3] = { false, false, false }, fortran = false;
	size_t fortran_at = 0;
	while (!take(&x, '}')) {
		char key[32];
		size_t key_at = (blank(&x), x.at);
		if (string(&x, key, sizeof key) != 0)
			return -1;
		if (!take(&x, ':'))
			return bad(&x, "the header's key is not followed by a colon");
		static const char *const keys[] = { "descr", "fortran_order", "shape" };
		int k = 0;
		while (k < 3 && strcmp(key, keys[k]) != 0)
			k++;
		if (k == 3 || seen[k]) {
			x.at = key_at;
			return bad(&x, k == 3 ? "the header has a key other than descr, fortran_order and shape"
					      : "the header names a key twice");
		}
		seen[k] = true;
		if (k == 0 && descr(&x, h) != 0)
			return -1;
		if (k == 1) {
			fortran_at = (blank(&x), x.at);
			if (word(&x, "True"))
				fortran = true;
			else if (!word(&x, "False"))
				return bad(&x, "fortran_order is not True or False");
		}
		if (k == 2 && shape(&x, h) != 0)
			return -1;
		if (!take(&x, ',')) {
			if (take(&x, '}'))
				break;
			return bad(&x, "the header's entries are not separated by commas");
		}
	}
	if (!seen[0] || !seen[1] || !seen[2])
		return bad(&x, !seen[0] ? "the header has no descr" : !seen[1] ? "the header has no fortran_order" : "the header has no shape");
	if (fortran && h->ndim > 1) {
		x.at = fortran_at;
		return util_fail(err, errlen, "byte %zu: the array is stored in Fortran order; save it in C order: "
				 "numpy.save(path, numpy.ascontiguousarray(a))", fortran_at);
	}
	h->data_at = start + hlen;
	h->numel = 1;
	for (int i = 0; i < h->ndim; i++) {
		if (h->shape[i] && h->numel > INT64_MAX / h->size / h->shape[i])
			return util_fail(err, errlen, "byte %zu: the shape's elements overflow 2^63 bytes; the header is damaged", start);
		h->numel *= h->shape[i];
	}
	uint64_t bytes = (uint64_t)h->numel * (uint64_t)h->size, have = len - h->data_at;
	char sh[160];
	if (have < bytes)
		return util_fail(err, errlen, "byte %zu: the file ends %" PRIu64 " bytes into the array's data, but shape %s of %s needs %" PRIu64
				 " bytes; the file is cut short: write it again", len, have, npy_shape_str(h, 0, sh, sizeof sh), h->dtype, bytes);
	if (have > bytes)
		return util_fail(err, errlen, "byte %" PRIu64 ": %" PRIu64 " bytes follow the array's data (shape %s of %s), where a .npy "
				 "file ends; write it again with numpy.save", h->data_at + bytes, have - bytes,
				 npy_shape_str(h, 0, sh, sizeof sh), h->dtype);
	return 0;
}

char *npy_shape_str(const struct npy_head *h, int from, char *buf, size_t n)
{
	size_t at = (size_t)snprintf(buf, n, "(");
	for (int i = from; i < h->ndim && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, i > from ? ", " : "", h->shape[i]);
	if (at < n)
		snprintf(buf + at, n - at, h->ndim - from == 1 ? ",)" : ")");
	return buf;
}

/* element i's bits, in this machine's order */
static uint64_t bits(const struct npy_head *h, const uint8_t *src, int64_t i)
{
	const uint8_t *p = src + i * h->size;
	uint64_t v = 0;
	for (int k = 0; k < h->size; k++)
		v |= (uint64_t)p[h->swap ? h->size - 1 - k : k] << (8 * k);
	return v;
}

static float half(uint16_t u)
{
	uint32_t sign = (uint32_t)(u >> 15) << 31, e = (u >> 10) & 31, m = u & 1023, f;
	if (e == 31) {
		f = sign | 0x7f800000u | m << 13;
	} else if (e) {
		f = sign | (e + 112) << 23 | m << 13;
	} else if (m) { /* subnormal: normalise */
		e = 113;
		while (!(m & 1024)) {
			m <<= 1;
			e--;
		}
		f = sign | e << 23 | (m & 1023) << 13;
	} else {
		f = sign;
	}
	float r;
	memcpy(&r, &f, 4);
	return r;
}

void npy_to_float(const struct npy_head *h, const uint8_t *src, int64_t count, float *dst)
{
	if (h->type == NPY_F32 && !h->swap) {
		memcpy(dst, src, (size_t)count * 4);
		return;
	}
	for (int64_t i = 0; i < count; i++) {
		uint64_t v = bits(h, src, i);
		switch (h->type) {
		case NPY_BOOL: dst[i] = v != 0; break;
		case NPY_I8: dst[i] = (float)(int8_t)v; break;
		case NPY_I16: dst[i] = (float)(int16_t)v; break;
		case NPY_I32: dst[i] = (float)(int32_t)v; break;
		case NPY_I64: dst[i] = (float)(int64_t)v; break;
		case NPY_U8: case NPY_U16: case NPY_U32: case NPY_U64: dst[i] = (float)v; break;
		case NPY_F16: dst[i] = half((uint16_t)v); break;
		case NPY_F32: {
			uint32_t w = (uint32_t)v;
			memcpy(&dst[i], &w, 4);
			break;
		}
		case NPY_F64: {
			double d;
			memcpy(&d, &v, 8);
			dst[i] = (float)d;
			break;
		}
		}
	}
}

bool npy_integer(const struct npy_head *h, const uint8_t *src, int64_t i, int64_t *v)
{
	uint64_t u = bits(h, src, i);
	switch (h->type) {
	case NPY_I8: *v = (int8_t)u; return true;
	case NPY_I16: *v = (int16_t)u; return true;
	case NPY_I32: *v = (int32_t)u; return true;
	case NPY_I64: *v = (int64_t)u; return true;
	case NPY_U8: case NPY_U16: case NPY_U32: case NPY_U64:
		*v = (int64_t)u;
		return u <= INT64_MAX;
	default:
		return false;
	}
}
