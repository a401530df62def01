/* ring/reduce_scatter.c: ring_reduce_scatter, the first N-1 steps of the
 * ring allreduce (see ring/allreduce.c for a walk-through): in step s rank r
 * sends block r-1-s and receives block r-2-s, so after N-1 steps it holds
 * the whole reduction of block r. */
#include <stdlib.h>
#include "ring/ring_internal.h"

/* A chunk of a staged call, in place in staging. */
static int ring__reduce_scatter_chunk(const ring__coll_t *c, char *stage,
                                      size_t count, void *arg)
{
    (void)arg;
    return ring__ring_blocks(c, stage, stage, count, c->op, c->size - 1,
                             c->size - 1, c->comm);
}

static int ring__reduce_scatter(ring_ctx_t *ctx, const char *func,
                                const void *sendbuf, void *recvbuf,
                                size_t recvcount, ring_dtype_t dtype,
                                ring_op_t op)
{
    int status;
    char *scratch = NULL;
    ring__coll_t c = {.func = func, .kind = RING__REDUCE_SCATTER, .ctx = ctx,
                      .count = recvcount, .dtype = dtype, .op = op};
    RING_CHECK(ring__begin(&c, sendbuf, recvbuf, RING_OK));
    size_t nbytes = recvcount * c.esize;
    if (recvcount == 0) goto out;
    if (ring__staging(&c)) {
        ring__staged_t s = {
            .nblocks = c.size, .whole = recvcount * (size_t)c.size,
            .in = sendbuf, .in_block = -1,
            .out = (char *)recvbuf +
                   (sendbuf == recvbuf ? nbytes * (size_t)c.rank : 0),
            .out_block = c.rank, .run = ring__reduce_scatter_chunk,
            .hooked = 1};
        status = ring__staged(&c, &s);
        goto out;
    }
    if (c.size == 1) {
        if (sendbuf != recvbuf) c.mem->copy(recvbuf, sendbuf, nbytes);
        goto out;
    }
    /* In place, the caller's buffer holds the partial results; otherwise
     * they need a whole-size scratch, as recvbuf holds one block only. */
    char *buf = recvbuf;
    if (sendbuf != recvbuf) {
        buf = scratch = c.mem->alloc(nbytes * (size_t)c.size);
        if (!scratch) {
            status = RING_ERR_NOMEM;
            goto out;
        }
    }
    /* A CUDA-aware MPI's kernels read device memory only: a host sendbuf
     * is copied into the scratch, and reduced there in place. */
    if (scratch && c.host_in) {
        c.mem->copy(scratch, sendbuf, nbytes * (size_t)c.size);
        sendbuf = scratch;
    }
    RING_CHECK(ring__ring_blocks(&c, sendbuf, buf, recvcount * c.size, op,
                                 c.size - 1, c.size - 1, c.comm));
    if (scratch)
        c.mem->copy(recvbuf, scratch + nbytes * (size_t)c.rank, nbytes);
out:
    if (scratch) c.mem->release(scratch);
    return ring__end(&c, status);
}

int ring_ctx_reduce_scatter(ring_ctx_t *ctx, const void *sendbuf,
                            void *recvbuf, size_t recvcount,
                            ring_dtype_t dtype, ring_op_t op)
{
    return ring__reduce_scatter(ctx, "ring_ctx_reduce_scatter", sendbuf,
                                recvbuf, recvcount, dtype, op);
}

int ring_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                        ring_dtype_t dtype, ring_op_t op, MPI_Comm comm)
{
    ring_ctx_t ctx = ring__ctx_wrap(comm, MPI_COMM_NULL, MPI_COMM_NULL, NULL);
    return ring__reduce_scatter(&ctx, "ring_reduce_scatter", sendbuf, recvbuf,
                                recvcount, dtype, op);
}
