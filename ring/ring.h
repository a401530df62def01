/* ring/ring.h: collectives on raw buffers over an MPI communicator.
 *
 * This is the bottom layer of hvd. It knows nothing of tensor names, threads
 * or the engine: every call is blocking, collective over `comm`, and built on
 * MPI point-to-point only (MPI's own collectives are the test oracle and the
 * benchmark peer, never the implementation).
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

/* 1 when p is CUDA device memory (a CUDA build with a GPU visible), else
 * 0. The collectives take host memory for now and refuse device buffers
 * (RING_ERR_ARG, with a message). */
int ring_is_device_memory(const void *p);

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
 * error), a message names what differs, and no data moves. */
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

/* ---- allreduce through shared memory, for the ranks of one node ---- */
/* The ranks share one MPI-3 window in which each owns a slab; a rank reduces
 * its block by reading the other ranks' slabs directly (ring/shm.c). */
typedef struct ring_shm ring_shm_t;

/* Collective over comm: makes the window, with a slab of slab_bytes
 * (rounded up to a page) for each rank. RING_ERR_ARG, on every rank, when
 * comm's ranks are not all on one node. */
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
typedef struct {
    void (*fn)(void *ctx, size_t first, void *data, size_t n);
    void *ctx;
} ring_apply_t;

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
