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
#include <stdint.h>

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

/* The layout of what trainc hands its GPU library, the plan and the run's
 * options: a library built from other sources of compiler/ir.h or
 * runtime/train.h (one left from an older build, or named by
 * TRAINC_CUDA_LIB) would read them wrong, so gpu_open refuses one whose
 * trainc_cuda_abi() differs.  Sizes and the lengths of the tables the two
 * index: a change that keeps them all is not seen. */
static inline uint64_t gpu_abi(void)
{
	const uint64_t v[] = { sizeof(struct plan),	  sizeof(struct node),	    sizeof(struct param), sizeof(struct plan_train),
			       sizeof(struct plan_sched), sizeof(struct train_opts), OP__COUNT,		  LRS_ONE_CYCLE,
			       LOSS_KL_DIV, RED_BATCHMEAN, OPT_RADAM };
	uint64_t h = 1469598103934665603u; /* FNV-1a over the values */
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		h = (h ^ v[i]) * 1099511628211u;
	return h;
}
/* The library's gpu_abi(), as it was built. */
uint64_t trainc_cuda_abi(void);
#endif
