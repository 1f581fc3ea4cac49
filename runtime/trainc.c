/* trainc.c: the command line.
 *   trainc FILE.net [--gpus N | --cpus N] [--set k=v]...   train
 *   trainc check FILE.net                                  compile only
 *   trainc print FILE.net [--gpus N | --cpus N]            module tree and memory plan
 *   trainc graph FILE.net                                  Graphviz dot
 * Exit status: 0 success; 2 where the run is refused before training for
 * what the user gave (the .net file, the command line, a file or folder
 * the command names: running it again fails the same way); 1 for failures
 * while running and failures of the system (out of memory, an I/O error,
 * a full disk: util_refusal tells a refusal that was one); 3 when another
 * program truncated a file the run had mapped (filemap.h).  Every command
 * compiles first, so every error in a file is reported before anything
 * else happens.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler/compile.h"
#include "compiler/print.h"
#include "grammar/arena.h"
#include "grammar/diag.h"
#include "runtime/ckpt.h"
#include "runtime/dataset.h"
#include "runtime/filemap.h"
#include "runtime/gpu.h"
#include "runtime/kern.h"
#include "runtime/launch.h"
#include "runtime/rundir.h"
#include "runtime/train.h"
#include "runtime/util.h"
#include "runtime/weights.h"

#define TRAINC_VERSION "0.1.0"

enum { MAX_SETS = 64 };

static void usage(FILE *out)
{
	fputs("usage: trainc FILE.net [--gpus N | --cpus N] [--set section.key=value]... [--save PATH] [--resume DIR] [--init PATH]\n"
	      "                       [--run-dir DIR] [--threads N]\n"
	      "                       [--nnodes N --node-rank K [--master-addr HOST] [--master-port PORT]]\n"
	      "       trainc check FILE.net [--gpus N | --cpus N] [--set section.key=value]...\n"
	      "       trainc print FILE.net [--gpus N | --cpus N] [--set section.key=value]...\n"
	      "       trainc graph FILE.net [--gpus N | --cpus N] [--set section.key=value]...\n"
	      "       trainc --help | --version\n"
	      "\n"
	      "Compiles a .net model description into a static training plan and runs it.\n"
	      "  check   report errors in the file, or nothing; exit 0 or 2\n"
	      "  print   the module tree (as PyTorch prints the wrapped model) and the\n"
	      "          memory each rank needs, for N GPUs or N CPU workers\n"
	      "  graph   the layer graph as Graphviz dot (devices as colours, FSDP units\n"
	      "          as clusters): trainc graph m.net | dot -Tsvg > m.svg\n"
	      "options:\n"
	      "  --gpus N     N GPUs: N/D ranks when each rank owns D devices (@device), over NCCL;\n"
	      "               needs trainc-cuda.so (built with CUDA) and a GPU\n"
	      "  --cpus N     N CPU devices: N/D worker processes when each rank owns D devices;\n"
	      "               with neither, training takes every GPU present, else one CPU rank\n"
	      "  --set k=v    override a data, train or parallel setting, e.g. --set train.epochs=1\n"
	      "  --save PATH  PATH.safetensors or PATH.pt (torch.save's format): after training,\n"
	      "               the weights with PyTorch's names (a state_dict);\n"
	      "               any other PATH: a checkpoint directory (weights, optimizer state,\n"
	      "               position), written at the end and every checkpoint_every steps\n"
	      "  --resume DIR continue exactly where the checkpoint in DIR stopped\n"
	      "  --init PATH  start from these weights (safetensors, or a state_dict saved by\n"
	      "               torch.save: names and shapes must match the model exactly; other\n"
	      "               float types are rounded)\n"
	      "  --run-dir D  where the run's record goes (default runs/MODEL-TIME): the .net\n"
	      "               text that ran, run.json (plan hash, git state), metrics.jsonl, weights\n"
	      "  --threads N  compute threads per rank (default: the cores shared among the ranks)\n"
	      "  --nnodes N   a job over N machines: start trainc on each with the same command\n"
	      "               but --node-rank (0 to N-1); --gpus and --cpus count one machine's\n"
	      "  --node-rank K  this machine's place in the job; node 0 serves the rendezvous\n"
	      "  --master-addr HOST, --master-port PORT  where node 0 listens (default\n"
	      "               $MASTER_ADDR or 127.0.0.1, $MASTER_PORT or 29500)\n",
	      out);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "trainc: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n(run 'trainc --help' for usage)\n");
	va_end(ap);
	return 2;
}

/* The ending of a file name that asks for weights in another format
 * (model.pt), or NULL: such a --save would otherwise be taken for a
 * checkpoint folder's name. */
static const char *weights_lookalike(const char *path)
{
	static const char *const ext[] = { ".bin", ".pkl", ".safetensor", ".st", ".h5", ".onnx", ".npz", ".ckpt" };
	size_t n = strlen(path);
	for (size_t k = 0; k < sizeof ext / sizeof ext[0]; k++) {
		size_t e = strlen(ext[k]);
		if (n > e && strcasecmp(path + n - e, ext[k]) == 0)
			return ext[k];
	}
	return NULL;
}

/* An option trainc does not have: the nearest one it has, or, for the
 * name of a train setting (--epochs 3, --batch-size 64), the --set that
 * sets it. */
static int unknown_option(const char *a)
{
	static const char *const options[] = { "--gpus",   "--cpus",	  "--save",	   "--init",	    "--resume",
					       "--run-dir", "--threads", "--set",	   "--help",	    "--version",
					       "--nnodes", "--node-rank", "--master-addr", "--master-port" };
	static const char *const settings[] = { "epochs", "steps", "batch", "global_batch", "micro_batch", "test_batch", "seed",
						"log_interval", "checkpoint_every", "shuffle", "drop_last", "clip_grad_norm" };
	char key[64];
	size_t k = 0;
	for (const char *s = a + strspn(a, "-"); *s && *s != '=' && k + 1 < sizeof key; s++)
		key[k++] = *s == '-' ? '_' : *s;
	key[k] = 0;
	const char *setting = diag_nearest(key, settings, (int)(sizeof settings / sizeof settings[0]));
	if (setting && (!strcmp(key, setting) || !strcmp(key, "batch_size") || !strcmp(key, "num_epochs") || !strcmp(key, "max_steps")))
		return usage_error("unknown option '%s'; settings are set with --set: --set train.%s=VALUE", a, setting);
	if (!strcmp(key, "lr") || !strcmp(key, "learning_rate"))
		return usage_error("unknown option '%s'; the learning rate is the optimizer's: --set \"train.optimizer=sgd(lr=0.01)\"", a);
	const char *near = diag_nearest(a, options, (int)(sizeof options / sizeof options[0]));
	if (near)
		return usage_error("unknown option '%s'; did you mean '%s'?", a, near);
	return usage_error("unknown option '%s'", a);
}

static bool parse_count(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < INT_MIN || v > INT_MAX)
		return false;
	*out = (int)v;
	return true;
}

/* --save's destination, tried before training so that a run is not lost
 * at its end to a missing or read-only folder: a .safetensors file is
 * written in its folder, a checkpoint folder in itself or its parent. */
static int check_save(const char *path, const char *resume, const char *run_dir)
{
	struct stat st;
	bool exists = stat(path, &st) == 0, weights = train_is_weights_file(path);
	if (exists && weights && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "trainc: --save %s: is a folder; name a file to write the weights to\n", path);
		return -1;
	}
	if (exists && !weights && !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "trainc: --save %s: is a file; a checkpoint is a folder (name a new one), and weights alone go to a "
			"name ending in .safetensors\n", path);
		return -1;
	}
	char dir[4096], name[4096];
	snprintf(name, sizeof name, "%s", path);
	for (size_t n = strlen(name); n > 1 && name[n - 1] == '/'; n--)
		name[n - 1] = 0; /* "ck/" is the folder ck */
	const char *slash = strrchr(name, '/');
	if (exists && !weights)
		snprintf(dir, sizeof dir, "%s", name);
	else if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", slash == name ? 1 : (int)(slash - name), name);
	/* another run's checkpoints are not overwritten by a fresh run: only
	 * the run they belong to continues into them (--resume DIR --save DIR) */
	char latest[4200], a[PATH_MAX], b[PATH_MAX];
	snprintf(latest, sizeof latest, "%s/latest", dir);
	if (exists && !weights && access(latest, F_OK) == 0 &&
	    !(resume && realpath(resume, a) && realpath(dir, b) && strcmp(a, b) == 0)) {
		char w[8400];
		const char *word = util_shell_word(path, w, sizeof w);
		fprintf(stderr, "trainc: --save %s: already holds another run's checkpoints; continue that run with --resume %s --save %s, "
			"or save into a new folder\n", path, word, word);
		return -1;
	}
	/* nor another run's record (run.json): its weights and metrics would
	 * sit among this run's checkpoints; this run's own --run-dir may be
	 * its --save folder, and a resumed one continues into its folder */
	char record[4200];
	snprintf(record, sizeof record, "%s/run.json", dir);
	bool same_resume = resume && realpath(resume, a) && realpath(dir, b) && strcmp(a, b) == 0;
	bool same_run_dir = run_dir && realpath(run_dir, a) && realpath(dir, b) && strcmp(a, b) == 0;
	if (exists && !weights && access(record, F_OK) == 0 && !same_resume && !same_run_dir) {
		fprintf(stderr, "trainc: --save %s: is another run's run directory (it holds run.json); save into a new folder\n", path);
		return -1;
	}
	char probe[4200];
	snprintf(probe, sizeof probe, "%s/.trainc-save-XXXXXX", dir);
	int fd = mkstemp(probe);
	if (fd < 0) {
		int e = errno;
		struct stat ds;
		if (e == ENOENT && stat(dir, &ds) == 0 && S_ISDIR(ds.st_mode))
			fprintf(stderr, "trainc: --save %s: cannot create files in %s; choose another place\n", path, dir);
		else if (e == ENOENT)
			fprintf(stderr, "trainc: --save %s: the folder %s does not exist; create it first (mkdir -p %s)\n", path, dir,
				util_shell_word(dir, probe, sizeof probe));
		else
			fprintf(stderr, "trainc: --save %s: cannot write in %s: %s; choose another place\n", path, dir,
				strerror(util_os_error(e)));
		return -1;
	}
	close(fd);
	unlink(probe);
	return 0;
}

static char stop_note[4400], stop_note_none[4400], stop_latest[4200];
static char fault_note[8600], fault_note_none[4400]; /* after a file shrank under the run */
static bool bar_on_tty; /* a progress bar may have left its line unfinished */

/* The note for a --save folder with a checkpoint, or the one for none;
 * async-signal-safe (access is) */
static const char *pick_note(const char *saved, const char *none)
{
	return stop_latest[0] && access(stop_latest, F_OK) == 0 ? saved : none;
}

static void say(const char *s, size_t n)
{
	ssize_t w = write(STDERR_FILENO, s, n);
	(void)w;
}

static void on_stop(int sig)
{
	const char *note = pick_note(stop_note, stop_note_none);
	say(note, strlen(note));
	signal(sig, SIG_DFL);
	raise(sig);
}

/* From filemap's SIGBUS handler: which file shrank, then whether the run's
 * checkpoints let it go on (nothing is said of them before stop_notes ran) */
static void on_file_shrank(const char *msg, size_t len)
{
	if (bar_on_tty)
		say("\n", 1);
	say(msg, len);
	const char *note = pick_note(fault_note, fault_note_none);
	say(note, strlen(note));
}

/* The notes a run stopped by a signal, by a file that shrank under it, or
 * by a failed rank ends with: how to resume from the --save folder's latest
 * checkpoint, or that there is none yet (and when checkpoint_every, every
 * so many steps, would write the first). */
static void stop_notes(const char *save, int64_t every)
{
	if (save && !train_is_weights_file(save)) {
		snprintf(stop_latest, sizeof stop_latest, "%s/latest", save);
		char w[4200], when[96];
		const char *word = util_shell_word(save, w, sizeof w); /* for the commands the notes suggest */
		if (every > 0)
			snprintf(when, sizeof when, "train.checkpoint_every = %lld writes the first after step %lld", (long long)every,
				 (long long)every);
		else
			snprintf(when, sizeof when, "train.checkpoint_every saves as it goes");
		snprintf(stop_note, sizeof stop_note, "\ntrainc: stopped by a signal; --resume %s continues from its latest checkpoint\n",
			 word);
		snprintf(stop_note_none, sizeof stop_note_none, "\ntrainc: stopped by a signal before a checkpoint was saved in %s (%s)\n",
			 save, when);
		snprintf(fault_note, sizeof fault_note, "trainc: the checkpoints in %s are intact: --resume %s continues from the latest\n",
			 save, word);
		snprintf(fault_note_none, sizeof fault_note_none, "trainc: no checkpoint had been saved in %s yet (%s)\n", save, when);
	} else {
		snprintf(stop_note_none, sizeof stop_note_none, "\ntrainc: stopped by a signal; nothing was saved (--save DIR keeps checkpoints)\n");
		snprintf(fault_note_none, sizeof fault_note_none, "trainc: nothing was saved (--save DIR keeps checkpoints)\n");
	}
}

/* A single rank stopped by Ctrl-C or SIGTERM says so, and how to go on,
 * then ends as the signal ends a process; a closed output pipe (| head)
 * no longer ends it, as it does not end ranks under the launcher. */
static void single_rank_signals(const char *save, int64_t every)
{
	stop_notes(save, every);
	bar_on_tty = isatty(STDOUT_FILENO);
	int sigs[2] = { SIGINT, SIGTERM };
	for (int i = 0; i < 2; i++) {
		struct sigaction old, sa = { 0 };
		sa.sa_handler = on_stop;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) /* an ignore (nohup, a background job) holds */
			sigaction(sigs[i], &sa, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
}

/* After a run's or job's failure while running (its own words said), or a
 * file that shrank under a job: whether --resume of the --save folder can
 * go on. */
static void resume_note(int rc)
{
	if (rc == FILEMAP_EXIT_SHRANK || (rc == 1 && stop_latest[0]))
		fputs(pick_note(fault_note, fault_note_none), stderr);
}

/* A checkpoint folder is saved into by one run at a time: the folder is
 * made now and locked (flock) for this process's life, which the workers
 * live within; a second run into it is refused instead of the two
 * removing each other's half-written saves. */
static char made_save[4200]; /* a --save folder this run made: removed at exit if it stayed empty */

static void remove_made_save(void)
{
	rmdir(made_save); /* fails, as it should, once a checkpoint is in it */
}

static int lock_save(const char *path)
{
	if (train_is_weights_file(path))
		return 0;
	if (mkdir(path, 0755) == 0) {
		snprintf(made_save, sizeof made_save, "%s", path);
		atexit(remove_made_save);
	} else if (errno != EEXIST) {
		fprintf(stderr, "trainc: --save %s: cannot create the folder: %s\n", path, strerror(util_os_error(errno)));
		return -1;
	}
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0; /* fd stays open: the lock lasts until this process exits */
	if (fd >= 0 && errno == EWOULDBLOCK) {
		fprintf(stderr, "trainc: --save %s: another trainc run is saving into it; wait for it to end, or save into a new folder\n",
			path);
		close(fd);
		return -1;
	}
	/* a folder that cannot be read or a file system without locks: go on unlocked */
	fprintf(stderr, "trainc: warning: --save %s: cannot lock the folder (%s); make sure no other run saves into it\n", path,
		strerror(errno));
	if (fd >= 0)
		close(fd);
	return 0;
}

/* Whether --resume dir can go on at world ranks (before spawning N
 * workers, so that a checkpoint that cannot resume here is reported once,
 * not by every rank): 0, or the exit status after saying why (2: a
 * checkpoint that is damaged, another model's or settings', or made at a
 * rank count this one cannot go on at; 1 where the system failed reading
 * it). */
static int check_resume(const struct plan *p, const char *dir, int world, const char *flag)
{
	struct ckpt_state st;
	char err[1024];
	if (ckpt_check(dir, p, &st, err, sizeof err) == 0 && train_resume_world(p, dir, flag, &st, world, 0, err, sizeof err) == 0)
		return 0;
	fprintf(stderr, "trainc: %s\n", err);
	return util_refusal();
}

/* Before spawning N workers: --init weights that do not fit the model are
 * reported once, not by every rank. */
static int check_init(const struct plan *p, const char *path)
{
	char err[1024];
	if (weights_load(p, NULL, path, true, err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		return -1;
	}
	return 0;
}

/* npy() sets: their files read and checked against the plan once, before
 * any worker starts, each fault said at the argument naming its file. */
static void check_npy(struct diag *d, const struct plan *p)
{
	const struct plan_dataset *sets[2] = { &p->train_data, &p->test_data };
	for (int i = 0; i < 2; i++) {
		if (sets[i]->kind != DATA_NPY)
			continue;
		struct dataset ds;
		char err[5000];
		int failed = 0;
		if (train_open_npy(p, sets[i], &ds, false, &failed, err, sizeof err) != 0)
			diag_error(d, failed ? sets[i]->target_loc : sets[i]->input_loc, "%s", err);
		else
			dataset_close(&ds);
	}
}

/* Before spawning N workers: open the datasets once here, so a missing or
 * broken file is reported once, not by every rank; and so is a batch that
 * no rank, or some rank, cannot run (a batch norm over one value). */
static int check_data(const struct plan *p, int world)
{
	const struct plan_dataset *sets[2] = { &p->train_data, &p->test_data };
	int64_t n[2] = { sets[0]->samples, sets[1]->kind == DATA_NONE ? 0 : sets[1]->samples };
	char err[5000];
	for (int i = 0; i < 2; i++) {
		if (sets[i]->kind != DATA_MNIST && sets[i]->kind != DATA_NPY)
			continue;
		struct dataset ds;
		int rc = sets[i]->kind == DATA_NPY ? train_open_npy(p, sets[i], &ds, true, NULL, err, sizeof err) :
						     train_open_data(p, sets[i], &ds, err, sizeof err);
		if (rc == 0) {
			n[i] = ds.n;
			rc = i == 0 ? train_check_samples(&ds, p->train.eval_only ? 1 : world, err, sizeof err) :
				      train_check_test_samples(ds.images_path, ds.n, err, sizeof err);
			dataset_close(&ds);
		}
		if (rc != 0) {
			fprintf(stderr, "trainc: %s\n", err);
			return -1;
		}
	}
	if (train_check_batches(p, world, n[0], n[1], err, sizeof err) != 0) {
		fprintf(stderr, "trainc: %s\n", err);
		return -1;
	}
	return 0;
}

/* The run directory claimed (made if new, locked if named: rundir_claim)
 * into dir: 0, or the exit status after saying why. */
static int claim_run_dir(const char *run_dir, const char *model, const char *save, char *dir, size_t n, bool *made)
{
	/* a run directory that is also the --save folder is locked as that
	 * already (lock_save): a second lock of it would be refused */
	struct stat a, b;
	bool saved_in = run_dir && save && stat(run_dir, &a) == 0 && stat(save, &b) == 0 && a.st_dev == b.st_dev &&
			a.st_ino == b.st_ino;
	char err[1024];
	int claimed = rundir_claim(run_dir, model, !saved_in, dir, n, made, err, sizeof err);
	if (claimed == 0)
		return 0;
	*made = false;
	fprintf(stderr, "trainc: %s\n", err);
	return util_refusal(); /* taken, or cannot be made where it is named (1 where the system failed: a full disk) */
}

/* A job of several ranks: its run directory is claimed here, before any
 * rank starts, so that one that cannot be made (a read-only or deleted
 * current directory) is said once rather than found by rank 0 after the
 * ranks have met; rank 0 creates the run in it, and one the job left
 * empty is removed again. */
static int launch_job(const struct plan *p, struct launch_opts *lo, const char *run_dir, const char *save, int argc, char **argv)
{
	char dir[RUNDIR_PATH_MAX];
	bool made = false;
	/* rank 0 runs on node 0, whose launcher claims the run directory */
	int claimed = lo->node == 0 ? claim_run_dir(run_dir, p->model_name, save, dir, sizeof dir, &made) : 0;
	if (claimed != 0)
		return claimed;
	lo->run_dir = lo->node == 0 ? dir : NULL;
	stop_notes(save, p->train.checkpoint_every);
	int rc = launch_run(lo, argc, argv);
	if (rc == 128 + SIGINT || rc == 128 + SIGTERM || rc == 128 + SIGHUP) /* the job's stop note */
		fputs(pick_note(stop_note, stop_note_none) + 1, stderr);
	else /* after the failure is said, by the launcher */
		resume_note(rc);
	if (made)
		rmdir(dir); /* fails, as it should, once the run wrote in it */
	return rc;
}

int main(int argc, char **argv)
{
	const char *cmd = "train", *file = NULL;
	const char *sets[MAX_SETS];
	int nsets = 0, gpus = -1, cpus = -1, threads = 0;
	int nnodes = 0, node = -1, master_port = 0;
	const char *master_addr = NULL;
	const char *save = NULL, *init = NULL, *run_dir = NULL, *resume = NULL;
	/* standard error a line at a time, not a byte run at a time: a
	 * diagnostic's lines reach a terminal, a pipe or the launcher as whole
	 * writes (the signal handlers' notes use write(2) and end in '\n') */
	static char errbuf[BUFSIZ];
	setvbuf(stderr, errbuf, _IOLBF, sizeof errbuf);
	kern_quiet_blas();
	int i = 1;
	if (argc > 1 && (!strcmp(argv[1], "check") || !strcmp(argv[1], "print") || !strcmp(argv[1], "graph"))) {
		cmd = argv[1];
		i = 2;
	} else if (argc > 1 && !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	} else if (argc > 1 && argv[1][0] != '-' && !strchr(argv[1], '.') && !strchr(argv[1], '/') && access(argv[1], F_OK) != 0) {
		/* not a file: a command, misspelt */
		static const char *const cmds[] = { "check", "print", "graph", "help" };
		const char *near = diag_nearest(argv[1], cmds, 4);
		if (near)
			return usage_error("unknown command '%s'; did you mean '%s'?", argv[1], near);
		return usage_error("unknown command '%s'; the commands are check, print and graph, or give a .net file to train", argv[1]);
	}
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--version")) {
			printf("trainc %s\n", TRAINC_VERSION);
			return 0;
		}
		if (!strcmp(a, "--gpus") || !strcmp(a, "--cpus")) {
			if (i + 1 >= argc)
				return usage_error("%s needs a number", a);
			int n;
			if (!parse_count(argv[i + 1], &n))
				return usage_error("%s takes a number, not '%s'", a, argv[i + 1]);
			if (n < 1)
				return usage_error("%s must be at least 1", a);
			if ((a[2] == 'g' ? gpus : cpus) > 0)
				return usage_error("%s is given twice; give it once", a);
			if (a[2] == 'g')
				gpus = n;
			else
				cpus = n;
			i++;
			continue;
		}
		if ((!strcmp(a, "--save") || !strcmp(a, "--init") || !strcmp(a, "--run-dir") || !strcmp(a, "--resume") ||
		     !strcmp(a, "--set")) && i + 1 < argc && !strncmp(argv[i + 1], "--", 2))
			return usage_error(!strcmp(a, "--set") ? "%s needs section.key=value, not the option '%s'"
							       : "%s needs a path, not the option '%s' (a path that starts with -- can be written ./%s)",
					   a, argv[i + 1], argv[i + 1]);
		/* an unset shell variable (--run-dir "$OUT"): "" would be the current
		 * or the root folder, depending on who joins it to a name */
		if ((!strcmp(a, "--save") || !strcmp(a, "--init") || !strcmp(a, "--run-dir") || !strcmp(a, "--resume") ||
		     !strcmp(a, "--set")) && i + 1 < argc && !argv[i + 1][0])
			return usage_error("%s is given an empty %s (an unset shell variable?)", a, !strcmp(a, "--set") ? "setting" : "path");
		if (!strcmp(a, "--save")) {
			if (i + 1 >= argc)
				return usage_error("--save needs a file name, e.g. --save model.safetensors");
			if (save)
				return usage_error("--save is given twice; give it once");
			save = argv[++i];
			const char *ext = weights_lookalike(save);
			if (ext)
				return usage_error("--save %s: trainc writes weights as safetensors or torch.save's format, not %s: name "
						   "the file NAME.safetensors or NAME.pt (PyTorch reads it with torch.load); a name without "
						   "such an ending is a checkpoint folder", save, ext);
			continue;
		}
		if (!strcmp(a, "--init") || !strcmp(a, "--run-dir") || !strcmp(a, "--resume")) {
			if (i + 1 >= argc)
				return usage_error("%s needs a path", a);
			const char **slot = a[2] == 'i' ? &init : a[3] == 'u' ? &run_dir : &resume;
			if (*slot)
				return usage_error("%s is given twice; give it once", a);
			*slot = argv[++i];
			continue;
		}
		/* torchrun's spellings, with - or _ */
		if (!strcmp(a, "--nnodes") || !strcmp(a, "--node-rank") || !strcmp(a, "--node_rank") || !strcmp(a, "--master-port") ||
		    !strcmp(a, "--master_port")) {
			int v, *slot = a[2] == 'n' && a[3] == 'n' ? &nnodes : a[2] == 'n' ? &node : &master_port;
			bool port = slot == &master_port;
			if ((slot == &node ? *slot >= 0 : *slot > 0))
				return usage_error("%s is given twice; give it once", a);
			if (i + 1 >= argc || !parse_count(argv[i + 1], &v) || v < (slot == &nnodes || port ? 1 : 0) ||
			    v > (port ? 65535 : 4096))
				return usage_error("%s takes a number from %d to %d%s", a, slot == &nnodes || port ? 1 : 0,
						   port ? 65535 : 4096, i + 1 < argc ? "" : ", and none is given");
			*slot = v;
			i++;
			continue;
		}
		if (!strcmp(a, "--master-addr") || !strcmp(a, "--master_addr")) {
			if (i + 1 >= argc || !argv[i + 1][0] || argv[i + 1][0] == '-')
				return usage_error("%s needs a host name or address", a);
			if (master_addr)
				return usage_error("%s is given twice; give it once", a);
			master_addr = argv[++i];
			continue;
		}
		if (!strcmp(a, "--threads")) {
			if (threads)
				return usage_error("--threads is given twice; give it once");
			if (i + 1 >= argc || !parse_count(argv[i + 1], &threads) || threads < 1)
				return usage_error("--threads takes a positive number");
			if (threads > 1024) /* OpenMP's thread creation fails, or its stacks overflow, long before */
				return usage_error("--threads %d: at most 1024", threads);
			i++;
			continue;
		}
		if (!strcmp(a, "--set")) {
			if (i + 1 >= argc)
				return usage_error("%s needs section.key=value", a);
			if (nsets == MAX_SETS)
				return usage_error("more than 64 --set options");
			const char *v = argv[++i];
			if (!strchr(v, '=') && i + 1 < argc && argv[i + 1][0] != '-')
				return usage_error("--set takes section.key=value in one word: --set %s=%s", v, argv[i + 1]);
			sets[nsets++] = v;
			continue;
		}
		if (a[0] == '-' && a[1])
			return unknown_option(a);
		if (file)
			return usage_error("one .net file at a time; '%s' is a second one", a);
		file = a;
	}
	if (!file) {
		if (argc == 1) {
			usage(stderr);
			return 2;
		}
		return usage_error("no .net file given");
	}
	if (gpus > 0 && cpus > 0)
		return usage_error("give --gpus or --cpus, not both");
	if (nnodes > 1 && node < 0 && !strcmp(cmd, "train"))
		return usage_error("--nnodes %d needs --node-rank K: 0 on the machine that serves the rendezvous, 1 to %d on the others",
				   nnodes, nnodes - 1);
	if (nnodes <= 1 && (node > 0 || master_addr || master_port))
		return usage_error("%s is for a job over several machines: give --nnodes N as well",
				   node > 0 ? "--node-rank" : master_addr ? "--master-addr" : "--master-port");
	if (node >= (nnodes > 0 ? nnodes : 1))
		return usage_error("--node-rank %d is out of range: --nnodes %d makes nodes 0 to %d", node, nnodes, nnodes - 1);
	if (strcmp(cmd, "train") != 0 && (save || init || resume || run_dir || threads || node > 0 || master_addr || master_port))
		return usage_error("%s is for training; 'trainc %s' does not train", save ? "--save" : init ? "--init" : resume ? "--resume" :
				   run_dir ? "--run-dir" : threads ? "--threads" : node > 0 ? "--node-rank" :
				   master_addr ? "--master-addr" : "--master-port", cmd);
	if (nnodes < 1)
		nnodes = 1;
	if (node < 0)
		node = 0;
	if (nnodes > 1 && !master_addr)
		master_addr = getenv("MASTER_ADDR") && getenv("MASTER_ADDR")[0] ? getenv("MASTER_ADDR") : "127.0.0.1";
	if (nnodes > 1 && !master_port) {
		const char *env = getenv("MASTER_PORT");
		if (env && (!parse_count(env, &master_port) || master_port < 1 || master_port > 65535))
			return usage_error("MASTER_PORT=%s: the port must be a number from 1 to 65535", env);
		if (!env)
			master_port = 29500;
	}
	if (init && resume)
		return usage_error("give --init (weights to start from) or --resume (a checkpoint to continue), not both");

	struct arena arena = { 0 };
	struct diag d;
	diag_init(&d, stderr);
	/* with --gpus or --cpus, a first look finds how many devices a rank owns;
	 * the rank count, and what depends on it, comes with the second */
	struct compile_opts o = { file, 1, sets, nsets, gpus > 0 || cpus > 0 || nnodes > 1, gpus > 0 };
	/* training without --gpus or --cpus: every GPU present, as the seed
	 * programs take torch.cuda.device_count(), else one rank on the CPU.
	 * The file is looked at first, so that its errors are said before the
	 * GPU libraries load; the workers are told the count (--gpus N). */
	bool auto_gpus = false;
	struct plan *p = NULL;
	if (!strcmp(cmd, "train") && gpus < 0 && cpus < 0 && launch_worker_rank(&(int){ 0 }) < 0 && gpu_maybe()) {
		o.world_unknown = true;
		p = compile_file(&arena, &d, &o);
		int ngpu = 0;
		char gerr[1024];
		if (!p || d.errors) {
			/* said below */
		} else if (gpu_open(&ngpu, gerr, sizeof gerr) == 0 && ngpu > 0) {
			gpus = ngpu;
			auto_gpus = true;
			o.gpu = true;
		} else {
			fprintf(stderr, "trainc: training on the CPU: %s\n", gerr);
			o.world_unknown = nnodes > 1; /* a job over machines compiles again below, with its ranks */
			if (!o.world_unknown)
				p = compile_file(&arena, &d, &o);
		}
	} else {
		p = compile_file(&arena, &d, &o);
	}
	if (p && auto_gpus && gpus % p->ndevices != 0) {
		/* the most GPUs that whole ranks take; fewer than one rank's: the CPU */
		int found = gpus;
		gpus -= gpus % p->ndevices;
		if (gpus == 0) {
			fprintf(stderr, "trainc: training on the CPU: a rank of this model takes %d GPUs, and %d %s visible\n", p->ndevices,
				found, found == 1 ? "is" : "are");
			gpus = -1;
			auto_gpus = false;
			o.world_unknown = nnodes > 1; /* a job over machines compiles again below, with its ranks */
			o.gpu = false;
			if (!o.world_unknown)
				p = compile_file(&arena, &d, &o);
		}
	}
	if (p && (gpus > 0 || cpus > 0 || nnodes > 1)) {
		int n = gpus > 0 ? gpus : cpus > 0 ? cpus : 1;
		if (n % p->ndevices != 0) {
			/* point at the annotation that makes a rank own that many devices */
			const char *flag = gpus > 0 ? "--gpus" : "--cpus";
			if (n < p->ndevices)
				diag_error(&d, p->device_loc, "this places a layer on device %d of each rank, but %s %d gives a rank only %d device%s",
					   p->ndevices - 1, flag, n, n, n == 1 ? "" : "s");
			else
				diag_error(&d, p->device_loc, "each rank owns %d devices (up to this @device), so %s must be a multiple of %d, not %d",
					   p->ndevices, flag, p->ndevices, n);
			fprintf(stderr, "1 error\n");
			arena_release(&arena);
			return 2;
		}
		o.world = n / p->ndevices * nnodes;
		o.world_unknown = false;
		p = compile_file(&arena, &d, &o);
	}
	/* missing data files are named at the data statement before a run
	 * starts (check looks at the file alone: its data may live elsewhere) */
	if (p && !d.errors && !strcmp(cmd, "train") && launch_worker_rank(&(int){ 0 }) < 0) {
		compile_check_data(&d, p);
		check_npy(&d, p);
	}
	if (!p || d.errors) {
		if (d.errors)
			fprintf(stderr, "%d error%s\n", d.errors, d.errors == 1 ? "" : "s");
		arena_release(&arena);
		return 2;
	}
	int rc = 0;
	if (!strcmp(cmd, "print")) {
		print_plan(stdout, p);
	} else if (!strcmp(cmd, "graph")) {
		print_graph(stdout, p);
	} else if (!strcmp(cmd, "train")) {
		int wworld = 0, wrank = launch_worker_rank(&wworld);
		/* a worker's word goes to the launcher, which says it once for the job */
		filemap_catch(wrank >= 0 ? launch_worker_note : on_file_shrank);
		int here = o.world / nnodes; /* this machine's ranks */
		if (threads > 0 && wrank < 0 && (int64_t)threads * here > kern_cpus())
			fprintf(stderr, "trainc: warning: %d thread%s on each of %d rank%s is more than the %d CPU%s this process may use; "
				"expect a slower run\n", threads, threads == 1 ? "" : "s", here, here == 1 ? "" : "s", kern_cpus(),
				kern_cpus() == 1 ? "" : "s");
		/* the workers' command line: this one, with the GPUs found here */
		char count[16], **wargv = argv;
		int wargc = argc;
		if (auto_gpus && (wargv = calloc((size_t)argc + 3, sizeof *wargv))) {
			snprintf(count, sizeof count, "%d", gpus);
			memcpy(wargv, argv, (size_t)argc * sizeof *argv);
			static char gpus_flag[] = "--gpus";
			wargv[wargc++] = gpus_flag;
			wargv[wargc++] = count;
			wargv[wargc] = NULL;
		} else if (auto_gpus) {
			fprintf(stderr, "trainc: out of memory\n");
			arena_release(&arena);
			return 1;
		}
		struct train_opts to = { save, init, resume, run_dir, TRAINC_VERSION, threads, 0, o.world, wargc, wargv };
		if (wrank == 0 && launch_run_dir())
			to.run_dir = launch_run_dir();
		char gerr[1024], own_dir[RUNDIR_PATH_MAX];
		bool own_made = false;
		int ngpu = 0;
		if (p->train_data.kind == DATA_NONE) {
			fprintf(stderr, "trainc: error: %s has no data section with a training set; add data { train = ... }\n", p->path);
			rc = 2;
		} else if (p->train.eval_only && save && !train_is_weights_file(save)) {
			/* a checkpoint holds a training run's position and optimizer
			 * state; an evaluation moves neither */
			fprintf(stderr, "trainc: --save %s: train.steps = 0 trains nothing, so there is no checkpoint to write; "
				"give --save FILE.safetensors for the weights, or train.steps >= 1\n", save);
			rc = 2;
		} else if (save && wrank < 0 && node == 0 && (check_save(save, resume, run_dir) != 0 || lock_save(save) != 0)) {
			/* node 0's launcher checks and locks the --save folder for the
			 * job (the other nodes see it on a shared file system) */
			rc = util_refusal();
		} else if (run_dir && wrank < 0 && node == 0 && rundir_check(run_dir, gerr, sizeof gerr) != 0) {
			fprintf(stderr, "trainc: %s\n", gerr);
			rc = util_refusal();
		} else if (run_dir && wrank < 0 && o.world == 1 &&
			   (rc = claim_run_dir(run_dir, p->model_name, save, own_dir, sizeof own_dir, &own_made)) != 0) {
			/* one rank alone locks a named run directory as a job's
			 * launcher does: two runs started into it at once cannot
			 * both find it empty */
		} else if (gpus > 0 && gpu_open(&ngpu, gerr, sizeof gerr) != 0) {
			fprintf(stderr, "trainc: --gpus %d: %s\n", gpus, gerr);
			rc = 2;
		} else if (gpus > 0 && ngpu < gpus) {
			fprintf(stderr, "trainc: --gpus %d: only %d GPU%s visible; lower --gpus or check CUDA_VISIBLE_DEVICES\n", gpus, ngpu,
				ngpu == 1 ? " is" : "s are");
			rc = 2;
		} else if (gpus > 0 && wrank >= 0) {
			const char *lr = getenv("LOCAL_RANK");
			to.rank = wrank;
			rc = wworld != o.world ? 2 : gpu_train(p, &to, lr ? atoi(lr) : wrank);
			if (wworld != o.world)
				fprintf(stderr, "trainc: worker %d: the launcher started %d ranks, but this command line makes %d\n", wrank, wworld,
					o.world);
		} else if (gpus > 0 && o.world == 1) {
			single_rank_signals(save, p->train.checkpoint_every);
			rc = gpu_train(p, &to, 0);
			resume_note(rc);
		} else if (wrank >= 0) {
			if (wworld != o.world) {
				fprintf(stderr, "trainc: worker %d: the launcher started %d ranks, but this command line makes %d\n", wrank, wworld,
					o.world);
				rc = 2;
			} else {
				to.rank = wrank;
				rc = train_run(p, &to);
			}
		} else if (o.world > 1) {
			if (check_data(p, o.world) != 0 || (init && check_init(p, init) != 0)) {
				rc = util_refusal();
			} else if (resume && (rc = check_resume(p, resume, o.world, gpus > 0 ? "--gpus" : "--cpus")) != 0) {
				/* rc says which */
			} else {
				struct launch_opts lo = { o.world / nnodes, p->parallel.timeout_s, 5.0, NULL, nnodes, node, master_addr, master_port };
				rc = launch_job(p, &lo, run_dir, save, wargc, wargv);
			}
		} else if (!resume || (rc = check_resume(p, resume, 1, gpus > 0 ? "--gpus" : "--cpus")) == 0) {
			single_rank_signals(save, p->train.checkpoint_every);
			rc = train_run(p, &to);
			resume_note(rc);
		}
		if (own_made)
			rmdir(own_dir); /* fails, as it should, once the run wrote in it */
		if (wargv != argv)
			free(wargv);
	}
	arena_release(&arena);
	return rc;
}
