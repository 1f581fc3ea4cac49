/* kern_dropout.c: inverted dropout for training.  Element i is kept iff
 * rng_uniform(r, i) >= p and then scaled by 1/(1-p); the mask is saved as
 * bytes for backward.  Each element's fate is a pure function of the stream
 * and i, so masks do not depend on the thread count.  Evaluation is the
 * identity and needs no call.  p = 1 drops everything (no 1/0 is formed).
 */
#include "runtime/kern.h"

#define PAR_MIN 65536

void kern_dropout_fwd(const float *x, float *y, uint8_t *mask, size_t n, float p, const struct rng *r)
{
	float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
	size_t blocks = (n + 3) / 4; /* one Philox block gives the words of 4 elements */
	#pragma omp parallel for schedule(static) if (n > PAR_MIN)
	for (size_t b = 0; b < blocks; b++) {
		uint32_t w[4];
		philox_block(r, b, w);
		for (size_t i = b * 4, j = 0; j < 4 && i < n; i++, j++) {
			/* the same number as rng_uniform(r, i) */
			float u = (float)(w[j] >> 8) * (1.0f / 16777216.0f);
			uint8_t keep = u >= p;
			mask[i] = keep;
			y[i] = keep ? x[i] * scale : 0.0f;
		}
	}
}

void kern_dropout_bwd(const float *dy, const uint8_t *mask, float *dx, size_t n, float p)
{
	float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
	#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
	for (size_t i = 0; i < n; i++)
		dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}
