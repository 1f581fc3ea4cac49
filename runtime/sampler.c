/* sampler.c: DistributedSampler's index order and DataLoader's batching.
 * PyTorch pads by appending the list to itself until total_size, so padded
 * position g (g >= n) holds the same index as position g mod n; and with
 * drop_last it keeps only positions below total_size <= n.  Either way rank
 * r's i-th index is perm[(r + i*world) mod n], computed on the fly, so no
 * per-rank list is ever built.
 * Does not: allocate after sampler_init.
 * Invariant: perm, when present, is a permutation of 0..n-1 for s->epoch.
 */
#include "runtime/sampler.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/mt19937.h"
#include "runtime/philox.h"
#include "runtime/util.h"

int sampler_init(struct sampler *s, int64_t n, int world, int rank, int batch, int shuffle, int drop_last,
		 int drop_last_batch, uint64_t seed, char *err, size_t errlen)
{
	*s = (struct sampler){ 0 };
	if (n < 0)
		return util_fail(err, errlen, "sampler: dataset size %lld is negative", (long long)n);
	if (world < 1 || rank < 0 || rank >= world)
		return util_fail(err, errlen, "sampler: rank %d is outside a world of %d", rank, world);
	if (batch < 1)
		return util_fail(err, errlen, "sampler: batch size %d must be at least 1", batch);
	if ((uint64_t)n > SIZE_MAX / sizeof(int64_t))
		return util_fail(err, errlen, "sampler: %lld samples do not fit in memory", (long long)n);
	s->n = n;
	s->world = world;
	s->rank = rank;
	s->batch = batch;
	s->shuffle = shuffle != 0;
	s->drop_last = drop_last != 0;
	s->drop_last_batch = drop_last_batch != 0;
	s->seed = seed;
	/* n + world - 1 cannot overflow: n < 2^60 from the check above, world < 2^31 */
	s->num_samples = s->drop_last ? n / world : (n + world - 1) / world;
	s->total_size = s->num_samples * world;
	s->num_batches = s->drop_last_batch ? s->num_samples / batch : (s->num_samples + batch - 1) / batch;
	s->epoch = -1;
	if (s->shuffle) {
		s->perm = malloc(n ? (size_t)n * sizeof *s->perm : 1);
		if (!s->perm)
			return util_fail(err, errlen, "sampler: out of memory for a permutation of %lld samples", (long long)n);
	}
	return 0;
}

/* torch.randperm(n, generator=torch.Generator().manual_seed(seed)) on the
 * CPU: position i swaps with i + u % (n - i), u the next 32-bit draw.  Checked
 * against PyTorch 1.13 at n = 10, 60000 and 214748369; PyTorch versions that
 * draw 64-bit numbers at n >= 2^32 / 20 differ there. */
static void randperm(int64_t *p, int64_t n, uint64_t seed)
{
	struct mt19937 m;
	mt19937_seed(&m, seed);
	for (int64_t i = 0; i < n; i++)
		p[i] = i;
	for (int64_t i = 0; i < n - 1; i++) {
		int64_t z = (int64_t)(mt19937_next(&m) % (uint64_t)(n - i)), t = p[i];
		p[i] = p[z + i];
		p[z + i] = t;
	}
}

/* The order of checkpoints made before trainc followed torch.randperm. */
static void philox_perm(int64_t *p, int64_t n, uint64_t seed, int64_t epoch)
{
	/* rank 0 in the key: every rank must draw the same permutation */
	struct rng r = rng_stream(seed, RNG_SHUFFLE, 0, (uint32_t)epoch);
	for (int64_t i = 0; i < n; i++)
		p[i] = i;
	for (int64_t i = n - 1; i > 0; i--) {
		uint32_t w[4];
		philox_block(&r, (uint64_t)i, w);
		/* 64 random bits: the modulo bias is below n / 2^64 */
		uint64_t u = (uint64_t)w[0] | (uint64_t)w[1] << 32;
		int64_t j = (int64_t)(u % (uint64_t)(i + 1));
		int64_t t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
}

void sampler_set_epoch(struct sampler *s, int64_t epoch)
{
	if (s->epoch == epoch)
		return;
	s->epoch = epoch;
	if (!s->shuffle)
		return;
	if (s->order == SAMPLER_PHILOX)
		philox_perm(s->perm, s->n, s->seed, epoch);
	else /* the seed program's set_epoch(E) for trainc's epoch E, from 1 */
		randperm(s->perm, s->n, s->seed + (uint64_t)epoch + 1);
}

int64_t sampler_index(const struct sampler *s, int64_t i)
{
	int64_t g = (s->rank + i * s->world) % s->n;
	return s->perm ? s->perm[g] : g;
}

int64_t sampler_batch_len(const struct sampler *s, int64_t k)
{
	int64_t left = s->num_samples - k * s->batch;
	return left < s->batch ? left : s->batch;
}

int sampler_batch(const struct sampler *s, int64_t k, int64_t *idx)
{
	int64_t first = k * s->batch;
	int64_t b = sampler_batch_len(s, k);
	for (int64_t j = 0; j < b; j++)
		idx[j] = sampler_index(s, first + j);
	return (int)b;
}

int sampler_next(struct sampler *s, struct sampler_pos *pos, int64_t *idx)
{
	if (s->num_batches == 0)
		return 0;
	if (pos->batch >= s->num_batches) {
		pos->epoch += pos->batch / s->num_batches;
		pos->batch %= s->num_batches;
	}
	sampler_set_epoch(s, pos->epoch);
	int b = sampler_batch(s, pos->batch, idx);
	pos->batch++;
	if (pos->batch == s->num_batches) {
		pos->batch = 0;
		pos->epoch++;
	}
	return b;
}

void sampler_keep_philox(struct sampler *s, uint64_t train_seed)
{
	s->order = SAMPLER_PHILOX;
	s->seed = train_seed;
	s->epoch = -1; /* drawn again at the next sampler_set_epoch */
}

void sampler_free(struct sampler *s)
{
	free(s->perm);
	s->perm = NULL;
}
