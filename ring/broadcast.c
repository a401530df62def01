/* ring/broadcast.c: ring_broadcast. Small messages go down a binomial tree
 * (ceil(log2 N) hops); large ones along a pipelined chain root -> root+1 ->
 * ... in segments, so every link carries the message once and the time is
 * about one message plus N-2 segments. */
#include "ring/ring_internal.h"

enum { RING_BCAST_TAG = 0x7262 };

/* Binomial tree over ranks relative to the root: vrank receives from
 * vrank - (its lowest set bit) and sends to vrank + each lower power of 2. */
static int ring__broadcast_tree(void *buf, int nbytes, int root, MPI_Comm comm,
                                int rank, int size)
{
    int status = RING_OK, vrank = ring__mod(rank - root, size), mask = 1;
    for (; mask < size; mask <<= 1) {
        if (vrank & mask) {
            int from = ring__mod(vrank - mask + root, size);
            RING_CHECK_MPI(MPI_Recv(buf, nbytes, MPI_BYTE, from, RING_BCAST_TAG,
                                    comm, MPI_STATUS_IGNORE));
            break;
        }
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vrank + mask < size) {
            int to = ring__mod(vrank + mask + root, size);
            RING_CHECK_MPI(MPI_Send(buf, nbytes, MPI_BYTE, to, RING_BCAST_TAG,
                                    comm));
        }
    }
out:
    return status;
}

static int ring__broadcast_chain(const ring__coll_t *c, void *buf)
{
    int vrank = ring__mod(c->rank - c->root, c->size);
    ring__phase_t phase = {
        .comm = c->comm,
        .left = ring__mod(c->rank - 1, c->size),
        .right = ring__mod(c->rank + 1, c->size),
        .count = c->count,
        .nblocks = 1,
        .dtype = c->dtype,
        .buf = buf,
        .send_block = vrank == 0 ? 0 : -1,
        .recv_block = 0,
        .nrecv_steps = vrank == 0 ? 0 : 1,
        .nreduce = 0,
        .nforward = vrank == 0 || vrank == c->size - 1 ? 0 : 1,
        .mem = c->mem,
        .segment_bytes = c->tuning->segment_bytes,
        .hooks = c->hooks,
    };
    return ring__phase_run(&phase);
}

/* Down the tree while latency dominates, else along the chain. */
static int ring__broadcast_run(const ring__coll_t *c, void *buf, int tree)
{
    if (tree)
        return ring__broadcast_tree(buf, (int)(c->count * c->esize), c->root,
                                    c->comm, c->rank, c->size);
    return ring__broadcast_chain(c, buf);
}

/* A chunk of a staged call, by the way the whole call went. */
static int ring__broadcast_chunk(const ring__coll_t *c, char *stage,
                                 size_t count, void *arg)
{
    ring__coll_t chunk = *c;
    chunk.count = count;
    return ring__broadcast_run(&chunk, stage, *(int *)arg);
}

static int ring__broadcast(ring_ctx_t *ctx, const char *func, void *buf,
                           size_t count, ring_dtype_t dtype, int root)
{
    int status;
    ring__coll_t c = {.func = func, .kind = RING__BROADCAST, .ctx = ctx,
                      .count = count, .dtype = dtype, .op = RING__NO_OP,
                      .root = root};
    RING_CHECK(ring__begin(&c, buf, buf, RING_OK));
    size_t nbytes = count * c.esize;
    if (count == 0 || c.size == 1) goto out;
    int tree = nbytes < c.tuning->small_bytes;
    if (ring__staging(&c)) {
        int root_here = c.rank == root;
        ring__staged_t s = {.nblocks = 1, .whole = count,
                            .in = root_here ? buf : NULL, .in_block = -1,
                            .out = root_here ? NULL : buf, .out_block = -1,
                            .run = ring__broadcast_chunk, .arg = &tree,
                            .hooked = !tree};
        status = ring__staged(&c, &s);
    } else {
        status = ring__broadcast_run(&c, buf, tree);
    }
out:
    return ring__end(&c, status);
}

int ring_ctx_broadcast(ring_ctx_t *ctx, void *buf, size_t count,
                       ring_dtype_t dtype, int root)
{
    return ring__broadcast(ctx, "ring_ctx_broadcast", buf, count, dtype,
                           root);
}

int ring_broadcast(void *buf, size_t count, ring_dtype_t dtype, int root,
                   MPI_Comm comm)
{
    ring_ctx_t ctx = ring__ctx_wrap(comm, MPI_COMM_NULL, MPI_COMM_NULL, NULL);
    return ring__broadcast(&ctx, "ring_broadcast", buf, count, dtype, root);
}
