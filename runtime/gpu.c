/* gpu.c: finds and loads trainc-cuda.so (see gpu.h). */
#include "runtime/gpu.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/util.h"

typedef int (*probe_fn)(int *count, char *err, size_t errlen);
typedef int (*train_fn)(const struct plan *p, const struct train_opts *o, int device);
typedef uint64_t (*abi_fn)(void);

static train_fn train_entry;

/* The library beside this executable, unless TRAINC_CUDA_LIB names one. */
static void lib_path(char *buf, size_t n)
{
	const char *env = getenv("TRAINC_CUDA_LIB");
	if (env && *env) {
		snprintf(buf, n, "%s", env);
		return;
	}
	char self[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
	if (len <= 0) {
		snprintf(buf, n, "trainc-cuda.so");
		return;
	}
	self[len] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		slash[1] = 0;
	snprintf(buf, n, "%strainc-cuda.so", slash ? self : "");
}

int gpu_open(int *count, char *err, size_t errlen)
{
	*count = 0;
	char path[PATH_MAX + 32];
	lib_path(path, sizeof path);
	if (access(path, F_OK) != 0)
		return util_fail(err, errlen, "this trainc was built without CUDA (%s does not exist: ./configure found no CUDA toolkit "
				 "with cuBLAS, cuDNN and NCCL, or was given --no-cuda); train on CPUs with --cpus N, or install the toolkit, rerun ./configure "
				 "and ninja", path);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return util_fail(err, errlen, "cannot load the GPU library: %s; the CUDA libraries (cuBLAS, cuDNN, NCCL) it needs must "
				 "be installed where the loader finds them; train on CPUs with --cpus N", dlerror());
	/* POSIX lets a dlsym result become a function pointer; ISO C does not
	 * say so, hence the copy */
	probe_fn probe = NULL;
	abi_fn abi = NULL;
	void *a = dlsym(h, "trainc_cuda_probe"), *b = dlsym(h, "trainc_cuda_train"), *c = dlsym(h, "trainc_cuda_abi");
	memcpy(&probe, &a, sizeof probe);
	memcpy(&train_entry, &b, sizeof train_entry);
	memcpy(&abi, &c, sizeof abi);
	if (!probe || !train_entry || !abi)
		return util_fail(err, errlen, "%s is not a trainc GPU library of this version (rebuild with ninja)", path);
	if (abi() != gpu_abi()) {
		train_entry = NULL;
		return util_fail(err, errlen, "%s was built from other sources than this trainc (its plan layout differs); rebuild both "
				 "with ninja, or train on CPUs with --cpus N", path);
	}
	if (probe(count, err, errlen) != 0) {
		size_t used = strlen(err);
		snprintf(err + used, errlen - used, "; train on CPUs with --cpus N");
		return -1;
	}
	return 0;
}

bool gpu_maybe(void)
{
	char path[PATH_MAX + 32];
	lib_path(path, sizeof path);
	if (access(path, F_OK) != 0)
		return false;
	void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (drv)
		dlclose(drv);
	return drv != NULL;
}

int gpu_train(const struct plan *p, const struct train_opts *o, int device)
{
	return train_entry(p, o, device);
}
