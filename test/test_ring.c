/* test/test_ring.c: the ring collectives on host memory, across ranks.
 *
 * Run through mpirun at several sizes (test/ring_np*.mpi). Every case is
 * checked two ways: bitwise against MPI's own collective on a copy of the
 * input (MPI is the oracle, never the implementation), and for bitwise
 * agreement across ranks. Inputs are small integers, so sums, products and
 * averages are exact whatever the reduction order. A failing case prints one
 * line naming it: "allreduce n=5 count=7 dtype=bf16 op=avg inplace=1 ...".
 *
 * Options: --shm tests ring_shm_allreduce (and ring_shm_allreduce_apply)
 * instead of the ring collectives;
 * --hier L tests ring_allreduce_hier and ring_shm_allreduce_hier on
 * "nodes" of L consecutive ranks.
 * --segment-bytes N sets HVD_RING_SEGMENT_BYTES and HVD_SHM_SEGMENT_BYTES
 * before the first collective, so a run can force many pipeline segments
 * per block.
 * --stream auto|on|off sets HVD_SHM_STREAM, so both ways of writing the
 * shared blocks are tested whatever auto would pick.
 * --ctx auto|shm|ring tests a context (ring_ctx_create with that
 * intranode and a slab smaller than the large count): ring_ctx_allreduce,
 * ring_ctx_allreduce_pieces (pieces of many sizes, in order and laid out
 * backwards, with a rank giving zeros and one dropping a result), and the
 * context's other collectives and apply.
 * HVD_TEST_QUICK=1 (scripts/sanitize), or --quick (the specs at 5 ranks
 * and more, which the smaller ones cover at 1M), makes the largest count
 * 256K + 3 instead of 1M + 3.
 */
#define _POSIX_C_SOURCE 200809L /* setenv; test/capture.h */
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ring/ring.h"
#include "ring/ring_internal.h"
#include "test/capture.h"
#include "test/test.h"
#include "test/values.h"

static int rank, size;

/* The case being run, for failure messages. */
static char case_name[160];

static double input_value(int r, size_t i, ring_dtype_t dtype, ring_op_t op)
{
    unsigned h = (unsigned)(r * 5 + (int)(i % 1009) * 13 + 5);
    static const double factors[3] = {-1, 1, 2};
    if (op == RING_PRODUCT) /* at most 7 ranks: |product| <= 2^7, exact */
        return dtype == RING_UINT8 ? 1 + h % 3 : factors[h % 3];
    double v = (double)(h % 7);
    return dtype == RING_UINT8 ? v : v - 3;
}

static void fill(void *buf, size_t count, ring_dtype_t dtype, ring_op_t op,
                 int r)
{
    for (size_t i = 0; i < count; i++)
        prog_value_store(buf, i, dtype, input_value(r, i, dtype, op));
}

/* ---- the oracle: MPI's collectives, half types widened to float ---- */

static int is_half(ring_dtype_t dtype)
{
    return dtype == RING_FLOAT16 || dtype == RING_BFLOAT16;
}

/* Widens halves to float (other types are copied), in a new buffer. */
static void *widen(const void *in, size_t count, ring_dtype_t dtype)
{
    size_t esize = is_half(dtype) ? 4 : ring_dtype_size(dtype);
    char *out = malloc(count * esize + 1);
    if (!is_half(dtype)) return memcpy(out, in, count * esize);
    for (size_t i = 0; i < count; i++)
        ((float *)out)[i] = (float)prog_value_load(in, i, dtype);
    return out;
}

/* Back to dtype, dividing by the rank count for AVERAGE as ring does: in the
 * widened type, once, before rounding. */
static void narrow(const void *in, void *out, size_t count, ring_dtype_t dtype,
                   ring_op_t op)
{
    for (size_t i = 0; i < count; i++) {
        if (dtype == RING_FLOAT64) {
            double v = ((const double *)in)[i];
            ((double *)out)[i] = op == RING_AVERAGE ? v / size : v;
        } else if (dtype == RING_FLOAT32 || is_half(dtype)) {
            float v = ((const float *)in)[i];
            prog_value_store(out, i, dtype,
                             op == RING_AVERAGE ? v / (float)size : v);
        } else {
            memcpy((char *)out + i * ring_dtype_size(dtype),
                   (const char *)in + i * ring_dtype_size(dtype),
                   ring_dtype_size(dtype));
        }
    }
}

/* ---- checks ---- */

static void expect_equal(const void *got, const void *want, size_t count,
                         ring_dtype_t dtype)
{
    size_t esize = ring_dtype_size(dtype);
    /* One compare of the whole buffer; the element walk only names the
     * first difference (per element it was a fifth of this test's time). */
    int differs = count > 0 && memcmp(got, want, count * esize) != 0;
    for (size_t i = 0; differs && i < count; i++) {
        if (memcmp((const char *)got + i * esize, (const char *)want + i * esize,
                   esize) != 0) {
            TEST_FAIL("%s: element %zu is %g, MPI says %g", case_name, i,
                      prog_value_load(got, i, dtype),
                      prog_value_load(want, i, dtype));
            return;
        }
    }
    if (!test_same_everywhere(got, count * esize, MPI_COMM_WORLD))
        TEST_FAIL("%s: ranks disagree", case_name);
}

static void expect_status(int got, const char *what)
{
    if (got != RING_OK)
        TEST_FAIL("%s: %s returned %s", case_name, what, ring_strerror(got));
}

/* ---- the collectives ---- */

/* How an allreduce case runs: one of ring's algorithms, or through shared
 * memory (shm set), then with the input packed into the slab or not, or
 * through a context (ctx set), whole or in pieces. */
typedef struct {
    ring_algo_t algo;
    ring_shm_t *shm;
    int packed;
    MPI_Comm node, cross; /* hierarchical when not MPI_COMM_NULL */
    ring_ctx_t *ctx;
    int pieces; /* 1: in order; 2: laid out backwards in memory */
} how_t;

/* The context the other collectives go through, when --ctx is given. */
static ring_ctx_t *ctx_under_test;

/* Piece sizes, cycled: empty, tiny, odd, and larger than a segment. */
static const size_t piece_counts[] = {0, 1, 3, 1000, 7, 70000, 2, 4099};
enum { NPIECE_COUNTS = sizeof piece_counts / sizeof piece_counts[0] };

/* src -> dst (count elements, in the logical order) cut into pieces for
 * ring_ctx_allreduce_pieces: at least count + 1 of them fit in pieces;
 * returns how many. Layout 1 puts piece k at its logical offset; layout 2
 * lays the pieces out backwards, so that in place they tile nothing. On
 * the last rank piece 1 gives zeros (no sendbuf; *zeroed says where), on
 * rank 0 piece 2 drops its result (no recvbuf; *dropped says where). */
typedef struct {
    size_t first, count;
} span_t;

static size_t make_pieces(ring_piece_t *pieces, const char *src, char *dst,
                          size_t count, size_t esize, int layout,
                          span_t *zeroed, span_t *dropped)
{
    size_t n = 0, at = 0;
    *zeroed = *dropped = (span_t){0, 0};
    for (size_t k = 0; at < count || k == 0; k++) {
        size_t c = piece_counts[k % NPIECE_COUNTS];
        if (c > count - at) c = count - at;
        /* Backwards: the piece's bytes sit as far from the end as its
         * logical start is from the beginning. */
        size_t where = layout == 2 ? count - at - c : at;
        pieces[n] = (ring_piece_t){src + where * esize, dst + where * esize,
                                   c};
        if (k == 1 && rank == size - 1 && size > 1) {
            pieces[n].sendbuf = NULL;
            *zeroed = (span_t){where, c};
        }
        if (k == 2 && rank == 0 && size > 1) {
            pieces[n].recvbuf = NULL;
            *dropped = (span_t){where, c};
        }
        n++;
        at += c;
    }
    return n;
}

static void test_allreduce(const how_t *how, size_t count, ring_dtype_t dtype,
                           ring_op_t op, int inplace)
{
    size_t nbytes = count * ring_dtype_size(dtype), slab_bytes = 0;
    void *slab = NULL;
    if (how->shm) {
        expect_status(ring_shm_slab(how->shm, &slab, &slab_bytes),
                      "ring_shm_slab");
        if (how->packed && nbytes > slab_bytes) return; /* same everywhere */
    }
    char *in = malloc(nbytes + 1), *out = malloc(nbytes + 1),
         *want = malloc(nbytes + 1);
    int len = snprintf(case_name, sizeof case_name,
                       "allreduce n=%d count=%zu dtype=%s op=%s inplace=%d ",
                       size, count, ring_dtype_name(dtype), ring_op_name(op),
                       inplace);
    if (how->ctx)
        snprintf(case_name + len, sizeof case_name - (size_t)len,
                 "ctx pieces=%d", how->pieces);
    else if (how->shm)
        snprintf(case_name + len, sizeof case_name - (size_t)len,
                 "shm slab=%zu packed=%d%s", slab_bytes, how->packed,
                 how->cross != MPI_COMM_NULL ? " hier" : "");
    else if (how->node != MPI_COMM_NULL)
        snprintf(case_name + len, sizeof case_name - (size_t)len, "hier");
    else
        snprintf(case_name + len, sizeof case_name - (size_t)len, "algo=%s",
                 ring_algo_name(how->algo));
    fill(in, count, dtype, op, rank);
    /* In pieces, one rank gives zeros for piece 1 (see run_pieces): the
     * oracle gets zeros there from that rank too. */
    size_t esize = ring_dtype_size(dtype), npieces = 0;
    span_t zeroed = {0, 0}, dropped = {0, 0};
    ring_piece_t *pieces = NULL;
    char *src = inplace ? out : in, *dst = out;
    char *oracle_in = malloc(nbytes + 1);
    memcpy(oracle_in, in, nbytes);
    if (how->pieces) {
        pieces = malloc((count + 2) * sizeof *pieces);
        npieces = make_pieces(pieces, src, dst, count, esize, how->pieces,
                              &zeroed, &dropped);
        memset(oracle_in + zeroed.first * esize, 0, zeroed.count * esize);
    }

    void *wide_in = widen(oracle_in, count, dtype);
    void *wide_out = widen(oracle_in, count, dtype);
    MPI_Allreduce(wide_in, wide_out, (int)count, test_mpi_type(dtype),
                  test_mpi_op(op),
                  MPI_COMM_WORLD);
    narrow(wide_out, want, count, dtype, op);

    memset(out, 0xee, nbytes);
    if (inplace) memcpy(out, in, nbytes);
    if (how->packed) {
        memcpy(slab, in, nbytes);
        src = slab;
        if (inplace) dst = slab;
    }
    if (how->ctx && how->pieces) {
        expect_status(ring_ctx_allreduce_pieces(how->ctx, pieces, npieces,
                                                dtype, op),
                      "ring_ctx_allreduce_pieces");
        /* Untouched where the result was dropped, then as everywhere. */
        for (size_t i = 0; !inplace && i < dropped.count * esize; i++)
            if ((unsigned char)dst[dropped.first * esize + i] != 0xee) {
                TEST_FAIL("%s: a dropped piece was written", case_name);
                break;
            }
        memcpy(dst + dropped.first * esize, want + dropped.first * esize,
               dropped.count * esize);
    } else if (how->ctx)
        expect_status(ring_ctx_allreduce(how->ctx, src, dst, count, dtype,
                                         op),
                      "ring_ctx_allreduce");
    else if (how->shm && how->cross != MPI_COMM_NULL)
        expect_status(ring_shm_allreduce_hier(how->shm, how->cross, src, dst,
                                              count, dtype, op),
                      "ring_shm_allreduce_hier");
    else if (how->shm)
        expect_status(ring_shm_allreduce(how->shm, src, dst, count, dtype, op),
                      "ring_shm_allreduce");
    else if (how->node != MPI_COMM_NULL)
        expect_status(ring_allreduce_hier(src, dst, count, dtype, op,
                                          how->node, how->cross),
                      "ring_allreduce_hier");
    else
        expect_status(ring_allreduce_algo(how->algo, src, dst, count, dtype,
                                          op, MPI_COMM_WORLD),
                      "ring_allreduce_algo");
    if (dst != out) memcpy(out, dst, nbytes);
    expect_equal(out, want, count, dtype);
    free(wide_in);
    free(wide_out);
    free(oracle_in);
    free(pieces);
    free(in);
    free(out);
    free(want);
}

static void test_reduce_scatter(size_t recvcount, ring_dtype_t dtype,
                                ring_op_t op, int inplace)
{
    size_t esize = ring_dtype_size(dtype), count = recvcount * size;
    char *in = malloc(count * esize + 1), *out = malloc(count * esize + 1),
         *want = malloc(count * esize + 1);
    snprintf(case_name, sizeof case_name,
             "reduce_scatter n=%d recvcount=%zu dtype=%s op=%s inplace=%d",
             size, recvcount, ring_dtype_name(dtype), ring_op_name(op), inplace);
    fill(in, count, dtype, op, rank);

    void *wide_in = widen(in, count, dtype), *wide_out = widen(in, count, dtype);
    MPI_Reduce_scatter_block(wide_in, wide_out, (int)recvcount,
                             test_mpi_type(dtype), test_mpi_op(op),
                             MPI_COMM_WORLD);
    narrow(wide_out, want, recvcount, dtype, op);

    memcpy(out, in, count * esize);
    expect_status(ctx_under_test
                      ? ring_ctx_reduce_scatter(ctx_under_test,
                                                inplace ? out : in, out,
                                                recvcount, dtype, op)
                      : ring_reduce_scatter(inplace ? out : in, out,
                                            recvcount, dtype, op,
                                            MPI_COMM_WORLD),
                  "ring_reduce_scatter");
    char *mine = inplace ? out + (size_t)rank * recvcount * esize : out;
    for (size_t i = 0; i < recvcount * esize; i++) {
        if (mine[i] != want[i]) {
            TEST_FAIL("%s: byte %zu differs from MPI's", case_name, i);
            break;
        }
    }
    free(wide_in);
    free(wide_out);
    free(in);
    free(out);
    free(want);
}

static void test_allgather(size_t sendcount, ring_dtype_t dtype, int inplace)
{
    size_t esize = ring_dtype_size(dtype), total = sendcount * size * esize;
    char *in = malloc(sendcount * esize + 1), *out = malloc(total + 1),
         *want = malloc(total + 1);
    snprintf(case_name, sizeof case_name,
             "allgather n=%d sendcount=%zu dtype=%s inplace=%d", size,
             sendcount, ring_dtype_name(dtype), inplace);
    fill(in, sendcount, dtype, RING_SUM, rank);
    MPI_Allgather(in, (int)(sendcount * esize), MPI_BYTE, want,
                  (int)(sendcount * esize), MPI_BYTE, MPI_COMM_WORLD);
    memset(out, 0xee, total);
    char *own = out + (size_t)rank * sendcount * esize;
    if (inplace) memcpy(own, in, sendcount * esize);
    expect_status(ctx_under_test
                      ? ring_ctx_allgather(ctx_under_test, inplace ? own : in,
                                           out, sendcount, dtype)
                      : ring_allgather(inplace ? own : in, out, sendcount,
                                       dtype, MPI_COMM_WORLD),
                  "ring_allgather");
    expect_equal(out, want, sendcount * size, dtype);
    free(in);
    free(out);
    free(want);
}

static void test_broadcast(size_t count, ring_dtype_t dtype, int root)
{
    size_t nbytes = count * ring_dtype_size(dtype);
    char *buf = malloc(nbytes + 1), *want = malloc(nbytes + 1);
    snprintf(case_name, sizeof case_name,
             "broadcast n=%d count=%zu dtype=%s root=%d", size, count,
             ring_dtype_name(dtype), root);
    fill(want, count, dtype, RING_SUM, root);
    if (rank == root) memcpy(buf, want, nbytes);
    else memset(buf, 0xee, nbytes);
    expect_status(ctx_under_test
                      ? ring_ctx_broadcast(ctx_under_test, buf, count, dtype,
                                           root)
                      : ring_broadcast(buf, count, dtype, root,
                                       MPI_COMM_WORLD),
                  "ring_broadcast");
    expect_equal(buf, want, count, dtype);
    free(buf);
    free(want);
}

/* Bad arguments: an error status, never a crash, and no message sent (so
 * the next collective still matches on every rank). */
static void test_bad_arguments(void)
{
    float x[4] = {0};
    const int a = RING_ERR_ARG;
    MPI_Comm w = MPI_COMM_WORLD;
    char want[128];
    strcpy(case_name, "bad arguments");
    TEST_SAYS(ring_allreduce(NULL, x, 4, RING_FLOAT32, RING_SUM, w), a,
              "ring_allreduce: NULL buffer with count > 0 (count=4 dtype=0 "
              "op=0)\n");
    TEST_SAYS(ring_allreduce(x, NULL, 4, RING_FLOAT32, RING_SUM, w), a,
              "ring_allreduce: NULL buffer with count > 0");
    TEST_SAYS(ring_allreduce(NULL, NULL, 0, RING_FLOAT32, RING_SUM, w),
              RING_OK, NULL);
    TEST_SAYS(ring_allreduce(x, x, 4, (ring_dtype_t)99, RING_SUM, w), a,
              "ring_allreduce: unknown dtype (count=4 dtype=99 op=0)\n");
    TEST_SAYS(ring_allreduce(x, x, 4, RING_FLOAT32, (ring_op_t)99, w), a,
              "ring_allreduce: unknown op (count=4 dtype=0 op=99)\n");
    TEST_SAYS(ring_allreduce(x, x, 4, RING_INT32, RING_AVERAGE, w), a,
              "ring_allreduce: average is for floating dtypes only (use sum)");
    TEST_SAYS(ring_allreduce(x, x, 4, RING_FLOAT32, RING_SUM, MPI_COMM_NULL),
              a, "ring_allreduce: comm is MPI_COMM_NULL");
    TEST_SAYS(ring_allreduce_algo((ring_algo_t)7, x, x, 4, RING_FLOAT32,
                                  RING_SUM, w),
              a, "ring_allreduce_algo: unknown algorithm 7\n");
    snprintf(want, sizeof want, "ring_broadcast: root %d is not a rank of a "
             "communicator of size %d\n", size, size);
    TEST_SAYS(ring_broadcast(x, 4, RING_FLOAT32, size, w), a, want);
    snprintf(want, sizeof want, "ring_broadcast: root -1 is not a rank of a "
             "communicator of size %d\n", size);
    TEST_SAYS(ring_broadcast(x, 4, RING_FLOAT32, -1, w), a, want);
    TEST_SAYS(ring_reduce_scatter(x, NULL, 1, RING_FLOAT32, RING_SUM, w), a,
              "ring_reduce_scatter: NULL buffer with count > 0");
    TEST_SAYS(ring_allgather(NULL, x, 1, RING_FLOAT32, w), a,
              "ring_allgather: NULL buffer with count > 0");
    ring_algo_t algo;
    TEST_SAYS(ring_algo_parse("bogus", &algo), a, NULL);
    TEST_EQ(ring_algo_parse("rdb", &algo), RING_OK);
    TEST_EQ(algo, RING_ALGO_RDB);
}

static int valid(ring_dtype_t dtype, ring_op_t op)
{
    return !(op == RING_AVERAGE && dtype >= RING_INT32);
}

/* reduce_scatter, allgather and broadcast. */
static void test_other_collectives(const size_t *counts, size_t ncounts)
{
    for (size_t c = 0; c < ncounts; c++) {
        size_t block = counts[c] / (size_t)size + (c % 2);
        for (int dt = 0; dt < RING_DTYPE_COUNT; dt++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int op = 0; op < RING_OP_COUNT; op++)
                    if (valid(dt, op))
                        test_reduce_scatter(block, dt, op, inplace);
                test_allgather(block, dt, inplace);
            }
            for (int root = 0; root < size; root++)
                test_broadcast(counts[c], dt, root);
        }
    }
}

/* Pieces only move data: every dtype (each element size), but two ops,
 * the arithmetic being the whole call's, tested with all five. */
static int tested(const how_t *how, ring_dtype_t dtype, ring_op_t op)
{
    return valid(dtype, op) &&
           (!how->pieces || op == RING_SUM || op == RING_MIN);
}

static void test_allreduces(const how_t *how, const size_t *counts,
                            size_t ncounts)
{
    for (size_t c = 0; c < ncounts; c++)
        for (int dt = 0; dt < RING_DTYPE_COUNT; dt++)
            for (int op = 0; op < RING_OP_COUNT; op++)
                for (int inplace = 0; inplace < 2; inplace++)
                    if (tested(how, dt, op))
                        test_allreduce(how, counts[c], dt, op, inplace);
}

/* A context's slab as the room allows (ring__shm_fit): the slab asked
 * where it fits, else halved to what fits (not below RING_CTX_SLAB_MIN),
 * else none; every window chosen fits, and the next size up would not. */
static void test_shm_fit(void)
{
    enum { M = 1 << 20 };
    const size_t big = (size_t)128 * M, odd = (size_t)5 * M + 3;
    strcpy(case_name, "shm fit");
    TEST_EQ(ring__shm_fit(2, big, UINT64_MAX), big);
    TEST_EQ(ring__shm_fit(2, big, ring__shm_need(2, big)), big);
    TEST_EQ(ring__shm_fit(2, big, ring__shm_need(2, big) - 1), big / 2);
    TEST_EQ(ring__shm_fit(2, big, (uint64_t)24 * M), (size_t)8 * M);
    TEST_EQ(ring__shm_fit(3, big, (uint64_t)24 * M), (size_t)4 * M);
    TEST_EQ(ring__shm_fit(2, odd, ring__shm_need(2, odd) - 1),
            (size_t)RING_CTX_SLAB_MIN);
    TEST_EQ(ring__shm_fit(2, big, ring__shm_need(2, RING_CTX_SLAB_MIN) - 1),
            0);
    TEST_EQ(ring__shm_fit(2, big, 0), 0);
    size_t huge = ring__shm_fit(2, SIZE_MAX, (uint64_t)1 << 40);
    TEST_TRUE(huge > 0 && ring__shm_need(2, huge) <= (uint64_t)1 << 40);
    for (int n = 1; n <= 8; n++)
        for (uint64_t room = 0; room < (uint64_t)300 * M; room += 7 * M + 1) {
            size_t s = ring__shm_fit(n, big, room);
            if (s && ring__shm_need(n, s) > room)
                TEST_FAIL("fit(%d, 128M, %llu) = %zu does not fit", n,
                          (unsigned long long)room, s);
            if (s && s < big && ring__shm_need(n, 2 * s) <= room)
                TEST_FAIL("fit(%d, 128M, %llu) = %zu where %zu fits", n,
                          (unsigned long long)room, s, 2 * s);
        }
}

/* Buffers that overlap the slab without being it, or overrun it, are
 * refused before any rank waits for another; so is a window without
 * room. */
static void test_shm_bad_arguments(ring_shm_t *shm)
{
    float x[4] = {0};
    char *slab;
    size_t bytes;
    ring_shm_t *none = NULL;
    const int a = RING_ERR_ARG;
    strcpy(case_name, "shm bad arguments");
    TEST_SAYS(ring_shm_create(MPI_COMM_WORLD, 0, &none), a,
              "ring_shm_create: slab_bytes is 0\n");
    TEST_SAYS(ring_shm_create(MPI_COMM_NULL, 64, &none), a,
              "ring_shm_create: comm is NULL\n");
    TEST_SAYS(ring_shm_create(MPI_COMM_WORLD, 64, NULL), a,
              "ring_shm_create: out is NULL\n");
    TEST_TRUE(none == NULL);
    /* A window the node's shared memory has no room for (/proc has no
     * free bytes) is refused on every rank, rank 0 saying why, before MPI
     * is asked (Open MPI's would leave the others waiting). */
    const char *var = "OMPI_MCA_osc_sm_backing_directory";
    char *was = getenv(var) ? strdup(getenv(var)) : NULL;
    setenv(var, "/proc", 1);
    TEST_SAYS(ring_shm_create(MPI_COMM_WORLD, 64, &none), RING_ERR_NOMEM,
              rank == 0 ? "in /proc, which has 0 free" : NULL);
    if (was)
        setenv(var, was, 1);
    else
        unsetenv(var);
    free(was);
    TEST_SAYS(ring_shm_create(MPI_COMM_WORLD, SIZE_MAX, &none), a,
              "is more than a window of");
    TEST_TRUE(none == NULL);
    TEST_SAYS(ring_shm_slab(NULL, (void **)&slab, &bytes), a,
              "ring_shm_slab: shm is NULL\n");
    TEST_SAYS(ring_shm_slab(shm, NULL, &bytes), a,
              "ring_shm_slab: slab is NULL\n");
    TEST_SAYS(ring_shm_allreduce(NULL, x, x, 4, RING_FLOAT32, RING_SUM), a,
              "ring_shm_allreduce: shm is NULL\n");
    TEST_EQ(ring_shm_slab(shm, (void **)&slab, &bytes), RING_OK);
    size_t fits = bytes / sizeof(float);
    char want[160];
    snprintf(want, sizeof want, "ring_shm_allreduce: sendbuf overlaps the "
             "slab without starting at it (count=4, slab %zu bytes)\n", bytes);
    TEST_SAYS(ring_shm_allreduce(shm, slab + 4, x, 4, RING_FLOAT32, RING_SUM),
              a, want);
    snprintf(want, sizeof want, "ring_shm_allreduce: recvbuf overlaps the "
             "slab without starting at it (count=4, slab %zu bytes)\n", bytes);
    TEST_SAYS(ring_shm_allreduce(shm, x, slab + bytes - 4, 4, RING_FLOAT32,
                                 RING_SUM),
              a, want);
    snprintf(want, sizeof want, "ring_shm_allreduce: sendbuf is the slab, "
             "but count overruns it (count=%zu, slab %zu bytes)\n", fits + 1,
             bytes);
    TEST_SAYS(ring_shm_allreduce(shm, slab, slab, fits + 1, RING_FLOAT32,
                                 RING_SUM),
              a, want);
    TEST_SAYS(ring_shm_allreduce(shm, x, x, 4, RING_INT32, RING_AVERAGE), a,
              "ring_shm_allreduce: average is for floating dtypes only (use "
              "sum) (count=4 dtype=4 op=1)\n");
    TEST_EQ(ring_shm_free(&none), RING_OK);
}

/* What test_shm_apply's function saw: every element once, reduced right,
 * never in recvbuf. */
typedef struct {
    size_t count;
    const float *recvbuf;
    unsigned char *calls; /* (count) how often this rank applied each */
    size_t wrong;         /* elements that came in not reduced right */
    int in_recvbuf;       /* data lay in recvbuf */
} apply_seen_t;

static double apply_sum(size_t i)
{
    double sum = 0;
    for (int r = 0; r < size; r++)
        sum += input_value(r, i, RING_FLOAT32, RING_SUM);
    return sum;
}

/* The caller's function: sum -> 2 sum + 1, so that every rank can tell
 * an applied element from a merely reduced one. */
static void apply_double(void *ctx, size_t first, void *data, size_t n)
{
    apply_seen_t *seen = ctx;
    float *x = data;
    if (x < seen->recvbuf + seen->count && x + n > seen->recvbuf)
        seen->in_recvbuf = 1;
    for (size_t j = 0; j < n && first + j < seen->count; j++) {
        if (x[j] != (float)apply_sum(first + j)) seen->wrong++;
        seen->calls[first + j]++;
        x[j] = 2 * x[j] + 1;
    }
}

/* ring_shm_allreduce_apply (shm set) or ring_ctx_allreduce_apply (ctx
 * set), float32 sum, out of place, in place and, through shm, packed
 * (where the count fits the slab): every rank receives 2 sum + 1 at every
 * element. Through the window each element was applied exactly once over
 * all ranks; otherwise (a context without one) once on every rank. */
static void test_apply(ring_shm_t *shm, ring_ctx_t *ctx, const size_t *counts,
                       size_t ncounts)
{
    for (size_t c = 0; c < ncounts; c++) {
        size_t count = counts[c], slab_bytes = 0;
        float *slab = NULL;
        const char *algo = shm ? "shm"
                               : ring_ctx_allreduce_algo(ctx, count,
                                                         RING_FLOAT32);
        int times = algo && strcmp(algo, "shm") == 0 ? 1 : size;
        if (shm)
            expect_status(ring_shm_slab(shm, (void **)&slab, &slab_bytes),
                          "ring_shm_slab");
        for (int mode = 0; mode < 3; mode++) {
            if (mode == 2 && count * sizeof(float) > slab_bytes) continue;
            snprintf(case_name, sizeof case_name, "%s apply n=%d count=%zu "
                     "%s algo=%s", shm ? "shm" : "ctx", size, count,
                     mode == 0 ? "out of place" : mode == 1 ? "in place"
                                                            : "packed",
                     algo);
            float *in = malloc(count * sizeof(float) + 1);
            float *out = mode == 1 ? in : malloc(count * sizeof(float) + 1);
            float *src = mode == 2 ? slab : in;
            apply_seen_t seen = {count, out, calloc(count + 1, 1), 0, 0};
            for (size_t i = 0; i < count; i++)
                src[i] = (float)input_value(rank, i, RING_FLOAT32, RING_SUM);
            ring_apply_t apply = {apply_double, &seen};
            expect_status(shm ? ring_shm_allreduce_apply(shm, src, out, count,
                                                         RING_FLOAT32,
                                                         RING_SUM, &apply)
                              : ring_ctx_allreduce_apply(ctx, src, out, count,
                                                         RING_FLOAT32,
                                                         RING_SUM, &apply),
                          "allreduce_apply");
            size_t bad = 0;
            for (size_t i = 0; i < count; i++)
                bad += out[i] != (float)(2 * apply_sum(i) + 1);
            unsigned char *total = calloc(count + 1, 1);
            MPI_Allreduce(seen.calls, total, (int)count, MPI_UNSIGNED_CHAR,
                          MPI_SUM, MPI_COMM_WORLD);
            size_t wrong_times = 0;
            for (size_t i = 0; i < count; i++) wrong_times += total[i] != times;
            if (bad || wrong_times || seen.wrong || seen.in_recvbuf)
                TEST_FAIL("%s: %zu elements wrong, %zu not applied %d "
                          "time(s), %zu came in not reduced, data in "
                          "recvbuf: %d", case_name, bad, wrong_times, times,
                          seen.wrong, seen.in_recvbuf);
            free(total);
            free(seen.calls);
            if (out != in) free(out);
            free(in);
        }
    }
    if (!shm) return;
    strcpy(case_name, "shm apply NULL");
    float x[4] = {1, 2, 3, 4};
    TEST_SAYS(ring_shm_allreduce_apply(shm, x, x, 4, RING_FLOAT32, RING_SUM,
                                       NULL),
              RING_ERR_ARG, "ring_shm_allreduce_apply: apply or apply->fn is "
                            "NULL\n");
}

/* The shared-memory allreduce among comm's ranks (hierarchical over cross
 * unless that is MPI_COMM_NULL): a slab smaller than the large count (so
 * it runs in chunks) and one that holds it, each with the input where the
 * caller has it and packed into the slab. */
/* Ranks that ask for slabs of different sizes get the largest: a call is
 * cut into chunks of a slab, which ranks cut differently (rank 1 got 1536
 * of 2048 sums wrong, and rank 0 waited forever). */
static void test_shm_slabs_differ(MPI_Comm comm)
{
    enum { COUNT = 2048 };
    ring_shm_t *shm = NULL;
    float in[COUNT], out[COUNT];
    strcpy(case_name, "ring_shm_create, slabs that differ");
    expect_status(ring_shm_create(comm, (size_t)4096 * (rank + 1), &shm),
                  "ring_shm_create");
    if (!shm) return;
    for (int i = 0; i < COUNT; i++) in[i] = (float)(i + rank);
    expect_status(ring_shm_allreduce(shm, in, out, COUNT, RING_FLOAT32,
                                     RING_SUM),
                  "ring_shm_allreduce");
    int wrong = 0;
    for (int i = 0; i < COUNT; i++)
        wrong += out[i] != (float)(i * size + size * (size - 1) / 2);
    if (wrong)
        TEST_FAIL("slabs of 4096 x (rank + 1) bytes: %d of %d sums wrong",
                  wrong, COUNT);
    expect_status(ring_shm_free(&shm), "ring_shm_free");
}

static void test_shm(MPI_Comm comm, MPI_Comm cross, const size_t *counts,
                     size_t ncounts)
{
    if (cross == MPI_COMM_NULL) test_shm_slabs_differ(comm);
    const size_t slab_bytes[] = {64 << 10, 16 << 20};
    for (int i = 0; i < 2; i++) {
        ring_shm_t *shm = NULL;
        strcpy(case_name, "ring_shm_create");
        expect_status(ring_shm_create(comm, slab_bytes[i], &shm),
                      "ring_shm_create");
        if (!shm) return;
        if (i == 0 && cross == MPI_COMM_NULL) {
            test_shm_bad_arguments(shm);
            test_shm_fit();
        }
        for (int packed = 0; packed < 2; packed++) {
            how_t how = {.shm = shm, .packed = packed, .node = comm,
                         .cross = cross};
            test_allreduces(&how, counts, ncounts);
        }
        if (cross == MPI_COMM_NULL) test_apply(shm, NULL, counts, ncounts);
        expect_status(ring_shm_free(&shm), "ring_shm_free");
        TEST_TRUE(shm == NULL);
    }
}

/* Under the window's 4 KiB, a context that picks its algorithm (auto)
 * reduces in the window's order, through a gather: bitwise what a context
 * whose every call takes the window gives, since fusion decides which of
 * the two a tensor meets. Values of several magnitudes, so that another
 * order, or halves rounded at each step, show. */
static void test_small_as_window(void)
{
    const ring_dtype_t dtypes[] = {RING_FLOAT16, RING_BFLOAT16, RING_FLOAT32};
    const ring_op_t ops[] = {RING_SUM, RING_AVERAGE};
    enum { COUNT = 333 };
    ring_ctx_opts_t opts = {.slab_bytes = 64 << 10};
    ring_ctx_t *picks = NULL, *window = NULL;
    strcpy(case_name, "small as the window: ring_ctx_create");
    expect_status(ring_ctx_create(MPI_COMM_WORLD, &opts, &picks),
                  "ring_ctx_create");
    opts.intranode = RING_INTRANODE_SHM;
    expect_status(ring_ctx_create(MPI_COMM_WORLD, &opts, &window),
                  "ring_ctx_create");
    float in[COUNT], a[COUNT], b[COUNT]; /* room for every dtype */
    for (size_t d = 0; picks && window && d < 3; d++)
        for (size_t o = 0; o < 2; o++) {
            for (int i = 0; i < COUNT; i++)
                prog_value_store(in, (size_t)i, dtypes[d],
                                 ((rank * 7919 + i * 104729) % 1000) / 7.0 *
                                     pow(10.0, (i + rank) % 5 - 2));
            expect_status(ring_ctx_allreduce(picks, in, a, COUNT, dtypes[d],
                                             ops[o]),
                          "ring_ctx_allreduce (picks)");
            expect_status(ring_ctx_allreduce(window, in, b, COUNT, dtypes[d],
                                             ops[o]),
                          "ring_ctx_allreduce (window)");
            size_t esize = ring_dtype_size(dtypes[d]), i = 0;
            while (i < COUNT &&
                   !memcmp((char *)a + i * esize, (char *)b + i * esize, esize))
                i++;
            if (i < COUNT)
                TEST_FAIL("n=%d %s %s, %d elements (%s): element %zu is %g, "
                          "the window's %g", size,
                          ring_dtype_name(dtypes[d]), ring_op_name(ops[o]),
                          COUNT, ring_ctx_allreduce_algo(picks, COUNT,
                                                         dtypes[d]),
                          i, prog_value_load(a, i, dtypes[d]),
                          prog_value_load(b, i, dtypes[d]));
        }
    if (picks) ring_ctx_free(&picks);
    if (window) ring_ctx_free(&window);
}

/* A context with the given intranode and a 64 KiB slab (so that the large
 * count runs in chunks): every collective through it, the allreduce whole
 * and in pieces, then its bad arguments. */
static void test_ctx(ring_intranode_t intranode, const size_t *counts,
                     size_t ncounts)
{
    ring_ctx_opts_t opts = {.slab_bytes = 64 << 10, .intranode = intranode};
    ring_ctx_t *ctx = NULL;
    strcpy(case_name, "ring_ctx_create");
    expect_status(ring_ctx_create(MPI_COMM_WORLD, &opts, &ctx),
                  "ring_ctx_create");
    if (!ctx) return;
    for (int pieces = 0; pieces < 3; pieces++) {
        how_t how = {.ctx = ctx, .pieces = pieces, .node = MPI_COMM_NULL,
                     .cross = MPI_COMM_NULL};
        test_allreduces(&how, counts, ncounts);
    }
    ctx_under_test = ctx;
    test_other_collectives(counts, ncounts);
    ctx_under_test = NULL;
    test_apply(NULL, ctx, counts, ncounts);

    float x[4] = {0};
    ring_ctx_t *none = NULL;
    strcpy(case_name, "ctx bad arguments");
    TEST_SAYS(ring_ctx_allreduce(NULL, x, x, 4, RING_FLOAT32, RING_SUM),
              RING_ERR_ARG, "ring_ctx_allreduce: ctx is NULL\n");
    TEST_SAYS(ring_ctx_allreduce_pieces(ctx, NULL, 2, RING_FLOAT32,
                                        RING_SUM),
              RING_ERR_ARG, "ring_ctx_allreduce_pieces: pieces is NULL\n");
    TEST_SAYS(ring_ctx_allreduce_apply(ctx, x, x, 4, RING_FLOAT32, RING_SUM,
                                       NULL),
              RING_ERR_ARG, "ring_ctx_allreduce_apply: apply or apply->fn "
                            "is NULL\n");
    /* A ready or done event where no device could have made one (a GPU
     * node's process has a device: the case is not there). */
    if (!ring_dev()) {
        static char not_an_event;
        /* Where no rank has a device, no device window is made: quietly. */
        TEST_SAYS(ring_ctx_register(ctx, x, sizeof x), RING_OK, NULL);
        TEST_SAYS(ring_ctx_allreduce_registered(
                      ctx, 4, RING_FLOAT32, RING_SUM,
                      (ring_event_t *)(void *)&not_an_event, NULL),
                  RING_ERR_ARG, "ring_ctx_allreduce_registered: an event, "
                                "but this process has no device\n");
        TEST_SAYS(ring_ctx_allreduce_registered(
                      ctx, 4, RING_FLOAT32, RING_SUM, NULL,
                      (ring_event_t *)(void *)&not_an_event),
                  RING_ERR_ARG, "ring_ctx_allreduce_registered: an event, "
                                "but this process has no device\n");
        expect_status(ring_ctx_allreduce_registered(ctx, 4, RING_FLOAT32,
                                                    RING_SUM, NULL, NULL),
                      "ring_ctx_allreduce_registered");
        expect_status(ring_ctx_register(ctx, NULL, 0), "unregister");
    }
    /* Out of place: recvbuf NULL, or over the registered buffer, is
     * refused; elsewhere the sum lands there and the buffer is left. */
    {
        float in[4] = {1, 2, 3, 4}, sum[4] = {0};
        int size;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        expect_status(ring_ctx_register(ctx, in, sizeof in),
                      "ring_ctx_register");
        TEST_SAYS(ring_ctx_allreduce_registered_to(ctx, 4, RING_FLOAT32,
                                                   RING_SUM, NULL, NULL, NULL,
                                                   NULL),
                  RING_ERR_ARG, "ring_ctx_allreduce_registered_to: recvbuf "
                                "is NULL, count > 0\n");
        TEST_SAYS(ring_ctx_allreduce_registered_to(ctx, 2, RING_FLOAT32,
                                                   RING_SUM, in + 1, NULL,
                                                   NULL, NULL),
                  RING_ERR_ARG, "ring_ctx_allreduce_registered_to: recvbuf "
                                "overlaps the registered buffer's first 2 "
                                "elements\n");
        expect_status(ring_ctx_allreduce_registered_to(ctx, 4, RING_FLOAT32,
                                                       RING_SUM, sum, NULL,
                                                       NULL, NULL),
                      "ring_ctx_allreduce_registered_to");
        for (int i = 0; i < 4; i++) {
            TEST_EQ(sum[i], (float)(size * (i + 1)));
            TEST_EQ(in[i], (float)(i + 1));
        }
        expect_status(ring_ctx_register(ctx, NULL, 0), "unregister");
    }
    /* Nothing to tell anyone without a device window: the status back. */
    TEST_SAYS(ring_ctx_give_up(ctx, RING_ERR_CUDA), RING_ERR_CUDA, NULL);
    TEST_SAYS(ring_ctx_give_up(NULL, RING_ERR_ARG), RING_ERR_ARG, NULL);
    /* opts that differ across ranks: refused on every rank (rank 0 went
     * on without a window, the others waited in its making). */
    if (size > 1) {
        ring_ctx_opts_t odd = {.intranode = rank == 0 ? RING_INTRANODE_RING
                                                      : RING_INTRANODE_AUTO};
        TEST_SAYS(ring_ctx_create(MPI_COMM_WORLD, &odd, &none),
                  RING_ERR_MISMATCH,
                  "ring_ctx_create: the ranks ask for different intranode "
                  "(0 and 2): every rank must pass the same opts\n");
        TEST_TRUE(none == NULL);
    }
    TEST_SAYS(ring_ctx_create(MPI_COMM_NULL, NULL, &none), RING_ERR_ARG,
              "ring_ctx_create: comm is MPI_COMM_NULL\n");
    TEST_TRUE(none == NULL);
    opts.hierarchical = 2;
    TEST_SAYS(ring_ctx_create(MPI_COMM_WORLD, &opts, &none), RING_ERR_ARG,
              "ring_ctx_create: hierarchical is neither 0 nor 1\n");
    strcpy(case_name, "ring_ctx_free");
    expect_status(ring_ctx_free(&ctx), "ring_ctx_free");
    TEST_TRUE(ctx == NULL);
    expect_status(ring_ctx_free(&ctx), "ring_ctx_free(NULL)");
}

/* Ranks on several nodes (test/netns.sh's fake hosts): shared memory is
 * refused on every rank, by name, before any rank waits for another. */
static void test_shm_span(void)
{
    MPI_Comm local;
    int local_size;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                        MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
    if (local_size == size) return; /* one node: test_shm's case */
    ring_shm_t *shm = NULL;
    strcpy(case_name, "shm across nodes");
    TEST_SAYS(ring_shm_create(MPI_COMM_WORLD, 4096, &shm), RING_ERR_ARG,
              "ring_shm_create: the ranks of comm span several nodes; shared "
              "memory needs them on one\n");
    TEST_TRUE(shm == NULL);
}

/* The hierarchical allreduce on "nodes" of `per_node` consecutive ranks. */
static void test_hier(int per_node, const size_t *counts, size_t ncounts)
{
    how_t how = {.node = MPI_COMM_NULL, .cross = MPI_COMM_NULL};
    float x[4] = {0};
    MPI_Comm_split(MPI_COMM_WORLD, rank / per_node, rank, &how.node);
    MPI_Comm_split(MPI_COMM_WORLD, rank % per_node, rank, &how.cross);
    strcpy(case_name, "hier bad arguments");
    TEST_EQ(ring_allreduce_hier(x, x, 4, RING_FLOAT32, RING_SUM, how.node,
                                MPI_COMM_NULL),
            RING_ERR_ARG);
    TEST_EQ(ring_allreduce_hier(x, NULL, 4, RING_FLOAT32, RING_SUM, how.node,
                                how.cross),
            RING_ERR_ARG);
    test_allreduces(&how, counts, ncounts);
    strcpy(case_name, "shm hier bad arguments");
    TEST_EQ(ring_shm_allreduce_hier(NULL, how.cross, x, x, 4, RING_FLOAT32,
                                    RING_SUM),
            RING_ERR_ARG);
    test_shm(how.node, how.cross, counts, ncounts);
    MPI_Comm_free(&how.node);
    MPI_Comm_free(&how.cross);
}

/* Every call refuses to run while MPI is down, saying so. */
static void test_outside_mpi(const char *state)
{
    float x = 1;
    ring_shm_t *shm = NULL;
    TEST_SAYS(ring_allreduce(&x, &x, 1, RING_FLOAT32, RING_SUM,
                             MPI_COMM_WORLD),
              RING_ERR_STATE, state);
    TEST_SAYS(ring_broadcast(&x, 1, RING_FLOAT32, 0, MPI_COMM_WORLD),
              RING_ERR_STATE, state);
    TEST_SAYS(ring_shm_create(MPI_COMM_WORLD, 4096, &shm), RING_ERR_STATE,
              state);
    TEST_TRUE(shm == NULL);
}

int main(int argc, char **argv)
{
    int shm = 0, per_node = 0, ctx = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--shm") == 0) shm = 1;
        else if (strcmp(argv[i], "--ctx") == 0 && i + 1 < argc) {
            const char *modes[] = {"auto", "shm", "ring"};
            for (int m = 0; m < 3; m++)
                if (strcmp(argv[i + 1], modes[m]) == 0) ctx = m;
            i++;
        }
        else if (strcmp(argv[i], "--hier") == 0 && i + 1 < argc)
            per_node = atoi(argv[++i]);
        else if (strcmp(argv[i], "--stream") == 0 && i + 1 < argc)
            setenv("HVD_SHM_STREAM", argv[++i], 1);
        else if (strcmp(argv[i], "--quick") == 0)
            setenv("HVD_TEST_QUICK", "1", 1);
        else if (strcmp(argv[i], "--segment-bytes") == 0 && i + 1 < argc) {
            setenv("HVD_RING_SEGMENT_BYTES", argv[i + 1], 1);
            setenv("HVD_SHM_SEGMENT_BYTES", argv[++i], 1);
        }
    }
    /* Every case allocates and frees buffers of up to 8 MB; glibc would
     * hand the memory back to the kernel each time and fault it in again. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    test_outside_mpi("MPI is not initialized (call MPI_Init first)");
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return TEST_HARD_ERROR;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_rank = rank;

    /* Over 1M, odd; under the sanitizers (HVD_TEST_QUICK=1) over 256K,
     * still several segments per block at 3 ranks, in a quarter of the
     * time. */
    const char *quick = getenv("HVD_TEST_QUICK");
    const size_t large = (quick && !strcmp(quick, "1") ? 1u << 18 : 1u << 20) + 3;
    const size_t counts[] = {0, 1, (size_t)size - 1, (size_t)size + 1, 97,
                             4099, large};
    const size_t ncounts = sizeof counts / sizeof counts[0];

    if (per_node > 0 && size % per_node != 0) {
        if (rank == 0)
            fprintf(stderr, "test_ring: --hier %d needs a multiple of %d "
                    "ranks, not %d\n", per_node, per_node, size);
        MPI_Finalize();
        return TEST_HARD_ERROR;
    }
    test_bad_arguments();
    test_shm_span();
    if (ctx >= 0) {
        test_ctx((ring_intranode_t)ctx, counts, ncounts);
        if (ctx == RING_INTRANODE_AUTO && size > 1) test_small_as_window();
    } else if (shm) {
        test_shm(MPI_COMM_WORLD, MPI_COMM_NULL, counts, ncounts);
    } else if (per_node > 0) {
        test_hier(per_node, counts, ncounts);
    } else {
        for (int algo = RING_ALGO_AUTO; algo < RING_ALGO_COUNT; algo++) {
            how_t how = {.algo = (ring_algo_t)algo, .node = MPI_COMM_NULL,
                         .cross = MPI_COMM_NULL};
            test_allreduces(&how, counts, ncounts);
        }
        test_other_collectives(counts, ncounts);
    }

    int failed = test_failures, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ring%s n=%d: %s\n",
               ctx >= 0 ? " --ctx" : shm ? " --shm" : per_node ? " --hier" : "",
               size, any ? "FAIL" : "ok");
    MPI_Finalize();
    test_outside_mpi("MPI is finalized");
    return test_exit_code();
}
