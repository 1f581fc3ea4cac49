/* kern_embedding.c: table look-up of rows by index, and the scatter-add of
 * the gradient back into the table.
 * Every index is checked before anything is written, so a bad index leaves
 * the outputs untouched and never reads out of bounds.  Backward splits the
 * table's columns across threads and walks the indices in order, so repeated
 * indices sum in one order whatever the thread count.
 */
#include "runtime/kern.h"

#include <string.h>

#define COLS 64 /* columns per block in backward */

static bool indices_ok(const int32_t *idx, int n, int vocab)
{
	for (int i = 0; i < n; i++)
		if (idx[i] < 0 || idx[i] >= vocab)
			return false;
	return true;
}

int kern_embedding_fwd(const int32_t *idx, const float *w, float *y, int n, int vocab, int dim)
{
	if (!indices_ok(idx, n, vocab))
		return KERN_ERR_INDEX;
	#pragma omp parallel for schedule(static) if ((size_t)n * dim > 65536)
	for (int i = 0; i < n; i++)
		memcpy(y + (size_t)i * dim, w + (size_t)idx[i] * dim, sizeof(float) * dim);
	return KERN_OK;
}

int kern_embedding_bwd(const int32_t *idx, const float *dy, float *dw, int n, int vocab, int dim, int padding_idx)
{
	if (!indices_ok(idx, n, vocab))
		return KERN_ERR_INDEX;
	int blocks = (dim + COLS - 1) / COLS;
	#pragma omp parallel for schedule(static) if ((size_t)n * dim > 65536)
	for (int b = 0; b < blocks; b++) {
		int j0 = b * COLS, len = dim - j0 < COLS ? dim - j0 : COLS;
		for (int i = 0; i < n; i++) {
			if (idx[i] == padding_idx)
				continue;
			float *restrict row = dw + (size_t)idx[i] * dim + j0;
			const float *restrict g = dy + (size_t)i * dim + j0;
			for (int j = 0; j < len; j++)
				row[j] += g[j];
		}
	}
	return KERN_OK;
}
