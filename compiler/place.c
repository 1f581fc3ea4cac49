/* place.c: the device of every layer within its rank.
 * @device(k) on a layer or block places it; a layer without one stays
 * where its input is, as an unannotated module in PyTorch runs wherever its
 * input tensor lives.  Where consecutive layers sit on different devices a
 * transfer node is inserted, so the executor and the printers see every
 * copy; it is named after the node it feeds (PATH.to_deviceK, and
 * PATH.skip_to_deviceK for a residual's skip input), so names stay unique.
 * A rank owns devices 0..D-1 with D = the highest index used + 1.
 */
#include <string.h>

#include "compiler/compile_impl.h"
#include "grammar/arena.h"
#include "grammar/diag.h"

bool place_nodes(struct arena *a, struct diag *d, struct plan *p)
{
	int maxdev = 0;
	/* the input sits where the first placed layer is, else on device 0 */
	int first = 0;
	for (int i = 1; i < p->nnodes; i++) {
		if (p->nodes[i].device >= 0) {
			first = p->nodes[i].device;
			break;
		}
	}
	p->nodes[0].device = first;
	int ntransfers = 0, nstages = 0;
	for (int i = 1; i < p->nnodes; i++) {
		struct node *n = &p->nodes[i];
		if (n->device < 0)
			n->device = p->nodes[n->in].device;
		/* the pipeline's stages, counted as pipe.c will; a transfer joins
		 * its consumer's stage, so counting before they are inserted gives
		 * the same number */
		if ((i == 1 || n->device != p->nodes[i - 1].device) && ++nstages > PLAN_MAX_STAGES) {
			diag_error(d, n->loc,
				   "%s starts pipeline stage %d, but a rank's placement may make at most %d stages (runs of consecutive layers on one device); put neighbouring layers on the same device",
				   n->what, nstages, PLAN_MAX_STAGES);
			return false;
		}
		if (n->device > maxdev)
			maxdev = n->device;
		if (p->nodes[n->in].device != n->device)
			ntransfers++;
		if (n->in2 >= 0 && p->nodes[n->in2].device != n->device)
			ntransfers++;
	}
	p->ndevices = maxdev + 1;
	if (!ntransfers)
		return true;
	/* rebuild the node list with transfers before each consumer */
	int total = p->nnodes + ntransfers;
	struct node *out = arena_array(a, (size_t)total, sizeof *out);
	int *map = arena_array(a, (size_t)p->nnodes, sizeof *map);
	int k = 0;
	for (int i = 0; i < p->nnodes; i++) {
		struct node n = p->nodes[i];
		int srcs[2] = { n.in, n.in2 };
		for (int s = 0; s < 2; s++) {
			if (srcs[s] < 0)
				continue;
			int from = map[srcs[s]];
			if (out[from].device == n.device) {
				srcs[s] = from;
				continue;
			}
			struct node t = { 0 };
			t.op = OP_TRANSFER;
			t.loc = n.loc;
			t.in = from;
			t.in2 = -1;
			t.unit = -1;
			t.alias = -1;
			t.scope = n.scope;
			/* a residual's skip input has a transfer of its own beside its body's */
			const char *to = s == 1 ? "skip_to_device" : "to_device";
			t.path = n.path[0] ? arena_printf(a, "%s.%s%d", n.path, to, n.device) : arena_printf(a, "%s%d", to, n.device);
			t.what = t.path;
			t.device = n.device;
			t.dtype = out[from].dtype;
			t.a.xfer.from = out[from].device;
			t.a.xfer.to = n.device;
			out[k] = t;
			srcs[s] = k++;
		}
		n.in = srcs[0];
		n.in2 = srcs[1];
		map[i] = k;
		out[k++] = n;
	}
	for (int s = 0; s < p->nscopes; s++)
		if (p->scopes[s].node >= 0)
			p->scopes[s].node = map[p->scopes[s].node];
	p->nodes = out;
	p->nnodes = k;
	return true;
}
