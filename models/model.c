/* models/model.c: the mlp and cnn as sequential lists of layers, their
 * memory (one parameter slab, one gradient slab, one activation slab and
 * its gradient twin), weight initialisation, forward, loss and a backward
 * that reports each parameter's gradient as soon as it is final.
 *
 * A model is described by a short table of layer specs; a new model is a
 * new table. The tables fix the layers, not the input: the input shape
 * (channels, height, width) is model_init_shape's, and the shapes of the
 * convolutions, poolings and of the first linear layer follow from it
 * (1x28x28 for Fashion-MNIST, 3x32x32 for CIFAR-10).
 *
 * The graph is the same on every device: each layer is a call through the
 * model's backend table (models/backend.h), and all memory comes from it.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "models/backend.h"
#include "models/elem.h"
#include "models/model.h"
#include "models/model_internal.h"
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

const char *model_strerror(int status)
{
    switch (status) {
#define MODEL_STATUS_TEXT(name, value, text)                                   \
    case MODEL_##name:                                                         \
        return text;
        MODEL_STATUS_MAP(MODEL_STATUS_TEXT)
#undef MODEL_STATUS_TEXT
    }
    return "unknown status";
}

int model_flush_denormals(void)
{
#if defined(__SSE__)
    /* MXCSR bits: FTZ (15) and DAZ (6). */
    _mm_setcsr(_mm_getcsr() | 0x8000u | 0x0040u);
    return 1;
#else
    return 0;
#endif
}

/* OpenBLAS's thread count; weak, so the programs link with other BLAS. */
void openblas_set_num_threads(int num_threads) __attribute__((weak));
void omp_set_num_threads(int num_threads) __attribute__((weak));

void model_setup_cpu(void)
{
    /* The variable alone is too late for an OpenBLAS already loaded. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 0);
    if (openblas_set_num_threads) openblas_set_num_threads(1);
    /* oneDNN's OpenMP read the variable when it loaded. */
    if (omp_set_num_threads) omp_set_num_threads(1);
    model_flush_denormals();
}

/* ---- devices ---- */

_Static_assert(sizeof(int) == sizeof(int32_t),
               "model_loss's int labels go to the device as int32");

static const model__backend_t *backend_of(model_device_t device,
                                          const char **why)
{
    model__conv_ask_t ask;
    if (model__conv_ask(&ask, why)) return NULL;
    switch (device) {
    case MODEL_DEVICE_CPU:
        return model__backend_cpu();
    case MODEL_DEVICE_CUDA:
        return model__backend_cuda(why);
    }
    if (why) *why = "unknown device";
    return NULL;
}

int model_device_available(model_device_t device, const char **why)
{
    return backend_of(device, why) != NULL;
}

const char *model_device_name(model_device_t device)
{
    return device == MODEL_DEVICE_CPU    ? "cpu"
           : device == MODEL_DEVICE_CUDA ? "cuda"
                                         : NULL;
}

const char *model_backend_name(const model_t *m)
{
    return m && m->backend ? m->backend->name : "none";
}

void *model_stream(const model_t *m)
{
    return m && m->backend ? m->backend->stream() : NULL;
}

/* ---- model tables ---- */

typedef struct {
    model__layer_kind_t kind;
    const char *name; /* parameter prefix ("fc1"), NULL without parameters */
    int out;          /* linear: out features; conv: out channels */
    int k, stride, pad;
    float dropout_p;
} layer_spec_t;

static const layer_spec_t mlp_spec[] = {
    {MODEL__LINEAR, "fc1", 256, 0, 0, 0, 0}, {MODEL__RELU, NULL, 0, 0, 0, 0, 0},
    {MODEL__LINEAR, "fc2", 128, 0, 0, 0, 0}, {MODEL__RELU, NULL, 0, 0, 0, 0, 0},
    {MODEL__LINEAR, "fc3", 10, 0, 0, 0, 0},
};

/* 1x28x28 -> 32x28x28 -> 32x14x14 -> 64x14x14 -> 64x7x7 -> 3136 -> 128 -> 10
 * 3x32x32 -> 32x32x32 -> 32x16x16 -> 64x16x16 -> 64x8x8 -> 4096 -> 128 -> 10 */
/* Each block pools before its ReLU: relu(maxpool(x)) = maxpool(relu(x)),
 * gradient included (ReLU is monotone; a window whose maximum is <= 0
 * passes no gradient either way), on a quarter of the elements. */
static const layer_spec_t cnn_spec[] = {
    {MODEL__CONV2D, "conv1", 32, 5, 1, 2, 0},
    {MODEL__MAXPOOL, NULL, 0, 2, 2, 0, 0},
    {MODEL__RELU, NULL, 0, 0, 0, 0, 0},
    {MODEL__CONV2D, "conv2", 64, 5, 1, 2, 0},
    {MODEL__MAXPOOL, NULL, 0, 2, 2, 0, 0},
    {MODEL__RELU, NULL, 0, 0, 0, 0, 0},
    {MODEL__FLATTEN, NULL, 0, 0, 0, 0, 0},
    {MODEL__LINEAR, "fc1", 128, 0, 0, 0, 0},
    {MODEL__RELU, NULL, 0, 0, 0, 0, 0},
    {MODEL__LINEAR, "fc2", 10, 0, 0, 0, 0},
};

/* model_init's input, Fashion-MNIST's; the bounds of model_init_shape's:
 * each side at most IN_SIDE_MAX (as the data readers), and at most
 * IN_COUNT_MAX floats per sample, so that every layer's sizes fit an int. */
enum { IN_C = 1, IN_H = 28, IN_W = 28 };
enum { IN_SIDE_MAX = 4096, IN_COUNT_MAX = 1 << 24 };

/* Registers parameter tensor `suffix` of layer `prefix`; returns its index.
 * Its offset comes later (lay_out_params). */
static long add_param(model_t *m, const char *prefix, const char *suffix,
                      int ndim, const int *shape)
{
    model_param_t *p = &m->params[m->num_params];
    snprintf(p->name, sizeof(p->name), "%s.%s", prefix, suffix);
    p->ndim = ndim;
    p->count = 1;
    for (int d = 0; d < ndim; d++) {
        p->shape[d] = shape[d];
        p->count *= (size_t)shape[d];
    }
    m->param_count += p->count;
    return (long)m->num_params++;
}

/* Tensors lie in the slabs in the order backward finishes their gradients:
 * last parameter first. The allreduces the DistributedOptimizer starts in
 * that order then tile one range of grad_slab, which the engine reduces in
 * place instead of packing them into its fusion buffer. */
static void lay_out_params(model_t *m)
{
    size_t at = 0;
    for (size_t i = m->num_params; i-- > 0;) {
        m->params[i].offset = at;
        at += m->params[i].count;
    }
}

/* Fills in the layers' shapes and parameter records from the spec and the
 * input shape in m (no buffers yet): the activation floats per sample
 * (flatten shares its input's), and the int32 argmax and scratch counts.
 * Returns MODEL_ERR_ARG when a convolution's or pooling's window does not
 * fit in its (padded) input: the input is too small for the model. */
static int plan_layers(model_t *m, const layer_spec_t *spec, int n,
                       size_t *act_count, size_t *argmax_count,
                       size_t *scratch_count)
{
    int c = m->in_channels, h = m->in_height, w = m->in_width;
    *act_count = *argmax_count = *scratch_count = 0;
    for (int i = 0; i < n; i++) {
        struct model__layer *l = &m->layers[i];
        model__conv_shape_t *s = &l->s;
        memset(l, 0, sizeof(*l));
        l->kind = spec[i].kind;
        l->w_idx = l->b_idx = -1;
        l->in_count = (size_t)c * h * w;
        *s = (model__conv_shape_t){.in_c = c,
                                   .in_h = h,
                                   .in_w = w,
                                   .out_c = c,
                                   .k = spec[i].k,
                                   .stride = spec[i].stride,
                                   .pad = spec[i].pad,
                                   .out_h = h,
                                   .out_w = w};
        if (l->kind == MODEL__LINEAR) {
            int shape[2] = {spec[i].out, (int)l->in_count};
            s->in_c = (int)l->in_count;
            s->out_c = spec[i].out;
            s->in_h = s->in_w = s->out_h = s->out_w = 1;
            l->w_idx = add_param(m, spec[i].name, "weight", 2, shape);
            l->b_idx = add_param(m, spec[i].name, "bias", 1, shape);
        } else if (l->kind == MODEL__CONV2D || l->kind == MODEL__MAXPOOL) {
            if (h + 2 * s->pad < s->k || w + 2 * s->pad < s->k)
                return MODEL_ERR_ARG; /* e.g. a cnn on 3x3 images */
            s->out_h = (h + 2 * s->pad - s->k) / s->stride + 1;
            s->out_w = (w + 2 * s->pad - s->k) / s->stride + 1;
            if (l->kind == MODEL__CONV2D) {
                int shape[4] = {spec[i].out, c, s->k, s->k};
                s->out_c = spec[i].out;
                l->w_idx = add_param(m, spec[i].name, "weight", 4, shape);
                l->b_idx = add_param(m, spec[i].name, "bias", 1, shape);
                size_t sc =
                    m->backend->conv2d_scratch_count(s, m->batch_max);
                if (sc > *scratch_count) *scratch_count = sc;
            }
        } else if (l->kind == MODEL__DROPOUT) {
            l->dropout_p = spec[i].dropout_p;
        }
        c = s->out_c;
        h = s->out_h;
        w = s->out_w;
        l->out_count = (size_t)c * h * w;
        if (l->kind == MODEL__MAXPOOL) *argmax_count += l->out_count;
        if (l->kind == MODEL__DROPOUT) *act_count += l->out_count; /* mask */
        if (l->kind != MODEL__FLATTEN) *act_count += l->out_count;
    }
    return MODEL_OK;
}

/* Points each layer's buffers into the slabs, batch_max samples each. */
static void carve_layers(model_t *m, int32_t *argmax)
{
    size_t bm = (size_t)m->batch_max, off = 0;
    for (int i = 0; i < m->num_layers; i++) {
        struct model__layer *l = &m->layers[i];
        if (l->kind == MODEL__FLATTEN) { /* a view of its input */
            l->out = m->layers[i - 1].out;
            l->dout = m->layers[i - 1].dout;
            continue;
        }
        l->out = m->act_slab + off;
        l->dout = m->dact_slab + off;
        off += bm * l->out_count;
        if (l->kind == MODEL__DROPOUT) {
            l->mask = m->act_slab + off;
            off += bm * l->out_count;
        }
        if (l->kind == MODEL__MAXPOOL) {
            l->argmax = argmax;
            argmax += bm * l->out_count;
        }
    }
}

/* He uniform weights, zero biases, in slab order from one generator,
 * made on the host and copied to the model's memory. */
static int init_weights(model_t *m, uint64_t seed)
{
    uint64_t rng = seed;
    float *host = calloc(m->param_count + 1, sizeof(float));
    if (!host) return MODEL_ERR_NOMEM;
    for (int i = 0; i < m->num_layers; i++) {
        struct model__layer *l = &m->layers[i];
        if (l->w_idx < 0) continue;
        const model_param_t *p = &m->params[l->w_idx];
        size_t fan_in = p->count / (size_t)p->shape[0];
        float bound = sqrtf(6.0f / (float)fan_in);
        float *w = host + p->offset;
        for (size_t j = 0; j < p->count; j++)
            w[j] = (2.0f * model__rng_uniform(&rng) - 1.0f) * bound;
    }
    int status = m->backend->upload(m->param_slab, host,
                                    m->param_count * sizeof(float));
    free(host);
    return status;
}

/* bytes of the backend's memory into *p; 0 bytes get one, so that every
 * buffer is a real allocation. */
static int device_alloc(const model_t *m, size_t count, size_t size, void **p)
{
    return m->backend->alloc((count ? count : 1) * size, p);
}

int model_init(model_t *m, const char *kind, int batch_max, uint64_t seed)
{
    return model_init_shape(m, kind, IN_C, IN_H, IN_W, batch_max, seed);
}

int model_init_shape(model_t *m, const char *kind, int channels, int height,
                     int width, int batch_max, uint64_t seed)
{
    return model_init_device(m, MODEL_DEVICE_CPU, kind, channels, height,
                             width, batch_max, seed);
}

int model_init_device(model_t *m, model_device_t device, const char *kind,
                      int channels, int height, int width, int batch_max,
                      uint64_t seed)
{
    const layer_spec_t *spec;
    int n, status = MODEL_ERR_NOMEM;
    if (!m) return MODEL_ERR_ARG;
    memset(m, 0, sizeof(*m));
    if (!model_device_name(device)) return MODEL_ERR_ARG;
    if (!kind || batch_max < 1 || channels < 1 || height < 1 || width < 1 ||
        channels > IN_SIDE_MAX || height > IN_SIDE_MAX ||
        width > IN_SIDE_MAX ||
        (long long)channels * height * width > IN_COUNT_MAX)
        return MODEL_ERR_ARG;
    if (!strcmp(kind, "mlp")) {
        spec = mlp_spec;
        n = (int)(sizeof(mlp_spec) / sizeof(mlp_spec[0]));
    } else if (!strcmp(kind, "cnn")) {
        spec = cnn_spec;
        n = (int)(sizeof(cnn_spec) / sizeof(cnn_spec[0]));
    } else {
        return MODEL_ERR_ARG;
    }
    m->backend = backend_of(device, NULL);
    if (!m->backend)
        return device == MODEL_DEVICE_CPU ? MODEL_ERR_ARG : MODEL_ERR_CUDA;
    m->device = device;
    snprintf(m->kind, sizeof(m->kind), "%s", kind);
    m->batch_max = batch_max;
    m->num_layers = n;
    m->in_channels = channels;
    m->in_height = height;
    m->in_width = width;
    m->in_count = channels * height * width;
    m->layers = calloc((size_t)n, sizeof(*m->layers));
    if (!m->layers) goto err_free_model;
    m->params = calloc(2 * (size_t)n, sizeof(*m->params));
    if (!m->params) goto err_free_model;
    size_t act_count, argmax_count, scratch_count;
    status = plan_layers(m, spec, n, &act_count, &argmax_count,
                         &scratch_count);
    if (status != MODEL_OK) goto err_free_model;
    lay_out_params(m);
    status = MODEL_ERR_NOMEM;
    m->num_classes = (int)m->layers[n - 1].out_count;
    /* Large inputs times batch_max could overflow the byte counts. */
    size_t bm = (size_t)batch_max;
    if (act_count > SIZE_MAX / sizeof(float) / bm ||
        argmax_count > SIZE_MAX / sizeof(int32_t) / bm - 1 ||
        m->param_count > SIZE_MAX / sizeof(float))
        goto err_free_model;

    /* The mlp has no max-pool and uses none of argmax_slab. */
    void **bufs[] = {(void **)&m->param_slab, (void **)&m->grad_slab,
                     (void **)&m->act_slab,   (void **)&m->dact_slab,
                     (void **)&m->scratch,    (void **)&m->argmax_slab,
                     (void **)&m->labels,     (void **)&m->losses,
                     (void **)&m->input_buf};
    size_t counts[] = {m->param_count, m->param_count, act_count * bm,
                       act_count * bm, scratch_count, argmax_count * bm,
                       bm, bm, bm * (size_t)m->in_count};
    size_t sizes[] = {sizeof(float), sizeof(float),   sizeof(float),
                      sizeof(float), sizeof(float),   sizeof(int32_t),
                      sizeof(int32_t), sizeof(double), sizeof(float)};
    /* The host's model reads its input where the caller has it. */
    size_t nbufs = sizeof bufs / sizeof bufs[0] - (device == MODEL_DEVICE_CPU);
    for (size_t b = 0; b < nbufs; b++)
        if ((status = device_alloc(m, counts[b], sizes[b], bufs[b])) !=
            MODEL_OK)
            goto err_free_model;
    /* Pinned on a GPU: the losses' copy there is queued, not waited for. */
    status = m->backend->host_alloc(bm * sizeof(double),
                                    (void **)&m->host_losses);
    if (status != MODEL_OK) goto err_free_model;
    status = MODEL_ERR_NOMEM;
    m->host_logits = malloc(bm * (size_t)m->num_classes * sizeof(float));
    m->loss_copy = calloc(1, sizeof *m->loss_copy);
    if (!m->host_logits || !m->loss_copy) goto err_free_model;
    carve_layers(m, m->argmax_slab);
    if ((status = init_weights(m, seed)) != MODEL_OK) goto err_free_model;
    m->rng_state = model__rng_next(&seed); /* dropout's own stream */
    return MODEL_OK;

err_free_model:
    model_free(m); /* frees whatever was allocated, zeroes *m */
    return status;
}

void model_free(model_t *m)
{
    if (!m) return;
    if (m->backend) {
        void *bufs[] = {m->param_slab, m->grad_slab, m->act_slab,
                        m->dact_slab,  m->scratch,   m->argmax_slab,
                        m->labels,     m->losses,    m->input_buf};
        if (m->loss_copy) m->backend->copy_release(m->loss_copy);
        for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++)
            m->backend->release(bufs[b]);
        m->backend->host_release(m->host_losses);
    }
    free(m->layers);
    free(m->params);
    free(m->loss_copy);
    free(m->host_logits);
    memset(m, 0, sizeof(*m));
}

/* ---- forward, loss, backward ---- */

static const float *W(const model_t *m, long idx)
{
    return m->param_slab + m->params[idx].offset;
}

int model_forward(model_t *m, const float *x, int batch, int train)
{
    if (!m || !m->layers || !x || batch < 1 || batch > m->batch_max)
        return MODEL_ERR_ARG;
    const model__backend_t *be = m->backend;
    m->input = x;
    m->batch = batch;
    m->train = train;
    m->have_loss = 0;
    for (int i = 0; i < m->num_layers; i++) {
        struct model__layer *l = &m->layers[i];
        const float *in = i ? m->layers[i - 1].out : x;
        size_t count = (size_t)batch * l->out_count;
        switch (l->kind) {
        case MODEL__LINEAR:
            be->linear_forward(in, W(m, l->w_idx), W(m, l->b_idx), l->out,
                               batch, l->s.in_c, l->s.out_c);
            break;
        case MODEL__CONV2D:
            be->conv2d_forward(&l->s, in, W(m, l->w_idx), W(m, l->b_idx),
                               l->out, batch, m->scratch);
            break;
        case MODEL__RELU:
            be->relu_forward(in, l->out, count);
            break;
        case MODEL__MAXPOOL:
            be->maxpool_forward(&l->s, in, l->out, l->argmax, batch);
            break;
        case MODEL__FLATTEN:
            break;
        case MODEL__DROPOUT:
            be->dropout_forward(in, l->out, l->mask, count, l->dropout_p,
                                train, m->rng_state);
            if (train) m->rng_state += count * MODEL__RNG_GAMMA;
            break;
        }
    }
    return MODEL_OK;
}

int model_forward_host(model_t *m, const float *x, int batch, int train)
{
    if (!m || !m->layers || !x || batch < 1 || batch > m->batch_max)
        return MODEL_ERR_ARG;
    if (!m->input_buf) return model_forward(m, x, batch, train);
    int status = m->backend->upload(m->input_buf, x, (size_t)batch *
                                                         m->in_count *
                                                         sizeof *x);
    return status == MODEL_OK ? model_forward(m, m->input_buf, batch, train)
                              : status;
}

int model_upload(const model_t *m, void *dst, const void *host_src,
                 size_t bytes)
{
    if (!m || !m->backend || (bytes && (!dst || !host_src)))
        return MODEL_ERR_ARG;
    return m->backend->upload(dst, host_src, bytes);
}

int model_download(const model_t *m, void *host_dst, const void *src,
                   size_t bytes)
{
    if (!m || !m->backend || (bytes && (!host_dst || !src)))
        return MODEL_ERR_ARG;
    return m->backend->download(host_dst, src, bytes);
}

const float *model_logits(const model_t *m)
{
    return m && m->layers ? m->layers[m->num_layers - 1].out : NULL;
}

int model__labels_check(const model_t *m, const int *labels, int batch)
{
    for (int n = 0; n < batch; n++)
        if (labels[n] < 0 || labels[n] >= m->num_classes) return MODEL_ERR_ARG;
    return MODEL_OK;
}

int model_loss(model_t *m, const int *labels, int batch, float *loss)
{
    if (!m || !m->layers || !labels || !loss) return MODEL_ERR_ARG;
    if (!m->batch) return MODEL_ERR_STATE;
    if (batch != m->batch || model__labels_check(m, labels, batch))
        return MODEL_ERR_ARG;
    int status = m->backend->upload(m->labels, labels,
                                    (size_t)batch * sizeof *labels);
    if (status == MODEL_OK) status = model__loss_queue(m, m->labels);
    return status == MODEL_OK ? model_loss_read(m, loss) : status;
}

int model__loss_queue(model_t *m, const int32_t *labels)
{
    const model__backend_t *be = m->backend;
    struct model__layer *last = &m->layers[m->num_layers - 1];
    int batch = m->batch;
    be->softmax_xent(last->out, labels, last->dout, m->losses, batch,
                     m->num_classes);
    int status = be->fetch_start(m->loss_copy, m->host_losses, m->losses,
                                 (size_t)batch * sizeof *m->losses);
    if (status != MODEL_OK) return status;
    m->loss_pending = batch;
    m->have_loss = 1;
    return MODEL_OK;
}

int model_loss_read(model_t *m, float *loss)
{
    if (!m || !m->layers || !loss) return MODEL_ERR_ARG;
    if (!m->loss_pending) return MODEL_ERR_STATE;
    int batch = m->loss_pending;
    m->loss_pending = 0;
    int status = m->backend->copy_host_wait(m->loss_copy);
    if (status != MODEL_OK) return status;
    double total = 0;
    for (int n = 0; n < batch; n++) total += m->host_losses[n];
    *loss = (float)(total / batch);
    return MODEL_OK;
}

/* Gradients of layer l's parameters (dw, db non-NULL) or of its input
 * (din non-NULL) from l->dout. */
static void layer_backward(model_t *m, struct model__layer *l, const float *in,
                           float *din, float *dw, float *db)
{
    const model__backend_t *be = m->backend;
    int batch = m->batch, acc = m->grad_accumulate;
    size_t count = (size_t)batch * l->out_count;
    switch (l->kind) {
    case MODEL__LINEAR:
        be->linear_backward(in, W(m, l->w_idx), l->dout, din, dw, db, batch,
                            l->s.in_c, l->s.out_c, acc);
        break;
    case MODEL__CONV2D:
        be->conv2d_backward(&l->s, in, W(m, l->w_idx), l->dout, din, dw, db,
                            batch, m->scratch, acc);
        break;
    case MODEL__RELU:
        if (din) be->relu_backward(l->out, l->dout, din, count);
        break;
    case MODEL__MAXPOOL:
        if (din) be->maxpool_backward(&l->s, l->dout, l->argmax, din, batch);
        break;
    case MODEL__FLATTEN:
        break; /* din is dout */
    case MODEL__DROPOUT:
        if (din) be->dropout_backward(l->dout, l->mask, din, count);
        break;
    }
}

int model_backward(model_t *m, model_grad_hook_t hook, void *hook_ctx)
{
    if (!m || !m->layers) return MODEL_ERR_ARG;
    if (!m->have_loss) return MODEL_ERR_STATE;
    for (int i = m->num_layers - 1; i >= 0; i--) {
        struct model__layer *l = &m->layers[i];
        const float *in = i ? m->layers[i - 1].out : m->input;
        if (l->w_idx >= 0) {
            layer_backward(m, l, in, NULL,
                           m->grad_slab + m->params[l->w_idx].offset,
                           m->grad_slab + m->params[l->b_idx].offset);
            /* Final now: communication may start while backward goes on.
             * On a device, once the queued work is done, unless the
             * reader orders itself after it on model_stream. */
            if (hook) {
                int rc = m->device == MODEL_DEVICE_CPU || m->hooks_queued
                             ? MODEL_OK
                             : m->backend->finish();
                if (rc) return rc;
                rc = hook(hook_ctx, (size_t)l->b_idx);
                if (!rc) rc = hook(hook_ctx, (size_t)l->w_idx);
                if (rc) return rc;
            }
        }
        if (i > 0) /* the model's input needs no gradient */
            layer_backward(m, l, in, m->layers[i - 1].dout, NULL, NULL);
    }
    return MODEL_OK;
}

void model_zero_grad(model_t *m)
{
    if (m && m->grad_slab) m->backend->fill(m->grad_slab, 0.0f, m->param_count);
}

/* ---- accessors ---- */

size_t model_num_params(const model_t *m)
{
    return m ? m->num_params : 0;
}

const char *model_param_name(const model_t *m, size_t param_idx)
{
    return m && param_idx < m->num_params ? m->params[param_idx].name : NULL;
}

float *model_param_data(const model_t *m, size_t param_idx)
{
    return m && param_idx < m->num_params
               ? m->param_slab + m->params[param_idx].offset
               : NULL;
}

float *model_grad_data(const model_t *m, size_t param_idx)
{
    return m && param_idx < m->num_params
               ? m->grad_slab + m->params[param_idx].offset
               : NULL;
}

size_t model_param_count(const model_t *m, size_t param_idx)
{
    return m && param_idx < m->num_params ? m->params[param_idx].count : 0;
}

int model_predict(const model_t *m, int *pred, const int *labels, int *correct)
{
    if (!m || !m->layers || !m->batch || (!pred && !correct) ||
        (correct && !labels))
        return MODEL_ERR_ARG;
    int k = m->num_classes, hits = 0;
    float *z = m->host_logits;
    int status = m->backend->download(z, model_logits(m),
                                      (size_t)m->batch * k * sizeof *z);
    if (status != MODEL_OK) return status;
    for (int n = 0; n < m->batch; n++) {
        int best = 0;
        for (int c = 1; c < k; c++)
            if (z[(size_t)n * k + c] > z[(size_t)n * k + best]) best = c;
        if (pred) pred[n] = best;
        if (labels) hits += best == labels[n];
    }
    if (correct) *correct = hits;
    return MODEL_OK;
}
