/* test/test_index.c: hvd's name index (hvd/index.c) in one process: puts
 * (a name there already refused), gets, deletes and takes against what
 * they should return, and, with a new name every call and a few alive at
 * a time (as hvd's engine sees a name per step), a table that stays small
 * instead of growing with every name it has ever held; random puts and
 * deletes over a small set of names, each step checked against a plain
 * array (a deletion that moves the wrong entries back loses some from
 * their probes); a sweep that drops some entries and keeps the rest.
 */
#include <stdio.h>
#include <string.h>
#include "hvd/index.h"
#include "test/test.h"

enum { NAMES = 200000, ALIVE = 8 };

/* Every name of the set is found iff the plain array holds it. */
static int agrees(const hvd__index_t *ix, char (*names)[16], void **held,
                  int n, int step)
{
    for (int k = 0; k < n; k++)
        if (hvd__index_get(ix, names[k]) != held[k]) {
            TEST_FAIL("step %d: %s gives %p, not %p", step, names[k],
                      hvd__index_get(ix, names[k]), held[k]);
            return 0;
        }
    return 1;
}

/* Random puts, deletes and takes over 300 names, long runs of
 * neighbouring entries included, against the array. */
static void test_random(void)
{
    enum { N = 300, STEPS = 60000 };
    static char names[N][16];
    static void *held[N];
    static int values[N];
    hvd__index_t ix = {0};
    uint64_t x = 88172645463325252ull; /* xorshift64 */
    for (int k = 0; k < N; k++) snprintf(names[k], sizeof names[k], "r%d", k);
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % N), op = (int)((x >> 32) % 3);
        if (!held[k]) {
            TEST_EQ(hvd__index_put(&ix, names[k], &values[k]), HVD_OK);
            held[k] = &values[k];
        } else if (op == 0) {
            hvd__index_del(&ix, names[k]);
            held[k] = NULL;
        } else if (op == 1) {
            TEST_TRUE(hvd__index_take(&ix, names[k]) == &values[k]);
            held[k] = NULL;
        } else {
            TEST_EQ(hvd__index_put(&ix, names[k], &values[k]), HVD_ERR_STATE);
        }
        if (step % 97 == 0 && !agrees(&ix, names, held, N, step)) break;
    }
    agrees(&ix, names, held, N, STEPS);
    hvd__index_free(&ix);
}

static int dropped;
static int drop_odd(void *value)
{
    if (*(int *)value % 2 == 0) return 0;
    dropped++;
    return 1;
}

/* A sweep drops exactly the entries its function lets go, once each, and
 * leaves the table at most a quarter full. */
static void test_sweep(void)
{
    enum { N = 1000 };
    static char names[N][16];
    static void *held[N];
    static int values[N];
    hvd__index_t ix = {0};
    for (int k = 0; k < N; k++) {
        snprintf(names[k], sizeof names[k], "s%d", k);
        values[k] = k;
        held[k] = &values[k];
        TEST_EQ(hvd__index_put(&ix, names[k], &values[k]), HVD_OK);
    }
    TEST_EQ(hvd__index_sweep(&ix, drop_odd), HVD_OK);
    TEST_EQ(dropped, N / 2);
    for (int k = 1; k < N; k += 2) held[k] = NULL;
    agrees(&ix, names, held, N, -1);
    TEST_EQ(ix.used, (size_t)N / 2);
    TEST_TRUE(4 * (ix.used + 1) <= ix.cap);
    hvd__index_free(&ix);
}

int main(void)
{
    static char names[ALIVE][32];
    static int values[ALIVE];
    hvd__index_t ix = {0};
    size_t largest = 0;
    TEST_TRUE(hvd__index_get(&ix, "none") == NULL);
    for (int n = 0; n < NAMES; n++) {
        int slot = n % ALIVE;
        if (n >= ALIVE && n % 2) {
            hvd__index_del(&ix, names[slot]);
        } else if (n >= ALIVE && hvd__index_take(&ix, names[slot]) !=
                                     &values[slot]) {
            TEST_FAIL("%s: take did not give its value", names[slot]);
            break;
        }
        if (n >= ALIVE) {
            if (hvd__index_get(&ix, names[slot]) != NULL) {
                TEST_FAIL("%s still found after its delete", names[slot]);
                break;
            }
        }
        snprintf(names[slot], sizeof names[slot], "step.%d", n);
        values[slot] = n;
        TEST_EQ(hvd__index_put(&ix, names[slot], &values[slot]), HVD_OK);
        /* A name there already is refused, its value kept (checked below). */
        TEST_EQ(hvd__index_put(&ix, names[slot], &values[(slot + 1) % ALIVE]),
                HVD_ERR_STATE);
        for (int k = 0; k < ALIVE && k <= n; k++)
            if (hvd__index_get(&ix, names[k]) != &values[k]) {
                TEST_FAIL("after %d names, %s is not found", n + 1, names[k]);
                n = NAMES;
                break;
            }
        if (ix.cap > largest) largest = ix.cap;
    }
    /* 8 live names: a table of 64 slots is plenty, whatever came before. */
    if (largest > 64)
        TEST_FAIL("the table grew to %zu slots for %d live names", largest,
                  ALIVE);
    hvd__index_free(&ix);
    test_random();
    test_sweep();
    printf("test_index: %d names, at most %zu slots: %s\n", NAMES, largest,
           test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
