/* hvd/execute.c: runs one response of a plan on this rank: packs fused
 * allreduces into the fusion buffer, calls ring, copies results out and
 * completes the handles. A rank that has joined has no request of its own
 * and takes part with zeros (its results are dropped). Host memory only
 * for now.
 *
 * When every rank is on this node (and HVD_INTRANODE allows), allreduces go
 * through ring_shm_allreduce and the fusion buffer is this rank's slab of
 * the shared window: tensors are packed straight into shared memory, where
 * the other ranks read them. Across nodes with HVD_HIERARCHICAL_ALLREDUCE,
 * the same window is each node's stage and the blocks cross between nodes
 * over a communicator of one rank per node. */
#include <stdlib.h>
#include <string.h>
#include "hvd/execute.h"
#include "hvd/timeline.h"
#include "hvd/topology.h"

/* Grown on demand, up to HVD_FUSION_THRESHOLD (fusion) or to the largest
 * collective a joined rank takes part in (scratch). */
static struct {
    char *data;
    size_t cap;
} hvd__fusion, hvd__scratch;

static ring_shm_t *hvd__shm; /* NULL: the ring over MPI */
/* HVD_HIERARCHICAL_ALLREDUCE across nodes: this rank's node, and the ranks
 * with its local rank on every node (MPI_COMM_NULL when flat). */
static MPI_Comm hvd__node_comm = MPI_COMM_NULL, hvd__cross_comm = MPI_COMM_NULL;

/* The slab holds the fusion buffer; fusion off, it still carries unfused
 * tensors in chunks of at least this size. */
enum { HVD__SHM_MIN_SLAB = 4 << 20 };

/* With HVD_INTRANODE=auto, smaller allreduces take the ring: below it the
 * ring's recursive doubling over MPI was faster (bench/README.md: shm 0.6x
 * of it under 512 B at 2 ranks, 0.2-0.4x under 4 KiB at 4 ranks on 2
 * cores, where waiting ranks must yield their core); from it shm was level
 * or faster at every size. */
enum { HVD__SHM_AUTO_MIN_BYTES = 4 << 10 };

/* The two communicators of the hierarchical allreduce, when asked for and
 * every node has as many ranks (its blocks must match across nodes);
 * otherwise the flat ring, with a warning. */
static int hvd__hier_init(int nnodes)
{
    const hvd__topo_t *t = &hvd__topo;
    int rank = hvd__engine.rank;
    if (!hvd__engine.config.hierarchical || nnodes == 1) return HVD_OK;
    for (int n = 1; n < nnodes; n++)
        if (t->node_size[n] != t->node_size[0]) {
            if (rank == 0)
                hvd__log(HVD__LOG_WARNING, "HVD_HIERARCHICAL_ALLREDUCE=1: "
                         "nodes hold %d and %d ranks; it needs the same "
                         "number on every node, so the flat ring runs",
                         t->node_size[0], t->node_size[n]);
            return HVD_OK;
        }
    if (MPI_Comm_split(hvd__engine.comm, t->node_idx[rank], t->local_rank[rank],
                       &hvd__node_comm) != MPI_SUCCESS ||
        MPI_Comm_split(hvd__engine.comm, t->local_rank[rank], t->node_idx[rank],
                       &hvd__cross_comm) != MPI_SUCCESS)
        return HVD_ERR_MPI;
    if (rank == 0)
        hvd__log(HVD__LOG_INFO, "hierarchical allreduce: %d nodes of %d ranks",
                 nnodes, t->node_size[0]);
    return HVD_OK;
}

int hvd__execute_init(int nnodes)
{
    hvd__intranode_t mode = hvd__engine.config.intranode;
    int status = hvd__hier_init(nnodes);
    if (status != HVD_OK) return status;
    /* Shared memory is the whole allreduce on one node, and the node's
     * stage of the hierarchical one across nodes. */
    int hier = hvd__node_comm != MPI_COMM_NULL;
    if (mode == HVD__INTRANODE_SHM && nnodes > 1 && !hier) {
        hvd__log(HVD__LOG_ERROR, "HVD_INTRANODE=shm: the %d ranks span %d "
                 "nodes; shared memory needs them on one (use auto or ring, "
                 "or HVD_HIERARCHICAL_ALLREDUCE=1 for it within each node)",
                 hvd__engine.size, nnodes);
        return HVD_ERR_ARG;
    }
    if (mode == HVD__INTRANODE_RING || (nnodes > 1 && !hier) ||
        hvd__engine.size == 1)
        return HVD_OK;
    size_t slab = hvd__engine.config.fusion_threshold;
    if (slab < HVD__SHM_MIN_SLAB) slab = HVD__SHM_MIN_SLAB;
    status = ring_shm_create(hier ? hvd__node_comm : hvd__engine.comm, slab,
                             &hvd__shm);
    if (status == HVD_OK && hvd__engine.rank == 0)
        hvd__log(HVD__LOG_INFO, "allreduce through shared memory%s, %zu-byte "
                 "slab per rank", hier ? " within each node" : "", slab);
    return status;
}

/* Whether an allreduce of nbytes goes through shared memory. */
static int hvd__use_shm(size_t nbytes)
{
    return hvd__shm && (nbytes >= HVD__SHM_AUTO_MIN_BYTES ||
                        hvd__engine.config.intranode == HVD__INTRANODE_SHM);
}

/* An allreduce of host data: through shared memory, or around the ring. */
static int hvd__allreduce(const void *sendbuf, void *recvbuf, size_t count,
                          ring_dtype_t dtype, ring_op_t op)
{
    if (hvd__use_shm(count * ring_dtype_size(dtype)))
        return hvd__cross_comm != MPI_COMM_NULL
                   ? ring_shm_allreduce_hier(hvd__shm, hvd__cross_comm,
                                             sendbuf, recvbuf, count, dtype,
                                             op)
                   : ring_shm_allreduce(hvd__shm, sendbuf, recvbuf, count,
                                        dtype, op);
    if (hvd__node_comm != MPI_COMM_NULL)
        return ring_allreduce_hier(sendbuf, recvbuf, count, dtype, op,
                                   hvd__node_comm, hvd__cross_comm);
    return ring_allreduce(sendbuf, recvbuf, count, dtype, op, hvd__ring_comm);
}

static char *hvd__grow(char **data, size_t *cap, size_t nbytes)
{
    if (nbytes > *cap) {
        char *bigger = realloc(*data, nbytes);
        if (!bigger) return NULL;
        *data = bigger;
        *cap = nbytes;
    }
    return *data;
}

/* Whether an allreduce with apply of nbytes goes through shared memory:
 * only when that is the whole allreduce (one node), where each block has
 * one owner among all ranks. */
static int hvd__use_shm_apply(size_t nbytes)
{
    return hvd__use_shm(nbytes) && hvd__cross_comm == MPI_COMM_NULL;
}

/* Within one node each block is applied by its owner as it is reduced.
 * Elsewhere every rank reduces the whole into the fusion buffer and
 * applies all of it there, so apply never sees recvbuf. */
static int hvd__allreduce_apply(const float *sendbuf, float *recvbuf,
                                size_t count, ring_op_t op,
                                const ring_apply_t *apply)
{
    size_t nbytes = count * sizeof(float);
    if (hvd__use_shm_apply(nbytes))
        return ring_shm_allreduce_apply(hvd__shm, sendbuf, recvbuf, count,
                                        RING_FLOAT32, op, apply);
    char *buf = hvd__grow(&hvd__fusion.data, &hvd__fusion.cap, nbytes + 1);
    if (!buf) return HVD_ERR_NOMEM;
    int status = hvd__allreduce(sendbuf, buf, count, RING_FLOAT32, op);
    if (status != HVD_OK) return status;
    apply->fn(apply->ctx, 0, buf, count);
    memcpy(recvbuf, buf, nbytes);
    return HVD_OK;
}

/* nbytes of zeros, for a joined rank. */
static char *hvd__zeros(size_t nbytes)
{
    char *z = hvd__grow(&hvd__scratch.data, &hvd__scratch.cap, nbytes + 1);
    if (z) memset(z, 0, nbytes);
    return z;
}

/* The timeline's name for running a collective: allreduces say which
 * path they took. */
static const char *hvd__phase(const hvd__desc_t *d, size_t nbytes)
{
    int hier = hvd__node_comm != MPI_COMM_NULL;
    if (d->kind == HVD__ALLREDUCE_APPLY)
        return hvd__use_shm_apply(nbytes) ? "SHM_ALLREDUCE_APPLY"
                                          : "ALLREDUCE_APPLY";
    if (d->kind != HVD__ALLREDUCE) return hvd__kind_name(d->kind);
    if (hvd__use_shm(nbytes)) return hier ? "HIER_SHM_ALLREDUCE" : "SHM_ALLREDUCE";
    return hier ? "HIER_ALLREDUCE" : "RING_ALLREDUCE";
}

void hvd__execute_free(void)
{
    free(hvd__fusion.data);
    free(hvd__scratch.data);
    ring_shm_free(&hvd__shm);
    if (hvd__node_comm != MPI_COMM_NULL) MPI_Comm_free(&hvd__node_comm);
    if (hvd__cross_comm != MPI_COMM_NULL) MPI_Comm_free(&hvd__cross_comm);
    memset(&hvd__fusion, 0, sizeof hvd__fusion);
    memset(&hvd__scratch, 0, sizeof hvd__scratch);
}

/* One collective on one tensor, where it lies. */
static int hvd__run_one(const hvd__desc_t *d, hvd_handle_t h)
{
    size_t nbytes = hvd__desc_bytes(d);
    ring_dtype_t dtype = (ring_dtype_t)d->dtype;
    switch (d->kind) {
    case HVD__ALLREDUCE: {
        char *z = h ? NULL : hvd__zeros(nbytes);
        if (!h && !z) return HVD_ERR_NOMEM;
        return hvd__allreduce(h ? h->sendbuf : z, h ? h->recvbuf : z,
                              d->count, dtype, (ring_op_t)d->op);
    }
    case HVD__ALLREDUCE_APPLY: /* never with a joined rank (coordinator) */
        if (!h) return HVD_ERR_STATE;
        return hvd__allreduce_apply(h->sendbuf, h->recvbuf, d->count,
                                    (ring_op_t)d->op, &h->apply);
    case HVD__BROADCAST: {
        char *z = h ? NULL : hvd__zeros(nbytes);
        if (!h && !z) return HVD_ERR_NOMEM;
        return ring_broadcast(h ? h->recvbuf : z, d->count, dtype,
                              hvd__topo.ring_rank[d->root], hvd__ring_comm);
    }
    case HVD__ALLGATHER: {
        /* A joined rank: nbytes of zeros to give, then room for all. In
         * rank order (hvd__engine.comm): the result is laid out by rank. */
        size_t all = nbytes * (size_t)hvd__engine.size;
        char *z = h ? NULL : hvd__zeros(nbytes + all);
        if (!h && !z) return HVD_ERR_NOMEM;
        return ring_allgather(h ? h->sendbuf : z, h ? h->recvbuf : z + nbytes,
                              d->count, dtype, hvd__engine.comm);
    }
    default: /* a barrier: agreeing that every rank reached it was all */
        return HVD_OK;
    }
}

/* Whether this rank's tensors of a group are in place and tile one range
 * in the group's order (a model's gradient slab does): then that range is
 * the group, reduced where it lies. The element order is the group's on
 * every rank, packed or not, so ranks may differ in this. */
static int hvd__tiled(const hvd__desc_t *descs, const hvd_handle_t *hs, int n)
{
    for (int i = 0; i < n; i++) {
        if (!hs[i] || hs[i]->sendbuf != hs[i]->recvbuf) return 0;
        if (i > 0 && (char *)hs[i - 1]->recvbuf +
                                 hvd__desc_bytes(&descs[i - 1]) !=
                         (char *)hs[i]->recvbuf)
            return 0;
    }
    return 1;
}

/* Several allreduces of one dtype and op: where they lie when they tile a
 * range, else through the fusion buffer. */
static int hvd__run_fused(const hvd__response_t *resp, hvd_handle_t *hs)
{
    const hvd__desc_t *descs = resp->descs;
    int n = resp->head.ndescs;
    size_t total = 0, count = 0;
    for (int i = 0; i < n; i++) {
        total += hvd__desc_bytes(&descs[i]);
        count += descs[i].count;
    }
    if (hvd__tiled(descs, hs, n)) {
        double t0 = hvd__now();
        int status = hvd__allreduce(hs[0]->recvbuf, hs[0]->recvbuf, count,
                                    (ring_dtype_t)descs[0].dtype,
                                    (ring_op_t)descs[0].op);
        double t1 = hvd__now();
        for (int i = 0; i < n; i++)
            hvd__timeline_event(descs[i].name, hvd__phase(&descs[i], total),
                                t0, t1);
        return status;
    }
    char *buf = NULL;
    size_t slab_bytes = 0;
    if (hvd__use_shm(total)) {
        int status = ring_shm_slab(hvd__shm, (void **)&buf, &slab_bytes);
        if (status != HVD_OK) return status;
    }
    /* A group fits the slab (fusion stops at the threshold), but a private
     * buffer is right whatever the sizes. */
    if (!buf || total > slab_bytes)
        buf = hvd__grow(&hvd__fusion.data, &hvd__fusion.cap, total + 1);
    if (!buf) return HVD_ERR_NOMEM;
    double t0 = hvd__now();
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t nb = hvd__desc_bytes(&descs[i]);
        if (hs[i]) memcpy(buf + at, hs[i]->sendbuf, nb);
        else memset(buf + at, 0, nb);
        at += nb;
    }
    double t1 = hvd__now();
    int status = hvd__allreduce(buf, buf, count, (ring_dtype_t)descs[0].dtype,
                                (ring_op_t)descs[0].op);
    double t2 = hvd__now();
    at = 0;
    for (int i = 0; status == HVD_OK && i < n; i++) {
        size_t nb = hvd__desc_bytes(&descs[i]);
        if (hs[i]) memcpy(hs[i]->recvbuf, buf + at, nb);
        at += nb;
    }
    double t3 = hvd__now();
    for (int i = 0; i < n; i++) {
        if (!hs[i]) continue;
        hvd__timeline_event(descs[i].name, "MEMCPY_IN_FUSION_BUFFER", t0, t1);
        hvd__timeline_event(descs[i].name, hvd__phase(&descs[i], total), t1,
                            t2);
        hvd__timeline_event(descs[i].name, "MEMCPY_OUT_FUSION_BUFFER", t2, t3);
    }
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
                                           hvd__desc_bytes(&resp->descs[0])),
                                start, hvd__now());
    }
    hvd__complete_many(hs, (size_t)n, status);
    free(hs);
    return status;
}
