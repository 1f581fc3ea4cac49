/* npy.h: the header of a NumPy .npy file (numpy.save), and its elements as
 * numbers.
 * A .npy file is the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), the
 * header's length (2 bytes in 1.0, 4 after), and the header: a Python dict
 * literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...), }
 * padded with spaces to a newline.  The array's elements follow it, in C
 * order, nothing after them.
 * Does not: read .npz archives (npz.h finds their members), structured, string, object or complex
 * arrays, or arrays in Fortran order (except those of one dimension, whose
 * order is the same).
 * Invariant: npy_parse checks every size against the file's length, so a
 * header it accepts describes bytes that are all in the file.
 */
#ifndef NPY_H
#define NPY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 8

enum npy_type { NPY_BOOL, NPY_I8, NPY_I16, NPY_I32, NPY_I64, NPY_U8, NPY_U16, NPY_U32, NPY_U64, NPY_F16, NPY_F32, NPY_F64 };

struct npy_head {
	enum npy_type type;
	int size;                     /* bytes per element */
	bool swap;                    /* stored big-endian */
	int ndim;
	int64_t shape[NPY_MAX_DIMS];
	int64_t numel;                /* elements in all */
	uint64_t data_at;             /* the byte where the elements begin */
	char dtype[24];               /* numpy's name of it, for messages: "float32" */
};

/* The header of the .npy file held in buf[0..len) (the whole file).
 * Returns 0, or -1 with "byte K: what is wrong; what to do" in err. */
int npy_parse(const uint8_t *buf, size_t len, struct npy_head *h, char *err, size_t errlen);

static inline bool npy_is_integer(enum npy_type t)
{
	return t >= NPY_I8 && t <= NPY_U64;
}

/* count elements from src (stored as h says) to floats, as numpy's
 * astype(float32) and torch's .float() round them. */
void npy_to_float(const struct npy_head *h, const uint8_t *src, int64_t count, float *dst);

/* Element i of an integer array, at src: false where it does not fit an
 * int64 (a uint64 above 2^63 - 1). */
bool npy_integer(const struct npy_head *h, const uint8_t *src, int64_t i, int64_t *v);

/* "(60000, 1, 28, 28)", as numpy prints a shape: the first `from`
 * dimensions left out. */
char *npy_shape_str(const struct npy_head *h, int from, char *buf, size_t n);

#endif
