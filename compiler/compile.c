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
	if (!place_nodes(a, d, p) || !infer_shapes(a, d, p) || !wrap_units(a, d, p) || !memplan_build(a, d, p) || d->errors > before)
		return NULL;
	p->text = unparse_sections(a, &s);
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv1a(h, p->text, strlen(p->text));
	h = fnv1a(h, &p->world, sizeof p->world);
	p->hash = h;
	return p;
}
