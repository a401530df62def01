/* ring/broadcast.c: ring_broadcast. Small messages go down a binomial tree
 * (ceil(log2 N) hops); large ones along a pipelined chain root -> root+1 ->
 * ... in segments, so every link carries the message once and the time is
 * about one message plus N-2 segments. */
#include "ring/ring_internal.h"

enum { RING_BCAST_TAG = 0x7262 };

/* Binomial tree over ranks relative to the root: vrank receives from
 * vrank - (its lowest set bit) and sends to vrank + each lower power of 2. */
static int ring__broadcast_tree(void *buf, int nbytes, int root, MPI_Comm comm,
                                int rank, int size)
{
    int status = RING_OK, vrank = ring__mod(rank - root, size), mask = 1;
    for (; mask < size; mask <<= 1) {
        if (vrank & mask) {
            int from = ring__mod(vrank - mask + root, size);
            RING_CHECK_MPI(MPI_Recv(buf, nbytes, MPI_BYTE, from, RING_BCAST_TAG,
                                    comm, MPI_STATUS_IGNORE));
            break;
        }
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vrank + mask < size) {
            int to = ring__mod(vrank + mask + root, size);
            RING_CHECK_MPI(MPI_Send(buf, nbytes, MPI_BYTE, to, RING_BCAST_TAG,
                                    comm));
        }
    }
out:
    return status;
}

static int ring__broadcast_chain(void *buf, size_t count, ring_dtype_t dtype,
                                 int root, MPI_Comm comm, int rank, int size)
{
    int vrank = ring__mod(rank - root, size);
    ring__phase_t phase = {
        .comm = comm,
        .left = ring__mod(rank - 1, size),
        .right = ring__mod(rank + 1, size),
        .count = count,
        .nblocks = 1,
        .dtype = dtype,
        .buf = buf,
        .send_block = vrank == 0 ? 0 : -1,
        .recv_block = 0,
        .nrecv_steps = vrank == 0 ? 0 : 1,
        .nreduce = 0,
        .nforward = vrank == 0 || vrank == size - 1 ? 0 : 1,
    };
    return ring__phase_run(&phase);
}

int ring_broadcast(void *buf, size_t count, ring_dtype_t dtype, int root,
                   MPI_Comm comm)
{
    int status, rank, size;
    const ring__tuning_t *tuning;
    status = ring__check_args("ring_broadcast", buf, buf, count, dtype,
                              RING__NO_OP, comm);
    if (status == RING_OK) status = ring__tuning(&tuning);
    if (status == RING_OK) {
        RING_CHECK_MPI(MPI_Comm_size(comm, &size));
        if (root < 0 || root >= size) {
            ring__log("ring_broadcast: root %d is not a rank of a "
                      "communicator of size %d", root, size);
            status = RING_ERR_ARG;
        }
    }
    RING_CHECK(ring__agree(comm,
                           &(ring__call_t){.kind = RING__BROADCAST,
                                           .count = count,
                                           .dtype = dtype,
                                           .op = RING__NO_OP,
                                           .root = root},
                           status));
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    size_t nbytes = count * ring_dtype_size(dtype);
    if (count == 0 || size == 1) goto out;
    if (nbytes < tuning->small_bytes)
        status = ring__broadcast_tree(buf, (int)nbytes, root, comm, rank, size);
    else
        status = ring__broadcast_chain(buf, count, dtype, root, comm, rank,
                                       size);
out:
    return status;
}
