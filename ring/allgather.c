/* ring/allgather.c: ring_allgather, the last N-1 steps of the ring
 * allreduce: rank r sends block r, then forwards each block it receives. */
#include "ring/ring_internal.h"

/* A chunk of a staged call: each block in its place in staging. */
static int ring__allgather_chunk(const ring__coll_t *c, char *stage,
                                 size_t count, void *arg)
{
    (void)arg;
    return ring__ring_blocks(c, NULL, stage, count, RING__NO_OP, 0,
                             c->size - 1, c->comm);
}

static int ring__allgather(ring_ctx_t *ctx, const char *func,
                           const void *sendbuf, void *recvbuf,
                           size_t sendcount, ring_dtype_t dtype)
{
    int status;
    ring__coll_t c = {.func = func, .kind = RING__ALLGATHER, .ctx = ctx,
                      .count = sendcount, .dtype = dtype, .op = RING__NO_OP};
    RING_CHECK(ring__begin(&c, sendbuf, recvbuf, RING_OK));
    size_t nbytes = sendcount * c.esize;
    char *own = (char *)recvbuf + nbytes * (size_t)c.rank;
    if (sendcount == 0) goto out;
    if (ring__staging(&c)) {
        ring__staged_t s = {
            .nblocks = c.size, .whole = sendcount * (size_t)c.size,
            .in = sendbuf, .in_block = c.rank, .out = recvbuf,
            .out_block = -1, .run = ring__allgather_chunk, .hooked = 1};
        status = ring__staged(&c, &s);
        goto out;
    }
    if (sendbuf != own) c.mem->copy(own, sendbuf, nbytes);
    if (c.size > 1)
        RING_CHECK(ring__ring_blocks(&c, NULL, recvbuf, sendcount * c.size,
                                     RING__NO_OP, 0, c.size - 1, c.comm));
out:
    return ring__end(&c, status);
}

int ring_ctx_allgather(ring_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                       size_t sendcount, ring_dtype_t dtype)
{
    return ring__allgather(ctx, "ring_ctx_allgather", sendbuf, recvbuf,
                           sendcount, dtype);
}

int ring_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                   ring_dtype_t dtype, MPI_Comm comm)
{
    ring_ctx_t ctx = ring__ctx_wrap(comm, MPI_COMM_NULL, MPI_COMM_NULL, NULL);
    return ring__allgather(&ctx, "ring_allgather", sendbuf, recvbuf,
                           sendcount, dtype);
}
