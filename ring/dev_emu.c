/* ring/dev_emu.c: the emulated device (ring__dev_emulated, ring/dev.h),
 * for testing the device path on machines without a GPU, with CUDA's
 * semantics made observable:
 *
 *   memory   each allocation is a memfd mapped MAP_SHARED, so that another
 *            process of the node can map it too (ipc, by
 *            /proc/PID/fd/FD); a table of allocations and opened mappings
 *            says what is device memory. Pinned memory is plain host
 *            memory. One device, ordinal 0.
 *   streams  a worker thread each, running its queue in order; events are
 *            (stream, count of operations queued) pairs, done when the
 *            stream has completed that many; an interprocess event counts
 *            its records and the last one through in a page the node's
 *            processes share (ipc_event_*), polled by waits.
 *   kernels  the host bodies of the CUDA kernels: ring__reduce_host* for
 *            the reductions (the same arithmetic, ring/reduce_op.h) and
 *            ring/copy_batch.h's body run over the whole grid; their
 *            operands must be device memory (CUDA's kernels fault on host
 *            memory on a node without HMM), where copies take both.
 *   delay    each operation first sleeps 0..200 us, drawn per stream from
 *            the seed: work that races a missing wait loses.
 *   lag      a test can make one process's operations slower still
 *            (ring__dev_emu_lag), for the races between processes.
 *   broken   a test can make owns or the host's waits fail
 *            (ring__dev_emu_fails), as a CUDA context broken by an
 *            earlier error answers them.
 *   guard    device memory is PROT_NONE except while an operation that
 *            uses it runs: host code touching a device pointer faults.
 *   waits    the host's waits for the device (stream_sync, event_sync)
 *            are counted, for tests of how often a path makes them.
 *   timers   timer_create's events queue their record as an operation of
 *            no delay that notes the host's clock when it runs: the time
 *            the work queued before it was done.
 *   misuse   what CUDA leaves undefined and works here is logged and
 *            counted (ring__dev_emu_misuses), for tests to want none:
 *            memory or an event freed by the process that exported it
 *            while another still has it open (each opener holds a
 *            shared flock on its own open of the memfd).
 *
 * All shared state is under one mutex: the table, the streams' queues and
 * counters, the events. Workers drop it while an operation runs.
 *
 * Stricter than CUDA, on purpose: release does not wait for queued work
 * (cudaFree waits for the whole device), and refuses memory that an
 * operation is using right then; a range that runs past the end of its
 * allocation is refused when queued.
 * Left out: more than one device, managed memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "ring/copy_batch.h"
#include "ring/dev.h"
#include "ring/ring_internal.h"

/* The batched copy's grid: at most a 16th of the CUDA launcher's blocks
 * and a quarter of its threads, as the emulation runs them one by one. */
enum { EMU_BATCH_BLOCKS = 64, EMU_BATCH_THREADS = 128 };
enum { EMU_DELAY_MAX_US = 200 };

/* An allocation of ours, or another process's opened here. */
typedef struct {
    char *base;
    size_t nbytes;
    int fd;     /* the memfd (an opened mapping's: its own open of it) */
    int opened; /* by ipc_open */
    int users;  /* operations running on it; guard: accessible while > 0 */
} emu_region_t;

typedef struct emu_op emu_op_t;

struct ring_stream {
    ring_stream_t *next; /* the live streams */
    uint64_t id;          /* creation index, from 1 */
    pthread_t thread;
    emu_op_t *head, *tail;
    uint64_t queued, completed; /* operations */
    int stopping;
    pthread_cond_t wake; /* work queued, or stopping */
    uint64_t rng;        /* delay mode; the worker's alone */
};

/* An interprocess event's records, in a memfd page that the node's
 * processes map: records counts the record calls, done is the highest of
 * them whose work is through. */
typedef struct {
    _Atomic uint64_t records, done;
} emu_shared_event_t;

/* Recorded as (stream id, operations queued then); id 0: never. An
 * interprocess event (shared) is recorded in its page instead, and lives
 * until its last user is gone: the handle, and the operations queued on
 * it (refs). */
struct ring_event {
    uint64_t stream_id, seq;
    emu_shared_event_t *shared;
    int fd;       /* shared's memfd (the handle's, or this open's); or -1 */
    int exported; /* made by ipc_event_create */
    int refs;
    int timed;    /* made by timer_create */
    double done_s; /* a timer's: when its last record's work was done */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t progress; /* some stream completed an operation */
    emu_region_t **regions;
    size_t nregions, cap;
    ring_stream_t *streams;
    uint64_t nstreams_created;
    ring__emu_mode_t mode;
    unsigned long seed;
} emu = {.lock = PTHREAD_MUTEX_INITIALIZER,
         .progress = PTHREAD_COND_INITIALIZER,
         .seed = 1};

/* stream_sync and event_sync calls (ring__dev_emu_host_waits). */
static _Atomic uint64_t emu_host_waits;

uint64_t ring__dev_emu_host_waits(void)
{
    return atomic_load(&emu_host_waits);
}

/* event_create and timer_create calls (ring__dev_emu_events_made). */
static _Atomic uint64_t emu_events_made;

uint64_t ring__dev_emu_events_made(void)
{
    return atomic_load(&emu_events_made);
}

/* Microseconds each operation of this process waits (ring__dev_emu_lag). */
static _Atomic unsigned emu_lag_us;

void ring__dev_emu_lag(unsigned us)
{
    atomic_store(&emu_lag_us, us);
}

/* What fails (ring__dev_emu_fails): RING__EMU_FAIL_* bits. */
static _Atomic unsigned emu_fails;

void ring__dev_emu_fails(unsigned what)
{
    atomic_store(&emu_fails, what);
}

/* RING_ERR_CUDA, logged, where a test made `what` of call fail. */
static int emu_failing(unsigned what, const char *call)
{
    if (!(atomic_load(&emu_fails) & what)) return RING_OK;
    ring__log("%s: the emulated device fails it (a test's "
              "ring__dev_emu_fails, as a broken CUDA context)", call);
    return RING_ERR_CUDA;
}

/* What CUDA leaves undefined, seen (ring__dev_emu_misuses). */
static _Atomic uint64_t emu_misuses;

uint64_t ring__dev_emu_misuses(void)
{
    return atomic_load(&emu_misuses);
}

/* Before the exporter frees what fd backs: another process still holding
 * it open (emu_ipc_fd's flock) is a misuse (cudaIpcCloseMemHandle's and
 * cudaIpcOpenEventHandle's notes: undefined), logged and counted. */
static void emu_check_unheld(const char *func, const void *what, int fd)
{
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK) return;
    atomic_fetch_add(&emu_misuses, 1);
    ring__log("%s: %p is still open in another process, which must close "
              "it first (CUDA leaves this undefined)",
              func, what);
}

void ring__dev_emu_configure(ring__emu_mode_t mode, unsigned long seed)
{
    pthread_mutex_lock(&emu.lock);
    emu.mode = mode;
    emu.seed = seed;
    pthread_mutex_unlock(&emu.lock);
}

/* ---- the table of device memory ---- */

/* The region holding p; NULL for memory that is not ours. Under lock. */
static emu_region_t *emu_find(const void *p)
{
    const char *c = (const char *)p;
    for (size_t i = 0; i < emu.nregions; i++) {
        emu_region_t *r = emu.regions[i];
        if (c >= r->base && c < r->base + r->nbytes) return r;
    }
    return NULL;
}

/* A new mapping's protection: in guard mode, closed until an operation
 * that uses it runs. Under lock. */
static int emu_prot(void)
{
    return emu.mode == RING__EMU_GUARD ? PROT_NONE : PROT_READ | PROT_WRITE;
}

/* Maps fd's nbytes and adds the region to the table; on failure the
 * caller still owns fd. */
static int emu_map(const char *func, int fd, size_t nbytes, int opened,
                   void **p)
{
    int status = RING_ERR_NOMEM;
    emu_region_t *r = calloc(1, sizeof(*r));
    pthread_mutex_lock(&emu.lock);
    if (!r) goto err_table;
    if (emu.nregions == emu.cap) {
        size_t cap = emu.cap ? 2 * emu.cap : 16;
        emu_region_t **grown = realloc(emu.regions, cap * sizeof(*grown));
        if (!grown) goto err_table;
        emu.regions = grown;
        emu.cap = cap;
    }
    r->base = mmap(NULL, nbytes, emu_prot(), MAP_SHARED, fd, 0);
    if (r->base == MAP_FAILED) {
        ring__log("%s: mmap of %zu bytes: %s", func, nbytes, strerror(errno));
        goto out;
    }
    r->nbytes = nbytes;
    r->fd = fd;
    r->opened = opened;
    emu.regions[emu.nregions++] = r;
    *p = r->base;
    r = NULL;
    status = RING_OK;
    goto out;
err_table:
    ring__log("%s: out of memory for the table of device memory", func);
out:
    pthread_mutex_unlock(&emu.lock);
    free(r);
    return status;
}

/* Takes the region that starts at p (an allocation, or an opened mapping:
 * `opened`) out of the table and unmaps it; RING_ERR_ARG when there is
 * none or an operation uses it. */
static int emu_unmap(const char *func, void *p, int opened)
{
    int status = RING_ERR_ARG;
    emu_region_t *r = NULL;
    pthread_mutex_lock(&emu.lock);
    for (size_t i = 0; i < emu.nregions; i++) {
        if (emu.regions[i]->base != p || emu.regions[i]->opened != opened)
            continue;
        if (emu.regions[i]->users > 0) {
            ring__log("%s: %p is in use by a queued operation: sync its "
                      "stream first",
                      func, p);
            goto out;
        }
        r = emu.regions[i];
        emu.regions[i] = emu.regions[--emu.nregions];
        break;
    }
    if (!r) {
        ring__log("%s: %p is not the start of %s", func, p,
                  opened ? "a mapping opened by ipc_open"
                         : "an emulated device allocation");
        goto out;
    }
    if (!opened) emu_check_unheld(func, p, r->fd);
    munmap(r->base, r->nbytes);
    close(r->fd);
    free(r);
    status = RING_OK;
out:
    pthread_mutex_unlock(&emu.lock);
    return status;
}

static int emu_alloc(void **p, size_t nbytes)
{
    int fd;
    *p = NULL;
    if (nbytes == 0) return RING_OK; /* as cudaMalloc: NULL, success */
    fd = memfd_create("hvd-emulated-device", MFD_CLOEXEC);
    if (fd < 0) {
        ring__log("alloc: memfd_create: %s", strerror(errno));
        return RING_ERR_NOMEM;
    }
    if (ftruncate(fd, (off_t)nbytes) != 0) {
        ring__log("alloc: %zu bytes: ftruncate: %s", nbytes, strerror(errno));
        close(fd);
        return RING_ERR_NOMEM;
    }
    int status = emu_map("alloc", fd, nbytes, 0, p);
    if (status != RING_OK) close(fd);
    return status;
}

static int emu_release(void *p)
{
    return p ? emu_unmap("release", p, 0) : RING_OK;
}

static int emu_alloc_pinned(void **p, size_t nbytes)
{
    *p = NULL;
    if (nbytes == 0) return RING_OK;
    if (posix_memalign(p, (size_t)sysconf(_SC_PAGESIZE), nbytes) != 0) {
        ring__log("alloc_pinned: %zu bytes: out of memory", nbytes);
        *p = NULL;
        return RING_ERR_NOMEM;
    }
    return RING_OK;
}

static int emu_release_pinned(void *p)
{
    free(p);
    return RING_OK;
}

static int emu_owns(const void *p, int *device)
{
    if (emu_failing(RING__EMU_FAIL_OWNS, "owns") != RING_OK)
        return RING_ERR_CUDA;
    pthread_mutex_lock(&emu.lock);
    int found = emu_find(p) != NULL;
    pthread_mutex_unlock(&emu.lock);
    if (found && device) *device = 0;
    return found;
}

static int emu_device(int *device)
{
    *device = 0;
    return RING_OK;
}

static int emu_set_device(int device)
{
    if (device == 0) return RING_OK;
    ring__log("set_device: device %d: the emulation has one device, 0", device);
    return RING_ERR_ARG;
}

/* ---- operations ---- */

/* A queued operation: run() on its arguments, with uses[] the pointers
 * it reads or writes (guard mode opens their regions around it). */
struct emu_op {
    emu_op_t *next;
    void (*run)(emu_op_t *op);
    void *dst;
    const void *a, *b;
    size_t nbytes, count;
    ring_dtype_t dtype, src_dtype; /* convert's: dst's, src's */
    ring_op_t op;
    int divisor;
    const void *in[RING_DEV_MAX_INPUTS];
    int n;
    ring_copy_t *copies; /* copy_batch's, copied at enqueue */
    size_t ncopies;
    ring_event_t wait; /* stream_wait's event, as recorded then; a
                          timer's record, as this operation marks it */
    ring_event_t *timer; /* a timer whose record this is, held (refs) */
    int instant;         /* a record, not work: no delay */
    ring_event_t *shared; /* an interprocess event's, held (refs), and
                             the record it signals or waits for */
    uint64_t record;
    size_t nuses;
    struct {
        const void *p;
        emu_region_t *region; /* held while run() runs */
    } uses[];
};

static emu_op_t *emu_op_new(const char *func, size_t nuses)
{
    emu_op_t *op = calloc(1, sizeof(*op) + nuses * sizeof(op->uses[0]));
    if (!op)
        ring__log("%s: out of memory queueing the operation", func);
    else
        op->nuses = nuses;
    return op;
}

static void emu_event_unref(ring_event_t *e);

static void emu_op_free(emu_op_t *op)
{
    if (op->shared) emu_event_unref(op->shared);
    if (op->timer) emu_event_unref(op->timer);
    free(op->copies);
    free(op);
}

/* Guard mode opens a region while its first user runs, and closes it
 * after the last; the count is kept in every mode so that release can
 * refuse memory in use. */
static void emu_hold(emu_op_t *op)
{
    pthread_mutex_lock(&emu.lock);
    for (size_t i = 0; i < op->nuses; i++) {
        emu_region_t *r = emu_find(op->uses[i].p);
        op->uses[i].region = r;
        if (r && r->users++ == 0 && emu.mode == RING__EMU_GUARD)
            mprotect(r->base, r->nbytes, PROT_READ | PROT_WRITE);
    }
    pthread_mutex_unlock(&emu.lock);
}

static void emu_unhold(emu_op_t *op)
{
    pthread_mutex_lock(&emu.lock);
    for (size_t i = 0; i < op->nuses; i++) {
        emu_region_t *r = op->uses[i].region;
        if (r && --r->users == 0 && emu.mode == RING__EMU_GUARD)
            mprotect(r->base, r->nbytes, PROT_NONE);
    }
    pthread_mutex_unlock(&emu.lock);
}

/* Refuses, with a message, a range of device memory [p, p + nbytes) that
 * runs past the end of its allocation; and for a kernel (CUDA's kernels,
 * on a node without HMM, fault on host memory; copies take it) a range
 * that is not device memory. */
static int emu_check_span(const char *func, const char *what, const void *p,
                          size_t nbytes, int kernel)
{
    int status = RING_OK;
    pthread_mutex_lock(&emu.lock);
    emu_region_t *r = emu_find(p);
    if (!r && kernel && nbytes) {
        ring__log("%s: %s %p is host memory: a kernel reads and writes "
                  "device memory only",
                  func, what, p);
        status = RING_ERR_ARG;
    } else if (r && nbytes > (size_t)(r->base + r->nbytes - (const char *)p)) {
        ring__log("%s: %s %p + %zu bytes runs past the end of its device "
                  "allocation (%p, %zu bytes)",
                  func, what, p, nbytes, (void *)r->base, r->nbytes);
        status = RING_ERR_ARG;
    }
    pthread_mutex_unlock(&emu.lock);
    return status;
}

/* ---- streams ---- */

static uint64_t emu_splitmix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void emu_sleep_us(long us)
{
    struct timespec t = {us / 1000000, us % 1000000 * 1000};
    if (us > 0) nanosleep(&t, NULL);
}

static void *emu_worker(void *arg)
{
    ring_stream_t *s = arg;
    pthread_mutex_lock(&emu.lock);
    int delay = emu.mode == RING__EMU_DELAY;
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->wake, &emu.lock);
        emu_op_t *op = s->head;
        if (!op) break; /* stopping, and drained */
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&emu.lock);
        if (!op->instant) {
            uint64_t draw = delay ? emu_splitmix(&s->rng) : 0;
            emu_sleep_us((long)(draw % (EMU_DELAY_MAX_US + 1)) +
                         (long)atomic_load(&emu_lag_us));
        }
        emu_hold(op);
        op->run(op);
        emu_unhold(op);
        emu_op_free(op);
        pthread_mutex_lock(&emu.lock);
        s->completed++;
        pthread_cond_broadcast(&emu.progress);
    }
    pthread_mutex_unlock(&emu.lock);
    return NULL;
}

/* Queues op on s; takes op even when it fails. A timer's record (op's
 * timer) is recorded as this operation's place on s. */
static int emu_enqueue(const char *func, ring_stream_t *s, emu_op_t *op)
{
    if (!op) return RING_ERR_NOMEM;
    if (!s) {
        ring__log("%s: no stream", func);
        emu_op_free(op);
        return RING_ERR_ARG;
    }
    pthread_mutex_lock(&emu.lock);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->queued++;
    if (op->timer) {
        op->timer->stream_id = s->id;
        op->timer->seq = s->queued;
        op->wait = *op->timer;
    }
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&emu.lock);
    return RING_OK;
}

static int emu_stream_create(ring_stream_t **out)
{
    *out = NULL;
    if (emu_failing(RING__EMU_FAIL_STREAMS, "stream_create") != RING_OK)
        return RING_ERR_CUDA;
    ring_stream_t *s = calloc(1, sizeof(*s));
    if (!s) {
        ring__log("stream_create: out of memory");
        return RING_ERR_NOMEM;
    }
    pthread_cond_init(&s->wake, NULL);
    pthread_mutex_lock(&emu.lock);
    s->id = ++emu.nstreams_created;
    s->rng = emu.seed * 0x100000001b3ull + s->id;
    pthread_mutex_unlock(&emu.lock);
    int rc = pthread_create(&s->thread, NULL, emu_worker, s);
    if (rc != 0) {
        ring__log("stream_create: pthread_create: %s", strerror(rc));
        pthread_cond_destroy(&s->wake);
        free(s);
        return RING_ERR_CUDA;
    }
    pthread_mutex_lock(&emu.lock);
    s->next = emu.streams;
    emu.streams = s;
    pthread_mutex_unlock(&emu.lock);
    *out = s;
    return RING_OK;
}

/* Drains s: CUDA's destroy returns at once, but the work still runs. */
static int emu_stream_destroy(ring_stream_t *s)
{
    if (!s) return RING_OK;
    pthread_mutex_lock(&emu.lock);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&emu.lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&emu.lock);
    ring_stream_t **at = &emu.streams;
    while (*at != s)
        at = &(*at)->next;
    *at = s->next;
    pthread_mutex_unlock(&emu.lock);
    pthread_cond_destroy(&s->wake);
    free(s);
    return RING_OK;
}

static int emu_stream_sync(ring_stream_t *s)
{
    if (!s) {
        ring__log("stream_sync: no stream");
        return RING_ERR_ARG;
    }
    atomic_fetch_add(&emu_host_waits, 1);
    if (emu_failing(RING__EMU_FAIL_SYNCS, "stream_sync") != RING_OK)
        return RING_ERR_CUDA;
    pthread_mutex_lock(&emu.lock);
    while (s->completed < s->queued)
        pthread_cond_wait(&emu.progress, &emu.lock);
    pthread_mutex_unlock(&emu.lock);
    return RING_OK;
}

/* ---- events ---- */

/* Whether e's work is done; a destroyed stream has drained. Under lock. */
static int emu_event_done(const ring_event_t *e)
{
    for (ring_stream_t *s = emu.streams; s; s = s->next)
        if (s->id == e->stream_id) return s->completed >= e->seq;
    return 1;
}

static int emu_event_new(ring_event_t **e)
{
    *e = calloc(1, sizeof(**e));
    if (!*e) {
        ring__log("event_create: out of memory");
        return RING_ERR_NOMEM;
    }
    (*e)->fd = -1;
    (*e)->refs = 1;
    return RING_OK;
}

static int emu_event_create(ring_event_t **e)
{
    atomic_fetch_add(&emu_events_made, 1);
    return emu_event_new(e);
}

static int emu_timer_create(ring_event_t **e)
{
    int status = emu_event_create(e);
    if (status == RING_OK) (*e)->timed = 1;
    return status;
}

/* Drops a user of e; the last frees it. */
static void emu_event_unref(ring_event_t *e)
{
    pthread_mutex_lock(&emu.lock);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&emu.lock);
    if (!last) return;
    if (e->shared) munmap(e->shared, sizeof(*e->shared));
    if (e->fd >= 0) close(e->fd);
    free(e);
}

/* CUDA's destroy returns at once, and the work waiting for it still
 * runs: queued operations hold an interprocess event until they ran. */
static int emu_event_destroy(ring_event_t *e)
{
    if (!e) return RING_OK;
    if (e->exported) emu_check_unheld("event_destroy", (void *)e, e->fd);
    emu_event_unref(e);
    return RING_OK;
}

/* Until shared's record `record` is through: another process's stream
 * signals it, so nothing here is woken, and this looks every 20 us. */
static void emu_wait_shared(const emu_shared_event_t *shared, uint64_t record)
{
    struct timespec t = {0, 20 * 1000};
    while (atomic_load_explicit(&shared->done, memory_order_acquire) < record)
        nanosleep(&t, NULL);
}

static void emu_run_signal(emu_op_t *op)
{
    emu_shared_event_t *sh = op->shared->shared;
    uint64_t done = atomic_load_explicit(&sh->done, memory_order_relaxed);
    while (done < op->record &&
           !atomic_compare_exchange_weak_explicit(&sh->done, &done,
                                                  op->record,
                                                  memory_order_release,
                                                  memory_order_relaxed))
        ;
}

/* An operation holding the interprocess event e; NULL when out of
 * memory. */
static emu_op_t *emu_shared_op(const char *func, ring_event_t *e,
                               void (*run)(emu_op_t *))
{
    emu_op_t *op = emu_op_new(func, 0);
    if (!op) return NULL;
    op->run = run;
    pthread_mutex_lock(&emu.lock);
    e->refs++;
    pthread_mutex_unlock(&emu.lock);
    op->shared = e;
    return op;
}

static double emu_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A timer's record, run: the time, unless the timer was recorded again
 * since (that record notes its own). */
static void emu_run_stamp(emu_op_t *op)
{
    double now = emu_now_s();
    ring_event_t *e = op->timer;
    pthread_mutex_lock(&emu.lock);
    if (e->stream_id == op->wait.stream_id && e->seq == op->wait.seq)
        e->done_s = now;
    pthread_mutex_unlock(&emu.lock);
}

static int emu_event_record(ring_event_t *e, ring_stream_t *s)
{
    if (!e || !s) {
        ring__log("event_record: no %s", e ? "stream" : "event");
        return RING_ERR_ARG;
    }
    if (e->timed) {
        emu_op_t *op = emu_op_new("event_record", 0);
        if (!op) return RING_ERR_NOMEM;
        op->run = emu_run_stamp;
        op->instant = 1;
        pthread_mutex_lock(&emu.lock);
        e->refs++;
        pthread_mutex_unlock(&emu.lock);
        op->timer = e;
        return emu_enqueue("event_record", s, op);
    }
    if (e->shared) {
        emu_op_t *op = emu_shared_op("event_record", e, emu_run_signal);
        if (op) op->record = atomic_fetch_add(&e->shared->records, 1) + 1;
        return emu_enqueue("event_record", s, op);
    }
    pthread_mutex_lock(&emu.lock);
    e->stream_id = s->id;
    e->seq = s->queued;
    pthread_mutex_unlock(&emu.lock);
    return RING_OK;
}

static void emu_wait_locked(const ring_event_t *e)
{
    while (!emu_event_done(e))
        pthread_cond_wait(&emu.progress, &emu.lock);
}

static int emu_event_sync(ring_event_t *e)
{
    if (!e) {
        ring__log("event_sync: no event");
        return RING_ERR_ARG;
    }
    atomic_fetch_add(&emu_host_waits, 1);
    if (emu_failing(RING__EMU_FAIL_SYNCS, "event_sync") != RING_OK)
        return RING_ERR_CUDA;
    if (e->shared) {
        emu_wait_shared(e->shared, atomic_load(&e->shared->records));
        return RING_OK;
    }
    pthread_mutex_lock(&emu.lock);
    emu_wait_locked(e);
    pthread_mutex_unlock(&emu.lock);
    return RING_OK;
}

static int emu_event_query(ring_event_t *e, int *done)
{
    if (!e) {
        ring__log("event_query: no event");
        return RING_ERR_ARG;
    }
    if (e->shared) {
        *done = atomic_load(&e->shared->done) >=
                atomic_load(&e->shared->records);
        return RING_OK;
    }
    pthread_mutex_lock(&emu.lock);
    *done = emu_event_done(e);
    pthread_mutex_unlock(&emu.lock);
    return RING_OK;
}

static int emu_elapsed(ring_event_t *a, ring_event_t *b, float *ms)
{
    const char *why = NULL;
    if (!a || !b || !ms) {
        ring__log("elapsed: no %s", !ms ? "result" : "event");
        return RING_ERR_ARG;
    }
    pthread_mutex_lock(&emu.lock);
    if (!a->timed || !b->timed)
        why = "an event of event_create's keeps no time (timer_create)";
    else if (!a->stream_id || !b->stream_id)
        why = "an event never recorded";
    else if (!emu_event_done(a) || !emu_event_done(b))
        why = "an event whose work is not done yet";
    else
        *ms = (float)((b->done_s - a->done_s) * 1e3);
    pthread_mutex_unlock(&emu.lock);
    if (!why) return RING_OK;
    ring__log("elapsed: %s", why);
    return RING_ERR_CUDA;
}

static void emu_run_wait(emu_op_t *op)
{
    if (op->shared) {
        emu_wait_shared(op->shared->shared, op->record);
        return;
    }
    pthread_mutex_lock(&emu.lock);
    emu_wait_locked(&op->wait);
    pthread_mutex_unlock(&emu.lock);
}

static int emu_stream_wait(ring_stream_t *s, ring_event_t *e)
{
    if (!e) {
        ring__log("stream_wait: no event");
        return RING_ERR_ARG;
    }
    /* The record as of now, as cudaStreamWaitEvent. */
    if (e->shared) {
        emu_op_t *op = emu_shared_op("stream_wait", e, emu_run_wait);
        if (op) op->record = atomic_load(&e->shared->records);
        return emu_enqueue("stream_wait", s, op);
    }
    emu_op_t *op = emu_op_new("stream_wait", 0);
    if (op) {
        op->run = emu_run_wait;
        pthread_mutex_lock(&emu.lock);
        op->wait = *e;
        pthread_mutex_unlock(&emu.lock);
    }
    return emu_enqueue("stream_wait", s, op);
}

/* ---- work ---- */

static void emu_run_copy(emu_op_t *op)
{
    memcpy(op->dst, op->a, op->nbytes);
}

static int emu_copy(void *dst, const void *src, size_t nbytes,
                    ring_stream_t *s)
{
    if (nbytes && (!dst || !src)) {
        ring__log("copy: %zu bytes to %p from %p", nbytes, dst, src);
        return RING_ERR_ARG;
    }
    if (emu_check_span("copy", "destination", dst, nbytes, 0) ||
        emu_check_span("copy", "source", src, nbytes, 0))
        return RING_ERR_ARG;
    emu_op_t *op = emu_op_new("copy", 2);
    if (op) {
        *op = (emu_op_t){.run = emu_run_copy,
                         .dst = dst,
                         .a = src,
                         .nbytes = nbytes,
                         .nuses = 2};
        op->uses[0].p = dst;
        op->uses[1].p = src;
    }
    return emu_enqueue("copy", s, op);
}

static void emu_run_zero(emu_op_t *op)
{
    memset(op->dst, 0, op->nbytes);
}

static int emu_zero(void *dst, size_t nbytes, ring_stream_t *s)
{
    if (nbytes && !dst) {
        ring__log("zero: %zu bytes at NULL", nbytes);
        return RING_ERR_ARG;
    }
    if (emu_check_span("zero", "destination", dst, nbytes, 0))
        return RING_ERR_ARG;
    emu_op_t *op = emu_op_new("zero", 1);
    if (op) {
        *op = (emu_op_t){
            .run = emu_run_zero, .dst = dst, .nbytes = nbytes, .nuses = 1};
        op->uses[0].p = dst;
    }
    return emu_enqueue("zero", s, op);
}

static void emu_run_batch(emu_op_t *op)
{
    size_t nblocks =
        ring__copy_batch_blocks(op->copies, op->ncopies, EMU_BATCH_BLOCKS);
    for (size_t b = 0; b < nblocks; b++)
        for (size_t t = 0; t < EMU_BATCH_THREADS; t++)
            ring__copy_batch_thread(op->copies, op->ncopies, b, nblocks, t,
                                    EMU_BATCH_THREADS);
}

static int emu_copy_batch(const ring_copy_t *copies, size_t n,
                          ring_stream_t *s)
{
    for (size_t i = 0; i < n; i++) {
        const ring_copy_t *c = &copies[i];
        if (c->nbytes && (!c->dst || !c->src)) {
            ring__log("copy_batch: copy %zu: %zu bytes to %p from %p", i,
                      c->nbytes, c->dst, c->src);
            return RING_ERR_ARG;
        }
        if (emu_check_span("copy_batch", "a destination", c->dst, c->nbytes,
                           1) ||
            emu_check_span("copy_batch", "a source", c->src, c->nbytes, 1))
            return RING_ERR_ARG;
    }
    emu_op_t *op = emu_op_new("copy_batch", 2 * n);
    if (!op) return RING_ERR_NOMEM;
    op->run = emu_run_batch;
    op->ncopies = n;
    op->copies = malloc(n ? n * sizeof(*copies) : 1);
    if (!op->copies) {
        ring__log("copy_batch: out of memory for %zu copies", n);
        emu_op_free(op);
        return RING_ERR_NOMEM;
    }
    memcpy(op->copies, copies, n * sizeof(*copies));
    for (size_t i = 0; i < n; i++) {
        op->uses[2 * i].p = copies[i].dst;
        op->uses[2 * i + 1].p = copies[i].src;
    }
    return emu_enqueue("copy_batch", s, op);
}

/* Refuses a dtype or op out of range, naming func. */
static int emu_check_kind(const char *func, ring_dtype_t dtype, ring_op_t op)
{
    if (ring_dtype_size(dtype) == 0) {
        ring__log("%s: unknown dtype %d", func, (int)dtype);
        return RING_ERR_ARG;
    }
    if ((unsigned)op >= RING_OP_COUNT) {
        ring__log("%s: unknown op %d", func, (int)op);
        return RING_ERR_ARG;
    }
    return RING_OK;
}

static void emu_run_reduce(emu_op_t *op)
{
    ring__reduce_host(op->dst, op->a, op->b, op->count, op->dtype, op->op,
                      op->divisor);
}

static int emu_reduce(void *dst, const void *a, const void *b, size_t count,
                      ring_dtype_t dtype, ring_op_t rop, int divisor,
                      ring_stream_t *s)
{
    if (emu_check_kind("reduce", dtype, rop)) return RING_ERR_ARG;
    size_t nbytes = count * ring_dtype_size(dtype);
    if (count && (!dst || !a || !b)) {
        ring__log("reduce: %zu elements to %p from %p and %p", count, dst, a,
                  b);
        return RING_ERR_ARG;
    }
    if (emu_check_span("reduce", "dst", dst, nbytes, 1) ||
        emu_check_span("reduce", "a", a, nbytes, 1) ||
        emu_check_span("reduce", "b", b, nbytes, 1))
        return RING_ERR_ARG;
    emu_op_t *op = emu_op_new("reduce", 3);
    if (op) {
        *op = (emu_op_t){.run = emu_run_reduce,
                         .dst = dst,
                         .a = a,
                         .b = b,
                         .count = count,
                         .dtype = dtype,
                         .op = rop,
                         .divisor = divisor,
                         .nuses = 3};
        op->uses[0].p = dst;
        op->uses[1].p = a;
        op->uses[2].p = b;
    }
    return emu_enqueue("reduce", s, op);
}

static void emu_run_reduce_n(emu_op_t *op)
{
    ring__reduce_host_n(op->dst, op->in, op->n, op->count, op->dtype, op->op,
                        op->divisor);
}

static int emu_reduce_n(void *dst, const void *const *in, int n, size_t count,
                        ring_dtype_t dtype, ring_op_t rop, int divisor,
                        ring_stream_t *s)
{
    if (emu_check_kind("reduce_n", dtype, rop)) return RING_ERR_ARG;
    if (n < 1 || n > RING_DEV_MAX_INPUTS) {
        ring__log("reduce_n: %d inputs: from 1 to %d", n, RING_DEV_MAX_INPUTS);
        return RING_ERR_ARG;
    }
    size_t nbytes = count * ring_dtype_size(dtype);
    if (count && !dst) {
        ring__log("reduce_n: %zu elements to NULL", count);
        return RING_ERR_ARG;
    }
    if (emu_check_span("reduce_n", "dst", dst, nbytes, 1)) return RING_ERR_ARG;
    for (int k = 0; k < n; k++) {
        if (count && !in[k]) {
            ring__log("reduce_n: input %d is NULL", k);
            return RING_ERR_ARG;
        }
        if (emu_check_span("reduce_n", "an input", in[k], nbytes, 1))
            return RING_ERR_ARG;
    }
    emu_op_t *op = emu_op_new("reduce_n", 1 + (size_t)n);
    if (op) {
        *op = (emu_op_t){.run = emu_run_reduce_n,
                         .dst = dst,
                         .n = n,
                         .count = count,
                         .dtype = dtype,
                         .op = rop,
                         .divisor = divisor,
                         .nuses = 1 + (size_t)n};
        op->uses[0].p = dst;
        for (int k = 0; k < n; k++) {
            op->in[k] = in[k];
            op->uses[1 + k].p = in[k];
        }
    }
    return emu_enqueue("reduce_n", s, op);
}

static void emu_run_divide(emu_op_t *op)
{
    ring__divide_host(op->dst, op->count, op->dtype, op->divisor);
}

static int emu_divide(void *buf, size_t count, ring_dtype_t dtype, int divisor,
                      ring_stream_t *s)
{
    if (emu_check_kind("divide", dtype, RING_AVERAGE)) return RING_ERR_ARG;
    size_t nbytes = count * ring_dtype_size(dtype);
    if (count && !buf) {
        ring__log("divide: %zu elements at NULL", count);
        return RING_ERR_ARG;
    }
    if (emu_check_span("divide", "buf", buf, nbytes, 1)) return RING_ERR_ARG;
    emu_op_t *op = emu_op_new("divide", 1);
    if (op) {
        *op = (emu_op_t){.run = emu_run_divide,
                         .dst = buf,
                         .count = count,
                         .dtype = dtype,
                         .divisor = divisor,
                         .nuses = 1};
        op->uses[0].p = buf;
    }
    return emu_enqueue("divide", s, op);
}

static void emu_run_convert(emu_op_t *op)
{
    ring__convert_host(op->dst, op->dtype, op->a, op->src_dtype, op->count);
}

static int emu_convert(void *dst, ring_dtype_t dst_dtype, const void *src,
                       ring_dtype_t src_dtype, size_t count, ring_stream_t *s)
{
    if (!ring__convert_ok(dst_dtype, src_dtype)) {
        ring__log("convert: from dtype %d to %d: only float32 to or from "
                  "float16 and bfloat16", (int)src_dtype, (int)dst_dtype);
        return RING_ERR_ARG;
    }
    if (count && (!dst || !src)) {
        ring__log("convert: %zu elements to %p from %p", count, dst, src);
        return RING_ERR_ARG;
    }
    if (emu_check_span("convert", "destination", dst,
                       count * ring_dtype_size(dst_dtype), 1) ||
        emu_check_span("convert", "source", src,
                       count * ring_dtype_size(src_dtype), 1))
        return RING_ERR_ARG;
    emu_op_t *op = emu_op_new("convert", 2);
    if (op) {
        *op = (emu_op_t){.run = emu_run_convert,
                         .dst = dst,
                         .a = src,
                         .count = count,
                         .dtype = dst_dtype,
                         .src_dtype = src_dtype,
                         .nuses = 2};
        op->uses[0].p = dst;
        op->uses[1].p = src;
    }
    return emu_enqueue("convert", s, op);
}

/* ---- ipc: another process's allocation, through /proc ---- */

typedef struct {
    uint64_t magic, nbytes;
    int32_t pid, fd;
} emu_ipc_t;

enum { EMU_IPC_MAGIC = 0x68766465 }; /* "hvde" */

static int emu_ipc_export(void *p, ring_ipc_handle_t *h)
{
    emu_ipc_t ipc = {.magic = EMU_IPC_MAGIC, .pid = (int32_t)getpid()};
    memset(h, 0, sizeof(*h));
    pthread_mutex_lock(&emu.lock);
    emu_region_t *r = emu_find(p);
    int start = r && r->base == p && !r->opened;
    if (start) {
        ipc.nbytes = r->nbytes;
        ipc.fd = r->fd;
    }
    pthread_mutex_unlock(&emu.lock);
    if (!start) {
        ring__log("ipc_export: %p is not the start of an emulated device "
                  "allocation of this process",
                  p);
        return RING_ERR_ARG;
    }
    memcpy(h->bytes, &ipc, sizeof(ipc));
    return RING_OK;
}

/* The exporter's memfd of h, opened here through /proc: h must come
 * from `maker` (its magic) in another process of this node. The fd, or
 * -1 with *status saying why (logged). The fd holds a shared flock, this
 * opener's hold on the memory until it closes the fd (ipc_close, the
 * event's end), which the exporter's free looks for (emu_check_unheld). */
static int emu_ipc_fd(const char *func, const ring_ipc_handle_t *h,
                      uint64_t magic, const char *maker, emu_ipc_t *ipc,
                      int *status)
{
    char path[64];
    memcpy(ipc, h->bytes, sizeof(*ipc));
    if (ipc->magic != magic || ipc->pid == (int32_t)getpid()) {
        ring__log("%s: %s%s", func,
                  ipc->magic != magic ? "not a handle from "
                                      : "a handle of this process's own",
                  ipc->magic != magic ? maker : "");
        *status = RING_ERR_ARG;
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)ipc->pid,
             (int)ipc->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        ring__log("%s: %s: %s (is the exporting process alive, and on this "
                  "node?)",
                  func, path, strerror(errno));
        *status = RING_ERR_CUDA;
        return -1;
    }
    (void)flock(fd, LOCK_SH | LOCK_NB);
    return fd;
}

static int emu_ipc_open(const ring_ipc_handle_t *h, void **p)
{
    emu_ipc_t ipc;
    int status = RING_OK;
    *p = NULL;
    int fd = emu_ipc_fd("ipc_open", h, EMU_IPC_MAGIC, "ipc_export", &ipc,
                        &status);
    if (fd < 0) return status;
    status = emu_map("ipc_open", fd, (size_t)ipc.nbytes, 1, p);
    if (status != RING_OK) close(fd);
    return status;
}

static int emu_ipc_close(void *p)
{
    return emu_unmap("ipc_close", p, 1);
}

/* An interprocess event: its records in a memfd page (emu_shared_event_t),
 * handed over as memory is. */
enum { EMU_IPC_EVENT_MAGIC = 0x68766576 }; /* "hvev" */

/* e over fd's page, mapped here, keeping fd. */
static int emu_event_map(const char *func, int fd, ring_event_t **e)
{
    void *page = mmap(NULL, sizeof(emu_shared_event_t),
                      PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
        ring__log("%s: mmap: %s", func, strerror(errno));
        return RING_ERR_NOMEM;
    }
    int status = emu_event_new(e);
    if (status != RING_OK) {
        munmap(page, sizeof(emu_shared_event_t));
        return status;
    }
    (*e)->shared = page;
    (*e)->fd = fd;
    return RING_OK;
}

static int emu_ipc_event_create(ring_event_t **e, ring_ipc_handle_t *h)
{
    *e = NULL;
    memset(h, 0, sizeof(*h));
    int fd = memfd_create("hvd-emulated-event", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, sizeof(emu_shared_event_t)) != 0) {
        ring__log("ipc_event_create: %s: %s",
                  fd < 0 ? "memfd_create" : "ftruncate", strerror(errno));
        if (fd >= 0) close(fd);
        return RING_ERR_NOMEM;
    }
    int status = emu_event_map("ipc_event_create", fd, e);
    if (status != RING_OK) {
        close(fd);
        return status;
    }
    (*e)->exported = 1;
    emu_ipc_t ipc = {.magic = EMU_IPC_EVENT_MAGIC,
                     .nbytes = sizeof(emu_shared_event_t),
                     .pid = (int32_t)getpid(), .fd = fd};
    memcpy(h->bytes, &ipc, sizeof(ipc));
    return RING_OK;
}

static int emu_ipc_event_open(const ring_ipc_handle_t *h, ring_event_t **e)
{
    emu_ipc_t ipc;
    int status = RING_OK;
    *e = NULL;
    int fd = emu_ipc_fd("ipc_event_open", h, EMU_IPC_EVENT_MAGIC,
                        "ipc_event_create", &ipc, &status);
    if (fd < 0) return status;
    status = emu_event_map("ipc_event_open", fd, e);
    if (status != RING_OK) close(fd);
    return status;
}

const ring_dev_t ring__dev_emulated = {
    .name = "emulated",
    .alloc = emu_alloc,
    .release = emu_release,
    .alloc_pinned = emu_alloc_pinned,
    .release_pinned = emu_release_pinned,
    .owns = emu_owns,
    .device = emu_device,
    .set_device = emu_set_device,
    .stream_create = emu_stream_create,
    .stream_destroy = emu_stream_destroy,
    .stream_sync = emu_stream_sync,
    .event_create = emu_event_create,
    .event_destroy = emu_event_destroy,
    .event_record = emu_event_record,
    .event_sync = emu_event_sync,
    .event_query = emu_event_query,
    .stream_wait = emu_stream_wait,
    .timer_create = emu_timer_create,
    .elapsed = emu_elapsed,
    .copy = emu_copy,
    .copy_batch = emu_copy_batch,
    .zero = emu_zero,
    .reduce = emu_reduce,
    .reduce_n = emu_reduce_n,
    .divide = emu_divide,
    .convert = emu_convert,
    .ipc_export = emu_ipc_export,
    .ipc_open = emu_ipc_open,
    .ipc_close = emu_ipc_close,
    .ipc_event_create = emu_ipc_event_create,
    .ipc_event_open = emu_ipc_event_open,
};
