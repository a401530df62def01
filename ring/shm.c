/* ring/shm.c: allreduce among the ranks of one node, each rank reducing its
 * block straight from the other ranks' memory.
 *
 * The ring's large-message speed on one node is bounded by copying every
 * block through MPI before reducing it. Here the ranks share one MPI-3
 * window (MPI_Win_allocate_shared): each rank owns a slab in it, and a rank
 * reads the others' slabs with plain loads. Data packed into the slab
 * (ring_shm_slab) needs no copy at all; data elsewhere is copied in, all but
 * the caller's own block, which is read where it lies.
 *
 * One chunk (at most a slab) of count elements, cut into N blocks as the
 * ring cuts them; rank r owns block r. Blocks are cut into segments, and for
 * each segment s in turn, rank r
 *   1. copies segment s of every block but its own into its slab ("posts");
 *   2. waits until every rank has posted segment s, then reduces segment s
 *      of block r: every rank's data in rank order, read in one pass, into
 *      its slab (and its recvbuf); half types are rounded once;
 *   3. copies segment s-1 of every other block, once its owner has reduced
 *      it, from the owner's slab into recvbuf.
 * Each block is reduced once, by its owner, and then only copied: every rank
 * ends bitwise identical. Ranks run the steps side by side, so segment s is
 * copied in, reduced and gathered while it is still in cache.
 *
 * Synchronisation: three counters per rank, each in its own cache line,
 * counting since the window was made (so they are never reset):
 *   posted    segments whose inputs are in the slab,
 *   reduced   segments of the own block reduced,
 *   released  chunks after which this rank reads no other slab.
 * A writer fills memory, then stores the counter with release order; a
 * reader loads it with acquire order and only then reads the memory. The
 * counters are C11 atomics, lock-free on every platform we build for; no
 * MPI RMA call touches the window, so MPI_Win_sync is not needed (the
 * window is only the allocation).
 *
 * Worked example, N = 2, one chunk of 2 segments per block, counters at 0.
 * Rank 0 copies seg 0 of block 1 into slab 0 and sets posted0 = 1; rank 1
 * does the same for block 0, posted1 = 1. Rank 0 waits for posted1 >= 1,
 * then reads block 0 seg 0 from its sendbuf and from slab 1, writes the sum
 * to slab 0 and recvbuf, reduced0 = 1. Segment 1 goes the same way, and then
 * rank 0, seeing reduced1 >= 1, copies block 1 seg 0 from slab 1 into its
 * recvbuf; likewise seg 1 at reduced1 >= 2. Rank 0 sets released0 = 1. A
 * later call must not overwrite slab 0 while rank 1 may still read it, so it
 * first waits for released1 >= 1 (and rank 1 for released0). Rank 1 reads
 * block 0 of slab 0 only after posted0 says it is there, and copies it out
 * only after reduced0 says it is final; in between nobody writes it.
 *
 * A waiting rank spins briefly, then yields the core: with more ranks than
 * cores the rank it waits for may need that core.
 *
 * What a rank writes for the others (posted segments, its reduced block)
 * goes either through the cache or around it, with non-temporal stores
 * (ring__shm_stream). Through the cache the readers take the lines from
 * the writer's cache, but each write first takes them back from theirs.
 * Which costs less depends on where the two PUs sit, and on this VM that
 * changed every few seconds: a 2-rank sharded optimizer step took 108 us
 * cached and 170-230 streamed with the PUs close, 500 cached and 216
 * streamed with them far apart (bench/README.md). So by default
 * (HVD_SHM_STREAM=auto) each call of at least RING__SHM_LEARN_MIN_BYTES
 * takes the way that has cost less per byte, and every
 * RING__SHM_EXPLORE-th such call the other one, to notice a change. A
 * way's cost is the least time per byte of its last RING__SHM_RECENT
 * calls: the whole call, since what streaming saves the writer it may cost
 * the readers, but the least, since a call also waits for the last rank
 * to come. Every rank counts the same calls, so the ranks try the other
 * way together.
 *
 * Across nodes (ring_shm_allreduce_hier) the same window is the node's
 * stage of the hierarchical allreduce: each rank reduces every segment of
 * its block over the node, allreduces the whole block with its peers on
 * the other nodes (ring_allreduce over `cross`), and only then publishes
 * it (reduced = all segments) for the node's gather. An AVERAGE is summed
 * in both stages and divided once by the number of all ranks.
 *
 * ring_shm_allreduce_apply hands each reduced tile of the own block to the
 * caller's function before it is copied out and published, so what every
 * rank receives there is what the owner made of it. A sharded optimizer
 * step (ZeRO stage 1) is one such call: gradients in, each rank updating
 * only the parameters of its block, new parameters out.
 */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ring/ctl.h"
#include "ring/ring_internal.h"

/* A rank's part of the window: its counters on the first page, the slab
 * page-aligned after them. MPI only promises a base aligned for any basic
 * type (Open MPI's osc/sm puts a header at the start of the segment, and
 * the base lands at page + 0x108), so each part is one page longer and
 * starts at the first page boundary in it. The segment is mapped at a
 * page boundary in every process, so every process finds the same one. */
enum { RING__SHM_PAGE = 4096 };

/* A rank reduces its segment this many bytes at a time into a scratch
 * tile, which stays in L1 while apply runs on it and it is copied out to
 * the slab and the caller's buffer (ring__shm_reduce). */
enum { RING__SHM_TILE_BYTES = 8192 };

/* A tile of zeros: the own input of a piece without sendbuf. */
static const char ring__shm_zeros[RING__SHM_TILE_BYTES];

static char *ring__shm_page_up(char *p)
{
    uintptr_t off = (uintptr_t)p % RING__SHM_PAGE;
    return off ? p + (RING__SHM_PAGE - off) : p;
}

enum {
    RING__SHM_LEARN_MIN_BYTES = 64 << 10,
    RING__SHM_EXPLORE = 32,
    RING__SHM_RECENT = 8,
};

/* Copies into the slab with non-temporal stores (see the top): 470 KB
 * that the reader last held took 17 us this way, 50 us or 210 us through
 * the cache (bench/README.md). Ordered before the counter that
 * publishes them by ring__shm_publish_fence. */
static void ring__shm_stream(char *dst, const char *src, size_t bytes)
{
#if defined(__SSE2__)
    size_t head = (16 - (uintptr_t)dst % 16) % 16;
    if (head > bytes) head = bytes;
    memcpy(dst, src, head);
    size_t i = head;
    for (; i + 16 <= bytes; i += 16)
        _mm_stream_si128((__m128i *)(dst + i),
                         _mm_loadu_si128((const __m128i *)(src + i)));
    memcpy(dst + i, src + i, bytes - i);
#else
    memcpy(dst, src, bytes);
#endif
}

struct ring_shm {
    MPI_Comm comm; /* our duplicate */
    MPI_Win win;
    int rank, size;
    size_t slab_bytes;
    ring__ctl_t **ctl; /* every rank's counters */
    char **slab;           /* every rank's slab */
    const void **inputs;   /* scratch: one segment of every rank */
    char *tile;            /* scratch: RING__SHM_TILE_BYTES reduced */
    /* Seconds per byte of the last RING__SHM_RECENT calls that learned,
     * cached [0] and streamed [1]; 0: not yet run. */
    double recent[2][RING__SHM_RECENT];
    uint64_t nrecent[2];
    uint64_t nlearning;    /* calls of RING__SHM_LEARN_MIN_BYTES or more */
    uint64_t nsegs;        /* segments run so far: the counters' base */
    uint64_t nchunks;      /* chunks run so far */
};

uint64_t ring__shm_need(int nranks, size_t slab_bytes)
{
    /* Each rank's part (below) rounded up to the system's page by MPI's
     * noncontiguous layout, a page and 64 KiB for MPI's headers, and
     * Open MPI 4.1's own margin: it wants 5% more free than it asks
     * (osc/sm through shmem/mmap's enough_space). UINT64_MAX past what a
     * window could be. */
    long sys = sysconf(_SC_PAGESIZE);
    uint64_t page = sys > RING__SHM_PAGE ? (uint64_t)sys : RING__SHM_PAGE;
    if (nranks < 1 || slab_bytes > UINT64_MAX / 4 / (uint64_t)nranks)
        return UINT64_MAX;
    uint64_t part = ((uint64_t)slab_bytes + 2 * RING__SHM_PAGE + page - 1) /
                    page * page;
    uint64_t base = (uint64_t)nranks * part + page + (64u << 10);
    return base + base / 16;
}

int ring_shm_create(MPI_Comm comm, size_t slab_bytes, ring_shm_t **out)
{
    int status = RING_OK, local_size;
    MPI_Comm local = MPI_COMM_NULL;
    MPI_Info info = MPI_INFO_NULL;
    ring_shm_t *shm = NULL;
    RING_CHECK(ring__check_mpi_up("ring_shm_create"));
    if (!out || comm == MPI_COMM_NULL || slab_bytes == 0) {
        ring__log("ring_shm_create: %s", !out ? "out is NULL"
                                         : slab_bytes == 0 ? "slab_bytes is 0"
                                                           : "comm is NULL");
        return RING_ERR_ARG;
    }
    *out = NULL;
    shm = calloc(1, sizeof *shm);
    if (!shm) return RING_ERR_NOMEM;
    shm->comm = MPI_COMM_NULL;
    shm->win = MPI_WIN_NULL;
    RING_CHECK_MPI(MPI_Comm_dup(comm, &shm->comm));
    RING_CHECK_MPI(MPI_Comm_rank(shm->comm, &shm->rank));
    RING_CHECK_MPI(MPI_Comm_size(shm->comm, &shm->size));
    /* One rank whose node holds all of comm means every rank's does, so
     * all ranks reach the same answer without a vote. */
    RING_CHECK_MPI(MPI_Comm_split_type(shm->comm, MPI_COMM_TYPE_SHARED, 0,
                                       MPI_INFO_NULL, &local));
    RING_CHECK_MPI(MPI_Comm_size(local, &local_size));
    if (local_size != shm->size) {
        ring__log("ring_shm_create: the ranks of comm span several nodes; "
                  "shared memory needs them on one");
        status = RING_ERR_ARG;
        goto out;
    }
    /* Asked of MPI only where it fits (ring/shm_room.c): the ranks'
     * largest slab, as though every rank had it. */
    unsigned long long most = slab_bytes;
    uint64_t room;
    RING_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &most, 1,
                                 MPI_UNSIGNED_LONG_LONG, MPI_MAX, shm->comm));
    if (most > (unsigned long long)(PTRDIFF_MAX / shm->size) -
                   2 * RING__SHM_PAGE) {
        ring__log("ring_shm_create: slab_bytes %llu is more than a window "
                  "of %d ranks can hold", most, shm->size);
        status = RING_ERR_ARG;
        goto out;
    }
    RING_CHECK(ring__shm_room(shm->comm, &room));
    uint64_t need = ring__shm_need(shm->size, (size_t)most);
    if (need > room) {
        if (shm->rank == 0)
            ring__log("ring_shm_create: a shared window of %d slabs of %zu "
                      "bytes needs about %llu bytes in %s, which has %llu "
                      "free: give the node more shared memory (docker run "
                      "--shm-size, a larger /dev/shm) or ask for a smaller "
                      "slab", shm->size, (size_t)most,
                      (unsigned long long)need, ring__shm_dir(),
                      (unsigned long long)room);
        status = RING_ERR_NOMEM;
        goto out;
    }
    /* Every rank's slab the largest asked for: a call is cut into chunks
     * of a slab, which ranks of other sizes cut differently (wrong sums,
     * then a hang). */
    shm->slab_bytes = ((size_t)most + RING__SHM_PAGE - 1) / RING__SHM_PAGE *
                      RING__SHM_PAGE;
    shm->ctl = calloc((size_t)shm->size, sizeof *shm->ctl);
    shm->slab = calloc((size_t)shm->size, sizeof *shm->slab);
    shm->inputs = calloc((size_t)shm->size, sizeof *shm->inputs);
    shm->tile = malloc(RING__SHM_TILE_BYTES);
    if (!shm->ctl || !shm->slab || !shm->inputs || !shm->tile) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    /* Each rank's part on pages of its own, placed by the rank that first
     * touches them: its owner. */
    RING_CHECK_MPI(MPI_Info_create(&info));
    RING_CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    char *mine;
    RING_CHECK_MPI(MPI_Win_allocate_shared(
        (MPI_Aint)(2 * RING__SHM_PAGE + shm->slab_bytes), 1, info,
        shm->comm, &mine, &shm->win));
    mine = ring__shm_page_up(mine);
    for (int r = 0; r < shm->size; r++) {
        MPI_Aint bytes;
        int disp;
        char *base;
        RING_CHECK_MPI(MPI_Win_shared_query(shm->win, r, &bytes, &disp, &base));
        base = ring__shm_page_up(base);
        shm->ctl[r] = (ring__ctl_t *)base;
        shm->slab[r] = base + RING__SHM_PAGE;
    }
    memset(mine, 0, RING__SHM_PAGE);
    atomic_thread_fence(memory_order_seq_cst);
    /* Nobody polls a counter before its owner has zeroed it. */
    RING_CHECK_MPI(MPI_Barrier(shm->comm));
    *out = shm;
    shm = NULL;
out:
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
    if (shm) ring_shm_free(&shm);
    return status;
}

ring__ctl_t *ring__shm_ctl(ring_shm_t *shm, int rank)
{
    return shm->ctl[rank];
}

int ring_shm_free(ring_shm_t **shmp)
{
    int status = RING_OK;
    ring_shm_t *shm = shmp ? *shmp : NULL;
    if (!shm) return RING_OK;
    RING_CHECK(ring__check_mpi_up("ring_shm_free"));
    if (shm->win != MPI_WIN_NULL) RING_CHECK_MPI(MPI_Win_free(&shm->win));
    if (shm->comm != MPI_COMM_NULL) RING_CHECK_MPI(MPI_Comm_free(&shm->comm));
out:
    free(shm->ctl);
    free(shm->slab);
    free(shm->inputs);
    free(shm->tile);
    free(shm);
    *shmp = NULL;
    return status;
}

static void ring__shm_wait_released(ring_shm_t *shm)
{
    for (int r = 0; r < shm->size; r++)
        if (r != shm->rank) ring__ctl_wait(&shm->ctl[r]->released, shm->nchunks);
}

int ring_shm_slab(ring_shm_t *shm, void **slab, size_t *slab_bytes)
{
    if (!shm || !slab) {
        ring__log("ring_shm_slab: %s is NULL", !shm ? "shm" : "slab");
        return RING_ERR_ARG;
    }
    ring__shm_wait_released(shm);
    *slab = shm->slab[shm->rank];
    if (slab_bytes) *slab_bytes = shm->slab_bytes;
    return RING_OK;
}

/* One chunk of n elements of the call, from its element `first`. src and
 * dst are the caller's buffers at the chunk when the call has one each
 * way (src may be the own slab, dst too; then nothing is copied there);
 * both NULL for pieces, which io reads and writes. */
typedef struct {
    ring_shm_t *shm;
    const ring__io_t *io;
    const char *src;
    char *dst;
    size_t n, esize, seg; /* elements; bytes per element; elements per seg */
    ring_dtype_t dtype;
    ring_op_t op;  /* within the node: SUM for a hierarchical AVERAGE */
    uint64_t base; /* counters' value before this chunk */
    MPI_Comm cross; /* hierarchical: the other nodes' owners of this
                       block; MPI_COMM_NULL within one node */
    ring_op_t final_op; /* the caller's op */
    int nranks;         /* on every node: AVERAGE's divisor across nodes */
    const ring_apply_t *apply; /* NULL, or applied to the own block */
    size_t first;       /* the chunk's first element in the call */
    const ring__mem_ops_t *mem; /* the caller's buffers' kind */
    /* How this rank writes what the others read (see the top): through
     * the cache, or with non-temporal stores. */
    void (*publish)(void *dst, const void *src, size_t nbytes);
    int stream;
    char *bounce; /* pieces: a segment's room, or NULL */
} ring__shm_chunk_t;

static void ring__shm_stream_copy(void *dst, const void *src, size_t nbytes)
{
    ring__shm_stream(dst, src, nbytes);
}

/* Before the counter that says what publish wrote is there: non-temporal
 * stores are not ordered by a release store, so fence them. */
static void ring__shm_publish_fence(const ring__shm_chunk_t *c)
{
#if defined(__SSE2__)
    if (c->stream) _mm_sfence();
#else
    (void)c;
#endif
}

/* What a way has cost: the least of its recent calls, since a call's time
 * also holds the wait for the last rank to come. 0 before it has run. */
static double ring__shm_cost(const ring_shm_t *shm, int stream)
{
    double least = 0;
    uint64_t n = shm->nrecent[stream];
    for (uint64_t i = 0; i < n && i < RING__SHM_RECENT; i++) {
        double x = shm->recent[stream][i];
        if (least == 0 || x < least) least = x;
    }
    return least;
}

/* Whether a call that learns streams (see the top). */
static int ring__shm_pick_stream(ring_shm_t *shm)
{
    uint64_t k = shm->nlearning++;
    double cached = ring__shm_cost(shm, 0), streamed = ring__shm_cost(shm, 1);
    if (cached == 0 || streamed == 0) return cached != 0;
    int cheaper = streamed < cached;
    return k % RING__SHM_EXPLORE == 0 ? !cheaper : cheaper;
}

/* A call's seconds per byte, among its way's recent ones. */
static void ring__shm_learn(ring_shm_t *shm, int stream, double seconds,
                            size_t nbytes)
{
    uint64_t i = shm->nrecent[stream]++ % RING__SHM_RECENT;
    shm->recent[stream][i] = seconds / (double)nbytes;
}

/* Segment s of block b: its first element and length (0 past the end). */
static size_t ring__shm_seg(const ring__shm_chunk_t *c, int b, size_t s,
                           size_t *len)
{
    size_t count = ring__block_count(c->n, c->shm->size, b);
    size_t first = s * c->seg;
    *len = first < count ? (count - first < c->seg ? count - first : c->seg)
                         : 0;
    return ring__block_offset(c->n, c->shm->size, b) + first;
}

/* Element `at` of the chunk, as a byte of the whole call (io's offsets). */
static size_t ring__shm_at(const ring__shm_chunk_t *c, size_t at)
{
    return (c->first + at) * c->esize;
}

/* Copies segment s of every block but the own one, which is read where
 * it lies, into the slab. */
static void ring__shm_post(const ring__shm_chunk_t *c, size_t s)
{
    ring_shm_t *shm = c->shm;
    char *slab = shm->slab[shm->rank];
    if (c->src != slab)
        for (int b = 0; b < shm->size; b++) {
            size_t len, at = ring__shm_seg(c, b, s, &len);
            if (b != shm->rank && len > 0)
                ring__io_read(c->io, ring__shm_at(c, at),
                              slab + at * c->esize, len * c->esize,
                              c->publish);
        }
    ring__shm_publish_fence(c);
    ring__ctl_set(&shm->ctl[shm->rank]->posted, c->base + s + 1);
}

static void ring__shm_reduce(const ring__shm_chunk_t *c, size_t s)
{
    ring_shm_t *shm = c->shm;
    int me = shm->rank, n = shm->size;
    size_t len, at = ring__shm_seg(c, me, s, &len);
    size_t off = at * c->esize;
    char *acc = shm->slab[me] + off;
    for (int r = 0; r < n; r++)
        if (r != me) ring__ctl_wait(&shm->ctl[r]->posted, c->base + s + 1);
    /* Across nodes the block is not final yet: ring__shm_cross ends it
     * and copies it out. */
    int copy_out = c->cross == MPI_COMM_NULL &&
                   (!c->dst || c->dst + off != acc);
    /* Every rank's segment in rank order; the own one from where the
     * caller has it (it may be acc itself: packed). Reduced a tile at a
     * time into the scratch tile, then written to the slab for the
     * others (the call's way) and copied out while still in L1. */
    size_t tile = RING__SHM_TILE_BYTES / c->esize;
    for (size_t done = 0; done < len; done += tile) {
        size_t k = len - done < tile ? len - done : tile;
        size_t at_tile = off + done * c->esize;
        /* The own input in runs that lie contiguous where the caller has
         * them (one run for one buffer; a run per piece the tile spans). */
        for (size_t e = 0, run; e < k; e += run) {
            char *mine;
            run = ring__io_span(c->io, ring__shm_at(c, at + done + e),
                                (k - e) * c->esize, 0, &mine) / c->esize;
            for (int r = 0; r < n; r++)
                shm->inputs[r] = r != me ? shm->slab[r] + at_tile + e * c->esize
                                 : mine  ? mine
                                         : ring__shm_zeros;
            c->mem->reduce_n(shm->tile + e * c->esize, shm->inputs, n, run,
                             c->dtype, c->op, c->op == RING_AVERAGE ? n : 1);
        }
        if (c->apply)
            c->apply->fn(c->apply->ctx, c->first + at_tile / c->esize,
                         shm->tile, k);
        c->publish(acc + done * c->esize, shm->tile, k * c->esize);
        if (copy_out)
            ring__io_write(c->io, ring__shm_at(c, at + done), shm->tile,
                           k * c->esize, c->mem->copy);
    }
    ring__shm_publish_fence(c);
    if (c->cross != MPI_COMM_NULL) return;
    ring__ctl_set(&shm->ctl[me]->reduced, c->base + s + 1);
}

/* Hierarchical: the own block, summed over this node, is allreduced with
 * the owners of the same block on the other nodes (averaged over all
 * ranks), then published whole. Published even when that failed, so the
 * node's other ranks do not wait for ever; the status says it failed. */
static int ring__shm_cross(const ring__shm_chunk_t *c, size_t nseg)
{
    ring_shm_t *shm = c->shm;
    int me = shm->rank;
    size_t at = ring__block_offset(c->n, shm->size, me);
    size_t len = ring__block_count(c->n, shm->size, me);
    char *block = shm->slab[me] + at * c->esize;
    int status = ring_allreduce(block, block, len, c->dtype, c->op, c->cross);
    if (status == RING_OK && c->final_op == RING_AVERAGE)
        c->mem->divide(block, len, c->dtype, c->nranks);
    if (status == RING_OK && len > 0 && (!c->dst || c->dst + at * c->esize !=
                                                        block))
        ring__io_write(c->io, ring__shm_at(c, at), block, len * c->esize,
                       c->mem->copy);
    ring__ctl_set(&shm->ctl[me]->reduced, c->base + nseg);
    return status;
}

static void ring__shm_gather(const ring__shm_chunk_t *c, size_t s)
{
    ring_shm_t *shm = c->shm;
    for (int r = 0; r < shm->size; r++) {
        if (r == shm->rank) continue;
        size_t len, at = ring__shm_seg(c, r, s, &len);
        ring__ctl_wait(&shm->ctl[r]->reduced, c->base + s + 1);
        if (len == 0) continue;
        size_t pos = ring__shm_at(c, at), nbytes = len * c->esize;
        const char *from = shm->slab[r] + at * c->esize;
        char *run;
        /* A segment bound for many places is first read whole, in one
         * long copy from the other rank's memory, then spread from this
         * rank's cache: 4 KiB copies straight from it, tensors laid out
         * backwards, made a fused call 1.3x slower (bench/README.md). */
        if (c->bounce && ring__io_span(c->io, pos, nbytes, 1, &run) < nbytes) {
            c->mem->copy(c->bounce, from, nbytes);
            from = c->bounce;
        }
        ring__io_write(c->io, pos, from, nbytes, c->mem->copy);
    }
}

/* One chunk. Within a node, segment s is gathered while s + 1 is being
 * reduced; across nodes the whole own block crosses between the reduction
 * and the gather. */
static int ring__shm_chunk(ring__shm_chunk_t *c)
{
    ring_shm_t *shm = c->shm;
    int status = RING_OK, cross = c->cross != MPI_COMM_NULL;
    /* Block 0 is the longest: it sets the number of segments. */
    size_t longest = ring__block_count(c->n, shm->size, 0);
    size_t nseg = (longest + c->seg - 1) / c->seg;
    ring__shm_wait_released(shm);
    for (size_t s = 0; s < nseg; s++) {
        ring__shm_post(c, s);
        ring__shm_reduce(c, s);
        if (s > 0 && !cross) ring__shm_gather(c, s - 1);
    }
    if (cross) status = ring__shm_cross(c, nseg);
    for (size_t s = cross ? 0 : nseg - (nseg > 0); s < nseg; s++)
        ring__shm_gather(c, s);
    shm->nsegs += nseg;
    shm->nchunks++;
    ring__ctl_set(&shm->ctl[shm->rank]->released, shm->nchunks);
    return status;
}

/* A buffer may be the slab itself, or lie wholly outside it. */
static const char *ring__shm_bad_buffer(const ring_shm_t *shm, const void *buf,
                                        size_t nbytes)
{
    const char *p = buf, *slab = shm->slab[shm->rank];
    if (p == slab)
        return nbytes > shm->slab_bytes ? "is the slab, but count overruns it"
                                         : NULL;
    if (nbytes > 0 && p < slab + shm->slab_bytes && p + nbytes > slab)
        return "overlaps the slab without starting at it";
    return NULL;
}

/* The thin entry points' own checks: sendbuf and recvbuf against the
 * slab (a context's calls never pass the slab). */
static int ring__shm_check_buffers(const ring_shm_t *shm, const void *sendbuf,
                                   const void *recvbuf, size_t count,
                                   ring_dtype_t dtype)
{
    size_t nbytes = count * ring_dtype_size(dtype);
    const char *why = ring__shm_bad_buffer(shm, sendbuf, nbytes);
    const char *which = "sendbuf";
    if (!why) {
        why = ring__shm_bad_buffer(shm, recvbuf, nbytes);
        which = "recvbuf";
    }
    if (!why) return RING_OK;
    ring__log("ring_shm_allreduce: %s %s (count=%zu, slab %zu bytes)", which,
              why, count, shm->slab_bytes);
    return RING_ERR_ARG;
}

int ring__shm_run(const ring__coll_t *c, const ring__io_t *io,
                  const ring_apply_t *apply)
{
    int status = RING_OK;
    ring_shm_t *shm = c->ctx->shm;
    MPI_Comm cross = c->ctx->cross;
    int nnodes = 1;
    if (cross != MPI_COMM_NULL) RING_CHECK_MPI(MPI_Comm_size(cross, &nnodes));
    size_t nbytes = c->count * c->esize;
    if (c->count == 0) goto out;
    /* One rank has nothing to reduce; with apply it still takes the path
     * below, which applies in the slab rather than in recvbuf. */
    if (shm->size == 1 && !apply && !io->pieces) {
        if (cross != MPI_COMM_NULL)
            status = ring_allreduce(io->sendbuf, io->recvbuf, c->count,
                                    c->dtype, c->op, cross);
        else if (io->sendbuf != io->recvbuf)
            c->mem->copy(io->recvbuf, io->sendbuf, nbytes);
        goto out;
    }
    const ring__tuning_t *tuning = c->tuning;
    ring__shm_chunk_t ch = {
        .shm = shm,
        .io = io,
        .esize = c->esize,
        .seg = tuning->shm_segment_bytes / c->esize
                   ? tuning->shm_segment_bytes / c->esize
                   : 1,
        .dtype = c->dtype,
        .op = cross != MPI_COMM_NULL && c->op == RING_AVERAGE ? RING_SUM
                                                              : c->op,
        .cross = cross,
        .final_op = c->op,
        .nranks = nnodes * shm->size,
        .apply = apply,
        .mem = c->mem,
    };
    /* Under HVD_SHM_STREAM=auto, small calls go through the cache. */
    int learning = tuning->shm_stream == RING__STREAM_AUTO &&
                   nbytes >= RING__SHM_LEARN_MIN_BYTES;
    ch.stream = learning ? ring__shm_pick_stream(shm)
                         : tuning->shm_stream == RING__STREAM_ON;
    ch.publish = ch.stream ? ring__shm_stream_copy : c->mem->copy;
    /* Without it the gather still works, straight into the pieces. */
    if (io->pieces) ch.bounce = ring__ctx_scratch(c->ctx, ch.seg * c->esize);
    double start = MPI_Wtime();
    size_t per_chunk = shm->slab_bytes / c->esize;
    for (size_t done = 0; done < c->count; done += ch.n) {
        ch.n = c->count - done < per_chunk ? c->count - done : per_chunk;
        ch.src = io->pieces ? NULL
                            : (const char *)io->sendbuf + done * c->esize;
        ch.dst = io->pieces ? NULL : (char *)io->recvbuf + done * c->esize;
        ch.base = shm->nsegs;
        ch.first = done;
        int chunk_status = ring__shm_chunk(&ch);
        if (status == RING_OK) status = chunk_status;
    }
    if (learning) ring__shm_learn(shm, ch.stream, MPI_Wtime() - start, nbytes);
out:
    return status;
}

/* ---- the window's own entry points ---- */

static int ring__shm_allreduce(ring_shm_t *shm, MPI_Comm cross,
                               ring__kind_t kind, const char *func,
                               const void *sendbuf, void *recvbuf,
                               size_t count, ring_dtype_t dtype, ring_op_t op,
                               const ring_apply_t *apply)
{
    int status = RING_OK;
    if (!shm) {
        ring__log("%s: shm is NULL", func);
        return RING_ERR_ARG;
    }
    ring_ctx_t ctx = ring__ctx_wrap(shm->comm, shm->comm, cross, shm);
    if (apply && !apply->fn) {
        ring__log("ring_shm_allreduce_apply: apply or apply->fn is NULL");
        status = RING_ERR_ARG;
    }
    if (status == RING_OK)
        status = ring__shm_check_buffers(shm, sendbuf, recvbuf, count, dtype);
    ring__coll_t c = {.func = func, .kind = kind, .ctx = &ctx,
                      .count = count, .dtype = dtype, .op = op};
    RING_CHECK(ring__begin(&c, sendbuf, recvbuf, status));
    ring__io_t io = {.sendbuf = sendbuf, .recvbuf = recvbuf};
    status = ring__shm_run(&c, &io, apply);
out:
    return status;
}

int ring_shm_allreduce(ring_shm_t *shm, const void *sendbuf, void *recvbuf,
                       size_t count, ring_dtype_t dtype, ring_op_t op)
{
    return ring__shm_allreduce(shm, MPI_COMM_NULL, RING__SHM_ALLREDUCE,
                               "ring_shm_allreduce", sendbuf, recvbuf, count,
                               dtype, op, NULL);
}

int ring_shm_allreduce_apply(ring_shm_t *shm, const void *sendbuf,
                             void *recvbuf, size_t count, ring_dtype_t dtype,
                             ring_op_t op, const ring_apply_t *apply)
{
    /* A NULL apply is refused inside, where the ranks still agree. */
    static const ring_apply_t none = {NULL, NULL};
    return ring__shm_allreduce(shm, MPI_COMM_NULL, RING__SHM_ALLREDUCE_APPLY,
                               "ring_shm_allreduce_apply", sendbuf, recvbuf,
                               count, dtype, op, apply ? apply : &none);
}

int ring_shm_allreduce_hier(ring_shm_t *shm, MPI_Comm cross,
                            const void *sendbuf, void *recvbuf, size_t count,
                            ring_dtype_t dtype, ring_op_t op)
{
    if (cross == MPI_COMM_NULL) {
        ring__log("ring_shm_allreduce_hier: cross is MPI_COMM_NULL");
        return RING_ERR_ARG;
    }
    return ring__shm_allreduce(shm, cross, RING__SHM_ALLREDUCE_HIER,
                               "ring_shm_allreduce_hier", sendbuf, recvbuf,
                               count, dtype, op, NULL);
}
