/* ring/check.c: HVD_RING_CHECK=1, every collective's agreement check.
 *
 * ring/ has no negotiation: every rank must make the same call (kind,
 * count, dtype, op, root, algorithm, host or device buffers, and the
 * tuning variables, which set how the data is cut into messages). A call that differs on one rank
 * leaves the ranks' messages unpaired: they hang, fail inside MPI, or, when
 * the sizes happen to pair up, return wrong data. And a rank that refuses
 * its own arguments returns at once while the others wait for it.
 *
 * With HVD_RING_CHECK=1 on every rank, each collective first compares its
 * call across the ranks in one small MPI_Allreduce (the maximum of every
 * field and of its negation), as PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL
 * does before each of its collectives. When they differ, or some rank
 * refused its arguments, every rank fails before any data moves, so the
 * communicator stays usable. It is off by default because it adds a round
 * trip to every call, and hvd's calls are negotiated already.
 */
#include <inttypes.h>
#include <stdio.h>
#include "ring/ring_internal.h"

static const char *const ring__kind_names[RING__KIND_COUNT] = {
    [RING__ALLREDUCE] = "ring_allreduce",
    [RING__ALLREDUCE_HIER] = "ring_allreduce_hier",
    [RING__REDUCE_SCATTER] = "ring_reduce_scatter",
    [RING__ALLGATHER] = "ring_allgather",
    [RING__BROADCAST] = "ring_broadcast",
    [RING__ALLREDUCE_REGISTERED] = "ring_ctx_allreduce_registered",
    [RING__SHM_ALLREDUCE] = "ring_shm_allreduce",
    [RING__SHM_ALLREDUCE_HIER] = "ring_shm_allreduce_hier",
    [RING__SHM_ALLREDUCE_APPLY] = "ring_shm_allreduce_apply",
    [RING__ALLREDUCE_APPLY] = "ring_ctx_allreduce_apply",
};

const char *ring__kind_name(ring__kind_t kind)
{
    return (unsigned)kind < RING__KIND_COUNT ? ring__kind_names[kind] : NULL;
}

/* The compared fields, in the order a mismatch is reported. */
enum {
    F_KIND,
    F_COUNT,
    F_DTYPE,
    F_OP,
    F_ROOT,
    F_ALGO,
    F_DEVICE,
    F_SEGMENT,
    F_SMALL,
    F_SHM_SEGMENT,
    F_REFUSED, /* 1 when this rank refused its arguments */
    NFIELDS
};

static const char *const ring__field_names[NFIELDS] = {
    "the collective", "count", "dtype", "op", "root", "algorithm",
    "device buffers (1) or host (0)", "HVD_RING_SEGMENT_BYTES", "HVD_RING_SMALL_BYTES", "HVD_SHM_SEGMENT_BYTES",
    "refused",
};

/* A field's value as text: names where there are names. */
static void ring__field_text(int field, int64_t v, char *out, size_t size)
{
    const char *name = NULL;
    if (field == F_KIND) name = ring__kind_name((ring__kind_t)v);
    if (field == F_DTYPE) name = ring_dtype_name((ring_dtype_t)v);
    if (field == F_OP) name = v < 0 ? "none" : ring_op_name((ring_op_t)v);
    if (field == F_ALGO) name = ring_algo_name((ring_algo_t)v);
    if (name)
        snprintf(out, size, "%s", name);
    else
        snprintf(out, size, "%" PRId64, v);
}

int ring__agree(MPI_Comm comm, const ring__coll_t *call, int local)
{
    int status = local;
    const ring__tuning_t *tuning;
    /* A bad tuning variable leaves the flag as parsed: HVD_RING_CHECK is
     * read first. */
    ring__tuning(&tuning);
    if (!tuning->check || local == RING_ERR_STATE || comm == MPI_COMM_NULL)
        return local;
    const int64_t mine[NFIELDS] = {
        [F_KIND] = call->kind,
        [F_COUNT] = (int64_t)call->count,
        [F_DTYPE] = call->dtype,
        [F_OP] = call->op,
        [F_ROOT] = call->root,
        [F_ALGO] = call->algo,
        [F_DEVICE] = call->dev != NULL,
        [F_SEGMENT] = (int64_t)tuning->segment_bytes,
        [F_SMALL] = (int64_t)tuning->small_bytes,
        [F_SHM_SEGMENT] = (int64_t)tuning->shm_segment_bytes,
        [F_REFUSED] = local != RING_OK,
    };
    /* One reduction gives both ends: max of v and of -v (= -min). */
    int64_t range[2 * NFIELDS];
    for (int f = 0; f < NFIELDS; f++) {
        range[f] = mine[f];
        range[NFIELDS + f] = -mine[f];
    }
    RING_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, range, 2 * NFIELDS,
                                 MPI_INT64_T, MPI_MAX, comm));
    if (local != RING_OK) return local; /* its own message said why */
    const char *func = call->func;
    if (range[F_REFUSED]) {
        ring__log("%s: another rank refused its call (HVD_RING_CHECK; its "
                  "message says why)", func);
        return RING_ERR_MISMATCH;
    }
    for (int f = 0; f < F_REFUSED; f++) {
        int64_t lo = -range[NFIELDS + f], hi = range[f];
        if (lo == hi) continue;
        char own[32], a[32], b[32];
        ring__field_text(f, mine[f], own, sizeof own);
        ring__field_text(f, lo, a, sizeof a);
        ring__field_text(f, hi, b, sizeof b);
        ring__log("%s: ranks disagree on %s (HVD_RING_CHECK): this rank "
                  "has %s, the ranks range from %s to %s", func,
                  ring__field_names[f], own, a, b);
        return RING_ERR_MISMATCH;
    }
out:
    return status;
}
