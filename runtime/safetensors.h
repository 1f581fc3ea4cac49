/* safetensors.h: read and write safetensors files, the checkpoint format
 * shared with PyTorch (safetensors.torch.save_file / load_file).
 * Layout: 8-byte little-endian header length N, N bytes of JSON
 * {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ...} padded with spaces to a multiple of 8,
 * then the tensors' little-endian bytes, offsets counted from the end of the
 * header.
 * Does not: convert between dtypes, or accept JSON beyond what the format
 * uses (tensor entries with exactly dtype, shape and data_offsets; metadata
 * values that are strings).
 * Invariant: a file that opens is fully validated: names unique, dtypes
 * known, every tensor's bytes inside the data section and of the size its
 * shape and dtype need, the data section covered exactly, without gap or
 * overlap.  Writes are atomic: a reader sees the old file or the new one.
 */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define SAFETENSORS_MAX_DIMS 8
#define SAFETENSORS_MAX_HEADER 100000000 /* bytes; the reference library's limit */

/* the dtypes of the safetensors specification; names and sizes in
 * safetensors.c's dtype table [sync: safetensors_dtype] */
enum safetensors_dtype {
	ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16,
	ST_I32, ST_U32, ST_F32, ST_F64, ST_I64, ST_U64, ST_NUM_DTYPES
};

/* One tensor to write. */
struct safetensors_tensor {
	const char *name;                      /* state_dict name, e.g. "conv1.weight" */
	int ndim;                              /* 0 (a scalar) .. SAFETENSORS_MAX_DIMS */
	int64_t shape[SAFETENSORS_MAX_DIMS];
	const float *data;                     /* (shape...) */
};

/* One tensor of any dtype to write. */
struct safetensors_typed {
	const char *name;
	enum safetensors_dtype dtype;
	int ndim;                              /* 0 (a scalar) .. SAFETENSORS_MAX_DIMS */
	int64_t shape[SAFETENSORS_MAX_DIMS];
	const void *data;                      /* (shape...) elements of dtype, host (little-endian) order */
};

/* One metadata pair ("__metadata__" in the header). */
struct safetensors_meta {
	const char *key;
	const char *value;
};

/* One tensor found in an open file. */
struct safetensors_entry {
	const char *name;
	enum safetensors_dtype dtype;
	int ndim;
	int64_t shape[SAFETENSORS_MAX_DIMS];
	int64_t numel;
	uint64_t begin, end;                   /* data_offsets, relative to the data section */
	const unsigned char *data;             /* (end - begin) bytes, little-endian, maybe unaligned */
	int64_t header_offset;                 /* file byte offset of its name, for messages */
};

struct safetensors_file {
	char path[PATH_MAX];                   /* file name, or the label given to safetensors_parse */
	const unsigned char *bytes;            /* the whole file */
	size_t size;
	int mapped;                            /* bytes is our mmap, unmapped by close */
	struct safetensors_entry *tensors;     /* (n) sorted by name */
	int n;
	struct safetensors_meta *meta;         /* (nmeta) in file order */
	int nmeta;
	char *strings;                         /* decoded names, keys and values */
};

/* Write the tensors (in name order) and metadata to path atomically: a
 * temporary file in the same directory (PATH.tmp.PID.XXXXXX, its writer's
 * PID in its name), fsync, rename, fsync of the directory.  Temporary
 * files of path that writers which no longer run left behind (killed
 * while writing) are removed first.  Returns 0, or -1 with a message in
 * err. */
int safetensors_write(const char *path, const struct safetensors_tensor *t, int n,
		      const struct safetensors_meta *meta, int nmeta, char *err, size_t errlen);

/* The same for tensors of any dtype (I64 buffers beside F32 weights),
 * ordered as the reference orders them: widest dtype first, then by name. */
int safetensors_write_typed(const char *path, const struct safetensors_typed *t, int n,
			    const struct safetensors_meta *meta, int nmeta, char *err, size_t errlen);

/* One piece of a file safetensors_write_pieces writes. */
struct safetensors_piece {
	const void *data;
	uint64_t len;
};

/* Write the pieces one after another to path, atomically and durably as
 * safetensors_write does (for the other weights format, runtime/torchfile.h).
 * Returns 0, or -1 with a message in err. */
int safetensors_write_pieces(const char *path, const struct safetensors_piece *pc, int n, char *err, size_t errlen);

/* Map path and validate it.  Returns 0, or -1 with a message in err naming
 * the file, the byte offset and, where one is at fault, the tensor.  A
 * torch.save archive (a ZIP file) is read as well, into the same table
 * (runtime/torchfile.h), and a pickle of older PyTorch is refused saying
 * how to save it again. */
int safetensors_open(struct safetensors_file *f, const char *path, char *err, size_t errlen);

/* The same over bytes already in memory, which must outlive f; label names
 * them in messages. */
int safetensors_parse(struct safetensors_file *f, const void *bytes, size_t size, const char *label,
		      char *err, size_t errlen);

/* The tensor called name, or NULL. */
const struct safetensors_entry *safetensors_find(const struct safetensors_file *f, const char *name);

/* The metadata value for key, or NULL. */
const char *safetensors_meta_get(const struct safetensors_file *f, const char *key);

/* Copy tensor name into dst (numel floats) after checking that it exists,
 * is F32 and has the given shape (ndim < 0: any shape).  Returns 0, or -1
 * with a message in err. */
int safetensors_read_f32(const struct safetensors_file *f, const char *name, int ndim, const int64_t *shape,
			 float *dst, char *err, size_t errlen);

/* "F32", "BF16", ...; and the size of one element in bytes. */
const char *safetensors_dtype_name(enum safetensors_dtype dtype);
size_t safetensors_dtype_size(enum safetensors_dtype dtype);

/* Release the mapping and the tables; safe on a zeroed or closed file. */
void safetensors_close(struct safetensors_file *f);

#endif
