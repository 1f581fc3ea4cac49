/* gpu_ops.c: every CUDA op against the CPU backend, on a GPU.
 * For each .net file given: compile it, run one training step (forward,
 * loss, backward) and an evaluation forward on both backends with the same
 * parameters and fresh random inputs, the GPU's activations poisoned with
 * NaN before each pass, and compare every layer's output, the loss, every
 * parameter's gradient and the running statistics.  Then one optimizer
 * step of each kind through the fused kernels against optim_step.  Before
 * the models: the kernels that may write over an input, in place against
 * apart, the embedding's gradient against the CPU's bit for bit, and the
 * rules of CUDA events and capture that tests/fakecuda models.
 * Tolerance: |gpu - cpu| <= 1e-4 * max|cpu| + 1e-3 * |cpu| per element
 * (TF32 off: TRAINC_TF32=0 is set here; reductions differ only in order).
 * Prints one line per check and "N passed, N failed"; exits 1 on a failure,
 * 77 (skipped) when there is no GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include <cuda_runtime_api.h>

#include "compiler/compile.h"
#include "compiler/emb_sort.h"
#include "compiler/ops.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/backend.h"
#include "runtime/comm.h"
#include "runtime/cuda/cuda.h"
#include "runtime/cuda/kc.h"
#include "runtime/exec.h"
#include "runtime/loss_elem.h"
#include "runtime/optim.h"
#include "runtime/philox.h"
#include "runtime/store.h"
#include "runtime/util.h"

static int passed, failed;

/* Compare n floats (gpu: device memory) with the CPU's; print a line. */
static void compare(const char *model, const char *what, const float *gpu, const float *cpu, int64_t n)
{
	float *h = malloc((size_t)n * 4 + 4);
	if (!h || cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(h, gpu, (size_t)n * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
		printf("FAIL %-28s %-34s cannot read the GPU's values\n", model, what);
		failed++;
		free(h);
		return;
	}
	double maxref = 0, maxdiff = 0;
	for (int64_t i = 0; i < n; i++)
		maxref = fmax(maxref, fabs(cpu[i]));
	int64_t bad = -1;
	for (int64_t i = 0; i < n; i++) {
		double d = fabs((double)h[i] - cpu[i]);
		if (!(d <= 1e-4 * maxref + 1e-3 * fabs(cpu[i])) && bad < 0)
			bad = i;
		if (d > maxdiff || d != d)
			maxdiff = d;
	}
	if (bad >= 0) {
		printf("FAIL %-28s %-34s element %lld: gpu %g cpu %g (max |cpu| %g)\n", model, what, (long long)bad, h[bad], cpu[bad], maxref);
		failed++;
	} else {
		printf("ok   %-28s %-34s %lld values, max diff %.2e of max %.2e\n", model, what, (long long)n, maxdiff, maxref);
		passed++;
	}
	free(h);
}

static void poison(struct exec *e)
{
	for (int d = 0; d < e->p->ndevices; d++)
		cudaMemset(e->acts[d], 0xff, (size_t)(e->act_stride[d] * e->copies));
}

static void fill_input(const struct plan *p, struct exec *c, struct exec *g, int n, bool train, uint64_t seed)
{
	int64_t cnt = shape_numel(&p->nodes[0].out) * n;
	float *x = malloc((size_t)cnt * 4 + 4);
	struct rng r = rng_stream(seed, RNG_DATA, 0, train);
	int64_t vocab = 0;
	for (int i = 0; i < p->nnodes; i++)
		if (p->nodes[i].op == OP_EMBEDDING && p->nodes[i].in == 0)
			vocab = p->nodes[i].a.emb.num;
	for (int64_t i = 0; i < cnt; i++)
		x[i] = p->nodes[0].dtype == DT_I64 ? (float)(rng_u32(&r, (uint64_t)i) % (uint64_t)(vocab > 0 ? vocab : 2)) : rng_normal(&r, (uint64_t)i);
	exec_input(c, x, n, train);
	cudaMemcpy(exec_output(g, 0, train), exec_output(c, 0, train), (size_t)cnt * 4, cudaMemcpyHostToDevice);
	cudaDeviceSynchronize(); /* the plain copies and memsets run on the legacy stream */
	free(x);
}

/* Two steps of every optimizer and each of its optional state planes
 * through the fused kernels against optim_step (RAdam seven: it rectifies
 * from step 6 on). */
static void check_optimizers(const char *name, struct exec *c, struct exec *g)
{
	char what[160];
	static const struct {
		enum optim_kind kind;
		double momentum;
		int amsgrad, centered;
		const char *what;
	} kinds[] = {
		{ OPTIM_SGD, 0.9, 0, 0, "" },	       { OPTIM_SGD, 0, 0, 0, " without momentum" },
		{ OPTIM_ADAM, 0, 0, 0, "" },	       { OPTIM_ADAM, 0, 1, 0, " (amsgrad)" },
		{ OPTIM_ADAMW, 0, 0, 0, "" },	       { OPTIM_ADAMW, 0, 1, 0, " (amsgrad)" },
		{ OPTIM_ADADELTA, 0, 0, 0, "" },       { OPTIM_ADAGRAD, 0, 0, 0, "" },
		{ OPTIM_RMSPROP, 0.9, 0, 0, "" },      { OPTIM_RMSPROP, 0, 0, 0, " without momentum" },
		{ OPTIM_RMSPROP, 0.9, 0, 1, " (centered)" }, { OPTIM_RMSPROP, 0, 0, 1, " (centered, without momentum)" },
		{ OPTIM_ADAMAX, 0, 0, 0, "" },	       { OPTIM_RADAM, 0, 0, 0, "" },
	};
	int64_t n = c->trainable;
	float *pc = malloc((size_t)n * 4 + 4), *sc = calloc((size_t)n * 3 + 1, 4), *pg = NULL, *sg = NULL, *gg = NULL;
	double *lr = NULL;
	int64_t *step = NULL;
	void *coef = NULL;
	cudaMalloc((void **)&pg, (size_t)n * 4 + 4);
	cudaMalloc((void **)&sg, (size_t)n * 12 + 4);
	cudaMalloc((void **)&lr, 7 * sizeof *lr);
	cudaMalloc((void **)&step, sizeof *step);
	cudaMalloc(&coef, KC_OPTIM_COEF_BYTES);
	/* the CPU's gradients on both sides: this checks the update, and Adam's
	 * or RMSprop's normalisation would magnify the backward's rounding */
	cudaMalloc((void **)&gg, (size_t)n * 4 + 4);
	cudaMemcpy(gg, c->grads, (size_t)n * 4, cudaMemcpyHostToDevice);
	for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
		/* over a large model the first kind updates the whole buffer, a
		 * launch of its size; the others, whose launches are the same but
		 * for the arithmetic, its first 2^20 elements (4096 blocks) */
		int64_t m = k > 0 && n > (4 << 20) ? 1 << 20 : n;
		struct optim_cfg cfg = optim_cfg_default(kinds[k].kind);
		cfg.lr = 0.01;
		cfg.momentum = kinds[k].momentum;
		cfg.amsgrad = kinds[k].amsgrad;
		cfg.centered = kinds[k].centered;
		cfg.weight_decay = 1e-2;
		double lrv[7] = { 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01 };
		int64_t steps = kinds[k].kind == OPTIM_RADAM ? 7 : 2;
		memcpy(pc, c->params, (size_t)n * 4);
		memset(sc, 0, (size_t)n * 12);
		struct optim_state_view sv = { sc, n };
		optim_state_init(&cfg, sv, n);
		cudaMemcpy(pg, pc, (size_t)n * 4, cudaMemcpyHostToDevice);
		cudaMemcpy(sg, sc, (size_t)n * 12, cudaMemcpyHostToDevice);
		cudaMemcpy(lr, lrv, sizeof lrv, cudaMemcpyHostToDevice);
		cudaMemset(step, 0, sizeof *step);
		cudaDeviceSynchronize();
		for (int64_t s = 1; s <= steps; s++) {
			optim_step(&cfg, sv, pc, c->grads, m, s, lrv[s - 1]);
			kc_optim_prepare(cuda_stream(g), cfg, lr, steps, step, coef);
			kc_optim_apply(cuda_stream(g), cfg, coef, pg, gg, sg, n, m);
		}
		cudaStreamSynchronize(cuda_stream(g));
		snprintf(what, sizeof what, "%d steps of %s%s%s", (int)steps, optim_kind_name(kinds[k].kind), kinds[k].what,
			 m < n ? " (first 2^20)" : "");
		compare(name, what, pg, pc, m);
	}
	free(pc), free(sc);
	cudaFree(pg), cudaFree(sg), cudaFree(gg), cudaFree(lr), cudaFree(step), cudaFree(coef);
}

/* What check_model's checks of p depend on: every node as PyTorch shows
 * it with its output's shape, type and device, the parameters' sizes and
 * initialisers, the loss with its settings, and the batches.  Nets that
 * differ only in what these checks do not read (data, parallel settings,
 * the optimizer: every optimizer is checked) check the same. */
static uint64_t check_key(const struct plan *p, int N, int NE)
{
	uint64_t h = 14695981039346656037ull;
	char b[512];
	for (int i = 0; i < p->nnodes; i++) {
		const struct node *n = &p->nodes[i];
		op_describe(n, b, sizeof b);
		h = util_fnv1a(h, b, strlen(b) + 1);
		int k = snprintf(b, sizeof b, "%d %d %d %d %d", (int)n->op, n->out.rank, (int)n->dtype, n->device, (int)n->hidden);
		for (int d = 0; d < n->out.rank; d++)
			k += snprintf(b + k, sizeof b - (size_t)k, " %lld", (long long)n->out.d[d]);
		h = util_fnv1a(h, b, (size_t)k + 1);
	}
	for (int k = 0; k < p->nparams; k++) {
		int m = snprintf(b, sizeof b, "%lld %d %d %d", (long long)p->params[k].numel, (int)p->params[k].dtype, (int)p->params[k].trainable,
				 (int)p->params[k].init);
		h = util_fnv1a(h, b, (size_t)m + 1);
	}
	const struct plan_train *t = &p->train;
	int m = snprintf(b, sizeof b, "%d %d %a %d %a %lld %lld %d %d", (int)t->loss, (int)t->reduction, t->label_smoothing, (int)t->ignore_index,
			 t->loss_param, (long long)t->npos_weights, (long long)t->nclass_weights, N, NE);
	h = util_fnv1a(h, b, (size_t)m + 1);
	if (t->pos_weights)
		h = util_fnv1a(h, t->pos_weights, (size_t)t->npos_weights * sizeof *t->pos_weights);
	if (t->class_weights)
		h = util_fnv1a(h, t->class_weights, (size_t)t->nclass_weights * sizeof *t->class_weights);
	return h;
}

static void check_model(const char *path)
{
	struct arena a = { 0 };
	struct diag d;
	diag_init(&d, stderr);
	struct compile_opts o = { path, 1, NULL, 0, false, false };
	struct plan *p = compile_file(&a, &d, &o);
	if (!p || d.errors) {
		printf("FAIL %-28s does not compile\n", path);
		failed++;
		arena_release(&a);
		return;
	}
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	/* 3 samples, or as many as the plan's activations hold */
	int N = p->act_batch < 3 ? (int)p->act_batch : 3, NE = p->eval_batch < 3 ? (int)p->eval_batch : 3;
	int64_t sizes[2] = { N, NE };
	struct exec c, g;
	char err[512];
	int ngpu = 0;
	cudaGetDeviceCount(&ngpu);
	if (p->unsharded_elems > ((int64_t)64 << 20) || p->ndevices > ngpu) {
		printf("skip %-28s %s\n", name, p->ndevices > ngpu ? "places layers on more GPUs than this machine has" : "larger than this check needs");
		arena_release(&a);
		return;
	}
	/* a net whose checks an earlier one of this run made: said, not run again */
	static uint64_t seen_key[256];
	static char seen_name[256][64];
	static int nseen;
	uint64_t key = check_key(p, N, NE);
	for (int k = 0; k < nseen; k++)
		if (seen_key[k] == key) {
			printf("same %-28s the layers, loss and batches of %s, checked there\n", name, seen_name[k]);
			arena_release(&a);
			return;
		}
	if (nseen < 256) {
		seen_key[nseen] = key;
		snprintf(seen_name[nseen++], sizeof *seen_name, "%s", name);
	}
	if (exec_init(&c, p, sizes, 2, false, 1, err, sizeof err) != 0 || exec_init_on(&g, &backend_cuda, p, sizes, 2, false, 1, err, sizeof err) != 0) {
		printf("FAIL %-28s cannot set up: %s\n", name, err);
		failed++;
		arena_release(&a);
		return;
	}
	c.step = g.step = 1;
	c.seed = g.seed = 7;
	exec_init_params(&c, 7);
	for (int k = 0; k < p->nparams; k++) /* parameter by parameter: several GPUs keep their own */
		cudaMemcpy(exec_param_ptr(&g, k), exec_param_ptr(&c, k), (size_t)(p->params[k].dtype == DT_I64 ? 8 : p->params[k].numel * 4),
			   cudaMemcpyHostToDevice);
	/* a training step */
	poison(&g);
	fill_input(p, &c, &g, N, true, 11);
	exec_forward_range(&c, 1, p->nnodes, N, true);
	exec_forward_range(&g, 1, p->nnodes, N, true);
	char what[160];
	for (int i = 1; i < p->nnodes; i++) {
		snprintf(what, sizeof what, "fwd %s (%s%s)", p->nodes[i].path, p->nodes[i].what, p->nodes[i].hidden ? "'s zero pad" : "");
		if (p->nodes[i].dtype == DT_F32)
			compare(name, what, exec_output(&g, i, true), exec_output(&c, i, true), shape_numel(&p->nodes[i].out) * N);
	}
	int last = p->nnodes - 1;
	int64_t per = shape_numel(&p->nodes[last].out);
	bool classes = p->train.loss == LOSS_NLL || p->train.loss == LOSS_CROSS_ENTROPY;
	void *y = malloc((size_t)(per * N) * 4 + 4), *yd = NULL;
	struct rng r = rng_stream(13, RNG_DATA, 1, 0);
	bool probs = p->train.loss == LOSS_KL_DIV && !p->train.loss_param; /* kl_div's targets have logarithms */
	for (int64_t i = 0; i < (classes ? N : per * N); i++) {
		if (classes)
			((int32_t *)y)[i] = (int32_t)(rng_u32(&r, (uint64_t)i) % (uint64_t)per);
		else
			((float *)y)[i] = probs ? rng_uniform(&r, (uint64_t)i) : rng_normal(&r, (uint64_t)i);
	}
	cudaMalloc(&yd, (size_t)(per * N) * 4 + 4);
	cudaMemcpy(yd, y, (size_t)(per * N) * 4, cudaMemcpyHostToDevice);
	cudaDeviceSynchronize();
	double lc = 0, lg = 0;
	long cc = 0, cg = 0;
	exec_loss(&c, y, N, true, &lc, &cc, err, sizeof err);
	exec_loss(&g, yd, N, true, &lg, &cg, err, sizeof err);
	bool ok = fabs(lc - lg) <= 1e-4 * fabs(lc) + 1e-6 && cc == cg;
	printf("%s %-28s %-34s cpu %.6f gpu %.6f, correct %ld / %ld\n", ok ? "ok  " : "FAIL", name, "loss", lc, lg, cc, cg);
	ok ? passed++ : failed++;
	exec_backward(&c, N);
	exec_backward(&g, N);
	for (int k = 0; k < p->nparams; k++) {
		if (!p->params[k].trainable)
			continue;
		snprintf(what, sizeof what, "grad %s", p->params[k].name);
		compare(name, what, exec_grad_ptr(&g, k), exec_grad_ptr(&c, k), p->params[k].numel);
	}
	for (int k = 0; k < p->nparams; k++)
		if (!p->params[k].trainable && p->params[k].dtype == DT_F32) {
			snprintf(what, sizeof what, "buffer %s", p->params[k].name);
			compare(name, what, exec_param_ptr(&g, k), exec_param_ptr(&c, k), p->params[k].numel);
		}
	/* evaluation */
	poison(&g);
	fill_input(p, &c, &g, NE, false, 17);
	exec_forward_range(&c, 1, p->nnodes, NE, false);
	exec_forward_range(&g, 1, p->nnodes, NE, false);
	compare(name, "eval output", exec_output(&g, last, false), exec_output(&c, last, false), per * NE);
	/* one step of every optimizer over these gradients (one GPU's region) */
	if (!g.split)
		check_optimizers(name, &c, &g);
	const char *ce = cuda_error(&g);
	if (ce) {
		printf("FAIL %-28s CUDA: %s\n", name, ce);
		failed++;
	}
	free(y);
	cudaFree(yd);
	exec_free(&c);
	exec_free(&g);
	arena_release(&a);
}

/* Whether the bytes at a and b (device memory) are the same; a line. */
static void same_bits(const char *what, const void *a, const void *b, size_t bytes)
{
	char *ha = malloc(bytes), *hb = malloc(bytes);
	bool ok = ha && hb && cudaDeviceSynchronize() == cudaSuccess && cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
		  cudaMemcpy(hb, b, bytes, cudaMemcpyDeviceToHost) == cudaSuccess && memcmp(ha, hb, bytes) == 0;
	printf("%s in place %-44s %s\n", ok ? "ok  " : "FAIL", what, ok ? "= apart, bit for bit" : "differs from apart");
	ok ? passed++ : failed++;
	free(ha), free(hb);
}

/* The kernels whose output may be one of their inputs (kc.h and the kernel
 * files say which): in place must equal apart bit for bit.  Rows of 45
 * (not a whole warp's stride) and 37 rows (not whole blocks of warps, more
 * rows than a loss block has warps), so lanes and warps leave their loops
 * at different times, and a warp's lanes overwrite what another lane
 * still reads unless the kernel waits for it. */
static void check_in_place(void)
{
	enum { R = 37, D = 45, N = R * D };
	static float h[N], hg[N];
	int32_t t[R];
	struct rng r = rng_stream(19, RNG_DATA, 2, 0);
	for (int i = 0; i < N; i++) {
		h[i] = 3.0f * rng_normal(&r, (uint64_t)i);
		hg[i] = rng_normal(&r, (uint64_t)(N + i));
	}
	for (int i = 0; i < R; i++)
		t[i] = i % 5 == 4 ? -100 : (int32_t)(rng_u32(&r, (uint64_t)(2 * N + i)) % D);
	float *x = NULL, *y = NULL, *g = NULL, *apart = NULL, *w = NULL, *sm = NULL, *gamma = NULL;
	double *loss = NULL, *parts = NULL;
	int32_t *td = NULL, *bad = NULL;
	cudaStream_t s = NULL;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaMalloc((void **)&parts, (KC_LOSS_PARTS + 1) * sizeof *parts);
	cudaMalloc((void **)&x, sizeof h), cudaMalloc((void **)&y, sizeof h), cudaMalloc((void **)&g, sizeof h);
	cudaMalloc((void **)&apart, sizeof h), cudaMalloc((void **)&w, sizeof h), cudaMalloc((void **)&sm, 2 * R * 4);
	cudaMalloc((void **)&gamma, D * 4), cudaMalloc((void **)&loss, 2 * sizeof *loss), cudaMalloc((void **)&td, sizeof t);
	cudaMalloc((void **)&bad, 4);
	cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
	cudaMemcpy(g, hg, sizeof h, cudaMemcpyHostToDevice);
	cudaMemcpy(gamma, hg, D * 4, cudaMemcpyHostToDevice);
	cudaMemcpy(td, t, sizeof t, cudaMemcpyHostToDevice);
	cudaMemset(bad, 0, 4);
	cudaDeviceSynchronize(); /* the plain copies run on the legacy stream */
	for (int lg = 0; lg < 2; lg++) {
		if (lg) {
			kc_log_softmax_fwd(s, x, y, R, D, 1);
			kc_log_softmax_bwd(s, y, g, apart, R, D, 1);
		} else {
			kc_softmax_fwd(s, x, y, R, D, 1);
			kc_softmax_bwd(s, y, g, apart, R, D, 1);
		}
		cudaMemcpyAsync(w, g, sizeof h, cudaMemcpyDeviceToDevice, s);
		if (lg)
			kc_log_softmax_bwd(s, y, w, w, R, D, 1);
		else
			kc_softmax_bwd(s, y, w, w, R, D, 1);
		same_bits(lg ? "log_softmax backward, dx over dy" : "softmax backward, dx over dy", w, apart, sizeof h);
	}
	kc_layernorm_fwd(s, x, gamma, NULL, y, sm, sm + R, R, D, 1e-5f);
	kc_layernorm_bwd(s, x, gamma, sm, sm + R, g, apart, NULL, NULL, R, D);
	cudaMemcpyAsync(w, g, sizeof h, cudaMemcpyDeviceToDevice, s);
	kc_layernorm_bwd(s, x, gamma, sm, sm + R, w, w, NULL, NULL, R, D);
	same_bits("layernorm backward, dx over dy", w, apart, sizeof h);
	/* a row of 9 channels of 5 per sample, one group */
	kc_groupnorm_fwd(s, x, gamma, NULL, y, sm, sm + R, R, 1, 9, 5, 1e-5f);
	kc_groupnorm_bwd(s, x, gamma, sm, sm + R, g, apart, NULL, NULL, R, 1, 9, 5);
	cudaMemcpyAsync(w, g, sizeof h, cudaMemcpyDeviceToDevice, s);
	kc_groupnorm_bwd(s, x, gamma, sm, sm + R, w, w, NULL, NULL, R, 1, 9, 5);
	same_bits("groupnorm backward, dx over dy", w, apart, sizeof h);
	kc_cross_entropy(s, x, td, apart, R, D, -100, NULL, 0, 0.0f, KERN_REDUCE_MEAN, 0.5f, loss, 1.0, false, bad, parts);
	cudaMemcpyAsync(w, x, sizeof h, cudaMemcpyDeviceToDevice, s);
	kc_cross_entropy(s, w, td, w, R, D, -100, NULL, 0, 0.0f, KERN_REDUCE_MEAN, 0.5f, loss + 1, 1.0, false, bad, parts);
	same_bits("cross_entropy, dlogits over logits", w, apart, sizeof h);
	same_bits("cross_entropy's loss, dlogits over logits", loss + 1, loss, sizeof *loss);
	kc_log_softmax_fwd(s, x, y, R, D, 1);
	kc_nll(s, y, td, apart, R, D, -100, NULL, KERN_REDUCE_SUM, 0.5f, loss, 1.0, false, bad, parts);
	kc_nll(s, y, td, y, R, D, -100, NULL, KERN_REDUCE_SUM, 0.5f, loss + 1, 1.0, false, bad, parts);
	same_bits("nll, dlogp over logp", y, apart, sizeof h);
	same_bits("nll's loss, dlogp over logp", loss + 1, loss, sizeof *loss);
	kc_regression(s, KERN_MSE, 0.0f, NULL, 0, x, g, apart, N, KERN_REDUCE_MEAN, 1.0f, loss, 1.0, false, parts);
	cudaMemcpyAsync(w, x, sizeof h, cudaMemcpyDeviceToDevice, s);
	kc_regression(s, KERN_MSE, 0.0f, NULL, 0, w, g, w, N, KERN_REDUCE_MEAN, 1.0f, loss + 1, 1.0, false, parts);
	same_bits("mse, dx over x", w, apart, sizeof h);
	int32_t hb = 1;
	cudaStreamSynchronize(s);
	cudaMemcpy(&hb, bad, 4, cudaMemcpyDeviceToHost);
	printf("%s in place: no target taken as out of range\n", hb == 0 ? "ok  " : "FAIL");
	hb == 0 ? passed++ : failed++;
	cudaFree(x), cudaFree(y), cudaFree(g), cudaFree(apart), cudaFree(w), cudaFree(sm), cudaFree(gamma);
	cudaFree(loss), cudaFree(td), cudaFree(bad), cudaFree(parts);
	cudaStreamDestroy(s);
}

/* The losses over a grid of blocks (more than KC_LOSS_CHUNK elements),
 * cross-entropy with label smoothing also in one block, against the CPU's
 * kern_* (loss within 1e-7 relative, gradients within compare's
 * tolerance); the parts' last word holding the rows that count shows the
 * grid ran (not over the host stand-in, whose losses are the CPU's).  Rows split unevenly over the blocks; in place
 * equals apart bit for bit (a block reads only its own rows); the loss
 * adds onto *loss with its weight; and a bad target in the last block's
 * rows sets *bad and leaves *loss as it was. */
extern const int fake_kc_losses_on_host __attribute__((weak)); /* tests/fakecuda/fake_kc.c */

static void check_loss_blocks(void)
{
	bool host = &fake_kc_losses_on_host != NULL;
	static const struct {
		int kind; /* 1 nll, 2 cross_entropy, 3 + kern_regression (mse, l1, ...) */
		int rows, classes;
		enum kern_reduction red;
		float eps; /* cross_entropy's label smoothing, a regression's beta or delta */
		const char *what;
		bool weighted; /* a class loss with class weights 0.5, 1, 1.5, 2, 0.5, ... (sums exact in any order) */
	} cases[] = {
		{ 2, 333, 301, KERN_REDUCE_MEAN, 0.0f, "cross_entropy 333 x 301, mean", false },
		{ 2, 20000, 3, KERN_REDUCE_SUM, 0.0f, "cross_entropy 20000 x 3, sum", false },
		{ 2, 333, 301, KERN_REDUCE_MEAN, 0.1f, "cross_entropy 333 x 301, smoothed 0.1", false },
		{ 2, 20000, 3, KERN_REDUCE_SUM, 1.0f, "cross_entropy 20000 x 3, smoothed 1", false },
		{ 2, 64, 10, KERN_REDUCE_MEAN, 0.25f, "cross_entropy 64 x 10, smoothed 0.25", false },
		{ 1, 129, 1000, KERN_REDUCE_SUM, 0.0f, "nll 129 x 1000, sum", false },
		{ 1, 4001, 37, KERN_REDUCE_MEAN, 0.0f, "nll 4001 x 37, mean", false },
		{ 1, 4001, 37, KERN_REDUCE_MEAN, 0.0f, "nll 4001 x 37, mean, class weights", true },
		{ 2, 333, 301, KERN_REDUCE_MEAN, 0.1f, "cross_entropy 333 x 301, smoothed 0.1, class weights", true },
		{ 2, 20000, 3, KERN_REDUCE_SUM, 0.0f, "cross_entropy 20000 x 3, sum, class weights", true },
		{ 3 + KERN_MSE, 100001, 1, KERN_REDUCE_MEAN, 0.0f, "mse 100001, mean", false },
		{ 3 + KERN_L1, 70001, 1, KERN_REDUCE_MEAN, 0.0f, "l1 70001, mean", false },
		{ 3 + KERN_SMOOTH_L1, 50000, 1, KERN_REDUCE_SUM, 0.8f, "smooth_l1 50000, beta 0.8, sum", false },
		{ 3 + KERN_HUBER, 40000, 1, KERN_REDUCE_MEAN, 2.0f, "huber 40000, delta 2, mean", false },
		{ 3 + KERN_HUBER, 999, 1, KERN_REDUCE_SUM, 0.5f, "huber 999, delta 0.5, sum", false },
		{ 3 + KERN_BCE, 60001, 1, KERN_REDUCE_MEAN, 0.0f, "bce 60001, mean", false },
		{ 3 + KERN_BCE_LOGITS, 30000, 1, KERN_REDUCE_SUM, 1.0f, "bce_with_logits 30000, sum", false },
		{ 3 + KERN_BCE_LOGITS, 5001, 1, KERN_REDUCE_MEAN, 0.25f, "bce_with_logits 5001, pos_weight 0.25, mean", false },
		{ 3 + KERN_BCE_LOGITS, 2001, 5, KERN_REDUCE_MEAN, 1.0f, "bce_with_logits 2001 x 5, pos_weight per output", false },
		{ 3 + KERN_KL_DIV, 50001, 1, KERN_REDUCE_MEAN, 0.0f, "kl_div 50001, mean", false },
		{ 3 + KERN_KL_DIV, 7001, 1, KERN_REDUCE_SUM, 1.0f, "kl_div 7001, log_target, sum", false },
	};
	cudaStream_t s = NULL;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		int n = cases[k].rows, c = cases[k].classes, kind = cases[k].kind;
		int64_t e = (int64_t)n * c;
		struct rng r = rng_stream(29, RNG_DATA, 4, (uint32_t)k);
		float *x = malloc((size_t)e * 4), *t = malloc((size_t)e * 4), *dref = malloc((size_t)e * 4);
		int32_t *cls = malloc((size_t)n * 4);
		for (int64_t i = 0; i < e; i++) {
			x[i] = 3.0f * rng_normal(&r, (uint64_t)i);
			t[i] = rng_normal(&r, (uint64_t)(e + i));
		}
		float *cw = cases[k].weighted ? malloc((size_t)c * 4) : NULL, *cwd = NULL;
		for (int j = 0; cw && j < c; j++)
			cw[j] = 0.5f * (float)(1 + j % 4);
		double count = 0;
		for (int i = 0; i < n; i++) {
			cls[i] = i % 7 == 3 ? -100 : (int32_t)(rng_u32(&r, (uint64_t)(2 * e + i)) % (uint32_t)c);
			count += cls[i] == -100 ? 0 : cw ? cw[cls[i]] : 1;
		}
		if (cw) {
			cudaMalloc((void **)&cwd, (size_t)c * 4);
			cudaMemcpy(cwd, cw, (size_t)c * 4, cudaMemcpyHostToDevice);
		}
		double cwsum = cw ? loss_class_weight_sum(cw, c) : 0;
		if (kind == 1) /* nll takes log-probabilities */
			kern_log_softmax_fwd(x, x, n, c, 1);
		/* targets in [0, 1] (kl_div's probabilities); bce's inputs too, 0 and 1 among them */
		if (kind == 3 + KERN_BCE || kind == 3 + KERN_BCE_LOGITS || (kind == 3 + KERN_KL_DIV && cases[k].eps == 0))
			for (int64_t i = 0; i < e; i++) {
				t[i] = rng_uniform(&r, (uint64_t)(e + i));
				if (kind == 3 + KERN_BCE)
					x[i] = i % 101 == 0 ? (float)(i / 101 % 2) : rng_uniform(&r, (uint64_t)i);
			}
		double ref = 0;
		/* a regression over classes > 1 outputs: a pos_weight for each */
		static const float per[5] = { 0.5f, 1, 2, 3, 0 };
		float *perd = NULL;
		int64_t nper = kind >= 3 && c > 1 ? c : 0;
		if (nper) {
			cudaMalloc((void **)&perd, sizeof per);
			cudaMemcpy(perd, per, sizeof per, cudaMemcpyHostToDevice);
		}
		if (kind >= 3) {
			ref = kern_regression_per((enum kern_regression)(kind - 3), cases[k].eps, nper ? per : NULL, nper, x, t, dref, (size_t)e,
						  cases[k].red, 1.0f);
			count = e;
		} else if (kind == 1)
			kern_nll(x, cls, dref, n, c, -100, cw, cases[k].red, 1.0f, &ref);
		else
			kern_cross_entropy(x, cls, dref, n, c, -100, cw, cases[k].eps, cases[k].red, 1.0f, &ref);
		float *xd = NULL, *td = NULL, *apart = NULL, *w = NULL;
		double *loss = NULL, *parts = NULL, h[4] = { 0, 0, 3.0, 7.0 }, hp[KC_LOSS_PARTS + 1];
		int32_t *cd = NULL, *bad = NULL, hb[1] = { -1 };
		cudaMalloc((void **)&xd, (size_t)e * 4), cudaMalloc((void **)&td, (size_t)e * 4);
		cudaMalloc((void **)&apart, (size_t)e * 4), cudaMalloc((void **)&w, (size_t)e * 4);
		cudaMalloc((void **)&cd, (size_t)n * 4), cudaMalloc((void **)&bad, 4);
		cudaMalloc((void **)&loss, sizeof h), cudaMalloc((void **)&parts, sizeof hp);
		cudaMemcpy(xd, x, (size_t)e * 4, cudaMemcpyHostToDevice), cudaMemcpy(td, t, (size_t)e * 4, cudaMemcpyHostToDevice);
		cudaMemcpy(w, x, (size_t)e * 4, cudaMemcpyHostToDevice), cudaMemcpy(cd, cls, (size_t)n * 4, cudaMemcpyHostToDevice);
		cudaMemcpy(loss, h, sizeof h, cudaMemcpyHostToDevice);
		cudaMemset(parts, 0xff, sizeof hp), cudaMemset(apart, 0xff, (size_t)e * 4), cudaMemset(bad, 0, 4);
		cudaDeviceSynchronize(); /* the plain copies run on the legacy stream */
		/* loss[0]: apart; loss[1]: in place; loss[2] += 0.5 L; loss[3]: a bad target, untouched */
		for (int pass = 0; pass < 4; pass++) {
			float *in = pass == 1 ? w : xd, *dx = pass == 1 ? w : pass == 0 ? apart : NULL;
			double weight = pass == 2 ? 0.5 : 1.0;
			bool add = pass == 2;
			if (pass == 3 && kind >= 3)
				break;
			if (pass == 3) {
				int32_t out = c + 2;
				cudaMemcpyAsync(cd + n - 2, &out, 4, cudaMemcpyHostToDevice, s);
				cudaStreamSynchronize(s);
			}
			if (kind >= 3)
				kc_regression(s, (enum kern_regression)(kind - 3), cases[k].eps, perd, nper, in, td, dx, e, cases[k].red, 1.0f,
					      loss + pass, weight, add, parts);
			else if (kind == 1)
				kc_nll(s, in, cd, dx, n, c, -100, cwd, cases[k].red, 1.0f, loss + pass, weight, add, bad, parts);
			else
				kc_cross_entropy(s, in, cd, dx, n, c, -100, cwd, cwsum, cases[k].eps, cases[k].red, 1.0f, loss + pass, weight, add,
						 bad, parts);
			if (pass == 0) {
				cudaStreamSynchronize(s);
				cudaMemcpy(hp, parts, sizeof hp, cudaMemcpyDeviceToHost);
			}
		}
		bool read = cudaStreamSynchronize(s) == cudaSuccess && cudaMemcpy(h, loss, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess &&
			    cudaMemcpy(hb, bad, 4, cudaMemcpyDeviceToHost) == cudaSuccess;
		bool grid = host || e <= KC_LOSS_CHUNK || hp[KC_LOSS_PARTS] == count;
		bool near = fabs(h[0] - ref) <= 1e-7 * fabs(ref);
		bool added = h[2] == 3.0 + 0.5 * h[0], kept = kind >= 3 ? hb[0] == 0 : hb[0] == 1 && h[3] == 7.0;
		bool ok = read && grid && near && added && kept;
		printf("%s loss over blocks, %-32s gpu %.12g cpu %.12g%s%s%s%s\n", ok ? "ok  " : "FAIL", cases[k].what, h[0], ref,
		       grid ? "" : "; the parts do not hold the rows that count (one block ran?)", added ? "" : "; weight and add wrong",
		       kept ? "" : "; a bad target not said or the loss written", near ? "" : "; beyond 1e-7 relative");
		ok ? passed++ : failed++;
		compare(cases[k].what, "gradient over blocks", apart, dref, e);
		same_bits(cases[k].what, w, apart, (size_t)e * 4);
		free(x), free(t), free(dref), free(cls);
		cudaFree(xd), cudaFree(td), cudaFree(apart), cudaFree(w), cudaFree(cd), cudaFree(bad), cudaFree(loss), cudaFree(parts);
		if (perd)
			cudaFree(perd);
		if (cwd)
			cudaFree(cwd);
		free(cw);
	}
	cudaStreamDestroy(s);
}

/* The embedding's gradient against kern_embedding_bwd, bit for bit: every
 * row's tokens must add in token order, onto dw's old values.  Ids that
 * repeat thousands of times (5000 tokens over 7 ids, padding_idx among
 * them), ids spread over a vocabulary of a million with a few repeated,
 * a power of two of tokens (every sort key a token's), and one token; dy's
 * values span 2^-10 .. 2^10, so a sum in any other order differs in its
 * last bits.  The GPU skips ids outside [0, vocab), which the CPU refuses:
 * its reference takes them as padding_idx. */
static void check_embedding_bwd(void)
{
	static const struct {
		int64_t n;
		int vocab, dim, pad;
		bool bad; /* some ids outside [0, vocab) */
		const char *what;
	} cases[] = {
		{ 5000, 7, 45, 3, true, "5000 tokens over 7 ids, padding_idx 3" },
		{ 3000, (1 << 20) + 3, 5, -1, false, "3000 tokens over 2^20 ids" },
		{ 4096, 50, 33, 0, false, "4096 tokens over 50 ids" },
		{ 1, 5, 8, -1, false, "one token" },
	};
	cudaStream_t s = NULL;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		int64_t n = cases[c].n, rows = cases[c].vocab, dim = cases[c].dim, bytes = emb_sort_bytes(n);
		struct rng r = rng_stream(23, RNG_DATA, 3, (uint32_t)c);
		int32_t *idx = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4), *idx_d = NULL;
		float *dy = malloc((size_t)(n * dim) * 4), *w = malloc((size_t)(rows * dim) * 4), *got = malloc((size_t)(rows * dim) * 4);
		float *dy_d = NULL, *w_d = NULL;
		void *scratch = NULL;
		for (int64_t i = 0; i < n; i++) {
			uint32_t u = rng_u32(&r, (uint64_t)i);
			idx[i] = u % 4 == 0 ? (int32_t)(rows - 1 - (u >> 2) % 3) : (int32_t)(u % (uint32_t)rows);
			if (cases[c].bad && u % 7 == 0)
				idx[i] = u % 2 ? -1 - (int32_t)(u % 5) : (int32_t)rows + (int32_t)(u % 5);
			ref[i] = idx[i] < 0 || idx[i] >= rows ? cases[c].pad : idx[i];
		}
		for (int64_t e = 0; e < n * dim; e++)
			dy[e] = ldexpf(rng_normal(&r, (uint64_t)(n + e)), (int)(rng_u32(&r, (uint64_t)(2 * n * dim + e)) % 21) - 10);
		for (int64_t e = 0; e < rows * dim; e++)
			w[e] = (float)(e % 13) - 6.0f;
		cudaMalloc((void **)&idx_d, (size_t)n * 4), cudaMalloc((void **)&dy_d, (size_t)(n * dim) * 4);
		cudaMalloc((void **)&w_d, (size_t)(rows * dim) * 4), cudaMalloc(&scratch, (size_t)bytes);
		cudaMemcpy(idx_d, idx, (size_t)n * 4, cudaMemcpyHostToDevice);
		cudaMemcpy(dy_d, dy, (size_t)(n * dim) * 4, cudaMemcpyHostToDevice);
		cudaMemcpy(w_d, w, (size_t)(rows * dim) * 4, cudaMemcpyHostToDevice);
		cudaMemset(scratch, 0x5a, (size_t)bytes); /* nothing of it may be read before it is written */
		cudaDeviceSynchronize(); /* the plain copies run on the legacy stream */
		kc_embedding_bwd(s, idx_d, dy_d, w_d, n, (int)rows, (int)dim, cases[c].pad, scratch, bytes);
		int rc = kern_embedding_bwd(ref, dy, w, (int)n, (int)rows, (int)dim, cases[c].pad);
		bool ok = rc == KERN_OK && cudaStreamSynchronize(s) == cudaSuccess &&
			  cudaMemcpy(got, w_d, (size_t)(rows * dim) * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
		int64_t at = 0;
		while (ok && at < rows * dim && memcmp(&got[at], &w[at], 4) == 0)
			at++;
		if (ok && at == rows * dim) {
			printf("ok   embedding backward, %-40s = CPU bit for bit\n", cases[c].what);
			passed++;
		} else if (ok) {
			printf("FAIL embedding backward, %-40s row %lld column %lld: gpu %a cpu %a\n", cases[c].what,
			       (long long)(at / dim), (long long)(at % dim), got[at], w[at]);
			failed++;
		} else {
			printf("FAIL embedding backward, %-40s %s\n", cases[c].what, rc ? "the CPU refused the ids" : "cannot read the GPU's values");
			failed++;
		}
		free(idx), free(ref), free(dy), free(w), free(got);
		cudaFree(idx_d), cudaFree(dy_d), cudaFree(w_d), cudaFree(scratch);
	}
	cudaStreamDestroy(s);
}

/* NCCL at a world of one: the communicator, its collectives through
 * comm.h, and the stream-ordered all-reduce inside a captured CUDA graph. */
static void check_nccl(void)
{
	char err[512];
	int sv[2];
	struct store_server *srv = store_server_new();
	if (!srv || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || store_server_add_client(srv, sv[0]) != 0 ||
	    store_server_start(srv, err, sizeof err) != 0) {
		printf("FAIL nccl: cannot start a store\n");
		failed++;
		return;
	}
	struct store_client *cl = store_client_open_fd(sv[1]);
	cudaStream_t s;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	struct comm *c = cl ? comm_open_nccl(cl, 0, 1, 0, s, 30.0, err, sizeof err) : NULL;
	if (!c) {
		printf("FAIL nccl: world of one: %s\n", cl ? err : "no store client");
		failed++;
		return;
	}
	enum { N = 1000 };
	float h[N], back[N], *d = NULL;
	for (int i = 0; i < N; i++)
		h[i] = (float)i * 0.5f;
	cudaMalloc((void **)&d, sizeof h);
	cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
	cudaDeviceSynchronize();
	int rc = comm_wait(comm_all_reduce(c, d, N, COMM_AVG), err, sizeof err);
	rc |= comm_wait(comm_broadcast(c, d, N, 0), err, sizeof err);
	rc |= comm_barrier(c, err, sizeof err);
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
	rc |= comm_nccl_all_reduce_on(c, d, N, COMM_F32, COMM_SUM, s, err, sizeof err);
	kc_scale(s, d, N, 2.0f);
	cudaError_t ce = cudaStreamEndCapture(s, &g);
	if (ce == cudaSuccess)
		ce = cudaGraphInstantiate(&ge, g, 0);
	for (int k = 0; k < 3 && ce == cudaSuccess; k++)
		ce = cudaGraphLaunch(ge, s);
	if (ce == cudaSuccess)
		ce = cudaStreamSynchronize(s);
	cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost);
	bool ok = rc == 0 && ce == cudaSuccess;
	for (int i = 0; i < N && ok; i++)
		ok = back[i] == h[i] * 8.0f;
	printf("%s nccl world of one: all-reduce, broadcast, barrier, all-reduce in a CUDA graph%s%s\n", ok ? "ok  " : "FAIL",
	       ok ? "" : ": ", ok ? "" : rc ? err : cudaGetErrorString(ce));
	ok ? passed++ : failed++;
	if (ge)
		cudaGraphExecDestroy(ge);
	if (g)
		cudaGraphDestroy(g);
	cudaFree(d);
	comm_close(c);
	store_client_close(cl);
	store_server_free(srv);
	cudaStreamDestroy(s);
}

/* The rules of CUDA events and stream capture the trainer keeps (and the
 * host stand-in enforces, so that tests/cli/gpu_host.sh holds the trainer
 * to them): an event created with cudaEventDisableTiming cannot be timed;
 * an event last recorded while capturing cannot be queried or waited for
 * eagerly until it is recorded again; nothing may be freed while the
 * thread captures.  Run on a GPU, it checks the stand-in's model of them. */
static void check_capture_rules(void)
{
	cudaStream_t s, s2;
	cudaEvent_t timed, untimed;
	float ms = 0, *d = NULL;
	cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
	cudaEventCreate(&timed);
	cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming);
	cudaMalloc((void **)&d, 64 * sizeof *d);
	cudaMemset(d, 0, 64 * sizeof *d);
	cudaDeviceSynchronize();
	cudaEventRecord(timed, s);
	cudaEventRecord(untimed, s);
	cudaStreamSynchronize(s);
	cudaError_t untimed_elapsed = cudaEventElapsedTime(&ms, timed, untimed);
	cudaGetLastError();
	cudaGraph_t g = NULL;
	cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
	kc_scale(s, d, 64, 2.0f);
	cudaEventRecord(untimed, s);
	cudaStreamEndCapture(s, &g);
	cudaError_t query_captured = cudaEventQuery(untimed), wait_captured = cudaStreamWaitEvent(s2, untimed, 0);
	cudaGetLastError();
	cudaEventRecord(untimed, s);
	cudaError_t query_again = cudaStreamSynchronize(s) == cudaSuccess ? cudaEventQuery(untimed) : cudaErrorUnknown;
	/* a second capture, which the refused cudaFree invalidates on a GPU
	 * (the stand-in does not invalidate it) */
	cudaGraph_t g2 = NULL;
	cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
	cudaError_t free_captured = cudaFree(d);
	cudaStreamEndCapture(s, &g2);
	cudaGetLastError();
	struct { const char *what; cudaError_t got, want; } c[] = {
		{ "cudaEventElapsedTime of an event with cudaEventDisableTiming", untimed_elapsed, cudaErrorInvalidResourceHandle },
		{ "cudaFree while capturing", free_captured, cudaErrorStreamCaptureUnsupported },
		{ "cudaEventQuery of an event last recorded while capturing", query_captured, cudaErrorCapturedEvent },
		{ "cudaStreamWaitEvent, eagerly, for an event last recorded while capturing", wait_captured, cudaErrorCapturedEvent },
		{ "cudaEventQuery of it recorded again", query_again, cudaSuccess },
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
		bool ok = c[i].got == c[i].want;
		printf("%s CUDA's rules: %s: %s%s%s\n", ok ? "ok  " : "FAIL", c[i].what, cudaGetErrorName(c[i].got),
		       ok ? "" : ", expected ", ok ? "" : cudaGetErrorName(c[i].want));
		ok ? passed++ : failed++;
	}
	if (g)
		cudaGraphDestroy(g);
	if (g2)
		cudaGraphDestroy(g2);
	cudaFree(d);
	cudaEventDestroy(timed);
	cudaEventDestroy(untimed);
	cudaStreamDestroy(s);
	cudaStreamDestroy(s2);
}

int main(int argc, char **argv)
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("gpu_ops: skipped: no CUDA device\n");
		return 77;
	}
	setenv("TRAINC_TF32", "0", 1);
	check_nccl();
	check_capture_rules();
	check_in_place();
	check_loss_blocks();
	check_embedding_bwd();
	for (int i = 1; i < argc; i++)
		check_model(argv[i]);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
