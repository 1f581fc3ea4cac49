/* kern_threads.c: one thread count for every library the kernels call.
 * OpenMP drives our loops and oneDNN (built on OpenMP here).  OpenBLAS is held
 * at one thread: its threaded sgemm rounds differently with the thread count,
 * so kern_gemm splits products itself and runs the pieces on OpenMP threads.
 * kern_pin_threads puts the threads on CPUs of their own when they are
 * exactly the process's CPUs: left to the scheduler, OpenMP's new worker
 * sometimes starts beside the main thread and every parallel region waits
 * for it until it is moved (the seed CNN's first step at 2 threads took
 * 0.05 s or 0.12 s by chance; pinned, 0.05 s every time).  Threads started
 * afterwards would inherit the main thread's one CPU; the loaders take
 * every CPU back (kern_unpin_this_thread).
 */
#include "runtime/kern.h"

#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void kern_set_threads(int n)
{
	if (n < 1)
		n = 1;
	omp_set_num_threads(n);
	openblas_set_num_threads(1);
}

/* OpenBLAS's pthread build starts one thread per CPU but one as it loads,
 * and each spins on sched_yield for some 0.1 s before it sleeps (about
 * 0.03 s of CPU a process on the seed's 2-core bench machine), though
 * trainc, holding OpenBLAS at one thread, never gives them work: CPU taken
 * from whatever shares the cores, every rank of a job at once (on a quiet
 * machine one rank's launch to its first step measured the same either
 * way).  blas_thread_shutdown_ ends
 * the pool as OpenBLAS's own fork handler does; it is looked up rather than
 * linked, as OpenBLAS's OpenMP and serial builds have no such pool. */
void kern_quiet_blas(void)
{
	openblas_set_num_threads(1);
	void *sym = dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
	int (*shutdown)(void) = NULL;
	memcpy(&shutdown, &sym, sizeof shutdown); /* POSIX's dlsym-to-function copy */
	if (shutdown)
		shutdown();
}

int kern_cpus(void)
{
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0)
		return CPU_COUNT(&allowed);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

void kern_cpus_name(char *buf, size_t n)
{
	char boot[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f || !fgets(boot, sizeof boot, f)) /* no /proc: the host name alone */
		gethostname(boot, sizeof boot - 1);
	if (f)
		fclose(f);
	boot[strcspn(boot, "\n")] = 0;
	if (n == 0)
		return;
	int w = snprintf(buf, n, "%s/", boot);
	size_t at = w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
		CPU_ZERO(&allowed);
	/* the mask in hex, a nibble at a time, up to its highest CPU */
	int top = CPU_SETSIZE;
	while (top > 0 && !CPU_ISSET(top - 1, &allowed))
		top--;
	for (int c = (top + 3) / 4 * 4 - 4; c >= 0 && at + 1 < n; c -= 4) {
		int nib = 0;
		for (int k = 0; k < 4; k++)
			nib |= CPU_ISSET(c + k, &allowed) ? 1 << k : 0;
		buf[at++] = "0123456789abcdef"[nib];
		buf[at] = 0;
	}
}

/* The process's CPUs before kern_pin_threads, for the threads started
 * afterwards. */
static cpu_set_t unpinned;
static bool pinned;

bool kern_pin_threads(int n)
{
	/* a user who asks OpenMP to place threads keeps that placement */
	if (getenv("OMP_PROC_BIND") || getenv("OMP_PLACES") || getenv("GOMP_CPU_AFFINITY"))
		return false;
	cpu_set_t allowed;
	if (n < 2 || sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) != n)
		return false;
	int cpu[CPU_SETSIZE], k = 0;
	for (int c = 0; c < CPU_SETSIZE && k < n; c++)
		if (CPU_ISSET(c, &allowed))
			cpu[k++] = c;
	int pinned_threads = 0;
	/* libgomp keeps a team's threads from one region to the next: thread i
	 * of every later region is the one pinned here.  A smaller team
	 * (OMP_THREAD_LIMIT, OMP_DYNAMIC) is left alone. */
#pragma omp parallel num_threads(n) reduction(+ : pinned_threads)
	if (omp_get_num_threads() == n) {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu[omp_get_thread_num()], &one);
		pinned_threads += pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
	}
	unpinned = allowed;
	pinned = pinned_threads > 0;
	return pinned_threads == n;
}

void kern_unpin_this_thread(void)
{
	if (pinned)
		pthread_setaffinity_np(pthread_self(), sizeof unpinned, &unpinned);
}
