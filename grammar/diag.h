/* diag.h: diagnostics for .net files, in the form compilers use:
 *   file:line:col: error: message
 *   <the source line>
 *   <a caret and tildes under the spot>
 * followed by `note:` lines for related places.  Counts errors so a pass
 * can keep going and the caller can exit 2 at the end.
 */
#ifndef DIAG_H
#define DIAG_H
#include <stdbool.h>
#include <stdio.h>

#include "grammar/source.h"

struct diag {
	FILE *out;      /* stderr unless a test captures it */
	int errors;
	int max_errors; /* stop printing after this many (0: 20) */
	bool color;
	const struct source *last_src; /* of the last error: its import chain is shown once */
};

void diag_init(struct diag *d, FILE *out);
void diag_error(struct diag *d, struct loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_warning(struct diag *d, struct loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(struct diag *d, struct loc at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The name in candidates[0..n) closest to name (edit distance), or NULL when
 * none is close enough to be a likely typo. */
const char *diag_nearest(const char *name, const char *const *candidates, int n);
#endif
