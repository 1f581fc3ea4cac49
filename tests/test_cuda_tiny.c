/* test_cuda_tiny.c: the one-block training step of runtime/cuda/tiny.h,
 * run on the CPU with one thread over a CPU executor's memory, against the
 * CPU backend's step (exec forward, loss, backward, optim_step) on the same
 * data: parameters and losses after several steps agree to 1e-5 relative
 * (the sums run in another order), for MSE, bce_with_logits with
 * pos_weight, nll and cross-entropy with class weights and ignore_index,
 * SGD with momentum and Adam, clipped gradients, ReLU, tanh, sigmoid, GELU and the activations of
 * act_elem.h, layer norm (over one and two dimensions, with and without
 * affine parameters), group norm, instance norm and batch norm (its
 * running statistics too).  Also which plans qualify.
 * Needs no GPU: it checks the interpreter and the program builder, which
 * the GPU runs unchanged (one block of TINY_THREADS threads).
 */
#include "runtime/cuda/tiny_plan.h"
#include "tests/check.h"
#include "tests/net_text.h"

#include <stdlib.h>

#include "compiler/compile.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/exec.h"
#include "runtime/philox.h"

static struct plan *compile_text(struct arena *a, const char *text)
{
	struct diag d;
	diag_init(&d, stderr);
	struct plan *p = net_text_compile(a, &d, text, 1);
	return d.errors ? NULL : p;
}

static void scale_grads(void *ctx, float coef)
{
	struct exec *e = ctx;
	optim_scale(e->grads, e->trainable, coef);
}

/* K steps of both: the CPU backend's and the interpreter's; max relative
 * parameter difference and loss difference after them. */
static void compare(const char *net, int classes, int steps, double *pdiff, double *ldiff)
{
	struct arena a = { 0 };
	struct plan *p = compile_text(&a, net);
	CHECK(p != NULL);
	if (!p)
		return;
	int64_t B = p->train.batch, N = 4 * B, xw = shape_numel(&p->nodes[0].out);
	int64_t per = shape_numel(&p->nodes[p->nnodes - 1].out), yw = classes ? 1 : per;
	float *xs = malloc((size_t)(N * xw) * 4), *ys = malloc((size_t)(N * yw) * 4);
	int64_t *order = malloc((size_t)N * sizeof *order);
	struct rng r = rng_stream(5, RNG_DATA, 0, 0);
	for (int64_t i = 0; i < N * xw; i++)
		xs[i] = rng_normal(&r, (uint64_t)i);
	for (int64_t i = 0; i < N * yw; i++) {
		if (classes)
			((int32_t *)(void *)ys)[i] = (int32_t)(rng_u32(&r, (uint64_t)(i + N * xw)) % (uint32_t)per);
		else
			ys[i] = rng_normal(&r, (uint64_t)(i + N * xw));
	}
	for (int64_t i = 0; i < N; i++)
		order[i] = (i * 7 + 3) % N; /* a permutation (N is a multiple of 4, 7 is odd and prime to it) */
	struct exec ref, tin;
	char err[256];
	int64_t sizes[1] = { B };
	CHECK(exec_init(&ref, p, sizes, 1, false, 1, err, sizeof err) == 0);
	CHECK(exec_init(&tin, p, sizes, 1, false, 1, err, sizeof err) == 0);
	exec_init_params(&ref, 3);
	exec_init_params(&tin, 3);
	struct optim_cfg cfg = optim_cfg_default(p->train.optim.kind == OPT_ADAM ? OPTIM_ADAM : OPTIM_SGD);
	cfg.lr = p->train.optim.lr;
	cfg.momentum = p->train.optim.momentum;
	struct optim_state_view sr = { ref.optim, ref.trainable }, st = { tin.optim, tin.trainable };
	optim_state_init(&cfg, sr, ref.trainable);
	optim_state_init(&cfg, st, tin.trainable);
	double *lr = malloc((size_t)steps * sizeof *lr), *hist = calloc((size_t)steps, sizeof *hist), step_loss = 0;
	for (int s = 0; s < steps; s++)
		lr[s] = cfg.lr;
	int64_t step = 0, pos = 0;
	int32_t bad = 0;
	uint32_t *ybuf = malloc((size_t)(B * yw) * 4);
	struct tiny_prog *P = calloc(1, sizeof *P);
	P->data_x = (const uint32_t *)(const void *)xs, P->data_y = (const uint32_t *)(const void *)ys, P->xw = xw, P->yw = yw;
	P->order = order, P->pos = &pos, P->ybuf = ybuf, P->step_loss = &step_loss, P->bad_target = &bad;
	P->cfg = cfg, P->lr_table = lr, P->step = &step, P->hist = hist, P->cap = steps;
	tiny_build(P, &tin, B, p->train.npos_weights ? p->train.pos_weights : p->train.class_weights);
	CHECK(P->sm_bytes[0] > 0 && P->sm_bytes[1] == B * yw * 4); /* these models fit in shared memory */
	double sh[1];
	static _Alignas(16) char smem[TINY_SMEM_BYTES];
	struct optim_coef coef;
	float *xb = malloc((size_t)(B * xw) * 4), *yb = malloc((size_t)(B * yw) * 4);
	*ldiff = 0;
	for (int s = 0; s < steps; s++) {
		/* the reference: the CPU backend on the same rows */
		for (int64_t b = 0; b < B; b++) {
			memcpy(xb + b * xw, xs + order[s * B + b] * xw, (size_t)xw * 4);
			memcpy(yb + b * yw, ys + order[s * B + b] * yw, (size_t)yw * 4);
		}
		memset(ref.grads, 0, (size_t)ref.trainable * 4);
		exec_forward(&ref, xb, (int)B, true);
		double loss;
		long correct;
		CHECK(exec_loss(&ref, yb, (int)B, true, &loss, &correct, err, sizeof err) == 0);
		exec_backward(&ref, (int)B);
		if (p->train.clip_grad_norm > 0)
			optim_clip_grad_norm(optim_sumsq(ref.grads, ref.trainable), p->train.clip_grad_norm, scale_grads, &ref);
		optim_step(&cfg, sr, ref.params, ref.grads, ref.trainable, s + 1, lr[s]);
		/* the interpreter, one thread */
		tiny_run(0, 1, P, sh, &coef, s % 2 ? NULL : smem); /* activations in shared memory, then in the executor's */
		double got = hist[s] / (p->train.reduction == RED_SUM ? 1.0 : (double)B);
		*ldiff = fmax(*ldiff, fabs(got - loss) / fmax(fabs(loss), 1e-6));
	}
	CHECK(step == steps && pos == steps * B && bad == 0);
	double maxref = 0, d = 0;
	for (int64_t i = 0; i < p->unsharded_elems; i++) /* the buffers too: batch norm's running statistics */
		maxref = fmax(maxref, fabs(ref.params[i]));
	for (int64_t i = 0; i < p->unsharded_elems; i++)
		d = fmax(d, fabs(ref.params[i] - tin.params[i]));
	*pdiff = d / maxref;
	exec_free(&ref);
	exec_free(&tin);
	free(xs), free(ys), free(order), free(lr), free(hist), free(ybuf), free(P), free(xb), free(yb);
	arena_release(&a);
}

/* compare's parameters and losses agree to 1e-5 */
static void agree(const char *net, int classes, int steps)
{
	double pd, ld;
	compare(net, classes, steps, &pd, &ld);
	CHECK(pd < 1e-5);
	CHECK(ld < 1e-5);
}

static void test_toy_mse_sgd(void)
{
	agree("model ToyModel {\n input(10)\n net1 = linear(10, 10)\n relu\n net2 = linear(10, 5)\n}\n"
		"data { train = synthetic(input=randn(10), target=randn(5), samples=80) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.05, momentum=0.9); batch = 20 }\n",
		0, 4);
}

static void test_classifier_ce_adam(void)
{
	agree("model Net {\n input(2, 3, 2)\n flatten\n fc1 = linear(12, 16)\n tanh\n fc2 = linear(16, 16)\n sigmoid\n"
		" fc3 = linear(16, 7)\n}\n"
		"data { train = synthetic(input=randn(2, 3, 2), target=classes(7), samples=64) }\n"
		"train { loss = cross_entropy; optimizer = adam(lr=0.01); batch = 16 }\n",
		1, 4);
}

static void test_parametric_activations(void)
{
	agree("model Net {\n input(12)\n fc1 = linear(12, 16)\n leaky_relu(0.2)\n fc2 = linear(16, 16)\n elu(alpha=0.7)\n"
		" fc3 = linear(16, 16)\n silu\n fc4 = linear(16, 16)\n softplus(beta=2, threshold=0.5)\n fc5 = linear(16, 16)\n"
		" gelu(approximate=\"tanh\")\n fc6 = linear(16, 16)\n gelu\n fc7 = linear(16, 5)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = cross_entropy; optimizer = sgd(lr=0.5, momentum=0.5); batch = 16 }\n",
		1, 4);
}

static void test_hard_activations(void)
{
	agree("model Net {\n input(12)\n fc1 = linear(12, 16)\n hardtanh(-0.5, 0.4)\n fc2 = linear(16, 16)\n relu6\n"
		" fc3 = linear(16, 16)\n hardswish\n fc4 = linear(16, 16)\n hardsigmoid\n fc5 = linear(16, 16)\n mish\n"
		" fc6 = linear(16, 16)\n selu\n fc7 = linear(16, 5)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = cross_entropy; optimizer = sgd(lr=0.5, momentum=0.5); batch = 16 }\n",
		1, 4);
}

static void test_shrink_activations(void)
{
	agree("model Net {\n input(12)\n fc1 = linear(12, 16)\n celu(0.5)\n fc2 = linear(16, 16)\n softshrink(0.2)\n"
		" fc3 = linear(16, 16)\n logsigmoid\n fc4 = linear(16, 16)\n hardshrink(0.1)\n fc5 = linear(16, 16)\n softsign\n"
		" fc6 = linear(16, 16)\n threshold(0.05, -0.3)\n fc7 = linear(16, 16)\n tanhshrink\n fc8 = linear(16, 5)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = cross_entropy; optimizer = sgd(lr=0.5, momentum=0.5); batch = 16 }\n",
		1, 4);
}

/* The losses' options: weights per class (with label smoothing), a class
 * that ignore_index leaves out (the random labels hit it), nll on
 * log-probabilities, and bce_with_logits' pos_weight per output. */
static void test_weighted_ce(void)
{
	agree("model Net {\n input(12)\n fc1 = linear(12, 16)\n relu\n fc2 = linear(16, 5)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = cross_entropy(weight=[1, 0.5, 2, 3, 0.25], label_smoothing=0.1, ignore_index=3)\n"
		" optimizer = sgd(lr=0.5, momentum=0.5); batch = 16 }\n",
		1, 4);
}

static void test_weighted_nll(void)
{
	agree("model Net {\n input(12)\n fc1 = linear(12, 16)\n tanh\n fc2 = linear(16, 5)\n log_softmax(dim=1)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = nll(weight=[2, 1, 0.5, 1.5, 1], ignore_index=1); optimizer = adam(lr=0.01); batch = 16 }\n",
		1, 4);
	agree("model Net {\n input(12)\n fc1 = linear(12, 16)\n relu\n fc2 = linear(16, 5)\n log_softmax(dim=1)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = nll(reduction=\"sum\"); optimizer = sgd(lr=0.01); batch = 16 }\n",
		1, 4);
}

static void test_pos_weight(void)
{
	agree("model Net {\n input(10)\n fc1 = linear(10, 10)\n relu\n fc2 = linear(10, 3)\n}\n"
		"data { train = synthetic(input=randn(10), target=rand(3), samples=80) }\n"
		"train { loss = bce_with_logits(pos_weight=[1, 4, 0.5]); optimizer = sgd(lr=0.1, momentum=0.9); batch = 20 }\n",
		0, 4);
}

/* clip_grad_norm at a norm every step exceeds */
static void test_clipped(void)
{
	agree("model ToyModel {\n input(10)\n net1 = linear(10, 10)\n relu\n net2 = linear(10, 5)\n}\n"
		"data { train = synthetic(input=randn(10), target=randn(5), samples=80) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.05, momentum=0.9); batch = 20; clip_grad_norm = 0.05 }\n",
		0, 4);
}

/* layer norm over the last dimension and over two, frozen-free and
 * without affine parameters; group norm of 2 groups over a sample of
 * (4, 3); instance norm with affine parameters; a norm on the model's
 * input (no input gradient) */
static void test_norms(void)
{
	agree("model Net {\n input(12)\n fc1 = linear(12, 16)\n ln1 = layernorm(16)\n relu\n fc2 = linear(16, 16)\n"
		" layernorm(16, affine=false)\n tanh\n fc3 = linear(16, 5)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = cross_entropy; optimizer = adam(lr=0.01); batch = 16 }\n",
		1, 4);
	agree("model Net {\n input(12)\n fc1 = linear(12, 12)\n unflatten(1, (4, 3))\n gn = groupnorm(2, 4)\n relu\n"
		" inorm = instancenorm1d(4, affine=true)\n flatten\n fc2 = linear(12, 6)\n unflatten(1, (2, 3))\n ln = layernorm([2, 3])\n"
		" flatten\n fc3 = linear(6, 3)\n}\n"
		"data { train = synthetic(input=randn(12), target=randn(3), samples=80) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.05, momentum=0.9); batch = 20 }\n",
		0, 4);
	agree("model Net {\n input(4, 3)\n gn = groupnorm(2, 4, eps=1e-3)\n flatten\n fc = linear(12, 5)\n}\n"
		"data { train = synthetic(input=randn(4, 3), target=classes(5), samples=64) }\n"
		"train { loss = cross_entropy; optimizer = sgd(lr=0.1, momentum=0.5); batch = 16 }\n",
		1, 4);
}

/* A regression MLP of two linear layers with `middle` between them. */
static struct plan *chain(struct arena *a, const char *middle)
{
	char text[512];
	snprintf(text, sizeof text,
		 "model T {\n input(10)\n linear(10, 10)\n %s\n linear(10, 5)\n}\n"
		 "data { train = synthetic(input=randn(10), target=randn(5), samples=20) }\n"
		 "train { loss = mse; optimizer = sgd(lr=0.1); batch = 20 }\n",
		 middle);
	return compile_text(a, text);
}

/* batch norm over features and over a sample's (channels, length), with
 * and without affine parameters and running statistics, and on the input.
 * SGD, not Adam: the gradient of a bias before a batch norm (and of bn0's
 * beta, behind bn1) is 0 but for rounding, whose sign Adam would turn into
 * steps of lr either way. */
static void test_batchnorm(void)
{
	agree("model Net {\n input(12)\n bn0 = batchnorm1d(12)\n fc1 = linear(12, 16)\n bn1 = batchnorm1d(16, momentum=0.3)\n relu\n"
		" fc2 = linear(16, 12)\n unflatten(1, (4, 3))\n bn2 = batchnorm1d(4, affine=false)\n tanh\n"
		" bn3 = batchnorm1d(4, eps=1e-3, track_running_stats=false)\n flatten\n fc3 = linear(12, 5)\n}\n"
		"data { train = synthetic(input=randn(12), target=classes(5), samples=64) }\n"
		"train { loss = cross_entropy; optimizer = sgd(lr=0.1, momentum=0.5); batch = 16 }\n",
		1, 4);
	agree("model Net {\n input(2, 3, 2)\n bn = batchnorm2d(2)\n flatten\n fc = linear(12, 3)\n}\n"
		"data { train = synthetic(input=randn(2, 3, 2), target=randn(3), samples=80) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.05, momentum=0.9); batch = 20 }\n",
		0, 4);
}

static void test_which_plans(void)
{
	struct arena a = { 0 };
	struct plan *toy = chain(&a, "relu"), *drop = chain(&a, "dropout(0.5)");
	struct plan *ln = chain(&a, "layernorm(10)"), *bn = chain(&a, "batchnorm1d(10)");
	struct plan *nll = compile_text(&a, "model T {\n input(10)\n linear(10, 4)\n log_softmax(dim=1)\n}\n"
					    "data { train = synthetic(input=randn(10), target=classes(4), samples=20) }\n"
					    "train { loss = nll(weight=[1, 2, 3, 4]); optimizer = sgd(lr=0.1); batch = 20 }\n");
	CHECK(toy && drop && nll && ln && bn);
	if (toy && drop && nll && ln && bn) {
		CHECK(tiny_refusal(ln, 1, 1, 20) == NULL);  /* a layer norm runs in the block */
		CHECK(tiny_refusal(bn, 1, 1, 20) == NULL);  /* and a batch norm */
		CHECK(tiny_refusal(bn, 1, 1, 1) != NULL);   /* but not over one value per channel */
		CHECK(tiny_refusal(nll, 1, 1, 20) == NULL);  /* log_softmax, nll and class weights run in one block */
		CHECK(tiny_refusal(toy, 1, 1, 20) == NULL);
		CHECK(tiny_refusal(toy, 2, 1, 20) != NULL);  /* DDP needs its all-reduce between backward and update */
		CHECK(tiny_refusal(toy, 1, 2, 20) != NULL);  /* accumulation */
		CHECK(tiny_refusal(drop, 1, 1, 20) != NULL); /* dropout */
		CHECK(tiny_refusal(toy, 1, 1, 1 << 20) != NULL); /* too much work for one block */
	}
	arena_release(&a);
}

int main(void)
{
	RUN(test_toy_mse_sgd);
	RUN(test_classifier_ce_adam);
	RUN(test_parametric_activations);
	RUN(test_hard_activations);
	RUN(test_shrink_activations);
	RUN(test_weighted_ce);
	RUN(test_weighted_nll);
	RUN(test_pos_weight);
	RUN(test_clipped);
	RUN(test_norms);
	RUN(test_batchnorm);
	RUN(test_which_plans);
	return check_done();
}
