/* hvd/execute.c: runs one response of a plan on this rank: hands the
 * tensors to ring's context (fused allreduces as pieces of one buffer),
 * and completes the handles. A rank that has joined has no request of its
 * own and takes part with zeros (its results are dropped).
 *
 * Device tensors (hvd__dev below): a fused group is packed into hvd's own
 * device fusion buffer by one batched copy on the engine's stream,
 * reduced by ring into a second buffer, and unpacked from there by one
 * batched copy; a tensor alone goes to ring where it lies. ring's calls
 * run on ring's own streams; the fused call waits, on ring's side, for an
 * event behind the pack, and records one that the unpack waits for, and
 * one that the next pack waits for (the others' reads of the fusion
 * buffer through): within a node ring
 * queues its work and returns (the ranks' streams wait for each other on
 * the device), so the engine never waits for the device there, and its
 * timeline's allreduce phase of such a group is the queueing on the
 * host's lane, the device's time on the device's (hvd/timeline.h); elsewhere
 * (staged through pinned host memory, or over MPI) the call returns once
 * its copies are done. A tensor alone is read once its caller's event is
 * done. A request from a stream variant carries two events: one recorded
 * on the caller's stream, waited for before the tensor is read, and one
 * the engine records after the unpack, which its caller waits for
 * (hvd_wait_stream on the device, hvd_wait on the host); the engine waits
 * for its stream before completing only a group with other requests,
 * whose hvd_wait returns with the result in device memory.
 *
 * The context (ring_ctx_t, over hvd__ring_comm) owns what the collectives
 * need across calls, the shared window within a node and the
 * communicators of the hierarchical allreduce, and decides per call which
 * algorithm runs; hvd only passes HVD_INTRANODE,
 * HVD_HIERARCHICAL_ALLREDUCE and the fusion threshold (the window's slab)
 * on when it makes it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/execute.h"
#include "hvd/timeline.h"
#include "hvd/topology.h"

_Static_assert((int)HVD__INTRANODE_AUTO == (int)RING_INTRANODE_AUTO &&
                   (int)HVD__INTRANODE_SHM == (int)RING_INTRANODE_SHM &&
                   (int)HVD__INTRANODE_RING == (int)RING_INTRANODE_RING,
               "HVD_INTRANODE's values are ring's");

static ring_ctx_t *hvd__ctx;

/* Zeros for a joined rank, grown to the largest collective it takes part
 * in alone. */
static struct {
    char *data;
    size_t cap;
} hvd__scratch;

/* ---- device tensors (engine thread only) ---- */

static struct {
    ring_stream_t *stream; /* the engine's own */
    ring_event_t *packed;  /* recorded on it behind a group's pack */
    ring_event_t *reduced; /* ring's, once the result is in `out` */
    ring_event_t *freed;   /* ring's, once the fusion buffer is ours again */
    char *fusion;          /* the device fusion buffer, made on first use */
    size_t fusion_cap;
    char *out;             /* where ring puts a group's result */
    size_t out_cap;
    char *zeros;           /* a joined rank's device zeros */
    size_t zeros_cap;
} hvd__dev;

/* The engine's stream and its pack event, made on first use in the
 * engine thread (which has selected the rank's device:
 * hvd__engine_main). */
static int hvd__dev_stream(const ring_dev_t *dev)
{
    if (!dev) {
        hvd__log(HVD__LOG_ERROR, "a device tensor, but this rank has no "
                 "device (ring_dev() is NULL)");
        return HVD_ERR_STATE;
    }
    int status = HVD_OK;
    if (!hvd__dev.stream) status = dev->stream_create(&hvd__dev.stream);
    if (status == HVD_OK && !hvd__dev.packed)
        status = dev->event_create(&hvd__dev.packed);
    if (status == HVD_OK && !hvd__dev.reduced)
        status = dev->event_create(&hvd__dev.reduced);
    if (status == HVD_OK && !hvd__dev.freed)
        status = dev->event_create(&hvd__dev.freed);
    return status;
}

/* *p, of *cap bytes, grown to at least nbytes of device memory. */
static int hvd__dev_grow(const ring_dev_t *dev, char **p, size_t *cap,
                         size_t nbytes)
{
    if (*p && *cap >= nbytes) return HVD_OK;
    dev->release(*p); /* waits for the device, as cudaFree */
    *p = NULL;
    *cap = 0;
    int status = dev->alloc((void **)p, nbytes ? nbytes : 1);
    if (status == HVD_OK) *cap = nbytes;
    return status;
}

/* nbytes of device zeros, for a joined rank's device collective: ring's
 * staged path moves other messages than its host path, so a joined rank
 * gives zeros of the same kind as the others' tensors. */
static int hvd__dev_zeros(const ring_dev_t *dev, size_t nbytes, char **z)
{
    int status = hvd__dev_stream(dev);
    if (status != HVD_OK) return status;
    HVD_CHECK_DEV(hvd__dev_grow(dev, &hvd__dev.zeros, &hvd__dev.zeros_cap,
                                nbytes));
    HVD_CHECK_DEV(dev->zero(hvd__dev.zeros, nbytes, hvd__dev.stream));
    HVD_CHECK_DEV(dev->stream_sync(hvd__dev.stream));
    *z = hvd__dev.zeros;
out:
    return status;
}

void hvd__execute_thread_end(void)
{
    const ring_dev_t *dev = ring_dev();
    if (!dev) return;
    /* A stream variant's unpack may still read it (hvd__dev_finish). */
    if (hvd__dev.stream) dev->stream_sync(hvd__dev.stream);
    hvd__timeline_device_end(); /* its marks are on the stream */
    /* The other ranks close it before it goes (every rank ends here). */
    if (hvd__dev.fusion) ring_ctx_register(hvd__ctx, NULL, 0);
    dev->release(hvd__dev.fusion);
    dev->release(hvd__dev.out);
    dev->release(hvd__dev.zeros);
    dev->event_destroy(hvd__dev.packed);
    dev->event_destroy(hvd__dev.reduced);
    dev->event_destroy(hvd__dev.freed);
    dev->stream_destroy(hvd__dev.stream);
    memset(&hvd__dev, 0, sizeof hvd__dev);
}

int hvd__execute_init(void)
{
    const hvd__config_t *cfg = &hvd__engine.config;
    ring_ctx_opts_t opts = {
        .slab_bytes = cfg->fusion_threshold,
        .intranode = (ring_intranode_t)cfg->intranode,
        .hierarchical = cfg->hierarchical,
    };
    int status = ring_ctx_create(hvd__ring_comm, &opts, &hvd__ctx);
    if (status == HVD_OK && hvd__engine.rank == 0)
        hvd__log(HVD__LOG_INFO, "allreduce of 1 MiB: %s; of 1 KiB: %s",
                 ring_ctx_allreduce_algo(hvd__ctx, 1 << 18, RING_FLOAT32),
                 ring_ctx_allreduce_algo(hvd__ctx, 1 << 8, RING_FLOAT32));
    return status;
}

void hvd__execute_free(void)
{
    ring_ctx_free(&hvd__ctx);
    free(hvd__scratch.data);
    memset(&hvd__scratch, 0, sizeof hvd__scratch);
}

/* nbytes of zeros, for a joined rank. */
static char *hvd__zeros(size_t nbytes)
{
    if (nbytes + 1 > hvd__scratch.cap) {
        char *bigger = realloc(hvd__scratch.data, nbytes + 1);
        if (!bigger) return NULL;
        hvd__scratch.data = bigger;
        hvd__scratch.cap = nbytes + 1;
    }
    memset(hvd__scratch.data, 0, nbytes);
    return hvd__scratch.data;
}

/* The timeline's name for running a collective: allreduces say which
 * algorithm ring's context took for them. */
static const char *hvd__phase(const hvd__desc_t *d, size_t count)
{
    const char *algo = "";
    if (d->kind == HVD__ALLREDUCE || d->kind == HVD__ALLREDUCE_APPLY)
        algo = ring_ctx_allreduce_algo(hvd__ctx, count,
                                       (ring_dtype_t)d->dtype);
    if (!algo) algo = "";
    if (d->kind == HVD__ALLREDUCE_APPLY)
        return strcmp(algo, "shm") ? "ALLREDUCE_APPLY" : "SHM_ALLREDUCE_APPLY";
    if (d->kind != HVD__ALLREDUCE) return hvd__kind_name(d->kind);
    if (!strcmp(algo, "shm")) return "SHM_ALLREDUCE";
    if (!strcmp(algo, "shm_hier")) return "HIER_SHM_ALLREDUCE";
    if (!strcmp(algo, "hier")) return "HIER_ALLREDUCE";
    return "RING_ALLREDUCE";
}

/* A joined rank's zeros for d, in d's memory kind. */
static int hvd__zeros_for(const hvd__desc_t *d, char **z)
{
    size_t nbytes = hvd__desc_bytes(d);
    if (d->kind == HVD__ALLGATHER) nbytes *= 1 + (size_t)hvd__engine.size;
    if (d->mem == HVD__MEM_DEVICE)
        return hvd__dev_zeros(ring_dev(), nbytes, z);
    *z = hvd__zeros(nbytes);
    return *z ? HVD_OK : HVD_ERR_NOMEM;
}

/* One collective on one tensor, where it lies (ring's calls take device
 * buffers); z, a joined rank's zeros in its stead (hvd__zeros_for). */
static int hvd__run_one(const hvd__desc_t *d, hvd_handle_t h, char *z)
{
    size_t nbytes = hvd__desc_bytes(d);
    ring_dtype_t dtype = (ring_dtype_t)d->dtype;
    switch (d->kind) {
    case HVD__ALLREDUCE:
        return ring_ctx_allreduce(hvd__ctx, h ? h->sendbuf : z,
                                  h ? h->recvbuf : z, d->count, dtype,
                                  (ring_op_t)d->op);
    case HVD__ALLREDUCE_APPLY: /* never with a joined rank (coordinator) */
        if (!h) return HVD_ERR_STATE;
        return ring_ctx_allreduce_apply(hvd__ctx, h->sendbuf, h->recvbuf,
                                        d->count, dtype, (ring_op_t)d->op,
                                        &h->apply);
    case HVD__BROADCAST:
        return ring_ctx_broadcast(hvd__ctx, h ? h->recvbuf : z, d->count,
                                  dtype, hvd__topo.ring_rank[d->root]);
    case HVD__ALLGATHER:
        /* A joined rank: nbytes of zeros to give, then room for all. In
         * rank order (hvd__engine.comm, not the context's ring order): the
         * result is laid out by rank. */
        return ring_allgather(h ? h->sendbuf : z, h ? h->recvbuf : z + nbytes,
                              d->count, dtype, hvd__engine.comm);
    default: /* a barrier: agreeing that every rank reached it was all */
        return HVD_OK;
    }
}

/* One collective on one host tensor, or a joined rank's zeros. */
static int hvd__run_one_host(const hvd__desc_t *d, hvd_handle_t h)
{
    char *z = NULL;
    int status = h ? HVD_OK : hvd__zeros_for(d, &z);
    return status == HVD_OK ? hvd__run_one(d, h, z) : status;
}

/* One timeline event per tensor of the group this rank made. */
static void hvd__timeline_group(const hvd__response_t *resp, hvd_handle_t *hs,
                                const char *phase, double t0, double t1)
{
    for (int i = 0; i < resp->head.ndescs; i++)
        if (hs[i]) hvd__timeline_event(resp->descs[i].name, phase, t0, t1);
}

/* Several allreduces of one dtype and op, as pieces of one buffer: ring
 * reduces them where they lie when they tile a range (a model's gradient
 * slab), else copies them through its window or scratch. A joined rank's
 * pieces are zeros in, nothing out. */
static int hvd__run_fused(const hvd__response_t *resp, hvd_handle_t *hs)
{
    const hvd__desc_t *descs = resp->descs;
    int n = resp->head.ndescs;
    size_t count = 0;
    ring_piece_t *pieces = malloc((size_t)n * sizeof *pieces + 1);
    if (!pieces) return HVD_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        pieces[i] = (ring_piece_t){hs[i] ? hs[i]->sendbuf : NULL,
                                   hs[i] ? hs[i]->recvbuf : NULL,
                                   descs[i].count};
        count += descs[i].count;
    }
    double t0 = hvd__now();
    int status = ring_ctx_allreduce_pieces(hvd__ctx, pieces, (size_t)n,
                                           (ring_dtype_t)descs[0].dtype,
                                           (ring_op_t)descs[0].op);
    if (hvd__timeline_on())
        hvd__timeline_group(resp, hs, hvd__phase(&descs[0], count), t0,
                            hvd__now());
    free(pieces);
    return status;
}

/* Before a device request is read: the work its caller queued on its
 * stream (the stream variants' ready_ev) is done, or (fused) queued ahead
 * of what the engine's stream does next. */
static int hvd__await_callers(const ring_dev_t *dev, hvd_handle_t *hs, int n,
                              int on_stream)
{
    int status = HVD_OK;
    for (int i = 0; i < n; i++) {
        if (!hs[i] || !hs[i]->ready_ev) continue;
        HVD_CHECK_DEV(on_stream
                          ? dev->stream_wait(hvd__dev.stream, hs[i]->ready_ev)
                          : dev->event_sync(hs[i]->ready_ev));
    }
out:
    return status;
}

/* After the results are queued on the engine's stream: marks them for
 * the stream variants, whose callers wait for the mark (hvd_wait_stream
 * on their stream, hvd_wait on the host), and goes on without waiting for
 * the device; a group with a request of another variant is waited for
 * here, so that its completion means the result is in device memory. On
 * a GPU that the node's ranks share, each wait is a turn of every process
 * on it: the training step's allreduces are all stream variants. */
static int hvd__dev_finish(const ring_dev_t *dev, hvd_handle_t *hs, int n)
{
    int status = HVD_OK, plain = 0;
    for (int i = 0; i < n; i++) {
        if (hs[i] && hs[i]->done_ev)
            HVD_CHECK_DEV(dev->event_record(hs[i]->done_ev, hvd__dev.stream));
        else if (hs[i])
            plain = 1;
    }
    if (plain) HVD_CHECK_DEV(dev->stream_sync(hvd__dev.stream));
out:
    return status;
}

/* The batched copies between the group's tensors and the fusion buffer
 * going in (pack), or ring's result coming out (unpack); a joined rank's
 * pieces are zeroed going in and dropped coming out. One kernel launch
 * each way. */
static int hvd__dev_pack(const ring_dev_t *dev, const hvd__response_t *resp,
                         hvd_handle_t *hs, ring_copy_t *copies, int in)
{
    size_t at = 0, ncopies = 0;
    int status = HVD_OK;
    for (int i = 0; i < resp->head.ndescs; i++) {
        size_t nbytes = hvd__desc_bytes(&resp->descs[i]);
        char *slot = (in ? hvd__dev.fusion : hvd__dev.out) + at;
        at += nbytes;
        if (nbytes == 0) continue;
        if (!hs[i] && in)
            HVD_CHECK_DEV(dev->zero(slot, nbytes, hvd__dev.stream));
        if (!hs[i]) continue;
        copies[ncopies++] = in ? (ring_copy_t){slot, hs[i]->sendbuf, nbytes}
                               : (ring_copy_t){hs[i]->recvbuf, slot, nbytes};
    }
    if (ncopies > 0)
        HVD_CHECK_DEV(dev->copy_batch(copies, ncopies, hvd__dev.stream));
out:
    return status;
}

/* Collective: *first, the lowest rank whose status is a failure, and
 * *why, that failure; INT32_MAX and HVD_OK when none is. One int each:
 * the rank times CODES plus the status's code (HVD_ERR_* are -1 to -7). */
static int hvd__first_failed(int status, int *first, int *why)
{
    enum { CODES = 16 };
    int code = status < 0 && status > -CODES ? -status : -HVD_ERR_STATE;
    int32_t mine = status == HVD_OK ? INT32_MAX
                                    : hvd__engine.rank * CODES + code,
            low = mine; /* a rank alone agrees with itself */
    int agreed = hvd__engine.size == 1
                     ? HVD_OK
                     : ring_ctx_allreduce(hvd__ctx, &mine, &low, 1,
                                          RING_INT32, RING_MIN);
    *first = low == INT32_MAX ? INT32_MAX : low / CODES;
    *why = low == INT32_MAX ? HVD_OK : -(low % CODES);
    return agreed;
}

/* The device fusion buffer grown to want bytes, and the result's to
 * total, on every rank or on none (status: this rank's failure so far,
 * which fails it too): every rank grows them at the same response, so
 * the fusion buffer is registered with ring together (the node's ranks
 * then read it where it lies: ring_ctx_allreduce_registered_to), and a
 * rank whose device is out of memory must not leave the others waiting
 * for it there. On a failure anywhere every rank fails the group
 * (*shared = 1) with the first failed rank's status, naming it, and
 * holds neither: the ranks stay in step, and the next group tries again.
 * The result's buffer holds a group, not the threshold: groups are
 * mostly far smaller. */
static int hvd__dev_fusion_grow(const ring_dev_t *dev, size_t want,
                                size_t total, int status, int *shared)
{
    int regrow = hvd__dev.fusion_cap < want, first, why;
    if (regrow) {
        int unregistered = ring_ctx_register(hvd__ctx, NULL, 0);
        if (status == HVD_OK) status = unregistered;
    }
    /* The last group's unpack may still read them (hvd__dev_finish). */
    if (status == HVD_OK) status = dev->stream_sync(hvd__dev.stream);
    if (status == HVD_OK)
        status = hvd__dev_grow(dev, &hvd__dev.fusion, &hvd__dev.fusion_cap,
                               want);
    if (status == HVD_OK)
        status = hvd__dev_grow(dev, &hvd__dev.out, &hvd__dev.out_cap, total);
    /* Registered before the agreement, which its failure joins (a rank
     * that failed offers nothing, and then the window opens nothing). */
    if (regrow) {
        int registered = ring_ctx_register(
            hvd__ctx, status == HVD_OK ? hvd__dev.fusion : NULL,
            status == HVD_OK ? hvd__dev.fusion_cap : 0);
        if (status == HVD_OK) status = registered;
    }
    int agreed = hvd__first_failed(status, &first, &why);
    if (agreed != RING_OK) return agreed;
    if (first == INT32_MAX) return HVD_OK;
    (void)ring_ctx_register(hvd__ctx, NULL, 0);
    if (dev) { /* none: this rank failed at its first step */
        dev->release(hvd__dev.fusion);
        dev->release(hvd__dev.out);
    }
    hvd__dev.fusion = hvd__dev.out = NULL;
    hvd__dev.fusion_cap = hvd__dev.out_cap = 0;
    *shared = 1;
    hvd__log(HVD__LOG_ERROR, "rank %d could not make the device fusion "
             "buffers of %zu and %zu bytes (HVD_FUSION_THRESHOLD, or the "
             "group's size when larger; and the group's): %s (its message "
             "says why): this group fails on every rank",
             first, want, total, hvd_strerror(why));
    return status == HVD_OK ? why : status;
}

/* status, of this rank's work before its call to ring on device tensors
 * (its stream, its callers' work, its copies): a failure of its own, of
 * which the others, who would wait for it in ring, must hear. Where ring
 * tells them (reaches: the group goes through the node's device window,
 * ring_ctx_give_up_reaches), it does so (ring_ctx_give_up; from then on
 * the device collectives within the node fail on every rank). Elsewhere
 * (over MPI: a small group, ranks on several nodes, a tensor alone,
 * HVD_RING_CHECK's agreements; a rank alone) the ranks agree on it
 * first: on a failure anywhere every rank fails the group (*shared = 1),
 * naming the first rank that failed, and goes on. */
static int hvd__before_ring(int status, int reaches, int *shared)
{
    if (reaches)
        return status == HVD_OK ? HVD_OK : ring_ctx_give_up(hvd__ctx, status);
    int first, why, agreed = hvd__first_failed(status, &first, &why);
    if (agreed != HVD_OK || first == INT32_MAX) return agreed;
    *shared = 1;
    if (status != HVD_OK) return status; /* its own message said why */
    hvd__log(HVD__LOG_ERROR, "rank %d failed before its part of this "
             "group (its message says why): the group fails on every rank",
             first);
    return HVD_ERR_STATE;
}

/* The tensors of the group this rank made, with the marks that bound its
 * phases on the engine's stream, for the timeline's device lane. */
static void hvd__timeline_dev_group(const hvd__response_t *resp,
                                    hvd_handle_t *hs, hvd__tl_marks_t *m,
                                    const char *reduce)
{
    const char *const phases[] = {"MEMCPY_IN_FUSION_BUFFER", reduce,
                                  "MEMCPY_OUT_FUSION_BUFFER"};
    if (m->n == 0) return; /* the timeline is off */
    const char **names = malloc((size_t)resp->head.ndescs * sizeof *names + 1);
    int n = 0;
    for (int i = 0; names && i < resp->head.ndescs; i++)
        if (hs[i]) names[n++] = resp->descs[i].name;
    if (names)
        hvd__timeline_device(m, names, n, phases);
    else
        hvd__timeline_drop(m);
    free(names);
}

/* Several device allreduces of one dtype and op through the device fusion
 * buffer (HVD_FUSION_THRESHOLD bytes, made on first use, kept until
 * shutdown): pack, reduce into the result's buffer, unpack from there.
 * *shared = 1 when it failed on every rank alike. */
static int hvd__run_fused_device(const hvd__response_t *resp,
                                 hvd_handle_t *hs, int *shared)
{
    const ring_dev_t *dev = ring_dev();
    const hvd__desc_t *descs = resp->descs;
    int n = resp->head.ndescs, status;
    size_t total = 0, threshold = hvd__engine.config.fusion_threshold;
    hvd__tl_marks_t marks = {0}; /* the timeline's, on the device */
    for (int i = 0; i < n; i++) total += hvd__desc_bytes(&descs[i]);
    ring_copy_t *copies = malloc((size_t)n * sizeof *copies + 1);
    status = copies ? hvd__dev_stream(dev) : HVD_ERR_NOMEM;
    size_t want = total > threshold ? total : threshold;
    if (hvd__dev.fusion_cap < want || hvd__dev.out_cap < total)
        HVD_CHECK_DEV(hvd__dev_fusion_grow(dev, want, total, status, shared));
    /* The first time, a wait for the engine's own stream alone. */
    if (status == HVD_OK) hvd__timeline_anchor(hvd__dev.stream);
    double t0 = hvd__now();
    /* Once the last group's readers of the fusion buffer are through
     * (every rank's, on the device). */
    if (status == HVD_OK)
        status = dev->stream_wait(hvd__dev.stream, hvd__dev.freed);
    if (status == HVD_OK) status = hvd__await_callers(dev, hs, n, 1);
    if (status == HVD_OK) hvd__timeline_mark(&marks, hvd__dev.stream);
    if (status == HVD_OK) status = hvd__dev_pack(dev, resp, hs, copies, 1);
    if (status == HVD_OK) hvd__timeline_mark(&marks, hvd__dev.stream);
    /* ring reads the buffer from its own streams, which wait for this
     * (on the device, where they can): no wait here. */
    if (status == HVD_OK)
        status = dev->event_record(hvd__dev.packed, hvd__dev.stream);
    HVD_CHECK_DEV(hvd__before_ring(
        status, ring_ctx_give_up_reaches(hvd__ctx, total), shared));
    double t1 = hvd__now();
    hvd__timeline_group(resp, hs, "MEMCPY_IN_FUSION_BUFFER", t0, t1);
    size_t count = total / ring_dtype_size((ring_dtype_t)descs[0].dtype);
    HVD_CHECK_DEV(ring_ctx_allreduce_registered_to(
        hvd__ctx, count, (ring_dtype_t)descs[0].dtype,
        (ring_op_t)descs[0].op, hvd__dev.out, hvd__dev.packed,
        hvd__dev.reduced, hvd__dev.freed));
    double t2 = hvd__now();
    const char *phase = hvd__timeline_on() ? hvd__phase(&descs[0], count) : "";
    hvd__timeline_group(resp, hs, phase, t1, t2);
    /* The unpack once the result is in (within a node ring returns with
     * its work queued). */
    HVD_CHECK_DEV(dev->stream_wait(hvd__dev.stream, hvd__dev.reduced));
    hvd__timeline_mark(&marks, hvd__dev.stream);
    HVD_CHECK_DEV(hvd__dev_pack(dev, resp, hs, copies, 0));
    hvd__timeline_mark(&marks, hvd__dev.stream);
    HVD_CHECK_DEV(hvd__dev_finish(dev, hs, n));
    hvd__timeline_group(resp, hs, "MEMCPY_OUT_FUSION_BUFFER", t2, hvd__now());
    hvd__timeline_dev_group(resp, hs, &marks, phase);
out:
    hvd__timeline_drop(&marks); /* a failed group's, if any */
    /* A failed group's copies, queued, may still read or write the
     * callers' tensors: theirs again when their calls fail. */
    if (status != HVD_OK && hvd__dev.stream)
        (void)dev->stream_sync(hvd__dev.stream);
    free(copies);
    return status;
}

/* One device tensor: after its caller's stream, straight to ring.
 * *shared = 1 when it failed on every rank alike. */
static int hvd__run_one_device(const hvd__desc_t *d, hvd_handle_t h,
                               int *shared)
{
    const ring_dev_t *dev = ring_dev();
    char *z = NULL;
    int status = hvd__dev_stream(dev);
    if (status == HVD_OK)
        status = h ? hvd__await_callers(dev, &h, 1, 0) : hvd__zeros_for(d, &z);
    HVD_CHECK_DEV(hvd__before_ring(status, 0, shared));
    HVD_CHECK_DEV(hvd__run_one(d, h, z));
    HVD_CHECK_DEV(hvd__dev_finish(dev, &h, 1));
out:
    return status;
}

/* A lone device allreduce that fits the fusion buffer goes through it as
 * a group of one: its pack waits for the caller's stream on the device,
 * where hvd__run_one_device waits on the host before ring does (on a GPU
 * that the node's ranks share, a turn of every process on it), for two
 * copies of microseconds. Larger ones, and the other kinds, go alone. */
static int hvd__fuses_alone(const hvd__desc_t *d)
{
    size_t nbytes = hvd__desc_bytes(d);
    return d->mem == HVD__MEM_DEVICE && d->kind == HVD__ALLREDUCE &&
           nbytes > 0 && nbytes <= hvd__engine.config.fusion_threshold;
}

int hvd__execute(const hvd__response_t *resp, hvd_handle_t *hs,
                 double ready_s)
{
    int n = resp->head.ndescs, status = resp->head.status, shared = 0;
    double start = hvd__now();
    hvd__set_thread_error(""); /* what fails below says why, not before */
    for (int i = 0; i < n && hvd__timeline_on(); i++) {
        if (!hs[i]) continue;
        hvd__timeline_event(resp->descs[i].name, "NEGOTIATE",
                            hs[i]->submit_s, ready_s);
        hvd__timeline_event(resp->descs[i].name, "QUEUE", ready_s, start);
    }
    if (status != HVD_OK) {
        /* Every rank that made the request logs why it failed. */
        if (n > 0 && hs[0]) hvd__log(HVD__LOG_ERROR, "%s", resp->head.message);
    } else if (n > 1 || (n == 1 && hvd__fuses_alone(&resp->descs[0]))) {
        status = resp->descs[0].mem == HVD__MEM_DEVICE
                     ? hvd__run_fused_device(resp, hs, &shared)
                     : hvd__run_fused(resp, hs);
    } else if (n == 1) {
        status = resp->descs[0].mem == HVD__MEM_DEVICE
                     ? hvd__run_one_device(&resp->descs[0], hs[0], &shared)
                     : hvd__run_one_host(&resp->descs[0], hs[0]);
        if (hs[0])
            hvd__timeline_event(resp->descs[0].name,
                                hvd__phase(&resp->descs[0],
                                           resp->descs[0].count),
                                start, hvd__now());
    }
    hvd__complete_many(hs, (size_t)n, status);
    return shared ? resp->head.status : status;
}
