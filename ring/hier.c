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
#include "ring/ring_internal.h"

int ring__allreduce_hier(const ring__coll_t *c, const void *sendbuf,
                         void *recvbuf)
{
    int status, local_rank, local_size, nnodes;
    MPI_Comm node = c->ctx->node, cross = c->ctx->cross;
    RING_CHECK_MPI(MPI_Comm_rank(node, &local_rank));
    RING_CHECK_MPI(MPI_Comm_size(node, &local_size));
    RING_CHECK_MPI(MPI_Comm_size(cross, &nnodes));
    ring_op_t sum_op = c->op == RING_AVERAGE ? RING_SUM : c->op;
    const void *src = sendbuf;
    if (local_size > 1) {
        RING_CHECK(ring__ring_blocks(c, sendbuf, recvbuf, c->count, sum_op,
                                     local_size - 1, local_size - 1, node));
        src = recvbuf;
    } else if (sendbuf == recvbuf) {
        src = recvbuf;
    }
    char *block = (char *)recvbuf +
                  ring__block_offset(c->count, local_size, local_rank) *
                      c->esize;
    size_t nblock = ring__block_count(c->count, local_size, local_rank);
    RING_CHECK(ring_allreduce((const char *)src + (block - (char *)recvbuf),
                              block, nblock, c->dtype, sum_op, cross));
    if (c->op == RING_AVERAGE)
        c->mem->divide(block, nblock, c->dtype, local_size * nnodes);
    if (local_size > 1)
        RING_CHECK(ring__ring_blocks(c, NULL, recvbuf, c->count, c->op, 0,
                                     local_size - 1, node));
out:
    return status;
}

int ring_allreduce_hier(const void *sendbuf, void *recvbuf, size_t count,
                        ring_dtype_t dtype, ring_op_t op, MPI_Comm node,
                        MPI_Comm cross)
{
    int status = RING_OK;
    ring_ctx_t ctx = ring__ctx_wrap(node, node, cross, NULL);
    if (cross == MPI_COMM_NULL) {
        ring__log("ring_allreduce_hier: cross is MPI_COMM_NULL");
        status = RING_ERR_ARG;
    }
    ring__coll_t c = {.func = "ring_allreduce_hier",
                      .kind = RING__ALLREDUCE_HIER, .ctx = &ctx,
                      .count = count, .dtype = dtype, .op = op};
    RING_CHECK(ring__begin(&c, sendbuf, recvbuf, status));
    if (count > 0) status = ring__allreduce_hier(&c, sendbuf, recvbuf);
out:
    return status;
}
