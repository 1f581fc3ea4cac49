/* train.h: the training loop of one process: data, epochs or steps,
 * evaluation after each epoch, the optimizer and scheduler, log lines as
 * PyTorch's MNIST examples print them, and the saved weights.
 */
#ifndef TRAIN_H
#define TRAIN_H
#include <stdbool.h>

#include "compiler/ir.h"
#include "runtime/optim.h"
#include "runtime/sched.h"

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

/* Train p to the end; returns the process exit status after saying what
 * failed: 0; 2 where the run was refused before training for what the
 * user gave (train_setup_failed); 1 for any other failure. */
int train_run(const struct plan *p, const struct train_opts *o);

/* ---- shared with the GPU trainer (runtime/cuda/train_gpu.c) ---- */
struct dataset;
struct optim_cfg train_optim_cfg(const struct plan_optim *o);
struct sched_cfg train_sched_cfg(const struct plan_sched *s);
/* Open a data section's dataset (IDX files, .npy files or synthetic); 0 or -1 with err. */
int train_open_data(const struct plan *p, const struct plan_dataset *pd, struct dataset *ds, char *err, size_t n);
/* Open an npy() set as the plan expects it (headers_only: check the
 * headers and sizes alone); on failure *failed (if not NULL) says which
 * file is at fault: 0 the input's, 1 the target's. */
int train_open_npy(const struct plan *p, const struct plan_dataset *pd, struct dataset *ds, bool headers_only, int *failed, char *err,
		   size_t n);
/* One terminal line, redrawn: epoch, a bar, samples, loss, speed. */
void train_progress(int64_t epoch, int64_t seen, int64_t total, double loss, double rate);
/* Print the test line as the seed does (and record it): sums are the
 * summed loss, the correct count and the samples, over every rank.  A
 * loss that is not finite is warned of once a run: *warned says it was. */
struct rundir;
struct ckpt_state;
void train_report_eval(const struct plan *p, struct rundir *rd, const struct ckpt_state *at, const double sums[3], bool *warned);
/* Why a norm with eps=0 may have made a loss NaN, into buf: a layernorm's
 * row whose values are all equal, or in evaluation (eval) a batch norm's
 * running_var of 0; NULL when no such norm. */
const char *train_eps0_note(const struct plan *p, bool eval, char *buf, size_t n);
/* The first class the loss's weight= gives 0, or -1 (no weights, or
 * none of 0). */
int64_t train_zero_weight(const struct plan_train *tr);
/* Rank 0's report of a step: the terminal's progress bar (tty), or at a
 * log point the seed's "Train Epoch: E [done/total (P%)]  Loss: L" line and
 * the metrics record; done samples of total this epoch, loss the step's. */
/* A checkpoint that could not be written, on every rank alike: the run
 * goes on (checkpoint_every) or still writes its run directory (the end). */
enum { TRAIN_CKPT_IO = -2 };
/* Whether every rank's part of a checkpoint was written (rc: this rank's,
 * 0 or its message in err), agreed on through sum (over the ranks, n
 * doubles at v; 0, or -1 with its message in err): 0; TRAIN_CKPT_IO on
 * every rank when some part was not, *speak set on the one rank that says
 * why for the job, the lowest whose part failed, with its own message (of
 * its shard, where not every rank's failed, naming the ranks whose did);
 * -1 when the ranks could not agree. */
int train_ckpt_agree(int rc, int rank, int world, bool shards, int (*sum)(void *ctx, double *v, int n), void *ctx, bool *speak,
		     char *err, size_t errlen);
/* Rank 0's unsharded checkpoint of the state at `at`, said on stdout. */
int train_ckpt_save(const char *dir, const struct plan *p, const float *params, const float *optim, int64_t trainable,
		    const struct ckpt_state *at, bool tty, char *err, size_t errlen);
/* End a progress bar's line (on a terminal) before another line prints. */
void train_progress_break(bool tty);
void train_report_step(struct rundir *rd, bool tty, bool log, const struct ckpt_state *at, int64_t done, int64_t total, double loss,
		       double lr, double rate);
/* Rank 0's line at an epoch's end (and its metrics line): sums are the
 * epoch's summed loss and samples, rate this run's images/s in it. */
void train_report_epoch(struct rundir *rd, bool tty, const struct ckpt_state *at, const double sums[2], double rate);
/* The rate of the optimizer step after `step` earlier ones, in epoch
 * `epoch` (both from 0): the schedule's, or reduce_on_plateau's now. */
double train_lr(const struct plan *p, const struct sched_cfg *sc, const struct ckpt_state *at, int64_t epoch, int64_t step);
/* reduce_on_plateau's step(metric) at the end of epoch at->epoch, whole
 * (epoch_done), on the test loss or the epoch's mean training loss, each
 * the same on every rank; once per epoch, so a resumed run that evaluates
 * an epoch again does not step twice.  Rank 0 says a reduction.  True if
 * the rate changed. */
bool train_plateau(const struct plan *p, const struct sched_cfg *sc, struct ckpt_state *at, bool epoch_done, double test_loss,
		   double train_loss, int rank);
/* one_cycle: its ticks filled into sc where the file gave no total_steps
 * (those of a resumed checkpoint's run, at->cycle; else train.epochs'
 * optimizer steps, or train.steps where more) and checked against the
 * run, whose epochs take spe optimizer steps; at->cycle then holds them,
 * for the run's checkpoints.  resume: the checkpoint's folder, or NULL.
 * 0, or -1 with the reason in err. */
int train_one_cycle(const struct plan *p, struct sched_cfg *sc, struct ckpt_state *at, const char *resume, int64_t spe, char *err,
		    size_t n);
/* The schedule cycles the optimizer's momentum (beta1): one_cycle's
 * cycle_momentum, whose steps' momentum train_momentum_fill computes. */
bool train_cycles_momentum(const struct sched_cfg *sc);
/* one_cycle's momentum of the run's steps [from, end) (0 the first),
 * step k's at window[k % period]; epochs of spe steps. */
void train_momentum_fill(const struct sched_cfg *sc, int64_t spe, double *window, int64_t period, int64_t from, int64_t end);
/* A resumed run already past train.epochs: says so on rank 0, true. */
bool train_epochs_done(const struct plan *p, const struct ckpt_state *at, int64_t epochs, int rank);
/* On every rank, between one rank's end-of-run lines and the next's: a
 * barrier, so that each rank writes its own in rank order, after rank 0's
 * (the launcher shows lines as they are written, and a rank's summary fell
 * among rank 0's epoch and test lines).  0, or -1 with the reason in err. */
struct comm;
int train_next_turn(struct comm *c, char *err, size_t errlen);
/* Rank 0's line for a resumed run already at train.steps. */
void train_report_spent(const struct plan *p);
/* Rank 0's opening line of a run with train.steps = 0 (evaluation only):
 * which weights, and whether there is a test set to evaluate them on. */
void train_report_eval_only(const struct plan *p, const struct train_opts *o, int world, bool has_test);
/* "batch B per rank", or with accumulation "batch B per rank in A
 * micro-batches of M", into buf. */
const char *train_batch_words(char *buf, size_t n, int64_t micro, int accum);
/* PATH.safetensors names a weights file; any other path a checkpoint folder. */
bool train_is_weights_file(const char *path);
/* A rank's batches, the same arithmetic for both trainers and the launcher. */
enum { TRAIN_NSIZES = 6 };
struct train_batches {
	int64_t micro;       /* samples of a rank's micro-batch (its batch, without accumulation) */
	int accum;           /* micro-batches per optimizer step */
	int chunks;          /* parallel.microbatches: the pipeline (or FSDP) pieces each batch runs in */
	int64_t num_batches; /* micro-batches per rank per epoch */
	/* every batch size a forward pass runs at, for planning: a batch's
	 * chunk and its last one, the epoch's last batch's chunk and its last
	 * one, then evaluation's chunk and this rank's last test chunk */
	int64_t sizes[TRAIN_NSIZES];
};
/* Rank `rank` of world's batches over train_n training and test_n test
 * samples, and whether it can run them: 0, or -1 with a message when its
 * training samples make no batch (drop_last) or a batch norm would see
 * one value per channel (naming the layer's place in the .net file). */
int train_batches(const struct plan *p, int world, int rank, int64_t train_n, int64_t test_n, struct train_batches *b, char *err,
		  size_t errlen);
/* train_batches for every rank of world, before they start: 0, or -1
 * with the first rank's message. */
int train_check_batches(const struct plan *p, int world, int64_t train_n, int64_t test_n, char *err, size_t errlen);
/* Whether the training set can feed world ranks (one sample each at least):
 * 0, or -1 with a message naming the file. */
int train_check_samples(const struct dataset *ds, int world, char *err, size_t errlen);
/* Whether the test set has a sample to evaluate (as PyTorch's test loop,
 * which divides by its size, needs): 0, or -1 with a message naming the
 * file (path, or NULL for synthetic data). */
int train_check_test_samples(const char *path, int64_t n, char *err, size_t errlen);
/* Every rank checks through the store that all compiled the same plan;
 * *sharers counts the ranks that run on this rank's CPUs (itself too). */
struct store_client;
int train_agree_plan(struct store_client *st, const struct plan *p, int rank, int world, int *sharers, char *err, size_t errlen);
/* Whether a checkpoint made at at->world ranks may resume at world (with a
 * per-rank batch of micro; 0: not known yet, only the rule checked); at
 * any rank count under train.steps = 0, which reads no training batch. */
int train_resume_world(const struct plan *p, const char *resume, const char *flag, const struct ckpt_state *at, int world,
		       int64_t micro, char *err, size_t errlen);
/* Where a loaded checkpoint resumes at this world size and batch (flag is
 * --cpus or --gpus, for the message); prints the position on rank 0.
 * Under train.steps = 0 at another rank count the checkpoint's position
 * is kept as it is, to name the evaluation's step and epoch. */
int train_resume_at(const struct plan *p, const char *resume, const char *flag, struct ckpt_state *at, int world, int64_t micro,
		    int64_t num_batches, int rank, char *err, size_t errlen);
/* What a trainer's setup returns where it refuses what the user gave (the
 * data, the --resume checkpoint, the --init weights, the run directory);
 * -1 is any other failure. */
enum { TRAIN_REFUSED = -3 };
/* The exit status of a run whose setup failed with rc: for TRAIN_REFUSED
 * util_refusal's (2; 1 where the system failed), else 1.  In a job (world
 * above one) a refusal is the rank's last word to the launcher, under the
 * key set in *stop_key, which says it once for the job (rank 0's words
 * where every rank refused) and ends it with this status. */
int train_setup_failed(int rc, int world, const char **stop_key);
/* The key a rank's failure err goes to the launcher under: key where one
 * is set; "peer" in a job where err is a collective broken by a peer that
 * went away (COMM_HINT_PEER), which the launcher does not say where
 * another rank failed on its own; else NULL (said on standard error). */
const char *train_fail_key(const char *key, const char *err, int world);
/* The state --resume or --init gives, for rank o->rank of world ranks
 * with micro-batches of micro over sampler s (flag: --cpus or --gpus, for
 * messages): a checkpoint's parameters, optimizer state (k planes of
 * trainable floats) and position in *at, resumed here; or the weights
 * alone.  0 (nothing read without either), or TRAIN_REFUSED with err. */
struct sampler;
int train_load_given(const struct plan *p, const struct train_opts *o, const char *flag, int world, int64_t micro, struct sampler *s,
		     float *params, float *optim, int64_t trainable, struct ckpt_state *at, char *err, size_t errlen);
/* The process's peak resident set in MiB, from /proc (0 when unavailable). */
double train_peak_rss_mib(void);
#endif
