/* ring/ring_internal.h: what the files of ring/ share and nobody else sees:
 * the check macros and the log, the configuration table's result, memory
 * kinds, the context, the one opening every collective goes through, block
 * layouts, the algorithms' common signature and the segmented pipeline
 * that moves blocks around the ring.
 */
#ifndef RING_RING_INTERNAL_H
#define RING_RING_INTERNAL_H

#include <stdint.h>
#include "ring/dev.h"
#include "ring/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Library check: log where an MPI call failed, set `status`, jump to `out`
 * (every function that uses it has an `out:` label that releases what it
 * holds). */
#define RING_CHECK_MPI(call)                                                   \
    do {                                                                       \
        int ring__rc = (call);                                                 \
        if (ring__rc != MPI_SUCCESS) {                                         \
            ring__log_mpi_error(ring__rc, #call, __FILE__, __LINE__);          \
            status = RING_ERR_MPI;                                             \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* Same for a CUDA runtime call (CUDA builds only: the log function is in
 * ring/dev_cuda.c). The error travels as an int, so this header needs no
 * CUDA header and host-only files can include it. */
#define RING_CHECK_CUDA(call)                                                  \
    do {                                                                       \
        int ring__err = (int)(call);                                           \
        if (ring__err != 0 /* cudaSuccess */) {                                \
            ring__log_cuda_error(ring__err, #call, __FILE__, __LINE__);        \
            status = RING_ERR_CUDA;                                            \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* Same shape for calls of ours that return a status. */
#define RING_CHECK(call)                                                       \
    do {                                                                       \
        status = (call);                                                       \
        if (status != RING_OK) goto out;                                       \
    } while (0)

/* One line on stderr, prefixed with the world rank. */
void ring__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ring__log_mpi_error(int rc, const char *call, const char *file, int line);
/* Logs "file:line: call failed: <cudaGetErrorString>" and clears the
 * thread's last CUDA error (a sticky one stays). */
void ring__log_cuda_error(int err, const char *call, const char *file,
                          int line);

/* RING_OK while MPI is up; else RING_ERR_STATE with a message naming func
 * and whether MPI is not yet initialized or already finalized. */
int ring__check_mpi_up(const char *func);

/* ---- configuration: ring's variables, one table (ring/config.c) ---- */
/* Read once from the environment, each a row of ring/config.c's table
 * (name, default, what it expects, whether the ranks must agree):
 *   HVD_RING_CHECK           0 | 1: ring__agree's comparison (0)
 *   HVD_ALLREDUCE_ALGO       auto | ring | rdb | rhd    (RING_ALGO_AUTO)
 *   HVD_RING_SEGMENT_BYTES   pipeline segment size
 *   HVD_RING_SMALL_BYTES     below this, latency algorithms
 *   HVD_SHM_SEGMENT_BYTES    the shared window's segment size
 *   HVD_SHM_STREAM           auto | on | off: how the window's writers
 *                            write what other ranks read (shm.c)
 *   HVD_RING_STAGING_BYTES   pinned host memory a context stages device
 *                            buffers through (staged.c)
 *   HVD_RING_IPC_BYTES       each rank's device slab of the IPC path
 *                            (ipc.c)
 *   HVD_RING_IPC             auto | off: device allreduces within a node
 *                            through CUDA IPC where it works (ipc.c)
 *   HVD_CUDA_AWARE           auto | 0 | 1: MPI reads device memory (mem.c)
 *   HVD_RING_IPC_ONESHOT     registered calls out of place up to this
 *                            many bytes (any, at 2 ranks; 0: none)
 *                            reduce in one step (ipc.c)
 *   HVD_RING_IPC_WAIT        device | host: how the IPC path waits for
 *                            another rank's work (ipc.c)
 * A bad value fails every collective with RING_ERR_ARG and a message that
 * names the variable, rather than silently running something else. */
typedef struct {
    int check;
    ring_algo_t algo;
    size_t segment_bytes;
    size_t small_bytes;
    size_t shm_segment_bytes;
    int shm_stream; /* RING__STREAM_* */
    size_t staging_bytes;
    size_t ipc_bytes;
    size_t ipc_oneshot_bytes;
    int ipc;        /* 0: off, 1: auto */
    int cuda_aware; /* -1: auto, 0, 1 */
    int ipc_host_wait; /* 0: device, 1: host */
} ring__tuning_t;

enum { RING__STREAM_AUTO = -1, RING__STREAM_OFF = 0, RING__STREAM_ON = 1 };

int ring__tuning(const ring__tuning_t **tuning);
/* The same read afresh, not cached: fills *tuning and returns RING_OK, or
 * RING_ERR_ARG after logging the first bad variable (the fields after it
 * are then left as they were). ring__tuning caches its first result;
 * test/fuzz/fuzz_env.c reads many environments in one process. */
int ring__tuning_parse(ring__tuning_t *tuning);
/* Collective over comm: RING_OK when every rank read the variables that
 * must agree alike; else RING_ERR_MISMATCH on every rank, with a message
 * naming each variable that differs and the ranks' values. */
int ring__tuning_agree(MPI_Comm comm);

/* ---- memory kinds (ring/mem.c) ---- */
/* Where a buffer lives. Copies and reductions of a call go through its
 * kind's table, so that the algorithms are written once: host memory now;
 * CUDA device memory and an emulated device (host memory behind the
 * device interface, for tests) join as rows. */
typedef enum { RING__MEM_HOST, RING__MEM_COUNT } ring__mem_t;

typedef struct {
    const char *name;
    void (*copy)(void *dst, const void *src, size_t nbytes);
    void (*zero)(void *dst, size_t nbytes);
    /* dst[i] = a[i] (op) b[i]; with divisor > 1 (AVERAGE's last step)
     * divided by it before rounding to dtype; dst may alias a or b. */
    void (*reduce)(void *dst, const void *a, const void *b, size_t count,
                   ring_dtype_t dtype, ring_op_t op, int divisor);
    /* dst[i] = in[0][i] (op) ... (op) in[n-1][i], read in one pass. */
    void (*reduce_n)(void *dst, const void *const *in, int n, size_t count,
                     ring_dtype_t dtype, ring_op_t op, int divisor);
    /* buf[i] /= divisor: the hierarchical AVERAGE's one division. */
    void (*divide)(void *buf, size_t count, ring_dtype_t dtype, int divisor);
    /* Scratch of this kind; NULL when out of memory. */
    void *(*alloc)(size_t nbytes);
    void (*release)(void *p);
} ring__mem_ops_t;

extern const ring__mem_ops_t ring__mem_host;
/* Device memory, for MPI that reads it (CUDA-aware) and for a rank alone
 * (whose data MPI never reads): each operation runs on ring_dev()'s work
 * stream and is waited for. A failure is logged and kept for
 * ring__mem_device_status, since the table's functions return nothing. */
extern const ring__mem_ops_t ring__mem_device;
/* RING_OK, or the first failure of ring__mem_device since the last call
 * (on this thread), which it clears. */
int ring__mem_device_status(void);
/* The opening of a call on ring__mem_device: its operations run on ctx's
 * work stream, or for a wrapper's call on a stream all such calls share,
 * made now the first time (a failure is the call's: the next tries
 * again); earlier failures are forgotten. */
int ring__mem_device_bind(ring_ctx_t *ctx);
/* ctx's work stream (not a wrapper's), made now the first time. */
int ring__ctx_work(ring_ctx_t *ctx, ring_stream_t **work);
/* Whether MPI takes dev's memory: HVD_CUDA_AWARE, or with auto (the
 * default) what Open MPI's MPIX_Query_cuda_support says, for CUDA only. */
int ring__cuda_aware(const ring_dev_t *dev);

/* The kind of a buffer, or NULL with *why set when a call that takes
 * host memory only cannot take it (device memory, or memory of no kind
 * that can be told). */
const ring__mem_ops_t *ring__mem_of(const void *p, const char **why);
/* ring_is_device_memory(p), with *device its ordinal when it is 1. */
int ring__memory_kind(const void *p, int *device);
/* Why a call fails on memory of RING_ERR_CUDA's kind. */
extern const char ring__kind_unknown[];

/* ---- contexts (ring/ctx.c) ---- */
typedef struct ring__stage ring__stage_t;
typedef struct ring__ipc ring__ipc_t;

struct ring_ctx {
    MPI_Comm comm;        /* ours (a duplicate); a wrapper's: the caller's */
    MPI_Comm node, cross; /* hierarchical: this rank's node, and the ranks
                             with its index on every node; else NULL */
    ring_shm_t *shm;      /* the window, over node or comm; NULL: none */
    ring_intranode_t intranode;
    char *scratch;        /* grown on demand: fused pieces, apply's copy */
    size_t scratch_bytes;
    ring__stage_t *stage; /* device calls' staging, made by the first */
    ring__ipc_t *ipc;     /* device slabs opened across the node, made by
                             the first device allreduce through shm */
    int ipc_tried;        /* that allreduce came, none refused: NULL ipc
                             means none */
    void *registered;     /* ring_ctx_register's buffer, or NULL */
    size_t registered_bytes;
    int wrapped;          /* ring__ctx_wrap's: holds nothing past a call */
    ring_stream_t *work;  /* ring__mem_device's work (mem.c) */
};

/* A context for one call on the caller's communicators, holding nothing:
 * the entry points that take an MPI_Comm run through one of these. */
ring_ctx_t ring__ctx_wrap(MPI_Comm comm, MPI_Comm node, MPI_Comm cross,
                          ring_shm_t *shm);
/* ctx's scratch, at least nbytes; NULL when out of memory. */
char *ring__ctx_scratch(ring_ctx_t *ctx, size_t nbytes);

/* ---- one opening for every collective (ring/begin.c) ---- */
/* What a staged call (ring/staged.c) asks of the ring pipeline, block by
 * block, so that copies between device and staging overlap the ring:
 * need(arg, b) before block b of src is first read (its device-to-host
 * copy must be done), final(arg, b) once block b of buf holds its result
 * (its copy back may start). The algorithms that take no hooks run once
 * every block is in. */
typedef struct {
    int (*need)(void *arg, int block);
    int (*final)(void *arg, int block);
    void *arg;
} ring__hooks_t;

typedef enum {
    RING__ALLREDUCE,
    RING__ALLREDUCE_HIER,
    RING__REDUCE_SCATTER,
    RING__ALLGATHER,
    RING__BROADCAST,
    RING__ALLREDUCE_REGISTERED,
    RING__SHM_ALLREDUCE,
    RING__SHM_ALLREDUCE_HIER,
    RING__SHM_ALLREDUCE_APPLY,
    RING__ALLREDUCE_APPLY,
    RING__KIND_COUNT
} ring__kind_t;

/* The public function's name ("ring_allreduce", ...); NULL when unknown. */
const char *ring__kind_name(ring__kind_t kind);

/* Marks collectives that take no operator. */
#define RING__NO_OP ((ring_op_t)-1)

/* One call of a collective, as its opening found it. Every field but the
 * buffers' kind is what every rank must pass alike (HVD_RING_CHECK
 * compares them); op is RING__NO_OP, root and algo 0 where the collective
 * takes none. */
typedef struct {
    const char *func;  /* the public name, for messages */
    ring__kind_t kind;
    ring_ctx_t *ctx;
    MPI_Comm comm;     /* the ring's: ctx's, or a hierarchical call's node */
    int rank, size;
    size_t count, esize;
    ring_dtype_t dtype;
    ring_op_t op;
    int root;
    ring_algo_t algo;
    const ring__mem_ops_t *mem;
    const ring__tuning_t *tuning;
    /* A buffer is device memory: with mem the host's the call runs staged
     * (ring/staged.c) or across the node (ring/ipc.c); with
     * ring__mem_device's (a CUDA-aware MPI, or a rank alone) on the device
     * buffers themselves. NULL for host calls. */
    const ring_dev_t *dev;
    /* A device call that mixes kinds: sendbuf (in), recvbuf (out) is host
     * memory, which a CUDA-aware MPI's call brings to device memory before
     * the device's kernels reduce. 0 for host calls. */
    int host_in, host_out;
    const ring__hooks_t *hooks; /* staged: see ring__hooks_t */
    /* A registered call's: NULL, or the caller's event behind its writes
     * (ring_ctx_allreduce_registered); this rank's own. */
    ring_event_t *ready;
    /* A registered call's: NULL, or the caller's event that ring records
     * once the result is in place, and (freed NULL) the buffer is the
     * caller's again (ring_ctx_allreduce_registered). */
    ring_event_t *done;
    /* A registered call out of place's: NULL, or the caller's event that
     * ring records once the buffer is the caller's again
     * (ring_ctx_allreduce_registered_to). */
    ring_event_t *freed;
} ring__coll_t;

/* Opens a call: c comes with func, kind, ctx, count, dtype, op, root and
 * algo set (op RING__NO_OP where none is taken; root and algo 0 where
 * none), local with the status of the caller's own checks (their message
 * already logged). Checks MPI is up, the communicator, dtype, op, a root
 * within the ranks (RING__BROADCAST), both buffers when count > 0 and the
 * memory kind of each, the tuning variables; then, under HVD_RING_CHECK,
 * that every rank made the same call (ring__agree: over ctx->node, then
 * ctx->cross, for the hierarchical kinds). Fills comm (ctx's), rank, size,
 * esize, mem and tuning, and algo (AUTO becomes HVD_ALLREDUCE_ALGO's).
 * RING_OK, RING_ERR_STATE (MPI down), RING_ERR_ARG with a message naming
 * the bad argument, RING_ERR_MISMATCH, RING_ERR_MPI. */
int ring__begin(ring__coll_t *c, const void *sendbuf, const void *recvbuf,
                int local);

/* A call on device buffers that the host algorithm cannot run on as they
 * are (MPI does not read device memory): staged (ring/staged.c). */
static inline int ring__staging(const ring__coll_t *c)
{
    return c->dev && c->mem == &ring__mem_host;
}

/* The status a call returns: its own, or a failure of the device
 * operations it ran through ring__mem_device. */
static inline int ring__end(const ring__coll_t *c, int status)
{
    int device = c->mem == &ring__mem_device ? ring__mem_device_status()
                                               : RING_OK;
    return status != RING_OK ? status : device;
}

/* ---- HVD_RING_CHECK: the ranks compare each call (ring/check.c) ---- */
/* Called by every rank of comm once it has checked its own arguments
 * (`local`: RING_OK or the error it found). Without HVD_RING_CHECK=1, and
 * when comm cannot be used (local is RING_ERR_STATE, or comm is NULL),
 * returns local. Else the ranks compare their calls and the tuning
 * variables: a rank whose own check failed gets local back; the others
 * get RING_ERR_MISMATCH, with a message naming what differs, when a rank
 * refused its arguments or any field differs; else RING_OK. RING_ERR_MPI
 * when the comparison itself fails. */
int ring__agree(MPI_Comm comm, const ring__coll_t *call, int local);

/* ---- block layout ---- */
/* `count` elements cut into `nblocks` blocks as evenly as possible: the first
 * count % nblocks blocks have one element more. */
static inline size_t ring__block_count(size_t count, int nblocks, int idx)
{
    size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks;
    return q + ((size_t)idx < r);
}

static inline size_t ring__block_offset(size_t count, int nblocks, int idx)
{
    size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks;
    size_t i = (size_t)idx;
    return q * i + (i < r ? i : r);
}

/* (a mod n) for a possibly negative a. */
static inline int ring__mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* ---- the ring on a layout of size(comm) blocks ---- */
/* With nreduce = N-1 and nsteps = N-1: reduce-scatter, buf's block `rank`
 * receives the reduction of that block of every rank's src (the other blocks
 * of buf are overwritten with partial results). With nreduce = N-1 and
 * nsteps = 2(N-1): allreduce. With nreduce = 0 (src unused): allgather of
 * block `rank` of buf, in place. src may be buf. c gives the dtype, the
 * memory kind and the tuning; comm and op may be a stage's own. */
int ring__ring_blocks(const ring__coll_t *c, const void *src, void *buf,
                      size_t count, ring_op_t op, int nreduce, int nsteps,
                      MPI_Comm comm);

/* ---- where a call's data lies ---- */
/* One buffer each way, or (a fused allreduce) pieces laid end to end: the
 * call's element i is in the piece whose range holds i. A piece with no
 * sendbuf gives zeros, one with no recvbuf drops its result. */
typedef struct {
    const void *sendbuf;
    void *recvbuf;
    const ring_piece_t *pieces; /* NULL: sendbuf and recvbuf */
    size_t npieces;
    const size_t *starts;       /* (npieces + 1) first byte of each piece */
} ring__io_t;

/* The longest run of io from byte `at` (at most nbytes; at < the
 * whole's bytes) that lies contiguous in memory on one side, the input
 * (out 0) or the output (out 1): its length, and in *data where it lies
 * (NULL for pieces without that buffer: zeros in, dropped out). */
size_t ring__io_span(const ring__io_t *io, size_t at, size_t nbytes, int out,
                     char **data);
/* Copies bytes [at, at + nbytes) of io's input to dst with copy (a piece
 * without sendbuf: zeros). */
void ring__io_read(const ring__io_t *io, size_t at, char *dst, size_t nbytes,
                   void (*copy)(void *, const void *, size_t));
/* Copies nbytes from src to bytes [at, at + nbytes) of io's output with
 * copy (a piece without recvbuf: dropped). */
void ring__io_write(const ring__io_t *io, size_t at, const char *src,
                    size_t nbytes, void (*copy)(void *, const void *, size_t));

/* ---- allreduce algorithms, one signature (ring/allreduce.c's table) ---- */
typedef int ring__allreduce_fn(const ring__coll_t *c, const void *sendbuf,
                               void *recvbuf);
ring__allreduce_fn ring__allreduce_rdb, ring__allreduce_rhd; /* recursive.c */
ring__allreduce_fn ring__allreduce_hier;                     /* hier.c */

/* Where MPI keeps the node's shared windows (ring/shm_room.c): /dev/shm,
 * or Open MPI's osc_sm_backing_directory when set. */
const char *ring__shm_dir(void);
/* Collective over comm (one node): the bytes free there as comm's rank 0
 * sees them, on every rank; UINT64_MAX where it cannot tell. */
int ring__shm_room(MPI_Comm comm, uint64_t *room);
/* What a window with a slab of slab_bytes for each of nranks takes there
 * (ring/shm.c's layout, and room for MPI's own headers). */
uint64_t ring__shm_need(int nranks, size_t slab_bytes);
/* A context's slab where room is free: slab, or halved until the window
 * fits, down to RING_CTX_SLAB_MIN; 0 where not even that fits. */
size_t ring__shm_fit(int nranks, size_t slab, uint64_t room);

/* The shared window (shm.c): within one node, or as each node's stage
 * when c->ctx->cross is set; apply (or NULL) as ring_shm_allreduce_apply.
 * RING_ERR_ARG, with a message, when a buffer overlaps the slab other
 * than by starting at it. */
int ring__shm_run(const ring__coll_t *c, const ring__io_t *io,
                  const ring_apply_t *apply);

/* ---- device buffers through pinned host staging (ring/staged.c) ---- */
/* A call on device memory, as the host path would run it. The data is
 * nblocks blocks of `whole` elements laid out as ring__block_offset
 * says; a chunk takes the same slice of every block, so each element
 * stays in its block (and with its owner in the ring): results are
 * bitwise the host path's. run does the host collective on one chunk of
 * count elements in place in stage, with c->hooks set when `hooked`. */
typedef struct {
    int nblocks;
    size_t whole;
    /* Where the blocks come from and go to (device or host memory):
     * every block of in (in_block < 0), or block in_block alone, at in;
     * likewise out. NULL: none (a broadcast's non-roots send nothing). */
    const char *in;
    int in_block;
    char *out;
    int out_block;
    int (*run)(const ring__coll_t *c, char *stage, size_t count, void *arg);
    void *arg;
    int hooked;
} ring__staged_t;

/* Runs s for the opened call c (c->dev set) through ctx's staging. */
int ring__staged(const ring__coll_t *c, const ring__staged_t *s);
/* Frees a context's staging (NULL: no-op). */
void ring__stage_free(ring__stage_t **stage);

/* ---- device buffers within a node through CUDA IPC (ring/ipc.c) ---- */
/* Collective over ctx: within each node (ctx->node when hierarchical,
 * else all of ctx's ranks) every rank's device slab of two halves of
 * half_bytes, opened by the node's others, and across nodes a context
 * over ctx->cross. *ipc is NULL on every rank when any rank could not
 * export or open, or has no device (dev NULL: it takes part all the
 * same), logged at rank 0, and quietly when no rank has one (the caller
 * then stages). RING_ERR_MPI when the exchange itself fails, NOMEM or ARG
 * where the counters' window or the context across nodes cannot be made;
 * RING_ERR_STATE, nothing made and ctx->ipc_tried cleared, when a rank
 * came having refused the call that makes it (refused; logged by the
 * others). */
int ring__ipc_create(ring_ctx_t *ctx, const ring_dev_t *dev,
                     size_t half_bytes, int refused, ring__ipc_t **ipc);
/* ctx's window, made by its first device allreduce or registration
 * (collective then, over ctx->comm: ranks on one node); *ipc NULL when
 * it could not be made (logged once, by rank 0). A rank that refused
 * that call comes all the same, refused set (ring__allreduce): every
 * rank then fails with RING_ERR_STATE, and the next call tries again. */
int ring__ipc_of(ring_ctx_t *ctx, const ring_dev_t *dev,
                 const ring__tuning_t *tuning, int refused,
                 ring__ipc_t **ipc);
/* Collective over ipc's node: buf (nbytes; the start of a device
 * allocation) is every rank's registered buffer, opened by the others;
 * an earlier one is closed. None when any rank passes NULL or cannot
 * export or open. */
int ring__ipc_register(ring__ipc_t *ipc, void *buf, size_t nbytes);
/* Whether ipc holds registered buffers of at least nbytes everywhere. */
int ring__ipc_registered(const ring__ipc_t *ipc, size_t nbytes);
/* The opened call c on the registered buffers, read where they lie
 * (ring__ipc_allreduce's result, without the copy in), into dst: this
 * rank's buffer (in place), or device memory of its own. */
int ring__ipc_allreduce_registered(ring__ipc_t *ipc, const ring__coll_t *c,
                                   void *dst);
/* This rank gives up (ring_ctx_give_up): its failed counter set. */
void ring__ipc_give_up(ring__ipc_t *ipc);
/* Collective: frees ipc (NULL: no-op). */
void ring__ipc_free(ring__ipc_t **ipc);
/* The allreduce of the opened call c (device buffers, every rank of ipc's
 * node, at most RING_DEV_MAX_INPUTS of them): bitwise the shared window's
 * result. */
int ring__ipc_allreduce(ring__ipc_t *ipc, const ring__coll_t *c,
                        const void *sendbuf, void *recvbuf);

/* ---- host reduction (reduce_host.c): ring__mem_host's arithmetic ---- */
/* Whether the CPU has AVX and F16C, asked once (x86 only: callers test
 * __x86_64__ first). */
int ring__have_f16c(void);
void ring__reduce_host(void *dst, const void *a, const void *b, size_t count,
                       ring_dtype_t dtype, ring_op_t op, int divisor);
void ring__reduce_host_n(void *dst, const void *const *in, int n, size_t count,
                         ring_dtype_t dtype, ring_op_t op, int divisor);
void ring__divide_host(void *buf, size_t count, ring_dtype_t dtype,
                       int divisor);
/* Whether convert takes the pair: float32 to or from float16 or
 * bfloat16. */
int ring__convert_ok(ring_dtype_t dst_dtype, ring_dtype_t src_dtype);
/* The device tables' convert on the host (reduce_op.h's elements). */
void ring__convert_host(void *dst, ring_dtype_t dst_dtype, const void *src,
                        ring_dtype_t src_dtype, size_t count);

#if HVD_HAVE_CUDA
/* ---- CUDA kernel launchers (reduce_cuda.cu), behind ring__dev_cuda ---- */
/* Each queues one kernel (copy_batch: one per RING__COPY_BATCH_LAUNCH
 * copies) on `stream`, a cudaStream_t (void * keeps CUDA's headers out of
 * host-only files; NULL is the legacy default stream), and returns
 * RING_OK, RING_ERR_ARG (bad dtype, n out of range), or RING_ERR_CUDA
 * after logging a failed launch. The arithmetic is the host's, bit for
 * bit apart from NaN payloads: ring__reduce_host, ring__reduce_host_n
 * (n from 1 to RING_DEV_MAX_INPUTS) and ring__divide_host. */
int ring__reduce_cuda(void *dst, const void *a, const void *b, size_t count,
                      ring_dtype_t dtype, ring_op_t op, int divisor,
                      void *stream);
int ring__reduce_n_cuda(void *dst, const void *const *in, int n,
                        size_t count, ring_dtype_t dtype, ring_op_t op,
                        int divisor, void *stream);
int ring__divide_cuda(void *buf, size_t count, ring_dtype_t dtype,
                      int divisor, void *stream);
int ring__convert_cuda(void *dst, ring_dtype_t dst_dtype, const void *src,
                       ring_dtype_t src_dtype, size_t count, void *stream);
/* copies[0..n) as ring/copy_batch.h's kernel; the array is read before
 * the call returns. */
int ring__copy_batch_cuda(const ring_copy_t *copies, size_t n,
                          void *stream);
#endif

/* ---- the segmented ring pipeline ---- */
/* A ring collective from one rank's point of view: it sends one block of its
 * own to the right neighbour, then receives blocks from the left one, step
 * by step, and forwards what it received (or reduced) in step s to the
 * right in step s + 1. Blocks travel in segments, with receives posted
 * `RING_PIPELINE_DEPTH` segments ahead and each send posted the moment its
 * segment is ready, so transfers overlap reductions and a segment is sent on
 * while the next ones are still arriving.
 *
 *   ring allreduce:      send block r-1, receive r-2, r-3, ... for 2(N-1)
 *                        steps; the first N-1 reduce (reduce-scatter),
 *                        the last N-1 only copy (allgather). One phase, so
 *                        the allgather starts with the first final segment;
 *   ring reduce-scatter: the first N-1 steps of that;
 *   ring allgather:      send own block r, receive r-1, r-2, ... r+1;
 *   chain broadcast:     one block; the root only sends, the last rank
 *                        only receives, the others receive and forward.
 *
 * In the first `nreduce` steps a segment is received into scratch and
 * buf[block] = src[block] (op) scratch is what is forwarded; the last of
 * them divides by `divisor` (AVERAGE). Later steps receive straight into buf
 * and forward from there. The own block is sent from src, or from buf when
 * src is NULL; buf may be src (in place).
 *
 * Deadlock freedom: a rank waits only for a receive whose matching send was
 * posted by its left neighbour on processing an earlier receive, or at start;
 * sends never wait for a free slot (partial results live in buf, not in a
 * bounded scratch), so no rank waits on its right neighbour's progress.
 */
typedef struct {
    MPI_Comm comm;
    int left, right;     /* neighbours; only the used direction matters */
    size_t count;        /* elements in the whole buffer */
    int nblocks;         /* count is cut into this many blocks */
    ring_dtype_t dtype;
    ring_op_t op;        /* reducing steps only */
    int divisor;         /* AVERAGE's division in the last reducing step */
    const char *src;     /* own contribution (full layout), or NULL */
    char *buf;           /* full layout: results, received and sent data */
    int send_block;      /* own block sent first; -1 for none */
    int recv_block;      /* block received in step 0; step s: recv_block-s */
    int nrecv_steps;
    int nreduce;         /* the first nreduce receive steps reduce */
    int nforward;        /* the first nforward received blocks are sent on */
    const ring__mem_ops_t *mem; /* src's and buf's kind */
    size_t segment_bytes;
    const ring__hooks_t *hooks; /* a staged call's, or NULL */
} ring__phase_t;

int ring__phase_run(const ring__phase_t *ph);

/* Receives posted ahead. Two, not more: shared-memory MPI transports copy
 * a message when the receiver's progress engine matches it, so every posted
 * receive is copied by the next MPI_Wait; with many posted, segments are
 * copied long before they are reduced and fall out of cache (measured at
 * np=2, 8 MiB: depth 1-2 gives 1.2x MPI_Allreduce, depth 8 0.88x). */
enum { RING_PIPELINE_DEPTH = 2 };

#ifdef __cplusplus
}
#endif

#endif /* RING_RING_INTERNAL_H */
