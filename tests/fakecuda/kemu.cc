/* kemu.cc: the scheduler behind kemu.h.  A launch runs its blocks one
 * after another.  A block's threads are fibers (their own stacks, started
 * with makecontext, switched with _setjmp/_longjmp, so a switch costs no
 * system call); a thread runs until it waits at a barrier or a warp
 * exchange, and the scheduler resumes the waiting threads, one round after
 * another, until every one has exited.  Launches are run at once, or
 * recorded while their stream is captured (tape.h), or queued in the
 * stand-in's asynchronous mode.
 *
 * Orders (TRAINC_KEMU_ORDER; TRAINC_KEMU_ONLY=NAME, as `kernel_name<ARGS>`
 * in the source, applies it to that kernel only, the others run forward):
 * - forward (the default): blocks in index order, threads resumed in
 *   index order each round.  A kernel whose first block never waited runs
 *   its other blocks as plain calls, one thread after another (one that
 *   waits only in some blocks stops the process with a message).
 * - reverse: blocks and, each round, threads in reverse index order;
 * - shuffle: blocks, and each round the threads, in a pseudo-random order
 *   drawn anew from TRAINC_KEMU_SEED (an integer, default 1; the same
 *   seed gives the same orders), and the thread that completes a barrier
 *   or an exchange waits its turn like the others instead of running on.
 * In reverse and shuffle every block of every kernel runs as fibers.  A
 * GPU may run the threads of a block in any order between barriers (and,
 * since Volta, the lanes of a warp between exchanges), so a kernel whose
 * result changes with the order reads what another thread writes without
 * a barrier between.  Exchanges give every lane the values of that
 * exchange in any order (two generations of slots per warp).
 * Shared memory: every __shared__ variable is in one section (kemu.h),
 * filled with 0xff bytes (a NaN as float and double, -1 as an integer) at
 * the start of each block run as fibers, so a read of shared memory no
 * thread of the block wrote shows as a NaN; TRAINC_KEMU_POISON=0 turns
 * that off.  On a GPU shared memory starts with whatever the last block
 * on that multiprocessor left.
 *
 * What else stops the process, with the kernel, block and thread:
 * - a barrier that can never complete (deadlock: some threads wait at
 *   __syncthreads while the others wait at an exchange or elsewhere);
 * - a thread that exits while others of its block wait at __syncthreads,
 *   or after another number of them than the block's first to exit (a
 *   barrier inside a branch not every thread takes: undefined on a GPU);
 * - threads of one block at different __syncthreads calls, or lanes of
 *   one warp at different exchanges, at once (divergent code).  A call is
 *   known by the address it returns to (the build turns tail calls off);
 *   two addresses that addr2line names as the same source line in the
 *   same chain of inlined calls are one call the compiler copied into two
 *   branches;
 * - a warp exchange in a warp without 32 live lanes (a partial last warp,
 *   or lanes that exited), a mask other than the full warp's or a width
 *   other than 32 (not emulated);
 * - a pointer argument outside device memory, or not aligned for its type
 *   (kemu.h); an atomic on memory of another GPU than the stream's;
 * - and, from the build (-fsanitize=alignment), any load or store of the
 *   kernel code at an address not aligned for its type, as a GPU's loads
 *   fault (a double needs 8 bytes, a float4 16; trainc's flat buffers
 *   only promise 4).
 * Launch shapes are checked as CUDA checks them (grid.x up to 2^31 - 1,
 * grid.y and z up to 65535, at most 1024 threads, 48 KB of dynamic shared
 * memory): cudaErrorInvalidConfiguration at the next cudaGetLastError.
 * tests/fakecuda/kemu_check.cu checks all of this on kernels of its own.
 *
 * What it cannot see: blocks never run at the same time, so a race
 * between blocks on global memory shows only as a change with the block
 * order, and an atomic is atomic because nothing else runs; a thread is
 * never stopped between two waits, so a race inside a run between waits
 * (two threads updating one word without an atomic) shows only through
 * the order of whole runs; lanes never run in lockstep, so warp-synchronous
 * code without __syncwarp answers as some order of whole runs would;
 * the memory model (a write another thread or block sees late, a missing
 * __threadfence or volatile, loads cached across a barrier) and memory
 * spaces (device pointers are host pointers: a device pointer used on the
 * host is the stand-in's check, fake_cuda.c); index arithmetic past 2^31
 * elements and grids near their limits, unless a test's shapes get there
 * (none do); device arithmetic (expf, erff, tanhf round differently on a
 * GPU; FMA contraction follows the host compiler); registers and static
 * shared memory, which nvcc checks (-Xptxas -v shows them).
 */
#include "tests/fakecuda/kemu.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "tests/fakecuda/tape.h"
}

__thread struct kemu_now kemu_now;

/* the bounds of the section kemu.h puts every __shared__ variable in (the
 * linker defines them; weak: none where no kernel file is linked in) */
extern "C" {
extern char __start_kemu_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_kemu_shared[] __attribute__((weak, visibility("hidden")));
}

namespace {

enum { STACK_BYTES = 256 << 10, MAX_THREADS = 1024 };
enum order { FORWARD, REVERSE, SHUFFLE };

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
	const void *site; /* where the lanes of the exchange under way wait */
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
	order o = FORWARD; /* the running launch's */
	std::vector<fiber> f;
	std::vector<warp> warps;
	std::vector<unsigned char> slots; /* per warp: 2 generations x 32 lanes x KEMU_SLOT */
	std::vector<unsigned> turn;       /* the threads in the order of this round */
	unsigned nt = 0, live = 0, arrived = 0, gen = 0;
	unsigned exit_gen = 0; /* barriers completed when the block's first thread exited */
	const void *site = nullptr; /* where the threads of the barrier under way wait */
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

/* Whether the file at path is the one mapped at a (/proc/self/maps' inode),
 * not one built over it since: addr2line reads the file. */
bool same_file_as_mapped(const char *path, const void *a)
{
	struct stat st;
	FILE *m = fopen("/proc/self/maps", "r");
	bool same = false;
	char line[4096];
	if (!m || stat(path, &st) != 0) {
		if (m)
			fclose(m);
		return false;
	}
	while (fgets(line, sizeof line, m)) {
		unsigned long lo, hi, inode;
		if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &inode) == 3 && (uintptr_t)a >= lo && (uintptr_t)a < hi) {
			same = inode == (unsigned long)st.st_ino;
			break;
		}
	}
	fclose(m);
	return same;
}

/* The source place of a call that returns to a: the file:line of each
 * inlined frame from the innermost out (addr2line's, without its
 * discriminators), or FILE+OFFSET where that cannot be had. */
std::string place_of(const void *a)
{
	Dl_info d;
	char buf[1024];
	if (!dladdr(a, &d) || !d.dli_fname || !d.dli_fbase) {
		snprintf(buf, sizeof buf, "%p", a);
		return buf;
	}
	/* an executable not built position-independent is named by address */
	uintptr_t at = (uintptr_t)a - 1, base = (uintptr_t)d.dli_fbase;
	uintptr_t off = ((const ElfW(Ehdr) *)d.dli_fbase)->e_type == ET_EXEC ? at : at - base;
	std::string where;
	snprintf(buf, sizeof buf, "%s+%#lx", d.dli_fname, (unsigned long)off);
	std::string fallback = buf;
	if (!same_file_as_mapped(d.dli_fname, a))
		return fallback + " (the file changed since it was loaded)";
	snprintf(buf, sizeof buf, "addr2line -i -e '%s' %#lx 2>/dev/null", d.dli_fname, (unsigned long)off);
	FILE *f = popen(buf, "r");
	if (!f)
		return fallback;
	while (fgets(buf, sizeof buf, f)) {
		char *disc = strstr(buf, " (discriminator");
		if (disc)
			*disc = 0;
		buf[strcspn(buf, "\n")] = 0;
		where += where.empty() ? "" : " in ";
		where += buf;
	}
	if (pclose(f) != 0 || where.empty() || where.find("??") != std::string::npos)
		return fallback;
	return where;
}

/* Whether calls returning to a and b are one call of the source: the
 * compiler may copy a call into two branches (tail duplication), and the
 * lanes that took either are then still at one barrier. */
bool same_call(const void *a, const void *b)
{
	struct seen {
		const void *a, *b;
		bool same;
	};
	static std::vector<seen> memo;
	for (const seen &s : memo)
		if ((s.a == a && s.b == b) || (s.a == b && s.b == a))
			return s.same;
	std::string pa = place_of(a), pb = place_of(b);
	bool same = pa == pb && pa.find('+') == std::string::npos;
	memo.push_back(seen{ a, b, same });
	return same;
}

/* Stops the process for two waits at different calls a and b. */
[[noreturn]] void die_at(const char *what, const void *a, const void *b)
{
	std::string msg = std::string(what) + "; one waits at " + place_of(a) + ", another at " + place_of(b);
	die(msg.c_str());
}

/* the settings, read once */
struct settings {
	order o = FORWARD;
	const char *only = nullptr;
	bool poison = true;
	uint64_t rng = 1;
};

settings &cfg(void)
{
	static settings s;
	static bool read;
	if (!read) {
		read = true;
		const char *v = getenv("TRAINC_KEMU_ORDER");
		if (v && *v && strcmp(v, "forward") != 0) {
			if (strcmp(v, "reverse") == 0)
				s.o = REVERSE;
			else if (strcmp(v, "shuffle") == 0)
				s.o = SHUFFLE;
			else {
				fprintf(stderr, "kemu: TRAINC_KEMU_ORDER=%s: not forward, reverse or shuffle\n", v);
				abort();
			}
		}
		s.only = getenv("TRAINC_KEMU_ONLY");
		const char *p = getenv("TRAINC_KEMU_POISON");
		s.poison = !p || strcmp(p, "0") != 0;
		const char *seed = getenv("TRAINC_KEMU_SEED");
		s.rng = seed && *seed ? strtoull(seed, nullptr, 0) : 1;
	}
	return s;
}

/* the order of launch k (TRAINC_KEMU_ONLY picks one kernel) */
order order_of(const launch &k)
{
	const settings &s = cfg();
	return !s.only || strcmp(s.only, k.name) == 0 ? s.o : FORWARD;
}

/* splitmix64 over the seed: the shuffled orders */
uint64_t draw(void)
{
	uint64_t z = (cfg().rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* v := 0 .. n-1 in the order o */
void order_into(std::vector<unsigned> &v, unsigned n, order o)
{
	v.resize(n);
	for (unsigned i = 0; i < n; i++)
		v[i] = o == REVERSE ? n - 1 - i : i;
	if (o == SHUFFLE)
		for (unsigned i = n; i > 1; i--) {
			unsigned j = (unsigned)(draw() % i);
			unsigned t = v[i - 1];
			v[i - 1] = v[j];
			v[j] = t;
		}
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
	if (S.live-- == S.nt)
		S.exit_gen = S.gen;
	if (S.arrived > 0 || S.gen != S.exit_gen)
		die("exited while other threads of its block wait at __syncthreads, or after another number of them: a barrier "
		    "that not every thread reaches (undefined on a GPU)");
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

/* a block's shared memory as it starts on a GPU: not written by it */
void poison_shared(void)
{
	char *lo = __start_kemu_shared, *hi = __stop_kemu_shared;
	if (cfg().poison && lo && hi > lo)
		memset(lo, 0xff, (size_t)(hi - lo));
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
	S.slots.resize(S.warps.size() * 2 * 32 * KEMU_SLOT);
	for (unsigned w = 0; w < S.warps.size(); w++) {
		warp &x = S.warps[w];
		x.arrived = x.gen = 0;
		x.live = x.lanes = nt - w * 32 < 32 ? nt - w * 32 : 32;
		x.site = nullptr;
	}
	S.live = nt;
	S.arrived = 0;
	S.site = nullptr;
	poison_shared();
	for (;;) {
		bool any = false;
		S.progress = false;
		order_into(S.turn, nt, S.o);
		for (unsigned i = 0; i < nt; i++) {
			unsigned t = S.turn[i];
			if (S.f[t].done)
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
	S.o = order_of(k);
	S.alo = S.ahi = nullptr;
	S.nt = k.block.x;
	S.waited = S.direct = false;
	kemu_now.grid = k.grid;
	kemu_now.block_dim = k.block;
	std::vector<unsigned> blocks;
	if (S.o == SHUFFLE)
		order_into(blocks, k.grid.x, SHUFFLE);
	for (unsigned i = 0; i < k.grid.x; i++) {
		unsigned b = S.o == SHUFFLE ? blocks[i] : S.o == REVERSE ? k.grid.x - 1 - i : i;
		kemu_now.block = kemu_uint3(b, 0, 0);
		if (!S.direct) {
			run_fibers();
			S.direct = !S.waited && S.o == FORWARD;
			continue;
		}
		for (unsigned j = 0; j < S.nt; j++) {
			kemu_now.tid = j;
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
	return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535 &&
	       threads >= 1 && threads <= MAX_THREADS && block.z <= 64 && shared <= 48 << 10;
}
} /* namespace */

__attribute__((noinline)) void __syncthreads(void)
{
	if (!S.k)
		die("__syncthreads outside a kernel");
	if (S.direct)
		die("waits at a barrier although the kernel's first block did not; kemu cannot run a kernel that waits in some blocks "
		    "only in forward order (TRAINC_KEMU_ORDER=reverse can)");
	const void *site = __builtin_return_address(0);
	if (S.arrived == 0)
		S.site = site;
	else if (site != S.site && !same_call(site, S.site))
		die_at("waits at another __syncthreads than other threads of its block (a barrier in divergent code: undefined on "
		       "a GPU)", site, S.site);
	S.waited = S.progress = true;
	unsigned was = S.gen;
	if (++S.arrived == S.live) {
		S.arrived = 0;
		S.gen++;
		if (S.o == SHUFFLE)
			yield(); /* the others may run first */
		return;
	}
	wait_until_changed(&S.gen, was);
}

__attribute__((noinline)) const unsigned char *kemu_warp_exchange(const void *v, size_t size, unsigned mask, int width,
								  const void *site)
{
	if (!S.k)
		die("a warp exchange outside a kernel");
	if (S.direct)
		die("exchanges within a warp although the kernel's first block did not; kemu cannot run a kernel that waits in some "
		    "blocks only in forward order (TRAINC_KEMU_ORDER=reverse can)");
	if (mask != 0xffffffffu)
		die("a warp exchange with a partial mask (not emulated)");
	if (width != 32)
		die("a warp shuffle of width other than 32 (not emulated)");
	if (size > KEMU_SLOT)
		die("exchanges a value wider than 16 bytes");
	if (!site)
		site = __builtin_return_address(0);
	warp &w = S.warps[kemu_now.tid >> 5];
	if (w.lanes != 32 || w.live != 32)
		die("a full-warp exchange in a warp without 32 live lanes (undefined on a GPU)");
	if (w.arrived == 0)
		w.site = site;
	else if (site != w.site && !same_call(site, w.site))
		die_at("exchanges at another call than other lanes of its warp (an exchange in divergent code: undefined on a GPU)",
		       site, w.site);
	S.waited = S.progress = true;
	unsigned was = w.gen;
	unsigned char *gen_slots = &S.slots[((size_t)(kemu_now.tid >> 5) * 2 + (was & 1)) * 32 * KEMU_SLOT];
	if (v)
		memcpy(gen_slots + (kemu_now.tid & 31) * KEMU_SLOT, v, size);
	if (++w.arrived == w.live) {
		w.arrived = 0;
		w.gen++;
		if (S.o == SHUFFLE)
			yield();
	} else {
		wait_until_changed(&w.gen, was);
	}
	/* this generation's slots stay as they are until every lane has left
	 * it: the next exchange writes the other generation's, and the one
	 * after cannot complete before this lane arrives there */
	return gen_slots;
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

__attribute__((noinline)) void __syncwarp(unsigned mask)
{
	if (mask != 0xffffffffu)
		die("__syncwarp with a partial mask (not emulated)");
	kemu_warp_exchange(nullptr, 0, mask, 32, __builtin_return_address(0));
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
	if (ptrs.misaligned) {
		fprintf(stderr, "kemu: kernel %s: pointer argument %d (%p) is not %zu-byte aligned, as its type needs: on a GPU its "
				"loads fault (misaligned address)\n", name, ptrs.misaligned, ptrs.p[ptrs.misaligned - 1], ptrs.align);
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
