/* hvd/timeline.h: HVD_TIMELINE's Chrome-trace file (hvd/timeline.c),
 * written by rank 0 only; every call is a no-op when it is off. */
#ifndef HVD_TIMELINE_H
#define HVD_TIMELINE_H

#include "hvd/config.h"

int hvd__timeline_open(const char *path);
/* Whether events are written: a fused group's thousand tensors skip the
 * work of naming their events when they are not. */
int hvd__timeline_on(void);
/* A phase as the host saw it (its lane "host" of the tensor's row). */
void hvd__timeline_event(const char *tensor, const char *phase, double start_s,
                         double end_s);
void hvd__timeline_close(void);

/* A device group's phases as the device ran them, on a lane "device" of
 * each tensor's row (engine thread only): hvd__timeline_anchor, before
 * anything of the group is queued on the stream that runs its phases,
 * sets the device's clock against the host's the first time (the host
 * waits for the stream, once a run); hvd__timeline_mark records a timer
 * on that stream at each bound, the first before the first phase's work,
 * then one after each phase's; hvd__timeline_device
 * hands the marks over with the tensors and the phases' names (static
 * strings, one fewer than marks), to be written once the device is
 * through them (found at a later call; hvd__timeline_device_end, before
 * the stream goes, waits for the rest). A group that failed gives its
 * marks back instead (hvd__timeline_drop). No-ops when the timeline is
 * off, and from the first failure of the device's timers on (said once). */
enum { HVD__TL_MARKS = 4 };
typedef struct {
    ring_event_t *at[HVD__TL_MARKS];
    int n;
} hvd__tl_marks_t;
void hvd__timeline_anchor(ring_stream_t *s);
void hvd__timeline_mark(hvd__tl_marks_t *m, ring_stream_t *s);
void hvd__timeline_device(hvd__tl_marks_t *m, const char *const *tensors,
                          int ntensors, const char *const *phases);
void hvd__timeline_drop(hvd__tl_marks_t *m);
void hvd__timeline_device_end(void);

#endif /* HVD_TIMELINE_H */
