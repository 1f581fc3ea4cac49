/* kern_pool.c: max, average and adaptive (average and max) pooling over
 * 2-D planes, forward and backward, with PyTorch's window rules (padding, dilation for
 * max, ceil_mode, count_include_pad).
 * Every (image, channel) plane is independent and handled by one thread, so
 * the backward scatter-adds keep one order whatever the thread count.
 * With ceil_mode a window may reach past the right padding (PyTorch's output
 * size lets the last one overhang by up to stride - 1): max and the sums
 * clip it to the input, the average's divisor to the input and its padding.
 * Does not check that padding is at most half the window; the planner does.
 */
#include "runtime/kern.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#define PAR_MIN 32768 /* elements below which a parallel region costs more than it saves */

void kern_pool2d_out(const struct pool2d_desc *d, int *oh, int *ow)
{
	assert(d->dh >= 1 && d->dw >= 1);
	*oh = kern_window_out(d->h, d->kh, d->sh, d->ph, d->dh, d->ceil_mode);
	*ow = kern_window_out(d->w, d->kw, d->sw, d->pw, d->dw, d->ceil_mode);
}

/* First in-bounds tap of a dilated window starting at s, and the bound past it. */
static void taps(int s, int k, int dil, int n, int *lo, int *hi)
{
	*hi = s + (k - 1) * dil + 1 < n ? s + (k - 1) * dil + 1 : n;
	while (s < 0)
		s += dil;
	*lo = s;
}

/* The common 2x2 window, stride 2, no padding or dilation: no window
 * clipping to compute, the same ties and NaN rule as the general loop. */
static void maxpool_2x2(const struct pool2d_desc *d, int oh, int ow, const float *x, float *y, int32_t *idx)
{
	int planes = d->n * d->c, w = d->w;
	#pragma omp parallel for schedule(static) if ((size_t)planes * oh * ow * 4 > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		const float *in = x + (size_t)p * d->h * w; // (H, W)
		float *out = y + (size_t)p * oh * ow;       // (OH, OW)
		int32_t *arg = idx + (size_t)p * oh * ow;   // (OH, OW)
		for (int oy = 0; oy < oh; oy++) {
			const float *r0 = in + (size_t)(2 * oy) * w, *r1 = r0 + w;
			for (int ox = 0; ox < ow; ox++) {
				int a = 2 * ox;
				float best = r0[a];
				int at = 2 * oy * w + a;
				/* taps in the general loop's order: (0,0) (0,1) (1,0) (1,1) */
				float v = r0[a + 1];
				if (v > best || v != v) { best = v; at = 2 * oy * w + a + 1; }
				v = r1[a];
				if (v > best || v != v) { best = v; at = (2 * oy + 1) * w + a; }
				v = r1[a + 1];
				if (v > best || v != v) { best = v; at = (2 * oy + 1) * w + a + 1; }
				out[oy * ow + ox] = best;
				arg[oy * ow + ox] = at;
			}
		}
	}
}

void kern_maxpool2d_fwd(const struct pool2d_desc *d, const float *x, float *y, int32_t *idx)
{
	int oh, ow;
	kern_pool2d_out(d, &oh, &ow);
	int planes = d->n * d->c;
	if (d->kh == 2 && d->kw == 2 && d->sh == 2 && d->sw == 2 && d->ph == 0 && d->pw == 0 && d->dh == 1 && d->dw == 1 &&
	    2 * oh <= d->h && 2 * ow <= d->w) {
		maxpool_2x2(d, oh, ow, x, y, idx);
		return;
	}
	#pragma omp parallel for schedule(static) if ((size_t)planes * oh * ow * d->kh * d->kw > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		const float *in = x + (size_t)p * d->h * d->w;  // (H, W)
		float *out = y + (size_t)p * oh * ow;            // (OH, OW)
		int32_t *arg = idx + (size_t)p * oh * ow;        // (OH, OW)
		for (int oy = 0; oy < oh; oy++) {
			int y0, y1;
			taps(oy * d->sh - d->ph, d->kh, d->dh, d->h, &y0, &y1);
			for (int ox = 0; ox < ow; ox++) {
				int x0, x1;
				taps(ox * d->sw - d->pw, d->kw, d->dw, d->w, &x0, &x1);
				/* PyTorch: the first tap wins ties and all -inf; any NaN wins */
				float best = -INFINITY;
				int at = y0 < y1 && x0 < x1 ? y0 * d->w + x0 : -1;
				for (int iy = y0; iy < y1; iy += d->dh)
					for (int ix = x0; ix < x1; ix += d->dw) {
						float v = in[iy * d->w + ix];
						if (v > best || isnan(v)) {
							best = v;
							at = iy * d->w + ix;
						}
					}
				out[oy * ow + ox] = best;
				arg[oy * ow + ox] = at;
			}
		}
	}
}

/* The max pools' backward: each plane's dx zeroed, then each output's dy
 * added at the input its idx names (none where idx is -1), in output order */
static void scatter_argmax(int planes, int in_plane, int out_plane, const int32_t *idx, const float *dy, float *dx)
{
	#pragma omp parallel for schedule(static) if ((size_t)planes * in_plane > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		float *din = dx + (size_t)p * in_plane;
		const float *dout = dy + (size_t)p * out_plane;
		const int32_t *arg = idx + (size_t)p * out_plane;
		memset(din, 0, sizeof(float) * in_plane);
		for (int i = 0; i < out_plane; i++)
			if (arg[i] >= 0)
				din[arg[i]] += dout[i];
	}
}

void kern_maxpool2d_bwd(const struct pool2d_desc *d, const int32_t *idx, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(d, &oh, &ow);
	scatter_argmax(d->n * d->c, d->h * d->w, oh * ow, idx, dy, dx);
}

/* The clipped window [*y0,*y1) x [*x0,*x1) of output (oy, ox) and its divisor. */
static float avg_window(const struct pool2d_desc *d, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
	int hs = oy * d->sh - d->ph, ws = ox * d->sw - d->pw;
	int he = hs + d->kh < d->h + d->ph ? hs + d->kh : d->h + d->ph;
	int we = ws + d->kw < d->w + d->pw ? ws + d->kw : d->w + d->pw;
	int padded = (he - hs) * (we - ws);
	*y0 = hs > 0 ? hs : 0;
	*x0 = ws > 0 ? ws : 0;
	*y1 = he < d->h ? he : d->h;
	*x1 = we < d->w ? we : d->w;
	return (float)(d->count_include_pad ? padded : (*y1 - *y0) * (*x1 - *x0));
}

void kern_avgpool2d_fwd(const struct pool2d_desc *d, const float *x, float *y)
{
	int oh, ow;
	kern_pool2d_out(d, &oh, &ow);
	int planes = d->n * d->c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * oh * ow * d->kh * d->kw > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		const float *in = x + (size_t)p * d->h * d->w;
		float *out = y + (size_t)p * oh * ow;
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				int y0, y1, x0, x1;
				float div = avg_window(d, oy, ox, &y0, &y1, &x0, &x1), s = 0;
				for (int iy = y0; iy < y1; iy++)
					for (int ix = x0; ix < x1; ix++)
						s += in[iy * d->w + ix];
				out[oy * ow + ox] = y0 < y1 && x0 < x1 ? s / div : 0.0f;
			}
	}
}

void kern_avgpool2d_bwd(const struct pool2d_desc *d, const float *dy, float *dx)
{
	int oh, ow;
	kern_pool2d_out(d, &oh, &ow);
	int planes = d->n * d->c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * oh * ow * d->kh * d->kw > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		float *din = dx + (size_t)p * d->h * d->w;
		const float *dout = dy + (size_t)p * oh * ow;
		memset(din, 0, sizeof(float) * d->h * d->w);
		for (int oy = 0; oy < oh; oy++)
			for (int ox = 0; ox < ow; ox++) {
				int y0, y1, x0, x1;
				float g = dout[oy * ow + ox] / avg_window(d, oy, ox, &y0, &y1, &x0, &x1);
				for (int iy = y0; iy < y1; iy++)
					for (int ix = x0; ix < x1; ix++)
						din[iy * d->w + ix] += g;
			}
	}
}

static int start_of(int i, int in, int out)
{
	return (int)((long)i * in / out);
}

static int end_of(int i, int in, int out)
{
	return (int)(((long)(i + 1) * in + out - 1) / out);
}

void kern_adaptive_avgpool2d_fwd(const float *x, float *y, int n, int c, int h, int w, int oh, int ow)
{
	int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * h * w > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		const float *in = x + (size_t)p * h * w;
		float *out = y + (size_t)p * oh * ow;
		for (int oy = 0; oy < oh; oy++) {
			int y0 = start_of(oy, h, oh), y1 = end_of(oy, h, oh);
			for (int ox = 0; ox < ow; ox++) {
				int x0 = start_of(ox, w, ow), x1 = end_of(ox, w, ow);
				float s = 0;
				for (int iy = y0; iy < y1; iy++)
					for (int ix = x0; ix < x1; ix++)
						s += in[iy * w + ix];
				out[oy * ow + ox] = s / (float)((y1 - y0) * (x1 - x0));
			}
		}
	}
}

void kern_adaptive_avgpool2d_bwd(const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow)
{
	int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * h * w > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		float *din = dx + (size_t)p * h * w;
		const float *dout = dy + (size_t)p * oh * ow;
		memset(din, 0, sizeof(float) * h * w);
		for (int oy = 0; oy < oh; oy++) {
			int y0 = start_of(oy, h, oh), y1 = end_of(oy, h, oh);
			for (int ox = 0; ox < ow; ox++) {
				int x0 = start_of(ox, w, ow), x1 = end_of(ox, w, ow);
				float g = dout[oy * ow + ox] / (float)((y1 - y0) * (x1 - x0));
				for (int iy = y0; iy < y1; iy++)
					for (int ix = x0; ix < x1; ix++)
						din[iy * w + ix] += g;
			}
		}
	}
}

void kern_adaptive_maxpool2d_fwd(const float *x, float *y, int32_t *idx, int n, int c, int h, int w, int oh, int ow)
{
	int planes = n * c;
	#pragma omp parallel for schedule(static) if ((size_t)planes * h * w > PAR_MIN)
	for (int p = 0; p < planes; p++) {
		const float *in = x + (size_t)p * h * w;
		float *out = y + (size_t)p * oh * ow;
		int32_t *arg = idx + (size_t)p * oh * ow;
		for (int oy = 0; oy < oh; oy++) {
			int y0 = start_of(oy, h, oh), y1 = end_of(oy, h, oh);
			for (int ox = 0; ox < ow; ox++) {
				int x0 = start_of(ox, w, ow), x1 = end_of(ox, w, ow);
				/* PyTorch: the first element wins ties; any NaN wins */
				float best = -INFINITY;
				int at = y0 * w + x0;
				for (int iy = y0; iy < y1; iy++)
					for (int ix = x0; ix < x1; ix++) {
						float v = in[iy * w + ix];
						if (v > best || isnan(v)) {
							best = v;
							at = iy * w + ix;
						}
					}
				out[oy * ow + ox] = best;
				arg[oy * ow + ox] = at;
			}
		}
	}
}

void kern_adaptive_maxpool2d_bwd(const int32_t *idx, const float *dy, float *dx, int n, int c, int h, int w, int oh, int ow)
{
	scatter_argmax(n * c, h * w, oh * ow, idx, dy, dx);
}
