/* torchfile.c: torch.save archives of a state_dict, read and written (see
 * torchfile.h).
 * The archive: ZIP records PREFIX/data.pkl (the pickle), PREFIX/data/KEY
 * (one storage each, raw little-endian elements), PREFIX/version and, from
 * PyTorch 2, PREFIX/byteorder; PREFIX is any single folder name (torch.save
 * takes the file's stem).  The writer stores every record uncompressed with
 * its CRC-32, each storage 64-byte aligned through a padding extra field as
 * torch.save aligns them, and names only what torch.load's weights_only
 * unpickler allows.
 * The reader checks the CRC-32 of the pickle and of every storage it
 * takes, as torch.load does.
 * The reader's pickle machine holds values in one table freed at the end;
 * every count it reads is bounded by the bytes left, so a hostile file
 * ends in a message, never a large allocation or a crash.
 */
#include "runtime/torchfile.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "runtime/util.h"

enum { PK_LOCAL = 0x04034b50, PK_CENTRAL = 0x02014b50, PK_END = 0x06054b50, PK_END64 = 0x06064b50, PK_LOC64 = 0x07064b50 };
enum { ALIGN = 64, MEMO_MAX = 1 << 22, STACK_MAX = 1 << 22, VALUES_MAX = 1 << 22 };

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

bool torchfile_is_zip(const void *bytes, size_t size)
{
	return size >= 4 && rd32(bytes) == PK_LOCAL;
}

bool torchfile_is_legacy(const void *bytes, size_t size)
{
	const unsigned char *b = bytes;
	return size >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5;
}

/* ---- the archive's records ---------------------------------------------- */

struct record {
	const char *name;   /* not NUL-terminated: nlen bytes in the central directory */
	size_t nlen;
	uint64_t at, len;   /* the stored bytes: file offset and length */
	uint64_t entry;     /* its central directory entry's offset */
	uint32_t crc;       /* the CRC-32 the directory gives */
	bool checked;       /* its bytes found to have it */
};

struct zip {
	const unsigned char *b;
	size_t size;
	const char *label;
	struct record *rec;
	int n;
	char *err;
	size_t errlen;
};

/* The zip64 extended information of a central directory entry: the fields
 * its 32-bit ones saturated, in their order. */
static int zip64_extra(struct zip *z, const unsigned char *x, size_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *off,
		       size_t entry)
{
	while (xlen >= 4) {
		uint16_t id = rd16(x), len = rd16(x + 2);
		if ((size_t)len + 4 > xlen)
			break;
		if (id == 1) {
			const unsigned char *p = x + 4, *e = x + 4 + len;
			uint64_t *want[3] = { usize, csize, off };
			for (int k = 0; k < 3; k++) {
				if (*want[k] != 0xffffffffu)
					continue;
				if (e - p < 8)
					return util_fail(z->err, z->errlen, "%s: byte %zu: a ZIP64 field is cut short; the file is corrupt",
							 z->label, entry);
				*want[k] = rd64(p);
				p += 8;
			}
			return 0;
		}
		x += 4 + len;
		xlen -= 4 + (size_t)len;
	}
	return 0;
}

/* Read the central directory into z->rec. */
static int zip_open(struct zip *z)
{
	const unsigned char *b = z->b;
	size_t size = z->size;
	if (size < 22)
		return util_fail(z->err, z->errlen, "%s: a %zu-byte ZIP file has no end record; the file is truncated", z->label, size);
	size_t end = 0;
	bool found = false;
	for (size_t at = size - 22 + 1; at-- > 0 && size - at <= 22 + 65535;)
		if (rd32(b + at) == PK_END && at + 22 + rd16(b + at + 20) == size) {
			end = at, found = true;
			break;
		}
	if (!found)
		return util_fail(z->err, z->errlen, "%s: no ZIP end record in its last 64 KiB; the file is truncated or not a "
				 "torch.save archive", z->label);
	uint64_t count = rd16(b + end + 10), cd_len = rd32(b + end + 12), cd_at = rd32(b + end + 16);
	if ((count == 0xffff || cd_len == 0xffffffffu || cd_at == 0xffffffffu) && end >= 20 && rd32(b + end - 20) == PK_LOC64) {
		uint64_t e64 = rd64(b + end - 20 + 8);
		if (size < 56 || e64 > size - 56 || rd32(b + e64) != PK_END64)
			return util_fail(z->err, z->errlen, "%s: byte %zu: the ZIP64 end record it names is not there; the file is "
					 "corrupt", z->label, end - 20);
		count = rd64(b + e64 + 32), cd_len = rd64(b + e64 + 40), cd_at = rd64(b + e64 + 48);
	}
	if (cd_at > size || cd_len > size - cd_at || count > cd_len / 46)
		return util_fail(z->err, z->errlen, "%s: byte %zu: the ZIP central directory (%llu entries, %llu bytes at %llu) "
				 "does not fit in the %zu-byte file; it is truncated or corrupt", z->label, end,
				 (unsigned long long)count, (unsigned long long)cd_len, (unsigned long long)cd_at, size);
	z->rec = calloc(count ? (size_t)count : 1, sizeof *z->rec);
	if (!z->rec) {
		util_os_error(ENOMEM);
		return util_fail(z->err, z->errlen, "%s: out of memory", z->label);
	}
	size_t at = (size_t)cd_at, stop = (size_t)(cd_at + cd_len);
	for (uint64_t k = 0; k < count; k++) {
		if (stop - at < 46 || rd32(b + at) != PK_CENTRAL)
			return util_fail(z->err, z->errlen, "%s: byte %zu: ZIP central directory entry %llu is not there; the file is "
					 "corrupt", z->label, at, (unsigned long long)k);
		uint16_t method = rd16(b + at + 10), nlen = rd16(b + at + 28), xlen = rd16(b + at + 30), clen = rd16(b + at + 32);
		uint64_t csize = rd32(b + at + 20), usize = rd32(b + at + 24), local = rd32(b + at + 42);
		if ((size_t)46 + nlen + xlen + clen > stop - at)
			return util_fail(z->err, z->errlen, "%s: byte %zu: ZIP central directory entry %llu runs past the directory; "
					 "the file is corrupt", z->label, at, (unsigned long long)k);
		struct record *r = &z->rec[z->n];
		r->name = (const char *)b + at + 46;
		r->nlen = nlen;
		if (zip64_extra(z, b + at + 46 + nlen, xlen, &usize, &csize, &local, at) != 0)
			return -1;
		if (method != 0 || csize != usize)
			return util_fail(z->err, z->errlen, "%s: byte %zu: record %.*s is compressed (method %u); torch.save stores "
					 "its records, so save the file again with torch.save", z->label, at, (int)nlen, r->name, method);
		if (size < 30 || local > size - 30 || rd32(b + local) != PK_LOCAL)
			return util_fail(z->err, z->errlen, "%s: byte %llu: the local header of record %.*s is not there; the file "
					 "is corrupt", z->label, (unsigned long long)local, (int)nlen, r->name);
		uint64_t data = local + 30 + rd16(b + local + 26) + rd16(b + local + 28);
		if (data > size || usize > size - data)
			return util_fail(z->err, z->errlen, "%s: byte %llu: record %.*s (%llu bytes) runs past the end of the %zu-byte "
					 "file; it is truncated", z->label, (unsigned long long)local, (int)nlen, r->name,
					 (unsigned long long)usize, size);
		r->at = data, r->len = usize, r->entry = at, r->crc = rd32(b + at + 16);
		z->n++;
		at += 46 + (size_t)nlen + xlen + clen;
	}
	return 0;
}

/* Whether r's bytes have the CRC-32 its directory entry gives, as
 * torch.load checks: a damaged file is refused, not trained from.  The
 * fuzzer skips it, so that its inputs reach the pickle and the tensors. */
static int zip_check(const struct zip *z, struct record *r)
{
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
	if (r->checked)
		return 0;
	uLong crc = crc32(0L, Z_NULL, 0);
	for (uint64_t done = 0; done < r->len;) {
		uInt chunk = r->len - done > (1u << 30) ? 1u << 30 : (uInt)(r->len - done);
		crc = crc32(crc, (const Bytef *)z->b + r->at + done, chunk);
		done += chunk;
	}
	if ((uint32_t)crc != r->crc)
		return util_fail(z->err, z->errlen, "%s: bytes %llu to %llu: record %.*s does not match its CRC-32 (the archive "
				 "says %08x, the bytes give %08x): the file is damaged; save it again", z->label,
				 (unsigned long long)r->at, (unsigned long long)(r->at + r->len), (int)r->nlen, r->name, r->crc,
				 (unsigned)crc);
#endif
	r->checked = true;
	return 0;
}

/* The record named prefix + name, or NULL. */
static struct record *zip_find(const struct zip *z, const char *prefix, size_t plen, const char *name)
{
	size_t len = strlen(name);
	for (int k = 0; k < z->n; k++)
		if (z->rec[k].nlen == plen + len && !memcmp(z->rec[k].name, prefix, plen) && !memcmp(z->rec[k].name + plen, name, len))
			return &z->rec[k];
	return NULL;
}

/* ---- the pickle machine ------------------------------------------------- */

enum kind { V_MARK, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_STORAGE, V_TENSOR };

struct val {
	enum kind kind;
	int64_t i;                /* V_INT, V_BOOL */
	char *s;                  /* V_STR (NUL-terminated copy; len bytes), V_GLOBAL ("module.name") */
	size_t len;
	struct val **items;       /* V_TUPLE, V_LIST; V_DICT: key, value, key, value... */
	int n, cap;
	enum safetensors_dtype dtype; /* V_STORAGE, and its tensors */
	int64_t numel;            /* V_STORAGE: elements */
	struct val *storage;      /* V_TENSOR */
	int64_t offset;           /* V_TENSOR: elements into the storage */
	int ndim;
	int64_t *shape, *stride;  /* V_TENSOR: (ndim) each, one allocation */
	size_t at;                /* byte of the pickle that made it */
};

struct vm {
	const unsigned char *p; /* the pickle */
	size_t len, pos, base;  /* base: its first byte's offset in the file */
	const char *label;
	struct val **all;       /* every value made, to free */
	int nall, capall;
	struct val **stack;
	int sp, capstack;
	struct val **memo;
	int64_t nmemo;
	char *err;
	size_t errlen;
};

static struct val mark = { .kind = V_MARK };

static const char *kind_name(enum kind k)
{
	static const char *const names[] = { "a mark", "None", "a bool", "an int", "a float", "a str", "a tuple", "a list",
					     "a dict", "a global", "a storage", "a tensor" };
	return names[k];
}

static int bad(struct vm *m, size_t at, const char *what)
{
	return util_fail(m->err, m->errlen, "%s: byte %zu (data.pkl byte %zu): %s", m->label, m->base + at, at, what);
}

static struct val *make(struct vm *m, enum kind k, size_t at)
{
	if (m->nall == VALUES_MAX)
		return NULL;
	if (m->nall == m->capall) {
		int cap = m->capall ? 2 * m->capall : 256;
		struct val **a = realloc(m->all, (size_t)cap * sizeof *a);
		if (!a)
			return NULL;
		m->all = a, m->capall = cap;
	}
	struct val *v = calloc(1, sizeof *v);
	if (v) {
		v->kind = k, v->at = at;
		m->all[m->nall++] = v;
	}
	return v;
}

static int add_item(struct val *to, struct val *v)
{
	if (to->n == to->cap) {
		int cap = to->cap ? 2 * to->cap : 8;
		struct val **a = realloc(to->items, (size_t)cap * sizeof *a);
		if (!a)
			return -1;
		to->items = a, to->cap = cap;
	}
	to->items[to->n++] = v;
	return 0;
}

static int push(struct vm *m, struct val *v)
{
	if (!v)
		return -1;
	if (m->sp == m->capstack) {
		if (m->capstack >= STACK_MAX)
			return -1;
		int cap = m->capstack ? 2 * m->capstack : 64;
		struct val **s = realloc(m->stack, (size_t)cap * sizeof *s);
		if (!s)
			return -1;
		m->stack = s, m->capstack = cap;
	}
	m->stack[m->sp++] = v;
	return 0;
}

static struct val *pop(struct vm *m)
{
	return m->sp > 0 && m->stack[m->sp - 1] != &mark ? m->stack[--m->sp] : NULL;
}

/* The index of the topmost mark, or -1. */
static int find_mark(const struct vm *m)
{
	for (int k = m->sp - 1; k >= 0; k--)
		if (m->stack[k] == &mark)
			return k;
	return -1;
}

/* n little-endian bytes at the current position, as an unsigned number */
static bool take(struct vm *m, size_t n, uint64_t *out)
{
	if (m->len - m->pos < n)
		return false;
	uint64_t v = 0;
	for (size_t k = n; k-- > 0;)
		v = v << 8 | m->p[m->pos + k];
	m->pos += n;
	*out = v;
	return true;
}

static struct val *make_str(struct vm *m, size_t at, const unsigned char *s, size_t n)
{
	struct val *v = make(m, V_STR, at);
	if (!v || !(v->s = malloc(n + 1)))
		return NULL;
	memcpy(v->s, s, n);
	v->s[n] = 0;
	v->len = n;
	return v;
}

static const struct {
	const char *name;
	enum safetensors_dtype dtype;
} storages[] = {
	{ "torch.FloatStorage", ST_F32 },  { "torch.DoubleStorage", ST_F64 }, { "torch.HalfStorage", ST_F16 },
	{ "torch.BFloat16Storage", ST_BF16 }, { "torch.LongStorage", ST_I64 },  { "torch.IntStorage", ST_I32 },
	{ "torch.ShortStorage", ST_I16 },  { "torch.CharStorage", ST_I8 },    { "torch.ByteStorage", ST_U8 },
	{ "torch.BoolStorage", ST_BOOL },
};

/* BINPERSID: ('storage', torch.XStorage, key, location, numel) */
static struct val *persistent(struct vm *m, size_t at, struct val *id)
{
	if (!id || id->kind != V_TUPLE || id->n != 5 || id->items[0]->kind != V_STR || strcmp(id->items[0]->s, "storage") != 0 ||
	    id->items[1]->kind != V_GLOBAL || id->items[2]->kind != V_STR || id->items[4]->kind != V_INT || id->items[4]->i < 0) {
		bad(m, at, "a persistent id that is not torch.save's ('storage', type, key, location, size)");
		return NULL;
	}
	for (size_t k = 0; k < sizeof storages / sizeof storages[0]; k++)
		if (!strcmp(id->items[1]->s, storages[k].name)) {
			struct val *v = make(m, V_STORAGE, at);
			if (v) {
				v->dtype = storages[k].dtype;
				v->s = id->items[2]->s; /* the record's key, owned by the str */
				v->numel = id->items[4]->i;
			}
			return v;
		}
	char what[256];
	snprintf(what, sizeof what, "storage of %.100s: a dtype trainc does not read (it reads float, double, half, bfloat16, "
		 "integer and bool ones)", id->items[1]->s);
	bad(m, at, what);
	return NULL;
}

/* A tuple of n ints (a tensor's size or stride) into out. */
static bool ints(const struct val *t, int64_t *out, int *n)
{
	if (!t || t->kind != V_TUPLE || t->n > SAFETENSORS_MAX_DIMS)
		return false;
	for (int k = 0; k < t->n; k++) {
		if (t->items[k]->kind != V_INT || t->items[k]->i < 0)
			return false;
		out[k] = t->items[k]->i;
	}
	*n = t->n;
	return true;
}

/* REDUCE: what calling fn with args makes, for the few callables a
 * state_dict's pickle names */
static struct val *reduce(struct vm *m, size_t at, struct val *fn, struct val *args)
{
	if (!fn || fn->kind != V_GLOBAL || !args || args->kind != V_TUPLE) {
		bad(m, at, "REDUCE of something that is not a global called with a tuple");
		return NULL;
	}
	if (!strcmp(fn->s, "collections.OrderedDict") && args->n == 0)
		return make(m, V_DICT, at);
	if (!strcmp(fn->s, "torch._utils._rebuild_tensor_v2") || !strcmp(fn->s, "torch._utils._rebuild_tensor")) {
		struct val *v = make(m, V_TENSOR, at);
		int ns = 0, nt = -1;
		if (!v || !(v->shape = malloc(2 * SAFETENSORS_MAX_DIMS * sizeof *v->shape))) {
			bad(m, at, "out of memory, or a pickle of over 4 million values");
			return NULL;
		}
		v->stride = v->shape + SAFETENSORS_MAX_DIMS;
		if (args->n < 4 || args->items[0]->kind != V_STORAGE || args->items[1]->kind != V_INT || args->items[1]->i < 0 ||
		    !ints(args->items[2], v->shape, &ns) || !ints(args->items[3], v->stride, &nt) || ns != nt) {
			bad(m, at, "a tensor rebuilt from other arguments than a storage, an offset, a size and a stride");
			return NULL;
		}
		v->storage = args->items[0];
		v->dtype = v->storage->dtype;
		v->offset = args->items[1]->i;
		v->ndim = ns;
		return v;
	}
	if ((!strcmp(fn->s, "torch._utils._rebuild_parameter") || !strcmp(fn->s, "torch._utils._rebuild_parameter_with_state")) &&
	    args->n >= 1 && args->items[0]->kind == V_TENSOR)
		return args->items[0];
	char what[256];
	snprintf(what, sizeof what, "the file holds a %.100s object, not a state_dict of tensors; save the weights alone: "
		 "torch.save(model.state_dict(), PATH)", fn->s);
	bad(m, at, what);
	return NULL;
}

/* Items stack[from..sp) into a new tuple, list or dict, popped with the mark
 * below them (from - 1), or added to what lies below the mark (into). */
static struct val *collect(struct vm *m, size_t at, int from, enum kind k, struct val *into)
{
	struct val *v = into ? into : make(m, k, at);
	if (!v) {
		bad(m, at, "out of memory, or a pickle of over 4 million values");
		return NULL;
	}
	if (v->kind == V_DICT && (m->sp - from) % 2) {
		bad(m, at, "a dict's items of an odd count");
		return NULL;
	}
	for (int i = from; i < m->sp; i++)
		if (add_item(v, m->stack[i]) != 0) {
			bad(m, at, "out of memory");
			return NULL;
		}
	m->sp = from - 1;
	return v;
}

static int run(struct vm *m, struct val **result)
{
	while (m->pos < m->len) {
		size_t at = m->pos;
		unsigned char op = m->p[m->pos++];
		uint64_t u = 0;
		struct val *v = NULL, *a, *b;
		int k;
		switch (op) {
		case 0x80: /* PROTO */
			if (!take(m, 1, &u) || u < 2 || u > 5)
				return bad(m, at, "a pickle protocol other than 2 to 5");
			continue;
		case 0x95: /* FRAME */
			if (!take(m, 8, &u))
				return bad(m, at, "a frame cut short");
			continue;
		case '(': v = &mark; break;
		case '}': v = make(m, V_DICT, at); break;
		case ']': v = make(m, V_LIST, at); break;
		case ')': v = make(m, V_TUPLE, at); break;
		case 'N': v = make(m, V_NONE, at); break;
		case 0x88: case 0x89: /* NEWTRUE, NEWFALSE */
			if ((v = make(m, V_BOOL, at)))
				v->i = op == 0x88;
			break;
		case 'K': case 'M': case 'J': case 0x8a: { /* BININT1, BININT2, BININT, LONG1 */
			size_t n = op == 'K' ? 1 : op == 'M' ? 2 : 4;
			if (op == 0x8a && (!take(m, 1, &u) || (n = (size_t)u) > 8))
				return bad(m, at, "an integer of more than 64 bits");
			if (!take(m, n, &u))
				return bad(m, at, "an integer cut short");
			if ((v = make(m, V_INT, at))) {
				bool sign = (op == 'J' || op == 0x8a) && n && n < 8 && (u >> (8 * n - 1) & 1);
				v->i = sign ? (int64_t)(u | ~(uint64_t)0 << (8 * n)) : (int64_t)u;
			}
			break;
		}
		case 'G': /* BINFLOAT, big-endian: its value is never needed */
			if (m->len - m->pos < 8)
				return bad(m, at, "a float cut short");
			m->pos += 8;
			v = make(m, V_FLOAT, at);
			break;
		case 'X': case 0x8c: case 0x8d: case 'B': case 'C': case 0x8e: { /* str and bytes, by their lengths */
			size_t n = op == 0x8c || op == 'C' ? 1 : op == 'X' || op == 'B' ? 4 : 8;
			if (!take(m, n, &u) || u > m->len - m->pos)
				return bad(m, at, "a string running past the end of the pickle");
			v = make_str(m, at, m->p + m->pos, (size_t)u);
			m->pos += (size_t)u;
			break;
		}
		case 'c': { /* GLOBAL: "module\nname\n" */
			const unsigned char *s = m->p + m->pos, *e = memchr(s, '\n', m->len - m->pos);
			const unsigned char *e2 = e ? memchr(e + 1, '\n', m->len - (size_t)(e + 1 - m->p)) : NULL;
			if (!e2)
				return bad(m, at, "a global's name cut short");
			if ((v = make_str(m, at, s, (size_t)(e2 - s)))) {
				v->kind = V_GLOBAL;
				v->s[e - s] = '.';
			}
			m->pos = (size_t)(e2 + 1 - m->p);
			break;
		}
		case 0x93: /* STACK_GLOBAL */
			b = pop(m), a = pop(m);
			if (!a || !b || a->kind != V_STR || b->kind != V_STR)
				return bad(m, at, "a global named by other than two strings");
			if ((v = make(m, V_GLOBAL, at)) && (v->s = malloc(a->len + b->len + 2)))
				snprintf(v->s, a->len + b->len + 2, "%s.%s", a->s, b->s);
			else
				v = NULL;
			break;
		case 'q': case 'r': case 0x94: /* BINPUT, LONG_BINPUT, MEMOIZE */
			if (op != 0x94 && !take(m, op == 'q' ? 1 : 4, &u))
				return bad(m, at, "a memo index cut short");
			if (op == 0x94)
				u = (uint64_t)m->nmemo;
			if (m->sp == 0 || m->stack[m->sp - 1] == &mark || u >= MEMO_MAX)
				return bad(m, at, "a memo put with nothing to put, or past 4 million entries");
			if ((int64_t)u >= m->nmemo) {
				struct val **mm = realloc(m->memo, (size_t)(u + 1) * sizeof *mm);
				if (!mm)
					return bad(m, at, "out of memory");
				memset(mm + m->nmemo, 0, (size_t)(u + 1 - (uint64_t)m->nmemo) * sizeof *mm);
				m->memo = mm, m->nmemo = (int64_t)u + 1;
			}
			m->memo[u] = m->stack[m->sp - 1];
			continue;
		case 'h': case 'j': /* BINGET, LONG_BINGET */
			if (!take(m, op == 'h' ? 1 : 4, &u) || (int64_t)u >= m->nmemo || !m->memo[u])
				return bad(m, at, "a memo get of an entry never put");
			v = m->memo[u];
			break;
		case 't': case 'l': case 'd': /* TUPLE, LIST, DICT */
			if ((k = find_mark(m)) < 0)
				return bad(m, at, "a tuple, list or dict without its mark");
			if (!(v = collect(m, at, k + 1, op == 't' ? V_TUPLE : op == 'l' ? V_LIST : V_DICT, NULL)))
				return -1;
			break;
		case 0x85: case 0x86: case 0x87: /* TUPLE1, TUPLE2, TUPLE3 */
			k = m->sp - (op - 0x84);
			for (int i = k; i < m->sp; i++)
				if (i < 0 || m->stack[i] == &mark)
					return bad(m, at, "a tuple of fewer items than it takes");
			if (!(v = make(m, V_TUPLE, at)))
				break;
			for (int i = k; i < m->sp; i++)
				if (add_item(v, m->stack[i]) != 0)
					return bad(m, at, "out of memory");
			m->sp = k;
			break;
		case 'a': case 's': /* APPEND, SETITEM */
			k = m->sp - (op == 'a' ? 1 : 2);
			if (k < 1 || find_mark(m) >= k - 1 || m->stack[k - 1]->kind != (op == 'a' ? V_LIST : V_DICT))
				return bad(m, at, op == 'a' ? "an append to what is not a list" : "a set item on what is not a dict");
			for (int i = k; i < m->sp; i++)
				if (add_item(m->stack[k - 1], m->stack[i]) != 0)
					return bad(m, at, "out of memory");
			m->sp = k;
			continue;
		case 'e': case 'u': /* APPENDS, SETITEMS */
			k = find_mark(m);
			if (k < 1 || m->stack[k - 1]->kind != (op == 'e' ? V_LIST : V_DICT))
				return bad(m, at, op == 'e' ? "appends to what is not a list" : "set items on what is not a dict");
			if (!collect(m, at, k + 1, V_NONE, m->stack[k - 1]))
				return -1;
			continue;
		case 'R': /* REDUCE */
			b = pop(m), a = pop(m);
			if (!(v = reduce(m, at, a, b)))
				return -1;
			break;
		case 0x81: case 0x92: { /* NEWOBJ, NEWOBJ_EX: an instance of a class (torch.save(model)) */
			if (op == 0x92)
				pop(m);
			pop(m);
			a = pop(m);
			char what[320];
			snprintf(what, sizeof what, "the file holds a pickled %.100s object (torch.save(model) saves the module itself), "
				 "not a state_dict; save the weights alone: torch.save(model.state_dict(), PATH)",
				 a && a->kind == V_GLOBAL ? a->s : "Python");
			return bad(m, at, what);
		}
		case 'Q': /* BINPERSID */
			if (!(v = persistent(m, at, pop(m))))
				return -1;
			break;
		case 'b': /* BUILD: a state_dict's _metadata, or a parameter's state */
			a = pop(m);
			if (!a || m->sp == 0 || m->stack[m->sp - 1] == &mark ||
			    (m->stack[m->sp - 1]->kind != V_DICT && m->stack[m->sp - 1]->kind != V_TENSOR))
				return bad(m, at, "a build of what is not a dict or a tensor");
			continue;
		case '.': /* STOP */
			if (m->sp != 1 || m->stack[0] == &mark)
				return bad(m, at, "a stop with other than one value on the stack");
			*result = m->stack[0];
			return 0;
		default: {
			char what[96];
			snprintf(what, sizeof what, "opcode 0x%02x, which torch.save does not write for a state_dict", op);
			return bad(m, at, what);
		}
		}
		if (push(m, v) != 0)
			return bad(m, at, "out of memory, or a stack of over 4 million values");
	}
	return bad(m, m->len, "the pickle ends without its stop");
}

static void vm_free(struct vm *m)
{
	for (int k = 0; k < m->nall; k++) {
		if (m->all[k]->kind != V_STORAGE)
			free(m->all[k]->s);
		free(m->all[k]->items);
		free(m->all[k]->shape);
		free(m->all[k]);
	}
	free(m->all);
	free(m->stack);
	free(m->memo);
}

/* ---- reading ------------------------------------------------------------ */

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct safetensors_entry *)a)->name, ((const struct safetensors_entry *)b)->name);
}

/* The dict's entries as f's tensors, each checked against its storage's
 * record. */
static int tensors(struct safetensors_file *f, struct vm *m, const struct zip *z, const char *prefix, size_t plen,
		   const struct val *d)
{
	size_t names = 0;
	for (int k = 0; k < d->n; k += 2) {
		const struct val *key = d->items[k], *t = d->items[k + 1];
		if (key->kind != V_STR || strlen(key->s) != key->len || !key->len)
			return bad(m, key->at, "a key that is not a tensor's name (a non-empty str)");
		if (t->kind == V_DICT)
			return util_fail(m->err, m->errlen, "%s: byte %zu: '%s' is a dict, not a tensor: the file is a checkpoint "
					 "holding more than a state_dict; save the model's alone: torch.save(checkpoint['%s'], PATH) "
					 "if it is the model's state_dict", m->label, m->base + key->at, key->s, key->s);
		if (t->kind != V_TENSOR)
			return util_fail(m->err, m->errlen, "%s: byte %zu: '%s' is %s, not a tensor: trainc reads a state_dict "
					 "(torch.save(model.state_dict(), PATH)), not a checkpoint holding one with other state",
					 m->label, m->base + key->at, key->s, kind_name(t->kind));
		names += key->len + 1;
	}
	f->tensors = calloc((size_t)(d->n / 2 ? d->n / 2 : 1), sizeof *f->tensors);
	f->strings = malloc(names ? names : 1);
	if (!f->tensors || !f->strings) {
		util_os_error(ENOMEM);
		return util_fail(m->err, m->errlen, "%s: out of memory", m->label);
	}
	char *s = f->strings;
	size_t esz = 0;
	for (int k = 0; k < d->n; k += 2) {
		const struct val *key = d->items[k], *t = d->items[k + 1];
		struct safetensors_entry *e = &f->tensors[f->n++];
		memcpy(s, key->s, key->len + 1);
		e->name = s;
		s += key->len + 1;
		e->dtype = t->dtype;
		e->ndim = t->ndim;
		e->header_offset = (int64_t)(m->base + key->at);
		esz = safetensors_dtype_size(t->dtype);
		int64_t numel = 1, want = 1;
		for (int i = t->ndim - 1; i >= 0; i--) {
			e->shape[i] = t->shape[i];
			if (t->shape[i] > 1 && t->stride[i] != want)
				return util_fail(m->err, m->errlen, "%s: byte %zu: '%s' is not contiguous (stride %lld in dimension %d); "
						 "save tensor.contiguous() (model.state_dict() of a plain module is)", m->label,
						 m->base + key->at, e->name, (long long)t->stride[i], i);
			if (t->shape[i] && want > INT64_MAX / t->shape[i])
				return bad(m, key->at, "a tensor of more than 2^63 elements");
			want *= t->shape[i] ? t->shape[i] : 1;
			numel *= t->shape[i];
		}
		e->numel = numel;
		char rname[64];
		snprintf(rname, sizeof rname, "data/%.50s", t->storage->s);
		struct record *r = zip_find(z, prefix, plen, rname);
		if (!r)
			return util_fail(m->err, m->errlen, "%s: byte %zu: '%s' lies in storage %s, whose record %.*s%s is not in "
					 "the archive; the file is incomplete", m->label, m->base + key->at, e->name, t->storage->s,
					 (int)plen, prefix, rname);
		/* in elements of the record, so that nothing here overflows */
		uint64_t cap = r->len / esz;
		if (r->len % esz || (uint64_t)t->storage->numel != cap || (uint64_t)numel > cap ||
		    (uint64_t)t->offset > cap - (uint64_t)numel)
			return util_fail(m->err, m->errlen, "%s: byte %llu: record %.*s%s holds %llu bytes, but '%s' takes %lld "
					 "elements of %zu bytes from element %lld of a storage of %lld; the file is corrupt",
					 m->label, (unsigned long long)r->at, (int)plen, prefix, rname, (unsigned long long)r->len,
					 e->name, (long long)numel, esz, (long long)t->offset, (long long)t->storage->numel);
		if (zip_check(z, r) != 0)
			return -1;
		e->begin = r->at + (uint64_t)t->offset * esz;
		e->end = e->begin + (uint64_t)numel * esz;
		e->data = z->b + e->begin;
	}
	qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, by_name);
	for (int k = 1; k < f->n; k++)
		if (!strcmp(f->tensors[k].name, f->tensors[k - 1].name))
			return util_fail(m->err, m->errlen, "%s: byte %lld: '%s' is given twice", m->label,
					 (long long)f->tensors[k].header_offset, f->tensors[k].name);
	return 0;
}

int torchfile_parse(struct safetensors_file *f, const void *bytes, size_t size, const char *label, char *err, size_t errlen)
{
	memset(f, 0, sizeof *f);
	snprintf(f->path, sizeof f->path, "%s", label);
	f->bytes = bytes;
	f->size = size;
	struct zip z = { bytes, size, f->path, NULL, 0, err, errlen };
	struct vm m = { 0 };
	int rc = zip_open(&z);
	struct record *pkl = NULL;
	const char *prefix = "";
	size_t plen = 0;
	for (int k = 0; rc == 0 && k < z.n; k++) {
		struct record *r = &z.rec[k];
		const char *slash = memchr(r->name, '/', r->nlen);
		if (slash && r->nlen - (size_t)(slash - r->name) == sizeof "/data.pkl" - 1 && !memcmp(slash, "/data.pkl", 9)) {
			pkl = r, prefix = r->name, plen = (size_t)(slash + 1 - r->name);
			break;
		}
	}
	if (rc == 0 && !pkl)
		rc = util_fail(err, errlen, "%s: a ZIP archive without a data.pkl record: not a file of torch.save; save the "
			       "weights with torch.save(model.state_dict(), PATH)", f->path);
	const struct record *order = rc == 0 ? zip_find(&z, prefix, plen, "byteorder") : NULL;
	if (order && !(order->len == 6 && !memcmp((const char *)bytes + order->at, "little", 6)))
		rc = util_fail(err, errlen, "%s: byte %llu: the archive's byteorder is not 'little'; save it on a little-endian "
			       "machine", f->path, (unsigned long long)order->at);
	if (rc == 0)
		rc = zip_check(&z, pkl);
	struct val *top = NULL;
	if (rc == 0) {
		m = (struct vm){ .p = (const unsigned char *)bytes + pkl->at, .len = (size_t)pkl->len, .base = (size_t)pkl->at,
				 .label = f->path, .err = err, .errlen = errlen };
		rc = run(&m, &top);
	}
	if (rc == 0 && top->kind != V_DICT)
		rc = util_fail(err, errlen, "%s: byte %zu: the file holds %s, not a state_dict (a dict of tensors); save it "
			       "with torch.save(model.state_dict(), PATH)", f->path, m.base + top->at, kind_name(top->kind));
	if (rc == 0)
		rc = tensors(f, &m, &z, prefix, plen, top);
	vm_free(&m);
	free(z.rec);
	if (rc != 0) {
		free(f->tensors);
		free(f->strings);
		memset(f, 0, sizeof *f);
	}
	return rc;
}

/* ---- writing ------------------------------------------------------------ */

struct buf {
	unsigned char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct buf *b, const void *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		unsigned char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p, b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void put_le(struct buf *b, uint64_t v, int n)
{
	unsigned char t[8];
	for (int k = 0; k < n; k++)
		t[k] = (unsigned char)(v >> (8 * k));
	put(b, t, (size_t)n);
}

static void put_op(struct buf *b, unsigned char op) { put(b, &op, 1); }

static void pk_str(struct buf *b, const char *s)
{
	put_op(b, 'X');
	put_le(b, strlen(s), 4);
	put(b, s, strlen(s));
}

static void pk_int(struct buf *b, int64_t v)
{
	if (v >= 0 && v < 256) {
		put_op(b, 'K');
		put_le(b, (uint64_t)v, 1);
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		put_op(b, 'J');
		put_le(b, (uint64_t)v, 4);
	} else {
		put_op(b, 0x8a);
		put_le(b, 8, 1);
		put_le(b, (uint64_t)v, 8);
	}
}

static void pk_global(struct buf *b, const char *module, const char *name)
{
	put_op(b, 'c');
	put(b, module, strlen(module));
	put(b, "\n", 1);
	put(b, name, strlen(name));
	put(b, "\n", 1);
}

/* The tuple of ints v[0..n) */
static void pk_ints(struct buf *b, const int64_t *v, int n)
{
	put_op(b, '(');
	for (int k = 0; k < n; k++)
		pk_int(b, v[k]);
	put_op(b, 't');
}

static const char *storage_class(enum safetensors_dtype d)
{
	for (size_t k = 0; k < sizeof storages / sizeof storages[0]; k++)
		if (storages[k].dtype == d)
			return storages[k].name + 6; /* after "torch." */
	return NULL;
}

/* data.pkl: OrderedDict([(name, _rebuild_tensor_v2(storage K, 0, size, stride, False, OrderedDict())), ...]) */
static void pickle(struct buf *b, const struct safetensors_typed *t, int n)
{
	put_op(b, 0x80);
	put_op(b, 2);
	pk_global(b, "collections", "OrderedDict");
	put_op(b, ')');
	put_op(b, 'R');
	put_op(b, '(');
	for (int k = 0; k < n; k++) {
		int64_t numel = 1, stride[SAFETENSORS_MAX_DIMS];
		for (int i = t[k].ndim - 1; i >= 0; i--) {
			stride[i] = numel;
			numel *= t[k].shape[i];
		}
		char key[24];
		snprintf(key, sizeof key, "%d", k);
		pk_str(b, t[k].name);
		pk_global(b, "torch._utils", "_rebuild_tensor_v2");
		put_op(b, '(');
		put_op(b, '(');
		pk_str(b, "storage");
		pk_global(b, "torch", storage_class(t[k].dtype));
		pk_str(b, key);
		pk_str(b, "cpu");
		pk_int(b, numel);
		put_op(b, 't');
		put_op(b, 'Q');
		pk_int(b, 0);
		pk_ints(b, t[k].shape, t[k].ndim);
		pk_ints(b, stride, t[k].ndim);
		put_op(b, 0x89);
		pk_global(b, "collections", "OrderedDict");
		put_op(b, ')');
		put_op(b, 'R');
		put_op(b, 't');
		put_op(b, 'R');
	}
	put_op(b, 'u');
	put_op(b, '.');
}

struct entry {
	char name[64];
	uint32_t crc;
	uint64_t len, local;
};

/* A local header for record e at file offset e->local, whose data follows
 * it, padded so that the data starts on an ALIGN boundary of the file
 * (extra field 0x4246 "FB", as torch.save pads). */
static void local_header(struct buf *b, const struct entry *e)
{
	size_t nlen = strlen(e->name), at = (size_t)e->local + 30 + nlen + 4;
	size_t pad = (ALIGN - at % ALIGN) % ALIGN;
	put_le(b, PK_LOCAL, 4);
	put_le(b, 20, 2); /* version needed */
	put_le(b, 0, 2);  /* flags */
	put_le(b, 0, 2);  /* stored */
	put_le(b, 0, 2);  /* time */
	put_le(b, 0x21, 2); /* date: 1980-01-01 */
	put_le(b, e->crc, 4);
	put_le(b, e->len, 4);
	put_le(b, e->len, 4);
	put_le(b, nlen, 2);
	put_le(b, 4 + pad, 2);
	put(b, e->name, nlen);
	put_le(b, 0x4246, 2);
	put_le(b, pad, 2);
	for (size_t k = 0; k < pad; k++)
		put(b, "Z", 1);
}

int torchfile_write(const char *path, const struct safetensors_typed *t, int n, char *err, size_t errlen)
{
	for (int k = 0; k < n; k++)
		if (!storage_class(t[k].dtype))
			return util_fail(err, errlen, "%s: '%s' is %s, which torch.save has no storage for", path, t[k].name,
					 safetensors_dtype_name(t[k].dtype));
	struct buf pkl = { 0 }, head = { 0 };
	pickle(&pkl, t, n);
	int nrec = n + 3;
	struct entry *ent = calloc((size_t)nrec, sizeof *ent);
	/* headers: one buffer of all local headers (each with the small
	 * records' data after it), the tensors' data pointed at */
	struct safetensors_piece *pc = calloc((size_t)(2 * nrec + 1), sizeof *pc);
	size_t *cut = calloc((size_t)(nrec + 1), sizeof *cut);
	if (!ent || !pc || !cut || pkl.oom) {
		free(ent), free(pc), free(cut), free(pkl.p);
		return util_fail(err, errlen, "%s: out of memory", path);
	}
	const void *small[3] = { pkl.p, "little", "3\n" };
	uint64_t small_len[3] = { pkl.len, 6, 2 };
	const char *small_name[3] = { "archive/data.pkl", "archive/byteorder", "archive/version" };
	/* file order: data.pkl, byteorder, the storages, version (as torch.save) */
	int *order = malloc((size_t)nrec * sizeof *order);
	if (!order) {
		free(ent), free(pc), free(cut), free(pkl.p);
		return util_fail(err, errlen, "%s: out of memory", path);
	}
	order[0] = 0, order[1] = 1, order[nrec - 1] = 2;
	for (int k = 0; k < n; k++)
		order[k + 2] = 3 + k;
	uint64_t file = 0;
	int np = 0;
	for (int q = 0; q < nrec; q++) {
		int r = order[q];
		struct entry *e = &ent[r];
		const void *data;
		if (r < 3) {
			snprintf(e->name, sizeof e->name, "%s", small_name[r]);
			data = small[r], e->len = small_len[r];
		} else {
			const struct safetensors_typed *x = &t[r - 3];
			int64_t numel = 1;
			for (int i = 0; i < x->ndim; i++)
				numel *= x->shape[i];
			snprintf(e->name, sizeof e->name, "archive/data/%d", r - 3);
			data = x->data, e->len = (uint64_t)numel * safetensors_dtype_size(x->dtype);
		}
		e->crc = 0;
		for (uint64_t done = 0; done < e->len;) {
			uInt chunk = e->len - done > (1u << 30) ? (1u << 30) : (uInt)(e->len - done);
			e->crc = (uint32_t)crc32(e->crc, (const Bytef *)data + done, chunk);
			done += chunk;
		}
		size_t before = head.len;
		e->local = file;
		local_header(&head, e);
		cut[q] = head.len - before;
		file += cut[q] + e->len;
	}
	if (file > 0xffffffffu) {
		free(ent), free(pc), free(cut), free(pkl.p), free(head.p), free(order);
		return util_fail(err, errlen, "%s: %llu bytes: over the 4 GiB a ZIP file without ZIP64 holds; save as "
				 "NAME.safetensors instead", path, (unsigned long long)file);
	}
	size_t cd_at = head.len;
	for (int q = 0; q < nrec; q++) {
		const struct entry *e = &ent[order[q]];
		size_t nlen = strlen(e->name);
		put_le(&head, PK_CENTRAL, 4);
		put_le(&head, 0x031e, 2); /* made by: Unix, 3.0 */
		put_le(&head, 20, 2);
		put_le(&head, 0, 2);
		put_le(&head, 0, 2);
		put_le(&head, 0, 2);
		put_le(&head, 0x21, 2);
		put_le(&head, e->crc, 4);
		put_le(&head, e->len, 4);
		put_le(&head, e->len, 4);
		put_le(&head, nlen, 2);
		put_le(&head, 0, 2); /* extra */
		put_le(&head, 0, 2); /* comment */
		put_le(&head, 0, 2); /* disk */
		put_le(&head, 0, 2); /* internal attributes */
		put_le(&head, 0100644u << 16, 4);
		put_le(&head, e->local, 4);
		put(&head, e->name, nlen);
	}
	size_t cd_len = head.len - cd_at;
	put_le(&head, PK_END, 4);
	put_le(&head, 0, 4);
	put_le(&head, (uint64_t)nrec, 2);
	put_le(&head, (uint64_t)nrec, 2);
	put_le(&head, cd_len, 4);
	put_le(&head, file, 4);
	put_le(&head, 0, 2);
	int rc;
	if (head.oom || nrec > 0xffff) {
		rc = util_fail(err, errlen, "%s: %s", path, head.oom ? "out of memory" : "over 65,535 tensors");
	} else {
		size_t off = 0;
		for (int q = 0; q < nrec; q++) {
			int r = order[q];
			pc[np++] = (struct safetensors_piece){ head.p + off, cut[q] };
			off += cut[q];
			pc[np++] = (struct safetensors_piece){ r < 3 ? small[r] : t[r - 3].data, ent[r].len };
		}
		pc[np++] = (struct safetensors_piece){ head.p + cd_at, head.len - cd_at };
		rc = safetensors_write_pieces(path, pc, np, err, errlen);
	}
	free(ent), free(pc), free(cut), free(pkl.p), free(head.p), free(order);
	return rc;
}
