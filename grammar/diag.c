/* diag.c: printing diagnostics with the source line and an underline.
 * Tabs in the source line are copied into the underline so the caret stays
 * under the right character whatever the terminal's tab width.  Messages
 * after max_errors are counted but not printed, with one line saying so.
 */
#include "grammar/diag.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* Bytes of the UTF-8 character at p, or 0 when p holds no valid one. */
static size_t char_len(const unsigned char *p, size_t left)
{
	size_t n = p[0] < 0x80 ? 1 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
	if (n == 0 || n > left)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* Whether the UTF-8 character at p (n bytes) takes two terminal columns:
 * the East Asian wide and fullwidth ranges and emoji, as wcwidth() says in
 * a UTF-8 locale (which trainc does not set up). */
static bool wide(const unsigned char *p, size_t n)
{
	unsigned c = n == 3 ? (p[0] & 0x0fu) << 12 | (p[1] & 0x3fu) << 6 | (p[2] & 0x3fu)
		   : n == 4 ? (p[0] & 0x07u) << 18 | (p[1] & 0x3fu) << 12 | (p[2] & 0x3fu) << 6 | (p[3] & 0x3fu)
			    : 0;
	return (c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0x303e) || (c >= 0x3041 && c <= 0x33ff) ||
	       (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xa000 && c <= 0xa4cf) ||
	       (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) || (c >= 0xfe30 && c <= 0xfe4f) ||
	       (c >= 0xff00 && c <= 0xff60) || (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1f64f) ||
	       (c >= 0x1f900 && c <= 0x1f9ff) || (c >= 0x20000 && c <= 0x3fffd);
}

enum { SHOW_WIDTH = 100 }; /* characters of a long line shown around the spot */

/* The source line (a window of it when long) with its control characters
 * and broken UTF-8 shown as '?', then the underline aligned beneath. */
static void show_line(struct diag *d, struct loc at)
{
	const char *line;
	size_t len;
	if (!at.src || at.line < 1 || !source_line(at.src, at.line, &line, &len))
		return;
	const unsigned char *u = (const unsigned char *)line;
	int first = at.col > SHOW_WIDTH / 2 ? at.col - SHOW_WIDTH / 2 : 1, col = 1, shown = 0;
	size_t i = 0;
	if (first > 1)
		fputs("...", d->out);
	while (i < len && shown < SHOW_WIDTH) {
		size_t n = char_len(u + i, len - i);
		if (col >= first) {
			if (n == 0 || (n == 1 && u[i] < 0x20 && u[i] != '\t') || u[i] == 0x7f)
				fputc('?', d->out);
			else
				fwrite(u + i, 1, n, d->out);
			shown++;
		}
		i += n ? n : 1;
		col++;
	}
	int end = col; /* the column after the last character shown */
	if (i < len)
		fputs("...", d->out);
	fputc('\n', d->out);
	/* walk characters up to col, copying tabs */
	if (first > 1)
		fputs("   ", d->out);
	col = 1;
	i = 0;
	while (col < at.col && i < len) {
		size_t n = char_len(u + i, len - i);
		if (col >= first)
			fputs(line[i] == '\t' ? "\t" : wide(u + i, n) ? "  " : " ", d->out);
		i += n ? n : 1;
		col++;
	}
	/* the underline ends with the text shown: at a cut, or at the line's
	 * end for a span that runs on */
	if (at.len > end - at.col)
		at.len = end - at.col > 1 ? end - at.col : 1;
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
	/* an error or warning in an imported file, first of a run in it: the
	 * chain of imports that read it, as compilers show includes */
	if (strcmp(kind, "note") != 0 && at.src != d->last_src) {
		d->last_src = at.src;
		int depth = 0;
		for (const struct source *s = at.src; s && s->imported_at.src && depth < 64; s = s->imported_at.src, depth++)
			fprintf(d->out, "%s %s:%d:%d:\n", depth == 0 ? "In file imported from" : "                 from",
				s->imported_at.src->path, s->imported_at.line, s->imported_at.col);
	}
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
	/* optimal string alignment: edits plus swaps of neighbours (sdg -> sgd) */
	int m[64][64];
	for (size_t i = 0; i <= la; i++)
		m[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		m[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int cost = a[i - 1] == b[j - 1] ? 0 : 1;
			int best = m[i - 1][j - 1] + cost;
			if (m[i - 1][j] + 1 < best) best = m[i - 1][j] + 1;
			if (m[i][j - 1] + 1 < best) best = m[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && m[i - 2][j - 2] + 1 < best)
				best = m[i - 2][j - 2] + 1;
			m[i][j] = best;
		}
	}
	return m[la][lb];
}

/* PyTorch's spellings of settings trainc names otherwise. */
static const char *const aliases[][2] = {
	{ "learning_rate", "lr" },	    { "batch_size", "batch" },		{ "test_batch_size", "test_batch" },
	{ "bucket_cap_mb", "bucket_mb" },   { "bucket", "bucket_mb" },		{ "num_epochs", "epochs" },
	{ "max_steps", "steps" },	    { "step_size", "step" },		{ "max_norm", "clip_grad_norm" },
	{ "grad_clip", "clip_grad_norm" },  { "min_num_params", "min_params" }, { "sharding_strategy", "shard" },
	{ "auto_wrap_policy", "wrap" },	    { "T_max", "t_max" },		{ "lr_scheduler", "scheduler" },
	{ "criterion", "loss" },	    { "optim", "optimizer" },		{ "T_0", "t_0" },
	{ "T_mult", "t_mult" },
	/* torch.nn's layer arguments */
	{ "in_features", "in" },	    { "out_features", "out" },		{ "in_channels", "in" },
	{ "out_channels", "out" },	    { "kernel_size", "kernel" },	{ "num_features", "channels" },
	{ "start_dim", "start" },	    { "end_dim", "end" },		{ "num_embeddings", "num" },
	{ "embedding_dim", "dim" },	    { "normalized_shape", "shape" },	{ "elementwise_affine", "affine" },
	{ "output_size", "output" },
};

/* PyTorch's class names whose trainc name is not the folded class name. */
static const char *const class_aliases[][2] = {
	{ "cosineannealing", "cosine" },
	{ "cosineannealingwarmrestarts", "cosine_warm_restarts" },
	{ "step", "step_lr" },
};

/* PyTorch's names (folded, see fold) of things trainc lacks, each a
 * typo's distance from a trainc name that computes something else: RReLU
 * is not ReLU, Dropout3d drops whole volumes, Conv3d is not Conv2d. */
static const char *const unlike[] = {
	"rrelu", "softmin", "glu", "dropout3d", "conv3d", "maxpool3d", "avgpool3d",
	"batchnorm3d", "zeropad1d",
};

/* s in lower case without '_' (StepLR and step_lr are both "steplr");
 * false when it does not fit. */
static bool fold(const char *s, char *out, size_t n)
{
	size_t k = 0;
	for (; *s; s++) {
		if (*s == '_')
			continue;
		if (k + 1 >= n)
			return false;
		out[k++] = (char)tolower((unsigned char)*s);
	}
	out[k] = 0;
	return true;
}

/* The candidate PyTorch's class name `name` means: the same letters in
 * another case and without underscores (ReLU, MaxPool2d, AdamW), less a
 * class suffix (MSELoss, StepLR, CosineAnnealingLR), or NULL. */
static const char *pytorch_name(const char *name, const char *const *candidates, int n)
{
	char f[64], c[64];
	if (!fold(name, f, sizeof f))
		return NULL;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++)
			if (fold(candidates[i], c, sizeof c) && strcmp(f, c) == 0)
				return candidates[i];
		for (size_t a = 0; a < sizeof class_aliases / sizeof class_aliases[0]; a++)
			for (int i = 0; strcmp(f, class_aliases[a][0]) == 0 && i < n; i++)
				if (strcmp(candidates[i], class_aliases[a][1]) == 0)
					return candidates[i];
		size_t len = strlen(f);
		if (len > 4 && strcmp(f + len - 4, "loss") == 0)
			f[len - 4] = 0;
		else if (len > 2 && strcmp(f + len - 2, "lr") == 0)
			f[len - 2] = 0;
		else
			break;
	}
	return NULL;
}

const char *diag_nearest(const char *name, const char *const *candidates, int n)
{
	for (size_t a = 0; a < sizeof aliases / sizeof aliases[0]; a++)
		for (int i = 0; strcmp(name, aliases[a][0]) == 0 && i < n; i++)
			if (strcmp(candidates[i], aliases[a][1]) == 0)
				return candidates[i];
	char f[32];
	if (fold(name, f, sizeof f))
		for (size_t u = 0; u < sizeof unlike / sizeof unlike[0]; u++)
			if (strcmp(f, unlike[u]) == 0)
				return NULL;
	const char *py = pytorch_name(name, candidates, n);
	if (py)
		return py;
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
