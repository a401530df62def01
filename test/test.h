/* test/test.h: the few assertions our test programs share.
 *
 * Exit codes follow automake: 0 pass, 77 skip, 99 hard error (the harness
 * could not run), anything else fail. A failed check prints the expression,
 * both values, file:line and the MPI rank (when MPI is up), and counts;
 * test_exit() then makes sure a program that saw a failure never exits 0.
 */
#ifndef HVD_TEST_H
#define HVD_TEST_H

#include <stdio.h>
#include <stdlib.h>

enum { TEST_SKIP_CODE = 77, TEST_HARD_ERROR = 99 };

static int test_failures;
static int test_rank = -1; /* set by multi-rank tests for their messages */

#define TEST_FAIL(...)                                                         \
    do {                                                                       \
        fprintf(stderr, "FAIL rank %d %s:%d: ", test_rank, __FILE__, __LINE__);\
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        test_failures++;                                                       \
    } while (0)

/* Integer-valued comparison printing both sides. */
#define TEST_EQ(a, b)                                                          \
    do {                                                                       \
        long long test_a_ = (long long)(a), test_b_ = (long long)(b);          \
        if (test_a_ != test_b_)                                                \
            TEST_FAIL("%s == %s: %lld != %lld", #a, #b, test_a_, test_b_);     \
    } while (0)

#define TEST_TRUE(cond)                                                        \
    do {                                                                       \
        if (!(cond)) TEST_FAIL("%s", #cond);                                   \
    } while (0)

#define TEST_SKIP(why)                                                         \
    do {                                                                       \
        printf("SKIP: %s\n", why);                                             \
        exit(TEST_SKIP_CODE);                                                  \
    } while (0)

/* The exit status for the failures seen so far. */
static inline int test_exit_code(void)
{
    if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}

#endif /* HVD_TEST_H */
