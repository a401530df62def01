/* hvd/requests.h: requests and their bookkeeping (hvd/requests.c): what a
 * request is, the state the program's threads and the engine thread
 * share (the queue between them, completion, the settings), this rank's
 * list of pending requests, and the wait for a non-blocking MPI call.
 *
 * Threads: the program's threads call the API, which only queues requests
 * under `mu` and waits on `done_cv`; the engine thread alone calls MPI after
 * hvd_init, and alone touches everything marked "engine only".
 */
#ifndef HVD_REQUESTS_H
#define HVD_REQUESTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "hvd/config.h"
#include "hvd/contention.h"
#include "hvd/events.h"
#include "hvd/index.h"

typedef enum {
    HVD__ALLREDUCE,
    HVD__BROADCAST,
    HVD__ALLGATHER,
    HVD__BARRIER,
    HVD__JOIN,
    HVD__ALLREDUCE_APPLY, /* a sharded optimizer step: not fused, and no
                             rank may have joined (its block has no one to
                             apply it) */
    HVD__KIND_COUNT
} hvd__kind_t;

enum { HVD__NAME_MAX = 200 }; /* bytes of a name, NUL included */

/* Where a request's buffers are: ranks must agree (a staged device call
 * and a host call move different messages), and groups never mix them
 * (their fusion buffers differ). */
typedef enum { HVD__MEM_HOST, HVD__MEM_DEVICE, HVD__MEM_COUNT } hvd__mem_t;

const char *hvd__mem_name(int mem);

/* What every rank must agree on for a name, and a fusion hint that need
 * not agree. Fixed size, so it travels as bytes between ranks. */
typedef struct {
    char name[HVD__NAME_MAX];
    int32_t kind, dtype, op, root;
    int32_t mem;      /* hvd__mem_t */
    int32_t unused;   /* 0: count stays 8-aligned with no padding, so the
                         bytes that travel are all defined */
    uint64_t count;
    uint64_t follows; /* hvd__chain_link's hint; not matched; last field */
} hvd__desc_t;

const char *hvd__kind_name(int kind);
/* A request's data in bytes: count elements of its dtype. */
size_t hvd__desc_bytes(const hvd__desc_t *d);
/* Whether a and b, of one name, agree on everything but the hint. */
int hvd__desc_same_fields(const hvd__desc_t *a, const hvd__desc_t *b);
/* A name's 64-bit hash, never 0. */
uint64_t hvd__name_hash(const char *name);

/* What a rank knows of the allreduce it submitted last, for the hint. */
typedef struct {
    const char *end; /* where its data ended, when it was in place */
    int32_t dtype, op;
    uint64_t hash;   /* of its name */
} hvd__chain_t;

/* Sets desc->follows to the hash of the previous request's name when this
 * allreduce is in place and starts where that one, also in place and of
 * the same dtype and op, ended (else 0), and makes desc the previous.
 * The plan fuses on it (hvd__plan_group). */
void hvd__chain_link(hvd__chain_t *chain, hvd__desc_t *desc,
                     const void *sendbuf, const void *recvbuf);

/* Who frees a handle (hvd__handle_release). A named request's handle is
 * kept for its name (hvd__engine.named) and used again by the name's next
 * request once hvd_wait has returned it: a training step makes the same
 * names every time, and a new handle each (calloc, the name copied and
 * hashed, an index entry made and removed, free) cost more per request,
 * in lines of memory the step's allreduce had evicted, than the rest of
 * its bookkeeping (bench/README.md). */
typedef enum {
    HVD__OWNER_CALLER, /* submitted; hvd_wait returns it to the index */
    HVD__OWNER_INDEX,  /* waited for: idle, the name's next request's */
    HVD__OWNER_NONE    /* not kept (unnamed, or replaced): hvd_wait frees */
} hvd__owner_t;

struct hvd_handle {
    hvd__desc_t desc;
    const void *sendbuf;
    void *recvbuf;
    ring_apply_t apply;       /* HVD__ALLREDUCE_APPLY's */
    /* The stream variants' (hvd_allreduce_async_stream): recorded on the
     * caller's stream at submission, the engine waits on it before it
     * reads the tensor; done_ev is recorded by the engine once the result
     * is in place, for hvd_wait_stream. NULL otherwise. Given back
     * (hvd__event_give) with the handle. */
    ring_event_t *ready_ev, *done_ev;
    int status;               /* valid once done */
    char *error;              /* with a failed status: the engine's message
                                 for it (malloc'd), for hvd_last_error */
    _Atomic int done;         /* set under mu; hvd_wait may also spin on
                                 it without */
    _Atomic int owner;        /* hvd__owner_t; CALLER -> INDEX by hvd_wait
                                 without mu, every other change under mu */
    int waited;               /* under mu: a caller sleeps until done */
    /* Under mu, kept handles only: the kept handle submitted after this
     * one last time, valid while next_epoch is the engine's named_epoch. */
    struct hvd_handle *named_next;
    uint64_t next_epoch;
    int coordinated;          /* engine only: sent to the coordinator */
    int cache_slot;           /* engine only: its response cache entry, -1 */
    int cache_hint;           /* engine only: the cache slot of its name
                                 when it last ran, kept with the handle */
    int by_name;              /* engine only: in the pending list's index */
    size_t pending_pos;       /* engine only: where in the pending list */
    double submit_s;          /* engine only: for stalls and the timeline */
    struct hvd_handle *next;  /* in the incoming queue or the pending list */
};

/* ---- the state the API and the engine share ---- */
/* Named for the engine, which runs on it; defined in hvd/requests.c. */
typedef struct {
    MPI_Comm comm;            /* a duplicate of the world: our traffic only */
    int rank, size;
    int device;               /* the rank's device (ring_dev()->device on
                                 the thread that called hvd_init), which
                                 the engine thread selects; -1: none */
    hvd__config_t config;

    pthread_mutex_t mu;       /* guards the fields below it */
    pthread_cond_t wake_cv;   /* engine: new work or shutdown */
    pthread_cond_t done_cv;   /* API: a handle completed */
    hvd_handle_t incoming;    /* submitted, not yet seen by the engine */
    hvd_handle_t *incoming_tail;
    _Atomic uint64_t nsubmitted; /* requests queued so far: bursts end
                                 when it stops moving (changed under mu;
                                 a spinning engine reads it without) */
    hvd__chain_t chain;       /* the last request queued, for its follower */
    hvd__index_t named;       /* name -> its handle, kept (hvd__owner_t);
                                 not done: in flight, a duplicate fails */
    hvd_handle_t named_last;  /* the kept handle submitted last, or NULL */
    uint64_t named_epoch;     /* changes when a kept handle may be freed
                                 (hvd__named_forget) */
    _Atomic int waiters;      /* callers blocked in hvd_wait: no more
                                 requests are coming from them (changed
                                 under mu; the engine also reads it
                                 without, see hvd__mpi_wait) */
    int shares_core;          /* set before the engine starts: this rank
                                 runs on one PU of its own, the engine's
                                 thread too (hvd__engine_start) */
    int own_cores;            /* set before the engine starts: this rank's
                                 PUs are its own (hvd__own_pus) */
    int spare_pus;            /* set before the engine starts: it has more
                                 than one, so the engine and the caller
                                 run side by side, and their waits spin
                                 up to config.spin_s before they sleep:
                                 a sleeping thread on another core takes
                                 a cross-core wake-up to rouse (tens of
                                 microseconds on a virtual machine's idle
                                 vCPU, twice a step), while the spinning
                                 costs only that spare PU's idle time */
    hvd__contention_t contention; /* under mu: spare_pus may be taken
                                     (contention.c) */
    int shutdown_requested;
    int stopped;  /* the failure the engine stopped at (HVD_ERR_STALL,
                     or a collective's): every later call fails */
    int peer_down; /* another rank shut down: every later call fails */
    int last_joined; /* hvd_last_joined(), under mu */
    uint64_t unnamed_seq[HVD__KIND_COUNT]; /* under mu: the next unnamed
                                              request's number, a kind */
} hvd__engine_t;

extern hvd__engine_t hvd__engine;

/* How long a wait spins before it sleeps: HVD_SPIN_TIME with a spare PU
 * that nothing else wants, else 0 (spare_pus and contention say why).
 * Called with mu held. */
static inline double hvd__spin_time(void)
{
    return hvd__engine.spare_pus &&
                   hvd__now() >= hvd__engine.contention.off_until
               ? hvd__engine.config.spin_s
               : 0;
}

/* One turn of a spin: tells the core (and a hypervisor) that it waits. */
static inline void hvd__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A request as the API checked it, before it has a handle: what
 * hvd__request_queue copies into one. */
typedef struct {
    const char *name;
    int32_t kind, dtype, op, root, mem;
    uint64_t count;
    const void *sendbuf;
    void *recvbuf;
    ring_apply_t apply;
    ring_event_t *ready_ev, *done_ev;
} hvd__request_t;

/* Queues req under a handle of its own, *out, which the engine owns until
 * it is done, and wakes the engine; a NULL name is matched by order, as
 * the n-th unnamed call of its kind. HVD_ERR_STATE when the name is
 * already in flight on this rank, after another rank's shutdown, or once
 * this rank's hvd_shutdown began; HVD_ERR_STALL after a stall shutdown,
 * HVD_ERR_NOMEM; nothing is queued then, and req's events are still the
 * caller's. */
int hvd__request_queue(const hvd__request_t *req, hvd_handle_t *out);
/* hvd_wait's end: gives the done handle's events back
 * (hvd__event_give), frees its error, then the handle, or gives it back
 * to its name's index. */
void hvd__handle_release(hvd_handle_t h);
/* The stream variants' events, kept for the next requests instead of
 * made and destroyed for each (a training step's tensors made two driver
 * calls each way apiece, every step): take one kept, or a new one; give
 * one back (NULL: nothing), kept as long as hvd is up (as many as were
 * ever in flight at once), destroyed once hvd__events_free has run and
 * until the next take. A wait queued behind an event holds the record
 * it was queued after, so one taken again is recorded anew without
 * disturbing waits queued before. */
int hvd__event_take(ring_event_t **ev);
void hvd__event_give(ring_event_t *ev);
/* At shutdown: destroys the kept events. */
void hvd__events_free(void);
/* Frees the kept handles at shutdown (those not yet waited for are freed
 * by their hvd_wait). */
void hvd__named_free(void);
/* Marks h done with `status` and wakes its waiter. Engine only. */
void hvd__complete(hvd_handle_t h, int status);
/* The same for the non-NULL handles of hs, with one wake-up. */
void hvd__complete_many(hvd_handle_t *hs, size_t n, int status);

/* ---- this rank's pending requests (engine only) ---- */
/* In order of submission; those a plan will name are indexed by name.
 * (Requests the response cache knows are found by their cache slot
 * instead, and are indexed only if that slot leaves the cache: a name
 * lookup per request per step was most of the fast path's cost.) A
 * request leaves by hvd__pending_take or hvd__pending_remove, which leave
 * a hole that the next hvd__pending_compact closes: removal is O(1),
 * order is kept. */
typedef struct {
    hvd_handle_t *items;
    size_t len, cap;
    hvd__index_t by_name;
} hvd__list_t;

/* Appends h, and indexes it by name when by_name. */
int hvd__pending_add(hvd__list_t *list, hvd_handle_t h, int by_name);
/* Indexes a pending request by name from now on. */
int hvd__pending_index(hvd__list_t *list, hvd_handle_t h);
/* Removes and returns the indexed request of that name; NULL when none. */
hvd_handle_t hvd__pending_take(hvd__list_t *list, const char *name);
/* Removes h, which is pending. */
void hvd__pending_remove(hvd__list_t *list, hvd_handle_t h);
void hvd__pending_compact(hvd__list_t *list);
void hvd__pending_free(hvd__list_t *list);

/* Waits for a non-blocking MPI call, sleeping between tests; HVD_OK or
 * HVD_ERR_MPI (logged). Engine only. */
int hvd__mpi_wait(MPI_Request *request);

#endif /* HVD_REQUESTS_H */
