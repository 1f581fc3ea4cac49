/* fork_malloc.c: a library tests/cli/fork_exec.sh preloads into trainc
 * (LD_PRELOAD): a child of fork that allocates or frees before it execs
 * stops at once, saying so, with exit status 86.  Such a child may call
 * only async-signal-safe functions: when another thread of the parent
 * held the allocator's lock at the fork, the child waits for it forever
 * (the launcher's setenv between fork and exec did, under the sanitizers'
 * allocator).  After exec the new image starts with the flag clear.
 * Does not: catch allocations of a child that never forks through fork()
 * (posix_spawn, vfork); check anything else a child calls.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static volatile int in_child;

static void child(void)
{
	in_child = 1;
}

__attribute__((constructor)) static void watch_forks(void)
{
	pthread_atfork(NULL, NULL, child);
}

static void stop(const char *what)
{
	static const char head[] = "fork_malloc: ";
	static const char tail[] = " between fork and exec in a child\n";
	ssize_t w = write(STDERR_FILENO, head, sizeof head - 1);
	w = write(STDERR_FILENO, what, 7);
	w = write(STDERR_FILENO, tail, sizeof tail - 1);
	(void)w;
	_exit(86);
}

void *malloc(size_t n)
{
	if (in_child)
		stop("malloc ");
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	if (in_child)
		stop("calloc ");
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	if (in_child)
		stop("realloc");
	return __libc_realloc(p, n);
}

void free(void *p)
{
	if (in_child && p)
		stop("free   ");
	__libc_free(p);
}
