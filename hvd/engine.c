/* hvd/engine.c: the background thread, the only caller of MPI after init.
 *
 * In each cycle each rank's engine takes the requests submitted since the
 * last one and the ranks agree on what is ready:
 *
 *  1. Fast path, every cycle: one small MPI_Iallreduce(BAND) of bits. Names
 *     completed once before sit in a response cache, at the same slot on
 *     every rank (entries are added in plan order, which all ranks share).
 *     A rank sets a slot's bit when it has a request matching that entry
 *     exactly; a slot whose AND is set is ready everywhere and runs with no
 *     coordinator. Flags ride along: "I need the coordinator" and "this
 *     entry no longer matches my request" are ORs, sent complemented so
 *     that one AND carries them, as is "I have shut down" (with my own
 *     work done: all leave then); "I have joined" is an AND.
 *  2. Slow path, only when some rank needs it: the coordinator (rank 0)
 *     gathers the requests not seen before, decides which names every rank
 *     has made, checks that they agree, and broadcasts the plan
 *     (coordinator.c).
 *
 * Both paths give every rank the same ordered list of responses, which
 * execute.c runs (fusing allreduces) and which complete the handles.
 * A joined rank sets every cache bit and takes part in whatever the others
 * do with zeros.
 *
 * When cycles happen: an idle engine sleeps on a condition variable until
 * a request comes (and waits out the burst it starts). While requests wait
 * for ranks still computing, it cycles back to back, so that they run as
 * soon as the last rank makes them; when every rank has requests and none
 * can run, it cycles every HVD_CYCLE_TIME. Waiting for other ranks, it
 * polls its non-blocking MPI call with growing sleeps, so the engine does
 * not take a core from training; while this rank's caller waits on a
 * handle and the node has a core per rank, it polls without sleeping.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include "hvd/engine.h"
#include "hvd/bind.h"
#include "hvd/coordinator.h"
#include "hvd/execute.h"
#include "hvd/timeline.h"

/* ---- the response cache (engine only) ---- */

enum { HVD__CACHE_CAP = 1024, HVD__CACHE_WORDS = HVD__CACHE_CAP / 64 };

static struct {
    hvd__desc_t descs[HVD__CACHE_CAP];
    int alive[HVD__CACHE_CAP]; /* 0 once invalidated: slots are not reused */
    /* This rank's pending request for each slot's name, found here rather
     * than by name when the slot runs (requests.h). */
    hvd_handle_t waiting[HVD__CACHE_CAP];
    int len;
    int guess;                 /* the slot after the last one found */
    hvd__index_t by_name;      /* name -> slot + 1, alive slots only */
} hvd__cache;

/* A training step makes the same names in the same order, which is the
 * order they entered the cache: the next request's slot is most often
 * the one after the last request's, one comparison instead of a hash and
 * a probe of a table the last collective pushed out of the cache. */
static int hvd__cache_find(const char *name)
{
    int s = hvd__cache.guess;
    if (s >= hvd__cache.len || !hvd__cache.alive[s] ||
        strcmp(hvd__cache.descs[s].name, name) != 0)
        s = (int)(intptr_t)hvd__index_get(&hvd__cache.by_name, name) - 1;
    if (s >= 0) hvd__cache.guess = s + 1;
    return s;
}

static void hvd__cache_add(const hvd__desc_t *desc)
{
    int s = hvd__cache.len;
    if (desc->kind == HVD__BARRIER || s == HVD__CACHE_CAP) return;
    hvd__cache.descs[s] = *desc;
    if (hvd__index_put(&hvd__cache.by_name, hvd__cache.descs[s].name,
                       (void *)(intptr_t)(s + 1)) != HVD_OK)
        return; /* not cached: it takes the slow path, still correct */
    hvd__cache.alive[s] = 1;
    hvd__cache.len++;
}

/* A pending request leaves its slot for the coordinator's way: from the
 * next cycle it is sent to the coordinator, and it is found by name when
 * the plan names it. */
static void hvd__uncache(hvd_handle_t h, hvd__list_t *pending)
{
    hvd__cache.waiting[h->cache_slot] = NULL;
    h->cache_slot = -1;
    if (hvd__pending_index(pending, h) != HVD_OK) {
        hvd__pending_remove(pending, h);
        hvd__complete(h, HVD_ERR_NOMEM);
    }
}

static void hvd__cache_drop(int s, hvd__list_t *pending)
{
    hvd__cache.alive[s] = 0;
    hvd__index_del(&hvd__cache.by_name, hvd__cache.descs[s].name);
    if (hvd__cache.waiting[s]) hvd__uncache(hvd__cache.waiting[s], pending);
}

/* ---- one cycle ---- */

/* The bits every rank contributes; see the top of the file. */
enum { HVD__AND_JOINED = 2, HVD__AND_BUSY = 4 };
enum { HVD__OR_COORDINATE = 1, HVD__OR_SHUTDOWN = 2 };
typedef struct {
    uint64_t and_flags, or_flags_inv;
    uint64_t ready[HVD__CACHE_WORDS];       /* AND */
    uint64_t invalid_inv[HVD__CACHE_WORDS]; /* OR, complemented */
} hvd__bits_t;

typedef struct {
    hvd__list_t pending;  /* this rank's requests, oldest first */
    hvd_handle_t join;    /* this rank's hvd_join, while it waits */
    long join_cycle;      /* the cycle in which it came */
    long cycles;          /* cycles so far: the same count on every rank */
    int shutdown;         /* a rank has shut down: leave the loop */
    size_t ran;           /* responses the last cycle ran */
    int all_busy;         /* in the last cycle every rank had requests */
} hvd__loop_t;

static void hvd__set_bit(uint64_t *words, int bit)
{
    words[bit / 64] |= (uint64_t)1 << (bit % 64);
}

static int hvd__get_bit(const uint64_t *words, int bit)
{
    return (int)((words[bit / 64] >> (bit % 64)) & 1);
}

/* Whether a collective needs this rank's own data, so that it cannot run
 * with this rank joined (coordinator.c says why to the others). */
static int hvd__needs_me(const hvd__desc_t *d)
{
    return d->kind == HVD__ALLREDUCE_APPLY ||
           (d->kind == HVD__BROADCAST && d->root == hvd__engine.rank);
}

static void hvd__fill_bits(hvd__loop_t *loop, hvd__bits_t *bits, double now)
{
    uint64_t or_flags = 0;
    memset(bits, 0, sizeof *bits);
    /* A rank shuts down once its own work is done; none of what the
     * others still wait for can run without it then, so all leave with it
     * (as Horovod: the others' waits fail, where they would hang). */
    pthread_mutex_lock(&hvd__engine.mu);
    if (hvd__engine.shutdown_requested && !hvd__engine.incoming &&
        loop->pending.len == 0)
        or_flags |= HVD__OR_SHUTDOWN;
    pthread_mutex_unlock(&hvd__engine.mu);
    if (loop->pending.len > 0) bits->and_flags |= HVD__AND_BUSY;
    if (loop->join) {
        bits->and_flags |= HVD__AND_JOINED;
        memset(bits->ready, 0xff, sizeof bits->ready);
        /* Cached work that cannot run with this rank joined (a broadcast
         * from it, a sharded step with a share of its own) leaves the
         * cache instead: the others' requests then go to the coordinator,
         * which fails them with the reason, where zeros or a hang were
         * all the fast path could give. */
        for (int s = 0; s < hvd__cache.len; s++)
            if (hvd__cache.alive[s] && hvd__needs_me(&hvd__cache.descs[s]))
                hvd__set_bit(bits->invalid_inv, s);
    }
    for (size_t i = 0; i < loop->pending.len; i++) {
        hvd_handle_t h = loop->pending.items[i];
        if (!h || h->coordinated) continue;
        int slot = h->cache_slot;
        if (slot < 0 || !hvd__cache.alive[slot]) {
            or_flags |= HVD__OR_COORDINATE;
        } else if (!hvd__desc_same_fields(&hvd__cache.descs[slot],
                                          &h->desc) ||
                   now - h->submit_s > hvd__engine.config.stall_check_s / 2) {
            /* Changed (the entry was found by this name: only the fields
             * can differ), or waiting long: let the coordinator see
             * everyone's requests for this name (it checks them and names
             * the ranks that are missing). */
            hvd__set_bit(bits->invalid_inv, slot);
        } else {
            hvd__set_bit(bits->ready, slot);
        }
    }
    if (hvd__coordinator_waiting()) or_flags |= HVD__OR_COORDINATE;
    bits->or_flags_inv = ~or_flags;
    for (int w = 0; w < HVD__CACHE_WORDS; w++)
        bits->invalid_inv[w] = ~bits->invalid_inv[w];
}

/* Runs one response with this rank's requests for it (hvd__execute);
 * HVD_OK unless this rank failed where the others did not (MPI, a device
 * call), when the engine cannot go on. */
static int hvd__run_response(hvd__loop_t *loop, const hvd__response_t *resp,
                             hvd_handle_t *hs, double ready_s)
{
    int status = hvd__execute(resp, hs, ready_s);
    loop->ran++;
    return status == resp->head.status ? HVD_OK : status;
}

/* Runs a plan's responses in order, finding the requests by name: errors
 * complete their requests, groups execute; names that ran are cached. */
static int hvd__run_plan(hvd__loop_t *loop, const hvd__plan_t *plan)
{
    double ready_s = hvd__now(); /* when the ranks agreed on the plan */
    for (size_t r = 0; r < plan->len; r++) {
        const hvd__response_t *resp = &plan->items[r];
        if (resp->head.status == HVD_ERR_STALL) {
            hvd__log(HVD__LOG_ERROR, "%s", resp->head.message);
            return HVD_ERR_STALL;
        }
        int n = resp->head.ndescs;
        hvd_handle_t *hs = calloc((size_t)n + 1, sizeof *hs);
        if (!hs) return HVD_ERR_NOMEM;
        for (int i = 0; i < n; i++) {
            hs[i] = hvd__pending_take(&loop->pending, resp->descs[i].name);
            if (!hs[i] && !loop->join && resp->head.status == HVD_OK)
                hvd__log(HVD__LOG_ERROR, "plan names '%s', not made here",
                         resp->descs[i].name);
        }
        int status = hvd__run_response(loop, resp, hs, ready_s);
        free(hs);
        if (status != HVD_OK) return status;
        if (resp->head.status == HVD_OK)
            for (int d = 0; d < n; d++) hvd__cache_add(&resp->descs[d]);
    }
    return HVD_OK;
}

/* The ready cache slots, in slot order, grouped as the coordinator would,
 * each with the request waiting for it. */
static int hvd__run_cached(hvd__loop_t *loop, const hvd__bits_t *bits)
{
    static hvd__desc_t ready[HVD__CACHE_CAP];
    static hvd_handle_t hs[HVD__CACHE_CAP];
    double ready_s = hvd__now();
    size_t n = 0;
    int first = -1, last = -1;
    for (int s = 0; s < hvd__cache.len; s++) {
        if (!hvd__cache.alive[s] || !hvd__get_bit(bits->ready, s)) continue;
        if (first < 0) first = s;
        last = s;
        hs[n] = hvd__cache.waiting[s];
        hvd__cache.waiting[s] = NULL;
        if (hs[n]) hvd__pending_remove(&loop->pending, hs[n]);
        n++;
    }
    if (n == 0) return HVD_OK;
    /* Every slot of one range ready (a training step's tensors, cached
     * in the order they are made): grouped where they lie in the cache,
     * without copying 240 bytes a request first. */
    hvd__desc_t *descs = &hvd__cache.descs[first];
    if ((size_t)(last - first + 1) != n) {
        n = 0;
        for (int s = first; s <= last; s++)
            if (hvd__cache.alive[s] && hvd__get_bit(bits->ready, s))
                ready[n++] = hvd__cache.descs[s];
        descs = ready;
    }
    for (size_t i = 0, end; i < n; i = end) {
        end = hvd__group_end(descs, i, n);
        hvd__response_t resp = {.head = {.status = HVD_OK,
                                         .ndescs = (int32_t)(end - i)},
                                .descs = &descs[i]};
        int status = hvd__run_response(loop, &resp, &hs[i], ready_s);
        if (status != HVD_OK) return status;
    }
    return HVD_OK;
}

static void hvd__take_incoming(hvd__loop_t *loop, double now)
{
    pthread_mutex_lock(&hvd__engine.mu);
    hvd_handle_t h = hvd__engine.incoming;
    hvd__engine.incoming = NULL;
    hvd__engine.incoming_tail = &hvd__engine.incoming;
    pthread_mutex_unlock(&hvd__engine.mu);
    for (hvd_handle_t next; h; h = next) {
        next = h->next;
        h->submit_s = now;
        /* A kept handle's name had that slot last time, and a slot keeps
         * its name while it lives: no name to compare. */
        int slot = h->cache_hint >= 0 && hvd__cache.alive[h->cache_hint]
                       ? h->cache_hint
                       : hvd__cache_find(h->desc.name);
        h->cache_hint = slot;
        h->cache_slot = slot >= 0 && !hvd__cache.waiting[slot] ? slot : -1;
        if (h->desc.kind == HVD__JOIN) {
            loop->join = h;
            loop->join_cycle = loop->cycles;
            h->coordinated = 1; /* joining is said by the bits */
        }
        if (hvd__pending_add(&loop->pending, h, h->cache_slot < 0) != HVD_OK)
            hvd__complete(h, HVD_ERR_NOMEM);
        else if (h->cache_slot >= 0)
            hvd__cache.waiting[h->cache_slot] = h;
    }
}

/* Records which rank joined last (hvd_last_joined): the one whose join
 * came in the latest cycle, the lowest of those that came in the same one.
 * Every rank calls it, in the cycle in which all have joined. */
static int hvd__find_last_joined(const hvd__loop_t *loop)
{
    struct {
        long cycle;
        int rank;
    } mine = {loop->join_cycle, hvd__engine.rank}, last;
    MPI_Request request;
    int status = HVD_OK;
    HVD_CHECK_MPI(MPI_Iallreduce(&mine, &last, 1, MPI_LONG_INT, MPI_MAXLOC,
                                 hvd__engine.comm, &request));
    if ((status = hvd__mpi_wait(&request)) != HVD_OK) return status;
    pthread_mutex_lock(&hvd__engine.mu);
    hvd__engine.last_joined = last.rank;
    pthread_mutex_unlock(&hvd__engine.mu);
out:
    return status;
}

static int hvd__cycle(hvd__loop_t *loop)
{
    hvd__bits_t bits, all;
    MPI_Request request;
    double now = hvd__now();
    int status = HVD_OK;

    hvd__take_incoming(loop, now);
    hvd__fill_bits(loop, &bits, now);
    loop->ran = 0;
    HVD_CHECK_MPI(MPI_Iallreduce(&bits, &all, sizeof bits / 8, MPI_UINT64_T,
                                 MPI_BAND, hvd__engine.comm, &request));
    if ((status = hvd__mpi_wait(&request)) != HVD_OK) return status;

    /* Invalidated entries leave the cache on every rank at once; their
     * requests go to the coordinator from the next cycle on. */
    for (int s = 0; s < hvd__cache.len; s++)
        if (hvd__cache.alive[s] && !hvd__get_bit(all.invalid_inv, s))
            hvd__cache_drop(s, &loop->pending);
    if ((status = hvd__run_cached(loop, &all)) != HVD_OK) return status;

    if (!(all.or_flags_inv & HVD__OR_COORDINATE)) {
        /* The coordinator is sent every request this rank has not sent
         * it yet, cached or not: the plan names them. */
        for (size_t i = 0; i < loop->pending.len; i++) {
            hvd_handle_t h = loop->pending.items[i];
            if (h && !h->coordinated && h->cache_slot >= 0)
                hvd__uncache(h, &loop->pending);
        }
        hvd__plan_t plan = {0};
        status = hvd__coordinate(&loop->pending, loop->join != NULL, &plan);
        if (status == HVD_OK) status = hvd__run_plan(loop, &plan);
        hvd__plan_free(&plan);
        if (status != HVD_OK) return status;
    }
    if ((all.and_flags & HVD__AND_JOINED) && loop->join) {
        status = hvd__find_last_joined(loop);
        hvd__pending_remove(&loop->pending, loop->join);
        hvd__complete(loop->join, status);
        loop->join = NULL;
        if (status != HVD_OK) return status;
    }
    hvd__pending_compact(&loop->pending);
    loop->shutdown = !(all.or_flags_inv & HVD__OR_SHUTDOWN);
    loop->all_busy = (all.and_flags & HVD__AND_BUSY) != 0;
    loop->cycles++;
out:
    return status;
}

/* The name of the oldest request still pending. */
static const char *hvd__first_name(const hvd__list_t *pending)
{
    for (size_t i = 0; i < pending->len; i++)
        if (pending->items[i]) return pending->items[i]->desc.name;
    return "";
}

/* Completes everything pending and queued with `status`. */
static void hvd__fail_all(hvd__loop_t *loop, int status)
{
    hvd__take_incoming(loop, hvd__now());
    for (size_t i = 0; i < loop->pending.len; i++) {
        hvd_handle_t h = loop->pending.items[i];
        if (!h) continue;
        if (h->cache_slot >= 0) hvd__cache.waiting[h->cache_slot] = NULL;
        hvd__pending_remove(&loop->pending, h);
        hvd__complete(h, status);
    }
    hvd__pending_compact(&loop->pending);
    loop->join = NULL;
}

static pthread_t hvd__thread;

/* Waits on cv (with hvd__engine.mu held) until signalled or until `until`
 * on hvd__now's clock: 0, or ETIMEDOUT. The static condition variables
 * time out on the realtime clock, hence the conversion. */
static int hvd__cond_wait_until(pthread_cond_t *cv, double until)
{
    double left = until - hvd__now();
    if (left <= 0) return ETIMEDOUT;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)left;
    deadline.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(cv, &hvd__engine.mu, &deadline) ==
                   ETIMEDOUT
               ? ETIMEDOUT
               : 0;
}

/* With a spare PU, before sleeping on wake_cv (hvd__engine.spare_pus):
 * spins, without mu, until `until` or HVD_SPIN_TIME has passed, a request
 * beyond the first `seen` comes, or (watch_waiters) a caller waits.
 * Called and returns with mu held. */
static void hvd__spin_for_work(uint64_t seen, int watch_waiters, double until)
{
    double spin = hvd__spin_time();
    if (spin <= 0) return;
    pthread_mutex_unlock(&hvd__engine.mu);
    double end = hvd__now() + spin;
    if (end > until) end = until;
    while (atomic_load(&hvd__engine.nsubmitted) == seen &&
           !(watch_waiters && atomic_load(&hvd__engine.waiters) > 0) &&
           hvd__now() < end)
        hvd__cpu_relax();
    pthread_mutex_lock(&hvd__engine.mu);
}

/* Sleeps until `until` (hvd__now's clock), a new request, or shutdown.
 * After a request it lets the burst that request starts (a backward pass
 * submits many) finish, so that they land in one cycle and fuse: it waits
 * until no request came for a short quiet spell, or until a caller waits
 * on a handle (then the burst is over: hvd_dist_opt_step waits once all
 * gradients are in). */
static void hvd__sleep(double until)
{
    const double quiet_s = 100e-6;
    pthread_mutex_lock(&hvd__engine.mu);
    if (!hvd__engine.shutdown_requested && !hvd__engine.incoming)
        hvd__spin_for_work(hvd__engine.nsubmitted, 0, until);
    while (!hvd__engine.shutdown_requested && !hvd__engine.incoming &&
           hvd__cond_wait_until(&hvd__engine.wake_cv, until) == 0)
        ;
    for (;;) {
        uint64_t seen = hvd__engine.nsubmitted;
        if (!hvd__engine.incoming || hvd__engine.shutdown_requested ||
            hvd__engine.waiters > 0 || hvd__now() + quiet_s > until)
            break;
        double spell_end = hvd__now() + quiet_s;
        hvd__spin_for_work(seen, 1, spell_end);
        while (!hvd__engine.waiters && hvd__engine.nsubmitted == seen &&
               hvd__cond_wait_until(&hvd__engine.wake_cv, spell_end) == 0)
            ;
        if (hvd__engine.nsubmitted == seen) break;
    }
    pthread_mutex_unlock(&hvd__engine.mu);
}

/* The rank's device, current on this thread too: a thread starts on
 * device 0 (CUDA's default), and the fusion buffer, the engine's stream
 * and ring's staging must be the caller's device's. */
static void hvd__engine_device(void)
{
    const ring_dev_t *dev = ring_dev();
    if (dev && hvd__engine.device >= 0 &&
        dev->set_device(hvd__engine.device) != RING_OK)
        hvd__log(HVD__LOG_ERROR, "the engine thread could not select "
                 "device %d; device tensors will fail", hvd__engine.device);
}

static void *hvd__engine_main(void *arg)
{
    (void)arg;
#ifdef PR_SET_TIMERSLACK
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* 1 us; see hvd__mpi_wait */
#endif
    hvd__engine_device();
    hvd__loop_t loop = {0};
    int status = HVD_OK;
    double period = hvd__engine.config.cycle_time_s;
    /* With nothing to do, sleep until a request comes: other ranks with
     * requests wait in their cycle until this one makes its own. An idle
     * engine that cycled every period took 17% of a core and preempted
     * the training thread thousands of times a second. It still wakes an
     * eighth of the stall times apart, so that stalls are reported. */
    double idle_period = hvd__engine.config.stall_check_s;
    if (hvd__engine.config.stall_shutdown_s > 0 &&
        hvd__engine.config.stall_shutdown_s < idle_period)
        idle_period = hvd__engine.config.stall_shutdown_s;
    idle_period /= 8;
    if (idle_period < period) idle_period = period;
    while (status == HVD_OK && !loop.shutdown) {
        double start = hvd__now();
        status = hvd__cycle(&loop);
        if (status != HVD_OK || loop.shutdown) break;
        /* Requests left over: when the cycle ran something, or some rank
         * had none (it is still computing), cycle again at once. The next
         * cycle's MPI_Iallreduce completes only when every rank has
         * entered it, so this waits for the others instead of spinning,
         * and the requests run as soon as the last rank has made them,
         * not a cycle period later. When every rank has requests and
         * none can run, only a new request or time changes that. */
        if (loop.pending.len > 0 && (loop.ran > 0 || !loop.all_busy))
            continue;
        hvd__sleep(start + (loop.pending.len > 0 ? period : idle_period));
    }
    pthread_mutex_lock(&hvd__engine.mu);
    /* A stall or a broken MPI: every rank got the same plan or error, so
     * all stop negotiating together; a collective that failed here failed
     * on the others too (ring tells them, as far as it can:
     * ring_ctx_give_up). From now on calls fail. */
    if (status != HVD_OK) hvd__engine.stopped = status;
    /* Another rank shut down first: this rank's calls fail from now on. */
    int left_early = status == HVD_OK && !hvd__engine.shutdown_requested;
    if (left_early) hvd__engine.peer_down = 1;
    pthread_mutex_unlock(&hvd__engine.mu);
    hvd__take_incoming(&loop, hvd__now()); /* counted and named below */
    hvd__pending_compact(&loop.pending);
    size_t waiting = loop.pending.len;
    const char *first = hvd__first_name(&loop.pending);
    if (left_early || (status == HVD_OK && waiting > 0))
        hvd__log(HVD__LOG_ERROR, "another rank called hvd_shutdown while "
                 "this rank had %zu collective(s) waiting%s%s%s: they "
                 "fail, and so will this rank's later calls",
                 waiting, waiting ? " (the first: '" : "", first,
                 waiting ? "')" : "");
    else if (status != HVD_OK && status != HVD_ERR_STALL && waiting > 0)
        hvd__log(HVD__LOG_ERROR, "hvd stopped at a failure on this rank "
                 "(its message says why): %zu collective(s) waiting here "
                 "fail (the first: '%s'), and so will every later one until "
                 "hvd_shutdown", waiting, first);
    /* As later calls fail (hvd__request_queue): a stall says so; anything
     * else is a stopped hvd, whatever the first failure was. */
    hvd__fail_all(&loop, status == HVD_ERR_STALL ? status : HVD_ERR_STATE);
    hvd__pending_free(&loop.pending);
    hvd__execute_thread_end();
    return NULL;
}

int hvd__engine_start(void)
{
    hvd__engine.incoming = NULL;
    hvd__engine.incoming_tail = &hvd__engine.incoming;
    hvd__engine.chain = (hvd__chain_t){0};
    hvd__engine.shutdown_requested = 0;
    hvd__engine.stopped = 0;
    hvd__engine.peer_down = 0;
    hvd__engine.last_joined = -1;
    memset(hvd__engine.unnamed_seq, 0, sizeof hvd__engine.unnamed_seq);
    hvd__engine.contention = (hvd__contention_t){0}; /* a new job's PUs */
    hvd__index_free(&hvd__cache.by_name);
    memset(&hvd__cache, 0, sizeof hvd__cache);
    if (pthread_create(&hvd__thread, NULL, hvd__engine_main, NULL) != 0)
        return HVD_ERR_NOMEM;
    /* Sharing one core with training, the engine gains nothing by
     * preempting it: what it waits for is the other ranks, and its own
     * work is the same CPU work later. Each wake-up and each collective
     * run mid-backward slowed that rank's backward, so its peers waited
     * for it: a 2-rank mlp ran 130k images/s, 145k with the engine's
     * wake-ups not preempting (bench/README.md). SCHED_BATCH, not
     * SCHED_IDLE: as fast here, and it keeps its share of the core, so
     * another process busy there cannot starve it (SCHED_IDLE took 19 s
     * for 20 allreduces beside a busy thread, and only a privileged
     * thread may leave SCHED_IDLE again). */
    if (hvd__engine.shares_core && !hvd__sched_batch(hvd__thread))
        hvd__log(HVD__LOG_WARNING, "the engine thread could not take "
                 "SCHED_BATCH; it may preempt training");
    return HVD_OK;
}

int hvd__engine_stop(void)
{
    pthread_mutex_lock(&hvd__engine.mu);
    hvd__engine.shutdown_requested = 1;
    pthread_cond_broadcast(&hvd__engine.wake_cv);
    pthread_mutex_unlock(&hvd__engine.mu);
    pthread_join(hvd__thread, NULL);
    hvd__execute_free();
    hvd__coordinator_free();
    hvd__timeline_close();
    pthread_mutex_lock(&hvd__engine.mu);
    hvd__named_free();
    pthread_mutex_unlock(&hvd__engine.mu);
    hvd__index_free(&hvd__cache.by_name);
    hvd__events_free();
    return HVD_OK;
}
