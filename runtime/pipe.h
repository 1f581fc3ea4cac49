/* pipe.h: a rank's devices as a pipeline (GPipe).
 * The layers split into stages, each a run of layers on one device; each
 * device has a thread of its own.  A batch splits into micro-batches (as
 * torch.chunk does); every stage runs the forward of micro-batch i as soon
 * as the previous stage has, so device 1 works on micro-batch i while
 * device 0 works on i+1; after every forward, the backwards run in reverse,
 * again overlapping.  Gradients of all micro-batches accumulate, so the
 * result equals the unsplit batch for layers without batch statistics
 * (batch norm sees each micro-batch, dropout draws per micro-batch).
 * Used whenever a rank owns several devices or micro-batches are asked for.
 */
#ifndef PIPE_H
#define PIPE_H
#include <pthread.h>
#include <stdbool.h>

#include "runtime/exec.h"

enum { PIPE_MAX_STAGES = PLAN_MAX_STAGES, PIPE_MAX_MICRO = 64 };

struct pipe_stage {
	int begin, end, dev; /* layers [begin, end) on device dev */
};

struct pipe {
	struct exec *e;
	int nst, ndev, threads_per_dev;
	struct pipe_stage st[PIPE_MAX_STAGES];
	pthread_t th[PLAN_MAX_DEVICES];
	bool started[PLAN_MAX_DEVICES];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* the job in flight */
	const float *x;
	const void *y;
	size_t x_row, y_row;      /* bytes of one sample's input and target */
	bool train;
	float base_scale;         /* the executor's loss scale before the split */
	int k;                    /* micro-batches */
	int size[PIPE_MAX_MICRO], first[PIPE_MAX_MICRO];
	bool fdone[PIPE_MAX_STAGES][PIPE_MAX_MICRO], bdone[PIPE_MAX_STAGES][PIPE_MAX_MICRO];
	double loss[PIPE_MAX_MICRO];
	long correct[PIPE_MAX_MICRO];
	int bad_target;           /* a micro-batch whose targets were out of range, or -1 */
	int generation, finished;
	bool quit;
	/* accounting over all jobs */
	double busy[PLAN_MAX_DEVICES], wall;
};

int pipe_init(struct pipe *pp, struct exec *e, int threads, char *err, size_t errlen);
/* Forward (and in training loss and backward) of n samples in `micro`
 * micro-batches; *loss as exec_loss gives it for the whole batch. */
int pipe_run(struct pipe *pp, const float *x, const void *y, int n, int micro, bool train, double *loss, long *correct,
	     char *err, size_t errlen);
/* Share of the pipelined time device d spent idle, over every run so far. */
double pipe_idle(const struct pipe *pp, int d);
void pipe_free(struct pipe *pp);
#endif
