/* bench/allreduce_impls.c: allreduce_perf's inputs, the results they must
 * give, and the implementations it times (bench/allreduce_perf.c's top
 * comment lists them). Inputs are small integers, so every sum, product and
 * average is exact in every dtype and the check is `==` against a result
 * each rank computes alone.
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "bench/allreduce_perf.h"

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

void bench__fill_inputs(const bench_t *b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        prog_value_store(b->sendbuf, i, b->opts.dtype,
                    input_value(b->rank, i, b->opts.dtype, b->opts.op));
}

void bench__fill_expected(const bench_t *b, size_t count)
{
    for (size_t i = 0; i < count; i++)
        prog_value_store(b->expected, i, b->opts.dtype, expected_value(b, i));
}

/* Elements of recvbuf that differ from the expected ones; the first one is
 * printed, so a failure says where and what. */
int64_t bench__count_wrong(const bench_t *b, const char *what, size_t count)
{
    int64_t nwrong = 0;

    for (size_t i = 0; i < count; i++) {
        double got = prog_value_load(b->recvbuf, i, b->opts.dtype);
        double want = prog_value_load(b->expected, i, b->opts.dtype);
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
    return b->node != MPI_COMM_NULL
               ? NULL
               : "the nodes hold different numbers of ranks";
}

static void hier_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                     size_t count)
{
    RING_CHECK(ring_allreduce_hier(sendbuf, recvbuf, count, b->opts.dtype,
                                   b->opts.op, b->node, b->cross));
}

/* name, unsupported, run, checkable, device, model_seconds */
const bench_impl_t bench__impl_ring = {"ring", ring_unsupported, ring_run, 1,
                                      0, NULL};
const bench_impl_t bench__impl_mpi = {"mpi", mpi_unsupported, mpi_run, 1, 0,
                                     NULL};
const bench_impl_t bench__impl_noreduce = {"noreduce", noreduce_unsupported,
                                           noreduce_run, 0, 0, NULL};
const bench_impl_t bench__impl_shm = {"shm", shm_unsupported, shm_run, 1, 0,
                                     NULL};
const bench_impl_t bench__impl_hier = {"hier", hier_unsupported, hier_run, 1,
                                      0, NULL};
const bench_impl_t bench__impl_hiershm = {"hiershm", hier_unsupported,
                                          shm_run, 1, 0, NULL};

/* Host implementations, then -G's (allreduce_device.c). */
static const bench_impl_t *const impls[] = {
    &bench__impl_ring,   &bench__impl_mpi,        &bench__impl_noreduce,
    &bench__impl_shm,    &bench__impl_hier,       &bench__impl_hiershm,
    &bench__impl_staged, &bench__impl_ipc,        &bench__impl_hostcopy,
    &bench__impl_nccl};

const bench_impl_t *bench__impl_named(const char *name)
{
    for (size_t i = 0; i < sizeof impls / sizeof impls[0]; i++)
        if (strcmp(name, impls[i]->name) == 0)
            return impls[i];
    return NULL;
}

const char *bench__impl_names(int device)
{
    return device ? "staged, ipc, mpi_hostcopy or nccl"
                  : "ring, mpi, noreduce, shm, hier or hiershm";
}
