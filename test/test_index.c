/* test/test_index.c: hvd's name index (hvd/index.c) in one process: puts
 * (a name there already refused), gets, deletes and takes against what
 * they should return, and, with a new name every call and a few alive at
 * a time (as hvd's engine sees a name per step), a table that stays small
 * instead of growing with every name it has ever held.
 */
#include <stdio.h>
#include <string.h>
#include "hvd/index.h"
#include "test/test.h"

enum { NAMES = 200000, ALIVE = 8 };

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
    printf("test_index: %d names, at most %zu slots: %s\n", NAMES, largest,
           test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
