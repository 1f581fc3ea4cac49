/* util.c: see util.h. */
#include "runtime/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

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
