/* source.h: a .net file's text held in memory, and places in it.
 * Loading checks what a lexer should never see: a directory, a missing or
 * unreadable file, NUL bytes, invalid UTF-8, a file too large to be a model
 * description.  Positions are 1-based lines and columns counted in
 * characters, not bytes, so carets line up under UTF-8 text.
 */
#ifndef SOURCE_H
#define SOURCE_H
#include <stdbool.h>
#include <stddef.h>

struct arena;
struct diag;

struct source;

struct loc {
	const struct source *src;
	int line, col; /* 1-based; col in characters */
	int len;       /* characters to underline, at least 1 */
};

struct source {
	const char *path;  /* as given, or resolved relative to the importer */
	const char *text;  /* NUL-terminated; len bytes */
	size_t len;
	const struct source *next; /* all sources of a compilation */
	struct loc imported_at;    /* the import statement that read it (src NULL: none) */
};

/* Read path into a: returns NULL after reporting the problem at `from`
 * (the import statement, or no location for the command line). */
struct source *source_load(struct arena *a, struct diag *d, const char *path, const struct loc *from);
/* A source made from a string (tests, --set overrides). */
struct source *source_from_string(struct arena *a, const char *path, const char *text);
/* Start and length (bytes, without line end) of line `line` of s. */
bool source_line(const struct source *s, int line, const char **start, size_t *len);
/* A location spanning from a to the end of b (same source). */
struct loc loc_span(struct loc a, struct loc b);
#endif
