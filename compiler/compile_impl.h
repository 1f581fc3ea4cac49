/* compile_impl.h: what the passes of the compiler share.  Each pass is one
 * file and one function here; it reads what earlier passes wrote into the
 * plan and adds its own part.  Not for use outside compiler/.
 */
#ifndef COMPILE_IMPL_H
#define COMPILE_IMPL_H
#include "compiler/ir.h"
#include "compiler/value.h"
#include "grammar/ast.h"

struct arena;
struct diag;

enum { MAX_BLOCKS = 256, MAX_IMPORT_DEPTH = 16 };

/* The sections in force after imports, replacement and --set overrides. */
struct sections {
	const struct ast_section *model;
	const struct ast_section *blocks[MAX_BLOCKS];
	int nblocks;
	const struct ast_section *data, *train, *parallel;
	const struct source *sources; /* every file read */
};

/* sections.c: read the main file and its imports, apply overrides. */
bool sections_gather(struct arena *a, struct diag *d, const char *path, const char *const *sets, int nsets,
		     struct sections *out);
/* lower.c: expand the model (blocks, repeat, residual) into nodes and scopes. */
bool lower_model(struct arena *a, struct diag *d, const struct sections *s, struct plan *p);
/* settings.c: data, train and parallel sections into their typed structs. */
bool settings_read(struct arena *a, struct diag *d, const struct sections *s, struct plan *p);
/* The losses' names in the file, by enum loss_kind. */
extern const char *const loss_names[LOSS_KL_DIV + 1];
/* place.c: device of every node; transfers where placement changes. */
bool place_nodes(struct arena *a, struct diag *d, struct plan *p);
/* infer.c: shapes, parameter names and counts; checks data against the model. */
bool infer_shapes(struct arena *a, struct diag *d, struct plan *p);
/* wrap.c: FSDP units from the wrap policy and @wrap. */
bool wrap_units(struct arena *a, struct diag *d, struct plan *p);
/* memplan.c: offsets of parameters, buckets and activations; bytes per region. */
bool memplan_build(struct arena *a, struct diag *d, struct plan *p);
/* unparse.c: the canonical text of the sections in force; floats in 17
 * digits (what the hashes cover) or, shortest, in their fewest exact digits. */
const char *unparse_sections(struct arena *a, const struct sections *s, bool shortest);
/* A call's arguments as written back, less the keyword argument `skip`. */
const char *unparse_args(struct arena *a, const struct ast_arg *g, const char *skip);
#endif
