/* hvd/events.c: the stack of events kept for reuse (hvd/events.h). */
#include <stdlib.h>
#include "hvd/events.h"

ring_event_t *hvd__event_pop(hvd__event_stack_t *s)
{
    return s->n > 0 ? s->at[--s->n] : NULL;
}

void hvd__event_push(hvd__event_stack_t *s, ring_event_t *e)
{
    if (!e) return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        ring_event_t **at = realloc(s->at, cap * sizeof *at);
        if (!at) {
            ring_dev()->event_destroy(e);
            return;
        }
        s->at = at;
        s->cap = cap;
    }
    s->at[s->n++] = e;
}

void hvd__event_stack_free(hvd__event_stack_t *s)
{
    while (s->n > 0) ring_dev()->event_destroy(s->at[--s->n]);
    free(s->at);
    *s = (hvd__event_stack_t){0};
}
