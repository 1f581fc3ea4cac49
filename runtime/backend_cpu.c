/* backend_cpu.c: the CPU backend: every layer's forward and backward as
 * one switch each over the kernels of kern.h (OpenBLAS, oneDNN, loops the
 * compiler vectorises), memory from mmap, copies as memcpy, and no
 * streams or events to wait for.  It is the reference every other backend
 * is checked against.  Convolutions are prepared once for every batch size
 * the run will see, all of a device's over one workspace of the size the
 * plan gives (REG_WORK), which they share since a device runs one layer at
 * a time; nothing is allocated after cpu_prepare.
 */
#include "runtime/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/exec.h"
#include "runtime/kern.h"
#include "runtime/philox.h"

struct cpu_state {
	struct kern_conv2d *conv; /* (nnodes, EXEC_MAX_SIZES); a size seen twice is prepared once */
	void *conv_ws[PLAN_MAX_DEVICES]; /* per device, the plan's REG_WORK bytes */
};

static struct cpu_state *cpu(struct exec *e)
{
	return e->be_state;
}

/* Regions come from mmap: zero pages the kernel maps only when first
 * touched, so a region costs memory for what a run really uses and no
 * clearing at start.  A 64-byte header keeps the mapping's size. */
enum { HEADER = 64 };

static void *cpu_alloc(int64_t bytes)
{
	size_t n = (size_t)(bytes + 63) / 64 * 64 + HEADER;
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, &n, sizeof n);
	return p + HEADER;
}

static void cpu_free(void *p)
{
	if (!p)
		return;
	char *base = (char *)p - HEADER;
	size_t n;
	memcpy(&n, base, sizeof n);
	munmap(base, n);
}

static void cpu_copy(void *dst, const void *src, size_t bytes)
{
	memcpy(dst, src, bytes);
}

static void cpu_sync(struct exec *e)
{
	(void)e;
}

static int64_t numel(const struct shape *s)
{
	return shape_numel(s);
}

static struct conv2d_desc conv_desc(const struct plan *p, const struct node *nd, int64_t n)
{
	const struct shape *in = &p->nodes[nd->in].out;
	struct conv2d_desc d = { 0 };
	d.n = (int)n;
	int64_t c, h, w;
	shape_chw(in->d, in->rank, &c, &h, &w);
	d.c_in = (int)c;
	d.h = (int)h;
	d.w = (int)w;
	d.c_out = (int)nd->a.conv.cout;
	d.kh = (int)nd->a.conv.kh;
	d.kw = (int)nd->a.conv.kw;
	d.sh = (int)nd->a.conv.sh;
	d.sw = (int)nd->a.conv.sw;
	d.ph = (int)nd->a.conv.ph;
	d.pw = (int)nd->a.conv.pw;
	d.dh = (int)nd->a.conv.dh;
	d.dw = (int)nd->a.conv.dw;
	d.groups = (int)nd->a.conv.groups;
	d.bias = nd->a.conv.bias;
	d.path = KERN_CONV_AUTO;
	return d;
}

/* The convolutions prepared for batch n: the first slot of that size. */
static int size_slot(const struct exec *e, int64_t n)
{
	for (int s = 0; s < e->nsizes; s++)
		if (e->sizes[s] == n)
			return s;
	fprintf(stderr, "trainc: internal error: no convolution prepared for batch %lld\n", (long long)n);
	abort();
}

static int cpu_prepare(struct exec *e, char *err, size_t errlen)
{
	const struct plan *p = e->p;
	struct cpu_state *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	e->be_state = c;
	c->conv = calloc((size_t)p->nnodes * EXEC_MAX_SIZES, sizeof *c->conv);
	if (!c->conv) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* TRAINC_CONV_PATH=im2col|onednn|winograd forces one convolution path;
	 * auto (or unset) lets kern_conv2d choose */
	static const char *const path_names[] = { [KERN_CONV_AUTO] = "auto", [KERN_CONV_IM2COL] = "im2col",
						  [KERN_CONV_DNNL] = "onednn", [KERN_CONV_WINOGRAD] = "winograd" };
	const char *force = getenv("TRAINC_CONV_PATH");
	int path = force && *force ? -1 : KERN_CONV_AUTO;
	for (int i = KERN_CONV_AUTO; path < 0 && i <= KERN_CONV_WINOGRAD; i++)
		if (!strcmp(force, path_names[i]))
			path = i;
	if (path < 0) {
		snprintf(err, errlen, "TRAINC_CONV_PATH=%s: not a convolution path; use auto, im2col, onednn or winograd",
			 force);
		return EXEC_REFUSED;
	}
	/* one workspace per device, as the plan sized it: every convolution of
	 * the device runs in it, with fewer oneDNN chunks at once should a
	 * forced path or a batch size the plan did not size for need more */
	int rc = KERN_OK;
	for (int d = 0; d < p->ndevices; d++) {
		int64_t bytes = p->dev[d].bytes[REG_WORK];
		if (bytes > 0 && !(c->conv_ws[d] = cpu_alloc(bytes))) {
			snprintf(err, errlen, "out of memory for the convolutions' workspace (%.1f MiB)", bytes / 1048576.0);
			return -1;
		}
	}
	for (int i = 0; rc == KERN_OK && i < p->nnodes; i++)
		for (int s = 0; rc == KERN_OK && p->nodes[i].op == OP_CONV2D && s < e->nsizes; s++) {
			if (size_slot(e, e->sizes[s]) != s)
				continue;
			const struct node *nd = &p->nodes[i];
			struct conv2d_desc d = conv_desc(p, nd, e->sizes[s]);
			d.path = path;
			int64_t bytes = p->dev[nd->device].bytes[REG_WORK];
			rc = kern_conv2d_prepare_within(&c->conv[i * EXEC_MAX_SIZES + s], &d, c->conv_ws[nd->device], (size_t)bytes);
			if (rc == KERN_ERR_UNSUPPORTED)
				snprintf(err, errlen, "%s: TRAINC_CONV_PATH=%s: oneDNN has no %s convolution of this "
					 "shape%s; unset TRAINC_CONV_PATH to let trainc choose", nd->path, force,
					 path == KERN_CONV_WINOGRAD ? "Winograd" : "direct",
					 path == KERN_CONV_WINOGRAD ? " (it needs 3x3, stride 1, no dilation or groups, "
								      "channels in multiples of 16)" : "");
			else if (rc == KERN_ERR_WORKSPACE)
				snprintf(err, errlen, "%s: the planned convolution workspace (%.1f MiB) cannot hold this "
					 "convolution at batch %lld%s%s", nd->path, bytes / 1048576.0, (long long)e->sizes[s],
					 path != KERN_CONV_AUTO ? " by TRAINC_CONV_PATH=" : "", path != KERN_CONV_AUTO ? force : "");
			else if (rc != KERN_OK)
				snprintf(err, errlen, "%s: cannot prepare the convolution for batch %lld", nd->path,
					 (long long)e->sizes[s]);
		}
	if (rc == KERN_OK)
		return 0;
	/* a path forced where this shape has none, or that needs more room than planned */
	return path != KERN_CONV_AUTO && (rc == KERN_ERR_UNSUPPORTED || rc == KERN_ERR_WORKSPACE) ? EXEC_REFUSED : -1;
}

static void cpu_release(struct exec *e)
{
	struct cpu_state *c = cpu(e);
	if (!c)
		return;
	for (int i = 0; c->conv && i < e->p->nnodes * EXEC_MAX_SIZES; i++)
		if (e->p->nodes[i / EXEC_MAX_SIZES].op == OP_CONV2D && i % EXEC_MAX_SIZES < e->nsizes)
			kern_conv2d_release(&c->conv[i]);
	free(c->conv);
	for (int d = 0; d < PLAN_MAX_DEVICES; d++)
		cpu_free(c->conv_ws[d]);
	free(c);
	e->be_state = NULL;
}

static void cpu_forward(struct exec *e, int i, int64_t n, bool train)
{
	const struct plan *p = e->p;
	const struct node *nd = &p->nodes[i];
	float *y = exec_output(e, i, train);
	const float *x = nd->in >= 0 ? exec_output(e, nd->in, train) : NULL;
	int64_t out_n = numel(&nd->out) * n;
	const struct nodemem *m = &p->mem[i];
	char *save = exec_act(e, i) + m->save_off;
	switch (nd->op) {
	case OP_INPUT: case OP_FLATTEN: case OP_TRANSFER:
		if (nd->op == OP_TRANSFER && y != x)
			memcpy(y, x, (size_t)out_n * 4);
		break;
	case OP_LINEAR: {
		int64_t rows = out_n / nd->a.linear.out;
		kern_linear_fwd(x, exec_param_ptr(e, nd->param0 + 0), nd->a.linear.bias ? exec_param_ptr(e, nd->param0 + 1) : NULL, y, (int)rows, (int)nd->a.linear.in,
				(int)nd->a.linear.out);
		break;
	}
	case OP_CONV2D:
		kern_conv2d_fwd(&cpu(e)->conv[i * EXEC_MAX_SIZES + size_slot(e, n)], x, exec_param_ptr(e, nd->param0 + 0), nd->a.conv.bias ? exec_param_ptr(e, nd->param0 + 1) : NULL, y);
		break;
	case OP_MAXPOOL2D: {
		struct pool2d_desc d = exec_pool_desc(p, nd, n);
		kern_maxpool2d_fwd(&d, x, y, train ? (int32_t *)save : (int32_t *)exec_scratch(e, i));
		break;
	}
	case OP_AVGPOOL2D: {
		struct pool2d_desc d = exec_pool_desc(p, nd, n);
		kern_avgpool2d_fwd(&d, x, y);
		break;
	}
	case OP_ADAPTIVE_AVGPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		kern_adaptive_avgpool2d_fwd(x, y, (int)n, (int)ch, (int)h, (int)w, (int)nd->a.apool.oh, (int)nd->a.apool.ow);
		break;
	}
	case OP_ADAPTIVE_MAXPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		kern_adaptive_maxpool2d_fwd(x, y, train ? (int32_t *)save : (int32_t *)exec_scratch(e, i), (int)n, (int)ch, (int)h,
					    (int)w, (int)nd->a.apool.oh, (int)nd->a.apool.ow);
		break;
	}
	case OP_ZEROPAD2D: {
		struct pad2d_desc d = exec_pad_desc(p, nd, n);
		kern_zeropad2d_fwd(&d, x, y);
		break;
	}
	case OP_BATCHNORM1D: case OP_BATCHNORM2D: {
		int c = (int)nd->a.bn.c, hw = (int)(numel(&nd->out) / c);
		float *g = nd->a.bn.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL, *b = nd->a.bn.affine ? exec_param_ptr(e, nd->param0 + 1) : NULL;
		int rs = nd->a.bn.affine ? 2 : 0;
		float *rm = nd->a.bn.track ? exec_param_ptr(e, nd->param0 + rs) : NULL, *rv = nd->a.bn.track ? exec_param_ptr(e, nd->param0 + rs + 1) : NULL;
		if (train || !nd->a.bn.track) {
			float *sm = (float *)save, *si = sm + c;
			kern_batchnorm2d_fwd_train(x, g, b, y, train ? rm : NULL, train ? rv : NULL, train ? sm : (float *)exec_scratch(e, i),
						   train ? si : (float *)exec_scratch(e, i) + c, (int)n, c, hw, (float)nd->a.bn.eps,
						   (float)nd->a.bn.momentum);
			if (train && nd->a.bn.track) {
				int64_t *nb = (int64_t *)(void *)exec_param_ptr(e, nd->param0 + rs + 2);
				(*nb)++;
			}
		} else {
			kern_batchnorm2d_fwd_eval(x, g, b, rm, rv, y, (int)n, c, hw, (float)nd->a.bn.eps);
		}
		break;
	}
	case OP_LAYERNORM: {
		int64_t row = exec_ln_row(nd);
		float *sm = train ? (float *)save : (float *)exec_scratch(e, i);
		int rows = (int)(out_n / row);
		kern_layernorm_fwd(x, nd->a.ln.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL, nd->a.ln.affine ? exec_param_ptr(e, nd->param0 + 1) : NULL, y, sm, sm + rows,
				   rows, (int)row, (float)nd->a.ln.eps);
		break;
	}
	case OP_GROUPNORM: {
		int c = (int)nd->a.gn.c, groups = (int)nd->a.gn.groups, hw = (int)(numel(&nd->out) / c);
		float *sm = train ? (float *)save : (float *)exec_scratch(e, i);
		kern_groupnorm_fwd(x, nd->a.gn.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL,
				   nd->a.gn.affine ? exec_param_ptr(e, nd->param0 + 1) : NULL, y, sm, sm + (int)n * groups, (int)n, groups,
				   c / groups, hw, (float)nd->a.gn.eps);
		break;
	}
	case OP_DROPOUT:
		if (train) {
			struct rng r = rng_stream(exec_dropout_seed(e, i), RNG_DROPOUT, e->rank, (uint32_t)e->step);
			int64_t inner = exec_dropout_inner(nd);
			if (inner == 1)
				kern_dropout_fwd(x, y, (uint8_t *)save, (size_t)out_n, (float)nd->a.drop.p, &r);
			else
				kern_dropout_runs_fwd(x, y, (uint8_t *)save, (size_t)out_n, (size_t)inner, (float)nd->a.drop.p, &r);
		} else if (y != x) {
			memcpy(y, x, (size_t)out_n * 4);
		}
		break;
	case OP_RELU: kern_relu_fwd(x, y, (size_t)out_n); break;
	case OP_GELU: kern_gelu_fwd(x, y, (size_t)out_n, nd->a.gelu.tanh ? KERN_GELU_TANH : KERN_GELU_NONE); break;
	case OP_TANH: kern_tanh_fwd(x, y, (size_t)out_n); break;
	case OP_SIGMOID: kern_sigmoid_fwd(x, y, (size_t)out_n); break;
	OP_ACT_CASES: {
		float a, b;
		enum kern_act k = exec_act_kind(nd, &a, &b);
		kern_act_fwd(k, x, y, (size_t)out_n, a, b);
		break;
	}
	case OP_PRELU: {
		int c;
		int64_t inner;
		exec_prelu_dims(p, nd, &c, &inner);
		kern_prelu_fwd(x, exec_param_ptr(e, nd->param0), y, (int)n, c, inner);
		break;
	}
	case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
		int64_t outer, inner;
		int dim;
		exec_softmax_dims(nd, n, &outer, &dim, &inner);
		if (nd->op == OP_SOFTMAX)
			kern_softmax_fwd(x, y, (int)outer, dim, (int)inner);
		else
			kern_log_softmax_fwd(x, y, (int)outer, dim, (int)inner);
		break;
	}
	case OP_ADD: kern_add(x, exec_output(e, nd->in2, train), y, (size_t)out_n); break;
	case OP_EMBEDDING:
		/* an out-of-range id leaves the output untouched; exec checks ids first */
		kern_embedding_fwd((const int32_t *)(const void *)x, exec_param_ptr(e, nd->param0), y, (int)(out_n / nd->a.emb.dim),
				   (int)nd->a.emb.num, (int)nd->a.emb.dim);
		break;
	case OP__COUNT: break;
	}
}

static void finish_dx(struct exec *e, int j, float *dx, bool accumulate, int64_t count)
{
	if (accumulate && dx)
		kern_accumulate(exec_dx_home(e, j), dx, (size_t)count);
}

static void cpu_backward(struct exec *e, int i, int64_t n)
{
	const struct plan *p = e->p;
	const struct node *nd = &p->nodes[i];
	if (nd->op == OP_FLATTEN)
		return; /* a view: its gradient is its input's */
	const struct nodemem *m = &p->mem[i];
	const float *dy = (const float *)(exec_act(e, i) + m->grad_off);
	const float *y = exec_output(e, i, true);
	const float *x = nd->in >= 0 ? exec_output(e, nd->in, true) : NULL;
	char *save = exec_act(e, i) + m->save_off;
	int64_t out_n = numel(&nd->out) * n;
	int64_t in_n = nd->in >= 0 ? numel(&p->nodes[nd->in].out) * n : 0;
	bool acc;
	float *dx = exec_dx_target(e, nd->in, &acc);
	switch (nd->op) {
	case OP_LINEAR: {
		int64_t rows = out_n / nd->a.linear.out;
		kern_linear_bwd(x, exec_param_ptr(e, nd->param0 + 0), dy, dx, exec_grad_ptr(e, nd->param0 + 0), nd->a.linear.bias ? exec_grad_ptr(e, nd->param0 + 1) : NULL, (int)rows,
				(int)nd->a.linear.in, (int)nd->a.linear.out);
		break;
	}
	case OP_CONV2D:
		kern_conv2d_bwd(&cpu(e)->conv[i * EXEC_MAX_SIZES + size_slot(e, n)], x, exec_param_ptr(e, nd->param0 + 0), dy, dx, exec_grad_ptr(e, nd->param0 + 0),
				nd->a.conv.bias ? exec_grad_ptr(e, nd->param0 + 1) : NULL);
		break;
	case OP_MAXPOOL2D: {
		struct pool2d_desc d = exec_pool_desc(p, nd, n);
		if (dx)
			kern_maxpool2d_bwd(&d, (const int32_t *)save, dy, dx);
		break;
	}
	case OP_AVGPOOL2D: {
		struct pool2d_desc d = exec_pool_desc(p, nd, n);
		if (dx)
			kern_avgpool2d_bwd(&d, dy, dx);
		break;
	}
	case OP_ADAPTIVE_AVGPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		if (dx)
			kern_adaptive_avgpool2d_bwd(dy, dx, (int)n, (int)ch, (int)h, (int)w, (int)nd->a.apool.oh,
						    (int)nd->a.apool.ow);
		break;
	}
	case OP_ADAPTIVE_MAXPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		if (dx)
			kern_adaptive_maxpool2d_bwd((const int32_t *)save, dy, dx, (int)n, (int)ch, (int)h, (int)w,
						    (int)nd->a.apool.oh, (int)nd->a.apool.ow);
		break;
	}
	case OP_ZEROPAD2D: {
		struct pad2d_desc d = exec_pad_desc(p, nd, n);
		if (dx)
			kern_zeropad2d_bwd(&d, dy, dx);
		break;
	}
	case OP_BATCHNORM1D: case OP_BATCHNORM2D: {
		int c = (int)nd->a.bn.c, hw = (int)(numel(&nd->out) / c);
		float *sm = (float *)save;
		kern_batchnorm2d_bwd(x, nd->a.bn.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL, sm, sm + c, dy, dx, nd->a.bn.affine ? exec_grad_ptr(e, nd->param0 + 0) : NULL,
				     nd->a.bn.affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL, (int)n, c, hw);
		break;
	}
	case OP_LAYERNORM: {
		int64_t row = exec_ln_row(nd);
		int rows = (int)(out_n / row);
		float *sm = (float *)save;
		kern_layernorm_bwd(x, nd->a.ln.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL, sm, sm + rows, dy, dx, nd->a.ln.affine ? exec_grad_ptr(e, nd->param0 + 0) : NULL,
				   nd->a.ln.affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL, rows, (int)row);
		break;
	}
	case OP_GROUPNORM: {
		int c = (int)nd->a.gn.c, groups = (int)nd->a.gn.groups, hw = (int)(numel(&nd->out) / c);
		float *sm = (float *)save;
		kern_groupnorm_bwd(x, nd->a.gn.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL, sm, sm + (int)n * groups, dy, dx,
				   nd->a.gn.affine ? exec_grad_ptr(e, nd->param0 + 0) : NULL,
				   nd->a.gn.affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL, (int)n, groups, c / groups, hw);
		break;
	}
	case OP_DROPOUT: if (dx) kern_dropout_bwd(dy, (const uint8_t *)save, dx, (size_t)out_n, (float)nd->a.drop.p); break;
	case OP_RELU: if (dx) kern_relu_bwd(y, dy, dx, (size_t)out_n); break;
	case OP_GELU: if (dx) kern_gelu_bwd(x, dy, dx, (size_t)out_n, nd->a.gelu.tanh ? KERN_GELU_TANH : KERN_GELU_NONE); break;
	case OP_TANH: if (dx) kern_tanh_bwd(y, dy, dx, (size_t)out_n); break;
	case OP_SIGMOID: if (dx) kern_sigmoid_bwd(y, dy, dx, (size_t)out_n); break;
	OP_ACT_CASES:
		if (dx) {
			float a, b;
			enum kern_act k = exec_act_kind(nd, &a, &b);
			kern_act_bwd(k, x, dy, dx, (size_t)out_n, a, b);
		}
		break;
	case OP_PRELU: {
		int c;
		int64_t inner;
		exec_prelu_dims(p, nd, &c, &inner);
		kern_prelu_bwd(x, exec_param_ptr(e, nd->param0), dy, dx, exec_grad_ptr(e, nd->param0), (int)n, c, inner);
		break;
	}
	case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
		int64_t outer, inner;
		int dim;
		exec_softmax_dims(nd, n, &outer, &dim, &inner);
		if (dx && nd->op == OP_SOFTMAX)
			kern_softmax_bwd(y, dy, dx, (int)outer, dim, (int)inner);
		else if (dx)
			kern_log_softmax_bwd(y, dy, dx, (int)outer, dim, (int)inner);
		break;
	}
	case OP_TRANSFER: if (dx) memcpy(dx, dy, (size_t)out_n * 4); break;
	case OP_ADD: {
		if (dx)
			memcpy(dx, dy, (size_t)out_n * 4);
		finish_dx(e, nd->in, dx, acc, out_n);
		bool acc2;
		float *dx2 = exec_dx_target(e, nd->in2, &acc2);
		if (dx2)
			memcpy(dx2, dy, (size_t)out_n * 4);
		finish_dx(e, nd->in2, dx2, acc2, out_n);
		return;
	}
	case OP_EMBEDDING:
		if (exec_grad_ptr(e, nd->param0))
			kern_embedding_bwd((const int32_t *)(const void *)x, dy, exec_grad_ptr(e, nd->param0), (int)(out_n / nd->a.emb.dim),
					   (int)nd->a.emb.num, (int)nd->a.emb.dim, (int)nd->a.emb.padding_idx);
		break;
	case OP_INPUT: case OP_FLATTEN: case OP__COUNT: break;
	}
	finish_dx(e, nd->in, dx, acc, in_n);
}

static int cpu_loss(struct exec *e, const void *y, int n, bool train, double *loss, long *correct)
{
	const struct plan *p = e->p;
	int last = p->nnodes - 1;
	const float *out = exec_output(e, last, train);
	float *dout = train ? (float *)(exec_act(e, last) + p->mem[last].grad_off) : NULL;
	int64_t per = numel(&p->nodes[last].out);
	enum kern_reduction red = exec_reduction(p, train);
	*correct = 0;
	int rc = 0;
	switch (p->train.loss) {
	case LOSS_MSE: case LOSS_L1: case LOSS_SMOOTH_L1: case LOSS_HUBER: case LOSS_BCE: case LOSS_BCE_LOGITS: case LOSS_KL_DIV: {
		float rows = exec_batchmean(p, per);
		*loss = rows * kern_regression_per(exec_regression(p), (float)p->train.loss_param, p->train.pos_weights, p->train.npos_weights,
						   out, (const float *)y, dout, (size_t)(per * n), red, e->loss_scale * rows);
		break;
	}
	case LOSS_NLL:
		rc = kern_nll(out, (const int32_t *)y, dout, n, (int)per, p->train.ignore_index, p->train.class_weights, red, e->loss_scale, loss);
		*correct = kern_argmax_correct(out, (const int32_t *)y, n, (int)per);
		break;
	case LOSS_CROSS_ENTROPY:
		rc = kern_cross_entropy(out, (const int32_t *)y, dout, n, (int)per, p->train.ignore_index, p->train.class_weights, (float)p->train.label_smoothing, red,
					 e->loss_scale, loss);
		*correct = kern_argmax_correct(out, (const int32_t *)y, n, (int)per);
		break;
	}
	return rc != 0 ? -1 : 0;
}

/* tag: backend table; keep in step with struct backend_ops */
const struct backend_ops backend_cpu = {
	.name = "cpu",
	.alloc = cpu_alloc,
	.free = cpu_free,
	.to_host = cpu_copy,
	.from_host = cpu_copy,
	.copy = cpu_copy,
	.prepare = cpu_prepare,
	.release = cpu_release,
	.forward = cpu_forward,
	.backward = cpu_backward,
	.loss = cpu_loss,
	.sync = cpu_sync,
};
