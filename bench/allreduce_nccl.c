/* bench/allreduce_nccl.c: allreduce_perf -G's nccl column: ncclAllReduce
 * on the same device buffers, one communicator over MPI_COMM_WORLD (its
 * unique id broadcast from rank 0) and a stream of its own, waited for
 * after every call as the other implementations are. Built only when
 * configure finds NCCL (HVD_HAVE_NCCL); bench/allreduce_device.c decides
 * first whether it may run (a GPU per rank: NCCL refuses ranks that share
 * one). NCCL failures are fatal, like the benchmark's other checks.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "bench/allreduce_perf.h"

typedef struct {
    ncclComm_t comm;
    cudaStream_t stream;
} nccl_state_t;

_Noreturn static void nccl_die(const char *call, const char *why,
                               const char *file, int line)
{
    fprintf(stderr, "%s:%d: host %s rank %d: %s failed: %s\n", file, line,
            bench_host, prog_rank, call, why);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return */
}

#define NCCL_CHECK(call)                                                       \
    do {                                                                       \
        ncclResult_t nccl_rc_ = (call);                                        \
        if (nccl_rc_ != ncclSuccess)                                           \
            nccl_die(#call, ncclGetErrorString(nccl_rc_), __FILE__,            \
                     __LINE__);                                                \
    } while (0)

#define CUDA_CHECK(call)                                                       \
    do {                                                                       \
        cudaError_t cuda_rc_ = (call);                                         \
        if (cuda_rc_ != cudaSuccess)                                           \
            nccl_die(#call, cudaGetErrorString(cuda_rc_), __FILE__,            \
                     __LINE__);                                                \
    } while (0)

static ncclDataType_t nccl_dtype(ring_dtype_t dtype)
{
    switch (dtype) {
    case RING_FLOAT64: return ncclFloat64;
    case RING_FLOAT16: return ncclFloat16;
    case RING_BFLOAT16: return ncclBfloat16;
    case RING_INT32: return ncclInt32;
    case RING_INT64: return ncclInt64;
    case RING_UINT8: return ncclUint8;
    default: return ncclFloat32;
    }
}

static ncclRedOp_t nccl_op(ring_op_t op)
{
    switch (op) {
    case RING_AVERAGE: return ncclAvg;
    case RING_MIN: return ncclMin;
    case RING_MAX: return ncclMax;
    case RING_PRODUCT: return ncclProd;
    default: return ncclSum;
    }
}

const char *bench__nccl_setup(bench_t *b)
{
    nccl_state_t *st = bench_malloc(sizeof *st, "nccl's state");
    ncclUniqueId id;

    if (b->rank == 0)
        NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    CUDA_CHECK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    NCCL_CHECK(ncclCommInitRank(&st->comm, b->nranks, id, b->rank));
    b->gpu.nccl = st;
    return NULL;
}

void bench__nccl_free(bench_t *b)
{
    nccl_state_t *st = b->gpu.nccl;

    if (st == NULL)
        return;
    NCCL_CHECK(ncclCommDestroy(st->comm));
    CUDA_CHECK(cudaStreamDestroy(st->stream));
    free(st);
    b->gpu.nccl = NULL;
}

void bench__nccl_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                     size_t count)
{
    nccl_state_t *st = b->gpu.nccl;

    NCCL_CHECK(ncclAllReduce(sendbuf, recvbuf, count,
                             nccl_dtype(b->opts.dtype),
                             nccl_op(b->opts.op), st->comm, st->stream));
    CUDA_CHECK(cudaStreamSynchronize(st->stream));
}
