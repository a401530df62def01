/* test/test_hvd_init.c: hvd inside a program that started MPI itself
 * (test/hvd_init_np*.mpi). hvd_init(NULL, NULL) uses the running MPI, a
 * second hvd_init fails with HVD_ERR_STATE, one that fails on rank 0 only
 * (an unwritable HVD_TIMELINE), or on the last rank only (a variable it
 * cannot read), fails on every rank and can be retried, and
 * hvd_shutdown finishes the requests still in flight and leaves MPI up for
 * the program to finalise (test_hvd covers the case where hvd_init starts
 * MPI and hvd_shutdown ends it); after MPI_Finalize, hvd_init refuses with
 * HVD_ERR_STATE.
 *
 *   test_hvd_init funneled   MPI started at MPI_THREAD_FUNNELED: hvd_init
 *                            refuses with HVD_ERR_MPI, naming the level it
 *                            needs (skips, 77, if MPI gives more)
 *   test_hvd_init threads    calls from several threads at once: unnamed
 *                            ones all run (their numbers were taken
 *                            outside the lock: two threads could take
 *                            one, and one failed); and calls racing
 *                            hvd_shutdown fail with HVD_ERR_STATE or run,
 *                            none left waiting (one that came in after
 *                            the engine's last look waited forever)
 */
#define _GNU_SOURCE /* setenv, test/capture.h; pthread_timedjoin_np */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "hvd/hvd.h"
#include "test/capture.h"
#include "test/test.h"

/* MPI below MPI_THREAD_SERIALIZED: hvd cannot run its engine thread. */
static int test_funneled(int argc, char **argv)
{
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) !=
        MPI_SUCCESS)
        return TEST_HARD_ERROR;
    if (provided >= MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        TEST_SKIP("MPI gave MPI_THREAD_SERIALIZED or more for FUNNELED");
    }
    char want[256];
    snprintf(want, sizeof want, "error: hvd_init: MPI gives thread level %d; "
             "the engine thread needs MPI_THREAD_SERIALIZED or more (start "
             "MPI with MPI_Init_thread, or let hvd_init start it)\n",
             provided);
    TEST_SAYS(hvd_init(NULL, NULL), HVD_ERR_MPI, want);
    TEST_SAYS(hvd_rank(), HVD_ERR_STATE,
              "error: hvd_rank: call hvd_init() first\n");
    MPI_Finalize();
    printf("test_hvd_init funneled: %s\n", test_failures ? "FAIL" : "ok");
    return test_exit_code();
}

/* A thread's calls: unnamed allreduces, `times` of them, or until one
 * fails (times 0); the first failure's status kept. */
typedef struct {
    int times, failed, status;
} calls_t;

static void *call_on(void *arg)
{
    calls_t *c = arg;
    for (int i = 0; c->times == 0 || i < c->times; i++) {
        float x = 1, y;
        int status = hvd_allreduce(&x, &y, 1, HVD_FLOAT32, HVD_SUM, NULL);
        if (status != HVD_OK) {
            if (!c->failed++) c->status = status;
            if (c->times == 0) break;
        }
    }
    return NULL;
}

/* A thread joined within 30 s (a wait that never returns: it hung). */
static int joined(pthread_t t)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    return pthread_timedjoin_np(t, NULL, &until) == 0;
}

static int test_threads(int argc, char **argv)
{
    enum { THREADS = 4, CALLS = 20000, RACES = 30 };
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) !=
        MPI_SUCCESS)
        return TEST_HARD_ERROR;
    MPI_Comm_rank(MPI_COMM_WORLD, &test_rank);
    TEST_EQ(hvd_init(NULL, NULL), HVD_OK);
    pthread_t t[THREADS];
    calls_t c[THREADS] = {{0}};
    for (int i = 0; i < THREADS; i++) {
        c[i].times = CALLS;
        pthread_create(&t[i], NULL, call_on, &c[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        if (!joined(t[i])) {
            TEST_FAIL("thread %d of unnamed calls did not end", i);
            return test_exit_code(); /* a thread is stuck: no finalise */
        }
        if (c[i].failed)
            TEST_FAIL("thread %d: %d of %d unnamed calls failed, the first "
                      "with %d", i, c[i].failed, CALLS, c[i].status);
    }
    TEST_EQ(hvd_shutdown(), HVD_OK);
    /* Calls racing hvd_shutdown, which returns while they go on. */
    for (int r = 0; r < RACES; r++) {
        TEST_EQ(hvd_init(NULL, NULL), HVD_OK);
        pthread_t racer;
        calls_t rc = {0};
        pthread_create(&racer, NULL, call_on, &rc);
        usleep((useconds_t)(r * 37 % 500));
        TEST_EQ(hvd_shutdown(), HVD_OK);
        if (!joined(racer)) {
            TEST_FAIL("race %d: a call racing hvd_shutdown never returned",
                      r);
            return test_exit_code();
        }
        if (rc.status != HVD_ERR_STATE)
            TEST_FAIL("race %d: the call after hvd_shutdown failed with %d, "
                      "not HVD_ERR_STATE", r, rc.status);
    }
    printf("test_hvd_init threads: %s\n", test_failures ? "FAIL" : "ok");
    MPI_Finalize();
    return test_exit_code();
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    if (argc > 1 && strcmp(argv[1], "funneled") == 0)
        return test_funneled(argc, argv);
    if (argc > 1 && strcmp(argv[1], "threads") == 0)
        return test_threads(argc, argv);
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) !=
        MPI_SUCCESS)
        return TEST_HARD_ERROR;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_rank = rank;
    TEST_EQ(hvd_rank(), HVD_ERR_STATE);

    /* A timeline rank 0 cannot write fails every rank's hvd_init, which
     * leaves hvd as it was: a later hvd_init works. */
    setenv("HVD_TIMELINE", "/nonexistent-hvd-test-dir/timeline.json", 1);
    TEST_EQ(hvd_init(NULL, NULL), HVD_ERR_ARG);
    TEST_EQ(hvd_rank(), HVD_ERR_STATE);
    unsetenv("HVD_TIMELINE");
    /* A variable the last rank alone cannot read: every rank fails (the
     * last one returned before the others' setup, which waited for it),
     * and hvd is as it was. (ring's variables are read once a process,
     * here already: test_env has theirs.) */
    if (rank == size - 1) setenv("HVD_FUSION_THRESHOLD", "12Q", 1);
    TEST_EQ(hvd_init(NULL, NULL), HVD_ERR_ARG);
    TEST_EQ(hvd_rank(), HVD_ERR_STATE);
    unsetenv("HVD_FUSION_THRESHOLD");

    TEST_EQ(hvd_init(NULL, NULL), HVD_OK);
    TEST_EQ(hvd_init(&argc, &argv), HVD_ERR_STATE);
    TEST_EQ(hvd_rank(), rank);
    TEST_EQ(hvd_size(), size);
    int64_t x[3] = {rank, 1, -rank}, y[3];
    TEST_EQ(hvd_allreduce(x, y, 3, HVD_INT64, HVD_SUM, NULL), HVD_OK);
    TEST_EQ(y[0], size * (size - 1) / 2);
    TEST_EQ(y[1], size);
    TEST_EQ(y[2], -size * (size - 1) / 2);

    /* hvd_shutdown finishes work still in flight (never waited for). */
    int64_t out[3][3];
    hvd_handle_t h[3];
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "pending.%d", k);
        TEST_EQ(hvd_allreduce_async(x, out[k], k + 1, HVD_INT64, HVD_MAX,
                                    name, &h[k]), HVD_OK);
    }
    TEST_EQ(hvd_shutdown(), HVD_OK);
    for (int k = 0; k < 3; k++)
        if (out[k][0] != size - 1)
            TEST_FAIL("n=%d: \"pending.%d\" not finished by hvd_shutdown: "
                      "out[0] = %lld", size, k, (long long)out[k][0]);
    /* Finished handles still belong to the caller: hvd_wait returns their
     * status at once, after shutdown too, and frees them. */
    for (int k = 0; k < 3; k++) TEST_EQ(hvd_wait(h[k]), HVD_OK);

    int finalized = 1;
    MPI_Finalized(&finalized);
    TEST_EQ(finalized, 0);
    TEST_EQ(hvd_rank(), HVD_ERR_STATE);
    TEST_EQ(hvd_shutdown(), HVD_ERR_STATE);
    /* MPI still works for the program. */
    int ranks = 0;
    MPI_Allreduce(&(int){1}, &ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    TEST_EQ(ranks, size);
    if (rank == 0)
        printf("test_hvd_init n=%d: %s\n", size, test_failures ? "FAIL" : "ok");
    MPI_Finalize();
    TEST_SAYS(hvd_init(NULL, NULL), HVD_ERR_STATE,
              "error: hvd_init: MPI is already finalised\n");
    return test_exit_code();
}
