/* ring/staged.c: collectives on device buffers when MPI cannot read device
 * memory: the host algorithm runs over pinned staging buffers, and copies
 * between the device and staging overlap it.
 *
 * A call's data is cut into chunks that each take the same slice of every
 * block (ring__staged_t), so an element keeps its block, and in the ring
 * its owner and its order of reduction: the result is bitwise the host
 * path's for the same data. Staging has two halves; while the host runs
 * chunk k in one, chunk k+1 comes up into the other:
 *
 *   up stream     in(k)  in(k+1)          in(k+2) ...
 *   host                 run(k) ............. run(k+1) ...
 *   down stream                out(k) blocks as they are final
 *
 * Within a chunk each block's device-to-host copy is queued in the order
 * the ring first needs it (rank r sends block r-1, then reduces r-2,
 * r-3, ...), with an event per block, and waited on just before the ring
 * first reads the block (ring__hooks_t's need); each block goes back to
 * the device as soon as the ring says it is final. Algorithms that take
 * no hooks (recursive doubling, the window) wait for the whole chunk
 * first. Half h is filled again only once its copies back are done.
 *
 * A context keeps its staging (streams, pinned memory, events) from its
 * first device call to ring_ctx_free; the entry points that take an
 * MPI_Comm make it for the call and free it after.
 */
#include <stdlib.h>
#include "ring/ring_internal.h"

struct ring__stage {
    const ring_dev_t *dev;
    ring_stream_t *up, *down;
    char *pinned;             /* two halves of half_bytes */
    size_t half_bytes;
    int nblocks;
    ring_event_t **in_ev;    /* [2][nblocks]: block b of half h is in */
    char *pending;            /* [2][nblocks]: in_ev recorded, not waited */
    ring_event_t *out_ev[2]; /* half h's copies back are done */
};

void ring__stage_free(ring__stage_t **stagep)
{
    ring__stage_t *st = stagep ? *stagep : NULL;
    if (!st) return;
    const ring_dev_t *dev = st->dev;
    for (int i = 0; st->in_ev && i < 2 * st->nblocks; i++)
        dev->event_destroy(st->in_ev[i]);
    for (int h = 0; h < 2; h++) dev->event_destroy(st->out_ev[h]);
    dev->stream_destroy(st->up);
    dev->stream_destroy(st->down);
    if (st->pinned) dev->release_pinned(st->pinned);
    free(st->in_ev);
    free(st->pending);
    free(st);
    *stagep = NULL;
}

static int ring__stage_new(const ring_dev_t *dev, int nblocks,
                           size_t half_bytes, ring__stage_t **out)
{
    int status = RING_OK;
    ring__stage_t *st = calloc(1, sizeof *st);
    if (!st) return RING_ERR_NOMEM;
    st->dev = dev;
    st->nblocks = nblocks;
    st->half_bytes = half_bytes;
    st->in_ev = calloc(2 * (size_t)nblocks, sizeof *st->in_ev);
    st->pending = calloc(2 * (size_t)nblocks, 1);
    if (!st->in_ev || !st->pending) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    RING_CHECK(dev->stream_create(&st->up));
    RING_CHECK(dev->stream_create(&st->down));
    RING_CHECK(dev->alloc_pinned((void **)&st->pinned, 2 * half_bytes));
    for (int i = 0; i < 2 * nblocks; i++)
        RING_CHECK(dev->event_create(&st->in_ev[i]));
    for (int h = 0; h < 2; h++) RING_CHECK(dev->event_create(&st->out_ev[h]));
    *out = st;
    st = NULL;
out:
    ring__stage_free(&st);
    return status;
}

/* ctx's staging, made or remade to hold half_bytes per half and events
 * for nblocks blocks. A half is a multiple of 256 bytes, so that the
 * second one starts aligned for every dtype (and for the copies), whatever
 * the dtype of the call that made it: a float16 call's 32766 bytes left
 * a later float32 call's second half at 2 bytes past alignment.
 *
 * Every rank of ctx makes it in the same call (the same calls need the
 * same staging) and says there whether it could: a rank without pinned
 * memory or a stream fails its call, and the others, who would wait for
 * it in the call's messages, fail theirs (RING_ERR_STATE) and keep no
 * staging either, so that they make it again together. */
static int ring__stage_get(ring_ctx_t *ctx, const ring_dev_t *dev,
                           int nblocks, size_t half_bytes,
                           ring__stage_t **out)
{
    int status = RING_OK, made, all;
    half_bytes = (half_bytes + 255) / 256 * 256;
    ring__stage_t *st = ctx->stage;
    if (st && (st->dev != dev || st->nblocks < nblocks ||
               st->half_bytes < half_bytes))
        ring__stage_free(&ctx->stage);
    if (!ctx->stage) {
        status = ring__stage_new(dev, nblocks, half_bytes, &ctx->stage);
        made = status == RING_OK;
        RING_CHECK_MPI(
            MPI_Allreduce(&made, &all, 1, MPI_INT, MPI_MIN, ctx->comm));
        if (!all) ring__stage_free(&ctx->stage);
        if (!all && made) {
            ring__log("device buffers staged through host memory: another "
                      "rank could not make its staging (its message says "
                      "why)");
            status = RING_ERR_STATE;
        }
    }
    *out = ctx->stage;
out:
    return status;
}

/* ---- one call ---- */

typedef struct {
    const ring__coll_t *c;
    const ring__staged_t *s;
    ring__stage_t *st;
    size_t per_block; /* elements of each block a chunk takes at most */
    size_t k;         /* the chunk the host runs */
    size_t count;     /* its elements, over all blocks */
    char *copied;     /* [nblocks]: chunk k's block b has gone out */
} ring__call_t;

static size_t ring__slice(const ring__call_t *call, size_t k, int b)
{
    const ring__staged_t *s = call->s;
    size_t len = ring__block_count(s->whole, s->nblocks, b);
    size_t from = k * call->per_block;
    if (len <= from) return 0;
    return len - from < call->per_block ? len - from : call->per_block;
}

static size_t ring__chunk_count(const ring__call_t *call, size_t k)
{
    size_t n = 0;
    for (int b = 0; b < call->s->nblocks; b++) n += ring__slice(call, k, b);
    return n;
}

/* Where chunk k's block b lies on the device side of in or out (NULL:
 * nowhere). */
static const char *ring__side(const ring__call_t *call, const char *base,
                              int only, int b, size_t k)
{
    const ring__staged_t *s = call->s;
    size_t esize = call->c->esize, first = k * call->per_block;
    if (!base || (only >= 0 && b != only)) return NULL;
    if (only < 0) first += ring__block_offset(s->whole, s->nblocks, b);
    return base + first * esize;
}

/* Block b of a chunk of count elements, in half h of staging. */
static char *ring__stage_at(const ring__call_t *call, int h, size_t count,
                            int b)
{
    size_t offset = ring__block_offset(count, call->s->nblocks, b);
    return call->st->pinned + (size_t)h * call->st->half_bytes +
           offset * call->c->esize;
}

/* Queues chunk k's blocks up into half h, in the order the ring first
 * needs them. */
static int ring__stage_in(ring__call_t *call, size_t k, int h)
{
    int status = RING_OK, n = call->s->nblocks;
    ring__stage_t *st = call->st;
    size_t count = ring__chunk_count(call, k);
    for (int i = 0; i < n; i++) {
        int b = ring__mod(call->c->rank - 1 - i, n);
        const char *from = ring__side(call, call->s->in, call->s->in_block,
                                      b, k);
        size_t len = ring__slice(call, k, b) * call->c->esize;
        if (!from || len == 0) continue;
        RING_CHECK(st->dev->copy(ring__stage_at(call, h, count, b), from,
                                 len, st->up));
        RING_CHECK(st->dev->event_record(st->in_ev[h * n + b], st->up));
        st->pending[h * n + b] = 1;
    }
out:
    return status;
}

static int ring__stage_need(void *arg, int b)
{
    ring__call_t *call = arg;
    ring__stage_t *st = call->st;
    int i = (int)(call->k & 1) * call->s->nblocks + b;
    if (!st->pending[i]) return RING_OK;
    st->pending[i] = 0;
    return st->dev->event_sync(st->in_ev[i]);
}

static int ring__stage_out(void *arg, int b)
{
    ring__call_t *call = arg;
    ring__stage_t *st = call->st;
    size_t k = call->k;
    char *to = (char *)ring__side(call, call->s->out, call->s->out_block, b,
                                  k);
    size_t len = ring__slice(call, k, b) * call->c->esize;
    if (call->copied[b] || !to || len == 0) return RING_OK;
    call->copied[b] = 1;
    /* A block the host never read (one rank; allgather's own) goes out
     * as it came in: on another stream, so only once it is in. */
    int status = ring__stage_need(arg, b);
    if (status != RING_OK) return status;
    char *from = ring__stage_at(call, (int)(k & 1), call->count, b);
    return st->dev->copy(to, from, len, st->down);
}

/* The host runs chunk k, in half k & 1. */
static int ring__stage_run(ring__call_t *call)
{
    int status = RING_OK, n = call->s->nblocks, h = (int)(call->k & 1);
    ring__hooks_t hooks = {ring__stage_need, ring__stage_out, call};
    ring__coll_t c = *call->c;
    c.mem = &ring__mem_host;
    c.hooks = call->s->hooked ? &hooks : NULL;
    call->count = ring__chunk_count(call, call->k);
    for (int b = 0; b < n; b++) {
        call->copied[b] = 0;
        if (!c.hooks) RING_CHECK(ring__stage_need(call, b));
    }
    RING_CHECK(call->s->run(&c, call->st->pinned +
                                    (size_t)h * call->st->half_bytes,
                            call->count, call->s->arg));
    for (int b = 0; b < n; b++) RING_CHECK(ring__stage_out(call, b));
    status = call->st->dev->event_record(call->st->out_ev[h],
                                         call->st->down);
out:
    return status;
}

int ring__staged(const ring__coll_t *c, const ring__staged_t *s)
{
    int status = RING_OK;
    ring_ctx_t *ctx = c->ctx;
    ring__call_t call = {.c = c, .s = s};
    size_t half = c->tuning->staging_bytes / 2;
    call.per_block = half / (c->esize * (size_t)s->nblocks);
    if (call.per_block == 0) call.per_block = 1;
    size_t largest = ring__block_count(s->whole, s->nblocks, 0);
    size_t nchunks = (largest + call.per_block - 1) / call.per_block;
    /* The staging first: every rank comes to its making (see there). */
    RING_CHECK(ring__stage_get(ctx, c->dev, s->nblocks,
                               call.per_block * c->esize * s->nblocks,
                               &call.st));
    call.copied = malloc((size_t)s->nblocks);
    if (!call.copied) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    /* A registered call's input may still be on its way (c->ready): the
     * copies up wait for it on the device, so that the host waits once,
     * for them. */
    if (c->ready) RING_CHECK(c->dev->stream_wait(call.st->up, c->ready));
    RING_CHECK(ring__stage_in(&call, 0, 0));
    for (; call.k < nchunks; call.k++) {
        if (call.k + 1 < nchunks) {
            int next = (int)((call.k + 1) & 1);
            RING_CHECK(c->dev->event_sync(call.st->out_ev[next]));
            RING_CHECK(ring__stage_in(&call, call.k + 1, next));
        }
        RING_CHECK(ring__stage_run(&call));
    }
out:
    /* Nothing may still be copying into the caller's buffers or the
     * staging once the call returns, failed or not. */
    if (call.st) {
        int up = c->dev->stream_sync(call.st->up);
        int down = c->dev->stream_sync(call.st->down);
        if (status == RING_OK) status = up != RING_OK ? up : down;
        for (int i = 0; i < 2 * s->nblocks; i++) call.st->pending[i] = 0;
    }
    if (ctx->wrapped) ring__stage_free(&ctx->stage);
    free(call.copied);
    return status;
}
