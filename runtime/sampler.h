/* sampler.h: which samples each rank reads, in which order, in which batches.
 * The algorithm is PyTorch's DistributedSampler: one permutation of 0..n-1
 * per epoch, the same on every rank (identity without shuffle); padded by
 * repeating its head up to a multiple of world (or truncated to one with
 * drop_last); rank r takes every world-th index starting at r.  The
 * DataLoader then cuts the rank's list into batches, the last one smaller
 * unless drop_last_batch.
 * The permutation is torch.randperm(n) drawn from a CPU generator seeded
 * seed + E for the epoch E trainc prints (from 1), as DistributedSampler
 * draws it after the seed program's set_epoch(E): the same samples in the
 * same order as that PyTorch program with DistributedSampler(seed=seed).
 * (PyTorch's CPU generator is an mt19937; randperm swaps position i with
 * i + u % (n - i), u its next 32-bit output.)  SAMPLER_PHILOX is the
 * order of checkpoints written before trainc followed PyTorch: a Philox
 * stream keyed (seed, RNG_SHUFFLE, 0, epoch) and a Fisher-Yates shuffle.
 * Does not: touch the data (dataset.h) or prefetch (loader.h).
 * Invariant: after sampler_set_epoch(e) every index handed out is in 0..n-1
 * and the sequence is a pure function of (n, world, rank, seed, e, flags).
 */
#ifndef SAMPLER_H
#define SAMPLER_H
#include <stddef.h>
#include <stdint.h>

enum sampler_order {
	SAMPLER_RANDPERM, /* PyTorch's: torch.randperm from torch.Generator().manual_seed(seed + epoch) */
	SAMPLER_PHILOX,   /* earlier trainc's, kept for resuming its checkpoints */
};

struct sampler {
	int64_t n;             /* dataset size */
	int world, rank;
	int batch;             /* samples per batch */
	int shuffle;           /* DistributedSampler(shuffle=) */
	int drop_last;         /* DistributedSampler(drop_last=): truncate instead of pad */
	int drop_last_batch;   /* DataLoader(drop_last=): no smaller final batch */
	uint64_t seed;         /* DistributedSampler(seed=) */
	enum sampler_order order; /* SAMPLER_RANDPERM from sampler_init; set before the first epoch */
	int64_t num_samples;   /* indices per rank per epoch */
	int64_t total_size;    /* num_samples * world */
	int64_t num_batches;   /* batches per rank per epoch */
	int64_t epoch;         /* the epoch perm belongs to; -1 before sampler_set_epoch */
	int64_t *perm;         /* (n) this epoch's permutation; NULL without shuffle */
};

/* A place in the stream of batches, for resuming: batch `batch` of `epoch`. */
struct sampler_pos {
	int64_t epoch;
	int64_t batch;
};

/* Set up the sampler; with shuffle allocates the permutation (n int64) once.
 * Returns 0, or -1 with a message in err for invalid arguments. */
int sampler_init(struct sampler *s, int64_t n, int world, int rank, int batch, int shuffle, int drop_last,
		 int drop_last_batch, uint64_t seed, char *err, size_t errlen);

/* Make epoch's order current (DistributedSampler.set_epoch(epoch + 1):
 * epoch counts from 0 here); cheap when the epoch is already current or
 * there is no shuffle. */
void sampler_set_epoch(struct sampler *s, int64_t epoch);

/* The i-th index (0 <= i < num_samples) of this rank in the current epoch. */
int64_t sampler_index(const struct sampler *s, int64_t i);

/* Samples in batch k (0 <= k < num_batches) of an epoch: batch, or fewer
 * for an incomplete last one (none with drop_last_batch, which drops it). */
int64_t sampler_batch_len(const struct sampler *s, int64_t k);

/* Write the indices of batch k (0 <= k < num_batches) of the current epoch
 * into idx (batch); returns how many (batch, or fewer for the last one). */
int sampler_batch(const struct sampler *s, int64_t k, int64_t *idx);

/* The batch at *pos (switching the epoch if needed) into idx; advances *pos,
 * into the next epoch after its last batch.  Returns the batch size, or 0 if
 * epochs have no batches at all (then *pos is left as it was). */
int sampler_next(struct sampler *s, struct sampler_pos *pos, int64_t *idx);

/* Go on in the order of a checkpoint from before trainc shuffled as
 * torch.randperm (SAMPLER_PHILOX), which was keyed by train.seed, not
 * shuffle_seed.  Call before the first epoch. */
void sampler_keep_philox(struct sampler *s, uint64_t train_seed);

/* Release the permutation; safe on a zeroed sampler. */
void sampler_free(struct sampler *s);

#endif
