/* infer.c: shapes and parameters.
 * Walks the layers in execution order: each takes its input's shape,
 * fills in omitted in-sizes and checks given ones (ops.c), then receives
 * its parameters named as the equivalent nn.Module's state_dict.  Finally
 * the data is checked against the model: the sample shape against input(),
 * the targets against the loss and the model's output.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "compiler/compile_impl.h"
#include "compiler/ops.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

static bool same_shape(const struct shape *a, const struct shape *b)
{
	if (a->rank != b->rank)
		return false;
	for (int k = 0; k < a->rank; k++)
		if (a->d[k] != b->d[k])
			return false;
	return true;
}

/* The sizes as a call takes them: "2, 3" */
static const char *sizes_str(const struct shape *s, char *buf, int n)
{
	int at = 0;
	buf[0] = '\0';
	for (int k = 0; k < s->rank && at < n; k++)
		at += snprintf(buf + at, (size_t)(n - at), "%s%" PRId64, k ? ", " : "", s->d[k]);
	return buf;
}

static bool check_data(struct diag *d, const struct plan *p, const struct plan_dataset *ds)
{
	char b1[96], b2[96];
	const struct node *in = &p->nodes[0], *out = &p->nodes[p->nnodes - 1];
	if (ds->kind == DATA_NONE)
		return true;
	if (!p->train.present) {
		/* no loss to check the targets against; the inputs still must fit */
		if (ds->sample.rank != in->out.rank || memcmp(ds->sample.d, in->out.d, sizeof(int64_t) * (size_t)in->out.rank) != 0) {
			diag_error(d, ds->loc, "this dataset gives samples of shape %s, but model %s takes input%s",
				   shape_str(&ds->sample, b1, sizeof b1), p->model_name, shape_str(&in->out, b2, sizeof b2));
			return false;
		}
		return true;
	}
	if (ds->nnorm && in->dtype == DT_I64) {
		diag_error(d, ds->norm_loc, "the model takes token ids, which normalize would make other numbers; leave it out");
		diag_note(d, in->loc, "the model's input is declared here");
		return false;
	}
	if (ds->nnorm > 1 && ds->nnorm != in->out.d[0]) {
		diag_error(d, ds->norm_loc, "normalize has %" PRId64 " means and stds, one per channel, but the samples have %" PRId64
			   " channel%s (the first size of the model's input%s); give one per channel, or one number for all", ds->nnorm,
			   in->out.d[0], in->out.d[0] == 1 ? "" : "s", shape_str(&in->out, b1, sizeof b1));
		diag_note(d, in->loc, "the model's input is declared here");
		return false;
	}
	if (!same_shape(&ds->sample, &in->out)) {
		diag_error(d, ds->loc, "this dataset gives samples of shape %s, but model %s takes input%s",
			   shape_str(&ds->sample, b1, sizeof b1), p->model_name, shape_str(&in->out, b2, sizeof b2));
		diag_note(d, in->loc, "the model's input is declared here");
		return false;
	}
	enum loss_kind loss = p->train.loss;
	if (loss != LOSS_NLL && loss != LOSS_CROSS_ENTROPY) {
		if (ds->target != TGT_VECTOR) {
			diag_error(d, ds->loc, "%s needs real-valued targets, but this dataset gives class labels; use cross_entropy or nll",
				   loss_names[loss]);
			return false;
		}
		if (!same_shape(&ds->target_shape, &out->out)) {
			diag_error(d, ds->loc, "the targets have shape %s, but the model's output is %s; %s needs them equal",
				   shape_str(&ds->target_shape, b1, sizeof b1), shape_str(&out->out, b2, sizeof b2), loss_names[loss]);
			diag_note(d, out->loc, "the model's last layer is here");
			return false;
		}
		const struct plan_train *t = &p->train;
		int64_t last = out->out.d[out->out.rank - 1];
		if (t->npos_weights && t->npos_weights != last) {
			diag_error(d, t->pos_weight_loc, "pos_weight has %" PRId64 " weights, but the model's output %s has %" PRId64
				   " along its last dimension; give one per output there, or one number for all",
				   t->npos_weights, shape_str(&out->out, b1, sizeof b1), last);
			diag_note(d, out->loc, "the model's last layer is here");
			return false;
		}
		/* PyTorch takes any real target, but a normal one is no
		 * probability: bce's loss then has no floor */
		if ((loss == LOSS_BCE || loss == LOSS_BCE_LOGITS) && ds->kind == DATA_SYNTHETIC && !ds->target_rand) {
			diag_error(d, ds->target_loc, "%s needs targets in [0, 1], but randn draws them from N(0, 1); draw them with "
				   "target=rand(%s)", loss_names[loss], sizes_str(&ds->target_shape, b1, sizeof b1));
			return false;
		}
		if (loss == LOSS_KL_DIV && !t->loss_param && ds->kind == DATA_SYNTHETIC && !ds->target_rand) {
			diag_error(d, ds->target_loc, "kl_div needs probabilities as targets, but randn draws them from N(0, 1), and a "
				   "target below 0 makes the loss NaN; draw them with target=rand(%s), or give log_target=true",
				   sizes_str(&ds->target_shape, b1, sizeof b1));
			return false;
		}
		return true;
	}
	if (ds->target != TGT_CLASS) {
		diag_error(d, ds->loc, "%s needs class labels as targets; write target=classes(N)", loss_names[loss]);
		return false;
	}
	if (out->out.rank != 1 || out->out.d[0] != ds->classes) {
		diag_error(d, out->loc, "the model's output per sample is %s, but the loss needs one score per class: (%" PRId64 ",)",
			   shape_str(&out->out, b1, sizeof b1), ds->classes);
		return false;
	}
	const struct plan_train *t = &p->train;
	if (t->class_weights && t->nclass_weights != ds->classes) {
		diag_error(d, t->class_weight_loc, "weight has %" PRId64 " weights, but the model scores %" PRId64 " classes; give one "
			   "per class", t->nclass_weights, ds->classes);
		diag_note(d, out->loc, "the model's last layer is here");
		return false;
	}
	return true;
}

/* An embedding that takes the model's input, the token ids (through
 * flatten or a transfer, if any). */
static bool reads_ids(const struct plan *p, const struct node *nd)
{
	int src = nd->in;
	while (src > 0 && (p->nodes[src].op == OP_FLATTEN || p->nodes[src].op == OP_TRANSFER))
		src = p->nodes[src].in;
	return nd->op == OP_EMBEDDING && src == 0;
}

/* An npy() set's samples are what the model takes and its targets what
 * the loss reads: class labels for one score per class (the output's
 * last dimension), else values of the output's shape; token ids must be
 * rows of every embedding that reads them.  The files are checked against
 * this when they are opened. */
static void npy_shapes(const struct plan *p, struct plan_dataset *ds)
{
	if (ds->kind != DATA_NPY)
		return;
	const struct node *in = &p->nodes[0], *out = &p->nodes[p->nnodes - 1];
	ds->sample = in->out;
	bool classes = p->train.present && (p->train.loss == LOSS_NLL || p->train.loss == LOSS_CROSS_ENTROPY);
	ds->target = classes ? TGT_CLASS : TGT_VECTOR;
	if (classes)
		ds->classes = out->out.d[out->out.rank - 1];
	else
		ds->target_shape = out->out;
	ds->input_high = 0;
	if (in->dtype != DT_I64)
		return;
	ds->input_high = (int64_t)1 << 24; /* exact in a float */
	for (int n = 0; n < p->nnodes; n++)
		if (reads_ids(p, &p->nodes[n]) && p->nodes[n].a.emb.num < ds->input_high)
			ds->input_high = p->nodes[n].a.emb.num;
}

/* A shape error in a block's body is mended where the block is called:
 * point at the argument that passed the size on when the error is about
 * one, else at each call that put the layer there, innermost first. */
static void note_calls(struct diag *d, const struct plan *p, const struct node *n)
{
	if (n->blame && n->blame->from) {
		val_note_origin(d, n->blame);
		return;
	}
	for (int s = n->scope; s > 0; s = p->scopes[s].parent) {
		const struct scope *sc = &p->scopes[s];
		if (sc->call.src)
			diag_note(d, sc->call, "%s is block %s, called here", sc->path, sc->type);
	}
}

bool infer_shapes(struct arena *a, struct diag *d, struct plan *p)
{
	bool ok = true;
	int cap = 0;
	p->params = NULL;
	p->nparams = 0;
	for (int i = 0; i < p->nnodes; i++) {
		struct node *n = &p->nodes[i];
		const struct node *prev = n->in >= 0 ? &p->nodes[n->in] : NULL;
		const struct node *pp = n->op == OP_ADD ? &p->nodes[n->in2] : (prev && prev->in >= 0 ? &p->nodes[prev->in] : NULL);
		if (n->op != OP_INPUT && !op_infer(d, n, prev, pp)) {
			note_calls(d, p, n);
			ok = false;
			/* later shapes would only repeat this error */
			break;
		}
		if (n->op == OP_TRANSFER || n->op == OP_ADD || n->op == OP_DROPOUT || n->op == OP_FLATTEN)
			n->dtype = prev->dtype;
		int64_t numel = shape_numel(&n->out);
		if (numel > ((int64_t)1 << 40)) {
			diag_error(d, n->loc, "%s: its output has more than 2^40 elements per sample", n->what);
			return false;
		}
		struct param_spec spec[5];
		int np = op_params(n, spec);
		n->param0 = p->nparams;
		n->nparams = np;
		for (int k = 0; k < np; k++) {
			if (p->nparams == cap) {
				int ncap = cap ? cap * 2 : 64;
				p->params = arena_realloc(a, p->params, (size_t)cap * sizeof *p->params, (size_t)ncap * sizeof *p->params);
				cap = ncap;
			}
			struct param *pr = &p->params[p->nparams++];
			memset(pr, 0, sizeof *pr);
			pr->name = arena_printf(a, "%s.%s", n->path, spec[k].suffix);
			pr->node = i;
			pr->role = spec[k].role;
			pr->shape = spec[k].shape;
			pr->numel = shape_numel(&spec[k].shape);
			pr->dtype = spec[k].dtype;
			pr->init = spec[k].init;
			pr->fan_in = spec[k].fan_in;
			pr->device = n->device;
			pr->unit = -1;
			pr->trainable = !spec[k].buffer && !n->frozen;
			if (pr->numel > ((int64_t)1 << 36)) {
				diag_error(d, n->loc, "%s would have more than 2^36 elements; that is more than trainc can hold", pr->name);
				return false;
			}
			if (!spec[k].buffer) {
				p->total_params += pr->numel;
				if (pr->trainable)
					p->trainable_params += pr->numel;
			}
		}
	}
	if (!ok)
		return false;
	const struct node *last = &p->nodes[p->nnodes - 1];
	if (last->dtype != DT_F32 && p->train.present) {
		diag_error(d, last->loc, "the model's output is long (int64) token ids, but a loss needs float scores; "
			   "turn the ids into vectors with an embedding first");
		return false;
	}
	npy_shapes(p, &p->train_data);
	npy_shapes(p, &p->test_data);
	ok = check_data(d, p, &p->train_data) && check_data(d, p, &p->test_data);
	const struct plan_dataset *sets[2] = { &p->train_data, &p->test_data };
	for (int i = 0; ok && i < 2; i++) {
		const struct plan_dataset *ds = sets[i];
		if (ds->kind != DATA_SYNTHETIC)
			continue;
		if (p->nodes[0].dtype == DT_I64 && !ds->input_high) {
			diag_error(d, ds->loc, "the model takes token ids (dtype=\"long\"); draw them with input=randint(high, sizes...)");
			ok = false;
		} else if (ds->input_high) {
			for (int n = 0; n < p->nnodes; n++) {
				const struct node *nd = &p->nodes[n];
				if (reads_ids(p, nd) && ds->input_high > nd->a.emb.num) {
					diag_error(d, ds->loc, "token ids go up to %" PRId64 ", but %s has %" PRId64 " rows", ds->input_high - 1,
						   nd->what, nd->a.emb.num);
					ok = false;
				}
			}
		}
		if (ok && p->nodes[0].dtype != DT_I64 && ds->input_high) {
			diag_error(d, ds->loc, "randint gives token ids, but the model's input is float; declare input(..., dtype=\"long\")");
			ok = false;
		}
	}
	if (ok && p->nnodes && p->nodes[0].dtype == DT_I64 && p->train_data.kind == DATA_MNIST) {
		diag_error(d, p->train_data.loc, "mnist gives images, but the model's input is integer token ids");
		ok = false;
	}
	return ok;
}
