/* ring/allreduce.c: the allreduces, the ring algorithm and the one
 * decision table.
 *
 * Function:     ring_ctx_allreduce (and _apply, _pieces), ring_allreduce,
 *               ring_allreduce_algo
 * Accepts:      as MPI_Allreduce (counts in elements); sendbuf == recvbuf
 *               is in place.
 * Returns:      RING_OK, or RING_ERR_ARG before any message moves,
 *               RING_ERR_MISMATCH (HVD_RING_CHECK), RING_ERR_MPI,
 *               RING_ERR_NOMEM.
 * Description:  Six algorithms share one signature in a table: the ring
 *               here, recursive doubling and Rabenseifner
 *               (ring/recursive.c), hierarchical (ring/hier.c), and the
 *               shared window within a node, alone or as each node's
 *               stage (ring/shm.c). ring__allreduce_decide picks one per
 *               call from what the context holds, the size and the rank
 *               count; HVD_ALLREDUCE_ALGO forces one of those over MPI.
 *
 * The ring (bandwidth optimal, 2(N-1)/N of the data sent per rank) is a
 * reduce-scatter followed by an allgather over N blocks. Rank r sends to
 * r+1 and receives from r-1. Three ranks, blocks A B C, rank r's
 * contribution to block X written X_r:
 *
 *   reduce-scatter          rank 0            rank 1            rank 2
 *     step 0 sends          C_0               A_1               B_2
 *     step 0 reduces        B_2+B_0           C_0+C_1           A_1+A_2
 *     step 1 sends          B_2+B_0           C_0+C_1           A_1+A_2
 *     step 1 reduces        A: (A_1+A_2)+A_0  B: (B_2+B_0)+B_1  C: (C_0+C_1)+C_2
 *   allgather               rank r sends block r, then forwards what it got:
 *     after step 1          A B C             A B C             A B C
 *
 * Each block is reduced exactly once, by its owner, and then only copied:
 * that is why every rank ends bitwise identical, whatever the rounding.
 * Both halves run as one pipeline of 2(N-1) steps (ring/pipeline.c): the
 * allgather of a block's first segment starts as soon as it is final.
 * Blocks differ by at most one element when count % N != 0; with count < N
 * some are empty and simply never travel. Inside each step the blocks move
 * in segments, pipelined (ring/pipeline.c).
 *
 * Recursive doubling and Rabenseifner, for small and medium messages, are
 * described in ring/recursive.c.
 *
 * Limitations:  all ranks must pass the same count, dtype, op and algo,
 *               and buffers of one memory kind (hvd's negotiation
 *               guarantees it); a rank whose call is refused does not tell
 *               the others (but where they wait for it in the making of
 *               the node's device window, and for memory its device
 *               cannot tell in the open window: ring__tell_refused).
 *               HVD_RING_CHECK=1 checks both on every call
 *               (ring/check.c).
 */
#include <stdlib.h>
#include "ring/ring_internal.h"

int ring__ring_blocks(const ring__coll_t *c, const void *src, void *buf,
                      size_t count, ring_op_t op, int nreduce, int nsteps,
                      MPI_Comm comm)
{
    int status, rank, size;
    RING_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    /* Reducing, rank r starts with block r-1 so that after N-1 steps it owns
     * block r; only gathering, it starts with the block it owns. */
    int first = nreduce > 0 ? rank - 1 : rank;
    ring__phase_t phase = {
        .comm = comm,
        .left = ring__mod(rank - 1, size),
        .right = ring__mod(rank + 1, size),
        .count = count,
        .nblocks = size,
        .dtype = c->dtype,
        .op = op,
        .divisor = op == RING_AVERAGE ? size : 1,
        .src = src,
        .buf = buf,
        .send_block = ring__mod(first, size),
        .recv_block = ring__mod(first - 1, size),
        .nrecv_steps = nsteps,
        .nreduce = nreduce,
        .nforward = nsteps - 1,
        .mem = c->mem,
        .segment_bytes = c->tuning->segment_bytes,
        .hooks = c->hooks,
    };
    status = ring__phase_run(&phase);
out:
    return status;
}

static int ring__allreduce_ring(const ring__coll_t *c, const void *sendbuf,
                                void *recvbuf)
{
    return ring__ring_blocks(c, sendbuf, recvbuf, c->count, c->op,
                             c->size - 1, 2 * (c->size - 1), c->comm);
}

static int ring__allreduce_shm(const ring__coll_t *c, const void *sendbuf,
                               void *recvbuf)
{
    ring__io_t io = {.sendbuf = sendbuf, .recvbuf = recvbuf};
    return ring__shm_run(c, &io, NULL);
}

/* Within a node, an allreduce too small for the window reduced as the
 * window reduces: every rank's data gathered, then reduced in rank order
 * in one pass (halves rounded once), so bitwise the window's result. A
 * fused group's size decides between them, and fusion groups what is
 * ready, which differs from run to run: recursive doubling's other order
 * (and halves rounded each step) made a tensor's sum depend on it (fp16
 * training at 3 ranks not reproducible; float32 at 4). */
static int ring__allreduce_gather(const ring__coll_t *c, const void *sendbuf,
                                  void *recvbuf)
{
    int status = RING_OK;
    size_t nbytes = c->count * c->esize;
    char *all = c->mem->alloc(nbytes * (size_t)c->size);
    const void **in = malloc((size_t)c->size * sizeof *in);
    if (!all || !in) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    /* nbytes is under the window's threshold: an int. */
    RING_CHECK_MPI(MPI_Allgather(sendbuf, (int)nbytes, MPI_BYTE, all,
                                 (int)nbytes, MPI_BYTE, c->comm));
    for (int r = 0; r < c->size; r++) in[r] = all + (size_t)r * nbytes;
    c->mem->reduce_n(recvbuf, in, c->size, c->count, c->dtype, c->op,
                     c->op == RING_AVERAGE ? c->size : 1);
out:
    if (all) c->mem->release(all);
    free(in);
    return status;
}

/* ---- the algorithms, and the one decision table ---- */

typedef enum {
    RING__AR_RING,
    RING__AR_GATHER,
    RING__AR_RDB,
    RING__AR_RHD,
    RING__AR_HIER,
    RING__AR_SHM,
    RING__AR_SHM_HIER,
    RING__AR_COUNT
} ring__ar_t;

/* A new algorithm is one row. */
static const struct {
    const char *name;
    ring__allreduce_fn *fn;
} ring__allreduce_algos[RING__AR_COUNT] = {
    [RING__AR_RING] = {"ring", ring__allreduce_ring},
    [RING__AR_GATHER] = {"gather", ring__allreduce_gather},
    [RING__AR_RDB] = {"rdb", ring__allreduce_rdb},
    [RING__AR_RHD] = {"rhd", ring__allreduce_rhd},
    [RING__AR_HIER] = {"hier", ring__allreduce_hier},
    [RING__AR_SHM] = {"shm", ring__allreduce_shm},
    [RING__AR_SHM_HIER] = {"shm_hier", ring__allreduce_shm},
};

/* The algorithms over MPI that HVD_ALLREDUCE_ALGO may name. */
static const ring__ar_t ring__forced[RING_ALGO_COUNT] = {
    [RING_ALGO_RING] = RING__AR_RING,
    [RING_ALGO_RDB] = RING__AR_RDB,
    [RING_ALGO_RHD] = RING__AR_RHD,
};

enum {
    /* With RING_INTRANODE_AUTO, smaller allreduces go over MPI: below it
     * recursive doubling was faster (bench/README.md: the window 0.6x of
     * it under 512 B at 2 ranks, 0.2-0.4x under 4 KiB at 4 ranks on 2
     * cores, where waiting ranks must yield their core); from it the
     * window was level or faster at every size. */
    RING__SHM_AUTO_MIN_BYTES = 4 << 10,
    /* Below this on 4, 8, ... ranks, Rabenseifner's fewer steps beat the
     * ring's pipelining (its scratch still fits in cache). */
    RING__RHD_MAX_BYTES = 2 << 20,
};

/* From bench/allreduce_perf runs on 2-core machines (bench/README.md):
 * the window whenever the context has one and the call is not tiny (its
 * cost is one pass over memory), and its order through a gather when it
 * is; across nodes the hierarchical stages;
 * over MPI, recursive doubling while latency dominates, Rabenseifner
 * below 2 MiB on 4, 8, ... ranks, the ring otherwise. c->algo is the
 * caller's (or HVD_ALLREDUCE_ALGO's) choice among the last three. */
static ring__ar_t ring__allreduce_decide(const ring__coll_t *c)
{
    const ring_ctx_t *ctx = c->ctx;
    size_t nbytes = c->count * c->esize;
    int hier = ctx->cross != MPI_COMM_NULL;
    int pow2 = (c->size & (c->size - 1)) == 0;
    if (ctx->shm && (nbytes >= RING__SHM_AUTO_MIN_BYTES ||
                     ctx->intranode == RING_INTRANODE_SHM))
        return hier ? RING__AR_SHM_HIER : RING__AR_SHM;
    if (hier) return RING__AR_HIER;
    /* The recursive algorithms send a message in one MPI call of int
     * bytes. */
    if (nbytes > (size_t)1 << 30) return RING__AR_RING;
    if (c->algo != RING_ALGO_AUTO) return ring__forced[c->algo];
    if (ctx->shm) return RING__AR_GATHER; /* under the window's bytes */
    if (nbytes < c->tuning->small_bytes) return RING__AR_RDB;
    if (pow2 && c->size > 2 && nbytes < RING__RHD_MAX_BYTES)
        return RING__AR_RHD;
    return RING__AR_RING;
}

/* ring__allreduce_decide for an allreduce of count elements of esize
 * bytes through ctx, as its opening would set it up (*c); -1 where ctx
 * or MPI cannot tell. */
static int ring__allreduce_choice(ring_ctx_t *ctx, size_t count,
                                  size_t esize, ring__coll_t *c)
{
    *c = (ring__coll_t){.ctx = ctx, .count = count, .esize = esize};
    if (!ctx || ring__tuning(&c->tuning) != RING_OK ||
        MPI_Comm_size(ctx->comm, &c->size) != MPI_SUCCESS)
        return -1;
    c->algo = c->tuning->algo;
    return (int)ring__allreduce_decide(c);
}

const char *ring_ctx_allreduce_algo(ring_ctx_t *ctx, size_t count,
                                    ring_dtype_t dtype)
{
    ring__coll_t c;
    int ar = ring__allreduce_choice(ctx, count, ring_dtype_size(dtype), &c);
    return ar < 0 ? NULL : ring__allreduce_algos[ar].name;
}

/* An opened allreduce of more than one rank, by the table. */
static int ring__allreduce_run(const ring__coll_t *c, const void *sendbuf,
                               void *recvbuf)
{
    return ring__allreduce_algos[ring__allreduce_decide(c)].fn(c, sendbuf,
                                                               recvbuf);
}

/* A chunk of a staged call, in place in staging, by the algorithm the
 * whole call took. */
static int ring__allreduce_chunk(const ring__coll_t *c, char *stage,
                                 size_t count, void *arg)
{
    ring__coll_t chunk = *c;
    chunk.count = count;
    return ring__allreduce_algos[*(ring__ar_t *)arg].fn(&chunk, stage, stage);
}

/* The host algorithm with a CUDA-aware MPI's device kernels, which read
 * and write device memory only: a call that mixes kinds runs in place on
 * device memory, recvbuf when it is that (sendbuf copied in), else a copy
 * of its own, copied out at the end. The messages are those of every
 * other rank's call. */
static int ring__allreduce_aware(const ring__coll_t *c, ring__ar_t algo,
                                 const void *sendbuf, void *recvbuf)
{
    ring__allreduce_fn *run = ring__allreduce_algos[algo].fn;
    if (!c->host_in && !c->host_out) return run(c, sendbuf, recvbuf);
    size_t nbytes = c->count * c->esize;
    char *own = c->host_out ? c->mem->alloc(nbytes) : recvbuf;
    if (!own) {
        ring__log("%s: %zu bytes of device memory for a host recvbuf: out "
                  "of memory",
                  c->func, nbytes);
        return RING_ERR_NOMEM;
    }
    c->mem->copy(own, sendbuf, nbytes);
    int status = run(c, own, own);
    if (c->host_out) {
        if (status == RING_OK) c->mem->copy(recvbuf, own, nbytes);
        c->mem->release(own);
    }
    return status;
}

/* Whether c is a rank alone's registered call of device memory out of
 * place, whose copy waits for ready on the device (ring__allreduce_done). */
static int ring__alone_copies(const ring__coll_t *c, const void *sendbuf,
                              const void *recvbuf)
{
    return c->size == 1 && c->dev && c->kind == RING__ALLREDUCE_REGISTERED &&
           sendbuf != recvbuf && c->count > 0;
}

/* A registered call's done and freed where the call itself is through
 * (every way but the node's device slabs, ring/ipc.c, which record them
 * behind their work): on the context's work stream, behind ready, which
 * a rank alone does not wait for on the host; behind its copy out of
 * place, queued there. */
static int ring__allreduce_done(const ring__coll_t *c, const void *sendbuf,
                                void *recvbuf)
{
    int status = RING_OK;
    ring_stream_t *work;
    int copy = ring__alone_copies(c, sendbuf, recvbuf);
    if (!c->done && !c->freed && !copy) return RING_OK;
    RING_CHECK(ring__ctx_work(c->ctx, &work));
    if (c->ready) RING_CHECK(ring_dev()->stream_wait(work, c->ready));
    if (copy)
        RING_CHECK(c->dev->copy(recvbuf, sendbuf, c->count * c->esize, work));
    if (c->done) RING_CHECK(ring_dev()->event_record(c->done, work));
    if (c->freed) RING_CHECK(ring_dev()->event_record(c->freed, work));
    if (copy && !c->done) RING_CHECK(ring_dev()->stream_sync(work));
out:
    return status;
}

/* Device buffers: where the host path would take the shared window, the
 * node's device slabs (ring/ipc.c), with the same result; else the
 * algorithm over MPI on them where MPI reads device memory; else the host
 * algorithm over staging. */
static int ring__allreduce_device(const ring__coll_t *c, const void *sendbuf,
                                  void *recvbuf)
{
    int status = RING_OK;
    ring__ar_t algo = ring__allreduce_decide(c);
    ring__ipc_t *ipc = NULL;
    if ((algo == RING__AR_SHM || algo == RING__AR_SHM_HIER) &&
        c->tuning->ipc)
        RING_CHECK(ring__ipc_of(c->ctx, c->dev, c->tuning, 0, &ipc));
    if (c->kind == RING__ALLREDUCE_REGISTERED && !c->host_out &&
        ring__ipc_registered(ipc, c->count * c->esize))
        return ring__ipc_allreduce_registered(ipc, c, recvbuf);
    int over_mpi = c->mem == &ring__mem_device &&
                   (algo == RING__AR_RING || algo == RING__AR_RDB ||
                    algo == RING__AR_RHD);
    /* MPI reads the buffer from the host thread; the node's slabs and
     * staging wait for a registered call's input on the device. */
    if (c->ready && over_mpi) RING_CHECK(c->dev->event_sync(c->ready));
    if (ipc) return ring__ipc_allreduce(ipc, c, sendbuf, recvbuf);
    if (over_mpi) {
        status = ring__allreduce_aware(c, algo, sendbuf, recvbuf);
    } else {
        ring__staged_t s = {.nblocks = c->size, .whole = c->count,
                            .in = sendbuf, .in_block = -1,
                            .out = recvbuf, .out_block = -1,
                            .run = ring__allreduce_chunk, .arg = &algo,
                            .hooked = algo == RING__AR_RING};
        status = ring__staged(c, &s);
    }
    if (status == RING_OK) status = ring__allreduce_done(c, sendbuf, recvbuf);
out:
    return status;
}

/* Where a device allreduce of nbytes through ctx (plain, or registered
 * with its result in device memory) waits for a rank that does not come
 * outside MPI: RING__WINDOW_ALONE in the node's device window, open, where
 * the call goes through it alone (ring__allreduce_device's choice, no
 * ranks across); RING__WINDOW_MAKING in its making (the context's first
 * call through the window, with ranks across or not, opens it over
 * ctx->comm); else 0, also where the call opens with an agreement over
 * MPI (HVD_RING_CHECK). Every rank answers alike. */
enum { RING__WINDOW_ALONE = 1, RING__WINDOW_MAKING };
static int ring__window_waits(ring_ctx_t *ctx, size_t nbytes,
                              ring__coll_t *c)
{
    /* No shared window, no device window: and a call wrapping a bad
     * communicator (refused) must not reach MPI with it. */
    if (!ctx || !ctx->shm) return 0;
    int ar = ring__allreduce_choice(ctx, nbytes, 1, c);
    if (ar < 0 || c->size < 2 || c->tuning->check || !c->tuning->ipc)
        return 0;
    if (ctx->ipc) return ar == RING__AR_SHM ? RING__WINDOW_ALONE : 0;
    return !ctx->ipc_tried && (ar == RING__AR_SHM || ar == RING__AR_SHM_HIER)
               ? RING__WINDOW_MAKING
               : 0;
}

/* A call of nbytes that this rank refused at its opening (status), where
 * the others' calls may wait for it outside MPI: in the making of the
 * node's device window (their first call through it), it comes all the
 * same and says so, for any refusal: nothing is made, every rank's call
 * fails, and the next call tries again. In the open window, for memory
 * whose kind its device cannot tell (a broken CUDA context:
 * ring__kind_unknown; device memory most likely), it gives the window up:
 * every later call fails, also where every rank refused this one alike
 * (which a rank cannot tell), so not for a refusal a rank may make alike
 * with the others and go on from, its arguments. */
static void ring__tell_refused(ring_ctx_t *ctx, size_t nbytes, int status)
{
    ring__coll_t c;
    ring__ipc_t *none;
    if (status == RING_ERR_STATE || status == RING_ERR_MPI) return;
    int waits = ring__window_waits(ctx, nbytes, &c);
    if (waits == RING__WINDOW_ALONE && status == RING_ERR_CUDA)
        ring_ctx_give_up(ctx, status);
    if (waits == RING__WINDOW_MAKING)
        (void)ring__ipc_of(ctx, ring_dev(), c.tuning, 1, &none);
}

/* ---- entry points ---- */

static int ring__allreduce(ring__coll_t c, const void *sendbuf, void *recvbuf,
                           int local)
{
    int status;
    size_t count = c.count;
    status = ring__begin(&c, sendbuf, recvbuf, local);
    if (status != RING_OK) {
        ring__tell_refused(c.ctx, count * ring_dtype_size(c.dtype), status);
        goto out;
    }
    if (count == 0) {
        status = ring__allreduce_done(&c, sendbuf, recvbuf);
        goto out;
    }
    /* Host memory behind a device's event: the host reads it below. */
    if (c.ready && !c.dev) RING_CHECK(ring_dev()->event_sync(c.ready));
    if (c.dev && c.size > 1) {
        status = ring__allreduce_device(&c, sendbuf, recvbuf);
        goto out;
    }
    if (c.size == 1) {
        /* AVERAGE over one rank divides by one: a copy, or nothing (a
         * registered call, in place, need not wait for its ready; out of
         * place, its copy waits on the device). */
        if (sendbuf != recvbuf && !ring__alone_copies(&c, sendbuf, recvbuf))
            c.mem->copy(recvbuf, sendbuf, count * c.esize);
    } else {
        status = ring__allreduce_run(&c, sendbuf, recvbuf);
    }
    if (status == RING_OK) status = ring__allreduce_done(&c, sendbuf, recvbuf);
out:
    return ring__end(&c, status);
}

/* An allreduce call of kind, before its opening. */
static ring__coll_t ring__allreduce_call(ring_ctx_t *ctx, const char *func,
                                         ring__kind_t kind, ring_algo_t algo,
                                         size_t count, ring_dtype_t dtype,
                                         ring_op_t op)
{
    return (ring__coll_t){.func = func, .kind = kind, .ctx = ctx,
                          .count = count, .dtype = dtype, .op = op,
                          .algo = algo};
}

int ring_ctx_allreduce(ring_ctx_t *ctx, const void *sendbuf, void *recvbuf,
                       size_t count, ring_dtype_t dtype, ring_op_t op)
{
    return ring__allreduce(
        ring__allreduce_call(ctx, "ring_ctx_allreduce", RING__ALLREDUCE,
                             RING_ALGO_AUTO, count, dtype, op),
        sendbuf, recvbuf, RING_OK);
}

int ring_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                   ring_dtype_t dtype, ring_op_t op, MPI_Comm comm)
{
    ring_ctx_t ctx = ring__ctx_wrap(comm, MPI_COMM_NULL, MPI_COMM_NULL, NULL);
    return ring__allreduce(
        ring__allreduce_call(&ctx, "ring_allreduce", RING__ALLREDUCE,
                             RING_ALGO_AUTO, count, dtype, op),
        sendbuf, recvbuf, RING_OK);
}

int ring_allreduce_algo(ring_algo_t algo, const void *sendbuf, void *recvbuf,
                        size_t count, ring_dtype_t dtype, ring_op_t op,
                        MPI_Comm comm)
{
    ring_ctx_t ctx = ring__ctx_wrap(comm, MPI_COMM_NULL, MPI_COMM_NULL, NULL);
    return ring__allreduce(
        ring__allreduce_call(&ctx, "ring_allreduce_algo", RING__ALLREDUCE,
                             algo, count, dtype, op),
        sendbuf, recvbuf, RING_OK);
}

int ring_ctx_register(ring_ctx_t *ctx, void *buf, size_t nbytes)
{
    const ring__tuning_t *tuning;
    const ring_dev_t *dev = ring_dev();
    ring__ipc_t *ipc = NULL;
    int status = ring__check_mpi_up("ring_ctx_register"), size;
    if (status != RING_OK) return status;
    if (!ctx || (!buf && nbytes > 0)) {
        ring__log("ring_ctx_register: %s", !ctx ? "ctx is NULL"
                                                : "buf is NULL, nbytes > 0");
        return RING_ERR_ARG;
    }
    RING_CHECK(ring__tuning(&tuning));
    RING_CHECK_MPI(MPI_Comm_size(ctx->comm, &size));
    /* A rank alone's registered call with a done event may still be
     * copying out of the earlier buffer on the context's stream (with
     * others, ring__ipc_register below waits for its own calls, failed or
     * not: a rank leaving here would leave them in its collectives). */
    if (size < 2 && ctx->work) RING_CHECK(dev->stream_sync(ctx->work));
    ctx->registered = nbytes > 0 ? buf : NULL;
    ctx->registered_bytes = ctx->registered ? nbytes : 0;
    /* The window's device twin: where device allreduces take it. Every
     * rank decides alike (the context and the tuning agree); a rank
     * without a device takes part, and the twin is then made nowhere. */
    if (!ctx->shm || !tuning->ipc || size < 2) goto out;
    RING_CHECK(ring__ipc_of(ctx, dev, tuning, 0, &ipc));
    /* Only device memory is opened by the others: host memory registers
     * nothing there (as a rank that cannot export), without a failed
     * export logged on every rank. */
    void *shared =
        ring_is_device_memory(ctx->registered) > 0 ? ctx->registered : NULL;
    if (ipc)
        RING_CHECK(ring__ipc_register(ipc, shared,
                                      shared ? ctx->registered_bytes : 0));
out:
    return status;
}

/* Both registered calls: recvbuf NULL in place; local, the caller's own
 * checks. */
static int ring__allreduce_registered(ring_ctx_t *ctx, const char *func,
                                      int local, size_t count,
                                      ring_dtype_t dtype, ring_op_t op,
                                      void *recvbuf, ring_event_t *ready,
                                      ring_event_t *done, ring_event_t *freed)
{
    size_t esize = ring_dtype_size(dtype);
    char *buf = ctx ? ctx->registered : NULL;
    if (ctx && esize && count > ctx->registered_bytes / esize) {
        ring__log("%s: %zu elements of %s do not fit the registered "
                  "buffer's %zu bytes", func, count, ring_dtype_name(dtype),
                  ctx->registered_bytes);
        local = RING_ERR_ARG;
    }
    if ((ready || done || freed) && !ring_dev()) {
        ring__log("%s: an event, but this process has no device", func);
        local = RING_ERR_ARG;
    }
    if (freed && !done) {
        ring__log("%s: freed without done", func);
        local = RING_ERR_ARG;
    }
    /* Other ranks read the buffer while this one writes recvbuf. */
    size_t nbytes = count * esize;
    if (local == RING_OK && recvbuf && buf && nbytes > 0 &&
        (char *)recvbuf < buf + nbytes && buf < (char *)recvbuf + nbytes) {
        ring__log("%s: recvbuf overlaps the registered buffer's first %zu "
                  "elements", func, count);
        local = RING_ERR_ARG;
    }
    ring__coll_t c = ring__allreduce_call(ctx, func,
                                          RING__ALLREDUCE_REGISTERED,
                                          RING_ALGO_AUTO, count, dtype, op);
    c.ready = ready;
    c.done = done;
    c.freed = freed;
    return ring__allreduce(c, buf, recvbuf ? recvbuf : buf, local);
}

int ring_ctx_allreduce_registered(ring_ctx_t *ctx, size_t count,
                                  ring_dtype_t dtype, ring_op_t op,
                                  ring_event_t *ready, ring_event_t *done)
{
    return ring__allreduce_registered(ctx, "ring_ctx_allreduce_registered",
                                      RING_OK, count, dtype, op, NULL, ready,
                                      done, NULL);
}

int ring_ctx_allreduce_registered_to(ring_ctx_t *ctx, size_t count,
                                     ring_dtype_t dtype, ring_op_t op,
                                     void *recvbuf, ring_event_t *ready,
                                     ring_event_t *done, ring_event_t *freed)
{
    const char *func = "ring_ctx_allreduce_registered_to";
    int local = RING_OK;
    if (!recvbuf && count > 0) {
        ring__log("%s: recvbuf is NULL, count > 0", func);
        local = RING_ERR_ARG;
    }
    return ring__allreduce_registered(ctx, func, local, count, dtype, op,
                                      recvbuf, ready, done, freed);
}

int ring_ctx_give_up(ring_ctx_t *ctx, int status)
{
    if (ctx && ctx->ipc) ring__ipc_give_up(ctx->ipc);
    return status;
}

int ring_ctx_give_up_reaches(ring_ctx_t *ctx, size_t nbytes)
{
    ring__coll_t c;
    return ring__window_waits(ctx, nbytes, &c) == RING__WINDOW_ALONE;
}

int ring_ctx_allreduce_apply(ring_ctx_t *ctx, const void *sendbuf,
                             void *recvbuf, size_t count, ring_dtype_t dtype,
                             ring_op_t op, const ring_apply_t *apply)
{
    int status = RING_OK;
    if (!apply || !apply->fn) {
        ring__log("ring_ctx_allreduce_apply: apply or apply->fn is NULL");
        status = RING_ERR_ARG;
    }
    ring__coll_t c = {.func = "ring_ctx_allreduce_apply",
                      .kind = RING__ALLREDUCE_APPLY, .ctx = ctx,
                      .count = count, .dtype = dtype, .op = op};
    RING_CHECK(ring__begin(&c, sendbuf, recvbuf, status));
    if (count == 0) goto out;
    /* Within one node each block has one owner among all ranks, who
     * applies it as it is reduced. */
    if (c.size > 1 && ring__allreduce_decide(&c) == RING__AR_SHM) {
        ring__io_t io = {.sendbuf = sendbuf, .recvbuf = recvbuf};
        status = ring__shm_run(&c, &io, apply);
        goto out;
    }
    size_t nbytes = count * c.esize;
    char *buf = ring__ctx_scratch(ctx, nbytes);
    if (!buf) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    if (c.size == 1)
        c.mem->copy(buf, sendbuf, nbytes);
    else
        RING_CHECK(ring__allreduce_run(&c, sendbuf, buf));
    apply->fn(apply->ctx, 0, buf, count);
    c.mem->copy(recvbuf, buf, nbytes);
out:
    return status;
}

/* ---- fused: pieces end to end ---- */

/* Whether the pieces' sendbufs follow each other in memory, and so do
 * their recvbufs: one range reduced into another, or where it lies (a
 * model's gradient slab, in place), as one buffer. */
static int ring__pieces_tiled(const ring_piece_t *pieces, size_t n,
                              size_t esize)
{
    for (size_t i = 0; i < n; i++) {
        if (!pieces[i].sendbuf || !pieces[i].recvbuf) return 0;
        size_t prev = i > 0 ? pieces[i - 1].count * esize : 0;
        if (i > 0 && ((const char *)pieces[i - 1].sendbuf + prev !=
                          (const char *)pieces[i].sendbuf ||
                      (char *)pieces[i - 1].recvbuf + prev !=
                          (char *)pieces[i].recvbuf))
            return 0;
    }
    return 1;
}

/* The pieces' buffers: each of a kind the collectives take. */
static int ring__pieces_check(const ring_piece_t *pieces, size_t n,
                              size_t *count)
{
    const char *why = NULL;
    *count = 0;
    if (n > 0 && !pieces) why = "pieces is NULL";
    for (size_t i = 0; !why && i < n; i++) {
        *count += pieces[i].count;
        if (pieces[i].count > 0 &&
            (!ring__mem_of(pieces[i].sendbuf, &why) ||
             !ring__mem_of(pieces[i].recvbuf, &why)))
            break;
    }
    if (!why) return RING_OK;
    ring__log("ring_ctx_allreduce_pieces: %s", why);
    return why == ring__kind_unknown ? RING_ERR_CUDA : RING_ERR_ARG;
}

int ring_ctx_allreduce_pieces(ring_ctx_t *ctx, const ring_piece_t *pieces,
                              size_t npieces, ring_dtype_t dtype,
                              ring_op_t op)
{
    size_t count, *starts = NULL;
    int status = ring__pieces_check(pieces, npieces, &count);
    ring__coll_t c = {.func = "ring_ctx_allreduce_pieces",
                      .kind = RING__ALLREDUCE, .ctx = ctx, .count = count,
                      .dtype = dtype, .op = op};
    /* NULL buffers are allowed here, so begin sees the array instead. */
    RING_CHECK(ring__begin(&c, pieces, pieces, status));
    if (count == 0) goto out;
    size_t nbytes = count * c.esize;
    if (ring__pieces_tiled(pieces, npieces, c.esize)) {
        if (c.size > 1)
            status = ring__allreduce_run(&c, pieces[0].sendbuf,
                                         pieces[0].recvbuf);
        else if (pieces[0].sendbuf != pieces[0].recvbuf)
            c.mem->copy(pieces[0].recvbuf, pieces[0].sendbuf, nbytes);
        goto out;
    }
    starts = malloc((npieces + 1) * sizeof *starts);
    if (!starts) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    starts[0] = 0;
    for (size_t i = 0; i < npieces; i++)
        starts[i + 1] = starts[i] + pieces[i].count * c.esize;
    ring__io_t io = {.pieces = pieces, .npieces = npieces, .starts = starts};
    ring__ar_t algo = c.size > 1 ? ring__allreduce_decide(&c) : RING__AR_RING;
    if (algo == RING__AR_SHM || algo == RING__AR_SHM_HIER) {
        status = ring__shm_run(&c, &io, NULL);
        goto out;
    }
    char *buf = ring__ctx_scratch(ctx, nbytes);
    if (!buf) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    ring__io_read(&io, 0, buf, nbytes, c.mem->copy);
    if (c.size > 1)
        RING_CHECK(ring__allreduce_algos[algo].fn(&c, buf, buf));
    ring__io_write(&io, 0, buf, nbytes, c.mem->copy);
out:
    free(starts);
    return status;
}
