/* diag.c: printing diagnostics with the source line and an underline.
 * Tabs in the source line are copied into the underline so the caret stays
 * under the right character whatever the terminal's tab width.  Messages
 * after max_errors are counted but not printed, with one line saying so.
 */
#include "grammar/diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void diag_init(struct diag *d, FILE *out)
{
	memset(d, 0, sizeof *d);
	d->out = out;
	d->max_errors = 20;
	d->color = isatty(fileno(out)) && !getenv("NO_COLOR");
}

static void show_line(struct diag *d, struct loc at)
{
	const char *line;
	size_t len;
	if (!at.src || at.line < 1 || !source_line(at.src, at.line, &line, &len))
		return;
	fprintf(d->out, "%.*s\n", (int)len, line);
	/* walk characters up to col, copying tabs */
	int col = 1;
	size_t i = 0;
	while (col < at.col && i < len) {
		fputc(line[i] == '\t' ? '\t' : ' ', d->out);
		i++;
		while (i < len && ((unsigned char)line[i] & 0xc0) == 0x80)
			i++;
		col++;
	}
	if (d->color)
		fputs("\033[1;32m", d->out);
	fputc('^', d->out);
	for (int k = 1; k < at.len; k++)
		fputc('~', d->out);
	if (d->color)
		fputs("\033[0m", d->out);
	fputc('\n', d->out);
}

static void report(struct diag *d, struct loc at, const char *kind, const char *color, const char *fmt, va_list ap)
{
	if (d->color)
		fputs("\033[1m", d->out);
	if (at.src)
		fprintf(d->out, "%s:%d:%d: ", at.src->path, at.line, at.col);
	else
		fputs("trainc: ", d->out);
	if (d->color)
		fprintf(d->out, "%s%s:\033[0m\033[1m ", color, kind);
	else
		fprintf(d->out, "%s: ", kind);
	vfprintf(d->out, fmt, ap);
	if (d->color)
		fputs("\033[0m", d->out);
	fputc('\n', d->out);
	show_line(d, at);
}

static bool muted(struct diag *d)
{
	return d->errors > (d->max_errors ? d->max_errors : 20);
}

void diag_error(struct diag *d, struct loc at, const char *fmt, ...)
{
	d->errors++;
	if (muted(d)) {
		if (d->errors == (d->max_errors ? d->max_errors : 20) + 1)
			fprintf(d->out, "trainc: too many errors; stopping here\n");
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	report(d, at, "error", "\033[31m", fmt, ap);
	va_end(ap);
}

void diag_warning(struct diag *d, struct loc at, const char *fmt, ...)
{
	if (muted(d))
		return;
	va_list ap;
	va_start(ap, fmt);
	report(d, at, "warning", "\033[35m", fmt, ap);
	va_end(ap);
}

void diag_note(struct diag *d, struct loc at, const char *fmt, ...)
{
	if (muted(d))
		return;
	va_list ap;
	va_start(ap, fmt);
	report(d, at, "note", "\033[36m", fmt, ap);
	va_end(ap);
}

static int distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 63 || lb > 63)
		return 99;
	int row[64];
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int diag_prev = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int up = row[j];
			int cost = a[i - 1] == b[j - 1] ? 0 : 1;
			int best = diag_prev + cost;
			if (row[j] + 1 < best) best = row[j] + 1;
			if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
			row[j] = best;
			diag_prev = up;
		}
	}
	return row[lb];
}

const char *diag_nearest(const char *name, const char *const *candidates, int n)
{
	const char *best = NULL;
	int best_d = 99;
	for (int i = 0; i < n; i++) {
		int dist = distance(name, candidates[i]);
		if (dist < best_d) {
			best_d = dist;
			best = candidates[i];
		}
	}
	int len = (int)strlen(name);
	int limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
	return best_d <= limit ? best : NULL;
}
