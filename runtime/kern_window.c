/* kern_window.c: the output length of a sliding window, shared by conv and
 * the pools so that every layer sizes its output with PyTorch's one formula.
 * Does not validate; a result below 1 means the window does not fit.
 */
#include "runtime/kern.h"

int kern_window_out(int in, int k, int s, int p, int d, bool ceil_mode)
{
	if (s < 1)
		return 0;
	/* ceil_mode rounds up: the last window may overhang the padded input
	 * by up to s - 1, even when the kernel is larger than it */
	long span = (long)in + 2L * p - (long)d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
	if (span < 0)
		return 0;
	long out = span / s + 1;
	/* ceil_mode: the last window must start inside the input or the left padding */
	if (ceil_mode && (out - 1) * s >= (long)in + p)
		out--;
	return (int)out;
}
