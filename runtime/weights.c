/* weights.c: a plan's tensors to and from safetensors (see weights.h).
 * Loading follows load_state_dict(strict=True): every tensor of the model
 * present with its shape (a BatchNorm's num_batches_tracked may be left
 * out, and is then 0), and, when strict, nothing else.  Where PyTorch
 * would copy_ across dtypes, so do we: F64, F16 and BF16 weights are
 * rounded to float (a half-precision export loads without a detour through
 * Python), I32 counts widen to int64; integer or 8-bit float data for a
 * float tensor is refused, since it is never a weight saved by mistake in a
 * narrower type but a different tensor.
 * Does not: look at the file's trainc_plan hash; a file saved under other
 * training settings holds the same tensors and loads.
 * Invariant: every check runs before the first element is written.
 */
#include "runtime/weights.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/safetensors.h"
#include "runtime/torchfile.h"
#include "runtime/util.h"

enum { LIST_MAX = 5 }; /* names listed in one message */

/* floats the executor gives the param: an I64 takes two */
static int64_t slots(const struct param *pr)
{
	return pr->dtype == DT_I64 ? 2 * pr->numel : pr->numel;
}

struct span {
	int64_t offset, slots;
	int param;
};

static int by_offset(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every param inside the rank's unsharded parameter region (all its
 * devices), none overlapping another, I64s on an 8-byte boundary: what
 * params + offset addressing needs. */
static int check_region(const struct plan *p, const char *path, char *err, size_t errlen)
{
	int64_t total = p->unsharded_elems;
	struct span *order = malloc((size_t)(p->nparams ? p->nparams : 1) * sizeof *order);
	if (!order) {
		util_os_error(ENOMEM);
		return util_fail(err, errlen, "%s: out of memory", path);
	}
	for (int k = 0; k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		order[k] = (struct span){ pr->offset, slots(pr), k };
		if (pr->offset < 0 || pr->offset > total - slots(pr) || (pr->dtype == DT_I64 && pr->offset % 2)) {
			free(order);
			return util_fail(err, errlen, "%s: '%s' lies at element %lld, outside the %lld-element parameter region "
				    "or misaligned; the plan is not laid out for one region", path, pr->name,
				    (long long)pr->offset, (long long)total);
		}
	}
	qsort(order, (size_t)p->nparams, sizeof *order, by_offset);
	for (int k = 1; k < p->nparams; k++) {
		const struct param *a = &p->params[order[k - 1].param], *b = &p->params[order[k].param];
		if (order[k - 1].offset + order[k - 1].slots > order[k].offset && order[k].slots > 0) {
			free(order);
			return util_fail(err, errlen, "%s: '%s' and '%s' overlap in the parameter region (elements %lld and "
				    "%lld): the plan keeps per-unit offsets, as sharded FSDP does; weights are saved and "
				    "loaded for single-region plans only", path, a->name, b->name, (long long)a->offset,
				    (long long)b->offset);
		}
	}
	free(order);
	return 0;
}

bool weights_torch_name(const char *path)
{
	size_t n = strlen(path);
	return (n > 3 && strcasecmp(path + n - 3, ".pt") == 0) || (n > 4 && strcasecmp(path + n - 4, ".pth") == 0);
}

int weights_save(const struct plan *p, const float *params, const char *path, char *err, size_t errlen)
{
	if (check_region(p, path, err, errlen) != 0)
		return -1;
	struct safetensors_typed *t = calloc((size_t)(p->nparams ? p->nparams : 1), sizeof *t);
	if (!t)
		return util_fail(err, errlen, "%s: out of memory", path);
	for (int k = 0; k < p->nparams; k++) {
		const struct param *pr = &p->params[k];
		t[k].name = pr->name;
		t[k].dtype = pr->dtype == DT_I64 ? ST_I64 : ST_F32;
		t[k].ndim = pr->shape.rank;
		memcpy(t[k].shape, pr->shape.d, sizeof(int64_t) * (size_t)pr->shape.rank);
		t[k].data = params + pr->offset;
	}
	char hash[17];
	snprintf(hash, sizeof hash, "%016llx", (unsigned long long)p->hash);
	struct safetensors_meta meta[2] = { { "format", "pt" }, { "trainc_plan", hash } };
	int rc = weights_torch_name(path) ? torchfile_write(path, t, p->nparams, err, errlen)
					  : safetensors_write_typed(path, t, p->nparams, meta, 2, err, errlen);
	free(t);
	return rc;
}

/* "(128, 9216)", "()" for a scalar, "(10,)" as Python writes a 1-tuple */
static const char *dims_str(char *buf, size_t n, int ndim, const int64_t *d)
{
	size_t at = (size_t)snprintf(buf, n, "(");
	for (int k = 0; k < ndim && at < n; k++)
		at += (size_t)snprintf(buf + at, n - at, "%s%lld", k ? ", " : "", (long long)d[k]);
	if (at < n)
		snprintf(buf + at, n - at, "%s)", ndim == 1 ? "," : "");
	return buf;
}

/* ", "-separated names[0..n) into buf, at most LIST_MAX, then ", ..." */
static const char *name_list(char *buf, size_t len, const char *const *names, int n)
{
	size_t at = 0;
	buf[0] = 0;
	for (int k = 0; k < n && k < LIST_MAX && at < len; k++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", k ? ", " : "", names[k]);
	if (n > LIST_MAX && at < len)
		snprintf(buf + at, len - at, ", ...");
	return buf;
}

/* The file tensor whose name is name under a wrapper's prefix
 * ("module.fc1.weight" for "fc1.weight"), or NULL. */
static const char *prefixed(const struct safetensors_file *f, const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < f->n; i++) {
		size_t m = strlen(f->tensors[i].name);
		if (m > n + 1 && f->tensors[i].name[m - n - 1] == '.' && !strcmp(f->tensors[i].name + m - n, name))
			return f->tensors[i].name;
	}
	return NULL;
}

/* A BatchNorm's num_batches_tracked, which load_state_dict does not ask of
 * a file: BatchNorm's _load_from_state_dict sets a missing one to 0 for a
 * state_dict without version metadata, as every safetensors file is (and
 * exports of BatchNorm models often leave it out). */
static bool batch_count(const struct param *pr)
{
	return pr->role == ROLE_NUM_BATCHES;
}

static int missing(const struct safetensors_file *f, const struct plan *p, const char **miss, int nmiss,
		   char *err, size_t errlen)
{
	const char **names = malloc((size_t)(f->n ? f->n : 1) * sizeof *names);
	if (!names) {
		util_os_error(ENOMEM);
		return util_fail(err, errlen, "%s: out of memory", f->path);
	}
	for (int i = 0; i < f->n; i++)
		names[i] = f->tensors[i].name;
	char have[512], also[512] = "", hint[512] = "";
	name_list(have, sizeof have, names, f->n);
	free(names);
	if (nmiss > 1) {
		char list[400];
		snprintf(also, sizeof also, "; also missing: %s", name_list(list, sizeof list, miss + 1, nmiss - 1));
	}
	const char *wrapped = prefixed(f, miss[0]);
	if (wrapped)
		snprintf(hint, sizeof hint, "; the file has '%s': save the unwrapped module's state_dict "
			 "(model.module after DDP) instead", wrapped);
	else
		snprintf(hint, sizeof hint, "; give a file saved from this model");
	return util_fail(err, errlen, "%s: no tensor '%s' (the model has %d tensors; the file has %d%s%s)%s%s", f->path,
		    miss[0], p->nparams, f->n, f->n ? ": " : "", have, also, hint);
}

static int unexpected(const struct safetensors_file *f, const struct plan *p, const bool *used, char *err,
		      size_t errlen)
{
	const char *extra[LIST_MAX + 1];
	int nextra = 0;
	for (int i = 0; i < f->n; i++)
		if (!used[i]) {
			if (nextra <= LIST_MAX)
				extra[nextra] = f->tensors[i].name;
			nextra++;
		}
	if (nextra == 0)
		return 0;
	char list[512];
	return util_fail(err, errlen, "%s: %d tensor%s the model does not have: %s (the model has %d tensors, the file %d); "
		    "give a file saved from this model, or drop those tensors from it (in Python: "
		    "safetensors.torch.load_file, del, save_file)", f->path, nextra,
		    nextra == 1 ? "" : "s", name_list(list, sizeof list, extra, nextra), p->nparams, f->n);
}

/* the file's shape matches, allowing PyTorch's [1] for a scalar */
static bool same_shape(const struct param *pr, const struct safetensors_entry *e)
{
	if (pr->shape.rank == 0 && e->ndim == 1 && e->shape[0] == 1)
		return true;
	if (e->ndim != pr->shape.rank)
		return false;
	for (int k = 0; k < e->ndim; k++)
		if (e->shape[k] != pr->shape.d[k])
			return false;
	return true;
}

static int check_tensor(const struct safetensors_file *f, const struct param *pr, const struct safetensors_entry *e,
			char *err, size_t errlen)
{
	if (!same_shape(pr, e)) {
		char have[160], want[160];
		return util_fail(err, errlen, "%s: '%s' has shape %s in the file but %s in the model; give a file saved from "
			    "this model", f->path, pr->name, dims_str(have, sizeof have, e->ndim, e->shape),
			    dims_str(want, sizeof want, pr->shape.rank, pr->shape.d));
	}
	if (pr->dtype == DT_I64 && e->dtype != ST_I64 && e->dtype != ST_I32)
		return util_fail(err, errlen, "%s: '%s' is %s in the file; the model needs an integer count there (I64, or "
			    "I32)", f->path, pr->name, safetensors_dtype_name(e->dtype));
	if (pr->dtype == DT_F32 && e->dtype != ST_F32 && e->dtype != ST_F64 && e->dtype != ST_F16 &&
	    e->dtype != ST_BF16)
		return util_fail(err, errlen, "%s: '%s' is %s in the file; the model needs floating point there (F32, or "
			    "F64, F16 or BF16, which are converted)", f->path, pr->name, safetensors_dtype_name(e->dtype));
	return 0;
}

static float from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = h >> 10 & 0x1f, man = h & 0x3ff, bits;
	if (exp == 0 && man != 0) { /* subnormal: man * 2^-24, exact in float */
		float v = (float)man * 0x1p-24f;
		return sign ? -v : v;
	}
	if (exp == 0)
		bits = sign;
	else if (exp == 0x1f)
		bits = sign | 0x7f800000u | man << 13;
	else
		bits = sign | (exp + 112) << 23 | man << 13;
	float v;
	memcpy(&v, &bits, 4);
	return v;
}

/* the file's data may sit at any byte, so every element is memcpy'd */
static void copy_tensor(const struct param *pr, const struct safetensors_entry *e, float *params)
{
	float *dst = params + pr->offset;
	const unsigned char *src = e->data;
	int64_t n = pr->numel;
	if (pr->dtype == DT_I64) {
		int64_t *out = (int64_t *)(void *)dst; /* 8-byte aligned: check_region */
		for (int64_t i = 0; i < n; i++) {
			int32_t v32;
			if (e->dtype == ST_I64) {
				memcpy(&out[i], src + 8 * i, 8);
			} else {
				memcpy(&v32, src + 4 * i, 4);
				out[i] = v32;
			}
		}
		return;
	}
	switch (e->dtype) {
	case ST_F64:
		for (int64_t i = 0; i < n; i++) {
			double v;
			memcpy(&v, src + 8 * i, 8);
			dst[i] = (float)v;
		}
		break;
	case ST_F16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t h;
			memcpy(&h, src + 2 * i, 2);
			dst[i] = from_f16(h);
		}
		break;
	case ST_BF16:
		for (int64_t i = 0; i < n; i++) {
			uint16_t h;
			uint32_t bits;
			memcpy(&h, src + 2 * i, 2);
			bits = (uint32_t)h << 16;
			memcpy(&dst[i], &bits, 4);
		}
		break;
	default: /* F32, the only other dtype check_tensor lets through */
		memcpy(dst, src, (size_t)n * 4);
		break;
	}
}

int weights_load(const struct plan *p, float *params, const char *path, bool strict, char *err, size_t errlen)
{
	if (check_region(p, path, err, errlen) != 0)
		return -1;
	struct safetensors_file f;
	if (safetensors_open(&f, path, err, errlen) != 0)
		return -1;
	const struct safetensors_entry **found = calloc((size_t)(p->nparams ? p->nparams : 1), sizeof *found);
	const char **miss = calloc((size_t)(p->nparams ? p->nparams : 1), sizeof *miss);
	bool *used = calloc((size_t)(f.n ? f.n : 1), sizeof *used);
	int rc = 0, nmiss = 0;
	if (!found || !miss || !used) {
		util_os_error(ENOMEM);
		rc = util_fail(err, errlen, "%s: out of memory", path);
	}
	for (int k = 0; rc == 0 && k < p->nparams; k++) {
		found[k] = safetensors_find(&f, p->params[k].name);
		if (found[k])
			used[found[k] - f.tensors] = true;
		else if (!batch_count(&p->params[k]))
			miss[nmiss++] = p->params[k].name;
	}
	if (rc == 0 && nmiss > 0)
		rc = missing(&f, p, miss, nmiss, err, errlen);
	if (rc == 0 && strict)
		rc = unexpected(&f, p, used, err, errlen);
	for (int k = 0; rc == 0 && k < p->nparams; k++)
		if (found[k])
			rc = check_tensor(&f, &p->params[k], found[k], err, errlen);
	for (int k = 0; rc == 0 && params && k < p->nparams; k++)
		if (found[k])
			copy_tensor(&p->params[k], found[k], params);
		else /* a batch count the file lacks starts at 0, as load_state_dict sets it */
			memset(params + p->params[k].offset, 0, (size_t)slots(&p->params[k]) * sizeof *params);
	free(found);
	free(miss);
	free(used);
	safetensors_close(&f);
	return rc;
}
