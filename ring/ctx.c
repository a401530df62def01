/* ring/ctx.c: contexts. ring_ctx_create does once, for a communicator,
 * what every call would otherwise redo or leave to its caller: check that
 * the ranks read ring's variables alike, find the nodes, make the
 * communicators of the hierarchical allreduce and the shared window, and
 * keep the scratch a fused call packs into. Which algorithm a call takes
 * is then decided per call from the context (ring/allreduce.c).
 *
 * The entry points that take an MPI_Comm wrap it in a context on the
 * stack (ring__ctx_wrap) that holds nothing: they run over MPI only, as
 * before contexts existed, and cost no allocation.
 */
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"

ring_ctx_t ring__ctx_wrap(MPI_Comm comm, MPI_Comm node, MPI_Comm cross,
                          ring_shm_t *shm)
{
    return (ring_ctx_t){.comm = comm, .node = node, .cross = cross,
                        .shm = shm, .wrapped = 1};
}

char *ring__ctx_scratch(ring_ctx_t *ctx, size_t nbytes)
{
    if (nbytes == 0) nbytes = 1; /* a pointer to hand out all the same */
    if (nbytes > ctx->scratch_bytes) {
        char *bigger = realloc(ctx->scratch, nbytes);
        if (!bigger) return NULL;
        ctx->scratch = bigger;
        ctx->scratch_bytes = nbytes;
    }
    return ctx->scratch;
}

/* The nodes: how many, and whether each holds as many ranks. local is
 * this rank's node, local_rank its index there. */
static int ring__ctx_nodes(ring_ctx_t *ctx, MPI_Comm local, int local_rank,
                           int *nnodes, int *least, int *most)
{
    int status = RING_OK, local_size, range[2];
    RING_CHECK_MPI(MPI_Comm_size(local, &local_size));
    int first = local_rank == 0;
    RING_CHECK_MPI(MPI_Allreduce(&first, nnodes, 1, MPI_INT, MPI_SUM,
                                 ctx->comm));
    range[0] = local_size;
    range[1] = -local_size;
    RING_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_INT, MPI_MAX,
                                 ctx->comm));
    *most = range[0];
    *least = -range[1];
out:
    return status;
}

/* *slab, the window's slab asked for, as the shared memory of every
 * node has room for it (ring/shm_room.c): halved until it fits, down to
 * RING_CTX_SLAB_MIN (a fused allreduce larger than the slab runs in
 * pieces); 0 where not even that fits: no window, the allreduces within
 * the node go over MPI, or with HVD_INTRANODE=shm RING_ERR_NOMEM. The
 * least over every node, so that all take the same way. Said by rank 0
 * when it is not the slab asked for. */
static int ring__ctx_slab_fits(ring_ctx_t *ctx, MPI_Comm node,
                               ring_intranode_t intranode, size_t *slab)
{
    int status = RING_OK, n, rank;
    uint64_t room;
    RING_CHECK_MPI(MPI_Comm_size(node, &n));
    RING_CHECK_MPI(MPI_Comm_rank(ctx->comm, &rank));
    RING_CHECK(ring__shm_room(node, &room));
    unsigned long long fits = ring__shm_fit(n, *slab, room);
    RING_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &fits, 1,
                                 MPI_UNSIGNED_LONG_LONG, MPI_MIN, ctx->comm));
    if (fits == *slab) goto out;
    if (rank == 0 && fits == 0)
        ring__log("%s: a node's %s has too little room for the shared "
                  "window (about %llu bytes for %d slabs of %d bytes, the "
                  "least; rank 0's node has %llu free): %s; give the node "
                  "more shared memory (docker run --shm-size, a larger "
                  "/dev/shm)",
                  intranode == RING_INTRANODE_SHM ? "ring_ctx_create: "
                                                    "HVD_INTRANODE=shm"
                                                  : "warning",
                  ring__shm_dir(),
                  (unsigned long long)ring__shm_need(n, RING_CTX_SLAB_MIN),
                  n, RING_CTX_SLAB_MIN, (unsigned long long)room,
                  intranode == RING_INTRANODE_SHM
                      ? "it cannot be made (HVD_INTRANODE=auto goes on "
                        "without it)"
                      : "allreduces within the node go over MPI, slower");
    else if (rank == 0)
        ring__log("warning: a node's %s has too little room for the shared "
                  "window's slabs of %zu bytes (rank 0's node has %llu "
                  "bytes free): they are %llu bytes, and a fused allreduce "
                  "larger than that runs in pieces (hvd: "
                  "HVD_FUSION_THRESHOLD); slabs of %zu bytes want about "
                  "%llu bytes there (docker run --shm-size, a larger "
                  "/dev/shm)",
                  ring__shm_dir(), *slab, (unsigned long long)room, fits,
                  *slab, (unsigned long long)ring__shm_need(n, *slab));
    if (fits == 0 && intranode == RING_INTRANODE_SHM) status = RING_ERR_NOMEM;
    *slab = (size_t)fits;
out:
    return status;
}

/* What opts ask for, given the nodes: the hierarchical communicators and
 * the window. Every rank reaches the same decisions from the same
 * numbers. */
static int ring__ctx_build(ring_ctx_t *ctx, const ring_ctx_opts_t *opts,
                           MPI_Comm *local)
{
    int status = RING_OK, rank, size, nnodes, least, most, local_rank;
    RING_CHECK_MPI(MPI_Comm_rank(ctx->comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(ctx->comm, &size));
    RING_CHECK_MPI(MPI_Comm_rank(*local, &local_rank));
    RING_CHECK(ring__ctx_nodes(ctx, *local, local_rank, &nnodes, &least,
                               &most));
    if (opts->hierarchical && nnodes > 1 && least != most) {
        if (rank == 0)
            ring__log("warning: HVD_HIERARCHICAL_ALLREDUCE=1: nodes hold %d "
                      "and %d ranks; it needs the same number on every "
                      "node, so the flat ring runs", most, least);
    } else if (opts->hierarchical && nnodes > 1) {
        ctx->node = *local;
        *local = MPI_COMM_NULL;
        RING_CHECK_MPI(MPI_Comm_split(ctx->comm, local_rank, rank,
                                      &ctx->cross));
    }
    int hier = ctx->cross != MPI_COMM_NULL;
    if (opts->intranode == RING_INTRANODE_SHM && nnodes > 1 && !hier) {
        ring__log("ring_ctx_create: HVD_INTRANODE=shm: the %d ranks span %d "
                  "nodes; shared memory needs them on one (use auto or "
                  "ring, or HVD_HIERARCHICAL_ALLREDUCE=1 for it within "
                  "each node)", size, nnodes);
        status = RING_ERR_ARG;
        goto out;
    }
    if (opts->intranode == RING_INTRANODE_RING || size == 1 ||
        (nnodes > 1 && !hier))
        goto out;
    size_t slab = opts->slab_bytes > RING_CTX_SLAB_MIN ? opts->slab_bytes
                                                        : RING_CTX_SLAB_MIN;
    MPI_Comm node = hier ? ctx->node : ctx->comm;
    RING_CHECK(ring__ctx_slab_fits(ctx, node, opts->intranode, &slab));
    if (slab == 0) goto out;
    status = ring_shm_create(node, slab, &ctx->shm);
    /* Every node has its window, or none keeps one: room read a moment
     * ago may be gone (another job's files), and nodes that went
     * different ways would cut different messages. */
    int made = status == RING_OK, all;
    RING_CHECK_MPI(MPI_Allreduce(&made, &all, 1, MPI_INT, MPI_MIN,
                                 ctx->comm));
    if (all) goto out;
    RING_CHECK(ring_shm_free(&ctx->shm));
    if (status == RING_OK || status == RING_ERR_NOMEM) {
        status = opts->intranode == RING_INTRANODE_SHM ? RING_ERR_NOMEM
                                                        : RING_OK;
        if (rank == 0 && status == RING_OK)
            ring__log("warning: a node could not make the shared window "
                      "(its rank 0 says why): allreduces within the node "
                      "go over MPI, slower");
    }
out:
    return status;
}

int ring_ctx_create(MPI_Comm comm, const ring_ctx_opts_t *opts,
                    ring_ctx_t **out)
{
    int status = RING_OK;
    ring_ctx_opts_t o = opts ? *opts : (ring_ctx_opts_t){0};
    MPI_Comm local = MPI_COMM_NULL;
    ring_ctx_t *ctx = NULL;
    RING_CHECK(ring__check_mpi_up("ring_ctx_create"));
    if (!out || comm == MPI_COMM_NULL ||
        (unsigned)o.intranode >= RING_INTRANODE_COUNT ||
        (o.hierarchical != 0 && o.hierarchical != 1)) {
        ring__log("ring_ctx_create: %s",
                  !out                   ? "ctx is NULL"
                  : comm == MPI_COMM_NULL ? "comm is MPI_COMM_NULL"
                  : o.hierarchical != 0 && o.hierarchical != 1
                      ? "hierarchical is neither 0 nor 1"
                      : "unknown intranode");
        return RING_ERR_ARG;
    }
    *out = NULL;
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) return RING_ERR_NOMEM;
    *ctx = ring__ctx_wrap(MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, NULL);
    ctx->wrapped = 0;
    ctx->intranode = o.intranode;
    RING_CHECK_MPI(MPI_Comm_dup(comm, &ctx->comm));
    RING_CHECK(ring__tuning_agree(ctx->comm));
    /* Ranks that ask for other windows or stages would go separate ways
     * in the collectives below, and wait there for each other. */
    int mine[4] = {o.intranode, o.hierarchical, -o.intranode,
                   -o.hierarchical},
        most[4];
    RING_CHECK_MPI(MPI_Allreduce(mine, most, 4, MPI_INT, MPI_MAX, ctx->comm));
    for (int f = 0; f < 2; f++)
        if (most[f] != -most[f + 2]) {
            ring__log("ring_ctx_create: the ranks ask for different %s (%d "
                      "and %d): every rank must pass the same opts",
                      f ? "hierarchical" : "intranode", -most[f + 2],
                      most[f]);
            status = RING_ERR_MISMATCH;
            goto out;
        }
    RING_CHECK_MPI(MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, 0,
                                       MPI_INFO_NULL, &local));
    RING_CHECK(ring__ctx_build(ctx, &o, &local));
    *out = ctx;
    ctx = NULL;
out:
    if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
    if (ctx) ring_ctx_free(&ctx);
    return status;
}

int ring_ctx_free(ring_ctx_t **ctxp)
{
    int status = RING_OK;
    ring_ctx_t *ctx = ctxp ? *ctxp : NULL;
    if (!ctx) return RING_OK;
    RING_CHECK(ring__check_mpi_up("ring_ctx_free"));
    ring__ipc_free(&ctx->ipc);
    RING_CHECK(ring_shm_free(&ctx->shm));
    MPI_Comm *comms[] = {&ctx->cross, &ctx->node, &ctx->comm};
    for (int i = 0; i < 3; i++)
        if (*comms[i] != MPI_COMM_NULL) RING_CHECK_MPI(MPI_Comm_free(comms[i]));
out:
    ring__stage_free(&ctx->stage);
    if (ctx->work) ring_dev()->stream_destroy(ctx->work);
    free(ctx->scratch);
    free(ctx);
    *ctxp = NULL;
    return status;
}
