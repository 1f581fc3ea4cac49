/* test_compiler.c: unit tests of the front end and the compiler passes:
 * the arena, suggestions, parsing, arithmetic (a long flat sum included),
 * the seed CNN's state_dict names and counts against PyTorch's, FSDP units
 * under both of the seed's wrap policies, placement, the layer limit,
 * the memory plan's invariants, Adam's range of betas, the check of
 * mnist() files, floats as Python's repr writes them, and `trainc print`'s
 * lines at any depth and length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net_text.h"
#include "compiler/compile.h"
#include "compiler/compile_impl.h"
#include "compiler/ops.h"
#include "compiler/print.h"
#include "compiler/value.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/model_hash.h"
#include "runtime/util.h"

static struct arena A;
static struct diag D;

static struct plan *compile_text(const char *text, int world)
{
	return net_text_compile(&A, &D, text, world);
}

static struct plan *compile_path(const char *path, int world, const char *set)
{
	const char *sets[1] = { set };
	struct compile_opts o = { path, world, sets, set ? 1 : 0, false, false };
	return compile_file(&A, &D, &o);
}

static void test_arena(void)
{
	struct arena a = { 0 };
	char *p = arena_alloc(&a, 10);
	CHECK(p[0] == 0 && p[9] == 0);
	char *big = arena_alloc(&a, 1 << 20);
	big[(1 << 20) - 1] = 1;
	CHECK(((uintptr_t)big % _Alignof(max_align_t)) == 0);
	CHECK_STR(arena_printf(&a, "%s-%d", "x", 42), "x-42");
	char *g = arena_realloc(&a, p, 10, 20);
	CHECK(g != p);
	arena_release(&a);
	CHECK(a.head == NULL);
}

static void test_nearest(void)
{
	static const char *const c[] = { "linear", "conv2d", "relu", "dropout" };
	CHECK_STR(diag_nearest("lineer", c, 4), "linear");
	CHECK_STR(diag_nearest("conv2", c, 4), "conv2d");
	CHECK(diag_nearest("transformer", c, 4) == NULL);
}

static void test_parse(void)
{
	struct source *s = source_from_string(&A, "t.net", "model M {\n  input(3)\n  a = linear(4) @device(1) @wrap\n  b = residual {\n relu\n }\n}\n");
	int before = D.errors;
	struct ast_file *f = ast_parse(&A, &D, s);
	CHECK(D.errors == before);
	CHECK(f->sections && strcmp(f->sections->kind, "model") == 0);
	const struct ast_stmt *st = f->sections->body->next;
	CHECK_STR(st->name, "a");
	CHECK(st->annots && st->annots->next && strcmp(st->annots->next->name, "wrap") == 0);
	CHECK(st->next->has_body);
	CHECK(st->value->loc.line == 3 && st->value->loc.col == 7);
}

static void test_arithmetic(void)
{
	struct plan *p = compile_text("block B(d) {\n l = linear(d, 4*d - d/2 + 7 % 3)\n}\nmodel M {\n input(6)\n b = B(6)\n}\n", 1);
	CHECK(p != NULL);
	if (p)
		CHECK(p->nodes[1].a.linear.out == 4 * 6 - 3 + 1);
	/* floor division as Python's // */
	p = compile_text("block B(d) {\n l = linear(d, 10 + (0 - 7) / 2)\n}\nmodel M {\n input(6)\n b = B(6)\n}\n", 1);
	CHECK(p && p->nodes[1].a.linear.out == 6);
	/* a flat sum of 5000 terms is not nesting: evaluated, and written back
	 * in the canonical text, without deep recursion */
	enum { TERMS = 5000 };
	char *text = malloc(TERMS * 2 + 64);
	int at = sprintf(text, "model M {\n input(6)\n l = linear(1");
	for (int k = 1; k < TERMS; k++)
		at += sprintf(text + at, "+1");
	sprintf(text + at, " - 2 * 3)\n}\n");
	p = compile_text(text, 1);
	free(text);
	CHECK(p && p->nodes[1].a.linear.out == TERMS - 6);
	CHECK(p && strstr(p->text, "((((1 + 1) + 1) + 1) + 1)") && strstr(p->text, " - (2 * 3))"));
}

static void test_seed_cnn_names(void)
{
	struct plan *p = compile_path("models/mnist_cnn.net", 1, NULL);
	CHECK(p != NULL);
	if (!p)
		return;
	static const char *const names[] = { "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
					      "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" };
	static const int64_t numel[] = { 288, 32, 18432, 64, 1179648, 128, 1280, 10 };
	CHECK(p->nparams == 8);
	for (int k = 0; k < 8 && k < p->nparams; k++) {
		CHECK_STR(p->params[k].name, names[k]);
		CHECK(p->params[k].numel == numel[k]);
	}
	CHECK(p->total_params == 1199882);
	CHECK(p->train.optim.kind == OPT_ADADELTA && p->train.optim.lr == 1.0 && p->train.optim.rho == 0.9);
	CHECK(p->train.sched.kind == LRS_STEP && p->train.sched.gamma == 0.7 && p->train.sched.step_size == 1);
	CHECK(p->train.batch == 64 && p->train.test_batch == 1000 && p->train.reduction == RED_SUM);
	/* the example's torch.manual_seed(1) and DistributedSampler's default seed 0 */
	CHECK(p->train.seed == 1 && p->train.shuffle && p->train.shuffle_seed == 0);
}

static void test_wrap_policies(void)
{
	struct plan *p = compile_path("models/mnist_cnn.net", 2, NULL);
	CHECK(p && p->nunits == 2);
	if (p && p->nunits == 2) {
		CHECK(p->units[0].scope == 0 && p->units[0].numel == 20106 && p->units[0].parent == -1);
		CHECK(p->units[1].numel == 1179776 && p->units[1].parent == 0);
		CHECK_STR(p->scopes[p->units[1].scope].path, "fc1");
		CHECK(p->units[0].padded % 2 == 0 && p->units[0].shard == 10053);
	}
	p = compile_path("models/mnist_cnn_100.net", 4, NULL);
	CHECK(p && p->nunits == 5);
	if (p && p->nunits == 5) {
		CHECK(p->units[0].numel == 0);
		int64_t want[] = { 0, 320, 18496, 1179776, 1290 };
		for (int u = 1; u < 5; u++)
			CHECK(p->units[u].numel == want[u] && p->units[u].padded % 4 == 0);
	}
	p = compile_path("models/mnist_cnn_ddp.net", 2, NULL);
	CHECK(p && p->nunits == 0 && p->nbuckets == 2);
}

static void test_placement(void)
{
	struct plan *p = compile_path("models/toy_mp.net", 2, NULL);
	CHECK(p && p->ndevices == 2);
	if (!p)
		return;
	int transfers = 0;
	for (int i = 0; i < p->nnodes; i++)
		if (p->nodes[i].op == OP_TRANSFER) {
			transfers++;
			CHECK(p->nodes[i].a.xfer.from == 0 && p->nodes[i].a.xfer.to == 1);
			CHECK(p->nodes[i + 1].device == 1);
		}
	CHECK(transfers == 1);
	CHECK(p->params[2].device == 1 && p->params[0].device == 0);
}

/* The documented limit of 8192 layers after expansion: 8192 compile (the
 * input is not a layer), 8193 are one error. */
static void test_layer_limit(void)
{
	char text[96];
	snprintf(text, sizeof text, "model M {\n input(4)\n repeat %d { relu }\n}\n", 8192);
	struct plan *p = compile_text(text, 1);
	CHECK(p && p->nnodes == 8193);
	FILE *devnull = fopen("/dev/null", "w");
	struct diag quiet;
	diag_init(&quiet, devnull);
	snprintf(text, sizeof text, "model M {\n input(4)\n repeat %d { relu }\n}\n", 8193);
	CHECK(!net_text_compile(&A, &quiet, text, 1) && quiet.errors == 1);
	fclose(devnull);
}

/* Parameters and gradients share offsets, trainables are contiguous in
 * reverse order and buckets tile the gradient region. */
static void test_memplan_layout(void)
{
	struct plan *p = compile_path("models/mnist_cnn_ddp.net", 1, "parallel.bucket_mb=0.05");
	CHECK(p != NULL);
	if (!p)
		return;
	int64_t next = 0;
	for (int k = p->nparams - 1; k >= 0; k--) {
		if (!p->params[k].trainable)
			continue;
		CHECK(p->params[k].offset == next);
		next += p->params[k].numel;
	}
	CHECK(next == p->trainable_params);
	CHECK(p->dev[0].bytes[REG_GRADS] == next * 4);
	CHECK(p->nbuckets > 1);
	int64_t covered = 0;
	for (int b = 0; b < p->nbuckets; b++) {
		CHECK(p->buckets[b].offset == covered);
		covered += p->buckets[b].numel;
	}
	CHECK(covered == next);
	/* every buffer lies inside the activation region */
	for (int i = 0; i < p->nnodes; i++) {
		const struct nodemem *m = &p->mem[i];
		CHECK(m->out_off + m->out_bytes <= p->dev[0].act_train);
		CHECK(m->grad_off + m->grad_bytes <= p->dev[0].act_train);
		CHECK(m->save_off + m->save_bytes <= p->dev[0].act_train);
	}
}

/* Liveness reuse: a deep chain of same-size layers needs far less than the
 * sum of its buffers, and the FSDP per-rank state shrinks with the world. */
static void test_memplan_sizes(void)
{
	const char *src = "model M {\n input(1024)\n layers = repeat 16 { linear(1024) }\n}\n"
			  "train { loss = mse; optimizer = adam(lr=1e-3); batch = 8 }\nparallel fsdp { wrap = size(min_params=1000) }\n";
	struct plan *p1 = compile_text(src, 1), *p4 = compile_text(src, 4);
	CHECK(p1 && p4);
	if (!p1 || !p4)
		return;
	CHECK(p1->nunits == 17);
	int64_t per1 = p1->dev[0].bytes[REG_PARAMS] + p1->dev[0].bytes[REG_GRADS] + p1->dev[0].bytes[REG_OPTIM];
	int64_t per4 = p4->dev[0].bytes[REG_PARAMS] + p4->dev[0].bytes[REG_GRADS] + p4->dev[0].bytes[REG_OPTIM];
	CHECK(per4 * 4 >= per1 && per4 * 4 <= per1 + 17 * 4 * 4 * 4);
	CHECK(p1->dev[0].bytes[REG_OPTIM] == 2 * p1->dev[0].bytes[REG_GRADS]);
	/* eval: only two 1000x1024 buffers live at a time */
	CHECK(p1->dev[0].act_eval <= 3 * 1000 * 1024 * 4);
}

/* The CPU convolutions' workspace: one buffer per device as large as its
 * largest convolution needs, shared part plus one slot per chunk of images
 * in flight; pipelining copies activations, not the workspace. */
static void test_memplan_workspace(void)
{
	struct plan *p = compile_path("models/mnist_cnn.net", 1, NULL);
	struct plan *piped = compile_path("models/mnist_cnn.net", 1, "parallel.microbatches=4");
	struct plan *toy = compile_path("models/toy.net", 1, NULL);
	CHECK(p && piped && toy);
	if (!p || !piped || !toy)
		return;
	const struct devplan *dp = &p->dev[0];
	CHECK(dp->work_node >= 0 && !strcmp(p->nodes[dp->work_node].path, "conv2"));
	CHECK(dp->work_path == WORK_WINOGRAD && dp->work_batch == 64 && dp->work_slots == 4);
	CHECK(dp->work_shared > 0 && dp->work_slot > 0);
	CHECK(dp->bytes[REG_WORK] == dp->work_shared + dp->work_slots * dp->work_slot);
	/* a micro-batch of 16 is one Winograd chunk */
	CHECK(piped->dev[0].work_batch == 16 && piped->dev[0].work_slots == 1);
	CHECK(piped->dev[0].bytes[REG_ACTS] == 4 * piped->dev[0].act_copy);
	CHECK(piped->dev[0].bytes[REG_WORK] < dp->bytes[REG_WORK]);
	CHECK(toy->dev[0].bytes[REG_WORK] == 0 && toy->dev[0].work_node == -1);
}

/* Evaluation's chunk: test_batch where training's memory holds it, else
 * the largest chunk that fits; every region as large as with chunks of at
 * most the training batch, unless training's take under 32 MiB. */
static void test_memplan_eval_chunk(void)
{
	struct plan *small = compile_path("models/mnist_cnn.net", 1, "train.test_batch=64");
	struct plan *p = compile_path("models/mnist_cnn.net", 1, NULL);
	struct plan *piped = compile_path("models/mnist_cnn.net", 1, "parallel.microbatches=4");
	const char *mlp = "model M {\n input(256)\n layers = repeat 4 { linear(256)\n relu }\n linear(10)\n}\n"
			  "train { loss = cross_entropy; optimizer = sgd(lr=0.1); batch = 64; test_batch = 100 }\n";
	struct plan *fits = compile_text(mlp, 1);
	CHECK(small && p && piped && fits);
	if (!small || !p || !piped || !fits)
		return;
	CHECK(small->eval_batch == 64 && p->act_batch == 64);
	CHECK(p->eval_batch > 64 && p->eval_batch < 1000 && p->eval_batch % 16 == 0);
	for (int r = 0; r < REG__COUNT; r++)
		CHECK(p->dev[0].bytes[r] == small->dev[0].bytes[r]);
	CHECK(p->dev[0].act_eval <= p->dev[0].scratch_off && small->dev[0].act_eval < p->dev[0].act_eval);
	CHECK(p->dev[0].work_batch == 64);
	/* a pipeline's chunks of 16 leave room for evaluation's in each copy */
	CHECK(piped->act_batch == 16 && piped->eval_batch > 16 && piped->dev[0].bytes[REG_ACTS] == 4 * piped->dev[0].act_copy);
	CHECK(fits->eval_batch == 100);
	/* training at batch 2 takes little memory: evaluation may take up to
	 * 32 MiB of activations and workspace for chunks larger than 2 */
	struct plan *tiny = compile_path("models/mnist_cnn.net", 1, "train.batch=2");
	const char *both[2] = { "train.batch=2", "train.test_batch=2" };
	struct plan *tiny_only = compile_file(&A, &D, &(struct compile_opts){ "models/mnist_cnn.net", 1, both, 2, false, false });
	CHECK(tiny && tiny_only);
	if (!tiny || !tiny_only)
		return;
	int64_t room = tiny->dev[0].act_copy + tiny->dev[0].bytes[REG_WORK];
	CHECK(tiny->act_batch == 2 && tiny->eval_batch >= 16 && room <= 32 << 20);
	CHECK(room > tiny_only->dev[0].act_copy + tiny_only->dev[0].bytes[REG_WORK]);
	/* a pipeline keeps a copy of the activations per micro-batch: all of
	 * them count towards the 32 MiB */
	const char *piped_small[2] = { "train.batch=16", "parallel.microbatches=8" };
	struct plan *ps = compile_file(&A, &D, &(struct compile_opts){ "models/mnist_cnn.net", 1, piped_small, 2, false, false });
	CHECK(ps && ps->act_batch == 2 && ps->dev[0].bytes[REG_ACTS] == 8 * ps->dev[0].act_copy);
	CHECK(ps && ps->dev[0].bytes[REG_ACTS] + ps->dev[0].bytes[REG_WORK] <= 32 << 20);
	/* training's own memory past 32 MiB: evaluation keeps within it (above) */
	CHECK(p->dev[0].act_copy + p->dev[0].bytes[REG_WORK] > 32 << 20);
}

static void test_hash(void)
{
	struct plan *a = compile_path("models/toy.net", 1, NULL), *b = compile_path("models/toy.net", 1, NULL);
	struct plan *c = compile_path("models/toy.net", 1, "train.steps=2"), *d = compile_path("models/toy.net", 2, NULL);
	CHECK(a && b && c && d);
	if (a && b && c && d) {
		CHECK(a->hash == b->hash);
		CHECK(a->hash != c->hash);
		CHECK(a->hash != d->hash);
		CHECK(c->train.steps == 2);
	}
	struct plan *e = compile_path("models/toy.net", 1, "train.shuffle_seed=3");
	CHECK(a && e && e->train.shuffle_seed == 3 && e->train.seed == a->train.seed && e->hash != a->hash);
}

/* A checkpoint's model hash follows the meaning, not the spelling:
 * defaults written out, in-sizes given or inferred, arguments by keyword or
 * in another order, the model's name, comments and the settings a resume
 * may change leave it alone; a different layer, name or training setting
 * changes it.  The text hash of earlier checkpoints is still accepted. */
static const char *const hash_base =
	"model M {\n    input(10)\n    l1 = linear(16)\n    relu\n    dropout(0.25)\n    l2 = linear(5)\n}\n"
	"data { train = synthetic(input=randn(10), target=randn(5), samples=32) }\n"
	"train { loss = mse; optimizer = sgd(lr=0.1, momentum=0.9); batch = 8; steps = 4 }\n";

static uint64_t hash_of(const char *from, const char *to)
{
	char text[1024];
	const char *at = strstr(hash_base, from);
	if (!at) {
		fprintf(stderr, "test_model_hash: \"%s\" is not in the base text\n", from);
		return 0;
	}
	snprintf(text, sizeof text, "%.*s%s%s", (int)(at - hash_base), hash_base, to, at + strlen(from));
	struct plan *p = compile_text(text, 1);
	return p ? model_hash(p) : 0;
}

static void test_model_hash(void)
{
	struct plan *p = compile_text(hash_base, 1);
	CHECK(p != NULL);
	if (!p)
		return;
	uint64_t h = model_hash(p);
	static const char *const same[][2] = {
		{ "sgd(lr=0.1, momentum=0.9)", "sgd(momentum=0.9, lr=0.1, dampening=0, nesterov=false, weight_decay=0.0)" },
		{ "linear(16)", "linear(10, 16, bias=true)" },
		{ "linear(16)", "linear(out=16)" },
		{ "steps = 4", "steps = 4; scheduler = constant" },
		{ "dropout(0.25)", "dropout(p=0.250)" },
		{ "model M", "# renamed\nmodel Net" },
		{ "steps = 4", "steps = 9; epochs = 3; log_interval = 2; test_batch = 7" },
		{ "steps = 4 }\n", "steps = 4 }\nparallel ddp { bucket_mb = 25; timeout = 60 }\n" },
		{ "steps = 4 }\n", "steps = 4; seed = 1; shuffle = true; scheduler = constant }\n" },
	};
	static const char *const differ[][2] = {
		{ "lr=0.1", "lr=0.11" },
		{ "momentum=0.9", "momentum=0.9, nesterov=true" },
		{ "linear(16)", "linear(17)" },
		{ "l1 = linear", "fc1 = linear" },
		{ "    relu\n", "    tanh\n" },
		{ "dropout(0.25)", "dropout(0.3)" },
		{ "samples=32", "samples=40" },
		{ "batch = 8", "batch = 4" },
		{ "batch = 8", "batch = 8; seed = 2" },
		{ "batch = 8", "batch = 8; shuffle_seed = 2" },
		{ "batch = 8", "batch = 8; clip_grad_norm = 1.0" },
		{ "loss = mse", "loss = mse(reduction=\"sum\")" },
		{ "steps = 4", "steps = 4; scheduler = step_lr(step=1)" },
		{ "steps = 4", "steps = 4; scheduler = exponential_lr(gamma=0.5)" },
		{ "steps = 4", "steps = 4; scheduler = cosine(t_max=4, every=\"step\")" },
		{ "steps = 4", "steps = 4; scheduler = constant_lr" },
		{ "steps = 4", "steps = 4; scheduler = linear_lr" },
		{ "steps = 4", "steps = 4; scheduler = polynomial_lr" },
		{ "steps = 4", "steps = 4; scheduler = cosine_warm_restarts(t_0=2)" },
		{ "    relu\n", "    leaky_relu\n" },
		{ "    relu\n", "    relu6\n" },
		{ "    relu\n", "    prelu\n" },
		{ "    relu\n", "    prelu(16)\n" },
		{ "    relu\n", "    prelu(init=0.3)\n" },
		{ "    relu\n", "    hardtanh(0, 6)\n" },
		{ "sgd(lr=0.1, momentum=0.9)", "rmsprop(lr=0.1, momentum=0.9)" },
		{ "steps = 4 }\n", "steps = 4 }\nparallel ddp { bucket_mb = 1 }\n" },
		{ "steps = 4 }\n", "steps = 4 }\nparallel fsdp\n" },
	};
	for (size_t k = 0; k < sizeof same / sizeof same[0]; k++)
		if (hash_of(same[k][0], same[k][1]) != h) {
			fprintf(stderr, "test_model_hash: \"%s\" -> \"%s\" changed the hash\n", same[k][0], same[k][1]);
			CHECK(!"the same meaning hashes alike");
		}
	for (size_t k = 0; k < sizeof differ / sizeof differ[0]; k++) {
		uint64_t g = hash_of(differ[k][0], differ[k][1]);
		if (g == h || g == 0) {
			fprintf(stderr, "test_model_hash: \"%s\" -> \"%s\" kept the hash (or did not compile)\n", differ[k][0], differ[k][1]);
			CHECK(!"another meaning hashes differently");
		}
	}
	/* prelu's arguments against plain prelu, not the base's relu: its
	 * defaults written out hash alike, another count or init does not */
	uint64_t pr = hash_of("    relu\n", "    prelu\n");
	CHECK(pr != 0 && pr == hash_of("    relu\n", "    prelu(num_parameters=1, init=0.25)\n"));
	CHECK(hash_of("    relu\n", "    prelu(16)\n") != pr);
	CHECK(hash_of("    relu\n", "    prelu(init=0.3)\n") != pr);
	/* padding="same" is the padding it stands for */
	static const char *const conv[2] = {
		"model C {\n    input(1, 4, 5)\n    conv2d(2, kernel=(3, 5), padding=\"same\")\n}\n"
		"data { train = synthetic(input=randn(1, 4, 5), target=randn(2, 4, 5), samples=8) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.1); batch = 4 }\n",
		"model C {\n    input(1, 4, 5)\n    conv2d(2, kernel=(3, 5), padding=(1, 2))\n}\n"
		"data { train = synthetic(input=randn(1, 4, 5), target=randn(2, 4, 5), samples=8) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.1); batch = 4 }\n",
	};
	struct plan *c0 = compile_text(conv[0], 1), *c1 = compile_text(conv[1], 1);
	CHECK(c0 && c1 && c0->nodes[1].a.conv.ph == 1 && c0->nodes[1].a.conv.pw == 2 && model_hash(c0) == model_hash(c1));
	/* the earlier form: the canonical text without resumable settings */
	struct plan *q = compile_text(strstr(hash_base, "model M"), 1);
	CHECK(q && model_hash_matches(q, h));
	const char *plain = "model M {\n    input(10)\n    l1 = linear(16)\n}\n"
			    "data { train = synthetic(input=randn(10), target=randn(16), samples=32) }\n"
			    "train { loss = mse; optimizer = sgd(lr=0.1); batch = 8 }\n";
	struct plan *r = compile_text(plain, 1);
	CHECK(r != NULL);
	if (r) {
		CHECK(model_hash_matches(r, util_fnv1a(UTIL_FNV_BASIS, r->text, strlen(r->text))));
		CHECK(!model_hash_matches(r, h));
		CHECK(!model_hash_matches(r, util_fnv1a(UTIL_FNV_BASIS, r->text, strlen(r->text) - 1)));
	}
}

/* The 1-D layers are the 2-D ops at a height of 1, with PyTorch's 1-D
 * shapes and names: conv1d's weight is (out, in / groups, kernel), and a
 * conv1d is not the conv2d of the same numbers; unflatten splits a
 * dimension, a -1 taking what is left, a list as a tuple. */
static void test_one_d(void)
{
	static const char *const text =
		"model O {\n    input(4, 16)\n    c = conv1d(4, 6, kernel=3, stride=2, padding=2, dilation=2)\n"
		"    p = maxpool1d(2)\n    u = unflatten(-1, [2, -1])\n    flatten\n    linear(3)\n}\n"
		"data { train = synthetic(input=randn(4, 16), target=randn(3), samples=8) }\n"
		"train { loss = mse; optimizer = sgd(lr=0.1); batch = 4 }\n";
	struct plan *p = compile_text(text, 1);
	CHECK(p != NULL);
	if (!p)
		return;
	const struct node *c = &p->nodes[1], *u = &p->nodes[3];
	CHECK(c->out.rank == 2 && c->out.d[0] == 6 && c->out.d[1] == 8); /* (16 + 2 * 2 - 2 * 2 - 1) / 2 + 1 */
	CHECK(p->nodes[2].out.rank == 2 && p->nodes[2].out.d[1] == 4);
	CHECK(u->out.rank == 3 && u->out.d[0] == 6 && u->out.d[1] == 2 && u->out.d[2] == 2 && u->alias == 2);
	CHECK(p->nodes[4].out.rank == 1 && p->nodes[4].out.d[0] == 24);
	CHECK_STR(p->params[0].name, "c.weight");
	CHECK(p->params[0].shape.rank == 3 && p->params[0].shape.d[0] == 6 && p->params[0].shape.d[1] == 4 &&
	      p->params[0].shape.d[2] == 3 && p->params[0].fan_in == 12);
	CHECK_STR(p->scopes[c->scope].type, "Conv1d");
	char buf[160];
	op_describe(u, buf, sizeof buf);
	CHECK_STR(buf, "Unflatten(dim=-1, unflattened_size=[2, -1])");
	uint64_t h = model_hash(p);
	/* the same meaning spelt otherwise hashes alike; another does not */
	static const char *const edits[][3] = {
		{ "kernel=3", "kernel=(3,)", "=" },
		{ "[2, -1]", "(2, 2)", "=" },
		{ "maxpool1d(2)", "maxpool1d(2, stride=(2,))", "=" },
		{ "maxpool1d(2)", "avgpool1d(2)", "!" },
		{ "[2, -1]", "(-1, 1)", "!" },
	};
	for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
		char t[1024];
		const char *at = strstr(text, edits[k][0]);
		snprintf(t, sizeof t, "%.*s%s%s", (int)(at - text), text, edits[k][1], at + strlen(edits[k][0]));
		struct plan *q = compile_text(t, 1);
		CHECK(q != NULL);
		if (q && (model_hash(q) == h) != (edits[k][2][0] == '=')) {
			fprintf(stderr, "test_one_d: \"%s\" -> \"%s\"\n", edits[k][0], edits[k][1]);
			CHECK(!"a 1-D layer's hash follows its meaning");
		}
	}
}

/* Adam's betas take all of [0, 1), as torch.optim.Adam does: a beta just
 * below 1 is valid there and must compile here too. */
static void test_adam_betas(void)
{
	/* and MultiStepLR's milestones any sequence, a tuple as a list */
	struct plan *m = compile_path("models/toy.net", 1, "train.scheduler=multistep_lr(milestones=(2, 4))");
	struct plan *one = compile_path("models/toy.net", 1, "train.scheduler=multistep_lr(milestones=(3,))");
	struct plan *l = compile_path("models/toy.net", 1, "train.scheduler=multistep_lr(milestones=[2, 4])");
	CHECK(m && m->train.sched.nmilestones == 2 && m->train.sched.milestones[1] == 4);
	CHECK(one && one->train.sched.nmilestones == 1 && one->train.sched.milestones[0] == 3);
	CHECK(m && l && model_hash(m) == model_hash(l));

	struct plan *p = compile_path("models/toy.net", 1, "train.optimizer=adam(betas=(0.9999999999, 0))");
	CHECK(p && p->train.optim.beta1 == 0.9999999999 && p->train.optim.beta2 == 0);
}

static void test_errors_counted(void)
{
	FILE *devnull = fopen("/dev/null", "w");
	struct diag quiet;
	diag_init(&quiet, devnull);
	struct source *s = source_from_string(&A, "e.net", "model M {\n input(3\n relu)\n lineer\n}\n)\n");
	ast_parse(&A, &quiet, s);
	CHECK(quiet.errors >= 1);
	fclose(devnull);
}

/* A plan whose mnist() folders hold no dataset compiles (print and graph
 * need no data); compile_check_data reports each at its data statement,
 * naming where the reader looks. */
static void test_data_files(void)
{
	const char *sets[2] = { "data.train=mnist(\"/no/such/folder\")", "data.test=mnist(\"/no/such/folder\")" };
	struct compile_opts o = { "models/mnist_cnn.net", 1, sets, 2, false, false };
	struct plan *p = compile_file(&A, &D, &o);
	CHECK(p != NULL);
	if (!p)
		return;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct diag d;
	diag_init(&d, f);
	CHECK(!compile_check_data(&d, p));
	fclose(f);
	CHECK(d.errors == 2);
	CHECK(strstr(text, ": error: /no/such/folder: no train split of MNIST found; tried /no/such/folder/train-images-idx3-ubyte[.gz], "
			   "/no/such/folder/MNIST/raw/train-images-idx3-ubyte[.gz]") != NULL);
	CHECK(strstr(text, "no test split of MNIST found") != NULL);
	free(text);
}

/* The expected strings are Python's repr() of the same doubles (float.hex
 * gives the literals); 2^-1017, 2^-957 and 2^976 are powers of two whose
 * shortest digits lie above them, where the nearest ones below do not read
 * back. */
static void test_float_repr(void)
{
	static const struct {
		double f;
		const char *py;
	} cases[] = {
		{ 0.0, "0.0" }, { -0.0, "-0.0" }, { 1e-5, "1e-05" }, { 0x1.4f8b588e368f1p-17, "1e-05" }, { 0.0001, "0.0001" },
		{ 0x1.3a92a30553262p-12, "0.00030000000000000003" }, { 0x1.9e4091070df4cp-17, "1.2345678e-05" },
		{ 1.5e-7, "1.5e-07" }, { -2.5e-8, "-2.5e-08" }, { 0x1.3333333333334p-2, "0.30000000000000004" },
		{ 0x1.5555555555555p-2, "0.3333333333333333" }, { 0.1, "0.1" }, { 1.0, "1.0" }, { 100.0, "100.0" },
		{ 12345.678, "12345.678" }, { 123456789012345.0, "123456789012345.0" }, { 1e15, "1000000000000000.0" },
		{ 9999999999999998.0, "9999999999999998.0" }, { 1e16, "1e+16" }, { 0x1.5ee2a2eb5a5c4p+53, "1.2345678901234568e+16" },
		{ 1e22, "1e+22" }, { 0x1p-1074, "5e-324" }, { 0x1.fffffffffffffp+1023, "1.7976931348623157e+308" },
		{ 0x1p-1017, "7.120236347223045e-307" }, { 0x1p-957, "8.209073602596753e-289" },
		{ 0x1p976, "6.386688990511104e+293" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char buf[32];
		val_float_repr(cases[i].f, buf, sizeof buf);
		CHECK_STR(buf, cases[i].py);
	}
}

/* PyTorch's repr of a module nested 92 deep under 64-character names,
 * with a pool whose sizes are the largest allowed: the line is whole. */
static void test_print_long_line(void)
{
	static const char pool[] = "MaxPool2d(kernel_size=(2147483647, 2147483647), stride=(2147483647, 2147483647), "
				   "padding=(1, 1), dilation=(1, 1), ceil_mode=True)";
	char name[65], text[16384];
	memset(name, 'n', 64);
	name[64] = 0;
	int at = 0;
	for (int k = 0; k < 30; k++)
		at += snprintf(text + at, sizeof text - (size_t)at, "block B%d { %s = repeat 1 { %s = B%d } }\n", k, name, name, k + 1);
	snprintf(text + at, sizeof text - (size_t)at,
		 "block B30 { %s = maxpool2d((2147483647, 2147483647), stride=(2147483647, 2147483647), padding=(1, 1), "
		 "dilation=(1, 1), ceil_mode=true) }\nmodel Net {\n input(1, 4, 4)\n %s = B0\n}\n", name, name);
	struct plan *p = compile_text(text, 1);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (p)
		print_plan(f, p);
	fclose(f);
	/* 92 deep: Net's child B0, each B's Sequential (the repeat), its copy
	 * and the next B, 30 times, and B30's pool */
	char want[512];
	snprintf(want, sizeof want, "\n%*s(%s): %s  # (1, 1, 1)\n", 2 * 92, "", name, pool);
	CHECK(strstr(out, want) != NULL);
	free(out);
}

int main(void)
{
	diag_init(&D, stderr);
	RUN(test_arena);
	RUN(test_nearest);
	RUN(test_parse);
	RUN(test_arithmetic);
	RUN(test_seed_cnn_names);
	RUN(test_wrap_policies);
	RUN(test_placement);
	RUN(test_layer_limit);
	RUN(test_memplan_layout);
	RUN(test_memplan_sizes);
	RUN(test_memplan_workspace);
	RUN(test_memplan_eval_chunk);
	RUN(test_hash);
	RUN(test_model_hash);
	RUN(test_adam_betas);
	RUN(test_errors_counted);
	RUN(test_data_files);
	RUN(test_one_d);
	RUN(test_float_repr);
	RUN(test_print_long_line);
	arena_release(&A);
	return check_done();
}
