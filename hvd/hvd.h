/* hvd/hvd.h: the framework's public API: init, topology, named asynchronous
 * collectives run by a background engine, and their statuses.
 *
 * Every rank makes the same collectives (matched by name, or by order when
 * the name is NULL); a background thread negotiates which are ready on all
 * ranks, fuses small allreduces, reduces them with ring/ and completes the
 * handles. Buffers must stay valid and untouched until the handle is done.
 * Counts are in elements of dtype. All calls return a status: HVD_OK (0) or
 * a negative HVD_ERR_*; hvd_strerror() gives its text, and the engine logs
 * the details (what differed, on which ranks) on stderr.
 */
#ifndef HVD_HVD_H
#define HVD_HVD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The same numbers as ring's RING_OK / RING_ERR_*, plus the engine's own. */
#define HVD_STATUS_MAP(X)                                                      \
    X(OK, 0, "success")                                                        \
    X(ERR_ARG, -1, "invalid argument")                                         \
    X(ERR_MISMATCH, -2, "ranks disagree on a collective of the same name")     \
    X(ERR_STATE, -3, "invalid state (not initialised, shut down, or the "      \
                     "name is already in flight)")                             \
    X(ERR_MPI, -4, "MPI call failed")                                          \
    X(ERR_CUDA, -5, "CUDA call failed")                                        \
    X(ERR_NOMEM, -6, "out of memory")                                          \
    X(ERR_STALL, -7, "stalled: some ranks never made a collective (see "      \
                     "HVD_STALL_SHUTDOWN_TIME)")

typedef enum {
#define HVD_STATUS_ENUM(name, value, text) HVD_##name = (value),
    HVD_STATUS_MAP(HVD_STATUS_ENUM)
#undef HVD_STATUS_ENUM
} hvd_status_t;

typedef enum {
    HVD_FLOAT32,
    HVD_FLOAT64,
    HVD_FLOAT16,
    HVD_BFLOAT16,
    HVD_INT32,
    HVD_INT64,
    HVD_UINT8
} hvd_dtype_t;

typedef enum { HVD_SUM, HVD_AVERAGE, HVD_MIN, HVD_MAX, HVD_PRODUCT } hvd_op_t;

typedef struct hvd_handle *hvd_handle_t;

/* A stream of ring_dev()'s (ring_stream_t in ring/ring.h: a CUDA stream,
 * or the emulated device's), for the stream variants below. */
struct ring_stream;

/* Starts MPI with thread support (MPI_Init_thread) unless the program has
 * already done so, in which case finalising is left to it; reads the HVD_*
 * environment variables (a bad value fails with HVD_ERR_ARG naming it, on
 * every rank: the ranks agree once MPI is up); starts the engine. A
 * failure leaves MPI running, so that hvd_init may be called again; a
 * program that exits then may see its launcher say it did not finalise.
 * argc/argv may be NULL. */
int hvd_init(int *argc, char ***argv);
/* Finishes outstanding work, stops the engine, releases everything but
 * the handles of that work, which the caller still frees with hvd_wait
 * (it returns their status at once, also after shutdown). As Horovod's:
 * once this rank's own work is done, the other ranks' engines stop with
 * it; what they still wait for fails with HVD_ERR_STATE ("another rank
 * called hvd_shutdown ..."), and so do their later calls, instead of
 * waiting for a rank that has gone (e.g. one that left on an error). */
int hvd_shutdown(void);

/* 1 between hvd_init and hvd_shutdown, else 0 (never an error). */
int hvd_is_initialized(void);

/* Topology; HVD_ERR_STATE before init or after shutdown. hvd_rank() is
 * the rank in MPI_COMM_WORLD, which broadcast roots and allgather's layout
 * use, even where the ring runs through the ranks in another order (node
 * by node: hvd/topology.c). A node is the ranks that share memory; nodes
 * are numbered by their lowest rank, so all ranks agree on the cross rank
 * and size, also when nodes hold different numbers of ranks. */
int hvd_rank(void), hvd_size(void);
int hvd_local_rank(void), hvd_local_size(void); /* ranks on this node */
int hvd_cross_rank(void), hvd_cross_size(void); /* index/number of nodes */

/* Blocking and asynchronous collectives. name may be NULL (then calls are
 * matched by order: the n-th unnamed call of a kind on every rank); names
 * are at most 199 bytes and may not start with "__" (hvd's own). A name
 * may be in flight once per rank at a time (else HVD_ERR_STATE, and no
 * handle). sendbuf == recvbuf is in place.
 *
 * Buffers are host memory or device memory of the rank's device (the one
 * hvd_init selected: ring_dev()->device), both of one request of one kind
 * (else HVD_ERR_ARG); every rank must give a name's tensor in the same
 * kind (else HVD_ERR_MISMATCH on every rank). Memory whose kind CUDA
 * cannot tell (its context broken by an earlier error) and the host
 * cannot read is refused with HVD_ERR_CUDA. Device tensors, without a
 * stream: the caller must have finished the work that writes the input
 * (e.g. synchronised its stream) before submitting, and must not touch
 * the buffers until the handle is done; hvd_wait returns once the result
 * is in device memory. With a stream: the _stream variants below. */
int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                  hvd_dtype_t dtype, hvd_op_t op, const char *name);
int hvd_allreduce_async(const void *sendbuf, void *recvbuf, size_t count,
                        hvd_dtype_t dtype, hvd_op_t op, const char *name,
                        hvd_handle_t *handle);
/* The stream variants, for device tensors (HVD_ERR_ARG for host memory or
 * a NULL stream): the input is what `stream` will have written once the
 * work queued on it so far is done; hvd records an event on it now, and
 * its engine waits for that event before it reads the tensor, so the
 * caller need not synchronise. Complete with hvd_wait_stream (or
 * hvd_wait). An empty tensor may give NULL buffers (count 0): it counts
 * as device memory here. */
int hvd_allreduce_async_stream(const void *sendbuf, void *recvbuf,
                               size_t count, hvd_dtype_t dtype, hvd_op_t op,
                               const char *name, struct ring_stream *stream,
                               hvd_handle_t *handle);
int hvd_broadcast(void *buf, size_t count, hvd_dtype_t dtype, int root,
                  const char *name);
int hvd_broadcast_async(void *buf, size_t count, hvd_dtype_t dtype, int root,
                        const char *name, hvd_handle_t *handle);
int hvd_broadcast_async_stream(void *buf, size_t count, hvd_dtype_t dtype,
                               int root, const char *name,
                               struct ring_stream *stream,
                               hvd_handle_t *handle);
/* Every rank gives count elements; recvbuf receives size() * count,
 * rank r's at r * count. */
int hvd_allgather(const void *sendbuf, size_t count, void *recvbuf,
                  hvd_dtype_t dtype, const char *name);

/* The collective's status, once its result is in memory (device memory
 * too); frees handle. */
int hvd_wait(hvd_handle_t handle);
/* For a handle of a stream variant: waits for the engine's part of the
 * collective (a host call), then makes `stream` wait for the result, which
 * the engine may have left queued on its own stream: work queued on
 * stream after this call sees it, and the host waits for neither. The
 * status; frees the handle. HVD_ERR_ARG (handle not freed: hvd_wait it)
 * for a NULL stream or a handle from another variant. */
int hvd_wait_stream(hvd_handle_t handle, struct ring_stream *stream);
/* 1 done, 0 not yet, <0 done with that error; hvd_wait still frees it.
 * A stream variant's result may still be queued when this says done:
 * read it after hvd_wait or hvd_wait_stream. */
int hvd_poll(hvd_handle_t handle);
int hvd_barrier(void);
/* This rank has no more batches: it takes part in the others' collectives
 * with zeros until all have joined, then returns. */
int hvd_join(void);
/* The rank that joined last in the latest hvd_join to return (the lowest
 * of those that joined in the same engine cycle), as Horovod's join()
 * returns it; -1 before any; HVD_ERR_STATE before init. */
int hvd_last_joined(void);
const char *hvd_strerror(int status);
/* The message of the last error hvd reported to the calling thread: of a
 * call it refused (what hvd_strerror cannot say: which argument), or of a
 * collective that failed, from the hvd_wait that returned it (e.g. the
 * ranks' differing counts); "" when there was none. Kept until the
 * thread's next error; for bindings that raise it as an exception. */
const char *hvd_last_error(void);

/* ---- the DistributedOptimizer ---- */
/* Wraps an optimizer it knows only through this interface (hvd does not
 * depend on models/): step applies the update to the parameters from the
 * gradients, which hvd has averaged across ranks by then. */
typedef struct {
    int (*step)(void *ctx); /* 0 on success */
    void *ctx;
    /* For a sharded step only (shard_params), else may be NULL: elements
     * [first, first + n) of the parameters, counted over all tensors in
     * order, are to be stepped; grad_to_param holds their averaged
     * gradients and receives their new values (the parameters themselves
     * must not be written). Called on hvd's thread while step waits;
     * 0 on success, else step returns the status on this rank, and what
     * the other ranks received for that range is undefined. */
    int (*update)(void *ctx, size_t first, float *grad_to_param, size_t n);
} hvd_optimizer_t;

typedef struct {
    int backward_passes_per_step; /* local accumulation before reducing: 1 */
    int fp16_compression;         /* gradients travel as float16: 0 */
    hvd_op_t op;                  /* HVD_AVERAGE (default) or HVD_SUM */
    /* NULL, or a sharded step (ZeRO stage 1, as PyTorch's
     * ZeroRedundancyOptimizer): the parameters, one range laid out like
     * the gradients, which must then lie back to back in one range too.
     * step reduces all gradients in one call in which each rank updates
     * only its share of the parameters (through inner.update) and
     * receives the others' new values: less work per rank, the same
     * parameters (bitwise within one node, where sums run in rank order;
     * elsewhere the ring's sums may round as a different fusion of the
     * gradients would). Nothing starts from the backward hook, and no
     * rank may have joined. Each rank's optimizer state is then current
     * only for its share: hvd_dist_opt_sync_state before saving it. */
    float *shard_params;
    /* NULL, or for device gradients the stream that writes them (a
     * model's compute stream): the backward hook may then report a
     * gradient as soon as its work is queued there, without waiting for
     * it (its allreduce waits for an event on stream: the _stream
     * variants), and step leaves the reduced gradients ordered on stream
     * instead of waiting for them: inner.step must queue its work on
     * stream. HVD_ERR_ARG with host gradients. */
    struct ring_stream *stream;
} hvd_dist_opt_options_t;

typedef struct hvd_dist_opt hvd_dist_opt_t;

/* ntensors float32 gradient tensors, grads[i] of counts[i] elements, named
 * names[i] (the allreduce names: the same on every rank). options may be
 * NULL for the defaults. The arrays are copied; the gradient memory must
 * outlive the optimizer. */
int hvd_dist_opt_create(hvd_dist_opt_t **opt, hvd_optimizer_t inner,
                        size_t ntensors, const char *const *names,
                        float *const *grads, const size_t *counts,
                        const hvd_dist_opt_options_t *options);
/* From the backward hook: tensor i's gradient is final for this pass; on
 * the last of backward_passes_per_step passes its allreduce starts. */
int hvd_dist_opt_grad_ready(hvd_dist_opt_t *opt, size_t tensor_idx);
/* Waits for every outstanding allreduce, then calls inner.step; before the
 * last pass of a step it only returns (the gradients keep accumulating,
 * and the caller must not zero them). With backward_passes_per_step k, the
 * reduced gradient is divided by k as well, so it is the mean over all
 * k x size micro-batches. */
int hvd_dist_opt_step(hvd_dist_opt_t *opt);
void hvd_dist_opt_free(hvd_dist_opt_t **opt);
/* Collective. With shard_params, makes every rank's copy of count floats
 * of per-parameter optimizer state (e.g. the momentum buffer; count is the
 * parameters' number) whole: each element from the rank that last updated
 * it. Without shard_params every rank's copy is whole already, and this
 * returns at once. */
int hvd_dist_opt_sync_state(hvd_dist_opt_t *opt, float *state, size_t count);

/* Root's count floats to every rank (parameters before the first step;
 * optimizer state, e.g. the momentum buffer, on resume). */
int hvd_broadcast_parameters(float *params, size_t count, int root);
int hvd_broadcast_optimizer_state(float *state, size_t count, int root);

#ifdef __cplusplus
}
#endif

#endif /* HVD_HVD_H */
