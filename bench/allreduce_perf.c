/* bench/allreduce_perf.c: all-reduce bandwidth benchmark in the shape of
 * nccl-tests' all_reduce_perf (same options, same table, same footer).
 *
 * For each size from -b to -e (times -f each step) it times one
 * implementation out of place and in place and prints time, algbw, busbw and
 * #wrong per size. The implementations plug in through one callback struct
 * (bench_impl_t):
 *   ring      ours, ring_allreduce_algo() with --algo;
 *   mpi       the MPI library's MPI_Allreduce on the same buffers;
 *   noreduce  the very messages our ring moves (2(N-1) steps of count/N
 *             elements to the right neighbour) with no reduction: the limit
 *             a ring can reach on this machine (shared/BENCHMARKING.md);
 *   shm       ours, ring_shm_allreduce(): every rank reduces its block
 *             straight from the others' memory (all ranks on one node);
 *   hier      ours, ring_allreduce_hier(): reduce-scatter within each node,
 *             allreduce across nodes, allgather within (--impl only);
 *   hiershm   the same with the node's stages through shm's window
 *             (ring_shm_allreduce_hier; --impl only).
 * When shm runs, recvbuf is shm's slab for every implementation (ring and
 * MPI do not mind where their memory is): in place, shm then reduces data
 * that already lies in shared memory, as hvd's fusion buffer does, and out
 * of place it reads a private sendbuf.
 * --compare times all four interleaved per size on the same buffers,
 * because on noisy machines only measurements taken side by side compare.
 *
 * Inputs are small integers, so every sum, product and average is exact in
 * every dtype and the check is `==` against a result each rank computes
 * alone. Checks run after the timed loops, never inside them.
 *
 * Left out: CUDA device buffers (host memory only), several threads or
 * devices per rank, and nccl-tests' CSV and CUDA-graph modes.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mpi.h>

#include "bench/common.h"
#include "ring/ring.h"

/* ---- configuration ---- */

typedef struct bench_impl bench_impl_t;

typedef struct {
    size_t min_nbytes, max_nbytes;
    size_t step_factor;
    bench_loop_t loop; /* -n, -w, -r, -c */
    ring_dtype_t dtype;
    ring_op_t op;
    ring_algo_t algo;
    const bench_impl_t *impl; /* NULL with --compare: all of them */
} bench_opts_t;

typedef struct {
    bench_opts_t opts;
    int rank, nranks;
    size_t elsize;     /* bytes per element of opts.dtype */
    char *sendbuf;     /* inputs; max_nbytes / elsize elements each */
    char *recvbuf;     /* results, and the data of in-place calls; shm's
                          slab when shm runs */
    char *expected;    /* what recvbuf must hold after one call */
    ring_shm_t *shm;   /* NULL when shm is not run, or cannot be */
    MPI_Comm node, cross; /* hier's; MPI_COMM_NULL when it cannot run */
} bench_t;

/* One implementation: whether it can run a call, and the call itself. */
struct bench_impl {
    const char *name;
    /* Why `count` elements cannot run here (NULL: they can). The answer must
     * be the same on every rank, as all ranks skip together. */
    const char *(*unsupported)(const bench_t *b, size_t count);
    /* One all-reduce; sendbuf == recvbuf is in place. */
    void (*run)(const bench_t *b, const void *sendbuf, void *recvbuf,
                size_t count);
    int checkable; /* noreduce moves data without reducing: nothing to check */
};

/* A table of names for an enum value; names[0] is the one printed. */
typedef struct {
    int value;
    const char *names[5];
} named_t;

static const named_t dtype_names[] = {
    {RING_FLOAT32, {"float", "float32", "f32", "fp32", NULL}},
    {RING_FLOAT64, {"double", "float64", "f64", "fp64", NULL}},
    {RING_FLOAT16, {"half", "float16", "f16", "fp16", NULL}},
    {RING_BFLOAT16, {"bfloat16", "bf16", NULL}},
    {RING_INT32, {"int32", "i32", "int", NULL}},
    {RING_INT64, {"int64", "i64", NULL}},
    {RING_UINT8, {"uint8", "u8", NULL}},
};

static const named_t op_names[] = {
    {RING_SUM, {"sum", NULL}},
    {RING_AVERAGE, {"avg", "average", "mean", NULL}},
    {RING_MIN, {"min", NULL}},
    {RING_MAX, {"max", NULL}},
    {RING_PRODUCT, {"prod", "product", NULL}},
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* 0 and *value set when text is one of the table's names (any case). */
static int named_parse(const named_t *table, size_t n, const char *text,
                       int *value)
{
    for (size_t i = 0; i < n; i++)
        for (int j = 0; table[i].names[j] != NULL; j++)
            if (strcasecmp(text, table[i].names[j]) == 0) {
                *value = table[i].value;
                return 0;
            }
    return -1;
}

static const char *named_name(const named_t *table, size_t n, int value)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].value == value)
            return table[i].names[0];
    return "?";
}

static const char *dtype_label(ring_dtype_t dtype)
{
    return named_name(dtype_names, NELEMS(dtype_names), (int)dtype);
}

static const char *op_label(ring_op_t op)
{
    return named_name(op_names, NELEMS(op_names), (int)op);
}

static int dtype_is_float(ring_dtype_t dtype)
{
    return dtype == RING_FLOAT32 || dtype == RING_FLOAT64 ||
           dtype == RING_FLOAT16 || dtype == RING_BFLOAT16;
}

/* ---- inputs and expected results ---- */

/* Element idx of rank's input. Sums stay exact in every dtype: |x| <= 2
 * (0..4 for uint8), and bf16 holds every integer up to 256, so up to 128
 * ranks. Products are signs and powers of two, exact in every float type.
 * The value hashes idx, rather than cycling (rank + idx) % k, so a block
 * that lands at the wrong offset shows up as wrong data. */
static double input_value(int rank, size_t idx, ring_dtype_t dtype,
                          ring_op_t op)
{
    uint64_t h = bench_input_hash(rank, idx);

    if (op == RING_PRODUCT) {
        static const double factors[4] = {2.0, -1.0, 1.0, 1.0};
        if (dtype == RING_UINT8)
            return h % 3 == 0 ? 2.0 : 1.0;
        return factors[h % 4];
    }
    if (dtype == RING_UINT8)
        return (double)(h % 5);
    return (double)(h % 5) - 2.0;
}

/* The reduction over all ranks of element idx, as the library must compute
 * it: average divides the exact sum once, in float unless the dtype is
 * double (half types are reduced in float), so we divide the same way. */
static double expected_value(const bench_t *b, size_t idx)
{
    ring_dtype_t dtype = b->opts.dtype;
    ring_op_t op = b->opts.op;
    double acc = input_value(0, idx, dtype, op);

    for (int r = 1; r < b->nranks; r++) {
        double x = input_value(r, idx, dtype, op);
        switch (op) {
        case RING_MIN: acc = x < acc ? x : acc; break;
        case RING_MAX: acc = x > acc ? x : acc; break;
        case RING_PRODUCT: acc *= x; break;
        default: acc += x; break; /* sum and average */
        }
    }
    if (op == RING_AVERAGE)
        acc = dtype == RING_FLOAT64
                  ? acc / b->nranks
                  : (double)((float)acc / (float)b->nranks);
    return acc;
}

static void fill_inputs(const bench_t *b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        bench_value_store(b->sendbuf, i, b->opts.dtype,
                    input_value(b->rank, i, b->opts.dtype, b->opts.op));
}

static void fill_expected(const bench_t *b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        bench_value_store(b->expected, i, b->opts.dtype, expected_value(b, i));
}

/* Elements of recvbuf that differ from the expected ones; the first one is
 * printed, so a failure says where and what. */
static int64_t count_wrong(const bench_t *b, const char *what, size_t count)
{
    int64_t nwrong = 0;

    for (size_t i = 0; i < count; i++) {
        double got = bench_value_load(b->recvbuf, i, b->opts.dtype);
        double want = bench_value_load(b->expected, i, b->opts.dtype);
        if (got == want)
            continue;
        if (nwrong++ == 0)
            fprintf(stderr,
                    "host %s rank %d: %s, count %zu: element %zu is %g, "
                    "expected %g\n",
                    bench_host, b->rank, what, count, i, got, want);
    }
    return nwrong;
}

/* ---- the implementations ---- */

static const char *ring_unsupported(const bench_t *b, size_t count)
{
    (void)b;
    (void)count;
    return NULL;
}

static void ring_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                     size_t count)
{
    RING_CHECK(ring_allreduce_algo(b->opts.algo, sendbuf, recvbuf, count,
                                   b->opts.dtype, b->opts.op, MPI_COMM_WORLD));
}

/* MPI_DATATYPE_NULL where the MPI library has no such type: Open MPI 4.1
 * has neither binary16 nor bfloat16. */
static MPI_Datatype mpi_dtype(ring_dtype_t dtype)
{
    switch (dtype) {
    case RING_FLOAT32: return MPI_FLOAT;
    case RING_FLOAT64: return MPI_DOUBLE;
#if defined(MPIX_C_FLOAT16)
    case RING_FLOAT16: return MPIX_C_FLOAT16;
#endif
    case RING_INT32: return MPI_INT32_T;
    case RING_INT64: return MPI_INT64_T;
    case RING_UINT8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
    }
}

/* MPI has no average: it is MPI_SUM, then a division on each rank. */
static MPI_Op mpi_op(ring_op_t op)
{
    switch (op) {
    case RING_MIN: return MPI_MIN;
    case RING_MAX: return MPI_MAX;
    case RING_PRODUCT: return MPI_PROD;
    default: return MPI_SUM;
    }
}

static const char *mpi_unsupported(const bench_t *b, size_t count)
{
    if (mpi_dtype(b->opts.dtype) == MPI_DATATYPE_NULL)
        return "this MPI library has no datatype for it";
    if (b->opts.op == RING_AVERAGE && b->opts.dtype != RING_FLOAT32 &&
        b->opts.dtype != RING_FLOAT64)
        return "average is MPI_SUM then a division, written for float and "
               "double only";
    if (count > INT_MAX)
        return "MPI counts are int";
    return NULL;
}

static void divide_by(void *buf, size_t count, ring_dtype_t dtype, int n)
{
    if (dtype == RING_FLOAT64) {
        double *d = buf;
        for (size_t i = 0; i < count; i++)
            d[i] /= n;
    } else {
        float *f = buf;
        for (size_t i = 0; i < count; i++)
            f[i] /= (float)n;
    }
}

static void mpi_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                    size_t count)
{
    const void *src = sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf;

    MPI_CHECK(MPI_Allreduce(src, recvbuf, (int)count, mpi_dtype(b->opts.dtype),
                            mpi_op(b->opts.op), MPI_COMM_WORLD));
    if (b->opts.op == RING_AVERAGE)
        divide_by(recvbuf, count, b->opts.dtype, b->nranks);
}

/* Block blk_idx of count elements cut into n blocks, as the ring cuts
 * them: the first count % n blocks are one element longer. */
static void block_range(size_t count, int n, int blk_idx, size_t *offset,
                        size_t *blk_count)
{
    size_t base = count / (size_t)n, extra = count % (size_t)n;
    size_t idx = (size_t)blk_idx;

    *blk_count = base + (idx < extra ? 1 : 0);
    *offset = idx * base + (idx < extra ? idx : extra);
}

static const char *noreduce_unsupported(const bench_t *b, size_t count)
{
    size_t blk_count = count / (size_t)b->nranks + 1;
    return blk_count * b->elsize > INT_MAX ? "MPI counts are int" : NULL;
}

/* Step k sends block (rank - k) to the right and receives block
 * (rank - k - 1) from the left: the 2(N-1) messages of a ring all-reduce
 * (reduce-scatter then all-gather), each posted as Irecv + Isend + Waitall,
 * received straight into recvbuf with no reduction. */
static void noreduce_step(const bench_t *b, const char *src, char *dst,
                          size_t count, int step)
{
    int n = b->nranks;
    int send_blk = (b->rank - step + 2 * n) % n;
    int recv_blk = (b->rank - step - 1 + 2 * n) % n;
    size_t send_off, send_count, recv_off, recv_count;
    MPI_Request reqs[2];
    int nreqs = 0;

    block_range(count, n, send_blk, &send_off, &send_count);
    block_range(count, n, recv_blk, &recv_off, &recv_count);
    if (recv_count > 0)
        MPI_CHECK(MPI_Irecv(dst + recv_off * b->elsize,
                            (int)(recv_count * b->elsize), MPI_BYTE,
                            (b->rank - 1 + n) % n, 0, MPI_COMM_WORLD,
                            &reqs[nreqs++]));
    if (send_count > 0)
        MPI_CHECK(MPI_Isend(src + send_off * b->elsize,
                            (int)(send_count * b->elsize), MPI_BYTE,
                            (b->rank + 1) % n, 0, MPI_COMM_WORLD,
                            &reqs[nreqs++]));
    MPI_CHECK(MPI_Waitall(nreqs, reqs, MPI_STATUSES_IGNORE));
}

static void noreduce_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                         size_t count)
{
    if (b->nranks == 1) {
        if (sendbuf != recvbuf)
            memcpy(recvbuf, sendbuf, count * b->elsize);
        return;
    }
    /* The first block sent is this rank's own input; every later one was
     * received into recvbuf the step before. */
    for (int step = 0; step < 2 * (b->nranks - 1); step++)
        noreduce_step(b, step == 0 ? sendbuf : recvbuf, recvbuf, count, step);
}

static const char *shm_unsupported(const bench_t *b, size_t count)
{
    (void)count;
    return b->shm ? NULL : "the ranks are not all on one node";
}

/* shm, or hiershm when make_hier gave it a cross communicator; then waits
 * until no rank reads this rank's slab (recvbuf) any more, so that
 * whatever runs next may write there. */
static void shm_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                    size_t count)
{
    void *slab;

    if (b->cross != MPI_COMM_NULL)
        RING_CHECK(ring_shm_allreduce_hier(b->shm, b->cross, sendbuf,
                                           recvbuf, count, b->opts.dtype,
                                           b->opts.op));
    else
        RING_CHECK(ring_shm_allreduce(b->shm, sendbuf, recvbuf, count,
                                      b->opts.dtype, b->opts.op));
    RING_CHECK(ring_shm_slab(b->shm, &slab, NULL));
}

static const char *hier_unsupported(const bench_t *b, size_t count)
{
    (void)count;
    return b->node != MPI_COMM_NULL ? NULL
                                    : "the nodes hold different numbers of ranks";
}

static void hier_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                     size_t count)
{
    RING_CHECK(ring_allreduce_hier(sendbuf, recvbuf, count, b->opts.dtype,
                                   b->opts.op, b->node, b->cross));
}

static const bench_impl_t impl_ring = {"ring", ring_unsupported, ring_run, 1};
static const bench_impl_t impl_mpi = {"mpi", mpi_unsupported, mpi_run, 1};
static const bench_impl_t impl_noreduce = {"noreduce", noreduce_unsupported,
                                           noreduce_run, 0};
static const bench_impl_t impl_shm = {"shm", shm_unsupported, shm_run, 1};
static const bench_impl_t impl_hier = {"hier", hier_unsupported, hier_run, 1};
static const bench_impl_t impl_hiershm = {"hiershm", hier_unsupported,
                                          shm_run, 1};

static const bench_impl_t *const impls[] = {&impl_ring, &impl_mpi,
                                            &impl_noreduce, &impl_shm,
                                            &impl_hier, &impl_hiershm};

/* ---- one measurement: an implementation, in place or not, at one size ---- */

#define MAX_MEASUREMENTS 8

typedef struct {
    const bench_impl_t *impl;
    int in_place;
    const char *skipped; /* why it does not run at this size; NULL: it runs */
    double seconds;      /* mean per call on each rank, max over ranks */
    int64_t nwrong;      /* elements wrong, summed over ranks; -1 unchecked */
} measurement_t;

/* Seconds per call on this rank: warm-up calls, a barrier so that all ranks
 * start together, then the timed calls. In-place data starts as the inputs
 * each time; the timed calls then reduce it again and again, as in
 * nccl-tests, which is why checks run separately. */
static double time_calls(const bench_t *b, const measurement_t *m,
                         size_t count)
{
    const void *src = m->in_place ? b->recvbuf : b->sendbuf;

    if (m->in_place)
        memcpy(b->recvbuf, b->sendbuf, count * b->elsize);
    for (int i = 0; i < b->opts.loop.warmup_iters; i++)
        m->impl->run(b, src, b->recvbuf, count);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double start_s = MPI_Wtime();
    for (int i = 0; i < b->opts.loop.iters; i++)
        m->impl->run(b, src, b->recvbuf, count);
    return (MPI_Wtime() - start_s) / b->opts.loop.iters;
}

/* Out of place, recvbuf starts as expected + 1 everywhere (all ones bytes
 * would read as -1, a value sums reach), so every element the call fails
 * to write counts as wrong. */
static void poison_recvbuf(const bench_t *b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        bench_value_store(b->recvbuf, i, b->opts.dtype,
                    bench_value_load(b->expected, i, b->opts.dtype) + 1.0);
}

/* One untimed call from fresh inputs; returns this rank's wrong elements. */
static int64_t check_once(const bench_t *b, const measurement_t *m,
                          size_t count)
{
    char what[64];
    const void *src = m->in_place ? b->recvbuf : b->sendbuf;

    if (m->in_place)
        memcpy(b->recvbuf, b->sendbuf, count * b->elsize);
    else
        poison_recvbuf(b, count);
    m->impl->run(b, src, b->recvbuf, count);
    snprintf(what, sizeof what, "%s %s", m->impl->name,
             m->in_place ? "in-place" : "out-of-place");
    return count_wrong(b, what, count);
}

static void time_all(const bench_t *b, measurement_t *ms, int nms,
                     size_t count)
{
    double sum_s[MAX_MEASUREMENTS] = {0};

    /* Rounds outermost: each round times every implementation once, so the
     * machine's slow spells fall on all of them alike. */
    for (int round = 0; round < b->opts.loop.rounds; round++)
        for (int i = 0; i < nms; i++)
            if (ms[i].skipped == NULL)
                sum_s[i] += time_calls(b, &ms[i], count);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sum_s, nms, MPI_DOUBLE, MPI_MAX,
                            MPI_COMM_WORLD));
    for (int i = 0; i < nms; i++)
        ms[i].seconds = sum_s[i] / b->opts.loop.rounds;
}

static void check_all(const bench_t *b, measurement_t *ms, int nms,
                      size_t count)
{
    int64_t nwrong[MAX_MEASUREMENTS] = {0};

    for (int i = 0; i < nms; i++)
        ms[i].nwrong = -1;
    if (!b->opts.loop.check)
        return;
    fill_expected(b, count);
    for (int i = 0; i < nms; i++)
        if (ms[i].skipped == NULL && ms[i].impl->checkable)
            nwrong[i] = check_once(b, &ms[i], count);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, nwrong, nms, MPI_INT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    for (int i = 0; i < nms; i++)
        if (ms[i].skipped == NULL && ms[i].impl->checkable)
            ms[i].nwrong = nwrong[i];
}

static void bench_size(const bench_t *b, measurement_t *ms, int nms,
                       size_t count)
{
    for (int i = 0; i < nms; i++)
        ms[i].skipped = ms[i].impl->unsupported(b, count);
    fill_inputs(b, count);
    time_all(b, ms, nms, count);
    check_all(b, ms, nms, count);
}

/* ---- figures and the table ---- */

static double busbw_gbs(const bench_t *b, size_t nbytes, double seconds)
{
    return bench_busbw_gbs(nbytes, seconds, b->nranks);
}

/* Time in microseconds with nccl-tests' precision: fewer decimals as it
 * grows, so the column keeps its width. */
static void format_time(char *text, size_t len, double seconds)
{
    double us = seconds * 1.0e6;
    int decimals = us >= 10000.0 ? 0 : us >= 100.0 ? 1 : 2;
    snprintf(text, len, "%7.*f", decimals, us);
}

static void format_wrong(char *text, size_t len, int64_t nwrong)
{
    if (nwrong < 0)
        snprintf(text, len, "%6s", "N/A");
    else
        snprintf(text, len, "%6lld", (long long)nwrong);
}

/* Sizes grow by a factor >= 2 and fit a size_t: at most 64 of them. */
#define MAX_SIZES 64

/* Totals over all sizes, for the footer. */
typedef struct {
    int64_t nwrong;             /* wrong elements, all measurements */
    double busbw_sum[MAX_MEASUREMENTS];
    int busbw_n[MAX_MEASUREMENTS];
    /* --compare: busbw ratios, one per size (in place unless _oop) */
    double ratio_ip[MAX_SIZES], ratio_oop[MAX_SIZES], ratio_lim[MAX_SIZES];
    int nratio_ip, nratio_oop, nratio_lim;
    double shm_lim[MAX_SIZES], shm_ring[MAX_SIZES], shm_mpi[MAX_SIZES];
    int nshm_lim, nshm_ring, nshm_mpi;
} summary_t;

static void summary_add(summary_t *s, const bench_t *b,
                        const measurement_t *ms, int nms, size_t nbytes)
{
    for (int i = 0; i < nms; i++) {
        if (ms[i].skipped != NULL)
            continue;
        s->busbw_sum[i] += busbw_gbs(b, nbytes, ms[i].seconds);
        s->busbw_n[i]++;
        if (ms[i].nwrong > 0)
            s->nwrong += ms[i].nwrong;
    }
}

static void print_single_header(void)
{
    printf("# %10s  %12s  %8s  %6s  %s  %s\n", "", "", "", "",
           "-------- out-of-place --------",
           "---------- in-place ----------");
    printf("# %10s  %12s  %8s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
           "size", "count", "type", "redop", "time", "algbw", "busbw",
           "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s\n",
           "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "",
           "(us)", "(GB/s)", "(GB/s)");
}

static void print_single_cell(const bench_t *b, const measurement_t *m,
                              size_t nbytes)
{
    char time_text[32], wrong_text[32];

    if (m->skipped != NULL) {
        printf("  %7s  %6s  %6s %6s", "n/a", "n/a", "n/a", "n/a");
        return;
    }
    format_time(time_text, sizeof time_text, m->seconds);
    format_wrong(wrong_text, sizeof wrong_text, m->nwrong);
    printf("  %7s  %6.2f  %6.2f %6s", time_text,
           bench_algbw_gbs(nbytes, m->seconds),
           busbw_gbs(b, nbytes, m->seconds), wrong_text);
}

static void print_row_start(const bench_t *b, size_t nbytes, size_t count)
{
    printf("%12zu  %12zu  %8s  %6s", nbytes, count, dtype_label(b->opts.dtype),
           op_label(b->opts.op));
}

static void print_single_row(const bench_t *b, const measurement_t *ms,
                             size_t nbytes, size_t count)
{
    print_row_start(b, nbytes, count);
    print_single_cell(b, &ms[0], nbytes);
    print_single_cell(b, &ms[1], nbytes);
    printf("\n");
}

/* --compare: which measurement is which, in the order they are timed. */
enum { CMP_RING_OOP, CMP_RING_IP, CMP_MPI_OOP, CMP_MPI_IP, CMP_NOREDUCE_IP,
       CMP_SHM_OOP, CMP_SHM_IP, CMP_COUNT };

/* Columns 5-8 (ring, mpi, noreduce, shm in-place busbw) are what
 * bench/plot.gp draws against column 1; bench/summarize.py reads 5-16. */
static void print_compare_header(void)
{
    printf("# a/b: busbw ratio (b's time / a's time); lim: noreduce, the "
           "ring's messages without reduction\n");
    printf("# %10s  %12s  %8s  %6s  %s  %s\n", "", "", "", "",
           "-------------------------------- in-place busbw "
           "---------------------------------",
           "------ out-of-place busbw ------");
    printf("# %10s  %12s  %8s  %6s  %7s  %7s  %8s  %7s  %8s  %8s  %8s  %8s  "
           "%7s  %7s  %7s  %8s  %6s\n",
           "size", "count", "type", "redop", "ring", "mpi", "noreduce", "shm",
           "ring/mpi", "ring/lim", "shm/lim", "shm/ring", "ring", "mpi",
           "shm", "ring/mpi", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %7s  %7s  %8s  %7s  %8s  %8s  %8s  %8s  "
           "%7s  %7s  %7s\n",
           "(B)", "(elements)", "", "", "(GB/s)", "(GB/s)", "(GB/s)",
           "(GB/s)", "", "", "", "", "(GB/s)", "(GB/s)", "(GB/s)");
}

static void print_busbw(const bench_t *b, const measurement_t *m,
                        size_t nbytes, int width)
{
    if (m->skipped != NULL)
        printf("  %*s", width, "n/a");
    else
        printf("  %*.2f", width, busbw_gbs(b, nbytes, m->seconds));
}

/* Prints busbw(ours) / busbw(theirs), which is their time over ours (so it
 * means something at one rank too) and keeps it for the footer. */
static void print_ratio(const measurement_t *ours, const measurement_t *theirs,
                        double *kept, int *nkept)
{
    if (ours->skipped != NULL || theirs->skipped != NULL ||
        ours->seconds <= 0) {
        printf("  %8s", "n/a");
        return;
    }
    double ratio = theirs->seconds / ours->seconds;
    printf("  %8.2f", ratio);
    if (*nkept < MAX_SIZES)
        kept[(*nkept)++] = ratio;
}

static void print_compare_row(const bench_t *b, const measurement_t *ms,
                              size_t nbytes, size_t count, summary_t *s)
{
    int64_t nwrong = -1;

    print_row_start(b, nbytes, count);
    print_busbw(b, &ms[CMP_RING_IP], nbytes, 7);
    print_busbw(b, &ms[CMP_MPI_IP], nbytes, 7);
    print_busbw(b, &ms[CMP_NOREDUCE_IP], nbytes, 8);
    print_busbw(b, &ms[CMP_SHM_IP], nbytes, 7);
    print_ratio(&ms[CMP_RING_IP], &ms[CMP_MPI_IP], s->ratio_ip, &s->nratio_ip);
    print_ratio(&ms[CMP_RING_IP], &ms[CMP_NOREDUCE_IP], s->ratio_lim,
                &s->nratio_lim);
    print_ratio(&ms[CMP_SHM_IP], &ms[CMP_NOREDUCE_IP], s->shm_lim,
                &s->nshm_lim);
    print_ratio(&ms[CMP_SHM_IP], &ms[CMP_RING_IP], s->shm_ring,
                &s->nshm_ring);
    /* Kept for the footer only: the row is wide enough. */
    if (ms[CMP_SHM_IP].skipped == NULL && ms[CMP_MPI_IP].skipped == NULL &&
        ms[CMP_SHM_IP].seconds > 0 && s->nshm_mpi < MAX_SIZES)
        s->shm_mpi[s->nshm_mpi++] =
            ms[CMP_MPI_IP].seconds / ms[CMP_SHM_IP].seconds;
    print_busbw(b, &ms[CMP_RING_OOP], nbytes, 7);
    print_busbw(b, &ms[CMP_MPI_OOP], nbytes, 7);
    print_busbw(b, &ms[CMP_SHM_OOP], nbytes, 7);
    print_ratio(&ms[CMP_RING_OOP], &ms[CMP_MPI_OOP], s->ratio_oop,
                &s->nratio_oop);
    for (int i = 0; i < CMP_COUNT; i++)
        if (ms[i].nwrong >= 0)
            nwrong = (nwrong < 0 ? 0 : nwrong) + ms[i].nwrong;
    char wrong_text[32];
    format_wrong(wrong_text, sizeof wrong_text, nwrong);
    printf("  %6s\n", wrong_text);
}

/* Names each measurement that had wrong elements: the row's #wrong column
 * sums them all. */
static void print_wrong_details(const measurement_t *ms, int nms,
                                size_t nbytes)
{
    for (int i = 0; i < nms; i++)
        if (ms[i].nwrong > 0)
            printf("# WRONG: %zu B: %s %s: %lld elements wrong\n", nbytes,
                   ms[i].impl->name,
                   ms[i].in_place ? "in-place" : "out-of-place",
                   (long long)ms[i].nwrong);
}

/* ---- the footer ---- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int count_at_least(const double *v, int n, double threshold)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += v[i] >= threshold;
    return k;
}

/* "# label : mean busbw" over the sizes of measurements [first, last], as
 * nccl-tests averages out-of-place and in-place together; `none` when no
 * size ran. */
static void print_mean_busbw(const summary_t *s, const char *label, int first,
                             int last, const char *none)
{
    double sum = 0;
    int n = 0;

    for (int i = first; i <= last; i++) {
        sum += s->busbw_sum[i];
        n += s->busbw_n[i];
    }
    if (n > 0)
        printf("# %-20s : %g\n", label, sum / n);
    else
        printf("# %-20s : %s\n", label, none);
}

/* "12 of 18 sizes (median 1.21)": how often and by how much ring won. */
static void print_wins(const char *placement, double *ratios, int n)
{
    if (n == 0)
        printf("%s n/a", placement);
    else
        printf("%s %d of %d sizes (median ratio %.2f)", placement,
               count_at_least(ratios, n, 1.0), n, median(ratios, n));
}

static void print_median(const char *label, double *ratios, int n)
{
    printf("# %-20s : ", label);
    if (n > 0)
        printf("median %.2f in-place\n", median(ratios, n));
    else
        printf("n/a\n");
}

static void print_footer(const bench_t *b, summary_t *s)
{
    int compare = b->opts.impl == NULL;

    printf("# %-20s : %lld %s\n", "Out of bounds values", (long long)s->nwrong,
           s->nwrong ? "FAILED" : "OK");
    if (!compare) {
        print_mean_busbw(s, "Avg bus bandwidth", 0, 1, "0");
        printf("#\n");
        return;
    }
    /* The nccl-tests line is ours, so scripts reading it see our figure;
     * like nccl-tests it stays a number when no size ran. */
    print_mean_busbw(s, "Avg bus bandwidth", CMP_RING_OOP, CMP_RING_IP, "0");
    print_mean_busbw(s, "Avg busbw mpi", CMP_MPI_OOP, CMP_MPI_IP, "n/a");
    print_mean_busbw(s, "Avg busbw noreduce", CMP_NOREDUCE_IP,
                     CMP_NOREDUCE_IP, "n/a");
    printf("# %-20s : ", "ring >= mpi");
    print_wins("in-place", s->ratio_ip, s->nratio_ip);
    print_wins(", out-of-place", s->ratio_oop, s->nratio_oop);
    printf("\n");
    print_median("ring / noreduce", s->ratio_lim, s->nratio_lim);
    print_mean_busbw(s, "Avg busbw shm", CMP_SHM_OOP, CMP_SHM_IP, "n/a");
    printf("# %-20s : ", "shm >= ring");
    print_wins("in-place", s->shm_ring, s->nshm_ring);
    printf("\n# %-20s : ", "shm >= mpi");
    print_wins("in-place", s->shm_mpi, s->nshm_mpi);
    printf("\n");
    print_median("shm / noreduce", s->shm_lim, s->nshm_lim);
    printf("#\n");
}

/* ---- the size loop ---- */

static int plan_measurements(const bench_t *b, measurement_t *ms)
{
    if (b->opts.impl != NULL) {
        ms[0] = (measurement_t){.impl = b->opts.impl, .in_place = 0};
        ms[1] = (measurement_t){.impl = b->opts.impl, .in_place = 1};
        return 2;
    }
    ms[CMP_RING_OOP] = (measurement_t){.impl = &impl_ring, .in_place = 0};
    ms[CMP_RING_IP] = (measurement_t){.impl = &impl_ring, .in_place = 1};
    ms[CMP_MPI_OOP] = (measurement_t){.impl = &impl_mpi, .in_place = 0};
    ms[CMP_MPI_IP] = (measurement_t){.impl = &impl_mpi, .in_place = 1};
    ms[CMP_NOREDUCE_IP] = (measurement_t){.impl = &impl_noreduce,
                                          .in_place = 1};
    ms[CMP_SHM_OOP] = (measurement_t){.impl = &impl_shm, .in_place = 0};
    ms[CMP_SHM_IP] = (measurement_t){.impl = &impl_shm, .in_place = 1};
    return CMP_COUNT;
}

static void run_sizes(const bench_t *b, summary_t *s)
{
    measurement_t ms[MAX_MEASUREMENTS];
    int nms = plan_measurements(b, ms);
    const bench_opts_t *o = &b->opts;

    for (size_t nbytes = o->min_nbytes;;) {
        size_t count = nbytes / b->elsize; /* whole elements only */
        if (count > 0) {
            size_t used_nbytes = count * b->elsize;
            bench_size(b, ms, nms, count);
            summary_add(s, b, ms, nms, used_nbytes);
            if (b->rank == 0) {
                print_wrong_details(ms, nms, used_nbytes);
                if (o->impl != NULL)
                    print_single_row(b, ms, used_nbytes, count);
                else
                    print_compare_row(b, ms, used_nbytes, count, s);
                fflush(stdout);
            }
        }
        if (nbytes > o->max_nbytes / o->step_factor)
            break; /* the next size would pass -e (or overflow) */
        nbytes *= o->step_factor;
    }
}

/* ---- the header ---- */

static void print_impl_line(const bench_t *b)
{
    const bench_opts_t *o = &b->opts;
    const char *algo = ring_algo_name(o->algo);

    if (o->impl == NULL)
        printf("# Compare: per size and round, timed in this order: ring "
               "(algo %s) out-of-place, in-place; MPI_Allreduce out-of-place, "
               "in-place; noreduce in-place; shm out-of-place, in-place\n",
               algo ? algo : "?");
    else if (o->impl == &impl_ring)
        printf("# Impl: ring (ring_allreduce_algo, algo %s)\n",
               algo ? algo : "?");
    else if (o->impl == &impl_mpi)
        printf("# Impl: mpi (MPI_Allreduce)\n");
    else if (o->impl == &impl_hier)
        printf("# Impl: hier (ring_allreduce_hier: within nodes, then "
               "across, then within)\n");
    else if (o->impl == &impl_hiershm)
        printf("# Impl: hiershm (ring_shm_allreduce_hier: hier with the "
               "node's stages through shared memory)\n");
    else if (o->impl == &impl_noreduce)
        printf("# Impl: noreduce (the ring's 2(n-1) messages, no reduction, "
               "nothing to check)\n");
    else
        printf("# Impl: shm (ring_shm_allreduce: blocks reduced straight "
               "from the other ranks' memory)\n");
    if ((o->impl == NULL || o->impl == &impl_mpi) && o->op == RING_AVERAGE)
        printf("# MPI has no average: mpi is MPI_SUM, then a division by %d "
               "on each rank (timed)\n", b->nranks);
    const char *why = impl_mpi.unsupported(b, 1);
    if (o->impl == NULL && why != NULL)
        printf("# mpi columns n/a: MPI_Allreduce cannot run %s %s: %s\n",
               dtype_label(o->dtype), op_label(o->op), why);
}

static void print_header(const bench_t *b)
{
    const bench_opts_t *o = &b->opts;

    if (b->rank == 0) {
        printf("# allreduce_perf: nranks %d minBytes %zu maxBytes %zu step: "
               "%zu(factor) warmup iters: %d iters: %d rounds: %d "
               "validation: %d\n",
               b->nranks, o->min_nbytes, o->max_nbytes, o->step_factor,
               o->loop.warmup_iters, o->loop.iters, o->loop.rounds,
               o->loop.check);
        printf("# Datatype: %s  Op: %s\n", dtype_label(o->dtype),
               op_label(o->op));
        print_impl_line(b);
        printf("# Time: mean per call over iters x rounds on each rank, then "
               "the max over ranks\n");
        printf("# algbw = size / time (1 GB = 1e9 B); busbw = algbw * "
               "2(n-1)/n\n");
        bench_print_mpi_version();
        printf("#\n");
    }
    bench_print_rank_map(MPI_COMM_WORLD);
}

/* ---- options ---- */

enum { OPT_IMPL = 256, OPT_ALGO, OPT_COMPARE };

static const struct option long_options[] = {
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},
    BENCH_LOOP_LONG_OPTIONS, /* -n, -w, -r, -c */
    {"datatype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, 'o'},
    {"impl", required_argument, NULL, OPT_IMPL},
    {"algo", required_argument, NULL, OPT_ALGO},
    {"compare", no_argument, NULL, OPT_COMPARE},
    BENCH_END_LONG_OPTIONS,
};

static const bench_cli_t cli = {
    .optstring = ":b:e:f:n:w:c:d:o:r:h",
    .long_options = long_options,
    .usage_options =
        "  -b, --minbytes SIZE      smallest message (default 32M)\n"
        "  -e, --maxbytes SIZE      largest message (default 32M)\n"
        "  -f, --stepfactor N       multiply the size by N each step, N >= 2 "
        "(default 2)\n"
        "  -n, --iters N            timed calls per size (default 20)\n"
        "  -w, --warmup_iters N     untimed calls before them (default 5)\n"
        "  -c, --check 0|1          check results (default 1)\n"
        "  -d, --datatype TYPE      float, double, half, bfloat16, int32, "
        "int64, uint8 (or f32, f64, f16, bf16, i32, i64, u8)\n"
        "  -o, --op OP              sum, avg, min, max, prod (default sum)\n"
        "  -r, --rounds N           repeat the timing N times, interleaved "
        "with the other implementations (default 1)\n"
        "      --impl IMPL          ring (ours, default), mpi "
        "(MPI_Allreduce), noreduce (the ring's messages, no reduction) or "
        "shm (ours, through shared memory, one node), hier (ours, "
        "hierarchical) or hiershm (hier, shared memory within nodes)\n"
        "      --algo ALGO          ring's algorithm: auto, ring, rdb "
        "(default auto)\n"
        "      --compare            time ring, mpi, noreduce and shm "
        "interleaved, one table\n",
    .usage_notes =
        "SIZE is bytes with an optional K, M or G suffix (powers of 1024).\n",
};

static int parse_impl(const char *text, const bench_impl_t **impl)
{
    for (size_t i = 0; i < NELEMS(impls); i++)
        if (strcmp(text, impls[i]->name) == 0) {
            *impl = impls[i];
            return 0;
        }
    return -1;
}

#define BYTES_WANTED "expected bytes such as 8, 64K, 16M or 1G"

/* -b, -e, -f: 0 when the value is valid, else -1. */
static int parse_size_opt(int opt, const char *arg, bench_opts_t *o)
{
    const struct option *lo = long_options;
    int factor;

    switch (opt) {
    case 'b':
        if (ring_parse_bytes(arg, &o->min_nbytes) != RING_OK)
            return bench_bad_value(lo, opt, arg, BYTES_WANTED);
        return 0;
    case 'e':
        if (ring_parse_bytes(arg, &o->max_nbytes) != RING_OK)
            return bench_bad_value(lo, opt, arg, BYTES_WANTED);
        return 0;
    default: /* 'f' */
        if (bench_parse_int(arg, 2, INT_MAX, &factor))
            return bench_bad_value(lo, opt, arg, "expected an integer >= 2");
        o->step_factor = (size_t)factor;
        return 0;
    }
}

/* -d, -o, --impl, --algo: 0 when the value is valid, else -1. */
static int parse_name_opt(int opt, const char *arg, bench_opts_t *o)
{
    const struct option *lo = long_options;
    int value;

    switch (opt) {
    case 'd':
        if (named_parse(dtype_names, NELEMS(dtype_names), arg, &value))
            return bench_bad_value(lo, opt, arg, "expected float, double, "
                                   "half, bfloat16, int32, int64 or uint8");
        o->dtype = (ring_dtype_t)value;
        return 0;
    case 'o':
        if (named_parse(op_names, NELEMS(op_names), arg, &value))
            return bench_bad_value(lo, opt, arg,
                                   "expected sum, avg, min, max or prod");
        o->op = (ring_op_t)value;
        return 0;
    case OPT_IMPL:
        if (parse_impl(arg, &o->impl))
            return bench_bad_value(lo, opt, arg,
                                   "expected ring, mpi, noreduce, shm, "
                                   "hier or hiershm");
        return 0;
    default: /* OPT_ALGO */
        if (ring_algo_parse(arg, &o->algo) != RING_OK)
            return bench_bad_value(lo, opt, arg, "expected auto, ring or rdb");
        return 0;
    }
}

static int parse_one(int opt, const char *arg, bench_opts_t *o)
{
    int rc = bench_parse_loop_opt(long_options, opt, arg, &o->loop);

    if (rc <= 0)
        return rc; /* -n, -w, -r, -c */
    /* Long-only options are >= 256, which strchr would truncate to a char. */
    if (opt < 256 && strchr("bef", opt) != NULL)
        return parse_size_opt(opt, arg, o);
    return parse_name_opt(opt, arg, o);
}

/* Rules that involve several options, checked once all are read. */
static int check_opts(const bench_opts_t *o, int impl_given, int compare)
{
    const char *why = NULL;

    if (o->min_nbytes == 0)
        why = "-b/--minbytes must be at least 1";
    else if (o->max_nbytes < o->min_nbytes)
        why = "-e/--maxbytes is smaller than -b/--minbytes";
    else if (compare && impl_given)
        why = "--compare runs ring, mpi, noreduce and shm: drop --impl";
    else if (o->op == RING_AVERAGE && !dtype_is_float(o->dtype))
        why = "-o avg needs a floating-point -d (float, double, half, "
              "bfloat16)";
    if (why != NULL && bench_rank == 0)
        fprintf(stderr, "allreduce_perf: %s\n", why);
    return why != NULL ? -1 : 0;
}

/* 0: run; 1: --help printed; -1: bad options, explained on rank 0. */
static int parse_options(int argc, char **argv, bench_opts_t *o)
{
    int opt, impl_given = 0, compare = 0;

    *o = (bench_opts_t){
        .min_nbytes = 32u << 20, .max_nbytes = 32u << 20, .step_factor = 2,
        .loop = BENCH_LOOP_DEFAULTS,
        .dtype = RING_FLOAT32, .op = RING_SUM, .algo = RING_ALGO_AUTO,
        .impl = &impl_ring,
    };
    while ((opt = bench_getopt(argc, argv, &cli)) >= 0) {
        impl_given |= opt == OPT_IMPL;
        compare |= opt == OPT_COMPARE;
        if (opt != OPT_COMPARE && parse_one(opt, optarg, o) != 0)
            return -1;
    }
    if (opt != BENCH_OPT_END)
        return opt == BENCH_OPT_HELP ? 1 : -1;
    if (compare)
        o->impl = NULL;
    return check_opts(o, impl_given, compare);
}

/* ---- main ---- */

static void alloc_buffers(bench_t *b)
{
    size_t nbytes = b->opts.max_nbytes / b->elsize * b->elsize;

    if (nbytes == 0)
        nbytes = b->elsize; /* every size is skipped; keep malloc simple */
    b->sendbuf = malloc(nbytes);
    if (b->shm)
        RING_CHECK(ring_shm_slab(b->shm, (void **)&b->recvbuf, NULL));
    else
        b->recvbuf = malloc(nbytes);
    b->expected = malloc(nbytes);
    if (b->sendbuf == NULL || b->recvbuf == NULL || b->expected == NULL)
        bench_die_nomem("3 buffers of -e/--maxbytes each (lower it)",
                        3 * nbytes);
}

/* The shared window for shm, when it runs and every rank is on this node;
 * its slab holds the largest message, so no call is cut into chunks. */
static void make_shm(bench_t *b)
{
    MPI_Comm node;
    int node_size;

    if (b->opts.impl != NULL && b->opts.impl != &impl_shm)
        return;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_size(node, &node_size));
    MPI_CHECK(MPI_Comm_free(&node));
    /* One rank with every rank on its node means all have: no vote. */
    if (node_size == b->nranks)
        RING_CHECK(ring_shm_create(MPI_COMM_WORLD,
                                   b->opts.max_nbytes + b->elsize, &b->shm));
}

/* hier's communicators: the node, and the ranks with this local rank on
 * every node; left MPI_COMM_NULL when the nodes differ in size. */
static void make_hier(bench_t *b)
{
    MPI_Comm node;
    int local_rank, local_size, min_size, max_size;

    b->node = b->cross = MPI_COMM_NULL;
    if (b->opts.impl != &impl_hier && b->opts.impl != &impl_hiershm)
        return;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &local_rank));
    MPI_CHECK(MPI_Comm_size(node, &local_size));
    MPI_CHECK(MPI_Allreduce(&local_size, &min_size, 1, MPI_INT, MPI_MIN,
                            MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&local_size, &max_size, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (min_size != max_size) {
        MPI_CHECK(MPI_Comm_free(&node));
        return;
    }
    b->node = node;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, local_rank, b->rank, &b->cross));
    /* hiershm's window, on the node; recvbuf is its slab, as for shm. */
    if (b->opts.impl == &impl_hiershm)
        RING_CHECK(ring_shm_create(node, b->opts.max_nbytes + b->elsize,
                                   &b->shm));
}

static void free_buffers(bench_t *b)
{
    if (b->node != MPI_COMM_NULL)
        MPI_CHECK(MPI_Comm_free(&b->node));
    if (b->cross != MPI_COMM_NULL)
        MPI_CHECK(MPI_Comm_free(&b->cross));
    free(b->sendbuf);
    if (b->shm)
        RING_CHECK(ring_shm_free(&b->shm));
    else
        free(b->recvbuf);
    free(b->expected);
    b->sendbuf = b->recvbuf = b->expected = NULL;
}

/* With a single implementation that cannot run this dtype or op at all,
 * say so and skip the run rather than print a table of n/a. */
static int whole_run_unsupported(const bench_t *b)
{
    const char *why;

    if (b->opts.impl == NULL || (why = b->opts.impl->unsupported(b, 1)) == NULL)
        return 0;
    if (b->rank == 0)
        printf("# Skipped: %s cannot run %s %s: %s\n#\n", b->opts.impl->name,
               dtype_label(b->opts.dtype), op_label(b->opts.op), why);
    return 1;
}

int main(int argc, char **argv)
{
    bench_t b = {0};
    summary_t summary = {0};

    MPI_CHECK(MPI_Init(&argc, &argv));
    /* Errors come back to MPI_CHECK, which says where before aborting. */
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &b.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &b.nranks));
    bench_identify("allreduce_perf", b.rank);

    int rc = parse_options(argc, argv, &b.opts);
    if (rc != 0) {
        MPI_CHECK(MPI_Finalize());
        return rc > 0 ? 0 : 2;
    }
    b.elsize = ring_dtype_size(b.opts.dtype);
    make_shm(&b);
    make_hier(&b);
    print_header(&b);
    if (whole_run_unsupported(&b)) {
        MPI_CHECK(MPI_Finalize());
        return 0;
    }
    alloc_buffers(&b);
    if (b.rank == 0) {
        if (b.opts.impl != NULL)
            print_single_header();
        else
            print_compare_header();
    }
    run_sizes(&b, &summary);
    if (b.rank == 0)
        print_footer(&b, &summary);
    free_buffers(&b);
    MPI_CHECK(MPI_Finalize());
    return summary.nwrong > 0 ? 1 : 0;
}
