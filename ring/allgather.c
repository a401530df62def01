/* ring/allgather.c: ring_allgather, the last N-1 steps of the ring
 * allreduce: rank r sends block r, then forwards each block it receives. */
#include <string.h>
#include "ring/ring_internal.h"

int ring_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                   ring_dtype_t dtype, MPI_Comm comm)
{
    int status, rank, size;
    const ring__tuning_t *tuning;
    status = ring__check_args("ring_allgather", sendbuf, recvbuf, sendcount,
                              dtype, RING__NO_OP, comm);
    if (status == RING_OK) status = ring__tuning(&tuning);
    RING_CHECK(ring__agree(comm,
                           &(ring__call_t){.kind = RING__ALLGATHER,
                                           .count = sendcount,
                                           .dtype = dtype,
                                           .op = RING__NO_OP},
                           status));
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    size_t nbytes = sendcount * ring_dtype_size(dtype);
    char *own = (char *)recvbuf + nbytes * (size_t)rank;
    if (sendcount == 0) goto out;
    if (sendbuf != own) memcpy(own, sendbuf, nbytes);
    if (size > 1)
        RING_CHECK(ring__ring_blocks(NULL, recvbuf, sendcount * size, dtype,
                                     RING__NO_OP, 0, size - 1, comm));
out:
    return status;
}
