/* fail_mkdir.c: a library tests/cli/exit_status.sh preloads into trainc
 * (LD_PRELOAD): mkdir of a path that holds the text of FAIL_MKDIR fails
 * with the errno FAIL_ERRNO gives by number (EIO without it), as a full
 * disk (ENOSPC) or a folder the user may not write in (EACCES, which root
 * is never refused) would; with FAIL_RANK set, only in the job's worker
 * of that rank (its RANK).
 * Does not: fail any other call, or the folders libc makes itself
 * (mkdtemp).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int mkdir(const char *path, mode_t mode)
{
	const char *mark = getenv("FAIL_MKDIR"), *only = getenv("FAIL_RANK"), *rank = getenv("RANK"), *e = getenv("FAIL_ERRNO");
	if (mark && *mark && strstr(path, mark) && (!only || (rank && !strcmp(rank, only)))) {
		errno = e ? atoi(e) : EIO;
		return -1;
	}
	return mkdirat(AT_FDCWD, path, mode);
}
