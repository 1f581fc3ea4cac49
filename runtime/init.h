/* init.h: initial values of parameters and buffers as torch.nn's defaults
 * give them after torch.manual_seed(seed): the same distributions, drawn from
 * the same generator (PyTorch's CPU mt19937) the way torch's CPU kernels draw
 * them, tensor after tensor in the model's order.  A model whose layers are
 * written in the order its PyTorch module creates them (the FSDP MNIST
 * example's Net, the DDP tutorial's ToyModel) therefore starts from the
 * weights `torch.manual_seed(seed); Net()` gives: uniform ones (Linear,
 * Conv2d) bit for bit, normal ones (Embedding) to float rounding (torch's
 * vectorised builds compute log, sin and cos their own way).
 * Every rank draws the same values without communicating; FSDP ranks draw
 * the whole model and keep their shards.
 * Does not: choose fan-in from a layer description beyond the helpers below,
 * or allocate.
 */
#ifndef INIT_H
#define INIT_H
#include <stdbool.h>
#include <stdint.h>

#include "runtime/mt19937.h"

/* What a tensor is, which fixes its distribution:
 *   INIT_LINEAR_WEIGHT, INIT_CONV_WEIGHT  kaiming_uniform_(a=sqrt(5)):
 *                                         U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 *   INIT_LINEAR_BIAS, INIT_CONV_BIAS      U(-1/sqrt(fan_in), 1/sqrt(fan_in)), 0 if fan_in is 0
 *   INIT_NORM_WEIGHT, INIT_RUNNING_VAR    ones
 *   INIT_NORM_BIAS, INIT_RUNNING_MEAN     zeros
 *   INIT_EMBEDDING                        N(0, 1), row padding_idx zero
 *   INIT_CONST                            value (PReLU's init), no draws */
enum init_role {
	INIT_LINEAR_WEIGHT, INIT_LINEAR_BIAS, INIT_CONV_WEIGHT, INIT_CONV_BIAS, INIT_NORM_WEIGHT, INIT_NORM_BIAS,
	INIT_EMBEDDING, INIT_RUNNING_MEAN, INIT_RUNNING_VAR, INIT_CONST,
};

struct init_param {
	enum init_role role;
	int64_t fan_in;      /* weights and biases: init_fan_in_linear / init_fan_in_conv */
	int64_t row_len;     /* INIT_EMBEDDING: embedding_dim, elements per row */
	int64_t padding_idx; /* INIT_EMBEDDING: row left at zero, or -1 for none */
	float value;         /* INIT_CONST */
};

/* PyTorch's CPU generator: the twister and the spare sample its
 * normal_distribution<double> keeps for the next call. */
struct init_gen {
	struct mt19937 mt;
	bool has_spare;
	double spare;
};

/* torch.manual_seed(seed). */
void init_gen_seed(struct init_gen *g, uint64_t seed);

/* fan_in of nn.Linear(in_features, ...). */
int64_t init_fan_in_linear(int64_t in_features);

/* fan_in of nn.Conv2d(in_channels, ..., kernel (kh, kw), groups). */
int64_t init_fan_in_conv(int64_t in_channels, int64_t groups, int64_t kh, int64_t kw);

/* Bound b of kaiming_uniform_(a, mode='fan_in', nonlinearity='leaky_relu'):
 * gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + a^2)), as torch computes
 * it in double.  With a = sqrt(5) this is 1/sqrt(fan_in). */
double init_kaiming_bound(int64_t fan_in, double a);

/* Tensor p's initial value, all n elements, into x (n,), drawing from g
 * what torch's initialiser draws; x NULL draws the same and keeps nothing
 * (a tensor another rank or a later pass fills). */
void init_fill(const struct init_param *p, struct init_gen *g, float *x, int64_t n);

/* x (n,) := U(lo, hi) as tensor.uniform_(lo, hi) draws it (NULL: draw only). */
void init_uniform(struct init_gen *g, float *x, int64_t n, float lo, float hi);

/* x (n,) := N(mean, std^2) as tensor.normal_(mean, std) draws it for a
 * contiguous float tensor (NULL: draw only). */
void init_normal(struct init_gen *g, float *x, int64_t n, float mean, float std);
#endif
