/* ring/reduce_scatter.c: ring_reduce_scatter, the first N-1 steps of the
 * ring allreduce (see ring/allreduce.c for a walk-through): in step s rank r
 * sends block r-1-s and receives block r-2-s, so after N-1 steps it holds
 * the whole reduction of block r. */
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"

int ring_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                        ring_dtype_t dtype, ring_op_t op, MPI_Comm comm)
{
    int status, rank, size;
    const ring__tuning_t *tuning;
    char *scratch = NULL;
    status = ring__check_args("ring_reduce_scatter", sendbuf, recvbuf,
                              recvcount, dtype, op, comm);
    if (status == RING_OK) status = ring__tuning(&tuning);
    RING_CHECK(ring__agree(comm,
                           &(ring__call_t){.kind = RING__REDUCE_SCATTER,
                                           .count = recvcount,
                                           .dtype = dtype,
                                           .op = op},
                           status));
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    size_t esize = ring_dtype_size(dtype), nbytes = recvcount * esize;
    if (recvcount == 0) goto out;
    if (size == 1) {
        if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, nbytes);
        goto out;
    }
    /* In place, the caller's buffer holds the partial results; otherwise
     * they need a whole-size scratch, as recvbuf holds one block only. */
    char *buf = recvbuf;
    if (sendbuf != recvbuf) {
        buf = scratch = malloc(nbytes * (size_t)size);
        if (!scratch) {
            status = RING_ERR_NOMEM;
            goto out;
        }
    }
    RING_CHECK(ring__ring_blocks(sendbuf, buf, recvcount * size, dtype, op,
                                 size - 1, size - 1, comm));
    if (scratch) memcpy(recvbuf, scratch + nbytes * (size_t)rank, nbytes);
out:
    free(scratch);
    return status;
}
