/* ring/ring.h: collectives on raw buffers over an MPI communicator.
 *
 * This is the bottom layer of hvd. It knows nothing of tensor names, threads
 * or the engine: every call is blocking and collective. The algorithms are
 * ours, on MPI point-to-point and, within a node, on a shared-memory window;
 * MPI's own collectives only set up communicators, compare calls across
 * ranks (HVD_RING_CHECK) and serve as the test oracle and benchmark peer.
 *
 * Two ways in: a context per communicator (ring_ctx_create, like UCC's team
 * or NCCL's communicator), which owns the node and cross-node
 * communicators, the shared window and the choice of algorithm per call;
 * and entry points that take an MPI_Comm for one call without a context
 * (they wrap comm in a temporary context holding nothing, so they never
 * use shared memory). ring/README.md has the algorithms and variables.
 *
 * Conventions shared by every function here:
 *   - counts are in elements of `dtype`, never bytes;
 *   - a call is in place when sendbuf == recvbuf (see each function for where
 *     the data lives then);
 *   - every call returns a status: RING_OK (0) or a negative RING_ERR_*;
 *     bad arguments are reported, never crash, and are detected before any
 *     message is sent, so a rank that rejects a call leaves no stray traffic.
 */
#ifndef RING_RING_H
#define RING_RING_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statuses: the same numbers as hvd's HVD_OK / HVD_ERR_* ---- */
#define RING_STATUS_MAP(X)                                                     \
    X(OK, 0, "success")                                                        \
    X(ERR_ARG, -1, "invalid argument")                                         \
    X(ERR_MISMATCH, -2, "ranks disagree on a collective")                      \
    X(ERR_STATE, -3, "invalid state")                                          \
    X(ERR_MPI, -4, "MPI call failed")                                          \
    X(ERR_CUDA, -5, "CUDA call failed")                                        \
    X(ERR_NOMEM, -6, "out of memory")

typedef enum {
#define RING_STATUS_ENUM(name, value, text) RING_##name = (value),
    RING_STATUS_MAP(RING_STATUS_ENUM)
#undef RING_STATUS_ENUM
} ring_status_t;

/* Text for a status; "unknown status" for numbers outside the map. */
const char *ring_strerror(int status);

/* ---- element types and reduction operators ---- */
/* Same order as hvd_dtype_t and hvd_op_t, so hvd converts by value. */
typedef enum {
    RING_FLOAT32,
    RING_FLOAT64,
    RING_FLOAT16,  /* IEEE binary16 */
    RING_BFLOAT16, /* top half of a binary32 */
    RING_INT32,
    RING_INT64,
    RING_UINT8,
    RING_DTYPE_COUNT
} ring_dtype_t;

/* Half types are reduced in float and rounded to nearest even on store.
 * AVERAGE is sum then one division by the rank count, for floating types
 * only. MIN and MAX propagate NaN and order -0 below +0, so they do not
 * depend on the order of their operands. Integer SUM and PRODUCT wrap. */
typedef enum {
    RING_SUM,
    RING_AVERAGE,
    RING_MIN,
    RING_MAX,
    RING_PRODUCT,
    RING_OP_COUNT
} ring_op_t;

/* Bytes per element; 0 for an unknown dtype. */
size_t ring_dtype_size(ring_dtype_t dtype);
/* Short names ("f32", "bf16", "sum", "avg", ...); NULL when unknown. */
const char *ring_dtype_name(ring_dtype_t dtype);
const char *ring_op_name(ring_op_t op);

/* 1 when p is device memory of ring_dev() (CUDA with a GPU visible, or
 * the emulated device), else 0. ring_ctx_allreduce, broadcast, allgather
 * and reduce_scatter (and their MPI_Comm twins) take device buffers; the
 * other calls refuse them (RING_ERR_ARG, with a message). When the device
 * cannot tell (its CUDA context broken by an earlier error), memory the
 * host can read is host memory, and other memory is RING_ERR_CUDA, logged:
 * every call given it fails so, where host code would fault on it. */
int ring_is_device_memory(const void *p);

/* ---- the device: one table for CUDA and its emulation (ring/dev.c) ---- */
/* What ring/ (and hvd's device fusion buffer and streams) asks of a GPU.
 * Semantics are CUDA's, so that what passes on the emulated device holds
 * on a GPU: work queued on one stream runs in order, streams run
 * concurrently, and nothing queued is done until an event or a stream
 * sync says so. Every function returns a status (RING_OK; RING_ERR_CUDA
 * after logging what failed, RING_ERR_NOMEM, RING_ERR_ARG); the queueing
 * functions do not wait for the work. Arrays passed to a queueing
 * function (copies, reduce_n's inputs) are read before it returns. */
typedef struct ring_stream ring_stream_t;
typedef struct ring_event ring_event_t;

/* A device allocation as another process of the node opens it:
 * cudaIpcMemHandle_t is 64 bytes; the emulation's fits as well. */
typedef struct {
    unsigned char bytes[64];
} ring_ipc_handle_t;

/* One copy of a batch (copy_batch): nbytes from src to dst. */
typedef struct {
    void *dst;
    const void *src;
    size_t nbytes;
} ring_copy_t;

typedef struct {
    const char *name; /* "cuda" or "emulated" */

    /* ---- memory ---- */
    /* Device memory of this process's device; release(NULL) is a no-op. */
    int (*alloc)(void **p, size_t nbytes);
    int (*release)(void *p);
    /* Page-locked host memory, for staging: host code reads and writes
     * it, and copies to and from the device run at full speed. */
    int (*alloc_pinned)(void **p, size_t nbytes);
    int (*release_pinned)(void *p);
    /* 1 when p points into device memory this implementation knows
     * (allocated here, or opened from another process), with *device its
     * ordinal; else 0 (host, pinned or managed memory); RING_ERR_CUDA
     * (logged) when the device cannot tell: a CUDA context broken by an
     * earlier error answers every query with that error. */
    int (*owns)(const void *p, int *device);
    /* The device this thread uses, and selecting it (cudaSetDevice). */
    int (*device)(int *device);
    int (*set_device)(int device);

    /* ---- streams and events ---- */
    int (*stream_create)(ring_stream_t **s);
    int (*stream_destroy)(ring_stream_t *s); /* NULL: no-op */
    int (*stream_sync)(ring_stream_t *s);
    int (*event_create)(ring_event_t **e);
    int (*event_destroy)(ring_event_t *e); /* NULL: no-op */
    /* e marks the work queued on s so far. */
    int (*event_record)(ring_event_t *e, ring_stream_t *s);
    /* Blocks the calling thread until that work is done (at once for an
     * event never recorded). */
    int (*event_sync)(ring_event_t *e);
    /* *done = 1 when it is done, without blocking. */
    int (*event_query)(ring_event_t *e, int *done);
    /* Work queued on s after this call waits for e's work first. */
    int (*stream_wait)(ring_stream_t *s, ring_event_t *e);
    /* An event that also keeps when its work was done (event_create's do
     * not: cudaEventDisableTiming, a cheaper record), for hvd's timeline;
     * and *ms from a's work done to b's, both such events, recorded and
     * done (cudaEventElapsedTime: about 0.5 us resolution). */
    int (*timer_create)(ring_event_t **e);
    int (*elapsed)(ring_event_t *a, ring_event_t *b, float *ms);

    /* ---- work queued on a stream ---- */
    /* Any direction: device or pinned or plain host memory either side. */
    int (*copy)(void *dst, const void *src, size_t nbytes, ring_stream_t *s);
    /* n copies as one kernel launch (Horovod's batched D2D memcpy): packs
     * and unpacks a fusion buffer. Device memory on both sides. */
    int (*copy_batch)(const ring_copy_t *copies, size_t n,
                      ring_stream_t *s);
    int (*zero)(void *dst, size_t nbytes, ring_stream_t *s);
    /* ring__mem_ops_t's reduce, reduce_n and divide on device memory, with
     * the same arithmetic bit for bit (ring/reduce_op.h). in[] holds n
     * device pointers (n <= RING_DEV_MAX_INPUTS). */
    int (*reduce)(void *dst, const void *a, const void *b, size_t count,
                  ring_dtype_t dtype, ring_op_t op, int divisor,
                  ring_stream_t *s);
    int (*reduce_n)(void *dst, const void *const *in, int n, size_t count,
                    ring_dtype_t dtype, ring_op_t op, int divisor,
                    ring_stream_t *s);
    int (*divide)(void *buf, size_t count, ring_dtype_t dtype, int divisor,
                  ring_stream_t *s);
    /* dst[i] = src[i] as dst_dtype: float32 to or from float16 or
     * bfloat16, rounded as ring_f32_to_f16 rounds (gradients compressed
     * for the wire); RING_ERR_ARG for other pairs. */
    int (*convert)(void *dst, ring_dtype_t dst_dtype, const void *src,
                   ring_dtype_t src_dtype, size_t count, ring_stream_t *s);

    /* ---- within a node: one process's allocation opened by another ---- */
    /* p must be the start of an allocation (refused otherwise: a handle
     * opens the allocation at its start). A failed export, or event
     * made, leaves *h all zeros, which no handle is (ring/ipc.c). */
    int (*ipc_export)(void *p, ring_ipc_handle_t *h);
    int (*ipc_open)(const ring_ipc_handle_t *h, void **p);
    int (*ipc_close)(void *p);
    /* An event that the node's other processes can wait for on their
     * streams (cudaEventInterprocess), made with its handle, or opened from
     * one; either is recorded, waited for and destroyed (event_destroy) as
     * any event. A wait on an opened event waits for the exporter's last
     * record before the wait was queued. */
    int (*ipc_event_create)(ring_event_t **e, ring_ipc_handle_t *h);
    int (*ipc_event_open)(const ring_ipc_handle_t *h, ring_event_t **e);
} ring_dev_t;

enum { RING_DEV_MAX_INPUTS = 16 };

/* This process's device, chosen once: the emulated device when the
 * test-only variable HVD_DEVICE_EMULATE is set (ring/README.md), else
 * CUDA in a CUDA build with a GPU visible, else NULL (nothing is device
 * memory). A bad HVD_DEVICE_EMULATE is logged once, and no device is
 * used. */
const ring_dev_t *ring_dev(void);


/* Conversions between float and the 16-bit types, as the reductions do
 * them: round to nearest even, subnormals kept, NaN stays NaN, beyond
 * 65504 (f16) becomes inf. */
uint16_t ring_f32_to_f16(float value);
float ring_f16_to_f32(uint16_t bits);
/* The same over n elements (vectorised). */
void ring_f32_to_f16_array(uint16_t *out, const float *in, size_t n);
void ring_f16_to_f32_array(float *out, const uint16_t *in, size_t n);
uint16_t ring_f32_to_bf16(float value);
float ring_bf16_to_f32(uint16_t bits);

/* ---- allreduce algorithms ---- */
typedef enum {
    RING_ALGO_AUTO,   /* by message size: recursive doubling when small */
    RING_ALGO_RING,   /* bandwidth optimal: reduce-scatter + allgather */
    RING_ALGO_RDB,    /* latency optimal: recursive doubling, log2(N) steps */
    RING_ALGO_RHD,    /* recursive halving + doubling (Rabenseifner): the
                         ring's bytes in 2 log2(N) steps */
    RING_ALGO_COUNT
} ring_algo_t;

/* Bytes from text: decimal digits, then K, M or G (powers of 1024, any
 * case) or nothing; no sign, spaces or other suffix. RING_OK, or
 * RING_ERR_ARG (no message) when text is not that or the value does not
 * fit a size_t, leaving *nbytes as it was. The one grammar of every size
 * setting and flag: the ring's variables, HVD_FUSION_THRESHOLD and
 * allreduce_perf's -b and -e. */
int ring_parse_bytes(const char *text, size_t *nbytes);

/* Reads ring's variables (HVD_RING_CHECK, HVD_ALLREDUCE_ALGO,
 * HVD_RING_SEGMENT_BYTES, HVD_RING_SMALL_BYTES, HVD_SHM_SEGMENT_BYTES,
 * HVD_SHM_STREAM) as the first collective would: RING_OK, or RING_ERR_ARG
 * with a message naming the bad one, so a program can refuse them before
 * it starts rather than at its first collective.
 *
 * Every rank must make the same calls: a call that differs on one rank
 * (count, dtype, op, root, algorithm, or any of these variables), or that
 * one rank refuses, is not detected by default, and the ranks hang, fail
 * in MPI or return wrong data. HVD_RING_CHECK=1, set on every rank, has
 * each collective compare the ranks' calls first (one small MPI_Allreduce
 * more per call): when they differ, every rank fails with
 * RING_ERR_MISMATCH (a rank that refused its own call, with its own
 * error), a message names what differs, and no data moves.
 *
 * The collectives that take a comm (ring_allreduce, ring_broadcast, ...)
 * send point-to-point messages on it, unlike MPI's own collectives: a
 * receive of the caller's pending on it with MPI_ANY_TAG may take one
 * (pass a duplicate of comm, or use a context, which has its own). A
 * context is used by one thread at a time; two contexts on one comm may
 * be used from two threads at once. A call's recvbuf is sendbuf or does
 * not overlap it. */
int ring_check_env(void);

/* "auto", "ring", "rdb", "rhd"; NULL when unknown. */
const char *ring_algo_name(ring_algo_t algo);
/* Parses a name from ring_algo_name(); RING_ERR_ARG when unknown. */
int ring_algo_parse(const char *name, ring_algo_t *algo);

/* ---- collectives ---- */

/* Reduces `count` elements across the ranks of `comm`; every rank ends with
 * bitwise identical results in recvbuf. sendbuf == recvbuf is in place.
 * The algorithm is RING_ALGO_AUTO unless the environment variable
 * HVD_ALLREDUCE_ALGO (read once) names another. */
int ring_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                   ring_dtype_t dtype, ring_op_t op, MPI_Comm comm);

/* ring_allreduce with the algorithm chosen by the caller (tests, bench). */
int ring_allreduce_algo(ring_algo_t algo, const void *sendbuf, void *recvbuf,
                        size_t count, ring_dtype_t dtype, ring_op_t op,
                        MPI_Comm comm);

/* ring_allreduce for ranks spread over nodes (ring/hier.c): reduce-scatter
 * within `node` (the caller's node), allreduce of each block across `cross`
 * (the ranks with the caller's index in every node), allgather within
 * `node`. Every node must have the same number of ranks. */
int ring_allreduce_hier(const void *sendbuf, void *recvbuf, size_t count,
                        ring_dtype_t dtype, ring_op_t op, MPI_Comm node,
                        MPI_Comm cross);

/* sendbuf holds size(comm) blocks of recvcount elements; rank r receives the
 * reduction of block r of every rank. In place (sendbuf == recvbuf) the
 * result is left in block r of that buffer, the other blocks are scratch. */
int ring_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                        ring_dtype_t dtype, ring_op_t op, MPI_Comm comm);

/* Every rank contributes sendcount elements; recvbuf receives size(comm)
 * blocks, block r from rank r. In place when sendbuf already is block r of
 * recvbuf (sendbuf == recvbuf + rank * sendcount elements). */
int ring_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                   ring_dtype_t dtype, MPI_Comm comm);

/* Copies `count` elements of root's buf into every rank's buf. */
int ring_broadcast(void *buf, size_t count, ring_dtype_t dtype, int root,
                   MPI_Comm comm);

/* ---- contexts: one per communicator ---- */
typedef struct ring_ctx ring_ctx_t;

/* How a context's allreduces use the node (hvd reads it from
 * HVD_INTRANODE): AUTO takes the shared window from 4 KiB when every rank
 * is on one node (or, hierarchical, within each node), SHM always, RING
 * never. */
typedef enum {
    RING_INTRANODE_AUTO,
    RING_INTRANODE_SHM,
    RING_INTRANODE_RING,
    RING_INTRANODE_COUNT
} ring_intranode_t;

/* A zeroed struct (or NULL) asks for the defaults. */
typedef struct {
    /* Each rank's slab of the shared window: a fused allreduce of up to
     * this many bytes runs in one chunk. 0: RING_CTX_SLAB_MIN; smaller
     * values are raised to it. Halved, rank 0 warning, until the window
     * fits in every node's shared memory; below RING_CTX_SLAB_MIN no
     * window (RING_INTRANODE_SHM: RING_ERR_NOMEM). */
    size_t slab_bytes;
    ring_intranode_t intranode;
    /* 1: across nodes, reduce within each node, then across the nodes
     * one block per rank, then gather within the node (ring/hier.c). Needs
     * as many ranks on every node; otherwise the flat ring runs, with a
     * warning from rank 0. */
    int hierarchical;
} ring_ctx_opts_t;

enum { RING_CTX_SLAB_MIN = 4 << 20 };

/* Collective over comm (which the context duplicates; comm stays the
 * caller's): reads ring's variables, checks on every rank that the ranks
 * read the ones that must agree alike (RING_ERR_MISMATCH naming them and
 * the ranks' values), finds the nodes, and makes what opts ask for: the
 * hierarchical communicators, the shared window. RING_ERR_ARG (on every
 * rank) for opts that cannot hold, e.g. RING_INTRANODE_SHM across nodes
 * without hierarchical; RING_ERR_MPI, RING_ERR_NOMEM. *ctx is NULL on
 * failure. */
int ring_ctx_create(MPI_Comm comm, const ring_ctx_opts_t *opts,
                    ring_ctx_t **ctx);

/* Collective: frees what the context holds; *ctx becomes NULL. NULL is a
 * no-op. */
int ring_ctx_free(ring_ctx_t **ctx);

/* ring_allreduce over ctx's ranks, the algorithm chosen per call by ctx's
 * decision table (ring/allreduce.c): the shared window, hierarchical, or
 * over MPI recursive doubling, Rabenseifner or the ring by size. */
int ring_ctx_allreduce(ring_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                       size_t count, ring_dtype_t dtype, ring_op_t op);

/* The algorithm ctx's table picks for an allreduce of count elements of
 * dtype: "shm", "shm_hier", "hier", "rdb", "rhd" or "ring". */
const char *ring_ctx_allreduce_algo(ring_ctx_t *ctx, size_t count,
                                    ring_dtype_t dtype);

/* A fused allreduce: the pieces, end to end, are one buffer of count
 * elements (their sum). A piece whose sendbuf is NULL contributes zeros
 * (a rank with nothing of its own), one whose recvbuf is NULL drops its
 * result. Through the shared window every piece is copied in segment by
 * segment as the reduction goes, and each reduced block goes from its
 * owner's slab straight to the pieces' recvbufs: no packing before and no
 * copy out after. Pieces whose sendbufs follow each other in memory, and
 * whose recvbufs do (tensors carved in order from one slab, in place or
 * into another), are one call on the two ranges. Otherwise they are
 * packed into ctx's scratch, reduced and copied out. */
typedef struct {
    const void *sendbuf;
    void *recvbuf;
    size_t count;
} ring_piece_t;

int ring_ctx_allreduce_pieces(ring_ctx_t *ctx, const ring_piece_t *pieces,
                              size_t npieces, ring_dtype_t dtype,
                              ring_op_t op);

/* ring_ctx_allreduce with apply run on the reduced result before any rank
 * receives it (ring_apply_t, below). Within one node each element is
 * applied once, by the owner of its block; otherwise every rank reduces
 * the whole into scratch and applies all of it there. apply never sees
 * recvbuf. */
typedef struct ring_apply ring_apply_t;
int ring_ctx_allreduce_apply(ring_ctx_t *ctx, const void *sendbuf,
                             void *recvbuf, size_t count, ring_dtype_t dtype,
                             ring_op_t op, const ring_apply_t *apply);

/* Collective: buf (nbytes, the start of an allocation) becomes ctx's
 * registered buffer, replacing an earlier one (NULL: none). Within a
 * node, device buffers are then opened by the node's other ranks once
 * (CUDA IPC), so that ring_ctx_allreduce_registered reduces them where
 * they lie, without copying them in first: hvd registers its device
 * fusion buffer. RING_OK also where nothing can be opened (host memory,
 * no shared window, a rank that cannot export, a rank without a device,
 * a buffer that is not the start of its allocation, logged: CUDA IPC
 * opens an allocation at its start): the calls then take
 * ring_ctx_allreduce's way. The buffer must outlive its registration;
 * once the next ring_ctx_register returns, no rank's call reads the
 * earlier one any more (a registered call with a done event may return
 * before its work is through: this waits for it). */
int ring_ctx_register(ring_ctx_t *ctx, void *buf, size_t nbytes);

/* ring_ctx_allreduce in place on the first count elements of every
 * rank's registered buffer. ready: NULL, or an event this rank recorded
 * behind its writes to its buffer: ring's reads of the buffer wait for it
 * (on the device, where they run there), so that the caller need not
 * synchronise first (a buffer of host memory: the host waits for it).
 * done: NULL, and the call returns once the result is in this rank's
 * buffer and no rank reads the buffer any more; or an event of this
 * rank's device, which ring records where that holds, and the call may
 * return before (within a node, device buffers: with the work queued,
 * the host waiting for no device): the caller orders its reads of the
 * result and its next writes to the buffer after done (a stream wait),
 * and until done is through the buffer is ring's. A rank alone reads
 * nothing: its device buffer holds the result once ready is through,
 * and the call returns without waiting for it (done: recorded behind
 * ready). RING_ERR_ARG when none is registered or it is too small, or
 * for an event in a process without a device. */
int ring_ctx_allreduce_registered(ring_ctx_t *ctx, size_t count,
                                  ring_dtype_t dtype, ring_op_t op,
                                  ring_event_t *ready, ring_event_t *done);

/* ring_ctx_allreduce_registered out of place: the first count elements of
 * every rank's registered buffer reduced into recvbuf, memory of the
 * buffer's kind (this rank's own, outside the buffer's first count
 * elements), and done recorded once the result is there. freed: NULL,
 * and done also says the buffer is the caller's again (as in place); or
 * an event that ring records once no rank reads this rank's buffer any
 * more, which may come after done: the caller reads the result after
 * done, and writes the buffer again after freed. The buffer's contents
 * are ring's to change until then. freed needs done. Within a node a
 * call of up to HVD_RING_IPC_ONESHOT bytes (any, at two ranks) reduces
 * in one step: each rank all of it from every rank's buffer, after one
 * wait for the others instead of three (ring/README.md). hvd's device
 * groups take this call: the unpack waits for done, the next pack for
 * freed. */
int ring_ctx_allreduce_registered_to(ring_ctx_t *ctx, size_t count,
                                     ring_dtype_t dtype, ring_op_t op,
                                     void *recvbuf, ring_event_t *ready,
                                     ring_event_t *done, ring_event_t *freed);

/* For a rank that fails before its call to a device collective on ctx (a
 * failure of its own: its writes to the buffer, its wait for them), so
 * that the others do not wait for it forever: within a node, the ranks
 * whose calls go through ctx's window of device memory (CUDA IPC), and
 * wait there for this rank, end them with RING_ERR_STATE naming it, and
 * every later call through the window fails on every rank, as after a
 * call that fails midway. Ranks whose calls go over MPI (staged, across
 * nodes) cannot be told: they wait for it as for any call it does not
 * make. Returns status, the failure. */
int ring_ctx_give_up(ring_ctx_t *ctx, int status);
/* Whether ring_ctx_give_up reaches the other ranks in their registered
 * call of nbytes (ring_ctx_allreduce_registered_to into device memory,
 * or in place): 1 where that call goes through ctx's device window alone;
 * 0 where any of it goes over MPI (a call under the window's 4 KiB, ranks
 * on several nodes, no window or none open yet (ctx's first call through
 * it, or ring_ctx_register, opens it), HVD_RING_CHECK's agreement at every
 * call's opening), where a rank that fails before its call must tell the
 * others before they make theirs (hvd's ranks agree on it over MPI
 * first), and for a rank alone, which nobody waits for. Every rank
 * answers alike. */
int ring_ctx_give_up_reaches(ring_ctx_t *ctx, size_t nbytes);

/* The other collectives over ctx's ranks, as their MPI_Comm twins below. */
int ring_ctx_broadcast(ring_ctx_t *ctx, void *buf, size_t count,
                       ring_dtype_t dtype, int root);
int ring_ctx_allgather(ring_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                       size_t sendcount, ring_dtype_t dtype);
int ring_ctx_reduce_scatter(ring_ctx_t *ctx, const void *sendbuf,
                            void *recvbuf, size_t recvcount,
                            ring_dtype_t dtype, ring_op_t op);

/* ---- allreduce through shared memory, for the ranks of one node ---- */
/* The ranks share one MPI-3 window in which each owns a slab; a rank reduces
 * its block by reading the other ranks' slabs directly (ring/shm.c). */
typedef struct ring_shm ring_shm_t;

/* Collective over comm: makes the window, with a slab of slab_bytes
 * (rounded up to a page) for each rank, the largest any rank asks for
 * (ranks may ask for different sizes). RING_ERR_ARG, on every rank, when
 * comm's ranks are not all on one node; RING_ERR_NOMEM, on every rank,
 * rank 0 saying why, when the node's shared memory (/dev/shm, or Open
 * MPI's osc_sm_backing_directory) has too little room for it. */
int ring_shm_create(MPI_Comm comm, size_t slab_bytes, ring_shm_t **shm);

/* Collective: frees the window; *shm becomes NULL. NULL is a no-op. */
int ring_shm_free(ring_shm_t **shm);

/* This rank's slab and its size, once no rank still reads it for an earlier
 * call: data packed here is not copied again by ring_shm_allreduce. */
int ring_shm_slab(ring_shm_t *shm, void **slab, size_t *slab_bytes);

/* ring_allreduce among shm's ranks (same guarantees: any count, in place or
 * not, bitwise identical everywhere). sendbuf and recvbuf may each be the
 * slab (then count must fit in it) or lie outside it; counts beyond the
 * slab run in slab-sized chunks. */
int ring_shm_allreduce(ring_shm_t *shm, const void *sendbuf, void *recvbuf,
                       size_t count, ring_dtype_t dtype, ring_op_t op);

/* What ring_shm_allreduce_apply does to the reduced result: fn(ctx, first,
 * data, n) finds elements [first, first + n) of the call's result reduced
 * in data (in the owner's private scratch memory, never in sendbuf or
 * recvbuf, so fn may read their old values) and replaces them, in place,
 * with what every rank is to receive there. Each element passes through
 * fn exactly once, on one rank: the owner of its block (which rank owns
 * which elements is fixed by count, dtype, the slab size and the number
 * of ranks, so it is the same for every call alike). fn may keep
 * per-element state (an optimizer's momentum): only the owner's copy of
 * it is then current. */
struct ring_apply {
    void (*fn)(void *ctx, size_t first, void *data, size_t n);
    void *ctx;
};

/* ring_shm_allreduce, with apply run on each reduced piece by its owner
 * before any rank receives it (ring_apply_t). */
int ring_shm_allreduce_apply(ring_shm_t *shm, const void *sendbuf,
                             void *recvbuf, size_t count, ring_dtype_t dtype,
                             ring_op_t op, const ring_apply_t *apply);

/* ring_allreduce_hier with shm's ranks as the node: the reduce-scatter and
 * the allgather within the node go through the shared window, and each
 * block crosses between nodes over `cross` (the ranks with this one's index
 * in shm on every node). Every node's shm must have as many ranks and the
 * same slab size (calls beyond a slab are cut into the same chunks). */
int ring_shm_allreduce_hier(ring_shm_t *shm, MPI_Comm cross,
                            const void *sendbuf, void *recvbuf, size_t count,
                            ring_dtype_t dtype, ring_op_t op);

/* ---- settings that must agree across ranks (ring/settings.c) ---- */
enum { RING_SETTINGS_MAX = 64 }; /* settings one call compares, at most */

/* Collective over comm: whether every rank has the same text in values[i]
 * for each of the n settings names[i] (n <= RING_SETTINGS_MAX; texts
 * compared byte for byte, so the caller normalises them: defaults filled
 * in, parsed values printed one way). RING_OK when they all agree;
 * RING_ERR_MISMATCH on every rank when any differs, each rank logging one
 * line per differing setting that names it and the ranks' values, ranks
 * with the same value grouped ("HVD_INTRANODE differs across ranks: rank 0
 * has "shm"; rank 1 has "ring""); RING_ERR_ARG (bad arguments, before any
 * message is sent), RING_ERR_NOMEM (on every rank), RING_ERR_MPI. */
int ring_settings_agree(MPI_Comm comm, int n, const char *const names[],
                        const char *const values[]);

#ifdef __cplusplus
}
#endif

#endif /* RING_RING_H */
