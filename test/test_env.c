/* test/test_env.c: ring's tuning variables, read once per process, so each
 * case is its own launch (test/env_*.mpi):
 *
 *   test_env NAME=VALUE bad     every collective, and ring_ctx_create, fails
 *                               with RING_ERR_ARG and nothing is sent (the
 *                               ranks stay matched)
 *   test_env NAME=VALUE good    collectives, and a context's, run and give
 *                               the right sums
 *   test_env NAME=VALUE differ  only the last rank has NAME=VALUE:
 *                               ring_ctx_create fails on every rank with
 *                               RING_ERR_MISMATCH and a message naming NAME
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <string.h>
#include "ring/ring.h"
#include "test/capture.h"
#include "test/test.h"

/* ring_ctx_create on the world: status, and the context freed again. */
static int ctx_create_status(void)
{
    ring_ctx_t *ctx = NULL;
    int status = ring_ctx_create(MPI_COMM_WORLD, NULL, &ctx);
    TEST_TRUE((status == RING_OK) == (ctx != NULL));
    if (ctx) TEST_EQ(ring_ctx_free(&ctx), RING_OK);
    return status;
}

int main(int argc, char **argv)
{
    if (argc != 3 || !strchr(argv[1], '=')) {
        fprintf(stderr, "usage: test_env NAME=VALUE bad|good\n");
        return TEST_HARD_ERROR;
    }
    char *eq = strchr(argv[1], '=');
    *eq = '\0';
    int expect_ok = strcmp(argv[2], "good") == 0;
    int differ = strcmp(argv[2], "differ") == 0;
    if (!differ) setenv(argv[1], eq + 1, 1);
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return TEST_HARD_ERROR;
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &test_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* ring reads its variables at its first call, after this. */
    if (differ && test_rank == size - 1) setenv(argv[1], eq + 1, 1);
    if (differ) {
        char want[128];
        snprintf(want, sizeof want, "%s differs across ranks", argv[1]);
        TEST_SAYS(ctx_create_status(), RING_ERR_MISMATCH, want);
    } else {
        TEST_EQ(ctx_create_status(), expect_ok ? RING_OK : RING_ERR_ARG);
    }

    /* Small and large, to pass through every algorithm's path. */
    const size_t counts[] = {3, 100000};
    for (int c = 0; c < 2 && !differ; c++) {
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
