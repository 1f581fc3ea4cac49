/* npz.h: arrays inside a NumPy .npz archive (numpy.savez and
 * numpy.savez_compressed): a ZIP file whose members are .npy files named
 * KEY.npy, as np.load(path)[KEY] reads them.
 * Reads the central directory (ZIP64 records and extra fields included, as
 * numpy writes them for large arrays) and a member's local header; a
 * stored member is read in place, a deflated one is inflated.
 * Does not: read encrypted members, or methods other than stored and
 * deflate (numpy writes no other), or archives split over several disks.
 */
#ifndef NPZ_H
#define NPZ_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct npz_member {
	uint64_t at;                  /* the byte of the archive where its data begins */
	uint64_t csize, usize;        /* its size in the archive, and inflated */
	uint32_t crc;                 /* CRC-32 of the inflated bytes */
	int method;                   /* 0 stored, 8 deflate */
	char name[264];               /* KEY.npy, for messages */
};

/* The member's name for key: KEY.npy, or KEY where it ends in .npy (as
 * np.load's keys leave the suffix off). */
void npz_member_name(const char *key, char *buf, size_t n);

/* The member KEY.npy (or KEY itself, where KEY ends in .npy) of the archive
 * held in zip[0..len).  Returns 0, or -1 with "byte K: what is wrong; what
 * to do" in err; a key the archive lacks is told the keys it has. */
int npz_find(const uint8_t *zip, size_t len, const char *key, struct npz_member *m, char *err, size_t errlen);

/* The member's bytes, checked against its CRC where check is set: a
 * stored one is zip + m->at itself (*own NULL), a deflated one inflated
 * into *own (malloc'd, the caller frees it).  Returns them, or NULL with
 * "byte K of the archive: what is wrong" in err. */
const uint8_t *npz_bytes(const uint8_t *zip, const struct npz_member *m, bool check, void **own, char *err, size_t errlen);

#endif
