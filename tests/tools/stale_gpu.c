/* stale_gpu.c: a GPU library as one built from other sources than the
 * trainc that loads it would look (tests/cli/gpu_fallback.sh): its entry
 * points are there, one GPU is reported, and its layout stamp
 * (trainc_cuda_abi) is not this trainc's.  Training through it would
 * read the plan wrong, so it exits 99, which no refusal gives.
 * Does not: touch CUDA.
 */
#include <stddef.h>
#include <stdint.h>

int trainc_cuda_probe(int *count, char *err, size_t errlen);
int trainc_cuda_train(const void *p, const void *o, int device);
uint64_t trainc_cuda_abi(void);

int trainc_cuda_probe(int *count, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	*count = 1;
	return 0;
}

int trainc_cuda_train(const void *p, const void *o, int device)
{
	(void)p, (void)o, (void)device;
	return 99;
}

uint64_t trainc_cuda_abi(void)
{
	return 1;
}
