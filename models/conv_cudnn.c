/* models/conv_cudnn.c: the GPU's convolutions through cuDNN
 * (models/conv_cudnn.h), run by models/backend_cuda.c's conv entries in
 * a build configured with cuDNN unless HVD_CONV=im2col.
 *
 * A plan per (shape, batch, scratch bytes, math) holds the tensor, filter
 * and convolution descriptors and an algorithm per direction (forward,
 * backward data, backward filter): the first, in the order of cuDNN's
 * heuristics (cudnnGet*Algorithm_v7, what PyTorch asks without
 * cudnn.benchmark), that is deterministic and whose workspace fits the
 * caller's scratch. The scratch is the im2col path's
 * (models/backend_cuda.c; at least 4 MiB): so cuDNN needs no more memory
 * than the reference did, and a smaller batch, whose scratch bound is
 * smaller, gets a plan of its own that fits it. Plans are made on first
 * use, in a small table replaced round-robin when full; a model needs a
 * few (its conv layers times its batch sizes: batch_max, a last partial
 * batch, evaluation's).
 *
 * Math: CUDNN_FMA_MATH, float FMAs only, no TF32, so that results stay
 * within float rounding of the host's, as cuBLAS's GEMMs do in the im2col
 * path. PyTorch lets cuDNN use TF32 for convolutions by default
 * (torch.backends.cudnn.allow_tf32); tf32 does as it does: the
 * descriptor starts in CUDNN_DEFAULT_MATH, and each direction runs in the
 * math type cuDNN's heuristics gave its algorithm, or in FMAs where none
 * of those is deterministic and fits (TF32 rounds the operands to 10 bits
 * of mantissa: about 1e-3 relative, far from float).
 *
 * The bias: added after the convolution (cudnnAddTensor), its gradient
 * summed by cudnnConvolutionBackwardBias, accumulating as dw's does.
 * Not here: timed algorithm search (cudnnFind*), NHWC, half precision,
 * fused convolution + bias + ReLU.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <cudnn.h>
#include "models/conv_cudnn.h"
#include "models/model.h"

#define PLAN_SLOTS 64
/* cuDNN's answers for a direction, at most: each algorithm once per math
 * it may run in (cudnnGet*AlgorithmMaxCount: more than ALGO_COUNT). */
#define ALGO_MAX 32
_Static_assert((int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= ALGO_MAX &&
                   (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= ALGO_MAX &&
                   (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= ALGO_MAX,
               "ALGO_MAX holds every direction's algorithms");

typedef enum { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER, DIRS } direction_t;

typedef struct {
    /* the key; batch 0 marks an empty slot */
    model__conv_shape_t s;
    int batch;
    size_t scratch_nbytes;
    int tf32;
    cudnnTensorDescriptor_t x;    /* (batch, in_c, in_h, in_w) */
    cudnnTensorDescriptor_t y;    /* (batch, out_c, out_h, out_w) */
    cudnnTensorDescriptor_t bias; /* (1, out_c, 1, 1) */
    cudnnFilterDescriptor_t w;    /* (out_c, in_c, k, k) */
    cudnnConvolutionDescriptor_t conv;
    /* per direction, once chosen at its first call (a direction that
     * never runs, as the first layer's backward data, is never chosen):
     * the algorithm (a cudnnConvolution*Algo_t), its workspace, and the
     * math type conv is set to when it runs */
    int chosen[DIRS];
    int algo[DIRS];
    size_t nbytes[DIRS];
    cudnnMathType_t math[DIRS];
} plan_t;

static cudnnHandle_t handle;
static plan_t plans[PLAN_SLOTS];
static int next_slot; /* the next to be (re)made when none matches */
static atomic_flag reported = ATOMIC_FLAG_INIT;

static const float one = 1.0f, zero = 0.0f;

/* ---- errors ---- */

/* While choose() asks in TF32, whose failure is not the plan's: a
 * failure's text is kept here instead of said (plans are made on the
 * thread that runs the model). */
static int asking_tf32;
static char tf32_why[384];

/* MODEL_ERR_CUDA; the process's first failure goes to stderr, as the
 * backend keeps only a status and a GPU node's first run must say what
 * broke. */
static int fail(const char *what, const char *detail)
{
    if (asking_tf32)
        snprintf(tf32_why, sizeof tf32_why, "%.60s: %.320s", what, detail);
    else if (!atomic_flag_test_and_set(&reported))
        fprintf(stderr, "models: cuDNN: %s: %s\n", what, detail);
    return MODEL_ERR_CUDA;
}

/* The TF32 fallback's info line, for the first few plans only (a test
 * makes a hundred). */
static void say_fallback(const char *line)
{
    enum { SAID_MAX = 8 };
    static atomic_int said;
    int n = atomic_fetch_add(&said, 1);
    if (n < SAID_MAX)
        fprintf(stderr, "models: cuDNN: info: %s\n", line);
    if (n == SAID_MAX - 1)
        fprintf(stderr, "models: cuDNN: info: later plans that fall back "
                "to float FMAs are not said\n");
}

static int check(cudnnStatus_t st, const char *call)
{
    if (st == CUDNN_STATUS_SUCCESS) return MODEL_OK;
    char detail[320];
    int len = snprintf(detail, sizeof detail, "%s", cudnnGetErrorString(st));
#if CUDNN_MAJOR >= 9
    /* cuDNN 9 says which argument it refused, and why. */
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last);
    if (*last && len > 0 && (size_t)len < sizeof detail)
        snprintf(detail + len, sizeof detail - (size_t)len, " (%s)", last);
#else
    (void)len;
#endif
    return fail(call, detail);
}

/* A cuDNN call and its name, through check(). */
#define CUDNN(fn, ...) check(fn(__VA_ARGS__), #fn)

/* ---- the handle ---- */

int model__cudnn_open(cudaStream_t stream, const char **why)
{
    static char why_text[160];
    const char *call = "cudnnCreate";
    cudnnStatus_t st = cudnnCreate(&handle);
    if (st != CUDNN_STATUS_SUCCESS) goto err;
    call = "cudnnSetStream";
    st = cudnnSetStream(handle, stream);
    if (st != CUDNN_STATUS_SUCCESS) goto err_destroy;
#if CUDNN_MAJOR >= 9
    /* libcudnn loads its parts (libcudnn_ops, libcudnn_cnn) on first use:
     * one missing fails here, where the caller can still run im2col,
     * rather than in the first convolution. */
    call = "cudnnOpsVersionCheck";
    st = cudnnOpsVersionCheck();
    if (st != CUDNN_STATUS_SUCCESS) goto err_destroy;
    call = "cudnnCnnVersionCheck";
    st = cudnnCnnVersionCheck();
    if (st != CUDNN_STATUS_SUCCESS) goto err_destroy;
#endif
    return MODEL_OK;

err_destroy:
    (void)cudnnDestroy(handle); /* the failure to report is st */
    handle = NULL;
err:
    snprintf(why_text, sizeof why_text, "%s: %s (cuDNN %zu)", call,
             cudnnGetErrorString(st), cudnnGetVersion());
    *why = why_text;
    return MODEL_ERR_CUDA;
}

/* ---- plans ---- */

/* Destroying a descriptor once the work that names it is queued is safe:
 * cuDNN reads descriptors when a call queues its kernels (PyTorch makes
 * and drops them per call). Their statuses are not failures of ours. */
static void plan_free(plan_t *p)
{
    if (p->conv) (void)cudnnDestroyConvolutionDescriptor(p->conv);
    if (p->w) (void)cudnnDestroyFilterDescriptor(p->w);
    if (p->bias) (void)cudnnDestroyTensorDescriptor(p->bias);
    if (p->y) (void)cudnnDestroyTensorDescriptor(p->y);
    if (p->x) (void)cudnnDestroyTensorDescriptor(p->x);
    *p = (plan_t){0};
}

/* One of cuDNN's answers for a direction, whichever its perf type. */
typedef struct {
    int algo;
    cudnnStatus_t status;
    size_t nbytes;
    cudnnMathType_t math;
    int deterministic;
} candidate_t;

#define CANDIDATES(perf, n, out)                                               \
    for (int i_ = 0; i_ < (n); i_++)                                           \
        (out)[i_] = (candidate_t){                                             \
            .algo = (int)(perf)[i_].algo,                                      \
            .status = (perf)[i_].status,                                       \
            .nbytes = (perf)[i_].memory,                                       \
            .math = (perf)[i_].mathType,                                       \
            .deterministic = (perf)[i_].determinism == CUDNN_DETERMINISTIC}

/* How many answers cuDNN may give for dir (its MaxCount, which counts an
 * algorithm again for each math it may run in: asking for ALGO_COUNT
 * cuts the list short), at most ALGO_MAX. */
static int max_count(direction_t dir, int *n)
{
    int rc =
        dir == DIR_FWD
            ? CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount, handle, n)
        : dir == DIR_BWD_DATA
            ? CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount, handle,
                    n)
            : CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount,
                    handle, n);
    if (rc == MODEL_OK && (*n > ALGO_MAX || *n < 1)) *n = ALGO_MAX;
    return rc;
}

/* cuDNN's algorithms for direction dir of p, best first by its
 * heuristics, into c (ALGO_MAX), their number into *count. */
static int candidates(const plan_t *p, direction_t dir, candidate_t *c,
                      int *count)
{
    int asked, rc = max_count(dir, &asked);
    *count = 0;
    if (rc != MODEL_OK) return rc;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[ALGO_MAX];
        rc = CUDNN(cudnnGetConvolutionForwardAlgorithm_v7, handle, p->x, p->w,
                   p->conv, p->y, asked, count, perf);
        if (rc == MODEL_OK) CANDIDATES(perf, *count, c);
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[ALGO_MAX];
        rc = CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7, handle, p->w,
                   p->y, p->conv, p->x, asked, count, perf);
        if (rc == MODEL_OK) CANDIDATES(perf, *count, c);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[ALGO_MAX];
        rc = CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7, handle,
                   p->x, p->y, p->conv, p->w, asked, count, perf);
        if (rc == MODEL_OK) CANDIDATES(perf, *count, c);
    }
    return rc;
}

/* The workspace algo needs for direction dir of p, as its descriptors are
 * set (FMA math included); not a failure when it cannot run so. */
static cudnnStatus_t workspace_nbytes(const plan_t *p, direction_t dir,
                                      int algo, size_t *nbytes)
{
    if (dir == DIR_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(
            handle, p->x, p->w, p->conv, p->y, (cudnnConvolutionFwdAlgo_t)algo,
            nbytes);
    if (dir == DIR_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            handle, p->w, p->y, p->conv, p->x,
            (cudnnConvolutionBwdDataAlgo_t)algo, nbytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        handle, p->x, p->y, p->conv, p->w,
        (cudnnConvolutionBwdFilterAlgo_t)algo, nbytes);
}

/* Why candidate c was passed over, or NULL when it may run in math under
 * p's scratch (its workspace, asked again for the descriptor as it will
 * be set, into *need). */
static const char *passed_over(plan_t *p, direction_t dir,
                               const candidate_t *c, cudnnMathType_t math,
                               size_t *need)
{
    if (c->status != CUDNN_STATUS_SUCCESS) return "unsupported";
    if (!c->deterministic) return "nondeterministic";
    if (c->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
        (math == CUDNN_FMA_MATH && c->math == CUDNN_TENSOR_OP_MATH))
        return "math";
    if (c->nbytes > p->scratch_nbytes) return "scratch";
    if (cudnnSetConvolutionMathType(p->conv, math) != CUDNN_STATUS_SUCCESS ||
        workspace_nbytes(p, dir, c->algo, need) != CUDNN_STATUS_SUCCESS)
        return "refused";
    return *need > p->scratch_nbytes ? "scratch" : NULL;
}

/* The first of cuDNN's deterministic algorithms for dir, by its
 * heuristics for the descriptor in math `asked`, that fits in p's
 * scratch; stored in p with the math it runs in: float FMAs, or under
 * CUDNN_DEFAULT_MATH the math type cuDNN gave it (tensor cores on float
 * data are TF32), conversions to a smaller type never. Else 1, with
 * each candidate and why it was passed over appended to seen. */
static int choose_in(plan_t *p, direction_t dir, cudnnMathType_t asked,
                     char *seen, size_t seen_size, int *rc)
{
    candidate_t c[ALGO_MAX];
    int count = 0;
    *rc = CUDNN(cudnnSetConvolutionMathType, p->conv, asked);
    if (*rc == MODEL_OK) *rc = candidates(p, dir, c, &count);
    if (*rc != MODEL_OK) return 0;
    for (int i = 0; i < count; i++) {
        size_t need = 0, len = strlen(seen);
        cudnnMathType_t math = asked == CUDNN_FMA_MATH ? asked : c[i].math;
        const char *why = passed_over(p, dir, &c[i], math, &need);
        if (!why) {
            p->algo[dir] = c[i].algo;
            p->nbytes[dir] = need;
            p->math[dir] = math;
            return 0;
        }
        snprintf(seen + len, seen_size - len, " %d/%d:%s", c[i].algo,
                 (int)c[i].math, why);
    }
    return 1;
}

/* Deterministic, as PyTorch's cudnn.deterministic: the backward
 * algorithms that add with atomics (backward data and filter ALGO_0,
 * filter ALGO_3) would make two runs of the same steps differ, and a
 * resume must equal the run it resumes bit for bit. Under tf32 a
 * direction whose deterministic algorithms in TF32 all miss (cuDNN 9
 * offered none for the cnn's first layer's backward data on an H200, a
 * direction that never runs) runs in float FMAs: TF32 is allowed, not
 * required. Implicit GEMM forward and backward ALGO_1 are deterministic
 * and need little or no workspace (the scratch is 4 MiB at least), so
 * none fitting in FMA math is a failure, which lists cuDNN's candidates
 * as algorithm/math:why. */
static int choose(plan_t *p, direction_t dir)
{
    static const char *const names[] = {"forward", "backward data",
                                        "backward filter"};
    char seen[1536] = "";
    int rc = MODEL_OK;
    if (p->tf32) {
        strcpy(seen, " TF32:");
        asking_tf32 = 1;
        int chosen = !choose_in(p, dir, CUDNN_DEFAULT_MATH, seen,
                                sizeof seen, &rc);
        asking_tf32 = 0;
        if (chosen && rc == MODEL_OK) return rc;
    }
    /* cuDNN refusing the TF32 ask itself (rc) falls back as where no
     * TF32 algorithm fits. */
    const char *why = p->tf32 && rc != MODEL_OK ? tf32_why : "";
    size_t len = strlen(seen);
    snprintf(seen + len, sizeof seen - len, " FMA:");
    if (!choose_in(p, dir, CUDNN_FMA_MATH, seen, sizeof seen, &rc)) {
        /* Said, as it sets the speed HVD_CONV_TF32=1 asked for. */
        if (p->tf32 && rc == MODEL_OK) {
            char line[sizeof tf32_why + sizeof seen + 256];
            snprintf(line, sizeof line, "the %s convolution of %dx%dx%d to "
                     "%d channels (k %d) at batch %d runs in float FMAs: %s",
                     names[dir], p->s.in_c, p->s.in_h, p->s.in_w, p->s.out_c,
                     p->s.k, p->batch,
                     *why ? why : "no deterministic TF32 algorithm fits");
            if (!*why) {
                len = strlen(line);
                snprintf(line + len, sizeof line - len, " %zu bytes of "
                         "scratch (algorithm/math:why,%s)", p->scratch_nbytes,
                         seen);
            }
            say_fallback(line);
        }
        return rc;
    }
    char detail[1792];
    snprintf(detail, sizeof detail,
             "no %s algorithm is deterministic in %s math within %zu bytes "
             "of scratch; cuDNN's, as algorithm/math:why,%s",
             names[dir], p->tf32 ? "TF32 or FMA" : "FMA", p->scratch_nbytes,
             seen);
    return fail("cudnnGetConvolution*Algorithm_v7", detail);
}

/* Before dir's call: its algorithm, chosen at the first, and p's
 * convolution descriptor set to the math it runs in. */
static int use(plan_t *p, direction_t dir)
{
    if (!p->chosen[dir]) {
        int rc = choose(p, dir);
        if (rc != MODEL_OK) return rc;
        p->chosen[dir] = 1;
    }
    return CUDNN(cudnnSetConvolutionMathType, p->conv, p->math[dir]);
}

/* The descriptors of s at batch (their algorithms come at each
 * direction's first call: use); on failure p is left empty. */
static int plan_init(plan_t *p, const model__conv_shape_t *s, int batch,
                     size_t scratch_nbytes, int tf32)
{
    *p = (plan_t){.s = *s, .batch = batch, .scratch_nbytes = scratch_nbytes,
                  .tf32 = tf32};
    int rc, n, c, h, w;
    if ((rc = CUDNN(cudnnCreateTensorDescriptor, &p->x)) ||
        (rc = CUDNN(cudnnCreateTensorDescriptor, &p->y)) ||
        (rc = CUDNN(cudnnCreateTensorDescriptor, &p->bias)) ||
        (rc = CUDNN(cudnnCreateFilterDescriptor, &p->w)) ||
        (rc = CUDNN(cudnnCreateConvolutionDescriptor, &p->conv)))
        goto err;
    if ((rc = CUDNN(cudnnSetTensor4dDescriptor, p->x, CUDNN_TENSOR_NCHW,
                    CUDNN_DATA_FLOAT, batch, s->in_c, s->in_h, s->in_w)) ||
        (rc = CUDNN(cudnnSetTensor4dDescriptor, p->y, CUDNN_TENSOR_NCHW,
                    CUDNN_DATA_FLOAT, batch, s->out_c, s->out_h, s->out_w)) ||
        (rc = CUDNN(cudnnSetTensor4dDescriptor, p->bias, CUDNN_TENSOR_NCHW,
                    CUDNN_DATA_FLOAT, 1, s->out_c, 1, 1)) ||
        (rc = CUDNN(cudnnSetFilter4dDescriptor, p->w, CUDNN_DATA_FLOAT,
                    CUDNN_TENSOR_NCHW, s->out_c, s->in_c, s->k, s->k)) ||
        /* cross-correlation: the kernel unflipped, as im2col's GEMM */
        (rc = CUDNN(cudnnSetConvolution2dDescriptor, p->conv, s->pad, s->pad,
                    s->stride, s->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                    CUDNN_DATA_FLOAT)) ||
        (rc = CUDNN(cudnnGetConvolution2dForwardOutputDim, p->conv, p->x,
                    p->w, &n, &c, &h, &w)))
        goto err;
    /* A layer whose out_h/out_w are not cuDNN's would be read and written
     * out of bounds: refused here, once. */
    if (n != batch || c != s->out_c || h != s->out_h || w != s->out_w) {
        char detail[160];
        snprintf(detail, sizeof detail,
                 "output %dx%dx%dx%d, the layer's %dx%dx%dx%d", n, c, h, w,
                 batch, s->out_c, s->out_h, s->out_w);
        rc = fail("cudnnGetConvolution2dForwardOutputDim", detail);
        goto err;
    }
    return MODEL_OK;

err:
    plan_free(p);
    return rc;
}

/* The plan of (s, batch, scratch_nbytes, tf32), made when there is none. */
static int plan_get(const model__conv_shape_t *s, int batch,
                    size_t scratch_nbytes, int tf32, plan_t **out)
{
    if (batch < 1) return fail("conv2d", "batch < 1");
    for (int i = 0; i < PLAN_SLOTS; i++) {
        plan_t *p = &plans[i];
        if (p->batch == batch && p->scratch_nbytes == scratch_nbytes &&
            p->tf32 == tf32 && !memcmp(&p->s, s, sizeof *s)) {
            *out = p;
            return MODEL_OK;
        }
    }
    plan_t *p = &plans[next_slot];
    next_slot = (next_slot + 1) % PLAN_SLOTS;
    plan_free(p);
    int rc = plan_init(p, s, batch, scratch_nbytes, tf32);
    if (rc == MODEL_OK) *out = p;
    return rc;
}

/* ---- the entries ----
 * Models of several threads take turns (a lock), as at oneDNN's
 * (models/conv_dnnl.c): the plans are the process's, and one thread's
 * new plan may take the slot of the one another is using. */

static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;

static int conv_forward(const model__conv_shape_t *s, const float *x,
                        const float *w, const float *b, float *y, int batch,
                        void *scratch, size_t scratch_nbytes, int tf32)
{
    plan_t *p;
    int rc = plan_get(s, batch, scratch_nbytes, tf32, &p);
    if (rc == MODEL_OK) rc = use(p, DIR_FWD);
    if (rc == MODEL_OK)
        rc = CUDNN(cudnnConvolutionForward, handle, &one, p->x, x, p->w, w,
                   p->conv, (cudnnConvolutionFwdAlgo_t)p->algo[DIR_FWD],
                   scratch, p->nbytes[DIR_FWD], &zero, p->y, y);
    /* y += b, broadcast over (batch, out_h, out_w) */
    if (rc == MODEL_OK)
        rc = CUDNN(cudnnAddTensor, handle, &one, p->bias, b, &one, p->y, y);
    return rc;
}

int model__cudnn_conv2d_forward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *b, float *y,
                                int batch, void *scratch,
                                size_t scratch_nbytes, int tf32)
{
    pthread_mutex_lock(&turn);
    int rc = conv_forward(s, x, w, b, y, batch, scratch, scratch_nbytes,
                          tf32);
    pthread_mutex_unlock(&turn);
    return rc;
}

static int conv_backward(const model__conv_shape_t *s, const float *x,
                         const float *w, const float *dy, float *dx,
                         float *dw, float *db, int batch, void *scratch,
                         size_t scratch_nbytes, int accumulate, int tf32)
{
    plan_t *p;
    int rc = plan_get(s, batch, scratch_nbytes, tf32, &p);
    if (rc != MODEL_OK) return rc;
    /* beta 0 overwrites without reading: a NaN left there stays out */
    const float *keep = accumulate ? &one : &zero;
    if (dw) {
        rc = use(p, DIR_BWD_FILTER);
        if (rc == MODEL_OK)
            rc = CUDNN(cudnnConvolutionBackwardFilter, handle, &one, p->x, x,
                       p->y, dy, p->conv,
                       (cudnnConvolutionBwdFilterAlgo_t)p->algo[DIR_BWD_FILTER],
                       scratch, p->nbytes[DIR_BWD_FILTER], keep, p->w, dw);
        if (rc == MODEL_OK)
            rc = CUDNN(cudnnConvolutionBackwardBias, handle, &one, p->y, dy,
                       keep, p->bias, db);
    }
    /* The workspace is reused in stream order, after dw's. */
    if (rc == MODEL_OK && dx) rc = use(p, DIR_BWD_DATA);
    if (rc == MODEL_OK && dx)
        rc = CUDNN(cudnnConvolutionBackwardData, handle, &one, p->w, w, p->y,
                   dy, p->conv,
                   (cudnnConvolutionBwdDataAlgo_t)p->algo[DIR_BWD_DATA],
                   scratch, p->nbytes[DIR_BWD_DATA], &zero, p->x, dx);
    return rc;
}

int model__cudnn_conv2d_backward(const model__conv_shape_t *s,
                                 const float *x, const float *w,
                                 const float *dy, float *dx, float *dw,
                                 float *db, int batch, void *scratch,
                                 size_t scratch_nbytes, int accumulate,
                                 int tf32)
{
    pthread_mutex_lock(&turn);
    int rc = conv_backward(s, x, w, dy, dx, dw, db, batch, scratch,
                           scratch_nbytes, accumulate, tf32);
    pthread_mutex_unlock(&turn);
    return rc;
}
