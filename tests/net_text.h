/* net_text.h: compile a .net given as text, for the unit tests: the text
 * goes to a file of its own under /tmp (mkstemps fills in the XXXXXX),
 * which compile_file reads and which is removed before returning.
 * Returns the plan or NULL; diagnostics go to d.
 */
#ifndef NET_TEXT_H
#define NET_TEXT_H
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/compile.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

static inline struct plan *net_text_compile(struct arena *a, struct diag *d, const char *text, int world)
{
	char path[] = "/tmp/trainc-test-XXXXXX.net";
	int fd = mkstemps(path, 4);
	if (fd < 0)
		return NULL;
	bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	struct compile_opts o = { path, world, NULL, 0, false, false };
	struct plan *p = ok ? compile_file(a, d, &o) : NULL;
	unlink(path);
	return p;
}
#endif
