/* test/test_env.c: ring's tuning variables, read once per process, so each
 * case is its own launch (test/env_*.mpi):
 *
 *   test_env NAME=VALUE bad   every collective fails with RING_ERR_ARG
 *                             and nothing is sent (the ranks stay matched)
 *   test_env NAME=VALUE good  collectives run and give the right sums
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <string.h>
#include "ring/ring.h"
#include "test/test.h"

int main(int argc, char **argv)
{
    if (argc != 3 || !strchr(argv[1], '=')) {
        fprintf(stderr, "usage: test_env NAME=VALUE bad|good\n");
        return TEST_HARD_ERROR;
    }
    char *eq = strchr(argv[1], '=');
    *eq = '\0';
    setenv(argv[1], eq + 1, 1);
    int expect_ok = strcmp(argv[2], "good") == 0;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return TEST_HARD_ERROR;
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &test_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Small and large, to pass through every algorithm's path. */
    const size_t counts[] = {3, 100000};
    for (int c = 0; c < 2; c++) {
        size_t n = counts[c];
        int *buf = malloc(n * sizeof *buf);
        for (size_t i = 0; i < n; i++) buf[i] = (int)i + test_rank;
        int status = ring_allreduce(buf, buf, n, RING_INT32, RING_SUM,
                                    MPI_COMM_WORLD);
        if (expect_ok) {
            TEST_EQ(status, RING_OK);
            for (size_t i = 0; i < n && status == RING_OK; i++)
                if (buf[i] != (int)i * size + size * (size - 1) / 2) {
                    TEST_EQ(buf[i], (int)i * size + size * (size - 1) / 2);
                    break;
                }
        } else {
            TEST_EQ(status, RING_ERR_ARG);
            TEST_EQ(ring_broadcast(buf, n, RING_INT32, 0, MPI_COMM_WORLD),
                    RING_ERR_ARG);
        }
        free(buf);
    }
    /* Still matched: a collective of MPI's own completes on every rank. */
    MPI_Barrier(MPI_COMM_WORLD);
    printf("test_env %s=%s (%s): %s\n", argv[1], eq + 1, argv[2],
           test_failures ? "FAIL" : "ok");
    MPI_Finalize();
    return test_exit_code();
}
