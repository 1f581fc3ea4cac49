/* test_exec.c: the executor over real plans: whole-network gradients
 * against central differences (residual sums, flattened views, batchnorm,
 * pooling, dropout with a fixed step), training that lowers the loss, and
 * no allocation inside a training step: malloc and friends are interposed
 * here and counted while steps run; and the plan's convolution workspace,
 * against what each convolution needs on every path.
 */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "net_text.h"
#include "compiler/compile.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/exec.h"
#include "runtime/kern.h"
#include "runtime/optim.h"

/* ---- counting allocator: every allocation in the process comes here ----
 * Not under AddressSanitizer, which owns malloc (memory it hands out must
 * not reach glibc's free): there the counts stay 0 and the no-allocation
 * checks say nothing; the plain build (CI) makes them. */
static volatile long allocations, big_allocations;
#ifndef __SANITIZE_ADDRESS__
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

enum { BIG = 4096 };

void *malloc(size_t n)
{
	allocations++;
	if (n >= BIG)
		big_allocations++;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	allocations++;
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	allocations++;
	return __libc_realloc(p, n);
}

void *aligned_alloc(size_t a, size_t n)
{
	allocations++;
	return __libc_memalign(a, n);
}

int posix_memalign(void **p, size_t a, size_t n)
{
	allocations++;
	*p = __libc_memalign(a, n);
	return *p ? 0 : 12;
}

void free(void *p)
{
	__libc_free(p);
}
#endif

static struct arena A;

static struct plan *compile_text(const char *text)
{
	struct diag d;
	diag_init(&d, stderr);
	return net_text_compile(&A, &d, text, 1);
}

/* text compiled and an executor for batches of 4 set up on it, parameters
 * initialised from seed; the plan, or NULL after a failed check */
static struct plan *exec_on_text(const char *text, struct exec *e, uint64_t seed)
{
	struct plan *p = compile_text(text);
	CHECK(p != NULL);
	if (!p)
		return NULL;
	char err[256];
	int64_t sizes[1] = { 4 };
	CHECK(exec_init(e, p, sizes, 1, false, 1, err, sizeof err) == 0);
	exec_init_params(e, seed);
	return p;
}

/* conv, batchnorm, tanh, a residual, pooling, dropout, flatten, linear, gelu,
 * log_softmax.  Average pooling: max pooling's kinks would make central
 * differences jump wherever two window values are closer than the step
 * (its gradient is checked against differences in test_kern). */
static const char *const NET =
	"model T {\n"
	"  input(2, 6, 6)\n"
	"  c1 = conv2d(2, 3, kernel=3, padding=1)\n"
	"  bn = batchnorm2d(3)\n"
	"  tanh\n"
	"  residual {\n"
	"    c2 = conv2d(3, 3, kernel=3, padding=1)\n"
	"    sigmoid\n"
	"  }\n"
	"  avgpool2d(2)\n"
	"  dropout(0.3)\n"
	"  flatten\n"
	"  fc = linear(27, 5)\n"
	"  gelu\n"
	"  out = linear(4)\n"
	"  log_softmax\n"
	"}\n"
	"data { train = synthetic(input=randn(2, 6, 6), target=classes(4), samples=8) }\n"
	"train { loss = nll(reduction=\"sum\"); optimizer = sgd(lr=0.05, momentum=0.9); batch = 4 }\n";

/* token ids through an embedding, layernorm, softmax; cross entropy */
static const char *const TOKENS =
	"model K {\n"
	"  input(5, dtype=\"long\")\n"
	"  emb = embedding(11, 3, padding_idx=0)\n"
	"  norm = layernorm(3)\n"
	"  softmax\n"
	"  flatten\n"
	"  out = linear(4)\n"
	"}\n"
	"data { train = synthetic(input=randint(11, 5), target=classes(4), samples=8) }\n"
	"train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 4 }\n";

static double loss_at(struct exec *e, const float *x, const int32_t *y, int n)
{
	double loss;
	long c;
	char err[128];
	exec_forward(e, x, n, true);
	exec_loss(e, y, n, true, &loss, &c, err, sizeof err);
	return loss;
}

static void fill(float *x, int n, uint32_t seed)
{
	for (int i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
	}
}

static void check_gradients(const char *text, const float *x)
{
	struct exec e;
	if (!exec_on_text(text, &e, 7))
		return;
	e.step = 3; /* the same dropout mask for every evaluation */
	int32_t y[4] = { 0, 3, 1, 2 };
	memset(e.grads, 0, (size_t)e.trainable * 4);
	loss_at(&e, x, y, 4);
	exec_backward(&e, 4);
	/* batchnorm's running statistics move with every forward; they do not
	 * enter the training-mode output, so differences are unaffected */
	float *g = malloc((size_t)e.trainable * 4);
	memcpy(g, e.grads, (size_t)e.trainable * 4);
	double maxg = 0, worst = 0;
	for (int64_t i = 0; i < e.trainable; i++)
		if (fabs(g[i]) > maxg)
			maxg = fabs(g[i]);
	for (int64_t i = 0; i < e.trainable; i += 3) {
		float keep = e.params[i];
		const float h = 1e-3f;
		e.params[i] = keep + h;
		double up = loss_at(&e, x, y, 4);
		e.params[i] = keep - h;
		double down = loss_at(&e, x, y, 4);
		e.params[i] = keep;
		double fd = (up - down) / (2.0 * h);
		double diff = fabs(fd - g[i]);
		if (diff > worst)
			worst = diff;
	}
	/* float forward, eps 1e-3: agreement within 2% of the largest gradient */
	CHECK(maxg > 0);
	CHECK_NEAR(worst / maxg, 0, 2e-2);
	free(g);
	exec_free(&e);
}

static void test_network_gradients(void)
{
	float x[4 * 72];
	fill(x, 4 * 72, 11);
	check_gradients(NET, x);
}

/* act_elem.h's smooth activations between linear layers (their kinks are
 * test_kern's): each layer's backward reads its own saved input */
static const char *const ACTS =
	"model A {\n"
	"  input(2, 6, 6)\n"
	"  flatten\n"
	"  fc1 = linear(72, 12)\n"
	"  elu(0.7)\n"
	"  fc2 = linear(12)\n"
	"  selu\n"
	"  fc3 = linear(12)\n"
	"  silu\n"
	"  fc4 = linear(12)\n"
	"  mish\n"
	"  fc5 = linear(12)\n"
	"  softplus(beta=2)\n"
	"  fc6 = linear(12)\n"
	"  celu(0.5)\n"
	"  fc7 = linear(12)\n"
	"  logsigmoid\n"
	"  fc8 = linear(12)\n"
	"  softsign\n"
	"  fc9 = linear(12)\n"
	"  tanhshrink\n"
	"  out = linear(4)\n"
	"}\n"
	"data { train = synthetic(input=randn(2, 6, 6), target=classes(4), samples=8) }\n"
	"train { loss = cross_entropy(reduction=\"sum\"); optimizer = sgd(lr=0.05); batch = 4 }\n";

static void test_activation_gradients(void)
{
	float x[4 * 72];
	fill(x, 4 * 72, 12);
	check_gradients(ACTS, x);
}

/* A plan's selu is elu at SELU's numbers, their product rounded to
 * float32 as ATen rounds it; relu6 is hardtanh(0, 6); elu's scale is 1;
 * celu's second number is 1 / alpha. */
static void test_activation_numbers(void)
{
	struct node nd = { .op = OP_SELU };
	float a, b;
	CHECK(exec_act_kind(&nd, &a, &b) == KERN_ELU);
	CHECK(a == (float)KERN_SELU_ALPHA * (float)KERN_SELU_SCALE && b == (float)KERN_SELU_SCALE);
	CHECK(a == 1.75809932f); /* PyTorch 1.13's selu'(0) */
	nd.op = OP_RELU6;
	CHECK(exec_act_kind(&nd, &a, &b) == KERN_HARDTANH && a == 0 && b == 6);
	nd.op = OP_ELU;
	nd.a.act.a = 0.5;
	CHECK(exec_act_kind(&nd, &a, &b) == KERN_ELU && a == 0.5f && b == 1);
	nd.op = OP_HARDTANH;
	nd.a.act.a = -2;
	nd.a.act.b = 3;
	CHECK(exec_act_kind(&nd, &a, &b) == KERN_HARDTANH && a == -2 && b == 3);
	/* celu is ATen's elu with input_scale 1 / alpha, a float32 of the double */
	nd.op = OP_CELU;
	nd.a.act.a = 0.3;
	CHECK(exec_act_kind(&nd, &a, &b) == KERN_CELU && a == 0.3f && b == (float)(1 / 0.3));
	nd.op = OP_THRESHOLD;
	nd.a.act.a = 0.1;
	nd.a.act.b = -0.5;
	CHECK(exec_act_kind(&nd, &a, &b) == KERN_THRESHOLD && a == 0.1f && b == -0.5f);
}

/* The embedding path: ids avoid the padding index 0, whose row PyTorch
 * keeps out of the gradient although it reaches the output. */
static void test_token_gradients(void)
{
	float x[4 * 5];
	for (int i = 0; i < 20; i++)
		x[i] = (float)(1 + (i * 7) % 10);
	check_gradients(TOKENS, x);
}

/* batchnorm1d over (C, L) and over (C,): the batch norm kernels with one
 * value or L values a channel in each sample */
static const char *const NORM1D =
	"model B {\n"
	"  input(3, 4)\n"
	"  fc = linear(5)\n"
	"  bn = batchnorm1d(3, momentum=0.3)\n"
	"  tanh\n"
	"  flatten\n"
	"  mid = linear(6)\n"
	"  bn2 = batchnorm1d()\n"
	"  sigmoid\n"
	"  out = linear(4)\n"
	"}\n"
	"data { train = synthetic(input=randn(3, 4), target=classes(4), samples=8) }\n"
	"train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 4 }\n";

static void test_batchnorm1d_gradients(void)
{
	float x[4 * 12];
	fill(x, 4 * 12, 5);
	check_gradients(NORM1D, x);
}

/* zeropad2d padding one side and cropping another, and conv2d(padding=
 * "same") with even kernels, which runs after a hidden zero pad: the
 * gradients reach the convolution before both pads */
static const char *const PADS =
	"model P {\n"
	"  input(2, 5, 6)\n"
	"  c1 = conv2d(3, kernel=3)\n"
	"  tanh\n"
	"  zeropad2d((2, -1, -1, 1))\n"
	"  c2 = conv2d(3, kernel=(2, 4), padding=\"same\", dilation=(1, 1))\n"
	"  sigmoid\n"
	"  c3 = conv2d(2, kernel=2, padding=\"same\", dilation=(3, 2))\n"
	"  flatten\n"
	"  out = linear(4)\n"
	"}\n"
	"data { train = synthetic(input=randn(2, 5, 6), target=classes(4), samples=8) }\n"
	"train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 4 }\n";

static void test_zeropad_gradients(void)
{
	float x[4 * 60];
	fill(x, 4 * 60, 3);
	check_gradients(PADS, x);
}

/* A dropout after a conv2d(padding="same") draws the same masks whether
 * the padding is the convolution's own (kernel 3) or a hidden zero pad's
 * (kernel 2): the hidden node is not a layer of the model. */
static void test_dropout_after_hidden_pad(void)
{
	uint64_t seed[2];
	for (int v = 0; v < 2; v++) {
		char text[512];
		snprintf(text, sizeof text,
			 "model M {\n    input(1, 6, 6)\n    conv2d(2, kernel=%d, padding=\"same\")\n    dropout(0.5)\n"
			 "    flatten\n    linear(4)\n}\n"
			 "data { train = synthetic(input=randn(1, 6, 6), target=classes(4), samples=8) }\n"
			 "train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 4 }\n", 3 - v);
		struct exec e;
		const struct plan *p = exec_on_text(text, &e, 1);
		if (!p)
			return;
		CHECK(p->nnodes == 5 + v); /* kernel 2: a zero pad before the convolution */
		e.seed = 1;
		e.step_first = 0;
		seed[v] = exec_dropout_seed(&e, p->nnodes - 3);
		CHECK(p->nodes[p->nnodes - 3].op == OP_DROPOUT);
		exec_free(&e);
	}
	CHECK(seed[0] == seed[1]);
}

/* Steps 3..30 of training: allocations counted. */
static long allocations_in_steps(long *big)
{
	struct exec e;
	if (!exec_on_text(NET, &e, 1))
		return -1;
	struct optim_cfg oc = optim_cfg_default(OPTIM_SGD);
	oc.lr = 0.05;
	oc.momentum = 0.9;
	struct optim_state_view sv = { e.optim, e.trainable };
	optim_state_init(&oc, sv, e.trainable);
	float x[4 * 72];
	int32_t y[4] = { 0, 3, 1, 2 };
	fill(x, 4 * 72, 5);
	double first = 0, last = 0;
	long before = 0;
	for (int step = 1; step <= 30; step++) {
		if (step == 3) {
			before = allocations; /* the first steps may warm thread pools */
			*big = big_allocations;
		}
		e.step = step;
		memset(e.grads, 0, (size_t)e.trainable * 4);
		double loss = loss_at(&e, x, y, 4);
		exec_backward(&e, 4);
		optim_step(&oc, sv, e.params, e.grads, e.trainable, step, oc.lr);
		if (step == 1)
			first = loss;
		last = loss;
	}
	long during = allocations - before;
	*big = big_allocations - *big;
	CHECK(last < first * 0.5); /* the same batch 30 times: it memorises it */
	exec_free(&e);
	return during;
}

/* Dropout's masks: a micro-batch of a step draws its own (the second of
 * two equal micro-batches repeated the first's), the same again for the
 * same place and step, and a device transfer before the layer (placement)
 * changes nothing. */
static void test_dropout_streams(void)
{
	static const char *const nets[2] = {
		"model M {\n    input(64)\n    drop = dropout(0.5)\n    fc = linear(4)\n}\n"
		"data { train = synthetic(input=randn(64), target=randn(4), samples=8) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.1); batch = 4 }\n",
		"model M {\n    input(64)\n    drop = dropout(0.5) @device(1)\n    fc = linear(4) @device(1)\n}\n"
		"data { train = synthetic(input=randn(64), target=randn(4), samples=8) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.1); batch = 4 }\n",
	};
	float x[4 * 64], y[2][3][4 * 64];
	for (int i = 0; i < 4 * 64; i++)
		x[i] = 1.0f;
	for (int v = 0; v < 2; v++) {
		struct exec e;
		const struct plan *p = exec_on_text(nets[v], &e, 1);
		if (!p)
			return;
		int drop = -1;
		for (int k = 0; k < p->nnodes; k++)
			drop = p->nodes[k].op == OP_DROPOUT ? k : drop;
		e.step = 1;
		const int64_t firsts[3] = { 0, 4, 0 };
		for (int r = 0; r < 3; r++) {
			e.step_first = firsts[r];
			exec_forward(&e, x, 4, true);
			memcpy(y[v][r], exec_output(&e, drop, true), sizeof y[v][r]);
		}
		exec_free(&e);
	}
	CHECK(memcmp(y[0][0], y[0][1], sizeof y[0][0]) != 0); /* the step's second micro-batch: other masks */
	CHECK(memcmp(y[0][0], y[0][2], sizeof y[0][0]) == 0); /* the same place again: the same masks */
	CHECK(memcmp(y[0], y[1], sizeof y[0]) == 0);          /* on another device: the same masks */
}

/* With im2col convolutions nothing at all is allocated in a step. */
static void test_training_step_allocates_nothing(void)
{
	setenv("TRAINC_CONV_PATH", "im2col", 1);
	long big;
	long n = allocations_in_steps(&big);
	unsetenv("TRAINC_CONV_PATH");
	if (n)
		fprintf(stderr, "%ld allocations in 28 steps\n", n);
	CHECK(n == 0);
}

/* oneDNN's primitive execution builds a small argument map per call and
 * frees it before returning; no tensor-sized memory is ever allocated. */
static void test_onednn_allocates_no_tensors(void)
{
	long big = 0;
	allocations_in_steps(&big);
	CHECK(big == 0);
}

/* Shapes that exercise each CPU path: few input channels (im2col's
 * backward-data), Winograd on large images (fewer per chunk), a strided 1x1
 * (direct's scratchpad), groups, dilation, a depthwise convolution; a test
 * batch below the training batch. */
static const char *const CONVS =
	"model C {\n"
	"  input(3, 40, 40)\n"
	"  a = conv2d(3, 32, kernel=3, padding=1)\n"
	"  b = conv2d(32, 32, kernel=3, padding=1)\n"
	"  c = conv2d(32, 64, kernel=1, stride=2)\n"
	"  d = conv2d(64, 64, kernel=3, groups=4)\n"
	"  e = conv2d(64, 48, kernel=3, dilation=2, padding=2)\n"
	"  f = conv2d(48, 48, kernel=5, groups=48)\n"
	"  flatten\n"
	"  out = linear(10)\n"
	"}\n"
	"data {\n"
	"  train = synthetic(input=randn(3, 40, 40), target=classes(10), samples=64)\n"
	"  test = synthetic(input=randn(3, 40, 40), target=classes(10), samples=16)\n"
	"}\n"
	"train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 24; test_batch = 7 }\n";

static struct conv2d_desc conv_of(const struct plan *p, const struct node *nd, int64_t n, enum kern_conv_path path)
{
	const struct shape *in = &p->nodes[nd->in].out;
	return (struct conv2d_desc){ (int)n, (int)in->d[0], (int)in->d[1], (int)in->d[2], (int)nd->a.conv.cout,
				     (int)nd->a.conv.kh, (int)nd->a.conv.kw, (int)nd->a.conv.sh, (int)nd->a.conv.sw,
				     (int)nd->a.conv.ph, (int)nd->a.conv.pw, (int)nd->a.conv.dh, (int)nd->a.conv.dw,
				     (int)nd->a.conv.groups, nd->a.conv.bias, path };
}

/* The plan's workspace (REG_WORK), which the CPU backend allocates and its
 * convolutions share, holds each convolution's full layout on every path
 * at the training batch: AUTO prepared within it takes the same path with
 * as many chunks at once as in a workspace of its own.  An evaluation
 * chunk larger than the training batch takes the same path too, with as
 * many chunks at once as the training batch runs at least (or all it has).
 * A model without convolutions plans none. */
static void test_workspace_planned(void)
{
	struct diag d;
	diag_init(&d, stderr);
	struct compile_opts o[2] = { { "models/fashion_mnist_cnn.net", 1, NULL, 0, false, false },
				     { "models/resnet_mini.net", 1, NULL, 0, false, false } };
	struct plan *plans[3] = { compile_file(&A, &d, &o[0]), compile_file(&A, &d, &o[1]), compile_text(CONVS) };
	for (int m = 0; m < 3; m++) {
		const struct plan *p = plans[m];
		CHECK(p != NULL);
		if (!p)
			continue;
		int64_t bytes = p->dev[0].bytes[REG_WORK];
		CHECK(bytes > 0 && p->dev[0].work_node >= 0 && p->nodes[p->dev[0].work_node].op == OP_CONV2D);
		CHECK(bytes == p->dev[0].work_shared + p->dev[0].work_slots * p->dev[0].work_slot);
		void *ws = aligned_alloc(64, (size_t)bytes); /* untouched pages cost nothing */
		CHECK(ws != NULL);
		int64_t batches[2] = { p->act_batch, p->eval_batch };
		for (int i = 0; ws && i < p->nnodes; i++) {
			int train_slots = 0;
			for (int b = 0; p->nodes[i].op == OP_CONV2D && b < 2; b++) {
				bool larger = batches[b] > p->act_batch;
				for (int path = KERN_CONV_AUTO; path <= KERN_CONV_WINOGRAD && !larger; path++) {
					struct conv2d_desc cd = conv_of(p, &p->nodes[i], batches[b], path);
					size_t need = kern_conv2d_workspace(&cd);
					if (need > (size_t)bytes)
						fprintf(stderr, "%s at batch %lld, path %d: needs %zu bytes, the plan has %lld\n",
							p->nodes[i].path, (long long)batches[b], path, need, (long long)bytes);
					CHECK(need > 0 && need <= (size_t)bytes);
				}
				struct conv2d_desc cd = conv_of(p, &p->nodes[i], batches[b], KERN_CONV_AUTO);
				struct kern_conv2d own, planned;
				void *mine = aligned_alloc(64, kern_conv2d_workspace(&cd));
				CHECK(kern_conv2d_prepare(&own, &cd, mine) == KERN_OK);
				CHECK(kern_conv2d_prepare_within(&planned, &cd, ws, (size_t)bytes) == KERN_OK);
				CHECK(planned.winograd == own.winograd && (planned.dnnl != NULL) == (own.dnnl != NULL));
				if (!larger) {
					CHECK(planned.slots == own.slots);
					train_slots = own.slots;
				} else {
					int want = own.slots < train_slots ? own.slots : train_slots;
					if (planned.slots < want)
						fprintf(stderr, "%s at evaluation chunk %lld: %d chunks at once, training runs %d\n", p->nodes[i].path,
							(long long)batches[b], planned.slots, train_slots);
					CHECK(planned.slots >= want);
				}
				kern_conv2d_release(&own);
				kern_conv2d_release(&planned);
				free(mine);
			}
		}
		free(ws);
	}
	struct plan *mlp = compile_text(TOKENS);
	CHECK(mlp && mlp->dev[0].bytes[REG_WORK] == 0 && mlp->dev[0].work_node == -1);
}

/* Every parameter and buffer drawn one at a time in any order (FSDP's
 * units visit them out of plan order) has the values of plan order: the
 * generator redraws from the seed when it must go back, and draws without
 * keeping what it skips, the normals below 16 elements through the spare
 * sample included. */
static void test_init_any_order(void)
{
	struct plan *p = compile_text("model M {\n"
				      "  input(6, dtype=\"long\")\n"
				      "  small = embedding(3, 4)\n"       /* 12 elements: per-element normals */
				      "  flatten\n"
				      "  fc = linear(24, 16)\n"
				      "  norm = layernorm(16)\n"
				      "  big = linear(16, 40)\n"
				      "}\n");
	CHECK(p != NULL);
	if (!p)
		return;
	int64_t at[64], total = 0;
	CHECK(p->nparams <= 64);
	for (int k = 0; k < p->nparams && k < 64; k++) {
		at[k] = total;
		total += p->params[k].dtype == DT_I64 ? 2 : p->params[k].numel;
	}
	float *a = calloc((size_t)total, sizeof *a), *b = calloc((size_t)total, sizeof *b), *c = calloc((size_t)total, sizeof *c);
	if (!a || !b || !c)
		abort();
	struct param_init pi;
	exec_param_init_begin(&pi, 9);
	for (int k = 0; k < p->nparams; k++)
		exec_init_param(p, k, &pi, a + at[k]);
	exec_param_init_begin(&pi, 9);
	for (int k = p->nparams - 1; k >= 0; k--) /* backwards: a redraw every time */
		exec_init_param(p, k, &pi, b + at[k]);
	exec_param_init_begin(&pi, 9);
	for (int k = 1; k < p->nparams; k += 2) /* odd ones, then even ones */
		exec_init_param(p, k, &pi, c + at[k]);
	for (int k = 0; k < p->nparams; k += 2)
		exec_init_param(p, k, &pi, c + at[k]);
	CHECK(memcmp(a, b, (size_t)total * sizeof *a) == 0);
	CHECK(memcmp(a, c, (size_t)total * sizeof *a) == 0);
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	kern_set_threads(2);
	RUN(test_network_gradients);
	RUN(test_token_gradients);
	RUN(test_activation_gradients);
	RUN(test_activation_numbers);
	RUN(test_batchnorm1d_gradients);
	RUN(test_zeropad_gradients);
	RUN(test_dropout_streams);
	RUN(test_dropout_after_hidden_pad);
	RUN(test_training_step_allocates_nothing);
	RUN(test_onednn_allocates_no_tensors);
	RUN(test_workspace_planned);
	RUN(test_init_any_order);
	arena_release(&A);
	return check_done();
}
