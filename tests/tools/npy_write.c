/* npy_write: .npy files for the tests, as numpy.save writes them, and
 * damaged on request.
 *   npy_write [options] OUT DESCR SHAPE
 * DESCR is numpy's ('<f4', '|u1', '<i8', '>f8', ...: b1, i1-i8, u1-u8, f2,
 * f4, f8), SHAPE the sizes joined by commas ("10000,1,28,28"; "" for ()).
 * Element i is, by the options:
 *   --idx FILE         byte i of an IDX file's data (gzip'd or plain)
 *   --norm MEAN,STD    then ((float)v / 255 - MEAN) / STD in float, as
 *                      torchvision's ToTensor + Normalize compute it
 *   --values A,B,...   the values in turn, repeated
 *   --ramp M           i % M
 * where --hwc C takes element i of (N, H, W, C) from where it lies in
 * (N, C, H, W) (the inverse of ToTensor's transpose), then changed by:
 *   --map FROM:TO      an element of value FROM made TO (before --norm)
 *   --first K:V        the first K elements made V
 * and the file by:
 *   --version N        format N.0 (1, 2 or 3; default 1)
 *   --fortran 1        fortran_order True
 *   --header TEXT      this dict text in place of the written one
 *   --cut K            the last K bytes left off
 *   --extra K          K zero bytes after the data
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void die(const char *m)
{
	fprintf(stderr, "npy_write: %s\n", m);
	exit(2);
}

static uint16_t to_half(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint32_t sign = (u >> 16) & 0x8000, e = (u >> 23) & 255, m = u & 0x7fffff;
	if (e == 255)
		return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
	int he = (int)e - 112;
	if (he >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (he <= 0) { /* subnormal or zero: round to nearest */
		if (he < -10)
			return (uint16_t)sign;
		m |= 0x800000;
		int shift = 14 - he;
		uint32_t h = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rest > half || (rest == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = (uint32_t)he << 10 | m >> 13, rest = m & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

int main(int argc, char **argv)
{
	const char *idx = NULL, *header = NULL, *values = NULL;
	double mean = 0, std = 1;
	bool norm = false, fortran = false;
	long ramp = 0, cut = 0, extra = 0, first = 0, hwc = 0;
	double map_from = 0, map_to = 0, first_v = 0;
	bool map = false;
	int version = 1, a = 1;
	for (; a < argc && argv[a][0] == '-' && argv[a][1] == '-'; a += 2) {
		if (a + 1 >= argc)
			die("an option without its value");
		const char *o = argv[a] + 2, *v = argv[a + 1];
		if (!strcmp(o, "idx"))
			idx = v;
		else if (!strcmp(o, "norm")) {
			norm = true;
			if (sscanf(v, "%lf,%lf", &mean, &std) != 2)
				die("--norm MEAN,STD");
		} else if (!strcmp(o, "values"))
			values = v;
		else if (!strcmp(o, "ramp"))
			ramp = atol(v);
		else if (!strcmp(o, "hwc"))
			hwc = atol(v);
		else if (!strcmp(o, "map")) {
			map = true;
			if (sscanf(v, "%lf:%lf", &map_from, &map_to) != 2)
				die("--map FROM:TO");
		} else if (!strcmp(o, "first")) {
			if (sscanf(v, "%ld:%lf", &first, &first_v) != 2)
				die("--first K:V");
		} else if (!strcmp(o, "version"))
			version = atoi(v);
		else if (!strcmp(o, "fortran"))
			fortran = !strcmp(v, "1");
		else if (!strcmp(o, "header"))
			header = v;
		else if (!strcmp(o, "cut"))
			cut = atol(v);
		else if (!strcmp(o, "extra"))
			extra = atol(v);
		else
			die("unknown option");
	}
	if (argc - a != 3)
		die("usage: npy_write [options] OUT DESCR SHAPE");
	const char *out = argv[a], *descr = argv[a + 1], *shape = argv[a + 2];
	char kind = descr[1];
	int size = atoi(descr + 2);
	bool big = descr[0] == '>';
	long long dims[8];
	int nd = 0;
	long long numel = 1;
	for (const char *c = shape; *c && nd < 8;) {
		dims[nd] = strtoll(c, (char **)&c, 10);
		numel *= dims[nd++];
		if (*c == ',')
			c++;
	}
	char dict[512], sh[200] = "(";
	for (int i = 0; i < nd; i++)
		snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", i ? ", " : "", dims[i]);
	strcat(sh, nd == 1 ? ",)" : ")");
	if (header)
		snprintf(dict, sizeof dict, "%s", header);
	else
		snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran ? "True" : "False", sh);
	/* numpy pads the preamble and header to a multiple of 64 with spaces, then '\n' */
	size_t pre = version == 1 ? 10 : 12, hl = strlen(dict) + 1;
	size_t total = (pre + hl + 63) / 64 * 64;
	char *h = malloc(total);
	memcpy(h, "\x93NUMPY", 6);
	h[6] = (char)version;
	h[7] = 0;
	size_t hlen = total - pre;
	for (size_t k = 0; k < pre - 8; k++)
		h[8 + k] = (char)(hlen >> (8 * k));
	memset(h + pre, ' ', hlen);
	memcpy(h + pre, dict, strlen(dict));
	h[total - 1] = '\n';

	unsigned char *src = NULL;
	if (idx) {
		gzFile g = gzopen(idx, "rb");
		if (!g)
			die("cannot open the IDX file");
		unsigned char head[4];
		if (gzread(g, head, 4) != 4)
			die("short IDX file");
		int skip = 4 * head[3];
		unsigned char dimb[64];
		if (gzread(g, dimb, (unsigned)skip) != skip)
			die("short IDX header");
		src = malloc((size_t)numel);
		if (gzread(g, src, (unsigned)numel) != numel)
			die("the IDX file holds fewer elements than the shape");
		gzclose(g);
	}
	double vals[64];
	int nv = 0;
	for (const char *c = values; c && *c && nv < 64;) {
		vals[nv++] = strtod(c, (char **)&c);
		if (*c == ',')
			c++;
	}
	size_t bytes = (size_t)numel * (size_t)size;
	unsigned char *d = calloc(bytes + (size_t)extra + 1, 1);
	long long m = nd ? numel / (dims[0] ? dims[0] : 1) : 1; /* a sample's elements */
	for (long long i = 0; i < numel; i++) {
		long long at = i;
		if (hwc > 1) /* element j = (hw, c) of its sample, from (c, hw) */
			at = i / m * m + i % m % hwc * (m / hwc) + i % m / hwc;
		double v = src ? src[at] : nv ? vals[at % nv] : ramp ? (double)(at % ramp) : 0;
		if (map && v == map_from)
			v = map_to;
		if (i < first)
			v = first_v;
		if (norm)
			v = ((float)v / 255.0f - (float)mean) / (float)std;
		uint64_t bitsv = 0;
		switch (kind) {
		case 'f':
			if (size == 2)
				bitsv = to_half((float)v);
			else if (size == 4) {
				float f = (float)v;
				uint32_t u;
				memcpy(&u, &f, 4);
				bitsv = u;
			} else
				memcpy(&bitsv, &v, 8);
			break;
		case 'i':
			bitsv = (uint64_t)(int64_t)llround(v);
			break;
		default: /* u, b */
			bitsv = (uint64_t)llround(v);
		}
		for (int k = 0; k < size; k++)
			d[(size_t)i * (size_t)size + (size_t)k] = (unsigned char)(bitsv >> (8 * (big ? size - 1 - k : k)));
	}
	FILE *f = fopen(out, "wb");
	if (!f)
		die("cannot write OUT");
	size_t all = total + bytes + (size_t)extra, keep = (size_t)cut > all ? 0 : all - (size_t)cut;
	size_t hk = keep < total ? keep : total;
	fwrite(h, 1, hk, f);
	if (keep > total)
		fwrite(d, 1, keep - total, f);
	fclose(f);
	free(h), free(d), free(src);
	return 0;
}
