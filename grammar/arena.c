/* arena.c: bump allocation in chunks of at least 64 KiB; large requests get a
 * chunk of their own.  Out of memory is fatal: a compiler that cannot hold
 * its input has nothing useful left to say.
 */
#include "grammar/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	max_align_t data[];
};

enum { CHUNK_MIN = 64 * 1024 };

static void out_of_memory(size_t n)
{
	fprintf(stderr, "trainc: out of memory (asked for %zu bytes)\n", n);
	exit(70);
}

void *arena_alloc(struct arena *a, size_t n)
{
	size_t align = sizeof(max_align_t);
	if (n > SIZE_MAX / 2)
		out_of_memory(n);
	n = (n + align - 1) / align * align;
	struct arena_chunk *c = a->head;
	if (!c || c->size - c->used < n) {
		size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
		c = malloc(sizeof *c + size);
		if (!c)
			out_of_memory(n);
		c->size = size;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = (char *)c->data + c->used;
	c->used += n;
	a->total += n;
	memset(p, 0, n);
	return p;
}

void *arena_array(struct arena *a, size_t count, size_t size)
{
	if (size && count > SIZE_MAX / 2 / size)
		out_of_memory(SIZE_MAX);
	return arena_alloc(a, count * size);
}

void *arena_realloc(struct arena *a, void *p, size_t old, size_t n)
{
	void *q = arena_alloc(a, n);
	if (p)
		memcpy(q, p, old < n ? old : n);
	return q;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	memcpy(p, s, n);
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, strlen(s));
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *p = arena_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void arena_release(struct arena *a)
{
	struct arena_chunk *c = a->head;
	while (c) {
		struct arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
	a->total = 0;
}
