/* ring/allreduce.c: ring_allreduce and its two algorithms.
 *
 * Function:     ring_allreduce / ring_allreduce_algo
 * Accepts:      as MPI_Allreduce (counts in elements); sendbuf == recvbuf
 *               is in place.
 * Returns:      RING_OK, or RING_ERR_ARG before any message moves,
 *               RING_ERR_MPI, RING_ERR_NOMEM.
 * Description:  Two algorithms share one signature in a table; AUTO picks
 *               recursive doubling below HVD_RING_SMALL_BYTES and the ring
 *               from there on.
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
 * Recursive doubling (latency optimal, log2(N) exchanges of the whole
 * message) pairs rank r with r ^ 1, r ^ 2, ...; each pair combines as
 * (lower rank's data) op (higher rank's data), so both partners compute the
 * same expression and stay bitwise identical. With N not a power of two,
 * the first 2*rem ranks (rem = N - 2^floor(log2 N)) fold pairwise first:
 * even ranks hand their data to the odd rank above and get the result back
 * at the end.
 *
 * Limitations:  all ranks must pass the same count, dtype, op and algo
 *               (hvd's negotiation guarantees it); a rank whose arguments
 *               are rejected does not tell the others.
 */
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"

enum { RING_RDB_TAG = 0x7264 };

typedef int ring__allreduce_fn(const void *sendbuf, void *recvbuf,
                               size_t count, ring_dtype_t dtype, ring_op_t op,
                               MPI_Comm comm, int rank, int size);

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

/* Rank of the process that plays "virtual" rank v once the first 2*rem
 * ranks have folded pairwise (the odd one of each pair stays). */
static int ring__rdb_real(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

static int ring__allreduce_rdb(const void *sendbuf, void *recvbuf,
                               size_t count, ring_dtype_t dtype, ring_op_t op,
                               MPI_Comm comm, int rank, int size)
{
    int status = RING_OK;
    size_t nbytes = count * ring_dtype_size(dtype);
    char stack[8192];
    char *tmp = nbytes <= sizeof stack ? stack : malloc(nbytes);
    int divisor = op == RING_AVERAGE ? size : 1;
    int p2 = 1;
    while (p2 * 2 <= size) p2 *= 2;
    int rem = size - p2, vrank;
    if (!tmp) return RING_ERR_NOMEM;
    if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, nbytes);

    /* Fold: even ranks below 2*rem give their data to rank + 1. */
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            RING_CHECK_MPI(MPI_Send(recvbuf, (int)nbytes, MPI_BYTE, rank + 1,
                                    RING_RDB_TAG, comm));
            vrank = -1;
        } else {
            RING_CHECK_MPI(MPI_Recv(tmp, (int)nbytes, MPI_BYTE, rank - 1,
                                    RING_RDB_TAG, comm, MPI_STATUS_IGNORE));
            ring__reduce_host(recvbuf, tmp, recvbuf, count, dtype, op, 1);
            vrank = rank / 2;
        }
    } else {
        vrank = rank - rem;
    }

    for (int mask = 1; vrank >= 0 && mask < p2; mask <<= 1) {
        int vpeer = vrank ^ mask, peer = ring__rdb_real(vpeer, rem);
        RING_CHECK_MPI(MPI_Sendrecv(recvbuf, (int)nbytes, MPI_BYTE, peer,
                                    RING_RDB_TAG, tmp, (int)nbytes, MPI_BYTE,
                                    peer, RING_RDB_TAG, comm,
                                    MPI_STATUS_IGNORE));
        int div = mask * 2 == p2 ? divisor : 1;
        if (vpeer < vrank)
            ring__reduce_host(recvbuf, tmp, recvbuf, count, dtype, op, div);
        else
            ring__reduce_host(recvbuf, recvbuf, tmp, count, dtype, op, div);
    }

    /* Unfold: the odd ranks hand the result back. */
    if (rank < 2 * rem) {
        if (rank % 2 == 1)
            RING_CHECK_MPI(MPI_Send(recvbuf, (int)nbytes, MPI_BYTE, rank - 1,
                                    RING_RDB_TAG, comm));
        else
            RING_CHECK_MPI(MPI_Recv(recvbuf, (int)nbytes, MPI_BYTE, rank + 1,
                                    RING_RDB_TAG, comm, MPI_STATUS_IGNORE));
    }
out:
    if (tmp != stack) free(tmp);
    return status;
}

/* Algorithms in one table: a new algorithm is one row. */
static ring__allreduce_fn *const ring__allreduce_algos[RING_ALGO_COUNT] = {
    [RING_ALGO_RING] = ring__allreduce_ring,
    [RING_ALGO_RDB] = ring__allreduce_rdb,
};

static ring_algo_t ring__allreduce_decide(ring_algo_t algo, size_t nbytes,
                                          const ring__tuning_t *tuning)
{
    /* Recursive doubling sends whole messages in one MPI call of int bytes. */
    if (nbytes > (size_t)1 << 30) return RING_ALGO_RING;
    if (algo != RING_ALGO_AUTO) return algo;
    return nbytes < tuning->small_bytes ? RING_ALGO_RDB : RING_ALGO_RING;
}

static int ring__allreduce(ring_algo_t algo, const void *sendbuf,
                           void *recvbuf, size_t count, ring_dtype_t dtype,
                           ring_op_t op, MPI_Comm comm)
{
    int status, rank, size;
    const ring__tuning_t *tuning;
    RING_CHECK(ring__check_args("ring_allreduce", sendbuf, recvbuf, count,
                                dtype, op, comm));
    if ((unsigned)algo >= RING_ALGO_COUNT) {
        ring__log("ring_allreduce_algo: unknown algorithm %d", (int)algo);
        status = RING_ERR_ARG;
        goto out;
    }
    RING_CHECK(ring__tuning(&tuning));
    if (algo == RING_ALGO_AUTO) algo = tuning->algo;
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    size_t nbytes = count * ring_dtype_size(dtype);
    if (count == 0) goto out;
    if (size == 1) {
        /* AVERAGE over one rank divides by one: a copy. */
        if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, nbytes);
        goto out;
    }
    algo = ring__allreduce_decide(algo, nbytes, tuning);
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
