/* emb_sort.h: the scratch the GPU's embedding backward sorts a batch's
 * tokens in (runtime/cuda/kernels_norm.cu): one 64-bit key per token,
 * padded to a power of two for its bitonic network.  The memory plan
 * (compiler/memplan.c) sizes each device's scratch buffer by it, in one
 * place so that the plan cannot drift from what the kernel uses
 * (tag: EMBEDDING_SORT).  Header-only: two small pure functions.
 */
#ifndef EMB_SORT_H
#define EMB_SORT_H
#include <stdint.h>

/* Keys the sort of `tokens` tokens runs over: the power of two at or above. */
static inline int64_t emb_sort_keys(int64_t tokens)
{
	int64_t m = 1;
	while (m < tokens)
		m <<= 1;
	return m;
}

/* Bytes of scratch for the keys of `tokens` tokens. */
static inline int64_t emb_sort_bytes(int64_t tokens)
{
	return 8 * emb_sort_keys(tokens);
}
#endif
