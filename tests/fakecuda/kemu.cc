/* kemu.cc: the scheduler behind kemu.h.  A launch runs its blocks one
 * after another.  The first block's threads are fibers (their own stacks,
 * started with makecontext, switched with _setjmp/_longjmp, so a switch
 * costs no system call); a thread runs until it waits at a barrier or a
 * warp exchange, and the scheduler resumes the threads round-robin until
 * every one has exited.  A kernel whose first block never waited runs its
 * other blocks as plain calls, one thread after another (a kernel that
 * waits only in some blocks stops the process with a message).
 * Launches are run at once, or recorded while their stream is captured
 * (tape.h), or queued in the stand-in's asynchronous mode.
 */
#include "tests/fakecuda/kemu.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <memory>
#include <mutex>
#include <vector>

extern "C" {
#include "tests/fakecuda/tape.h"
}

__thread struct kemu_now kemu_now;

namespace {

enum { STACK_BYTES = 256 << 10, MAX_THREADS = 1024, SLOT_BYTES = 16 };

/* A fiber is a stack that runs thread after thread: it stays parked at
 * the top of its loop (fiber_main) between threads, so only its first
 * thread pays for a context of its own. */
struct fiber {
	jmp_buf at;  /* where it waits, or where it is parked */
	char *stack; /* STACK_BYTES above a guard page; NULL until its first thread */
	bool done;
};

struct warp {
	unsigned arrived, gen, live, lanes;
};

struct launch {
	const char *name;
	dim3 grid, block;
	std::function<void()> body;
	int device; /* its stream's GPU */
};

/* the scheduler: the fibers and barriers of the running block; one launch
 * runs at a time in the process (run_lock) */
struct sched {
	const launch *k = nullptr;
	std::vector<fiber> f;
	std::vector<warp> warps;
	std::vector<unsigned char> slots; /* per warp: 2 generations x 32 lanes x SLOT_BYTES */
	unsigned nt = 0, live = 0, arrived = 0, gen = 0;
	bool waited = false, progress = false, direct = false;
	const void *alo = nullptr, *ahi = nullptr; /* an allocation checked for atomics in this launch */
	jmp_buf main;
};

sched S;
std::mutex run_lock;

[[noreturn]] void die(const char *what)
{
	fprintf(stderr, "kemu: kernel %s, block %u, thread %u: %s\n", S.k ? S.k->name : "?", kemu_now.block.x, kemu_now.tid,
		what);
	abort();
}

/* TRAINC_KEMU_ORDER=reverse, for every kernel or, with TRAINC_KEMU_ONLY,
 * for the one of that name (to find which kernel answers differently) */
bool reverse_order(void)
{
	static int r = -1;
	static const char *only;
	if (r < 0) {
		const char *v = getenv("TRAINC_KEMU_ORDER");
		r = v && strcmp(v, "reverse") == 0;
		only = getenv("TRAINC_KEMU_ONLY");
	}
	return r && (!only || strcmp(only, S.k->name) == 0);
}

/* from a fiber back to the scheduler; returns when resumed */
void yield(void)
{
	fiber &me = S.f[kemu_now.tid];
	if (!_setjmp(me.at))
		_longjmp(S.main, 1);
}

void wait_until_changed(const unsigned *gen, unsigned was)
{
	while (*gen == was)
		yield();
}

void thread_exits(void)
{
	unsigned t = kemu_now.tid;
	S.f[t].done = true;
	S.progress = true;
	S.live--;
	if (S.arrived > 0 && S.arrived == S.live) {
		S.arrived = 0;
		S.gen++;
	}
	warp &w = S.warps[t >> 5];
	w.live--;
	if (w.arrived > 0)
		die("exited while other lanes of its warp wait at an exchange");
}

/* a fiber's life: run the thread it is resumed for, park, repeat */
void fiber_main(void)
{
	for (;;) {
		S.k->body();
		thread_exits();
		yield();
	}
}

char *new_stack(void)
{
	size_t guard = 4096;
	void *p = mmap(nullptr, STACK_BYTES + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		die("cannot map a fiber stack");
	mprotect(p, guard, PROT_NONE); /* an overflow faults instead of corrupting */
	return (char *)p + guard;
}

/* thread t runs until it waits or exits */
__attribute__((noinline)) void resume(unsigned t)
{
	fiber &f = S.f[t];
	kemu_now.tid = t;
	if (_setjmp(S.main))
		return;
	if (f.stack)
		_longjmp(f.at, 1);
	f.stack = new_stack();
	ucontext_t start;
	getcontext(&start);
	start.uc_stack.ss_sp = f.stack;
	start.uc_stack.ss_size = STACK_BYTES;
	start.uc_link = nullptr;
	makecontext(&start, fiber_main, 0);
	setcontext(&start);
}

/* one block as fibers; sets S.waited when any thread waited */
void run_fibers(void)
{
	unsigned nt = S.nt;
	if (S.f.size() < nt)
		S.f.resize(nt);
	for (unsigned t = 0; t < nt; t++)
		S.f[t].done = false;
	S.warps.resize((nt + 31) / 32);
	S.slots.resize(S.warps.size() * 2 * 32 * SLOT_BYTES);
	for (unsigned w = 0; w < S.warps.size(); w++) {
		warp &x = S.warps[w];
		x.arrived = x.gen = 0;
		x.live = x.lanes = nt - w * 32 < 32 ? nt - w * 32 : 32;
	}
	S.live = nt;
	S.arrived = 0;
	bool rev = reverse_order();
	for (;;) {
		bool any = false;
		S.progress = false;
		for (unsigned i = 0; i < nt; i++) {
			unsigned t = rev ? nt - 1 - i : i;
			fiber &f = S.f[t];
			if (f.done)
				continue;
			any = true;
			resume(t);
		}
		if (!any)
			return;
		if (!S.progress)
			die("deadlock: every live thread waits at a barrier that cannot complete");
	}
}

void run(const launch &k)
{
	std::lock_guard<std::mutex> hold(run_lock);
	S.k = &k;
	S.alo = S.ahi = nullptr;
	S.nt = k.block.x;
	S.waited = S.direct = false;
	kemu_now.grid = k.grid;
	kemu_now.block_dim = k.block;
	bool rev = reverse_order();
	for (unsigned i = 0; i < k.grid.x; i++) {
		kemu_now.block = kemu_uint3(rev ? k.grid.x - 1 - i : i, 0, 0);
		if (!S.direct) {
			run_fibers();
			S.direct = !S.waited;
			continue;
		}
		for (unsigned j = 0; j < S.nt; j++) {
			kemu_now.tid = rev ? S.nt - 1 - j : j;
			k.body();
		}
	}
	S.k = nullptr;
	S.direct = false;
}

std::mutex kept_lock;
std::vector<std::unique_ptr<launch>> kept; /* launches recorded or queued: replayed later, freed at exit */

void replay(const void *args)
{
	const launch *k;
	memcpy(&k, args, sizeof k);
	run(*k);
}

bool valid(dim3 grid, dim3 block, size_t shared)
{
	unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
	return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.y <= 65535 && grid.z <= 65535 && threads >= 1 &&
	       threads <= MAX_THREADS && block.z <= 64 && shared <= 48 << 10;
}
} /* namespace */

void __syncthreads(void)
{
	if (!S.k)
		die("__syncthreads outside a kernel");
	if (S.direct)
		die("waits at a barrier although the kernel's first block did not; kemu cannot run a kernel that waits in some blocks only");
	S.waited = S.progress = true;
	unsigned was = S.gen;
	if (++S.arrived == S.live) {
		S.arrived = 0;
		S.gen++;
		return;
	}
	wait_until_changed(&S.gen, was);
}

void kemu_warp_exchange(const void *v, void *got, size_t size, int from_lane)
{
	if (!S.k)
		die("a warp exchange outside a kernel");
	if (S.direct)
		die("exchanges within a warp although the kernel's first block did not; kemu cannot run a kernel that waits in some blocks only");
	warp &w = S.warps[kemu_now.tid >> 5];
	if (w.lanes != 32 || w.live != 32)
		die("a full-warp exchange in a warp without 32 live lanes (undefined on a GPU)");
	if (size > SLOT_BYTES)
		die("exchanges a value wider than 16 bytes");
	S.waited = S.progress = true;
	unsigned was = w.gen;
	unsigned char *gen_slots = &S.slots[((size_t)(kemu_now.tid >> 5) * 2 + (was & 1)) * 32 * SLOT_BYTES];
	if (v)
		memcpy(gen_slots + (kemu_now.tid & 31) * SLOT_BYTES, v, size);
	if (++w.arrived == w.live) {
		w.arrived = 0;
		w.gen++;
	} else {
		wait_until_changed(&w.gen, was);
	}
	if (got)
		memcpy(got, gen_slots + from_lane * SLOT_BYTES, size);
}

__attribute__((noinline)) float __fmul_rn(float a, float b)
{
	return a * b;
}

__attribute__((noinline)) double __dmul_rn(double a, double b)
{
	return a * b;
}

void kemu_atomic_at(const void *p)
{
	if (!S.k)
		die("an atomic outside a kernel");
	if (p >= S.alo && p < S.ahi)
		return;
	fake_atomic_check(S.k->name, S.k->device, p, &S.alo, &S.ahi);
}

void __syncwarp(unsigned mask)
{
	if (mask != 0xffffffffu)
		die("__syncwarp with a partial mask is not emulated");
	kemu_warp_exchange(nullptr, nullptr, 0, 0);
}

void kemu_launch(const char *name, dim3 grid, dim3 block, size_t shared, cudaStream_t s, std::function<void()> body,
		 const kemu_ptrs &ptrs)
{
	fake_kernel_check(name, s);
	for (int i = 0; i < ptrs.n; i++)
		if (ptrs.p[i] && !fake_reachable(ptrs.p[i])) {
			fprintf(stderr, "kemu: kernel %s: pointer argument %d (%p) is %s: on a GPU the kernel faults\n", name, i + 1,
				ptrs.p[i], fake_is_device(ptrs.p[i]) ? "another GPU's memory, without peer access" : "not device memory");
			abort();
		}
	if (!valid(grid, block, shared)) {
		fake_launch_failed(cudaErrorInvalidConfiguration);
		return;
	}
	if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1) {
		fprintf(stderr, "kemu: kernel %s: only one-dimensional grids and blocks are emulated\n", name);
		abort();
	}
	std::unique_ptr<launch> k(new launch{ name, grid, block, std::move(body), fake_stream_device(s) });
	const launch *p = k.get();
	if (!tape_record_on(s, replay, &p, sizeof p)) {
		fake_dev_open();
		run(*k);
		fake_dev_close();
		return;
	}
	std::lock_guard<std::mutex> hold(kept_lock);
	kept.push_back(std::move(k));
}
