/* check.h: the tiny test harness every unit test includes.
 * A test file defines functions named test_*, lists them in main() with
 * RUN(test_x), and returns check_done().  CHECK and CHECK_NEAR report the
 * failing expression with file:line and let the test go on, so one run shows
 * every failure.  Output is one "ok NAME" or "FAIL NAME" line per test, which
 * tests/run counts.
 */
#ifndef CHECK_H
#define CHECK_H
#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failed_now, check_passed, check_failed;

#define CHECK(cond) do { if (!(cond)) { check_failed_now = 1; \
	fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

#define CHECK_NEAR(a, b, tol) do { double check_a_ = (a), check_b_ = (b); \
	if (!(fabs(check_a_ - check_b_) <= (tol))) { check_failed_now = 1; \
	fprintf(stderr, "%s:%d: check failed: %s = %.9g, %s = %.9g (tolerance %g)\n", \
		__FILE__, __LINE__, #a, check_a_, #b, check_b_, (double)(tol)); } } while (0)

#define CHECK_STR(a, b) do { const char *check_a_ = (a), *check_b_ = (b); \
	if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) { check_failed_now = 1; \
	fprintf(stderr, "%s:%d: check failed: %s is \"%s\", expected \"%s\"\n", __FILE__, __LINE__, \
		#a, check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)"); } } while (0)

#define RUN(fn) do { check_failed_now = 0; fn(); \
	if (check_failed_now) { check_failed++; printf("FAIL %s\n", #fn); } \
	else { check_passed++; printf("ok %s\n", #fn); } fflush(stdout); } while (0)

static inline int check_done(void)
{
	return check_failed ? 1 : 0;
}
#endif
