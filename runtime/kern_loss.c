/* kern_loss.c: the losses (mean squared error, negative log-likelihood,
 * cross-entropy over logits) with their input gradients, and the count of
 * correct argmax predictions.
 * A loss comes back as a double; the gradient is written scaled by the
 * caller's `scale`, so averaging over accumulation steps or ranks folds in for
 * free.  Sums run over PARTS fixed slices of the input, each summed in order,
 * then the slices in order: the same result for any thread count.  Class
 * targets are all checked before anything is written.
 */
#include "runtime/kern.h"
#include "runtime/loss_elem.h"

#include <math.h>
#include <string.h>

#define PARTS 64       /* slices of a loss sum; a function of nothing but the input size */
#define PAR_MIN 16384

/* [*lo, *hi) of slice p of n items. */
static void slice(size_t n, int p, size_t *lo, size_t *hi)
{
	size_t step = (n + PARTS - 1) / PARTS;
	*lo = (size_t)p * step < n ? (size_t)p * step : n;
	*hi = *lo + step < n ? *lo + step : n;
}

static double sum_parts(const double *part)
{
	double s = 0;
	for (int p = 0; p < PARTS; p++)
		s += part[p];
	return s;
}

double kern_regression(enum kern_regression kind, float param, const float *x, const float *target, float *dx, size_t n,
		       enum kern_reduction red, float scale)
{
	return kern_regression_per(kind, param, NULL, 0, x, target, dx, n, red, scale);
}

double kern_regression_per(enum kern_regression kind, float param, const float *per, int64_t nper, const float *x,
			   const float *target, float *dx, size_t n, enum kern_reduction red, float scale)
{
	double part[PARTS];
	float g = loss_regression_grad(kind, (int64_t)n, red, scale);
	#pragma omp parallel for schedule(static) if (n > PAR_MIN)
	for (int p = 0; p < PARTS; p++) {
		size_t lo, hi;
		slice(n, p, &lo, &hi);
		double s = 0;
		for (size_t i = lo; i < hi; i++) {
			float d;
			s += loss_regression_term(kind, per ? per[(int64_t)i % nper] : param, x[i], target[i], g, &d);
			if (dx)
				dx[i] = d;
		}
		part[p] = s;
	}
	double loss = sum_parts(part);
	return red == KERN_REDUCE_MEAN ? loss / (double)n : loss;
}

double kern_mse(const float *x, const float *target, float *dx, size_t n, enum kern_reduction red, float scale)
{
	return kern_regression(KERN_MSE, 0.0f, x, target, dx, n, red, scale);
}

/* The rows that count (their weights' sum where w is not NULL), or -1 if
 * a target is neither ignore_index nor a class. */
static double count_targets(const int32_t *target, int n, int c, int ignore_index, const float *w)
{
	double count = 0;
	for (int i = 0; i < n; i++) {
		if (target[i] == ignore_index)
			continue;
		if (target[i] < 0 || target[i] >= c)
			return -1;
		count += w ? w[target[i]] : 1.0f;
	}
	return count;
}

/* PyTorch's mean over zero counted rows (or weight) is 0/0: NaN loss,
 * zero gradient. */
static double reduce(double sum, double count, enum kern_reduction red)
{
	return red == KERN_REDUCE_MEAN ? (count != 0 ? sum / count : NAN) : sum;
}

/* A counted row's gradient factor: scale (signed), over the count for a mean. */
static float class_grad(double count, enum kern_reduction red, float scale)
{
	return red == KERN_REDUCE_MEAN ? (count != 0 ? scale / (float)count : 0.0f) : scale;
}

int kern_nll(const float *logp, const int32_t *target, float *dlogp, int n, int c, int ignore_index, const float *w,
	     enum kern_reduction red, float scale, double *loss)
{
	double count = count_targets(target, n, c, ignore_index, w);
	if (count < 0)
		return KERN_ERR_INDEX;
	float g = class_grad(count, red, -scale);
	double part[PARTS];
	#pragma omp parallel for schedule(static) if ((size_t)n * c > PAR_MIN)
	for (int p = 0; p < PARTS; p++) {
		size_t lo, hi;
		slice((size_t)n, p, &lo, &hi);
		double s = 0;
		for (size_t i = lo; i < hi; i++) {
			bool on = target[i] != ignore_index;
			float wt = on && w ? w[target[i]] : 1.0f;
			if (on)
				s -= wt * logp[i * c + target[i]];
			if (dlogp) {
				memset(dlogp + i * c, 0, sizeof(float) * c);
				if (on)
					dlogp[i * c + target[i]] = g * wt;
			}
		}
		part[p] = s;
	}
	*loss = reduce(sum_parts(part), count, red);
	return KERN_OK;
}

int kern_cross_entropy(const float *logits, const int32_t *target, float *dlogits, int n, int c,
		       int ignore_index, const float *w, float smoothing, enum kern_reduction red, float scale, double *loss)
{
	double count = count_targets(target, n, c, ignore_index, w);
	if (count < 0)
		return KERN_ERR_INDEX;
	float g = class_grad(count, red, scale);
	double wsum = w ? loss_class_weight_sum(w, c) : c;
	double part[PARTS];
	#pragma omp parallel for schedule(static) if ((size_t)n * c > PAR_MIN)
	for (int p = 0; p < PARTS; p++) {
		size_t lo, hi;
		slice((size_t)n, p, &lo, &hi);
		double s = 0;
		for (size_t i = lo; i < hi; i++) {
			const float *z = logits + i * c;
			bool on = target[i] != ignore_index;
			float mx = -INFINITY;
			for (int k = 0; k < c; k++)
				mx = fmaxf(mx, z[k]);
			double se = 0, zc = 0;
			for (int k = 0; k < c; k++)
				se += expf(z[k] - mx);
			if (smoothing > 0)
				for (int k = 0; k < c; k++)
					zc += w ? (double)(w[k] * (z[k] - mx)) : z[k] - mx;
			float ls = (float)log(se); /* log Σ exp(z - max), so lse = max + ls */
			float wt = on && w ? w[target[i]] : 1.0f;
			if (on && w) {
				s += loss_ce_weighted_term(ls, z[target[i]], mx, zc, wt, wsum, c, smoothing);
			} else if (on) {
				double nll = ls - (z[target[i]] - mx);
				/* the mean over classes of -log p is ls - Σ (z - max) / C */
				s += smoothing > 0 ? (1 - (double)smoothing) * nll + smoothing * (ls - zc / c) : nll;
			}
			if (!dlogits)
				continue;
			/* d/dz of lse - z[t] is softmax(z) - onehot(t); smoothing
			 * takes gu = gi eps / C from every class, gi (1 - eps) at t;
			 * class weights scale each by loss_elem.h's rule */
			float *d = dlogits + i * c, gi = on ? g : 0.0f;
			float gt = gi * (1.0f - smoothing), gu = gi * smoothing / (float)c;
			if (w) {
				float gs = loss_ce_weighted_gs(gi, smoothing, wt, wsum, c);
				for (int k = 0; k < c; k++)
					d[k] = gs * expf((z[k] - mx) - ls) - gu * w[k];
				gt *= wt;
			} else {
				for (int k = 0; k < c; k++)
					d[k] = gi * expf((z[k] - mx) - ls) - gu;
			}
			if (on)
				d[target[i]] -= gt;
		}
		part[p] = s;
	}
	*loss = reduce(sum_parts(part), count, red);
	return KERN_OK;
}

long kern_argmax_correct(const float *logits, const int32_t *target, int n, int c)
{
	long correct = 0;
	#pragma omp parallel for schedule(static) reduction(+:correct) if ((size_t)n * c > PAR_MIN)
	for (int i = 0; i < n; i++) {
		const float *z = logits + (size_t)i * c;
		int best = 0;
		for (int k = 1; k < c; k++)
			if (z[k] > z[best])
				best = k;
		correct += best == target[i];
	}
	return correct;
}
