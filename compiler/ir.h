/* ir.h: the compiled plan, the one IR every compiler pass works on and the
 * runtime executes.  A plan is fixed before any worker starts: the layers in
 * execution order with their shapes, the parameters with their state_dict
 * names, the device of every layer, the FSDP units, the memory plan per
 * device and the typed settings of data, training and parallelism.
 * Every array lives in the compilation's arena; indices, not pointers, link
 * the parts, so a plan can be hashed and printed deterministically.
 */
#ifndef IR_H
#define IR_H
#include <stdbool.h>
#include <stdint.h>

#include "grammar/source.h"

struct arena;
struct val;

/* PLAN_MAX_STAGES: runs of consecutive layers on one device in a rank, the
 * pipeline's fixed stage table (pipe.h). */
enum { SHAPE_MAX = 6, PLAN_MAX_DEVICES = 16, PLAN_MAX_STAGES = 64, PLAN_MAX_MILESTONES = 16, PLAN_MAX_WRAP_BLOCKS = 8 };

/* A per-sample shape: the batch dimension is never stored. */
struct shape {
	int rank;
	int64_t d[SHAPE_MAX];
};

/* OP_ table: keep in step with ops.c's op_info[] (tag: OP_TABLE). */
enum op {
	OP_INPUT, OP_LINEAR, OP_CONV2D, OP_MAXPOOL2D, OP_AVGPOOL2D, OP_ADAPTIVE_AVGPOOL2D, OP_ADAPTIVE_MAXPOOL2D, OP_ZEROPAD2D,
	OP_BATCHNORM1D, OP_BATCHNORM2D, OP_LAYERNORM, OP_GROUPNORM, OP_EMBEDDING, OP_DROPOUT, OP_FLATTEN,
	OP_RELU, OP_GELU, OP_TANH, OP_SIGMOID,
	OP_LEAKY_RELU, OP_ELU, OP_SELU, OP_SILU, OP_SOFTPLUS, OP_HARDTANH, OP_RELU6, OP_HARDSIGMOID, OP_HARDSWISH, OP_MISH,
	OP_CELU, OP_LOGSIGMOID, OP_SOFTSIGN, OP_TANHSHRINK, OP_SOFTSHRINK, OP_HARDSHRINK, OP_THRESHOLD, OP_PRELU,
	OP_SOFTMAX, OP_LOG_SOFTMAX,
	OP_ADD,      /* residual join: out = in + in2 */
	OP_TRANSFER, /* activation moves between two devices of a rank */
	OP__COUNT
};

/* The activations of runtime/act_elem.h, as the case labels of a switch */
#define OP_ACT_CASES                                                                                               \
	case OP_LEAKY_RELU: case OP_ELU: case OP_SELU: case OP_SILU: case OP_SOFTPLUS: case OP_HARDTANH: case OP_RELU6: \
	case OP_HARDSIGMOID: case OP_HARDSWISH: case OP_MISH: case OP_CELU: case OP_LOGSIGMOID: case OP_SOFTSIGN:       \
	case OP_TANHSHRINK: case OP_SOFTSHRINK: case OP_HARDSHRINK: case OP_THRESHOLD

enum dtype { DT_F32, DT_I64, DT_BF16, DT_F16 };

/* Layers that are another op under their own name: conv1d, maxpool1d,
 * avgpool1d, adaptive_avgpool1d and adaptive_maxpool1d are the 2-D ops
 * over (channels, length) at a height of 1 (as ATen computes them); unflatten is flatten's view the other way, identity
 * its view of nothing (dimensions 1..1 merged);
 * dropout1d (VAR_1D) and dropout2d (VAR_2D) are dropout drawing once per
 * channel of a (C, L) or (C, H, W) sample; instancenorm1d and
 * instancenorm2d (VAR_1D, VAR_2D) are groupnorm of a group per channel of
 * a (C, L) or (C, H, W) sample. */
enum variant { VAR_NONE, VAR_1D, VAR_2D, VAR_UNFLATTEN, VAR_IDENTITY };

/* (channels, height, width) of a per-sample shape a 2-D layer reads or
 * writes: (C, H, W), or (C, L) as a height of 1 (conv1d and its pools) */
static inline void shape_chw(const int64_t *d, int rank, int64_t *c, int64_t *h, int64_t *w)
{
	*c = d[0];
	*h = rank == 2 ? 1 : d[1];
	*w = d[rank - 1];
}

/* How a size argument was written: PyTorch keeps a pool's arguments as
 * given, and its repr shows 2, (2, 3) or [2, 3] accordingly. */
enum size_form { FORM_INT, FORM_TUPLE, FORM_LIST };

/* A number argument written as an integer: PyTorch keeps it one, and its
 * repr shows eps=0, not eps=0.0, with every digit of a large one. */
struct int_form {
	bool is_int;
	int64_t i;
};

struct node {
	enum op op;
	const char *path;  /* module path ("layer1.conv1"); every node has one */
	const char *what;  /* for messages: the path, or "layer 3 (relu)" when unnamed */
	struct loc loc;    /* the statement that made it */
	int in, in2;       /* producing nodes; -1 when absent */
	struct shape out;  /* per sample */
	enum dtype dtype;  /* of the output */
	int device;        /* index among the rank's devices */
	int unit;          /* FSDP unit, -1 without FSDP */
	int scope;         /* the module that holds it */
	bool frozen;
	/* made by the compiler for another layer, not written: the zero pad
	 * before a conv2d(padding="same") that pads one side more (it shares
	 * the conv's scope, path and placement, and is no module of its own) */
	bool hidden;
	/* the op under another layer's name (VAR_NONE: its own) */
	enum variant variant;
	int param0, nparams; /* plan.params[param0 .. param0+nparams) */
	int alias;         /* node whose buffer this output reuses (flatten), or -1 */
	/* compile time only: the in-size as written (linear's in, conv2d's in,
	 * batchnorm2d's channels, layernorm's shape), and the argument a shape
	 * error was about, so that an error in a block's body can point at the
	 * call that passed the value in */
	const struct val *in_arg, *blame;
	union {
		struct { int64_t in, out; bool bias; } linear;
		/* valid, same: padding="valid" or "same", as PyTorch's repr shows
		 * it; a "same" that pads one side more has ph = pw = 0, a hidden
		 * zero pad before it doing the padding */
		struct { int64_t cin, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups; bool bias, valid, same; } conv;
		struct {
			int64_t kh, kw, sh, sw, ph, pw, dh, dw;
			bool ceil_mode, count_include_pad;
			enum size_form kform, sform, pform, dform; /* for the repr */
		} pool;
		struct { int64_t oh, ow; enum size_form form; } apool;
		struct { int64_t left, right, top, bottom; } pad; /* zeropad2d; a negative side crops */
		/* *_form: for the repr */
		struct { int64_t c; double eps, momentum; bool affine, track; struct int_form eps_form, momentum_form; } bn; /* batchnorm1d and batchnorm2d */
		struct { int nd; int64_t d[SHAPE_MAX]; double eps; bool affine; struct int_form eps_form; } ln;
		/* groupnorm: groups of c/groups channels, each normalised over its channels' elements */
		struct { int64_t groups, c; double eps, momentum; bool affine; struct int_form eps_form, momentum_form; } gn;
		struct { int64_t num, dim, padding_idx; } emb; /* padding_idx -1: none */
		struct { double p; struct int_form p_form; } drop;
		struct { int dim, written; } softmax; /* per-sample dimension index, 0-based; the dim as written */
		/* flatten: per-sample dims start..end merged; args as written.
		 * unflatten: per-sample dim start split into sizes (one may be
		 * -1 as written), start_arg its dim as written */
		struct {
			int start, end, start_arg, end_arg;
			int nsizes;
			enum size_form sform;
			int64_t sizes[SHAPE_MAX];
		} flat;
		struct { bool tanh; } gelu;
		/* leaky_relu: a = negative_slope; elu: a = alpha; softplus: a = beta, b = threshold;
		 * hardtanh: a = min_val, b = max_val; celu: a = alpha; softshrink and hardshrink:
		 * a = lambd; threshold: a = threshold, b = value */
		struct { double a, b; struct int_form a_form, b_form; } act;
		/* prelu: num weights (1, or one per channel), their initial value */
		struct { int64_t num; double init; struct int_form init_form; } prelu;
		struct { int from, to; } xfer;
		struct { int64_t dims[SHAPE_MAX]; } input;
	} a;
};

enum param_role { ROLE_WEIGHT, ROLE_BIAS, ROLE_RUNNING_MEAN, ROLE_RUNNING_VAR, ROLE_NUM_BATCHES };
enum init_kind { INIT_KAIMING_UNIFORM, INIT_BIAS_UNIFORM, INIT_ONES, INIT_ZEROS, INIT_NORMAL, INIT_PRELU };

struct param {
	const char *name;    /* state_dict key: "conv1.weight" */
	int node;
	enum param_role role;
	struct shape shape;  /* full shape (no batch dimension involved) */
	int64_t numel;
	enum dtype dtype;    /* buffers like num_batches_tracked are I64 */
	bool trainable;      /* false for buffers and @frozen layers */
	enum init_kind init;
	int64_t fan_in;
	int device;
	int unit;            /* FSDP unit, -1 without FSDP */
	int64_t offset;      /* elements into its device's unsharded param region (also grads, optimizer planes) */
	int64_t unit_offset; /* elements into its FSDP unit's flat parameter, -1 for buffers */
};

/* A module of the equivalent nn.Module tree, for naming and printing. */
struct scope {
	const char *name;   /* attribute name in its parent ("conv1", "0"); "" for the root */
	struct loc call;    /* a block's instance: the callee's name in its call; else no source */
	const char *path;   /* full dotted path; "" for the root */
	const char *type;   /* "Net", "ResBlock", "Sequential", "Residual", or the layer's class */
	int parent;         /* -1 for the root */
	int node;           /* the layer when this scope is one, else -1 */
	int depth;
	bool wrap;          /* @wrap */
	int device;         /* @device on a block or repeat instance, -1 if none */
	int64_t numel;      /* parameters inside, all of them */
	struct loc loc;
};

/* An FSDP unit: one flat parameter buffer, sharded over the ranks. */
struct unit {
	int scope;          /* module it wraps (0, the root, for the root unit) */
	int parent;         /* enclosing unit, -1 for the root */
	int device;
	int64_t numel;      /* elements of the parameters it owns */
	int64_t padded;     /* numel rounded up to a multiple of the world size */
	int64_t shard;      /* padded / world */
	int first_node, last_node; /* span of layers in execution order */
	enum dtype param_dtype;    /* of the gathered parameters (mixed precision) */
	enum dtype reduce_dtype;   /* of gradients in the reduce-scatter */
};

/* A DDP gradient bucket: a contiguous range of one device's gradient region. */
struct bucket {
	int device;
	int64_t offset, numel; /* elements */
	int first_param, last_param;
};

/* REG_WORK: the CPU backend's convolution scratch (GPUs: cuDNN's, not planned). */
enum region { REG_PARAMS, REG_GRADS, REG_OPTIM, REG_ACTS, REG_COMM, REG_WORK, REG__COUNT };

/* How the largest convolution of a device is sized in REG_WORK. */
enum work_path { WORK_NONE, WORK_IM2COL, WORK_DIRECT, WORK_WINOGRAD };

struct devplan {
	int64_t bytes[REG__COUNT];   /* per region, what one rank allocates on this device */
	int64_t act_train, act_eval; /* activation peaks of the two modes, bytes */
	int64_t scratch_off, scratch_bytes; /* summing gradients with several producers; eval-only statistics */
	int64_t act_copy;            /* bytes of one micro-batch's activations (REG_ACTS holds every copy) */
	/* REG_WORK is one buffer the device's convolutions share, as large as
	 * the largest: work_node at batch work_batch by work_path needs
	 * work_shared bytes plus work_slot for each of up to work_slots chunks
	 * in flight (one per compute thread) */
	int work_node;               /* -1: no convolution on the device */
	enum work_path work_path;
	int64_t work_batch, work_shared, work_slot;
	int work_slots;
};

/* Where a node's buffers sit in the activation region (bytes). */
struct nodemem {
	int64_t out_off, out_bytes;     /* forward output, training */
	int64_t grad_off, grad_bytes;   /* gradient of the output, training */
	int64_t save_off, save_bytes;   /* masks, indices, statistics kept for backward */
	int64_t eval_off;               /* forward output in evaluation */
};

/* from LOSS_L1 on in kern.h's enum kern_regression order (loss - LOSS_L1) */
enum loss_kind { LOSS_MSE, LOSS_NLL, LOSS_CROSS_ENTROPY, LOSS_L1, LOSS_SMOOTH_L1, LOSS_HUBER, LOSS_BCE, LOSS_BCE_LOGITS, LOSS_KL_DIV };
/* RED_BATCHMEAN: kl_div's, the sum over the batch's rows divided by the rows */
enum reduction { RED_MEAN, RED_SUM, RED_BATCHMEAN };
enum opt_kind { OPT_SGD, OPT_ADAM, OPT_ADAMW, OPT_ADADELTA, OPT_ADAGRAD, OPT_RMSPROP, OPT_ADAMAX, OPT_RADAM };
enum lrs_kind { LRS_CONSTANT, LRS_STEP, LRS_MULTISTEP, LRS_EXPONENTIAL, LRS_COSINE, LRS_CONSTANT_LR, LRS_LINEAR, LRS_POLYNOMIAL,
		LRS_COSINE_RESTARTS, LRS_PLATEAU, LRS_ONE_CYCLE };
enum data_kind { DATA_NONE, DATA_MNIST, DATA_SYNTHETIC, DATA_NPY };
enum tgt_kind { TGT_CLASS, TGT_VECTOR };
enum parallel_mode { PAR_DDP, PAR_FSDP };
enum shard_kind { SHARD_FULL, SHARD_GRAD_OP, SHARD_NONE };
enum wrap_kind { WRAP_NONE, WRAP_SIZE, WRAP_BLOCKS };

struct plan_dataset {
	enum data_kind kind;
	struct loc loc;
	const char *root, *split;   /* mnist */
	const char *npy_input, *npy_target; /* npy: the arrays' files (npz: the archive, both) */
	const char *npy_input_key, *npy_target_key; /* npz: the arrays' keys; npy: NULL */
	struct loc input_loc;       /* synthetic, npy: input=... */
	const float *norm_mean, *norm_std; /* npy, npz: normalize=, nnorm values each (one: every value's), or NULL */
	int64_t nnorm;
	struct loc norm_loc;
	bool to_tensor;             /* npy, npz: torchvision's ToTensor on each input sample ((H, W[, C]) to (C, H, W), uint8 / 255) */
	double mean, std;           /* normalisation; std 1, mean 0 when absent */
	struct shape sample;        /* per-sample input shape */
	int64_t input_high;         /* synthetic randint(high, ...): token ids below high; 0: randn or rand;
	                             * npy: the rows of the embeddings that read the ids, 0 for a float input */
	bool input_rand, target_rand; /* synthetic rand(...), uniform in [0, 1), not randn(...) */
	enum tgt_kind target;
	struct shape target_shape;  /* TGT_VECTOR */
	int64_t classes;            /* TGT_CLASS */
	int64_t samples;            /* synthetic; mnist, npy: known after loading */
	struct loc samples_loc;     /* synthetic: samples=N */
	struct loc target_loc;      /* synthetic: target=... */
};

struct plan_optim {
	enum opt_kind kind;
	double lr, momentum, dampening, weight_decay, beta1, beta2, eps, rho, alpha, lr_decay, initial_accumulator;
	bool nesterov, amsgrad, centered;
	int state_per_param;        /* floats of optimizer state per trainable element */
};

struct plan_sched {
	enum lrs_kind kind;
	int64_t step_size;
	double gamma, eta_min;
	int64_t milestones[PLAN_MAX_MILESTONES];
	int nmilestones;
	int64_t t_max, warmup;
	double factor, start_factor, end_factor, power; /* constant_lr, linear_lr, polynomial_lr */
	int64_t total_iters;        /* constant_lr, linear_lr, polynomial_lr */
	int64_t t_0, t_mult;        /* cosine_warm_restarts */
	bool per_step;              /* else per epoch, as the seed */
	/* reduce_on_plateau (ReduceLROnPlateau), with factor: the metric, the
	 * test loss or (monitor_train) the epoch's training loss, improves when
	 * below (above, mode_max) the best by threshold, relative or absolute */
	bool mode_max, threshold_abs, monitor_train;
	double threshold, min_lr, eps;
	int64_t patience, cooldown;
	/* one_cycle (OneCycleLR) over total_steps ticks (0: the run's), the
	 * momentum (Adam's beta1) cycled between its two bounds unless not
	 * cycle_momentum; the optimizer's momentum is then max_momentum, as
	 * OneCycleLR sets it */
	double max_lr, pct_start, div_factor, final_div_factor, base_momentum, max_momentum;
	int64_t total_steps;
	bool anneal_linear, cycle_momentum, three_phase;
};

struct plan_train {
	enum loss_kind loss;
	enum reduction reduction;
	double label_smoothing;     /* cross_entropy's, in [0, 1]; 0: none */
	int32_t ignore_index;       /* nll's and cross_entropy's target that counts for nothing; PyTorch's -100 */
	double loss_param;          /* smooth_l1's beta, huber's delta, bce_with_logits' pos_weight, kl_div's log_target (0, 1) */
	const float *pos_weights;   /* bce_with_logits' pos_weight per output (the last dimension), or NULL */
	int64_t npos_weights;
	struct loc pos_weight_loc;
	const float *class_weights; /* nll's and cross_entropy's weight per class, or NULL (each 1) */
	int64_t nclass_weights;
	struct loc class_weight_loc;
	struct plan_optim optim;
	struct plan_sched sched;
	int64_t batch, global_batch, micro_batch, test_batch, epochs, steps, log_interval, checkpoint_every;
	struct loc batch_loc;       /* batch = or global_batch = */
	struct loc loss_loc;        /* loss = 's value */
	struct loc t_max_loc;       /* cosine's t_max, when given */
	struct loc sched_loc;       /* scheduler = 's value */
	uint64_t seed;              /* initialisation, dropout, synthetic data */
	uint64_t shuffle_seed;      /* DistributedSampler(seed=): the training order */
	double clip_grad_norm;      /* 0: off */
	bool shuffle, drop_last;
	bool present;               /* the file has a train section (else defaults, and the data is not checked against a loss) */
	bool eval_only;             /* steps = 0: no step; the weights are evaluated as given (steps is then 0, as when unset) */
};

struct plan_parallel {
	enum parallel_mode mode;
	struct loc loc;
	enum shard_kind shard;
	enum wrap_kind wrap;
	int64_t min_params;
	const char *wrap_blocks[PLAN_MAX_WRAP_BLOCKS];
	struct loc wrap_block_locs[PLAN_MAX_WRAP_BLOCKS];
	int nwrap_blocks;
	double bucket_mb;
	enum dtype param_dtype, reduce_dtype; /* FSDP mixed precision; float32 today */
	int64_t microbatches;
	double timeout_s;
};

struct plan {
	const char *model_name;
	const char *path;          /* the main .net file */
	const struct source *sources; /* every file read: the main one, its imports ("--set" for options) */
	int world;                 /* ranks the plan was made for */
	bool gpu;                  /* planned for GPUs: no CPU convolution workspace (REG_WORK) */
	int ndevices;              /* devices per rank (from @device) */
	struct loc device_loc;     /* the @device annotation with the highest index */
	struct node *nodes;  int nnodes;
	struct param *params; int nparams;
	struct scope *scopes; int nscopes;
	struct unit *units;  int nunits;
	struct bucket *buckets; int nbuckets;
	struct nodemem *mem;       /* per node */
	struct devplan dev[PLAN_MAX_DEVICES];
	int64_t total_params, trainable_params;
	int64_t unsharded_elems;   /* float slots of the rank's unsharded parameter layout, all devices */
	int64_t act_batch;         /* samples per training forward (a rank's micro-batch): what the activations hold */
	bool fsdp_stage;           /* sharded FSDP with several backward passes a step (global_batch's micro-batches, microbatches): a unit's reduce-scatter results land in a buffer of their own and are added to its gradient shard; else straight in the shard */
	int64_t eval_batch;        /* samples per evaluation forward: test_batch where act_batch's memory holds it, else the largest chunk that fits and at least min(test_batch, act_batch) (memplan.c) */
	struct plan_dataset train_data, test_data;
	struct plan_train train;
	struct plan_parallel parallel;
	const char *text;          /* canonical source: every section as it ran, imports resolved; floats in 17 digits (hashed) */
	const char *source;        /* the same with floats in their fewest exact digits: model.net */
	uint64_t hash;
};

/* Elements of a shape (0 for an empty shape of rank > 0 is impossible: dims are >= 1). */
int64_t shape_numel(const struct shape *s);
/* "(1, 28, 28)" into buf. */
const char *shape_str(const struct shape *s, char *buf, int n);
#endif
