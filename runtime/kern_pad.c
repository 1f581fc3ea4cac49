/* kern_pad.c: zero padding of 2-D planes, forward and backward, as
 * torch.nn.ZeroPad2d: each side given apart, a negative side cropping.
 * Both ways are row copies between zeroed ends: output (oy, ox) is input
 * (oy - top, ox - left) or 0, and the input's gradient at (iy, ix) is the
 * output's at (iy + top, ix + left), or 0 where that place was cropped
 * away; so dx is written whole, each element by one copy, and nothing
 * depends on the thread count.
 * Does not check sizes: the planner keeps every output side at least 1.
 */
#include "runtime/kern.h"

#include <string.h>

#define PAR_MIN 32768 /* elements below which a parallel region costs more than it saves */

/* dst (n) := src (m) moved right by off: dst[i] = src[i - off] where that
 * is inside src, else 0 */
static void shift_row(const float *src, int m, float *dst, int n, int off)
{
	int lo = off > 0 ? (off < n ? off : n) : 0;
	int hi = m + off < n ? m + off : n;
	if (hi < lo)
		hi = lo;
	memset(dst, 0, sizeof(float) * (size_t)lo);
	if (hi > lo)
		memcpy(dst + lo, src + lo - off, sizeof(float) * (size_t)(hi - lo));
	memset(dst + hi, 0, sizeof(float) * (size_t)(n - hi));
}

/* Each of the n * c planes of src (rows_in, from) into dst (rows_out, to):
 * row r of a plane is row r - down of its source moved right by `right`,
 * or zeros. */
static void shift_planes(const struct pad2d_desc *d, const float *src, int rows_in, int from, float *dst, int rows_out, int to,
			 int down, int right)
{
	int planes = d->n * d->c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * rows_out * to > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		const float *in = src + (size_t)p * rows_in * from; // (rows_in, from)
		float *out = dst + (size_t)p * rows_out * to;        // (rows_out, to)
		for (int r = 0; r < rows_out; r++) {
			int q = r - down;
			if (q >= 0 && q < rows_in)
				shift_row(in + (size_t)q * from, from, out + (size_t)r * to, to, right);
			else
				memset(out + (size_t)r * to, 0, sizeof(float) * (size_t)to);
		}
	}
}

void kern_pad2d_out(const struct pad2d_desc *d, int *oh, int *ow)
{
	*oh = d->h + d->top + d->bottom;
	*ow = d->w + d->left + d->right;
}

void kern_zeropad2d_fwd(const struct pad2d_desc *d, const float *x, float *y)
{
	int oh, ow;
	kern_pad2d_out(d, &oh, &ow);
	shift_planes(d, x, d->h, d->w, y, oh, ow, d->top, d->left);
}

void kern_zeropad2d_bwd(const struct pad2d_desc *d, const float *dy, float *dx)
{
	int oh, ow;
	kern_pad2d_out(d, &oh, &ow);
	shift_planes(d, dy, oh, ow, dx, d->h, d->w, -d->top, -d->left);
}
