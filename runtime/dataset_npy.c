/* dataset_npy.c: datasets of two .npy files, the inputs' and the targets'
 * (see dataset.h), as torch.utils.data.TensorDataset over
 * torch.from_numpy(np.load(path)) with the inputs and real targets made
 * float32 and class labels int64.
 * Both files stay mapped for the run; a sample's values are converted as a
 * batch is filled, so a float32 array costs one copy and an array larger
 * than memory is read from the page cache.  Class labels and token ids are
 * read once, checked and kept apart from the mapping: a value changed in
 * the file later cannot index past a table.
 * With to_tensor, each input sample goes through torchvision's ToTensor
 * first ((H, W, C) images made (C, H, W), uint8 values divided by 255).
 * The input is normalised as torchvision's Normalize does where the
 * dataset gives normalize=, per channel (the sample's first dimension).
 * Does not: augment anything, or hold more than 2^31 - 1 samples.
 */
#include "runtime/dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/filemap.h"
#include "runtime/npz.h"
#include "runtime/util.h"

static const char *const roles[2] = { "input", "target" };

/* Map file i (the input's or the target's) and parse its .npy header: the
 * file itself, or its member key.npy where key is set (an .npz archive,
 * whose member's CRC is checked unless only the headers are wanted). */
static int map_file(struct dataset *ds, int i, const char *path, const char *key, bool headers_only, char *err, size_t errlen)
{
	char member[264] = "";
	if (key)
		npz_member_name(key, member, sizeof member);
	snprintf(ds->npy_name[i], sizeof ds->npy_name[i], "%s%s%s", path, key ? ": " : "", member);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return util_fail(err, errlen, "cannot open %s, the %s array%s: %s", path, roles[i], key ? "s' archive" : "", strerror(errno));
	struct stat st;
	int got = fstat(fd, &st);
	if (got != 0 || !S_ISREG(st.st_mode)) {
		int e = got != 0 ? errno : 0;
		close(fd);
		if (got == 0 && S_ISDIR(st.st_mode))
			return util_fail(err, errlen, "%s: a folder, not a %s file", path, key ? ".npz" : ".npy");
		return util_fail(err, errlen, "%s: %s", path, e ? strerror(e) : "not a regular file; trainc maps its files, so give a file");
	}
	if (st.st_size == 0) {
		close(fd);
		return util_fail(err, errlen, "%s: byte 0: the file is empty; write the array%s with numpy.%s", path, key ? "s" : "",
			    key ? "savez" : "save");
	}
	void *m = filemap_map(fd, (size_t)st.st_size, PROT_READ, path, "put the file back whole and run again");
	int e = errno;
	close(fd);
	if (m == MAP_FAILED)
		return util_fail(err, errlen, "cannot map %s: %s", path, strerror(e));
	ds->npy_map[i] = m;
	ds->npy_len[i] = (size_t)st.st_size;
	char why[800];
	const uint8_t *at = m;
	size_t len = (size_t)st.st_size;
	if (key) {
		struct npz_member z;
		if (npz_find(m, len, key, &z, why, sizeof why) != 0)
			return util_fail(err, errlen, "%s: %s", path, why);
		if (!(at = npz_bytes(m, &z, !headers_only, &ds->npy_own[i], why, sizeof why)))
			return util_fail(err, errlen, "%s: %s", path, why);
		len = (size_t)z.usize;
	}
	ds->npy_at[i] = at;
	if (npy_parse(at, len, &ds->npy[i], why, sizeof why) != 0)
		return util_fail(err, errlen, "%s: %s", ds->npy_name[i], why);
	return 0;
}

static const uint8_t *data(const struct dataset *ds, int i)
{
	return ds->npy_at[i] + ds->npy[i].data_at;
}

/* The array's shape past its first dimension against want[0..nd). */
static bool same(const struct npy_head *h, int nd, const int64_t *want)
{
	if (h->ndim != nd + 1)
		return false;
	for (int k = 0; k < nd; k++)
		if (h->shape[k + 1] != want[k])
			return false;
	return true;
}

static char *dims(int nd, const int64_t *d, char *buf, size_t n)
{
	struct npy_head h = { .ndim = nd };
	memcpy(h.shape, d, sizeof(int64_t) * (size_t)nd);
	return npy_shape_str(&h, 0, buf, n);
}

/* to_tensor's samples: ToTensor takes an image (H, W) or (H, W, C) to (C,
 * H, W), so the model's input must be (C, H, W) and the array's samples
 * (H, W) where C is 1 or (H, W, C); *hwc the C to move first (0: the
 * values stay in place). */
static int check_to_tensor(const struct npy_spec *sp, const struct npy_head *h, const char *path, int64_t *hwc, char *err,
			   size_t errlen)
{
	char a[160], b[160], c[160];
	if (sp->ids_below > 0)
		return util_fail(err, errlen, "%s: to_tensor=true makes images of float values, but the model takes token ids "
			    "(dtype=\"long\", %s); leave to_tensor out", path, sp->input_at);
	if (sp->ndim != 3)
		return util_fail(err, errlen, "%s: to_tensor=true gives (C, H, W) images, as ToTensor does, but the model takes input%s (%s); "
			    "give the model input(C, H, W), or leave to_tensor out", path, dims(sp->ndim, sp->shape, c, sizeof c), sp->input_at);
	int64_t ch = sp->shape[0], hh = sp->shape[1], ww = sp->shape[2];
	*hwc = 0;
	if (h->ndim == 4 && h->shape[1] == hh && h->shape[2] == ww && h->shape[3] == ch) {
		*hwc = ch;
		return 0;
	}
	if (h->ndim == 3 && ch == 1 && h->shape[1] == hh && h->shape[2] == ww)
		return 0;
	return util_fail(err, errlen, "%s: its samples are %s (the array is %s), but to_tensor=true takes images as ToTensor does, "
		    "(H, W, C)%s, for the model's input%s (%s): (%" PRId64 ", %" PRId64 ", %" PRId64 ")%s", path,
		    h->ndim ? npy_shape_str(h, 1, a, sizeof a) : "()", npy_shape_str(h, 0, b, sizeof b), ch == 1 ? " or (H, W)" : "",
		    dims(sp->ndim, sp->shape, c, sizeof c), sp->input_at, hh, ww, ch,
		    ch == 1 ? "" : "; an array already (C, H, W) takes no to_tensor");
}

static int check_input(const struct npy_spec *sp, const struct npy_head *h, const char *name, int64_t *hwc, char *err, size_t errlen)
{
	char a[160], b[160], c[160];
	const char *path = name;
	if (h->ndim == 0)
		return util_fail(err, errlen, "%s: the array is one number (shape ()), not samples; the first dimension counts them", path);
	if (sp->to_tensor)
		return check_to_tensor(sp, h, path, hwc, err, errlen);
	if (!same(h, sp->ndim, sp->shape)) {
		int64_t per = 1, want = 1;
		for (int k = 1; k < h->ndim; k++)
			per *= h->shape[k];
		for (int k = 0; k < sp->ndim; k++)
			want *= sp->shape[k];
		char fix[240] = "";
		if (per == want) {
			int at = snprintf(fix, sizeof fix, "; save a.reshape(%" PRId64, h->shape[0]);
			for (int k = 0; k < sp->ndim && at < (int)sizeof fix; k++)
				at += snprintf(fix + at, sizeof fix - (size_t)at, ", %" PRId64, sp->shape[k]);
			if (at < (int)sizeof fix)
				snprintf(fix + at, sizeof fix - (size_t)at, ") instead");
		}
		return util_fail(err, errlen, "%s: its samples are %s (the array is %s), but the model takes input%s (%s)%s", path,
			    npy_shape_str(h, 1, a, sizeof a), npy_shape_str(h, 0, b, sizeof b), dims(sp->ndim, sp->shape, c, sizeof c),
			    sp->input_at, fix[0] ? fix : "; the first dimension counts the samples, the rest must be the input's");
	}
	if (sp->ids_below > 0 && !npy_is_integer(h->type))
		return util_fail(err, errlen, "%s: the model takes token ids (dtype=\"long\", %s), but this array is %s; save "
			    "a.astype(numpy.int64)", path, sp->input_at, h->dtype);
	return 0;
}

static int check_target(const struct npy_spec *sp, const struct npy_head *h, const char *name, const char *input, int64_t n,
			char *err, size_t errlen)
{
	char a[160], b[160], c[160];
	const char *path = name;
	if (sp->target_kind == TARGET_CLASS) {
		if (!npy_is_integer(h->type))
			return util_fail(err, errlen, "%s: class labels must be integers, but this array is %s; save "
				    "a.astype(numpy.int64)", path, h->dtype);
		if (h->ndim == 2 && h->shape[1] == 1)
			return util_fail(err, errlen, "%s: the labels are %s, one per row; save them flat, a.reshape(-1): shape (%" PRId64
				    ",)", path, npy_shape_str(h, 0, a, sizeof a), h->shape[0]);
		if (h->ndim != 1)
			return util_fail(err, errlen, "%s: class labels are one per sample, shape (N,), but the array is %s", path,
				    npy_shape_str(h, 0, a, sizeof a));
	} else if (!same(h, sp->target_ndim, sp->target_shape)) {
		return util_fail(err, errlen, "%s: the targets are %s per sample (the array is %s), but the model's output is %s (%s); "
			    "the loss needs them equal", path, h->ndim ? npy_shape_str(h, 1, a, sizeof a) : "()",
			    npy_shape_str(h, 0, b, sizeof b), dims(sp->target_ndim, sp->target_shape, c, sizeof c), sp->output_at);
	}
	if (h->shape[0] != n)
		return util_fail(err, errlen, "%s: %" PRId64 " targets, but %s holds %" PRId64 " samples; give one target per sample",
			    path, h->shape[0], input, n);
	return 0;
}

/* Element i of an integer array in *v, true where it is in [0, below) or
 * is *also (when not NULL); else false with it as text ("-3", "above
 * 2^63") in num[32]. */
static bool integer_below(const struct npy_head *h, const uint8_t *src, int64_t i, int64_t below, const int64_t *also, int64_t *v,
			  char *num)
{
	bool fits = npy_integer(h, src, i, v);
	if (fits && ((*v >= 0 && *v < below) || (also && *v == *also)))
		return true;
	snprintf(num, 32, fits ? "%" PRId64 : "above 2^63", *v);
	return false;
}

/* Labels to int32 and token ids to floats, each checked. */
static int read_checked(struct dataset *ds, struct npy_spec *sp, char *err, size_t errlen)
{
	const struct npy_head *hy = &ds->npy[1], *hx = &ds->npy[0];
	if (sp->target_kind == TARGET_CLASS) {
		int64_t ignore = sp->ignore_index;
		ds->labels = malloc((size_t)ds->n * sizeof(int32_t) + 1);
		if (!ds->labels)
			return util_fail(err, errlen, "out of memory for %" PRId64 " labels of %s", ds->n, ds->npy_name[1]);
		for (int64_t i = 0; i < ds->n; i++) {
			int64_t v;
			char num[32];
			if (!integer_below(hy, data(ds, 1), i, sp->num_classes, &ignore, &v, num)) {
				sp->failed = 1;
				return util_fail(err, errlen, "%s: byte %" PRIu64 ": the label at index %" PRId64 " is %s, but the model scores %d "
					    "classes (labels 0 to %d, or the loss's ignore_index %ld; its output at %s)", ds->npy_name[1],
					    hy->data_at + (uint64_t)(i * hy->size), i, num, sp->num_classes, sp->num_classes - 1,
					    (long)sp->ignore_index, sp->output_at);
			}
			ds->labels[i] = (int32_t)v;
		}
	}
	if (sp->ids_below > 0) {
		int64_t m = ds->sample_numel;
		ds->ids = malloc((size_t)(ds->n * m) * sizeof(float) + 1);
		if (!ds->ids)
			return util_fail(err, errlen, "out of memory for the token ids of %s", ds->npy_name[0]);
		for (int64_t i = 0; i < ds->n * m; i++) {
			int64_t v;
			char num[32];
			if (!integer_below(hx, data(ds, 0), i, sp->ids_below, NULL, &v, num)) {
				sp->failed = 0;
				return util_fail(err, errlen, "%s: byte %" PRIu64 ": sample %" PRId64 " (from 0) has token id %s, but the embedding that "
					    "reads the input has rows 0 to %" PRId64 " (%s)", ds->npy_name[0], hx->data_at + (uint64_t)(i * hx->size),
					    i / m, num, sp->ids_below - 1, sp->input_at);
			}
			ds->ids[i] = (float)v; /* below 2^24: exact */
		}
	}
	return 0;
}

int dataset_npy(struct dataset *ds, struct npy_spec *sp, char *err, size_t errlen)
{
	memset(ds, 0, sizeof *ds);
	ds->kind = DATASET_NPY;
	if (sp->ndim < 1 || sp->ndim > DATASET_MAX_DIMS ||
	    (sp->target_kind == TARGET_VECTOR && (sp->target_ndim < 1 || sp->target_ndim > DATASET_MAX_DIMS)))
		return util_fail(err, errlen, "npy: samples and targets of 1 to %d dimensions", DATASET_MAX_DIMS);
	int rc = -1;
	sp->failed = 0;
	if (map_file(ds, 0, sp->input, sp->input_key, sp->headers_only, err, errlen) != 0 ||
	    check_input(sp, &ds->npy[0], ds->npy_name[0], &ds->npy_hwc, err, errlen) != 0)
		goto out;
	snprintf(ds->images_path, sizeof ds->images_path, "%s", ds->npy_name[0]);
	ds->n = ds->npy[0].shape[0];
	sp->failed = 1;
	if (map_file(ds, 1, sp->target, sp->target_key, sp->headers_only, err, errlen) != 0 ||
	    check_target(sp, &ds->npy[1], ds->npy_name[1], ds->npy_name[0], ds->n, err, errlen) != 0)
		goto out;
	if (ds->n > INT32_MAX) {
		util_fail(err, errlen, "%s: %" PRId64 " samples; trainc takes at most 2^31 - 1", ds->npy_name[0], ds->n);
		goto out;
	}
	ds->ndim = sp->ndim;
	memcpy(ds->shape, sp->shape, sizeof ds->shape);
	ds->sample_numel = ds->npy[0].numel / (ds->n ? ds->n : 1);
	if (!ds->n)
		for (int k = 0; k < sp->ndim; k++)
			ds->sample_numel *= sp->shape[k];
	ds->target = sp->target_kind;
	ds->num_classes = sp->num_classes;
	ds->target_ndim = sp->target_ndim;
	memcpy(ds->target_shape, sp->target_shape, sizeof ds->target_shape);
	ds->target_numel = 1;
	for (int k = 0; sp->target_kind == TARGET_VECTOR && k < sp->target_ndim; k++)
		ds->target_numel *= sp->target_shape[k];
	ds->npy_div255 = sp->to_tensor && ds->npy[0].type == NPY_U8;
	if (sp->headers_only) {
		rc = 0;
		goto out;
	}
	if (sp->nnorm > 0) {
		if (!(ds->npy_norm = malloc((size_t)(2 * sp->nnorm) * sizeof(float)))) {
			util_fail(err, errlen, "out of memory");
			goto out;
		}
		memcpy(ds->npy_norm, sp->norm_mean, (size_t)sp->nnorm * sizeof(float));
		memcpy(ds->npy_norm + sp->nnorm, sp->norm_std, (size_t)sp->nnorm * sizeof(float));
		ds->npy_nnorm = sp->nnorm;
	}
	rc = read_checked(ds, sp, err, errlen);
out:
	if (rc != 0)
		dataset_close(ds);
	return rc;
}

/* torchvision's Normalize over one sample of m values: (x - mean) / std
 * in float, channel c the values [c m / C, (c + 1) m / C). */
static void normalize(const struct dataset *ds, float *x, int64_t m)
{
	int64_t nc = ds->npy_nnorm, inner = m / nc;
	const float *mean = ds->npy_norm, *std = ds->npy_norm + nc;
	for (int64_t c = 0; c < nc; c++)
		for (int64_t j = c * inner; j < (c + 1) * inner; j++)
			x[j] = (x[j] - mean[c]) / std[c];
}

/* ToTensor over one sample of m values at src: (H, W, C) made (C, H, W)
 * where hwc is C > 1, converted a run of values at a time; a uint8 array's
 * values divided by 255 in float (img.float().div(255)). */
static void to_tensor(const struct dataset *ds, const uint8_t *src, int64_t m, float *x)
{
	const struct npy_head *h = &ds->npy[0];
	int64_t c = ds->npy_hwc;
	if (c > 1) {
		enum { RUN = 1024 };
		float run[RUN];
		int64_t hw = m / c;
		for (int64_t j0 = 0; j0 < m; j0 += RUN) {
			int64_t len = m - j0 < RUN ? m - j0 : RUN;
			npy_to_float(h, src + j0 * h->size, len, run);
			for (int64_t j = j0; j < j0 + len; j++)
				x[j % c * hw + j / c] = run[j - j0];
		}
	} else {
		npy_to_float(h, src, m, x);
	}
	if (ds->npy_div255)
		for (int64_t j = 0; j < m; j++)
			x[j] = x[j] / 255.0f;
}

void dataset_npy_fill(const struct dataset *ds, const int64_t *idx, int b, float *x, void *y)
{
	int64_t m = ds->sample_numel, k = ds->target_numel;
	for (int s = 0; s < b; s++) {
		int64_t i = idx[s];
		if (ds->ids)
			memcpy(x + s * m, ds->ids + i * m, (size_t)m * sizeof(float));
		else if (ds->npy_div255 || ds->npy_hwc > 1)
			to_tensor(ds, data(ds, 0) + i * m * ds->npy[0].size, m, x + s * m);
		else
			npy_to_float(&ds->npy[0], data(ds, 0) + i * m * ds->npy[0].size, m, x + s * m);
		if (ds->npy_nnorm)
			normalize(ds, x + s * m, m);
		if (ds->target == TARGET_CLASS)
			((int32_t *)y)[s] = ds->labels[i];
		else
			npy_to_float(&ds->npy[1], data(ds, 1) + i * k * ds->npy[1].size, k, (float *)y + s * k);
	}
}
