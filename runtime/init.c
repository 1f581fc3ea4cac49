/* init.c: torch.nn's default initialisation (Linear, Conv2d, norms,
 * Embedding, running statistics) from Philox streams.
 * Tensor `index` draws from stream rng_stream(seed, RNG_INIT, 0, index):
 * rank 0 for every rank, because all ranks must start from the same model.
 * Element e takes word e of that stream, so a range fills the same values
 * as the whole tensor would there.
 * Does not: reproduce torch's bits, or handle fan-out modes and gains other
 * than the defaults' (init_kaiming_bound takes any a, though).
 */
#include "runtime/init.h"

#include <assert.h>
#include <math.h>

#include "runtime/philox.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN 65536

int64_t init_fan_in_linear(int64_t in_features)
{
	return in_features;
}

int64_t init_fan_in_conv(int64_t in_channels, int64_t groups, int64_t kh, int64_t kw)
{
	assert(groups >= 1 && in_channels % groups == 0);
	/* the weight is (out, in / groups, kh, kw); fan_in is a slice's size */
	return in_channels / groups * kh * kw;
}

double init_kaiming_bound(int64_t fan_in, double a)
{
	assert(fan_in > 0);
	double gain = sqrt(2.0 / (1 + a * a));
	double std = gain / sqrt((double)fan_in);
	return sqrt(3.0) * std;
}

void init_uniform(float *x, int64_t first, int64_t n, float lo, float hi, uint64_t seed, uint32_t index)
{
	struct rng r = rng_stream(seed, RNG_INIT, 0, index);
	float width = hi - lo;
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
	for (int64_t j = 0; j < n; j++) x[j] = rng_uniform(&r, (uint64_t)(first + j)) * width + lo;
}

void init_normal(float *x, int64_t first, int64_t n, float mean, float std, uint64_t seed, uint32_t index)
{
	struct rng r = rng_stream(seed, RNG_INIT, 0, index);
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
	for (int64_t j = 0; j < n; j++) x[j] = rng_normal(&r, (uint64_t)(first + j)) * std + mean;
}

static void fill_const(float *x, int64_t n, float v)
{
	for (int64_t j = 0; j < n; j++) x[j] = v;
}

void init_fill(const struct init_param *p, uint64_t seed, float *x, int64_t first, int64_t n)
{
	assert(first >= 0 && n >= 0);
	if (n == 0) return; /* a weight with fan_in 0 has no elements and no bound */
	switch (p->role) {
	case INIT_LINEAR_WEIGHT:
	case INIT_CONV_WEIGHT: {
		float b = (float)init_kaiming_bound(p->fan_in, sqrt(5.0));
		init_uniform(x, first, n, -b, b, seed, p->index);
		return;
	}
	case INIT_LINEAR_BIAS:
	case INIT_CONV_BIAS: {
		/* torch: bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0 */
		float b = p->fan_in > 0 ? (float)(1.0 / sqrt((double)p->fan_in)) : 0.0f;
		init_uniform(x, first, n, -b, b, seed, p->index);
		return;
	}
	case INIT_NORM_WEIGHT:
	case INIT_RUNNING_VAR: fill_const(x, n, 1.0f); return;
	case INIT_NORM_BIAS:
	case INIT_RUNNING_MEAN: fill_const(x, n, 0.0f); return;
	case INIT_EMBEDDING: {
		init_normal(x, first, n, 0.0f, 1.0f, seed, p->index);
		if (p->padding_idx < 0) return;
		assert(p->row_len > 0);
		/* zero the part of the padding row that falls in this range */
		int64_t lo = p->padding_idx * p->row_len, hi = lo + p->row_len;
		if (lo < first) lo = first;
		if (hi > first + n) hi = first + n;
		for (int64_t e = lo; e < hi; e++) x[e - first] = 0.0f;
		return;
	}
	}
	assert(0 && "not an init role");
}
