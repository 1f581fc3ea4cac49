/* fuzz_files.c: libFuzzer harness for the readers of the binary files a
 * user hands trainc: safetensors weights (--init, and every checkpoint's
 * tensors) and IDX datasets, raw or gzip-compressed.  The first byte of an
 * input picks the reader, the rest is the file:
 *   0  safetensors_parse over the bytes in memory (a torch.save archive
 *      is parsed too, by torchfile_parse), then every tensor read as F32
 *      and every metadata key looked up;
 *   1  weights_load of the bytes as a file into a small model's parameters
 *      (a convolution, a batch norm with its I64 counter, a linear layer),
 *      strict and not, which must leave the parameters untouched when it
 *      fails (its documented invariant: a failure here aborts the run);
 *   2  idx_open and idx_read of the bytes as a file, which must deliver
 *      exactly the header's count of bytes or fail.
 * Files are written in a private directory under /dev/shm.  Build and run
 * with `sh tests/fuzz/build.sh SECONDS files`.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/compile.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/idx.h"
#include "runtime/safetensors.h"
#include "runtime/weights.h"
#include "tests/fuzz/fuzz_dir.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char model_text[] = "model Small {\n"
				 "    input(1, 6, 6)\n"
				 "    conv = conv2d(1, 2, kernel=3)\n"
				 "    bn = batchnorm2d(2)\n"
				 "    relu\n"
				 "    flatten\n"
				 "    fc = linear(32, 3)\n"
				 "}\n";

static char dir[64], net_path[96], path[96];
static struct arena arena;
static const struct plan *plan;
static float *params, *before;
static size_t params_bytes;

static void cleanup(void)
{
	unlink(path);
	unlink(net_path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_make_dir(dir, sizeof dir);
	snprintf(net_path, sizeof net_path, "%s/small.net", dir);
	snprintf(path, sizeof path, "%s/input", dir);
	atexit(cleanup);
	fuzz_write(net_path, model_text, sizeof model_text - 1);
	struct diag d;
	diag_init(&d, stderr);
	struct compile_opts o = { net_path, 1, NULL, 0, false, false };
	plan = compile_file(&arena, &d, &o);
	if (!plan || d.errors) {
		fprintf(stderr, "trainc fuzz: the harness's model does not compile\n");
		exit(1);
	}
	params_bytes = (size_t)plan->unsharded_elems * sizeof(float); /* as exec_init allocates them */
	params = malloc(params_bytes);
	before = malloc(params_bytes);
	if (!params || !before) {
		fprintf(stderr, "trainc fuzz: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < params_bytes / sizeof(float); i++)
		before[i] = (float)i * 0.25f - 3.0f;
	return 0;
}

static void parse_safetensors(const uint8_t *data, size_t size)
{
	struct safetensors_file f = { 0 };
	char err[512];
	if (safetensors_parse(&f, data, size, "input", err, sizeof err) == 0) {
		for (int i = 0; i < f.n; i++) {
			const struct safetensors_entry *e = &f.tensors[i];
			if (safetensors_find(&f, e->name) != e)
				abort(); /* every tensor is found under its own name */
			if (e->numel > 1 << 16)
				continue;
			float *dst = malloc(((size_t)e->numel + 1) * sizeof *dst);
			if (!dst)
				abort();
			(void)safetensors_read_f32(&f, e->name, -1, NULL, dst, err, sizeof err);
			free(dst);
		}
		for (int i = 0; i < f.nmeta; i++)
			if (!safetensors_meta_get(&f, f.meta[i].key))
				abort();
	}
	safetensors_close(&f);
}

static void load_weights(const uint8_t *data, size_t size)
{
	char err[1024];
	fuzz_write(path, data, size);
	for (int strict = 0; strict < 2; strict++) {
		memcpy(params, before, params_bytes);
		if (weights_load(plan, params, path, strict, err, sizeof err) != 0 &&
		    memcmp(params, before, params_bytes) != 0) {
			fprintf(stderr, "trainc fuzz: a failed weights_load changed the parameters: %s\n", err);
			abort();
		}
	}
}

static void read_idx(const uint8_t *data, size_t size)
{
	char err[1024];
	struct idx_file f = { 0 };
	fuzz_write(path, data, size);
	if (idx_open(&f, path, 0, err, sizeof err) == 0 && f.count <= 1 << 24) {
		uint8_t *dst = malloc((size_t)f.count + 1);
		if (!dst)
			abort();
		(void)idx_read(&f, dst, err, sizeof err);
		free(dst);
	}
	idx_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0: parse_safetensors(data + 1, size - 1); break;
	case 1: load_weights(data + 1, size - 1); break;
	default: read_idx(data + 1, size - 1); break;
	}
	return 0;
}
