/* stcmp.c: compare two weight files (safetensors, or torch.save's archive)
 * tensor by tensor.
 *   stcmp A B TOL   exit 0 when every F32 tensor of A exists in B with the
 *                   same shape and max |a - b| <= TOL; prints the worst.
 * A test tool for the command-line scripts, not part of trainc.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/safetensors.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: stcmp A.safetensors B.safetensors TOLERANCE\n");
		return 2;
	}
	char err[512];
	struct safetensors_file a, b;
	if (safetensors_open(&a, argv[1], err, sizeof err) != 0 || safetensors_open(&b, argv[2], err, sizeof err) != 0) {
		fprintf(stderr, "stcmp: %s\n", err);
		return 2;
	}
	double tol = atof(argv[3]), worst = 0;
	const char *worst_name = "";
	int rc = 0;
	for (int i = 0; i < a.n; i++) {
		const struct safetensors_entry *ea = &a.tensors[i];
		if (ea->dtype != ST_F32)
			continue;
		const struct safetensors_entry *eb = safetensors_find(&b, ea->name);
		if (!eb || eb->numel != ea->numel) {
			fprintf(stderr, "stcmp: %s: missing or differently shaped in %s\n", ea->name, argv[2]);
			rc = 1;
			continue;
		}
		float *x = malloc((size_t)ea->numel * 4 + 4), *y = malloc((size_t)ea->numel * 4 + 4);
		if (!x || !y || safetensors_read_f32(&a, ea->name, -1, NULL, x, err, sizeof err) != 0 ||
		    safetensors_read_f32(&b, ea->name, -1, NULL, y, err, sizeof err) != 0) {
			fprintf(stderr, "stcmp: %s\n", err);
			return 2;
		}
		for (int64_t k = 0; k < ea->numel; k++) {
			double d = fabs((double)x[k] - (double)y[k]);
			if (!(d <= worst) ) {
				worst = d;
				worst_name = ea->name;
			}
		}
		free(x);
		free(y);
	}
	printf("max |difference| %.3g%s%s%s\n", worst, worst_name[0] ? " (" : "", worst_name, worst_name[0] ? ")" : "");
	if (!(worst <= tol)) {
		fprintf(stderr, "stcmp: %s and %s differ by %.3g > %g\n", argv[1], argv[2], worst, tol);
		rc = 1;
	}
	safetensors_close(&a);
	safetensors_close(&b);
	return rc;
}
