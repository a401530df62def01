/* test/test_ring_settings.c: ring_settings_agree (ring/settings.c) at 2 or
 * more ranks (test/ring_settings_np2.mpi, _np3.mpi): the same texts on
 * every rank give RING_OK everywhere; one rank with another value gives
 * RING_ERR_MISMATCH on every rank, and each rank's message names the
 * setting and who has what, ranks of one value grouped; bad arguments are
 * refused on the rank that made them, before anything is sent.
 */
#define _POSIX_C_SOURCE 200809L /* capture.h: dup, dup2, fileno */
#include <stdio.h>
#include <string.h>
#include "ring/ring.h"
#include "test/capture.h"

static const char *const names[] = {"A_SIZE", "B_MODE", "C_FLAG"};

int main(int argc, char **argv)
{
    int size;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return TEST_HARD_ERROR;
    MPI_Comm_rank(MPI_COMM_WORLD, &test_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        MPI_Finalize();
        TEST_SKIP("agreement needs 2 ranks or more");
    }

    const char *same[] = {"134217728", "shm", "1"};
    TEST_SAYS(ring_settings_agree(MPI_COMM_WORLD, 3, names, same), RING_OK,
              NULL);
    TEST_EQ(ring_settings_agree(MPI_COMM_WORLD, 0, names, same), RING_OK);

    /* Rank 1 alone differs, in the middle setting: every rank fails, the
     * ranks that agree with each other named together. */
    const char *one[] = {"134217728", test_rank == 1 ? "ring" : "shm", "1"};
    char want[256], others[32] = "rank 0 has";
    if (size == 3) snprintf(others, sizeof others, "ranks 0, 2 have");
    if (size > 3) snprintf(others, sizeof others, "ranks 0, 2-%d have",
                           size - 1);
    snprintf(want, sizeof want, "B_MODE differs across ranks: %s \"shm\"; "
             "rank 1 has \"ring\"", others);
    TEST_SAYS(ring_settings_agree(MPI_COMM_WORLD, 3, names, one),
              RING_ERR_MISMATCH, want);

    /* Every rank its own value of the last two: one line each, and a long
     * value shown cut. */
    char mode[16], flag[128];
    snprintf(mode, sizeof mode, "m%d", test_rank);
    memset(flag, 'f', sizeof flag - 1);
    flag[sizeof flag - 1] = '\0';
    flag[0] = (char)('0' + test_rank % 10);
    const char *all[] = {"134217728", mode, flag};
    TEST_SAYS(ring_settings_agree(MPI_COMM_WORLD, 3, names, all),
              RING_ERR_MISMATCH, "B_MODE differs across ranks: rank 0 has "
                                 "\"m0\"; rank 1 has \"m1\"");
    TEST_SAYS(ring_settings_agree(MPI_COMM_WORLD, 3, names, all),
              RING_ERR_MISMATCH, "C_FLAG differs across ranks: rank 0 has "
                                 "\"0fffff");
    TEST_SAYS(ring_settings_agree(MPI_COMM_WORLD, 3, names, all),
              RING_ERR_MISMATCH, "...\"");

    /* Refused locally on every rank alike, so nothing is left unpaired. */
    TEST_SAYS(ring_settings_agree(MPI_COMM_NULL, 3, names, same),
              RING_ERR_ARG, "comm is MPI_COMM_NULL");
    TEST_SAYS(ring_settings_agree(MPI_COMM_WORLD, -1, names, same),
              RING_ERR_ARG, "bad n, names or values");
    TEST_SAYS(ring_settings_agree(MPI_COMM_WORLD, 3, NULL, same),
              RING_ERR_ARG, "bad n, names or values");

    /* The communicator is still in step: a last agreement succeeds. */
    TEST_EQ(ring_settings_agree(MPI_COMM_WORLD, 3, names, same), RING_OK);
    printf("test_ring_settings n=%d rank %d: %s\n", size, test_rank,
           test_failures ? "FAIL" : "ok");
    MPI_Finalize();
    return test_exit_code();
}
