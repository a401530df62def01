/* hvd/optimizer.c: the DistributedOptimizer. Backward hands it each
 * gradient as soon as it is final (hvd_dist_opt_grad_ready), which starts
 * that tensor's named allreduce at once, so the engine fuses and reduces
 * while backward goes on; step waits for them all and applies the wrapped
 * optimizer. Also the broadcasts of parameters and optimizer state.
 *
 * Sharded (shard_params), step instead reduces the whole gradient range in
 * one allreduce whose owner of each block steps that block's parameters on
 * the way (hvd__allreduce_apply_async): on one node each rank then updates
 * 1/N of the parameters, and what crosses between the ranks in the gather
 * is new parameters instead of gradients. The update is elementwise, so
 * the parameters are those of the unsharded step: bitwise through shared
 * memory, which sums in rank order; around the ring, whose sums depend on
 * how the gradients are grouped, to float rounding.
 *
 * Device gradients (all of them, or none) take the same path on the
 * device: the mean over passes and the fp16 compression are kernels on
 * the optimizer's stream (ring_dev_t's divide and convert), waited for
 * before the allreduce reads them, and the compressed halves live in
 * device memory. With options.stream (the caller's compute stream) they
 * go on that stream instead and nothing is waited for on the host but
 * the allreduces themselves: each allreduce waits for an event on the
 * stream, and step makes the stream wait for the results (the _stream
 * variants), so backward need not finish a gradient before reporting it.
 * The sharded step updates on the host: it takes host gradients only.
 *
 * Left out: anything about the model itself; hvd sees only named float
 * arrays and a step callback. */
#include <stdlib.h>
#include <string.h>
#include "hvd/api.h"
#include "hvd/config.h"

struct hvd_dist_opt {
    hvd_optimizer_t inner;
    hvd_dist_opt_options_t options;
    size_t ntensors;
    char **names;            /* (ntensors) */
    float **grads;           /* (ntensors) the caller's gradient memory */
    size_t *counts;          /* (ntensors) */
    uint16_t **halves;       /* (ntensors) fp16 copies, when compressing */
    hvd_handle_t *handles;   /* (ntensors) NULL when not in flight */
    uint64_t *reported;      /* (ntensors) passes + 1 when last made ready */
    uint64_t passes;         /* backward passes done (hvd_dist_opt_step) */
    int pass;                /* backward passes done in this step */
    size_t total;            /* elements over all tensors */
    float *base;             /* sharded: where the gradients' range starts */
    int update_status;       /* sharded: the first failure of inner.update */
    const ring_dev_t *dev;   /* the gradients are its memory; NULL: host */
    ring_stream_t *stream;   /* dev's: passes' means and conversions;
                                the caller's (options.stream), or ours */
};

/* Whether the caller's stream orders the gradients (options.stream). */
static int hvd__dist_opt_on_caller(const hvd_dist_opt_t *opt)
{
    return opt->options.stream != NULL;
}

void hvd_dist_opt_free(hvd_dist_opt_t **optp)
{
    hvd_dist_opt_t *opt = optp ? *optp : NULL;
    if (!opt) return;
    for (size_t i = 0; i < opt->ntensors; i++) {
        if (opt->handles && opt->handles[i]) hvd_wait(opt->handles[i]);
        if (opt->names) free(opt->names[i]);
        if (opt->halves && opt->dev)
            opt->dev->release(opt->halves[i]);
        else if (opt->halves)
            free(opt->halves[i]);
    }
    if (opt->dev && !hvd__dist_opt_on_caller(opt))
        opt->dev->stream_destroy(opt->stream);
    free(opt->names);
    free(opt->grads);
    free(opt->counts);
    free(opt->halves);
    free(opt->handles);
    free(opt->reported);
    free(opt);
    *optp = NULL;
}

/* Whether the gradients tile one range, in any order (no two overlap, and
 * together they span exactly their total); then opt->base is its start.
 * O(n^2) in the tensors of one model, once. */
static int hvd__dist_opt_tile(hvd_dist_opt_t *opt)
{
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (size_t i = 0; i < opt->ntensors; i++) {
        if (!opt->counts[i]) continue;
        uintptr_t si = (uintptr_t)opt->grads[i];
        uintptr_t ei = (uintptr_t)(opt->grads[i] + opt->counts[i]);
        for (size_t j = i + 1; j < opt->ntensors; j++)
            if (opt->counts[j] && si < (uintptr_t)(opt->grads[j] +
                                                   opt->counts[j]) &&
                (uintptr_t)opt->grads[j] < ei)
                return 0;
        if (si < low) {
            low = si;
            opt->base = opt->grads[i];
        }
        if (ei > high) high = ei;
    }
    return opt->total == 0 || high - low == opt->total * sizeof(float);
}

/* Whether the gradients are device memory (then opt->dev and its stream)
 * or host memory: all alike; a sharded step takes host memory. */
static int hvd__dist_opt_kind(hvd_dist_opt_t *opt)
{
    size_t first = opt->ntensors;
    for (size_t i = 0; i < opt->ntensors; i++) {
        if (!opt->counts[i]) continue;
        int device = ring_is_device_memory(opt->grads[i]);
        if (device < 0) {
            hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: grads[%zu]'s "
                     "memory kind cannot be told (CUDA's error above)", i);
            return device;
        }
        if (first == opt->ntensors) {
            first = i;
            opt->dev = device ? ring_dev() : NULL;
        } else if (device != (opt->dev != NULL)) {
            hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: grads[%zu] is %s "
                     "memory but grads[%zu] is %s: the gradients must all "
                     "be host or all device memory", i,
                     device ? "device" : "host", first,
                     device ? "host" : "device");
            return HVD_ERR_ARG;
        }
    }
    if (opt->dev && opt->options.shard_params) {
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: shard_params with "
                 "device gradients: the sharded step updates on the host");
        return HVD_ERR_ARG;
    }
    if (opt->options.stream && !opt->dev) {
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: a stream with host "
                 "gradients: options.stream orders device gradients only");
        return HVD_ERR_ARG;
    }
    if (opt->options.stream)
        opt->stream = opt->options.stream;
    else if (opt->dev && opt->dev->stream_create(&opt->stream) != RING_OK) {
        opt->dev = NULL; /* nothing to destroy */
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: no device stream");
        return HVD_ERR_ARG;
    }
    return HVD_OK;
}

/* The fp16 copies the gradients travel as, of the gradients' kind. */
static int hvd__dist_opt_halves(hvd_dist_opt_t *opt)
{
    for (size_t i = 0; i < opt->ntensors; i++) {
        size_t nbytes = opt->counts[i] * sizeof(uint16_t) + 1;
        if (opt->dev) {
            void *p = NULL;
            if (opt->dev->alloc(&p, nbytes) != RING_OK) return HVD_ERR_NOMEM;
            opt->halves[i] = p;
        } else if (!(opt->halves[i] = malloc(nbytes))) {
            return HVD_ERR_NOMEM;
        }
    }
    return HVD_OK;
}

int hvd_dist_opt_create(hvd_dist_opt_t **optp, hvd_optimizer_t inner,
                        size_t ntensors, const char *const *names,
                        float *const *grads, const size_t *counts,
                        const hvd_dist_opt_options_t *options)
{
    hvd_dist_opt_options_t defaults = {1, 0, HVD_AVERAGE, NULL, NULL};
    const hvd_dist_opt_options_t *o = options ? options : &defaults;
    if (!optp || !inner.step || (ntensors && (!names || !grads || !counts)) ||
        o->backward_passes_per_step < 1 ||
        (o->op != HVD_AVERAGE && o->op != HVD_SUM)) {
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: invalid argument "
                 "(NULL array or step, backward_passes_per_step < 1, or an "
                 "op other than average or sum)");
        return HVD_ERR_ARG;
    }
    if (o->shard_params && (!inner.update || o->fp16_compression)) {
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: shard_params needs %s",
                 !inner.update ? "inner.update"
                               : "float32 gradients (not fp16_compression)");
        return HVD_ERR_ARG;
    }
    hvd_dist_opt_t *opt = calloc(1, sizeof *opt);
    *optp = opt;
    if (!opt) return HVD_ERR_NOMEM;
    opt->inner = inner;
    opt->options = *o;
    opt->ntensors = ntensors;
    opt->names = calloc(ntensors + 1, sizeof *opt->names);
    opt->grads = calloc(ntensors + 1, sizeof *opt->grads);
    opt->counts = calloc(ntensors + 1, sizeof *opt->counts);
    opt->halves = calloc(ntensors + 1, sizeof *opt->halves);
    opt->handles = calloc(ntensors + 1, sizeof *opt->handles);
    opt->reported = calloc(ntensors + 1, sizeof *opt->reported);
    if (!opt->names || !opt->grads || !opt->counts || !opt->halves ||
        !opt->handles || !opt->reported)
        goto nomem;
    for (size_t i = 0; i < ntensors; i++) {
        if (!names[i] || (counts[i] && !grads[i])) {
            if (!names[i])
                hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: names[%zu] "
                         "is NULL", i);
            else
                hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: grads[%zu] "
                         "is NULL, with counts[%zu] = %zu", i, i, counts[i]);
            hvd_dist_opt_free(optp);
            return HVD_ERR_ARG;
        }
        opt->names[i] = malloc(strlen(names[i]) + 1);
        if (!opt->names[i]) goto nomem;
        strcpy(opt->names[i], names[i]);
        opt->grads[i] = grads[i];
        opt->counts[i] = counts[i];
        opt->total += counts[i];
    }
    int status = hvd__dist_opt_kind(opt);
    if (status != HVD_OK) {
        hvd_dist_opt_free(optp);
        return status;
    }
    if (o->fp16_compression && hvd__dist_opt_halves(opt) != HVD_OK)
        goto nomem;
    if (o->shard_params && !hvd__dist_opt_tile(opt)) {
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_create: shard_params: the "
                 "gradients do not lie back to back in one range; a "
                 "sharded step reduces one range");
        hvd_dist_opt_free(optp);
        return HVD_ERR_ARG;
    }
    return HVD_OK;
nomem:
    hvd_dist_opt_free(optp);
    return HVD_ERR_NOMEM;
}

/* n accumulated gradients become their mean over the step's passes. */
static void hvd__dist_opt_mean_of_passes(const hvd_dist_opt_t *opt, float *g,
                                         size_t n)
{
    int k = opt->options.backward_passes_per_step;
    if (k > 1)
        for (size_t j = 0; j < n; j++) g[j] /= (float)k;
}

/* The same with device gradients, and the compression: queued on the
 * optimizer's stream and done before the allreduce reads them (on the
 * caller's stream, ordered before the allreduce's event). */
static int hvd__dist_opt_prepare_device(hvd_dist_opt_t *opt, size_t i)
{
    const ring_dev_t *dev = opt->dev;
    int k = opt->options.backward_passes_per_step, s = RING_OK;
    if (k > 1)
        s = dev->divide(opt->grads[i], opt->counts[i], RING_FLOAT32, k,
                        opt->stream);
    if (s == RING_OK && opt->options.fp16_compression)
        s = dev->convert(opt->halves[i], RING_FLOAT16, opt->grads[i],
                         RING_FLOAT32, opt->counts[i], opt->stream);
    if (s == RING_OK && !hvd__dist_opt_on_caller(opt))
        s = dev->stream_sync(opt->stream);
    return s; /* ring's statuses are hvd's numbers */
}

/* Starts tensor i's allreduce: the last pass of a step only. */
static int hvd__dist_opt_start(hvd_dist_opt_t *opt, size_t i)
{
    float *g = opt->grads[i];
    size_t n = opt->counts[i];
    if (opt->dev) {
        int s = hvd__dist_opt_prepare_device(opt, i);
        if (s != HVD_OK) return s;
    } else {
        hvd__dist_opt_mean_of_passes(opt, g, n);
        if (opt->options.fp16_compression)
            ring_f32_to_f16_array(opt->halves[i], g, n);
    }
    void *buf = g;
    hvd_dtype_t dtype = HVD_FLOAT32;
    if (opt->options.fp16_compression) {
        buf = opt->halves[i];
        dtype = HVD_FLOAT16;
    }
    if (hvd__dist_opt_on_caller(opt))
        return hvd_allreduce_async_stream(buf, buf, n, dtype,
                                          opt->options.op, opt->names[i],
                                          opt->stream, &opt->handles[i]);
    return hvd_allreduce_async(buf, buf, n, dtype, opt->options.op,
                               opt->names[i], &opt->handles[i]);
}

/* The reduced halves back into the gradients. */
static int hvd__dist_opt_expand(hvd_dist_opt_t *opt, size_t i)
{
    if (!opt->dev) {
        ring_f16_to_f32_array(opt->grads[i], opt->halves[i], opt->counts[i]);
        return HVD_OK;
    }
    return opt->dev->convert(opt->grads[i], RING_FLOAT32, opt->halves[i],
                             RING_FLOAT16, opt->counts[i], opt->stream);
}

/* Sharding needs another rank to share with. */
static int hvd__dist_opt_sharded(const hvd_dist_opt_t *opt)
{
    return opt->options.shard_params && hvd_size() > 1;
}

/* ring_apply_t's fn for the sharded step: the owner's update. */
static void hvd__dist_opt_update(void *ctx, size_t first, void *data,
                                 size_t n)
{
    hvd_dist_opt_t *opt = ctx;
    int s = opt->inner.update(opt->inner.ctx, first, data, n);
    if (s != 0 && opt->update_status == 0) opt->update_status = s;
}

/* The sharded step: every gradient, reduced, into new parameters. */
static int hvd__dist_opt_sharded_step(hvd_dist_opt_t *opt)
{
    float *g = opt->base;
    hvd__dist_opt_mean_of_passes(opt, g, opt->total);
    ring_apply_t apply = {hvd__dist_opt_update, opt};
    hvd_handle_t h;
    opt->update_status = 0;
    int status = hvd__allreduce_apply_async(g, opt->options.shard_params,
                                            opt->total, opt->options.op,
                                            "hvd.sharded_step", &apply, &h);
    if (status == HVD_OK) status = hvd_wait(h);
    return status != HVD_OK ? status : opt->update_status;
}

int hvd_dist_opt_grad_ready(hvd_dist_opt_t *opt, size_t i)
{
    if (!opt || i >= opt->ntensors) {
        if (!opt)
            hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_grad_ready: opt is NULL");
        else
            hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_grad_ready: tensor %zu, "
                     "but the optimizer has %zu", i, opt->ntensors);
        return HVD_ERR_ARG;
    }
    /* Once a pass, in every pass (Horovod raises at the second): a hook
     * that fires again is a backward the step was not told of. */
    if (opt->reported[i] == opt->passes + 1) {
        hvd__log(HVD__LOG_ERROR, "gradient '%s' was made ready twice in one "
                 "%s", opt->names[i],
                 opt->options.backward_passes_per_step > 1 ? "backward pass"
                                                           : "step");
        return HVD_ERR_STATE;
    }
    opt->reported[i] = opt->passes + 1;
    if (opt->pass + 1 < opt->options.backward_passes_per_step ||
        hvd__dist_opt_sharded(opt))
        return HVD_OK;
    return hvd__dist_opt_start(opt, i);
}

int hvd_dist_opt_step(hvd_dist_opt_t *opt)
{
    int status = HVD_OK;
    if (!opt) {
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_step: opt is NULL");
        return HVD_ERR_ARG;
    }
    opt->passes++;
    if (++opt->pass < opt->options.backward_passes_per_step) return HVD_OK;
    opt->pass = 0;
    if (hvd__dist_opt_sharded(opt)) return hvd__dist_opt_sharded_step(opt);
    /* A gradient backward never reported still has to be reduced, or the
     * ranks would disagree on what the step made. */
    for (size_t i = 0; i < opt->ntensors; i++)
        if (!opt->handles[i] && status == HVD_OK)
            status = hvd__dist_opt_start(opt, i);
    for (size_t i = 0; i < opt->ntensors; i++) {
        if (!opt->handles[i]) continue;
        int s = hvd__dist_opt_on_caller(opt)
                    ? hvd_wait_stream(opt->handles[i], opt->stream)
                    : hvd_wait(opt->handles[i]);
        opt->handles[i] = NULL;
        if (status == HVD_OK) status = s;
        if (s == HVD_OK && opt->options.fp16_compression)
            s = hvd__dist_opt_expand(opt, i);
        if (status == HVD_OK) status = s;
    }
    if (opt->dev && !hvd__dist_opt_on_caller(opt) && status == HVD_OK)
        status = opt->dev->stream_sync(opt->stream);
    if (status != HVD_OK) return status;
    return opt->inner.step(opt->inner.ctx); /* its statuses are ours */
}

/* ring_apply_t's fn of hvd_dist_opt_sync_state: what the reduction made is
 * dropped; the owner's own state is what every rank receives. */
static void hvd__dist_opt_own_state(void *ctx, size_t first, void *data,
                                    size_t n)
{
    memcpy(data, (const float *)ctx + first, n * sizeof(float));
}

int hvd_dist_opt_sync_state(hvd_dist_opt_t *opt, float *state, size_t count)
{
    const char *bad = !opt                 ? "opt is NULL"
                      : count != opt->total  ? "count is not the parameters' "
                                               "number"
                      : count && !state      ? "state is NULL"
                                             : NULL;
    if (bad) {
        hvd__log(HVD__LOG_ERROR, "hvd_dist_opt_sync_state: %s", bad);
        return HVD_ERR_ARG;
    }
    if (!hvd__dist_opt_sharded(opt)) return HVD_OK;
    ring_apply_t apply = {hvd__dist_opt_own_state, state};
    hvd_handle_t h;
    int status = hvd__allreduce_apply_async(state, state, count, HVD_SUM,
                                            "hvd.sync_state", &apply, &h);
    return status == HVD_OK ? hvd_wait(h) : status;
}

int hvd_broadcast_parameters(float *params, size_t count, int root)
{
    return hvd_broadcast(params, count, HVD_FLOAT32, root,
                         "hvd.broadcast_parameters");
}

int hvd_broadcast_optimizer_state(float *state, size_t count, int root)
{
    return hvd_broadcast(state, count, HVD_FLOAT32, root,
                         "hvd.broadcast_optimizer_state");
}
