/* source.c: loading .net files, with the checks every later stage relies on:
 * the text is valid UTF-8 without NUL bytes and at most 16 MiB.  CRLF line
 * ends are kept as they are; the lexer treats '\r' as blank.
 */
#include "grammar/source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "grammar/arena.h"
#include "grammar/diag.h"

enum { SOURCE_MAX = 16 << 20 };

/* Length of the valid UTF-8 sequence at p, or 0 if it is invalid. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
	unsigned c = p[0];
	size_t n;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) { n = 2; min = 0x80; }
	else if (c >= 0xe0 && c <= 0xef) { n = 3; min = 0x800; }
	else if (c >= 0xf0 && c <= 0xf4) { n = 4; min = 0x10000; }
	else return 0;
	if (left < n)
		return 0;
	unsigned cp = c & (0xff >> (n + 1));
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* Line and character column of byte offset off. */
static struct loc loc_at(const struct source *s, size_t off)
{
	struct loc l = { s, 1, 1, 1 };
	for (size_t i = 0; i < off && i < s->len; i++) {
		if (s->text[i] == '\n') {
			l.line++;
			l.col = 1;
		} else if (((unsigned char)s->text[i] & 0xc0) != 0x80) {
			l.col++;
		}
	}
	return l;
}

static bool check_text(struct diag *d, const struct source *s)
{
	const unsigned char *p = (const unsigned char *)s->text;
	for (size_t i = 0; i < s->len;) {
		if (p[i] == 0) {
			diag_error(d, loc_at(s, i), "NUL byte in source; a .net file is text");
			return false;
		}
		size_t n = utf8_seq(p + i, s->len - i);
		if (!n) {
			diag_error(d, loc_at(s, i), "invalid UTF-8 (byte 0x%02x at offset %zu); save the file as UTF-8", p[i], i);
			return false;
		}
		i += n;
	}
	return true;
}

struct source *source_load(struct arena *a, struct diag *d, const char *path, const struct loc *from)
{
	struct loc nowhere = { 0 };
	struct loc at = from ? *from : nowhere;
	struct stat st;
	if (stat(path, &st) != 0) {
		diag_error(d, at, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (S_ISDIR(st.st_mode)) {
		diag_error(d, at, "'%s' is a directory; give a .net file", path);
		return NULL;
	}
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
		diag_error(d, at, "'%s' is not a regular file", path);
		return NULL;
	}
	FILE *f = fopen(path, "rb");
	if (!f) {
		diag_error(d, at, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	size_t cap = 4096, len = 0;
	char *buf = arena_alloc(a, cap + 1);
	for (;;) {
		if (len == cap) {
			if (cap >= SOURCE_MAX) {
				fclose(f);
				diag_error(d, at, "'%s' is larger than %d MiB; that is not a model description", path, SOURCE_MAX >> 20);
				return NULL;
			}
			buf = arena_realloc(a, buf, len, cap * 2 + 1);
			cap *= 2;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	int err = ferror(f);
	fclose(f);
	if (err) {
		diag_error(d, at, "cannot read '%s'", path);
		return NULL;
	}
	buf[len] = 0;
	struct source *s = arena_alloc(a, sizeof *s);
	s->path = arena_strdup(a, path);
	s->text = buf;
	s->len = len;
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) {
		s->text += 3; /* a UTF-8 byte-order mark says nothing a .net file needs */
		s->len -= 3;
	}
	if (!check_text(d, s))
		return NULL;
	return s;
}

struct source *source_from_string(struct arena *a, const char *path, const char *text)
{
	struct source *s = arena_alloc(a, sizeof *s);
	s->path = arena_strdup(a, path);
	s->len = strlen(text);
	s->text = arena_strndup(a, text, s->len);
	return s;
}

bool source_line(const struct source *s, int line, const char **start, size_t *len)
{
	const char *p = s->text, *end = s->text + s->len;
	for (int l = 1; l < line; l++) {
		p = memchr(p, '\n', (size_t)(end - p));
		if (!p)
			return false;
		p++;
	}
	const char *e = memchr(p, '\n', (size_t)(end - p));
	if (!e)
		e = end;
	if (e > p && e[-1] == '\r')
		e--;
	*start = p;
	*len = (size_t)(e - p);
	return true;
}

struct loc loc_span(struct loc a, struct loc b)
{
	if (a.src != b.src || b.line != a.line || b.col < a.col)
		return a;
	a.len = b.col + b.len - a.col;
	return a;
}
