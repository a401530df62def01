/* ring/pipeline.c: the segmented, non-blocking engine behind the ring
 * allreduce, reduce-scatter, allgather and the chain broadcast. What a
 * phase is and why it cannot deadlock is explained at ring__phase_t in
 * ring_internal.h; this file only walks the segments.
 *
 * In an allreduce a block is received into again (its final value, in the
 * allgather steps) after it was sent from (its partial value). That second
 * receive can only be matched once the value has gone round the ring, which
 * needs the right neighbour to have read the first send: the two never
 * touch the memory at the same time.
 */
#include <stdlib.h>
#include "ring/ring_internal.h"

enum { RING_TAG = 0x7269 };

/* One segment: where it lies in the full layout and in which step it moves. */
typedef struct {
    size_t offset, count; /* elements */
    int step;
} ring__seg_t;

/* Appends the segments of `block` to segs; returns how many were added. */
static size_t ring__cut_block(const ring__phase_t *ph, int block, int step,
                              size_t seg_count, ring__seg_t *segs)
{
    size_t offset = ring__block_offset(ph->count, ph->nblocks, block);
    size_t left = ring__block_count(ph->count, ph->nblocks, block);
    size_t n = 0;
    for (; left > 0; n++) {
        size_t c = left < seg_count ? left : seg_count;
        segs[n] = (ring__seg_t){offset, c, step};
        offset += c;
        left -= c;
    }
    return n;
}

static size_t ring__max_segs_per_block(const ring__phase_t *ph, size_t seg_count)
{
    size_t largest = ring__block_count(ph->count, ph->nblocks, 0);
    return (largest + seg_count - 1) / seg_count;
}

enum { RING_SLOTS = RING_PIPELINE_DEPTH + 1 }; /* one more: being reduced */

/* The state of one running phase. */
typedef struct {
    const ring__phase_t *ph;
    size_t esize, seg_bytes;
    ring__seg_t *recv;  /* received segments in order */
    char *scratch;      /* RING_SLOTS segments, when reducing */
    MPI_Request rreq[RING_SLOTS];
} ring__pipe_t;

/* Where received segment u lands: scratch when it is to be reduced. */
static char *ring__recv_dst(const ring__pipe_t *p, size_t u)
{
    if (p->recv[u].step < p->ph->nreduce)
        return p->scratch + (u % RING_SLOTS) * p->seg_bytes;
    return p->ph->buf + p->recv[u].offset * p->esize;
}

static int ring__post_recv(ring__pipe_t *p, size_t u)
{
    int status = RING_OK;
    RING_CHECK_MPI(MPI_Irecv(ring__recv_dst(p, u),
                             (int)(p->recv[u].count * p->esize), MPI_BYTE,
                             p->ph->left, RING_TAG, p->ph->comm,
                             &p->rreq[u % RING_SLOTS]));
out:
    return status;
}

int ring__phase_run(const ring__phase_t *ph)
{
    int status = RING_OK;
    ring__pipe_t p = {.ph = ph, .esize = ring_dtype_size(ph->dtype)};
    size_t seg_count = ph->segment_bytes / p.esize;
    if (seg_count == 0) seg_count = 1;
    p.seg_bytes = seg_count * p.esize;
    size_t max_units = ring__max_segs_per_block(ph, seg_count) *
                       (size_t)(ph->nrecv_steps + 1);
    ring__seg_t *segs = malloc(max_units * sizeof *segs + 1);
    MPI_Request *sreq = malloc(max_units * sizeof *sreq + 1);
    /* Received segments are reduced with buf's data: of its kind. */
    if (ph->nreduce > 0) p.scratch = ph->mem->alloc(RING_SLOTS * p.seg_bytes);
    size_t nsend = 0, nrecv = 0, ninit = 0, nposted = 0;
    if (!segs || !sreq || (ph->nreduce > 0 && !p.scratch)) {
        status = RING_ERR_NOMEM;
        goto out;
    }

    /* Own block first (segments [0, ninit)), then the received ones. */
    if (ph->send_block >= 0)
        ninit = ring__cut_block(ph, ph->send_block, -1, seg_count, segs);
    p.recv = segs + ninit;
    for (int s = 0; s < ph->nrecv_steps; s++) {
        int block = ring__mod(ph->recv_block - s, ph->nblocks);
        nrecv += ring__cut_block(ph, block, s, seg_count, p.recv + nrecv);
    }

    /* Receives are posted first so the first sends find them waiting. */
    for (; nposted < nrecv && nposted < RING_PIPELINE_DEPTH; nposted++)
        RING_CHECK(ring__post_recv(&p, nposted));
    const char *own = ph->src ? ph->src : ph->buf;
    if (ninit > 0 && ph->hooks)
        RING_CHECK(ph->hooks->need(ph->hooks->arg, ph->send_block));
    for (; nsend < ninit; nsend++)
        RING_CHECK_MPI(MPI_Isend(own + segs[nsend].offset * p.esize,
                                 (int)(segs[nsend].count * p.esize), MPI_BYTE,
                                 ph->right, RING_TAG, ph->comm, &sreq[nsend]));

    for (size_t u = 0; u < nrecv; u++) {
        const ring__seg_t *seg = &p.recv[u];
        RING_CHECK_MPI(MPI_Wait(&p.rreq[u % RING_SLOTS], MPI_STATUS_IGNORE));
        if (nposted < nrecv) RING_CHECK(ring__post_recv(&p, nposted++));
        char *data = ph->buf + seg->offset * p.esize;
        int block = ring__mod(ph->recv_block - seg->step, ph->nblocks);
        if (seg->step < ph->nreduce) {
            int last = seg->step == ph->nreduce - 1;
            if (ph->hooks)
                RING_CHECK(ph->hooks->need(ph->hooks->arg, block));
            ph->mem->reduce(data, ph->src + seg->offset * p.esize,
                            ring__recv_dst(&p, u), seg->count, ph->dtype,
                            ph->op, last ? ph->divisor : 1);
        }
        if (seg->step < ph->nforward) {
            RING_CHECK_MPI(MPI_Isend(data, (int)(seg->count * p.esize),
                                     MPI_BYTE, ph->right, RING_TAG, ph->comm,
                                     &sreq[nsend]));
            nsend++;
        }
        /* A block is final after its last reducing step, or once it has
         * arrived in a later one. */
        int block_done = u + 1 == nrecv || p.recv[u + 1].step != seg->step;
        if (ph->hooks && block_done && seg->step >= ph->nreduce - 1)
            RING_CHECK(ph->hooks->final(ph->hooks->arg, block));
    }
    RING_CHECK_MPI(MPI_Waitall((int)nsend, sreq, MPI_STATUSES_IGNORE));
out:
    if (p.scratch) ph->mem->release(p.scratch);
    free(sreq);
    free(segs);
    return status;
}
