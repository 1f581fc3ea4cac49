/* weights.h: a plan's parameters and buffers to and from a safetensors file
 * that PyTorch loads into the equivalent nn.Module: every tensor under its
 * state_dict name, float weights and running statistics as F32, each
 * BatchNorm's num_batches_tracked as a shape-[] I64, metadata
 * {"format": "pt", "trainc_plan": "<16-hex plan hash>"}.
 * Does not: save or restore optimizer state, step counters or the data
 * position (a checkpoint's job), or handle plans whose parameters live in
 * more than one region (several devices, sharded FSDP units).
 * Invariant: weights_load validates the whole file against the plan before
 * it writes one element, so a failed load leaves the parameters as they were.
 */
#ifndef WEIGHTS_H
#define WEIGHTS_H
#include <stdbool.h>
#include <stddef.h>

#include "compiler/ir.h"

/* Whether path names a torch.save file (NAME.pt or NAME.pth, any case),
 * which weights_save writes in that format (runtime/torchfile.h). */
bool weights_torch_name(const char *path);

/* Write every parameter and buffer of p, read from params (the executor's
 * REG_PARAMS region, addressed by each param's offset), to path atomically.
 * Returns 0, or -1 with a message in err. */
int weights_save(const struct plan *p, const float *params, const char *path, char *err, size_t errlen);
/* (A path that weights_torch_name accepts gets a torch.save archive of the
 * same tensors in the model's state_dict order, without metadata.) */

/* Fill params from the file at path (trainc's --init): safetensors, or a
 * torch.save archive of a state_dict, told apart by their first bytes.  Every tensor of the
 * plan must be in the file with its shape (PyTorch's shape-[1] for a
 * shape-[] scalar is accepted, as load_state_dict accepts it); float tensors
 * may be F32, F64, F16 or BF16, num_batches_tracked I64 or I32, or absent
 * (then 0, as load_state_dict sets it).  strict, as
 * load_state_dict(strict=True), also refuses tensors the model lacks.
 * Returns 0, or -1 with a message in err naming the file; params is then
 * untouched.  params NULL checks the file and copies nothing. */
int weights_load(const struct plan *p, float *params, const char *path, bool strict, char *err, size_t errlen);

#endif
