/* mt19937.h: the 32-bit Mersenne Twister (Matsumoto and Nishimura 1998),
 * seeded as std::mt19937(seed) and as PyTorch's CPU generator after
 * torch.manual_seed(seed) (the seed's low 32 bits), so that trainc draws
 * the numbers PyTorch draws: the training order (sampler.c) and the
 * initial weights (init.c).  Header-only: two small functions.
 * Does not: jump ahead (a draw costs a few nanoseconds; skipping is drawing).
 */
#ifndef MT19937_H
#define MT19937_H
#include <stdint.h>

enum { MT19937_N = 624, MT19937_M = 397 };

struct mt19937 {
	uint32_t x[MT19937_N];
	int i; /* the next word of x to temper; MT19937_N: regenerate first */
};

static inline void mt19937_seed(struct mt19937 *m, uint64_t seed)
{
	m->x[0] = (uint32_t)seed;
	for (int i = 1; i < MT19937_N; i++)
		m->x[i] = 1812433253u * (m->x[i - 1] ^ m->x[i - 1] >> 30) + (uint32_t)i;
	m->i = MT19937_N;
}

static inline uint32_t mt19937_next(struct mt19937 *m)
{
	if (m->i == MT19937_N) { /* the next 624 words at once: x[k] from x[k + 1] and x[k + 397], mod 624 */
		for (int k = 0; k < MT19937_N; k++) {
			int k1 = k + 1 < MT19937_N ? k + 1 : 0, km = k + MT19937_M < MT19937_N ? k + MT19937_M : k + MT19937_M - MT19937_N;
			uint32_t y = (m->x[k] & 0x80000000u) | (m->x[k1] & 0x7fffffffu);
			m->x[k] = m->x[km] ^ y >> 1 ^ ((0u - (y & 1)) & 0x9908b0dfu);
		}
		m->i = 0;
	}
	uint32_t y = m->x[m->i++];
	y ^= y >> 11;
	y ^= y << 7 & 0x9d2c5680u;
	y ^= y << 15 & 0xefc60000u;
	return y ^ y >> 18;
}
#endif
