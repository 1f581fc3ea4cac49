/* kern_window.c: the output length of a sliding window, shared by conv and
 * the pools so that every layer sizes its output with PyTorch's one formula.
 * Does not validate; a result below 1 means the window does not fit.
 */
#include "runtime/kern.h"

int kern_window_out(int in, int k, int s, int p, int d, bool ceil_mode)
{
	long span = (long)in + 2L * p - (long)d * (k - 1) - 1;
	if (span < 0 || s < 1)
		return 0;
	long out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
	/* ceil_mode: the last window must start inside the input or the left padding */
	if (ceil_mode && (out - 1) * s >= (long)in + p)
		out--;
	return (int)out;
}
