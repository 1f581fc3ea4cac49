/* rundir.h: the directory every training run leaves behind.
 * runs/<model>-<YYYYmmdd-HHMMSS>[-N] (or a directory the user names) holds
 * model.net, the canonical source that ran (imports resolved, --set
 * applied); run.json, what ran where: plan hash, command line, start time,
 * host, trainc version, the .net file and its git commit and dirtiness;
 * metrics.jsonl, one JSON object a line, flushed as written; and whatever
 * the caller puts beside them (weights.safetensors).
 * Does not: rotate or clean up run directories, lock them other than by
 * rundir_claim (a job's launcher, or a run of one rank given a named
 * one), or record anything about imported .net files beyond their text
 * in model.net.
 * Invariant: a directory rundir_create returns was empty or new, and is
 * this run's alone; every line of metrics.jsonl is a whole JSON object.
 */
#ifndef RUNDIR_H
#define RUNDIR_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "compiler/ir.h"

enum { RUNDIR_PATH_MAX = 4096 };

struct rundir {
	char path[RUNDIR_PATH_MAX]; /* the run directory, as created */
	FILE *metrics;              /* metrics.jsonl; NULL when closed */
	double t0;                  /* CLOCK_MONOTONIC seconds at creation */
	char err[512];              /* why the last rundir_metric failed */
	bool warned;                /* a failed write was said on stderr */
};

/* Ask git about p's files (for run.json) on a thread of its own, so that
 * its processes run while the run sets up; rundir_create takes the
 * answer.  rundir_git_end waits for it (a run that ends before it creates
 * its directory); both may be called again. */
void rundir_git_begin(const struct plan *p);
void rundir_git_end(void);

/* Create the run directory and write model.net and run.json.  dir NULL:
 * runs/<model>-<local YYYYmmdd-HHMMSS> under the current directory, with
 * -2, -3, ... appended if taken; else dir itself (made with its parents),
 * which may exist only if empty.  version is trainc's version string;
 * argv[0..argc) the command line to record; threads, each CPU rank's
 * kernel threads (0 on GPUs: not recorded).  Git is asked, with a time
 * limit, for the .net file's commit and whether the file differs from it;
 * without git or outside a work tree both are null.  Returns 0, or -1 with
 * a message in err. */
int rundir_create(struct rundir *r, const char *dir, const struct plan *p, const char *version, int argc,
		  char **argv, int threads, char *err, size_t errlen);

/* Append {"time": <seconds since creation>, <json_fields>} and a newline to
 * metrics.jsonl and flush.  json_fields is the inside of an object
 * ("\"step\": 3, \"loss\": 0.5"), or "" for time alone.  Returns 0, or -1
 * with the reason in r->err. */
int rundir_metric(struct rundir *r, const char *json_fields);

/* A training step: "kind": "step", step, epoch, loss, lr, images_per_s;
 * NaN and infinities are written as null. */
int rundir_metric_step(struct rundir *r, int64_t step, int64_t epoch, double loss, double lr, double images_per_s);

/* An evaluation: "kind": "eval", step (optimizer steps done), epoch, loss,
 * accuracy (a fraction, NaN when the targets are not classes). */
int rundir_metric_eval(struct rundir *r, int64_t step, int64_t epoch, double loss, double accuracy);

/* An epoch's end (or the part of it a step budget ran): "kind": "epoch",
 * step, epoch, loss (the average over the epoch's samples, every rank's),
 * images_per_s. */
int rundir_metric_epoch(struct rundir *r, int64_t step, int64_t epoch, double loss, double images_per_s);

/* What rundir_create would refuse of a named directory (a file, or a
 * directory that is not empty), checked before a job starts its ranks. */
int rundir_check(const char *dir, char *err, size_t errlen);

/* Claim the directory rundir_create would (dir NULL: a new
 * runs/<model>-<time>[-N]) before a job starts its ranks (or a run of one
 * rank trains in a named one), so that one that cannot be made is
 * reported at once, by the launcher; its path goes to path, for the job's
 * rank 0 to create the run in, and *made says whether it is new (the
 * launcher removes it again if the job leaves it empty).
 * A named directory is locked (with lock: false where this process holds
 * it locked already, as the --save folder) for the rest of this process's
 * life, so that another job's claim of it fails as one of a directory that
 * is not empty.  Returns 0, or with a message in err -1 when the directory
 * cannot be made, -2 when a named one is taken (what rundir_check refuses,
 * or another job's). */
int rundir_claim(const char *dir, const char *model, bool lock, char *path, size_t pathlen, bool *made, char *err, size_t errlen);

/* The run directory, to place files such as weights.safetensors in. */
const char *rundir_path(const struct rundir *r);

/* Close metrics.jsonl; safe on a zeroed or closed rundir. */
void rundir_close(struct rundir *r);

#endif
