/* hvd/contention.h: whether the PUs that hvd's waits spin on are really
 * spare (hvd/contention.c says how it is measured). */
#ifndef HVD_CONTENTION_H
#define HVD_CONTENTION_H

#include "hvd/config.h"

/* A thread waited for a PU more than this share of a window: the PUs are
 * wanted by more threads than there are, and spinning takes from them.
 * Above the rare single preemption an idle machine shows (12% of 50 ms). */
#define HVD__CONTENDED 0.25
#define HVD__CONTENTION_WINDOW_S 0.1
#define HVD__BACKOFF_MIN_S 0.5
#define HVD__BACKOFF_MAX_S 16.0

typedef struct {
    double off_until;  /* hvd__now() before which waits do not spin */
    double backoff_s;  /* the next time off; 0 before the first window */
} hvd__contention_t;

/* One thread's window: when it started, and the thread's wait for a PU
 * (run_delay) then. */
typedef struct {
    double start;
    double delay_s;
} hvd__contention_window_t;

/* The second field of a schedstat line, in seconds; HVD_ERR_ARG unless the
 * text is three numbers and a newline. */
int hvd__parse_schedstat(const char *text, double *delay_s);
/* Closes window w at now, delay_s, and starts the next: when spinning was
 * on all through it and the thread waited more than HVD__CONTENDED of it,
 * turns spinning off (returns 1). */
int hvd__contention_feed(hvd__contention_t *c, hvd__contention_window_t *w,
                         double now, double delay_s);
/* The calling thread's check of c (hvd_wait, hvd_poll, while waits may
 * spin), at most once a window; with whatever guards c held. */
void hvd__contention_check(hvd__contention_t *c);

#endif /* HVD_CONTENTION_H */
