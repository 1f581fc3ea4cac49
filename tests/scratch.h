/* scratch.h: scratch memory for the kernel tests: one static arena that a
 * test resets with scratch_reset(), and random inputs that are the same on
 * every run for one seed.  Include once per test program; SCRATCH_BYTES
 * may be defined first (default 32 MiB).
 */
#ifndef TESTS_SCRATCH_H
#define TESTS_SCRATCH_H
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/philox.h"

#ifndef SCRATCH_BYTES
#define SCRATCH_BYTES (32 << 20)
#endif

static alignas(64) unsigned char arena[SCRATCH_BYTES];
static size_t arena_used;

static inline void scratch_reset(void)
{
	arena_used = 0;
}

static void *talloc(size_t bytes)
{
	void *p = arena + arena_used;
	arena_used += (bytes + 63) & ~(size_t)63;
	if (arena_used > sizeof arena) {
		fprintf(stderr, "scratch arena of %d bytes exhausted\n", SCRATCH_BYTES);
		exit(2);
	}
	memset(p, 0, bytes);
	return p;
}

static inline float *floats(size_t n)
{
	return talloc(n * sizeof(float));
}

/* n values uniform in [lo, hi), the same on every run for one seed. */
static inline float *rand_floats(size_t n, float lo, float hi, uint32_t seed)
{
	float *p = floats(n);
	struct rng r = rng_stream(seed, RNG_INIT, 0, 0);
	for (size_t i = 0; i < n; i++)
		p[i] = lo + (hi - lo) * rng_uniform(&r, i);
	return p;
}
#endif
