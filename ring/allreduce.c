/* ring/allreduce.c: ring_allreduce, the ring algorithm and the choice.
 *
 * Function:     ring_allreduce / ring_allreduce_algo
 * Accepts:      as MPI_Allreduce (counts in elements); sendbuf == recvbuf
 *               is in place.
 * Returns:      RING_OK, or RING_ERR_ARG before any message moves,
 *               RING_ERR_MPI, RING_ERR_NOMEM.
 * Description:  Three algorithms share one signature in a table (the ring
 *               here, recursive doubling and Rabenseifner in
 *               ring/recursive.c); AUTO picks by size and rank count.
 *
 * The ring (bandwidth optimal, 2(N-1)/N of the data sent per rank) is a
 * reduce-scatter followed by an allgather over N blocks. Rank r sends to
 * r+1 and receives from r-1. Three ranks, blocks A B C, rank r's
 * contribution to block X written X_r:
 *
 *   reduce-scatter          rank 0            rank 1            rank 2
 *     step 0 sends          C_0               A_1               B_2
 *     step 0 reduces        B_2+B_0           C_0+C_1           A_1+A_2
 *     step 1 sends          B_2+B_0           C_0+C_1           A_1+A_2
 *     step 1 reduces        A: (A_1+A_2)+A_0  B: (B_2+B_0)+B_1  C: (C_0+C_1)+C_2
 *   allgather               rank r sends block r, then forwards what it got:
 *     after step 1          A B C             A B C             A B C
 *
 * Each block is reduced exactly once, by its owner, and then only copied:
 * that is why every rank ends bitwise identical, whatever the rounding.
 * Both halves run as one pipeline of 2(N-1) steps (ring/pipeline.c): the
 * allgather of a block's first segment starts as soon as it is final.
 * Blocks differ by at most one element when count % N != 0; with count < N
 * some are empty and simply never travel. Inside each step the blocks move
 * in segments, pipelined (ring/pipeline.c).
 *
 * Recursive doubling and Rabenseifner, for small and medium messages, are
 * described in ring/recursive.c.
 *
 * Limitations:  all ranks must pass the same count, dtype, op and algo
 *               (hvd's negotiation guarantees it); a rank whose arguments
 *               are rejected does not tell the others. HVD_RING_CHECK=1
 *               checks both on every call (ring/check.c).
 */
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"


int ring__ring_blocks(const void *src, void *buf, size_t count,
                      ring_dtype_t dtype, ring_op_t op, int nreduce,
                      int nsteps, MPI_Comm comm)
{
    int status, rank, size;
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    /* Reducing, rank r starts with block r-1 so that after N-1 steps it owns
     * block r; only gathering, it starts with the block it owns. */
    int first = nreduce > 0 ? rank - 1 : rank;
    ring__phase_t phase = {
        .comm = comm,
        .left = ring__mod(rank - 1, size),
        .right = ring__mod(rank + 1, size),
        .count = count,
        .nblocks = size,
        .dtype = dtype,
        .op = op,
        .divisor = op == RING_AVERAGE ? size : 1,
        .src = src,
        .buf = buf,
        .send_block = ring__mod(first, size),
        .recv_block = ring__mod(first - 1, size),
        .nrecv_steps = nsteps,
        .nreduce = nreduce,
        .nforward = nsteps - 1,
    };
    status = ring__phase_run(&phase);
out:
    return status;
}

static int ring__allreduce_ring(const void *sendbuf, void *recvbuf,
                                size_t count, ring_dtype_t dtype, ring_op_t op,
                                MPI_Comm comm, int rank, int size)
{
    (void)rank;
    return ring__ring_blocks(sendbuf, recvbuf, count, dtype, op, size - 1,
                             2 * (size - 1), comm);
}

/* Algorithms in one table: a new algorithm is one row. */
static ring__allreduce_fn *const ring__allreduce_algos[RING_ALGO_COUNT] = {
    [RING_ALGO_RING] = ring__allreduce_ring,
    [RING_ALGO_RDB] = ring__allreduce_rdb,
    [RING_ALGO_RHD] = ring__allreduce_rhd,
};

/* The decision table, from bench/allreduce_perf runs on 2-core machines
 * (bench/README.md): recursive doubling while latency dominates; below
 * 2 MiB on 4, 8, ... ranks, Rabenseifner's fewer steps beat the ring's
 * pipelining (its scratch still fits in cache); the ring otherwise. */
static ring_algo_t ring__allreduce_decide(ring_algo_t algo, size_t nbytes,
                                          int size,
                                          const ring__tuning_t *tuning)
{
    const size_t rhd_max_bytes = 2 << 20;
    int pow2 = (size & (size - 1)) == 0;
    /* The recursive algorithms send a message in one MPI call of int bytes. */
    if (nbytes > (size_t)1 << 30) return RING_ALGO_RING;
    if (algo != RING_ALGO_AUTO) return algo;
    if (nbytes < tuning->small_bytes) return RING_ALGO_RDB;
    if (pow2 && size > 2 && nbytes < rhd_max_bytes) return RING_ALGO_RHD;
    return RING_ALGO_RING;
}

static int ring__allreduce(ring_algo_t algo, const void *sendbuf,
                           void *recvbuf, size_t count, ring_dtype_t dtype,
                           ring_op_t op, MPI_Comm comm)
{
    int status, rank, size;
    const ring__tuning_t *tuning;
    status = ring__check_args("ring_allreduce", sendbuf, recvbuf, count, dtype,
                              op, comm);
    if (status == RING_OK && (unsigned)algo >= RING_ALGO_COUNT) {
        ring__log("ring_allreduce_algo: unknown algorithm %d", (int)algo);
        status = RING_ERR_ARG;
    }
    if (status == RING_OK) status = ring__tuning(&tuning);
    if (status == RING_OK && algo == RING_ALGO_AUTO) algo = tuning->algo;
    RING_CHECK(ring__agree(comm,
                           &(ring__call_t){.kind = RING__ALLREDUCE,
                                           .count = count,
                                           .dtype = dtype,
                                           .op = op,
                                           .algo = algo},
                           status));
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    size_t nbytes = count * ring_dtype_size(dtype);
    if (count == 0) goto out;
    if (size == 1) {
        /* AVERAGE over one rank divides by one: a copy. */
        if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, nbytes);
        goto out;
    }
    algo = ring__allreduce_decide(algo, nbytes, size, tuning);
    status = ring__allreduce_algos[algo](sendbuf, recvbuf, count, dtype, op,
                                         comm, rank, size);
out:
    return status;
}

int ring_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                   ring_dtype_t dtype, ring_op_t op, MPI_Comm comm)
{
    return ring__allreduce(RING_ALGO_AUTO, sendbuf, recvbuf, count, dtype, op,
                           comm);
}

int ring_allreduce_algo(ring_algo_t algo, const void *sendbuf, void *recvbuf,
                        size_t count, ring_dtype_t dtype, ring_op_t op,
                        MPI_Comm comm)
{
    return ring__allreduce(algo, sendbuf, recvbuf, count, dtype, op, comm);
}
