/* test/test_dev.c: the emulated device (ring/dev_emu.c) in one process,
 * through ring_dev() as the library reaches it.
 *
 *   test_dev plain|delay|guard   HVD_DEVICE_EMULATE=1, delay:7 or guard,
 *                                then every check below
 *   test_dev bad                 a value that is none of those: no device,
 *                                and a message naming the variable
 *
 * Memory and ownership, round trips, order on one stream, two streams
 * handing work over with an event, batched copies, the reductions against
 * ring__reduce_host on the same data (and refused on host memory, as a
 * kernel's operands), event_query, timers, and where host code may read
 * device memory (guard mode: a forked child that does dies of SIGSEGV).
 * In delay mode the same hand-over without stream_wait must go wrong at
 * least once: that checks the delay mode itself.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ring/copy_batch.h"
#include "ring/dev.h"
#include "ring/ring_internal.h"
#include "test/capture.h"
#include "test/test.h"

static const ring_dev_t *dev;
static const char *mode;

#define DEV_OK(call) TEST_EQ((call), RING_OK)

static uint64_t rng_state = 12345;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static void *dev_alloc(size_t nbytes)
{
    void *p = NULL;
    DEV_OK(dev->alloc(&p, nbytes));
    if (!p) {
        fprintf(stderr, "alloc of %zu bytes failed\n", nbytes);
        exit(TEST_HARD_ERROR);
    }
    return p;
}

/* Device memory to host, synchronously, on a stream of its own. */
static void to_host(void *dst, const void *src, size_t nbytes)
{
    ring_stream_t *s;
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->copy(dst, src, nbytes, s));
    DEV_OK(dev->stream_sync(s));
    DEV_OK(dev->stream_destroy(s));
}

static void to_dev(void *dst, const void *src, size_t nbytes)
{
    to_host(dst, src, nbytes); /* any direction */
}

static void test_memory(void)
{
    int ordinal = -1, local = 0;
    void *p = dev_alloc(1000), *pinned = NULL, *none = &local;
    TEST_EQ(dev->owns(p, &ordinal), 1);
    TEST_EQ(ordinal, 0);
    TEST_EQ(dev->owns((char *)p + 999, &ordinal), 1);
    TEST_EQ(dev->owns((char *)p + 1000, &ordinal), 0);
    TEST_EQ(dev->owns(&local, &ordinal), 0);
    TEST_EQ(ring_is_device_memory(p), 1);
    TEST_EQ(ring_is_device_memory(&local), 0);
    DEV_OK(dev->alloc_pinned(&pinned, 4096));
    TEST_EQ(dev->owns(pinned, &ordinal), 0);
    memset(pinned, 1, 4096); /* host code may touch it, in every mode */
    DEV_OK(dev->release_pinned(pinned));
    TEST_EQ(dev->release((char *)p + 1), RING_ERR_ARG);
    DEV_OK(dev->release(p));
    TEST_EQ(dev->owns(p, &ordinal), 0);
    DEV_OK(dev->release(NULL));
    DEV_OK(dev->alloc(&none, 0));
    TEST_TRUE(none == NULL);
    DEV_OK(dev->device(&ordinal));
    TEST_EQ(ordinal, 0);
    DEV_OK(dev->set_device(0));
    TEST_EQ(dev->set_device(1), RING_ERR_ARG);
}

/* host -> device -> device -> host, and zero, on one stream. */
static void test_round_trip(void)
{
    enum { N = 100003 };
    unsigned char *in = malloc(N), *out = malloc(N);
    unsigned char *d1 = dev_alloc(N), *d2 = dev_alloc(N);
    ring_stream_t *s;
    for (size_t i = 0; i < N; i++)
        in[i] = (unsigned char)rnd();
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->copy(d1, in, N, s));
    DEV_OK(dev->copy(d2, d1, N, s));
    DEV_OK(dev->copy(out, d2, N, s));
    DEV_OK(dev->stream_sync(s));
    TEST_EQ(memcmp(in, out, N), 0);
    DEV_OK(dev->zero(d2 + 10, 20, s));
    DEV_OK(dev->copy(out, d2, N, s));
    DEV_OK(dev->stream_sync(s));
    memset(in + 10, 0, 20);
    TEST_EQ(memcmp(in, out, N), 0);
    TEST_EQ(dev->copy(d1 + 1, in, N, s), RING_ERR_ARG); /* past the end */
    DEV_OK(dev->stream_destroy(s));
    DEV_OK(dev->release(d1));
    DEV_OK(dev->release(d2));
    free(in);
    free(out);
}

/* Many operations queued on one stream run in order: a running sum and a
 * chain of copies, each step depending on the one before. */
static void test_order(void)
{
    enum { STEPS = 200, CHAIN = 8 };
    int32_t one = 1, sum = -1, *acc = dev_alloc(sizeof(int32_t));
    int32_t *ones = dev_alloc(sizeof(int32_t));
    int32_t *chain[CHAIN], value = 4242, got = 0;
    ring_stream_t *s;
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->zero(acc, sizeof(int32_t), s));
    DEV_OK(dev->copy(ones, &one, sizeof(one), s));
    for (int i = 0; i < STEPS; i++)
        DEV_OK(dev->reduce(acc, acc, ones, 1, RING_INT32, RING_SUM, 1, s));
    DEV_OK(dev->copy(&sum, acc, sizeof(sum), s));
    for (int i = 0; i < CHAIN; i++)
        chain[i] = dev_alloc(sizeof(int32_t));
    DEV_OK(dev->copy(chain[0], &value, sizeof(value), s));
    for (int i = 1; i < CHAIN; i++)
        DEV_OK(dev->copy(chain[i], chain[i - 1], sizeof(int32_t), s));
    DEV_OK(dev->copy(&got, chain[CHAIN - 1], sizeof(got), s));
    DEV_OK(dev->stream_sync(s));
    TEST_EQ(sum, STEPS);
    TEST_EQ(got, value);
    DEV_OK(dev->stream_destroy(s));
    for (int i = 0; i < CHAIN; i++)
        DEV_OK(dev->release(chain[i]));
    DEV_OK(dev->release(acc));
    DEV_OK(dev->release(ones));
}

/* Stream a fills d in many steps and records e; stream b copies d out,
 * after stream_wait(b, e) when `wait`. 1 when the copy saw every step. */
static int hand_over(int wait)
{
    enum { N = 4096, STEPS = 20 };
    static int32_t steps[STEPS][N], out[N];
    int32_t *d = dev_alloc(N * sizeof(int32_t));
    ring_stream_t *a, *b;
    ring_event_t *e;
    DEV_OK(dev->stream_create(&a));
    DEV_OK(dev->stream_create(&b));
    DEV_OK(dev->event_create(&e));
    for (int k = 0; k < STEPS; k++)
        for (int i = 0; i < N; i++)
            steps[k][i] = k * N + i;
    DEV_OK(dev->zero(d, N * sizeof(int32_t), a));
    for (int k = 0; k < STEPS; k++)
        DEV_OK(dev->copy(d, steps[k], N * sizeof(int32_t), a));
    DEV_OK(dev->event_record(e, a));
    if (wait) DEV_OK(dev->stream_wait(b, e));
    DEV_OK(dev->copy(out, d, N * sizeof(int32_t), b));
    DEV_OK(dev->stream_sync(b));
    DEV_OK(dev->stream_sync(a));
    int right = memcmp(out, steps[STEPS - 1], sizeof(out)) == 0;
    DEV_OK(dev->event_destroy(e));
    DEV_OK(dev->stream_destroy(a));
    DEV_OK(dev->stream_destroy(b));
    DEV_OK(dev->release(d));
    return right;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Delay mode sleeps before each operation: 0..200 us, 100 on average, so
 * 100 operations of nothing take about 10 ms and surely more than 2. */
static void test_delay_sleeps(void)
{
    enum { OPS = 100 };
    char byte;
    ring_stream_t *s;
    DEV_OK(dev->stream_create(&s));
    double start = now_s();
    for (int i = 0; i < OPS; i++)
        DEV_OK(dev->zero(&byte, 1, s));
    DEV_OK(dev->stream_sync(s));
    double ms = 1e3 * (now_s() - start);
    printf("delay: %d operations took %.1f ms\n", OPS, ms);
    TEST_TRUE(ms > 2.0);
    DEV_OK(dev->stream_destroy(s));
}

/* The hand-over is right with the wait, every time; without it, delay
 * mode must make it go wrong at least once (a race that plain mode may
 * also lose, but not reliably). */
static void test_two_streams(void)
{
    enum { TRIES = 10 };
    int wrong_without = 0;
    for (int t = 0; t < TRIES; t++)
        TEST_EQ(hand_over(1), 1);
    if (strcmp(mode, "delay") != 0) return;
    test_delay_sleeps();
#if defined(__SANITIZE_THREAD__)
    return; /* the race below is the point: ThreadSanitizer would say so */
#endif
    for (int t = 0; t < TRIES; t++)
        wrong_without += !hand_over(0);
    printf("delay: without stream_wait, %d of %d hand-overs wrong\n",
           wrong_without, TRIES);
    TEST_TRUE(wrong_without > 0);
}

/* Many copies of odd sizes and alignments, packed from one slab into
 * another and compared with memcpy on host copies of the same slabs. */
static void test_copy_batch(void)
{
    enum { NCOPIES = 301, SLAB = 1 << 20 };
    static ring_copy_t copies[NCOPIES];
    unsigned char *src_h = malloc(SLAB), *want = calloc(1, SLAB);
    unsigned char *got = malloc(SLAB);
    unsigned char *src = dev_alloc(SLAB), *dst = dev_alloc(SLAB);
    ring_stream_t *s;
    size_t at = 0;
    for (size_t i = 0; i < SLAB; i++)
        src_h[i] = (unsigned char)rnd();
    for (size_t c = 0; c < NCOPIES; c++) {
        size_t nbytes = c % 7 == 0 ? 0 : rnd() % 2500;
        size_t from = rnd() % (SLAB - nbytes);
        if (c % 3 == 0) from &= ~(size_t)15; /* some 16-byte aligned pairs */
        if (c % 3 == 0) at = (at + 15) & ~(size_t)15;
        copies[c] = (ring_copy_t){dst + at, src + from, nbytes};
        memcpy(want + at, src_h + from, nbytes);
        at += nbytes + rnd() % 3;
    }
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->copy(src, src_h, SLAB, s));
    DEV_OK(dev->zero(dst, SLAB, s));
    DEV_OK(dev->copy_batch(copies, NCOPIES, s));
    memset(copies, 0, sizeof(copies)); /* read when queued, not later */
    DEV_OK(dev->copy(got, dst, SLAB, s));
    DEV_OK(dev->stream_sync(s));
    TEST_EQ(memcmp(got, want, SLAB), 0);
    DEV_OK(dev->copy_batch(copies, 0, s));
    DEV_OK(dev->stream_destroy(s));
    DEV_OK(dev->release(src));
    DEV_OK(dev->release(dst));
    free(src_h);
    free(want);
    free(got);
}

/* copy_batch's body (ring/copy_batch.h) on host memory, run for every
 * thread of grids of many shapes, the CUDA launcher's among them: copies
 * of several chunks, of one, of a chunk's size, none, aligned or not; the
 * result is memcpy's, and the bytes between copies are left alone. And a
 * large copy is spread over the blocks: block 1 of 4 alone copies the
 * first copy's second chunk, not its first (with a block a copy, as
 * before, block 1 copied the second copy and the grids still passed). */
static void test_copy_batch_grids(void)
{
    enum { CHUNK = RING__COPY_CHUNK, NCOPIES = 9, SLAB = 12 * CHUNK };
    static const size_t sizes[NCOPIES] = {
        3 * CHUNK + 5, CHUNK, 0, CHUNK - 1, 17, 2 * CHUNK, 1, 4096, 33};
    static const size_t grids[][2] = {{1, 1},   {1, 512}, {3, 5},
                                      {7, 32},  {13, 7},  {64, 128},
                                      {1024, 512}};
    unsigned char *src = malloc(SLAB), *dst = malloc(SLAB),
                  *want = malloc(SLAB);
    ring_copy_t copies[NCOPIES];
    size_t at = 0, chunks = 0;
    for (size_t i = 0; i < SLAB; i++) src[i] = (unsigned char)rnd();
    memset(want, 0xab, SLAB);
    for (size_t c = 0; c < NCOPIES; c++) {
        size_t from = (rnd() % (SLAB - sizes[c])) & ~(size_t)(c % 2 ? 0 : 15);
        at = c % 2 ? at + 3 : (at + 15) & ~(size_t)15;
        copies[c] = (ring_copy_t){dst + at, src + from, sizes[c]};
        memcpy(want + at, src + from, sizes[c]);
        at += sizes[c];
        chunks += ring__copy_chunks(sizes[c]);
    }
    TEST_TRUE(at <= SLAB);
    TEST_EQ(ring__copy_batch_blocks(copies, NCOPIES, 1024), chunks);
    TEST_EQ(ring__copy_batch_blocks(copies, NCOPIES, 4), (size_t)4);
    TEST_EQ(ring__copy_batch_blocks(copies, 0, 4), (size_t)1);
    for (size_t g = 0; g < sizeof grids / sizeof *grids; g++) {
        memset(dst, 0xab, SLAB);
        for (size_t b = 0; b < grids[g][0]; b++)
            for (size_t t = 0; t < grids[g][1]; t++)
                ring__copy_batch_thread(copies, NCOPIES, b, grids[g][0], t,
                                        grids[g][1]);
        if (memcmp(dst, want, SLAB) != 0)
            TEST_FAIL("copy_batch's body over %zu blocks of %zu threads: "
                      "not memcpy's bytes", grids[g][0], grids[g][1]);
    }
    memset(dst, 0xab, SLAB);
    for (size_t t = 0; t < 64; t++)
        ring__copy_batch_thread(copies, NCOPIES, 1, 4, t, 64);
    size_t first = (size_t)((unsigned char *)copies[0].dst - dst);
    TEST_EQ(memcmp(dst + first, want + first, CHUNK) != 0, 1);
    TEST_EQ(memcmp(dst + first + CHUNK, want + first + CHUNK, CHUNK), 0);
    free(src);
    free(dst);
    free(want);
}

/* Values that make sense in every dtype: small, some fractional. */
static void fill(void *buf, size_t count, ring_dtype_t dtype)
{
    for (size_t i = 0; i < count; i++) {
        float v = (float)((int)(rnd() % 200) - 100) / 8.0f;
        switch (dtype) {
        case RING_FLOAT32:
            ((float *)buf)[i] = v;
            break;
        case RING_FLOAT64:
            ((double *)buf)[i] = v / 3.0;
            break;
        case RING_FLOAT16:
            ((uint16_t *)buf)[i] = ring_f32_to_f16(v);
            break;
        case RING_BFLOAT16:
            ((uint16_t *)buf)[i] = ring_f32_to_bf16(v);
            break;
        case RING_INT32:
            ((int32_t *)buf)[i] = (int32_t)rnd();
            break;
        case RING_INT64:
            ((int64_t *)buf)[i] = (int64_t)rnd() << 20;
            break;
        default:
            ((uint8_t *)buf)[i] = (uint8_t)rnd();
            break;
        }
    }
}

/* reduce, reduce_n (3 inputs, in place on the first) and divide on the
 * device, bit for bit against the host functions on the same inputs. */
static void check_reductions(ring_dtype_t dtype, ring_op_t op)
{
    enum { COUNT = 1031, NIN = 3 };
    size_t nbytes = COUNT * ring_dtype_size(dtype);
    int divisor = op == RING_AVERAGE ? 3 : 1;
    int floating = dtype <= RING_BFLOAT16;
    unsigned char *h[NIN], *d[NIN], *want = malloc(nbytes);
    unsigned char *got = malloc(nbytes), *dout = dev_alloc(nbytes);
    ring_stream_t *s;
    DEV_OK(dev->stream_create(&s));
    for (int k = 0; k < NIN; k++) {
        h[k] = malloc(nbytes);
        d[k] = dev_alloc(nbytes);
        fill(h[k], COUNT, dtype);
        DEV_OK(dev->copy(d[k], h[k], nbytes, s));
    }
    DEV_OK(dev->reduce(dout, d[0], d[1], COUNT, dtype, op, divisor, s));
    DEV_OK(dev->copy(got, dout, nbytes, s));
    DEV_OK(dev->stream_sync(s));
    ring__reduce_host(want, h[0], h[1], COUNT, dtype, op, divisor);
    if (memcmp(got, want, nbytes) != 0)
        TEST_FAIL("reduce dt=%s op=%s differs from the host's",
                  ring_dtype_name(dtype), ring_op_name(op));
    DEV_OK(dev->reduce_n(d[0], (const void *const *)d, NIN, COUNT, dtype, op,
                         divisor, s));
    DEV_OK(dev->copy(got, d[0], nbytes, s));
    DEV_OK(dev->stream_sync(s));
    ring__reduce_host_n(want, (const void *const *)h, NIN, COUNT, dtype, op,
                        divisor);
    if (memcmp(got, want, nbytes) != 0)
        TEST_FAIL("reduce_n dt=%s op=%s differs from the host's",
                  ring_dtype_name(dtype), ring_op_name(op));
    if (floating && op == RING_AVERAGE) {
        DEV_OK(dev->divide(d[1], COUNT, dtype, 7, s));
        DEV_OK(dev->copy(got, d[1], nbytes, s));
        DEV_OK(dev->stream_sync(s));
        ring__divide_host(h[1], COUNT, dtype, 7);
        if (memcmp(got, h[1], nbytes) != 0)
            TEST_FAIL("divide dt=%s differs from the host's",
                      ring_dtype_name(dtype));
    }
    DEV_OK(dev->stream_destroy(s));
    for (int k = 0; k < NIN; k++) {
        DEV_OK(dev->release(d[k]));
        free(h[k]);
    }
    DEV_OK(dev->release(dout));
    free(want);
    free(got);
}

static void test_reductions(void)
{
    const void *too_many[RING_DEV_MAX_INPUTS + 1] = {0};
    for (int dt = 0; dt < RING_DTYPE_COUNT; dt++)
        for (int op = 0; op < RING_OP_COUNT; op++)
            if (op != RING_AVERAGE || dt <= RING_BFLOAT16)
                check_reductions((ring_dtype_t)dt, (ring_op_t)op);
    TEST_EQ(dev->reduce_n(NULL, too_many, RING_DEV_MAX_INPUTS + 1, 0,
                          RING_FLOAT32, RING_SUM, 1, NULL),
            RING_ERR_ARG);
    /* A kernel's operands are device memory (CUDA's fault on host memory
     * on a node without HMM); a copy takes host memory. */
    float host[4] = {1, 2, 3, 4};
    float *d = dev_alloc(sizeof host);
    ring_stream_t *s;
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->copy(d, host, sizeof host, s));
    TEST_SAYS(dev->reduce(d, host, d, 4, RING_FLOAT32, RING_SUM, 1, s),
              RING_ERR_ARG, "reduce: a ");
    TEST_SAYS(dev->reduce(host, d, d, 4, RING_FLOAT32, RING_SUM, 1, s),
              RING_ERR_ARG, "is host memory: a kernel reads and writes");
    const void *in[2] = {d, host};
    TEST_SAYS(dev->reduce_n(d, in, 2, 4, RING_FLOAT32, RING_SUM, 1, s),
              RING_ERR_ARG, "reduce_n: an input");
    ring_copy_t batch = {host, d, sizeof host};
    TEST_SAYS(dev->copy_batch(&batch, 1, s), RING_ERR_ARG,
              "copy_batch: a destination");
    DEV_OK(dev->stream_destroy(s));
    DEV_OK(dev->release(d));
}

/* convert, float32 to each half type and back, bit for bit against the
 * host's array conversions; other pairs refused. */
static void test_convert(void)
{
    enum { COUNT = 1027 };
    float in[COUNT], back[COUNT], want_back[COUNT];
    uint16_t half[COUNT], want[COUNT];
    fill(in, COUNT, RING_FLOAT32);
    in[0] = 65520.0f;  /* rounds to float16's infinity */
    in[1] = 1e-7f;     /* a float16 subnormal */
    float *d32 = dev_alloc(sizeof in);
    uint16_t *d16 = dev_alloc(sizeof half);
    ring_stream_t *s;
    DEV_OK(dev->stream_create(&s));
    for (int dt = RING_FLOAT16; dt <= RING_BFLOAT16; dt++) {
        DEV_OK(dev->copy(d32, in, sizeof in, s));
        DEV_OK(dev->convert(d16, (ring_dtype_t)dt, d32, RING_FLOAT32, COUNT,
                            s));
        DEV_OK(dev->convert(d32, RING_FLOAT32, d16, (ring_dtype_t)dt, COUNT,
                            s));
        DEV_OK(dev->copy(half, d16, sizeof half, s));
        DEV_OK(dev->copy(back, d32, sizeof back, s));
        DEV_OK(dev->stream_sync(s));
        for (size_t i = 0; i < COUNT; i++) {
            want[i] = dt == RING_FLOAT16 ? ring_f32_to_f16(in[i])
                                         : ring_f32_to_bf16(in[i]);
            want_back[i] = dt == RING_FLOAT16 ? ring_f16_to_f32(want[i])
                                              : ring_bf16_to_f32(want[i]);
        }
        if (memcmp(half, want, sizeof half) || memcmp(back, want_back,
                                                      sizeof back))
            TEST_FAIL("convert to and from %s differs from the host's",
                      ring_dtype_name((ring_dtype_t)dt));
    }
    TEST_EQ(dev->convert(d16, RING_INT32, d32, RING_FLOAT32, 1, s),
            RING_ERR_ARG);
    DEV_OK(dev->stream_destroy(s));
    DEV_OK(dev->release(d32));
    DEV_OK(dev->release(d16));
}

/* event_query says not done while a long copy runs, done after a sync;
 * an event never recorded is done at once. */
static void test_event_query(void)
{
    enum { NBYTES = 16 << 20, COPIES = 20 };
    char *a = dev_alloc(NBYTES), *b = dev_alloc(NBYTES);
    ring_stream_t *s;
    ring_event_t *e, *never;
    int done = -1;
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->event_create(&e));
    DEV_OK(dev->event_create(&never));
    DEV_OK(dev->event_query(never, &done));
    TEST_EQ(done, 1);
    DEV_OK(dev->event_sync(never));
    for (int i = 0; i < COPIES; i++)
        DEV_OK(dev->copy(b, a, NBYTES, s));
    DEV_OK(dev->event_record(e, s));
    DEV_OK(dev->event_query(e, &done));
    TEST_EQ(done, 0);
    DEV_OK(dev->event_sync(e));
    DEV_OK(dev->event_query(e, &done));
    TEST_EQ(done, 1);
    DEV_OK(dev->event_destroy(e));
    DEV_OK(dev->event_destroy(never));
    DEV_OK(dev->stream_destroy(s));
    DEV_OK(dev->release(a));
    DEV_OK(dev->release(b));
}

/* Timers: the time between two records is the work queued between them
 * (here two operations of a process made slower by LAG_MS each), either
 * way round, and a timer recorded again times its new record, on another
 * stream too, while its old one is still queued; a stream waits for one
 * as for any event. elapsed refuses, saying why, an event
 * of event_create's, one never recorded, and one whose work is not done
 * (when it is not yet: the lag makes that all but certain). */
static void test_timers(void)
{
    enum { LAG_MS = 40 };
    char byte = 1, *d = dev_alloc(1);
    ring_stream_t *s, *other;
    ring_event_t *a, *b, *c, *never, *plain;
    float ms = -1, back = 0;
    int done = 1;
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->stream_create(&other));
    DEV_OK(dev->timer_create(&a));
    DEV_OK(dev->timer_create(&b));
    DEV_OK(dev->timer_create(&c));
    DEV_OK(dev->timer_create(&never));
    DEV_OK(dev->event_create(&plain));
    DEV_OK(dev->event_record(a, s));
    ring__dev_emu_lag(LAG_MS * 1000);
    DEV_OK(dev->copy(d, &byte, 1, s));
    DEV_OK(dev->copy(&byte, d, 1, s));
    DEV_OK(dev->event_record(b, s));
    DEV_OK(dev->event_query(b, &done));
    if (!done)
        TEST_SAYS(dev->elapsed(a, b, &ms), RING_ERR_CUDA, "not done");
    DEV_OK(dev->stream_wait(other, b));
    DEV_OK(dev->event_record(c, other));
    DEV_OK(dev->event_sync(c));
    ring__dev_emu_lag(0); /* read as each operation runs */
    DEV_OK(dev->elapsed(a, b, &ms));
    DEV_OK(dev->elapsed(b, a, &back));
    TEST_TRUE(ms >= 2 * LAG_MS * 0.9);
    TEST_TRUE(back == -ms);
    DEV_OK(dev->elapsed(b, c, &ms));
    TEST_TRUE(ms >= 0);
    DEV_OK(dev->event_record(a, s)); /* again: a is now after b */
    DEV_OK(dev->stream_sync(s));
    DEV_OK(dev->elapsed(b, a, &ms));
    TEST_TRUE(ms >= 0);
    /* Recorded behind slow work on s, then again on the idle other before
     * that ran: a is its second record, and the first, run later, leaves
     * it be. */
    ring__dev_emu_lag(LAG_MS * 1000);
    DEV_OK(dev->copy(d, &byte, 1, s));
    DEV_OK(dev->event_record(a, s));
    DEV_OK(dev->event_record(a, other));
    DEV_OK(dev->event_record(b, s));
    DEV_OK(dev->stream_sync(s));
    ring__dev_emu_lag(0);
    DEV_OK(dev->stream_sync(other));
    DEV_OK(dev->elapsed(a, b, &ms));
    TEST_TRUE(ms >= LAG_MS * 0.9);
    TEST_SAYS(dev->elapsed(plain, b, &ms), RING_ERR_CUDA, "keeps no time");
    TEST_SAYS(dev->elapsed(a, never, &ms), RING_ERR_CUDA, "never recorded");
    ring_event_t *all[] = {a, b, c, never, plain};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        DEV_OK(dev->event_destroy(all[i]));
    DEV_OK(dev->stream_destroy(s));
    DEV_OK(dev->stream_destroy(other));
    DEV_OK(dev->release(d));
}

/* A forked child reads device memory from host code: in guard mode it
 * dies of SIGSEGV, else it reads what was copied there. */
static void test_host_access(void)
{
    int value = 99, *d = dev_alloc(sizeof(int)), status = 0;
    to_dev(d, &value, sizeof(value));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int got;
        signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would exit */
        memcpy(&got, d, sizeof(got));
        _exit(got == 99 ? 0 : 1);
    }
    TEST_TRUE(pid > 0);
    TEST_EQ(waitpid(pid, &status, 0), pid);
    if (strcmp(mode, "guard") == 0) {
        TEST_TRUE(WIFSIGNALED(status));
        TEST_EQ(WIFSIGNALED(status) ? WTERMSIG(status) : 0, SIGSEGV);
    } else {
        TEST_TRUE(WIFEXITED(status));
        TEST_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
    }
    to_host(&value, d, sizeof(value)); /* and the device still can */
    TEST_EQ(value, 99);
    DEV_OK(dev->release(d));
}

int main(int argc, char **argv)
{
    static const char *const modes[][2] = {{"plain", "1"},
                                           {"delay", "delay:7"},
                                           {"guard", "guard"},
                                           {"bad", "delay:7x"}};
    const char *value = NULL;
    mode = argc == 2 ? argv[1] : "";
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(mode, modes[i][0]) == 0) value = modes[i][1];
    if (!value) {
        fprintf(stderr, "usage: test_dev plain|delay|guard|bad\n");
        return TEST_HARD_ERROR;
    }
    setenv("HVD_DEVICE_EMULATE", value, 1);
    if (strcmp(mode, "bad") == 0) {
        TEST_SAYS(ring_dev() == NULL, 1, "HVD_DEVICE_EMULATE=\"delay:7x\"");
        TEST_SAYS(ring_dev() == NULL, 1, NULL); /* said once */
        return test_exit_code();
    }
    dev = ring_dev();
    TEST_TRUE(dev == &ring__dev_emulated);
    if (!dev) return test_exit_code();
    test_memory();
    test_round_trip();
    test_order();
    test_two_streams();
    test_copy_batch();
    test_copy_batch_grids();
    test_reductions();
    test_convert();
    test_event_query();
    test_timers();
    test_host_access();
    return test_exit_code();
}
