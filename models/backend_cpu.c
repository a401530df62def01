/* models/backend_cpu.c: the host's backend table (models/backend.h): host
 * memory, and the CBLAS kernels of models/layers.c as they are, but for
 * the convolutions that oneDNN takes in a build with it
 * (models/conv_dnnl.h). */
#include <stdlib.h>
#include <string.h>
#include "models/backend.h"
#include "models/conv_dnnl.h"
#include "models/elem.h"
#include "models/model.h"

static int cpu_alloc(size_t bytes, void **p)
{
    *p = calloc(bytes ? bytes : 1, 1);
    return *p ? MODEL_OK : MODEL_ERR_NOMEM;
}

static int cpu_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes) memmove(dst, src, bytes);
    return MODEL_OK;
}

static int cpu_finish(void) { return MODEL_OK; }

/* Both directions of a copy that overlaps the work, made at once. The
 * host's model reads a batch where the caller put it (dst is src): no
 * copy then. */
static int cpu_copy_now(model__copy_t *c, void *dst, const void *src,
                        size_t bytes)
{
    (void)c;
    return dst == src ? MODEL_OK : cpu_copy(dst, src, bytes);
}

static int cpu_copy_host_wait(model__copy_t *c)
{
    (void)c;
    return MODEL_OK;
}

static void cpu_copy_order(model__copy_t *c) { (void)c; }
static void cpu_copy_release(model__copy_t *c) { memset(c, 0, sizeof *c); }

static void *cpu_stream(void) { return NULL; }

static void cpu_fill(float *x, float value, size_t count)
{
    for (size_t i = 0; i < count; i++) x[i] = value;
}

/* The host convolution works one image at a time, whatever the batch;
 * oneDNN's backward makes an accumulated dw and db there first. */
static size_t cpu_conv2d_scratch_count(const model__conv_shape_t *s,
                                       int batch_max)
{
    (void)batch_max;
    size_t n = model__conv2d_scratch_count(s);
    size_t dnnl = model__dnnl_scratch_count(s);
    return dnnl > n ? dnnl : n;
}

/* oneDNN where it takes the layer (models/conv_dnnl.h), else, or when it
 * fails, im2col + BLAS. */
static void cpu_conv2d_forward(const model__conv_shape_t *s, const float *x,
                               const float *w, const float *b, float *y,
                               int batch, float *scratch)
{
    if (model__dnnl_takes(s) &&
        model__dnnl_conv2d_forward(s, x, w, b, y, batch) == MODEL_OK)
        return;
    model__conv2d_forward(s, x, w, b, y, batch, scratch);
}

static void cpu_conv2d_backward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *dy, float *dx,
                                float *dw, float *db, int batch,
                                float *scratch, int accumulate)
{
    if (model__dnnl_takes(s) &&
        model__dnnl_conv2d_backward(s, x, w, dy, dx, dw, db, batch, scratch,
                                    accumulate) == MODEL_OK)
        return;
    model__conv2d_backward(s, x, w, dy, dx, dw, db, batch, scratch,
                           accumulate);
}

static void cpu_sgd_step(const float *p, const float *g, float *out,
                         float *velocity, size_t count, float lr, float mu,
                         float wd, int nesterov)
{
    for (size_t i = 0; i < count; i++)
        out[i] = model__sgd_elem(p[i], g[i], velocity ? &velocity[i] : NULL,
                                 lr, mu, wd, nesterov);
}

static const model__backend_t model__cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .release = free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .finish = cpu_finish,
    .stream = cpu_stream,
    .fill = cpu_fill,
    .host_alloc = cpu_alloc,
    .host_release = free,
    .copy_start = cpu_copy_now,
    .fetch_start = cpu_copy_now,
    .copy_host_wait = cpu_copy_host_wait,
    .copy_order = cpu_copy_order,
    .copy_release = cpu_copy_release,
    .linear_forward = model__linear_forward,
    .linear_backward = model__linear_backward,
    .conv2d_scratch_count = cpu_conv2d_scratch_count,
    .conv2d_forward = cpu_conv2d_forward,
    .conv2d_backward = cpu_conv2d_backward,
    .relu_forward = model__relu_forward,
    .relu_backward = model__relu_backward,
    .maxpool_forward = model__maxpool_forward,
    .maxpool_backward = model__maxpool_backward,
    .dropout_forward = model__dropout_forward,
    .dropout_backward = model__dropout_backward,
    .softmax_xent = model__softmax_xent,
    .sgd_step = cpu_sgd_step,
};

const model__backend_t *model__backend_cpu(void) { return &model__cpu; }
