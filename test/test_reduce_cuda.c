/* test/test_reduce_cuda.c: ring__dev_cuda (ring/dev_cuda.c) and its
 * kernels (ring/reduce_cuda.cu) on a real GPU, against the host code they
 * must match bit for bit:
 *
 *   memory, streams and events    alloc, owns, pinned memory, copies each
 *                                 way, zero, an event ordering two streams,
 *                                 timers;
 *   reduce                        vs ring__reduce_host: every dtype x op,
 *                                 divisors 1 and 3, special values and
 *                                 random bit patterns, 16-byte aligned
 *                                 and misaligned pointers, counts with and
 *                                 without a tail, in place;
 *   reduce_n                      vs ring__reduce_host_n, n = 1..5 and 16,
 *                                 aligned, one input misaligned, in place;
 *   divide                        vs ring__divide_host, every dtype;
 *   copy_batch                    hundreds of odd-sized, unaligned copies
 *                                 (more than one launch's worth) and a
 *                                 large one, vs memcpy on a host mirror.
 *
 * NaN payloads may differ between CPU and GPU arithmetic, so floating
 * results compare NaN-ness where both are NaN; everything else is bitwise.
 * Not here: IPC (CUDA refuses to open a handle in the process that made
 * it; the multi-rank device tests cover it). Exits 77 (skip) when no GPU
 * is visible, as on the CI machines; built in CUDA builds only. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>
#include "ring/dev.h"
#include "ring/reduce_op.h"
#include "ring/ring_internal.h"
#include "test/test.h"

enum { MAX_N = RING_DEV_MAX_INPUTS, PAD = 64 };

/* Elements of the long cases: 100003 (no multiple of a block or vector);
 * --quick, for the slow sanitizers of scripts/gpu-check: 4099. */
static size_t COUNT = 100003;
/* --quick also leaves out the one case that makes CUDA fail on purpose:
 * compute-sanitizer reports a failed API call as an error. */
static int quick;

static const ring_dev_t *dev = &ring__dev_cuda;
static ring_stream_t *stream;

/* A failure the rest cannot go on from: the harness's error. */
#define MUST(call)                                                             \
    do {                                                                       \
        int must_rc_ = (call);                                                 \
        if (must_rc_ != RING_OK) {                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
                    ring_strerror(must_rc_));                                  \
            exit(TEST_HARD_ERROR);                                             \
        }                                                                      \
    } while (0)

static void fill(unsigned char *buf, size_t nbytes, unsigned seed)
{
    /* Arbitrary bit patterns: NaNs, infinities and subnormals included. */
    for (size_t i = 0; i < nbytes; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (unsigned char)(seed >> 16);
    }
}

static void store_value(unsigned char *buf, size_t i, ring_dtype_t dtype,
                        double v)
{
    float f = (float)v;
    uint16_t h;
    switch (dtype) {
    case RING_FLOAT32: memcpy(buf + 4 * i, &f, 4); break;
    case RING_FLOAT64: memcpy(buf + 8 * i, &v, 8); break;
    case RING_FLOAT16:
        h = ring__f32_to_f16(f);
        memcpy(buf + 2 * i, &h, 2);
        break;
    case RING_BFLOAT16:
        h = ring__f32_to_bf16(f);
        memcpy(buf + 2 * i, &h, 2);
        break;
    default: break;
    }
}

/* Every pair of special values at the front of a and b (floating types;
 * the integers' random patterns already hit their edges). */
static void put_specials(unsigned char *a, unsigned char *b, size_t count,
                         ring_dtype_t dtype)
{
    static const double specials[] = {
        0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1.0, -1.0, 3.0, 0.1,
        65504.0, 65520.0, 6e-8, -6e-8, 1e-40, 1e-310, 3.4e38, -3.4e38,
        1e308,
    };
    const size_t ns = sizeof specials / sizeof specials[0];
    if (dtype >= RING_INT32) return;
    for (size_t i = 0; i < ns * ns && i < count; i++) {
        store_value(a, i, dtype, specials[i % ns]);
        store_value(b, i, dtype, specials[i / ns]);
    }
}

static int is_nan(const unsigned char *buf, size_t i, ring_dtype_t dtype)
{
    float f;
    double d;
    uint16_t h;
    switch (dtype) {
    case RING_FLOAT32: memcpy(&f, buf + 4 * i, 4); return f != f;
    case RING_FLOAT64: memcpy(&d, buf + 8 * i, 8); return d != d;
    case RING_FLOAT16:
        memcpy(&h, buf + 2 * i, 2);
        return ring__f16_to_f32(h) != ring__f16_to_f32(h);
    case RING_BFLOAT16:
        memcpy(&h, buf + 2 * i, 2);
        return ring__bf16_to_f32(h) != ring__bf16_to_f32(h);
    default: return 0;
    }
}

/* 1 when got and want agree on every element; else a failure naming the
 * first that differs, with what. */
static int same(const unsigned char *got, const unsigned char *want,
                size_t count, ring_dtype_t dtype, const char *what)
{
    size_t esize = ring_dtype_size(dtype);
    for (size_t i = 0; i < count; i++) {
        if (memcmp(got + i * esize, want + i * esize, esize) == 0 ||
            (is_nan(got, i, dtype) && is_nan(want, i, dtype)))
            continue;
        unsigned long long g = 0, w = 0;
        memcpy(&g, got + i * esize, esize);
        memcpy(&w, want + i * esize, esize);
        TEST_FAIL("%s: element %zu of %zu: got 0x%llx, want 0x%llx", what, i,
                  count, g, w);
        return 0;
    }
    return 1;
}

static void to_device(void *d, const void *h, size_t nbytes)
{
    MUST(dev->copy(d, h, nbytes, stream));
    MUST(dev->stream_sync(stream));
}

static void to_host(void *h, const void *d, size_t nbytes)
{
    MUST(dev->copy(h, d, nbytes, stream));
    MUST(dev->stream_sync(stream));
}

/* ---- memory, streams, events ---- */

static void test_basics(void)
{
    enum { N = 1 << 20 };
    void *d = NULL, *pinned = NULL;
    unsigned char *host = malloc(N);
    int device = -1, current = -2;
    ring_stream_t *other = NULL;
    ring_event_t *ev = NULL;
    int done = 0;

    MUST(dev->alloc(&d, N));
    MUST(dev->alloc_pinned(&pinned, N));
    TEST_EQ(dev->owns(d, &device), 1);
    MUST(dev->device(&current));
    TEST_EQ(device, current);
    TEST_EQ(dev->owns((char *)d + N / 2, &device), 1);
    TEST_EQ(dev->owns(host, &device), 0);
    TEST_EQ(dev->owns(pinned, &device), 0);
    TEST_EQ(dev->owns(NULL, &device), 0);
    MUST(dev->set_device(current));

    /* host -> device -> pinned, then zero a middle range. */
    fill(host, N, 7);
    to_device(d, host, N);
    memset(pinned, 0x5a, N);
    to_host(pinned, d, N);
    TEST_EQ(memcmp(pinned, host, N), 0);
    MUST(dev->zero((char *)d + 1001, 3000, stream));
    to_host(pinned, d, N);
    memset(host + 1001, 0, 3000);
    TEST_EQ(memcmp(pinned, host, N), 0);
    MUST(dev->copy(d, host, 0, stream)); /* nothing to do */
    MUST(dev->zero(d, 0, stream));

    /* An event orders two streams: other zeroes d after stream's copy. */
    MUST(dev->stream_create(&other));
    MUST(dev->event_create(&ev));
    MUST(dev->event_sync(ev)); /* never recorded: done at once */
    MUST(dev->event_query(ev, &done));
    TEST_EQ(done, 1);
    fill(host, N, 8);
    MUST(dev->copy(d, host, N, stream));
    MUST(dev->event_record(ev, stream));
    MUST(dev->stream_wait(other, ev));
    MUST(dev->zero(d, N / 2, other));
    MUST(dev->event_record(ev, other));
    MUST(dev->event_sync(ev));
    MUST(dev->event_query(ev, &done));
    TEST_EQ(done, 1);
    to_host(pinned, d, N);
    memset(host, 0, N / 2);
    TEST_EQ(memcmp(pinned, host, N), 0);
    TEST_EQ(cudaPeekAtLastError(), cudaSuccess);

    /* Timers time the copies between their records; an event of
     * event_create's keeps no time, and saying so leaves no error behind
     * for the next call's check (not under the sanitizers: --quick). */
    ring_event_t *t0, *t1;
    float ms = -1;
    MUST(dev->timer_create(&t0));
    MUST(dev->timer_create(&t1));
    MUST(dev->event_record(t0, stream));
    for (int i = 0; i < 20; i++) MUST(dev->copy(d, pinned, N, stream));
    MUST(dev->event_record(t1, stream));
    MUST(dev->event_sync(t1));
    MUST(dev->elapsed(t0, t1, &ms));
    TEST_TRUE(ms > 0 && ms < 10e3);
    if (!quick) TEST_EQ(dev->elapsed(ev, t1, &ms), RING_ERR_CUDA);
    TEST_EQ(cudaPeekAtLastError(), cudaSuccess);
    MUST(dev->event_destroy(t0));
    MUST(dev->event_destroy(t1));

    MUST(dev->event_destroy(ev));
    MUST(dev->event_destroy(NULL));
    MUST(dev->stream_destroy(other));
    MUST(dev->stream_destroy(NULL));
    MUST(dev->release_pinned(pinned));
    MUST(dev->release_pinned(NULL));
    MUST(dev->release(d));
    MUST(dev->release(NULL));
    free(host);
}

/* ---- reduce ---- */

/* Element offsets of dst, a and b from 16-byte aligned bases. */
static const int offsets[][3] = {
    {0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {3, 5, 7},
};
static const size_t counts[] = {0 /* COUNT */, 1, 7, 17, 4099};

static void test_reduce(unsigned char *a, unsigned char *b,
                        unsigned char *want, unsigned char *got,
                        char *const *d)
{
    for (int dt = 0; dt < RING_DTYPE_COUNT; dt++) {
        size_t esize = ring_dtype_size(dt), nbytes = COUNT * esize + PAD;
        fill(a, nbytes, 1u + dt);
        fill(b, nbytes, 100u + dt);
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t count = ci == 0 ? COUNT : counts[ci];
            for (size_t oi = 0; oi < sizeof offsets / sizeof offsets[0];
                 oi++) {
                const int *off = offsets[oi];
                if (ci > 0 && oi > 1 && oi < 4) continue; /* enough */
                unsigned char *ha = a + off[1] * esize,
                              *hb = b + off[2] * esize;
                put_specials(ha, hb, count, dt);
                to_device(d[1] + off[1] * esize, ha, count * esize);
                to_device(d[2] + off[2] * esize, hb, count * esize);
                for (int op = 0; op < RING_OP_COUNT; op++) {
                    if (op == RING_AVERAGE && dt >= RING_INT32) continue;
                    for (int divisor = 1; divisor <= 3; divisor += 2) {
                        char what[160];
                        snprintf(what, sizeof what,
                                 "reduce %s %s divisor %d count %zu offsets "
                                 "%d,%d,%d",
                                 ring_dtype_name(dt), ring_op_name(op),
                                 divisor, count, off[0], off[1], off[2]);
                        ring__reduce_host(want, ha, hb, count, dt, op,
                                          divisor);
                        TEST_EQ(dev->reduce(d[0] + off[0] * esize,
                                            d[1] + off[1] * esize,
                                            d[2] + off[2] * esize, count, dt,
                                            op, divisor, stream),
                                RING_OK);
                        to_host(got, d[0] + off[0] * esize, count * esize);
                        same(got, want, count, dt, what);
                    }
                }
            }
        }
        /* In place, dst = a (the ring's hop), aligned and not. */
        for (int o = 0; o <= 1; o++) {
            char what[96];
            snprintf(what, sizeof what, "reduce %s sum in place offset %d",
                     ring_dtype_name(dt), o);
            ring__reduce_host(want, a + o * esize, b, COUNT, dt, RING_SUM, 1);
            to_device(d[1] + o * esize, a + o * esize, COUNT * esize);
            to_device(d[2], b, COUNT * esize);
            TEST_EQ(dev->reduce(d[1] + o * esize, d[1] + o * esize, d[2],
                                COUNT, dt, RING_SUM, 1, stream),
                    RING_OK);
            to_host(got, d[1] + o * esize, COUNT * esize);
            same(got, want, COUNT, dt, what);
        }
    }
    /* A bad dtype is refused before any launch. */
    TEST_EQ(dev->reduce(d[0], d[1], d[2], 10, RING_DTYPE_COUNT, RING_SUM, 1,
                        stream),
            RING_ERR_ARG);
}

/* ---- reduce_n and divide ---- */

static void test_reduce_n(unsigned char **in, unsigned char *want,
                          unsigned char *got, char *const *d)
{
    static const int ns[] = {1, 2, 3, 4, 5, MAX_N};
    for (int dt = 0; dt < RING_DTYPE_COUNT; dt++) {
        size_t esize = ring_dtype_size(dt), nbytes = COUNT * esize + PAD;
        for (int k = 0; k < MAX_N; k++) fill(in[k], nbytes, 1000u + 31 * k + dt);
        put_specials(in[0], in[1], COUNT, dt);
        put_specials(in[2], in[3], COUNT, dt);
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            int n = ns[ni];
            /* mis: 0 every input aligned; 1 the last one element off;
             * 2 in place (dst is in[0]). */
            for (int mis = 0; mis <= 2; mis++) {
                const void *hin[MAX_N], *din[MAX_N];
                for (int k = 0; k < n; k++) {
                    size_t off = mis == 1 && k == n - 1 ? esize : 0;
                    hin[k] = in[k] + off;
                    din[k] = d[1 + k] + off;
                    to_device(d[1 + k] + off, in[k] + off, COUNT * esize);
                }
                for (int op = 0; op < RING_OP_COUNT; op++) {
                    if (op == RING_AVERAGE && dt >= RING_INT32) continue;
                    int divisor = op == RING_AVERAGE ? n + 1 : 1;
                    char *dst = mis == 2 ? d[1] : d[0];
                    char what[128];
                    snprintf(what, sizeof what,
                             "reduce_n %s %s n %d divisor %d %s",
                             ring_dtype_name(dt), ring_op_name(op), n, divisor,
                             mis == 0 ? "aligned"
                                      : mis == 1 ? "misaligned" : "in place");
                    ring__reduce_host_n(want, hin, n, COUNT, dt, op, divisor);
                    if (mis == 2) /* the device's in[0] is overwritten */
                        to_device(d[1], in[0], COUNT * esize);
                    TEST_EQ(dev->reduce_n(dst, din, n, COUNT, dt, op, divisor,
                                          stream),
                            RING_OK);
                    to_host(got, dst, COUNT * esize);
                    same(got, want, COUNT, dt, what);
                }
            }
        }
        /* divide, every dtype (integers truncate as the host does). */
        for (int divisor = 1; divisor <= 7; divisor += 3) {
            for (int o = 0; o <= 1; o++) {
                char what[96];
                snprintf(what, sizeof what, "divide %s by %d offset %d",
                         ring_dtype_name(dt), divisor, o);
                memcpy(want, in[0] + o * esize, COUNT * esize);
                ring__divide_host(want, COUNT, dt, divisor);
                to_device(d[0] + o * esize, in[0] + o * esize, COUNT * esize);
                TEST_EQ(dev->divide(d[0] + o * esize, COUNT, dt, divisor,
                                    stream),
                        RING_OK);
                to_host(got, d[0] + o * esize, COUNT * esize);
                same(got, want, COUNT, dt, what);
            }
        }
    }
    const void *din[1] = {d[1]};
    TEST_EQ(dev->reduce_n(d[0], din, 0, 10, RING_FLOAT32, RING_SUM, 1, stream),
            RING_ERR_ARG);
    TEST_EQ(dev->reduce_n(d[0], din, MAX_N + 1, 10, RING_FLOAT32, RING_SUM, 1,
                          stream),
            RING_ERR_ARG);
}

/* ---- copy_batch ---- */

static unsigned next_rand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

/* n copies from a random source of nbytes to a destination of nbytes:
 * random sizes (0 to max_size bytes), each offset 16-byte aligned on both
 * sides one time in three, else odd; destinations disjoint, in order with
 * random gaps the kernel must leave alone. Returns how many it made (fewer
 * than n when the destination is full). */
static size_t test_copy_batch_once(size_t n, size_t max_size, unsigned seed,
                                 char *dsrc, char *ddst, unsigned char *src,
                                 unsigned char *want, unsigned char *got,
                                 size_t nbytes)
{
    ring_copy_t *copies = calloc(n ? n : 1, sizeof *copies);
    size_t at = 0, made = 0;
    char what[96];
    fill(src, nbytes, seed);
    memset(want, 0xab, nbytes);
    to_device(dsrc, src, nbytes);
    to_device(ddst, want, nbytes);
    for (size_t c = 0; c < n; c++) {
        size_t size = max_size ? next_rand(&seed) % (max_size + 1) : 0;
        int aligned = next_rand(&seed) % 3 == 0;
        at += next_rand(&seed) % 24;
        if (aligned) at = (at + 15) & ~(size_t)15;
        if (at + size > nbytes) break;
        size_t from = next_rand(&seed) % (nbytes - size + 1);
        if (aligned) from &= ~(size_t)15;
        copies[made].dst = ddst + at;
        copies[made].src = dsrc + from;
        copies[made].nbytes = size;
        memcpy(want + at, src + from, size);
        made++;
        at += size;
    }
    TEST_EQ(dev->copy_batch(copies, made, stream), RING_OK);
    memset(copies, 0, made * sizeof *copies); /* read before it returned */
    to_host(got, ddst, nbytes);
    snprintf(what, sizeof what, "copy_batch of %zu (max %zu bytes)", made,
             max_size);
    same(got, want, nbytes, RING_UINT8, what);
    free(copies);
    return made;
}

/* Its own 1 MiB buffers, whatever COUNT is: 1000 copies of up to 500
 * bytes must fit, so that the batch takes several launches. */
static void test_copy_batch(void)
{
    enum { NBYTES = 1 << 20 };
    static const struct {
        size_t n, max_size;
        int all; /* every copy fits: the batch is n long */
    } cases[] = {
        {0, 0, 1},     {1, 1000, 1},  {3, 15, 1},    {160, 700, 1},
        {161, 700, 1}, {1000, 500, 1}, {2, NBYTES / 2 - 64, 0},
    };
    char *dsrc = NULL, *ddst = NULL;
    unsigned char *src = malloc(NBYTES), *want = malloc(NBYTES),
                  *got = malloc(NBYTES);
    if (!src || !want || !got) exit(TEST_HARD_ERROR);
    MUST(dev->alloc((void **)&dsrc, NBYTES));
    MUST(dev->alloc((void **)&ddst, NBYTES));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t made = test_copy_batch_once(cases[i].n, cases[i].max_size,
                                           (unsigned)i + 1, dsrc, ddst, src,
                                           want, got, NBYTES);
        if (cases[i].all) TEST_EQ(made, cases[i].n);
    }
    MUST(dev->release(dsrc));
    MUST(dev->release(ddst));
    free(src);
    free(want);
    free(got);
}

/* convert, float32 to each half type and back, bit for bit against the
 * host's (ring__convert_host, the same elements), specials included. */
static void test_convert(unsigned char *h32, unsigned char *want,
                         unsigned char *got, char **d)
{
    for (int dt = RING_FLOAT16; dt <= RING_BFLOAT16; dt++) {
        fill(h32, COUNT * 4, 77u + (unsigned)dt);
        to_device(d[0], h32, COUNT * 4);
        MUST(dev->convert(d[1], (ring_dtype_t)dt, d[0], RING_FLOAT32, COUNT,
                          stream));
        MUST(dev->convert(d[2], RING_FLOAT32, d[1], (ring_dtype_t)dt, COUNT,
                          stream));
        to_host(got, d[2], COUNT * 4);
        ring__convert_host(want + COUNT * 4, (ring_dtype_t)dt, h32,
                           RING_FLOAT32, COUNT);
        ring__convert_host(want, RING_FLOAT32, want + COUNT * 4,
                           (ring_dtype_t)dt, COUNT);
        same(got, want, COUNT, RING_FLOAT32,
             dt == RING_FLOAT16 ? "convert via f16" : "convert via bf16");
    }
    TEST_EQ(dev->convert(d[1], RING_INT32, d[0], RING_FLOAT32, 1, stream),
            RING_ERR_ARG);
}

int main(int argc, char **argv)
{
    int ndev = 0;
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (quick) COUNT = 4099;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        TEST_SKIP("no CUDA device visible");
    TEST_TRUE(strcmp(dev->name, "cuda") == 0);
    MUST(dev->stream_create(&stream));

    size_t max_bytes = (size_t)COUNT * 8 + PAD;
    unsigned char *want = malloc(max_bytes), *got = malloc(max_bytes);
    unsigned char *in[MAX_N];
    char *d[MAX_N + 1];
    if (!want || !got) return TEST_HARD_ERROR;
    for (int k = 0; k < MAX_N; k++)
        if (!(in[k] = malloc(max_bytes))) return TEST_HARD_ERROR;
    for (int k = 0; k <= MAX_N; k++) MUST(dev->alloc((void **)&d[k], max_bytes));

    test_basics();
    test_reduce(in[0], in[1], want, got, d);
    test_reduce_n(in, want, got, d);
    test_copy_batch();
    test_convert(in[0], want, got, d);
    TEST_EQ(cudaDeviceSynchronize(), cudaSuccess);

    for (int k = 0; k <= MAX_N; k++) MUST(dev->release(d[k]));
    for (int k = 0; k < MAX_N; k++) free(in[k]);
    MUST(dev->stream_destroy(stream));
    free(want);
    free(got);
    printf("test_reduce_cuda: %s\n", test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
