/* hvd/contention.c: whether the PUs that hvd's waits spin on are really
 * spare.
 *
 * hvd__own_pus says a rank has a spare PU when its affinity holds more PUs
 * than the rank has threads that compute; it cannot see other programs. On
 * this 2-vCPU machine one other busy process was enough to turn the
 * spinning against us: a 1-rank mlp fell from 76,700 to 25,000 images/s
 * with waits that spin, where waits that sleep kept 64,400 (bench/README.md,
 * "Sharing the machine"). The training thread, runnable but not running,
 * says so first: the kernel counts that time (run_delay in
 * /proc/thread-self/schedstat): 36-48% of each 100 ms beside the busy
 * process, under 1% alone but for a rare window of 12% (a preemption of a
 * few ms). So a waiting thread reads it every HVD__CONTENTION_WINDOW_S,
 * and when it waited for a PU more than HVD__CONTENDED of that window
 * while spinning was on, spinning stops for a back-off that doubles each
 * time it is found contended again (it can only be measured with spinning
 * on) and starts over once it is not.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hvd/contention.h"

enum { HVD__SCHEDSTAT_MAX = 128 };

int hvd__parse_schedstat(const char *text, double *delay_s)
{
    unsigned long long run_ns, delay_ns;
    char end;
    /* "run_ns delay_ns timeslices\n": the second is the wait for a PU.
     * Digits only: sscanf's %llu would take "-2" too. */
    if (text[strspn(text, "0123456789 ")] != '\n' ||
        sscanf(text, "%llu %llu %*u%c", &run_ns, &delay_ns, &end) != 3 ||
        end != '\n')
        return HVD_ERR_ARG;
    *delay_s = 1e-9 * (double)delay_ns;
    return HVD_OK;
}

/* The calling thread's wait for a PU so far; HVD_ERR_ARG where the kernel
 * does not say (no schedstat), and then spinning is never turned off. */
static int hvd__read_run_delay(double *delay_s)
{
    char text[HVD__SCHEDSTAT_MAX];
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return HVD_ERR_ARG;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return HVD_ERR_ARG;
    text[n] = 0;
    return hvd__parse_schedstat(text, delay_s);
}

int hvd__contention_feed(hvd__contention_t *c, hvd__contention_window_t *w,
                         double now, double delay_s)
{
    int turned_off = 0;
    double wall = now - w->start;
    if (w->start > 0 && wall > 0 && w->start >= c->off_until) {
        /* Spinning was on for the whole window: it is what it measured. */
        if ((delay_s - w->delay_s) / wall > HVD__CONTENDED) {
            if (c->backoff_s <= 0) c->backoff_s = HVD__BACKOFF_MIN_S;
            c->off_until = now + c->backoff_s;
            c->backoff_s *= 2;
            if (c->backoff_s > HVD__BACKOFF_MAX_S)
                c->backoff_s = HVD__BACKOFF_MAX_S;
            turned_off = 1;
        } else {
            c->backoff_s = HVD__BACKOFF_MIN_S;
        }
    }
    w->start = now;
    w->delay_s = delay_s;
    return turned_off;
}

void hvd__contention_check(hvd__contention_t *c)
{
    /* Each thread's own window: run_delay is per thread. */
    static _Thread_local hvd__contention_window_t window;
    double now = hvd__now(), delay_s;
    if (window.start > 0 && now - window.start < HVD__CONTENTION_WINDOW_S)
        return;
    if (hvd__read_run_delay(&delay_s) != HVD_OK) return;
    hvd__contention_window_t closed = window;
    if (hvd__contention_feed(c, &window, now, delay_s))
        hvd__log(HVD__LOG_DEBUG,
                 "this thread waited for a PU %.0f%% of the last %.0f ms: "
                 "waits sleep instead of spinning for %.1f s",
                 100 * (delay_s - closed.delay_s) / (now - closed.start),
                 1e3 * (now - closed.start), c->off_until - now);
}
