/* test_weights.c: unit tests of runtime/weights and runtime/rundir.
 * Weights: a compiled conv-batchnorm-linear plan saved and loaded back
 * bit for bit, the I64 num_batches_tracked scalars (which a file may
 * leave out, as load_state_dict allows), every refusal of
 * weights_load with its message, strict against non-strict, conversion of
 * F64, F16, BF16 and I32 data, and no write on a failed load; the same
 * plan through torch.save's format: written and read back bit for bit, and
 * the files PyTorch 1.13 and 2.15 saved of it (tests/golden/torch*_net.pt)
 * read to the values they hold.
 * Run directories: naming, refusal of a non-empty directory, run.json and
 * metrics.jsonl contents, git commit and dirtiness inside a scratch
 * repository and null outside one or without git.  Everything is written
 * under a fresh mkdtemp directory.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "compiler/compile.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/rundir.h"
#include "runtime/safetensors.h"
#include "runtime/torchfile.h"
#include "runtime/weights.h"

static struct arena A;
static struct diag D;
static char tmp[] = "/tmp/trainc-weights-XXXXXX";
static char err[2048];

static const char *at(const char *name)
{
	static char buf[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
	return buf[k];
}

static int contains(const char *s, const char *part)
{
	if (!strstr(s, part)) {
		fprintf(stderr, "  \"%s\"\n  lacks \"%s\"\n", s, part);
		return 0;
	}
	return 1;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* the whole file, NUL-terminated, in a static buffer */
static const char *read_text(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	return buf;
}

static struct plan *compile_at(const char *path, const char *text)
{
	if (write_text(path, text) != 0)
		return NULL;
	struct compile_opts o = { arena_printf(&A, "%s", path), 1, NULL, 0, false, false }; /* the plan keeps the pointer */
	return compile_file(&A, &D, &o);
}

static const char net[] = "model Net {\n"
			  "    input(1, 8, 8)\n"
			  "    conv1 = conv2d(1, 4, kernel=3)\n"
			  "    bn1 = batchnorm2d(4)\n"
			  "    relu\n"
			  "    flatten\n"
			  "    fc1 = linear(144, 10)\n"
			  "}\n";

static struct plan *P; /* net, compiled once */

static int64_t region_floats(const struct plan *p)
{
	return p->unsharded_elems;
}

/* every float a distinct value, every num_batches_tracked 7 + its index */
static float *filled(const struct plan *p)
{
	float *r = calloc((size_t)region_floats(p), 4);
	for (int k = 0; r && k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		if (pr->dtype == DT_I64) {
			int64_t v = 7 + k;
			memcpy(r + pr->offset, &v, 8);
		} else {
			for (int64_t i = 0; i < pr->numel; i++)
				r[pr->offset + i] = (float)k + (float)i * 0.001f - 0.5f;
		}
	}
	return r;
}

static const struct param *param_named(const struct plan *p, const char *name)
{
	for (int k = 0; k < p->nparams; k++)
		if (!strcmp(p->params[k].name, name))
			return &p->params[k];
	return NULL;
}

/* what weights_save writes, as a list the tests can alter */
static int tensors_of(const struct plan *p, const float *params, struct safetensors_typed *t)
{
	for (int k = 0; k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		t[k] = (struct safetensors_typed){ pr->name, pr->dtype == DT_I64 ? ST_I64 : ST_F32, pr->shape.rank,
						   { 0 }, params + pr->offset };
		memcpy(t[k].shape, pr->shape.d, sizeof(int64_t) * (size_t)pr->shape.rank);
	}
	return p->nparams;
}

static int find_tensor(struct safetensors_typed *t, int n, const char *name)
{
	for (int k = 0; k < n; k++)
		if (!strcmp(t[k].name, name))
			return k;
	return -1;
}

static int write_tensors(const char *name, const struct safetensors_typed *t, int n)
{
	return safetensors_write_typed(at(name), t, n, NULL, 0, err, sizeof err);
}

static void test_round_trip(void)
{
	CHECK(P && P->nparams == 9);
	float *src = filled(P), *dst = calloc((size_t)region_floats(P), 4);
	CHECK(weights_save(P, src, at("w.safetensors"), err, sizeof err) == 0);

	struct safetensors_file f;
	CHECK(safetensors_open(&f, at("w.safetensors"), err, sizeof err) == 0);
	CHECK(f.n == 9);
	CHECK_STR(safetensors_meta_get(&f, "format"), "pt");
	char hash[17];
	snprintf(hash, sizeof hash, "%016llx", (unsigned long long)P->hash);
	CHECK_STR(safetensors_meta_get(&f, "trainc_plan"), hash);
	const struct safetensors_entry *e = safetensors_find(&f, "bn1.num_batches_tracked");
	int64_t v = 0;
	CHECK(e && e->dtype == ST_I64 && e->ndim == 0 && e->numel == 1 && e->end - e->begin == 8);
	if (e)
		memcpy(&v, e->data, 8);
	CHECK(v == 7 + (param_named(P, "bn1.num_batches_tracked") - P->params));
	CHECK(e && e->begin == 0); /* the widest dtype first, as the reference writes it */
	e = safetensors_find(&f, "fc1.weight");
	CHECK(e && e->dtype == ST_F32 && e->ndim == 2 && e->shape[0] == 10 && e->shape[1] == 144);
	safetensors_close(&f);

	CHECK(weights_load(P, dst, at("w.safetensors"), true, err, sizeof err) == 0);
	for (int k = 0; k < P->nparams; k++) {
		const struct param *pr = &P->params[k];
		size_t bytes = (size_t)(pr->dtype == DT_I64 ? 8 * pr->numel : 4 * pr->numel);
		CHECK(memcmp(src + pr->offset, dst + pr->offset, bytes) == 0);
	}
	free(src);
	free(dst);
}

/* params equal to filled(p), bit for bit */
static bool is_filled(const struct plan *p, const float *params)
{
	float *want = filled(p);
	bool same = want != NULL;
	for (int k = 0; same && k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		size_t bytes = (size_t)(pr->dtype == DT_I64 ? 8 * pr->numel : 4 * pr->numel);
		if (memcmp(want + pr->offset, params + pr->offset, bytes) != 0) {
			fprintf(stderr, "  %s differs\n", pr->name);
			same = false;
		}
	}
	free(want);
	return same;
}

static void test_torch_round_trip(void)
{
	float *src = filled(P), *dst = calloc((size_t)region_floats(P), 4);
	CHECK(weights_torch_name("m.pt") && weights_torch_name("M.PTH") && !weights_torch_name("m.safetensors") &&
	      !weights_torch_name(".pt"));
	CHECK(weights_save(P, src, at("w.pt"), err, sizeof err) == 0);
	FILE *fp = fopen(at("w.pt"), "rb");
	unsigned char head[4] = { 0 };
	CHECK(fp && fread(head, 1, 4, fp) == 4);
	if (fp)
		fclose(fp);
	CHECK(torchfile_is_zip(head, 4));
	struct safetensors_file f;
	CHECK(safetensors_open(&f, at("w.pt"), err, sizeof err) == 0);
	CHECK(f.n == 9);
	const struct safetensors_entry *e = safetensors_find(&f, "bn1.num_batches_tracked");
	CHECK(e && e->dtype == ST_I64 && e->ndim == 0 && e->numel == 1 && e->end - e->begin == 8);
	e = safetensors_find(&f, "fc1.weight");
	CHECK(e && e->dtype == ST_F32 && e->ndim == 2 && e->shape[0] == 10 && e->shape[1] == 144 && e->begin % 64 == 0);
	safetensors_close(&f);
	CHECK(weights_load(P, dst, at("w.pt"), true, err, sizeof err) == 0);
	CHECK(is_filled(P, dst));
	free(src);
	free(dst);
}

/* The files PyTorch 1.13 and 2.15 saved (tests/golden/torch_files_torch.py):
 * 2.15's archive adds records and aligns its storages */
static const char *const torch_versions[] = { "torch", "torch2" };

static const char *golden(char *buf, size_t len, const char *version, const char *what)
{
	snprintf(buf, len, "tests/golden/%s_%s.pt", version, what);
	return buf;
}

/* A state_dict saved by PyTorch, its values filled()'s */
static void test_torch_from_pytorch(void)
{
	float *dst = calloc((size_t)region_floats(P), 4);
	char path[64];
	for (int v = 0; v < 2; v++) {
		memset(dst, 0, (size_t)region_floats(P) * 4);
		CHECK(weights_load(P, dst, golden(path, sizeof path, torch_versions[v], "net"), true, err, sizeof err) == 0);
		if (err[0])
			fprintf(stderr, "  %s: %s\n", path, err);
		CHECK(is_filled(P, dst));
	}
	free(dst);
}

/* Tensors that are slices of one storage at offsets, float64 ones among
 * them (tests/golden/torch_files_torch.py): each entry's bytes are its own
 * part of the storage's record */
static void test_torch_slices(void)
{
	char path[64];
	for (int v = 0; v < 2; v++) {
		struct safetensors_file f;
		CHECK(safetensors_open(&f, golden(path, sizeof path, torch_versions[v], "toy_slices"), err, sizeof err) == 0);
		const struct safetensors_entry *w1 = safetensors_find(&f, "net1.weight"), *w2 = safetensors_find(&f, "net2.weight");
		const struct safetensors_entry *b1 = safetensors_find(&f, "net1.bias"), *b2 = safetensors_find(&f, "net2.bias");
		CHECK(f.n == 4 && w1 && w2 && b1 && b2);
		if (f.n == 4 && w1 && w2 && b1 && b2) {
			CHECK(w1->dtype == ST_F32 && w1->numel == 100 && w1->shape[0] == 10 && w2->numel == 50 && w2->shape[0] == 5);
			CHECK(b1->dtype == ST_F64 && b1->numel == 10 && b2->numel == 5);
			CHECK(w2->data == w1->data + 400); /* one storage: net2.weight follows net1.weight */
			bool same = true;
			for (int i = 0; i < 100; i++) {
				float x;
				memcpy(&x, w1->data + 4 * i, 4);
				same &= x == (float)(50 + i) * 0.01f;
			}
			for (int i = 0; i < 10; i++) {
				double x;
				memcpy(&x, b1->data + 8 * i, 8);
				same &= x == (double)(5 + i) * 0.01;
			}
			CHECK(same);
		}
		safetensors_close(&f);
	}
}

static void test_missing(void)
{
	float *src = filled(P);
	struct safetensors_typed t[16];
	int n = tensors_of(P, src, t);
	int w = find_tensor(t, n, "fc1.weight");
	t[w] = t[--n];
	CHECK(write_tensors("missing.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("missing.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, at("missing.safetensors")));
	CHECK(contains(err, ": no tensor 'fc1.weight' (the model has 9 tensors; the file has 8: bn1.bias, "
		      "bn1.num_batches_tracked, bn1.running_mean, bn1.running_var, bn1.weight, ...)"));
	CHECK(contains(err, "give a file saved from this model"));
	CHECK(!strstr(err, "also missing"));

	int b = find_tensor(t, n, "fc1.bias");
	t[b] = t[--n];
	CHECK(write_tensors("missing2.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("missing2.safetensors"), false, err, sizeof err) == -1);
	CHECK(contains(err, "no tensor 'fc1.weight' (the model has 9 tensors; the file has 7: ") &&
	      contains(err, "); also missing: fc1.bias"));

	/* a DDP-wrapped model's names */
	char names[16][64];
	n = tensors_of(P, src, t);
	for (int k = 0; k < n; k++) {
		snprintf(names[k], sizeof names[k], "module.%s", t[k].name);
		t[k].name = names[k];
	}
	CHECK(write_tensors("module.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("module.safetensors"), false, err, sizeof err) == -1);
	CHECK(contains(err, "no tensor 'conv1.weight'") &&
	      contains(err, "the file has 'module.conv1.weight': save the unwrapped module's state_dict"));

	CHECK(write_tensors("empty.safetensors", NULL, 0) == 0);
	CHECK(weights_load(P, src, at("empty.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "no tensor 'conv1.weight' (the model has 9 tensors; the file has 0)"));
	free(src);
}

/* A file without a BatchNorm's num_batches_tracked (an export that drops
 * it) loads, the count 0, as load_state_dict(strict=True) loads it; a
 * running statistic is still required. */
static void test_missing_batch_count(void)
{
	float *src = filled(P), *dst = filled(P);
	struct safetensors_typed t[16];
	int n = tensors_of(P, src, t);
	int c = find_tensor(t, n, "bn1.num_batches_tracked");
	t[c] = t[--n];
	CHECK(write_tensors("nocount.safetensors", t, n) == 0);
	CHECK(weights_load(P, dst, at("nocount.safetensors"), true, err, sizeof err) == 0);
	const struct param *count = param_named(P, "bn1.num_batches_tracked");
	int64_t v = -1;
	memcpy(&v, dst + count->offset, 8);
	CHECK(v == 0);
	const struct param *mean = param_named(P, "bn1.running_mean");
	CHECK(memcmp(src + mean->offset, dst + mean->offset, (size_t)mean->numel * 4) == 0);

	int m = find_tensor(t, n, "bn1.running_mean");
	t[m] = t[--n];
	CHECK(write_tensors("nomean.safetensors", t, n) == 0);
	CHECK(weights_load(P, dst, at("nomean.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "no tensor 'bn1.running_mean' (the model has 9 tensors; the file has 7: "));
	CHECK(!strstr(err, "num_batches_tracked"));
	free(src);
	free(dst);
}

static void test_shape(void)
{
	float *src = filled(P), big[1600] = { 0 };
	struct safetensors_typed t[16];
	int n = tensors_of(P, src, t);
	int w = find_tensor(t, n, "fc1.weight");
	t[w].shape[1] = 150;
	t[w].data = big;
	CHECK(write_tensors("shape.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("shape.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "shape.safetensors: 'fc1.weight' has shape (10, 150) in the file but (10, 144) in the model"));

	n = tensors_of(P, src, t);
	int b = find_tensor(t, n, "fc1.bias");
	t[b].shape[0] = 11;
	t[b].data = big;
	CHECK(write_tensors("shape1.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("shape1.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "'fc1.bias' has shape (11,) in the file but (10,) in the model"));

	/* a scalar written as shape [1] loads, as load_state_dict allows; [2] does not */
	n = tensors_of(P, src, t);
	int s = find_tensor(t, n, "bn1.num_batches_tracked");
	int64_t counts[2] = { 41, 42 };
	t[s].ndim = 1;
	t[s].shape[0] = 1;
	t[s].data = counts;
	CHECK(write_tensors("scalar1.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("scalar1.safetensors"), true, err, sizeof err) == 0);
	int64_t got = 0;
	memcpy(&got, src + param_named(P, "bn1.num_batches_tracked")->offset, 8);
	CHECK(got == 41);
	t[s].shape[0] = 2;
	CHECK(write_tensors("scalar2.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("scalar2.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "'bn1.num_batches_tracked' has shape (2,) in the file but () in the model"));
	free(src);
}

static void test_dtypes(void)
{
	float *src = filled(P);
	struct safetensors_typed t[16];
	int n = tensors_of(P, src, t);
	int64_t ints[10] = { 0 };
	int b = find_tensor(t, n, "fc1.bias");
	t[b].dtype = ST_I64;
	t[b].data = ints;
	CHECK(write_tensors("int.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("int.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "int.safetensors: 'fc1.bias' is I64 in the file; the model needs floating point there"));

	n = tensors_of(P, src, t);
	float one = 3;
	int s = find_tensor(t, n, "bn1.num_batches_tracked");
	t[s].dtype = ST_F32;
	t[s].data = &one;
	CHECK(write_tensors("count.safetensors", t, n) == 0);
	CHECK(weights_load(P, src, at("count.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "'bn1.num_batches_tracked' is F32 in the file; the model needs an integer count there"));

	/* F64 weights, F16 and BF16 biases, an I32 count: converted */
	n = tensors_of(P, src, t);
	const struct param *fw = param_named(P, "fc1.weight"), *cb = param_named(P, "conv1.bias"),
			   *bb = param_named(P, "bn1.bias"), *nb = param_named(P, "bn1.num_batches_tracked");
	double *f64 = malloc(1440 * sizeof *f64);
	for (int i = 0; i < 1440; i++)
		f64[i] = 0.1 * i - 7.3;
	uint16_t half[4] = { 0x3c00, 0xc000, 0x0001, 0x7c00 };   /* 1, -2, 2^-24, inf */
	uint16_t bf16[4] = { 0x3f80, 0xbfc0, 0x4049, 0xff80 };   /* 1, -1.5, 3.140625, -inf */
	int32_t count = 123456;
	t[find_tensor(t, n, "fc1.weight")].dtype = ST_F64;
	t[find_tensor(t, n, "fc1.weight")].data = f64;
	t[find_tensor(t, n, "conv1.bias")].dtype = ST_F16;
	t[find_tensor(t, n, "conv1.bias")].data = half;
	t[find_tensor(t, n, "bn1.bias")].dtype = ST_BF16;
	t[find_tensor(t, n, "bn1.bias")].data = bf16;
	t[s].dtype = ST_I32;
	t[s].data = &count;
	CHECK(write_tensors("convert.safetensors", t, n) == 0);
	float *dst = calloc((size_t)region_floats(P), 4);
	CHECK(weights_load(P, dst, at("convert.safetensors"), true, err, sizeof err) == 0);
	int same = 1;
	for (int i = 0; i < 1440; i++)
		same &= dst[fw->offset + i] == (float)f64[i];
	CHECK(same);
	CHECK(dst[cb->offset] == 1 && dst[cb->offset + 1] == -2 && dst[cb->offset + 2] == 0x1p-24f &&
	      isinf(dst[cb->offset + 3]) && dst[cb->offset + 3] > 0);
	CHECK(dst[bb->offset] == 1 && dst[bb->offset + 1] == -1.5f && dst[bb->offset + 2] == 3.140625f &&
	      isinf(dst[bb->offset + 3]) && dst[bb->offset + 3] < 0);
	int64_t got = 0;
	memcpy(&got, dst + nb->offset, 8);
	CHECK(got == 123456);
	free(f64);
	free(dst);
	free(src);
}

static void test_strict(void)
{
	float *src = filled(P), x[2] = { 1, 2 };
	struct safetensors_typed t[24];
	int n = tensors_of(P, src, t);
	static const char *const extra[] = { "zz.a", "zz.b", "head.weight", "zz.c", "zz.d", "zz.e", "zz.f" };
	t[n++] = (struct safetensors_typed){ extra[0], ST_F32, 1, { 2 }, x };
	t[n++] = (struct safetensors_typed){ extra[1], ST_F32, 1, { 2 }, x };
	CHECK(write_tensors("extra.safetensors", t, n) == 0);
	float *dst = calloc((size_t)region_floats(P), 4);
	CHECK(weights_load(P, dst, at("extra.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "extra.safetensors: 2 tensors the model does not have: zz.a, zz.b (the model has 9 "
		      "tensors, the file 11)") && contains(err, "drop those tensors from it"));
	CHECK(weights_load(P, dst, at("extra.safetensors"), false, err, sizeof err) == 0);
	CHECK(memcmp(src, dst, (size_t)region_floats(P) * 4) == 0);

	for (int k = 2; k < 7; k++)
		t[n++] = (struct safetensors_typed){ extra[k], ST_F32, 1, { 2 }, x };
	CHECK(write_tensors("extra7.safetensors", t, n) == 0);
	CHECK(weights_load(P, dst, at("extra7.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, ": 7 tensors the model does not have: head.weight, zz.a, zz.b, zz.c, zz.d, ... (the model"));
	free(src);
	free(dst);
}

/* the typed writer: widest dtype first, so 8-byte data stays aligned, and
 * one name only once across dtypes */
static void test_typed_writer(void)
{
	float f[3] = { 1, 2, 3 };
	int64_t i = 5;
	double d = 0.5;
	struct safetensors_typed t[] = { { "a", ST_F32, 1, { 3 }, f }, { "z", ST_I64, 0, { 0 }, &i },
					 { "m", ST_F64, 1, { 1 }, &d } };
	CHECK(write_tensors("typed.safetensors", t, 3) == 0);
	struct safetensors_file sf;
	CHECK(safetensors_open(&sf, at("typed.safetensors"), err, sizeof err) == 0);
	const struct safetensors_entry *z = safetensors_find(&sf, "z"), *m = safetensors_find(&sf, "m"),
				       *a = safetensors_find(&sf, "a");
	CHECK(z && m && a && z->begin == 0 && m->begin == 8 && a->begin == 16 && a->end == 28);
	CHECK(z && z->dtype == ST_I64 && m->dtype == ST_F64 && a->dtype == ST_F32);
	CHECK(z && ((uintptr_t)z->data % 8) == 0 && ((uintptr_t)m->data % 8) == 0);
	safetensors_close(&sf);
	t[2].name = "a";
	CHECK(write_tensors("typed2.safetensors", t, 3) == -1);
	CHECK(contains(err, "typed2.safetensors: tensor name 'a' given twice"));
	t[2].name = "m";
	t[2].dtype = (enum safetensors_dtype)99;
	CHECK(write_tensors("typed3.safetensors", t, 3) == -1);
	CHECK(contains(err, "tensor 'm' has dtype 99"));
}

/* a failed load leaves the parameters as they were, even when the fault is
 * in the model's last tensor */
static void test_no_partial_write(void)
{
	float *src = filled(P), big[1600] = { 0 };
	struct safetensors_typed t[16];
	int n = tensors_of(P, src, t);
	int w = find_tensor(t, n, "fc1.bias");
	t[w].shape[0] = 12;
	t[w].data = big;
	CHECK(write_tensors("late.safetensors", t, n) == 0);
	int64_t nf = region_floats(P);
	float *dst = malloc((size_t)nf * 4);
	for (int64_t i = 0; i < nf; i++)
		dst[i] = -42;
	CHECK(weights_load(P, dst, at("late.safetensors"), true, err, sizeof err) == -1);
	int untouched = 1;
	for (int64_t i = 0; i < nf; i++)
		untouched &= dst[i] == -42;
	CHECK(untouched);

	CHECK(write_text(at("junk.safetensors"), "not a safetensors file at all") == 0);
	CHECK(weights_load(P, dst, at("junk.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, at("junk.safetensors")) && contains(err, "header length"));
	CHECK(weights_load(P, dst, at("nonexistent.safetensors"), true, err, sizeof err) == -1);
	CHECK(contains(err, "nonexistent.safetensors: cannot open"));
	free(src);
	free(dst);
}

/* sharded FSDP keeps per-unit offsets, which one region cannot hold */
/* An FSDP plan still has the unsharded layout a single process uses:
 * its tensors never overlap, and its weights round-trip. */
static void test_fsdp_plan_round_trip(void)
{
	char text[1024];
	snprintf(text, sizeof text, "%sparallel fsdp {\n    wrap = size(min_params=100)\n}\n", net);
	struct plan *p = compile_at(at("fsdp.net"), text);
	CHECK(p != NULL);
	if (!p)
		return;
	int64_t n = region_floats(p);
	float *r = calloc((size_t)n + 4096, 4), *back = calloc((size_t)n + 4096, 4);
	for (int64_t i = 0; i < n; i++)
		r[i] = (float)i * 0.25f;
	CHECK(weights_save(p, r, at("fsdp.safetensors"), err, sizeof err) == 0);
	CHECK(weights_load(p, back, at("fsdp.safetensors"), true, err, sizeof err) == 0);
	for (int k = 0; k < p->nparams; k++)
		if (p->params[k].dtype == DT_F32)
			CHECK(memcmp(r + p->params[k].offset, back + p->params[k].offset, (size_t)p->params[k].numel * 4) == 0);
	free(r);
	free(back);
}

/* ---- run directories ------------------------------------------------- */

static char *argv_[] = { (char *)"trainc", (char *)"train", (char *)"a\"b\nc\\d", (char *)"x\xff" "y", NULL };

static void test_rundir_named(void)
{
	struct rundir r;
	CHECK(rundir_create(&r, at("runs/one/deep"), P, "9.8.7", 4, argv_, 3, err, sizeof err) == 0);
	CHECK_STR(rundir_path(&r), at("runs/one/deep"));
	CHECK_STR(read_text(at("runs/one/deep/model.net")), P->text);
	const char *j = read_text(at("runs/one/deep/run.json"));
	char want[128];
	snprintf(want, sizeof want, "\"plan_hash\": \"%016llx\"", (unsigned long long)P->hash);
	CHECK(contains(j, want));
	CHECK(contains(j, "\"trainc_version\": \"9.8.7\""));
	CHECK(contains(j, "\"model\": \"Net\""));
	CHECK(contains(j, "\"command\": [\"trainc\", \"train\", \"a\\\"b\\nc\\\\d\", \"x\\ufffdy\"]"));
	CHECK(contains(j, "\"net_file\": \"") && contains(j, "/net.net\""));
	CHECK(contains(j, "\"start_time\": \"20") && contains(j, "Z\",\n"));
	CHECK(contains(j, "\"hostname\": \""));
	CHECK(contains(j, "\"threads\": 3,\n"));
	CHECK(contains(j, "\"git_commit\": null") && contains(j, "\"git_dirty\": null"));

	CHECK(rundir_metric_step(&r, 3, 1, 0.25, 1e-3, 1234.5) == 0);
	CHECK(rundir_metric_step(&r, 4, 1, NAN, INFINITY, 0.1) == 0);
	CHECK(rundir_metric_eval(&r, 4, 1, 0.5, 0.9875) == 0);
	CHECK(rundir_metric_epoch(&r, 4, 1, 0.375, 99.5) == 0);
	CHECK(rundir_metric(&r, "\"kind\": \"note\", \"text\": \"hi\"") == 0);
	CHECK(rundir_metric(&r, "") == 0);
	/* flushed: readable before close */
	j = read_text(at("runs/one/deep/metrics.jsonl"));
	CHECK(contains(j, ", \"kind\": \"step\", \"step\": 3, \"epoch\": 1, \"loss\": 0.25, \"lr\": 0.001, "
		      "\"images_per_s\": 1234.5}\n"));
	CHECK(contains(j, "\"step\": 4, \"epoch\": 1, \"loss\": null, \"lr\": null, \"images_per_s\": 0.1}\n"));
	CHECK(contains(j, "\"kind\": \"eval\", \"step\": 4, \"epoch\": 1, \"loss\": 0.5, \"accuracy\": 0.9875}\n"));
	CHECK(contains(j, "\"kind\": \"epoch\", \"step\": 4, \"epoch\": 1, \"loss\": 0.375, \"images_per_s\": 99.5}\n"));
	CHECK(contains(j, ", \"kind\": \"note\", \"text\": \"hi\"}\n"));
	int lines = 0, starts = 1;
	for (const char *s = j; *s; s = strchr(s, '\n') + 1) {
		lines++;
		starts &= !strncmp(s, "{\"time\": ", 9);
	}
	CHECK(lines == 6 && starts);
	const char *last = strrchr(j, '{');
	CHECK(last && strchr(last, ',') == NULL && last[strlen(last) - 2] == '}');
	rundir_close(&r);
	rundir_close(&r);

	/* an existing empty directory is taken; a non-empty one or a file is refused */
	CHECK(mkdir(at("empty"), 0777) == 0);
	CHECK(rundir_create(&r, at("empty"), P, "v", 0, NULL, 0, err, sizeof err) == 0);
	rundir_close(&r);
	CHECK(rundir_create(&r, at("empty"), P, "v", 0, NULL, 0, err, sizeof err) == -1);
	CHECK(contains(err, "/empty: the run directory is not empty; pick another one or remove it"));
	CHECK(rundir_create(&r, at("net.net"), P, "v", 0, NULL, 0, err, sizeof err) == -1);
	CHECK(contains(err, "net.net: exists and is not a directory"));
	CHECK(rundir_metric(&r, "") == -1 && contains(r.err, "not open"));
}

static void test_rundir_default(void)
{
	char cwd[1024];
	CHECK(getcwd(cwd, sizeof cwd) != NULL);
	CHECK(chdir(tmp) == 0);
	struct rundir r1, r2, r3;
	CHECK(rundir_create(&r1, NULL, P, "v", 0, NULL, 0, err, sizeof err) == 0);
	CHECK(rundir_create(&r2, NULL, P, "v", 0, NULL, 0, err, sizeof err) == 0);
	CHECK(rundir_create(&r3, NULL, P, "v", 0, NULL, 0, err, sizeof err) == 0);
	const char *a = rundir_path(&r1), *b = rundir_path(&r2), *c = rundir_path(&r3);
	CHECK(!strncmp(a, "runs/Net-20", 11) && strlen(a) == strlen("runs/Net-20240101-120000"));
	CHECK(strcmp(a, b) != 0 && strcmp(b, c) != 0 && strcmp(a, c) != 0);
	/* in one second, -2 then -3; across a second, a new stamp */
	char want[128];
	snprintf(want, sizeof want, "%s-2", a);
	CHECK(!strcmp(b, want) || strncmp(a, b, strlen(a)) != 0);
	struct stat st;
	CHECK(stat(b, &st) == 0 && S_ISDIR(st.st_mode));
	rundir_close(&r1);
	rundir_close(&r2);
	rundir_close(&r3);
	CHECK(chdir(cwd) == 0);
}

static void test_rundir_git(void)
{
	if (system("git --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "test_rundir_git: no git on PATH; only the null case is checked\n");
		return;
	}
	const char *repo = at("repo");
	CHECK(mkdir(repo, 0777) == 0);
	struct plan *p = compile_at(at("repo/m.net"), net);
	CHECK(p != NULL);
	if (!p)
		return;
	char cmd[600], head[64] = "", want[128];
	snprintf(cmd, sizeof cmd, "cd '%s' && git init -q . && git add m.net && git -c user.name=t "
		 "-c user.email=t@example.com -c commit.gpgsign=false commit -q -m init", repo);
	CHECK(system(cmd) == 0);
	snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse HEAD", repo);
	FILE *g = popen(cmd, "r");
	CHECK(g && fgets(head, sizeof head, g));
	if (g)
		pclose(g);
	head[strcspn(head, "\n")] = 0;
	CHECK(strlen(head) == 40);

	struct rundir r;
	CHECK(rundir_create(&r, at("gitrun1"), p, "v", 0, NULL, 0, err, sizeof err) == 0);
	rundir_close(&r);
	const char *j = read_text(at("gitrun1/run.json"));
	snprintf(want, sizeof want, "\"git_commit\": \"%s\"", head);
	CHECK(contains(j, want) && contains(j, "\"git_dirty\": false"));
	CHECK(!strstr(j, "\"threads\"")); /* 0: a GPU run's, not recorded */

	FILE *f = fopen(at("repo/m.net"), "a");
	CHECK(f != NULL);
	if (f) {
		fputs("# edited\n", f);
		fclose(f);
	}
	CHECK(rundir_create(&r, at("gitrun2"), p, "v", 0, NULL, 0, err, sizeof err) == 0);
	rundir_close(&r);
	j = read_text(at("gitrun2/run.json"));
	CHECK(contains(j, want) && contains(j, "\"git_dirty\": true"));

	/* git missing from PATH: the fields are null, the run goes on */
	const char *path = getenv("PATH");
	char saved[4096];
	snprintf(saved, sizeof saved, "%s", path ? path : "/usr/bin:/bin");
	setenv("PATH", at("nothing-here"), 1);
	CHECK(rundir_create(&r, at("gitrun3"), p, "v", 0, NULL, 0, err, sizeof err) == 0);
	setenv("PATH", saved, 1);
	rundir_close(&r);
	j = read_text(at("gitrun3/run.json"));
	CHECK(contains(j, "\"git_commit\": null") && contains(j, "\"git_dirty\": null"));
}

int main(void)
{
	diag_init(&D, stderr);
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	/* the scratch directory must not count as inside whatever repository holds /tmp */
	setenv("GIT_CEILING_DIRECTORIES", "/tmp", 1);
	P = compile_at(at("net.net"), net);
	RUN(test_round_trip);
	RUN(test_torch_round_trip);
	RUN(test_torch_from_pytorch);
	RUN(test_torch_slices);
	RUN(test_missing);
	RUN(test_missing_batch_count);
	RUN(test_shape);
	RUN(test_dtypes);
	RUN(test_strict);
	RUN(test_typed_writer);
	RUN(test_no_partial_write);
	RUN(test_fsdp_plan_round_trip);
	RUN(test_rundir_named);
	RUN(test_rundir_default);
	RUN(test_rundir_git);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	arena_release(&A);
	return check_done();
}
