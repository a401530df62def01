/* test/test_layers.c: each host layer kernel of models/ alone, against a
 * naive double-precision reference written here: the forward must match
 * it, and the backward must match central differences of the reference's
 * scalar loss L = sum(y * r) (r random, so dL/dy = r). The reference is in
 * double so the differences are accurate to ~1e-9 and a tolerance of 1e-3
 * catches wrong gradients. The checker itself is shown to fail on a
 * corrupted gradient. Convolutions run through im2col + BLAS and, where
 * it takes the shape in a build with it, oneDNN (models/conv_dnnl.h).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "models/model.h"
#include "models/conv_dnnl.h"
#include "models/model_internal.h"
#include "test/test.h"

static uint64_t rng = 12345;
static double urand(void)
{
    return 2.0 * model__rng_uniform(&rng) - 1.0;
}

/* A layer case: double inputs (the reference's) and float copies. */
typedef struct {
    model__conv_shape_t s;
    int batch;
    size_t x_count, w_count, b_count, y_count;
    double *x, *w, *b, *r, *y;
    float *mask; /* dropout */
    double (*ref)(void *);
} case_t;

static double *drand_array(size_t n)
{
    double *a = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        a[i] = urand();
    return a;
}

static float *to_float(const double *a, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = (float)a[i];
    return f;
}

static double dot_r(case_t *c)
{
    double l = 0;
    for (size_t i = 0; i < c->y_count; i++)
        l += c->y[i] * c->r[i];
    return l;
}

/* ---- references: y from x, w, b in double, then L = y . r ---- */

static double ref_linear(void *ctx)
{
    case_t *c = ctx;
    int in = c->s.in_c, out = c->s.out_c;
    for (int n = 0; n < c->batch; n++)
        for (int o = 0; o < out; o++) {
            double acc = c->b[o];
            for (int i = 0; i < in; i++)
                acc += c->x[n * in + i] * c->w[o * in + i];
            c->y[n * out + o] = acc;
        }
    return dot_r(c);
}

static double ref_conv(void *ctx)
{
    case_t *c = ctx;
    const model__conv_shape_t *s = &c->s;
    for (int n = 0; n < c->batch; n++)
        for (int o = 0; o < s->out_c; o++)
            for (int oy = 0; oy < s->out_h; oy++)
                for (int ox = 0; ox < s->out_w; ox++) {
                    double acc = c->b[o];
                    for (int ci = 0; ci < s->in_c; ci++)
                        for (int ki = 0; ki < s->k; ki++)
                            for (int kj = 0; kj < s->k; kj++) {
                                int iy = oy * s->stride - s->pad + ki;
                                int ix = ox * s->stride - s->pad + kj;
                                if (iy < 0 || iy >= s->in_h || ix < 0 ||
                                    ix >= s->in_w)
                                    continue;
                                acc +=
                                    c->x[((n * s->in_c + ci) * s->in_h + iy) *
                                             s->in_w +
                                         ix] *
                                    c->w[((o * s->in_c + ci) * s->k + ki) *
                                             s->k +
                                         kj];
                            }
                    c->y[((n * s->out_c + o) * s->out_h + oy) * s->out_w + ox] =
                        acc;
                }
    return dot_r(c);
}

static double ref_relu(void *ctx)
{
    case_t *c = ctx;
    for (size_t i = 0; i < c->y_count; i++)
        c->y[i] = c->x[i] > 0 ? c->x[i] : 0;
    return dot_r(c);
}

static double ref_maxpool(void *ctx)
{
    case_t *c = ctx;
    const model__conv_shape_t *s = &c->s;
    for (int nc = 0; nc < c->batch * s->in_c; nc++)
        for (int oy = 0; oy < s->out_h; oy++)
            for (int ox = 0; ox < s->out_w; ox++) {
                double best = -INFINITY;
                for (int ki = 0; ki < s->k; ki++)
                    for (int kj = 0; kj < s->k; kj++) {
                        double v = c->x[(nc * s->in_h + oy * s->stride + ki) *
                                            s->in_w +
                                        ox * s->stride + kj];
                        best = v > best ? v : best;
                    }
                c->y[(nc * s->out_h + oy) * s->out_w + ox] = best;
            }
    return dot_r(c);
}

static double ref_dropout(void *ctx)
{
    case_t *c = ctx;
    for (size_t i = 0; i < c->y_count; i++)
        c->y[i] = c->x[i] * c->mask[i];
    return dot_r(c);
}

/* ---- the checker ---- */

/* Does got (count) match the central differences of c->ref with respect to
 * param? On a mismatch, *bad_idx and *num name the first. */
static int grad_matches(case_t *c, double *param, size_t count,
                        const float *got, size_t *bad_idx, double *num)
{
    const double h = 1e-6, atol = 1e-4, rtol = 1e-3;
    for (size_t i = 0; i < count; i++) {
        double save = param[i];
        param[i] = save + h;
        double lp = c->ref(c);
        param[i] = save - h;
        double lm = c->ref(c);
        param[i] = save;
        double d = (lp - lm) / (2 * h);
        if (fabs(got[i] - d) > atol + rtol * fabs(d)) {
            *bad_idx = i;
            *num = d;
            return 0;
        }
    }
    return 1;
}

static void check_grad(case_t *c, const char *what, double *param, size_t count,
                       const float *got)
{
    size_t bad;
    double num;
    if (!grad_matches(c, param, count, got, &bad, &num))
        TEST_FAIL("%s[%zu]: backward %.7g, finite difference %.7g", what, bad,
                  got[bad], num);
}

/* Our forward's y (float) against the reference's (double). */
static void check_forward(case_t *c, const char *what, const float *y)
{
    c->ref(c);
    for (size_t i = 0; i < c->y_count; i++)
        if (fabs(y[i] - c->y[i]) > 1e-5 * (1 + fabs(c->y[i]))) {
            TEST_FAIL("%s forward y[%zu] = %.7g, reference %.7g", what, i, y[i],
                      c->y[i]);
            return;
        }
}

static void case_alloc(case_t *c)
{
    c->x = drand_array(c->x_count);
    c->w = drand_array(c->w_count);
    c->b = drand_array(c->b_count);
    c->r = drand_array(c->y_count);
    c->y = calloc(c->y_count, sizeof(double));
}

static void case_free(case_t *c)
{
    free(c->x), free(c->w), free(c->b), free(c->r), free(c->y), free(c->mask);
}

/* ---- per layer ---- */

static void test_linear(int batch, int in, int out)
{
    case_t c = {.s = {.in_c = in, .out_c = out},
                .batch = batch,
                .x_count = (size_t)batch * in,
                .w_count = (size_t)out * in,
                .b_count = out,
                .y_count = (size_t)batch * out,
                .ref = ref_linear};
    case_alloc(&c);
    float *x = to_float(c.x, c.x_count), *w = to_float(c.w, c.w_count);
    float *b = to_float(c.b, c.b_count), *dy = to_float(c.r, c.y_count);
    float *y = malloc(c.y_count * 4), *dx = malloc(c.x_count * 4);
    float *dw = malloc(c.w_count * 4), *db = malloc(c.b_count * 4);
    model__linear_forward(x, w, b, y, batch, in, out);
    check_forward(&c, "linear", y);
    model__linear_backward(x, w, dy, dx, dw, db, batch, in, out, 0);
    check_grad(&c, "linear dx", c.x, c.x_count, dx);
    check_grad(&c, "linear dw", c.w, c.w_count, dw);
    check_grad(&c, "linear db", c.b, c.b_count, db);

    /* The checker can fail: a gradient off by 1e-2 is caught. */
    size_t bad;
    double num;
    size_t victim = c.w_count / 2;
    dw[victim] += 1e-2f;
    TEST_TRUE(!grad_matches(&c, c.w, c.w_count, dw, &bad, &num));
    TEST_EQ(bad, victim);
    dw[victim] -= 1e-2f;

    /* accumulate adds: a second pass doubles dw and db. */
    float dw0 = dw[0], db0 = db[0];
    model__linear_backward(x, w, dy, NULL, dw, db, batch, in, out, 1);
    TEST_TRUE(fabsf(dw[0] - 2 * dw0) <= 1e-5f * (1 + fabsf(dw0)));
    TEST_TRUE(fabsf(db[0] - 2 * db0) <= 1e-5f * (1 + fabsf(db0)));
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    case_free(&c);
}

/* A way to run a convolution: im2col + BLAS, or oneDNN's. */
typedef struct {
    const char *name;
    void (*forward)(const model__conv_shape_t *s, const float *x,
                    const float *w, const float *b, float *y, int batch,
                    float *scratch);
    void (*backward)(const model__conv_shape_t *s, const float *x,
                     const float *w, const float *dy, float *dx, float *dw,
                     float *db, int batch, float *scratch, int accumulate);
} conv_path_t;

static const conv_path_t im2col = {"im2col", model__conv2d_forward,
                                   model__conv2d_backward};

static void dnnl_forward(const model__conv_shape_t *s, const float *x,
                         const float *w, const float *b, float *y, int batch,
                         float *scratch)
{
    (void)scratch;
    TEST_EQ(model__dnnl_conv2d_forward(s, x, w, b, y, batch), MODEL_OK);
}

static void dnnl_backward(const model__conv_shape_t *s, const float *x,
                          const float *w, const float *dy, float *dx,
                          float *dw, float *db, int batch, float *scratch,
                          int accumulate)
{
    TEST_EQ(model__dnnl_conv2d_backward(s, x, w, dy, dx, dw, db, batch,
                                        scratch, accumulate),
            MODEL_OK);
}

static const conv_path_t onednn = {"onednn", dnnl_forward, dnnl_backward};

static void test_conv_on(const conv_path_t *path, int batch, int in_c, int h,
                         int w_, int out_c, int k, int stride, int pad)
{
    model__conv_shape_t s = {.in_c = in_c,
                             .in_h = h,
                             .in_w = w_,
                             .out_c = out_c,
                             .k = k,
                             .stride = stride,
                             .pad = pad};
    s.out_h = (h + 2 * pad - k) / stride + 1;
    s.out_w = (w_ + 2 * pad - k) / stride + 1;
    case_t c = {.s = s,
                .batch = batch,
                .x_count = (size_t)batch * in_c * h * w_,
                .w_count = (size_t)out_c * in_c * k * k,
                .b_count = out_c,
                .y_count = (size_t)batch * out_c * s.out_h * s.out_w,
                .ref = ref_conv};
    case_alloc(&c);
    float *x = to_float(c.x, c.x_count), *w = to_float(c.w, c.w_count);
    float *b = to_float(c.b, c.b_count), *dy = to_float(c.r, c.y_count);
    float *y = malloc(c.y_count * 4), *dx = malloc(c.x_count * 4);
    float *dw = malloc(c.w_count * 4), *db = malloc(c.b_count * 4);
    size_t nscratch = model__conv2d_scratch_count(&s);
    if (model__dnnl_scratch_count(&s) > nscratch)
        nscratch = model__dnnl_scratch_count(&s);
    float *scratch = malloc(nscratch * 4);
    char what[64], part[80];
    snprintf(what, sizeof(what), "conv %s in%d k%d s%d p%d", path->name, in_c,
             k, stride, pad);
    path->forward(&s, x, w, b, y, batch, scratch);
    check_forward(&c, what, y);
    path->backward(&s, x, w, dy, dx, dw, db, batch, scratch, 0);
    snprintf(part, sizeof part, "%s dx", what);
    check_grad(&c, part, c.x, c.x_count, dx);
    snprintf(part, sizeof part, "%s dw", what);
    check_grad(&c, part, c.w, c.w_count, dw);
    snprintf(part, sizeof part, "%s db", what);
    check_grad(&c, part, c.b, c.b_count, db);
    /* Weight and input gradients computed apart give the same numbers. */
    float *dx2 = malloc(c.x_count * 4);
    path->backward(&s, x, w, dy, dx2, NULL, NULL, batch, scratch, 0);
    TEST_TRUE(memcmp(dx, dx2, c.x_count * 4) == 0);
    float dw0 = dw[1], db0 = db[0];
    path->backward(&s, x, w, dy, NULL, dw, db, batch, scratch, 1);
    TEST_TRUE(fabsf(dw[1] - 2 * dw0) <= 1e-5f * (1 + fabsf(dw0)));
    TEST_TRUE(fabsf(db[0] - 2 * db0) <= 1e-5f * (1 + fabsf(db0)));
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    free(scratch), free(dx2);
    case_free(&c);
}

/* im2col always; oneDNN too where it takes the shape (16 input channels
 * and more, in a build with it). */
static void test_conv(int batch, int in_c, int h, int w_, int out_c, int k,
                      int stride, int pad)
{
    test_conv_on(&im2col, batch, in_c, h, w_, out_c, k, stride, pad);
    model__conv_shape_t s = {.in_c = in_c};
    if (model__dnnl_takes(&s))
        test_conv_on(&onednn, batch, in_c, h, w_, out_c, k, stride, pad);
}

/* Which layers oneDNN takes: 16 input channels and more, unless
 * HVD_CONV=im2col; none in a build without it. */
static void test_dnnl_takes(void)
{
    model__conv_shape_t few = {.in_c = 15}, many = {.in_c = 16};
    TEST_EQ(model__dnnl_takes(&few), 0);
    TEST_EQ(model__dnnl_takes(&many), HVD_HAVE_DNNL);
    setenv("HVD_CONV", "im2col", 1);
    TEST_EQ(model__dnnl_takes(&many), 0);
    unsetenv("HVD_CONV");
}

static void test_relu(void)
{
    case_t c = {.x_count = 64, .y_count = 64, .ref = ref_relu};
    case_alloc(&c);
    float *x = to_float(c.x, 64), *dy = to_float(c.r, 64);
    float y[64], dx[64];
    model__relu_forward(x, y, 64);
    check_forward(&c, "relu", y);
    model__relu_backward(y, dy, dx, 64);
    check_grad(&c, "relu dx", c.x, 64, dx);
    free(x), free(dy);
    case_free(&c);
    /* NaN passes, forward and back, as in PyTorch (-0 and 0 do not). */
    float in[4] = {NAN, -0.0f, 0.0f, -1.0f}, out[4], g[4] = {1, 1, 1, 1};
    float dg[4];
    model__relu_forward(in, out, 4);
    model__relu_backward(out, g, dg, 4);
    if (!isnan(out[0]) || dg[0] != 1.0f || out[1] != 0.0f || signbit(out[1])
        || dg[1] != 0.0f || dg[2] != 0.0f || out[3] != 0.0f || dg[3] != 0.0f)
        TEST_FAIL("relu of NaN, -0, 0, -1: %g %g %g %g, dx %g %g %g %g",
                  out[0], out[1], out[2], out[3], dg[0], dg[1], dg[2], dg[3]);
}

static void test_maxpool(int batch, int ch, int h, int w, int k, int stride)
{
    model__conv_shape_t s = {.in_c = ch,
                             .in_h = h,
                             .in_w = w,
                             .out_c = ch,
                             .k = k,
                             .stride = stride,
                             .out_h = (h - k) / stride + 1,
                             .out_w = (w - k) / stride + 1};
    case_t c = {.s = s,
                .batch = batch,
                .x_count = (size_t)batch * ch * h * w,
                .y_count = (size_t)batch * ch * s.out_h * s.out_w,
                .ref = ref_maxpool};
    case_alloc(&c);
    float *x = to_float(c.x, c.x_count), *dy = to_float(c.r, c.y_count);
    float *y = malloc(c.y_count * 4), *dx = malloc(c.x_count * 4);
    int32_t *argmax = malloc(c.y_count * sizeof(int32_t));
    model__maxpool_forward(&s, x, y, argmax, batch);
    check_forward(&c, "maxpool", y);
    model__maxpool_backward(&s, dy, argmax, dx, batch);
    check_grad(&c, "maxpool dx", c.x, c.x_count, dx);
    free(x), free(dy), free(y), free(dx), free(argmax);
    case_free(&c);
}

/* The documented choice among equals and NaNs, PyTorch's: the window's
 * elements are visited row by row from its first, and a later one wins
 * when it is greater or NaN (a model gone to NaN shows it); y is the
 * winner, bit for bit (so -0 and NaN stay themselves). Values from a few
 * of each kind, so ties are common. Widths cover the 2x2 window's
 * four-at-a-time path and the odd outputs left after it; k 3 the loop
 * over any window. */
static void test_maxpool_ties(int h, int w, int k)
{
    const float kinds[] = {NAN, -INFINITY, -0.0f, 0.0f, 1.0f, 2.0f};
    model__conv_shape_t s = {.in_c = 3, .in_h = h, .in_w = w, .out_c = 3,
                             .k = k, .stride = 2, .out_h = (h - k) / 2 + 1,
                             .out_w = (w - k) / 2 + 1};
    size_t plane = (size_t)h * w, oplane = (size_t)s.out_h * s.out_w;
    float *x = malloc(3 * plane * sizeof *x), *y = malloc(3 * oplane * 4);
    int32_t *argmax = malloc(3 * oplane * sizeof *argmax);
    for (size_t i = 0; i < 3 * plane; i++) x[i] = kinds[rand() % 6];
    model__maxpool_forward(&s, x, y, argmax, 1);
    for (size_t c = 0; c < 3; c++)
        for (int oy = 0; oy < s.out_h; oy++)
            for (int ox = 0; ox < s.out_w; ox++) {
                const float *xp = x + c * plane;
                int32_t corner = 2 * oy * w + 2 * ox, best = corner;
                for (int t = 1; t < k * k; t++) {
                    int32_t at = corner + t / k * w + t % k;
                    if (xp[at] > xp[best] || isnan(xp[at])) best = at;
                }
                size_t o = c * oplane + (size_t)oy * s.out_w + ox;
                if (argmax[o] != best || memcmp(&y[o], &xp[best], 4)) {
                    TEST_FAIL("maxpool %dx%d plane %zu (%d, %d): argmax %d "
                              "y %g, want %d %g", h, w, c, oy, ox, argmax[o],
                              y[o], best, xp[best]);
                    free(x), free(y), free(argmax);
                    return;
                }
            }
    free(x), free(y), free(argmax);
}

static void test_dropout(void)
{
    enum { N = 20000 };
    const float p = 0.25f;
    case_t c = {.x_count = N, .y_count = N, .ref = ref_dropout};
    case_alloc(&c);
    float *x = to_float(c.x, N), *dy = to_float(c.r, N);
    float *y = malloc(N * 4), *dx = malloc(N * 4), *mask2 = malloc(N * 4);
    c.mask = malloc(N * 4);
    const uint64_t seed = 7;
    model__dropout_forward(x, y, c.mask, N, p, 1, seed);
    size_t dropped = 0, bad_mask = 0;
    for (size_t i = 0; i < N; i++) {
        dropped += c.mask[i] == 0;
        bad_mask += c.mask[i] != 0 && c.mask[i] != 1 / (1 - p);
    }
    TEST_EQ(bad_mask, 0);
    TEST_TRUE(dropped > N * 0.23 && dropped < N * 0.27);
    check_forward(&c, "dropout", y);
    model__dropout_backward(dy, c.mask, dx, N);
    check_grad(&c, "dropout dx", c.x, 1000, dx);
    /* Seeded: the same seed gives the same mask, the generator advanced
     * past this call's draws another. Element i's draw is the i-th of the
     * sequential generator (what a GPU thread per element computes). */
    model__dropout_forward(x, y, mask2, N, p, 1, seed);
    TEST_TRUE(memcmp(c.mask, mask2, N * 4) == 0);
    uint64_t state = seed;
    size_t unlike = 0;
    for (size_t i = 0; i < N; i++) {
        float u = model__rng_uniform(&state);
        unlike += c.mask[i] != (u < p ? 0.0f : 1 / (1 - p));
    }
    TEST_EQ(unlike, 0);
    model__dropout_forward(x, y, mask2, N, p, 1, state);
    TEST_TRUE(memcmp(c.mask, mask2, N * 4) != 0);
    /* Eval: identity. */
    model__dropout_forward(x, y, mask2, N, p, 0, state);
    TEST_TRUE(memcmp(x, y, N * 4) == 0);
    free(x), free(dy), free(y), free(dx), free(mask2);
    case_free(&c);
}

/* ---- softmax cross-entropy ---- */

static int32_t xent_labels[4] = {3, 0, 9, 3};
static double ref_xent(void *ctx)
{
    case_t *c = ctx;
    double total = 0;
    for (int n = 0; n < c->batch; n++) {
        double sum = 0;
        for (int k = 0; k < 10; k++)
            sum += exp(c->x[n * 10 + k]);
        total += log(sum) - c->x[n * 10 + xent_labels[n]];
    }
    return total / c->batch;
}

static void test_xent(void)
{
    case_t c = {.batch = 4, .x_count = 40, .ref = ref_xent};
    case_alloc(&c);
    for (size_t i = 0; i < 40; i++)
        c.x[i] *= 3;
    float *z = to_float(c.x, 40), dz[40];
    double losses[4];
    model__softmax_xent(z, xent_labels, dz, losses, 4, 10);
    double loss = (losses[0] + losses[1] + losses[2] + losses[3]) / 4;
    double want = ref_xent(&c);
    TEST_TRUE(fabs(loss - want) <= 1e-6 * (1 + want));
    check_grad(&c, "xent dlogits", c.x, 40, dz);
    /* Large logits stay finite (model_loss refuses bad labels:
     * test_models). */
    for (int i = 0; i < 40; i++)
        z[i] = i % 10 == 3 ? 1000.0f : -1000.0f;
    model__softmax_xent(z, xent_labels, dz, losses, 4, 10);
    double big[4] = {0, 2000, 2000, 0};
    for (int n = 0; n < 4; n++) TEST_TRUE(fabs(losses[n] - big[n]) < 1e-3);
    free(z);
    case_free(&c);
}

int main(void)
{
    test_linear(3, 7, 5);
    test_linear(1, 1, 1);
    test_conv(2, 3, 7, 6, 4, 3, 1, 1);
    test_conv(2, 2, 9, 8, 3, 3, 2, 0);
    test_conv(1, 2, 8, 8, 3, 5, 1, 2); /* the cnn's geometry, smaller */
    test_conv(1, 1, 5, 5, 2, 1, 1, 0);
    /* Through oneDNN too: odd output channels, stride 2, the cnn's conv2
     * geometry (smaller), and batch 1. */
    test_conv(2, 16, 6, 6, 5, 3, 1, 1);
    test_conv(1, 16, 7, 9, 3, 3, 2, 0);
    test_conv(2, 32, 6, 6, 4, 5, 1, 2);
    test_dnnl_takes();
    test_relu();
    test_maxpool(2, 3, 6, 6, 2, 2);
    test_maxpool(1, 2, 7, 7, 3, 2); /* overlapping windows */
    test_maxpool(2, 3, 28, 28, 2, 2); /* the cnn's, four at a time */
    test_maxpool_ties(28, 28, 2);
    test_maxpool_ties(14, 14, 2);
    test_maxpool_ties(9, 23, 2); /* odd: the last row and column unused */
    test_maxpool_ties(9, 11, 3);
    test_dropout();
    test_xent();
    if (!test_failures) printf("layers ok\n");
    return test_exit_code();
}
