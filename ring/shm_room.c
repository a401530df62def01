/* ring/shm_room.c: whether the node's shared-memory filesystem has room
 * for a shared window, asked before the window is made.
 *
 * MPI keeps a shared window's pages in a file there (/dev/shm on Linux;
 * Open MPI's osc_sm_backing_directory). A container's is often small
 * (Docker's default: 64 MB), and a window that does not fit does not fail
 * on every rank alike: Open MPI 4.1's MPI_Win_allocate_shared fails on
 * the rank that makes the file and leaves the others waiting in it (or,
 * with the default error handler, aborts the job with "internal error").
 * So the ranks ask first, together, and a window that does not fit is
 * never asked for (ring_shm_create), or is made smaller (ring/ctx.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "ring/ring_internal.h"

const char *ring__shm_dir(void)
{
    /* mpirun --mca osc_sm_backing_directory D passes it on so */
    const char *dir = getenv("OMPI_MCA_osc_sm_backing_directory");
    return dir && *dir ? dir : "/dev/shm";
}

/* The bytes free in dir, as Open MPI counts them; 0 for a directory named
 * on purpose that cannot be measured (Open MPI fails its window there
 * too), UINT64_MAX for /dev/shm where it cannot be written (Open MPI then
 * takes its session directory) or measured. */
static uint64_t ring__shm_free(const char *dir, int named)
{
    struct statvfs fs;
    if (!named && access(dir, W_OK) != 0) return UINT64_MAX;
    if (statvfs(dir, &fs) == 0)
        return (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize;
    if (named)
        ring__log("%s (osc_sm_backing_directory): %s", dir, strerror(errno));
    return named ? 0 : UINT64_MAX;
}

size_t ring__shm_fit(int nranks, size_t slab, uint64_t room)
{
    while (slab > RING_CTX_SLAB_MIN && ring__shm_need(nranks, slab) > room)
        slab = slab / 2 < RING_CTX_SLAB_MIN ? RING_CTX_SLAB_MIN : slab / 2;
    return ring__shm_need(nranks, slab) > room ? 0 : slab;
}

int ring__shm_room(MPI_Comm comm, uint64_t *room)
{
    int status = RING_OK, rank;
    uint64_t free_bytes = UINT64_MAX;
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    if (rank == 0) {
        const char *dir = ring__shm_dir();
        free_bytes = ring__shm_free(dir, strcmp(dir, "/dev/shm") != 0);
    }
    RING_CHECK_MPI(MPI_Bcast(&free_bytes, 1, MPI_UINT64_T, 0, comm));
    *room = free_bytes;
out:
    return status;
}
