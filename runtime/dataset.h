/* dataset.h: the data a training run reads, as indexable samples.
 * Three kinds: IDX image/label pairs (MNIST, Fashion-MNIST: torchvision's
 * MNIST with ToTensor + Normalize) kept as uint8 in memory, synthetic
 * data drawn from Philox streams, and arrays of .npy files (numpy.save),
 * mapped.  dataset_fill turns sample indices into one
 * batch of float inputs and targets.
 * Does not: choose indices (sampler.h), prefetch (loader.h), augment.
 * Invariant: a dataset is read-only after it is made, so any number of
 * threads may call dataset_fill at once; sample i's values depend only on the
 * dataset (for synthetic data: on the seed and i), never on batch or order.
 */
#ifndef DATASET_H
#define DATASET_H
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/npy.h"

#define DATASET_MAX_DIMS 6 /* the plan's SHAPE_MAX */

enum dataset_kind { DATASET_IDX, DATASET_SYNTHETIC, DATASET_NPY };
enum dataset_target {
	TARGET_CLASS,  /* y is int32 (b): a class index below num_classes */
	TARGET_VECTOR, /* y is float (b, target_shape...) */
};

struct dataset {
	enum dataset_kind kind;
	int64_t n;                              /* number of samples */
	int ndim;                               /* rank of one sample, 1..DATASET_MAX_DIMS */
	int64_t shape[DATASET_MAX_DIMS];        /* one sample: (1, 28, 28) for MNIST */
	int64_t sample_numel;                   /* floats per sample in x */
	enum dataset_target target;
	int num_classes;                        /* TARGET_CLASS */
	int target_ndim;                        /* TARGET_VECTOR: rank of one target, 1..DATASET_MAX_DIMS */
	int64_t target_shape[DATASET_MAX_DIMS];
	int64_t target_numel;                   /* values per sample in y: 1 for TARGET_CLASS */

	/* DATASET_IDX */
	uint8_t *images;                        /* (n, shape[1], shape[2]), the one allocation */
	int32_t *labels;                        /* (n), inside the same allocation */
	float lut[256];                         /* pixel value -> (p/255 - mean)/std */
	/* DATASET_SYNTHETIC */
	uint64_t seed;
	uint32_t split;                         /* as synthetic_spec's */
	int64_t input_high;                     /* as synthetic_spec's */
	bool input_uniform, target_uniform;     /* as synthetic_spec's */
	size_t map_len;                         /* > 0: images and labels are a mapped cache file of this many bytes */
	/* DATASET_NPY: both files mapped; class labels (labels, owned) and
	 * token ids (ids) copied out of them once checked */
	void *npy_map[2];                       /* the input's file, the target's */
	size_t npy_len[2];
	const uint8_t *npy_at[2];               /* each .npy: its map, a member of it (.npz), or npy_own */
	void *npy_own[2];                       /* an inflated .npz member, or NULL */
	struct npy_head npy[2];
	char npy_name[2][4400];                 /* "x.npy", "d.npz: x.npy": for messages */
	float *npy_norm;                        /* normalize=: npy_nnorm means, then as many stds; owned */
	int64_t npy_nnorm;
	int64_t npy_hwc;                        /* to_tensor: the channels of (H, W, C) samples to move first (0 or 1: none) */
	bool npy_div255;                        /* to_tensor over uint8: each value / 255, as ToTensor scales a ByteTensor */
	float *ids;                             /* token ids as floats, or NULL */
	char images_path[4400];                 /* DATASET_IDX: the images file; DATASET_NPY: the input's; for messages */
};

/* torchvision.datasets.MNIST(root, train=split=="train") followed by
 * ToTensor() and Normalize((mean,), (std,)); pass mean 0, std 1 for ToTensor
 * alone.  split is "train" or "test".  Looks for train-images-idx3-ubyte,
 * train-labels-idx1-ubyte (t10k-... for "test"), raw or with .gz added, in
 * root/, root/MNIST/raw/ and root/FashionMNIST/raw/, in that order; the
 * first folder holding both files wins, and one holding only one of them is
 * an error.  When none is found the message lists the paths tried.
 * Returns 0, or -1 with a message in err. */
int dataset_mnist(struct dataset *ds, const char *root, const char *split, float mean, float std,
		  char *err, size_t errlen);

/* What dataset_mnist would give, from the files' headers alone (count,
 * sample shape, images_path; no images or labels): a quick check before
 * loading in the background.  Returns 0, or -1 with a message in err. */
int dataset_mnist_peek(struct dataset *ds, const char *root, const char *split, char *err, size_t errlen);

/* The same from explicit paths: images (N, H, W) and labels (N), each label
 * below num_classes. */
int dataset_idx(struct dataset *ds, const char *images_path, const char *labels_path, int num_classes,
		float mean, float std, char *err, size_t errlen);

/* What dataset_synthetic makes: `samples` samples with inputs randn(shape)
 * and targets randn(target_shape) (TARGET_VECTOR; rand() in place of
 * either where asked) or a uniform class below
 * num_classes (TARGET_CLASS), all keyed by seed. */
struct synthetic_spec {
	int64_t samples;
	int ndim;
	int64_t shape[DATASET_MAX_DIMS];
	enum dataset_target target;
	int num_classes;
	int target_ndim;
	int64_t target_shape[DATASET_MAX_DIMS];
	uint64_t seed;
	uint32_t split;                         /* 0 the training set, 1 the test set: their own samples */
	int64_t input_high;                     /* > 0: inputs are integers in [0, input_high) (token ids), as floats */
	bool input_uniform, target_uniform;     /* rand(), uniform in [0, 1) as torch.rand, in place of randn() */
};

/* Make a synthetic dataset; allocates nothing.  Returns 0, or -1 with a
 * message in err when the spec is invalid or its sizes overflow. */
int dataset_synthetic(struct dataset *ds, const struct synthetic_spec *spec, char *err, size_t errlen);

/* What dataset_npy reads: the arrays in two .npy files, input (N, sample
 * shape...) and target (N,) integer class labels or (N, target shape...)
 * numbers, each as the plan expects it.  Inputs and vector targets are
 * converted to float32 as they are read (torch.from_numpy(a).float());
 * labels are checked to be classes and token ids to be rows of the
 * embedding that reads them, once, as the dataset opens. */
struct npy_spec {
	const char *input, *target;             /* the files' paths */
	const char *input_key, *target_key;     /* the arrays' keys where the file is an .npz archive, else NULL */
	const float *norm_mean, *norm_std;      /* normalize=: nnorm values each, one per channel (or one for all) */
	int64_t nnorm;                          /* 0: none */
	bool to_tensor;                         /* ToTensor first: samples (H, W) or (H, W, C) for an input (C, H, W), uint8 / 255 */
	int ndim;                               /* the model's input per sample */
	int64_t shape[DATASET_MAX_DIMS];
	enum dataset_target target_kind;
	int num_classes;                        /* TARGET_CLASS */
	int32_t ignore_index;                   /* TARGET_CLASS: a label taken too (the loss's ignore_index) */
	int target_ndim;                        /* TARGET_VECTOR */
	int64_t target_shape[DATASET_MAX_DIMS];
	int64_t ids_below;                      /* > 0: the input is token ids, each below this */
	const char *input_at, *output_at;       /* "m.net:2:5": where the model's input and last layer are, for messages */
	bool headers_only;                      /* check the headers and sizes, and read no element */
	int failed;                             /* set on failure: 0 the input's file is at fault, 1 the target's */
};

/* Open the .npy pair; the dataset maps both files.  Returns 0, or -1
 * with "PATH: byte K: what is wrong; what to do" in err. */
int dataset_npy(struct dataset *ds, struct npy_spec *spec, char *err, size_t errlen);

/* dataset_fill's part for DATASET_NPY (dataset_npy.c). */
void dataset_npy_fill(const struct dataset *ds, const int64_t *idx, int b, float *x, void *y);

/* Fill one batch: x (b, shape...) floats and y (b) int32 or (b, target_shape...)
 * floats, for the samples idx[0..b).  Returns 0, or -1 without writing
 * anything when an index is outside 0..n-1. */
int dataset_fill(const struct dataset *ds, const int64_t *idx, int b, float *x, void *y);

/* Bytes of y for a batch of b samples. */
size_t dataset_target_bytes(const struct dataset *ds, int b);

/* How many samples have class v (0 where the targets are not classes). */
int64_t dataset_count_label(const struct dataset *ds, int32_t v);
/* The first sample whose real-valued target has a value below 0, or -1
 * (none, class targets, or no memory to look). */
int64_t dataset_negative_target(const struct dataset *ds);

/* Release what the dataset holds; safe on a zeroed or closed dataset. */

void dataset_close(struct dataset *ds);

#endif
