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
 *
 * With the argument "forever" (HVD_STALL_SHUTDOWN_TIME=0, no shutdown)
 * rank 1 makes "stalled.x" only after 4.5 s: until then the others' request
 * neither completes nor fails, and then it completes with every rank's
 * data. hvd_stall.sh counts rank 0's warnings, one each second.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime, nanosleep */
#include <string.h>
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

static void nap(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

/* "stalled.x" waits as long as rank 1 keeps it waiting, then completes. */
static void stall_forever(int rank, int size)
{
    float x[4] = {1, 2, 3, 4}, y[4] = {0};
    hvd_handle_t h = NULL;
    if (rank == 1) nap(4.5);
    TEST_EQ(hvd_allreduce_async(x, y, 4, HVD_FLOAT32, HVD_SUM, "stalled.x",
                                &h), HVD_OK);
    double t0 = now();
    int polled;
    while ((polled = h ? hvd_poll(h) : -1) == 0 && now() - t0 < 4) nap(0.1);
    if (rank != 1 && polled != 0)
        TEST_FAIL("forever n=%d: \"stalled.x\" ended after %.1f s (poll "
                  "%d), with rank 1 still missing", size, now() - t0, polled);
    TEST_EQ(h ? hvd_wait(h) : HVD_ERR_STATE, HVD_OK);
    TEST_TRUE(y[3] == 4.0f * (float)size);
}

int main(int argc, char **argv)
{
    int forever = argc > 1 && !strcmp(argv[1], "forever");
    setenv("HVD_STALL_CHECK_TIME", "1", 0);
    setenv("HVD_STALL_SHUTDOWN_TIME", forever ? "0" : "3", 0);
    if (hvd_init(&argc, &argv) != HVD_OK) return TEST_HARD_ERROR;
    int rank = test_rank = hvd_rank(), size = hvd_size();
    if (size < 2) {
        hvd_shutdown();
        TEST_SKIP("a stall needs 2 ranks or more");
    }
    if (forever) {
        stall_forever(rank, size);
        TEST_EQ(hvd_shutdown(), HVD_OK);
        printf("test_hvd_stall forever n=%d rank %d: %s\n", size, rank,
               test_failures ? "FAIL" : "ok");
        return test_exit_code();
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
        nap(5);
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
