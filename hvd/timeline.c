/* hvd/timeline.c: HVD_TIMELINE, a Chrome-trace JSON file (chrome://tracing,
 * Perfetto) written by rank 0: one row ("process") per tensor name, with
 * its negotiation, its wait in the queue behind earlier responses, copies
 * into and out of the fusion buffer and the ring collective as complete
 * ("X") events, on the lane ("thread") "host": when the engine did or
 * queued them. A device group's copies and collective are queued and not
 * waited for, so they also go on the lane "device", timed there by timer
 * events on the engine's stream (as Horovod's timeline times its GPU
 * operations by events), written once the device is through them. The
 * array is closed at shutdown, so the file parses as JSON; a killed job
 * leaves it unterminated, which both viewers still load. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/events.h"
#include "hvd/index.h"
#include "hvd/timeline.h"

static FILE *hvd__trace;
static double hvd__t0;
/* A row ("process") per tensor name, with its lanes ("threads"): the
 * host's, and the device's once a device group of it is handed over. */
enum { HVD__LANE_HOST, HVD__LANE_DEVICE };
static struct {
    char *name;
    int device_lane;
} *hvd__rows;
static size_t hvd__nrows;
/* name -> row number: a model's thousand tensors each write several
 * events a step, and a search through the rows for each took a step of
 * fusion_perf's 1000 small tensors from 0.5 ms to 5 ms. */
static hvd__index_t hvd__row_index;

int hvd__timeline_open(const char *path)
{
    hvd__trace = fopen(path, "w");
    if (!hvd__trace) {
        hvd__log(HVD__LOG_ERROR, "HVD_TIMELINE=%s: cannot write it", path);
        return HVD_ERR_ARG;
    }
    hvd__t0 = hvd__now();
    fputs("[\n", hvd__trace);
    return HVD_OK;
}

/* The name as a JSON string body: quotes, backslashes and control
 * characters escaped; the runs between them written whole (a character
 * at a time was the most of the timeline's cost). */
static void hvd__json_string(FILE *f, const char *s)
{
    static const char escaped[] = "\"\\\x01\x02\x03\x04\x05\x06\x07\x08\x09"
                                  "\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13"
                                  "\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d"
                                  "\x1e\x1f";
    for (;;) {
        size_t plain = strcspn(s, escaped);
        fwrite(s, 1, plain, f);
        s += plain;
        if (!*s) return;
        unsigned char c = (unsigned char)*s++;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else
            fprintf(f, "\\u%04x", c);
    }
}

/* A lane of row pid named, with a metadata event. */
static void hvd__lane(long pid, int tid, const char *name)
{
    fprintf(hvd__trace,
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %ld, "
            "\"tid\": %d, \"args\": {\"name\": \"%s\"}},\n",
            pid, tid, name);
}

/* The row of a tensor; a new one is announced with metadata events. */
static long hvd__row(const char *tensor)
{
    void *known = hvd__index_get(&hvd__row_index, tensor);
    if (known) return (long)(uintptr_t)known;
    void *rows = realloc(hvd__rows, (hvd__nrows + 1) * sizeof *hvd__rows);
    if (!rows) return 0;
    hvd__rows = rows;
    char *name = strdup(tensor);
    long pid = (long)hvd__nrows + 1;
    if (!name || hvd__index_put(&hvd__row_index, name,
                                (void *)(uintptr_t)pid) != HVD_OK) {
        free(name);
        return 0;
    }
    hvd__rows[hvd__nrows].name = name;
    hvd__rows[hvd__nrows].device_lane = 0;
    hvd__nrows++;
    fprintf(hvd__trace,
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %ld, "
            "\"args\": {\"name\": \"",
            pid);
    hvd__json_string(hvd__trace, tensor);
    fputs("\"}},\n", hvd__trace);
    hvd__lane(pid, HVD__LANE_HOST, "host");
    return pid;
}

int hvd__timeline_on(void) { return hvd__trace != NULL; }

/* A complete event on lane tid of row pid (0: none, out of memory). */
/* text, then seconds s as microseconds with three decimals, through
 * integers: a double's %.3f was the timeline's costliest part after the
 * names. */
static void hvd__put_us(const char *text, double s)
{
    double ns = s * 1e9;
    long long n = (long long)(ns < 0 ? ns - 0.5 : ns + 0.5);
    unsigned long long a = n < 0 ? 0ull - (unsigned long long)n
                                 : (unsigned long long)n;
    fprintf(hvd__trace, "%s%s%llu.%03llu", text, n < 0 ? "-" : "", a / 1000,
            a % 1000);
}

static void hvd__write(long pid, int tid, const char *phase, double start_s,
                       double end_s)
{
    if (pid <= 0) return;
    fprintf(hvd__trace,
            "{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %ld, \"tid\": %d, ",
            phase, pid, tid);
    hvd__put_us("\"ts\": ", start_s - hvd__t0);
    hvd__put_us(", \"dur\": ", end_s - start_s);
    fputs(", \"args\": {\"tensor\": \"", hvd__trace);
    hvd__json_string(hvd__trace, hvd__rows[pid - 1].name);
    fputs("\"}},\n", hvd__trace);
}

void hvd__timeline_event(const char *tensor, const char *phase, double start_s,
                         double end_s)
{
    if (hvd__trace)
        hvd__write(hvd__row(tensor), HVD__LANE_HOST, phase, start_s, end_s);
}

/* ---- device time (engine thread only) ---- */

/* A group handed over, waiting for the device: its marks, its phases,
 * its tensors' rows. */
typedef struct hvd__tl_group {
    struct hvd__tl_group *next;
    hvd__tl_marks_t marks;
    const char *phases[HVD__TL_MARKS - 1];
    int nrows;
    long rows[];
} hvd__tl_group_t;

/* The device's times are placed on the host's clock through an anchor,
 * a timer whose host time is known: the first is waited for on the host
 * (hvd__timeline_anchor), once a run; then each written group's first
 * mark becomes the next. A group's first mark is timed from the anchor,
 * its others from its first: cudaEventElapsedTime gives float ms, whose
 * step grows with the interval (4 us at a minute), and a phase's length
 * stays exact after an idle spell. The device's clock is not set against
 * the host's again: over a long run the device lane may drift against
 * the host lane by their rates' difference (the lengths do not). */
static struct {
    hvd__tl_group_t *head, **tail; /* handed over, oldest first */
    hvd__event_stack_t spare;      /* timers to record again */
    ring_event_t *anchor;
    double anchor_s;
    int off; /* the timers failed: no device phases from then on */
} hvd__tl_dev = {.tail = &hvd__tl_dev.head};

static ring_event_t *hvd__tl_take(const ring_dev_t *dev)
{
    ring_event_t *e = hvd__event_pop(&hvd__tl_dev.spare);
    return e || dev->timer_create(&e) == RING_OK ? e : NULL;
}

void hvd__timeline_drop(hvd__tl_marks_t *m)
{
    for (int i = 0; i < m->n; i++)
        hvd__event_push(&hvd__tl_dev.spare, m->at[i]);
    m->n = 0;
}

/* Every group handed over, dropped unwritten. */
static void hvd__tl_drop_all(void)
{
    while (hvd__tl_dev.head) {
        hvd__tl_group_t *g = hvd__tl_dev.head;
        hvd__tl_dev.head = g->next;
        hvd__timeline_drop(&g->marks);
        free(g);
    }
    hvd__tl_dev.tail = &hvd__tl_dev.head;
}

/* The device's timers failed (ring's message said how): said once, and
 * no device phases from then on. */
static void hvd__tl_off(void)
{
    if (!hvd__tl_dev.off)
        hvd__log(HVD__LOG_WARNING, "HVD_TIMELINE: the device's timers "
                 "failed (the message above says why); the trace leaves "
                 "device phases out from here on");
    hvd__tl_dev.off = 1;
    hvd__tl_drop_all();
}

void hvd__timeline_anchor(ring_stream_t *s)
{
    const ring_dev_t *dev = ring_dev();
    if (!hvd__trace || hvd__tl_dev.off || !dev || hvd__tl_dev.anchor) return;
    ring_event_t *e = hvd__tl_take(dev);
    int status = e ? dev->event_record(e, s) : RING_ERR_CUDA;
    if (status == RING_OK) status = dev->event_sync(e);
    if (status != RING_OK) {
        hvd__event_push(&hvd__tl_dev.spare, e);
        hvd__tl_off();
        return;
    }
    hvd__tl_dev.anchor = e;
    hvd__tl_dev.anchor_s = hvd__now();
}

void hvd__timeline_mark(hvd__tl_marks_t *m, ring_stream_t *s)
{
    const ring_dev_t *dev = ring_dev();
    if (!hvd__trace || hvd__tl_dev.off || !dev || !hvd__tl_dev.anchor ||
        m->n == HVD__TL_MARKS)
        return;
    ring_event_t *e = hvd__tl_take(dev);
    int status = e ? dev->event_record(e, s) : RING_ERR_CUDA;
    if (status == RING_OK) {
        m->at[m->n++] = e;
        return;
    }
    hvd__event_push(&hvd__tl_dev.spare, e);
    hvd__timeline_drop(m);
    hvd__tl_off();
}

/* Writes the groups the device is through, oldest first (all of them,
 * waiting for the device, when wait). */
static void hvd__tl_write_done(int wait)
{
    const ring_dev_t *dev = ring_dev();
    while (dev && hvd__tl_dev.head) {
        hvd__tl_group_t *g = hvd__tl_dev.head;
        hvd__tl_marks_t *m = &g->marks;
        double at[HVD__TL_MARKS];
        int done = 1, status = wait ? dev->event_sync(m->at[m->n - 1])
                                    : dev->event_query(m->at[m->n - 1],
                                                       &done);
        if (status == RING_OK && !done) return;
        for (int i = 0; status == RING_OK && i < m->n; i++) {
            float ms = 0;
            status = dev->elapsed(i ? m->at[0] : hvd__tl_dev.anchor,
                                  m->at[i], &ms);
            at[i] = (i ? at[0] : hvd__tl_dev.anchor_s) + 1e-3 * ms;
        }
        if (status != RING_OK) {
            hvd__tl_off();
            return;
        }
        for (int r = 0; r < g->nrows; r++)
            for (int i = 0; i + 1 < m->n; i++)
                hvd__write(g->rows[r], HVD__LANE_DEVICE, g->phases[i], at[i],
                           at[i + 1]);
        hvd__event_push(&hvd__tl_dev.spare, hvd__tl_dev.anchor);
        hvd__tl_dev.anchor = m->at[0];
        hvd__tl_dev.anchor_s = at[0];
        m->at[0] = NULL;
        hvd__tl_dev.head = g->next;
        if (!hvd__tl_dev.head) hvd__tl_dev.tail = &hvd__tl_dev.head;
        hvd__timeline_drop(m);
        free(g);
    }
}

void hvd__timeline_device(hvd__tl_marks_t *m, const char *const *tensors,
                          int ntensors, const char *const *phases)
{
    hvd__tl_group_t *g = NULL;
    if (hvd__trace && !hvd__tl_dev.off && m->n >= 2)
        g = malloc(sizeof *g + (size_t)ntensors * sizeof g->rows[0]);
    if (!g) {
        hvd__timeline_drop(m);
        return;
    }
    *g = (hvd__tl_group_t){.marks = *m, .nrows = ntensors};
    m->n = 0;
    for (int i = 0; i + 1 < g->marks.n; i++) g->phases[i] = phases[i];
    for (int r = 0; r < ntensors; r++) {
        long pid = g->rows[r] = hvd__row(tensors[r]);
        if (pid > 0 && !hvd__rows[pid - 1].device_lane) {
            hvd__rows[pid - 1].device_lane = 1;
            hvd__lane(pid, HVD__LANE_DEVICE, "device");
        }
    }
    *hvd__tl_dev.tail = g;
    hvd__tl_dev.tail = &g->next;
    hvd__tl_write_done(0);
}

void hvd__timeline_device_end(void)
{
    if (hvd__trace) hvd__tl_write_done(1);
    hvd__tl_drop_all();
    hvd__event_push(&hvd__tl_dev.spare, hvd__tl_dev.anchor);
    hvd__event_stack_free(&hvd__tl_dev.spare);
    memset(&hvd__tl_dev, 0, sizeof hvd__tl_dev);
    hvd__tl_dev.tail = &hvd__tl_dev.head;
}

void hvd__timeline_close(void)
{
    if (!hvd__trace) return;
    /* A last event without a trailing comma closes the array. */
    fputs("{\"name\": \"shutdown\", \"ph\": \"i\", \"pid\": 0, \"ts\": 0}\n]\n",
          hvd__trace);
    fclose(hvd__trace);
    hvd__trace = NULL;
    hvd__index_free(&hvd__row_index);
    for (size_t i = 0; i < hvd__nrows; i++) free(hvd__rows[i].name);
    free(hvd__rows);
    hvd__rows = NULL;
    hvd__nrows = 0;
}
