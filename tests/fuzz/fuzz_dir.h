/* fuzz_dir.h: what both fuzzing harnesses need to hand their inputs to
 * code that reads paths: a private directory (in memory, /dev/shm, where
 * there is one) and whole-file writes into it.  Header-only.
 */
#ifndef FUZZ_DIR_H
#define FUZZ_DIR_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Make a private directory into dir (n bytes), or end the process. */
static void fuzz_make_dir(char *dir, size_t n)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(dir, n, "%s/trainc-fuzz-XXXXXX", base); /* mkdtemp fills in the Xs */
	if (!mkdtemp(dir)) {
		perror("trainc fuzz: mkdtemp");
		exit(1);
	}
}

/* Write size bytes to path, replacing it, or abort (a harness fault, not a find). */
static void fuzz_write(const char *path, const void *bytes, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) {
		perror("trainc fuzz: writing the input");
		abort();
	}
}
#endif
