/* filemap.h: input files mapped into memory, and what a run says when one
 * of them shrinks under it.
 * A file another program truncates in place (a rewrite, an interrupted
 * copy) while trainc has it mapped takes its pages with it: touching one
 * raises SIGBUS, which would end the run with "Bus error" and no word of
 * which file.  Mappings made here are recorded, each with a message naming
 * its file, in a fixed table; filemap_catch's SIGBUS handler turns a fault
 * inside one into that message and exit status FILEMAP_EXIT_SHRANK.  Any
 * other SIGBUS (a bug) ends the process as it did before.
 * Does not: notice a file rewritten in place at the same size (nothing
 * faults), or guard more than FILEMAP_SLOTS mappings at once (the rest work,
 * unguarded).  Costs nothing per access: the table is read only on a fault.
 */
#ifndef FILEMAP_H
#define FILEMAP_H
#include <stddef.h>

enum {
	FILEMAP_EXIT_SHRANK = 3, /* the exit status of a run whose mapped input shrank */
	FILEMAP_SLOTS = 1024, /* a sharded checkpoint of 1,000 ranks resumed, with the datasets */
};

/* mmap(NULL, len, prot, MAP_PRIVATE, fd, 0), recorded so that a fault in it
 * is said as "trainc: PATH shrank while this run was reading it (...);
 * WHAT_TO_DO".  Returns the mapping, or MAP_FAILED with errno set. */
void *filemap_map(int fd, size_t len, int prot, const char *path, const char *what_to_do);

/* Forget and unmap what filemap_map returned. */
void filemap_unmap(void *addr, size_t len);

/* Install the SIGBUS handler; say(msg, len) passes the message on (it must
 * be async-signal-safe: write(2) and the like; NULL: to standard error),
 * then the process exits with FILEMAP_EXIT_SHRANK.  May be called again to
 * change say. */
void filemap_catch(void (*say)(const char *msg, size_t len));

#endif
