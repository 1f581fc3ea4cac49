/* fsdp.c: gathering, releasing and reduce-scattering FSDP units around the
 * executor's layers.
 * The executor calls fsdp_phase before and after each layer's forward and
 * backward; a unit is entered at its first layer (forward) or its last
 * (backward) and left at the other end.  Buffer pools are sized from the
 * plan: as many slots as units can be active at once, plus one for the
 * prefetch, each as large as the largest non-root unit.  A collective's
 * failure is recorded and reported by fsdp_finish_micro, so a layer hook
 * never has to unwind the executor.
 */
#include "runtime/fsdp.h"
#include "runtime/util.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- memory: the host's, or the device's through f->dev ---- */

static float *alloc_floats(struct fsdp *f, int64_t n)
{
	size_t bytes = (size_t)(n > 0 ? n : 1) * 4;
	bytes = (bytes + 63) / 64 * 64;
	f->peak_bytes += (int64_t)bytes;
	if (f->dev)
		return f->dev->alloc((int64_t)bytes);
	float *p = aligned_alloc(64, bytes);
	if (p)
		memset(p, 0, bytes);
	return p;
}

static void free_floats(struct fsdp *f, float *p)
{
	if (f->dev && p)
		f->dev->free(p);
	else
		free(p);
}

static void zero(struct fsdp *f, float *p, int64_t n)
{
	if (f->dev)
		f->dev->zero(f->dev->ctx, p, n);
	else
		memset(p, 0, (size_t)n * 4);
}

static void copy(struct fsdp *f, float *dst, const float *src, int64_t n)
{
	if (f->dev)
		f->dev->copy(f->dev->ctx, dst, src, n);
	else
		memcpy(dst, src, (size_t)n * 4);
}

static void add(struct fsdp *f, float *dst, const float *src, int64_t n)
{
	if (f->dev) {
		f->dev->add(f->dev->ctx, dst, src, n);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		dst[i] += src[i];
}

/* host -> shard memory and back; a failure is recorded */
static void put(struct fsdp *f, void *dst, const void *src, size_t bytes)
{
	if (!f->dev) {
		memcpy(dst, src, bytes);
	} else if (f->dev->from_host(f->dev->ctx, dst, src, bytes) != 0 && !f->failed) {
		f->failed = true;
		snprintf(f->err, sizeof f->err, "copying FSDP state to the device failed");
	}
}

static void get(struct fsdp *f, void *dst, const void *src, size_t bytes)
{
	if (!f->dev) {
		memcpy(dst, src, bytes);
	} else if (f->dev->to_host(f->dev->ctx, dst, src, bytes) != 0 && !f->failed) {
		f->failed = true;
		snprintf(f->err, sizeof f->err, "copying FSDP state from the device failed");
	}
}

static bool is_root(const struct fsdp *f, int u)
{
	return f->p->units[u].parent < 0;
}

/* Before a collective starts: its inputs may come from any device's stream. */
static void join_streams(struct fsdp *f)
{
	if (f->dev && f->dev->join)
		f->dev->join(f->dev->ctx);
}

static void wait_work(struct fsdp *f, struct comm_work **w)
{
	if (!*w)
		return;
	double t0 = util_now();
	char err[512];
	int rc = f->dev ? comm_wait_on(*w, f->dev->stream, err, sizeof err) : comm_wait(*w, err, sizeof err);
	if (f->dev && f->dev->fork) /* every device's later work sees the result */
		f->dev->fork(f->dev->ctx);
	if (rc != 0 && !f->failed) {
		f->failed = true;
		f->e->stop = true;
		snprintf(f->err, sizeof f->err, "%s", err);
	}
	*w = NULL;
	f->wait_s += util_now() - t0;
}

static int cmp_first(const void *a, const void *b, void *ctx)
{
	const struct plan *p = ctx;
	int x = *(const int *)a, y = *(const int *)b;
	if (p->units[x].first_node != p->units[y].first_node)
		return p->units[x].first_node < p->units[y].first_node ? -1 : 1;
	return x < y ? -1 : x > y; /* the parent (lower index) first */
}

int fsdp_init(struct fsdp *f, const struct plan *p, struct comm *c, struct exec *e, const struct fsdp_dev *dev, char *err,
	      size_t errlen)
{
	memset(f, 0, sizeof *f);
	f->dev = dev;
	f->p = p;
	f->c = c;
	f->e = e;
	f->world = comm_world(c);
	f->rank = comm_rank(c);
	f->nu = p->nunits;
	f->keep_gathered = p->parallel.shard == SHARD_GRAD_OP;
	f->op = COMM_AVG;
	int nu = f->nu;
	f->at = calloc((size_t)nu, sizeof *f->at);
	f->p_slot = malloc((size_t)nu * sizeof *f->p_slot);
	f->g_slot = malloc((size_t)nu * sizeof *f->g_slot);
	f->gather = calloc((size_t)nu, sizeof *f->gather);
	f->scatter = calloc((size_t)nu, sizeof *f->scatter);
	f->fresh = calloc((size_t)nu, sizeof *f->fresh);
	f->order = malloc((size_t)nu * sizeof *f->order);
	f->seg = calloc((size_t)p->nparams + 1, sizeof *f->seg);
	if (!f->at || !f->p_slot || !f->g_slot || !f->gather || !f->scatter || !f->fresh || !f->order || !f->seg) {
		snprintf(err, errlen, "out of memory for %d FSDP units", nu);
		return -1;
	}
	int64_t biggest = 0;
	for (int u = 0; u < nu; u++) {
		f->at[u] = f->total;
		f->total += p->units[u].shard;
		f->p_slot[u] = f->g_slot[u] = -1;
		f->order[u] = u;
		if (!is_root(f, u) && p->units[u].padded > biggest)
			biggest = p->units[u].padded;
	}
	qsort_r(f->order, (size_t)nu, sizeof *f->order, cmp_first, (void *)p);
	/* slots: the most units active at one layer, plus one for the prefetch */
	int most = 0;
	for (int i = 0; i < p->nnodes; i++) {
		int active = 0;
		for (int u = 0; u < nu; u++)
			active += !is_root(f, u) && p->units[u].padded && p->units[u].first_node <= i && i <= p->units[u].last_node;
		if (active > most)
			most = active;
	}
	f->nslots = f->keep_gathered ? nu : most + 1;
	f->slot_elems = biggest;
	f->slot_p = calloc((size_t)f->nslots + 1, sizeof *f->slot_p);
	f->slot_g = calloc((size_t)f->nslots + 1, sizeof *f->slot_g);
	f->slot_p_unit = malloc(((size_t)f->nslots + 1) * sizeof *f->slot_p_unit);
	f->slot_g_unit = malloc(((size_t)f->nslots + 1) * sizeof *f->slot_g_unit);
	if (!f->slot_p || !f->slot_g || !f->slot_p_unit || !f->slot_g_unit) {
		snprintf(err, errlen, "out of memory for FSDP buffers");
		return -1;
	}
	f->shard = alloc_floats(f, f->total);
	f->grad = alloc_floats(f, f->total);
	f->stage = p->fsdp_stage ? alloc_floats(f, f->total) : NULL; /* else results land in grad */
	f->optim = alloc_floats(f, f->total * p->train.optim.state_per_param);
	for (int s = 0; s < f->nslots; s++) {
		f->slot_p[s] = biggest ? alloc_floats(f, biggest) : NULL;
		f->slot_g[s] = biggest ? alloc_floats(f, biggest) : NULL;
		f->slot_p_unit[s] = f->slot_g_unit[s] = -1;
	}
	int root = 0;
	f->root_p = alloc_floats(f, p->units[root].padded);
	f->root_g = alloc_floats(f, p->units[root].padded);
	if (!f->shard || !f->grad || (p->fsdp_stage && !f->stage) || !f->optim || !f->root_p || !f->root_g) {
		snprintf(err, errlen, "out of memory for FSDP shards (%.1f MiB)", (double)f->peak_bytes / 1048576.0);
		return -1;
	}
	for (int s = 0; s < f->nslots; s++)
		if (biggest && (!f->slot_p[s] || !f->slot_g[s])) {
			snprintf(err, errlen, "out of memory for FSDP gather buffers");
			return -1;
		}
	/* trainable runs inside this rank's shard window of each unit */
	for (int k = 0; k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		if (!pr->trainable || pr->unit_offset < 0)
			continue;
		const struct unit *un = &p->units[pr->unit];
		int64_t lo = un->shard * f->rank, hi = lo + un->shard;
		int64_t a = pr->unit_offset > lo ? pr->unit_offset : lo, b = pr->unit_offset + pr->numel < hi ? pr->unit_offset + pr->numel : hi;
		if (a >= b)
			continue;
		int64_t at = f->at[pr->unit] + (a - lo);
		if (f->nseg && f->seg[f->nseg - 1].at + f->seg[f->nseg - 1].n == at)
			f->seg[f->nseg - 1].n += b - a;
		else
			f->seg[f->nseg++] = (struct fsdp_segment){ at, b - a };
	}
	e->phase_hook = fsdp_phase;
	e->phase_ctx = f;
	return 0;
}

/* This rank's slice [rank*shard, (rank+1)*shard) of a unit's flat buffer. */
static void take_shard(struct fsdp *f, int u, const float *full)
{
	const struct unit *un = &f->p->units[u];
	put(f, f->shard + f->at[u], full + un->shard * f->rank, (size_t)un->shard * 4);
}

int fsdp_init_params(struct fsdp *f, uint64_t seed)
{
	const struct plan *p = f->p;
	int64_t biggest = 0;
	for (int u = 0; u < f->nu; u++)
		if (p->units[u].padded > biggest)
			biggest = p->units[u].padded;
	for (int k = 0; k < p->nparams; k++) /* the buffers, staged here too */
		if (p->params[k].unit_offset < 0 && p->params[k].numel > biggest)
			biggest = p->params[k].numel;
	float *full = calloc((size_t)(biggest ? biggest : 1) + 2, 4);
	if (!full) {
		snprintf(f->err, sizeof f->err, "out of memory initialising the FSDP units");
		return -1;
	}
	/* units in turn, each unit's tensors in plan order: a unit whose
	 * tensors come before the last one's draws the model again from the seed */
	struct param_init pi;
	exec_param_init_begin(&pi, seed);
	for (int u = 0; u < f->nu; u++) {
		memset(full, 0, (size_t)p->units[u].padded * 4);
		for (int k = 0; k < p->nparams; k++)
			if (p->params[k].unit == u && p->params[k].unit_offset >= 0)
				exec_init_param(p, k, &pi, full + p->params[k].unit_offset);
		take_shard(f, u, full);
	}
	for (int k = 0; k < p->nparams; k++)
		if (p->params[k].unit_offset < 0) {
			exec_init_param(p, k, &pi, full);
			put(f, exec_param_ptr(f->e, k), full, (size_t)(p->params[k].dtype == DT_I64 ? 8 : p->params[k].numel * 4));
		}
	free(full);
	return f->failed ? -1 : 0;
}

/* A buffer for one whole unit (the largest), and the trainable element
 * count of the unsharded layout (the stride of its optimizer planes). */
static float *unit_buffer(const struct fsdp *f, int64_t *trainable)
{
	const struct plan *p = f->p;
	int64_t biggest = 1;
	for (int u = 0; u < f->nu; u++)
		if (p->units[u].padded > biggest)
			biggest = p->units[u].padded;
	*trainable = 0;
	for (int k = 0; k < p->nparams; k++)
		if (p->params[k].trainable)
			*trainable += p->params[k].numel;
	return calloc((size_t)biggest, 4);
}

int fsdp_load_full(struct fsdp *f, const float *params_full, const float *optim_full)
{
	const struct plan *p = f->p;
	int kopt = p->train.optim.state_per_param;
	int64_t trainable;
	float *full = unit_buffer(f, &trainable);
	if (!full) {
		snprintf(f->err, sizeof f->err, "out of memory taking the shards from the loaded state");
		return -1;
	}
	for (int plane = -1; plane < (optim_full ? kopt : 0); plane++) {
		for (int u = 0; u < f->nu; u++) {
			memset(full, 0, (size_t)p->units[u].padded * 4);
			for (int k = 0; k < p->nparams; k++) {
				const struct param *pr = &p->params[k];
				if (pr->unit != u || pr->unit_offset < 0 || (plane >= 0 && !pr->trainable))
					continue;
				const float *src = plane < 0 ? params_full + pr->offset : optim_full + (size_t)plane * (size_t)trainable + pr->offset;
				memcpy(full + pr->unit_offset, src, (size_t)pr->numel * 4);
			}
			const struct unit *un = &p->units[u];
			float *dst = plane < 0 ? f->shard : f->optim + (size_t)plane * (size_t)f->total;
			put(f, dst + f->at[u], full + un->shard * f->rank, (size_t)un->shard * 4);
		}
	}
	free(full);
	for (int k = 0; k < p->nparams; k++)
		if (p->params[k].unit_offset < 0)
			put(f, exec_param_ptr(f->e, k), params_full + p->params[k].offset, (size_t)(p->params[k].dtype == DT_I64 ? 8 : p->params[k].numel * 4));
	return f->failed ? -1 : 0;
}

int fsdp_gather_full(struct fsdp *f, float *params_full, float *optim_full, bool with_optim)
{
	const struct plan *p = f->p;
	int kopt = p->train.optim.state_per_param;
	int64_t trainable;
	float *full = unit_buffer(f, &trainable);
	/* the collective's buffer: full itself on the host, else the device's */
	int64_t biggest = 1;
	for (int u = 0; u < f->nu; u++)
		biggest = p->units[u].padded > biggest ? p->units[u].padded : biggest;
	float *landing = f->dev ? f->dev->alloc(biggest * 4) : full;
	if (!full || !landing) {
		free(full);
		snprintf(f->err, sizeof f->err, "out of memory gathering the state dict");
		return -1;
	}
	for (int plane = -1; plane < (with_optim ? kopt : 0); plane++) {
		for (int u = 0; u < f->nu; u++) {
			const struct unit *un = &p->units[u];
			if (!un->padded)
				continue;
			const float *src = plane < 0 ? f->shard : f->optim + (size_t)plane * (size_t)f->total;
			join_streams(f);
			struct comm_work *w = comm_all_gather(f->c, src + f->at[u], landing, un->shard);
			wait_work(f, &w);
			if (f->dev && landing != full)
				get(f, full, landing, (size_t)un->padded * 4);
			if (f->failed) {
				free(full);
				if (landing != full)
					f->dev->free(landing);
				return -1;
			}
			if (f->rank != 0)
				continue;
			for (int k = 0; k < p->nparams; k++) {
				const struct param *pr = &p->params[k];
				if (pr->unit != u || pr->unit_offset < 0 || (plane >= 0 && !pr->trainable))
					continue;
				float *dst = plane < 0 ? params_full + pr->offset : optim_full + (size_t)plane * (size_t)trainable + pr->offset;
				memcpy(dst, full + pr->unit_offset, (size_t)pr->numel * 4);
			}
		}
	}
	if (landing != full)
		f->dev->free(landing);
	free(full);
	if (f->rank == 0)
		for (int k = 0; k < p->nparams; k++)
			if (p->params[k].unit_offset < 0)
				get(f, params_full + p->params[k].offset, exec_param_ptr(f->e, k),
				    (size_t)(p->params[k].dtype == DT_I64 ? 8 : p->params[k].numel * 4));
	return f->failed ? -1 : 0;
}

/* ---- gathering ---- */

static float *param_buffer(struct fsdp *f, int u)
{
	if (f->p_slot[u] == -2)
		return f->root_p;
	return f->p_slot[u] >= 0 ? f->slot_p[f->p_slot[u]] : NULL;
}

/* Start unit u's all-gather if it has no buffer yet; false when no slot is free. */
static bool start_gather(struct fsdp *f, int u)
{
	if (f->p_slot[u] != -1 || !f->p->units[u].padded)
		return true;
	if (is_root(f, u)) {
		f->p_slot[u] = -2;
	} else {
		int s = 0;
		while (s < f->nslots && f->slot_p_unit[s] >= 0)
			s++;
		if (s == f->nslots)
			return false;
		f->slot_p_unit[s] = u;
		f->p_slot[u] = s;
	}
	join_streams(f);
	f->gather[u] = comm_all_gather(f->c, f->shard + f->at[u], param_buffer(f, u), f->p->units[u].shard);
	return true;
}

static void need_gathered(struct fsdp *f, int u)
{
	if (!f->p->units[u].padded)
		return;
	if (!start_gather(f, u)) {
		snprintf(f->err, sizeof f->err, "internal: no FSDP gather slot free for unit %d", u);
		f->failed = true;
		f->e->stop = true;
		return;
	}
	wait_work(f, &f->gather[u]);
	f->e->unit_param[u] = param_buffer(f, u);
}

static void release(struct fsdp *f, int u)
{
	wait_work(f, &f->gather[u]);
	if (f->p_slot[u] >= 0)
		f->slot_p_unit[f->p_slot[u]] = -1;
	f->p_slot[u] = -1;
	f->e->unit_param[u] = NULL;
}

/* The unit after u in forward order (dir 1) or before it (dir -1). */
static int neighbour(struct fsdp *f, int u, int dir)
{
	for (int i = 0; i < f->nu; i++)
		if (f->order[i] == u) {
			int j = i + dir;
			while (j >= 0 && j < f->nu && is_root(f, f->order[j]))
				j += dir;
			return j >= 0 && j < f->nu ? f->order[j] : -1;
		}
	return -1;
}

/* ---- gradients ---- */

static float *grad_buffer(struct fsdp *f, int u)
{
	if (f->g_slot[u] == -2)
		return f->root_g;
	return f->g_slot[u] >= 0 ? f->slot_g[f->g_slot[u]] : NULL;
}

static void finish_scatter(struct fsdp *f, int u)
{
	if (!f->scatter[u])
		return;
	wait_work(f, &f->scatter[u]);
	const struct unit *un = &f->p->units[u];
	/* without a stage, the step's one backward pass wrote the shard itself */
	if (f->stage)
		(f->fresh[u] ? copy : add)(f, f->grad + f->at[u], f->stage + f->at[u], un->shard);
	f->fresh[u] = false;
	if (f->g_slot[u] >= 0)
		f->slot_g_unit[f->g_slot[u]] = -1;
	f->g_slot[u] = -1;
	f->e->unit_grad[u] = NULL;
}

static void need_grad_buffer(struct fsdp *f, int u)
{
	if (is_root(f, u)) {
		f->g_slot[u] = -2;
	} else {
		int s = 0;
		while (s < f->nslots && f->slot_g_unit[s] >= 0)
			s++;
		if (s == f->nslots) {
			/* every slot waits on a reduce-scatter: finish the oldest */
			for (int v = 0; v < f->nu && s == f->nslots; v++)
				if (f->scatter[v]) {
					finish_scatter(f, v);
					s = 0;
					while (s < f->nslots && f->slot_g_unit[s] >= 0)
						s++;
				}
		}
		if (s == f->nslots) {
			snprintf(f->err, sizeof f->err, "internal: no FSDP gradient slot free for unit %d", u);
			f->failed = true;
			f->e->stop = true;
			return;
		}
		f->slot_g_unit[s] = u;
		f->g_slot[u] = s;
	}
	zero(f, grad_buffer(f, u), f->p->units[u].padded);
	if (f->dev && f->dev->fork) /* the layers that fill it may run on another device */
		f->dev->fork(f->dev->ctx);
	f->e->unit_grad[u] = grad_buffer(f, u);
}

void fsdp_phase(void *ctx, int node, int phase)
{
	struct fsdp *f = ctx;
	const struct plan *p = f->p;
	if (f->failed)
		return;
	for (int i = 0; i < f->nu; i++) {
		int u = phase == EXEC_BEFORE_FWD || phase == EXEC_AFTER_BWD ? f->order[i] : f->order[f->nu - 1 - i];
		const struct unit *un = &p->units[u];
		if (!un->padded)
			continue;
		switch (phase) {
		case EXEC_BEFORE_FWD:
			if (un->first_node == node) {
				need_gathered(f, u);
				int next = neighbour(f, u, 1);
				if (next >= 0)
					start_gather(f, next); /* prefetch; skipped when no slot is free */
			}
			break;
		case EXEC_AFTER_FWD:
			if (un->last_node == node && !is_root(f, u) && !f->keep_gathered)
				release(f, u);
			break;
		case EXEC_BEFORE_BWD:
			if (un->last_node == node) {
				need_gathered(f, u);
				need_grad_buffer(f, u);
				int prev = neighbour(f, u, -1);
				if (prev >= 0)
					start_gather(f, prev);
			}
			break;
		case EXEC_AFTER_BWD:
			if (un->first_node == node) {
				join_streams(f);
				/* without a stage, a step's one backward pass (the plan's
				 * fsdp_stage says there is one) */
				assert(f->stage || f->fresh[u]);
				float *to = f->stage ? f->stage + f->at[u] : f->grad + f->at[u];
				f->scatter[u] = comm_reduce_scatter(f->c, grad_buffer(f, u), to, un->shard, f->op);
				release(f, u);
			}
			break;
		}
	}
}

void fsdp_release_all(struct fsdp *f)
{
	for (int u = 0; u < f->nu; u++)
		if (f->p_slot[u] != -1)
			release(f, u);
}

void fsdp_begin_step(struct fsdp *f)
{
	for (int u = 0; u < f->nu; u++)
		f->fresh[u] = true;
	zero(f, f->grad, f->total);
}

int fsdp_finish_micro(struct fsdp *f, char *err, size_t errlen)
{
	for (int u = 0; u < f->nu; u++) {
		finish_scatter(f, u);
		if (f->p_slot[u] != -1)
			release(f, u);
	}
	if (f->failed) {
		snprintf(err, errlen, "%s", f->err);
		return -1;
	}
	return 0;
}

void fsdp_optim_step(struct fsdp *f, const struct optim_cfg *oc, int64_t step, double lr)
{
	for (int i = 0; i < f->nseg; i++) {
		struct optim_state_view sv = { f->optim + f->seg[i].at, f->total };
		optim_step(oc, sv, f->shard + f->seg[i].at, f->grad + f->seg[i].at, f->seg[i].n, step, lr);
	}
}

double fsdp_grad_sumsq(struct fsdp *f)
{
	return optim_sumsq(f->grad, f->total);
}

void fsdp_scale_grads(struct fsdp *f, float coef)
{
	optim_scale(f->grad, f->total, coef);
}

void fsdp_free(struct fsdp *f)
{
	for (int u = 0; f->gather && u < f->nu; u++) {
		wait_work(f, &f->gather[u]);
		wait_work(f, &f->scatter[u]);
	}
	for (int s = 0; f->slot_p && s < f->nslots; s++) {
		free_floats(f, f->slot_p[s]);
		free_floats(f, f->slot_g[s]);
	}
	free(f->slot_p);
	free(f->slot_g);
	free(f->slot_p_unit);
	free(f->slot_g_unit);
	free_floats(f, f->root_p);
	free_floats(f, f->root_g);
	free_floats(f, f->shard);
	free_floats(f, f->grad);
	free_floats(f, f->stage);
	free_floats(f, f->optim);
	free(f->at);
	free(f->p_slot);
	free(f->g_slot);
	free(f->gather);
	free(f->scatter);
	free(f->fresh);
	free(f->order);
	free(f->seg);
	memset(f, 0, sizeof *f);
}
