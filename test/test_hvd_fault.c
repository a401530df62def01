/* test/test_hvd_fault.c: a rank that dies in the middle of a run (driven
 * by test/hvd_fault.sh, which checks that the job ends with an error within
 * a bounded time instead of hanging).
 *
 *   test_hvd_fault [exit|kill]
 *                    every rank allreduces 64 KiB again and again; the last
 *                    rank exits with status 3 at its 50th call, without
 *                    hvd_shutdown, as a crash would (exit, the default), or
 *                    is killed by SIGKILL there, as the kernel's OOM killer
 *                    or a scheduler would (kill). The others are then
 *                    inside or on their way into a collective it will
 *                    never join, and only the launcher can end them.
 *
 * A surviving rank that ever gets past 100,000 calls prints FAIL and exits
 * 1: the dead rank's absence went unnoticed.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hvd/hvd.h"
#include "test/test.h"

int main(int argc, char **argv)
{
    enum { COUNT = 16384, DIE_AT = 50, GIVE_UP = 100000 };
    static float buf[COUNT];
    int kill_it = argc > 1 && strcmp(argv[1], "kill") == 0;
    if (argc > 2 || (argc > 1 && !kill_it && strcmp(argv[1], "exit") != 0)) {
        fprintf(stderr, "usage: test_hvd_fault [exit|kill]\n");
        return TEST_HARD_ERROR;
    }
    if (hvd_init(&argc, &argv) != HVD_OK) return TEST_HARD_ERROR;
    int rank = test_rank = hvd_rank(), size = hvd_size();
    for (int i = 0; i < GIVE_UP; i++) {
        if (rank == size - 1 && i == DIE_AT) {
            fprintf(stderr, "test_hvd_fault: rank %d %s now\n", rank,
                    kill_it ? "is killed" : "exits");
            if (kill_it) raise(SIGKILL);
            _exit(3);
        }
        for (int j = 0; j < COUNT; j++) buf[j] = (float)(rank + j % 7);
        if (hvd_allreduce(buf, buf, COUNT, HVD_FLOAT32, HVD_SUM, "fault.x") !=
            HVD_OK)
            break; /* an error is a fine way to end too */
    }
    if (rank != size - 1) TEST_FAIL("rank %d outlived the dead rank", rank);
    hvd_shutdown();
    return test_exit_code();
}
