/* hvd/requests.c: requests and their bookkeeping: the state the API and
 * the engine share, queueing a request and completing it, this rank's
 * pending list, the hint that says a request continues the previous one
 * in memory, and the wait for a non-blocking MPI call. What the engine's
 * cycle decides about requests lives above (hvd/engine.c); this file
 * calls nothing of it. */
#define _POSIX_C_SOURCE 200809L
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hvd/requests.h"

hvd__engine_t hvd__engine = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

const char *hvd__kind_name(int kind)
{
    static const char *const names[HVD__KIND_COUNT] = {
        "allreduce", "broadcast", "allgather", "barrier", "join",
        "allreduce_apply"};
    return kind >= 0 && kind < HVD__KIND_COUNT ? names[kind] : "unknown";
}

const char *hvd__mem_name(int mem)
{
    return mem == HVD__MEM_DEVICE ? "device" : mem == HVD__MEM_HOST ? "host"
                                                                    : "?";
}

/* ---- pending requests ---- */

int hvd__pending_add(hvd__list_t *list, hvd_handle_t h, int by_name)
{
    if (list->len == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 64;
        hvd_handle_t *items = realloc(list->items, cap * sizeof *items);
        if (!items) return HVD_ERR_NOMEM;
        list->items = items;
        list->cap = cap;
    }
    h->by_name = 0;
    if (by_name && hvd__pending_index(list, h) != HVD_OK)
        return HVD_ERR_NOMEM;
    h->pending_pos = list->len;
    list->items[list->len++] = h;
    return HVD_OK;
}

int hvd__pending_index(hvd__list_t *list, hvd_handle_t h)
{
    if (hvd__index_put(&list->by_name, h->desc.name, h) != HVD_OK)
        return HVD_ERR_NOMEM;
    h->by_name = 1;
    return HVD_OK;
}

hvd_handle_t hvd__pending_take(hvd__list_t *list, const char *name)
{
    hvd_handle_t h = hvd__index_take(&list->by_name, name);
    if (h) {
        h->by_name = 0;
        list->items[h->pending_pos] = NULL;
    }
    return h;
}

void hvd__pending_remove(hvd__list_t *list, hvd_handle_t h)
{
    if (h->by_name) hvd__index_del(&list->by_name, h->desc.name);
    h->by_name = 0;
    list->items[h->pending_pos] = NULL;
}

void hvd__pending_compact(hvd__list_t *list)
{
    size_t kept = 0;
    for (size_t i = 0; i < list->len; i++) {
        hvd_handle_t h = list->items[i];
        if (!h) continue;
        h->pending_pos = kept;
        list->items[kept++] = h;
    }
    list->len = kept;
}

void hvd__pending_free(hvd__list_t *list)
{
    free(list->items);
    hvd__index_free(&list->by_name);
    *list = (hvd__list_t){0};
}

/* ---- submission and completion ---- */

/* A handle, new or kept, takes req's request (its name is req's). */
static void hvd__handle_fill(hvd_handle_t h, const hvd__request_t *req)
{
    h->desc.kind = req->kind;
    h->desc.dtype = req->dtype;
    h->desc.op = req->op;
    h->desc.root = req->root;
    h->desc.mem = req->mem;
    h->desc.unused = 0;
    h->desc.count = req->count;
    h->sendbuf = req->sendbuf;
    h->recvbuf = req->recvbuf;
    h->apply = req->apply;
    h->ready_ev = req->ready_ev;
    h->done_ev = req->done_ev;
    h->status = HVD_OK;
    h->waited = 0;
    h->coordinated = 0;
    h->cache_slot = -1;
    atomic_store_explicit(&h->done, 0, memory_order_relaxed);
}

/* A zeroed handle of that name, new to the engine's cache. */
static hvd_handle_t hvd__handle_new(const char *name)
{
    hvd_handle_t h = calloc(1, sizeof *h);
    if (!h) return NULL;
    strcpy(h->desc.name, name);
    h->cache_hint = -1;
    return h;
}

/* Drops a kept handle that is idle (hvd__index_sweep's drop; under mu,
 * which every change from INDEX is made under). */
static int hvd__named_drop(void *value)
{
    hvd_handle_t h = value;
    if (atomic_load_explicit(&h->owner, memory_order_acquire) !=
        HVD__OWNER_INDEX)
        return 0;
    free(h);
    return 1;
}

/* A step makes its names in the same order every time: the kept handle
 * of the name after the last one made is most often this one's, found
 * without a probe of the index, whose lines the step's allreduce has
 * evicted (the handle's own are read and written anyway). NULL if not. */
static hvd_handle_t hvd__named_guess(const char *name)
{
    hvd_handle_t last = hvd__engine.named_last;
    if (!last || last->next_epoch != hvd__engine.named_epoch) return NULL;
    hvd_handle_t h = last->named_next;
    return h && strcmp(h->desc.name, name) == 0 ? h : NULL;
}

/* Before kept handles may be freed: no guess leads to one from now on. */
static void hvd__named_forget(void)
{
    hvd__engine.named_last = NULL;
    hvd__engine.named_epoch++;
}

/* The handle for a named request (under mu): its name's kept handle when
 * idle, else a new one that the index keeps from now on. HVD_ERR_STATE
 * when the kept one is still in flight. */
static int hvd__named_handle(const char *name, hvd_handle_t *out)
{
    hvd__index_t *named = &hvd__engine.named;
    hvd_handle_t h = hvd__named_guess(name);
    if (!h) h = hvd__index_get(named, name);
    if (h && !atomic_load_explicit(&h->done, memory_order_relaxed))
        return HVD_ERR_STATE;
    if (h) {
        int owner = HVD__OWNER_INDEX;
        if (atomic_compare_exchange_strong_explicit(
                &h->owner, &owner, HVD__OWNER_CALLER, memory_order_acquire,
                memory_order_acquire)) {
            *out = h; /* idle: this request's */
            return HVD_OK;
        }
        /* Done, not yet waited for: its hvd_wait will free it, unless
         * that gave it back meanwhile. */
        owner = HVD__OWNER_CALLER;
        if (!atomic_compare_exchange_strong_explicit(
                &h->owner, &owner, HVD__OWNER_NONE, memory_order_acquire,
                memory_order_acquire)) {
            atomic_store_explicit(&h->owner, HVD__OWNER_CALLER,
                                  memory_order_relaxed);
            *out = h;
            return HVD_OK;
        }
        hvd__index_del(named, name);
        hvd__named_forget();
    }
    /* Before a put would grow the table: the idle handles of names not
     * made again (the unnamed calls' names are never seen twice) go. */
    if (2 * (named->used + 1) > named->cap) {
        hvd__named_forget();
        if (hvd__index_sweep(named, hvd__named_drop) != HVD_OK)
            return HVD_ERR_NOMEM;
    }
    if (!(h = hvd__handle_new(name))) return HVD_ERR_NOMEM;
    if (hvd__index_put(named, h->desc.name, h) != HVD_OK) {
        free(h);
        return HVD_ERR_NOMEM;
    }
    *out = h;
    return HVD_OK;
}

int hvd__request_queue(const hvd__request_t *asked, hvd_handle_t *out)
{
    int status = HVD_OK;
    hvd_handle_t h = NULL;
    hvd__request_t copy = *asked, *req = &copy; /* named below if NULL */
    char unnamed[HVD__NAME_MAX];
    int named = req->name != NULL;
    pthread_mutex_lock(&hvd__engine.mu);
    if (!named) { /* matched by order: the n-th unnamed call of a kind,
                     numbered under mu, as threads may call at once */
        snprintf(unnamed, sizeof unnamed, "__%s.%llu",
                 hvd__kind_name(req->kind),
                 (unsigned long long)hvd__engine.unnamed_seq[req->kind]++);
        req->name = unnamed;
    }
    if (hvd__engine.stopped == HVD_ERR_STALL) {
        status = HVD_ERR_STALL;
    } else if (hvd__engine.stopped) {
        status = HVD_ERR_STATE;
        hvd__log(HVD__LOG_ERROR, "%s '%s': hvd stopped at a failure on "
                 "this rank (its message said why): every later collective "
                 "fails until hvd_shutdown", hvd__kind_name(req->kind),
                 req->name);
    } else if (hvd__engine.peer_down) {
        status = HVD_ERR_STATE;
        hvd__log(HVD__LOG_ERROR, "%s '%s': another rank has shut hvd down",
                 hvd__kind_name(req->kind), req->name);
    } else if (hvd__engine.shutdown_requested) {
        /* Past the engine's last look at what came in: it would never be
         * done, and its wait would not return. */
        status = HVD_ERR_STATE;
        hvd__log(HVD__LOG_ERROR, "%s '%s': hvd_shutdown was called",
                 hvd__kind_name(req->kind), req->name);
    } else if (!named) {
        /* Unique by construction: nothing to check, nothing to keep. */
        if (!(h = hvd__handle_new(req->name))) status = HVD_ERR_NOMEM;
    } else if ((status = hvd__named_handle(req->name, &h)) ==
               HVD_ERR_STATE) {
        hvd__log(HVD__LOG_ERROR, "%s '%s' is already in flight on this "
                 "rank: wait for it before making it again",
                 hvd__kind_name(req->kind), req->name);
    }
    if (status == HVD_OK) {
        hvd__handle_fill(h, req);
        atomic_store_explicit(&h->owner,
                              named ? HVD__OWNER_CALLER : HVD__OWNER_NONE,
                              memory_order_relaxed);
        if (named) {
            hvd_handle_t last = hvd__engine.named_last;
            if (last) {
                last->named_next = h;
                last->next_epoch = hvd__engine.named_epoch;
            }
            hvd__engine.named_last = h;
        }
        hvd__chain_link(&hvd__engine.chain, &h->desc, h->sendbuf, h->recvbuf);
        h->next = NULL;
        *hvd__engine.incoming_tail = h;
        hvd__engine.incoming_tail = &h->next;
        /* Written under mu only: a plain add, not a locked one. */
        atomic_store_explicit(&hvd__engine.nsubmitted,
                              hvd__engine.nsubmitted + 1,
                              memory_order_relaxed);
        pthread_cond_signal(&hvd__engine.wake_cv);
        *out = h;
    }
    pthread_mutex_unlock(&hvd__engine.mu);
    return status;
}

/* ---- the stream variants' events ---- */

static struct {
    pthread_mutex_t mu;
    hvd__event_stack_t kept;
    int open; /* a take since the last hvd__events_free */
} hvd__events = {.mu = PTHREAD_MUTEX_INITIALIZER};

int hvd__event_take(ring_event_t **ev)
{
    pthread_mutex_lock(&hvd__events.mu);
    hvd__events.open = 1;
    *ev = hvd__event_pop(&hvd__events.kept);
    pthread_mutex_unlock(&hvd__events.mu);
    return *ev ? HVD_OK : ring_dev()->event_create(ev);
}

void hvd__event_give(ring_event_t *ev)
{
    if (!ev) return;
    pthread_mutex_lock(&hvd__events.mu);
    if (hvd__events.open) {
        hvd__event_push(&hvd__events.kept, ev);
        ev = NULL;
    }
    pthread_mutex_unlock(&hvd__events.mu);
    if (ev) ring_dev()->event_destroy(ev);
}

void hvd__events_free(void)
{
    pthread_mutex_lock(&hvd__events.mu);
    hvd__events.open = 0;
    hvd__event_stack_free(&hvd__events.kept);
    pthread_mutex_unlock(&hvd__events.mu);
}

/* ---- handles ---- */

void hvd__handle_release(hvd_handle_t h)
{
    /* Safe once done: the engine no longer touches them, and a wait
     * queued behind either (or a record never made, where the handle
     * failed) is not disturbed by the next request's record. */
    hvd__event_give(h->ready_ev);
    hvd__event_give(h->done_ev);
    h->ready_ev = h->done_ev = NULL;
    free(h->error);
    h->error = NULL;
    int owner = HVD__OWNER_CALLER;
    /* Release: the name's next request, under mu, sees the above. */
    if (atomic_compare_exchange_strong_explicit(
            &h->owner, &owner, HVD__OWNER_INDEX, memory_order_release,
            memory_order_acquire))
        return;
    if (owner == HVD__OWNER_NONE)
        free(h); /* not kept */
    else /* the index's already: freeing it would leave the index a hole */
        hvd__log(HVD__LOG_ERROR, "hvd_wait: the handle of '%s' was waited "
                 "for already (a handle ends with its first wait)",
                 h->desc.name);
}

void hvd__named_free(void)
{
    hvd__index_t *named = &hvd__engine.named;
    for (size_t i = 0; i < named->cap; i++) {
        hvd_handle_t h = named->slots[i].value;
        int owner = HVD__OWNER_CALLER;
        /* Not yet waited for: its hvd_wait frees it. */
        if (h && !atomic_compare_exchange_strong_explicit(
                     &h->owner, &owner, HVD__OWNER_NONE,
                     memory_order_acquire, memory_order_acquire))
            free(h);
    }
    hvd__index_free(named);
    hvd__named_forget();
}

void hvd__complete_many(hvd_handle_t *hs, size_t n, int status)
{
    /* One lock and at most one wake-up for a whole fused group, and none
     * when no caller sleeps on these handles: a caller waiting on a later
     * tensor (the optimizer's step waits on the first layer, reduced last)
     * woke for nothing and took the core from the engine mid-step. */
    int wake = 0;
    /* A failure's message, logged on this thread, goes with each handle to
     * its caller's hvd_last_error; then it is spent. */
    const char *error = status == HVD_OK ? NULL : hvd__thread_error();
    if (error && !*error) error = hvd_strerror(status);
    pthread_mutex_lock(&hvd__engine.mu);
    for (size_t i = 0; i < n; i++) {
        if (!hs[i]) continue;
        hs[i]->status = status;
        if (error) hs[i]->error = strdup(error);
        wake |= hs[i]->waited;
        /* Last: a waiter that sees done without mu (hvd__wait_done) may
         * free the handle at once, and release makes status seen. */
        atomic_store_explicit(&hs[i]->done, 1, memory_order_release);
    }
    if (wake) pthread_cond_broadcast(&hvd__engine.done_cv);
    pthread_mutex_unlock(&hvd__engine.mu);
    if (error) hvd__set_thread_error("");
}

void hvd__complete(hvd_handle_t h, int status)
{
    hvd__complete_many(&h, 1, status);
}

int hvd__mpi_wait(MPI_Request *request)
{
    /* Test, then sleep: other ranks may be a cycle or a backward pass
     * behind, and a busy wait would take their core from the training
     * threads. Every wake-up preempts a training thread too (with a 10 us
     * nap that was 5,000 preemptions a second and a cnn 25% slower), so
     * the naps grow by a quarter each time, from 5 us to 1 ms: a wait is
     * noticed at most a quarter of its length late (1 ms past 4 ms), and
     * a long one costs a few dozen wake-ups. The engine thread's timer
     * slack is cut (hvd__engine_main), else each nap would last 50 us more
     * than asked. */
    long nap_ns = 5000;
    int status = HVD_OK;
    for (;;) {
        int done = 0;
        HVD_CHECK_MPI(MPI_Test(request, &done, MPI_STATUS_IGNORE));
        if (done) break;
        /* Unless this rank's caller is blocked in hvd_wait and the node has
         * a core per rank: then the core is ours while it waits, and naps
         * only made it late (a 2-rank mlp step spent 120 us more in its
         * optimizer step than with polling). The caller's flag is read
         * without the lock: a stale value costs one nap or one poll. */
        if (hvd__engine.own_cores && atomic_load_explicit(
                &hvd__engine.waiters, memory_order_relaxed) > 0) {
            sched_yield();
            continue;
        }
        struct timespec nap = {0, nap_ns};
        nanosleep(&nap, NULL);
        nap_ns += nap_ns / 4;
        if (nap_ns > 1000000) nap_ns = 1000000;
    }
out:
    return status;
}

/* ---- descriptions and the fusion hint ---- */

uint64_t hvd__name_hash(const char *name)
{
    uint64_t h = hvd__index_hash(name);
    return h ? h : 1; /* 0 means "follows nothing" */
}

size_t hvd__desc_bytes(const hvd__desc_t *d)
{
    return (size_t)d->count * ring_dtype_size((ring_dtype_t)d->dtype);
}

void hvd__chain_link(hvd__chain_t *chain, hvd__desc_t *desc,
                     const void *sendbuf, const void *recvbuf)
{
    int in_place = desc->kind == HVD__ALLREDUCE && sendbuf == recvbuf &&
                   desc->count > 0;
    desc->follows = in_place && chain->end && chain->end == recvbuf &&
                            chain->dtype == desc->dtype &&
                            chain->op == desc->op
                        ? chain->hash
                        : 0;
    chain->end = in_place ? (const char *)recvbuf + hvd__desc_bytes(desc)
                          : NULL;
    chain->dtype = desc->dtype;
    chain->op = desc->op;
    chain->hash = hvd__name_hash(desc->name);
}

int hvd__desc_same_fields(const hvd__desc_t *a, const hvd__desc_t *b)
{
    /* Not the names: the engine compares each request with the cache
     * entry it found by name, every cycle, and reading the entry's name
     * again took a line of memory per request that the fields' line
     * lacked. */
    return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
           a->root == b->root && a->count == b->count && a->mem == b->mem;
}
