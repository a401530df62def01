/* ring/begin.c: the one opening every collective goes through. It checks
 * the call (MPI up, communicator, dtype, op, root, buffers and their memory
 * kind, the tuning variables), has the ranks compare it under
 * HVD_RING_CHECK, and finds rank and size, so that the collectives
 * themselves start with their special cases. A rank that refuses its call
 * has sent nothing (but where the others would wait for it in the making
 * of the node's device window, ring/allreduce.c). */
#include <stdio.h>
#include "ring/ring_internal.h"

/* Whether p is device memory of this rank's device: sets c->dev and
 * *is_dev when it is; a message when it is another device's. */
static const char *ring__device_of(ring__coll_t *c, const void *p,
                                   int *is_dev)
{
    static __thread char why[160];
    const ring_dev_t *dev = ring_dev();
    int device, mine, kind = ring__memory_kind(p, &device);
    *is_dev = 0;
    if (kind < 0) return ring__kind_unknown;
    if (kind == 0) return NULL;
    if (dev->device(&mine) != RING_OK) return "cannot tell this rank's device";
    if (device != mine) {
        snprintf(why, sizeof why, "a buffer is memory of %s device %d, but "
                 "this rank uses device %d", dev->name, device, mine);
        return why;
    }
    c->dev = dev;
    *is_dev = 1;
    return NULL;
}

/* What is wrong with the call's arguments, or NULL; sets c->mem, and
 * c->dev for device buffers (then staged on host memory, unless
 * ring__begin finds MPI CUDA-aware or the rank alone). */
static const char *ring__bad_args(ring__coll_t *c, const void *sendbuf,
                                  const void *recvbuf)
{
    const char *why = NULL;
    c->mem = &ring__mem_host;
    c->dev = NULL;
    c->host_in = c->host_out = 0;
    if (c->comm == MPI_COMM_NULL) return "comm is MPI_COMM_NULL";
    if (ring_dtype_size(c->dtype) == 0) return "unknown dtype";
    if (c->op != RING__NO_OP && ring_op_name(c->op) == NULL)
        return "unknown op";
    if (c->op == RING_AVERAGE && c->dtype >= RING_INT32)
        return "average is for floating dtypes only (use sum)";
    if (c->count == 0) return NULL;
    if (sendbuf == NULL || recvbuf == NULL)
        return "NULL buffer with count > 0";
    if (c->kind >= RING__SHM_ALLREDUCE || c->kind == RING__ALLREDUCE_HIER)
        /* The window's own entry points, apply (its fn reads host memory)
         * and the bare hierarchical call take host memory only. */
        return ring__mem_of(sendbuf, &why) && ring__mem_of(recvbuf, &why)
                   ? NULL : why;
    int dev_in, dev_out;
    why = ring__device_of(c, sendbuf, &dev_in);
    if (!why) why = ring__device_of(c, recvbuf, &dev_out);
    if (!why && c->dev) {
        c->host_in = !dev_in;
        c->host_out = !dev_out;
    }
    return why;
}

/* The checks that need the communicator's size, or the tuning. */
static int ring__check_call(ring__coll_t *c, const void *sendbuf,
                            const void *recvbuf)
{
    int status = ring__check_mpi_up(c->func);
    if (status != RING_OK) return status;
    const char *why = ring__bad_args(c, sendbuf, recvbuf);
    if (why) {
        ring__log("%s: %s (count=%zu dtype=%d op=%d)", c->func, why,
                  c->count, (int)c->dtype, (int)c->op);
        return why == ring__kind_unknown ? RING_ERR_CUDA : RING_ERR_ARG;
    }
    if ((unsigned)c->algo >= RING_ALGO_COUNT) {
        ring__log("%s: unknown algorithm %d", c->func, (int)c->algo);
        return RING_ERR_ARG;
    }
    if (c->kind == RING__BROADCAST) {
        int size;
        if (MPI_Comm_size(c->comm, &size) != MPI_SUCCESS) return RING_ERR_MPI;
        if (c->root < 0 || c->root >= size) {
            ring__log("%s: root %d is not a rank of a communicator of size "
                      "%d", c->func, c->root, size);
            return RING_ERR_ARG;
        }
    }
    status = ring__tuning(&c->tuning);
    /* AUTO means the variable's choice; the ranks compare the outcome. */
    if (status == RING_OK &&
        (c->kind == RING__ALLREDUCE || c->kind == RING__ALLREDUCE_APPLY ||
         c->kind == RING__ALLREDUCE_REGISTERED) &&
        c->algo == RING_ALGO_AUTO)
        c->algo = c->tuning->algo;
    c->esize = ring_dtype_size(c->dtype);
    return status;
}

/* An MPI that reads device memory runs the host algorithms on it; so
 * does a rank alone, whose data MPI never reads: its call is a copy at
 * most, on the device, where staging went through the host and made the
 * host wait for the device for the identity. Before the agreement, so
 * that a rank that cannot bind the context's stream refuses there, as
 * for its arguments. */
static int ring__device_direct(ring__coll_t *c)
{
    int size;
    if (MPI_Comm_size(c->comm, &size) != MPI_SUCCESS) return RING_ERR_MPI;
    if (size > 1 && !ring__cuda_aware(c->dev)) return RING_OK;
    c->mem = &ring__mem_device;
    return ring__mem_device_bind(c->ctx);
}

int ring__begin(ring__coll_t *c, const void *sendbuf, const void *recvbuf,
                int local)
{
    int status = RING_OK;
    if (!c->ctx) {
        ring__log("%s: ctx is NULL", c->func);
        return RING_ERR_ARG;
    }
    int hier = c->kind == RING__ALLREDUCE_HIER ||
               c->kind == RING__SHM_ALLREDUCE_HIER;
    c->comm = c->ctx->comm;
    if (local == RING_OK) local = ring__check_call(c, sendbuf, recvbuf);
    if (local == RING_OK && c->dev) local = ring__device_direct(c);
    if (hier) local = ring__agree(c->ctx->node, c, local);
    RING_CHECK(ring__agree(hier ? c->ctx->cross : c->comm, c, local));
    RING_CHECK_MPI(MPI_Comm_rank(c->comm, &c->rank));
    RING_CHECK_MPI(MPI_Comm_size(c->comm, &c->size));
out:
    return status;
}
