/* models/backend_emu.c: the emulated device (models/backend.h): the
 * host's kernels, on memory that is the device's own (its own calloc, or
 * ring's emulated device's, handed over by model_emu_memory, so that hvd
 * sees device memory as it would on a GPU), its kernels each after the
 * stream that model_emu_stream hands over has run what others queued on
 * it (so that hvd's waits queued there hold). Its allocations are
 * remembered, and upload and download check both sides: a program that
 * hands the model host memory where device memory belongs, or the other
 * way round, fails here as it would on a GPU, instead of working by
 * accident because both are host memory. Copies that overlap the work
 * (copy_start) are made at their worst, so that a program that does not
 * wait for one computes otherwise than the host and a test sees it. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "models/backend.h"
#include "models/model.h"

/* The live allocations, [base, base + bytes) each. A model holds about
 * ten. */
static struct {
    pthread_mutex_t mu;
    struct {
        char *base;
        size_t bytes;
    } *items;
    size_t len, cap;
    int failed; /* a check failed since the last finish */
    /* model_emu_memory's; NULL: calloc and free */
    int (*mem_alloc)(void **p, size_t bytes);
    int (*mem_release)(void *p);
    /* model_emu_stream's; NULL: none */
    void *stream;
    int (*sync)(void *stream);
} emu = {.mu = PTHREAD_MUTEX_INITIALIZER};

void model_emu_memory(int (*alloc)(void **p, size_t bytes),
                      int (*release)(void *p))
{
    emu.mem_alloc = alloc && release ? alloc : NULL;
    emu.mem_release = alloc && release ? release : NULL;
}

void model_emu_stream(void *stream, int (*sync)(void *stream))
{
    emu.stream = stream && sync ? stream : NULL;
    emu.sync = stream && sync ? sync : NULL;
}

static void *emu_stream(void) { return emu.stream; }

static void emu_fail(void)
{
    pthread_mutex_lock(&emu.mu);
    emu.failed = 1;
    pthread_mutex_unlock(&emu.mu);
}

/* Before the host runs the device's work: what was queued on the stream
 * runs first; a failure is the device's, said by the next finish. */
static void emu_catch_up(void)
{
    if (emu.sync && emu.sync(emu.stream) != 0) emu_fail();
}

static void emu_free(void *base)
{
    if (emu.mem_release)
        (void)emu.mem_release(base);
    else
        free(base);
}

static int emu_alloc(size_t bytes, void **p)
{
    size_t n = bytes ? bytes : 1;
    char *base = NULL;
    if (!emu.mem_alloc)
        base = calloc(n, 1);
    else if (emu.mem_alloc((void **)&base, n) == 0)
        memset(base, 0, n);
    else
        base = NULL;
    int status = base ? MODEL_OK : MODEL_ERR_NOMEM;
    pthread_mutex_lock(&emu.mu);
    if (base && emu.len == emu.cap) {
        size_t cap = emu.cap ? 2 * emu.cap : 16;
        void *items = realloc(emu.items, cap * sizeof *emu.items);
        if (items) {
            emu.items = items;
            emu.cap = cap;
        }
    }
    if (base && emu.len < emu.cap) {
        emu.items[emu.len].base = base;
        emu.items[emu.len++].bytes = bytes ? bytes : 1;
        *p = base;
    } else if (base) {
        emu_free(base);
        status = MODEL_ERR_NOMEM;
    }
    pthread_mutex_unlock(&emu.mu);
    return status;
}

static void emu_release(void *p)
{
    if (!p) return;
    pthread_mutex_lock(&emu.mu);
    for (size_t i = 0; i < emu.len; i++)
        if (emu.items[i].base == p) {
            emu.items[i] = emu.items[--emu.len];
            break;
        }
    pthread_mutex_unlock(&emu.mu);
    emu_free(p);
}

/* Whether [p, p + bytes) lies within one emulated allocation. */
static int emu_holds(const void *p, size_t bytes)
{
    const char *c = p;
    int held = 0;
    pthread_mutex_lock(&emu.mu);
    for (size_t i = 0; i < emu.len && !held; i++)
        held = c >= emu.items[i].base &&
               bytes <= emu.items[i].bytes &&
               (size_t)(c - emu.items[i].base) <= emu.items[i].bytes - bytes;
    pthread_mutex_unlock(&emu.mu);
    return held;
}

/* Whether a copy from src to dst has each side where it belongs,
 * device_dst saying which side is the device's; a copy that has not is
 * the device's failure. */
static int emu_copy_check(void *dst, const void *src, size_t bytes,
                          int device_dst)
{
    const void *dev = device_dst ? dst : src, *host = device_dst ? src : dst;
    if (emu_holds(dev, bytes) && !emu_holds(host, 1)) return MODEL_OK;
    emu_fail();
    return MODEL_ERR_CUDA;
}

static int emu_copy(void *dst, const void *src, size_t bytes, int device_dst)
{
    emu_catch_up();
    if (!bytes) return MODEL_OK;
    int status = emu_copy_check(dst, src, bytes, device_dst);
    if (status == MODEL_OK) memcpy(dst, src, bytes);
    return status;
}

static int emu_upload(void *dst, const void *host_src, size_t bytes)
{
    return emu_copy(dst, host_src, bytes, 1);
}

static int emu_download(void *host_dst, const void *src, size_t bytes)
{
    return emu_copy(host_dst, src, bytes, 0);
}

static int emu_finish(void)
{
    emu_catch_up();
    pthread_mutex_lock(&emu.mu);
    int failed = emu.failed;
    emu.failed = 0;
    pthread_mutex_unlock(&emu.mu);
    return failed ? MODEL_ERR_CUDA : MODEL_OK;
}

/* Copies that overlap the work, made at their worst: dst is zeroed when
 * the copy starts, as a GPU's copy may be writing it from then on, and
 * host_src is read only when a wait says it must have been, as a GPU's
 * copy may be reading it until then. A reader that does not wait sees
 * zeros (valid numbers and labels of every type, so it computes without
 * faulting, and comparing with the host's numbers shows it); a writer that
 * does not wait changes what arrives. A fetch reads the device in stream
 * order, at its start, and writes host_dst at the wait. */
static void emu_copy_settle(model__copy_t *c)
{
    if (c->dst) memcpy(c->dst, c->held ? c->held : c->src, c->bytes);
    free(c->held);
    c->held = NULL;
    c->dst = NULL;
    c->src = NULL;
    c->bytes = 0;
}

/* An upload (device_dst) or a fetch begins: the copy before it settles
 * first, in stream order. */
static int emu_copy_begin(model__copy_t *c, void *dst, const void *src,
                          size_t bytes, int device_dst)
{
    emu_copy_settle(c);
    emu_catch_up();
    if (!bytes) return MODEL_OK;
    int status = emu_copy_check(dst, src, bytes, device_dst);
    if (status != MODEL_OK) return status;
    if (!device_dst) {
        if (!(c->held = malloc(bytes))) return MODEL_ERR_NOMEM;
        memcpy(c->held, src, bytes);
    }
    memset(dst, 0, bytes);
    c->dst = dst;
    c->src = src;
    c->bytes = bytes;
    return MODEL_OK;
}

static int emu_copy_start(model__copy_t *c, void *dst, const void *host_src,
                          size_t bytes)
{
    return emu_copy_begin(c, dst, host_src, bytes, 1);
}

static int emu_fetch_start(model__copy_t *c, void *host_dst, const void *src,
                           size_t bytes)
{
    return emu_copy_begin(c, host_dst, src, bytes, 0);
}

static int emu_copy_host_wait(model__copy_t *c)
{
    emu_copy_settle(c);
    return MODEL_OK;
}

static void emu_copy_order(model__copy_t *c) { emu_copy_settle(c); }

static void emu_copy_release(model__copy_t *c)
{
    emu_copy_settle(c);
    memset(c, 0, sizeof *c);
}

/* The CPU table's kernel NAME, run by the host once the stream is. */
#define EMU_KERNEL(name, params, args)                                         \
    static void emu_##name params                                              \
    {                                                                          \
        emu_catch_up();                                                        \
        model__backend_cpu()->name args;                                       \
    }
EMU_KERNEL(fill, (float *x, float v, size_t n), (x, v, n))
EMU_KERNEL(linear_forward,
           (const float *x, const float *w, const float *b, float *y, int bt,
            int in, int out),
           (x, w, b, y, bt, in, out))
EMU_KERNEL(linear_backward,
           (const float *x, const float *w, const float *dy, float *dx,
            float *dw, float *db, int bt, int in, int out, int acc),
           (x, w, dy, dx, dw, db, bt, in, out, acc))
EMU_KERNEL(conv2d_forward,
           (const model__conv_shape_t *s, const float *x, const float *w,
            const float *b, float *y, int bt, float *scratch),
           (s, x, w, b, y, bt, scratch))
EMU_KERNEL(conv2d_backward,
           (const model__conv_shape_t *s, const float *x, const float *w,
            const float *dy, float *dx, float *dw, float *db, int bt,
            float *scratch, int acc),
           (s, x, w, dy, dx, dw, db, bt, scratch, acc))
EMU_KERNEL(relu_forward, (const float *x, float *y, size_t n), (x, y, n))
EMU_KERNEL(relu_backward, (const float *y, const float *dy, float *dx,
                           size_t n),
           (y, dy, dx, n))
EMU_KERNEL(maxpool_forward,
           (const model__conv_shape_t *s, const float *x, float *y,
            int32_t *argmax, int bt),
           (s, x, y, argmax, bt))
EMU_KERNEL(maxpool_backward,
           (const model__conv_shape_t *s, const float *dy,
            const int32_t *argmax, float *dx, int bt),
           (s, dy, argmax, dx, bt))
EMU_KERNEL(dropout_forward,
           (const float *x, float *y, float *mask, size_t n, float p,
            int train, uint64_t rng),
           (x, y, mask, n, p, train, rng))
EMU_KERNEL(dropout_backward,
           (const float *dy, const float *mask, float *dx, size_t n),
           (dy, mask, dx, n))
EMU_KERNEL(softmax_xent,
           (const float *logits, const int32_t *labels, float *dlogits,
            double *losses, int bt, int classes),
           (logits, labels, dlogits, losses, bt, classes))
EMU_KERNEL(sgd_step,
           (const float *p, const float *g, float *out, float *velocity,
            size_t n, float lr, float mu, float wd, int nesterov),
           (p, g, out, velocity, n, lr, mu, wd, nesterov))

static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static model__backend_t emu_table;

static void emu_make(void)
{
    emu_table = *model__backend_cpu();
    emu_table.name = "cuda (emulated)";
    emu_table.alloc = emu_alloc;
    emu_table.release = emu_release;
    emu_table.upload = emu_upload;
    emu_table.download = emu_download;
    emu_table.finish = emu_finish;
    emu_table.copy_start = emu_copy_start;
    emu_table.fetch_start = emu_fetch_start;
    emu_table.copy_host_wait = emu_copy_host_wait;
    emu_table.copy_order = emu_copy_order;
    emu_table.copy_release = emu_copy_release;
    emu_table.stream = emu_stream;
    emu_table.fill = emu_fill;
    emu_table.linear_forward = emu_linear_forward;
    emu_table.linear_backward = emu_linear_backward;
    emu_table.conv2d_forward = emu_conv2d_forward;
    emu_table.conv2d_backward = emu_conv2d_backward;
    emu_table.relu_forward = emu_relu_forward;
    emu_table.relu_backward = emu_relu_backward;
    emu_table.maxpool_forward = emu_maxpool_forward;
    emu_table.maxpool_backward = emu_maxpool_backward;
    emu_table.dropout_forward = emu_dropout_forward;
    emu_table.dropout_backward = emu_dropout_backward;
    emu_table.softmax_xent = emu_softmax_xent;
    emu_table.sgd_step = emu_sgd_step;
}

const model__backend_t *model__backend_emu(void)
{
    pthread_once(&emu_once, emu_make);
    return &emu_table;
}
