/* arena.h: one region of memory per compilation.
 * Everything the front end and the compiler make (source text, AST, IR,
 * strings, diagnostics) is carved from one arena and released by one call, so
 * an error path is just a return.  Not thread-safe; never frees one object.
 */
#ifndef ARENA_H
#define ARENA_H
#include <stddef.h>

struct arena_chunk;
struct arena {
	struct arena_chunk *head;
	size_t total; /* bytes handed out, for statistics */
};

/* Zeroed memory of n bytes, aligned for any type; aborts on out-of-memory. */
void *arena_alloc(struct arena *a, size_t n);
/* A zeroed array of count elements of size bytes; aborts if the size overflows. */
void *arena_array(struct arena *a, size_t count, size_t size);
/* Grow p (from this arena, old bytes long) to n bytes: a fresh copy. */
void *arena_realloc(struct arena *a, void *p, size_t old, size_t n);
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_strdup(struct arena *a, const char *s);
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Release everything; the arena can be used again afterwards. */
void arena_release(struct arena *a);
#endif
