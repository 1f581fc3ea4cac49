/* tape.h: the host stand-in's CUDA graphs.  Between cudaStreamBeginCapture
 * and cudaStreamEndCapture, the stand-in's operations (kernels, copies,
 * GEMMs, convolutions, collectives) are recorded instead of run, as CUDA
 * does; cudaGraphLaunch runs the recording in order.
 */
#ifndef FAKE_TAPE_H
#define FAKE_TAPE_H
#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

/* An operation on stream s: while a stream is captured, keep a copy of
 * args (size bytes) to pass to replay at every launch; in the asynchronous
 * mode, queue it on s; either way return true (do not run it now).
 * Otherwise false: the caller runs it at once. */
bool tape_record_on(cudaStream_t s, void (*replay)(const void *args), const void *args, size_t size);

/* A kernel launch was refused (kemu.cc): cudaGetLastError returns e next. */
void fake_launch_failed(cudaError_t e);

/* Device memory is readable and writable by the host only between these
 * (nested, from any thread): around the stand-in's own device work. */
void fake_dev_open(void);
void fake_dev_close(void);
/* Whether p is in memory cudaMalloc gave (and not freed since); and
 * whether a kernel on the current GPU may reach it (its own memory, or
 * a GPU's it has peer access to). */
bool fake_is_device(const void *p);
bool fake_reachable(const void *p);
/* A kernel launch on stream s: stops the process if s is another GPU's
 * than the current one (the launch fails on a GPU). */
void fake_kernel_check(const char *name, cudaStream_t s);
/* The GPU of stream s (NULL: the current one). */
int fake_stream_device(cudaStream_t s);
/* An atomic update at p by kernel `name` running on GPU d: stops the
 * process unless p is GPU d's own memory (atomics on a peer's memory are
 * not guaranteed over PCIe).  *lo and *hi (when not NULL) get the bounds
 * of p's allocation, which the caller may take as checked for the rest of
 * the launch. */
void fake_atomic_check(const char *name, int d, const void *p, const void **lo, const void **hi);
#endif
