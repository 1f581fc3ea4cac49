/* init.h: initial values of parameters and buffers, with torch.nn's default
 * distributions drawn from Philox streams.
 * Element i of a tensor is a function of (seed, the tensor's index in the
 * model, i) alone: every rank gets the same values without communicating,
 * an FSDP shard can fill just its own range, and the thread count does not
 * matter.  The values follow torch's distributions, not its bits (torch's
 * generator is not reproduced).
 * Does not: choose fan-in from a layer description beyond the helpers below,
 * or allocate.
 */
#ifndef INIT_H
#define INIT_H
#include <stdint.h>

/* What a tensor is, which fixes its distribution:
 *   INIT_LINEAR_WEIGHT, INIT_CONV_WEIGHT  kaiming_uniform_(a=sqrt(5)):
 *                                         U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 *   INIT_LINEAR_BIAS, INIT_CONV_BIAS      U(-1/sqrt(fan_in), 1/sqrt(fan_in)), 0 if fan_in is 0
 *   INIT_NORM_WEIGHT, INIT_RUNNING_VAR    ones
 *   INIT_NORM_BIAS, INIT_RUNNING_MEAN     zeros
 *   INIT_EMBEDDING                        N(0, 1), row padding_idx zero */
enum init_role {
	INIT_LINEAR_WEIGHT, INIT_LINEAR_BIAS, INIT_CONV_WEIGHT, INIT_CONV_BIAS, INIT_NORM_WEIGHT, INIT_NORM_BIAS,
	INIT_EMBEDDING, INIT_RUNNING_MEAN, INIT_RUNNING_VAR,
};

struct init_param {
	enum init_role role;
	uint32_t index;      /* the tensor's index in the model: its Philox stream */
	int64_t fan_in;      /* weights and biases: init_fan_in_linear / init_fan_in_conv */
	int64_t row_len;     /* INIT_EMBEDDING: embedding_dim, elements per row */
	int64_t padding_idx; /* INIT_EMBEDDING: row left at zero, or -1 for none */
};

/* fan_in of nn.Linear(in_features, ...). */
int64_t init_fan_in_linear(int64_t in_features);

/* fan_in of nn.Conv2d(in_channels, ..., kernel (kh, kw), groups). */
int64_t init_fan_in_conv(int64_t in_channels, int64_t groups, int64_t kh, int64_t kw);

/* Bound b of kaiming_uniform_(a, mode='fan_in', nonlinearity='leaky_relu'):
 * gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + a^2)), as torch computes
 * it in double.  With a = sqrt(5) this is 1/sqrt(fan_in). */
double init_kaiming_bound(int64_t fan_in, double a);

/* Fills x (n,) with elements [first, first + n) of tensor p's initial value
 * under seed; x[j] is element first + j. */
void init_fill(const struct init_param *p, uint64_t seed, float *x, int64_t first, int64_t n);

/* Elements [first, first + n) of U(lo, hi) from stream (seed, index) into
 * x (n,): lo + (hi - lo) * u with u in [0, 1), as torch's uniform_. */
void init_uniform(float *x, int64_t first, int64_t n, float lo, float hi, uint64_t seed, uint32_t index);

/* Elements [first, first + n) of N(mean, std^2) from stream (seed, index)
 * into x (n,). */
void init_normal(float *x, int64_t first, int64_t n, float mean, float std, uint64_t seed, uint32_t index);
#endif
