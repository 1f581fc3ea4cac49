/* wrap.c: FSDP units, formed as PyTorch's auto-wrap forms them.
 * size(min_params=N) follows size_based_auto_wrap_policy: walk the module
 * tree depth first; a module becomes a unit when the parameters it holds
 * outside units already made below it number at least N.  blocks(NAME)
 * makes every instance of those blocks a unit (the transformer policy);
 * @wrap forces one.  The root unit takes whatever no unit claimed.  Each
 * unit is split per device when a rank owns several, since a flat
 * parameter lives on one device.  Without FSDP there are no units.
 */
#include <string.h>

#include "compiler/compile_impl.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

static bool block_policy(const struct plan *p, const struct scope *sc)
{
	for (int i = 0; i < p->parallel.nwrap_blocks; i++)
		if (strcmp(p->parallel.wrap_blocks[i], sc->type) == 0)
			return true;
	return false;
}

bool wrap_units(struct arena *a, struct diag *d, struct plan *p)
{
	(void)d;
	/* parameters per scope, including everything inside it */
	for (int k = 0; k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		if (pr->role == ROLE_RUNNING_MEAN || pr->role == ROLE_RUNNING_VAR || pr->role == ROLE_NUM_BATCHES)
			continue;
		for (int s = p->nodes[pr->node].scope; s >= 0; s = p->scopes[s].parent)
			p->scopes[s].numel += pr->numel;
	}
	if (p->parallel.mode != PAR_FSDP)
		return true;
	/* Scopes are numbered in creation order, parents before children, so a
	 * reverse walk visits children first: the post-order the policy needs. */
	int64_t *unclaimed = arena_array(a, (size_t)p->nscopes, sizeof *unclaimed);
	bool *wrapped = arena_array(a, (size_t)p->nscopes, sizeof *wrapped);
	for (int s = 0; s < p->nscopes; s++) {
		int nd = p->scopes[s].node;
		if (nd < 0)
			continue;
		for (int k = 0; k < p->nodes[nd].nparams; k++) {
			const struct param *pr = &p->params[p->nodes[nd].param0 + k];
			if (pr->role != ROLE_RUNNING_MEAN && pr->role != ROLE_RUNNING_VAR && pr->role != ROLE_NUM_BATCHES)
				unclaimed[s] += pr->numel;
		}
	}
	for (int s = p->nscopes - 1; s > 0; s--) {
		const struct scope *sc = &p->scopes[s];
		bool w = sc->wrap;
		if (p->parallel.wrap == WRAP_SIZE)
			w |= unclaimed[s] >= p->parallel.min_params;
		else if (p->parallel.wrap == WRAP_BLOCKS)
			w |= block_policy(p, sc);
		/* an unnamed residual is no module in the state_dict: never a unit */
		wrapped[s] = w && unclaimed[s] > 0 && sc->name[0];
		if (!wrapped[s])
			unclaimed[sc->parent] += unclaimed[s];
	}
	wrapped[0] = true;
	/* one unit per (wrapped scope, device), in scope order: root first */
	int *unit_of = arena_array(a, (size_t)p->nscopes * PLAN_MAX_DEVICES, sizeof *unit_of);
	for (int i = 0; i < p->nscopes * PLAN_MAX_DEVICES; i++)
		unit_of[i] = -1;
	p->units = arena_array(a, (size_t)p->nscopes * (size_t)p->ndevices, sizeof *p->units);
	p->nunits = 0;
	/* the root unit comes first, even when every parameter is claimed below it */
	p->units[0].scope = 0;
	p->units[0].device = 0;
	p->units[0].first_node = p->nnodes; /* lowered to its first layer below */
	unit_of[0] = p->nunits++;
	/* owner scope of each param: innermost wrapped ancestor */
	for (int k = 0; k < p->nparams; k++) {
		struct param *pr = &p->params[k];
		struct node *n = &p->nodes[pr->node];
		int s = n->scope;
		while (!wrapped[s])
			s = p->scopes[s].parent;
		int key = s * PLAN_MAX_DEVICES + pr->device;
		if (unit_of[key] < 0) {
			struct unit *u = &p->units[p->nunits];
			u->scope = s;
			u->device = pr->device;
			u->first_node = pr->node;
			unit_of[key] = p->nunits++;
		}
		pr->unit = unit_of[key];
		pr->unit_offset = -1;
	}
	/* parents, spans, sizes */
	for (int u = 0; u < p->nunits; u++) {
		struct unit *un = &p->units[u];
		un->parent = -1;
		if (un->scope != 0 || un->device != 0) {
			int s = un->scope == 0 ? 0 : p->scopes[un->scope].parent;
			while (s > 0 && !wrapped[s])
				s = p->scopes[s].parent;
			un->parent = unit_of[s * PLAN_MAX_DEVICES + un->device];
			if (un->parent < 0 || un->parent == u)
				un->parent = unit_of[0];
			if (un->parent == u)
				un->parent = -1;
		}
	}
	int64_t world = p->world > 0 ? p->world : 1;
	/* spans: from the first to the last layer owning one of the unit's parameters */
	for (int u = 0; u < p->nunits; u++) {
		p->units[u].first_node = p->nnodes;
		p->units[u].last_node = -1;
	}
	for (int k = 0; k < p->nparams; k++) {
		struct param *pr = &p->params[k];
		struct unit *un = &p->units[pr->unit];
		if (pr->role == ROLE_RUNNING_MEAN || pr->role == ROLE_RUNNING_VAR || pr->role == ROLE_NUM_BATCHES)
			continue; /* buffers are replicated, not sharded */
		pr->unit_offset = un->numel;
		un->numel += pr->numel;
		if (pr->node > un->last_node)
			un->last_node = pr->node;
		if (pr->node < un->first_node)
			un->first_node = pr->node;
	}
	for (int u = 0; u < p->nunits; u++) {
		struct unit *un = &p->units[u];
		un->param_dtype = p->parallel.param_dtype;
		un->reduce_dtype = p->parallel.reduce_dtype;
		un->padded = (un->numel + world - 1) / world * world;
		un->shard = un->padded / world;
	}
	for (int i = 0; i < p->nnodes; i++) {
		int s = p->nodes[i].scope;
		while (!wrapped[s])
			s = p->scopes[s].parent;
		p->nodes[i].unit = unit_of[s * PLAN_MAX_DEVICES + p->nodes[i].device];
		if (p->nodes[i].unit < 0)
			p->nodes[i].unit = unit_of[0];
	}
	return true;
}
