/* ring/allgather.c: the ring allgather, alone (ring_allgather) and as the
 * second half of the ring allreduce: rank r sends block r, then forwards
 * each block it receives, N-1 steps in all. */
#include <string.h>
#include "ring/ring_internal.h"

int ring__allgather_blocks(void *buf, size_t count, ring_dtype_t dtype,
                           MPI_Comm comm)
{
    int status, rank, size;
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    ring__phase_t phase = {
        .comm = comm,
        .left = ring__mod(rank - 1, size),
        .right = ring__mod(rank + 1, size),
        .count = count,
        .nblocks = size,
        .dtype = dtype,
        .buf = buf,
        .send_block = rank,
        .recv_block = ring__mod(rank - 1, size),
        .nrecv_steps = size - 1,
        .nforward = size - 2,
    };
    status = ring__phase_run(&phase);
out:
    return status;
}

int ring_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                   ring_dtype_t dtype, MPI_Comm comm)
{
    int status, rank, size;
    const ring__tuning_t *tuning;
    RING_CHECK(ring__check_args("ring_allgather", sendbuf, recvbuf, sendcount,
                                dtype, RING__NO_OP, comm));
    RING_CHECK(ring__tuning(&tuning));
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    size_t nbytes = sendcount * ring_dtype_size(dtype);
    char *own = (char *)recvbuf + nbytes * (size_t)rank;
    if (sendcount == 0) goto out;
    if (sendbuf != own) memcpy(own, sendbuf, nbytes);
    if (size > 1)
        RING_CHECK(ring__allgather_blocks(recvbuf, sendcount * size, dtype,
                                          comm));
out:
    return status;
}
