/* hvd/hvd_internal.h: what the files of hvd/ share: the configuration,
 * logging, requests and their handles, the engine's state, and the
 * interfaces between the API (api.c), the engine thread (engine.c), the
 * coordinator (coordinator.c), the executor (execute.c) and the timeline.
 *
 * Threads: the program's threads call the API, which only queues requests
 * under `mu` and waits on `done_cv`; the engine thread alone calls MPI after
 * hvd_init, and alone touches everything marked "engine only".
 */
#ifndef HVD_HVD_INTERNAL_H
#define HVD_HVD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include "hvd/hvd.h"
#include "ring/ring.h"

/* ---- configuration (config.c), read once by hvd_init ---- */
typedef enum {
    HVD__LOG_ERROR,
    HVD__LOG_WARNING,
    HVD__LOG_INFO,
    HVD__LOG_DEBUG
} hvd__log_level_t;

typedef enum { HVD__BIND_CORE, HVD__BIND_NUMA, HVD__BIND_NONE } hvd__bind_t;
/* HVD_INTRANODE: how ranks of one node reduce host tensors. */
typedef enum {
    HVD__INTRANODE_AUTO,
    HVD__INTRANODE_SHM,
    HVD__INTRANODE_RING
} hvd__intranode_t;

typedef struct {
    size_t fusion_threshold;       /* bytes; 0: no fusion */
    double cycle_time_s;
    char timeline[4096];           /* path, "" when off */
    double stall_check_s;
    double stall_shutdown_s;       /* 0: off */
    hvd__log_level_t log_level;
    hvd__bind_t bind;
    hvd__intranode_t intranode;
    int hierarchical;              /* HVD_HIERARCHICAL_ALLREDUCE: 0 or 1 */
    double spin_s;                 /* HVD_SPIN_TIME (hvd__engine.spare_pus) */
} hvd__config_t;

/* Fills config from the environment; HVD_ERR_ARG naming the variable. */
int hvd__config_read(hvd__config_t *config);
/* The effective settings as an aligned table (rank 0, info level). */
void hvd__config_print(void);

/* ---- placement (bind.c) ---- */
enum { HVD__PLACE_MAX = 384 }; /* bytes of one rank's place, NUL included */
/* Collective over comm, after hvd__bind; node_idx[r] is rank r's node.
 * own: no other rank of this node may run where this one may, or
 * (launched unbound) they share at least a PU each, so that this rank's
 * engine can poll without taking a core another rank computes on.
 * single: this rank may run on one PU only. spare: there is a PU for each
 * of this rank's two threads (training and engine) beside the other
 * ranks' (two of its own, or twice the node's ranks in a shared pool). */
int hvd__own_pus(MPI_Comm comm, const int *node_idx, int local_size,
                 int *own, int *single, int *spare);
/* Puts thread in Linux's SCHED_BATCH class: its ordinary share of the
 * core, but its wake-ups never preempt another thread. 0 where that
 * cannot be done. */
int hvd__sched_batch(pthread_t thread);
/* Binds this process to its local rank's share of the node (HVD_BIND),
 * first making its GPU current in a CUDA build, and describes the result
 * in place (nbytes): "device cpu, core 1 of 2 (PUs 1)". A failed binding
 * is only a warning. */
void hvd__bind(hvd__bind_t mode, int local_rank, int local_size, char *place,
               size_t nbytes);

/* ---- nodes and the ring order (topology.c) ---- */
/* Which node each rank is on and where it sits in the ring. Nodes are
 * numbered by their lowest rank; the ring takes node 0's ranks in rank
 * order, then node 1's, and so on. Arrays indexed by rank have size
 * entries, those by node nnodes; all live in one allocation. */
typedef struct {
    int size, nnodes;
    int *node_idx;   /* (size) the rank's node */
    int *local_rank; /* (size) its index among its node's ranks */
    int *ring_rank;  /* (size) its rank in the ring order */
    int *node_size;  /* (nnodes) ranks on the node */
    int *node_start; /* (nnodes) the ring rank of the node's lowest rank */
} hvd__topo_t;

/* Fills topo from first[r], the lowest rank on rank r's node (size
 * entries). HVD_ERR_ARG when first is not such a map (first[r] > r, or
 * first[first[r]] != first[r]), HVD_ERR_NOMEM. Pure: no MPI. */
int hvd__topo_build(hvd__topo_t *topo, const int *first, int size);
void hvd__topo_free(hvd__topo_t *topo);

/* This process's topology, and hvd__engine.comm's ranks in ring order:
 * what allreduce and broadcast run on (hvd__topo.ring_rank[root] is a
 * broadcast root there). Set by hvd__topology_init, collective over
 * hvd__engine.comm (HVD_ERR_MPI, HVD_ERR_NOMEM); freed by
 * hvd__topology_free. */
extern hvd__topo_t hvd__topo;
extern MPI_Comm hvd__ring_comm;
int hvd__topology_init(void);
void hvd__topology_free(void);
/* Gathers every rank's place (from hvd__bind) and host to rank 0, which
 * logs them at info level, after the nodes and the ring order when there
 * is more than one node. Collective; HVD_ERR_MPI, HVD_ERR_NOMEM. */
int hvd__topology_log(const char *place);

extern hvd__log_level_t hvd__log_level;
void hvd__log(hvd__log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- requests ---- */
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

/* What every rank must agree on for a name, and a fusion hint that need
 * not agree. Fixed size, so it travels as bytes between ranks. */
typedef struct {
    char name[HVD__NAME_MAX];
    int32_t kind, dtype, op, root;
    uint64_t count;
    uint64_t follows; /* hvd__chain_link's hint; not matched; last field */
} hvd__desc_t;

const char *hvd__kind_name(int kind);

/* What a rank knows of the allreduce it submitted last (fusion.c). */
typedef struct {
    const char *end; /* where its data ended, when it was in place */
    int32_t dtype, op;
    uint64_t hash;   /* of its name */
} hvd__chain_t;

struct hvd_handle {
    hvd__desc_t desc;
    const void *sendbuf;
    void *recvbuf;
    ring_apply_t apply;       /* HVD__ALLREDUCE_APPLY's */
    int status;               /* valid once done */
    _Atomic int done;         /* set under mu; hvd_wait may also spin on
                                 it without */
    int waited;               /* under mu: a caller sleeps until done */
    int coordinated;          /* engine only: sent to the coordinator */
    int cache_slot;           /* engine only: its response cache entry, -1 */
    size_t pending_pos;       /* engine only: where in the pending list */
    double submit_s;          /* engine only: for stalls and the timeline */
    struct hvd_handle *next;  /* in the incoming queue or the pending list */
};

/* An allreduce of float32 whose reduced result passes through apply
 * before every rank receives it in recvbuf (ring_apply_t: on one node each
 * element is applied once, by its owner; otherwise on every rank). apply
 * never sees recvbuf itself, so it may read recvbuf's old values. */
int hvd__allreduce_apply_async(const float *sendbuf, float *recvbuf,
                               size_t count, hvd_op_t op, const char *name,
                               const ring_apply_t *apply,
                               hvd_handle_t *handle);

/* ---- name -> pointer (index.c); keys are not copied ---- */
typedef struct {
    const char **keys;
    void **values;
    size_t cap, used;
} hvd__index_t;

int hvd__index_put(hvd__index_t *ix, const char *name, void *value);
void *hvd__index_get(const hvd__index_t *ix, const char *name);
void hvd__index_del(hvd__index_t *ix, const char *name);
void hvd__index_free(hvd__index_t *ix);

/* ---- this rank's pending requests (engine only) ---- */
/* In order of submission, with an index by name. A request leaves by
 * hvd__pending_take, which leaves a hole that the next
 * hvd__pending_compact closes: removal is O(1), order is kept. */
typedef struct {
    hvd_handle_t *items;
    size_t len, cap;
    hvd__index_t by_name;
} hvd__list_t;

int hvd__pending_add(hvd__list_t *list, hvd_handle_t h);
/* Removes and returns the request of that name; NULL when none. */
hvd_handle_t hvd__pending_take(hvd__list_t *list, const char *name);
void hvd__pending_compact(hvd__list_t *list);
void hvd__pending_free(hvd__list_t *list);

/* ---- whether spare PUs are spare (contention.c) ---- */

/* A thread waited for a PU more than this share of a window: the PUs are
 * wanted by more threads than there are, and spinning takes from them.
 * Above the rare single preemption an idle machine shows (12% of 50 ms). */
#define HVD__CONTENDED 0.25
#define HVD__CONTENTION_WINDOW_S 0.1
#define HVD__BACKOFF_MIN_S 0.5
#define HVD__BACKOFF_MAX_S 16.0

typedef struct {
    double off_until;  /* hvd__now() before which waits do not spin */
    double backoff_s;  /* the next time off; 0 before the first window */
} hvd__contention_t;

/* One thread's window: when it started, and the thread's wait for a PU
 * (run_delay) then. */
typedef struct {
    double start;
    double delay_s;
} hvd__contention_window_t;

/* The second field of a schedstat line, in seconds; HVD_ERR_ARG unless the
 * text is three numbers and a newline. */
int hvd__parse_schedstat(const char *text, double *delay_s);
/* Closes window w at now, delay_s, and starts the next: when spinning was
 * on all through it and the thread waited more than HVD__CONTENDED of it,
 * turns spinning off (returns 1). */
int hvd__contention_feed(hvd__contention_t *c, hvd__contention_window_t *w,
                         double now, double delay_s);
/* The calling thread's check (hvd_wait, hvd_poll), at most once a window;
 * with mu held. */
void hvd__contention_check(void);

/* ---- the engine (engine.c) ---- */
typedef struct {
    MPI_Comm comm;            /* a duplicate of the world: our traffic only */
    int rank, size;
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
    hvd__index_t inflight;    /* every handle not yet done, for duplicates */
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
    int stalled;              /* HVD_ERR_STALL: every later call fails */
} hvd__engine_t;

extern hvd__engine_t hvd__engine;

double hvd__now(void);

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

int hvd__engine_start(void);
int hvd__engine_stop(void);
/* Queues a request (the engine owns it from here) and wakes the engine;
 * HVD_ERR_STATE when the name is already in flight on this rank,
 * HVD_ERR_STALL after a stall shutdown (h is then not queued). */
int hvd__engine_submit(hvd_handle_t h);
/* Marks h done with `status` and wakes its waiter. Engine only. */
void hvd__complete(hvd_handle_t h, int status);
/* The same for the non-NULL handles of hs, with one wake-up. */
void hvd__complete_many(hvd_handle_t *hs, size_t n, int status);



/* ---- the coordinator's slow path (coordinator.c) ---- */
/* One decision every rank executes in the same order: a group of requests
 * (one, or several fused allreduces of one dtype and op), or an error for
 * one name. */
typedef struct {
    int32_t status;            /* HVD_OK, or the error every rank returns */
    int32_t ndescs;
    char message[512];         /* what differed, on which ranks */
} hvd__response_head_t;

typedef struct {
    hvd__response_head_t head;
    hvd__desc_t *descs;
} hvd__response_t;

typedef struct {
    hvd__response_t *items;
    size_t len, cap;
} hvd__plan_t;

void hvd__plan_free(hvd__plan_t *plan);

/* Runs one exchange with rank 0: sends this rank's requests that it has not
 * sent before (and whether it has joined), and receives the plan. Collective
 * over the engine's communicator. */
int hvd__coordinate(hvd__list_t *pending, int joined, hvd__plan_t *plan);
/* On rank 0: names that some ranks made and others not yet, so the slow
 * path must run again (to finish them, or to report them stalled). */
int hvd__coordinator_waiting(void);
void hvd__coordinator_free(void);
/* A response for ndescs names (left zero) at the end of plan; NULL when
 * out of memory. */
hvd__response_t *hvd__plan_add(hvd__plan_t *plan, int status, int ndescs);

/* ---- fusion (fusion.c) ---- */
/* Appends descs to plan as responses: consecutive allreduces of one dtype
 * and op are fused up to HVD_FUSION_THRESHOLD when both are small or the
 * second follows the first (hvd__chain_link); everything else alone. */
int hvd__plan_group(const hvd__desc_t *descs, size_t n, hvd__plan_t *plan);
/* A request's data in bytes: count elements of its dtype. */
size_t hvd__desc_bytes(const hvd__desc_t *d);
/* A name's 64-bit hash, never 0. */
uint64_t hvd__name_hash(const char *name);
/* Sets desc->follows to the hash of the previous request's name when this
 * allreduce is in place and starts where that one, also in place and of
 * the same dtype and op, ended (else 0), and makes desc the previous. */
void hvd__chain_link(hvd__chain_t *chain, hvd__desc_t *desc,
                     const void *sendbuf, const void *recvbuf);
/* Whether a and b agree on everything but the hint. */
int hvd__desc_same(const hvd__desc_t *a, const hvd__desc_t *b);

/* Byte encodings of what ranks exchange; decode checks every length and
 * field, so a corrupt message is an error, not a crash. */
int hvd__encode_requests(hvd_handle_t *reqs, size_t n, int joined,
                         char **bytes, size_t *nbytes);
int hvd__decode_requests(const char *bytes, size_t nbytes, int *joined,
                         hvd__desc_t **descs, size_t *n);
int hvd__encode_plan(const hvd__plan_t *plan, char **bytes, size_t *nbytes);
int hvd__decode_plan(const char *bytes, size_t nbytes, hvd__plan_t *plan);

/* ---- execution (execute.c) ---- */
/* Runs one response: gathers this rank's requests for its names from
 * pending (a joined rank has none and contributes zeros), reduces, copies
 * out and completes them. ready_s: when the ranks agreed it was ready (the
 * timeline's end of negotiation and start of queueing). */
int hvd__execute(const hvd__response_t *response, hvd__list_t *pending,
                 int joined, double ready_s);
/* Collective, before the engine starts: ring's context over
 * hvd__ring_comm, with the shared window and the hierarchical
 * communicators that HVD_INTRANODE and HVD_HIERARCHICAL_ALLREDUCE ask for.
 * HVD_ERR_ARG when HVD_INTRANODE=shm cannot hold, HVD_ERR_MISMATCH when
 * the ranks read ring's variables differently. */
int hvd__execute_init(void);
/* Collective (the context), after the engine has stopped. */
void hvd__execute_free(void);

/* ---- timeline (timeline.c), rank 0 only, all no-ops when off ---- */
int hvd__timeline_open(const char *path);
void hvd__timeline_event(const char *tensor, const char *phase, double start_s,
                         double end_s);
void hvd__timeline_close(void);

/* Waits for a non-blocking MPI call, sleeping between tests. */
int hvd__mpi_wait(MPI_Request *request);

#endif /* HVD_HVD_INTERNAL_H */
