/* test/test_ring_check.c: HVD_RING_CHECK=1 (ring/check.c). Ring calls that
 * differ across ranks, or that one rank refuses, fail on every rank before
 * any data moves, with a message naming what differs; the communicator is
 * still usable afterwards.
 *
 *   test_ring_check calls    in each case the last rank's call differs in
 *                            one thing, every collective in turn
 *   test_ring_check tuning   the last rank has another
 *                            HVD_RING_SEGMENT_BYTES
 *   test_ring_check device   on the emulated device, with MPI taken for
 *                            CUDA-aware: the last rank cannot make its
 *                            context's stream at the context's first
 *                            device call, and says so in the agreement
 *   test_ring_check staged   the same, MPI not CUDA-aware: the last rank
 *                            cannot make the staging's streams, past the
 *                            agreement, and says so where it is made
 *
 * Each case checks every rank's status, the message, that no output was
 * written, and then that a matching allreduce still sums right. Run at 2
 * and 3 ranks (test/ring_check_np*.mpi).
 */
#define _POSIX_C_SOURCE 200809L /* setenv; test/capture.h */
#include <string.h>
#include "ring/ring.h"
#include "ring/dev.h"
#include "test/capture.h"
#include "test/test.h"

enum { N = 12, SENTINEL = -7 };

static int rank, size;
static int in[N * 8], out[N * 8];
static ring_shm_t *shm;
static MPI_Comm self; /* the "cross" of a one-node hierarchical call */

/* One case: the call each rank makes (odd: this rank is the one that
 * differs), what the others are told, and whether the odd rank refuses
 * its own call (then it fails with RING_ERR_ARG). */
typedef struct {
    const char *name;
    int (*call)(int odd);
    const char *says;
    int refused;
} check_case_t;

static int count_differs(int odd)
{
    return ring_allreduce(in, out, N + odd, RING_INT32, RING_SUM,
                          MPI_COMM_WORLD);
}

static int dtype_differs(int odd)
{
    return ring_allreduce(in, out, N, odd ? RING_FLOAT32 : RING_INT32,
                          RING_SUM, MPI_COMM_WORLD);
}

static int op_differs(int odd)
{
    return ring_allreduce(in, out, N, RING_INT32, odd ? RING_MAX : RING_SUM,
                          MPI_COMM_WORLD);
}

static int algo_differs(int odd)
{
    return ring_allreduce_algo(odd ? RING_ALGO_RDB : RING_ALGO_RING, in, out,
                               N, RING_INT32, RING_SUM, MPI_COMM_WORLD);
}

static int root_differs(int odd)
{
    memcpy(out, in, sizeof out);
    return ring_broadcast(out, N, RING_INT32, odd, MPI_COMM_WORLD);
}

static int kind_differs(int odd)
{
    if (odd) return ring_broadcast(out, N, RING_INT32, 0, MPI_COMM_WORLD);
    return ring_allreduce(in, out, N, RING_INT32, RING_SUM, MPI_COMM_WORLD);
}

static int scatter_count_differs(int odd)
{
    return ring_reduce_scatter(in, out, 2 + odd, RING_INT32, RING_SUM,
                               MPI_COMM_WORLD);
}

static int gather_count_differs(int odd)
{
    return ring_allgather(in, out, 2 + odd, RING_INT32, MPI_COMM_WORLD);
}

static int shm_count_differs(int odd)
{
    return ring_shm_allreduce(shm, in, out, N + odd, RING_INT32, RING_SUM);
}

static void apply_nothing(void *ctx, size_t first, void *data, size_t n)
{
    (void)ctx, (void)first, (void)data, (void)n;
}

static int shm_apply_differs(int odd)
{
    ring_apply_t apply = {apply_nothing, NULL};
    return odd ? ring_shm_allreduce_apply(shm, in, out, N, RING_INT32,
                                          RING_SUM, &apply)
               : ring_shm_allreduce(shm, in, out, N, RING_INT32, RING_SUM);
}

static int shm_apply_null(int odd)
{
    ring_apply_t apply = {apply_nothing, NULL};
    return ring_shm_allreduce_apply(shm, in, out, N, RING_INT32, RING_SUM,
                                    odd ? NULL : &apply);
}

static int hier_op_differs(int odd)
{
    return ring_allreduce_hier(in, out, N, RING_INT32,
                               odd ? RING_MIN : RING_SUM, MPI_COMM_WORLD,
                               self);
}

static int shm_hier_count_differs(int odd)
{
    return ring_shm_allreduce_hier(shm, self, in, out, N - odd, RING_INT32,
                                   RING_SUM);
}

static int null_buffer(int odd)
{
    return ring_allreduce(in, odd ? NULL : out, N, RING_INT32, RING_SUM,
                          MPI_COMM_WORLD);
}

static int root_out_of_range(int odd)
{
    memcpy(out, in, sizeof out);
    return ring_broadcast(out, N, RING_INT32, odd ? size : 0, MPI_COMM_WORLD);
}

static int average_of_ints(int odd)
{
    return ring_reduce_scatter(in, out, 2, RING_INT32,
                               odd ? RING_AVERAGE : RING_SUM, MPI_COMM_WORLD);
}

static int shm_buffer_overlaps_slab(int odd)
{
    void *slab;
    if (ring_shm_slab(shm, &slab, NULL) != RING_OK) return RING_ERR_STATE;
    return ring_shm_allreduce(shm, odd ? (char *)slab + 4 : (void *)in, out,
                              N, RING_INT32, RING_SUM);
}

static const check_case_t cases[] = {
    {"count", count_differs, "ranks disagree on count", 0},
    {"dtype", dtype_differs, "ranks disagree on dtype", 0},
    {"op", op_differs, "ranks disagree on op", 0},
    {"algorithm", algo_differs, "ranks disagree on algorithm", 0},
    {"root", root_differs, "ranks disagree on root", 0},
    {"kind", kind_differs,
     "ranks disagree on the collective (HVD_RING_CHECK): this rank has "
     "ring_", 0},
    {"reduce_scatter count", scatter_count_differs, "disagree on count", 0},
    {"allgather count", gather_count_differs, "disagree on count", 0},
    {"shm count", shm_count_differs, "ring_shm_allreduce: ranks disagree", 0},
    {"shm apply", shm_apply_differs,
     "ranks disagree on the collective (HVD_RING_CHECK): this rank has "
     "ring_shm_", 0},
    {"hier op", hier_op_differs, "ring_allreduce_hier: ranks disagree on op",
     0},
    {"shm hier count", shm_hier_count_differs,
     "ring_shm_allreduce_hier: ranks disagree on count", 0},
    {"NULL buffer", null_buffer, "another rank refused its call", 1},
    {"root out of range", root_out_of_range, "another rank refused", 1},
    {"average of ints", average_of_ints, "another rank refused", 1},
    {"shm buffer in the slab", shm_buffer_overlaps_slab,
     "another rank refused", 1},
    {"shm apply NULL", shm_apply_null, "another rank refused", 1},
};

/* A matching call after a failed one: the ranks' traffic still pairs up. */
static void expect_still_matched(const char *after)
{
    int buf[N];
    for (int i = 0; i < N; i++) buf[i] = i + rank;
    int status = ring_allreduce(buf, buf, N, RING_INT32, RING_SUM,
                                MPI_COMM_WORLD);
    if (status != RING_OK) TEST_FAIL("after %s: allreduce failed", after);
    for (int i = 0; i < N && status == RING_OK; i++)
        if (buf[i] != i * size + size * (size - 1) / 2) {
            TEST_FAIL("after %s: element %d is %d", after, i, buf[i]);
            break;
        }
}

static void run_case(const check_case_t *c)
{
    int odd = rank == size - 1;
    for (int i = 0; i < N * 8; i++) {
        in[i] = i + rank;
        out[i] = SENTINEL;
    }
    int want = odd && c->refused ? RING_ERR_ARG : RING_ERR_MISMATCH;
    test_capture_begin();
    int got = c->call(odd);
    const char *said = test_capture_end();
    if (got != want)
        TEST_FAIL("%s: status %d, want %d", c->name, got, want);
    if (!(odd && c->refused) && !strstr(said, c->says))
        TEST_FAIL("%s: wrote \"%s\", want \"%s\"", c->name, said, c->says);
    /* A refused broadcast is refused before it moves anything: its own
     * buffer was copied from `in` by the case. */
    int untouched = c->call == root_differs || c->call == root_out_of_range
                        ? in[0]
                        : SENTINEL;
    if (out[0] != untouched)
        TEST_FAIL("%s: output written (%d)", c->name, out[0]);
    expect_still_matched(c->name);
}

/* Calls that agree run as before, with the check on. */
static void run_matching(void)
{
    int buf[N];
    for (int i = 0; i < N; i++) buf[i] = rank;
    TEST_EQ(ring_shm_allreduce(shm, buf, buf, N, RING_INT32, RING_SUM),
            RING_OK);
    TEST_EQ(buf[N - 1], size * (size - 1) / 2);
    TEST_EQ(ring_broadcast(buf, N, RING_INT32, size - 1, MPI_COMM_WORLD),
            RING_OK);
    TEST_EQ(buf[0], size * (size - 1) / 2);
    expect_still_matched("matching calls");
}

/* A context's first device call, over a CUDA-aware MPI, binds the
 * context's stream, made then: a rank that cannot make it (a broken
 * context; the emulated device made to fail it) refuses its call in the
 * agreement, so every rank's call fails before any data moves (before,
 * it failed after the agreement, and the others went on without it).
 * Over an MPI that is not CUDA-aware the call stages through host memory,
 * whose streams the first staged call makes, after the agreement: every
 * rank says there whether it made them, and the others' calls fail with
 * RING_ERR_STATE (before, they waited for it in MPI). The next call sums.
 * Both for ring_allreduce, whose calls share a stream (before, a rank
 * that could not make it skipped every device operation of its calls
 * from then on, and the others summed its stale buffers), and for a
 * context of its own. */
static void run_device(int staged)
{
    const ring_dev_t *dev = ring_dev();
    ring_ctx_t *ctx = NULL;
    ring_stream_t *s = NULL;
    int *d = NULL, odd = rank == size - 1;
    if (!dev || dev->alloc((void **)&d, sizeof in) != RING_OK ||
        dev->stream_create(&s) != RING_OK ||
        ring_ctx_create(MPI_COMM_WORLD, NULL, &ctx) != RING_OK) {
        TEST_FAIL("no emulated device, memory, stream or context");
        return;
    }
    /* ring_allreduce's wrapped context first (its stream, shared by all
     * such calls, is made by the first), then ctx. */
    for (int wrapped = 1; wrapped >= 0; wrapped--) {
        for (int i = 0; i < N; i++) in[i] = i + rank;
        TEST_EQ(dev->copy(d, in, N * sizeof *in, s), RING_OK);
        TEST_EQ(dev->stream_sync(s), RING_OK);
        if (odd) ring__dev_emu_fails(RING__EMU_FAIL_STREAMS);
        TEST_SAYS(wrapped ? ring_allreduce(d, d, N, RING_INT32, RING_SUM,
                                           MPI_COMM_WORLD)
                          : ring_ctx_allreduce(ctx, d, d, N, RING_INT32,
                                               RING_SUM),
                  odd      ? RING_ERR_CUDA
                  : staged ? RING_ERR_STATE
                           : RING_ERR_MISMATCH,
                  odd      ? "stream_create"
                  : staged ? "another rank could not make its staging"
                           : "another rank refused its call");
        ring__dev_emu_fails(0);
        TEST_EQ(wrapped ? ring_allreduce(d, d, N, RING_INT32, RING_SUM,
                                         MPI_COMM_WORLD)
                        : ring_ctx_allreduce(ctx, d, d, N, RING_INT32,
                                             RING_SUM),
                RING_OK);
        TEST_EQ(dev->copy(out, d, N * sizeof *out, s), RING_OK);
        TEST_EQ(dev->stream_sync(s), RING_OK);
        for (int i = 0; i < N; i++)
            TEST_EQ(out[i], i * size + size * (size - 1) / 2);
    }
    ring_ctx_free(&ctx);
    dev->stream_destroy(s);
    dev->release(d);
}

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "";
    int tuning = !strcmp(mode, "tuning"), staged = !strcmp(mode, "staged");
    int device = staged || !strcmp(mode, "device");
    if (!tuning && !device && strcmp(mode, "calls")) {
        fprintf(stderr, "usage: test_ring_check calls|tuning|device|"
                        "staged\n");
        return TEST_HARD_ERROR;
    }
    setenv("HVD_RING_CHECK", "1", 1);
    if (device) {
        setenv("HVD_DEVICE_EMULATE", "1", 1);
        setenv("HVD_CUDA_AWARE", staged ? "0" : "1", 1);
    }
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return TEST_HARD_ERROR;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_rank = rank;
    if (tuning) {
        /* Read at the first collective, so set before it. */
        if (rank == size - 1) setenv("HVD_RING_SEGMENT_BYTES", "4096", 1);
        int buf[N] = {0};
        TEST_SAYS(ring_allreduce(buf, buf, N, RING_INT32, RING_SUM,
                                 MPI_COMM_WORLD),
                  RING_ERR_MISMATCH,
                  "ranks disagree on HVD_RING_SEGMENT_BYTES");
    } else if (device) {
        run_device(staged);
    } else {
        MPI_Comm_dup(MPI_COMM_SELF, &self);
        if (ring_shm_create(MPI_COMM_WORLD, 4096, &shm) != RING_OK)
            return TEST_HARD_ERROR;
        run_matching();
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(&cases[i]);
        ring_shm_free(&shm);
        MPI_Comm_free(&self);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("test_ring_check %s: %s\n", argv[1], test_failures ? "FAIL" : "ok");
    MPI_Finalize();
    return test_exit_code();
}
