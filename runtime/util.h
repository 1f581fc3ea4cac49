/* util.h: the small helpers every runtime module needs alike: an error
 * message into a caller's buffer, whether the system rather than the
 * user's input caused it (the exit status of a refusal), a monotonic
 * clock, the length of a UTF-8 sequence, opening an input file that must
 * be a regular file, whether a process is gone, a path as a shell word
 * for the commands messages suggest, and which ranks of a job a message
 * is about.  Nothing else belongs here.
 */
#ifndef UTIL_H
#define UTIL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Format into err (when err and errlen are set) and return -1. */
int util_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A run refused before training exits 2 where what the user gave does not
 * fit (the .net file, the command line, a file or folder the command
 * names: running it again fails the same way), but 1 where the system
 * failed (out of memory, an I/O error, a full disk, a quota or file size
 * limit, too many open files: it may not happen again).  util_os_error
 * notes errno e, where a failure is said, when it is such a failure of
 * the system (not ENOENT, EACCES, EROFS, ENOTDIR and the like: the
 * path's), and returns e; util_refusal is the exit status of the refusal
 * said since its last call, 2, or 1 where a failure of the system was
 * noted in this thread, which it forgets. */
int util_os_error(int e);
int util_refusal(void);
/* Seconds of CLOCK_MONOTONIC. */
double util_now(void);
/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
int util_utf8_len(const unsigned char *s, size_t n);
/* Open path for reading as a regular file: the descriptor (close-on-exec,
 * blocking) with its fstat in *st, or -1.  A FIFO or a device is refused
 * without waiting on it (a plain open() of a FIFO blocks until a writer
 * comes, for ever).  On failure errno is open()'s, or EINVAL for a path
 * that is not a regular file, and err says "PATH: cannot open: REASON" or
 * "PATH is not a regular file (a FIFO)", then "; what_to_do" when given. */
int util_open_file(const char *path, struct stat *st, const char *what_to_do, char *err, size_t errlen);
/* Whether no process pid exists any more (one of another user is alive). */
bool util_pid_gone(long pid);
/* s as one shell word, for a command a message suggests (mkdir -p DIR,
 * --resume DIR): s itself when nothing in it is special to a POSIX shell,
 * else s in single quotes (a ' as '\''), written to buf; s also when that
 * does not fit in n bytes. */
const char *util_shell_word(const char *s, char *buf, size_t n);
/* The ranks r < world with in[r] set, as a message names them ("rank 1",
 * "ranks 1 and 3", "ranks 0-2 and 5"), written to buf. */
const char *util_ranks(const bool *in, int world, char *buf, size_t n);
/* 64-bit FNV-1a of n bytes, continuing from h (start with UTIL_FNV_BASIS). */
#define UTIL_FNV_BASIS 0xcbf29ce484222325ull
uint64_t util_fnv1a(uint64_t h, const void *data, size_t n);
#endif
