/* ring/ipc.c: allreduce of device buffers among the ranks of one node,
 * each rank reducing its block straight from the other ranks' device
 * memory: the device twin of ring/shm.c, over CUDA IPC.
 *
 * Each rank allocates a device slab once (the first device allreduce of a
 * context that has a shared window), exports it, and opens every other
 * rank's (cudaIpcOpenMemHandle; on the emulated device a memfd mapped from
 * /proc). That works for ranks on different GPUs with peer access and for
 * ranks sharing one GPU. Where it fails on any rank, every rank stages
 * instead (ring/staged.c), logged once.
 *
 * A call runs in chunks of half a slab; chunk g (counted since the slab
 * was made) lives in half g % 2. For each chunk rank r, on its stream,
 *   1. copies its input into its half and waits for the copy;
 *      barrier: every half holds its rank's chunk;
 *   2. reduces block r of the chunk: every rank's half, in rank order, in
 *      one kernel (reduce_n, the shared window's order and arithmetic, so
 *      the result is bitwise the host path's), into its own half, where
 *      nobody else reads block r; waits for it;
 *      barrier: every block is reduced;
 *   3. copies every block from its owner's half into recvbuf; waits.
 * Ordering comes from the host: a rank's kernel or copy is done when its
 * stream sync returns, and MPI_Barrier orders that before any other rank
 * goes on (the device writes are visible to other processes once the
 * stream has synchronised). Step 1 of chunk g + 2 overwrites the half that
 * step 3 of chunk g read, so a rank may start it only once every rank is
 * past that step 3: it is, as every rank has since passed chunk g + 1's
 * first barrier. Two barriers a chunk, none at the end of a call.
 *
 * A registered buffer (ring_ctx_register: hvd's device fusion buffer) is
 * exported and opened the same way, once, and reduced where it lies,
 * without the copy into the slab: every rank's buffer holds its input
 * (barrier), rank r reduces block r of all of them into its own (barrier),
 * and copies every other block from its owner's buffer (barrier: only
 * then may any rank write its buffer again). It reads each byte of the
 * input once and writes each byte of the output once, plus the block it
 * reduces: what ranks sharing one GPU can do at best, bar that block.
 *
 * Worked example, N = 2, one chunk (half 0). Rank 0 copies its input into
 * half 0 of slab 0, rank 1 into half 0 of slab 1; barrier. Rank 0 reduces
 * block 0 from slab 0 and slab 1 into slab 0, rank 1 block 1 into slab 1;
 * barrier. Rank 0 copies block 0 from slab 0 and block 1 from slab 1 into
 * its recvbuf, rank 1 the same. Block 1 of slab 1 was written in step 2
 * and read by rank 0 only after the barrier that follows it.
 */
#include <stdlib.h>
#include "ring/ring_internal.h"

struct ring__ipc {
    const ring_dev_t *dev;
    MPI_Comm comm;          /* the node's ranks (ours: a duplicate) */
    int rank, size;
    ring_stream_t *stream;
    size_t half_bytes;
    char **slabs;           /* every rank's slab, as mapped here */
    uint64_t nchunks;       /* since the slab was made: the half to use */
    char **reg;             /* every rank's registered buffer, mapped
                               here; NULL: none */
    size_t reg_bytes;       /* the least of the ranks' */
    ring_ctx_t *across;     /* hierarchical: the ranks of this index on
                               every node (staged ring); else NULL */
    int nranks;             /* every node's ranks together */
};

/* Closes the others' registered buffers (ours is the caller's). */
static void ring__ipc_unregister(ring__ipc_t *ipc)
{
    for (int r = 0; ipc->reg && r < ipc->size; r++)
        if (r != ipc->rank && ipc->reg[r]) ipc->dev->ipc_close(ipc->reg[r]);
    free(ipc->reg);
    ipc->reg = NULL;
    ipc->reg_bytes = 0;
}

void ring__ipc_free(ring__ipc_t **ipcp)
{
    ring__ipc_t *ipc = ipcp ? *ipcp : NULL;
    if (!ipc) return;
    /* Nobody may still read a slab we close or free. */
    if (ipc->comm != MPI_COMM_NULL) MPI_Barrier(ipc->comm);
    ring__ipc_unregister(ipc);
    for (int r = 0; ipc->slabs && r < ipc->size; r++) {
        if (!ipc->slabs[r]) continue;
        if (r == ipc->rank)
            ipc->dev->release(ipc->slabs[r]);
        else
            ipc->dev->ipc_close(ipc->slabs[r]);
    }
    ipc->dev->stream_destroy(ipc->stream);
    ring_ctx_free(&ipc->across);
    if (ipc->comm != MPI_COMM_NULL) MPI_Comm_free(&ipc->comm);
    free(ipc->slabs);
    free(ipc);
    *ipcp = NULL;
}

/* Collective: every rank's `mine` (device memory, the start of an
 * allocation; NULL when this rank already failed, with status saying
 * why) into maps[r], opened here; maps[rank] = mine. RING_OK, or this
 * rank's first failure (logged): then the caller drops the exchange on
 * every rank. */
static int ring__ipc_exchange(ring__ipc_t *ipc, char *mine, int status,
                              char **maps)
{
    ring_ipc_handle_t own = {0};
    ring_ipc_handle_t *all = calloc((size_t)ipc->size, sizeof *all);
    if (!all && status == RING_OK) status = RING_ERR_NOMEM;
    if (status == RING_OK) status = ipc->dev->ipc_export(mine, &own);
    /* The others wait for our handle whatever happened here. */
    if (MPI_Allgather(&own, sizeof own, MPI_BYTE,
                      all ? (void *)all : (void *)&own, all ? sizeof own : 0,
                      MPI_BYTE, ipc->comm) != MPI_SUCCESS)
        status = RING_ERR_MPI;
    if (maps) maps[ipc->rank] = mine;
    for (int r = 0; status == RING_OK && maps && r < ipc->size; r++)
        if (r != ipc->rank)
            status = ipc->dev->ipc_open(&all[r], (void **)&maps[r]);
    free(all);
    return status;
}

/* Whether every rank of ipc's node says ok. */
static int ring__ipc_all(ring__ipc_t *ipc, int ok, int *all_ok)
{
    return MPI_Allreduce(&ok, all_ok, 1, MPI_INT, MPI_MIN, ipc->comm) ==
                   MPI_SUCCESS
               ? RING_OK
               : RING_ERR_MPI;
}

/* This rank's part of making the window: its slab, exported, and the
 * others' opened. RING_OK, or the first failure (logged). */
static int ring__ipc_open(ring__ipc_t *ipc)
{
    int status = RING_OK;
    char *slab = NULL;
    ipc->slabs = calloc((size_t)ipc->size, sizeof *ipc->slabs);
    if (!ipc->slabs) status = RING_ERR_NOMEM;
    if (status == RING_OK) status = ipc->dev->stream_create(&ipc->stream);
    if (status == RING_OK)
        status = ipc->dev->alloc((void **)&slab, 2 * ipc->half_bytes);
    status = ring__ipc_exchange(ipc, slab, status, ipc->slabs);
    if (!ipc->slabs && slab) ipc->dev->release(slab);
    return status;
}

int ring__ipc_create(ring_ctx_t *ctx, const ring_dev_t *dev,
                     size_t half_bytes, ring__ipc_t **out)
{
    int status = RING_OK, ok, all_ok;
    int hier = ctx->cross != MPI_COMM_NULL;
    ring__ipc_t *ipc = calloc(1, sizeof *ipc);
    *out = NULL;
    if (!ipc) return RING_ERR_NOMEM;
    ipc->dev = dev;
    ipc->half_bytes = half_bytes;
    ipc->comm = MPI_COMM_NULL;
    RING_CHECK_MPI(MPI_Comm_dup(hier ? ctx->node : ctx->comm, &ipc->comm));
    RING_CHECK_MPI(MPI_Comm_rank(ipc->comm, &ipc->rank));
    RING_CHECK_MPI(MPI_Comm_size(ipc->comm, &ipc->size));
    RING_CHECK_MPI(MPI_Comm_size(ctx->comm, &ipc->nranks));
    ok = ipc->size <= RING_DEV_MAX_INPUTS && ring__ipc_open(ipc) == RING_OK;
    /* Every rank of every node takes the window or none does: a rank
     * alone on it would wait for the others at its first barrier, and
     * nodes that went different ways would cut different messages. */
    RING_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN,
                                 ctx->comm));
    if (!all_ok) goto out;
    if (hier) {
        ring_ctx_opts_t over_mpi = {.intranode = RING_INTRANODE_RING};
        RING_CHECK(ring_ctx_create(ctx->cross, &over_mpi, &ipc->across));
    }
    *out = ipc;
    ipc = NULL;
out:
    ring__ipc_free(&ipc);
    return status;
}

int ring__ipc_of(ring_ctx_t *ctx, const ring_dev_t *dev,
                 const ring__tuning_t *tuning, ring__ipc_t **out)
{
    if (!ctx->ipc_tried) {
        ctx->ipc_tried = 1;
        size_t half = tuning->staging_bytes / 2 / 256 * 256;
        int status = ring__ipc_create(ctx, dev, half ? half : 256,
                                      &ctx->ipc);
        if (status != RING_OK) return status;
        int rank;
        if (!ctx->ipc && MPI_Comm_rank(ctx->comm, &rank) == MPI_SUCCESS &&
            rank == 0)
            ring__log("info: device allreduces within the node stage "
                      "through host memory: %s IPC could not open every "
                      "rank's device memory", dev->name);
    }
    *out = ctx->ipc;
    return RING_OK;
}

/* Block `rank` of n elements, reduced over every rank's bufs[r] into
 * this rank's own: in one kernel, in rank order; across nodes then
 * allreduced with the ranks of the same index on the other nodes (an
 * AVERAGE summed in both stages, divided once by every rank's number).
 * Waited for. */
static int ring__ipc_reduce_block(ring__ipc_t *ipc, const ring__coll_t *c,
                                  char *const *bufs, size_t n)
{
    int status = RING_OK, size = ipc->size;
    const ring_dev_t *dev = ipc->dev;
    const void *inputs[RING_DEV_MAX_INPUTS];
    size_t at = ring__block_offset(n, size, ipc->rank) * c->esize;
    size_t len = ring__block_count(n, size, ipc->rank);
    char *own = bufs[ipc->rank] + at;
    int average = c->op == RING_AVERAGE;
    ring_op_t op = ipc->across && average ? RING_SUM : c->op;
    for (int r = 0; r < size; r++) inputs[r] = bufs[r] + at;
    if (len > 0)
        RING_CHECK(dev->reduce_n(own, inputs, size, len, c->dtype, op,
                                 average && !ipc->across ? size : 1,
                                 ipc->stream));
    RING_CHECK(dev->stream_sync(ipc->stream));
    if (!ipc->across) goto out;
    RING_CHECK(ring_ctx_allreduce(ipc->across, own, own, len, c->dtype, op));
    if (average && len > 0) {
        RING_CHECK(dev->divide(own, len, c->dtype, ipc->nranks,
                               ipc->stream));
        RING_CHECK(dev->stream_sync(ipc->stream));
    }
out:
    return status;
}

/* Every block but this rank's own from its owner's bufs[r] into dst (a
 * block of dst already holding it is skipped). Waited for. */
static int ring__ipc_gather(ring__ipc_t *ipc, const ring__coll_t *c,
                            char *const *bufs, char *dst, size_t n)
{
    int status = RING_OK;
    for (int r = 0; r < ipc->size; r++) {
        size_t from = ring__block_offset(n, ipc->size, r) * c->esize;
        size_t bytes = ring__block_count(n, ipc->size, r) * c->esize;
        if (bytes > 0 && bufs[r] + from != dst + from)
            RING_CHECK(ipc->dev->copy(dst + from, bufs[r] + from, bytes,
                                      ipc->stream));
    }
    status = ipc->dev->stream_sync(ipc->stream);
out:
    return status;
}

/* One chunk of n elements through the slabs' half in turn. */
static int ring__ipc_chunk(ring__ipc_t *ipc, const ring__coll_t *c,
                           const char *sendbuf, char *recvbuf, size_t n)
{
    int status = RING_OK;
    char *bufs[RING_DEV_MAX_INPUTS];
    size_t half = (ipc->nchunks++ & 1) * ipc->half_bytes;
    for (int r = 0; r < ipc->size; r++) bufs[r] = ipc->slabs[r] + half;
    RING_CHECK(ipc->dev->copy(bufs[ipc->rank], sendbuf, n * c->esize,
                              ipc->stream));
    RING_CHECK(ipc->dev->stream_sync(ipc->stream));
    RING_CHECK_MPI(MPI_Barrier(ipc->comm));
    RING_CHECK(ring__ipc_reduce_block(ipc, c, bufs, n));
    RING_CHECK_MPI(MPI_Barrier(ipc->comm));
    RING_CHECK(ring__ipc_gather(ipc, c, bufs, recvbuf, n));
out:
    return status;
}

int ring__ipc_allreduce(ring__ipc_t *ipc, const ring__coll_t *c,
                        const void *sendbuf, void *recvbuf)
{
    int status = RING_OK;
    size_t per_chunk = ipc->half_bytes / c->esize;
    for (size_t done = 0; done < c->count; done += per_chunk) {
        size_t n = c->count - done < per_chunk ? c->count - done : per_chunk;
        RING_CHECK(ring__ipc_chunk(ipc, c,
                                   (const char *)sendbuf + done * c->esize,
                                   (char *)recvbuf + done * c->esize, n));
    }
out:
    return status;
}

int ring__ipc_register(ring__ipc_t *ipc, void *buf, size_t nbytes)
{
    int status = RING_OK, ok, all_ok;
    unsigned long long least, mine = buf ? nbytes : 0;
    /* Nobody may still read the buffers we close. */
    RING_CHECK_MPI(MPI_Barrier(ipc->comm));
    ring__ipc_unregister(ipc);
    RING_CHECK_MPI(MPI_Allreduce(&mine, &least, 1, MPI_UNSIGNED_LONG_LONG,
                                 MPI_MIN, ipc->comm));
    if (ipc->across)
        RING_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &least, 1,
                                     MPI_UNSIGNED_LONG_LONG, MPI_MIN,
                                     ipc->across->comm));
    if (least == 0) goto out; /* some rank registers nothing */
    char **maps = calloc((size_t)ipc->size, sizeof *maps);
    ok = ring__ipc_exchange(ipc, buf, maps ? RING_OK : RING_ERR_NOMEM,
                            maps) == RING_OK;
    ipc->reg = maps;
    RING_CHECK(ring__ipc_all(ipc, ok, &all_ok));
    if (ipc->across) /* and on every node */
        RING_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT,
                                     MPI_MIN, ipc->across->comm));
    if (all_ok)
        ipc->reg_bytes = least;
    else
        ring__ipc_unregister(ipc);
out:
    return status;
}

int ring__ipc_registered(const ring__ipc_t *ipc, size_t nbytes)
{
    return ipc && ipc->reg && nbytes <= ipc->reg_bytes;
}

int ring__ipc_allreduce_registered(ring__ipc_t *ipc, const ring__coll_t *c)
{
    int status = RING_OK;
    RING_CHECK_MPI(MPI_Barrier(ipc->comm));
    RING_CHECK(ring__ipc_reduce_block(ipc, c, ipc->reg, c->count));
    RING_CHECK_MPI(MPI_Barrier(ipc->comm));
    RING_CHECK(ring__ipc_gather(ipc, c, ipc->reg, ipc->reg[ipc->rank],
                                c->count));
    RING_CHECK_MPI(MPI_Barrier(ipc->comm));
out:
    return status;
}
