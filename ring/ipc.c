/* ring/ipc.c: allreduce of device buffers among the ranks of one node,
 * each rank reducing its block straight from the other ranks' device
 * memory: the device twin of ring/shm.c, over CUDA IPC.
 *
 * Each rank allocates a device slab once (the first device allreduce of a
 * context that has a shared window), exports it, and opens every other
 * rank's (cudaIpcOpenMemHandle; on the emulated device a memfd mapped from
 * /proc); likewise two interprocess events of its own, "posted" and
 * "reduced". That works for ranks on different GPUs with peer access and
 * for ranks sharing one GPU. Where it fails on any rank, every rank
 * stages instead (ring/staged.c), logged once.
 *
 * A call runs in chunks of half a slab (HVD_RING_IPC_BYTES / 2); chunk g
 * (counted since the slab was made) lives in half g % 2 and is cut into N
 * blocks as the ring cuts them, rank r owning block r. Each rank queues,
 * on its stream, without waiting for the device:
 *   turn g: the gather of chunk g - 1 (once each owner says it reduced
 *      its block, a wait for the owner's "reduced" event, then a copy
 *      from the owner's half into recvbuf), and chunk g of its input
 *      copied into its half; then records its "posted" event and
 *      publishes "posted g";
 *   reduce g: once every rank has published posted g, a wait for each
 *      one's event, then block r of chunk g reduced, every rank's half in
 *      rank order, in one kernel (reduce_n: the shared window's order and
 *      arithmetic, so the result is bitwise the host path's), into its own
 *      half, where nobody else reads block r; records its "reduced" event,
 *      publishes "reduced g";
 * and a last turn queues the gather of the last chunk, records its
 * "gathered" event and publishes "released"; then the host waits for its
 * stream, once a call, whatever its chunks (a registered call with a
 * done event: not at all, below): the ranks' streams wait for each other
 * on the device. On ranks that share a GPU each sync, and each wait of a
 * host on another rank's work, is a turn of every process on the GPU
 * (bench/README.md: with two syncs a chunk, a 1 MiB allreduce took about
 * 0.4 ms on an H100 whatever its size). Turn g writes the half that chunk
 * g - 2 used, and needs no wait for it: every rank recorded posted g - 1
 * behind its gather of g - 2, and this rank's stream waited for those
 * events before it reduced g - 1, ahead of turn g.
 *
 * A wait for an event waits for its last record before the wait was
 * queued (cudaStreamWaitEvent), and each rank records its events again
 * every chunk; a rank queues its wait for another's chunk g record
 * before that rank can record the next one: rank r records posted g + 1
 * only after it saw this rank's "reduced g", published after this rank
 * queued its waits for posted g; and records reduced g + 1 only after
 * this rank's "posted g + 1", published after its gather of g was queued.
 *
 * The ranks tell each other through ring/ctl.h's counters, in a small
 * shared window of their own (ring/shm.c's): posted, reduced, released,
 * counting chunks, each only ever growing. Ordering: a rank records its
 * event, then stores the counter with release order; a reader loads it
 * with acquire order, then queues its wait for the event, then the work
 * that reads that memory.
 *
 * Worked example, N = 2, one chunk, half 0, counters at 0. Rank 0 queues
 * its input's copy into half 0 of slab 0, records posted_ev0, posted0 =
 * 1; rank 1 the same into slab 1, posted1 = 1. Rank 0 sees posted1 >= 1,
 * queues a wait for posted_ev1 and the reduction of block 0 from slab 0
 * and slab 1 into slab 0, records reduced_ev0, reduced0 = 1. Rank 1
 * reduces block 1 into slab 1, reduced1 = 1. Rank 0 sees reduced1 >= 1,
 * queues a wait for reduced_ev1 and the copy of block 1 from slab 1 (and
 * block 0 from its own slab) into its recvbuf, records gathered_ev0,
 * released0 = 1, syncs; rank 1 likewise. Block 1 of slab 1 is written by
 * rank 1's kernel, which runs before reduced_ev1's record, and read by
 * rank 0's copy, which runs after it. The next chunk uses half 1; the one
 * after, half 0 again, which rank 1 no longer reads: rank 0's stream
 * waited, before it reduced chunk 1, for rank 1's posted_ev of chunk 1,
 * recorded behind rank 1's gather of chunk 0.
 *
 * A registered buffer (ring_ctx_register: hvd's device fusion buffer) is
 * exported and opened the same way, once, and reduced where it lies: no
 * copy in, all of it posted at once (behind the caller's ready), each
 * rank reducing its block in place and gathering the others' (one chunk,
 * however large). The buffer is the caller's again once every rank's
 * gather is through: after the last turn the stream waits for the
 * others' "gathered" events (each once its owner published released),
 * and then either records the caller's done event, so that the host
 * never waits for the device in the call, or the host waits for the
 * stream. It reads each byte of the input once and writes each byte of
 * the output once, plus the block it reduces: what ranks sharing one GPU
 * can do at best, bar that block. A wait for "gathered" g is queued
 * before its owner can record it again: that record comes at the end of
 * its next call, after this rank's "reduced" of that call, published
 * after these waits; and ring__ipc_register waits for the stream before
 * the buffers are closed.
 *
 * A registered call out of place (ring_ctx_allreduce_registered_to: hvd's
 * device groups) of up to HVD_RING_IPC_ONESHOT bytes, or of any size at
 * two ranks, takes one step: each rank posts its buffer (its event
 * behind the caller's ready), waits for every rank's posted, reduces all
 * of it from every rank's buffer in rank order in one kernel, into the
 * caller's recvbuf (bitwise the two steps' result, whose blocks are each
 * reduced in the same order), and records done behind it; then its
 * "gathered" event, published as released; then, after every other
 * rank's gathered, freed. So the ranks wait for each other once a call
 * instead of three times (on ranks sharing a GPU each such wait may be a
 * turn of every process on it), and the caller's next write to its
 * buffer waits for the others' reads, not its read of the result. Each
 * rank reads N buffers where the two steps read about two: at two ranks
 * no more, and the same from the other rank's memory. The events are
 * safe to record again as in the two steps: a rank records posted and
 * gathered again only in its next call, after its host saw every other
 * rank's released of this one, published after that rank queued its
 * waits for this call's events. Out of place in two steps (larger
 * calls), done is recorded behind this rank's gather, freed where done
 * would be in place.
 *
 * Across nodes (hierarchical), rank r's block of a chunk is reduced over
 * the node, then allreduced with the ranks of index r on the other nodes
 * (a staged context over ctx->cross, after a sync: MPI reads the block
 * from the host's side), and only then published as reduced:
 * as shm.c's hierarchical stage does, so the result is its own. An
 * AVERAGE is summed in both stages and divided once.
 *
 * A rank whose call fails midway (a refused launch or wait, a sticky
 * error from its stream), or that fails before its call and says so
 * (ring_ctx_give_up: hvd's pack of the fusion buffer; ring itself when a
 * call is refused at its opening for memory whose kind the rank's device
 * cannot tell, a broken CUDA context; a call refused so, or for any
 * reason, that would have made the window comes to its making instead,
 * where nothing is then made), sets its "failed" counter: the
 * others' waits for its counters, which would never come, end with
 * RING_ERR_STATE, naming it, and every later call through the window
 * fails at once on every rank, as the counters no longer agree.
 * A failed call waits for its own stream before it returns, so that the
 * caller's buffers are the caller's again. That holds within the node:
 * the ranks of other nodes (hierarchical) meet it in MPI, where a rank
 * that gave up leaves them waiting as in any host call. On the device
 * nothing waits forever for it: a wait for an event it did not record
 * again is a wait for its last record, already through; unless its
 * context is broken and its queued work never ends, which the others'
 * streams cannot tell: they wait for it forever, and so does their host
 * at its next wait for them (as for a peer's broken context under NCCL).
 * A registered call with a done event returns before its work is
 * through, so such a rank sees its own failure only at its next call or
 * wait, not in this one.
 */
#include <stdlib.h>
#include "ring/ctl.h"
#include "ring/ring_internal.h"

/* The counters' window needs no slab to speak of. */
enum { RING__IPC_FLAGS_BYTES = 64 };

/* Each rank's interprocess events, one per counter it publishes
 * ("gathered" goes with "released"). */
enum { RING__IPC_POSTED, RING__IPC_REDUCED, RING__IPC_GATHERED,
       RING__IPC_NEVENTS };

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
    int saw_failed;         /* another rank gave up (logged) */
    /* every rank's interprocess events, recorded with the counter of
     * their name: ev[RING__IPC_POSTED][r]... */
    ring_event_t **ev[RING__IPC_NEVENTS];
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
    /* Our stream's work done (a call that failed midway may have left
     * some queued), and nobody else's still reading a slab we close or
     * free. */
    if (ipc->stream) (void)ipc->dev->stream_sync(ipc->stream);
    if (ipc->comm != MPI_COMM_NULL) MPI_Barrier(ipc->comm);
    ring__ipc_unregister(ipc);
    /* The others' slabs and events closed first, on every rank, then our
     * own freed: CUDA leaves undefined an exported allocation freed, or
     * an exported event destroyed, while another process still has it
     * open (cudaIpcCloseMemHandle's and cudaIpcOpenEventHandle's notes). */
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < ipc->size; r++) {
            if ((r == ipc->rank) != pass) continue;
            for (int e = 0; e < RING__IPC_NEVENTS; e++)
                if (ipc->ev[e]) ipc->dev->event_destroy(ipc->ev[e][r]);
            if (!ipc->slabs || !ipc->slabs[r]) continue;
            if (pass)
                ipc->dev->release(ipc->slabs[r]);
            else
                ipc->dev->ipc_close(ipc->slabs[r]);
        }
        if (!pass && ipc->comm != MPI_COMM_NULL) MPI_Barrier(ipc->comm);
    }
    for (int e = 0; e < RING__IPC_NEVENTS; e++) free(ipc->ev[e]);
    if (ipc->stream) ipc->dev->stream_destroy(ipc->stream);
    ring_ctx_free(&ipc->across);
    ring_shm_free(&ipc->flags);
    free(ipc->ctl);
    if (ipc->comm != MPI_COMM_NULL) MPI_Comm_free(&ipc->comm);
    free(ipc->slabs);
    free(ipc);
    *ipcp = NULL;
}

/* Whether h is no handle: all zeros, what a rank that could not export
 * or make its event sends (its own log says why), which the others do
 * not try to open (CUDA leaves opening one undefined). */
static int ring__ipc_none(const ring_ipc_handle_t *h)
{
    for (size_t i = 0; i < sizeof h->bytes; i++)
        if (h->bytes[i]) return 0;
    return 1;
}

/* Collective: every rank's `mine` (device memory, the start of an
 * allocation; NULL when this rank already failed, with status saying
 * why) into maps[r], opened here; maps[rank] = mine. RING_OK, or this
 * rank's first failure (logged; RING_ERR_STATE, unlogged, for another
 * rank's missing handle): then the caller drops the exchange on every
 * rank. */
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
            status = ring__ipc_none(&all[r])
                         ? RING_ERR_STATE
                         : ipc->dev->ipc_open(&all[r], (void **)&maps[r]);
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

/* Collective: this rank's interprocess events made, their handles
 * exchanged, and the others' opened (status: this rank's failure so far,
 * which it still takes part with). RING_OK, or this rank's first
 * failure (logged; RING_ERR_STATE, unlogged, for another rank's missing
 * handle). */
static int ring__ipc_events(ring__ipc_t *ipc, int status)
{
    enum { NEV = RING__IPC_NEVENTS };
    ring_ipc_handle_t own[NEV] = {{{0}}};
    ring_ipc_handle_t *all = calloc(NEV * (size_t)ipc->size, sizeof *all);
    int mine = ipc->rank;
    if (status == RING_OK && !all) status = RING_ERR_NOMEM;
    for (int e = 0; e < NEV; e++) {
        ipc->ev[e] = calloc((size_t)ipc->size, sizeof *ipc->ev[e]);
        if (status == RING_OK && !ipc->ev[e]) status = RING_ERR_NOMEM;
        if (status == RING_OK)
            status = ipc->dev->ipc_event_create(&ipc->ev[e][mine], &own[e]);
    }
    /* The others wait for our handles whatever happened here. */
    if (MPI_Allgather(own, sizeof own, MPI_BYTE,
                      all ? (void *)all : (void *)own, all ? sizeof own : 0,
                      MPI_BYTE, ipc->comm) != MPI_SUCCESS)
        status = RING_ERR_MPI;
    for (int r = 0; status == RING_OK && r < ipc->size; r++)
        for (int e = 0; status == RING_OK && e < NEV && r != mine; e++)
            status = ring__ipc_none(&all[NEV * r + e])
                         ? RING_ERR_STATE
                         : ipc->dev->ipc_event_open(&all[NEV * r + e],
                                                    &ipc->ev[e][r]);
    free(all);
    return status;
}

/* This rank's part of making the window: its slab and its events,
 * exported, and the others' opened. RING_OK, or the first failure
 * (logged). */
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
    return ring__ipc_events(ipc, status);
}

int ring__ipc_create(ring_ctx_t *ctx, const ring_dev_t *dev,
                     size_t half_bytes, int refused, ring__ipc_t **out)
{
    int status = RING_OK, ok, all_ok, rank;
    int hier = ctx->cross != MPI_COMM_NULL;
    ring__ipc_t *ipc = calloc(1, sizeof *ipc);
    /* Every rank takes part, one without a device too (nodes of mixed
     * ranks), or without memory for the window's state, or one that
     * refused the call that makes it (the last of those, 1-based); nothing
     * is made unless every rank has both and none refused, and nothing is
     * said where no rank has a device. */
    int mine[4] = {dev != NULL, dev == NULL, ipc == NULL}, any[4];
    *out = NULL;
    if (ipc) ipc->comm = MPI_COMM_NULL;
    RING_CHECK_MPI(MPI_Comm_rank(ctx->comm, &rank));
    mine[3] = refused ? rank + 1 : 0;
    RING_CHECK_MPI(MPI_Allreduce(mine, any, 4, MPI_INT, MPI_MAX, ctx->comm));
    if (any[3]) {
        /* The others would wait for the refused rank in the call this
         * window was made for. The next call tries again. */
        ctx->ipc_tried = 0;
        if (!refused)
            ring__log("a device allreduce through the node's IPC window: "
                      "rank %d refused the call that opens the window (its "
                      "log says why); this call fails, and the next tries "
                      "again",
                      any[3] - 1);
        status = RING_ERR_STATE;
        goto out;
    }
    if (!any[0] || any[1] || any[2]) {
        if (!ipc) status = RING_ERR_NOMEM;
        if (any[0] && any[1] && rank == 0)
            ring__log("info: device allreduces stage through host memory: "
                      "a rank has no device");
        goto out;
    }
    ipc->dev = dev;
    ipc->half_bytes = half_bytes;
    RING_CHECK_MPI(MPI_Comm_dup(hier ? ctx->node : ctx->comm, &ipc->comm));
    RING_CHECK_MPI(MPI_Comm_rank(ipc->comm, &ipc->rank));
    RING_CHECK_MPI(MPI_Comm_size(ipc->comm, &ipc->size));
    RING_CHECK_MPI(MPI_Comm_size(ctx->comm, &ipc->nranks));
    /* No room for it in the node's shared memory (ring/shm_room.c, on
     * every rank of the node alike): no window, decided below with the
     * other nodes. */
    status = ring_shm_create(ipc->comm, RING__IPC_FLAGS_BYTES, &ipc->flags);
    if (status != RING_OK && status != RING_ERR_NOMEM) goto out;
    status = RING_OK;
    if (ipc->flags) ipc->ctl = calloc((size_t)ipc->size, sizeof *ipc->ctl);
    for (int r = 0; ipc->ctl && r < ipc->size; r++)
        ipc->ctl[r] = ring__shm_ctl(ipc->flags, r);
    /* The open is collective on the node: every rank takes part, or
     * none does where one cannot. */
    RING_CHECK(ring__ipc_all(
        ipc, ipc->ctl && ipc->size <= RING_DEV_MAX_INPUTS, &ok));
    ok = ok && ring__ipc_open(ipc) == RING_OK;
    /* Every rank of every node takes the window or none does: a rank
     * alone on it would wait for the others at its first barrier, and
     * nodes that went different ways would cut different messages. */
    RING_CHECK_MPI(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN,
                                 ctx->comm));
    if (!all_ok) {
        if (rank == 0)
            ring__log("info: device allreduces within the node stage "
                      "through host memory: %s IPC could not open every "
                      "rank's device memory and events, or a node's "
                      "shared memory had no room for their counters",
                      dev->name);
        goto out;
    }
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
                 const ring__tuning_t *tuning, int refused,
                 ring__ipc_t **out)
{
    *out = NULL;
    if (!ctx->ipc_tried) {
        size_t half = tuning->ipc_bytes / 2 / 256 * 256;
        ctx->ipc_tried = 1;
        int status = ring__ipc_create(ctx, dev, half ? half : 256, refused,
                                      &ctx->ipc);
        if (status != RING_OK) return status;
    }
    *out = ctx->ipc;
    return RING_OK;
}

/* RING_ERR_STATE when a rank of the node gave up a call (its
 * failed counter: 1 for its own failure, 2 for one it saw elsewhere),
 * said once, naming the first rank that failed by itself; every later
 * call fails too, as the ranks' counters no longer agree. Else RING_OK. */
static int ring__ipc_check_failed(ring__ipc_t *ipc)
{
    int who = -1;
    for (int r = 0; r < ipc->size; r++) {
        uint64_t f =
            atomic_load_explicit(&ipc->ctl[r]->failed, memory_order_relaxed);
        if (f && (who < 0 || f == 1)) who = r;
        if (f == 1) break;
    }
    if (who < 0) return RING_OK;
    if (!ipc->saw_failed)
        ring__log("a device allreduce through the node's IPC window: rank "
                  "%d of the node gave up a call (its log says why); this "
                  "call fails, and so will every later one through the "
                  "window",
                  who);
    ipc->saw_failed = 1;
    return RING_ERR_STATE;
}

/* Until rank r's counter `which` is at least target; RING_ERR_STATE
 * instead when a rank gives up, which would never set it. */
static int ring__ipc_wait(ring__ipc_t *ipc, int r, size_t which,
                          uint64_t target)
{
    _Atomic uint64_t *counter =
        (_Atomic uint64_t *)((char *)ipc->ctl[r] + which);
    if (ring__ctl_wait_unless_failed(counter, target, ipc->ctl, ipc->size) ==
        RING_OK)
        return RING_OK;
    return ring__ipc_check_failed(ipc);
}

/* A call that failed: the others told (they would wait for this rank's
 * counters forever), and this rank's work queued so far through, so that
 * the caller's buffers are the caller's when it returns (a wait queued
 * for a rank that gave up waits for its last record, already through).
 * Returns status. */
static int ring__ipc_failed(ring__ipc_t *ipc, int status)
{
    ring__ipc_give_up(ipc);
    (void)ipc->dev->stream_sync(ipc->stream);
    return status;
}

/* One chunk: bufs[r] where rank r's data lies (its half of the slab, or
 * its registered buffer), src this rank's input to copy in (NULL: in its
 * buffer already), dst where the result goes, n elements, g its number
 * since the slab was made (its counters read g + 1 once it is through a
 * stage). */
typedef struct {
    const ring__coll_t *c;
    char *bufs[RING_DEV_MAX_INPUTS];
    const char *src;
    char *dst;
    size_t n;
    uint64_t g;
} ring__ipc_chunk_t;

/* Block r of chunk k: its place in bytes, and its length. */
static size_t ring__ipc_block(const ring__ipc_t *ipc,
                              const ring__ipc_chunk_t *k, int r, size_t *len)
{
    *len = ring__block_count(k->n, ipc->size, r) * k->c->esize;
    return ring__block_offset(k->n, ipc->size, r) * k->c->esize;
}

/* This rank's stream after ev, another rank's record: a wait queued on
 * the stream, or under HVD_RING_IPC_WAIT=host one on the host first, so
 * that no stream of ours waits on the device for another process's work
 * (ranks that share a GPU take turns on it: whether a stream held at such
 * a wait holds the GPU until its time slice ends is what the setting is
 * there to measure). Either waits for the record before it. */
static int ring__ipc_after(ring__ipc_t *ipc, const ring__coll_t *c,
                           ring_event_t *ev)
{
    return c->tuning->ipc_host_wait ? ipc->dev->event_sync(ev)
                                    : ipc->dev->stream_wait(ipc->stream, ev);
}

/* Every block of done, once its owner has reduced it, into done's dst (a
 * block already there is skipped): queued behind the owner's event, not
 * waited for. */
static int ring__ipc_gather(ring__ipc_t *ipc, const ring__ipc_chunk_t *done)
{
    int status = RING_OK;
    for (int r = 0; r < ipc->size; r++) {
        size_t len, at = ring__ipc_block(ipc, done, r, &len);
        RING_CHECK(ring__ipc_wait(ipc, r, offsetof(ring__ctl_t, reduced),
                                  done->g + 1));
        if (len == 0 || done->bufs[r] + at == done->dst + at) continue;
        if (r != ipc->rank)
            RING_CHECK(ring__ipc_after(ipc, done->c,
                                       ipc->ev[RING__IPC_REDUCED][r]));
        RING_CHECK(ipc->dev->copy(done->dst + at, done->bufs[r] + at, len,
                                  ipc->stream));
    }
out:
    return status;
}

/* Released after k: this rank reads no other rank's buffer of k once the
 * work queued so far is through (its "gathered" event recorded behind
 * it). */
static int ring__ipc_release(ring__ipc_t *ipc, const ring__ipc_chunk_t *k)
{
    int status = RING_OK, mine = ipc->rank;
    RING_CHECK(ipc->dev->event_record(ipc->ev[RING__IPC_GATHERED][mine],
                                      ipc->stream));
    ring__ctl_set(&ipc->ctl[mine]->released, k->g + 1);
out:
    return status;
}

/* A turn between two chunks: done's gather (NULL: none before) and next's
 * copy in, posted (its event recorded behind it); or, after the last
 * chunk (next NULL), done's gather, released: queued, not waited for. */
static int ring__ipc_turn(ring__ipc_t *ipc, const ring__ipc_chunk_t *done,
                          const ring__ipc_chunk_t *next)
{
    int status = RING_OK, mine = ipc->rank;
    if (done) RING_CHECK(ring__ipc_gather(ipc, done));
    if (!next) return ring__ipc_release(ipc, done);
    if (next->src && next->n > 0)
        RING_CHECK(ipc->dev->copy(next->bufs[mine], next->src,
                                  next->n * next->c->esize, ipc->stream));
    RING_CHECK(ipc->dev->event_record(ipc->ev[RING__IPC_POSTED][mine],
                                      ipc->stream));
    ring__ctl_set(&ipc->ctl[mine]->posted, next->g + 1);
out:
    return status;
}

/* Across nodes: the node's sum of this rank's block, allreduced with the
 * ranks of its index on the other nodes (the average divided once). */
static int ring__ipc_across(ring__ipc_t *ipc, const ring__ipc_chunk_t *k)
{
    int status = RING_OK;
    const ring__coll_t *c = k->c;
    size_t len, at = ring__ipc_block(ipc, k, ipc->rank, &len);
    char *own = k->bufs[ipc->rank] + at;
    int average = c->op == RING_AVERAGE;
    RING_CHECK(ring_ctx_allreduce(ipc->across, own, own, len / c->esize,
                                  c->dtype, average ? RING_SUM : c->op));
    if (average && len > 0) {
        RING_CHECK(ipc->dev->divide(own, len / c->esize, c->dtype,
                                    ipc->nranks, ipc->stream));
        RING_CHECK(ipc->dev->stream_sync(ipc->stream));
    }
out:
    return status;
}

/* Once every rank has posted k: the host waits for each one's counter,
 * this rank's stream for its event; inputs[r] is rank r's data of k from
 * byte at. */
static int ring__ipc_posted(ring__ipc_t *ipc, const ring__ipc_chunk_t *k,
                            size_t at, const void **inputs)
{
    int status = RING_OK;
    for (int r = 0; r < ipc->size; r++) {
        inputs[r] = k->bufs[r] + at;
        RING_CHECK(ring__ipc_wait(ipc, r, offsetof(ring__ctl_t, posted),
                                  k->g + 1));
        /* Even with no block read here: this wait is what orders the next
         * copy into the half after r's reads of it (see the top). */
        if (r != ipc->rank)
            RING_CHECK(
                ring__ipc_after(ipc, k->c, ipc->ev[RING__IPC_POSTED][r]));
    }
out:
    return status;
}

/* This rank's block of k, once every rank has posted k (queued behind
 * their events): every rank's buffer in rank order, in one kernel, into
 * its own; then published as reduced (its event recorded behind it). */
static int ring__ipc_reduce(ring__ipc_t *ipc, const ring__ipc_chunk_t *k)
{
    int status = RING_OK;
    const ring__coll_t *c = k->c;
    const void *inputs[RING_DEV_MAX_INPUTS];
    size_t len, at = ring__ipc_block(ipc, k, ipc->rank, &len);
    int average = c->op == RING_AVERAGE;
    ring_op_t op = ipc->across && average ? RING_SUM : c->op;
    RING_CHECK(ring__ipc_posted(ipc, k, at, inputs));
    if (len > 0)
        RING_CHECK(ipc->dev->reduce_n(k->bufs[ipc->rank] + at, inputs,
                                      ipc->size, len / c->esize, c->dtype,
                                      op,
                                      average && !ipc->across ? ipc->size
                                                              : 1,
                                      ipc->stream));
    if (ipc->across) { /* MPI reads the block from the host's side */
        RING_CHECK(ipc->dev->stream_sync(ipc->stream));
        RING_CHECK(ring__ipc_across(ipc, k));
    }
    RING_CHECK(ipc->dev->event_record(ipc->ev[RING__IPC_REDUCED][ipc->rank],
                                      ipc->stream));
    ring__ctl_set(&ipc->ctl[ipc->rank]->reduced, k->g + 1);
out:
    return status;
}

/* After a call's last turn: the result is in dst, and the caller's
 * buffers are its own again, once this rank's stream is through, and for
 * registered buffers (reg) once every rank's gather is: there a
 * registered call's done is recorded (c->done; the call may also have
 * gone through the slabs), or the host waits for it. */
static int ring__ipc_end(ring__ipc_t *ipc, const ring__coll_t *c, int reg)
{
    int status = RING_OK;
    /* Out of place, the result is there now; the buffer is freed below. */
    if (c->freed) RING_CHECK(ipc->dev->event_record(c->done, ipc->stream));
    for (int r = 0; reg && r < ipc->size; r++) {
        if (r == ipc->rank) continue;
        RING_CHECK(ring__ipc_wait(ipc, r, offsetof(ring__ctl_t, released),
                                  ipc->nchunks));
        RING_CHECK(ring__ipc_after(ipc, c, ipc->ev[RING__IPC_GATHERED][r]));
    }
    if (c->freed || c->done)
        RING_CHECK(ipc->dev->event_record(c->freed ? c->freed : c->done,
                                          ipc->stream));
    else
        RING_CHECK(ipc->dev->stream_sync(ipc->stream));
out:
    return status;
}

/* One step (a registered call out of place, see the top): once every rank
 * has posted its buffer, all of it reduced from every rank's, in rank
 * order, in one kernel, into dst; then released (its "gathered" event
 * recorded behind the kernel, the last read of the others' buffers), and
 * ended as a two-step call is. */
static int ring__ipc_oneshot(ring__ipc_t *ipc, const ring__coll_t *c,
                             char *dst)
{
    int status = ring__ipc_check_failed(ipc);
    const void *inputs[RING_DEV_MAX_INPUTS];
    if (status != RING_OK) return status;
    ring__ipc_chunk_t k = {.c = c, .dst = dst, .n = c->count,
                           .g = ipc->nchunks++};
    for (int r = 0; r < ipc->size; r++) k.bufs[r] = ipc->reg[r];
    if (c->ready) RING_CHECK(ipc->dev->stream_wait(ipc->stream, c->ready));
    RING_CHECK(ring__ipc_turn(ipc, NULL, &k)); /* posted, nothing to copy */
    RING_CHECK(ring__ipc_posted(ipc, &k, 0, inputs));
    RING_CHECK(ipc->dev->reduce_n(dst, inputs, ipc->size, c->count, c->dtype,
                                  c->op,
                                  c->op == RING_AVERAGE ? ipc->size : 1,
                                  ipc->stream));
    RING_CHECK(ring__ipc_release(ipc, &k));
    RING_CHECK(ring__ipc_end(ipc, c, 1));
out:
    return status == RING_OK ? status : ring__ipc_failed(ipc, status);
}

/* The call c in chunks of at most per_chunk elements (see the top):
 * bufs(k) points k's bufs at its half of the slabs, or at the registered
 * buffers when src is NULL. */
static int ring__ipc_chunks(ring__ipc_t *ipc, const ring__coll_t *c,
                            const char *src, char *dst, size_t per_chunk)
{
    int status = ring__ipc_check_failed(ipc);
    ring__ipc_chunk_t k[2], *last = NULL;
    if (status != RING_OK) return status;
    /* Ahead of the first copy in and the first "posted": nobody reads the
     * caller's buffer before its writes are done. */
    if (c->ready) RING_CHECK(ipc->dev->stream_wait(ipc->stream, c->ready));
    for (size_t done = 0; done < c->count; done += per_chunk) {
        ring__ipc_chunk_t *now = &k[ipc->nchunks & 1]; /* not last */
        *now = (ring__ipc_chunk_t){
            .c = c, .src = src ? src + done * c->esize : NULL,
            .dst = dst + done * c->esize, .g = ipc->nchunks++,
            .n = c->count - done < per_chunk ? c->count - done : per_chunk};
        for (int r = 0; r < ipc->size; r++)
            now->bufs[r] = !src ? ipc->reg[r]
                                : ipc->slabs[r] + (now->g & 1) * ipc->half_bytes;
        RING_CHECK(ring__ipc_turn(ipc, last, now));
        RING_CHECK(ring__ipc_reduce(ipc, now));
        last = now;
    }
    if (last) {
        RING_CHECK(ring__ipc_turn(ipc, last, NULL));
        RING_CHECK(ring__ipc_end(ipc, c, !src));
    }
out:
    return status == RING_OK ? status : ring__ipc_failed(ipc, status);
}

void ring__ipc_give_up(ring__ipc_t *ipc)
{
    ring__ctl_set(&ipc->ctl[ipc->rank]->failed, ipc->saw_failed ? 2 : 1);
}

int ring__ipc_allreduce(ring__ipc_t *ipc, const ring__coll_t *c,
                        const void *sendbuf, void *recvbuf)
{
    return ring__ipc_chunks(ipc, c, sendbuf, recvbuf,
                            ipc->half_bytes / c->esize);
}

int ring__ipc_register(ring__ipc_t *ipc, void *buf, size_t nbytes)
{
    int status, ok, all_ok;
    /* Nobody may still read the buffers we close: this rank's reads of
     * them through (a call with done returns before), then everyone's. A
     * rank that cannot tell registers nothing, and neither does anyone. */
    status = ipc->dev->stream_sync(ipc->stream);
    unsigned long long least, mine = buf && status == RING_OK ? nbytes : 0;
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

int ring__ipc_allreduce_registered(ring__ipc_t *ipc, const ring__coll_t *c,
                                   void *dst)
{
    size_t nbytes = c->count * c->esize;
    if (dst != ipc->reg[ipc->rank] && !ipc->across &&
        (ipc->size == 2 || nbytes <= c->tuning->ipc_oneshot_bytes) &&
        c->tuning->ipc_oneshot_bytes > 0)
        return ring__ipc_oneshot(ipc, c, dst);
    return ring__ipc_chunks(ipc, c, NULL, dst, c->count);
}
