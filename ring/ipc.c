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
 * was made) lives in half g % 2. The chunk is cut into N blocks as the
 * ring cuts them, rank r owning block r, and the blocks into segments
 * (HVD_SHM_SEGMENT_BYTES). For each segment s in turn, rank r, on its
 * stream,
 *   1. copies segment s of every block of its input into its half, waits
 *      for the copies, and posts s;
 *   2. once every rank has posted s, reduces segment s of block r: every
 *      rank's half, in rank order, in one kernel (reduce_n: the shared
 *      window's order and arithmetic, so the result is bitwise the host
 *      path's), into its own half, where nobody else reads block r; waits
 *      for it and publishes "reduced s";
 *   3. once each owner has reduced segment s-1 of its block, copies it
 *      from the owner's half into recvbuf.
 * After the last segment (gathered as step 3 of one more) it waits for its
 * copies and releases the chunk. Step 1 of chunk g writes the half that
 * chunk g - 2 read, and needs no wait for it: every rank posted chunk
 * g - 1's first segment only after it had finished chunk g - 2, and this
 * rank waited for those posts in chunk g - 1's step 2.
 *
 * The ranks tell each other through ring/ctl.h's counters, in a small
 * shared window of their own (ring/shm.c's): posted, reduced, released,
 * each only ever growing. Ordering: a rank's copies and kernels are done
 * when its stream sync returns, and the device's writes are then visible
 * to the other processes' device work; the rank then stores the counter
 * with release order, and a reader loads it with acquire order before it
 * queues any work that reads that memory.
 *
 * Worked example, N = 2, one chunk of one segment per block, half 0,
 * counters at 0. Rank 0 copies segment 0 of blocks 0 and 1 into half 0 of
 * slab 0, syncs, posted0 = 1; rank 1 the same into slab 1, posted1 = 1.
 * Rank 0 sees posted1 >= 1, reduces block 0 from slab 0 and slab 1 into
 * slab 0, syncs, reduced0 = 1. Rank 1 reduces block 1 into slab 1,
 * reduced1 = 1. Rank 0 sees reduced1 >= 1 and copies block 1 from slab 1
 * (and block 0 from its own slab) into its recvbuf, syncs, released0 = 1;
 * rank 1 likewise. Block 1 of slab 1 was written by rank 1's kernel,
 * which had finished before reduced1 = 1, and is read by rank 0 only after
 * it saw that. The next chunk uses half 1; the one after, half 0 again,
 * which rank 1 no longer reads: it posted in half 1 only after it was
 * done with half 0.
 *
 * A registered buffer (ring_ctx_register: hvd's device fusion buffer) is
 * exported and opened the same way, once, and reduced where it lies: no
 * copy in, all of it posted at once (the caller's writes are done), each
 * rank reducing its block in place and gathering the others'. As the
 * caller may write its buffer as soon as the call returns, the call ends
 * once every rank has released it. It reads each byte of the input once
 * and writes each byte of the output once, plus the block it reduces:
 * what ranks sharing one GPU can do at best, bar that block.
 *
 * Across nodes (hierarchical), rank r's block is reduced over the node
 * segment by segment, then allreduced whole with the ranks of index r on
 * the other nodes (a staged context over ctx->cross), and only then
 * published as reduced: as shm.c's hierarchical stage does, so the result
 * is its own. An AVERAGE is summed in both stages and divided once.
 */
#include <stdlib.h>
#include "ring/ctl.h"
#include "ring/ring_internal.h"

/* The counters' window needs no slab to speak of. */
enum { RING__IPC_FLAGS_BYTES = 64 };

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
    ring_shm_t *flags;      /* the counters' window */
    ring__ctl_t **ctl;      /* every rank's counters */
    uint64_t nsegs;         /* segments run so far: the counters' base */
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
    ring_shm_free(&ipc->flags);
    free(ipc->ctl);
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
    RING_CHECK(ring_shm_create(ipc->comm, RING__IPC_FLAGS_BYTES, &ipc->flags));
    ipc->ctl = calloc((size_t)ipc->size, sizeof *ipc->ctl);
    for (int r = 0; ipc->ctl && r < ipc->size; r++)
        ipc->ctl[r] = ring__shm_ctl(ipc->flags, r);
    ok = ipc->ctl && ipc->size <= RING_DEV_MAX_INPUTS &&
         ring__ipc_open(ipc) == RING_OK;
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

/* One segment's place in a block of a chunk of n elements: its offset and
 * length in elements. */
static size_t ring__ipc_segment(const ring__ipc_t *ipc, size_t n, int block,
                                size_t seg, size_t s, size_t *len)
{
    size_t count = ring__block_count(n, ipc->size, block), from = s * seg;
    *len = count > from ? (count - from < seg ? count - from : seg) : 0;
    return ring__block_offset(n, ipc->size, block) + from;
}

/* Every rank's counter `which` at least target (this rank's own too). */
static void ring__ipc_wait_all(ring__ipc_t *ipc, size_t which,
                               uint64_t target)
{
    for (int r = 0; r < ipc->size; r++)
        ring__ctl_wait((_Atomic uint64_t *)((char *)ipc->ctl[r] + which),
                       target);
}

/* One call's state: bufs[r] where rank r's data lies (its half of the
 * slab, or its registered buffer), src this rank's input to copy in (NULL:
 * in its buffer already), dst where the result goes. */
typedef struct {
    ring__ipc_t *ipc;
    const ring__coll_t *c;
    char *bufs[RING_DEV_MAX_INPUTS];
    const char *src;
    char *dst;
    size_t n, seg, nseg;
    uint64_t base;
} ring__ipc_run_t;

static int ring__ipc_copy_in(ring__ipc_run_t *run, size_t s)
{
    int status = RING_OK;
    ring__ipc_t *ipc = run->ipc;
    size_t esize = run->c->esize, len;
    for (int b = 0; b < ipc->size; b++) {
        size_t at = ring__ipc_segment(ipc, run->n, b, run->seg, s, &len);
        if (len > 0)
            RING_CHECK(ipc->dev->copy(run->bufs[ipc->rank] + at * esize,
                                      run->src + at * esize, len * esize,
                                      ipc->stream));
    }
    RING_CHECK(ipc->dev->stream_sync(ipc->stream));
    ring__ctl_set(&ipc->ctl[ipc->rank]->posted, run->base + s + 1);
out:
    return status;
}

/* Segment s of this rank's block, over every rank's buffer in rank order
 * (across nodes: summed here, the whole block's average later). */
static int ring__ipc_reduce(ring__ipc_run_t *run, size_t s)
{
    int status = RING_OK;
    ring__ipc_t *ipc = run->ipc;
    const ring__coll_t *c = run->c;
    const void *inputs[RING_DEV_MAX_INPUTS];
    size_t len, at = ring__ipc_segment(ipc, run->n, ipc->rank, run->seg, s,
                                       &len) * c->esize;
    int average = c->op == RING_AVERAGE;
    ring_op_t op = ipc->across && average ? RING_SUM : c->op;
    ring__ipc_wait_all(ipc, offsetof(ring__ctl_t, posted), run->base + s + 1);
    for (int r = 0; r < ipc->size; r++) inputs[r] = run->bufs[r] + at;
    if (len > 0)
        RING_CHECK(ipc->dev->reduce_n(run->bufs[ipc->rank] + at, inputs,
                                      ipc->size, len, c->dtype, op,
                                      average && !ipc->across ? ipc->size
                                                              : 1,
                                      ipc->stream));
    RING_CHECK(ipc->dev->stream_sync(ipc->stream));
    if (!ipc->across)
        ring__ctl_set(&ipc->ctl[ipc->rank]->reduced, run->base + s + 1);
out:
    return status;
}

/* Across nodes: the node's sum of this rank's block, allreduced with the
 * ranks of its index on the other nodes, then published whole. */
static int ring__ipc_across(ring__ipc_run_t *run)
{
    int status = RING_OK;
    ring__ipc_t *ipc = run->ipc;
    const ring__coll_t *c = run->c;
    size_t len = ring__block_count(run->n, ipc->size, ipc->rank);
    char *own = run->bufs[ipc->rank] +
                ring__block_offset(run->n, ipc->size, ipc->rank) * c->esize;
    int average = c->op == RING_AVERAGE;
    RING_CHECK(ring_ctx_allreduce(ipc->across, own, own, len, c->dtype,
                                  average ? RING_SUM : c->op));
    if (average && len > 0) {
        RING_CHECK(ipc->dev->divide(own, len, c->dtype, ipc->nranks,
                                    ipc->stream));
        RING_CHECK(ipc->dev->stream_sync(ipc->stream));
    }
    ring__ctl_set(&ipc->ctl[ipc->rank]->reduced, run->base + run->nseg);
out:
    return status;
}

/* Segment s of every block, once its owner has reduced it, into dst (a
 * block already there is skipped); queued, not waited for. */
static int ring__ipc_gather(ring__ipc_run_t *run, size_t s)
{
    int status = RING_OK;
    ring__ipc_t *ipc = run->ipc;
    size_t esize = run->c->esize, len;
    for (int r = 0; r < ipc->size; r++) {
        size_t at = ring__ipc_segment(ipc, run->n, r, run->seg, s, &len);
        ring__ctl_wait(&ipc->ctl[r]->reduced, run->base + s + 1);
        char *from = run->bufs[r] + at * esize, *to = run->dst + at * esize;
        if (len > 0 && from != to)
            RING_CHECK(ipc->dev->copy(to, from, len * esize, ipc->stream));
    }
out:
    return status;
}

/* One chunk of n elements (see the top). */
static int ring__ipc_run(ring__ipc_run_t *run)
{
    int status = RING_OK;
    ring__ipc_t *ipc = run->ipc;
    uint64_t g = ipc->nchunks++;
    size_t largest = ring__block_count(run->n, ipc->size, 0);
    run->seg = run->c->tuning->shm_segment_bytes / run->c->esize;
    if (run->seg == 0) run->seg = 1;
    run->nseg = (largest + run->seg - 1) / run->seg;
    run->base = ipc->nsegs;
    ipc->nsegs += run->nseg;
    if (!run->src) /* registered: all of it is in */
        ring__ctl_set(&ipc->ctl[ipc->rank]->posted, run->base + run->nseg);
    for (size_t s = 0; s < run->nseg; s++) {
        if (run->src) RING_CHECK(ring__ipc_copy_in(run, s));
        RING_CHECK(ring__ipc_reduce(run, s));
        if (s > 0 && !ipc->across) RING_CHECK(ring__ipc_gather(run, s - 1));
    }
    if (ipc->across) RING_CHECK(ring__ipc_across(run));
    for (size_t s = ipc->across ? 0 : run->nseg - 1; s < run->nseg; s++)
        RING_CHECK(ring__ipc_gather(run, s));
    RING_CHECK(ipc->dev->stream_sync(ipc->stream));
    ring__ctl_set(&ipc->ctl[ipc->rank]->released, g + 1);
    /* A registered buffer is the caller's again once nobody reads it. */
    if (!run->src)
        ring__ipc_wait_all(ipc, offsetof(ring__ctl_t, released), g + 1);
out:
    return status;
}

int ring__ipc_allreduce(ring__ipc_t *ipc, const ring__coll_t *c,
                        const void *sendbuf, void *recvbuf)
{
    int status = RING_OK;
    size_t per_chunk = ipc->half_bytes / c->esize;
    for (size_t done = 0; done < c->count; done += per_chunk) {
        ring__ipc_run_t run = {
            .ipc = ipc, .c = c,
            .src = (const char *)sendbuf + done * c->esize,
            .dst = (char *)recvbuf + done * c->esize,
            .n = c->count - done < per_chunk ? c->count - done : per_chunk};
        size_t half = (ipc->nchunks & 1) * ipc->half_bytes;
        for (int r = 0; r < ipc->size; r++)
            run.bufs[r] = ipc->slabs[r] + half;
        RING_CHECK(ring__ipc_run(&run));
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
    ring__ipc_run_t run = {.ipc = ipc, .c = c, .dst = ipc->reg[ipc->rank],
                           .n = c->count};
    for (int r = 0; r < ipc->size; r++) run.bufs[r] = ipc->reg[r];
    return ring__ipc_run(&run);
}
