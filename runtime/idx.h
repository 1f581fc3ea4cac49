/* idx.h: read IDX files (the MNIST family's format), raw or gzip-compressed.
 * An IDX file is a 4-byte magic 00 00 08 NDIM (0x08 = unsigned bytes), NDIM
 * big-endian uint32 dimensions, then the product of the dimensions in bytes.
 * Compression is detected by the gzip magic bytes 1f 8b, never by the name.
 * Does not: read the other IDX element types (int16, int32, float, double);
 * none of the datasets trainc reads uses them.
 * Invariant: after idx_open succeeds the dimensions are known to fit in memory
 * (no overflow, and for a raw file they match the file size exactly);
 * idx_read delivers exactly count bytes or fails, and fails on trailing data.
 */
#ifndef IDX_H
#define IDX_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IDX_MAX_DIMS 4

struct idx_file {
	char path[1024];
	int ndim;
	int64_t dims[IDX_MAX_DIMS];
	int64_t count;       /* product of dims: bytes of data after the header */
	int64_t header_len;  /* 4 + 4 * ndim: byte offset of the first data byte */
	int gzip;            /* 1 when the bytes on disk are gzip, offsets then count decompressed bytes */
	FILE *raw;           /* exactly one of raw / gz is open between idx_open and idx_close */
	void *gz;            /* idx.c's inflate state, kept opaque so users need not include zlib.h */
};

/* Open path and read its header.  want_ndim 1..IDX_MAX_DIMS demands that rank
 * (1 for labels, 3 for images); 0 accepts any rank up to IDX_MAX_DIMS.
 * Returns 0, or -1 with a message in err naming the path and byte offset. */
int idx_open(struct idx_file *f, const char *path, int want_ndim, char *err, size_t errlen);

/* Read all f->count data bytes into dst and check that nothing follows them. */
int idx_read(struct idx_file *f, uint8_t *dst, char *err, size_t errlen);

/* Close the file; safe after a failed idx_open and when called twice. */
void idx_close(struct idx_file *f);

#endif
