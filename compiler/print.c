/* print.c: `trainc print`: the module tree and the memory plan.
 * The tree reads like PyTorch's print of the wrapped model
 * (DistributedDataParallel / FullyShardedDataParallel around the model,
 * each FSDP unit nested where it wraps), with a comment column giving the
 * output shape per sample, the parameter count and, for several devices,
 * the device.  Lines are built first and the comment column aligned after.
 */
#include "compiler/print.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compile.h"
#include "compiler/ops.h"

const char *print_count(int64_t v, char *buf, int n)
{
	char tmp[32];
	snprintf(tmp, sizeof tmp, "%" PRId64, v < 0 ? -v : v);
	int len = (int)strlen(tmp), at = 0;
	if (v < 0 && at < n - 1)
		buf[at++] = '-';
	for (int i = 0; i < len && at < n - 1; i++) {
		buf[at++] = tmp[i];
		if ((len - i - 1) % 3 == 0 && i != len - 1 && at < n - 1)
			buf[at++] = ',';
	}
	buf[at] = 0;
	return buf;
}

struct line {
	char *text; /* indentation and repr, however deep and long */
	char note[160];
};

struct lines {
	struct line *v;
	int n, cap;
};

static struct line *add(struct lines *ls, int depth, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static void *need(void *p)
{
	if (!p) {
		fprintf(stderr, "trainc: out of memory\n");
		exit(70);
	}
	return p;
}

static struct line *add(struct lines *ls, int depth, const char *fmt, ...)
{
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? ls->cap * 2 : 64;
		ls->v = need(realloc(ls->v, (size_t)ls->cap * sizeof *ls->v));
	}
	struct line *l = &ls->v[ls->n++];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	size_t indent = 2 * (size_t)depth;
	l->text = need(malloc(indent + (size_t)len + 1));
	memset(l->text, ' ', indent);
	va_start(ap, fmt);
	vsnprintf(l->text + indent, (size_t)len + 1, fmt, ap);
	va_end(ap);
	l->note[0] = 0;
	return l;
}

static int unit_of_scope(const struct plan *p, int s)
{
	for (int u = 0; u < p->nunits; u++)
		if (p->units[u].scope == s)
			return u;
	return -1;
}

static void node_note(const struct plan *p, const struct node *n, char *buf, size_t len)
{
	char sh[96], cnt[32];
	int64_t np = 0;
	for (int k = 0; k < n->nparams; k++)
		if (p->params[n->param0 + k].role == ROLE_WEIGHT || p->params[n->param0 + k].role == ROLE_BIAS)
			np += p->params[n->param0 + k].numel;
	int at = snprintf(buf, len, "# %s", shape_str(&n->out, sh, sizeof sh));
	if (np)
		at += snprintf(buf + at, len - (size_t)at, "  %s param%s", print_count(np, cnt, sizeof cnt), np == 1 ? "" : "s");
	if (p->ndevices > 1 && at < (int)len)
		at += snprintf(buf + at, len - (size_t)at, "  device %d", n->device);
	if (n->frozen && at < (int)len)
		snprintf(buf + at, len - (size_t)at, "  frozen");
}

static void unit_note(const struct plan *p, int u, char *buf, size_t len)
{
	char c1[32], c2[32];
	const struct unit *un = &p->units[u];
	snprintf(buf, len, "# unit %d: %s params, %s per rank", u, print_count(un->numel, c1, sizeof c1),
		 print_count(un->shard, c2, sizeof c2));
}

static void scope_lines(const struct plan *p, struct lines *ls, int s, int depth, const char *key);

/* A transfer is printed among the children of scope `in` under its path
 * relative to that scope, the name `trainc graph` shows in full:
 * (fc.to_device1) before fc, (to_device1) and (skip_to_device1) before a
 * residual's sum. */
static void transfer_line(const struct plan *p, struct lines *ls, const struct node *t, int in, int depth)
{
	const char *base = p->scopes[in].path, *key = t->path;
	size_t n = strlen(base);
	if (n && strncmp(key, base, n) == 0 && key[n] == '.')
		key += n + 1;
	struct line *l = add(ls, depth, "(%s): Transfer(device %d -> device %d)", key, t->a.xfer.from, t->a.xfer.to);
	node_note(p, t, l->note, sizeof l->note);
}

static void children(const struct plan *p, struct lines *ls, int s, int depth)
{
	for (int c = s + 1; c < p->nscopes; c++) {
		if (p->scopes[c].parent != s)
			continue;
		const char *key = p->scopes[c].name[0] ? p->scopes[c].name : "residual";
		scope_lines(p, ls, c, depth, key);
	}
	/* residual joins belong to their scope, after the transfers feeding them */
	for (int i = 0; i < p->nnodes; i++) {
		if (p->nodes[i].scope == s && p->nodes[i].op == OP_ADD) {
			for (int t = 0; t < i; t++) {
				const struct node *tn = &p->nodes[t];
				if (tn->op == OP_TRANSFER && (p->nodes[i].in == t || p->nodes[i].in2 == t))
					transfer_line(p, ls, tn, s, depth);
			}
			struct line *l = add(ls, depth, "(+): Add(input)");
			node_note(p, &p->nodes[i], l->note, sizeof l->note);
		}
	}
}

static void scope_lines(const struct plan *p, struct lines *ls, int s, int depth, const char *key)
{
	const struct scope *sc = &p->scopes[s];
	int u = p->parallel.mode == PAR_FSDP ? unit_of_scope(p, s) : -1;
	if (u >= 0 && s != 0) {
		struct line *l = add(ls, depth, "(%s): FullyShardedDataParallel(", key);
		unit_note(p, u, l->note, sizeof l->note);
		key = "_fsdp_wrapped_module";
		depth++;
	}
	if (sc->node >= 0) {
		const struct node *n = &p->nodes[sc->node];
		/* the transfers into the layer, or into its hidden pad */
		for (int i = 0; i < sc->node; i++) {
			const struct node *t = &p->nodes[i];
			const struct node *next = &p->nodes[i + 1];
			if (t->op == OP_TRANSFER && t->scope == s && (i + 1 == sc->node || next->op == OP_TRANSFER || next->hidden))
				transfer_line(p, ls, t, sc->parent, depth);
		}
		char desc[256];
		op_describe(n, desc, sizeof desc);
		struct line *l = add(ls, depth, "(%s): %s", key, desc);
		node_note(p, n, l->note, sizeof l->note);
	} else {
		char cnt[32];
		struct line *l = add(ls, depth, "(%s): %s(", key, sc->type);
		if (sc->numel)
			snprintf(l->note, sizeof l->note, "# %s param%s", print_count(sc->numel, cnt, sizeof cnt), sc->numel == 1 ? "" : "s");
		children(p, ls, s, depth + 1);
		add(ls, depth, ")");
	}
	if (u >= 0 && s != 0)
		add(ls, depth - 1, ")");
}

static double mib(int64_t b)
{
	return (double)b / (1024.0 * 1024.0);
}

static const char *mode_name(const struct plan *p)
{
	if (p->parallel.mode == PAR_DDP)
		return "DDP";
	switch (p->parallel.shard) {
	case SHARD_FULL: return "FSDP FULL_SHARD";
	case SHARD_GRAD_OP: return "FSDP SHARD_GRAD_OP";
	case SHARD_NONE: return "FSDP NO_SHARD";
	}
	return "FSDP";
}

/* What a device's workspace holds: the largest convolution's scratch on
 * the CPU, which the device's other convolutions share. */
static void workspace(FILE *out, const struct plan *p, int d)
{
	static const char *const paths[] = { [WORK_NONE] = "", [WORK_IM2COL] = "im2col",
					     [WORK_DIRECT] = "oneDNN direct", [WORK_WINOGRAD] = "Winograd" };
	const struct devplan *dp = &p->dev[d];
	if (dp->work_node < 0)
		return;
	fprintf(out, "  workspace: CPU convolutions' shared scratch, sized for convolution %s (batch %" PRId64 ", %s): ",
		p->nodes[dp->work_node].path, dp->work_batch, paths[dp->work_path]);
	if (dp->work_slots > 0)
		fprintf(out, "%.2f MiB + %.2f MiB per thread, up to %d thread%s (device %d)\n", mib(dp->work_shared),
			mib(dp->work_slot), dp->work_slots, dp->work_slots == 1 ? "" : "s", d);
	else
		fprintf(out, "%.2f MiB (device %d)\n", mib(dp->work_shared), d);
}

static void memory(FILE *out, const struct plan *p)
{
	int64_t micro, batch = compile_rank_batch(&p->train, p->world, &micro);
	fprintf(out, "\nMemory per rank (MiB): %s, %d rank%s, batch %" PRId64 " per rank", mode_name(p), p->world, p->world == 1 ? "" : "s",
		batch);
	if (p->test_data.kind != DATA_NONE)
		fprintf(out, ", test batch %" PRId64, p->train.test_batch);
	fprintf(out, "\n");
	/* the workspace column only where a device has convolutions */
	bool work = false;
	for (int d = 0; d < p->ndevices; d++)
		work |= p->dev[d].bytes[REG_WORK] > 0;
	fprintf(out, "  %-8s %10s %10s %10s %12s %10s", "device", "params", "grads", "optimizer", "activations", "comm");
	if (work)
		fprintf(out, " %10s", "workspace");
	fprintf(out, " %10s\n", "total");
	for (int d = 0; d < p->ndevices; d++) {
		const struct devplan *dp = &p->dev[d];
		int64_t total = 0;
		for (int r = 0; r < REG__COUNT; r++)
			total += dp->bytes[r];
		fprintf(out, "  %-8d %10.2f %10.2f %10.2f %12.2f %10.2f", d, mib(dp->bytes[REG_PARAMS]), mib(dp->bytes[REG_GRADS]),
			mib(dp->bytes[REG_OPTIM]), mib(dp->bytes[REG_ACTS]), mib(dp->bytes[REG_COMM]));
		if (work)
			fprintf(out, " %10.2f", mib(dp->bytes[REG_WORK]));
		fprintf(out, " %10.2f\n", mib(total));
	}
	if (p->test_data.kind != DATA_NONE)
		fprintf(out, "  activations: training peak %.2f MiB, evaluation peak %.2f MiB in chunks of %lld test sample%s (device 0)\n",
			mib(p->dev[0].act_train), mib(p->dev[0].act_eval), (long long)p->eval_batch, p->eval_batch == 1 ? "" : "s");
	else
		fprintf(out, "  activations: training peak %.2f MiB (device 0)\n", mib(p->dev[0].act_train));
	for (int d = 0; d < p->ndevices; d++)
		workspace(out, p, d);
	if (p->nbuckets)
		fprintf(out, "  DDP: %d gradient bucket%s (the first of about 1 MiB, then up to %g MiB, as PyTorch), views of the gradient region\n",
			p->nbuckets, p->nbuckets == 1 ? "" : "s", p->parallel.bucket_mb);
}

void print_plan(FILE *out, const struct plan *p)
{
	char c1[32], c2[32];
	fprintf(out, "%s: %s parameters (%s trainable), %d device%s per rank, plan %016" PRIx64 "\n", p->model_name,
		print_count(p->total_params, c1, sizeof c1), print_count(p->trainable_params, c2, sizeof c2), p->ndevices,
		p->ndevices == 1 ? "" : "s", p->hash);
	struct lines ls = { 0 };
	int depth = 0;
	if (p->parallel.mode == PAR_FSDP) {
		struct line *l = add(&ls, 0, "FullyShardedDataParallel(");
		unit_note(p, unit_of_scope(p, 0), l->note, sizeof l->note);
		add(&ls, 1, "(_fsdp_wrapped_module): %s(", p->model_name);
		depth = 2;
	} else if (p->world > 1) {
		add(&ls, 0, "DistributedDataParallel(");
		add(&ls, 1, "(module): %s(", p->model_name);
		depth = 2;
	} else {
		add(&ls, 0, "%s(", p->model_name);
		depth = 1;
	}
	char desc[256];
	op_describe(&p->nodes[0], desc, sizeof desc);
	struct line *l = add(&ls, depth, "(input): %s", desc);
	node_note(p, &p->nodes[0], l->note, sizeof l->note);
	children(p, &ls, 0, depth);
	for (int d = depth - 1; d >= 0; d--)
		add(&ls, d, ")");
	size_t width = 0;
	for (int i = 0; i < ls.n; i++)
		if (ls.v[i].note[0] && strlen(ls.v[i].text) > width)
			width = strlen(ls.v[i].text);
	if (width > 90)
		width = 90;
	for (int i = 0; i < ls.n; i++) {
		if (ls.v[i].note[0])
			fprintf(out, "%-*s  %s\n", (int)width, ls.v[i].text, ls.v[i].note);
		else
			fprintf(out, "%s\n", ls.v[i].text);
		free(ls.v[i].text);
	}
	free(ls.v);
	memory(out, p);
	print_training(out, p);
}

static const char *const colors[] = { "lightblue", "lightsalmon", "palegreen", "plum", "khaki", "lightpink", "lightcyan", "wheat" };

void print_graph(FILE *out, const struct plan *p)
{
	fprintf(out, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"Helvetica\"];\n", p->model_name);
	int nclusters = p->parallel.mode == PAR_FSDP ? p->nunits : 0;
	for (int u = -1; u < nclusters; u++) {
		if (u >= 0) {
			char cnt[32];
			fprintf(out, "  subgraph cluster_unit%d {\n    label=\"FSDP unit %d: %s (%s params)\";\n    style=dashed;\n", u, u,
				p->scopes[p->units[u].scope].path[0] ? p->scopes[p->units[u].scope].path : p->model_name,
				print_count(p->units[u].numel, cnt, sizeof cnt));
		}
		for (int i = 0; i < p->nnodes; i++) {
			const struct node *n = &p->nodes[i];
			if ((nclusters ? n->unit : -1) != u)
				continue;
			char sh[96];
			fprintf(out, "%s  n%d [label=\"%s\\n%s %s\", fillcolor=%s];\n", u >= 0 ? "  " : "", i, n->path,
				op_name(n), shape_str(&n->out, sh, sizeof sh), colors[n->device % 8]);
		}
		if (u >= 0)
			fprintf(out, "  }\n");
	}
	for (int i = 0; i < p->nnodes; i++) {
		const struct node *n = &p->nodes[i];
		if (n->in >= 0)
			fprintf(out, "  n%d -> n%d;\n", n->in, i);
		if (n->in2 >= 0)
			fprintf(out, "  n%d -> n%d [style=dashed, label=\"skip\"];\n", n->in2, i);
	}
	if (p->ndevices > 1) {
		fprintf(out, "  subgraph cluster_legend {\n    label=\"devices\";\n");
		for (int d = 0; d < p->ndevices; d++)
			fprintf(out, "    dev%d [label=\"device %d\", fillcolor=%s];\n", d, d, colors[d % 8]);
		fprintf(out, "  }\n");
	}
	fprintf(out, "}\n");
}
