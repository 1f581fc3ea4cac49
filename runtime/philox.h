/* philox.h: counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
 * A stream is keyed by (seed, purpose, rank, step); element i of a stream is a
 * pure function of that key and i, so results never depend on how many
 * threads fill a buffer or in which order.  Header-only: the functions are
 * small and sit in hot loops (dropout masks, synthetic data; the shuffle
 * order of checkpoints from before trainc drew as torch.randperm).
 * Not cryptographic; not bit-compatible with torch's generators.
 */
#ifndef PHILOX_H
#define PHILOX_H
#include <math.h>
#include <stdint.h>

/* nvcc compiles these for the device too (dropout masks on the GPU). */
#ifdef __CUDACC__
#define PHILOX_FN static inline __host__ __device__
#else
#define PHILOX_FN static inline
#endif

enum rng_purpose { RNG_INIT = 1, RNG_DROPOUT = 2, RNG_SHUFFLE = 3, RNG_DATA = 4 };

struct rng { uint32_t key[2]; uint32_t ctr_hi[2]; }; /* ctr_hi: (purpose<<24 | rank, step) */

PHILOX_FN struct rng rng_stream(uint64_t seed, enum rng_purpose purpose, uint32_t rank, uint32_t step)
{
	struct rng r = { { (uint32_t)seed, (uint32_t)(seed >> 32) },
			 { ((uint32_t)purpose << 24) | (rank & 0xffffffu), step } };
	return r;
}

/* The four 32-bit words of block `block` of stream r. */
PHILOX_FN void philox_block(const struct rng *r, uint64_t block, uint32_t out[4])
{
	uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = r->ctr_hi[0], c3 = r->ctr_hi[1];
	uint32_t k0 = r->key[0], k1 = r->key[1];
	for (int i = 0; i < 10; i++) {
		uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
		c1 = (uint32_t)p1; c3 = (uint32_t)p0; c0 = n0; c2 = n2;
		k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
	}
	out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Word i of the stream. */
PHILOX_FN uint32_t rng_u32(const struct rng *r, uint64_t i)
{
	uint32_t w[4];
	philox_block(r, i >> 2, w);
	return w[i & 3];
}

/* Uniform in [0, 1) with 24 random bits, element i of the stream. */
PHILOX_FN float rng_uniform(const struct rng *r, uint64_t i)
{
	return (float)(rng_u32(r, i) >> 8) * (1.0f / 16777216.0f);
}

/* Standard normal (Box-Muller over one block), element i of the stream. */
PHILOX_FN float rng_normal(const struct rng *r, uint64_t i)
{
	uint32_t w[4];
	philox_block(r, i >> 1, w);
	int lane = (int)(i & 1) * 2;
	double u1 = ((double)(w[lane] >> 8) + 1.0) * (1.0 / 16777217.0); /* (0, 1] */
	double u2 = (double)(w[lane + 1] >> 8) * (1.0 / 16777216.0);
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
#endif
