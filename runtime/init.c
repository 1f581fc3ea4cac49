/* init.c: torch.nn's default initialisation (Linear, Conv2d, norms,
 * Embedding, running statistics), drawn as torch's CPU kernels draw it.
 * uniform_(lo, hi) on float takes one 32-bit word per element, keeps its low
 * 24 bits u and returns u * 2^-24 * (hi - lo) + lo, the multiply and add
 * fused (as PyTorch's builds compile it); normal_ on a contiguous float
 * tensor of 16 or more elements fills it with such uniforms, then turns
 * each 16 into normals by Box-Muller, pairing element j with j + 8 (a
 * partial last 16 is drawn again over the tensor's last 16 elements);
 * smaller ones take normal_distribution<double> per element, which draws
 * two 53-bit uniforms for two normals and keeps the second for the next
 * call, in the generator.
 * Does not: handle fan-out modes and gains other than the defaults'
 * (init_kaiming_bound takes any a, though); run in parallel (the generator
 * is sequential, a few nanoseconds a draw).
 */
#include "runtime/init.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

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

void init_gen_seed(struct init_gen *g, uint64_t seed)
{
	mt19937_seed(&g->mt, seed);
	g->has_spare = false;
	g->spare = 0;
}

/* uniform_real_distribution<float>(lo, hi) */
static float uniform_f(struct init_gen *g, float lo, float hi)
{
	float u = (float)(mt19937_next(&g->mt) & 0xffffffu) * (1.0f / 16777216.0f);
	return fmaf(u, hi - lo, lo);
}

/* normal_distribution<double>(mean, std) */
static double normal_d(struct init_gen *g, double mean, double std)
{
	if (g->has_spare) {
		g->has_spare = false;
		return g->spare * std + mean;
	}
	double u[2];
	for (int k = 0; k < 2; k++) { /* random64: the first word high */
		uint64_t hi = mt19937_next(&g->mt), lo = mt19937_next(&g->mt);
		u[k] = (double)((hi << 32 | lo) & ((UINT64_C(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
	}
	double r = sqrt(-2.0 * log(1.0 - u[1])), theta = 2.0 * 3.14159265358979323846 * u[0];
	g->spare = r * sin(theta);
	g->has_spare = true;
	return r * cos(theta) * std + mean;
}

void init_uniform(struct init_gen *g, float *x, int64_t n, float lo, float hi)
{
	if (!x) {
		for (int64_t j = 0; j < n; j++)
			(void)mt19937_next(&g->mt);
		return;
	}
	for (int64_t j = 0; j < n; j++)
		x[j] = uniform_f(g, lo, hi);
}

/* 16 uniforms in [0, 1) at d into 8 pairs of normals */
static void box_muller16(float *d, float mean, float std)
{
	for (int j = 0; j < 8; j++) {
		float u1 = 1 - d[j], u2 = d[j + 8]; /* (0, 1] for the log */
		float radius = sqrtf(-2 * logf(u1));
		float theta = (float)(2.0 * 3.14159265358979323846 * u2);
		d[j] = fmaf(radius * cosf(theta), std, mean);
		d[j + 8] = fmaf(radius * sinf(theta), std, mean);
	}
}

void init_normal(struct init_gen *g, float *x, int64_t n, float mean, float std)
{
	if (n < 16) { /* per element, through the generator's spare */
		for (int64_t j = 0; j < n; j++) {
			float v = (float)normal_d(g, mean, std);
			if (x)
				x[j] = v;
		}
		return;
	}
	if (!x) {
		init_uniform(g, NULL, n + (n % 16 ? 16 : 0), 0, 1);
		return;
	}
	for (int64_t j = 0; j < n; j++)
		x[j] = uniform_f(g, 0, 1);
	for (int64_t j = 0; j + 16 <= n; j += 16)
		box_muller16(x + j, mean, std);
	if (n % 16) { /* the last 16 drawn again */
		for (int j = 0; j < 16; j++)
			x[n - 16 + j] = uniform_f(g, 0, 1);
		box_muller16(x + n - 16, mean, std);
	}
}

static void fill_const(float *x, int64_t n, float v)
{
	for (int64_t j = 0; x && j < n; j++)
		x[j] = v;
}

void init_fill(const struct init_param *p, struct init_gen *g, float *x, int64_t n)
{
	assert(n >= 0);
	if (n == 0) return; /* a weight with fan_in 0 has no elements and no bound */
	switch (p->role) {
	case INIT_LINEAR_WEIGHT:
	case INIT_CONV_WEIGHT: {
		float b = (float)init_kaiming_bound(p->fan_in, sqrt(5.0));
		init_uniform(g, x, n, -b, b);
		return;
	}
	case INIT_LINEAR_BIAS:
	case INIT_CONV_BIAS: {
		/* torch: bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0 */
		float b = p->fan_in > 0 ? (float)(1.0 / sqrt((double)p->fan_in)) : 0.0f;
		init_uniform(g, x, n, -b, b);
		return;
	}
	case INIT_NORM_WEIGHT:
	case INIT_RUNNING_VAR: fill_const(x, n, 1.0f); return;
	case INIT_NORM_BIAS:
	case INIT_RUNNING_MEAN: fill_const(x, n, 0.0f); return;
	case INIT_CONST: fill_const(x, n, p->value); return;
	case INIT_EMBEDDING: {
		init_normal(g, x, n, 0.0f, 1.0f);
		if (p->padding_idx < 0 || !x) return;
		assert(p->row_len > 0 && (p->padding_idx + 1) * p->row_len <= n);
		for (int64_t e = 0; e < p->row_len; e++)
			x[p->padding_idx * p->row_len + e] = 0.0f;
		return;
	}
	}
	assert(0 && "not an init role");
}
