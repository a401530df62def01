/* test/test_models_cuda.c: the GPU's backend table (models/backend_cuda.c,
 * models/kernels_cuda.cu) against the host's (models/backend_cpu.c), entry
 * by entry on the same random inputs, then the mlp and the cnn as whole
 * models on each device from one seed.
 *
 * Exact (bit for bit): fill, relu, max-pool (values, argmax, and the
 * backward, which the GPU gathers in the host's order), dropout (masks and
 * products), col2im's share aside, and the initial parameters of a model.
 * Within a relative tolerance, |gpu - cpu| / (1 + |cpu|) <= 1e-4: what
 * goes through a GEMM or a sum (linear, conv2d, bias gradients) and the
 * softmax (the device's exp and log), the SGD step (FMA), and a whole
 * model's loss, logits and gradients: cuBLAS and the host's BLAS add in
 * other orders. A convolution's outputs and gradients, sums of hundreds
 * to thousands of products, are held relative to 1 + the tensor's
 * largest |cpu| instead (pair_check_in). Shapes take
 * in odd sizes, batch 1 and more, stride 2, padding, overlapping pooling
 * windows, accumulate 0 and 1, and each optional gradient left out.
 *
 * A model's step run twice on the device gives the same bits (no
 * algorithm that sums with atomics). Convolutions, and the models, run
 * once per conv path of the GPU table
 * (models/conv_cudnn.h): cuDNN's in a build with it, and im2col + cuBLAS,
 * each against the host's; cuDNN's also at a batch smaller than the one
 * its scratch was counted for, after a larger one (a plan per batch), and
 * through more plans than its table holds. A cuDNN build whose cuDNN
 * path cannot run fails here (unless HVD_CONV=im2col). cuDNN's path runs
 * twice: in float FMAs, and with TF32 allowed (HVD_CONV_TF32's), whose
 * convolutions, and the cnn's numbers, are held to TOL_TF32 instead (a
 * convolution's outputs and gradients against their largest value:
 * TOL_TF32_SUMS; the cnn's gradients each as a whole: TOL_TF32_NORM).
 * The entries and the mlp run first, then each conv path with the cnn,
 * im2col's first: a cuDNN failure that stops the run (the harness's
 * error) comes after them.
 * Before the GPU is looked for, HVD_CONV's and HVD_CONV_TF32's bad values
 * must be refused (in child processes: the table opens once per
 * process).
 *
 * Exits 77 (skip) when no GPU can be used (a build without CUDA, no
 * device visible). --host compares the host table with itself, so that
 * the harness itself runs where no GPU is (everything then passes
 * exactly).
 */
#define _POSIX_C_SOURCE 200809L /* fork, setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "models/backend.h"
#include "models/conv_cudnn.h"
#include "models/model.h"
#include "test/test.h"

enum { TOL_EXACT = 0 };
#define TOL_GEMM 1e-4
/* cuDNN's TF32 path: operands rounded to 10 bits of mantissa. Simulated
 * on the host (numpy, both roundings) for conv2's shape at batch 16 and
 * 64, the worst was 0.014 and 0.028 (dw, a sum of batch x 196 products,
 * where the sum is small). */
#define TOL_TF32 5e-2
/* ... and a whole model's gradient tensors, each as a whole
 * (compare_norm): 0.006 at worst in the same simulation. */
#define TOL_TF32_NORM 2e-2
/* ... and a convolution's outputs and gradients relative to their
 * tensor's largest value (pair_check_in's sums): the per-element worst
 * above is where a sum is small, so against the largest it is far less;
 * 5e-2 of that would let a lost image's share of dw through. */
#define TOL_TF32_SUMS 1e-2

static const model__backend_t *cpu, *dev;
static model_device_t dev_kind = MODEL_DEVICE_CUDA;
static uint64_t rng = 12345;
static char case_name[192]; /* the case being run, for failures */
static const char *conv_name = "host"; /* the conv path under test */
static double conv_tol = TOL_GEMM;     /* and its tolerance */
static double conv_sums_tol = TOL_GEMM; /* pair_check_in's, for sums */

/* A failure the rest cannot go on from: the harness's error. */
#define MUST(call)                                                             \
    do {                                                                       \
        int must_rc_ = (call);                                                 \
        if (must_rc_ != MODEL_OK) {                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
                    model_strerror(must_rc_));                                 \
            exit(TEST_HARD_ERROR);                                             \
        }                                                                      \
    } while (0)

/* ---- a buffer on both sides: host memory for the host table, the
 * device's copy for the table under test ---- */

typedef struct {
    float *host, *dev;
    size_t count; /* 4-byte elements (floats, or int32 for argmax) */
} pair_t;

static void *must_malloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "out of host memory (%zu bytes)\n", bytes);
        exit(TEST_HARD_ERROR);
    }
    return p;
}

/* Zeros on both sides (alloc's memory is zeroed). */
static pair_t pair_zero(size_t count)
{
    pair_t p = {.host = must_malloc(count * 4), .count = count};
    MUST(dev->alloc(count * 4, (void **)&p.dev));
    return p;
}

/* Values: small integers in [-ints, ints] when ints > 0 (ties and zeros
 * for relu and max-pool), else uniform in [-1, 1). */
static pair_t pair_new(size_t count, int ints)
{
    pair_t p = pair_zero(count);
    for (size_t i = 0; i < count; i++) {
        float u = model__rng_uniform(&rng);
        p.host[i] =
            ints > 0 ? floorf(u * (2 * ints + 1)) - ints : 2.0f * u - 1.0f;
    }
    MUST(dev->upload(p.dev, p.host, count * 4));
    return p;
}

static void pair_free(pair_t *p)
{
    free(p->host);
    dev->release(p->dev);
    *p = (pair_t){0};
}

/* The first element out of tolerance (tol 0: not the same bits), printed
 * with the case; floats and int32 both shown, as argmax is compared here
 * too. Each element's error is relative to 1 + its magnitude, or to
 * 1 + scale where that is larger. */
static void compare_in(const char *what, const float *got, const float *want,
                       size_t count, double tol, double scale)
{
    for (size_t i = 0; i < count; i++) {
        double a = got[i], b = want[i];
        double of = fabs(b) > scale ? fabs(b) : scale;
        int ok = tol == TOL_EXACT ? !memcmp(&got[i], &want[i], 4)
                                  : fabs(a - b) / (1 + of) <= tol;
        if (ok) continue;
        int32_t ia, ib;
        memcpy(&ia, &got[i], 4);
        memcpy(&ib, &want[i], 4);
        TEST_FAIL("%s: %s[%zu] = %.9g (int %d), host %.9g (int %d), tol %g "
                  "of 1 + %g",
                  case_name, what, i, a, ia, b, ib, tol, of);
        return;
    }
}

static void compare(const char *what, const float *got, const float *want,
                    size_t count, double tol)
{
    compare_in(what, got, want, count, tol, 0);
}

/* got against want as a whole: ||got - want|| / ||want|| <= tol. For
 * TF32's gradients, where a max-pool whose two largest inputs TF32 brings
 * within a rounding of each other routes one element's gradient elsewhere
 * (simulated: single elements 0.034 off, whole tensors 0.006). */
static void compare_norm(const char *what, const float *got,
                         const float *want, size_t count, double tol)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < count; i++) {
        diff += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        norm += (double)want[i] * want[i];
    }
    if (!(sqrt(diff) <= tol * sqrt(norm)))
        TEST_FAIL("%s: %s off by %.3g of its norm %.3g (tol %g)", case_name,
                  what, norm > 0 ? sqrt(diff / norm) : sqrt(diff),
                  sqrt(norm), tol);
}

/* The device's copy, downloaded after everything queued, against the
 * host's; sums: each element's error relative to the largest magnitude of
 * the host's (a convolution's outputs and gradients, sums of hundreds to
 * thousands of products: two orders of adding differ by roundings of the
 * terms, which an element that cancels to near zero does not shrink; the
 * host's oneDNN is itself 4e-5 off double there, per element). */
static void pair_check_in(const char *what, const pair_t *p, double tol,
                          int sums)
{
    float *got = must_malloc(p->count * 4);
    double scale = 0;
    MUST(dev->finish());
    MUST(dev->download(got, p->dev, p->count * 4));
    for (size_t i = 0; sums && i < p->count; i++)
        if (fabs(p->host[i]) > scale) scale = fabs(p->host[i]);
    compare_in(what, got, p->host, p->count, tol, scale);
    free(got);
}

static void pair_check(const char *what, const pair_t *p, double tol)
{
    pair_check_in(what, p, tol, 0);
}

/* ---- the entries ---- */

static void test_fill(size_t count)
{
    snprintf(case_name, sizeof case_name, "fill count=%zu", count);
    pair_t x = pair_new(count, 0);
    cpu->fill(x.host, -1.5f, count);
    dev->fill(x.dev, -1.5f, count);
    pair_check("x", &x, TOL_EXACT);
    pair_free(&x);
}

/* mode 0: every gradient; 1: dw and db left out (NULL); 2: dx left out. */
static void test_linear(int batch, int in, int out, int accumulate, int mode)
{
    snprintf(case_name, sizeof case_name,
             "linear batch=%d in=%d out=%d accumulate=%d mode=%d", batch, in,
             out, accumulate, mode);
    pair_t x = pair_new((size_t)batch * in, 0),
           w = pair_new((size_t)out * in, 0);
    pair_t b = pair_new(out, 0), y = pair_zero((size_t)batch * out);
    pair_t dy = pair_new((size_t)batch * out, 0);
    pair_t dx = pair_new((size_t)batch * in, 0);
    pair_t dw = pair_new((size_t)out * in, 0), db = pair_new(out, 0);
    cpu->linear_forward(x.host, w.host, b.host, y.host, batch, in, out);
    dev->linear_forward(x.dev, w.dev, b.dev, y.dev, batch, in, out);
    pair_check("y", &y, TOL_GEMM);
    cpu->linear_backward(x.host, w.host, dy.host, mode == 2 ? NULL : dx.host,
                         mode == 1 ? NULL : dw.host, db.host, batch, in, out,
                         accumulate);
    dev->linear_backward(x.dev, w.dev, dy.dev, mode == 2 ? NULL : dx.dev,
                         mode == 1 ? NULL : dw.dev, db.dev, batch, in, out,
                         accumulate);
    /* What was left out must be left alone: equal to its start. */
    pair_check("dx", &dx, TOL_GEMM);
    pair_check("dw", &dw, TOL_GEMM);
    pair_check("db", &db, TOL_GEMM);
    pair_t *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

static model__conv_shape_t conv_shape(int in_c, int in_h, int in_w, int out_c,
                                      int k, int stride, int pad)
{
    return (model__conv_shape_t){.in_c = in_c,
                                 .in_h = in_h,
                                 .in_w = in_w,
                                 .out_c = out_c,
                                 .k = k,
                                 .stride = stride,
                                 .pad = pad,
                                 .out_h = (in_h + 2 * pad - k) / stride + 1,
                                 .out_w = (in_w + 2 * pad - k) / stride + 1};
}

/* The device's scratch is counted for scratch_batch >= batch images, as
 * model.c counts it for batch_max. */
static void test_conv2d(model__conv_shape_t s, int batch, int scratch_batch,
                        int accumulate, int mode)
{
    snprintf(case_name, sizeof case_name,
             "conv2d path=%s batch=%d scratch_batch=%d in=%dx%dx%d out_c=%d "
             "k=%d stride=%d pad=%d accumulate=%d mode=%d",
             conv_name, batch, scratch_batch, s.in_c, s.in_h, s.in_w, s.out_c,
             s.k, s.stride, s.pad, accumulate, mode);
    size_t in_count = (size_t)batch * s.in_c * s.in_h * s.in_w;
    size_t out_count = (size_t)batch * s.out_c * s.out_h * s.out_w;
    size_t w_count = (size_t)s.out_c * s.in_c * s.k * s.k;
    pair_t x = pair_new(in_count, 0), w = pair_new(w_count, 0);
    pair_t b = pair_new(s.out_c, 0), y = pair_zero(out_count);
    pair_t dy = pair_new(out_count, 0), dx = pair_new(in_count, 0);
    pair_t dw = pair_new(w_count, 0), db = pair_new(s.out_c, 0);
    pair_t scratch_c = pair_zero(cpu->conv2d_scratch_count(&s, batch));
    pair_t scratch_d =
        pair_zero(dev->conv2d_scratch_count(&s, scratch_batch));
    cpu->conv2d_forward(&s, x.host, w.host, b.host, y.host, batch,
                        scratch_c.host);
    dev->conv2d_forward(&s, x.dev, w.dev, b.dev, y.dev, batch, scratch_d.dev);
    pair_check_in("y", &y, conv_sums_tol, 1);
    cpu->conv2d_backward(&s, x.host, w.host, dy.host,
                         mode == 2 ? NULL : dx.host, mode == 1 ? NULL : dw.host,
                         db.host, batch, scratch_c.host, accumulate);
    dev->conv2d_backward(&s, x.dev, w.dev, dy.dev, mode == 2 ? NULL : dx.dev,
                         mode == 1 ? NULL : dw.dev, db.dev, batch,
                         scratch_d.dev, accumulate);
    pair_check_in("dx", &dx, conv_sums_tol, 1);
    pair_check_in("dw", &dw, conv_sums_tol, 1);
    pair_check_in("db", &db, TOL_GEMM, 1); /* float sums in every path */
    pair_t *all[] = {&x,  &w,  &b,  &y,         &dy,
                     &dx, &dw, &db, &scratch_c, &scratch_d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

static void test_relu(size_t count)
{
    snprintf(case_name, sizeof case_name, "relu count=%zu", count);
    pair_t x = pair_new(count, 2), y = pair_zero(count);
    pair_t dy = pair_new(count, 0), dx = pair_zero(count);
    cpu->relu_forward(x.host, y.host, count);
    dev->relu_forward(x.dev, y.dev, count);
    pair_check("y", &y, TOL_EXACT);
    cpu->relu_backward(y.host, dy.host, dx.host, count);
    dev->relu_backward(y.dev, dy.dev, dx.dev, count);
    pair_check("dx", &dx, TOL_EXACT);
    pair_t *all[] = {&x, &y, &dy, &dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

static void test_maxpool(int c, int h, int w, int k, int stride, int batch)
{
    snprintf(case_name, sizeof case_name,
             "maxpool batch=%d in=%dx%dx%d k=%d stride=%d", batch, c, h, w, k,
             stride);
    model__conv_shape_t s = conv_shape(c, h, w, c, k, stride, 0);
    size_t in_count = (size_t)batch * c * h * w;
    size_t out_count = (size_t)batch * c * s.out_h * s.out_w;
    pair_t x = pair_new(in_count, 2), y = pair_zero(out_count);
    pair_t argmax = pair_zero(out_count), dy = pair_new(out_count, 0);
    pair_t dx = pair_new(in_count, 0); /* backward must clear it */
    cpu->maxpool_forward(&s, x.host, y.host, (int32_t *)argmax.host, batch);
    dev->maxpool_forward(&s, x.dev, y.dev, (int32_t *)argmax.dev, batch);
    pair_check("y", &y, TOL_EXACT);
    pair_check("argmax", &argmax, TOL_EXACT);
    cpu->maxpool_backward(&s, dy.host, (const int32_t *)argmax.host, dx.host,
                          batch);
    dev->maxpool_backward(&s, dy.dev, (const int32_t *)argmax.dev, dx.dev,
                          batch);
    pair_check("dx", &dx, TOL_EXACT);
    pair_t *all[] = {&x, &y, &argmax, &dy, &dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

static void test_dropout(size_t count, float p, int train)
{
    snprintf(case_name, sizeof case_name, "dropout count=%zu p=%g train=%d",
             count, p, train);
    uint64_t state = 0x1234567890abcdefull + count;
    pair_t x = pair_new(count, 0), y = pair_zero(count);
    pair_t mask = pair_zero(count), dy = pair_new(count, 0);
    pair_t dx = pair_zero(count);
    cpu->dropout_forward(x.host, y.host, mask.host, count, p, train, state);
    dev->dropout_forward(x.dev, y.dev, mask.dev, count, p, train, state);
    pair_check("mask", &mask, TOL_EXACT);
    pair_check("y", &y, TOL_EXACT);
    cpu->dropout_backward(dy.host, mask.host, dx.host, count);
    dev->dropout_backward(dy.dev, mask.dev, dx.dev, count);
    pair_check("dx", &dx, TOL_EXACT);
    pair_t *all[] = {&x, &y, &mask, &dy, &dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

/* Three steps, so that the velocity carries over; into p and out of
 * place. Within the tolerance: nvcc contracts a * b + c into one FMA. */
static void test_sgd(size_t count, float mu, float wd, int nesterov,
                     int in_place)
{
    snprintf(case_name, sizeof case_name,
             "sgd count=%zu mu=%g wd=%g nesterov=%d in_place=%d", count, mu,
             wd, nesterov, in_place);
    pair_t p = pair_new(count, 0), g = pair_new(count, 0);
    pair_t v = pair_zero(count), out = pair_zero(count);
    for (int step = 0; step < 3; step++) {
        pair_t *o = in_place ? &p : &out;
        cpu->sgd_step(p.host, g.host, o->host, mu > 0 ? v.host : NULL, count,
                      0.1f, mu, wd, nesterov);
        dev->sgd_step(p.dev, g.dev, o->dev, mu > 0 ? v.dev : NULL, count,
                      0.1f, mu, wd, nesterov);
    }
    pair_check(in_place ? "p" : "out", in_place ? &p : &out, TOL_GEMM);
    pair_check("velocity", &v, TOL_GEMM);
    pair_t *all[] = {&p, &g, &v, &out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

static void test_softmax_xent(int batch, int classes)
{
    snprintf(case_name, sizeof case_name, "softmax_xent batch=%d classes=%d",
             batch, classes);
    size_t count = (size_t)batch * classes;
    pair_t z = pair_new(count, 0), dz = pair_zero(count);
    pair_t labels = pair_zero(batch), losses = pair_zero(2 * (size_t)batch);
    for (size_t i = 0; i < count; i++)
        z.host[i] *= 8.0f; /* peaked rows */
    for (int n = 0; n < batch; n++)
        ((int32_t *)labels.host)[n] =
            (int32_t)(model__rng_uniform(&rng) * classes);
    MUST(dev->upload(z.dev, z.host, count * 4));
    MUST(dev->upload(labels.dev, labels.host, (size_t)batch * 4));
    /* losses are doubles: two 4-byte elements each */
    cpu->softmax_xent(z.host, (const int32_t *)labels.host, dz.host,
                      (double *)(void *)losses.host, batch, classes);
    dev->softmax_xent(z.dev, (const int32_t *)labels.dev, dz.dev,
                      (double *)(void *)losses.dev, batch, classes);
    pair_check("dlogits", &dz, TOL_GEMM);
    double *want = (double *)(void *)losses.host;
    double *got = must_malloc((size_t)batch * sizeof *got);
    MUST(dev->download(got, losses.dev, (size_t)batch * sizeof *got));
    for (int n = 0; n < batch; n++)
        if (!(fabs(got[n] - want[n]) / (1 + fabs(want[n])) <= TOL_GEMM))
            TEST_FAIL("%s: losses[%d] = %.12g, host %.12g", case_name, n,
                      got[n], want[n]);
    free(got);
    pair_t *all[] = {&z, &dz, &labels, &losses};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        pair_free(all[i]);
}

/* ---- whole models ---- */

/* Slab (param_count floats) of model m, in host memory. */
static float *slab_to_host(const model_t *m, const float *slab)
{
    float *host = must_malloc(m->param_count * sizeof *host);
    MUST(m->backend->download(host, slab, m->param_count * sizeof *host));
    return host;
}

/* Models made for batch_max samples, run on batch of them (a last
 * partial batch when fewer). */
static void test_model(const char *kind, int c, int h, int w, int batch_max,
                       int batch)
{
    snprintf(case_name, sizeof case_name,
             "model %s path=%s %dx%dx%d batch_max=%d batch=%d", kind,
             strcmp(kind, "cnn") ? "-" : conv_name, c, h, w, batch_max,
             batch);
    double tol = strcmp(kind, "cnn") ? TOL_GEMM : conv_tol;
    model_t mc, md;
    MUST(model_init_device(&mc, MODEL_DEVICE_CPU, kind, c, h, w, batch_max,
                           7));
    MUST(model_init_device(&md, dev_kind, kind, c, h, w, batch_max, 7));
    TEST_EQ(md.param_count, mc.param_count);
    float *p = slab_to_host(&md, md.param_slab);
    compare("params", p, mc.param_slab, mc.param_count, TOL_EXACT);
    free(p);

    pair_t x = pair_new((size_t)batch * c * h * w, 0);
    int *labels = must_malloc((size_t)batch * sizeof *labels);
    for (int n = 0; n < batch; n++)
        labels[n] = (n * 7 + 3) % mc.num_classes;
    float loss_c, loss_d;
    MUST(model_forward(&mc, x.host, batch, 1));
    MUST(model_forward(&md, x.dev, batch, 1));
    MUST(model_loss(&mc, labels, batch, &loss_c));
    MUST(model_loss(&md, labels, batch, &loss_d));
    compare("loss", &loss_d, &loss_c, 1, tol);
    size_t nlogits = (size_t)batch * mc.num_classes;
    float *z = must_malloc(nlogits * sizeof *z);
    MUST(md.backend->download(z, model_logits(&md), nlogits * sizeof *z));
    compare("logits", z, model_logits(&mc), nlogits, tol);
    free(z);
    MUST(model_backward(&mc, NULL, NULL));
    MUST(model_backward(&md, NULL, NULL));
    MUST(md.backend->finish());
    float *g = slab_to_host(&md, md.grad_slab);
    for (size_t i = 0; i < mc.num_params; i++) {
        const model_param_t *t = &mc.params[i];
        if (tol == TOL_TF32)
            compare_norm(t->name, g + t->offset, mc.grad_slab + t->offset,
                         t->count, TOL_TF32_NORM);
        else
            compare(t->name, g + t->offset, mc.grad_slab + t->offset,
                    t->count, tol);
    }
    /* The same step again gives the same bits on the device: no
     * algorithm that sums with atomics (a resume must equal its run). */
    MUST(model_forward(&md, x.dev, batch, 1));
    MUST(model_loss(&md, labels, batch, &loss_c));
    MUST(model_backward(&md, NULL, NULL));
    MUST(md.backend->finish());
    float *again = slab_to_host(&md, md.grad_slab);
    compare("grads again", again, g, mc.param_count, TOL_EXACT);
    compare("loss again", &loss_c, &loss_d, 1, TOL_EXACT);
    free(again);
    free(g);
    free(labels);
    pair_free(&x);
    model_free(&mc);
    model_free(&md);
}

/* ---- HVD_CONV and the conv paths ---- */

/* name=value (HVD_CONV or HVD_CONV_TF32, the other unset) must make the
 * GPU table's opening fail with a why that holds want. In a child: the
 * table opens once per process. No GPU is needed: they are read before
 * any CUDA call. */
static void test_conv_env_refused(const char *name, const char *value,
                                  const char *want)
{
    snprintf(case_name, sizeof case_name, "%s=%s refused", name, value);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(TEST_HARD_ERROR);
    }
    if (pid == 0) {
        const char *why = NULL;
        unsetenv("HVD_DEVICE_EMULATE"); /* the real table's opening */
        unsetenv("HVD_CONV");
        unsetenv("HVD_CONV_TF32");
        setenv(name, value, 1);
        const model__backend_t *t = model__backend_cuda(&why);
        if (!t && why && strstr(why, want)) _exit(0);
        fprintf(stderr, "%s: table %s, why \"%s\", expected a refusal "
                        "saying \"%s\"\n",
                case_name, t ? "opened" : "refused", why ? why : "(none)",
                want);
        _exit(1);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) {
        perror("waitpid");
        exit(TEST_HARD_ERROR);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        TEST_FAIL("%s: the child's check failed (status %d)", case_name, st);
}

/* The conv paths to compare with the host's, into paths (3), with their
 * names; their number. The host's table, or the emulated device's, has
 * one path of its own: -1. A cuDNN build must run cuDNN's by default (in
 * TF32 under HVD_CONV_TF32=1), unless HVD_CONV=im2col kept it closed. */
static int conv_paths(int *paths, const char **names)
{
    const char *asked = getenv("HVD_CONV"), *tf32 = getenv("HVD_CONV_TF32");
    int by_default = !asked || !*asked, n = 0;
    model__conv_path_t opened_with = model__cuda_conv_path();
    if (dev_kind != MODEL_DEVICE_CUDA ||
        model__cuda_conv_use(MODEL__CONV_IM2COL) != MODEL_OK) {
        paths[0] = -1;
        names[0] = dev_kind == MODEL_DEVICE_CUDA ? "emulated" : "host";
        return 1;
    }
    if (HVD_HAVE_CUDNN && by_default)
        TEST_EQ(opened_with, tf32 && !strcmp(tf32, "1")
                                 ? MODEL__CONV_CUDNN_TF32
                                 : MODEL__CONV_CUDNN);
    /* The reference first: a cuDNN path that fails hard (the harness's
     * error) then stops the run after it has been checked. */
    paths[n] = MODEL__CONV_IM2COL;
    names[n++] = "im2col";
    if (model__cuda_conv_use(MODEL__CONV_CUDNN) == MODEL_OK) {
        paths[n] = MODEL__CONV_CUDNN;
        names[n++] = "cudnn";
        MUST(model__cuda_conv_use(MODEL__CONV_CUDNN_TF32));
        paths[n] = MODEL__CONV_CUDNN_TF32;
        names[n++] = "cudnn_tf32";
    } else if (HVD_HAVE_CUDNN && !(asked && !strcmp(asked, "im2col"))) {
        TEST_FAIL("a cuDNN build whose cuDNN path cannot run (see the "
                  "warning above; HVD_CONV=im2col to test im2col alone)");
    }
    return n;
}

static void conv_path_use(int path, const char *name)
{
    conv_name = name;
    conv_tol = path == MODEL__CONV_CUDNN_TF32 ? TOL_TF32 : TOL_GEMM;
    conv_sums_tol =
        path == MODEL__CONV_CUDNN_TF32 ? TOL_TF32_SUMS : TOL_GEMM;
    if (path >= 0) MUST(model__cuda_conv_use((model__conv_path_t)path));
}

int main(int argc, char **argv)
{
    const char *why = NULL;
    cpu = model__backend_cpu();
    test_conv_env_refused("HVD_CONV", "xyz",
                          "HVD_CONV=xyz: expected cudnn or im2col");
    test_conv_env_refused("HVD_CONV", "CUDNN",
                          "HVD_CONV=CUDNN: expected cudnn or im2col");
    test_conv_env_refused("HVD_CONV_TF32", "yes",
                          "HVD_CONV_TF32=yes: expected 0 or 1");
    if (!HVD_HAVE_CUDNN)
        test_conv_env_refused("HVD_CONV", "cudnn",
                              "HVD_CONV=cudnn: this build has no cuDNN");
    if (test_failures) return test_exit_code(); /* not a skip */
    if (argc > 1 && !strcmp(argv[1], "--host")) {
        dev = cpu;
        dev_kind = MODEL_DEVICE_CPU;
    } else if (!(dev = model__backend_cuda(&why))) {
        TEST_SKIP(why);
    }
    model_setup_cpu();

    test_fill(1);
    test_fill(100003);
    const int lin[][3] = {{1, 1, 1}, {3, 7, 5}, {17, 33, 10}, {64, 784, 256}};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++)
        for (int acc = 0; acc < 2; acc++)
            for (int mode = 0; mode < 3; mode++)
                test_linear(lin[i][0], lin[i][1], lin[i][2], acc, mode);

    const int batches[] = {1, 3};
    test_relu(1);
    test_relu(100003);
    const int pools[][5] = {{32, 28, 28, 2, 2}, {3, 7, 9, 3, 2},
                            {2, 5, 5, 2, 1},    {1, 4, 4, 4, 4},
                            {2, 9, 8, 3, 3},    {3, 11, 13, 2, 2}};
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
        for (int bi = 0; bi < 2; bi++)
            test_maxpool(pools[i][0], pools[i][1], pools[i][2], pools[i][3],
                         pools[i][4], batches[bi]);
    const float ps[] = {0.0f, 0.3f, 0.5f};
    for (int pi = 0; pi < 3; pi++)
        for (int train = 0; train < 2; train++) {
            test_dropout(1, ps[pi], train);
            test_dropout(100003, ps[pi], train);
        }
    for (int in_place = 0; in_place < 2; in_place++) {
        test_sgd(1, 0.0f, 0.0f, 0, in_place);
        test_sgd(100003, 0.9f, 1e-4f, 0, in_place);
        test_sgd(4097, 0.9f, 0.0f, 1, in_place);
    }
    test_softmax_xent(1, 10);
    test_softmax_xent(64, 10);
    test_softmax_xent(7, 3);
    test_softmax_xent(5, 1);

    test_model("mlp", 1, 28, 28, 8, 8);
    test_model("mlp", 3, 5, 7, 1, 1);

    const model__conv_shape_t convs[] = {
        conv_shape(1, 28, 28, 32, 5, 1, 2), conv_shape(3, 7, 9, 4, 3, 2, 1),
        conv_shape(2, 5, 5, 3, 3, 1, 0),    conv_shape(3, 8, 6, 5, 2, 2, 0),
        conv_shape(1, 1, 1, 2, 1, 1, 0),    conv_shape(2, 6, 7, 3, 4, 3, 2),
    };
    int paths[3];
    const char *path_names[3];
    int npaths = conv_paths(paths, path_names);
    for (int pi = 0; pi < npaths; pi++) {
        conv_path_use(paths[pi], path_names[pi]);
        for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++)
            for (int bi = 0; bi < 2; bi++)
                for (int acc = 0; acc < 2; acc++)
                    for (int mode = 0; mode < 3; mode++)
                        test_conv2d(convs[i], batches[bi], batches[bi], acc,
                                    mode);
        /* Batches below the scratch's, after larger ones and between
         * them: model.c's last partial batch. The second is the cnn's
         * second convolution. */
        const int seq[] = {5, 2, 5, 1, 4};
        for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++)
            test_conv2d(conv_shape(3, 8, 8, 4, 3, 1, 1), seq[i], 5, 1, 0);
        test_conv2d(conv_shape(32, 14, 14, 64, 5, 1, 2), 16, 16, 0, 0);
        test_conv2d(conv_shape(32, 14, 14, 64, 5, 1, 2), 7, 16, 1, 0);
        /* More (shape, batch) pairs than cuDNN's plan table holds (64),
         * then the first again: plans replaced while in use. */
        for (int batch = 1; batch <= 70; batch++)
            test_conv2d(conv_shape(2, 5, 5, 3, 3, 1, 0), batch, batch, 0, 0);
        test_conv2d(conv_shape(2, 5, 5, 3, 3, 1, 0), 1, 1, 1, 2);
        test_model("cnn", 1, 28, 28, 8, 8);
        test_model("cnn", 1, 28, 28, 8, 5);
        test_model("cnn", 3, 32, 32, 3, 3);
    }
    return test_exit_code();
}
