/* compile.h: from a .net file to a plan.  The one entry point the command
 * line and the runtime use; every error has been reported to the diag
 * when it returns NULL.
 */
#ifndef COMPILE_H
#define COMPILE_H
#include "compiler/ir.h"

struct arena;
#include <stdbool.h>

struct diag;

struct compile_opts {
	const char *path;
	int world;              /* ranks to plan for; 1 when not given */
	const char *const *sets; /* "section.key=value" overrides */
	int nsets;
	bool world_unknown;     /* a first look before the rank count is known: skip what depends on it */
	bool gpu;               /* for GPUs (--gpus): no CPU convolution workspace; cuDNN chooses its own at run time */
};

struct plan *compile_file(struct arena *a, struct diag *d, const struct compile_opts *o);
/* For the commands that read the data (check, training; print and graph
 * do not need it): every mnist() dataset whose files are missing or
 * unreadable is an error at its data statement, naming where the reader
 * looks.  False when one is. */
bool compile_check_data(struct diag *d, const struct plan *p);
/* The samples one of world ranks takes per optimizer step (batch, or its
 * share of global_batch), and into *micro those of one forward and
 * backward (micro_batch, or the whole share).  A training run's
 * global_batch splits evenly (compile_file refuses it otherwise), so the
 * step is share / micro micro-batches; under train.steps = 0 the share may
 * be rounded up (see compile.c). */
int64_t compile_rank_batch(const struct plan_train *t, int world, int64_t *micro);
#endif
