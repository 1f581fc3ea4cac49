/* memplan.c: the static memory plan of one rank.
 * Parameters, gradients and optimizer state get element offsets so that a
 * flat optimizer step over a region updates each parameter with its own
 * gradient and state: trainable parameters are laid out in reverse
 * execution order, which also makes every DDP bucket (gradients in the
 * order backward produces them) one contiguous range.  Activations get
 * byte offsets from a liveness analysis over the training step (forward
 * at time i, backward of layer i at time 2N-1-i) and the evaluation
 * forward, packed first-fit by decreasing size; a buffer's lifetime ends
 * when the last step that reads it is done.  The CPU backend's convolutions
 * share one workspace per device, as large as the largest needs.  The plan
 * is per device.
 */
#include <stdlib.h>
#include <string.h>

#include "compiler/compile.h"
#include "compiler/compile_impl.h"
#include "compiler/conv_chunk.h"
#include "compiler/emb_sort.h"
#include "compiler/ops.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

struct buf {
	int64_t size, start, end, off;
	int64_t *dst; /* where the chosen offset goes */
};

static int by_size(const void *x, const void *y)
{
	const struct buf *a = x, *b = y;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

static int by_off(const void *x, const void *y)
{
	const struct buf *const *a = x, *const *b = y;
	return (*a)->off < (*b)->off ? -1 : (*a)->off > (*b)->off;
}

enum { ALIGN = 64 };

static int by_start(const void *x, const void *y)
{
	const struct buf *a = x, *b = y;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->size > b->size ? -1 : a->size < b->size;
}

/* Many buffers: allocate in time order, first fit among the live ones,
 * which costs the number of live buffers per allocation, not all of them. */
static int64_t pack_in_time(struct arena *a, struct buf *bufs, int n)
{
	qsort(bufs, (size_t)n, sizeof *bufs, by_start);
	struct buf **live = arena_array(a, (size_t)n + 1, sizeof *live); /* sorted by offset */
	int nl = 0;
	int64_t peak = 0;
	for (int i = 0; i < n; i++) {
		int k = 0;
		for (int j = 0; j < nl; j++)
			if (live[j]->end >= bufs[i].start)
				live[k++] = live[j];
		nl = k;
		int64_t off = 0;
		int at = 0;
		while (at < nl && live[at]->off < off + bufs[i].size) {
			if (live[at]->off + live[at]->size > off)
				off = live[at]->off + live[at]->size;
			at++;
		}
		bufs[i].off = off;
		memmove(live + at + 1, live + at, (size_t)(nl - at) * sizeof *live);
		live[at] = &bufs[i];
		nl++;
		if (off + bufs[i].size > peak)
			peak = off + bufs[i].size;
	}
	for (int i = 0; i < n; i++)
		*bufs[i].dst = bufs[i].off;
	return peak;
}

/* First-fit packing by decreasing size (tighter), or in time order when
 * there are too many buffers for the quadratic search; returns the peak. */
static int64_t pack(struct arena *a, struct buf *bufs, int n)
{
	if (n > 2048)
		return pack_in_time(a, bufs, n);
	qsort(bufs, (size_t)n, sizeof *bufs, by_size);
	struct buf **live = arena_array(a, (size_t)n + 1, sizeof *live);
	int64_t peak = 0;
	for (int i = 0; i < n; i++) {
		int nl = 0;
		for (int j = 0; j < i; j++)
			if (bufs[j].start <= bufs[i].end && bufs[i].start <= bufs[j].end)
				live[nl++] = &bufs[j];
		qsort(live, (size_t)nl, sizeof *live, by_off);
		int64_t off = 0;
		for (int j = 0; j < nl; j++) {
			if (live[j]->off >= off + bufs[i].size)
				break;
			int64_t e = live[j]->off + live[j]->size;
			if (e > off)
				off = e;
		}
		bufs[i].off = off;
		if (off + bufs[i].size > peak)
			peak = off + bufs[i].size;
	}
	for (int i = 0; i < n; i++)
		*bufs[i].dst = bufs[i].off;
	return peak;
}

static int64_t round_up(int64_t x)
{
	return (x + ALIGN - 1) / ALIGN * ALIGN;
}

/* ---- the CPU convolutions' workspace (tag: CONV_WORKSPACE) ----
 * runtime/kern_conv2d.c lays a convolution's workspace out as oneDNN's
 * staged weights, the weight gradient summed over chunks and its plain
 * copy, the im2col column buffer where backward-data runs by im2col, then
 * one slot per chunk of images in flight (one per thread, at most 16): the
 * chunk's input and output staged in oneDNN's layout, oneDNN's scratchpad
 * and the chunk's weight gradient.  oneDNN picks its layouts and
 * scratchpad at run time; these are their largest for oneDNN 2.6: channels
 * padded to 16 (nChw16c, OIhw16i16o); for Winograd F(4x4, 3x3) the
 * transformed weights twice, a chunk's transformed input and output tiles
 * and four 2 MiB alignments; for direct a quarter of the staged data.  A
 * kernel given less runs fewer chunks at once, so the backend allocates
 * exactly this, and a run touches the slots of its threads only. */
enum { WINO_ALIGN = 2 << 20 };

struct convwork {
	enum work_path path;
	int64_t shared, slot; /* bytes: shared + slots * slot */
	int slots;
};

static int64_t work_total(const struct convwork *w)
{
	return w->shared + w->slots * w->slot;
}

static int64_t up16(int64_t c)
{
	return (c + 15) / 16 * 16;
}

/* Bytes of a product of shape factors, rounded up to ALIGN; absurd shapes
 * saturate at 2^50 (a PiB) rather than overflow. */
static int64_t bytes_of(double v)
{
	return v > 0x1p50 ? (int64_t)1 << 50 : round_up((int64_t)v);
}

/* Convolution n (input in) at batch b by one of oneDNN's algorithms. */
static struct convwork onednn_work(const struct node *n, const struct shape *in, int64_t b, bool wino)
{
	int64_t ci, h, w, co, oh, ow;
	shape_chw(in->d, in->rank, &ci, &h, &w);
	shape_chw(n->out.d, n->out.rank, &co, &oh, &ow);
	int64_t g = n->a.conv.groups, taps = n->a.conv.kh * n->a.conv.kw;
	int64_t chunk = conv_chunk(b, (ci * h * w + co * oh * ow) * 4, wino);
	int64_t wt = bytes_of(4.0 * up16(co / g) * up16(ci / g) * g * taps); /* staged weights, a weight gradient */
	int64_t x = bytes_of(4.0 * chunk * up16(ci) * h * w), y = bytes_of(4.0 * chunk * up16(co) * oh * ow), pad;
	if (wino) {
		double tiles = (double)chunk * ((oh + 3) / 4) * ((ow + 3) / 4);
		pad = bytes_of(4.0 * (72.0 * ci * co + 36.0 * tiles * (ci + co) + co) + 4.0 * WINO_ALIGN);
	} else {
		pad = round_up((x + y + wt) / 4);
	}
	return (struct convwork){ wino ? WORK_WINOGRAD : WORK_DIRECT, 2 * wt + bytes_of(4.0 * co * (ci / g) * taps),
				  x + y + pad + wt, conv_slots(b, chunk) };
}

/* The most a CPU path needs for convolution n at batch b: im2col's column
 * buffer, oneDNN's direct algorithm (with the column buffer where AUTO
 * runs backward-data by im2col, fewer than 16 input channels a group), and
 * Winograd where oneDNN has it. */
static struct convwork conv_work(const struct plan *p, const struct node *n, int64_t b)
{
	const struct shape *in = &p->nodes[n->in].out;
	int64_t ci = in->d[0], co = n->a.conv.cout, g = n->a.conv.groups;
	int64_t col = bytes_of(4.0 * ci * n->a.conv.kh * n->a.conv.kw * shape_numel(&n->out) / co);
	struct convwork best = { WORK_IM2COL, col, 0, 0 }, direct = onednn_work(n, in, b, false);
	if (ci / g < 16)
		direct.shared += col;
	if (work_total(&direct) > work_total(&best))
		best = direct;
	if (n->a.conv.kh == 3 && n->a.conv.kw == 3 && n->a.conv.sh == 1 && n->a.conv.sw == 1 && n->a.conv.dh == 1 &&
	    n->a.conv.dw == 1 && g == 1 && ci % 16 == 0 && co % 16 == 0) {
		struct convwork wino = onednn_work(n, in, b, true);
		if (work_total(&wino) >= work_total(&best))
			best = wino;
	}
	return best;
}

/* REG_WORK of one device: its largest convolution at the training batch
 * and at an evaluation chunk of at most that.  Other batch sizes (an epoch's last batch) run in
 * it with fewer chunks at once where they would need more. */
static void plan_work(struct plan *p, int dev, int64_t batch, int64_t eval)
{
	struct devplan *dp = &p->dev[dev];
	dp->work_node = -1;
	dp->work_path = WORK_NONE;
	dp->work_batch = dp->work_shared = dp->work_slot = 0;
	dp->work_slots = 0;
	dp->bytes[REG_WORK] = 0;
	if (p->gpu) /* cuDNN chooses its workspace at run time */
		return;
	int64_t batches[2] = { batch, eval };
	for (int i = 0; i < p->nnodes; i++) {
		const struct node *n = &p->nodes[i];
		if (n->op != OP_CONV2D || n->device != dev)
			continue;
		for (int k = 0; k < 2; k++) {
			struct convwork w = conv_work(p, n, batches[k]);
			if (work_total(&w) <= dp->bytes[REG_WORK])
				continue;
			dp->bytes[REG_WORK] = work_total(&w);
			dp->work_node = i;
			dp->work_path = w.path;
			dp->work_batch = batches[k];
			dp->work_shared = w.shared;
			dp->work_slot = w.slot;
			dp->work_slots = w.slots;
		}
	}
}

static int root_of(const struct plan *p, int i)
{
	while (p->nodes[i].alias >= 0)
		i = p->nodes[i].alias;
	return i;
}

static int64_t elem_bytes(const struct node *n)
{
	return n->dtype == DT_I64 ? 8 : 4;
}

/* Activations of one device: training and evaluation. */
static void plan_acts(struct arena *a, struct plan *p, int dev, int64_t batch, int64_t test_batch)
{
	int N = p->nnodes;
	int64_t T = 2 * (int64_t)N - 1;
	int64_t *out_end = arena_array(a, (size_t)N, sizeof *out_end);
	int64_t *eval_end = arena_array(a, (size_t)N, sizeof *eval_end);
	int64_t *grad_start = arena_array(a, (size_t)N, sizeof *grad_start);
	for (int i = 0; i < N; i++) {
		out_end[i] = i;
		eval_end[i] = i;
		grad_start[i] = -1;
	}
	for (int c = 0; c < N; c++) {
		const struct node *n = &p->nodes[c];
		int srcs[2] = { n->in, n->in2 };
		for (int s = 0; s < 2; s++) {
			if (srcs[s] < 0)
				continue;
			int r = root_of(p, srcs[s]);
			int64_t need = op_needs_input(n) ? T - c : c;
			if (n->alias >= 0)
				need = out_end[c]; /* a view lives as long as its root */
			if (need > out_end[r])
				out_end[r] = need;
			if (c > eval_end[r])
				eval_end[r] = c;
			/* gradient of src is first written by the backward of its latest consumer */
			int64_t gs = T - c;
			if (grad_start[r] < 0 || gs < grad_start[r])
				grad_start[r] = gs; /* a view's gradient is its root's */
		}
		if (op_needs_output(n) && T - c > out_end[root_of(p, c)])
			out_end[root_of(p, c)] = T - c;
	}
	/* the loss reads the model's output and writes its gradient */
	int last = N - 1;
	if (N > out_end[root_of(p, last)])
		out_end[root_of(p, last)] = N;
	grad_start[last] = N - 1;
	/* views: propagate lifetimes to the root (views come after their roots) */
	for (int i = N - 1; i >= 0; i--) {
		int r = root_of(p, i);
		if (r != i && out_end[i] > out_end[r])
			out_end[r] = out_end[i];
		if (r != i && eval_end[i] > eval_end[r])
			eval_end[r] = eval_end[i];
	}
	struct buf *tb = arena_array(a, (size_t)N * 3 + 1, sizeof *tb), *eb = arena_array(a, (size_t)N + 1, sizeof *eb);
	int nt = 0, ne = 0;
	for (int i = 0; i < N; i++) {
		struct node *n = &p->nodes[i];
		struct nodemem *m = &p->mem[i];
		if (n->device != dev)
			continue;
		int64_t per = shape_numel(&n->out) * elem_bytes(n);
		m->out_bytes = per * batch;
		if (n->alias < 0) {
			tb[nt++] = (struct buf){ round_up(per * batch), i, out_end[i], 0, &m->out_off };
			eb[ne++] = (struct buf){ round_up(per * test_batch), i, eval_end[i], 0, &m->eval_off };
		}
		if (i > 0 && n->alias < 0 && n->dtype == DT_F32) {
			m->grad_bytes = 4 * shape_numel(&n->out) * batch;
			int64_t gs = grad_start[i] < 0 ? T - i : grad_start[i];
			tb[nt++] = (struct buf){ round_up(m->grad_bytes), gs, T - i, 0, &m->grad_off };
		}
		m->save_bytes = op_saved_bytes(n, batch);
		if (m->save_bytes)
			tb[nt++] = (struct buf){ round_up(m->save_bytes), i, T - i, 0, &m->save_off };
	}
	p->dev[dev].act_train = pack(a, tb, nt);
	p->dev[dev].act_eval = pack(a, eb, ne);
	/* views share their root's buffers */
	for (int i = 0; i < N; i++) {
		if (p->nodes[i].alias < 0 || p->nodes[i].device != dev)
			continue;
		int r = root_of(p, i);
		p->mem[i].out_off = p->mem[r].out_off;
		p->mem[i].eval_off = p->mem[r].eval_off;
		p->mem[i].grad_bytes = p->mem[r].grad_bytes;
		p->mem[i].grad_off = p->mem[r].grad_off;
	}
	int64_t acts = p->dev[dev].act_train > p->dev[dev].act_eval ? p->dev[dev].act_train : p->dev[dev].act_eval;
	/* a scratch buffer after the packed ones: a gradient's second producer
	 * writes here before summing, evaluation puts statistics it does not
	 * keep (pool indices, norm statistics) here, and the GPU's embedding
	 * backward sorts its tokens here (tag: EMBEDDING_SORT).  The sort is
	 * planned for CPUs too, so that one plan serves both backends (as
	 * tests/gpu_ops.c runs it); it is no larger than the embedding's own
	 * output gradient unless the embedding's dim is under 4 */
	int64_t scratch = 0;
	for (int i = 0; i < N; i++) {
		const struct node *n = &p->nodes[i];
		if (n->device != dev)
			continue;
		if (p->mem[i].grad_bytes > scratch)
			scratch = p->mem[i].grad_bytes;
		int64_t ev = op_saved_bytes(n, test_batch);
		if (n->op != OP_DROPOUT && ev > scratch)
			scratch = ev;
		int64_t sort = n->op == OP_EMBEDDING ? emb_sort_bytes(shape_numel(&p->nodes[n->in].out) * batch) : 0;
		if (sort > scratch)
			scratch = sort;
	}
	p->dev[dev].scratch_off = round_up(acts);
	p->dev[dev].scratch_bytes = round_up(scratch);
	p->dev[dev].bytes[REG_ACTS] = round_up(acts) + round_up(scratch);
}

static bool is_buffer(const struct param *pr)
{
	return pr->role == ROLE_RUNNING_MEAN || pr->role == ROLE_RUNNING_VAR || pr->role == ROLE_NUM_BATCHES;
}

static int64_t slots(const struct param *pr)
{
	return pr->dtype == DT_I64 ? 2 * (pr->numel ? pr->numel : 1) : pr->numel;
}

/* Activations, scratch and convolution workspace of one device, training
 * at batch and evaluating at eval, the workspace sized at batch and small
 * (the evaluation chunk when it is no larger): REG_ACTS holds one copy of
 * the activations per micro-batch a pipeline keeps in flight. */
static void plan_dev_acts(struct arena *a, struct plan *p, int dev, int64_t batch, int64_t eval, int64_t small)
{
	struct devplan *dp = &p->dev[dev];
	plan_acts(a, p, dev, batch, eval);
	plan_work(p, dev, batch, small);
	dp->act_copy = dp->bytes[REG_ACTS];
	if (p->parallel.microbatches > 1 || p->ndevices > 1)
		dp->bytes[REG_ACTS] *= p->parallel.microbatches;
}

/* Whether evaluation at eval fits every device's activations and scratch
 * as planned (acts[dev] bytes) and leaves each convolution room for one
 * chunk of images in its workspace: the kernels run as many chunks at once
 * as it holds (runtime/kern_conv2d.c). */
static bool eval_fits(struct arena *a, struct plan *p, int64_t batch, int64_t eval, const int64_t *acts)
{
	for (int dev = 0; dev < p->ndevices; dev++) {
		plan_acts(a, p, dev, batch, eval);
		if (p->dev[dev].bytes[REG_ACTS] > acts[dev])
			return false;
		for (int i = 0; i < p->nnodes && !p->gpu; i++) {
			const struct node *n = &p->nodes[i];
			if (n->op != OP_CONV2D || n->device != dev)
				continue;
			struct convwork w = conv_work(p, n, eval);
			if (w.shared + w.slot > p->dev[dev].bytes[REG_WORK])
				return false;
		}
	}
	return true;
}

/* Evaluation may take up to this much for its activations and workspace
 * on a device where training takes less: a small training batch would
 * otherwise evaluate a few samples at a time (the seed CNN at batch 2: 2
 * a chunk, 2.5 s for the 10,000 test images against 1 s at 112). */
enum { EVAL_ROOM = 32 << 20 };

/* Whether evaluation at eval, the activations and workspace sized for it
 * as for training at batch, takes at most EVAL_ROOM on every device:
 * every copy of the activations a pipeline keeps counts, though
 * evaluation uses the first.  (limit: unused; eval_fits's shape.) */
static bool eval_room_fits(struct arena *a, struct plan *p, int64_t batch, int64_t eval, const int64_t *limit)
{
	(void)limit;
	for (int dev = 0; dev < p->ndevices; dev++) {
		plan_dev_acts(a, p, dev, batch, eval, eval);
		if (p->dev[dev].bytes[REG_ACTS] + p->dev[dev].bytes[REG_WORK] > EVAL_ROOM)
			return false;
	}
	return true;
}

/* The largest chunk in [lo, hi] that fits(limit) (lo if none): the
 * largest that fits, then a multiple of 16 above 32 below test_batch, as
 * the convolutions cut chunks into pieces of up to 16 images, as large as
 * divide them, then down past any that does not fit. */
static int64_t largest_chunk(struct arena *a, struct plan *p, int64_t batch, int64_t lo, int64_t hi,
			     bool (*fits)(struct arena *, struct plan *, int64_t, int64_t, const int64_t *), const int64_t *limit)
{
	if (hi <= lo)
		return lo;
	int64_t ok = lo;
	while (ok < hi) {
		int64_t mid = ok + (hi - ok + 1) / 2;
		if (fits(a, p, batch, mid, limit))
			ok = mid;
		else
			hi = mid - 1;
	}
	if (ok < p->train.test_batch && ok >= 32)
		ok -= ok % 16;
	while (ok > lo && !fits(a, p, batch, ok, limit))
		ok--;
	return ok;
}

/* Evaluation's chunk: test_batch where the memory planned for training
 * at the per-rank batch holds it, else the largest chunk that fits, and
 * at least the smaller of the two batches.  Evaluation keeps nothing for a
 * backward, so its chunk is often several times the training batch: fewer,
 * larger forwards, and under FSDP fewer gathers of each unit.  Every
 * region stays as large as with chunks of at most the training batch,
 * except where training's activations and workspace take less than
 * EVAL_ROOM and there is a test set: evaluation may grow them up to it. */
static void plan_eval_batch(struct arena *a, struct plan *p, int64_t batch)
{
	int64_t lo = p->train.test_batch < batch ? p->train.test_batch : batch, hi = p->train.test_batch;
	int64_t acts[PLAN_MAX_DEVICES];
	bool small = true;
	p->act_batch = batch;
	p->eval_batch = lo;
	for (int dev = 0; dev < p->ndevices; dev++) {
		plan_dev_acts(a, p, dev, batch, lo, lo);
		acts[dev] = p->dev[dev].act_copy;
		small &= p->dev[dev].bytes[REG_ACTS] + p->dev[dev].bytes[REG_WORK] < EVAL_ROOM;
		/* each sample takes 4 bytes at least: no chunk beyond that fits */
		if (hi > acts[dev] / 4)
			hi = acts[dev] / 4;
	}
	/* the activations grow with the chunk: the largest that fits them
	 * and whose convolution chunks the workspace can take */
	int64_t ok = largest_chunk(a, p, batch, lo, hi, eval_fits, acts);
	/* training's memory is small: evaluation, where there is a test set,
	 * may take up to EVAL_ROOM (each sample 4 bytes at least) */
	int64_t top = p->train.test_batch < EVAL_ROOM / 4 ? p->train.test_batch : EVAL_ROOM / 4;
	int64_t grown = small && p->test_data.kind != DATA_NONE ? largest_chunk(a, p, batch, ok, top, eval_room_fits, NULL) : ok;
	p->eval_batch = grown;
	for (int dev = 0; dev < p->ndevices; dev++)
		plan_dev_acts(a, p, dev, batch, grown, grown > ok ? grown : lo);
}

bool memplan_build(struct arena *a, struct diag *d, struct plan *p)
{
	(void)d;
	int64_t world = p->world > 0 ? p->world : 1;
	int64_t batch, share = compile_rank_batch(&p->train, (int)world, &batch);
	/* backward passes a step: global_batch's micro-batches, each in
	 * microbatches pipeline chunks (runtime/train.c's train_batches) */
	int64_t backwards = (share + batch - 1) / batch;
	if (p->parallel.microbatches > 1) {
		batch = (batch + p->parallel.microbatches - 1) / p->parallel.microbatches;
		backwards *= p->parallel.microbatches;
	}
	p->mem = arena_array(a, (size_t)p->nnodes, sizeof *p->mem);
	int k_opt = p->train.optim.state_per_param;
	bool sharded = p->parallel.mode == PAR_FSDP && p->parallel.shard != SHARD_NONE;
	p->fsdp_stage = sharded && backwards > 1;
	int64_t at = 0;
	for (int dev = 0; dev < p->ndevices; dev++) {
		/* trainable parameters in reverse execution order, device by device */
		for (int k = p->nparams - 1; k >= 0; k--) {
			struct param *pr = &p->params[k];
			if (pr->device == dev && pr->trainable) {
				pr->offset = at;
				at += pr->numel;
			}
		}
	}
	for (int dev = 0; dev < p->ndevices; dev++) {
		for (int k = 0; k < p->nparams; k++) {
			struct param *pr = &p->params[k];
			if (pr->device == dev && !pr->trainable) {
				at = (at + 1) / 2 * 2;
				pr->offset = at;
				at += slots(pr);
			}
		}
	}
	p->unsharded_elems = at;
	for (int dev = 0; dev < p->ndevices; dev++) {
		struct devplan *dp = &p->dev[dev];
		/* the unsharded layout always exists: a single process runs it, and
		 * FSDP gathers each unit into it.  Offsets are global over the
		 * rank's devices (trainables of device 0, of device 1, ..., then
		 * the rest device by device), so parameters, gradients and
		 * optimizer planes share them and a bucket is one range */
		{
			int64_t trainable = 0, other = 0;
			for (int k = p->nparams - 1; k >= 0; k--) {
				const struct param *pr = &p->params[k];
				if (pr->device == dev && pr->trainable)
					trainable += pr->numel;
			}
			for (int k = 0; k < p->nparams; k++) {
				const struct param *pr = &p->params[k];
				if (pr->device == dev && !pr->trainable)
					other = (other + 1) / 2 * 2 + slots(pr);
			}
			dp->bytes[REG_PARAMS] = (trainable + other) * 4;
			dp->bytes[REG_GRADS] = trainable * 4;
			dp->bytes[REG_OPTIM] = trainable * 4 * k_opt;
			dp->bytes[REG_COMM] = 0;
		}
		if (sharded) {
			int64_t shards = 0, buffers = 0, trainable_shards = 0;
			for (int u = 0; u < p->nunits; u++) {
				const struct unit *un = &p->units[u];
				if (un->device != dev)
					continue;
				shards += un->shard;
				bool any_trainable = false;
				for (int k = 0; k < p->nparams; k++)
					any_trainable |= p->params[k].unit == u && p->params[k].trainable;
				if (any_trainable)
					trainable_shards += un->shard;
			}
			for (int k = 0; k < p->nparams; k++)
				if (p->params[k].device == dev && is_buffer(&p->params[k]))
					buffers += slots(&p->params[k]);
			dp->bytes[REG_PARAMS] = (shards + buffers) * 4;
			dp->bytes[REG_GRADS] = trainable_shards * 4;
			dp->bytes[REG_OPTIM] = trainable_shards * 4 * k_opt;
			/* the runtime's buffers (fsdp.c): the root unit's gathered parameters
			 * and unsharded gradients; a pool of slots, each as large as the
			 * largest other unit, for its parameters and for its gradients, as
			 * many as units are active at one layer plus one for the prefetch
			 * (every unit under SHARD_GRAD_OP); the reduce-scatter results
			 * where a step has several backward passes to add up (else
			 * they land in the gradient shards) */
			int64_t root = 0, biggest = 0;
			int most = 0;
			for (int u = 0; u < p->nunits; u++) {
				const struct unit *un = &p->units[u];
				if (un->device != dev)
					continue;
				if (un->parent < 0)
					root += un->padded;
				else if (un->padded > biggest)
					biggest = un->padded;
			}
			for (int i = 0; i < p->nnodes; i++) {
				int active = 0;
				for (int u = 0; u < p->nunits; u++) {
					const struct unit *un = &p->units[u];
					active += un->device == dev && un->parent >= 0 && un->padded && un->first_node <= i && i <= un->last_node;
				}
				if (active > most)
					most = active;
			}
			int64_t slots = p->parallel.shard == SHARD_GRAD_OP ? p->nunits : most + 1;
			dp->bytes[REG_COMM] = (2 * root + 2 * slots * biggest + (p->fsdp_stage ? shards : 0)) * 4;
		}
	}
	plan_eval_batch(a, p, batch);
	/* DDP buckets over each device's gradient region, in backward order */
	if (p->parallel.mode == PAR_DDP || (p->parallel.mode == PAR_FSDP && p->parallel.shard == SHARD_NONE)) {
		int64_t cap = (int64_t)(p->parallel.bucket_mb * 1024 * 1024 / 4);
		if (cap < 1)
			cap = 1;
		p->buckets = arena_array(a, (size_t)p->nparams + 1, sizeof *p->buckets);
		for (int dev = 0; dev < p->ndevices; dev++) {
			struct bucket *cur = NULL;
			int first_of_dev = p->nbuckets;
			for (int k = p->nparams - 1; k >= 0; k--) {
				const struct param *pr = &p->params[k];
				if (pr->device != dev || !pr->trainable)
					continue;
				/* PyTorch's first bucket is small (1 MiB), so the all-reduce of
				 * the last layers starts early and overlaps the rest of the backward */
				int64_t limit = cur && cur == &p->buckets[first_of_dev] ? (cap < (1 << 18) ? cap : (1 << 18)) : cap;
				if (!cur || cur->numel >= limit) {
					cur = &p->buckets[p->nbuckets++];
					cur->device = dev;
					cur->offset = pr->offset;
					cur->last_param = k;
				}
				cur->numel += pr->numel;
				cur->first_param = k;
			}
		}
	}
	return true;
}
