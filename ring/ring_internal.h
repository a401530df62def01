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

/* Argument checks shared by every collective; RING_OK or RING_ERR_ARG with a
 * message on stderr that names the bad argument. */
int ring__check_args(const char *func, const void *sendbuf, const void *recvbuf,
                     size_t count, ring_dtype_t dtype, ring_op_t op,
                     MPI_Comm comm);

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

/* ---- the two phases of the ring, on a layout of size(comm) blocks ---- */
/* buf's block `rank` receives the reduction of that block of every rank's
 * src (the other blocks of buf are overwritten with partial results); src may
 * be buf. */
int ring__reduce_scatter_blocks(const void *src, void *buf, size_t count,
                                ring_dtype_t dtype, ring_op_t op,
                                MPI_Comm comm);
/* Block `rank` of buf goes to every rank, in place. */
int ring__allgather_blocks(void *buf, size_t count, ring_dtype_t dtype,
                           MPI_Comm comm);

/* ---- host reduction ---- */
/* dst[i] = a[i] (op) b[i] for i < count; dst may alias a or b. With
 * divisor > 1 (AVERAGE's last step) the result is divided by it before it is
 * rounded to dtype. op must be valid for dtype (checked by the caller). */
void ring__reduce_host(void *dst, const void *a, const void *b, size_t count,
                       ring_dtype_t dtype, ring_op_t op, int divisor);

#if HVD_HAVE_CUDA
/* The same on device memory, as a kernel queued on `stream` (a
 * cudaStream_t; void * keeps CUDA's headers out of host-only files).
 * RING_ERR_CUDA when the launch fails. */
int ring__reduce_cuda(void *dst, const void *a, const void *b, size_t count,
                      ring_dtype_t dtype, ring_op_t op, int divisor,
                      void *stream);
#endif

/* ---- the segmented ring pipeline ---- */
/* One phase of a ring collective, from this rank's point of view: it sends
 * one block of its own to the right neighbour, then receives blocks from the
 * left one, step by step, and forwards each received block (or its partial
 * reduction) to the right in the next step. Blocks travel in segments with
 * receives posted `RING_PIPELINE_DEPTH` segments ahead and sends posted as
 * soon as their data is ready, so transfers overlap the reduction.
 *
 *   ring reduce-scatter: send own block r-1, receive r-2, r-3, ... r;
 *   ring allgather:      send own block r,   receive r-1, r-2, ... r+1;
 *   chain broadcast:     one block; the root only sends, the last rank
 *                        only receives, the others receive and forward.
 *
 * Without src, segments are received straight into buf and forwarded from
 * there. With src (reduce-scatter), a segment is received into scratch and
 * buf[block] = src[block] (op) scratch is what is forwarded; in the last
 * step the result is divided by `divisor` (AVERAGE). buf may be src.
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
    ring_op_t op;        /* with src only */
    int divisor;         /* with src only: AVERAGE's division, else 1 */
    const char *src;     /* own contribution (full layout), or NULL */
    char *buf;           /* full layout: results, received and sent data */
    int send_block;      /* own block sent first; -1 for none */
    int recv_block;      /* block received in step 0; step s: recv_block-s */
    int nrecv_steps;
    int nforward;        /* the first nforward received blocks are sent on */
} ring__phase_t;

int ring__phase_run(const ring__phase_t *ph);

enum { RING_PIPELINE_DEPTH = 4 }; /* receives posted ahead */

/* Tuning read once from the environment:
 *   HVD_ALLREDUCE_ALGO       auto | ring | rdb          (RING_ALGO_AUTO)
 *   HVD_RING_SEGMENT_BYTES   pipeline segment size      (see status.c)
 *   HVD_RING_SMALL_BYTES     below this, latency algorithms
 * A bad value fails every collective with RING_ERR_ARG and a message that
 * names the variable, rather than silently running something else. */
typedef struct {
    ring_algo_t algo;
    size_t segment_bytes;
    size_t small_bytes;
} ring__tuning_t;

int ring__tuning(const ring__tuning_t **tuning);

/* Marks collectives that take no operator in ring__check_args. */
#define RING__NO_OP ((ring_op_t)-1)

#ifdef __cplusplus
}
#endif

#endif /* RING_RING_INTERNAL_H */
