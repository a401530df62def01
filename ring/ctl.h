/* ring/ctl.h: the counters by which the ranks of a node tell each other
 * how far they are, in host memory they share (ring/shm.c's window), and
 * the wait on them. shm.c's allreduce and ring/ipc.c's device twin count
 * the same three things; each documents its own use and ordering.
 *
 * Counters only grow (since the window was made), so they are never
 * reset. A writer finishes the memory it publishes, then stores the
 * counter with release order; a reader loads it with acquire order and
 * only then reads that memory. C11 atomics: host C only (not nvcc's
 * C++), which is why this is not in ring_internal.h.
 */
#ifndef RING_CTL_H
#define RING_CTL_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include "ring/ring.h"

/* Each counter in a cache line of its own: ranks poll each other's. */
typedef struct {
    /* shm.c counts segments, ipc.c chunks */
    _Alignas(64) _Atomic uint64_t posted;   /* ... whose inputs are in */
    _Alignas(64) _Atomic uint64_t reduced;  /* ... of the own block done */
    _Alignas(64) _Atomic uint64_t released; /* chunks after which this rank
                                               reads no other rank's memory
                                               (shm.c); ipc.c: whose gather
                                               is queued, its "gathered"
                                               event recorded behind it */
    _Alignas(64) _Atomic uint64_t failed;   /* ipc.c: non-zero once this
                                               rank gave up a call midway */
} ring__ctl_t;

/* Until *counter >= target: spin a little (the other rank is usually a few
 * hundred nanoseconds away), then give the core up between looks: with
 * more ranks than cores the rank waited for may need this one. Unless a
 * rank of ctl (n of them; none when n is 0) sets its failed first, which
 * is looked at once the spins are over (a rank that gave up is never a
 * few hundred nanoseconds away): RING_OK, or RING_ERR_STATE then. */
static inline int ring__ctl_wait_unless_failed(_Atomic uint64_t *counter,
                                               uint64_t target,
                                               ring__ctl_t *const *ctl, int n)
{
    for (int spins = 0;
         atomic_load_explicit(counter, memory_order_acquire) < target;
         spins++) {
        if (spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        for (int r = 0; r < n; r++)
            if (atomic_load_explicit(&ctl[r]->failed, memory_order_relaxed))
                return RING_ERR_STATE;
        sched_yield();
    }
    return RING_OK;
}

/* The same, between ranks that cannot fail midway (shm.c's). */
static inline void ring__ctl_wait(_Atomic uint64_t *counter, uint64_t target)
{
    (void)ring__ctl_wait_unless_failed(counter, target, NULL, 0);
}

/* Publishes value: what was written before is seen by whoever reads it
 * after a wait that saw value. */
static inline void ring__ctl_set(_Atomic uint64_t *counter, uint64_t value)
{
    atomic_store_explicit(counter, value, memory_order_release);
}

/* Rank's counters in shm's window (ring/shm.c). */
ring__ctl_t *ring__shm_ctl(ring_shm_t *shm, int rank);

#endif /* RING_CTL_H */
