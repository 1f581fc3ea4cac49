/* train.h: the training loop of one process: data, epochs or steps,
 * evaluation after each epoch, the optimizer and scheduler, log lines as
 * PyTorch's MNIST examples print them, and the saved weights.
 */
#ifndef TRAIN_H
#define TRAIN_H
#include "compiler/ir.h"

struct train_opts {
	const char *save;     /* PATH.safetensors: weights; any other path: a checkpoint directory */
	const char *init;     /* start from these weights (safetensors), or NULL */
	const char *resume;   /* continue from this checkpoint directory, or NULL */
	const char *run_dir;  /* NULL: runs/<model>-<time> */
	const char *version;
	int threads;          /* 0: the cores shared among the ranks */
	int rank, world;
	int argc;
	char **argv;
};

/* Train p to the end; returns the process exit status (0, or 1 after
 * printing what failed). */
int train_run(const struct plan *p, const struct train_opts *o);
#endif
