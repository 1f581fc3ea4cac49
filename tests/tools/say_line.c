/* say_line.c: a library tests/cli/job_output.sh preloads into trainc
 * (LD_PRELOAD): a job's worker (RANK set) writes the text of SAY_LINE as
 * one line to its standard error as it starts, in a single write, as a
 * rank's own message of any length would reach the launcher; the launcher
 * itself (no RANK) writes nothing.
 * Does not: change anything else the worker does.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void say_line(void)
{
	const char *text = getenv("SAY_LINE");
	if (!text || !getenv("RANK"))
		return;
	size_t n = strlen(text);
	char *line = malloc(n + 1);
	if (!line)
		return;
	memcpy(line, text, n);
	line[n] = '\n';
	ssize_t put = write(2, line, n + 1);
	(void)put;
	free(line);
}
