/* fuzz_compile.c: libFuzzer harness for the whole compiler.
 * Each input is written to a file in a private directory under /dev/shm
 * (compile_file reads a path, and imports resolve next to it), compiled
 * with its diagnostics sent to /dev/null, and, when it compiles, compiled
 * again for three ranks and printed as `trainc print` and `trainc graph`
 * would.  Everything lives in one arena, released after each input, so
 * LeakSanitizer sees any allocation that escapes it.  Build and run with
 * tests/fuzz/build.sh.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/compile.h"
#include "compiler/print.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "tests/fuzz/fuzz_dir.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], path[96];
static FILE *devnull;

static void cleanup(void)
{
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_make_dir(dir, sizeof dir);
	snprintf(path, sizeof path, "%s/input.net", dir);
	atexit(cleanup);
	devnull = fopen("/dev/null", "w");
	if (!devnull) {
		perror("trainc fuzz: /dev/null");
		exit(1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_write(path, data, size);
	struct arena arena = { 0 };
	struct diag d;
	diag_init(&d, devnull);
	struct compile_opts o = { path, 1, NULL, 0, false, false };
	struct plan *p = compile_file(&arena, &d, &o);
	if (p && !d.errors) {
		print_plan(devnull, p);
		print_graph(devnull, p);
		/* as `trainc print --gpus N` does: the plan for several ranks */
		o.world = 3;
		p = compile_file(&arena, &d, &o);
		if (p && !d.errors)
			print_plan(devnull, p);
	}
	arena_release(&arena);
	return 0;
}
