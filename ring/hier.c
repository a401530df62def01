/* ring/hier.c: the hierarchical allreduce, for ranks spread over nodes.
 *
 * Function:     ring_allreduce_hier
 * Accepts:      as ring_allreduce, with two communicators instead of one:
 *               `node`, the caller's node (L ranks), and `cross`, the
 *               ranks of every node with the caller's index in its node.
 * Returns:      RING_OK, RING_ERR_ARG (before any message moves),
 *               RING_ERR_MPI, RING_ERR_NOMEM.
 * Description:  count is cut into L blocks as the ring cuts it. Within each
 *               node, a ring reduce-scatter leaves block l summed over the
 *               node at local rank l; the L ranks holding block l (one per
 *               node) allreduce it around their own ring across the nodes;
 *               a ring allgather within each node then hands every block to
 *               every rank. Each rank sends 2(L-1)/L of the data inside its
 *               node and 2(M-1)/(ML) across (M nodes), against 2(N-1)/N
 *               across for a flat ring whose neighbours sit on other nodes.
 *
 * Two nodes of two ranks, blocks A B, rank r's contribution X_r:
 *   node 0 (ranks 0, 1)       after reduce-scatter: rank 0 A_0+A_1, rank 1 B_0+B_1
 *   node 1 (ranks 2, 3)       rank 2 A_2+A_3, rank 3 B_2+B_3
 *   across (0 with 2, 1 with 3): ranks 0 and 2 hold A, 1 and 3 hold B
 *   within each node again: allgather of A and B.
 *
 * AVERAGE sums in the first two stages and each block's owner divides it by
 * N once, in float for half types (then rounds), before the allgather. Each
 * block is reduced by one chain of owners and only copied after: every rank
 * ends bitwise identical.
 *
 * Limitations:  every node must have the same number of ranks (the blocks
 *               of a cross ring must match); the caller checks it.
 */
#include <string.h>
#include "ring/ring_internal.h"

int ring_allreduce_hier(const void *sendbuf, void *recvbuf, size_t count,
                        ring_dtype_t dtype, ring_op_t op, MPI_Comm node,
                        MPI_Comm cross)
{
    int status, local_rank, local_size, nnodes;
    status = ring__check_args("ring_allreduce_hier", sendbuf, recvbuf, count,
                              dtype, op, node);
    if (status == RING_OK && cross == MPI_COMM_NULL) {
        ring__log("ring_allreduce_hier: cross is MPI_COMM_NULL");
        status = RING_ERR_ARG;
    }
    RING_CHECK(ring__agree_hier(node, cross,
                                &(ring__call_t){.kind = RING__ALLREDUCE_HIER,
                                                .count = count,
                                                .dtype = dtype,
                                                .op = op},
                                status));
    RING_CHECK_MPI(MPI_Comm_rank(node, &local_rank));
    RING_CHECK_MPI(MPI_Comm_size(node, &local_size));
    RING_CHECK_MPI(MPI_Comm_size(cross, &nnodes));
    if (count == 0) goto out;
    ring_op_t sum_op = op == RING_AVERAGE ? RING_SUM : op;
    size_t esize = ring_dtype_size(dtype);
    const void *src = sendbuf;
    if (local_size > 1) {
        RING_CHECK(ring__ring_blocks(sendbuf, recvbuf, count, dtype, sum_op,
                                     local_size - 1, local_size - 1, node));
        src = recvbuf;
    } else if (sendbuf == recvbuf) {
        src = recvbuf;
    }
    char *block = (char *)recvbuf +
                  ring__block_offset(count, local_size, local_rank) * esize;
    size_t nblock = ring__block_count(count, local_size, local_rank);
    RING_CHECK(ring_allreduce((const char *)src + (block - (char *)recvbuf),
                              block, nblock, dtype, sum_op, cross));
    if (op == RING_AVERAGE)
        ring__divide_host(block, nblock, dtype, local_size * nnodes);
    if (local_size > 1)
        RING_CHECK(ring__ring_blocks(NULL, recvbuf, count, dtype, op, 0,
                                     local_size - 1, node));
out:
    return status;
}
