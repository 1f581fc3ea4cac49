/* backend.h: where the layers of a plan run.  A backend is a table of
 * functions; the executor (exec.c) decides the order of layers, owns the
 * hooks and asks the backend for memory and for each layer's forward,
 * backward and the loss.  One static const table per backend: backend_cpu
 * (the reference) and, where CUDA is built, a GPU backend.  Memory a
 * backend returns is its own kind (host for the CPU, device for CUDA);
 * to_host/from_host cross over, copy stays inside.
 */
#ifndef BACKEND_H
#define BACKEND_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct exec;

struct backend_ops {
	const char *name;
	void *(*alloc)(int64_t bytes);                      /* zeroed, 64-byte aligned; NULL when out of memory */
	void (*free)(void *p);
	void (*to_host)(void *host, const void *dev, size_t bytes);
	void (*from_host)(void *dev, const void *host, size_t bytes);
	void (*copy)(void *dst, const void *src, size_t bytes);
	/* per-layer state for the executor's batch sizes (convolution plans, ...) */
	int (*prepare)(struct exec *e, char *err, size_t errlen);
	void (*release)(struct exec *e);
	void (*forward)(struct exec *e, int node, int64_t n, bool train);
	void (*backward)(struct exec *e, int node, int64_t n);
	/* the loss of the last node's output against y, its gradient when
	 * training; -1 when a target is out of range */
	int (*loss)(struct exec *e, const void *y, int n, bool train, double *loss, long *correct);
	void (*sync)(struct exec *e);                        /* wait for queued work */
	/* optional: make device d of the rank current for alloc; a backend
	 * that has it keeps each device's parameters in its own memory */
	void (*use_device)(int d);
};

extern const struct backend_ops backend_cpu;
#endif
