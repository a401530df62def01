/* test/test_hvd_join.c: ranks that run out of batches (test/hvd_join_np*.mpi).
 *
 * Round 1: rank r runs r + 2 steps, round 2: size - r + 1 steps (rank 0
 * last), then hvd_join(). Each step allreduces (SUM) "grad", a float32
 * tensor, and "grad.ranks", an int64 1 per rank, asynchronously. A joined
 * rank contributes zeros, so "grad" is the sum over the ranks still running
 * and "grad.ranks" counts them. hvd_join returns HVD_OK on every rank, and
 * not before the last rank has called it, and hvd_last_joined() then names
 * the rank with the most steps (-1 before any join). Afterwards
 * collectives work as usual. A broadcast from a root that has joined fails on the other ranks
 * with HVD_ERR_MISMATCH, saying so, and leaves the buffer alone.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime; test/capture.h */
#include <stdint.h>
#include <time.h>
#include <mpi.h>
#include "hvd/hvd.h"
#include "test/capture.h"
#include "test/hvd_harness.h"
#include "test/test.h"

enum { COUNT = 7 };

static int rank, size;
static MPI_Comm oracle; /* a dup of MPI_COMM_WORLD, for the timing check */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* one clock for the whole node */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float grad_value(int r, int step, int i)
{
    return (float)((r + 1) * (i + 1) + step); /* small integers: exact sums */
}

/* steps(r): how many steps rank r runs in this round. */
static void run_round(int round, int (*steps)(int r))
{
    int mine = steps(rank);
    for (int s = 0; s < mine; s++) {
        float in[COUNT], out[COUNT], want[COUNT] = {0};
        int64_t one = 1, running = -1, want_running = 0;
        for (int i = 0; i < COUNT; i++) in[i] = grad_value(rank, s, i);
        for (int r = 0; r < size; r++) {
            if (steps(r) <= s) continue; /* r has joined by step s */
            want_running++;
            for (int i = 0; i < COUNT; i++) want[i] += grad_value(r, s, i);
        }
        hvd_handle_t h = NULL;
        int st = hvd_allreduce_async(&one, &running, 1, HVD_INT64, HVD_SUM,
                                     "grad.ranks", &h);
        int sg = hvd_allreduce(in, out, COUNT, HVD_FLOAT32, HVD_SUM, "grad");
        if (st == HVD_OK) st = hvd_wait(h);
        if (sg != HVD_OK || st != HVD_OK) {
            TEST_FAIL("join n=%d round %d step %d: grad %s, grad.ranks %s",
                      size, round, s, hvd_strerror(sg), hvd_strerror(st));
            continue;
        }
        if (running != want_running)
            TEST_FAIL("join n=%d round %d step %d: grad.ranks is %lld, want "
                      "%lld running", size, round, s, (long long)running,
                      (long long)want_running);
        for (int i = 0; i < COUNT; i++)
            if (out[i] != want[i]) {
                TEST_FAIL("join n=%d round %d step %d: grad[%d] is %g, want %g",
                          size, round, s, i, out[i], want[i]);
                break;
            }
    }
    double called = now();
    int status = hvd_join();
    double returned = now(), last_call, first_return;
    if (status != HVD_OK)
        TEST_FAIL("join n=%d round %d: hvd_join returned %s", size, round,
                  hvd_strerror(status));
    int want_last = 0;
    for (int r = 1; r < size; r++)
        if (steps(r) > steps(want_last)) want_last = r;
    if (hvd_last_joined() != want_last)
        TEST_FAIL("join n=%d round %d: hvd_last_joined() is %d, want %d",
                  size, round, hvd_last_joined(), want_last);
    MPI_Allreduce(&called, &last_call, 1, MPI_DOUBLE, MPI_MAX, oracle);
    MPI_Allreduce(&returned, &first_return, 1, MPI_DOUBLE, MPI_MIN, oracle);
    if (first_return < last_call)
        TEST_FAIL("join n=%d round %d: a rank's hvd_join returned at %.6f, "
                  "before the last rank called it at %.6f", size, round,
                  first_return, last_call);
}

static int steps_up(int r) { return r + 2; }
static int steps_down(int r) { return size - r + 1; }

/* Everyone running again: a plain allreduce, broadcast and barrier. */
static void check_normal(const char *when)
{
    int32_t x[COUNT], y[COUNT];
    for (int i = 0; i < COUNT; i++) x[i] = rank * i;
    int status = hvd_allreduce(x, y, COUNT, HVD_INT32, HVD_SUM, "grad");
    if (status != HVD_OK)
        TEST_FAIL("join n=%d %s: allreduce returned %s", size, when,
                  hvd_strerror(status));
    for (int i = 0; i < COUNT && status == HVD_OK; i++)
        if (y[i] != i * size * (size - 1) / 2) {
            TEST_FAIL("join n=%d %s: allreduce element %d is %d", size, when,
                      i, y[i]);
            break;
        }
    status = hvd_broadcast(x, COUNT, HVD_INT32, size - 1, "after.bcast");
    if (status != HVD_OK || x[1] != size - 1)
        TEST_FAIL("join n=%d %s: broadcast returned %s, x[1] = %d", size,
                  when, hvd_strerror(status), x[1]);
    TEST_EQ(hvd_barrier(), HVD_OK);
}

/* Rank 0 joins at once; the others broadcast from it, then join. The
 * same broadcast ran once before, so that its response is cached and the
 * join meets the engine's fast path as well as its coordinator. */
static void test_broadcast_from_joined(void)
{
    int32_t x[COUNT];
    for (int i = 0; i < COUNT; i++) x[i] = rank + i;
    TEST_EQ(hvd_broadcast(x, COUNT, HVD_INT32, 0, "join.bcast"), HVD_OK);
    for (int i = 0; i < COUNT; i++) x[i] = rank + i;
    if (rank != 0) {
        TEST_SAYS(hvd_broadcast(x, COUNT, HVD_INT32, 0, "join.bcast"),
                  HVD_ERR_MISMATCH,
                  "error: 'join.bcast': broadcast root 0 has joined\n");
        for (int i = 0; i < COUNT; i++) TEST_EQ(x[i], rank + i);
    }
    TEST_EQ(hvd_join(), HVD_OK);
}

int main(int argc, char **argv)
{
    int rc = test_hvd_start(&argc, &argv, &oracle, &rank, &size);
    if (rc != 0) return rc;

    TEST_EQ(hvd_last_joined(), -1);
    run_round(1, steps_up);
    check_normal("after round 1");
    run_round(2, steps_down);
    check_normal("after round 2");
    test_broadcast_from_joined();
    check_normal("after a broadcast from a joined root");

    return test_hvd_finish("test_hvd_join", &oracle, rank, size);
}
