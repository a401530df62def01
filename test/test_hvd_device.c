/* test/test_hvd_device.c: hvd's collectives on device tensors
 * (test/hvd_device_np*.mpi), on the emulated device or a GPU.
 *
 *   - allreduces of device tensors of several sizes, submitted
 *     asynchronously in a different order on every rank, in place and
 *     out, three rounds (the first negotiated, the others from the
 *     cache), beside host tensors of the same dtype and op (host and
 *     device never fuse: a mixed group would fail in ring); the results
 *     are checked exactly (small integers in float);
 *   - device groups back to back, one per op (sum, min, max);
 *   - that device tensors did fuse: rank 0's HVD_TIMELINE holds
 *     MEMCPY_IN_FUSION_BUFFER events of groups (execute.c's device
 *     fusion), each also on the device's lane (as the device ran it);
 *     on the emulated device, a group's allreduce beside a rank whose
 *     device is slow takes that long on rank 0's device lane;
 *   - on the emulated device, a lone device allreduce never waits for
 *     the device on the host: ring's work and its caller's stream are
 *     waited for on the device (it goes through the fusion buffer as a
 *     group of one);
 *   - the stream variant: the input is copied up on the caller's stream
 *     and submitted without synchronising, the result copied back on the
 *     same stream after hvd_wait_stream, or after hvd_wait, which waits
 *     on the host for the result the engine left queued (under delay:SEED
 *     a missing wait on either side reads stale data);
 *   - broadcast (plain and stream) and allgather of device tensors;
 *   - one name on the device on rank 0 and on the host elsewhere:
 *     HVD_ERR_MISMATCH on every rank, saying so, then a good allreduce;
 *   - bad input: mixed kinds in one request, NULL with count > 0, a
 *     stream for host memory, hvd_wait_stream without a stream;
 *   - join: ranks run out of steps at different times, a joined rank
 *     takes part with device zeros, fused and alone;
 *   - with --fusion-oom R (alone, on the emulated device: its memory is
 *     a file, which RLIMIT_FSIZE caps): rank R cannot make the device
 *     fusion buffer; the group fails on every rank, each saying which
 *     rank, and no rank waits for the others forever; then R, joined,
 *     cannot make the device zeros it gives for a tensor alone: the same;
 *   - with --pack-fails R (alone, on the emulated device): rank R's
 *     wait for its caller's stream fails before a lone broadcast, then
 *     its tensor is shorter than the call, so its pack of the fusion
 *     buffer is refused; the others' calls fail too, naming it, instead
 *     of waiting for it forever: the broadcast and a small group over
 *     MPI, after each of which all go on, then a group through ring's
 *     window, after which the engines stop (with --check 1, which sets
 *     HVD_RING_CHECK=1, and at one rank, all go on after it too);
 *   - with --no-device R (alone, the others on the emulated device):
 *     rank R has no device and joins at once; the others' device
 *     collectives fail on every rank, naming it, and all go on.
 *
 * Device memory is only touched through the device's copies, so the guard
 * mode faults on any host access hvd makes. Options: --emulate MODE sets
 * HVD_DEVICE_EMULATE before hvd_init (without it a GPU is needed, else
 * the test skips).
 */
#define _POSIX_C_SOURCE 200809L /* setenv, mkstemp; test/capture.h */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <mpi.h>
#include "hvd/hvd.h"
#include "ring/dev.h"
#include "ring/ring.h"
#include "test/capture.h"
#include "test/hvd_harness.h"
#include "test/test.h"

static int rank, size;
static const ring_dev_t *dev;
static ring_stream_t *stream; /* the caller's ("compute") stream */
/* The emulated device in delay mode: its memory is host memory that the
 * host may read (in guard mode, and on a GPU, it faults). */
static int host_reads;

/* ---- device memory, reached only through the device's copies ---- */

static float *dev_alloc(size_t count)
{
    void *p = NULL;
    if (dev->alloc(&p, count ? count * sizeof(float) : 1) != RING_OK) {
        TEST_FAIL("device alloc of %zu floats failed", count);
        MPI_Abort(MPI_COMM_WORLD, TEST_HARD_ERROR);
    }
    return p;
}

/* Copies on the caller's stream; synced unless `queued`. */
static void dev_copy(void *dst, const void *src, size_t count, int queued)
{
    if (count == 0) return;
    if (dev->copy(dst, src, count * sizeof(float), stream) != RING_OK ||
        (!queued && dev->stream_sync(stream) != RING_OK))
        TEST_FAIL("device copy failed");
}

/* Small integers: every sum is exact in float, in any order. */
static float value(int r, int t, size_t i)
{
    return (float)((r + 1) * (int)(i % 17 + 1) + t);
}

static float *host_values(int r, int t, size_t count)
{
    float *x = malloc(count * sizeof *x + 1);
    for (size_t i = 0; i < count; i++) x[i] = value(r, t, i);
    return x;
}

/* got against the sum over ranks `upto` (ranks below it) of value(r, t). */
static void expect_sum(const char *what, const float *got, int t,
                       size_t count, int upto)
{
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < upto; r++) want += value(r, t, i);
        if (got[i] != want) {
            TEST_FAIL("%s n=%d count=%zu: [%zu] = %g, want %g", what, size,
                      count, i, (double)got[i], (double)want);
            return;
        }
    }
}

/* ---- allreduces in different orders per rank, host beside device ---- */

enum { NTENSORS = 8 };
/* 70000 floats (280 KB) runs alone; the others fuse. */
static const size_t counts[NTENSORS] = {1, 7, 100, 1000, 5000, 3, 70000, 257};

static void test_orders(int round)
{
    float *in[NTENSORS], *out[NTENSORS], *host[NTENSORS];
    hvd_handle_t h[NTENSORS], hh[NTENSORS];
    char name[64];
    for (int t = 0; t < NTENSORS; t++) {
        float *x = host_values(rank, t, counts[t]);
        in[t] = dev_alloc(counts[t]);
        out[t] = t % 3 == 0 ? in[t] : dev_alloc(counts[t]); /* in place */
        dev_copy(in[t], x, counts[t], 0);
        host[t] = x;
    }
    /* Rank r starts at tensor r, and odd ranks go backwards. Rounds 0
     * and 2 submit the device tensors, then the host ones (groups of each
     * form: only neighbours in the plan fuse); round 1 alternates. */
    for (int k = 0; k < 2 * NTENSORS; k++) {
        int interleaved = round == 1, j = interleaved ? k / 2 : k % NTENSORS;
        int on_host = interleaved ? k % 2 : k >= NTENSORS;
        int t = (rank % 2 ? NTENSORS - 1 - j + rank : j + rank) % NTENSORS;
        snprintf(name, sizeof name, "%s.t%d", on_host ? "host" : "dev", t);
        if (on_host)
            TEST_EQ(hvd_allreduce_async(host[t], host[t], counts[t],
                                        HVD_FLOAT32, HVD_SUM, name, &hh[t]),
                    HVD_OK);
        else
            TEST_EQ(hvd_allreduce_async(in[t], out[t], counts[t], HVD_FLOAT32,
                                        HVD_SUM, name, &h[t]), HVD_OK);
    }
    for (int t = 0; t < NTENSORS; t++) {
        TEST_EQ(hvd_wait(h[t]), HVD_OK);
        TEST_EQ(hvd_wait(hh[t]), HVD_OK);
        expect_sum(round ? "host, cached" : "host", host[t], t, counts[t],
                   size);
        dev_copy(host[t], out[t], counts[t], 0);
        expect_sum(round ? "device, cached" : "device", host[t], t, counts[t],
                   size);
        if (out[t] != in[t]) dev->release(out[t]);
        dev->release(in[t]);
        free(host[t]);
    }
}

/* Device groups back to back, nothing between them (one per op: ops do
 * not fuse; min and max through ring's one step too), several rounds:
 * each group's pack overwrites the fusion buffer the last group's other
 * ranks read (hvd waits for ring's freed; the emulator did not catch that
 * wait left out here, ring_device_np2_ipc.mpi catches ring's own). */
static void test_back_to_back(void)
{
    enum { GROUPS = 3, PER = 2, N = 3000, ROUNDS = 4 };
    static const hvd_op_t ops[GROUPS] = {HVD_SUM, HVD_MIN, HVD_MAX};
    float *d[GROUPS][PER], *x[GROUPS][PER];
    hvd_handle_t h[GROUPS][PER];
    char name[64];
    /* The last rank's device behind the others: a rank that packed a
     * group before its peers were through reading the last one would
     * change what they read. */
    int lags = dev == &ring__dev_emulated && size > 1 && rank == size - 1;
    if (lags) ring__dev_emu_lag(2000);
    for (int round = 0; round < ROUNDS; round++) {
        for (int g = 0; g < GROUPS; g++)
            for (int p = 0; p < PER; p++) {
                int t = 60 + round * 10 + g * PER + p;
                x[g][p] = host_values(rank, t, N);
                d[g][p] = dev_alloc(N);
                dev_copy(d[g][p], x[g][p], N, 0);
                snprintf(name, sizeof name, "b2b.g%d.p%d", g, p);
                TEST_EQ(hvd_allreduce_async(d[g][p], d[g][p], N, HVD_FLOAT32,
                                            ops[g], name, &h[g][p]),
                        HVD_OK);
            }
        for (int g = 0; g < GROUPS; g++)
            for (int p = 0; p < PER; p++) {
                int t = 60 + round * 10 + g * PER + p;
                TEST_EQ(hvd_wait(h[g][p]), HVD_OK);
                dev_copy(x[g][p], d[g][p], N, 0);
                for (size_t i = 0; i < N; i++) {
                    float want = value(0, t, i);
                    for (int r = 1; r < size; r++) {
                        float v = value(r, t, i);
                        want = ops[g] == HVD_SUM   ? want + v
                               : ops[g] == HVD_MIN ? (v < want ? v : want)
                                                   : (v > want ? v : want);
                    }
                    if (x[g][p][i] != want) {
                        TEST_FAIL("back to back n=%d round %d group %d: "
                                  "[%zu] = %g, want %g", size, round, g, i,
                                  (double)x[g][p][i], (double)want);
                        break;
                    }
                }
                dev->release(d[g][p]);
                free(x[g][p]);
            }
    }
    if (lags) ring__dev_emu_lag(0);
}

/* ---- the stream variant ---- */

/* Four tensors submitted on stream, completed by hvd_wait_stream, or
 * (on_host) by hvd_wait. */
static void test_stream(int on_host)
{
    enum { N = 4 };
    static const size_t scounts[N] = {5, 300, 2000, 80000};
    float *d[N], *x[N];
    hvd_handle_t h[N];
    char name[64];
    for (int t = 0; t < N; t++) {
        x[t] = host_values(rank, 10 + t, scounts[t]);
        d[t] = dev_alloc(scounts[t]);
        /* Queued, not done yet: behind other work on the stream, so that
         * (delay:SEED, up to 200 us an operation) it lands milliseconds
         * after submission, later than an engine that did not wait would
         * read it. */
        for (int k = 0; k < 40; k++)
            TEST_EQ(dev->zero(d[t], scounts[t] * sizeof(float), stream),
                    RING_OK);
        dev_copy(d[t], x[t], scounts[t], 1);
    }
    /* Back to back, so that they fuse, and the waits below begin while
     * the engine waits for the stream. */
    for (int t = 0; t < N; t++) {
        snprintf(name, sizeof name, "stream%s.t%d", on_host ? ".host" : "",
                 t);
        TEST_EQ(hvd_allreduce_async_stream(d[t], d[t], scounts[t],
                                           HVD_FLOAT32, HVD_SUM, name,
                                           stream, &h[t]), HVD_OK);
    }
    /* The engine may leave the result queued on its stream: hvd_wait waits
     * for it on the host, hvd_wait_stream orders stream after it (so that
     * stream's sync waits for it). Where the host can read the memory it
     * does so at once, so that a missing wait reads stale data every time,
     * not only when an emulated copy wins a race; else through stream. */
    for (int t = 0; t < N; t++) {
        TEST_EQ(on_host ? hvd_wait(h[t]) : hvd_wait_stream(h[t], stream),
                HVD_OK);
        if (!host_reads) {
            dev_copy(x[t], d[t], scounts[t], 1);
            continue;
        }
        if (!on_host) TEST_EQ(dev->stream_sync(stream), RING_OK);
        memcpy(x[t], d[t], scounts[t] * sizeof(float));
    }
    TEST_EQ(dev->stream_sync(stream), RING_OK);
    for (int t = 0; t < N; t++) {
        expect_sum(on_host ? "stream, hvd_wait" : "stream", x[t], 10 + t,
                   scounts[t], size);
        dev->release(d[t]);
        free(x[t]);
    }
}

/* A lone device allreduce of the stream variant, once the fusion buffer
 * is made: the engine and ring never wait for the device on the host
 * (within a node ring queues its work behind the pack and hands back an
 * event that the unpack waits for); the caller's stream is waited for on
 * the device (the fusion buffer's pack), not on the host. Counted on the
 * emulated device, the same whatever the delays. */
static void test_lone_waits(void)
{
    enum { COUNT = 5000 }; /* 20 KB: within a node, IPC (4 KiB and up) */
    float *d = dev_alloc(COUNT), *x = host_values(rank, 20, COUNT);
    hvd_handle_t h;
    for (int round = 0; round < 2; round++) {
        dev_copy(d, x, COUNT, 0);
        uint64_t before = ring__dev_emu_host_waits();
        TEST_EQ(hvd_allreduce_async_stream(d, d, COUNT, HVD_FLOAT32, HVD_SUM,
                                           "lone", stream, &h), HVD_OK);
        TEST_EQ(hvd_wait_stream(h, stream), HVD_OK);
        uint64_t waits = ring__dev_emu_host_waits() - before;
        if (round == 1 && waits > 0)
            TEST_FAIL("a lone device allreduce waited for the device on the "
                      "host %llu times; within a node ring's streams wait "
                      "for each other on the device, and a rank alone has "
                      "nothing to wait for", (unsigned long long)waits);
    }
    dev_copy(x, d, COUNT, 0);
    expect_sum("lone", x, 20, COUNT, size);
    dev->release(d);
    free(x);
}

/* ---- the timeline's device lane ---- */

enum { LAG_US = 100000 };

/* A device group while rank 1's device is slow (each of its operations
 * LAG_US more, several before it posts its buffer): rank 0's device
 * waits for rank 1's in the allreduce, so rank 0's device lane must say
 * it took LAG_US at least, whatever its host spent queueing it
 * (check_timeline). On the emulated device, at 2 ranks and more. */
static void test_device_lane(void)
{
    enum { COUNT = 5000 }; /* 20 KB: within a node, IPC (4 KiB and up) */
    float *d = dev_alloc(COUNT), *x = host_values(rank, 21, COUNT);
    dev_copy(d, x, COUNT, 0);
    if (rank == 1) ring__dev_emu_lag(LAG_US);
    TEST_EQ(hvd_allreduce(d, d, COUNT, HVD_FLOAT32, HVD_SUM, "lagged"),
            HVD_OK);
    if (rank == 1) ring__dev_emu_lag(0);
    dev_copy(x, d, COUNT, 0);
    expect_sum("lagged", x, 21, COUNT, size);
    dev->release(d);
    free(x);
}

/* ---- broadcast and allgather ---- */

static void test_broadcast_allgather(void)
{
    enum { N = 1000 };
    int root = 1 % size;
    float *x = host_values(rank, 20, N), *want = host_values(root, 20, N);
    float *d = dev_alloc(N);
    dev_copy(d, x, N, 0);
    TEST_EQ(hvd_broadcast(d, N, HVD_FLOAT32, root, "dev.bcast"), HVD_OK);
    dev_copy(x, d, N, 0);
    TEST_EQ(memcmp(x, want, N * sizeof *x), 0);

    /* The stream variant: the input queued on the caller's stream. */
    free(want);
    free(x);
    x = host_values(rank, 21, N);
    want = host_values(0, 21, N);
    hvd_handle_t h;
    dev_copy(d, x, N, 1);
    TEST_EQ(hvd_broadcast_async_stream(d, N, HVD_FLOAT32, 0, "dev.bcast.s",
                                       stream, &h), HVD_OK);
    TEST_EQ(hvd_wait_stream(h, stream), HVD_OK);
    dev_copy(x, d, N, 0);
    TEST_EQ(memcmp(x, want, N * sizeof *x), 0);

    float *all = dev_alloc((size_t)size * N);
    float *got = malloc((size_t)size * N * sizeof *got);
    dev_copy(d, want, N, 0);
    free(want);
    want = host_values(rank, 22, N);
    dev_copy(d, want, N, 0);
    TEST_EQ(hvd_allgather(d, N, all, HVD_FLOAT32, "dev.gather"), HVD_OK);
    dev_copy(got, all, (size_t)size * N, 0);
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < N; i++)
            if (got[(size_t)r * N + i] != value(r, 22, i)) {
                TEST_FAIL("allgather: block %d [%zu] = %g", r, i,
                          (double)got[(size_t)r * N + i]);
                break;
            }
    dev->release(all);
    dev->release(d);
    free(got);
    free(want);
    free(x);
}

/* ---- mismatch and bad input ---- */

/* A good device allreduce of `name`, checked exactly. */
static void device_allreduce_works(const char *name)
{
    enum { N = 64 };
    float *x = host_values(rank, 30, N), *d = dev_alloc(N);
    dev_copy(d, x, N, 0);
    TEST_EQ(hvd_allreduce(d, d, N, HVD_FLOAT32, HVD_SUM, name), HVD_OK);
    dev_copy(x, d, N, 0);
    expect_sum("after an error", x, 30, N, size);
    dev->release(d);
    free(x);
}

static void test_mismatch(void)
{
    enum { N = 64 };
    float host[N] = {0}, *d = dev_alloc(N);
    dev_copy(d, host, N, 0);
    /* Rank 0 on the device, the others on the host. */
    TEST_SAYS(hvd_allreduce(rank == 0 ? d : host, rank == 0 ? d : host, N,
                            HVD_FLOAT32, HVD_SUM, "dev.kind"),
              HVD_ERR_MISMATCH, "disagree on memory");
    device_allreduce_works("dev.kind");
    /* A name cached as device, then host on one rank. */
    TEST_SAYS(hvd_allreduce(rank == size - 1 ? host : d,
                            rank == size - 1 ? host : d, N, HVD_FLOAT32,
                            HVD_SUM, "dev.kind"),
              HVD_ERR_MISMATCH, "in host memory");
    device_allreduce_works("dev.kind");
    dev->release(d);
}

static void test_bad_input(void)
{
    enum { N = 16 };
    float host[N] = {0}, *d = dev_alloc(N);
    hvd_handle_t h = NULL;
    TEST_SAYS(hvd_allreduce(d, host, N, HVD_FLOAT32, HVD_SUM, "bad.mixed"),
              HVD_ERR_ARG, "sendbuf is device memory and recvbuf is host");
    TEST_SAYS(hvd_allreduce(host, d, N, HVD_FLOAT32, HVD_SUM, "bad.mixed"),
              HVD_ERR_ARG, "sendbuf is host memory and recvbuf is device");
    TEST_SAYS(hvd_allgather(d, 1, host, HVD_FLOAT32, "bad.mixed.g"),
              HVD_ERR_ARG, "both on the device or both on the host");
    TEST_SAYS(hvd_allreduce(NULL, d, N, HVD_FLOAT32, HVD_SUM, "bad.null"),
              HVD_ERR_ARG, "NULL buffer with count > 0");
    TEST_SAYS(hvd_allreduce_async_stream(host, host, N, HVD_FLOAT32, HVD_SUM,
                                         "bad.stream", stream, &h),
              HVD_ERR_ARG, "a stream is for device tensors");
    TEST_TRUE(h == NULL);
    TEST_SAYS(hvd_allreduce_async_stream(d, d, N, HVD_FLOAT32, HVD_SUM,
                                         "bad.stream", NULL, &h),
              HVD_ERR_ARG, "stream is NULL");
    /* Empty: no buffers (an empty CUDA tensor's data_ptr() is 0), and
     * nothing to refuse: the stream says where it would be. */
    TEST_SAYS(hvd_allreduce_async_stream(NULL, NULL, 0, HVD_FLOAT32, HVD_SUM,
                                         "empty.stream", stream, &h),
              HVD_OK, NULL);
    TEST_EQ(hvd_wait_stream(h, stream), HVD_OK);
    TEST_SAYS(hvd_broadcast_async_stream(NULL, 0, HVD_FLOAT32, 0,
                                         "empty.stream.b", stream, &h),
              HVD_OK, NULL);
    TEST_EQ(hvd_wait(h), HVD_OK);
    TEST_EQ(hvd_allreduce_async(d, d, N, HVD_FLOAT32, HVD_SUM, "bad.wait",
                                &h), HVD_OK);
    TEST_SAYS(hvd_wait_stream(h, stream), HVD_ERR_ARG,
              "not from a stream variant");
    TEST_EQ(hvd_wait(h), HVD_OK); /* still the caller's to wait */
    /* A device that cannot tell what memory is (a CUDA context broken by
     * an earlier error): memory the host cannot read (guard mode's) is
     * refused at once, where the host path would fault on it; host
     * tensors still reduce. */
    const char *mode = getenv("HVD_DEVICE_EMULATE");
    if (dev == &ring__dev_emulated && mode && strcmp(mode, "guard") == 0) {
        ring__dev_emu_fails(RING__EMU_FAIL_OWNS);
        TEST_SAYS(hvd_allreduce(d, d, N, HVD_FLOAT32, HVD_SUM, "bad.kind"),
                  HVD_ERR_CUDA, "memory kind cannot be told");
        host[0] = 1;
        TEST_EQ(hvd_allreduce(host, host, N, HVD_FLOAT32, HVD_SUM,
                              "bad.kind.host"),
                HVD_OK);
        TEST_TRUE(host[0] == (float)size);
        ring__dev_emu_fails(0);
    }
    device_allreduce_works("bad.after");
    dev->release(d);
}

/* ---- join ---- */

/* Rank r runs r + 1 steps of two small fused tensors and one alone, then
 * joins; a joined rank gives device zeros. */
static void test_join(void)
{
    static const size_t jcounts[3] = {10, 300, 70000};
    for (int s = 0; s < rank + 1; s++) {
        float *d[3], *x[3];
        hvd_handle_t h[3];
        char name[64];
        for (int t = 0; t < 3; t++) {
            x[t] = host_values(rank, 40 + s, jcounts[t]);
            d[t] = dev_alloc(jcounts[t]);
            dev_copy(d[t], x[t], jcounts[t], 0);
            snprintf(name, sizeof name, "join.t%d", t);
            TEST_EQ(hvd_allreduce_async(d[t], d[t], jcounts[t], HVD_FLOAT32,
                                        HVD_SUM, name, &h[t]), HVD_OK);
        }
        for (int t = 0; t < 3; t++) {
            TEST_EQ(hvd_wait(h[t]), HVD_OK);
            dev_copy(x[t], d[t], jcounts[t], 0);
            /* Ranks s and above still run step s. */
            float *want = calloc(jcounts[t] + 1, sizeof *want);
            for (int r = s; r < size; r++)
                for (size_t i = 0; i < jcounts[t]; i++)
                    want[i] += value(r, 40 + s, i);
            if (memcmp(x[t], want, jcounts[t] * sizeof *want) != 0)
                TEST_FAIL("join n=%d step %d tensor %d: wrong sum", size, s,
                          t);
            free(want);
            dev->release(d[t]);
            free(x[t]);
        }
    }
    TEST_EQ(hvd_join(), HVD_OK);
    device_allreduce_works("after.join");
}

/* ---- a rank out of device memory ---- */

#define OOM_THRESHOLD "8M"

/* Rank who's device memory capped at 4 MiB (on), or as it was: the
 * emulated device's memory is a memfd, and ftruncate fails past the soft
 * limit, with EFBIG once SIGXFSZ is ignored. */
static void cap_memory(int who, int on)
{
    static struct rlimit was;
    if (rank != who) return;
    if (!on) {
        TEST_EQ(setrlimit(RLIMIT_FSIZE, &was), 0);
        return;
    }
    TEST_EQ(getrlimit(RLIMIT_FSIZE, &was), 0);
    struct rlimit cap = {4 << 20, was.rlim_max};
    signal(SIGXFSZ, SIG_IGN);
    TEST_EQ(setrlimit(RLIMIT_FSIZE, &cap), 0);
}

/* Rank `who` runs out of device memory when the engine makes its fusion
 * buffer (HVD_FUSION_THRESHOLD, set to OOM_THRESHOLD by main): the ranks
 * either all make it or none does, so the others do not wait in ring for
 * a rank that left the group (before: they did, forever). */
static void test_fusion_oom(int who)
{
    enum { BIG = (9 << 20) / sizeof(float), SMALL = 64 };
    /* Above the threshold, alone: ring's window is made, not the buffer. */
    float *x = host_values(rank, 40, BIG), *d = dev_alloc(BIG);
    dev_copy(d, x, BIG, 0);
    TEST_EQ(hvd_allreduce(d, d, BIG, HVD_FLOAT32, HVD_SUM, "oom.big"),
            HVD_OK);
    dev_copy(x, d, BIG, 0);
    expect_sum("oom.big", x, 40, BIG, size);
    char says[96];
    snprintf(says, sizeof says, "rank %d could not make the device fusion "
             "buffer", who);
    /* A failure of another kind on the way (its wait for its stream, as
     * a broken context's): every rank fails with that rank's status
     * (HVD_ERR_NOMEM on the others before). */
    if (rank == who) ring__dev_emu_fails(RING__EMU_FAIL_SYNCS);
    TEST_SAYS(hvd_allreduce(d, d, SMALL, HVD_FLOAT32, HVD_SUM, "oom.sync"),
              HVD_ERR_CUDA, says);
    ring__dev_emu_fails(0);
    cap_memory(who, 1);
    /* Twice: the engine goes on, and tries again. */
    for (int i = 0; i < 2; i++)
        TEST_SAYS(hvd_allreduce(d, d, SMALL, HVD_FLOAT32, HVD_SUM,
                                "oom.small"),
                  HVD_ERR_NOMEM, says);
    cap_memory(who, 0);
    device_allreduce_works("oom.after");
    dev->release(d);
    free(x);
}

/* A joined rank gives device zeros for the others' tensor alone (above
 * the fusion threshold); where `who`, joined, cannot make them, every
 * rank fails the call, naming it, and all go on (before, its failure came
 * after the ranks' agreement, and the others waited for it in ring
 * forever). */
static void test_joined_oom(int who)
{
    enum { BIG = (9 << 20) / sizeof(float) };
    cap_memory(who, 1);
    if (rank != who) {
        float *d = dev_alloc(BIG);
        char says[64];
        snprintf(says, sizeof says, "rank %d failed before its part", who);
        TEST_SAYS(hvd_allreduce(d, d, BIG, HVD_FLOAT32, HVD_SUM,
                                "oom.joined"),
                  HVD_ERR_STATE, says);
        dev->release(d);
    }
    TEST_EQ(hvd_join(), HVD_OK);
    cap_memory(who, 0);
    device_allreduce_works("oom.joined.after");
}

/* ---- a rank without a device ---- */

/* Rank `who` has no device (a node without one) and joins at once; the
 * others' device collectives need its zeros on a device, fused, alone
 * and broadcast: each fails on every rank, naming it, twice (the engine
 * goes on), instead of leaving the others waiting for it in ring. Then
 * all join, and a host allreduce works everywhere. */
static void test_no_device(int who)
{
    enum { SMALL = 64, BIG = (2 << 20) / sizeof(float) };
    if (rank != who) {
        float *d = dev_alloc(BIG);
        char fused[64], alone[64];
        snprintf(fused, sizeof fused, "rank %d could not make the device "
                 "fusion", who);
        snprintf(alone, sizeof alone, "rank %d failed before its part", who);
        for (int i = 0; i < 2; i++) {
            TEST_SAYS(hvd_allreduce(d, d, SMALL, HVD_FLOAT32, HVD_SUM,
                                    "nodev.small"),
                      HVD_ERR_STATE, fused);
            TEST_SAYS(hvd_allreduce(d, d, BIG, HVD_FLOAT32, HVD_SUM,
                                    "nodev.big"),
                      HVD_ERR_STATE, alone);
            TEST_SAYS(hvd_broadcast(d, SMALL, HVD_FLOAT32, who ? 0 : 1,
                                    "nodev.bcast"),
                      HVD_ERR_STATE, alone);
        }
        dev->release(d);
    }
    TEST_EQ(hvd_join(), HVD_OK);
    float x = (float)rank, sum = 0;
    TEST_EQ(hvd_allreduce(&x, &sum, 1, HVD_FLOAT32, HVD_SUM, "nodev.host"),
            HVD_OK);
    TEST_EQ(sum, (float)(size * (size - 1) / 2));
}

/* ---- a rank whose copies fail ---- */

/* Rank `who`'s tensor of n is shorter than the call, which the emulated
 * device refuses when hvd's pack of the fusion buffer is queued (a GPU
 * would read past it; an error of its stream, from the caller's own
 * kernels, would fail the same step): its group fails, and so do the
 * others', saying `says` of it. */
static void pack_fails(int who, size_t n, const char *says)
{
    size_t mine = rank == who ? n / 2 : n;
    float *x = host_values(rank, 50, n), *d = dev_alloc(mine);
    dev_copy(d, x, mine, 0);
    TEST_SAYS(hvd_allreduce(d, d, n, HVD_FLOAT32, HVD_SUM, "pack.fails"),
              rank == who ? HVD_ERR_ARG : HVD_ERR_STATE,
              rank == who ? "copy_batch: a source" : says);
    dev->release(d);
    free(x);
}

/* A group under ring's 4 KiB goes over MPI, where ring cannot tell the
 * others: the ranks agree first, all fail the group, naming `who`, and go
 * on (before, the others waited in MPI forever). A group through ring's
 * window fails the same way, the others told there, but the window no
 * longer serves: every rank's engine stops, and later calls say why.
 * With HVD_RING_CHECK (check), whose agreement over MPI opens every ring
 * call, and for a rank alone, the large group is agreed on as the small
 * one (before, the others waited in that agreement forever, and a rank
 * alone stopped at its own failure). */
static void test_pack_fails(int who, int check)
{
    char over_mpi[64], window[64];
    snprintf(over_mpi, sizeof over_mpi, "rank %d failed before its part",
             who);
    snprintf(window, sizeof window, "rank %d of the node gave up", who);
    int agreed = check || size == 1;
    pack_fails(who, 256, over_mpi);
    device_allreduce_works("pack.small.after");
    pack_fails(who, 4096, agreed ? over_mpi : window);
    if (agreed) {
        device_allreduce_works("pack.large.after");
        return;
    }
    float x[4] = {0};
    TEST_SAYS(hvd_allreduce(x, x, 4, HVD_FLOAT32, HVD_SUM, "pack.after"),
              HVD_ERR_STATE, "hvd stopped at a failure on this rank");
}

/* A lone device broadcast of the stream variant, its wait for the
 * caller's stream done on the host: the status of both calls. */
static int lone_broadcast(float *d, size_t n, const char *name)
{
    hvd_handle_t h;
    int status = hvd_broadcast_async_stream(d, n, HVD_FLOAT32, 0, name,
                                            stream, &h);
    return status != HVD_OK ? status : hvd_wait_stream(h, stream);
}

/* Rank `who`'s wait for its caller's stream fails (as when a kernel of
 * the caller's faulted) before a lone device broadcast, which goes over
 * MPI, where ring cannot tell the others: the ranks agree first, every
 * rank fails it, naming `who`, and all go on (before, `who` alone failed
 * it and stopped, the others' calls went through without it, and the
 * test hung in their next). */
static void test_lone_fails(int who)
{
    enum { N = 1000 };
    float *x = host_values(rank, 60, N), *d = dev_alloc(N);
    float *want = host_values(0, 60, N);
    dev_copy(d, x, N, 0);
    char says[64];
    snprintf(says, sizeof says, "rank %d failed before its part", who);
    if (rank == who) ring__dev_emu_fails(RING__EMU_FAIL_SYNCS);
    TEST_SAYS(lone_broadcast(d, N, "lone.fails"),
              rank == who ? HVD_ERR_CUDA : HVD_ERR_STATE,
              rank == who ? "event_sync: the emulated device fails" : says);
    ring__dev_emu_fails(0);
    TEST_EQ(lone_broadcast(d, N, "lone.after"), HVD_OK);
    dev_copy(x, d, N, 0);
    TEST_EQ(memcmp(x, want, N * sizeof *x), 0);
    dev->release(d);
    free(want);
    free(x);
}

/* ---- the timeline: did device tensors fuse? ---- */

/* Lines of text holding both a and b. */
static int lines_with(const char *text, const char *a, const char *b)
{
    int n = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *pa = strstr(line, a), *pb = b ? strstr(line, b) : line;
        n += pa && pb && pa < line + len && pb < line + len;
        line += len + (end != NULL);
    }
    return n;
}

/* The host lane's MEMCPY_IN_FUSION_BUFFER events whose start ("ts")
 * another such event shares: tensors of a group of two or more. */
static int fused_tensors(const char *text)
{
    enum { MAX = 4096 };
    static double ts[MAX];
    int n = 0, fused = 0;
    const char *key = "\"ts\": ";
    for (const char *at = text; n < MAX &&
                                (at = strstr(at, "MEMCPY_IN_FUSION_BUFFER"));
         at++) {
        const char *t = strstr(at, key), *host = strstr(at, "\"tid\": 0,");
        if (t && host && host < t) ts[n++] = strtod(t + strlen(key), NULL);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (j != i && ts[j] == ts[i]) {
                fused++;
                break;
            }
    return fused;
}

/* The duration, in us, of the device lane's event of tensor named phase,
 * or with phase NULL the one that is no copy (the collective); -1 when
 * there is none. */
static double device_us(const char *text, const char *tensor,
                        const char *phase)
{
    char want[64], name[64];
    snprintf(want, sizeof want, "\"tensor\": \"%s\"", tensor);
    /* the phase's whole name, or any copy's beginning */
    snprintf(name, sizeof name, "{\"name\": \"%s%s",
             phase ? phase : "MEMCPY", phase ? "\"" : "");
    for (const char *at = text; (at = strstr(at, want)); at++) {
        const char *line = at, *lane, *dur;
        while (line > text && line[-1] != '\n') line--;
        int named = strncmp(line, name, strlen(name)) == 0;
        if (named == (phase != NULL) &&
            (lane = strstr(line, "\"tid\": 1,")) && lane < at &&
            (dur = strstr(line, "\"dur\": ")) && dur < at)
            return strtod(dur + 7, NULL);
    }
    return -1;
}

static void check_timeline(const char *path, int lagged)
{
    FILE *f = fopen(path, "rb");
    static char text[1 << 22];
    size_t len = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[len] = '\0';
    if (f) fclose(f);
    int in = lines_with(text, "MEMCPY_IN_FUSION_BUFFER", NULL);
    int out = lines_with(text, "MEMCPY_OUT_FUSION_BUFFER", NULL);
    int on_device = lines_with(text, "MEMCPY_IN_FUSION_BUFFER", "\"tid\": 1,");
    int fused = fused_tensors(text);
    printf("timeline: %d device tensors went through the fusion buffer, %d "
           "of them with others; %d as the device ran them\n", in, fused,
           on_device);
    /* Each on both lanes: as the host queued it, as the device ran it. */
    TEST_EQ(2 * on_device, in);
    if (lagged) {
        /* The wait for rank 1 in the allreduce, not in rank 0's copies. */
        double in_us = device_us(text, "lagged", "MEMCPY_IN_FUSION_BUFFER"),
               us = device_us(text, "lagged", NULL),
               out_us = device_us(text, "lagged", "MEMCPY_OUT_FUSION_BUFFER");
        printf("timeline: beside a slow rank, the device took %.0f us to "
               "pack, %.0f to allreduce, %.0f to unpack\n", in_us, us,
               out_us);
        TEST_TRUE(us >= LAG_US);
        /* a wide margin: rank 0's copies are microseconds */
        TEST_TRUE(in_us >= 0 && out_us >= 0 && in_us + out_us < us / 2);
    }
    /* A lone allreduce goes through it too: a group's tensors share
     * their events' start. */
    TEST_TRUE(fused >= 4);
    TEST_EQ(in, out);
    /* Host tensors fuse through ring's pieces, never the device buffer. */
    TEST_EQ(lines_with(text, "MEMCPY_IN_FUSION_BUFFER", "\"host."), 0);
}

int main(int argc, char **argv)
{
    int oom = -1, pack_fails = -1, check = 0, no_device = -1;
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--emulate") == 0) {
            setenv("HVD_DEVICE_EMULATE", argv[i + 1], 1);
            host_reads = strncmp(argv[i + 1], "delay", 5) == 0;
        } else if (strcmp(argv[i], "--fusion-oom") == 0) {
            oom = atoi(argv[i + 1]);
            setenv("HVD_FUSION_THRESHOLD", OOM_THRESHOLD, 1);
        } else if (strcmp(argv[i], "--pack-fails") == 0) {
            pack_fails = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--no-device") == 0) {
            no_device = atoi(argv[i + 1]);
            setenv("HVD_FUSION_THRESHOLD", "1M", 1);
        } else if (strcmp(argv[i], "--check") == 0) {
            check = atoi(argv[i + 1]);
            setenv("HVD_RING_CHECK", argv[i + 1], 1);
        }
    /* MPI first, to tell that rank which it is before ring_dev's look;
     * on a GPU node it sees none either. */
    int deviceless = 0;
    if (no_device >= 0) {
        int provided, world;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &world);
        deviceless = world == no_device;
        if (deviceless) {
            unsetenv("HVD_DEVICE_EMULATE");
            setenv("CUDA_VISIBLE_DEVICES", "", 1);
        }
    }
    dev = ring_dev();
    /* Every rank as the mode wants it (a CUDA-aware MPI may have shown
     * that rank its GPU already), or all skip together. */
    if (no_device >= 0) {
        int bad = deviceless ? dev != NULL : dev == NULL, any;
        MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            MPI_Finalize();
            TEST_SKIP("--no-device: a rank has a device where it should "
                      "not, or none where it should");
        }
    }
    if (!dev && !deviceless)
        TEST_SKIP("no device: neither a GPU nor HVD_DEVICE_EMULATE");
    if ((oom >= 0 || pack_fails >= 0) && dev != &ring__dev_emulated)
        TEST_SKIP("--fusion-oom and --pack-fails need the emulated device");
    /* Only rank 0 writes the timeline; each rank names a file of its own,
     * so parallel runs do not collide. */
    char path[] = "/tmp/test_hvd_device.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return TEST_HARD_ERROR;
    close(fd);
    setenv("HVD_TIMELINE", path, 1);
    MPI_Comm oracle;
    int status = test_hvd_start(&argc, &argv, &oracle, &rank, &size);
    if (status != 0) return status;
    if (no_device >= 0) {
        test_no_device(no_device);
        unlink(path);
        status = test_hvd_finish("test_hvd_device --no-device", &oracle,
                                 rank, size);
        MPI_Finalize(); /* the test started it */
        return status;
    }
    if (dev->stream_create(&stream) != RING_OK) return TEST_HARD_ERROR;
    if (oom >= 0 || pack_fails >= 0) {
        if (oom >= 0) {
            test_fusion_oom(oom);
            test_joined_oom(oom);
        }
        if (pack_fails >= 0) {
            test_lone_fails(pack_fails);
            test_pack_fails(pack_fails, check);
        }
        dev->stream_destroy(stream);
        unlink(path);
        return test_hvd_finish(oom >= 0 ? "test_hvd_device --fusion-oom"
                                        : "test_hvd_device --pack-fails",
                               &oracle, rank, size);
    }

    for (int round = 0; round < 3; round++) test_orders(round);
    test_back_to_back();
    test_stream(0);
    test_stream(1);
    int lagged = dev == &ring__dev_emulated && size > 1;
    if (dev == &ring__dev_emulated) test_lone_waits();
    if (lagged) test_device_lane();
    test_broadcast_allgather();
    if (size > 1) test_mismatch(); /* ranks that disagree */
    test_bad_input();
    test_join();

    dev->stream_destroy(stream);
    int failed = test_failures, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, oracle);
    MPI_Comm_free(&oracle);
    TEST_EQ(hvd_shutdown(), HVD_OK); /* closes the timeline */
    /* nothing exported was freed while another rank had it open */
    if (dev == &ring__dev_emulated) TEST_EQ(ring__dev_emu_misuses(), 0u);
    if (rank == 0) check_timeline(path, lagged);
    unlink(path);
    if (rank == 0)
        printf("test_hvd_device n=%d on %s: %s\n", size, dev->name,
               any || test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
