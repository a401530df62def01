/* hvd/timeline.h: HVD_TIMELINE's Chrome-trace file (hvd/timeline.c),
 * written by rank 0 only; every call is a no-op when it is off. */
#ifndef HVD_TIMELINE_H
#define HVD_TIMELINE_H

#include "hvd/config.h"

int hvd__timeline_open(const char *path);
/* Whether events are written: a fused group's thousand tensors skip the
 * work of naming their events when they are not. */
int hvd__timeline_on(void);
void hvd__timeline_event(const char *tensor, const char *phase, double start_s,
                         double end_s);
void hvd__timeline_close(void);

#endif /* HVD_TIMELINE_H */
