/* hvd/execute.c: runs one response of a plan on this rank: hands the
 * tensors to ring's context (fused allreduces as pieces of one buffer),
 * and completes the handles. A rank that has joined has no request of its
 * own and takes part with zeros (its results are dropped). Host memory
 * only for now.
 *
 * The context (ring_ctx_t, over hvd__ring_comm) owns what the collectives
 * need across calls, the shared window within a node and the
 * communicators of the hierarchical allreduce, and decides per call which
 * algorithm runs; hvd only passes HVD_INTRANODE,
 * HVD_HIERARCHICAL_ALLREDUCE and the fusion threshold (the window's slab)
 * on when it makes it. */
#include <stdlib.h>
#include <string.h>
#include "hvd/execute.h"
#include "hvd/timeline.h"
#include "hvd/topology.h"

_Static_assert((int)HVD__INTRANODE_AUTO == (int)RING_INTRANODE_AUTO &&
                   (int)HVD__INTRANODE_SHM == (int)RING_INTRANODE_SHM &&
                   (int)HVD__INTRANODE_RING == (int)RING_INTRANODE_RING,
               "HVD_INTRANODE's values are ring's");

static ring_ctx_t *hvd__ctx;

/* Zeros for a joined rank, grown to the largest collective it takes part
 * in alone. */
static struct {
    char *data;
    size_t cap;
} hvd__scratch;

int hvd__execute_init(void)
{
    const hvd__config_t *cfg = &hvd__engine.config;
    ring_ctx_opts_t opts = {
        .slab_bytes = cfg->fusion_threshold,
        .intranode = (ring_intranode_t)cfg->intranode,
        .hierarchical = cfg->hierarchical,
    };
    int status = ring_ctx_create(hvd__ring_comm, &opts, &hvd__ctx);
    if (status == HVD_OK && hvd__engine.rank == 0)
        hvd__log(HVD__LOG_INFO, "allreduce of 1 MiB: %s; of 1 KiB: %s",
                 ring_ctx_allreduce_algo(hvd__ctx, 1 << 18, RING_FLOAT32),
                 ring_ctx_allreduce_algo(hvd__ctx, 1 << 8, RING_FLOAT32));
    return status;
}

void hvd__execute_free(void)
{
    ring_ctx_free(&hvd__ctx);
    free(hvd__scratch.data);
    memset(&hvd__scratch, 0, sizeof hvd__scratch);
}

/* nbytes of zeros, for a joined rank. */
static char *hvd__zeros(size_t nbytes)
{
    if (nbytes + 1 > hvd__scratch.cap) {
        char *bigger = realloc(hvd__scratch.data, nbytes + 1);
        if (!bigger) return NULL;
        hvd__scratch.data = bigger;
        hvd__scratch.cap = nbytes + 1;
    }
    memset(hvd__scratch.data, 0, nbytes);
    return hvd__scratch.data;
}

/* The timeline's name for running a collective: allreduces say which
 * algorithm ring's context took for them. */
static const char *hvd__phase(const hvd__desc_t *d, size_t count)
{
    const char *algo = "";
    if (d->kind == HVD__ALLREDUCE || d->kind == HVD__ALLREDUCE_APPLY)
        algo = ring_ctx_allreduce_algo(hvd__ctx, count,
                                       (ring_dtype_t)d->dtype);
    if (!algo) algo = "";
    if (d->kind == HVD__ALLREDUCE_APPLY)
        return strcmp(algo, "shm") ? "ALLREDUCE_APPLY" : "SHM_ALLREDUCE_APPLY";
    if (d->kind != HVD__ALLREDUCE) return hvd__kind_name(d->kind);
    if (!strcmp(algo, "shm")) return "SHM_ALLREDUCE";
    if (!strcmp(algo, "shm_hier")) return "HIER_SHM_ALLREDUCE";
    if (!strcmp(algo, "hier")) return "HIER_ALLREDUCE";
    return "RING_ALLREDUCE";
}

/* One collective on one tensor, where it lies. */
static int hvd__run_one(const hvd__desc_t *d, hvd_handle_t h)
{
    size_t nbytes = hvd__desc_bytes(d);
    ring_dtype_t dtype = (ring_dtype_t)d->dtype;
    size_t zeros = d->kind == HVD__ALLGATHER
                       ? nbytes * (1 + (size_t)hvd__engine.size)
                       : nbytes;
    char *z = h ? NULL : hvd__zeros(zeros);
    if (!h && !z) return HVD_ERR_NOMEM;
    switch (d->kind) {
    case HVD__ALLREDUCE:
        return ring_ctx_allreduce(hvd__ctx, h ? h->sendbuf : z,
                                  h ? h->recvbuf : z, d->count, dtype,
                                  (ring_op_t)d->op);
    case HVD__ALLREDUCE_APPLY: /* never with a joined rank (coordinator) */
        if (!h) return HVD_ERR_STATE;
        return ring_ctx_allreduce_apply(hvd__ctx, h->sendbuf, h->recvbuf,
                                        d->count, dtype, (ring_op_t)d->op,
                                        &h->apply);
    case HVD__BROADCAST:
        return ring_ctx_broadcast(hvd__ctx, h ? h->recvbuf : z, d->count,
                                  dtype, hvd__topo.ring_rank[d->root]);
    case HVD__ALLGATHER:
        /* A joined rank: nbytes of zeros to give, then room for all. In
         * rank order (hvd__engine.comm, not the context's ring order): the
         * result is laid out by rank. */
        return ring_allgather(h ? h->sendbuf : z, h ? h->recvbuf : z + nbytes,
                              d->count, dtype, hvd__engine.comm);
    default: /* a barrier: agreeing that every rank reached it was all */
        return HVD_OK;
    }
}

/* Several allreduces of one dtype and op, as pieces of one buffer: ring
 * reduces them where they lie when they tile a range (a model's gradient
 * slab), else copies them through its window or scratch. A joined rank's
 * pieces are zeros in, nothing out. */
static int hvd__run_fused(const hvd__response_t *resp, hvd_handle_t *hs)
{
    const hvd__desc_t *descs = resp->descs;
    int n = resp->head.ndescs;
    size_t count = 0;
    ring_piece_t *pieces = malloc((size_t)n * sizeof *pieces + 1);
    if (!pieces) return HVD_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        pieces[i] = (ring_piece_t){hs[i] ? hs[i]->sendbuf : NULL,
                                   hs[i] ? hs[i]->recvbuf : NULL,
                                   descs[i].count};
        count += descs[i].count;
    }
    double t0 = hvd__now();
    int status = ring_ctx_allreduce_pieces(hvd__ctx, pieces, (size_t)n,
                                           (ring_dtype_t)descs[0].dtype,
                                           (ring_op_t)descs[0].op);
    double t1 = hvd__now();
    for (int i = 0; i < n; i++)
        if (hs[i])
            hvd__timeline_event(descs[i].name, hvd__phase(&descs[i], count),
                                t0, t1);
    free(pieces);
    return status;
}

int hvd__execute(const hvd__response_t *resp, hvd__list_t *pending,
                 int joined, double ready_s)
{
    int n = resp->head.ndescs, status = resp->head.status;
    hvd_handle_t *hs = calloc((size_t)n + 1, sizeof *hs);
    if (!hs) return HVD_ERR_NOMEM;
    double start = hvd__now();
    for (int i = 0; i < n; i++) {
        hs[i] = hvd__pending_take(pending, resp->descs[i].name);
        if (hs[i]) {
            hvd__timeline_event(resp->descs[i].name, "NEGOTIATE",
                                hs[i]->submit_s, ready_s);
            hvd__timeline_event(resp->descs[i].name, "QUEUE", ready_s, start);
        } else if (!joined && status == HVD_OK) {
            hvd__log(HVD__LOG_ERROR, "plan names '%s', not made here",
                     resp->descs[i].name);
        }
    }
    if (status != HVD_OK) {
        /* Every rank that made the request logs why it failed. */
        if (n > 0 && hs[0]) hvd__log(HVD__LOG_ERROR, "%s", resp->head.message);
    } else if (n > 1) {
        status = hvd__run_fused(resp, hs);
    } else if (n == 1) {
        status = hvd__run_one(&resp->descs[0], hs[0]);
        if (hs[0])
            hvd__timeline_event(resp->descs[0].name,
                                hvd__phase(&resp->descs[0],
                                           resp->descs[0].count),
                                start, hvd__now());
    }
    hvd__complete_many(hs, (size_t)n, status);
    free(hs);
    return status;
}
