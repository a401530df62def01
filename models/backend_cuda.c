/* models/backend_cuda.c: the GPU's backend table (models/backend.h), on
 * the device current on the thread that first asks for it: one cuBLAS
 * handle (and, in a build with it, one cuDNN handle) on one non-blocking
 * stream, made once per process, on which every entry queues its work
 * (the kernels of models/kernels_cuda.cu, cuBLAS's GEMMs, cuDNN's
 * convolutions). Stream order is the only synchronisation between
 * layers; upload, download and finish wait for it. Input batches are
 * copied on a second stream (copy_start), ordered by events.
 *
 * Layer entries return nothing (models/backend.h): the first failure of a
 * launch or a cuBLAS call is kept and returned by the next finish, upload
 * or download, which clear it. cuBLAS keeps its default math mode: no
 * TF32, so GEMMs stay within float rounding of the host's.
 *
 * GEMMs are row-major (models/model_internal.h) through one helper over
 * column-major cuBLAS. A convolution is cuDNN's (models/conv_cudnn.c) or,
 * as the reference, works on the whole batch at once: one im2col launch,
 * one strided-batched GEMM (the weights shared by stride 0). Not here:
 * more than one device per process, and streams given by the caller.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include "models/backend.h"
#include "models/conv_cudnn.h"
#include "models/kernels_cuda.h"
#include "models/model.h"

const model__backend_t *model__cuda_open(const char **why);

static cudaStream_t stream;
static cublasHandle_t blas;
static const char *open_why; /* NULL once open succeeded */
static char open_why_text[160];
static pthread_once_t open_once = PTHREAD_ONCE_INIT;

/* ---- errors ---- */

static atomic_int first_error = MODEL_OK;
static atomic_flag reported = ATOMIC_FLAG_INIT;

/* A failure, kept for the next call that returns a status (cuDNN's
 * paths say theirs: models/conv_cudnn.c). CUDA's last error is cleared:
 * one that a failed call, cuBLAS's or cuDNN's kernels included, left
 * would be the next launch's answer, and said of that kernel. */
static void note_error(void)
{
    (void)cudaGetLastError();
    int none = MODEL_OK;
    atomic_compare_exchange_strong(&first_error, &none, MODEL_ERR_CUDA);
}

/* The process's first failure also goes to stderr, naming the call and
 * CUDA's or cuBLAS's text, as conv_cudnn.c's do: a status alone does not
 * say what broke on a GPU node's first run. call: the call's text, of
 * which the name is shown. */
static void note_failure(const char *call, int line, const char *why)
{
    note_error();
    if (!atomic_flag_test_and_set(&reported))
        fprintf(stderr, "models: CUDA: %.*s (models/backend_cuda.c:%d): %s\n",
                (int)strcspn(call, "( "), call, line, why);
}

static void note_cuda_at(cudaError_t err, const char *call, int line)
{
    if (err != cudaSuccess) note_failure(call, line, cudaGetErrorString(err));
}

static void note_blas_at(cublasStatus_t st, const char *call, int line)
{
    if (st != CUBLAS_STATUS_SUCCESS)
        note_failure(call, line, cublasGetStatusString(st));
}

#define note_cuda(call) note_cuda_at((call), #call, __LINE__)
#define note_blas(call) note_blas_at((call), #call, __LINE__)

/* The first failure since the last call, or this call's own (err, of
 * the calls of the function named). */
static int take_error_at(cudaError_t err, const char *func, int line)
{
    note_cuda_at(err, func, line);
    return atomic_exchange(&first_error, MODEL_OK);
}

#define take_error(err) take_error_at((err), __func__, __LINE__)

/* ---- memory ---- */

static int cuda_alloc(size_t bytes, void **p)
{
    cudaError_t err = cudaMalloc(p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        return err == cudaErrorMemoryAllocation ? MODEL_ERR_NOMEM
                                                : MODEL_ERR_CUDA;
    }
    err = cudaMemsetAsync(*p, 0, bytes, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        (void)cudaFree(*p);
        *p = NULL;
        return MODEL_ERR_CUDA;
    }
    return MODEL_OK;
}

static void cuda_release(void *p)
{
    if (p) note_cuda(cudaFree(p));
}

/* Both directions wait for the copy: the host buffer may be reused (or
 * read) on return, pinned or not. */
static int cuda_copy(void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind)
{
    cudaError_t err = cudaSuccess;
    if (bytes) err = cudaMemcpyAsync(dst, src, bytes, kind, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    return take_error(err);
}

static int cuda_upload(void *dst, const void *host_src, size_t bytes)
{
    return cuda_copy(dst, host_src, bytes, cudaMemcpyHostToDevice);
}

static int cuda_download(void *host_dst, const void *src, size_t bytes)
{
    return cuda_copy(host_dst, src, bytes, cudaMemcpyDeviceToHost);
}

static int cuda_finish(void)
{
    return take_error(cudaStreamSynchronize(stream));
}

static void *cuda_stream(void) { return (void *)stream; }

static void cuda_fill(float *x, float value, size_t count)
{
    note_cuda(model__cuda_fill(x, value, count, stream));
}

/* ---- copies that overlap the work ----
 * On a stream of their own, made at the first copy, so that a batch's
 * upload runs beside the kernels of the step before it; events order
 * each copy after the work queued before it and that work's successors
 * after the copy. */

static cudaStream_t copy_stream;
static cudaError_t copy_stream_err;
static pthread_once_t copy_stream_once = PTHREAD_ONCE_INIT;

static void copy_stream_make(void)
{
    copy_stream_err =
        cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking);
}

static int cuda_host_alloc(size_t bytes, void **p)
{
    cudaError_t err = cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (err != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        return err == cudaErrorMemoryAllocation ? MODEL_ERR_NOMEM
                                                : MODEL_ERR_CUDA;
    }
    memset(*p, 0, bytes);
    return MODEL_OK;
}

static void cuda_host_release(void *p)
{
    if (p) note_cuda(cudaFreeHost(p));
}

static cudaError_t event_make(void **e)
{
    if (*e) return cudaSuccess;
    return cudaEventCreateWithFlags((cudaEvent_t *)e, cudaEventDisableTiming);
}

static int cuda_copy_start(model__copy_t *c, void *dst, const void *host_src,
                           size_t bytes)
{
    pthread_once(&copy_stream_once, copy_stream_make);
    cudaError_t err = copy_stream_err;
    if (err == cudaSuccess) err = event_make(&c->ready);
    if (err == cudaSuccess) err = event_make(&c->done);
    if (err == cudaSuccess) err = cudaEventRecord(c->ready, stream);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(copy_stream, c->ready, 0);
    if (err == cudaSuccess && bytes)
        err = cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice,
                              copy_stream);
    if (err == cudaSuccess) err = cudaEventRecord(c->done, copy_stream);
    return take_error(err);
}

static int cuda_fetch_start(model__copy_t *c, void *host_dst, const void *src,
                            size_t bytes)
{
    cudaError_t err = event_make(&c->done);
    if (err == cudaSuccess && bytes)
        err = cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost,
                              stream);
    if (err == cudaSuccess) err = cudaEventRecord(c->done, stream);
    return take_error(err);
}

static int cuda_copy_host_wait(model__copy_t *c)
{
    return take_error(c->done ? cudaEventSynchronize(c->done) : cudaSuccess);
}

static void cuda_copy_order(model__copy_t *c)
{
    if (c->done) note_cuda(cudaStreamWaitEvent(stream, c->done, 0));
}

static void cuda_copy_release(model__copy_t *c)
{
    void *events[] = {c->ready, c->done};
    if (c->done) note_cuda(cudaEventSynchronize(c->done));
    for (size_t i = 0; i < 2; i++)
        if (events[i]) note_cuda(cudaEventDestroy(events[i]));
    memset(c, 0, sizeof *c);
}

/* ---- GEMM ----
 * Row-major C (m, n) = alpha op(A) op(B) + beta C, for each of batch
 * matrices stride_* floats apart. cuBLAS is column-major, where a
 * row-major matrix reads as its transpose: so it computes C^T = op(B)^T
 * op(A)^T, the operands swapped. */
typedef struct {
    const float *p;
    int ld, trans;
    long long stride;
} gemm_operand_t;

static void gemm(int m, int n, int k, float alpha, gemm_operand_t a,
                 gemm_operand_t b, float beta, float *c, int ldc,
                 long long stride_c, int batch)
{
    cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (batch == 1)
        note_blas(cublasSgemm(blas, op_b, op_a, n, m, k, &alpha, b.p, b.ld, a.p,
                              a.ld, &beta, c, ldc));
    else
        note_blas(cublasSgemmStridedBatched(
            blas, op_b, op_a, n, m, k, &alpha, b.p, b.ld, b.stride, a.p, a.ld,
            a.stride, &beta, c, ldc, stride_c, batch));
}

/* Row-major matrices with leading dimension ld, maybe transposed, stride
 * floats apart in a batch (0: one matrix for all; a single GEMM: any). */
static gemm_operand_t mat(const float *p, int ld, int trans, long long stride)
{
    return (gemm_operand_t){.p = p, .ld = ld, .trans = trans, .stride = stride};
}

/* ---- linear ---- */

static void cuda_linear_forward(const float *x, const float *w, const float *b,
                                float *y, int batch, int in, int out)
{
    note_cuda(model__cuda_bias(y, b, (size_t)batch * out, 1, out, stream));
    /* y (batch, out) += x (batch, in) w^T */
    gemm(batch, out, in, 1.0f, mat(x, in, 0, 0), mat(w, in, 1, 0), 1.0f, y, out,
         0, 1);
}

static void cuda_linear_backward(const float *x, const float *w,
                                 const float *dy, float *dx, float *dw,
                                 float *db, int batch, int in, int out,
                                 int accumulate)
{
    if (dw) {
        /* dw (out, in) (+)= dy^T (out, batch) x (batch, in) */
        gemm(out, in, batch, 1.0f, mat(dy, out, 1, 0), mat(x, in, 0, 0),
             accumulate ? 1.0f : 0.0f, dw, in, 0, 1);
        note_cuda(
            model__cuda_channel_sum(dy, db, batch, out, 1, accumulate, stream));
    }
    /* dx (batch, in) = dy (batch, out) w (out, in) */
    if (dx)
        gemm(batch, in, out, 1.0f, mat(dy, out, 0, 0), mat(w, in, 0, 0), 0.0f,
             dx, in, 0, 1);
}

/* ---- conv2d ----
 * Two paths (models/conv_cudnn.h): cuDNN's (models/conv_cudnn.c), in a
 * build with it unless HVD_CONV=im2col, and im2col + cuBLAS, here, the
 * reference. For im2col, scratch is one im2col matrix per image of the
 * batch, (batch, ckk, ohw); the backward uses it for col (the weight
 * gradient) and then, reusing it in stream order, for dcol (the input
 * gradient). cuDNN's algorithms are chosen to fit in the same count for
 * the call's batch, so one scratch serves both paths, and a smaller
 * batch in a scratch made for batch_max. */

static model__conv_path_t conv_path = MODEL__CONV_IM2COL;
static int cudnn_opened; /* its handle is there: its path may run */

int model__cuda_conv_use(model__conv_path_t path)
{
    if (open_why || !stream ||
        (path != MODEL__CONV_IM2COL && !cudnn_opened))
        return MODEL_ERR_STATE;
    conv_path = path;
    return MODEL_OK;
}

model__conv_path_t model__cuda_conv_path(void) { return conv_path; }

/* Floats of scratch for any convolution, however small, in a cuDNN
 * build: room (4 MiB) for cuDNN's algorithms that want a workspace where
 * im2col's count is tiny. */
#define CONV_SCRATCH_MIN_COUNT (HVD_HAVE_CUDNN ? (size_t)1 << 20 : 0)

static size_t cuda_conv2d_scratch_count(const model__conv_shape_t *s,
                                        int batch_max)
{
    size_t count =
        (size_t)batch_max * s->in_c * s->k * s->k * s->out_h * s->out_w;
    return count > CONV_SCRATCH_MIN_COUNT ? count : CONV_SCRATCH_MIN_COUNT;
}

#if HVD_HAVE_CUDNN
/* The bytes of scratch the caller holds for batch images at least. */
static size_t cudnn_scratch_nbytes(const model__conv_shape_t *s, int batch)
{
    return cuda_conv2d_scratch_count(s, batch) * sizeof(float);
}
#endif

static void cuda_conv2d_forward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *b, float *y,
                                int batch, float *scratch)
{
#if HVD_HAVE_CUDNN
    if (conv_path != MODEL__CONV_IM2COL) {
        if (model__cudnn_conv2d_forward(s, x, w, b, y, batch, scratch,
                                        cudnn_scratch_nbytes(s, batch),
                                        conv_path == MODEL__CONV_CUDNN_TF32))
            note_error();
        return;
    }
#endif
    int ohw = s->out_h * s->out_w, ckk = s->in_c * s->k * s->k;
    long long out_count = (long long)s->out_c * ohw;
    note_cuda(model__cuda_im2col(s, x, scratch, batch, stream));
    note_cuda(model__cuda_bias(y, b, (size_t)batch * out_count, (size_t)ohw,
                               s->out_c, stream));
    /* y_n (out_c, ohw) += w (out_c, ckk) col_n (ckk, ohw) */
    gemm(s->out_c, ohw, ckk, 1.0f, mat(w, ckk, 0, 0),
         mat(scratch, ohw, 0, (long long)ckk * ohw), 1.0f, y, ohw, out_count,
         batch);
}

static void cuda_conv2d_backward(const model__conv_shape_t *s, const float *x,
                                 const float *w, const float *dy, float *dx,
                                 float *dw, float *db, int batch,
                                 float *scratch, int accumulate)
{
#if HVD_HAVE_CUDNN
    if (conv_path != MODEL__CONV_IM2COL) {
        if (model__cudnn_conv2d_backward(
                s, x, w, dy, dx, dw, db, batch, scratch,
                cudnn_scratch_nbytes(s, batch), accumulate,
                conv_path == MODEL__CONV_CUDNN_TF32))
            note_error();
        return;
    }
#endif
    int ohw = s->out_h * s->out_w, ckk = s->in_c * s->k * s->k;
    size_t out_count = (size_t)s->out_c * ohw, col_count = (size_t)ckk * ohw;
    if (dw) {
        note_cuda(model__cuda_im2col(s, x, scratch, batch, stream));
        /* dw (out_c, ckk) (+)= sum over n of dy_n (out_c, ohw) col_n^T:
         * the first image overwrites unless accumulating, the rest add. */
        for (int n = 0; n < batch; n++)
            gemm(s->out_c, ckk, ohw, 1.0f, mat(dy + n * out_count, ohw, 0, 0),
                 mat(scratch + n * col_count, ohw, 1, 0),
                 n || accumulate ? 1.0f : 0.0f, dw, ckk, 0, 1);
        note_cuda(model__cuda_channel_sum(dy, db, batch, s->out_c, (size_t)ohw,
                                          accumulate, stream));
    }
    if (!dx) return;
    /* dcol_n (ckk, ohw) = w^T (ckk, out_c) dy_n (out_c, ohw) */
    gemm(ckk, ohw, s->out_c, 1.0f, mat(w, ckk, 1, 0),
         mat(dy, ohw, 0, (long long)out_count), 0.0f, scratch, ohw,
         (long long)col_count, batch);
    note_cuda(model__cuda_col2im(s, scratch, dx, batch, stream));
}

/* ---- element-wise layers, pooling, loss ---- */

static void cuda_relu_forward(const float *x, float *y, size_t count)
{
    note_cuda(model__cuda_relu_forward(x, y, count, stream));
}

static void cuda_relu_backward(const float *y, const float *dy, float *dx,
                               size_t count)
{
    note_cuda(model__cuda_relu_backward(y, dy, dx, count, stream));
}

static void cuda_maxpool_forward(const model__conv_shape_t *s, const float *x,
                                 float *y, int32_t *argmax, int batch)
{
    note_cuda(model__cuda_maxpool_forward(s, x, y, argmax, batch, stream));
}

static void cuda_maxpool_backward(const model__conv_shape_t *s, const float *dy,
                                  const int32_t *argmax, float *dx, int batch)
{
    note_cuda(model__cuda_maxpool_backward(s, dy, argmax, dx, batch, stream));
}

static void cuda_dropout_forward(const float *x, float *y, float *mask,
                                 size_t count, float p, int train, uint64_t rng)
{
    note_cuda(
        model__cuda_dropout_forward(x, y, mask, count, p, train, rng, stream));
}

static void cuda_dropout_backward(const float *dy, const float *mask, float *dx,
                                  size_t count)
{
    note_cuda(model__cuda_dropout_backward(dy, mask, dx, count, stream));
}

static void cuda_softmax_xent(const float *logits, const int32_t *labels,
                              float *dlogits, double *losses, int batch,
                              int classes)
{
    note_cuda(model__cuda_softmax_xent(logits, labels, dlogits, losses, batch,
                                       classes, stream));
}

static void cuda_sgd_step(const float *p, const float *g, float *out,
                          float *velocity, size_t count, float lr, float mu,
                          float wd, int nesterov)
{
    note_cuda(model__cuda_sgd_step(p, g, out, velocity, count, lr, mu, wd,
                                   nesterov, stream));
}

static const model__backend_t model__cuda = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .release = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .finish = cuda_finish,
    .stream = cuda_stream,
    .fill = cuda_fill,
    .host_alloc = cuda_host_alloc,
    .host_release = cuda_host_release,
    .copy_start = cuda_copy_start,
    .fetch_start = cuda_fetch_start,
    .copy_host_wait = cuda_copy_host_wait,
    .copy_order = cuda_copy_order,
    .copy_release = cuda_copy_release,
    .linear_forward = cuda_linear_forward,
    .linear_backward = cuda_linear_backward,
    .conv2d_scratch_count = cuda_conv2d_scratch_count,
    .conv2d_forward = cuda_conv2d_forward,
    .conv2d_backward = cuda_conv2d_backward,
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .maxpool_forward = cuda_maxpool_forward,
    .maxpool_backward = cuda_maxpool_backward,
    .dropout_forward = cuda_dropout_forward,
    .dropout_backward = cuda_dropout_backward,
    .softmax_xent = cuda_softmax_xent,
    .sgd_step = cuda_sgd_step,
};

/* ---- opening ---- */

static void refuse(const char *what, const char *detail)
{
    snprintf(open_why_text, sizeof open_why_text, "%s: %s", what, detail);
    open_why = open_why_text;
}

/* HVD_CONV and HVD_CONV_TF32: -1 (the device refused, saying why) for a
 * value they do not know, or cudnn in a build without it; else 0. */
static int conv_ask(model__conv_ask_t *ask)
{
    const char *why;
    if (model__conv_ask(ask, &why)) {
        snprintf(open_why_text, sizeof open_why_text, "%s", why);
        open_why = open_why_text;
        return -1;
    }
    if (ask->path == MODEL__CONV_ASK_CUDNN && !HVD_HAVE_CUDNN) {
        refuse("HVD_CONV=cudnn",
               "this build has no cuDNN (configure --with-cudnn)");
        return -1;
    }
    return 0;
}

/* The conv path, once the stream is there: cuDNN's (in TF32 when
 * HVD_CONV_TF32=1) unless im2col was asked for. cuDNN failing to open (a
 * part of the library missing on this node) refuses the device only when
 * HVD_CONV=cudnn asked for it by name; by default it is a warning, and
 * im2col runs. */
static int open_conv(model__conv_ask_t ask)
{
#if HVD_HAVE_CUDNN
    const char *why;
    if (ask.path == MODEL__CONV_ASK_IM2COL) return MODEL_OK;
    if (model__cudnn_open(stream, &why) == MODEL_OK) {
        cudnn_opened = 1;
        conv_path = ask.tf32 ? MODEL__CONV_CUDNN_TF32 : MODEL__CONV_CUDNN;
        return MODEL_OK;
    }
    if (ask.path == MODEL__CONV_ASK_CUDNN) {
        refuse("HVD_CONV=cudnn, but cuDNN did not open", why);
        return MODEL_ERR_CUDA;
    }
    fprintf(stderr,
            "models: warning: cuDNN did not open (%s): convolutions run as "
            "im2col + cuBLAS\n",
            why);
#else
    (void)ask;
#endif
    return MODEL_OK;
}

static void open_device(void)
{
    /* HVD_CONV* first: a bad value is the user's to fix, GPU or none. */
    model__conv_ask_t ask;
    if (conv_ask(&ask)) return;
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev == 0) {
        (void)cudaGetLastError();
        refuse("no CUDA device visible", err != cudaSuccess
                                             ? cudaGetErrorString(err)
                                             : "cudaGetDeviceCount is 0");
        return;
    }
    err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        refuse("cudaStreamCreateWithFlags failed", cudaGetErrorString(err));
        return;
    }
    cublasStatus_t st = cublasCreate(&blas);
    if (st != CUBLAS_STATUS_SUCCESS) goto err_destroy_stream;
    st = cublasSetStream(blas, stream);
    if (st != CUBLAS_STATUS_SUCCESS) goto err_destroy_blas;
    if (open_conv(ask) != MODEL_OK) goto err_destroy_blas;
    return;

err_destroy_blas:
    (void)cublasDestroy(blas);
    blas = NULL;
err_destroy_stream:
    (void)cudaStreamDestroy(stream);
    stream = NULL;
    if (!open_why) /* open_conv has said why already */
        refuse("no cuBLAS handle on the CUDA stream",
               cublasGetStatusString(st));
}

const model__backend_t *model__cuda_open(const char **why)
{
    pthread_once(&open_once, open_device);
    if (open_why) {
        if (why) *why = open_why;
        return NULL;
    }
    return &model__cuda;
}
