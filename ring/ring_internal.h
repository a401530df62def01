/* ring/ring_internal.h: what the files of ring/ share and nobody else sees:
 * the MPI check macro, block layouts, the host reduction kernel and the
 * segmented pipeline that moves blocks around the ring.
 */
#ifndef RING_RING_INTERNAL_H
#define RING_RING_INTERNAL_H

#include <stdint.h>
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

/* Same shape for calls of ours that return a status. */
#define RING_CHECK(call)                                                       \
    do {                                                                       \
        status = (call);                                                       \
        if (status != RING_OK) goto out;                                       \
    } while (0)

/* One line on stderr, prefixed with the world rank. */
void ring__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ring__log_mpi_error(int rc, const char *call, const char *file, int line);

/* RING_OK while MPI is up; else RING_ERR_STATE with a message naming func
 * and whether MPI is not yet initialized or already finalized. */
int ring__check_mpi_up(const char *func);
/* Argument checks shared by every collective, MPI being up first; RING_OK,
 * RING_ERR_STATE (above) or RING_ERR_ARG with a message on stderr that
 * names the bad argument. */
int ring__check_args(const char *func, const void *sendbuf, const void *recvbuf,
                     size_t count, ring_dtype_t dtype, ring_op_t op,
                     MPI_Comm comm);

/* ---- HVD_RING_CHECK: the ranks compare each call (ring/check.c) ---- */
typedef enum {
    RING__ALLREDUCE,
    RING__ALLREDUCE_HIER,
    RING__REDUCE_SCATTER,
    RING__ALLGATHER,
    RING__BROADCAST,
    RING__SHM_ALLREDUCE,
    RING__SHM_ALLREDUCE_HIER,
    RING__SHM_ALLREDUCE_APPLY,
    RING__KIND_COUNT
} ring__kind_t;

/* The public function's name ("ring_allreduce", ...); NULL when unknown. */
const char *ring__kind_name(ring__kind_t kind);

/* What every rank of a collective must pass alike; op is RING__NO_OP,
 * root and algo 0 where the collective takes none. */
typedef struct {
    ring__kind_t kind;
    size_t count;
    ring_dtype_t dtype;
    ring_op_t op;
    int root;
    ring_algo_t algo;
} ring__call_t;

/* Called by every rank of comm once it has checked its own arguments
 * (`local`: RING_OK or the error it found). Without HVD_RING_CHECK=1, and
 * when comm cannot be used (local is RING_ERR_STATE, or comm is NULL),
 * returns local. Else the ranks compare their calls and the tuning
 * variables: a rank whose own check failed gets local back; the others
 * get RING_ERR_MISMATCH, with a message naming what differs, when a rank
 * refused its arguments or any field differs; else RING_OK. RING_ERR_MPI
 * when the comparison itself fails. */
int ring__agree(MPI_Comm comm, const ring__call_t *call, int local);
/* The same over the node, then over cross with the node's verdict, so that
 * a failure on one node fails the other nodes' calls too. */
int ring__agree_hier(MPI_Comm node, MPI_Comm cross, const ring__call_t *call,
                     int local);

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
 * block `rank` of buf, in place. src may be buf. */
int ring__ring_blocks(const void *src, void *buf, size_t count,
                      ring_dtype_t dtype, ring_op_t op, int nreduce,
                      int nsteps, MPI_Comm comm);

/* ---- allreduce algorithms, one signature (ring/allreduce.c's table) ---- */
typedef int ring__allreduce_fn(const void *sendbuf, void *recvbuf,
                               size_t count, ring_dtype_t dtype, ring_op_t op,
                               MPI_Comm comm, int rank, int size);
ring__allreduce_fn ring__allreduce_rdb, ring__allreduce_rhd; /* recursive.c */

/* ---- host reduction ---- */
/* Whether the CPU has AVX and F16C, asked once (x86 only: callers test
 * __x86_64__ first). */
int ring__have_f16c(void);
/* dst[i] = a[i] (op) b[i] for i < count; dst may alias a or b. With
 * divisor > 1 (AVERAGE's last step) the result is divided by it before it is
 * rounded to dtype. op must be valid for dtype (checked by the caller). */
void ring__reduce_host(void *dst, const void *a, const void *b, size_t count,
                       ring_dtype_t dtype, ring_op_t op, int divisor);

/* dst[i] = in[0][i] (op) in[1][i] (op) ... (op) in[n-1][i], n >= 1, read in
 * one pass: half types are widened once and rounded once, at the end. dst
 * may alias any input. divisor as above. */
void ring__reduce_host_n(void *dst, const void *const *in, int n, size_t count,
                         ring_dtype_t dtype, ring_op_t op, int divisor);

/* buf[i] /= divisor in place, in float for half types (rounded once): the
 * hierarchical AVERAGE, summed in every stage, divided once at the end. */
void ring__divide_host(void *buf, size_t count, ring_dtype_t dtype,
                       int divisor);

#if HVD_HAVE_CUDA
/* The same on device memory, as a kernel queued on `stream` (a
 * cudaStream_t; void * keeps CUDA's headers out of host-only files).
 * RING_ERR_CUDA when the launch fails. */
int ring__reduce_cuda(void *dst, const void *a, const void *b, size_t count,
                      ring_dtype_t dtype, ring_op_t op, int divisor,
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
} ring__phase_t;

int ring__phase_run(const ring__phase_t *ph);

/* Receives posted ahead. Two, not more: shared-memory MPI transports copy
 * a message when the receiver's progress engine matches it, so every posted
 * receive is copied by the next MPI_Wait; with many posted, segments are
 * copied long before they are reduced and fall out of cache (measured at
 * np=2, 8 MiB: depth 1-2 gives 1.2x MPI_Allreduce, depth 8 0.88x). */
enum { RING_PIPELINE_DEPTH = 2 };

/* Tuning read once from the environment:
 *   HVD_RING_CHECK           0 | 1: ring__agree's comparison (0)
 *   HVD_ALLREDUCE_ALGO       auto | ring | rdb | rhd    (RING_ALGO_AUTO)
 *   HVD_RING_SEGMENT_BYTES   pipeline segment size      (see status.c)
 *   HVD_RING_SMALL_BYTES     below this, latency algorithms
 *   HVD_SHM_SEGMENT_BYTES    ring_shm_allreduce's segment size
 *   HVD_SHM_STREAM           auto | on | off: how ring_shm_allreduce
 *                            writes what other ranks read (shm.c)
 * A bad value fails every collective with RING_ERR_ARG and a message that
 * names the variable, rather than silently running something else. */
typedef struct {
    int check;
    ring_algo_t algo;
    size_t segment_bytes;
    size_t small_bytes;
    size_t shm_segment_bytes;
    int shm_stream; /* RING__STREAM_* */
} ring__tuning_t;

enum { RING__STREAM_AUTO = -1, RING__STREAM_OFF = 0, RING__STREAM_ON = 1 };

int ring__tuning(const ring__tuning_t **tuning);
/* The same read afresh, not cached: fills *tuning and returns RING_OK, or
 * RING_ERR_ARG after logging the first bad variable (the fields after it
 * are then left as they were). ring__tuning caches its first result;
 * test/fuzz/fuzz_env.c reads many environments in one process. */
int ring__tuning_parse(ring__tuning_t *tuning);

/* Marks collectives that take no operator in ring__check_args. */
#define RING__NO_OP ((ring_op_t)-1)

#ifdef __cplusplus
}
#endif

#endif /* RING_RING_INTERNAL_H */
