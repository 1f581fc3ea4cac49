/* gpu.h: the GPU path, loaded on demand.  trainc itself links no CUDA
 * library: `--gpus` loads trainc-cuda.so (built beside trainc where
 * ./configure found the CUDA toolkit) with dlopen, so one binary trains on
 * CPUs anywhere and on GPUs where the driver and libraries are present.
 * TRAINC_CUDA_LIB names another copy of the library.
 */
#ifndef GPU_H
#define GPU_H
#include <stdbool.h>
#include <stddef.h>

#include "compiler/ir.h"
#include "runtime/train.h"

/* Load the library and count the GPUs: 0 with *count, or -1 with a message
 * in err saying what is missing and what to do instead. */
int gpu_open(int *count, char *err, size_t errlen);
/* Whether trainc has its GPU library (built with CUDA) and the NVIDIA
 * driver's library loads here: a machine that may have GPUs for it.  Cheap
 * where either is absent. */
bool gpu_maybe(void);
/* Train one rank on GPU `device` (gpu_open first); the exit status. */
int gpu_train(const struct plan *p, const struct train_opts *o, int device);
#endif
