/* hvd/events.h: a stack of one device's events kept for reuse
 * (hvd/events.c): made once and recorded again and again, as Horovod's
 * GPU context keeps its events, where making and destroying them would
 * cost driver calls every step. Used for the stream variants' ready and
 * done events (hvd/requests.c) and the timeline's timers
 * (hvd/timeline.c). Not locked: a stack shared between threads is the
 * caller's to lock. */
#ifndef HVD_EVENTS_H
#define HVD_EVENTS_H

#include <stddef.h>
#include "ring/ring.h"

typedef struct {
    ring_event_t **at;
    size_t n, cap;
} hvd__event_stack_t;

/* The event kept last, or NULL when none is. */
ring_event_t *hvd__event_pop(hvd__event_stack_t *s);
/* Keeps e (NULL: nothing); destroys it where the stack cannot grow. */
void hvd__event_push(hvd__event_stack_t *s, ring_event_t *e);
/* Destroys every event kept, and the stack's memory. */
void hvd__event_stack_free(hvd__event_stack_t *s);

#endif
