/* ring/dev_cuda.c: the device interface (ring/dev.h) over the CUDA
 * runtime: memory, streams and events, copies, IPC, and the kernels of
 * ring/reduce_cuda.cu through their launchers. Compiled in CUDA builds
 * only (Makefile.am); which device a process uses, and whether this table
 * is used at all, is decided elsewhere (ring_dev()).
 *
 * A ring_stream_t * is a cudaStream_t and a ring_event_t * a
 * cudaEvent_t, cast: both are pointers to CUDA's own opaque structs, so a
 * wrapper would only add an allocation. Streams are created non-blocking
 * (no implicit synchronisation with the legacy default stream, which the
 * caller's framework may be using); events without timing (cheaper to
 * record and wait on).
 */
#include <pthread.h>
#include <string.h>
#include <cuda.h> /* the driver's types, for cuMemGetAddressRange alone */
#include <cuda_runtime_api.h>
#include "ring/ring_internal.h"
#include "ring/dev.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(ring_ipc_handle_t),
               "ring_ipc_handle_t must hold a cudaIpcMemHandle_t");
_Static_assert(sizeof(cudaIpcEventHandle_t) <= sizeof(ring_ipc_handle_t),
               "ring_ipc_handle_t must hold a cudaIpcEventHandle_t");

void ring__log_cuda_error(int err, const char *call, const char *file,
                          int line)
{
    cudaError_t e = (cudaError_t)err;
    ring__log("%s:%d: %s failed: %s (%s)", file, line, call,
              cudaGetErrorString(e), cudaGetErrorName(e));
    /* A failed call also leaves its error as the thread's last one; clear
     * it so that the next launch check does not report it again (a
     * sticky error, a broken context, comes back from every call). */
    (void)cudaGetLastError();
}

static cudaStream_t ring__cuda_stream(ring_stream_t *s)
{
    return (cudaStream_t)(void *)s;
}

static cudaEvent_t ring__cuda_event(ring_event_t *e)
{
    return (cudaEvent_t)(void *)e;
}

/* ---- memory ---- */

/* Running out of device memory is RING_ERR_NOMEM, as malloc's is. */
static int ring__cuda_alloc_status(cudaError_t err, const char *what,
                                   size_t nbytes)
{
    if (err == cudaSuccess) return RING_OK;
    ring__log("%s of %zu bytes failed: %s", what, nbytes,
              cudaGetErrorString(err));
    (void)cudaGetLastError();
    return err == cudaErrorMemoryAllocation ? RING_ERR_NOMEM : RING_ERR_CUDA;
}

static int ring__cuda_alloc(void **p, size_t nbytes)
{
    *p = NULL;
    return ring__cuda_alloc_status(cudaMalloc(p, nbytes), "cudaMalloc",
                                   nbytes);
}

static int ring__cuda_release(void *p)
{
    int status = RING_OK;
    if (p) RING_CHECK_CUDA(cudaFree(p));
out:
    return status;
}

static int ring__cuda_alloc_pinned(void **p, size_t nbytes)
{
    *p = NULL;
    return ring__cuda_alloc_status(cudaMallocHost(p, nbytes), "cudaMallocHost",
                                   nbytes);
}

static int ring__cuda_release_pinned(void *p)
{
    int status = RING_OK;
    if (p) RING_CHECK_CUDA(cudaFreeHost(p));
out:
    return status;
}

static int ring__cuda_owns(const void *p, int *device)
{
    struct cudaPointerAttributes attr;
    if (!p) return 0;
    cudaError_t err = cudaPointerGetAttributes(&attr, p);
    if (err == cudaErrorInvalidValue) { /* host memory, to runtimes < 11 */
        (void)cudaGetLastError();
        return 0;
    }
    if (err != cudaSuccess) { /* a broken context's error, say */
        ring__log_cuda_error(err, "cudaPointerGetAttributes", __FILE__,
                             __LINE__);
        return RING_ERR_CUDA;
    }
    if (attr.type != cudaMemoryTypeDevice) return 0;
    if (device) *device = attr.device;
    return 1;
}

static int ring__cuda_device(int *device)
{
    int status = RING_OK;
    RING_CHECK_CUDA(cudaGetDevice(device));
out:
    return status;
}

static int ring__cuda_set_device(int device)
{
    int status = RING_OK;
    RING_CHECK_CUDA(cudaSetDevice(device));
out:
    return status;
}

/* ---- streams and events ---- */

static int ring__cuda_stream_create(ring_stream_t **s)
{
    int status = RING_OK;
    cudaStream_t cs = NULL;
    *s = NULL;
    RING_CHECK_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    *s = (ring_stream_t *)(void *)cs;
out:
    return status;
}

static int ring__cuda_stream_destroy(ring_stream_t *s)
{
    int status = RING_OK;
    if (s) RING_CHECK_CUDA(cudaStreamDestroy(ring__cuda_stream(s)));
out:
    return status;
}

static int ring__cuda_stream_sync(ring_stream_t *s)
{
    int status = RING_OK;
    RING_CHECK_CUDA(cudaStreamSynchronize(ring__cuda_stream(s)));
out:
    return status;
}

static int ring__cuda_event_create(ring_event_t **e)
{
    int status = RING_OK;
    cudaEvent_t ce = NULL;
    *e = NULL;
    RING_CHECK_CUDA(cudaEventCreateWithFlags(&ce, cudaEventDisableTiming));
    *e = (ring_event_t *)(void *)ce;
out:
    return status;
}

static int ring__cuda_timer_create(ring_event_t **e)
{
    int status = RING_OK;
    cudaEvent_t ce = NULL;
    *e = NULL;
    RING_CHECK_CUDA(cudaEventCreate(&ce));
    *e = (ring_event_t *)(void *)ce;
out:
    return status;
}

static int ring__cuda_elapsed(ring_event_t *a, ring_event_t *b, float *ms)
{
    int status = RING_OK;
    RING_CHECK_CUDA(
        cudaEventElapsedTime(ms, ring__cuda_event(a), ring__cuda_event(b)));
out:
    return status;
}

static int ring__cuda_event_destroy(ring_event_t *e)
{
    int status = RING_OK;
    if (e) RING_CHECK_CUDA(cudaEventDestroy(ring__cuda_event(e)));
out:
    return status;
}

static int ring__cuda_event_record(ring_event_t *e, ring_stream_t *s)
{
    int status = RING_OK;
    RING_CHECK_CUDA(cudaEventRecord(ring__cuda_event(e), ring__cuda_stream(s)));
out:
    return status;
}

static int ring__cuda_event_sync(ring_event_t *e)
{
    int status = RING_OK;
    RING_CHECK_CUDA(cudaEventSynchronize(ring__cuda_event(e)));
out:
    return status;
}

static int ring__cuda_event_query(ring_event_t *e, int *done)
{
    int status = RING_OK;
    cudaError_t err = cudaEventQuery(ring__cuda_event(e));
    *done = err == cudaSuccess;
    if (err == cudaErrorNotReady) {
        /* Not an error: not done yet. Clear it only if the runtime kept it
         * as the last error, leaving any other one for its own check. */
        if (cudaPeekAtLastError() == cudaErrorNotReady)
            (void)cudaGetLastError();
        return RING_OK;
    }
    RING_CHECK_CUDA(err);
out:
    return status;
}

static int ring__cuda_stream_wait(ring_stream_t *s, ring_event_t *e)
{
    int status = RING_OK;
    RING_CHECK_CUDA(
        cudaStreamWaitEvent(ring__cuda_stream(s), ring__cuda_event(e), 0));
out:
    return status;
}

/* ---- work queued on a stream ---- */

static int ring__cuda_copy(void *dst, const void *src, size_t nbytes,
                           ring_stream_t *s)
{
    int status = RING_OK;
    if (nbytes == 0) return RING_OK;
    /* cudaMemcpyDefault: the direction from the pointers (unified
     * addressing, every 64-bit platform CUDA supports). */
    RING_CHECK_CUDA(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault,
                                    ring__cuda_stream(s)));
out:
    return status;
}

static int ring__cuda_copy_batch(const ring_copy_t *copies, size_t n,
                                 ring_stream_t *s)
{
    if (n == 0) return RING_OK;
    return ring__copy_batch_cuda(copies, n, (void *)ring__cuda_stream(s));
}

static int ring__cuda_zero(void *dst, size_t nbytes, ring_stream_t *s)
{
    int status = RING_OK;
    if (nbytes == 0) return RING_OK;
    RING_CHECK_CUDA(cudaMemsetAsync(dst, 0, nbytes, ring__cuda_stream(s)));
out:
    return status;
}

static int ring__cuda_reduce(void *dst, const void *a, const void *b,
                             size_t count, ring_dtype_t dtype, ring_op_t op,
                             int divisor, ring_stream_t *s)
{
    return ring__reduce_cuda(dst, a, b, count, dtype, op, divisor,
                             (void *)ring__cuda_stream(s));
}

static int ring__cuda_reduce_n(void *dst, const void *const *in, int n,
                               size_t count, ring_dtype_t dtype, ring_op_t op,
                               int divisor, ring_stream_t *s)
{
    return ring__reduce_n_cuda(dst, in, n, count, dtype, op, divisor,
                               (void *)ring__cuda_stream(s));
}

static int ring__cuda_divide(void *buf, size_t count, ring_dtype_t dtype,
                             int divisor, ring_stream_t *s)
{
    return ring__divide_cuda(buf, count, dtype, divisor,
                             (void *)ring__cuda_stream(s));
}

static int ring__cuda_convert(void *dst, ring_dtype_t dst_dtype,
                              const void *src, ring_dtype_t src_dtype,
                              size_t count, ring_stream_t *s)
{
    return ring__convert_cuda(dst, dst_dtype, src, src_dtype, count,
                              (void *)ring__cuda_stream(s));
}

/* ---- within a node ---- */

/* The driver's cuMemGetAddressRange, found through the runtime (a build
 * links no libcuda, which a machine without a driver lacks); NULL where
 * the driver has none. */
typedef CUresult (*ring__range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
static ring__range_fn ring__cuda_range;

static void ring__cuda_find_range(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                         cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        fn = NULL;
    }
    ring__cuda_range = (ring__range_fn)fn;
}

/* How far into its allocation p lies, into *offset; 0 where that cannot
 * be told (no entry point, or the driver's error). */
static int ring__cuda_offset(void *p, size_t *offset)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    CUdeviceptr base = 0;
    size_t nbytes = 0;
    pthread_once(&once, ring__cuda_find_range);
    *offset = 0;
    if (!ring__cuda_range ||
        ring__cuda_range(&base, &nbytes, (CUdeviceptr)(uintptr_t)p) !=
            CUDA_SUCCESS)
        return 0;
    *offset = (size_t)((uintptr_t)p - (uintptr_t)base);
    return 1;
}

static int ring__cuda_ipc_export(void *p, ring_ipc_handle_t *h)
{
    int status = RING_OK;
    cudaIpcMemHandle_t ch;
    size_t offset;
    memset(h, 0, sizeof *h);
    /* A handle opens the whole allocation, at its start: the others would
     * read from there, not from p; where that cannot be told, nothing is
     * exported (the ranks stage instead) rather than risk it. */
    if (!ring__cuda_offset(p, &offset)) {
        ring__log("ipc_export: where %p's allocation starts cannot be told "
                  "(the driver's cuMemGetAddressRange %s): not exported, as "
                  "CUDA IPC opens an allocation at its start",
                  p, ring__cuda_range ? "failed" : "was not found");
        return RING_ERR_CUDA;
    }
    if (offset > 0) {
        ring__log("ipc_export: %p is not the start of its allocation (%zu "
                  "bytes in): CUDA IPC opens an allocation at its start",
                  p, offset);
        return RING_ERR_ARG;
    }
    RING_CHECK_CUDA(cudaIpcGetMemHandle(&ch, p));
    memcpy(h->bytes, &ch, sizeof ch);
out:
    return status;
}

static int ring__cuda_ipc_open(const ring_ipc_handle_t *h, void **p)
{
    int status = RING_OK;
    cudaIpcMemHandle_t ch;
    *p = NULL;
    memcpy(&ch, h->bytes, sizeof ch);
    /* Peer access enabled on demand: the exporter's GPU may be another. */
    RING_CHECK_CUDA(
        cudaIpcOpenMemHandle(p, ch, cudaIpcMemLazyEnablePeerAccess));
out:
    return status;
}

static int ring__cuda_ipc_close(void *p)
{
    int status = RING_OK;
    if (p) RING_CHECK_CUDA(cudaIpcCloseMemHandle(p));
out:
    return status;
}

static int ring__cuda_ipc_event_create(ring_event_t **e, ring_ipc_handle_t *h)
{
    int status = RING_OK;
    cudaEvent_t ce = NULL;
    cudaIpcEventHandle_t ch;
    *e = NULL;
    memset(h, 0, sizeof *h);
    RING_CHECK_CUDA(cudaEventCreateWithFlags(
        &ce, cudaEventDisableTiming | cudaEventInterprocess));
    RING_CHECK_CUDA(cudaIpcGetEventHandle(&ch, ce));
    memcpy(h->bytes, &ch, sizeof ch);
    *e = (ring_event_t *)(void *)ce;
    ce = NULL;
out:
    if (ce) (void)cudaEventDestroy(ce);
    return status;
}

static int ring__cuda_ipc_event_open(const ring_ipc_handle_t *h,
                                     ring_event_t **e)
{
    int status = RING_OK;
    cudaIpcEventHandle_t ch;
    cudaEvent_t ce = NULL;
    *e = NULL;
    memcpy(&ch, h->bytes, sizeof ch);
    RING_CHECK_CUDA(cudaIpcOpenEventHandle(&ce, ch));
    *e = (ring_event_t *)(void *)ce;
out:
    return status;
}

const ring_dev_t ring__dev_cuda = {
    .name = "cuda",
    .alloc = ring__cuda_alloc,
    .release = ring__cuda_release,
    .alloc_pinned = ring__cuda_alloc_pinned,
    .release_pinned = ring__cuda_release_pinned,
    .owns = ring__cuda_owns,
    .device = ring__cuda_device,
    .set_device = ring__cuda_set_device,
    .stream_create = ring__cuda_stream_create,
    .stream_destroy = ring__cuda_stream_destroy,
    .stream_sync = ring__cuda_stream_sync,
    .event_create = ring__cuda_event_create,
    .event_destroy = ring__cuda_event_destroy,
    .event_record = ring__cuda_event_record,
    .event_sync = ring__cuda_event_sync,
    .event_query = ring__cuda_event_query,
    .stream_wait = ring__cuda_stream_wait,
    .timer_create = ring__cuda_timer_create,
    .elapsed = ring__cuda_elapsed,
    .copy = ring__cuda_copy,
    .copy_batch = ring__cuda_copy_batch,
    .zero = ring__cuda_zero,
    .reduce = ring__cuda_reduce,
    .reduce_n = ring__cuda_reduce_n,
    .divide = ring__cuda_divide,
    .convert = ring__cuda_convert,
    .ipc_export = ring__cuda_ipc_export,
    .ipc_open = ring__cuda_ipc_open,
    .ipc_close = ring__cuda_ipc_close,
    .ipc_event_create = ring__cuda_ipc_event_create,
    .ipc_event_open = ring__cuda_ipc_event_open,
};
