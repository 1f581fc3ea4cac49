/* backend_cuda.c: the GPU backend behind backend.h's table: memory from
 * cudaMalloc, GEMMs through cuBLAS, convolutions through cuDNN (algorithms
 * found once per batch size at prepare), everything else through the
 * kernels of kc.h, all queued on one stream per rank.  Nothing here waits
 * for the GPU except the table's loss (which returns host numbers) and
 * sync; the trainer (train_gpu.c) uses cuda_loss, which leaves the loss on
 * the device, so a whole step can be captured as one CUDA graph.
 * Matmuls run in full float32 and convolutions may use TF32, as PyTorch's
 * defaults (TRAINC_TF32=0 turns TF32 off, for exact comparisons).
 * Every CUDA, cuBLAS and cuDNN call is checked; the first failure is kept
 * with the call, file:line and the library's message (cuda_error), and
 * later work is skipped, since the stream's results are lost anyway.
 */
#include "runtime/cuda/cuda.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/cuda/kc.h"
#include "runtime/exec.h"
#include "runtime/loss_elem.h"
#include "runtime/util.h"

/* One convolution at one batch size: cuDNN's descriptors and algorithms. */
/* A convolution's descriptors: one convolution descriptor per direction,
 * because each carries the math type its chosen algorithm was timed with. */
enum { CONV_FWD, CONV_BWD_DATA, CONV_BWD_FILTER };
struct conv {
	cudnnTensorDescriptor_t x, y;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t c[3];
	cudnnConvolutionFwdAlgo_t fwd;
	cudnnConvolutionBwdDataAlgo_t bwd_data;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter;
	bool ready;
};

/* One GPU of the rank: its stream, library handles and workspaces. */
struct gpu {
	cudaStream_t stream;
	cublasHandle_t blas;
	cudnnHandle_t dnn;
	void *blas_ws;      /* cuBLAS workspace */
	void *ws;           /* cuDNN workspace, the largest any of its convolutions asked for */
	size_t ws_bytes;
	cudaEvent_t ev;     /* for ordering other GPUs' streams after this one */
	double *hits;       /* a GPU but the first: argmax hits of a loss computed here, before the first GPU adds them */
	double *loss_parts; /* a large loss's block sums (kc.h: KC_LOSS_PARTS + 1) */
	float *loss_weights; /* bce_with_logits' pos_weight per output, or nll's and cross_entropy's weight per class, where the plan has them */
};

struct cuda_state {
	struct gpu g[PLAN_MAX_DEVICES];
	int ngpu;             /* the rank's devices (@device), GPUs device_base + 0.. */
	struct conv *conv;    /* (nnodes, EXEC_MAX_SIZES) */
	struct cuda_dev *dev; /* device words on the first GPU: flags, loss */
	const int64_t *step;  /* finished optimizer steps on the device, or NULL: e->step */
	int relu_done;        /* a ReLU node the last forward call computed with its bias (bias_relu_next), or -1 */
	char err[512];
	bool failed;
};

enum { BLAS_WS = 32 << 20 };

/* The rank's device k is GPU device_base + k (cuda_set_device_base). */
static int device_base;

void cuda_set_device_base(int base)
{
	device_base = base;
}

static void cu_use_device(int d)
{
	cudaSetDevice(device_base + d);
}

static struct cuda_state *st(struct exec *e)
{
	return e->be_state;
}

/* Keep the first failure; later ones are consequences. */
static void failf(struct cuda_state *c, const char *fmt, ...)
{
	if (!c || c->failed)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
	c->failed = true;
}

/* A failed call, said with where it is; one that ran out of GPU memory
 * says so first, which the trainer's setup reads to say how much the GPU
 * had and what to change. */
#define CU(c, call)                                                                                                      \
	do {                                                                                                             \
		cudaError_t r_ = (call);                                                                                 \
		if (r_ == cudaErrorMemoryAllocation)                                                                     \
			failf((c), "out of memory (%s at %s:%d)", #call, __FILE__, __LINE__);                            \
		else if (r_ != cudaSuccess)                                                                              \
			failf((c), "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, cudaGetErrorString(r_));           \
	} while (0)
#define BLAS(c, call)                                                                                                    \
	do {                                                                                                             \
		cublasStatus_t r_ = (call);                                                                              \
		if (r_ == CUBLAS_STATUS_ALLOC_FAILED)                                                                    \
			failf((c), "out of memory (%s at %s:%d)", #call, __FILE__, __LINE__);                            \
		else if (r_ != CUBLAS_STATUS_SUCCESS)                                                                    \
			failf((c), "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, cublasGetStatusString(r_));         \
	} while (0)
#define DNN(c, call)                                                                                                     \
	do {                                                                                                             \
		cudnnStatus_t r_ = (call);                                                                               \
		if (r_ != CUDNN_STATUS_SUCCESS)                                                                          \
			failf((c), "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, cudnnGetErrorString(r_));           \
	} while (0)

const char *cuda_error(struct exec *e)
{
	struct cuda_state *c = st(e);
	if (!c)
		return NULL;
	if (!c->failed) {
		cudaError_t r = cudaPeekAtLastError();
		if (r != cudaSuccess)
			failf(c, "a kernel launch failed: %s", cudaGetErrorString(r));
	}
	return c->failed ? c->err : NULL;
}

cudaStream_t cuda_stream(struct exec *e)
{
	return st(e)->g[0].stream;
}

cudaStream_t cuda_stream_of(struct exec *e, int d)
{
	return st(e)->g[d].stream;
}

/* Make GPU d current when the rank has several; returns its state. */
static struct gpu *on(struct cuda_state *c, int d)
{
	if (c->ngpu > 1)
		CU(c, cudaSetDevice(device_base + d));
	return &c->g[d];
}

/* Order stream `to`'s later work after what is queued on GPU from's stream. */
static void follow(struct cuda_state *c, int from, int to)
{
	if (from == to)
		return;
	CU(c, cudaEventRecord(c->g[from].ev, c->g[from].stream));
	CU(c, cudaStreamWaitEvent(c->g[to].stream, c->g[from].ev, 0));
}

void cuda_fork(struct exec *e)
{
	struct cuda_state *c = st(e);
	for (int d = 1; d < c->ngpu; d++)
		follow(c, 0, d);
}

void cuda_join(struct exec *e)
{
	struct cuda_state *c = st(e);
	for (int d = 1; d < c->ngpu; d++)
		follow(c, d, 0);
	CU(c, cudaSetDevice(device_base)); /* the first GPU's stream goes on: its kernels launch there */
}

void cuda_note(struct exec *e, cudaError_t r, const char *what)
{
	if (r != cudaSuccess)
		failf(st(e), "%s failed: %s", what, cudaGetErrorString(r));
}

struct cuda_dev *cuda_dev_words(struct exec *e)
{
	return st(e)->dev;
}

const float *cuda_loss_weights(struct exec *e)
{
	return st(e)->g[0].loss_weights;
}

void cuda_use_step(struct exec *e, const int64_t *step)
{
	st(e)->step = step;
}

/* Memory: cudaMalloc'd and zeroed; 256-byte aligned, more than the 64 the
 * table promises. */
static void *cu_alloc(int64_t bytes)
{
	void *p = NULL;
	size_t n = (size_t)(bytes > 0 ? bytes : 1);
	if (cudaMalloc(&p, n) != cudaSuccess) {
		cudaGetLastError(); /* clear it: out of memory is reported by the caller */
		return NULL;
	}
	/* a plain memset may still run when a kernel on a non-blocking
	 * stream starts: wait for it */
	if (cudaMemset(p, 0, n) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
		cudaFree(p);
		return NULL;
	}
	return p;
}

static void cu_free(void *p)
{
	if (p)
		cudaFree(p);
}

/* The table's copies wait for every stream first: they serve setup and
 * checks, not the training loop. */
static void cu_to_host(void *host, const void *dev, size_t bytes)
{
	if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
		memset(host, 0xff, bytes); /* NaNs, never stale numbers; the caller checks cuda_error */
}

static void cu_from_host(void *dev, const void *host, size_t bytes)
{
	cudaDeviceSynchronize();
	cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
	cudaDeviceSynchronize();
}

static void cu_copy(void *dst, const void *src, size_t bytes)
{
	cudaDeviceSynchronize();
	cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
	cudaDeviceSynchronize();
}

static int64_t numel(const struct shape *s)
{
	return shape_numel(s);
}

static int size_slot(const struct exec *e, int64_t n)
{
	for (int s = 0; s < e->nsizes; s++)
		if (e->sizes[s] == n)
			return s;
	return -1;
}

static bool want_tf32(void)
{
	const char *v = getenv("TRAINC_TF32");
	return !v || strcmp(v, "0") != 0;
}

/* A result of cuDNN's Find worth taking: it ran, within 1 GiB of workspace,
 * and with TF32 off in plain float math. */
static bool usable(cudnnStatus_t status, size_t memory, cudnnMathType_t math, bool tf32)
{
	return status == CUDNN_STATUS_SUCCESS && memory <= ((size_t)1 << 30) && (tf32 || math == CUDNN_FMA_MATH);
}

/* Descriptors and the fastest algorithms of node i's convolution at batch n
 * (cuDNN's Find, which runs each candidate once: PyTorch's benchmark mode). */
static int conv_prepare(struct exec *e, struct gpu *gp, struct conv *cv, const struct node *nd, int64_t n, size_t *ws_need)
{
	struct cuda_state *c = st(e);
	const struct plan *p = e->p;
	const struct shape *in = &p->nodes[nd->in].out;
	int64_t c64, h64, w64;
	shape_chw(in->d, in->rank, &c64, &h64, &w64);
	int ci = (int)c64, h = (int)h64, w = (int)w64;
	int co = (int)nd->a.conv.cout, g = (int)nd->a.conv.groups;
	bool tf32 = want_tf32();
	DNN(c, cudnnCreateTensorDescriptor(&cv->x));
	DNN(c, cudnnCreateTensorDescriptor(&cv->y));
	DNN(c, cudnnCreateFilterDescriptor(&cv->w));
	DNN(c, cudnnSetTensor4dDescriptor(cv->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)n, ci, h, w));
	DNN(c, cudnnSetFilter4dDescriptor(cv->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, co, ci / g, (int)nd->a.conv.kh,
					  (int)nd->a.conv.kw));
	for (int dir = 0; dir < 3; dir++) {
		DNN(c, cudnnCreateConvolutionDescriptor(&cv->c[dir]));
		DNN(c, cudnnSetConvolution2dDescriptor(cv->c[dir], (int)nd->a.conv.ph, (int)nd->a.conv.pw, (int)nd->a.conv.sh,
						       (int)nd->a.conv.sw, (int)nd->a.conv.dh, (int)nd->a.conv.dw,
						       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
		DNN(c, cudnnSetConvolutionGroupCount(cv->c[dir], g));
		DNN(c, cudnnSetConvolutionMathType(cv->c[dir], tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
	}
	int on, oc, oh, ow;
	DNN(c, cudnnGetConvolution2dForwardOutputDim(cv->c[CONV_FWD], cv->x, cv->w, &on, &oc, &oh, &ow));
	if (c->failed)
		return -1;
	if (oc != co || (int64_t)oc * oh * ow != numel(&nd->out)) {
		failf(c, "%s: cuDNN computes an output of (%d, %d, %d), the plan (%lld elements)", nd->path, oc, oh, ow,
		      (long long)numel(&nd->out));
		return -1;
	}
	DNN(c, cudnnSetTensor4dDescriptor(cv->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));
	/* each direction: the fastest usable result, its descriptor set to the
	 * math type it was timed with (cuDNN may pair an algorithm with another
	 * math type than the descriptor asked for); none: a default algorithm.
	 * Find times each algorithm under the descriptor's math type and under
	 * CUDNN_DEFAULT_MATH, so up to twice the algorithm count come back: with
	 * room for fewer, the FMA results that TF32 off needs could be cut off
	 * behind faster TF32 ones. */
	enum { K = 2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT };
	_Static_assert(K >= 2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT && K >= 2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
		       "room for every Find result of each direction");
	int got = 0;
	cudnnConvolutionFwdAlgoPerf_t fp[K];
	DNN(c, cudnnFindConvolutionForwardAlgorithm(gp->dnn, cv->x, cv->w, cv->c[CONV_FWD], cv->y, K, &got, fp));
	cv->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
	for (int k = 0; k < got; k++)
		if (usable(fp[k].status, fp[k].memory, fp[k].mathType, tf32)) {
			cv->fwd = fp[k].algo;
			DNN(c, cudnnSetConvolutionMathType(cv->c[CONV_FWD], fp[k].mathType));
			break;
		}
	cudnnConvolutionBwdDataAlgoPerf_t dp[K];
	got = 0;
	DNN(c, cudnnFindConvolutionBackwardDataAlgorithm(gp->dnn, cv->w, cv->y, cv->c[CONV_BWD_DATA], cv->x, K, &got, dp));
	cv->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
	for (int k = 0; k < got; k++)
		if (usable(dp[k].status, dp[k].memory, dp[k].mathType, tf32)) {
			cv->bwd_data = dp[k].algo;
			DNN(c, cudnnSetConvolutionMathType(cv->c[CONV_BWD_DATA], dp[k].mathType));
			break;
		}
	cudnnConvolutionBwdFilterAlgoPerf_t wp[K];
	got = 0;
	DNN(c, cudnnFindConvolutionBackwardFilterAlgorithm(gp->dnn, cv->x, cv->y, cv->c[CONV_BWD_FILTER], cv->w, K, &got, wp));
	cv->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
	for (int k = 0; k < got; k++)
		if (usable(wp[k].status, wp[k].memory, wp[k].mathType, tf32)) {
			cv->bwd_filter = wp[k].algo;
			DNN(c, cudnnSetConvolutionMathType(cv->c[CONV_BWD_FILTER], wp[k].mathType));
			break;
		}
	size_t a = 0, b = 0, d = 0;
	DNN(c, cudnnGetConvolutionForwardWorkspaceSize(gp->dnn, cv->x, cv->w, cv->c[CONV_FWD], cv->y, cv->fwd, &a));
	DNN(c, cudnnGetConvolutionBackwardDataWorkspaceSize(gp->dnn, cv->w, cv->y, cv->c[CONV_BWD_DATA], cv->x, cv->bwd_data, &b));
	DNN(c, cudnnGetConvolutionBackwardFilterWorkspaceSize(gp->dnn, cv->x, cv->y, cv->c[CONV_BWD_FILTER], cv->w, cv->bwd_filter,
							      &d));
	size_t m = a > b ? a : b;
	m = m > d ? m : d;
	if (m > *ws_need)
		*ws_need = m;
	cv->ready = !c->failed;
	return c->failed ? -1 : 0;
}

static int cu_prepare(struct exec *e, char *err, size_t errlen)
{
	const struct plan *p = e->p;
	struct cuda_state *c = calloc(1, sizeof *c);
	if (!c)
		return util_fail(err, errlen, "out of memory");
	e->be_state = c;
	c->relu_done = -1;
	c->ngpu = p->ndevices;
	for (int d = 0; d < c->ngpu && !c->failed; d++) {
		struct gpu *gp = &c->g[d];
		CU(c, cudaSetDevice(device_base + d));
		CU(c, cudaStreamCreateWithFlags(&gp->stream, cudaStreamNonBlocking));
		CU(c, cudaEventCreateWithFlags(&gp->ev, cudaEventDisableTiming));
		BLAS(c, cublasCreate(&gp->blas));
		BLAS(c, cublasSetStream(gp->blas, gp->stream));
		/* float32 matmuls stay float32 (torch.backends.cuda.matmul.allow_tf32 = False) */
		BLAS(c, cublasSetMathMode(gp->blas, CUBLAS_DEFAULT_MATH));
		/* a workspace of our own, so cuBLAS allocates nothing inside a captured step */
		CU(c, cudaMalloc(&gp->blas_ws, BLAS_WS));
		if (gp->blas_ws)
			BLAS(c, cublasSetWorkspace(gp->blas, gp->blas_ws, BLAS_WS));
		DNN(c, cudnnCreate(&gp->dnn));
		DNN(c, cudnnSetStream(gp->dnn, gp->stream));
		if (d > 0)
			CU(c, cudaMalloc((void **)&gp->hits, sizeof *gp->hits));
		CU(c, cudaMalloc((void **)&gp->loss_parts, (KC_LOSS_PARTS + 1) * sizeof *gp->loss_parts));
		const float *lw = p->train.npos_weights ? p->train.pos_weights : p->train.class_weights;
		if (lw) {
			size_t bytes = (size_t)(p->train.npos_weights ? p->train.npos_weights : p->train.nclass_weights) * sizeof *gp->loss_weights;
			CU(c, cudaMalloc((void **)&gp->loss_weights, bytes));
			if (gp->loss_weights)
				CU(c, cudaMemcpy(gp->loss_weights, lw, bytes, cudaMemcpyHostToDevice));
		}
		/* a rank's GPUs read each other's memory (the loss reads targets
		 * gathered on the first, every optimizer its step words) */
		for (int o = 0; o < c->ngpu && !c->failed; o++) {
			int ok = 0;
			if (o == d)
				continue;
			CU(c, cudaDeviceCanAccessPeer(&ok, device_base + d, device_base + o));
			if (!ok && !c->failed) { /* the same every time: the placement cannot be met */
				util_fail(err, errlen, "GPUs %d and %d cannot access each other's memory (no peer access), which a rank "
					  "spanning them needs; place the model on one GPU per rank or train with --cpus",
					  device_base + d, device_base + o);
				return EXEC_REFUSED;
			}
			cudaError_t r = cudaDeviceEnablePeerAccess(device_base + o, 0);
			if (r == cudaErrorPeerAccessAlreadyEnabled)
				cudaGetLastError();
			else
				CU(c, r);
		}
	}
	CU(c, cudaSetDevice(device_base));
	CU(c, cudaMalloc((void **)&c->dev, sizeof *c->dev));
	if (c->dev)
		CU(c, cudaMemsetAsync(c->dev, 0, sizeof *c->dev, c->g[0].stream));
	c->conv = calloc((size_t)p->nnodes * EXEC_MAX_SIZES, sizeof *c->conv);
	if (!c->conv)
		return util_fail(err, errlen, "out of memory");
	size_t ws[PLAN_MAX_DEVICES] = { 0 };
	for (int i = 0; i < p->nnodes && !c->failed; i++) {
		if (p->nodes[i].op != OP_CONV2D)
			continue;
		int d = p->nodes[i].device;
		struct gpu *gp = on(c, d);
		for (int s = 0; s < e->nsizes && !c->failed; s++)
			if (size_slot(e, e->sizes[s]) == s) /* each size once */
				conv_prepare(e, gp, &c->conv[i * EXEC_MAX_SIZES + s], &p->nodes[i], e->sizes[s], &ws[d]);
	}
	for (int d = 0; d < c->ngpu && !c->failed; d++)
		if (ws[d] > 0) {
			on(c, d);
			CU(c, cudaMalloc(&c->g[d].ws, ws[d]));
			c->g[d].ws_bytes = ws[d];
		}
	for (int d = c->ngpu - 1; d >= 0; d--) {
		CU(c, cudaSetDevice(device_base + d));
		CU(c, cudaDeviceSynchronize());
	}
	if (c->failed)
		return util_fail(err, errlen, "%s", c->err);
	return 0;
}

static void cu_release(struct exec *e)
{
	struct cuda_state *c = st(e);
	if (!c)
		return;
	for (int i = 0; c->conv && i < e->p->nnodes * EXEC_MAX_SIZES; i++) {
		struct conv *cv = &c->conv[i];
		if (cv->x)
			cudnnDestroyTensorDescriptor(cv->x);
		if (cv->y)
			cudnnDestroyTensorDescriptor(cv->y);
		if (cv->w)
			cudnnDestroyFilterDescriptor(cv->w);
		for (int dir = 0; dir < 3; dir++)
			if (cv->c[dir])
				cudnnDestroyConvolutionDescriptor(cv->c[dir]);
	}
	free(c->conv);
	if (c->dev)
		cudaFree(c->dev);
	for (int d = 0; d < c->ngpu; d++) {
		struct gpu *gp = &c->g[d];
		cudaSetDevice(device_base + d);
		if (gp->ws)
			cudaFree(gp->ws);
		if (gp->dnn)
			cudnnDestroy(gp->dnn);
		if (gp->blas)
			cublasDestroy(gp->blas);
		if (gp->blas_ws)
			cudaFree(gp->blas_ws);
		if (gp->hits)
			cudaFree(gp->hits);
		if (gp->loss_parts)
			cudaFree(gp->loss_parts);
		if (gp->loss_weights)
			cudaFree(gp->loss_weights);
		if (gp->ev)
			cudaEventDestroy(gp->ev);
		if (gp->stream)
			cudaStreamDestroy(gp->stream);
	}
	cudaSetDevice(device_base);
	free(c);
	e->be_state = NULL;
}

static struct conv *conv_at(struct exec *e, int i, int64_t n)
{
	int s = size_slot(e, n);
	struct conv *cv = s >= 0 ? &st(e)->conv[i * EXEC_MAX_SIZES + s] : NULL;
	if (!cv || !cv->ready) {
		failf(st(e), "%s: no convolution prepared for a batch of %lld", e->p->nodes[i].path, (long long)n);
		return NULL;
	}
	return cv;
}

/* A kernel that failed to launch is named by its layer and direction. */
static void check_launch(struct cuda_state *c, const struct node *nd, const char *dir)
{
	cudaError_t r = cudaPeekAtLastError();
	if (r != cudaSuccess && !c->failed) {
		cudaGetLastError();
		failf(c, "%s (%s), %s: a kernel launch failed: %s", nd->path, nd->what, dir, cudaGetErrorString(r));
	}
}

/* Node i's bias and the ReLU right after it in one kernel: the ReLU reads
 * only i's output, on the same GPU (TRAINC_CUDA_FUSE=0: apart). */
static bool bias_relu_next(const struct plan *p, int i)
{
	static int fuse = -1;
	if (fuse < 0) {
		const char *v = getenv("TRAINC_CUDA_FUSE");
		fuse = !v || strcmp(v, "0") != 0;
	}
	const struct node *r = i + 1 < p->nnodes ? &p->nodes[i + 1] : NULL;
	return fuse && r && r->op == OP_RELU && r->in == i && r->device == p->nodes[i].device;
}

static void cu_forward(struct exec *e, int i, int64_t n, bool train)
{
	struct cuda_state *c = st(e);
	/* a fused ReLU counts only for the very next call: any other call in
	 * between (a new forward from the start) computes it again */
	int relu_done = c->relu_done;
	c->relu_done = -1;
	if (c->failed)
		return;
	const struct plan *p = e->p;
	const struct node *nd = &p->nodes[i];
	struct gpu *gp = on(c, nd->device);
	cudaStream_t s = gp->stream;
	float *y = exec_output(e, i, train);
	const float *x = nd->in >= 0 ? exec_output(e, nd->in, train) : NULL;
	int64_t out_n = numel(&nd->out) * n;
	char *save = exec_act(e, i) + p->mem[i].save_off;
	const float one = 1.0f, zero = 0.0f;
	switch (nd->op) {
	case OP_INPUT: case OP_FLATTEN: break;
	case OP_TRANSFER: /* from the input's GPU to this one, after the input is written */
		follow(c, p->nodes[nd->in].device, nd->device);
		if (y != x)
			CU(c, cudaMemcpyAsync(y, x, (size_t)out_n * 4, cudaMemcpyDeviceToDevice, s));
		break;
	case OP_LINEAR: {
		int k = (int)nd->a.linear.in, m = (int)nd->a.linear.out;
		int64_t rows = out_n / m;
		/* row-major y (rows, m) = x (rows, k) wᵀ: column-major yᵀ = w_cmᵀ x_cm */
		BLAS(c, cublasSgemm(gp->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, (int)rows, k, &one, exec_param_ptr(e, nd->param0), k, x, k,
				    &zero, y, m));
		if (nd->a.linear.bias && bias_relu_next(p, i)) {
			kc_bias_relu(s, y, exec_param_ptr(e, nd->param0 + 1), exec_output(e, i + 1, train), out_n, m, 1);
			c->relu_done = i + 1;
		} else if (nd->a.linear.bias) {
			kc_bias_add(s, y, exec_param_ptr(e, nd->param0 + 1), rows, m);
		}
		break;
	}
	case OP_CONV2D: {
		struct conv *cv = conv_at(e, i, n);
		if (!cv)
			break;
		DNN(c, cudnnConvolutionForward(gp->dnn, &one, cv->x, x, cv->w, exec_param_ptr(e, nd->param0), cv->c[CONV_FWD], cv->fwd, gp->ws,
					       gp->ws_bytes, &zero, cv->y, y));
		int64_t hw = numel(&nd->out) / nd->a.conv.cout;
		if (nd->a.conv.bias && bias_relu_next(p, i)) {
			kc_bias_relu(s, y, exec_param_ptr(e, nd->param0 + 1), exec_output(e, i + 1, train), out_n, (int)nd->a.conv.cout, hw);
			c->relu_done = i + 1;
		} else if (nd->a.conv.bias) {
			kc_channel_bias_add(s, y, exec_param_ptr(e, nd->param0 + 1), (int)n, (int)nd->a.conv.cout, hw);
		}
		break;
	}
	case OP_MAXPOOL2D:
		kc_maxpool2d_fwd(s, exec_pool_desc(p, nd, n), x, y, train ? (int32_t *)(void *)save : (int32_t *)(void *)exec_scratch(e, i));
		break;
	case OP_AVGPOOL2D: kc_avgpool2d_fwd(s, exec_pool_desc(p, nd, n), x, y); break;
	case OP_ADAPTIVE_AVGPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		kc_adaptive_avgpool2d_fwd(s, x, y, (int)n, (int)ch, (int)h, (int)w, (int)nd->a.apool.oh,
					  (int)nd->a.apool.ow);
		break;
	}
	case OP_ADAPTIVE_MAXPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		kc_adaptive_maxpool2d_fwd(s, x, y, train ? (int32_t *)(void *)save : (int32_t *)(void *)exec_scratch(e, i), (int)n,
					  (int)ch, (int)h, (int)w, (int)nd->a.apool.oh, (int)nd->a.apool.ow);
		break;
	}
	case OP_ZEROPAD2D: kc_zeropad2d_fwd(s, exec_pad_desc(p, nd, n), x, y); break;
	case OP_BATCHNORM1D: case OP_BATCHNORM2D: {
		int ch = (int)nd->a.bn.c;
		int64_t hw = numel(&nd->out) / ch;
		float *g = nd->a.bn.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL, *b = nd->a.bn.affine ? exec_param_ptr(e, nd->param0 + 1) : NULL;
		int rs = nd->a.bn.affine ? 2 : 0;
		float *rm = nd->a.bn.track ? exec_param_ptr(e, nd->param0 + rs) : NULL;
		float *rv = nd->a.bn.track ? exec_param_ptr(e, nd->param0 + rs + 1) : NULL;
		if (train || !nd->a.bn.track) {
			float *sm = train ? (float *)(void *)save : (float *)(void *)exec_scratch(e, i);
			int64_t *tracked = train && nd->a.bn.track ? (int64_t *)(void *)exec_param_ptr(e, nd->param0 + rs + 2) : NULL;
			kc_batchnorm2d_fwd_train(s, x, g, b, y, train ? rm : NULL, train ? rv : NULL, sm, sm + ch, tracked, (int)n, ch, hw,
						 (float)nd->a.bn.eps, (float)nd->a.bn.momentum);
		} else {
			kc_batchnorm2d_fwd_eval(s, x, g, b, rm, rv, y, (int)n, ch, hw, (float)nd->a.bn.eps);
		}
		break;
	}
	case OP_LAYERNORM: {
		int64_t row = exec_ln_row(nd), rows = out_n / row;
		float *sm = train ? (float *)(void *)save : (float *)(void *)exec_scratch(e, i);
		kc_layernorm_fwd(s, x, nd->a.ln.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL,
				 nd->a.ln.affine ? exec_param_ptr(e, nd->param0 + 1) : NULL, y, sm, sm + rows, rows, (int)row,
				 (float)nd->a.ln.eps);
		break;
	}
	case OP_GROUPNORM: {
		int ch = (int)nd->a.gn.c, groups = (int)nd->a.gn.groups;
		float *sm = train ? (float *)(void *)save : (float *)(void *)exec_scratch(e, i);
		kc_groupnorm_fwd(s, x, nd->a.gn.affine ? exec_param_ptr(e, nd->param0 + 0) : NULL,
				 nd->a.gn.affine ? exec_param_ptr(e, nd->param0 + 1) : NULL, y, sm, sm + n * groups, (int)n, groups,
				 ch / groups, (int)(numel(&nd->out) / ch), (float)nd->a.gn.eps);
		break;
	}
	case OP_DROPOUT:
		if (train) {
			/* the CPU's stream (layer, micro-batch, rank, step), so masks match */
			struct rng r = rng_stream(exec_dropout_seed(e, i), RNG_DROPOUT, e->rank, (uint32_t)e->step);
			int64_t inner = exec_dropout_inner(nd);
			if (c->step)
				kc_dropout_fwd_at(s, x, y, (uint8_t *)save, out_n, inner, (float)nd->a.drop.p, r, c->step);
			else
				kc_dropout_fwd(s, x, y, (uint8_t *)save, out_n, inner, (float)nd->a.drop.p, r);
		} else if (y != x) {
			CU(c, cudaMemcpyAsync(y, x, (size_t)out_n * 4, cudaMemcpyDeviceToDevice, s));
		}
		break;
	case OP_RELU:
		if (relu_done != i)
			kc_relu_fwd(s, x, y, out_n);
		break;
	case OP_GELU: kc_gelu_fwd(s, x, y, out_n, nd->a.gelu.tanh ? KERN_GELU_TANH : KERN_GELU_NONE); break;
	case OP_TANH: kc_tanh_fwd(s, x, y, out_n); break;
	case OP_SIGMOID: kc_sigmoid_fwd(s, x, y, out_n); break;
	OP_ACT_CASES: {
		float a, b;
		enum kern_act k = exec_act_kind(nd, &a, &b);
		kc_act_fwd(s, k, x, y, out_n, a, b);
		break;
	}
	case OP_PRELU: {
		int ch;
		int64_t inner;
		exec_prelu_dims(p, nd, &ch, &inner);
		kc_prelu_fwd(s, x, exec_param_ptr(e, nd->param0), y, (int)n, ch, inner);
		break;
	}
	case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
		int64_t outer, inner;
		int dim;
		exec_softmax_dims(nd, n, &outer, &dim, &inner);
		if (nd->op == OP_SOFTMAX)
			kc_softmax_fwd(s, x, y, outer, dim, inner);
		else
			kc_log_softmax_fwd(s, x, y, outer, dim, inner);
		break;
	}
	case OP_ADD: kc_add(s, x, exec_output(e, nd->in2, train), y, out_n); break;
	case OP_EMBEDDING:
		kc_embedding_fwd(s, (const int32_t *)(const void *)x, exec_param_ptr(e, nd->param0), y, out_n / nd->a.emb.dim,
				 (int)nd->a.emb.num, (int)nd->a.emb.dim, &c->dev->bad_id);
		break;
	case OP__COUNT: break;
	}
	check_launch(c, nd, "forward");
}

/* The second producer of node j's gradient adds it in, on j's GPU. */
static void finish_dx(struct exec *e, int j, float *dx, bool accumulate, int64_t count)
{
	if (accumulate && dx) {
		struct gpu *gp = on(st(e), e->p->nodes[j].device);
		kc_accumulate(gp->stream, exec_dx_home(e, j), dx, count);
	}
}

static void cu_backward(struct exec *e, int i, int64_t n)
{
	struct cuda_state *c = st(e);
	const struct plan *p = e->p;
	const struct node *nd = &p->nodes[i];
	if (c->failed || nd->op == OP_FLATTEN)
		return;
	struct gpu *gp = on(c, nd->device);
	cudaStream_t s = gp->stream;
	const float *dy = (const float *)(void *)(exec_act(e, i) + p->mem[i].grad_off);
	const float *y = exec_output(e, i, true);
	const float *x = nd->in >= 0 ? exec_output(e, nd->in, true) : NULL;
	char *save = exec_act(e, i) + p->mem[i].save_off;
	int64_t out_n = numel(&nd->out) * n;
	int64_t in_n = nd->in >= 0 ? numel(&p->nodes[nd->in].out) * n : 0;
	bool acc;
	float *dx = exec_dx_target(e, nd->in, &acc);
	const float one = 1.0f, zero = 0.0f;
	switch (nd->op) {
	case OP_LINEAR: {
		int k = (int)nd->a.linear.in, m = (int)nd->a.linear.out;
		int64_t rows = out_n / m;
		const float *w = exec_param_ptr(e, nd->param0);
		float *dw = exec_grad_ptr(e, nd->param0);
		if (dx) /* dx (rows, k) = dy w: column-major dxᵀ = w_cm dy_cm */
			BLAS(c, cublasSgemm(gp->blas, CUBLAS_OP_N, CUBLAS_OP_N, k, (int)rows, m, &one, w, k, dy, m, &zero, dx, k));
		if (dw) /* dw (m, k) += dyᵀ x: column-major dwᵀ += x_cm dy_cmᵀ */
			BLAS(c, cublasSgemm(gp->blas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, (int)rows, &one, x, k, dy, m, &one, dw, k));
		if (nd->a.linear.bias && exec_grad_ptr(e, nd->param0 + 1))
			kc_bias_grad(s, dy, exec_grad_ptr(e, nd->param0 + 1), rows, m);
		break;
	}
	case OP_CONV2D: {
		struct conv *cv = conv_at(e, i, n);
		if (!cv)
			break;
		float *dw = exec_grad_ptr(e, nd->param0);
		if (dx)
			DNN(c, cudnnConvolutionBackwardData(gp->dnn, &one, cv->w, exec_param_ptr(e, nd->param0), cv->y, dy, cv->c[CONV_BWD_DATA], cv->bwd_data,
							    gp->ws, gp->ws_bytes, &zero, cv->x, dx));
		if (dw)
			DNN(c, cudnnConvolutionBackwardFilter(gp->dnn, &one, cv->x, x, cv->y, dy, cv->c[CONV_BWD_FILTER], cv->bwd_filter, gp->ws, gp->ws_bytes,
							      &one, cv->w, dw));
		if (nd->a.conv.bias && exec_grad_ptr(e, nd->param0 + 1))
			kc_channel_bias_grad(s, dy, exec_grad_ptr(e, nd->param0 + 1), (int)n, (int)nd->a.conv.cout,
					     numel(&nd->out) / nd->a.conv.cout);
		break;
	}
	case OP_MAXPOOL2D: if (dx) kc_maxpool2d_bwd(s, exec_pool_desc(p, nd, n), (const int32_t *)(const void *)save, dy, dx); break;
	case OP_AVGPOOL2D: if (dx) kc_avgpool2d_bwd(s, exec_pool_desc(p, nd, n), dy, dx); break;
	case OP_ADAPTIVE_AVGPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		if (dx)
			kc_adaptive_avgpool2d_bwd(s, dy, dx, (int)n, (int)ch, (int)h, (int)w, (int)nd->a.apool.oh,
						  (int)nd->a.apool.ow);
		break;
	}
	case OP_ADAPTIVE_MAXPOOL2D: {
		int64_t ch, h, w;
		exec_apool_in(p, nd, &ch, &h, &w);
		if (dx)
			kc_adaptive_maxpool2d_bwd(s, (const int32_t *)(const void *)save, dy, dx, (int)n, (int)ch, (int)h, (int)w,
						  (int)nd->a.apool.oh, (int)nd->a.apool.ow);
		break;
	}
	case OP_ZEROPAD2D: if (dx) kc_zeropad2d_bwd(s, exec_pad_desc(p, nd, n), dy, dx); break;
	case OP_BATCHNORM1D: case OP_BATCHNORM2D: {
		int ch = (int)nd->a.bn.c;
		const float *sm = (const float *)(const void *)save;
		kc_batchnorm2d_bwd(s, x, nd->a.bn.affine ? exec_param_ptr(e, nd->param0) : NULL, sm, sm + ch, dy, dx,
				   nd->a.bn.affine ? exec_grad_ptr(e, nd->param0) : NULL, nd->a.bn.affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL,
				   (int)n, ch, numel(&nd->out) / ch);
		break;
	}
	case OP_LAYERNORM: {
		int64_t row = exec_ln_row(nd), rows = out_n / row;
		const float *sm = (const float *)(const void *)save;
		kc_layernorm_bwd(s, x, nd->a.ln.affine ? exec_param_ptr(e, nd->param0) : NULL, sm, sm + rows, dy, dx,
				 nd->a.ln.affine ? exec_grad_ptr(e, nd->param0) : NULL, nd->a.ln.affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL,
				 rows, (int)row);
		break;
	}
	case OP_GROUPNORM: {
		int ch = (int)nd->a.gn.c, groups = (int)nd->a.gn.groups;
		const float *sm = (const float *)(const void *)save;
		kc_groupnorm_bwd(s, x, nd->a.gn.affine ? exec_param_ptr(e, nd->param0) : NULL, sm, sm + n * groups, dy, dx,
				 nd->a.gn.affine ? exec_grad_ptr(e, nd->param0) : NULL, nd->a.gn.affine ? exec_grad_ptr(e, nd->param0 + 1) : NULL,
				 (int)n, groups, ch / groups, (int)(numel(&nd->out) / ch));
		break;
	}
	case OP_DROPOUT: if (dx) kc_dropout_bwd(s, dy, (const uint8_t *)save, dx, out_n, (float)nd->a.drop.p); break;
	case OP_RELU: if (dx) kc_relu_bwd(s, y, dy, dx, out_n); break;
	case OP_GELU: if (dx) kc_gelu_bwd(s, x, dy, dx, out_n, nd->a.gelu.tanh ? KERN_GELU_TANH : KERN_GELU_NONE); break;
	case OP_TANH: if (dx) kc_tanh_bwd(s, y, dy, dx, out_n); break;
	case OP_SIGMOID: if (dx) kc_sigmoid_bwd(s, y, dy, dx, out_n); break;
	OP_ACT_CASES:
		if (dx) {
			float a, b;
			enum kern_act k = exec_act_kind(nd, &a, &b);
			kc_act_bwd(s, k, x, dy, dx, out_n, a, b);
		}
		break;
	case OP_PRELU: {
		int ch;
		int64_t inner;
		exec_prelu_dims(p, nd, &ch, &inner);
		kc_prelu_bwd(s, x, exec_param_ptr(e, nd->param0), dy, dx, exec_grad_ptr(e, nd->param0), (int)n, ch, inner);
		break;
	}
	case OP_SOFTMAX: case OP_LOG_SOFTMAX: {
		int64_t outer, inner;
		int dim;
		exec_softmax_dims(nd, n, &outer, &dim, &inner);
		if (dx && nd->op == OP_SOFTMAX)
			kc_softmax_bwd(s, y, dy, dx, outer, dim, inner);
		else if (dx)
			kc_log_softmax_bwd(s, y, dy, dx, outer, dim, inner);
		break;
	}
	case OP_TRANSFER: /* back to the input's GPU, on its stream, after dy is written */
		if (dx) {
			int din = p->nodes[nd->in].device;
			follow(c, nd->device, din);
			CU(c, cudaMemcpyAsync(dx, dy, (size_t)out_n * 4, cudaMemcpyDeviceToDevice, on(c, din)->stream));
		}
		break;
	case OP_ADD: {
		if (dx)
			CU(c, cudaMemcpyAsync(dx, dy, (size_t)out_n * 4, cudaMemcpyDeviceToDevice, s));
		finish_dx(e, nd->in, dx, acc, out_n);
		bool acc2;
		float *dx2 = exec_dx_target(e, nd->in2, &acc2);
		if (dx2)
			CU(c, cudaMemcpyAsync(dx2, dy, (size_t)out_n * 4, cudaMemcpyDeviceToDevice, s));
		finish_dx(e, nd->in2, dx2, acc2, out_n);
		check_launch(c, nd, "backward");
		return;
	}
	case OP_EMBEDDING: {
		/* the kernel runs on the layer's GPU, whose memory holds the ids,
		 * dy and the scratch it sorts the ids in.  FSDP keeps a rank's
		 * units, dw among them, on its first GPU: the kernel reads and
		 * writes dw there over peer access (plain loads and stores, as it
		 * adds without atomics), after that GPU's earlier work on dw and
		 * before its later work */
		float *dw = exec_grad_ptr(e, nd->param0);
		int home = e->fsdp ? 0 : nd->device;
		if (!dw)
			break;
		if (home != nd->device) {
			on(c, home);
			follow(c, home, nd->device);
			on(c, nd->device);
		}
		kc_embedding_bwd(s, (const int32_t *)(const void *)x, dy, dw, out_n / nd->a.emb.dim, (int)nd->a.emb.num,
				 (int)nd->a.emb.dim, (int)nd->a.emb.padding_idx, exec_scratch(e, i), p->dev[nd->device].scratch_bytes);
		follow(c, nd->device, home);
		break;
	}
	case OP_INPUT: case OP_FLATTEN: case OP__COUNT: break;
	}
	finish_dx(e, nd->in, dx, acc, in_n);
	check_launch(c, nd, "backward");
}

/* *correct (on the first GPU) += the argmax hits of the output on GPU d.
 * The count adds with atomics, and over PCIe a peer's memory takes none
 * (cudaDevP2PAttrNativeAtomicSupported): another GPU counts into a word of
 * its own, which the first GPU then adds in.  Hits are whole numbers, so
 * the sum is the same either way.  Leaves GPU d current. */
static void count_hits(struct cuda_state *c, int d, const float *out, const void *y, int n, int per, double *correct)
{
	if (d == 0) {
		kc_argmax_correct(c->g[0].stream, out, y, n, per, correct);
		return;
	}
	struct gpu *gp = &c->g[d];
	CU(c, cudaMemsetAsync(gp->hits, 0, sizeof *gp->hits, gp->stream));
	kc_argmax_correct(gp->stream, out, y, n, per, gp->hits);
	follow(c, d, 0);
	on(c, 0);
	kc_f64_axpy(c->g[0].stream, correct, gp->hits, 1.0, true);
	follow(c, 0, d); /* the next count on GPU d zeroes the word after this read */
	on(c, d);
}

void cuda_loss(struct exec *e, const void *y, int n, bool train, double *loss, double weight, bool add, double *correct)
{
	struct cuda_state *c = st(e);
	if (c->failed)
		return;
	const struct plan *p = e->p;
	int last = p->nnodes - 1;
	const float *out = exec_output(e, last, train);
	float *dout = train ? (float *)(void *)(exec_act(e, last) + p->mem[last].grad_off) : NULL;
	int64_t per = numel(&p->nodes[last].out);
	enum kern_reduction red = exec_reduction(p, train);
	int d = p->nodes[last].device;
	struct gpu *gp = on(c, d); /* the output's GPU */
	cudaStream_t s = gp->stream;
	switch (p->train.loss) {
	case LOSS_MSE: case LOSS_L1: case LOSS_SMOOTH_L1: case LOSS_HUBER: case LOSS_BCE: case LOSS_BCE_LOGITS: case LOSS_KL_DIV: {
		float rows = exec_batchmean(p, per);
		kc_regression(s, exec_regression(p), (float)p->train.loss_param, gp->loss_weights, p->train.npos_weights, out, y, dout,
			      per * n, red, e->loss_scale * rows, loss, weight * rows, add, gp->loss_parts);
		break;
	}
	case LOSS_NLL:
		kc_nll(s, out, y, dout, n, (int)per, p->train.ignore_index, gp->loss_weights, red, e->loss_scale, loss, weight, add,
		       &c->dev->bad_target, gp->loss_parts);
		if (correct)
			count_hits(c, d, out, y, n, (int)per, correct);
		break;
	case LOSS_CROSS_ENTROPY:
		kc_cross_entropy(s, out, y, dout, n, (int)per, p->train.ignore_index, gp->loss_weights,
				 p->train.class_weights ? loss_class_weight_sum(p->train.class_weights, (int)per) : 0,
				 (float)p->train.label_smoothing, red, e->loss_scale, loss, weight, add, &c->dev->bad_target, gp->loss_parts);
		if (correct)
			count_hits(c, d, out, y, n, (int)per, correct);
		break;
	}
}

/* The table's loss: synchronous, for callers that want host numbers. */
static int cu_loss(struct exec *e, const void *y, int n, bool train, double *loss, long *correct)
{
	struct cuda_state *c = st(e);
	struct cuda_dev *d = c->dev;
	CU(c, cudaSetDevice(device_base));
	CU(c, cudaMemsetAsync(&d->correct, 0, sizeof d->correct, c->g[0].stream));
	follow(c, 0, e->p->nodes[e->p->nnodes - 1].device);
	cuda_loss(e, y, n, train, &d->loss, 1.0, false, &d->correct);
	cuda_join(e);
	struct cuda_dev h;
	CU(c, cudaSetDevice(device_base));
	CU(c, cudaStreamSynchronize(c->g[0].stream));
	CU(c, cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
	if (c->failed) {
		*loss = NAN;
		*correct = 0;
		return 0;
	}
	*loss = h.loss;
	*correct = (long)h.correct;
	if (h.bad_target) {
		CU(c, cudaMemsetAsync(&d->bad_target, 0, sizeof d->bad_target, c->g[0].stream));
		CU(c, cudaStreamSynchronize(c->g[0].stream));
		return -1;
	}
	return 0;
}

static void cu_sync(struct exec *e)
{
	struct cuda_state *c = st(e);
	for (int d = 0; d < c->ngpu; d++)
		CU(c, cudaStreamSynchronize(c->g[d].stream));
	CU(c, cudaSetDevice(device_base));
}

/* tag: backend table; keep in step with struct backend_ops */
const struct backend_ops backend_cuda = {
	.name = "cuda",
	.alloc = cu_alloc,
	.free = cu_free,
	.to_host = cu_to_host,
	.from_host = cu_from_host,
	.copy = cu_copy,
	.prepare = cu_prepare,
	.release = cu_release,
	.forward = cu_forward,
	.backward = cu_backward,
	.loss = cu_loss,
	.sync = cu_sync,
	.use_device = cu_use_device,
};
