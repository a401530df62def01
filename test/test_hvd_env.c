/* test/test_hvd_env.c: hvd's environment variables, read once in hvd_init,
 * so each case is its own launch (test/hvd_env_*.mpi, test/hvd_env_bad.sh):
 *
 *   test_hvd_env NAME=VALUE... good  hvd_init succeeds and collectives give
 *                                    the right sums (small, fused, and
 *                                    larger than a 64 KiB fusion buffer)
 *   test_hvd_env NAME=VALUE... bad   hvd_init fails with HVD_ERR_ARG and
 *                                    hvd stays uninitialised; the message
 *                                    naming the variable is checked by
 *                                    test/hvd_env_bad.sh
 *   test_hvd_env NAME=VALUE... mismatch
 *                                    the same with HVD_ERR_MISMATCH: ranks
 *                                    launched with different values of a
 *                                    setting that must agree
 *                                    (test/hvd_mismatch.sh)
 *   test_hvd_env NAME=VALUE... nomem the same with HVD_ERR_NOMEM: no room
 *                                    for what a setting asks
 *                                    (test/shm_room.sh)
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdint.h>
#include <string.h>
#include <mpi.h>
#include "hvd/hvd.h"
#include "test/test.h"

static int rank, size;

/* Allreduces of int32 (i + rank) in flight together; exact sums. */
static void check_sums(void)
{
    enum { N = 6 };
    const size_t counts[N] = {3, 1, 100000, 17, 40000, 5};
    int32_t *buf[N];
    hvd_handle_t h[N] = {NULL};
    for (int k = 0; k < N; k++) {
        char name[32];
        snprintf(name, sizeof name, "env.%d", k);
        buf[k] = malloc(counts[k] * sizeof *buf[k]);
        for (size_t i = 0; i < counts[k]; i++) buf[k][i] = (int32_t)i + rank;
        TEST_EQ(hvd_allreduce_async(buf[k], buf[k], counts[k], HVD_INT32,
                                    HVD_SUM, name, &h[k]), HVD_OK);
    }
    for (int k = 0; k < N; k++) {
        int status = h[k] ? hvd_wait(h[k]) : HVD_ERR_STATE;
        if (status != HVD_OK)
            TEST_FAIL("env.%d count=%zu: %s", k, counts[k], hvd_strerror(status));
        for (size_t i = 0; i < counts[k] && status == HVD_OK; i++)
            if (buf[k][i] != (int32_t)i * size + size * (size - 1) / 2) {
                TEST_FAIL("env.%d count=%zu: element %zu is %d", k, counts[k],
                          i, buf[k][i]);
                break;
            }
        free(buf[k]);
    }
    TEST_EQ(hvd_barrier(), HVD_OK);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[argc - 1] : "";
    int expect_ok = strcmp(mode, "good") == 0;
    int refusal = strcmp(mode, "mismatch") == 0 ? HVD_ERR_MISMATCH
                  : strcmp(mode, "nomem") == 0  ? HVD_ERR_NOMEM
                                                : HVD_ERR_ARG;
    if (!expect_ok && strcmp(mode, "bad") != 0 &&
        strcmp(mode, "mismatch") != 0 && strcmp(mode, "nomem") != 0) {
        fprintf(stderr, "usage: test_hvd_env NAME=VALUE... "
                        "good|bad|mismatch|nomem\n");
        return TEST_HARD_ERROR;
    }
    for (int i = 1; i < argc - 1; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) return TEST_HARD_ERROR;
        *eq = '\0';
        setenv(argv[i], eq + 1, 1);
        *eq = '=';
    }
    int status = hvd_init(&argc, &argv);
    if (expect_ok) {
        if (status != HVD_OK) {
            fprintf(stderr, "hvd_init: %s\n", hvd_strerror(status));
            return 1;
        }
        rank = test_rank = hvd_rank();
        size = hvd_size();
        check_sums();
        TEST_EQ(hvd_shutdown(), HVD_OK);
    } else {
        TEST_EQ(status, refusal);
        float x = 1;
        TEST_EQ(hvd_rank(), HVD_ERR_STATE);
        TEST_EQ(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM, "x"),
                HVD_ERR_STATE);
        TEST_EQ(hvd_shutdown(), HVD_ERR_STATE);
        /* Whether a failed hvd_init leaves MPI up is not specified. */
        int up = 0, down = 0;
        MPI_Initialized(&up);
        MPI_Finalized(&down);
        if (up && !down) MPI_Finalize();
    }
    printf("test_hvd_env %s (%s): %s\n", argv[1], mode,
           test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
