/* compile.c: the compiler driver: the passes in order, then the hash.
 * A pass runs only when the ones before it succeeded, since each relies on
 * what the earlier ones established; within a pass, errors are collected
 * so one run reports as many as can be trusted.  The plan hash covers the
 * canonical text and the world size, so every rank of a job can check at
 * rendezvous that it compiled the same plan.
 */
#include "compiler/compile.h"

#include <string.h>

#include "compiler/compile_impl.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Whether a rank's memory can be counted in bytes at all: the plan's sums
 * are int64, and a batch of 2^31 samples of a large layer would wrap them.
 * Counted in double, with room to spare: every activation and its gradient,
 * parameters with gradients and optimizer state. */
static bool plan_fits(struct diag *d, const struct plan *p, int64_t per_rank)
{
	double acts = 0, params = 0;
	for (int i = 0; i < p->nnodes; i++)
		acts += (double)shape_numel(&p->nodes[i].out);
	for (int k = 0; k < p->nparams; k++)
		params += (double)p->params[k].numel;
	double bytes = 4.0 * (2.0 * acts * (double)per_rank + params * (3.0 + p->train.optim.state_per_param));
	if (bytes < 0x1p56)
		return true;
	diag_error(d, p->train.batch_loc.src ? p->train.batch_loc : p->nodes[0].loc,
		   "a batch of %lld per rank could need up to %.0f PiB, beyond what any machine holds; lower the batch or the layer sizes",
		   (long long)per_rank, bytes / 0x1p50);
	return false;
}

struct plan *compile_file(struct arena *a, struct diag *d, const struct compile_opts *o)
{
	struct sections s;
	int before = d->errors;
	if (!sections_gather(a, d, o->path, o->sets, o->nsets, &s) || d->errors > before)
		return NULL;
	struct plan *p = arena_alloc(a, sizeof *p);
	p->path = o->path;
	p->sources = s.sources;
	p->world = o->world > 0 ? o->world : 1;
	p->gpu = o->gpu;
	/* the model usually comes first in a file: report its errors first */
	bool ok = lower_model(a, d, &s, p);
	ok &= settings_read(a, d, &s, p);
	if (!ok || d->errors > before)
		return NULL;
	const struct plan_train *t = &p->train;
	if (t->global_batch && !o->world_unknown) {
		int64_t share = t->global_batch / p->world, micro = t->micro_batch ? t->micro_batch : share;
		if (t->global_batch % p->world != 0 || share % micro != 0) {
			struct loc nowhere = { 0 };
			if (t->micro_batch)
				diag_error(d, s.train ? s.train->kind_loc : nowhere,
					   "global_batch %lld does not split into %d rank%s of whole micro-batches of %lld; choose sizes that divide it",
					   (long long)t->global_batch, p->world, p->world == 1 ? "" : "s", (long long)t->micro_batch);
			else
				diag_error(d, s.train ? s.train->kind_loc : nowhere,
					   "global_batch %lld does not split evenly over %d ranks; choose a multiple of the rank count",
					   (long long)t->global_batch, p->world);
			return NULL;
		}
	}
	int64_t m = p->parallel.microbatches, per_rank = t->global_batch ? (t->micro_batch ? t->micro_batch : t->global_batch / p->world)
											: t->batch;
	if (m > 64) {
		struct loc nowhere = { 0 };
		diag_error(d, s.parallel ? s.parallel->kind_loc : nowhere, "microbatches = %lld: at most 64 micro-batches", (long long)m);
		return NULL;
	}
	if (m > 1 && per_rank % m != 0 && !o->world_unknown) {
		struct loc nowhere = { 0 };
		diag_error(d, s.parallel ? s.parallel->kind_loc : nowhere,
			   "microbatches = %lld does not divide the %s of %lld per rank; choose a divisor", (long long)m,
			   t->micro_batch ? "micro_batch" : "batch", (long long)per_rank);
		return NULL;
	}
	const struct plan_dataset *td = &p->train_data;
	if (td->kind == DATA_SYNTHETIC && td->samples < p->world && !o->world_unknown) {
		diag_error(d, td->samples_loc, "%lld training samples cannot feed %d ranks; lower --cpus or --gpus, or add samples",
			   (long long)td->samples, p->world);
		return NULL;
	}
	if (!place_nodes(a, d, p) || !infer_shapes(a, d, p) || !plan_fits(d, p, per_rank) || !wrap_units(a, d, p) ||
	    !memplan_build(a, d, p) || d->errors > before)
		return NULL;
	p->text = unparse_sections(a, &s, false);
	p->source = unparse_sections(a, &s, true);
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv1a(h, p->text, strlen(p->text));
	h = fnv1a(h, &p->world, sizeof p->world);
	p->hash = h;
	return p;
}
