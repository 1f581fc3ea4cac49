/* filemap.c: recorded file mappings and the SIGBUS handler (see filemap.h).
 * A slot is claimed by compare-and-swap (datasets are mapped on the test
 * set's loading thread while the main thread maps others), filled, then
 * published as live; the handler reads only live slots and calls only
 * async-signal-safe functions.  Each message is formatted when its file is
 * mapped, so the handler has nothing left to compute.
 * Does not: unmap anything it did not map, or handle any signal but SIGBUS.
 * Invariant: a live slot's address, length and message are written before
 * it is published, and not changed until it is free again.
 */
#include "runtime/filemap.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

enum { SLOT_FREE, SLOT_BUSY, SLOT_LIVE };
/* a message and the launcher's lead byte fit one pipe write (PIPE_BUF), so
 * it arrives whole or not at all */
enum { MSG_MAX = 4095 };

static struct {
	atomic_int state;
	uintptr_t addr;
	size_t len;
	size_t msg_len;
} slots[FILEMAP_SLOTS];
static char msgs[FILEMAP_SLOTS][MSG_MAX + 1]; /* apart from the slots: a lookup touches no message */

static void (*volatile say_fn)(const char *msg, size_t len);
static atomic_flag fired = ATOMIC_FLAG_INIT;

void *filemap_map(int fd, size_t len, int prot, const char *path, const char *what_to_do)
{
	void *m = mmap(NULL, len, prot, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return m;
	for (int i = 0; i < FILEMAP_SLOTS; i++) {
		int want = SLOT_FREE;
		if (!atomic_compare_exchange_strong(&slots[i].state, &want, SLOT_BUSY))
			continue;
		int n = snprintf(msgs[i], sizeof msgs[i],
				 "trainc: %s shrank while this run was reading it (another program truncated or rewrote it in place); %s\n",
				 path, what_to_do);
		size_t k = n < 0 ? 0 : (size_t)n;
		if (k > MSG_MAX) { /* cut short: still one line */
			k = MSG_MAX;
			msgs[i][k - 1] = '\n';
		}
		slots[i].addr = (uintptr_t)m;
		slots[i].len = len;
		slots[i].msg_len = k;
		atomic_store(&slots[i].state, SLOT_LIVE);
		break;
	}
	return m;
}

void filemap_unmap(void *addr, size_t len)
{
	for (int i = 0; i < FILEMAP_SLOTS; i++) {
		if (atomic_load(&slots[i].state) == SLOT_LIVE && slots[i].addr == (uintptr_t)addr) {
			atomic_store(&slots[i].state, SLOT_FREE);
			break;
		}
	}
	munmap(addr, len);
}

static int find(uintptr_t a)
{
	for (int i = 0; i < FILEMAP_SLOTS; i++)
		if (atomic_load(&slots[i].state) == SLOT_LIVE && a - slots[i].addr < slots[i].len)
			return i;
	return -1;
}

static void on_bus(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	/* si_code <= 0: sent by kill or raise, so si_addr means nothing */
	int s = si->si_code > 0 ? find((uintptr_t)si->si_addr) : -1;
	if (s < 0) {
		/* not a file of ours: a bug, which ends the process as it would
		 * have without this handler (the signal is blocked until return) */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	/* several threads may fault at once: one says it, the rest wait for the exit */
	if (atomic_flag_test_and_set(&fired))
		for (;;)
			pause();
	void (*say)(const char *, size_t) = say_fn;
	if (say)
		say(msgs[s], slots[s].msg_len);
	else if (write(STDERR_FILENO, msgs[s], slots[s].msg_len) < 0) {
		/* nowhere left to say it; the exit status still does */
	}
	_exit(FILEMAP_EXIT_SHRANK);
}

void filemap_catch(void (*say)(const char *msg, size_t len))
{
	say_fn = say;
	struct sigaction sa = { 0 };
	sa.sa_sigaction = on_bus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}
