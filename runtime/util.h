/* util.h: the three small helpers every runtime module needs alike: an
 * error message into a caller's buffer, a monotonic clock and the length
 * of a UTF-8 sequence.  Nothing else belongs here.
 */
#ifndef UTIL_H
#define UTIL_H
#include <stddef.h>

/* Format into err (when err and errlen are set) and return -1. */
int util_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Seconds of CLOCK_MONOTONIC. */
double util_now(void);
/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
int util_utf8_len(const unsigned char *s, size_t n);
#endif
