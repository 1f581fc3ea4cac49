/* safetensors.c: the safetensors reader and writer (see safetensors.h).
 * The reader is a strict recursive-descent parser for exactly the JSON the
 * format uses, so a hostile header can only produce an error: every length
 * is checked against the header's end, every number against int64, every
 * size product for overflow, every string for UTF-8.  Decoded strings never
 * grow (an escape is longer than what it stands for, and each string's quotes
 * pay for its NUL), so one buffer of the header's length holds them all.
 * The writer follows the reference library's output: tensors by dtype,
 * widest first, then in name order, `__metadata__` first, the header
 * padded with spaces to a multiple of 8, serde_json's string escapes; for
 * F32 tensors without metadata the bytes are identical.
 * Does not: read or write big-endian hosts' floats (refused at compile time).
 * Longer than most files: reader and writer share the UTF-8, escape and
 * size rules, which must agree; apart they would need an _impl.h for that.
 * Invariant: an open file's entries point inside the file, and its data
 * section is covered by the entries exactly once.
 */
#include "runtime/safetensors.h"
#include "runtime/filemap.h"
#include "runtime/torchfile.h"
#include "runtime/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c copies host floats as the file's little-endian data; add byte swapping for this host"
#endif

/* [sync: safetensors_dtype] */
static const struct { const char *name; size_t size; } dtypes[ST_NUM_DTYPES] = {
	[ST_BOOL] = { "BOOL", 1 }, [ST_U8] = { "U8", 1 }, [ST_I8] = { "I8", 1 },
	[ST_F8_E5M2] = { "F8_E5M2", 1 }, [ST_F8_E4M3] = { "F8_E4M3", 1 },
	[ST_I16] = { "I16", 2 }, [ST_U16] = { "U16", 2 }, [ST_F16] = { "F16", 2 }, [ST_BF16] = { "BF16", 2 },
	[ST_I32] = { "I32", 4 }, [ST_U32] = { "U32", 4 }, [ST_F32] = { "F32", 4 },
	[ST_F64] = { "F64", 8 }, [ST_I64] = { "I64", 8 }, [ST_U64] = { "U64", 8 },
};

const char *safetensors_dtype_name(enum safetensors_dtype dtype)
{
	return (unsigned)dtype < ST_NUM_DTYPES ? dtypes[dtype].name : "?";
}

size_t safetensors_dtype_size(enum safetensors_dtype dtype)
{
	return (unsigned)dtype < ST_NUM_DTYPES ? dtypes[dtype].size : 0;
}

static int utf8_valid(const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < n;) {
		int k = util_utf8_len((const unsigned char *)s + i, n - i);
		if (!k)
			return 0;
		i += (size_t)k;
	}
	return 1;
}

static void format_shape(char *buf, size_t len, int ndim, const int64_t *shape)
{
	size_t at = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < ndim && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
	if (at < len)
		snprintf(buf + at, len - at, "]");
}

/* ---- reader ---------------------------------------------------------- */

struct parse {
	const unsigned char *h;  /* (len) the header JSON */
	size_t len, pos;
	uint64_t data_len;       /* bytes after the header */
	char *arena;             /* (len + 1) decoded strings */
	size_t used;
	const char *label;
	char *err;
	size_t errlen;
	char found[32];
};

/* an error at header position at, reported as a file offset */
static int perr(struct parse *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(struct parse *p, size_t at, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return util_fail(p->err, p->errlen, "%s: byte %zu: %s", p->label, at + 8, msg);
}

static const char *found(struct parse *p)
{
	if (p->pos >= p->len)
		return "the end of the header";
	unsigned c = p->h[p->pos];
	if (c >= 0x20 && c < 0x7f)
		snprintf(p->found, sizeof p->found, "'%c'", c);
	else
		snprintf(p->found, sizeof p->found, "byte 0x%02x", c);
	return p->found;
}

static void skip_ws(struct parse *p)
{
	while (p->pos < p->len && (p->h[p->pos] == ' ' || p->h[p->pos] == '\t' || p->h[p->pos] == '\n' ||
				   p->h[p->pos] == '\r'))
		p->pos++;
}

static int peek(struct parse *p)
{
	skip_ws(p);
	return p->pos < p->len ? p->h[p->pos] : -1;
}

static int expect(struct parse *p, int c, const char *what)
{
	if (peek(p) != c)
		return perr(p, p->pos, "invalid header JSON: expected %s, found %s; the file is corrupt", what, found(p));
	p->pos++;
	return 0;
}

static int hex4(const unsigned char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = s[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return 0;
		v = v << 4 | d;
	}
	*out = v;
	return 1;
}

/* A JSON string at p->pos, decoded into the arena. */
static int parse_string(struct parse *p, const char **out)
{
	if (peek(p) != '"')
		return perr(p, p->pos, "invalid header JSON: expected a string, found %s; the file is corrupt", found(p));
	size_t start = p->pos++;
	char *dst = p->arena + p->used;
	size_t k = 0;
	for (;;) {
		if (p->pos >= p->len)
			return perr(p, start, "invalid header JSON: string never ends; the file is corrupt");
		unsigned c = p->h[p->pos];
		if (c == '"') {
			p->pos++;
			break;
		}
		if (c < 0x20)
			return perr(p, p->pos, "invalid header JSON: control byte 0x%02x inside a string", c);
		if (c != '\\') {
			int n = util_utf8_len(p->h + p->pos, p->len - p->pos);
			if (!n)
				return perr(p, p->pos, "invalid UTF-8 in a header string; the file is corrupt");
			memcpy(dst + k, p->h + p->pos, (size_t)n);
			k += (size_t)n;
			p->pos += (size_t)n;
			continue;
		}
		size_t esc = p->pos;
		if (p->pos + 1 >= p->len)
			return perr(p, esc, "invalid header JSON: string never ends; the file is corrupt");
		c = p->h[p->pos + 1];
		p->pos += 2;
		static const char escaped[] = "\"\\/bfnrt", meant[] = "\"\\/\b\f\n\r\t";
		const char *simple = c ? strchr(escaped, (int)c) : NULL;
		if (simple) {
			dst[k++] = meant[simple - escaped];
			continue;
		}
		unsigned cp, lo;
		if (c != 'u' || p->pos + 4 > p->len || !hex4(p->h + p->pos, &cp))
			return perr(p, esc, "invalid header JSON: bad escape in a string; the file is corrupt");
		p->pos += 4;
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			if (p->pos + 6 > p->len || p->h[p->pos] != '\\' || p->h[p->pos + 1] != 'u' ||
			    !hex4(p->h + p->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
				return perr(p, esc, "invalid header JSON: unpaired surrogate escape; the file is corrupt");
			p->pos += 6;
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
		} else if (cp >= 0xDC00 && cp <= 0xDFFF) {
			return perr(p, esc, "invalid header JSON: unpaired surrogate escape; the file is corrupt");
		}
		if (cp == 0)
			return perr(p, esc, "a header string holds \\u0000, which trainc cannot represent in a name");
		/* an escape of 6 (or 12) bytes becomes at most 3 (or 4): the arena keeps up */
		if (cp < 0x80) {
			dst[k++] = (char)cp;
		} else if (cp < 0x800) {
			dst[k++] = (char)(0xC0 | cp >> 6);
			dst[k++] = (char)(0x80 | (cp & 0x3F));
		} else if (cp < 0x10000) {
			dst[k++] = (char)(0xE0 | cp >> 12);
			dst[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
			dst[k++] = (char)(0x80 | (cp & 0x3F));
		} else {
			dst[k++] = (char)(0xF0 | cp >> 18);
			dst[k++] = (char)(0x80 | (cp >> 12 & 0x3F));
			dst[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
			dst[k++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	dst[k] = 0;
	p->used += k + 1;
	*out = dst;
	return 0;
}

/* A non-negative JSON integer that fits in int64. */
static int parse_uint(struct parse *p, int64_t *out)
{
	int c = peek(p);
	size_t start = p->pos;
	if (c == '-')
		return perr(p, start, "expected a non-negative integer, found a negative number; the file is corrupt");
	if (c < '0' || c > '9')
		return perr(p, start, "invalid header JSON: expected a number, found %s; the file is corrupt", found(p));
	int64_t v = 0;
	while (p->pos < p->len && p->h[p->pos] >= '0' && p->h[p->pos] <= '9') {
		int d = p->h[p->pos] - '0';
		if (v > (INT64_MAX - d) / 10)
			return perr(p, start, "number too large for a size or offset; the file is corrupt");
		v = v * 10 + d;
		p->pos++;
	}
	if (p->pos - start > 1 && p->h[start] == '0')
		return perr(p, start, "invalid header JSON: number with a leading zero; the file is corrupt");
	if (p->pos < p->len && (p->h[p->pos] == '.' || p->h[p->pos] == 'e' || p->h[p->pos] == 'E'))
		return perr(p, start, "expected an integer, found a fraction or exponent; the file is corrupt");
	*out = v;
	return 0;
}

/* [a, b, ...] of at most max integers; *n gets the count. */
static int parse_uint_list(struct parse *p, int64_t *v, int max, int *n, const char *name, const char *field)
{
	size_t start = p->pos;
	if (expect(p, '[', "'['") != 0)
		return -1;
	*n = 0;
	if (peek(p) == ']') {
		p->pos++;
		return 0;
	}
	for (;;) {
		if (*n == max)
			return perr(p, start, "tensor '%s': %s has more than %d entries%s", name, field, max,
				    max == SAFETENSORS_MAX_DIMS ? ", more dimensions than trainc supports" : "");
		if (parse_uint(p, &v[*n]) != 0)
			return -1;
		(*n)++;
		int c = peek(p);
		p->pos++;
		if (c == ']')
			return 0;
		if (c != ',') {
			p->pos--;
			return perr(p, p->pos, "invalid header JSON: expected ',' or ']', found %s; the file is corrupt",
				    found(p));
		}
	}
}

static int parse_tensor(struct parse *p, struct safetensors_entry *e, size_t at)
{
	const char *name = e->name;
	size_t open = p->pos;
	int have_dtype = 0, have_shape = 0, have_offsets = 0;
	int64_t offsets[2];
	if (expect(p, '{', "'{' to open a tensor entry") != 0)
		return -1;
	if (peek(p) == '}')
		p->pos++;
	else
		for (;;) {
			size_t kat = p->pos;
			const char *key, *v;
			int c, count;
			if (parse_string(p, &key) != 0 || expect(p, ':', "':'") != 0)
				return -1;
			if ((!strcmp(key, "dtype") && have_dtype) || (!strcmp(key, "shape") && have_shape) ||
			    (!strcmp(key, "data_offsets") && have_offsets))
				return perr(p, kat, "tensor '%s': field \"%s\" given twice; the file is corrupt", name, key);
			if (!strcmp(key, "dtype")) {
				size_t vat = p->pos;
				if (parse_string(p, &v) != 0)
					return -1;
				int d = 0;
				while (d < ST_NUM_DTYPES && strcmp(v, dtypes[d].name) != 0)
					d++;
				if (d == ST_NUM_DTYPES)
					return perr(p, vat, "tensor '%s': unknown dtype \"%s\"; known: BOOL, U8, I8, F8_E5M2, "
						    "F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64", name, v);
				e->dtype = (enum safetensors_dtype)d;
				have_dtype = 1;
			} else if (!strcmp(key, "shape")) {
				if (parse_uint_list(p, e->shape, SAFETENSORS_MAX_DIMS, &e->ndim, name, "shape") != 0)
					return -1;
				have_shape = 1;
			} else if (!strcmp(key, "data_offsets")) {
				size_t vat = p->pos;
				if (parse_uint_list(p, offsets, 2, &count, name, "data_offsets") != 0)
					return -1;
				if (count != 2)
					return perr(p, vat, "tensor '%s': data_offsets has %d entries, not 2; the file is corrupt",
						    name, count);
				have_offsets = 1;
			} else {
				return perr(p, kat, "tensor '%s': unexpected field \"%s\"; a tensor entry has only dtype, "
					    "shape and data_offsets", name, key);
			}
			c = peek(p);
			p->pos++;
			if (c == '}')
				break;
			if (c != ',') {
				p->pos--;
				return perr(p, p->pos, "invalid header JSON: expected ',' or '}', found %s; the file is corrupt",
					    found(p));
			}
		}
	if (!have_dtype || !have_shape || !have_offsets)
		return perr(p, open, "tensor '%s' has no %s; the file is corrupt", name,
			    !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");

	char shape[160];
	format_shape(shape, sizeof shape, e->ndim, e->shape);
	int64_t numel = 1, size = (int64_t)dtypes[e->dtype].size;
	for (int i = 0; i < e->ndim; i++) {
		if (e->shape[i] != 0 && numel > INT64_MAX / e->shape[i])
			return perr(p, at, "tensor '%s': shape %s overflows a 64-bit element count; the file is corrupt",
				    name, shape);
		numel *= e->shape[i];
	}
	if (numel > INT64_MAX / size)
		return perr(p, at, "tensor '%s': shape %s of %s overflows a 64-bit byte count; the file is corrupt",
			    name, shape, dtypes[e->dtype].name);
	e->numel = numel;
	e->begin = (uint64_t)offsets[0];
	e->end = (uint64_t)offsets[1];
	if (e->begin > e->end)
		return perr(p, at, "tensor '%s': data_offsets [%llu, %llu] run backwards; the file is corrupt", name,
			    (unsigned long long)e->begin, (unsigned long long)e->end);
	if (e->end > p->data_len)
		return perr(p, at, "tensor '%s': data_offsets [%llu, %llu] run past the end of the %llu-byte data "
			    "section; the file is truncated or corrupt", name, (unsigned long long)e->begin,
			    (unsigned long long)e->end, (unsigned long long)p->data_len);
	if (e->end - e->begin != (uint64_t)(numel * size))
		return perr(p, at, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s shape %s needs %lld; "
			    "the file is corrupt", name, (unsigned long long)e->begin, (unsigned long long)e->end,
			    (unsigned long long)(e->end - e->begin), dtypes[e->dtype].name, shape,
			    (long long)(numel * size));
	return 0;
}

static int parse_meta(struct parse *p, struct safetensors_file *f)
{
	if (expect(p, '{', "'{' to open __metadata__") != 0)
		return -1;
	if (peek(p) == '}') {
		p->pos++;
		return 0;
	}
	for (;;) {
		size_t at = p->pos;
		const char *k, *v;
		if (parse_string(p, &k) != 0 || expect(p, ':', "':'") != 0)
			return -1;
		if (peek(p) != '"')
			return perr(p, p->pos, "__metadata__ value of \"%s\" is not a string; the file is corrupt", k);
		if (parse_string(p, &v) != 0)
			return -1;
		for (int i = 0; i < f->nmeta; i++)
			if (!strcmp(f->meta[i].key, k))
				return perr(p, at, "__metadata__ key \"%s\" given twice; the file is corrupt", k);
		/* a pair takes at least 6 header bytes, so the count is bounded by the header */
		if ((f->nmeta & (f->nmeta - 1)) == 0) {
			void *m = realloc(f->meta, (size_t)(f->nmeta ? 2 * f->nmeta : 1) * sizeof *f->meta);
			if (!m) {
				util_os_error(ENOMEM);
				return perr(p, at, "out of memory reading __metadata__");
			}
			f->meta = m;
		}
		f->meta[f->nmeta].key = k;
		f->meta[f->nmeta++].value = v;
		int c = peek(p);
		p->pos++;
		if (c == '}')
			return 0;
		if (c != ',') {
			p->pos--;
			return perr(p, p->pos, "invalid header JSON: expected ',' or '}', found %s; the file is corrupt",
				    found(p));
		}
	}
}

static int parse_header(struct parse *p, struct safetensors_file *f)
{
	size_t meta_at = 0;
	int have_meta = 0;
	if (p->len == 0 || p->h[0] != '{')
		return perr(p, 0, "header does not start with '{'; this is not a safetensors file");
	p->pos = 1;
	if (peek(p) == '}')
		p->pos++;
	else
		for (;;) {
			size_t at = p->pos;
			const char *key;
			if (parse_string(p, &key) != 0 || expect(p, ':', "':'") != 0)
				return -1;
			if (!strcmp(key, "__metadata__")) {
				if (have_meta)
					return perr(p, at, "__metadata__ given twice (first at byte %zu); the file is corrupt",
						    meta_at + 8);
				have_meta = 1;
				meta_at = at;
				if (parse_meta(p, f) != 0)
					return -1;
			} else {
				if ((f->n & (f->n - 1)) == 0) {
					void *t = realloc(f->tensors, (size_t)(f->n ? 2 * f->n : 1) * sizeof *f->tensors);
					if (!t) {
						util_os_error(ENOMEM);
						return perr(p, at, "out of memory reading the tensor table");
					}
					f->tensors = t;
				}
				struct safetensors_entry *e = &f->tensors[f->n];
				memset(e, 0, sizeof *e);
				e->name = key;
				e->header_offset = (int64_t)at + 8;
				if (parse_tensor(p, e, at) != 0)
					return -1;
				f->n++;
			}
			int c = peek(p);
			p->pos++;
			if (c == '}')
				break;
			if (c != ',') {
				p->pos--;
				return perr(p, p->pos, "invalid header JSON: expected ',' or '}', found %s; the file is corrupt",
					    found(p));
			}
		}
	skip_ws(p);
	if (p->pos != p->len)
		return perr(p, p->pos, "unexpected %s after the header's JSON object; the file is corrupt", found(p));
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct safetensors_entry *)a)->name, ((const struct safetensors_entry *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
	const struct safetensors_entry *x = *(const struct safetensors_entry *const *)a;
	const struct safetensors_entry *y = *(const struct safetensors_entry *const *)b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* unique names, and the data section covered exactly once */
static int check_layout(struct safetensors_file *f, uint64_t header_len, uint64_t data_len, char *err, size_t errlen)
{
	if (f->n > 1)
		qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, by_name);
	for (int i = 1; i < f->n; i++)
		if (!strcmp(f->tensors[i].name, f->tensors[i - 1].name)) {
			const struct safetensors_entry *a = &f->tensors[i - 1], *b = &f->tensors[i];
			if (a->header_offset > b->header_offset)
				a = b, b = &f->tensors[i - 1];
			return util_fail(err, errlen, "%s: byte %lld: tensor '%s' appears twice (first at byte %lld); "
				    "the file is corrupt", f->path, (long long)b->header_offset, b->name,
				    (long long)a->header_offset);
		}
	const struct safetensors_entry **order = malloc((size_t)(f->n ? f->n : 1) * sizeof *order);
	if (!order) {
		util_os_error(ENOMEM);
		return util_fail(err, errlen, "%s: out of memory checking %d tensors", f->path, f->n);
	}
	for (int i = 0; i < f->n; i++)
		order[i] = &f->tensors[i];
	qsort(order, (size_t)f->n, sizeof *order, by_offset);
	uint64_t covered = 0, data_at = 8 + header_len;
	int rc = 0;
	for (int i = 0; i < f->n && rc == 0; i++) {
		const struct safetensors_entry *e = order[i];
		if (e->begin > covered)
			rc = util_fail(err, errlen, "%s: byte %llu: data bytes %llu to %llu belong to no tensor (the next, '%s', "
				  "starts at %llu); the data section must be covered without gaps; the file is corrupt",
				  f->path, (unsigned long long)(data_at + covered), (unsigned long long)covered,
				  (unsigned long long)e->begin, e->name, (unsigned long long)e->begin);
		else if (e->begin < covered)
			rc = util_fail(err, errlen, "%s: byte %lld: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' "
				  "[%llu, %llu]; the file is corrupt", f->path, (long long)e->header_offset, e->name,
				  (unsigned long long)e->begin, (unsigned long long)e->end, order[i - 1]->name,
				  (unsigned long long)order[i - 1]->begin, (unsigned long long)order[i - 1]->end);
		covered = e->end;
	}
	free(order);
	if (rc == 0 && covered != data_len)
		rc = util_fail(err, errlen, "%s: byte %llu: %llu bytes after the last tensor's data belong to no tensor; "
			  "the file has trailing bytes or its header is missing a tensor", f->path,
			  (unsigned long long)(data_at + covered), (unsigned long long)(data_len - covered));
	return rc;
}

int safetensors_parse(struct safetensors_file *f, const void *bytes, size_t size, const char *label,
		      char *err, size_t errlen)
{
	if (torchfile_is_zip(bytes, size))
		return torchfile_parse(f, bytes, size, label, err, errlen);
	memset(f, 0, sizeof *f);
	snprintf(f->path, sizeof f->path, "%s", label);
	const unsigned char *b = bytes;
	if (torchfile_is_legacy(bytes, size))
		return util_fail(err, errlen, "%s: byte 0: a pickle, as torch.save wrote before PyTorch 1.6 (or with "
			    "_use_new_zipfile_serialization=False); save it again with torch.save(model.state_dict(), PATH) "
			    "in PyTorch 1.6 or later", f->path);
	if (size < 8)
		return util_fail(err, errlen, "%s: byte 0: file is %zu bytes, too short for the 8-byte header length; "
			    "this is not a safetensors file", f->path, size);
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | b[i];
	if (n > SAFETENSORS_MAX_HEADER)
		return util_fail(err, errlen, "%s: byte 0: header length %llu is over the %d-byte limit; the file is corrupt "
			    "or not safetensors", f->path, (unsigned long long)n, SAFETENSORS_MAX_HEADER);
	if (n > size - 8)
		return util_fail(err, errlen, "%s: byte 0: header length %llu runs past the end of the %zu-byte file; "
			    "the file is truncated or not safetensors", f->path, (unsigned long long)n, size);
	f->strings = malloc((size_t)n + 1);
	if (!f->strings) {
		util_os_error(ENOMEM);
		return util_fail(err, errlen, "%s: out of memory for a %llu-byte header", f->path, (unsigned long long)n);
	}
	struct parse p = { .h = b + 8, .len = (size_t)n, .data_len = size - 8 - n, .arena = f->strings,
			   .label = f->path, .err = err, .errlen = errlen };
	if (parse_header(&p, f) != 0 || check_layout(f, n, p.data_len, err, errlen) != 0) {
		safetensors_close(f);
		return -1;
	}
	for (int i = 0; i < f->n; i++)
		f->tensors[i].data = b + 8 + n + f->tensors[i].begin;
	f->bytes = b;
	f->size = size;
	return 0;
}

int safetensors_open(struct safetensors_file *f, const char *path, char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	if (strlen(path) >= sizeof f->path)
		return util_fail(err, errlen, "%.200s...: path longer than %zu bytes; use a shorter path", path,
			    sizeof f->path - 1);
	struct stat st;
	int fd = util_open_file(path, &st, "give the path of a .safetensors file", err, errlen);
	if (fd < 0)
		return -1;
	size_t size = (size_t)st.st_size;
	if (size < 8) {
		close(fd);
		return util_fail(err, errlen, "%s: byte 0: file is %zu bytes, too short for the 8-byte header length; "
			    "this is not a safetensors file", path, size);
	}
	/* trainc replaces files by rename, never in place, so the mapping stays
	 * valid; another program truncating the file is said by filemap's handler */
	void *m = filemap_map(fd, size, PROT_READ, path, "let whatever rewrites it finish (or put it back as it was), then run again");
	int e = m == MAP_FAILED ? util_os_error(errno) : 0;
	close(fd);
	if (m == MAP_FAILED)
		return util_fail(err, errlen, "%s: cannot map %zu bytes: %s", path, size, strerror(e));
	if (safetensors_parse(f, m, size, path, err, errlen) != 0) {
		filemap_unmap(m, size);
		return -1;
	}
	f->mapped = 1;
	return 0;
}

const struct safetensors_entry *safetensors_find(const struct safetensors_file *f, const char *name)
{
	int lo = 0, hi = f->n - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2, c = strcmp(name, f->tensors[mid].name);
		if (c == 0)
			return &f->tensors[mid];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

const char *safetensors_meta_get(const struct safetensors_file *f, const char *key)
{
	for (int i = 0; i < f->nmeta; i++)
		if (!strcmp(f->meta[i].key, key))
			return f->meta[i].value;
	return NULL;
}

int safetensors_read_f32(const struct safetensors_file *f, const char *name, int ndim, const int64_t *shape,
			 float *dst, char *err, size_t errlen)
{
	const struct safetensors_entry *e = safetensors_find(f, name);
	if (!e)
		return util_fail(err, errlen, "%s: no tensor '%s' among its %d; was it saved from another model?",
			    f->path, name, f->n);
	if (e->dtype != ST_F32)
		return util_fail(err, errlen, "%s: byte %lld: tensor '%s' is %s, expected F32; save it as float32 "
			    "(tensor.float()) first", f->path, (long long)e->header_offset, name,
			    dtypes[e->dtype].name);
	int same = ndim < 0 || ndim == e->ndim;
	for (int i = 0; same && ndim >= 0 && i < ndim; i++)
		same = shape[i] == e->shape[i];
	if (!same) {
		char have[160], want[160];
		format_shape(have, sizeof have, e->ndim, e->shape);
		format_shape(want, sizeof want, ndim, shape);
		return util_fail(err, errlen, "%s: byte %lld: tensor '%s' has shape %s, expected %s; was it saved from "
			    "another model?", f->path, (long long)e->header_offset, name, have, want);
	}
	memcpy(dst, e->data, (size_t)(e->end - e->begin));
	return 0;
}

void safetensors_close(struct safetensors_file *f)
{
	if (f->mapped && f->bytes)
		filemap_unmap((void *)(uintptr_t)f->bytes, f->size);
	free(f->tensors);
	free(f->meta);
	free(f->strings);
	memset(f, 0, sizeof *f);
}

/* ---- writer ---------------------------------------------------------- */

struct out {
	char *p;
	size_t len, cap;
	int oom;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 256;
		while (cap < o->len + n + 1)
			cap *= 2;
		char *q = realloc(o->p, cap);
		if (!q) {
			o->oom = 1;
			return;
		}
		o->p = q;
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = 0;
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_int(struct out *o, unsigned long long v)
{
	char buf[24];
	put(o, buf, (size_t)snprintf(buf, sizeof buf, "%llu", v));
}

/* serde_json's escapes, so names come out as the reference writes them */
static void put_json_string(struct out *o, const char *s)
{
	put(o, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
			      : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
		char u[8];
		if (e)
			puts_(o, e);
		else if (c < 0x20)
			put(o, u, (size_t)snprintf(u, sizeof u, "\\u%04x", c));
		else
			put(o, (const char *)&c, 1);
	}
	put(o, "\"", 1);
}

static int name_order(const void *a, const void *b)
{
	return strcmp((*(const struct safetensors_typed *const *)a)->name,
		      (*(const struct safetensors_typed *const *)b)->name);
}

/* the reference's order: dtypes from the widest (I64, F64 before F32) down,
 * names ascending within one; every tensor's data then starts aligned to
 * its element size, since the data section starts at a multiple of 8 */
static int tensor_order(const void *a, const void *b)
{
	const struct safetensors_typed *x = *(const struct safetensors_typed *const *)a;
	const struct safetensors_typed *y = *(const struct safetensors_typed *const *)b;
	if (x->dtype != y->dtype)
		return x->dtype > y->dtype ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* bytes of t's data; the shape was checked by check_inputs */
static uint64_t tensor_bytes(const struct safetensors_typed *t)
{
	uint64_t bytes = dtypes[t->dtype].size;
	for (int d = 0; d < t->ndim; d++)
		bytes *= (uint64_t)t->shape[d];
	return bytes;
}

static int write_all(int fd, const void *buf, uint64_t n, uint64_t *done)
{
	const char *p = buf;
	uint64_t left = n;
	while (left > 0) {
		size_t chunk = left > (1u << 30) ? (1u << 30) : (size_t)left;
		ssize_t w = write(fd, p, chunk);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		left -= (uint64_t)w;
		*done += (uint64_t)w;
	}
	return 0;
}

/* The header JSON for t in the order given by order; offsets follow it. */
static int build_header(struct out *o, const struct safetensors_typed *const *order, int n,
			const struct safetensors_meta *meta, int nmeta, uint64_t *data_len)
{
	uint64_t at = 0;
	put(o, "{", 1);
	if (nmeta > 0) {
		puts_(o, "\"__metadata__\":{");
		for (int i = 0; i < nmeta; i++) {
			if (i)
				put(o, ",", 1);
			put_json_string(o, meta[i].key);
			put(o, ":", 1);
			put_json_string(o, meta[i].value);
		}
		put(o, "}", 1);
	}
	for (int k = 0; k < n; k++) {
		const struct safetensors_typed *e = order[k];
		uint64_t bytes = tensor_bytes(e);
		if (nmeta > 0 || k > 0)
			put(o, ",", 1);
		put_json_string(o, e->name);
		puts_(o, ":{\"dtype\":\"");
		puts_(o, dtypes[e->dtype].name);
		puts_(o, "\",\"shape\":[");
		for (int d = 0; d < e->ndim; d++) {
			if (d)
				put(o, ",", 1);
			put_int(o, (unsigned long long)e->shape[d]);
		}
		puts_(o, "],\"data_offsets\":[");
		put_int(o, at);
		put(o, ",", 1);
		if (bytes > (uint64_t)INT64_MAX - at)
			return -1;
		at += bytes;
		put_int(o, at);
		puts_(o, "]}");
	}
	put(o, "}", 1);
	while (o->len % 8)
		put(o, " ", 1);
	*data_len = at;
	return 0;
}

static int check_inputs(const char *path, const struct safetensors_typed *t, int n,
			const struct safetensors_meta *meta, int nmeta, char *err, size_t errlen)
{
	if (n < 0 || nmeta < 0 || (n > 0 && !t) || (nmeta > 0 && !meta))
		return util_fail(err, errlen, "%s: invalid tensor or metadata list", path);
	for (int i = 0; i < n; i++) {
		const struct safetensors_typed *e = &t[i];
		if (!e->name || !utf8_valid(e->name) || !strcmp(e->name, "__metadata__"))
			return util_fail(err, errlen, "%s: tensor %d: name %s%s%s is not a valid UTF-8 tensor name", path, i,
				    e->name ? "'" : "", e->name ? e->name : "(null)", e->name ? "'" : "");
		if (e->ndim < 0 || e->ndim > SAFETENSORS_MAX_DIMS)
			return util_fail(err, errlen, "%s: tensor '%s' has %d dimensions; use 0 to %d", path, e->name, e->ndim,
				    SAFETENSORS_MAX_DIMS);
		if ((unsigned)e->dtype >= ST_NUM_DTYPES)
			return util_fail(err, errlen, "%s: tensor '%s' has dtype %d, not one of enum safetensors_dtype", path,
				    e->name, (int)e->dtype);
		int64_t numel = 1, size = (int64_t)dtypes[e->dtype].size;
		for (int d = 0; d < e->ndim; d++) {
			if (e->shape[d] < 0 || (e->shape[d] != 0 && numel > INT64_MAX / size / e->shape[d]))
				return util_fail(err, errlen, "%s: tensor '%s': dimension %d is %lld; the shape is negative or "
					    "too large", path, e->name, d, (long long)e->shape[d]);
			numel *= e->shape[d];
		}
		if (numel > 0 && !e->data)
			return util_fail(err, errlen, "%s: tensor '%s' has no data", path, e->name);
	}
	for (int i = 0; i < nmeta; i++) {
		if (!meta[i].key || !meta[i].value || !utf8_valid(meta[i].key) || !utf8_valid(meta[i].value))
			return util_fail(err, errlen, "%s: metadata pair %d is missing or not valid UTF-8", path, i);
		for (int j = 0; j < i; j++)
			if (!strcmp(meta[i].key, meta[j].key))
				return util_fail(err, errlen, "%s: metadata key \"%s\" given twice", path, meta[i].key);
	}
	return 0;
}

int safetensors_write(const char *path, const struct safetensors_tensor *t, int n,
		      const struct safetensors_meta *meta, int nmeta, char *err, size_t errlen)
{
	if (n < 0 || (n > 0 && !t))
		return util_fail(err, errlen, "%s: invalid tensor or metadata list", path);
	struct safetensors_typed *typed = calloc((size_t)(n ? n : 1), sizeof *typed);
	if (!typed)
		return util_fail(err, errlen, "%s: out of memory", path);
	for (int i = 0; i < n; i++) {
		typed[i].name = t[i].name;
		typed[i].dtype = ST_F32;
		typed[i].ndim = t[i].ndim;
		memcpy(typed[i].shape, t[i].shape, sizeof typed[i].shape);
		typed[i].data = t[i].data;
	}
	int rc = safetensors_write_typed(path, typed, n, meta, nmeta, err, errlen);
	free(typed);
	return rc;
}

/* The writer's PID in a temporary name of leaf's (LEAF.tmp.PID.XXXXXX),
 * or 0 for any other name. */
static long temp_writer(const char *name, const char *leaf)
{
	size_t k = strlen(leaf);
	if (strncmp(name, leaf, k) != 0 || strncmp(name + k, ".tmp.", 5) != 0)
		return 0;
	const char *s = name + k + 5;
	size_t d = strspn(s, "0123456789");
	bool tail = s[d] == '.' && strlen(s + d + 1) == 6;
	return d && d < 10 && s[0] != '0' && tail ? strtol(s, NULL, 10) : 0;
}

/* Remove the temporary files of leaf in dir whose writers no longer run:
 * a run killed while writing leaves its own, which nothing else would
 * take away.  A live writer's file is its own. */
static void sweep_temps(const char *dir, const char *leaf)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (util_pid_gone(temp_writer(e->d_name, leaf)))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
}

int safetensors_write_typed(const char *path, const struct safetensors_typed *t, int n,
			    const struct safetensors_meta *meta, int nmeta, char *err, size_t errlen)
{
	if (check_inputs(path, t, n, meta, nmeta, err, errlen) != 0)
		return -1;
	const struct safetensors_typed **order = malloc((size_t)(n ? n : 1) * sizeof *order);
	if (!order)
		return util_fail(err, errlen, "%s: out of memory", path);
	for (int i = 0; i < n; i++)
		order[i] = &t[i];
	qsort(order, (size_t)n, sizeof *order, name_order);
	for (int k = 1; k < n; k++)
		if (!strcmp(order[k]->name, order[k - 1]->name)) {
			util_fail(err, errlen, "%s: tensor name '%s' given twice", path, order[k]->name);
			free(order);
			return -1;
		}
	qsort(order, (size_t)n, sizeof *order, tensor_order);

	struct out o = { 0 };
	put(&o, "\0\0\0\0\0\0\0\0", 8); /* the length, filled in below */
	uint64_t data_len = 0;
	if (build_header(&o, order, n, meta, nmeta, &data_len) != 0 || o.oom || o.len - 8 > SAFETENSORS_MAX_HEADER) {
		free(order);
		free(o.p);
		return util_fail(err, errlen, "%s: %s", path, o.oom ? "out of memory building the header"
			    : "the header or the data would be too large for safetensors; write fewer tensors per file");
	}
	uint64_t hl = o.len - 8;
	for (int i = 0; i < 8; i++)
		o.p[i] = (char)(hl >> (8 * i) & 0xff);

	struct safetensors_piece *pc = malloc((size_t)(n + 1) * sizeof *pc);
	int rc = -1;
	if (!pc) {
		util_fail(err, errlen, "%s: out of memory", path);
	} else {
		pc[0] = (struct safetensors_piece){ o.p, o.len };
		for (int k = 0; k < n; k++)
			pc[k + 1] = (struct safetensors_piece){ order[k]->data, tensor_bytes(order[k]) };
		rc = safetensors_write_pieces(path, pc, n + 1, err, errlen);
	}
	free(pc);
	free(order);
	free(o.p);
	return rc;
}

int safetensors_write_pieces(const char *path, const struct safetensors_piece *pc, int n, char *err, size_t errlen)
{
	uint64_t total = 0;
	for (int k = 0; k < n; k++)
		total += pc[k].len;
	char tmp[PATH_MAX + 32], dir[PATH_MAX]; /* any path the kernel takes, and the temporary name's ending */
	int w = snprintf(tmp, sizeof tmp, "%s.tmp.%d.XXXXXX", path, (int)getpid());
	if (w < 0 || (size_t)w >= sizeof tmp)
		return util_fail(err, errlen, "%.200s...: path too long", path);
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);

	sweep_temps(dir, slash ? slash + 1 : path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		int e = errno;
		return util_fail(err, errlen, "%s: cannot create a temporary file in %s: %s; check that the directory "
			    "exists and is writable", path, dir, strerror(e));
	}
	/* mkstemp makes 0600; a checkpoint is an ordinary file, as under umask 022 */
	fchmod(fd, 0644);
	uint64_t done = 0;
	int rc = 0;
	for (int k = 0; rc == 0 && k < n; k++)
		rc = write_all(fd, pc[k].data, pc[k].len, &done);
	const char *what = "write";
	if (rc == 0 && fsync(fd) != 0)
		rc = -1, what = "fsync";
	int e = errno;
	if (close(fd) != 0 && rc == 0)
		rc = -1, what = "close", e = errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -1, what = "rename", e = errno;
	if (rc != 0) {
		unlink(tmp);
		return util_fail(err, errlen, "%s: %s of %s failed after %llu of %llu bytes: %s; check free disk space and "
			    "permissions", path, what, tmp, (unsigned long long)done,
			    (unsigned long long)total, strerror(e));
	}
	/* the rename is durable only once the directory entry is on disk */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return util_fail(err, errlen, "%s: written, but cannot open directory %s to sync it: %s", path, dir,
			    strerror(errno));
	if (fsync(dfd) != 0 && errno != EINVAL) {
		e = errno;
		close(dfd);
		return util_fail(err, errlen, "%s: written, but syncing directory %s failed: %s", path, dir, strerror(e));
	}
	close(dfd);
	return 0;
}
