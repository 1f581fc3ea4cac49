/* util.c: see util.h. */
#include "runtime/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int util_fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static _Thread_local int os_error; /* the last util_os_error noted, 0 for none */

int util_os_error(int e)
{
	switch (e) {
	case ENOMEM:
	case EIO:
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
	case EMFILE:
	case ENFILE:
	case ENOBUFS:
	case EAGAIN:
	case ESTALE:
	case ETIMEDOUT:
		os_error = e;
		break;
	default:
		break;
	}
	return e;
}

int util_refusal(void)
{
	int status = os_error ? 1 : 2;
	os_error = 0;
	return status;
}

double util_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int util_utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0], lo = 0x80, hi = 0xBF;
	int len;
	if (n == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		len = 3, lo = c == 0xE0 ? 0xA0 : lo, hi = c == 0xED ? 0x9F : hi;
	else if (c >= 0xF0 && c <= 0xF4)
		len = 4, lo = c == 0xF0 ? 0x90 : lo, hi = c == 0xF4 ? 0x8F : hi;
	else
		return 0;
	if ((size_t)len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return len;
}

static const char *file_kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a file";
}

int util_open_file(const char *path, struct stat *st, const char *what_to_do, char *err, size_t errlen)
{
	const char *sep = what_to_do ? "; " : "", *todo = what_to_do ? what_to_do : "";
	/* O_NONBLOCK: open() returns at once even for a FIFO with no writer */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, st) != 0) {
		int e = util_os_error(errno);
		if (fd >= 0)
			close(fd);
		util_fail(err, errlen, "%s: cannot open: %s%s%s", path, strerror(e), sep, todo);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		util_fail(err, errlen, "%s is not a regular file (%s)%s%s", path, file_kind(st->st_mode), sep, todo);
		errno = EINVAL;
		return -1;
	}
	/* reads of a regular file do not wait anyway; cleared all the same,
	 * so that the descriptor is an ordinary one wherever it goes */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

bool util_pid_gone(long pid)
{
	return pid > 0 && pid <= INT_MAX && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

const char *util_shell_word(const char *s, char *buf, size_t n)
{
	/* bytes past ASCII are UTF-8 letters, which shells take as they are */
	bool plain = *s != 0;
	for (const unsigned char *c = (const unsigned char *)s; *c && plain; c++)
		plain = *c >= 0x80 || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			strchr("_@%+=:,./-", *c);
	if (plain || n < 3)
		return s;
	size_t k = 0;
	const char *c = s;
	buf[k++] = '\'';
	for (; *c && k + 6 <= n; c++) { /* room for an escaped quote, the closing one and the NUL */
		if (*c == '\'') {
			memcpy(buf + k, "'\\''", 4);
			k += 4;
		} else {
			buf[k++] = *c;
		}
	}
	if (*c)
		return s; /* it does not fit */
	buf[k++] = '\'';
	buf[k] = 0;
	return buf;
}

uint64_t util_fnv1a(uint64_t h, const void *data, size_t n)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The end of the run of ranks in `in` that starts at r, or r itself for
 * a run of two, said as two ranks rather than a range. */
static int run_end(const bool *in, int world, int r)
{
	int end = r;
	while (end + 1 < world && in[end + 1])
		end++;
	return end - r >= 2 ? end : r;
}

const char *util_ranks(const bool *in, int world, char *buf, size_t n)
{
	int items = 0, count = 0;
	for (int r = 0; r < world; r++)
		count += in[r];
	for (int r = 0; r < world; r = in[r] ? run_end(in, world, r) + 1 : r + 1)
		items += in[r];
	size_t k = (size_t)snprintf(buf, n, "rank%s", count == 1 ? "" : "s");
	for (int r = 0, item = 0, end; r < world && k < n; r = end + 1) {
		end = in[r] ? run_end(in, world, r) : r;
		if (!in[r])
			continue;
		item++;
		const char *sep = item == 1 ? " " : item == items ? " and " : ", ";
		if (end == r)
			k += (size_t)snprintf(buf + k, n - k, "%s%d", sep, r);
		else
			k += (size_t)snprintf(buf + k, n - k, "%s%d-%d", sep, r, end);
	}
	return buf;
}
