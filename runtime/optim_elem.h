/* optim_elem.h: the per-element arithmetic of optim.c's eight optimizers, and
 * the per-step coefficients it reads, shared by the CPU loops (optim.c) and
 * the CUDA update kernel (cuda/kernels_step.cu), so both run one formula.
 * nvcc compiles every function for host and device; gcc sees plain static
 * inline C.  The float rounding and the fmaf calls are optim.c's (see its
 * header comment); nothing here loops, allocates or reads a thread index.
 * Invariant: an element function reads and writes only element i.
 * Past ~150 lines because it holds all eight optimizers' element code.
 */
#ifndef OPTIM_ELEM_H
#define OPTIM_ELEM_H
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "runtime/optim.h"

#ifdef __CUDACC__
#define OPTIM_FN static inline __host__ __device__
#else
#define OPTIM_FN static inline
#endif

/* a * b rounded on its own where a sum follows: nvcc would otherwise fuse
 * the two (its default --fmad=true), which the CPU's C11 build never does */
OPTIM_FN float optim_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
	return __fmul_rn(a, b);
#else
	return a * b;
#endif
}

OPTIM_FN double optim_dmul(double a, double b)
{
#ifdef __CUDA_ARCH__
	return __dmul_rn(a, b);
#else
	return a * b;
#endif
}

/* torch.optim.SGD.  The momentum buffer is created as a copy of the first
 * step's direction, undamped; first stands for "no buffer yet". */
struct optim_sgd_k { float wd, mom, damp1, neg_lr; int has_wd, nesterov, first; };
/* torch.optim.Adam and AdamW; they differ only in where weight decay acts.
 * AdamW multiplies by (1 - lr * wd) even when wd is 0, which is exact. */
struct optim_adam_k { float wd, decay, b1, one_b1, b2, one_b2, eps, neg_step_size, bc2_sqrt; int decoupled, has_l2; };
struct optim_adadelta_k { float wd, rho, one_rho, eps, neg_lr; int has_wd; };
struct optim_adagrad_k { float wd, eps, neg_clr; int has_wd; };
struct optim_rmsprop_k { float wd, alpha, one_alpha, mom, eps, neg_lr; int has_wd; };
/* torch.optim.Adamax: exp_inf is the decayed infinity norm */
struct optim_adamax_k { float wd, b1, one_b1, b2, eps, neg_clr; int has_wd; };
/* torch.optim.RAdam: Adam's moments; while the variance's approximated
 * SMA length (rho_t) is at most 5 a step is SGD with momentum on the
 * bias-corrected mean (rectify 0) */
struct optim_radam_k { float wd, b1, one_b1, b2, one_b2, eps, bc1, lr, bc2_sqrt, rect; int has_wd, rectify; };

/* The coefficients of one step of one optimizer, and which optional state
 * planes exist.  Fits in KC_OPTIM_COEF_BYTES (cuda/kc.h) of device memory. */
struct optim_coef {
	enum optim_kind kind;
	int mom_buf;  /* SGD, RMSprop: a momentum_buffer plane */
	int amsgrad;  /* Adam(W): a max_exp_avg_sq plane */
	int centered; /* RMSprop: a grad_avg plane */
	union {
		struct optim_sgd_k sgd;
		struct optim_adam_k adam;
		struct optim_adadelta_k adadelta;
		struct optim_adagrad_k adagrad;
		struct optim_rmsprop_k rmsprop;
		struct optim_adamax_k adamax;
		struct optim_radam_k radam;
	};
};
static_assert(sizeof(struct optim_coef) <= 256, "struct optim_coef must fit KC_OPTIM_COEF_BYTES");

/* The coefficients of step `step` (1 on the first) at scheduled lr `lr`:
 * scalars rounded to float as torch passes them, step-dependent factors in
 * double as torch computes them in Python. */
OPTIM_FN struct optim_coef optim_coef_of(const struct optim_cfg *c, int64_t step, double lr)
{
	struct optim_cfg cycled;
	const double held = c->momentum; /* which planes there are: the momentum buffer's stays whatever a step's momentum */
	if (c->momentum_table) { /* OneCycleLR's momentum of this step: Adam's beta1, its bias correction's too */
		cycled = *c;
		if (c->kind == OPTIM_ADAM || c->kind == OPTIM_ADAMW || c->kind == OPTIM_ADAMAX || c->kind == OPTIM_RADAM)
			cycled.beta1 = c->momentum_table[(step - 1) % c->momentum_period];
		else
			cycled.momentum = c->momentum_table[(step - 1) % c->momentum_period];
		c = &cycled;
	}
	struct optim_coef k;
	memset(&k, 0, sizeof k);
	k.kind = c->kind;
	switch (c->kind) {
	case OPTIM_SGD:
		k.mom_buf = held != 0;
		k.sgd.wd = (float)c->weight_decay;
		k.sgd.mom = (float)c->momentum;
		k.sgd.damp1 = (float)(1.0 - c->dampening);
		k.sgd.neg_lr = (float)-lr;
		k.sgd.has_wd = c->weight_decay != 0;
		k.sgd.nesterov = c->nesterov;
		k.sgd.first = step == 1;
		break;
	case OPTIM_ADAM:
	case OPTIM_ADAMW: {
		const double bc1 = 1.0 - pow(c->beta1, (double)step), bc2 = 1.0 - pow(c->beta2, (double)step);
		const int decoupled = c->kind == OPTIM_ADAMW;
		k.amsgrad = c->amsgrad != 0;
		k.adam.wd = (float)c->weight_decay;
		k.adam.decay = (float)(1.0 - optim_dmul(lr, c->weight_decay));
		k.adam.b1 = (float)c->beta1;
		k.adam.one_b1 = (float)(1.0 - c->beta1);
		k.adam.b2 = (float)c->beta2;
		k.adam.one_b2 = (float)(1.0 - c->beta2);
		k.adam.eps = (float)c->eps;
		k.adam.neg_step_size = (float)-(lr / bc1);
		k.adam.bc2_sqrt = (float)sqrt(bc2);
		k.adam.decoupled = decoupled;
		k.adam.has_l2 = !decoupled && c->weight_decay != 0;
		break;
	}
	case OPTIM_ADADELTA:
		k.adadelta.wd = (float)c->weight_decay;
		k.adadelta.rho = (float)c->rho;
		k.adadelta.one_rho = (float)(1.0 - c->rho);
		k.adadelta.eps = (float)c->eps;
		k.adadelta.neg_lr = (float)-lr;
		k.adadelta.has_wd = c->weight_decay != 0;
		break;
	case OPTIM_ADAGRAD:
		k.adagrad.wd = (float)c->weight_decay;
		k.adagrad.eps = (float)c->eps;
		k.adagrad.neg_clr = (float)-(lr / (1.0 + optim_dmul((double)(step - 1), c->lr_decay)));
		k.adagrad.has_wd = c->weight_decay != 0;
		break;
	case OPTIM_RMSPROP:
		k.mom_buf = held > 0;
		k.centered = c->centered != 0;
		k.rmsprop.wd = (float)c->weight_decay;
		k.rmsprop.alpha = (float)c->alpha;
		k.rmsprop.one_alpha = (float)(1.0 - c->alpha);
		k.rmsprop.mom = (float)c->momentum;
		k.rmsprop.eps = (float)c->eps;
		k.rmsprop.neg_lr = (float)-lr;
		k.rmsprop.has_wd = c->weight_decay != 0;
		break;
	case OPTIM_ADAMAX:
		k.adamax.wd = (float)c->weight_decay;
		k.adamax.b1 = (float)c->beta1;
		k.adamax.one_b1 = (float)(1.0 - c->beta1);
		k.adamax.b2 = (float)c->beta2;
		k.adamax.eps = (float)c->eps;
		k.adamax.neg_clr = (float)-(lr / (1.0 - pow(c->beta1, (double)step)));
		k.adamax.has_wd = c->weight_decay != 0;
		break;
	case OPTIM_RADAM: {
		/* as torch's Python computes them, left to right, in double */
		const double s = (double)step, bc1 = 1.0 - pow(c->beta1, s), bc2 = 1.0 - pow(c->beta2, s);
		const double rho_inf = 2.0 / (1.0 - c->beta2) - 1.0;
		const double rho_t = rho_inf - optim_dmul(2.0 * s, pow(c->beta2, s)) / bc2;
		k.radam.wd = (float)c->weight_decay;
		k.radam.b1 = (float)c->beta1;
		k.radam.one_b1 = (float)(1.0 - c->beta1);
		k.radam.b2 = (float)c->beta2;
		k.radam.one_b2 = (float)(1.0 - c->beta2);
		k.radam.eps = (float)c->eps;
		k.radam.bc1 = (float)bc1;
		k.radam.lr = (float)lr;
		k.radam.bc2_sqrt = (float)sqrt(bc2);
		k.radam.rectify = rho_t > 5.0;
		k.radam.rect = k.radam.rectify ? (float)sqrt(optim_dmul(optim_dmul(rho_t - 4.0, rho_t - 2.0), rho_inf) /
							     optim_dmul(optim_dmul(rho_inf - 4.0, rho_inf - 2.0), rho_t))
					       : 1.0f;
		k.radam.has_wd = c->weight_decay != 0;
		break;
	}
	case OPTIM_KIND_COUNT: break;
	}
	return k;
}

/* The element functions take optional planes' presence as a parameter that
 * optim.c's loops pass as a literal (see the comment on its loops). */
OPTIM_FN void optim_sgd_at(const struct optim_sgd_k *k, int with_mom, float *p, const float *g, float *buf, int64_t i)
{
	float d = k->has_wd ? fmaf(k->wd, p[i], g[i]) : g[i];
	if (with_mom) {
		float b = k->first ? d : fmaf(k->damp1, d, buf[i] * k->mom);
		buf[i] = b;
		d = k->nesterov ? fmaf(k->mom, b, d) : b;
	}
	p[i] = fmaf(k->neg_lr, d, p[i]);
}

OPTIM_FN void optim_adam_at(const struct optim_adam_k *k, int amsgrad, float *p, const float *g, float *m, float *v,
			    float *vmax, int64_t i)
{
	float pi = p[i], gi = g[i];
	if (k->decoupled) pi = pi * k->decay;
	if (k->has_l2) gi = fmaf(k->wd, pi, gi);
	float mi = fmaf(k->one_b1, gi, m[i] * k->b1);
	float vi = fmaf(k->one_b2 * gi, gi, v[i] * k->b2);
	m[i] = mi;
	v[i] = vi;
	if (amsgrad) {
		/* torch.maximum: a NaN on either side wins */
		float a = vmax[i];
		vi = (a > vi || a != a) ? a : vi;
		vmax[i] = vi;
	}
	float denom = sqrtf(vi) / k->bc2_sqrt + k->eps;
	p[i] = pi + (k->neg_step_size * mi) / denom;
}

OPTIM_FN void optim_adadelta_at(const struct optim_adadelta_k *k, float *p, const float *g, float *sq, float *acc,
				int64_t i)
{
	float gi = k->has_wd ? fmaf(k->wd, p[i], g[i]) : g[i];
	float s = fmaf(k->one_rho * gi, gi, sq[i] * k->rho);
	sq[i] = s;
	float std = sqrtf(s + k->eps);
	float delta = sqrtf(acc[i] + k->eps) / std * gi;
	acc[i] = fmaf(k->one_rho * delta, delta, acc[i] * k->rho);
	p[i] = fmaf(k->neg_lr, delta, p[i]);
}

OPTIM_FN void optim_adagrad_at(const struct optim_adagrad_k *k, float *p, const float *g, float *sum, int64_t i)
{
	float gi = k->has_wd ? fmaf(k->wd, p[i], g[i]) : g[i];
	float s = fmaf(gi, gi, sum[i]);
	sum[i] = s;
	p[i] = p[i] + (k->neg_clr * gi) / (sqrtf(s) + k->eps);
}

/* buf and gavg are RMSprop's unpacked planes (NULL where absent). */
OPTIM_FN void optim_rmsprop_at(const struct optim_rmsprop_k *k, int with_mom, int centered, float *p, const float *g,
			       float *sq, float *buf, float *gavg, int64_t i)
{
	float gi = k->has_wd ? fmaf(k->wd, p[i], g[i]) : g[i];
	float s = fmaf(k->one_alpha * gi, gi, sq[i] * k->alpha);
	sq[i] = s;
	float avg;
	if (centered) {
		float ga = fmaf(k->one_alpha, gi, gavg[i] * k->alpha);
		gavg[i] = ga;
		avg = sqrtf(fmaf(-ga, ga, s));
	} else {
		avg = sqrtf(s);
	}
	avg = avg + k->eps;
	if (with_mom) {
		float b = optim_mul(buf[i], k->mom) + gi / avg;
		buf[i] = b;
		p[i] = fmaf(k->neg_lr, b, p[i]);
	} else {
		p[i] = p[i] + (k->neg_lr * gi) / avg;
	}
}

OPTIM_FN void optim_adamax_at(const struct optim_adamax_k *k, float *p, const float *g, float *m, float *u, int64_t i)
{
	float pi = p[i], gi = k->has_wd ? fmaf(k->wd, pi, g[i]) : g[i];
	float mi = fmaf(k->one_b1, gi, m[i] * k->b1);
	/* torch.amax of the decayed norm and |g| + eps: a NaN on either side wins */
	float a = u[i] * k->b2, b = fabsf(gi) + k->eps;
	float ui = (b > a || b != b) ? b : a;
	m[i] = mi;
	u[i] = ui;
	p[i] = pi + (k->neg_clr * mi) / ui;
}

/* torch's ((m / bc1) * lr * (1 / (sqrt(v) + eps) * sqrt(bc2))) * rect, a
 * product at a time, then subtracted (add_ with alpha -1) */
OPTIM_FN void optim_radam_at(const struct optim_radam_k *k, int rectify, float *p, const float *g, float *m, float *v,
			     int64_t i)
{
	float pi = p[i], gi = k->has_wd ? fmaf(k->wd, pi, g[i]) : g[i];
	float mi = fmaf(k->one_b1, gi, m[i] * k->b1);
	float vi = fmaf(k->one_b2 * gi, gi, v[i] * k->b2);
	m[i] = mi;
	v[i] = vi;
	float x = optim_mul(mi / k->bc1, k->lr);
	if (rectify) {
		float adaptive = optim_mul(1.0f / (sqrtf(vi) + k->eps), k->bc2_sqrt);
		x = optim_mul(optim_mul(x, adaptive), k->rect);
	}
	p[i] = pi - x;
}

/* One update of element i.  planes: the state planes in optim.h's order
 * (packed: RMSprop's grad_avg is planes[1] when there is no momentum
 * buffer), NULL past the kind's count. */
OPTIM_FN void optim_elem_apply(const struct optim_coef *k, float *p, const float *g, float *const planes[3], int64_t i)
{
	switch (k->kind) {
	case OPTIM_SGD: optim_sgd_at(&k->sgd, k->mom_buf, p, g, planes[0], i); break;
	case OPTIM_ADAM:
	case OPTIM_ADAMW: optim_adam_at(&k->adam, k->amsgrad, p, g, planes[0], planes[1], planes[2], i); break;
	case OPTIM_ADADELTA: optim_adadelta_at(&k->adadelta, p, g, planes[0], planes[1], i); break;
	case OPTIM_ADAGRAD: optim_adagrad_at(&k->adagrad, p, g, planes[0], i); break;
	case OPTIM_RMSPROP:
		optim_rmsprop_at(&k->rmsprop, k->mom_buf, k->centered, p, g, planes[0], k->mom_buf ? planes[1] : NULL,
				 k->centered ? planes[1 + k->mom_buf] : NULL, i);
		break;
	case OPTIM_ADAMAX: optim_adamax_at(&k->adamax, p, g, planes[0], planes[1], i); break;
	case OPTIM_RADAM: optim_radam_at(&k->radam, k->radam.rectify, p, g, planes[0], planes[1], i); break;
	case OPTIM_KIND_COUNT: break;
	}
}

/* Clipping factor of torch.nn.utils.clip_grad_norm_ (norm_type 2), at most
 * 1: torch keeps the norm as a float tensor, so (norm + 1e-6) is a float add
 * and max_norm / t is t.reciprocal() * max_norm; the clamp keeps NaN. */
OPTIM_FN float optim_elem_clip_coef(double total_norm, double max_norm)
{
	float r = 1.0f / ((float)total_norm + 1e-6f), coef = r * (float)max_norm;
	return coef > 1.0f ? 1.0f : coef;
}
#endif
