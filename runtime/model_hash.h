/* model_hash.h: the hash of what a checkpoint must be resumed with (the
 * model and the settings that decide how it trains, not their spelling);
 * see model_hash.c. */
#ifndef MODEL_HASH_H
#define MODEL_HASH_H
#include <stdbool.h>
#include <stdint.h>

#include "compiler/ir.h"

/* The hash a new checkpoint records. */
uint64_t model_hash(const struct plan *p);
/* Whether a checkpoint's recorded hash fits this plan: the current form,
 * or the text forms of checkpoints made before it. */
bool model_hash_matches(const struct plan *p, uint64_t h);
#endif
