/* ring/mem.c: memory kinds. Each kind is a table of the few things the
 * algorithms do to data (copy, zero, reduce two inputs or N, divide, get
 * scratch), so pipeline.c, recursive.c and shm.c are written once for
 * every kind: host memory, and device memory for an MPI that reads it
 * (CUDA-aware) or a rank alone, whose operations run on the device and
 * are waited for. Otherwise device buffers are staged (staged.c) or read
 * across the node (ipc.c), and the algorithms see host memory. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"
#if HVD_HAVE_CUDA && __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's MPIX_Query_cuda_support; after mpi.h */
#endif

/* Host copies of 2 KiB and more go through a loop of vector loads and
 * stores rather than memcpy: glibc copies from 2 KiB up to the size of
 * the L2 cache with `rep movsb`, which on the AMD virtual machines we
 * measure on ran at a third to a quarter of a vector loop's speed, so
 * that the window's allreduce of private buffers was 2-3x slower below
 * 512 KiB segments than above them (bench/README.md). Smaller copies
 * stay with memcpy, whose vector code for them is fast; the loop takes
 * 32-byte vectors where the CPU has AVX, else SSE2's 16. */
enum { RING__COPY_LOOP_MIN = 2048 };

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RING__COPY_LOOP(isa, type, load, store)                               \
    __attribute__((target(isa))) static size_t ring__copy_##type(             \
        char *d, const char *s, size_t nbytes)                                 \
    {                                                                          \
        const size_t w = sizeof(type);                                         \
        size_t i = 0;                                                          \
        for (; i + 4 * w <= nbytes; i += 4 * w) {                              \
            type a = load((const type *)(s + i));                              \
            type b = load((const type *)(s + i + w));                          \
            type c = load((const type *)(s + i + 2 * w));                      \
            type e = load((const type *)(s + i + 3 * w));                      \
            store((type *)(d + i), a);                                         \
            store((type *)(d + i + w), b);                                     \
            store((type *)(d + i + 2 * w), c);                                 \
            store((type *)(d + i + 3 * w), e);                                 \
        }                                                                      \
        return i;                                                              \
    }
RING__COPY_LOOP("sse2", __m128i, _mm_loadu_si128, _mm_storeu_si128)
RING__COPY_LOOP("avx", __m256i, _mm256_loadu_si256, _mm256_storeu_si256)
#undef RING__COPY_LOOP

static void ring__host_copy(void *dst, const void *src, size_t nbytes)
{
    if (nbytes < RING__COPY_LOOP_MIN) {
        memcpy(dst, src, nbytes);
        return;
    }
    /* A bit of a table libgcc fills at start-up. */
    size_t done = __builtin_cpu_supports("avx")
                      ? ring__copy___m256i(dst, src, nbytes)
                      : ring__copy___m128i(dst, src, nbytes);
    memcpy((char *)dst + done, (const char *)src + done, nbytes - done);
}
#else
static void ring__host_copy(void *dst, const void *src, size_t nbytes)
{
    memcpy(dst, src, nbytes);
}
#endif

static void ring__host_zero(void *dst, size_t nbytes)
{
    memset(dst, 0, nbytes);
}

static void *ring__host_alloc(size_t nbytes)
{
    return malloc(nbytes ? nbytes : 1);
}

const ring__mem_ops_t ring__mem_host = {
    .name = "host",
    .copy = ring__host_copy,
    .zero = ring__host_zero,
    .reduce = ring__reduce_host,
    .reduce_n = ring__reduce_host_n,
    .divide = ring__divide_host,
    .alloc = ring__host_alloc,
    .release = free,
};

const ring__mem_ops_t *ring__mem_of(const void *p, const char **why)
{
    int device, kind = ring__memory_kind(p, &device);
    if (kind > 0)
        *why = "a buffer is device memory, which this call does not take "
               "(ring_ctx_allreduce, broadcast, allgather and "
               "reduce_scatter do)";
    else if (kind < 0)
        *why = ring__kind_unknown;
    return kind == 0 ? &ring__mem_host : NULL;
}

/* ---- device memory, operations waited for ---- */

/* The calls without a context of their own (ring_allreduce's wrapper)
 * share one stream, made by the first that binds; one that cannot make
 * it fails, and the next tries again. */
static pthread_mutex_t ring__work_mu = PTHREAD_MUTEX_INITIALIZER;
static ring_stream_t *ring__work;
static __thread ring_stream_t *ring__bound; /* the call's */
static __thread int ring__device_status;

static int ring__shared_work(ring_stream_t **work)
{
    int status = RING_OK;
    pthread_mutex_lock(&ring__work_mu);
    if (!ring__work) status = ring_dev()->stream_create(&ring__work);
    if (status != RING_OK) ring__work = NULL;
    *work = ring__work;
    pthread_mutex_unlock(&ring__work_mu);
    return status;
}

int ring__ctx_work(ring_ctx_t *ctx, ring_stream_t **work)
{
    int status = ctx->work ? RING_OK : ring_dev()->stream_create(&ctx->work);
    *work = ctx->work;
    return status;
}

int ring__mem_device_bind(ring_ctx_t *ctx)
{
    (void)ring__mem_device_status(); /* nothing left from before */
    int status = ctx->wrapped ? ring__shared_work(&ring__bound)
                              : ring__ctx_work(ctx, &ring__bound);
    if (status != RING_OK) ring__bound = NULL;
    return status;
}

/* Keeps the first failure; runs the stream dry after each operation. */
static void ring__device_done(int status, ring_stream_t *s)
{
    if (status == RING_OK) status = ring_dev()->stream_sync(s);
    if (ring__device_status == RING_OK) ring__device_status = status;
}

/* The bound stream (ring__begin binds it before any operation). */
static ring_stream_t *ring__work_stream(void)
{
    if (!ring__bound && ring__device_status == RING_OK)
        ring__device_status = RING_ERR_CUDA;
    return ring__bound;
}

int ring__mem_device_status(void)
{
    int status = ring__device_status;
    ring__device_status = RING_OK;
    return status;
}

static void ring__device_copy(void *dst, const void *src, size_t nbytes)
{
    ring_stream_t *s = ring__work_stream();
    if (s) ring__device_done(ring_dev()->copy(dst, src, nbytes, s), s);
}

static void ring__device_zero(void *dst, size_t nbytes)
{
    ring_stream_t *s = ring__work_stream();
    if (s) ring__device_done(ring_dev()->zero(dst, nbytes, s), s);
}

static void ring__device_reduce(void *dst, const void *a, const void *b,
                                size_t count, ring_dtype_t dtype,
                                ring_op_t op, int divisor)
{
    ring_stream_t *s = ring__work_stream();
    if (s)
        ring__device_done(
            ring_dev()->reduce(dst, a, b, count, dtype, op, divisor, s), s);
}

static void ring__device_reduce_n(void *dst, const void *const *in, int n,
                                  size_t count, ring_dtype_t dtype,
                                  ring_op_t op, int divisor)
{
    ring_stream_t *s = ring__work_stream();
    if (s)
        ring__device_done(
            ring_dev()->reduce_n(dst, in, n, count, dtype, op, divisor, s),
            s);
}

static void ring__device_divide(void *buf, size_t count, ring_dtype_t dtype,
                                int divisor)
{
    ring_stream_t *s = ring__work_stream();
    if (s)
        ring__device_done(ring_dev()->divide(buf, count, dtype, divisor, s),
                          s);
}

static void *ring__device_alloc(size_t nbytes)
{
    void *p = NULL;
    return ring_dev()->alloc(&p, nbytes ? nbytes : 1) == RING_OK ? p : NULL;
}

static void ring__device_release(void *p)
{
    if (p) ring_dev()->release(p);
}

const ring__mem_ops_t ring__mem_device = {
    .name = "device",
    .copy = ring__device_copy,
    .zero = ring__device_zero,
    .reduce = ring__device_reduce,
    .reduce_n = ring__device_reduce_n,
    .divide = ring__device_divide,
    .alloc = ring__device_alloc,
    .release = ring__device_release,
};

int ring__cuda_aware(const ring_dev_t *dev)
{
    const ring__tuning_t *tuning;
    ring__tuning(&tuning);
    if (tuning->cuda_aware >= 0) return tuning->cuda_aware;
#if HVD_HAVE_CUDA && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return dev == &ring__dev_cuda && MPIX_Query_cuda_support();
#else
    (void)dev;
    return 0;
#endif
}

/* ---- pieces laid end to end (ring__io_t) ---- */

/* The piece holding byte `at` of the whole: the last whose start is at or
 * before it. */
static size_t ring__io_piece(const ring__io_t *io, size_t at)
{
    size_t lo = 0, hi = io->npieces;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (io->starts[mid] <= at) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Where piece p's data lies on one side: its sendbuf (out 0) or recvbuf
 * (out 1); NULL when it has none. */
static char *ring__io_side(const ring__io_t *io, size_t p, int out)
{
    return out ? io->pieces[p].recvbuf : (char *)io->pieces[p].sendbuf;
}

/* Pieces whose buffers follow each other merge into one run, as tensors
 * carved one after another from a slab do, so that a copy moves the
 * whole run at once: a copy per 4 KiB tensor made the window's gather
 * twice as slow as one copy of the same bytes. */
size_t ring__io_span(const ring__io_t *io, size_t at, size_t nbytes, int out,
                     char **data)
{
    if (!io->pieces) {
        *data = (out ? (char *)io->recvbuf : (char *)io->sendbuf) + at;
        return nbytes;
    }
    size_t p = ring__io_piece(io, at), end = io->starts[p + 1];
    char *side = ring__io_side(io, p, out);
    *data = side ? side + (at - io->starts[p]) : NULL;
    for (size_t q = p + 1; q < io->npieces && end - at < nbytes; q++) {
        if (io->starts[q + 1] == io->starts[q]) continue; /* holds nothing */
        char *next = ring__io_side(io, q, out);
        if (next != (*data ? *data + (end - at) : NULL)) break;
        end = io->starts[q + 1];
    }
    return end - at < nbytes ? end - at : nbytes;
}


void ring__io_read(const ring__io_t *io, size_t at, char *dst, size_t nbytes,
                   void (*copy)(void *, const void *, size_t))
{
    for (size_t len; nbytes > 0; at += len, dst += len, nbytes -= len) {
        char *run;
        len = ring__io_span(io, at, nbytes, 0, &run);
        if (run)
            copy(dst, run, len);
        else
            memset(dst, 0, len);
    }
}

void ring__io_write(const ring__io_t *io, size_t at, const char *src,
                    size_t nbytes, void (*copy)(void *, const void *, size_t))
{
    for (size_t len; nbytes > 0; at += len, src += len, nbytes -= len) {
        char *run;
        len = ring__io_span(io, at, nbytes, 1, &run);
        if (run) copy(run, src, len);
    }
}
