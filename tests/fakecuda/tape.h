/* tape.h: the host stand-in's CUDA graphs.  Between cudaStreamBeginCapture
 * and cudaStreamEndCapture, the stand-in's operations (kernels, copies,
 * GEMMs, convolutions, collectives) are recorded instead of run, as CUDA
 * does; cudaGraphLaunch runs the recording in order.
 */
#ifndef FAKE_TAPE_H
#define FAKE_TAPE_H
#include <stdbool.h>
#include <stddef.h>

/* While capturing: keep a copy of args (size bytes) to pass to replay at
 * every launch, and return true (do not run now); otherwise false. */
bool tape_record(void (*replay)(const void *args), const void *args, size_t size);
#endif
