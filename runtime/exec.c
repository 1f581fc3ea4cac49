/* exec.c: forward and backward over the plan's layers, on a backend.
 * The backend runs each layer (backend_cpu.c: one switch per direction);
 * this file owns the order, the regions and the hooks.  Buffers come from
 * the plan:
 * a node's output, its output gradient and what it keeps for backward sit
 * at fixed offsets of the activation region (evaluation uses its own
 * offsets, since the test batch differs).  A gradient with several
 * producers (the input of a residual) is written by the first and summed
 * by the rest through a planned scratch buffer.
 */
#include "runtime/exec.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/init.h"


static int64_t numel(const struct shape *s)
{
	return shape_numel(s);
}



int exec_init(struct exec *e, const struct plan *p, const int64_t *sizes, int nsizes, bool fsdp, int copies, char *err,
	      size_t errlen)
{
	return exec_init_on(e, &backend_cpu, p, sizes, nsizes, fsdp, copies, err, errlen);
}

int exec_init_on(struct exec *e, const struct backend_ops *be, const struct plan *p, const int64_t *sizes, int nsizes, bool fsdp,
		 int copies, char *err, size_t errlen)
{
	memset(e, 0, sizeof *e);
	e->p = p;
	e->be = be;
	e->loss_scale = 1.0f;
	for (int i = 0; i < p->nparams; i++)
		if (p->params[i].trainable)
			e->trainable += p->params[i].numel;
	/* each device's ranges of the unsharded layout (trainables device by
	 * device, then buffers device by device: memplan.c) */
	int64_t t_hi[PLAN_MAX_DEVICES] = { 0 }, b_hi[PLAN_MAX_DEVICES] = { 0 };
	for (int d = 0; d < PLAN_MAX_DEVICES; d++)
		e->t_lo[d] = e->b_lo[d] = INT64_MAX;
	for (int k = 0; k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		int d = pr->device;
		int64_t end = pr->offset + (pr->dtype == DT_I64 ? 2 : pr->numel);
		int64_t *lo = pr->trainable ? &e->t_lo[d] : &e->b_lo[d], *hi = pr->trainable ? &t_hi[d] : &b_hi[d];
		*lo = pr->offset < *lo ? pr->offset : *lo;
		*hi = end > *hi ? end : *hi;
	}
	for (int d = 0; d < PLAN_MAX_DEVICES; d++) {
		e->t_lo[d] = e->t_lo[d] == INT64_MAX ? 0 : e->t_lo[d];
		e->b_lo[d] = e->b_lo[d] == INT64_MAX ? 0 : e->b_lo[d];
		e->t_n[d] = t_hi[d] > e->t_lo[d] ? t_hi[d] - e->t_lo[d] : 0;
		e->b_n[d] = b_hi[d] > e->b_lo[d] ? b_hi[d] - e->b_lo[d] : 0;
	}
	/* without FSDP a process holds the whole unsharded layout; with it, only
	 * the buffers after the parameters (fsdp.c holds the units) */
	const struct devplan *dp = &p->dev[0];
	int kopt = p->train.optim.state_per_param;
	e->fsdp = fsdp;
	e->split = !fsdp && be->use_device && p->ndevices > 1;
	bool regions_ok = true;
	if (e->split) {
		for (int d = 0; d < p->ndevices; d++) {
			be->use_device(d);
			e->dparams[d] = be->alloc((exec_dev_buffer_at(e, d) + e->b_n[d]) * 4);
			e->dgrads[d] = be->alloc(e->t_n[d] * 4);
			e->doptim[d] = be->alloc(e->t_n[d] * 4 * kopt);
			regions_ok &= e->dparams[d] && e->dgrads[d] && e->doptim[d];
		}
		be->use_device(0);
		e->params = e->dparams[0], e->grads = e->dgrads[0], e->optim = e->doptim[0];
	} else if (fsdp) {
		e->buffer_start = p->unsharded_elems;
		for (int k = 0; k < p->nparams; k++)
			if (p->params[k].unit_offset < 0 && p->params[k].offset < e->buffer_start)
				e->buffer_start = p->params[k].offset;
		e->params = e->be->alloc((p->unsharded_elems - e->buffer_start) * 4);
		e->grads = e->be->alloc(4);
		e->optim = e->be->alloc(4);
		e->unit_param = calloc((size_t)p->nunits + 1, sizeof *e->unit_param);
		e->unit_grad = calloc((size_t)p->nunits + 1, sizeof *e->unit_grad);
	} else {
		e->params = e->be->alloc(p->unsharded_elems * 4);
		e->grads = e->be->alloc(e->trainable * 4);
		e->optim = e->be->alloc(e->trainable * 4 * kopt);
	}
	/* activations: one arena per device of the rank (virtual devices on the CPU) */
	bool acts_ok = true;
	e->copies = copies > 0 ? copies : 1;
	for (int d = 0; d < p->ndevices; d++) {
		if (be->use_device)
			be->use_device(d);
		e->act_stride[d] = (p->dev[d].act_copy + 63) / 64 * 64;
		e->acts[d] = e->be->alloc(e->act_stride[d] * e->copies);
		acts_ok &= e->acts[d] != NULL;
	}
	if (be->use_device)
		be->use_device(0);
	e->written = calloc((size_t)p->nnodes * (size_t)e->copies, sizeof *e->written);
	if (!e->params || !e->grads || !e->optim || !regions_ok || !acts_ok || !e->written) {
		snprintf(err, errlen, "out of memory allocating the plan's regions (%.1f MiB)",
			 (double)(dp->bytes[REG_PARAMS] + dp->bytes[REG_GRADS] + dp->bytes[REG_OPTIM] + dp->bytes[REG_ACTS]) / 1048576.0);
		return -1;
	}
	e->nsizes = nsizes < EXEC_MAX_SIZES ? nsizes : EXEC_MAX_SIZES;
	memcpy(e->sizes, sizes, (size_t)e->nsizes * sizeof *sizes);
	return e->be->prepare(e, err, errlen);
}

void exec_param_init_begin(struct param_init *pi, uint64_t seed)
{
	init_gen_seed(&pi->g, seed);
	pi->seed = seed;
	pi->next = 0;
}

/* Parameter k's initial value drawn from pi->g into x (NULL: drawn only). */
static void draw_param(const struct plan *p, int k, struct param_init *pi, float *x)
{
	const struct param *pr = &p->params[k];
	const struct node *nd = &p->nodes[pr->node];
	struct init_param ip = { 0 };
	ip.fan_in = pr->fan_in;
	ip.padding_idx = -1;
	switch (pr->init) {
	case INIT_KAIMING_UNIFORM: ip.role = nd->op == OP_CONV2D ? INIT_CONV_WEIGHT : INIT_LINEAR_WEIGHT; break;
	case INIT_BIAS_UNIFORM: ip.role = nd->op == OP_CONV2D ? INIT_CONV_BIAS : INIT_LINEAR_BIAS; break;
	case INIT_ONES: ip.role = pr->role == ROLE_RUNNING_VAR ? INIT_RUNNING_VAR : INIT_NORM_WEIGHT; break;
	case INIT_ZEROS: ip.role = pr->role == ROLE_RUNNING_MEAN ? INIT_RUNNING_MEAN : INIT_NORM_BIAS; break;
	case INIT_PRELU:
		ip.role = INIT_CONST;
		ip.value = (float)nd->a.prelu.init;
		break;
	case INIT_NORMAL:
		ip.role = INIT_EMBEDDING;
		ip.row_len = nd->a.emb.dim;
		ip.padding_idx = nd->a.emb.padding_idx;
		break;
	}
	if (pr->dtype == DT_I64) { /* num_batches_tracked: zero, no draws */
		if (x)
			memset(x, 0, 8);
		return;
	}
	init_fill(&ip, &pi->g, x, pr->numel);
}

void exec_init_param(const struct plan *p, int k, struct param_init *pi, float *x)
{
	if (pi->next > k)
		exec_param_init_begin(pi, pi->seed);
	for (; pi->next < k; pi->next++)
		draw_param(p, pi->next, pi, NULL);
	draw_param(p, k, pi, x);
	pi->next = k + 1;
}

float *exec_dev_trainables(struct exec *e, int d)
{
	return e->split ? e->dparams[d] : e->params + e->t_lo[d];
}

int64_t exec_dev_buffer_at(const struct exec *e, int d)
{
	return (e->t_n[d] + 1) / 2 * 2; /* an int64 buffer (num_batches_tracked) stays 8-byte aligned */
}

float *exec_dev_buffers(struct exec *e, int d)
{
	return e->split ? e->dparams[d] + exec_dev_buffer_at(e, d) : e->params + e->b_lo[d];
}

float *exec_dev_grads(struct exec *e, int d)
{
	return e->split ? e->dgrads[d] : e->grads + e->t_lo[d];
}

float *exec_dev_optim(struct exec *e, int d)
{
	return e->split ? e->doptim[d] : e->optim + e->t_lo[d];
}

int64_t exec_dev_stride(const struct exec *e, int d)
{
	return e->split ? e->t_n[d] : e->trainable;
}

float *exec_param_ptr(struct exec *e, int k)
{
	const struct param *pr = &e->p->params[k];
	if (e->split)
		return pr->trainable ? e->dparams[pr->device] + (pr->offset - e->t_lo[pr->device])
				     : e->dparams[pr->device] + exec_dev_buffer_at(e, pr->device) + (pr->offset - e->b_lo[pr->device]);
	if (!e->fsdp)
		return e->params + pr->offset;
	if (pr->unit_offset < 0)
		return e->params + (pr->offset - e->buffer_start);
	return e->unit_param[pr->unit] ? e->unit_param[pr->unit] + pr->unit_offset : NULL;
}

void exec_init_params(struct exec *e, uint64_t seed)
{
	struct param_init pi;
	exec_param_init_begin(&pi, seed);
	for (int k = 0; k < e->p->nparams; k++)
		if (!e->fsdp || e->p->params[k].unit_offset < 0)
			exec_init_param(e->p, k, &pi, exec_param_ptr(e, k));
}


/* The micro-batch this thread works on: pipeline stages run on threads of
 * their own, each on its own micro-batch's copy of the activations. */
static _Thread_local int current_mb;
static _Thread_local int64_t current_first; /* its first sample's place in the batch */

void exec_set_micro(int mb)
{
	current_mb = mb;
	current_first = 0;
}

void exec_set_micro_at(int mb, int64_t first)
{
	current_mb = mb;
	current_first = first;
}

/* Dropout's stream for layer i: keyed by the layer's place among the
 * model's layers (device transfers and hidden pads not counted, so
 * placement and how a padding is carried out do not change masks) and by where this micro-batch starts in the optimizer
 * step, so that the micro-batches of one step draw different masks; the
 * rank and the step select the counter block (rng_stream). */
uint64_t exec_dropout_seed(const struct exec *e, int i)
{
	int layer = i;
	for (int k = 0; k < i; k++)
		layer -= e->p->nodes[k].op == OP_TRANSFER || e->p->nodes[k].hidden;
	uint64_t first = (uint64_t)(e->step_first + current_first);
	return e->seed + 0x9E3779B97F4A7C15ull * (uint64_t)(layer + 1) + 0xD1B54A32D192ED03ull * first;
}

char *exec_act(struct exec *e, int node)
{
	int d = e->p->nodes[node].device;
	return e->acts[d] + (size_t)current_mb * (size_t)e->act_stride[d];
}

char *exec_scratch(struct exec *e, int node)
{
	int d = e->p->nodes[node].device;
	return exec_act(e, node) + e->p->dev[d].scratch_off;
}

bool *exec_written(struct exec *e)
{
	return e->written + (size_t)current_mb * (size_t)e->p->nnodes;
}

float *exec_output(struct exec *e, int i, bool train)
{
	const struct nodemem *m = &e->p->mem[i];
	return (float *)(exec_act(e, i) + (train ? m->out_off : m->eval_off));
}

float *exec_grad_ptr(struct exec *e, int k)
{
	const struct param *pr = &e->p->params[k];
	if (!pr->trainable)
		return NULL;
	if (e->fsdp)
		return e->unit_grad[pr->unit] + pr->unit_offset;
	if (e->split)
		return e->dgrads[pr->device] + (pr->offset - e->t_lo[pr->device]);
	return e->grads + pr->offset;
}


struct pool2d_desc exec_pool_desc(const struct plan *p, const struct node *nd, int64_t n)
{
	const struct shape *in = &p->nodes[nd->in].out;
	struct pool2d_desc d = { 0 };
	d.n = (int)n;
	int64_t c, h, w;
	shape_chw(in->d, in->rank, &c, &h, &w);
	d.c = (int)c;
	d.h = (int)h;
	d.w = (int)w;
	d.kh = (int)nd->a.pool.kh;
	d.kw = (int)nd->a.pool.kw;
	d.sh = (int)nd->a.pool.sh;
	d.sw = (int)nd->a.pool.sw;
	d.ph = (int)nd->a.pool.ph;
	d.pw = (int)nd->a.pool.pw;
	d.dh = (int)nd->a.pool.dh;
	d.dw = (int)nd->a.pool.dw;
	d.ceil_mode = nd->a.pool.ceil_mode;
	d.count_include_pad = nd->a.pool.count_include_pad;
	return d;
}

struct pad2d_desc exec_pad_desc(const struct plan *p, const struct node *nd, int64_t n)
{
	const struct shape *in = &p->nodes[nd->in].out;
	struct pad2d_desc d = { 0 };
	/* the last two dimensions padded; those before them count as channels */
	int64_t c = 1;
	for (int k = 0; k + 2 < in->rank; k++)
		c *= in->d[k];
	d.n = (int)n;
	d.c = (int)c;
	d.h = (int)in->d[in->rank - 2];
	d.w = (int)in->d[in->rank - 1];
	d.left = (int)nd->a.pad.left;
	d.right = (int)nd->a.pad.right;
	d.top = (int)nd->a.pad.top;
	d.bottom = (int)nd->a.pad.bottom;
	return d;
}

void exec_softmax_dims(const struct node *nd, int64_t n, int64_t *outer, int *dim, int64_t *inner)
{
	*outer = n;
	*inner = 1;
	for (int k = 0; k < nd->a.softmax.dim; k++)
		*outer *= nd->out.d[k];
	for (int k = nd->a.softmax.dim + 1; k < nd->out.rank; k++)
		*inner *= nd->out.d[k];
	*dim = (int)nd->out.d[nd->a.softmax.dim];
}

int64_t exec_ln_row(const struct node *nd)
{
	int64_t row = 1;
	for (int k = 0; k < nd->a.ln.nd; k++)
		row *= nd->a.ln.d[k];
	return row;
}

float *exec_dx_home(struct exec *e, int j)
{
	int r = j;
	while (e->p->nodes[r].alias >= 0)
		r = e->p->nodes[r].alias;
	return (float *)(exec_act(e, r) + e->p->mem[r].grad_off);
}

float *exec_dx_target(struct exec *e, int j, bool *accumulate)
{
	const struct plan *p = e->p;
	*accumulate = false;
	if (j <= 0 || p->nodes[j].dtype != DT_F32)
		return NULL;
	int r = j;
	while (p->nodes[r].alias >= 0)
		r = p->nodes[r].alias;
	if (r == 0)
		return NULL;
	bool *written = exec_written(e);
	if (written[r]) {
		*accumulate = true;
		return (float *)exec_scratch(e, r);
	}
	written[r] = true;
	return exec_dx_home(e, r);
}

/* The batch into the input node's buffer: floats as they are; token ids
 * (carried as exact floats by the data path) as int32, the embedding's index type. */
static void copy_input(const struct plan *p, float *in, const float *x, int n)
{
	int64_t count = numel(&p->nodes[0].out) * n;
	if (p->nodes[0].dtype == DT_I64) {
		int32_t *ids = (int32_t *)(void *)in;
		for (int64_t i = 0; i < count; i++)
			ids[i] = (int32_t)x[i];
	} else {
		memcpy(in, x, (size_t)count * 4);
	}
}

void exec_input(struct exec *e, const float *x, int n, bool train)
{
	copy_input(e->p, exec_output(e, 0, train), x, n);
}

void exec_forward(struct exec *e, const float *x, int n, bool train)
{
	exec_input(e, x, n, train);
	exec_forward_range(e, 1, e->p->nnodes, n, train);
}

void exec_forward_range(struct exec *e, int begin, int end, int n, bool train)
{
	assert(n <= (train ? e->p->act_batch : e->p->eval_batch)); /* the activations hold no more */
	for (int i = begin; i < end; i++) {
		if (e->phase_hook)
			e->phase_hook(e->phase_ctx, i, EXEC_BEFORE_FWD);
		if (e->stop)
			return;
		e->be->forward(e, i, n, train);
		if (e->phase_hook)
			e->phase_hook(e->phase_ctx, i, EXEC_AFTER_FWD);
	}
}

int exec_loss(struct exec *e, const void *y, int n, bool train, double *loss, long *correct, char *err, size_t errlen)
{
	if (e->be->loss(e, y, n, train, loss, correct) != 0) {
		snprintf(err, errlen, "a target class is outside 0..%lld, the model's output classes",
			 (long long)shape_numel(&e->p->nodes[e->p->nnodes - 1].out) - 1);
		return -1;
	}
	return 0;
}

void exec_backward(struct exec *e, int n)
{
	exec_backward_begin(e);
	exec_backward_range(e, 1, e->p->nnodes, n);
}

void exec_backward_begin(struct exec *e)
{
	bool *w = exec_written(e);
	memset(w, 0, (size_t)e->p->nnodes * sizeof *w);
	w[e->p->nnodes - 1] = true;
}

void exec_backward_range(struct exec *e, int begin, int end, int n)
{
	assert(n <= e->p->act_batch);
	for (int i = end - 1; i >= begin; i--) {
		if (e->phase_hook)
			e->phase_hook(e->phase_ctx, i, EXEC_BEFORE_BWD);
		if (e->stop)
			return;
		e->be->backward(e, i, n);
		if (e->phase_hook)
			e->phase_hook(e->phase_ctx, i, EXEC_AFTER_BWD);
		if (e->after_backward)
			e->after_backward(e->hook_ctx, i);
	}
}

int exec_find_nonfinite(struct exec *e, const float *x, int n, int *param)
{
	const struct plan *p = e->p;
	*param = -1;
	float *in = exec_output(e, 0, true);
	copy_input(p, in, x, n);
	for (int i = 0; i < p->nnodes; i++) {
		if (i > 0 && e->phase_hook)
			e->phase_hook(e->phase_ctx, i, EXEC_BEFORE_FWD);
		if (e->stop)
			return -1;
		if (i > 0)
			e->be->forward(e, i, n, true);
		const float *y = exec_output(e, i, true);
		int64_t cnt = numel(&p->nodes[i].out) * n;
		bool bad = false;
		for (int64_t k = 0; k < cnt && !bad; k++)
			bad = !isfinite(y[k]);
		/* its parameters while the forward holds them (FSDP gathered) */
		for (int k = p->nodes[i].param0; bad && *param < 0 && k < p->nodes[i].param0 + p->nodes[i].nparams; k++) {
			const float *w = p->params[k].dtype == DT_F32 ? exec_param_ptr(e, k) : NULL;
			for (int64_t j = 0; w && j < p->params[k].numel && *param < 0; j++)
				if (!isfinite(w[j]))
					*param = k;
		}
		if (i > 0 && e->phase_hook)
			e->phase_hook(e->phase_ctx, i, EXEC_AFTER_FWD);
		if (bad)
			return i;
	}
	return -1;
}

void exec_free(struct exec *e)
{
	if (e->be) {
		e->be->release(e);
		if (e->split) {
			for (int d = 0; d < PLAN_MAX_DEVICES; d++) {
				e->be->free(e->dparams[d]);
				e->be->free(e->dgrads[d]);
				e->be->free(e->doptim[d]);
			}
		} else {
			e->be->free(e->params);
			e->be->free(e->grads);
			e->be->free(e->optim);
		}
		for (int d = 0; d < PLAN_MAX_DEVICES; d++)
			if (e->acts[d])
				e->be->free(e->acts[d]);
	}
	free(e->written);
	free(e->unit_param);
	free(e->unit_grad);
	memset(e, 0, sizeof *e);
}
