/* tiny.c: which plans the one-block training step of tiny.h runs, and its
 * program over an executor's memory.  Plain C: the GPU trainer builds the
 * program here and copies it to the device; tests/test_cuda_tiny.c builds
 * it over a CPU executor's memory and runs tiny_run on the host.
 */
#include "runtime/cuda/tiny_plan.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/exec.h"

/* Multiply-adds of one pass, and trainable elements, above which a model
 * is better served by one kernel per layer. */
enum { TINY_MAX_MACS = 1 << 20, TINY_MAX_TRAINABLE = 1 << 20 };

const char *tiny_refusal(const struct plan *p, int world, int accum, int64_t batch)
{
	const char *off = getenv("TRAINC_CUDA_TINY");
	if (off && strcmp(off, "0") == 0)
		return "turned off by TRAINC_CUDA_TINY=0";
	if (world != 1)
		return "it trains on several ranks";
	if (p->ndevices != 1)
		return "it spans several devices";
	if (accum != 1 || p->parallel.microbatches > 1)
		return "a step accumulates micro-batches or pipelines them";
	if (p->nodes[0].dtype != DT_F32)
		return "its input is token ids";
	if (p->nnodes - 1 > TINY_MAX_LAYERS)
		return "it has too many layers";
	int64_t macs = 0, trainable = 0;
	for (int i = 1; i < p->nnodes; i++) {
		const struct node *nd = &p->nodes[i];
		if (nd->in != i - 1 || nd->in2 >= 0)
			return "its layers are not a plain chain";
		switch (nd->op) {
		case OP_LINEAR: macs += batch * nd->a.linear.in * nd->a.linear.out; break;
		case OP_RELU: case OP_TANH: case OP_SIGMOID: case OP_GELU: case OP_FLATTEN: break;
		case OP_SOFTMAX: case OP_LOG_SOFTMAX: break;
		OP_ACT_CASES: break;
		case OP_LAYERNORM: case OP_GROUPNORM: break;
		case OP_BATCHNORM1D: case OP_BATCHNORM2D:
			if (batch * (shape_numel(&nd->out) / nd->a.bn.c) < 2)
				return "a batch norm has one value per channel";
			break;
		default: return "it has layers other than linear, flatten, softmax, norms and elementwise activations";
		}
	}
	for (int k = 0; k < p->nparams; k++)
		trainable += p->params[k].trainable ? p->params[k].numel : 0;
	if (macs > TINY_MAX_MACS || trainable > TINY_MAX_TRAINABLE)
		return "it is too large for one thread block";
	return NULL;
}

/* The node whose gradient buffer node j's gradient is (through views), or
 * 0 when j is the input (no gradient). */
static int grad_root(const struct plan *p, int j)
{
	while (j > 0 && p->nodes[j].alias >= 0)
		j = p->nodes[j].alias;
	return j;
}

void tiny_build(struct tiny_prog *P, struct exec *e, int64_t batch, const float *loss_w)
{
	const struct plan *p = e->p;
	P->n = (int)batch;
	P->nlayers = p->nnodes - 1;
	P->in = (uint32_t *)(void *)exec_output(e, 0, true);
	for (int i = 1; i < p->nnodes; i++) {
		const struct node *nd = &p->nodes[i];
		struct tiny_layer *L = &P->layer[i - 1];
		memset(L, 0, sizeof *L);
		L->x = exec_output(e, nd->in, true);
		L->y = exec_output(e, i, true);
		L->dy = (const float *)(const void *)(exec_act(e, i) + p->mem[i].grad_off);
		L->dx = grad_root(p, nd->in) > 0 ? exec_dx_home(e, nd->in) : NULL;
		L->count = shape_numel(&nd->out) * batch;
		switch (nd->op) {
		case OP_LINEAR:
			L->op = TINY_LINEAR;
			L->k = (int)nd->a.linear.in;
			L->m = (int)nd->a.linear.out;
			L->w = exec_param_ptr(e, nd->param0);
			L->dw = exec_grad_ptr(e, nd->param0);
			L->b = nd->a.linear.bias ? exec_param_ptr(e, nd->param0 + 1) : NULL;
			L->db = nd->a.linear.bias ? exec_grad_ptr(e, nd->param0 + 1) : NULL;
			break;
		case OP_RELU: L->op = TINY_RELU; break;
		case OP_TANH: L->op = TINY_TANH; break;
		case OP_SIGMOID: L->op = TINY_SIGMOID; break;
		case OP_GELU:
			L->op = TINY_GELU;
			L->gelu = nd->a.gelu.tanh ? KERN_GELU_TANH : KERN_GELU_NONE;
			break;
		OP_ACT_CASES:
			L->op = TINY_ACT;
			L->act = exec_act_kind(nd, &L->act_a, &L->act_b);
			break;
		case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
			int64_t outer, inner;
			exec_softmax_dims(nd, batch, &outer, &L->dim, &inner);
			L->op = TINY_SOFTMAX;
			L->inner = (int)inner;
			L->log_out = nd->op == OP_LOG_SOFTMAX;
			break;
		}
		case OP_LAYERNORM: case OP_GROUPNORM: {
			bool ln = nd->op == OP_LAYERNORM, affine = ln ? nd->a.ln.affine : nd->a.gn.affine;
			int64_t c = ln ? exec_ln_row(nd) : nd->a.gn.c;
			L->op = TINY_NORM;
			L->groups = ln ? 1 : (int)nd->a.gn.groups;
			L->cpg = (int)(c / L->groups);
			L->hw = ln ? 1 : (int)(shape_numel(&nd->out) / c);
			L->rows = ln ? L->count / c : batch * L->groups;
			L->eps = (float)(ln ? nd->a.ln.eps : nd->a.gn.eps);
			L->w = affine ? exec_param_ptr(e, nd->param0) : NULL;
			L->b = affine ? exec_param_ptr(e, nd->param0 + 1) : NULL;
			L->dw = affine ? exec_grad_ptr(e, nd->param0) : NULL;
			L->db = affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL;
			L->mean = (float *)(void *)(exec_act(e, i) + p->mem[i].save_off);
			L->invstd = L->mean + L->rows;
			break;
		}
		case OP_BATCHNORM1D: case OP_BATCHNORM2D: {
			bool affine = nd->a.bn.affine, track = nd->a.bn.track;
			int rs = affine ? 2 : 0;
			L->op = TINY_BATCHNORM;
			L->channels = (int)nd->a.bn.c;
			L->hw = (int)(shape_numel(&nd->out) / nd->a.bn.c);
			L->eps = (float)nd->a.bn.eps;
			L->momentum = (float)nd->a.bn.momentum;
			L->w = affine ? exec_param_ptr(e, nd->param0) : NULL;
			L->b = affine ? exec_param_ptr(e, nd->param0 + 1) : NULL;
			L->dw = affine ? exec_grad_ptr(e, nd->param0) : NULL;
			L->db = affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL;
			L->running_mean = track ? exec_param_ptr(e, nd->param0 + rs) : NULL;
			L->running_var = track ? exec_param_ptr(e, nd->param0 + rs + 1) : NULL;
			L->tracked = track ? (int64_t *)(void *)exec_param_ptr(e, nd->param0 + rs + 2) : NULL;
			L->mean = (float *)(void *)(exec_act(e, i) + p->mem[i].save_off);
			L->invstd = L->mean + L->channels;
			break;
		}
		default: L->op = TINY_VIEW; break;
		}
	}
	int last = p->nnodes - 1;
	P->loss = p->train.loss == LOSS_CROSS_ENTROPY ? TINY_CROSS_ENTROPY : p->train.loss == LOSS_NLL ? TINY_NLL : TINY_REGRESSION;
	P->regression = P->loss == TINY_REGRESSION ? exec_regression(p) : KERN_MSE;
	P->regression_param = (float)p->train.loss_param;
	P->per = (int)shape_numel(&p->nodes[last].out);
	P->red = p->train.reduction == RED_SUM ? KERN_REDUCE_SUM : KERN_REDUCE_MEAN;
	P->scale = e->loss_scale * exec_batchmean(p, P->per);
	P->smoothing = (float)p->train.label_smoothing;
	P->ignore_index = p->train.ignore_index;
	P->loss_w = p->train.npos_weights || p->train.class_weights ? loss_w : NULL;
	P->nloss_w = p->train.npos_weights ? p->train.npos_weights : p->train.nclass_weights;
	P->loss_wsum = p->train.class_weights ? loss_class_weight_sum(p->train.class_weights, (int)p->train.nclass_weights) : 0;
	P->out = exec_output(e, last, true);
	P->dout = (float *)(void *)(exec_act(e, last) + p->mem[last].grad_off);
	P->weight = p->train.reduction == RED_SUM ? 1.0 : (double)batch * exec_batchmean(p, P->per);
	P->params = exec_dev_trainables(e, 0);
	P->grads = exec_dev_grads(e, 0);
	P->trainable = e->t_n[0];
	P->clip = p->train.clip_grad_norm;
	int k = optim_state_floats(P->cfg.kind, &P->cfg);
	for (int j = 0; j < 3; j++)
		P->planes[j] = j < k ? exec_dev_optim(e, 0) + j * exec_dev_stride(e, 0) : NULL;
	/* shared memory: the training activations, then the targets, as far
	 * as they fit (rounded to 16 bytes) */
	int64_t acts = (p->dev[0].act_train + 15) / 16 * 16, ys = (int64_t)batch * P->yw * 4;
	memset(P->sm_base, 0, sizeof P->sm_base);
	memset(P->sm_bytes, 0, sizeof P->sm_bytes);
	memset(P->sm_off, 0, sizeof P->sm_off);
	if (acts > 0 && acts <= TINY_SMEM_BYTES) {
		P->sm_base[0] = exec_act(e, 0);
		P->sm_bytes[0] = acts;
		if (P->ybuf && acts + ys <= TINY_SMEM_BYTES) {
			P->sm_base[1] = (const char *)P->ybuf;
			P->sm_bytes[1] = ys;
			P->sm_off[1] = acts;
		}
	}
}
