/* test/test_hvd_stall.c: a collective that one rank never makes
 * (run by test/hvd_stall.sh, which also checks the warning on stderr).
 *
 * With HVD_STALL_CHECK_TIME=1 and HVD_STALL_SHUTDOWN_TIME=3 (set here
 * unless the environment has them), every rank but rank 1 allreduces
 * "stalled.x"; rank 1 sleeps 5 s instead. An allreduce all ranks make
 * meanwhile completes as usual. Rank 0 must warn naming
 * "stalled.x" and the missing rank; after the shutdown time the request
 * fails with HVD_ERR_STALL, then every later collective on every rank
 * (rank 1's barrier included) fails with HVD_ERR_STALL too, and
 * hvd_shutdown still succeeds.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime, nanosleep */
#include <time.h>
#include "hvd/hvd.h"
#include "test/test.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void expect_stall(int status, const char *what)
{
    if (status != HVD_ERR_STALL)
        TEST_FAIL("stall n=%d: %s returned %d (%s), not HVD_ERR_STALL",
                  hvd_size(), what, status, hvd_strerror(status));
}

int main(int argc, char **argv)
{
    setenv("HVD_STALL_CHECK_TIME", "1", 0);
    setenv("HVD_STALL_SHUTDOWN_TIME", "3", 0);
    if (hvd_init(&argc, &argv) != HVD_OK) return TEST_HARD_ERROR;
    int rank = test_rank = hvd_rank(), size = hvd_size();
    if (size < 2) {
        hvd_shutdown();
        TEST_SKIP("a stall needs 2 ranks or more");
    }

    float x[4] = {1, 2, 3, 4}, y[4];
    TEST_EQ(hvd_allreduce(x, y, 4, HVD_FLOAT32, HVD_SUM, "warmup"), HVD_OK);
    TEST_TRUE(y[3] == 4.0f * (float)size);

    /* Ranks other than 1 start "stalled.x"; meanwhile everyone allreduces
     * "fine", which must not wait for it. */
    hvd_handle_t stalled = NULL;
    double t0 = now();
    if (rank != 1)
        TEST_EQ(hvd_allreduce_async(x, y, 4, HVD_FLOAT32, HVD_SUM, "stalled.x",
                                    &stalled), HVD_OK);
    float z[4];
    TEST_EQ(hvd_allreduce(x, z, 4, HVD_FLOAT32, HVD_SUM, "fine"), HVD_OK);
    TEST_TRUE(z[0] == (float)size);
    if (now() - t0 > 2)
        TEST_FAIL("stall n=%d: \"fine\" took %.1f s beside \"stalled.x\"",
                  size, now() - t0);

    if (rank != 1) {
        expect_stall(stalled ? hvd_wait(stalled) : HVD_ERR_STATE,
                     "allreduce \"stalled.x\"");
        double waited = now() - t0;
        if (waited < 2.5 || waited > 30)
            TEST_FAIL("stall n=%d: \"stalled.x\" failed after %.1f s, want "
                      "about HVD_STALL_SHUTDOWN_TIME=3", size, waited);
        expect_stall(hvd_allreduce(x, y, 4, HVD_FLOAT32, HVD_SUM, "later"),
                     "a later allreduce");
        expect_stall(hvd_barrier(), "a later barrier");
    } else {
        struct timespec nap = {5, 0};
        nanosleep(&nap, NULL);
        expect_stall(hvd_barrier(), "rank 1's barrier after 5 s");
        expect_stall(hvd_allreduce(x, y, 4, HVD_FLOAT32, HVD_SUM, "later"),
                     "a later allreduce");
    }
    hvd_handle_t h = NULL;
    int status = hvd_allreduce_async(x, y, 4, HVD_FLOAT32, HVD_SUM, "late.async",
                                     &h);
    if (status == HVD_OK) status = h ? hvd_wait(h) : HVD_ERR_STATE;
    expect_stall(status, "a later async allreduce");

    TEST_EQ(hvd_shutdown(), HVD_OK);
    printf("test_hvd_stall n=%d rank %d: %s\n", size, rank,
           test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
