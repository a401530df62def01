/* test/test_contention.c: when hvd's waits stop spinning (hvd/contention.c),
 * in one process with readings made up: schedstat lines parsed or refused,
 * and windows that turn spinning off, double the back-off up to its cap,
 * are not counted while spinning is off, and reset the back-off once the
 * PU is free again. Also that this kernel's own schedstat line parses,
 * since the policy reads nothing else.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "hvd/contention.h"
#include "test/test.h"

static void parsing(void)
{
    double d = -1;
    TEST_EQ(hvd__parse_schedstat("2773265813 8925761 1118\n", &d), HVD_OK);
    TEST_TRUE(d > 0.0089 && d < 0.0090);
    TEST_EQ(hvd__parse_schedstat("293795 0 1\n", &d), HVD_OK);
    TEST_TRUE(d == 0);
    const char *bad[] = {"", "12 34\n", "12 34 56", "a 1 2\n", "1 -2 3\n",
                         "1 2 3 4\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        d = -1;
        if (hvd__parse_schedstat(bad[i], &d) != HVD_ERR_ARG || d != -1)
            TEST_FAIL("schedstat \"%s\" was taken (%g)", bad[i], d);
    }
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        char line[128] = "";
        TEST_TRUE(fgets(line, sizeof line, f) != NULL);
        fclose(f);
        TEST_EQ(hvd__parse_schedstat(line, &d), HVD_OK);
    }
}

/* Feeds a window of `wall` seconds in which the thread waited `share` of
 * it for a PU; returns what feed returned. */
static int window(hvd__contention_t *c, hvd__contention_window_t *w,
                  double *now, double *delay, double wall, double share)
{
    *now += wall;
    *delay += wall * share;
    return hvd__contention_feed(c, w, *now, *delay);
}

static void policy(void)
{
    hvd__contention_t c = {0};
    hvd__contention_window_t w = {0};
    double now = 100, delay = 3;
    /* The first reading only opens a window. */
    TEST_EQ(hvd__contention_feed(&c, &w, now, delay), 0);
    TEST_EQ(window(&c, &w, &now, &delay, 0.05, 0.01), 0);
    TEST_TRUE(c.off_until <= now);
    TEST_EQ(window(&c, &w, &now, &delay, 0.05, 0.45), 1);
    TEST_TRUE(c.off_until == now + HVD__BACKOFF_MIN_S);
    /* Windows that began while spinning was off say nothing about it. */
    double off_until = c.off_until;
    while (now + 0.05 < off_until)
        TEST_EQ(window(&c, &w, &now, &delay, 0.05, 0.45), 0);
    TEST_TRUE(c.off_until == off_until);
    TEST_EQ(window(&c, &w, &now, &delay, 0.05, 0.45), 0); /* straddles */
    /* Contended again each time it resumes: the back-off doubles, then
     * stays at its cap. */
    double expect = 2 * HVD__BACKOFF_MIN_S;
    for (int round = 0; round < 8; round++) {
        now = c.off_until;
        w.start = now;
        w.delay_s = delay;
        TEST_EQ(window(&c, &w, &now, &delay, 0.05, 0.30), 1);
        if (fabs(c.off_until - now - expect) > 1e-9)
            TEST_FAIL("round %d: off for %g s, expected %g", round,
                      c.off_until - now, expect);
        expect = 2 * expect > HVD__BACKOFF_MAX_S ? HVD__BACKOFF_MAX_S
                                                 : 2 * expect;
    }
    /* Free again: stays on, and the next contention backs off from the
     * start. */
    now = c.off_until;
    w.start = now;
    w.delay_s = delay;
    TEST_EQ(window(&c, &w, &now, &delay, 0.05, HVD__CONTENDED / 2), 0);
    TEST_EQ(window(&c, &w, &now, &delay, 0.05, HVD__CONTENDED * 1.5), 1);
    TEST_TRUE(c.off_until == now + HVD__BACKOFF_MIN_S);
}

int main(void)
{
    parsing();
    policy();
    printf("test_contention: %s\n", test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
