/* tiny.h: a whole training step of a small model in one thread block.
 * A model such as the DDP tutorial's ToyModel (Linear(10, 10) - ReLU -
 * Linear(10, 5), a batch of 20) does far too little per layer to fill a
 * GPU: launched layer by layer its step is a row of tiny kernels, each
 * paying a launch.  For a chain of linear layers, activations and
 * (log-)softmax, batch, layer and group norms (instance norm too), with a regression loss (pos_weight too), nll or
 * cross-entropy (class weights, ignore_index, label smoothing), one block
 * instead gathers the batch, runs the forward, the loss, the backward and
 * the optimizer, records the loss and advances the step, with a barrier
 * between layers: one kernel per step.
 * It works on the executor's own memory (same parameters, gradients,
 * optimizer planes and activation buffers), so evaluation, checkpoints and
 * the step-by-step path see one state.
 * The step's activations and their gradients (the plan's training
 * activation region) and the gathered targets live in the block's shared
 * memory when they fit in TINY_SMEM_BYTES: no layer then waits on a round
 * trip to L2 for what the layer before wrote (tiny_at maps an executor
 * address into it; parameters, gradients and optimizer state stay in
 * global memory, where they persist).  Sums over the block take a warp
 * butterfly and one pass over the warps' sums: two barriers each.
 * The program (struct tiny_prog) is built once on the host (tiny.c); the
 * interpreter below is plain C as well, so tests/test_cuda_tiny.c runs it
 * on the CPU with one "thread" against the CPU backend.
 * Does not: run dropout, residuals or convolutions,
 * accumulate micro-batches or reduce across ranks; tiny_plan
 * says which plans qualify.
 */
#ifndef TINY_H
#define TINY_H
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/act_elem.h"
#include "runtime/cuda/body.h"
#include "runtime/optim.h"
#include "runtime/optim_elem.h"

#ifdef __CUDACC__
#define TINY_FN static inline __device__
#define TINY_SYNC() __syncthreads()
#else
#define TINY_FN static inline
#define TINY_SYNC() ((void)0)
#endif

enum { TINY_MAX_LAYERS = 16, TINY_THREADS = 256, TINY_SMEM_BYTES = 32 << 10 };
/* tiny_sum's butterfly takes every lane of each warp: whole warps only */
static_assert(TINY_THREADS % 32 == 0 && TINY_THREADS <= 1024, "TINY_THREADS: whole warps, at most 1024");
enum tiny_op { TINY_LINEAR, TINY_RELU, TINY_TANH, TINY_SIGMOID, TINY_GELU, TINY_ACT, TINY_SOFTMAX, TINY_NORM, TINY_BATCHNORM, TINY_VIEW };
enum tiny_loss { TINY_REGRESSION, TINY_NLL, TINY_CROSS_ENTROPY };

struct tiny_layer {
	int op;
	const float *x;      /* input activation */
	float *y;            /* output activation (a view: y is x) */
	const float *dy;     /* gradient of the output */
	float *dx;           /* gradient of the input, NULL where none is needed */
	const float *w, *b;  /* linear: weight (m, k), bias (m) or NULL */
	float *dw, *db;      /* their gradients, NULL when frozen */
	int k, m;            /* linear: in and out features per sample */
	int64_t count;       /* elementwise: elements over the batch */
	enum kern_gelu gelu; /* TINY_GELU: approximate= */
	enum kern_act act;   /* TINY_ACT: one of act_elem.h's, with its numbers */
	float act_a, act_b;
	int dim, inner;      /* TINY_SOFTMAX: each row's length and stride, count / dim rows */
	bool log_out;        /* TINY_SOFTMAX: log_softmax */
	/* TINY_NORM: rows of cpg channels of hw elements, groups rows a
	 * sample (a layer norm: one row of d = cpg a sample's position,
	 * hw 1); w, b: gamma and beta per channel; each row's mean and
	 * invstd (the executor's saved ones) */
	int groups, cpg, hw;
	int64_t rows;
	float eps;
	float *mean, *invstd;
	/* TINY_BATCHNORM: channels of hw elements a sample (hw above), each
	 * normalised over the batch; mean and invstd per channel; the running
	 * statistics and their count, NULL where not tracked */
	int channels;
	float momentum;
	float *running_mean, *running_var;
	int64_t *tracked;
};

/* Row q of a softmax layer's count / dim: where its first element lies. */
TINY_FN int64_t tiny_row(const struct tiny_layer *L, int64_t q)
{
	return q / L->inner * L->dim * L->inner + q % L->inner;
}

struct tiny_prog {
	int nlayers, n;                 /* layers after the input; the batch */
	struct tiny_layer layer[TINY_MAX_LAYERS];
	/* the batch: rows order[*pos + r] of the dataset on the device */
	const uint32_t *data_x, *data_y;
	int64_t xw, yw;                 /* 32-bit words per sample's input and target */
	const int64_t *order;
	int64_t *pos;
	uint32_t *in, *ybuf;
	/* the loss of the last layer's output */
	enum tiny_loss loss;
	int per;                        /* values per sample of the output (classes) */
	enum kern_reduction red;
	float scale;
	float smoothing;                /* cross-entropy's label smoothing */
	int32_t ignore_index;           /* nll's and cross-entropy's: rows of this target count for nothing */
	enum kern_regression regression; /* TINY_REGRESSION's loss (mse, l1, ...), and its beta or delta */
	float regression_param;
	/* the loss's weights, set before tiny_build (device memory on the GPU;
	 * NULL: none): bce_with_logits' pos_weight per output, in place of
	 * regression_param, or the classes' weights, with their sum */
	const float *loss_w;
	int64_t nloss_w;
	double loss_wsum;
	const float *out;
	float *dout;
	double weight;                  /* the recorded step loss is weight * loss */
	double *step_loss;
	int32_t *bad_target;
	/* the optimizer over the trainable region, after clipping its
	 * gradients to a global norm of clip (0: none) */
	double clip;
	struct optim_cfg cfg;
	const double *lr_table;
	int64_t *step;                  /* finished steps; this one is *step + 1 */
	float *params, *grads;
	float *planes[3];               /* optimizer state planes (optim_elem_apply's), NULL past the kind's */
	int64_t trainable;
	double *hist;                   /* hist[*step % cap] := the step's loss */
	int64_t cap;
	/* ranges of executor memory kept in shared memory instead (bytes == 0:
	 * none): the training activations, then the targets */
	const char *sm_base[2];
	int64_t sm_bytes[2], sm_off[2];
};

/* Where the step keeps executor address a: its shared-memory copy when a
 * is in one of P's ranges and smem is given, else a itself. */
TINY_FN void *tiny_at(const struct tiny_prog *P, char *smem, const void *a)
{
	const char *c = (const char *)a;
	for (int r = 0; smem && r < 2; r++)
		if (c >= P->sm_base[r] && c < P->sm_base[r] + P->sm_bytes[r])
			return smem + P->sm_off[r] + (c - P->sm_base[r]);
	return (void *)c;
}

/* Sum of v over the block's threads, the same in each and in a fixed
 * order; sh: nt doubles.  On the GPU: each warp's butterfly, then the
 * warps' sums in order (nt a multiple of 32). */
TINY_FN double tiny_sum(int tid, int nt, double v, double *sh)
{
#ifdef __CUDACC__
	for (int s = 16; s > 0; s >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, s);
	if ((tid & 31) == 0)
		sh[tid >> 5] = v;
	TINY_SYNC();
	double r = 0;
	for (int w = 0; w < nt / 32; w++)
		r += sh[w];
	TINY_SYNC(); /* sh is free again */
	return r;
#else
	(void)tid, (void)nt, (void)sh;
	return v; /* one thread */
#endif
}

TINY_FN void tiny_forward(int tid, int nt, const struct tiny_prog *P, char *smem, const struct tiny_layer *L, int n)
{
	const float *x = (const float *)tiny_at(P, smem, L->x);
	float *y = (float *)tiny_at(P, smem, L->y);
	switch (L->op) {
	case TINY_LINEAR:
		for (int64_t i = tid; i < (int64_t)n * L->m; i += nt) {
			int64_t r = i / L->m;
			int j = (int)(i % L->m);
			const float *xr = x + r * L->k, *wj = L->w + (int64_t)j * L->k;
			float acc = 0.0f;
			for (int q = 0; q < L->k; q++)
				acc += xr[q] * wj[q];
			y[i] = L->b ? acc + L->b[j] : acc;
		}
		break;
	case TINY_RELU: for (int64_t i = tid; i < L->count; i += nt) y[i] = body_relu_fwd(x[i]); break;
	case TINY_TANH: for (int64_t i = tid; i < L->count; i += nt) y[i] = body_tanh_fwd(x[i]); break;
	case TINY_SIGMOID: for (int64_t i = tid; i < L->count; i += nt) y[i] = body_sigmoid_fwd(x[i]); break;
	case TINY_GELU: for (int64_t i = tid; i < L->count; i += nt) y[i] = body_gelu_fwd(x[i], L->gelu); break;
	case TINY_ACT: for (int64_t i = tid; i < L->count; i += nt) y[i] = act_elem_fwd(L->act, x[i], L->act_a, L->act_b); break;
	case TINY_SOFTMAX:
		for (int64_t q = tid; q < L->count / L->dim; q += nt)
			body_softmax_row(x + tiny_row(L, q), y + tiny_row(L, q), L->dim, L->inner, L->log_out);
		break;
	case TINY_NORM: {
		float *mean = (float *)tiny_at(P, smem, L->mean), *invstd = (float *)tiny_at(P, smem, L->invstd);
		int64_t d = (int64_t)L->cpg * L->hw;
		for (int64_t r = tid; r < L->rows; r += nt)
			body_groupnorm_row(x + r * d, L->w, L->b, y + r * d, body_gn_c0(r, L->groups, L->cpg), L->cpg, L->hw, L->eps,
					   &mean[r], &invstd[r]);
		break;
	}
	case TINY_BATCHNORM: {
		float *mean = (float *)tiny_at(P, smem, L->mean), *invstd = (float *)tiny_at(P, smem, L->invstd);
		for (int ch = tid; ch < L->channels; ch += nt)
			body_bn_train_channel(x, L->w, L->b, y, L->running_mean, L->running_var, n, L->channels, L->hw, ch, L->eps,
					      L->momentum, &mean[ch], &invstd[ch]);
		if (tid == 0 && L->tracked)
			*L->tracked += 1;
		break;
	}
	case TINY_VIEW: break;
	}
}

/* Gradients are written, not added: the step has one micro-batch. */
TINY_FN void tiny_backward(int tid, int nt, const struct tiny_prog *P, char *smem, const struct tiny_layer *L, int n)
{
	const float *x = (const float *)tiny_at(P, smem, L->x), *y = (const float *)tiny_at(P, smem, L->y);
	const float *dy = (const float *)tiny_at(P, smem, L->dy);
	float *dx = L->dx ? (float *)tiny_at(P, smem, L->dx) : NULL;
	switch (L->op) {
	case TINY_LINEAR:
		if (dx)
			for (int64_t i = tid; i < (int64_t)n * L->k; i += nt) {
				int64_t r = i / L->k;
				int q = (int)(i % L->k);
				float acc = 0.0f;
				for (int j = 0; j < L->m; j++)
					acc += dy[r * L->m + j] * L->w[(int64_t)j * L->k + q];
				dx[i] = acc;
			}
		if (L->dw)
			for (int64_t i = tid; i < (int64_t)L->m * L->k; i += nt) {
				int64_t j = i / L->k;
				int q = (int)(i % L->k);
				float acc = 0.0f;
				for (int r = 0; r < n; r++)
					acc += dy[(int64_t)r * L->m + j] * x[(int64_t)r * L->k + q];
				L->dw[i] = acc;
			}
		if (L->db)
			for (int j = tid; j < L->m; j += nt)
				L->db[j] = body_bias_grad_col(dy, n, L->m, j);
		break;
	case TINY_RELU: if (dx) for (int64_t i = tid; i < L->count; i += nt) dx[i] = body_relu_bwd(y[i], dy[i]); break;
	case TINY_TANH: if (dx) for (int64_t i = tid; i < L->count; i += nt) dx[i] = body_tanh_bwd(y[i], dy[i]); break;
	case TINY_SIGMOID: if (dx) for (int64_t i = tid; i < L->count; i += nt) dx[i] = body_sigmoid_bwd(y[i], dy[i]); break;
	case TINY_GELU: if (dx) for (int64_t i = tid; i < L->count; i += nt) dx[i] = body_gelu_bwd(x[i], dy[i], L->gelu); break;
	case TINY_ACT:
		if (dx)
			for (int64_t i = tid; i < L->count; i += nt)
				dx[i] = act_elem_bwd(L->act, x[i], dy[i], L->act_a, L->act_b);
		break;
	case TINY_SOFTMAX:
		if (dx)
			for (int64_t q = tid; q < L->count / L->dim; q += nt)
				body_softmax_bwd_row(y + tiny_row(L, q), dy + tiny_row(L, q), dx + tiny_row(L, q), L->dim, L->inner, L->log_out);
		break;
	case TINY_NORM: {
		const float *mean = (const float *)tiny_at(P, smem, L->mean), *invstd = (const float *)tiny_at(P, smem, L->invstd);
		int64_t d = (int64_t)L->cpg * L->hw;
		if (dx)
			for (int64_t r = tid; r < L->rows; r += nt)
				body_groupnorm_bwd_row(x + r * d, L->w, body_gn_c0(r, L->groups, L->cpg), L->cpg, L->hw, mean[r], invstd[r],
						       dy + r * d, dx + r * d);
		if (L->dw || L->db)
			for (int ch = tid; ch < L->groups * L->cpg; ch += nt) {
				if (L->dw)
					L->dw[ch] = 0.0f;
				if (L->db)
					L->db[ch] = 0.0f;
				body_gn_param_chan(x, dy, mean, invstd, (int)(L->rows / L->groups), L->groups, L->cpg, L->hw, ch, L->dw,
						   L->db);
			}
		break;
	}
	case TINY_BATCHNORM: {
		const float *mean = (const float *)tiny_at(P, smem, L->mean), *invstd = (const float *)tiny_at(P, smem, L->invstd);
		for (int ch = tid; ch < L->channels; ch += nt) {
			double sdy, sdyx;
			body_bn_bwd_channel(x, L->w, mean[ch], invstd[ch], dy, dx, n, L->channels, L->hw, ch, &sdy, &sdyx);
			if (L->dw)
				L->dw[ch] = (float)(sdyx * invstd[ch]);
			if (L->db)
				L->db[ch] = (float)sdy;
		}
		break;
	}
	case TINY_VIEW: break;
	}
}

/* The loss and its gradient; thread 0 records weight * loss. */
TINY_FN void tiny_loss_step(int tid, int nt, const struct tiny_prog *P, char *smem, double *sh)
{
	int n = P->n, c = P->per;
	double sum = 0;
	const float *out = (const float *)tiny_at(P, smem, P->out);
	float *dout = (float *)tiny_at(P, smem, P->dout);
	const void *ybuf = tiny_at(P, smem, P->ybuf);
	if (P->loss == TINY_REGRESSION) {
		int64_t count = (int64_t)n * c;
		float g = loss_regression_grad(P->regression, count, P->red, P->scale);
		const float *t = (const float *)ybuf;
		for (int64_t i = tid; i < count; i += nt) {
			float param = P->loss_w ? P->loss_w[i % P->nloss_w] : P->regression_param;
			sum += loss_regression_term(P->regression, param, out[i], t[i], g, &dout[i]);
		}
		sum = tiny_sum(tid, nt, sum, sh);
		if (tid == 0)
			*P->step_loss = P->weight * body_loss_reduce(sum, count, P->red);
		return;
	}
	const int32_t *t = (const int32_t *)ybuf;
	const float *w = P->loss_w;
	double counted = 0;
	int bad = 0;
	for (int r = tid; r < n; r += nt)
		counted += body_target_count(w, t[r], c, P->ignore_index, &bad);
	counted = tiny_sum(tid, nt, counted, sh);
	if (bad)
		*P->bad_target = 1;
	float g = body_class_grad(counted, P->red, P->scale);
	for (int r = tid; r < n; r += nt) {
		bool on = t[r] != P->ignore_index && !body_target_bad(t[r], c, P->ignore_index);
		const float *z = out + (int64_t)r * c;
		float *d = dout + (int64_t)r * c;
		if (P->loss == TINY_CROSS_ENTROPY) {
			sum += body_ce_row(z, c, t[r], on, g, P->smoothing, w, P->loss_wsum, d);
			continue;
		}
		float wt = body_class_weight(w, t[r], on);
		if (on)
			sum -= wt * z[t[r]];
		for (int k = 0; k < c; k++)
			d[k] = body_nll_grad(k, t[r], on, g) * wt;
	}
	sum = tiny_sum(tid, nt, sum, sh);
	if (tid == 0)
		*P->step_loss = P->weight * body_loss_reduce(sum, counted, P->red);
}

/* One training step by thread tid of nt; sh: nt doubles of shared memory,
 * coef: room for the step's optimizer coefficients (shared), smem:
 * TINY_SMEM_BYTES of shared memory for P's ranges (NULL: none). */
TINY_FN void tiny_run(int tid, int nt, const struct tiny_prog *P, double *sh, struct optim_coef *coef, char *smem)
{
	int n = P->n;
	int64_t pos = *P->pos;
	uint32_t *in = (uint32_t *)tiny_at(P, smem, P->in), *ybuf = (uint32_t *)tiny_at(P, smem, P->ybuf);
	for (int64_t i = tid; i < (int64_t)n * P->xw; i += nt)
		in[i] = P->data_x[P->order[pos + i / P->xw] * P->xw + i % P->xw];
	for (int64_t i = tid; i < (int64_t)n * P->yw; i += nt)
		ybuf[i] = P->data_y[P->order[pos + i / P->yw] * P->yw + i % P->yw];
	TINY_SYNC();
	for (int l = 0; l < P->nlayers; l++) {
		tiny_forward(tid, nt, P, smem, &P->layer[l], n);
		TINY_SYNC();
	}
	tiny_loss_step(tid, nt, P, smem, sh);
	TINY_SYNC();
	for (int l = P->nlayers - 1; l >= 0; l--) {
		tiny_backward(tid, nt, P, smem, &P->layer[l], n);
		TINY_SYNC();
	}
	if (P->clip > 0) { /* clip_grad_norm_: the norm over every gradient, the sum in double */
		double ss = 0;
		for (int64_t i = tid; i < P->trainable; i += nt)
			ss += (double)P->grads[i] * P->grads[i];
		float c = optim_elem_clip_coef(sqrt(tiny_sum(tid, nt, ss, sh)), P->clip);
		if (!(c >= 1.0f)) /* a factor of 1 changes nothing; a NaN goes through */
			for (int64_t i = tid; i < P->trainable; i += nt)
				P->grads[i] *= c;
		TINY_SYNC();
	}
	if (tid == 0)
		*coef = optim_coef_of(&P->cfg, *P->step + 1, P->lr_table[*P->step % P->cap]);
	TINY_SYNC();
	for (int64_t i = tid; i < P->trainable; i += nt)
		optim_elem_apply(coef, P->params, P->grads, P->planes, i);
	TINY_SYNC();
	if (tid == 0) {
		P->hist[*P->step % P->cap] = *P->step_loss;
		*P->step += 1;
		*P->pos += n;
	}
}
#endif
