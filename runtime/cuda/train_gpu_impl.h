/* train_gpu_impl.h: the GPU trainer's internals, shared by its three files:
 * train_gpu.c (setup, the step, the loop), train_gpu_data.c (copies between
 * host and GPU, waiting on the GPU, data on the device or streamed, FSDP's
 * device memory) and train_gpu_state.c (parameters and optimizer state in
 * and out: initialisation, --init, --resume, checkpoints, the full state).
 * Not a contract for anything outside runtime/cuda.
 */
#ifndef TRAIN_GPU_IMPL_H
#define TRAIN_GPU_IMPL_H
#include "runtime/cuda/cuda.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compiler/print.h"
#include "runtime/backend.h"
#include "runtime/ckpt.h"
#include "runtime/comm.h"
#include "runtime/cuda/kc.h"
#include "runtime/cuda/tiny_plan.h"
#include "runtime/dataset.h"
#include "runtime/exec.h"
#include "runtime/fsdp.h"
#include "runtime/launch.h"
#include "runtime/loader.h"
#include "runtime/rundir.h"
#include "runtime/sampler.h"
#include "runtime/store.h"
#include "runtime/util.h"
#include "runtime/weights.h"

/* Device words of the trainer. */
struct words {
	int64_t pos;        /* next sample of this epoch's order */
	int64_t step;       /* finished optimizer steps */
	int64_t zero;       /* a constant 0, for gathers at fixed places */
	int64_t pad;
	double step_loss;   /* this step's sum of per-sample losses */
	double sums[4];     /* evaluation: loss, correct, samples; reductions of host values */
	double sumsq;
	double dsum[PLAN_MAX_DEVICES];                    /* each GPU's sum of squares */
	double partials[PLAN_MAX_DEVICES][KC_SUMSQ_PARTS];
	_Alignas(16) char coef[KC_OPTIM_COEF_BYTES];
};

/* One dataset in device memory: inputs (rows of xw words), targets (rows
 * of yw words); or, when it does not fit (streamed), on the host, each
 * batch copied in as it is used. */
struct ddata {
	void *x, *y;
	int64_t n, xw, yw;
	bool streamed;
};

struct gt {
	const struct plan *p;
	const struct train_opts *o;
	int rank, world, device;
	struct dataset train, test;
	bool has_test, train_open, test_open;
	bool ckpt_pending; /* a checkpoint_every save waits for the epoch's evaluation */
	bool ckpt_speak;   /* the last checkpoint failed: this rank says why for the job */
	bool eval_warned;  /* a test loss that is not finite was warned of */
	double test_loss, ep_mean; /* the last evaluation's loss, the last epoch's mean training loss (every rank's) */
	const char *stop_key; /* what err says ends every rank that says it: the key for launch_worker_stop */
	struct exec e;
	bool exec_ok;
	cudaStream_t s;          /* compute, on the rank's first GPU */
	cudaStream_t cs[PLAN_MAX_DEVICES]; /* collectives, one stream per GPU of the rank */
	int ngpu, base;          /* the rank's GPUs: base .. base + ngpu - 1 */
	struct optim_cfg oc;
	struct sched_cfg sc;
	struct sampler smp;
	bool smp_ok;
	struct ddata dtrain, dtest;
	int64_t *order;          /* (num_samples) this epoch's order on the device */
	int64_t *host_order;
	int64_t *eval_order;     /* (eval_len) this rank's test samples, chunks padded */
	int64_t eval_len, eval_count;
	void *ybuf, *eval_ybuf;  /* targets of the current batch */
	struct words *w;
	double *lr_table, *hist;
	int64_t steps_per_epoch; /* optimizer steps of an epoch, as lr_table counts them */
	double *momentum_table;  /* one_cycle's momentum of an epoch's steps, as lr_table, where it cycles it (oc.momentum_table), or NULL */
	int64_t total_steps;
	float *h_params, *h_optim; /* host copies for initialisation, checkpoints, weights */
	struct store_client *store;
	struct comm *comm;       /* the first GPU's communicator (metrics, barriers, FSDP) */
	struct comm *dcomm[PLAN_MAX_DEVICES]; /* DDP: one communicator per GPU of the rank, [0] = comm */
	enum comm_op op;
	bool sharded;            /* FSDP FULL_SHARD or SHARD_GRAD_OP over several ranks */
	struct fsdp fsdp;
	bool fsdp_ok;
	struct fsdp_dev fdev;    /* the shards' memory: this GPU's, on the compute stream */
	float *h_buffers;        /* host copy of the buffers (running statistics) for sharded checkpoints */
	int *trigger;            /* per bucket: the node whose backward completes it */
	cudaEvent_t *ev_bucket, ev_comm[PLAN_MAX_DEVICES], ev_t0, ev_t1, ev_e0, ev_e1;
	bool events;
	bool ddp_on, issued[PLAN_MAX_DEVICES];
	cudaGraphExec_t graph;
	bool graph_ok, use_graph, warmed;
	const char *no_graph; /* why steps run one by one; NULL: a graph */
	int64_t saved_step;      /* the step of the last checkpoint written */
	int pipe_m;              /* pipeline chunks of each micro-batch (parallel.microbatches), 1: none */
	struct tiny_prog *tiny;  /* a small model's whole step as one block (tiny.h), host memory; NULL: layer by layer */
	/* a streamed training set: a loader thread fills host batches */
	struct loader l;
	bool loader_ok;
	float *hx[2], *hconv;    /* host batches; ids converted for the embedding */
	void *hy[2];
	bool pinned;             /* hx and hy are page-locked (cudaHostAlloc): copies read them after returning */
	cudaEvent_t ev_fed;      /* recorded after the copies of the batch the trainer holds */
	bool fed_pending;        /* that batch goes back to the loader once ev_fed has passed */
	int64_t *hidx;           /* a streamed test set: one chunk's indices and values */
	float *htx;
	void *hty;
	int64_t graph_steps;
	float graph_ms;
	double floor_us;
	struct rundir rd;
	bool rd_ok;
	int64_t micro;           /* samples per micro-batch */
	int accum, epochs_total;
	int64_t read_step;       /* steps whose losses were read back */
	struct ckpt_state at;
	double ep_loss, ep_n;    /* this rank's summed per-sample loss and samples of the epoch so far (rank 0's
				  * include a resumed checkpoint's, of every rank) */
	bool tty;
	char err[1024];
};

#define CK(t, call)                                                                                                    \
	do {                                                                                                           \
		cudaError_t r_ = (call);                                                                               \
		if (r_ != cudaSuccess)                                                                                 \
			return util_fail((t)->err, sizeof(t)->err, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call,   \
					 cudaGetErrorString(r_));                                                      \
	} while (0)

/* train_gpu_data.c */
/* Copies between host and GPU memory (of the rank's first GPU, or of its
 * GPU d), ordered on that GPU's compute stream and done when they return;
 * 0 or -1 with t->err. */
int tg_put(struct gt *t, void *dev, const void *host, size_t bytes);
int tg_get(struct gt *t, void *host, const void *dev, size_t bytes);
int tg_put_on(struct gt *t, int d, void *dev, const void *host, size_t bytes);
int tg_get_on(struct gt *t, int d, void *host, const void *dev, size_t bytes);
/* Wait for the compute stream, watching NCCL; bounded by the job timeout. */
int tg_wait(struct gt *t, const char *what);
/* Hand the streamed batch the trainer holds back to the loader, once the
 * copies from it have run; 0 or -1 with t->err. */
int tg_return_batch(struct gt *t);
/* Sums over ranks of n host values. */
int tg_reduce_host(struct gt *t, double *v, int n);
/* The whole dataset to the GPU, or d->streamed when it does not fit. */
int tg_upload(struct gt *t, const struct dataset *ds, struct ddata *d);
/* This epoch's order to the GPU (nothing for a streamed set). */
int tg_set_epoch(struct gt *t, int64_t epoch);
/* b host samples into the input and target buffers, on the compute stream. */
int tg_host_batch_in(struct gt *t, const float *x, const void *y, int64_t b, int64_t xw, int64_t yw, float *in, void *ybuf);
/* The next b samples gathered on the GPU into the current copy's input and ybuf. */
int tg_feed(struct gt *t, int64_t b, void *ybuf);
/* A streamed set's next micro-batch of b samples, chunk j into copy j. */
int tg_feed_streamed(struct gt *t, int64_t b, const int64_t *first, const int64_t *size, int k, char *ybuf);
/* FSDP's memory table for this rank's GPUs. */
struct fsdp_dev tg_fsdp_dev(struct gt *t);

/* train_gpu_state.c */
/* Initial parameters and optimizer state (PyTorch's initialisation,
 * --init or --resume), to the GPUs; DDP broadcasts rank 0's.  0, -1, or
 * TRAIN_REFUSED for a checkpoint or weights that do not fit. */
int tg_load_state(struct gt *t);
int tg_broadcast_buffers(struct gt *t);
/* The unsharded parameters (and optimizer state) in the host copies on
 * rank 0; every rank takes part. */
int tg_full_state(struct gt *t, bool with_optim);
/* Save a checkpoint to dir: rank 0 writes the whole state, or with FSDP
 * every rank its shard. */
int tg_checkpoint(struct gt *t, const char *dir);
#endif
