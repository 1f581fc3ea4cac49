/* cuda.h: the GPU part of trainc, built into build/trainc-cuda.so, which
 * trainc loads only for --gpus (gpu.c), so the same trainc binary starts
 * and trains on CPUs where there is no GPU, driver or CUDA library.
 * backend_cuda is the backend.h table on CUDA; train_gpu_run trains one
 * rank on its GPU.  The entry points the loader looks up are marked so.
 */
#ifndef TRAINC_CUDA_H
#define TRAINC_CUDA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "compiler/ir.h"
#include "runtime/train.h"

struct exec;

/* Words the backend writes on the device, read when the host next waits. */
struct cuda_dev {
	double loss;        /* the table's loss (cu_loss) */
	double correct;
	int32_t bad_target; /* a class target outside the output's classes */
	int32_t bad_id;     /* a token id outside an embedding's rows */
	int32_t pad;
};

extern const struct backend_ops backend_cuda;

/* The first CUDA, cuBLAS or cuDNN failure of this executor (call,
 * file:line, the library's message), or NULL. */
const char *cuda_error(struct exec *e);
/* Keep r, the result of a CUDA call the trainer made for this executor
 * (what: the call and where), as its first failure unless it succeeded:
 * cuda_error then reports it, and the backend skips its later work. */
void cuda_note(struct exec *e, cudaError_t r, const char *what);
/* The stream of the rank's first GPU (inputs, targets, the step words),
 * and of its device d. */
cudaStream_t cuda_stream(struct exec *e);
cudaStream_t cuda_stream_of(struct exec *e, int d);
/* Several GPUs per rank: order every GPU's stream after the first's
 * queued work (fork), and the first's after every other's (join, which
 * leaves the first GPU current). */
void cuda_fork(struct exec *e);
void cuda_join(struct exec *e);
/* The rank's device d is GPU base + d; set before exec_init_on. */
void cuda_set_device_base(int base);
struct cuda_dev *cuda_dev_words(struct exec *e);
/* The loss's pos_weight or class weights on the first GPU (NULL: none). */
const float *cuda_loss_weights(struct exec *e);
/* Dropout reads the step from this device word (finished steps) instead of
 * e->step, so a captured step replays with fresh masks. */
void cuda_use_step(struct exec *e, const int64_t *step);
/* The loss of the last forward against the device targets y, left on the
 * device: *loss = (add ? *loss : 0) + weight * L; with correct, argmax hits
 * are added there.  The gradient is written when training. */
void cuda_loss(struct exec *e, const void *y, int n, bool train, double *loss, double weight, bool add, double *correct);

/* ---- entry points of trainc-cuda.so (gpu.h declares their types) ---- */
/* 0 and the number of GPUs, or -1 with why there is none in err. */
int trainc_cuda_probe(int *count, char *err, size_t errlen);
/* Train one rank on GPU `device`; returns the exit status. */
int trainc_cuda_train(const struct plan *p, const struct train_opts *o, int device);
#endif
