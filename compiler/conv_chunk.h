/* conv_chunk.h: how the CPU convolutions (runtime/kern_conv2d.c) cut a
 * batch for oneDNN, and how many of the pieces run at once: the rule the
 * memory plan (compiler/memplan.c) sizes the workspace by, in one place so
 * that the plan cannot drift from what the kernel does
 * (tag: CONV_WORKSPACE).  Header-only: two small pure functions.
 */
#ifndef CONV_CHUNK_H
#define CONV_CHUNK_H
#include <stdbool.h>
#include <stdint.h>

/* Images per primitive call.  At 1 thread, chunks of 1, 2, 4 and 8 images ran
 * conv2 within 5% of each other, 32 and 64 at 25-40% slower (staging copies
 * fall out of cache); 4 beat 1 by 10% on 7x7 images, where per-call costs
 * show.  Winograd: chunks of 8 and 16 within 2% on the seed CNN at 1 thread,
 * 32 5% slower, 64 18%; a chunk's input and output at most 4 MiB (3.7 MB for
 * 16 of conv2's images), so large images take fewer per chunk and the
 * workspace does not grow 4x over direct's. */
enum { CONV_DNNL_CHUNK = 4, CONV_WINO_CHUNK = 16, CONV_WINO_CHUNK_BYTES = 4 << 20 };
/* Chunks in flight at once, one per thread; more threads than this idle. */
enum { CONV_SLOTS = 16 };

/* Images per chunk of a batch of n, each image's input and output
 * image_bytes together: the largest divisor of n up to the cap, so that one
 * primitive serves every chunk. */
static inline int64_t conv_chunk(int64_t n, int64_t image_bytes, bool winograd)
{
	int64_t cap = CONV_DNNL_CHUNK;
	if (winograd) {
		int64_t fit = CONV_WINO_CHUNK_BYTES / (image_bytes > 0 ? image_bytes : 1);
		cap = fit < 1 ? 1 : fit < CONV_WINO_CHUNK ? fit : CONV_WINO_CHUNK;
	}
	int64_t b = n < cap ? n : cap;
	while (b > 1 && n % b)
		b--;
	return b;
}

/* Chunks of a batch of n that run at once. */
static inline int conv_slots(int64_t n, int64_t chunk)
{
	int64_t chunks = n / chunk;
	return chunks < CONV_SLOTS ? (int)chunks : CONV_SLOTS;
}
#endif
