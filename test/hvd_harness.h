/* test/hvd_harness.h: the start and end that the hvd engine tests which
 * check results through MPI beside the engine (test/test_hvd_errors.c,
 * test/test_hvd_join.c) share: hvd_init with MPI_THREAD_MULTIPLE and a
 * communicator of their own, then one verdict agreed by all ranks.
 *
 * Left out: the tests themselves, and tests that start MPI or read hvd's
 * environment in their own way (test_hvd.c, test_hvd_init.c, ...).
 */
#ifndef HVD_TEST_HVD_HARNESS_H
#define HVD_TEST_HVD_HARNESS_H

#include <stdio.h>
#include <mpi.h>
#include "hvd/hvd.h"
#include "test/test.h"

/* Starts hvd, which must give MPI_THREAD_MULTIPLE (the test calls MPI
 * beside the engine's thread), dups MPI_COMM_WORLD into *oracle (never the
 * engine's communicator) and sets *rank (and test_rank) and *size from hvd.
 * 0, or TEST_HARD_ERROR for main to return. */
static inline int test_hvd_start(int *argc, char ***argv, MPI_Comm *oracle,
                                 int *rank, int *size)
{
    if (hvd_init(argc, argv) != HVD_OK) return TEST_HARD_ERROR;
    int provided;
    MPI_Query_thread(&provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "need MPI_THREAD_MULTIPLE from hvd_init\n");
        return TEST_HARD_ERROR;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, oracle);
    *rank = test_rank = hvd_rank();
    *size = hvd_size();
    return 0;
}

/* Rank 0 (rank and size as test_hvd_start set them) prints "NAME n=SIZE:
 * ok", or FAIL when any rank saw a failure; frees *oracle, shuts hvd down
 * (checked) and returns main's exit code. */
static inline int test_hvd_finish(const char *name, MPI_Comm *oracle,
                                  int rank, int size)
{
    int failed = test_failures, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, *oracle);
    if (rank == 0) printf("%s n=%d: %s\n", name, size, any ? "FAIL" : "ok");
    MPI_Comm_free(oracle);
    TEST_EQ(hvd_shutdown(), HVD_OK);
    return test_exit_code();
}

#endif /* HVD_TEST_HVD_HARNESS_H */
