/* test/test_models.c: the mlp and cnn through the public header: slab
 * layout and names, seeded initialisation, finite-difference gradients of
 * the whole model (central differences of the float loss, on the largest
 * and on random gradient entries, and along each tensor's gradient, where
 * no ReLU or max-pool switches within the step, so the loss is smooth), the
 * backward hook's order, errors (HVD_CONV's too), SGD against
 * hand-computed steps, the warm-up schedule, and a few steps of training
 * that must lower the loss.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "models/model.h"
#include "models/model_internal.h"
#include "test/test.h"

#define NEAR(a, b, tol)                                                        \
    do {                                                                       \
        double near_a_ = (a), near_b_ = (b);                                   \
        if (!(fabs(near_a_ - near_b_) <= (tol)))                               \
            TEST_FAIL("%s = %.9g, want %.9g", #a, near_a_, near_b_);           \
    } while (0)

static uint64_t rng_state = 99;
static double urand01(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* ---- layout, names, initialisation ---- */

static void test_layout(const char *kind, int c, int h, int w, size_t nparams,
                        size_t total, const char *first, const char *last)
{
    model_t m, m2, m3;
    TEST_EQ(model_init_shape(&m, kind, c, h, w, 4, 42), MODEL_OK);
    TEST_EQ(m.in_count, c * h * w);
    TEST_EQ(m.in_channels, c);
    TEST_EQ(m.in_height, h);
    TEST_EQ(m.in_width, w);
    TEST_EQ(model_num_params(&m), nparams);
    TEST_EQ(m.param_count, total);
    TEST_TRUE(!strcmp(model_param_name(&m, 0), first));
    TEST_TRUE(!strcmp(model_param_name(&m, nparams - 1), last));
    TEST_TRUE(model_param_name(&m, nparams) == NULL);
    /* Tensors tile each slab with no gaps, in reverse index order (the
     * order backward finishes them). */
    size_t off = 0;
    for (size_t i = nparams; i-- > 0;) {
        TEST_TRUE(model_param_data(&m, i) == m.param_slab + off);
        TEST_TRUE(model_grad_data(&m, i) == m.grad_slab + off);
        off += model_param_count(&m, i);
    }
    TEST_EQ(off, total);
    /* He uniform weights within sqrt(6 / fan_in), zero biases. */
    for (size_t i = 0; i < nparams; i++) {
        const float *p = model_param_data(&m, i);
        size_t n = model_param_count(&m, i);
        int is_bias = strstr(model_param_name(&m, i), ".bias") != NULL;
        size_t fan_in = n / (size_t)m.params[i].shape[0];
        double bound = sqrt(6.0 / fan_in), maxabs = 0, sum = 0;
        for (size_t j = 0; j < n; j++) {
            maxabs = fabs(p[j]) > maxabs ? fabs(p[j]) : maxabs;
            sum += p[j];
        }
        if (is_bias)
            TEST_TRUE(maxabs == 0);
        else {
            TEST_TRUE(maxabs <= bound && maxabs > 0.9 * bound);
            TEST_TRUE(fabs(sum / n) < 0.1 * bound);
        }
    }
    /* Same seed, same weights; another seed, others. */
    TEST_EQ(model_init_shape(&m2, kind, c, h, w, 1, 42), MODEL_OK);
    TEST_EQ(model_init_shape(&m3, kind, c, h, w, 4, 43), MODEL_OK);
    TEST_TRUE(!memcmp(m.param_slab, m2.param_slab, total * sizeof(float)));
    TEST_TRUE(memcmp(m.param_slab, m3.param_slab, total * sizeof(float)));
    model_free(&m), model_free(&m2), model_free(&m3);
    model_free(&m); /* twice is harmless */
    model_free(NULL);
}

/* ---- gradients by finite differences ---- */

static float batch_loss(model_t *m, const float *x, const int *y, int batch)
{
    float loss = 0;
    if (model_forward(m, x, batch, 1) || model_loss(m, y, batch, &loss))
        TEST_FAIL("forward/loss failed");
    return loss;
}

/* A hash of which ReLUs are on and which max-pool inputs won, after the
 * last forward: the loss is smooth while it stays the same. */
static uint64_t kink_pattern(const model_t *m)
{
    uint64_t hsh = 1469598103934665603ull;
    for (int i = 0; i < m->num_layers; i++) {
        const struct model__layer *l = &m->layers[i];
        size_t n = (size_t)m->batch * l->out_count;
        for (size_t j = 0; j < n; j++) {
            uint64_t v = l->kind == MODEL__RELU      ? l->out[j] > 0
                         : l->kind == MODEL__MAXPOOL ? (uint64_t)l->argmax[j]
                                                     : 0;
            hsh = (hsh ^ v) * 1099511628211ull;
        }
    }
    return hsh;
}

/* kind on in_c x in_h x in_w inputs, with batch samples. */
static void test_model_grads(const char *kind, int in_c, int in_h, int in_w,
                             int batch)
{
    model_t m;
    TEST_EQ(model_init_shape(&m, kind, in_c, in_h, in_w, batch, 7), MODEL_OK);
    size_t in = (size_t)m.in_count * batch, total = m.param_count;
    float *x = malloc(in * sizeof(float)), *g = malloc(total * sizeof(float));
    int y[8];
    for (size_t i = 0; i < in; i++)
        x[i] = (float)urand01();
    for (int n = 0; n < batch; n++)
        y[n] = (int)(urand01() * 10);
    batch_loss(&m, x, y, batch);
    uint64_t pattern = kink_pattern(&m);
    TEST_EQ(model_backward(&m, NULL, NULL), MODEL_OK);
    memcpy(g, m.grad_slab, total * sizeof(float));
    int checked = 0, skipped = 0;

    const double h = 1e-3, atol = 5e-4, rtol = 3e-2;
    double worst = 0;
    for (size_t t = 0; t < model_num_params(&m); t++) {
        float *p = model_param_data(&m, t);
        const float *gt = g + m.params[t].offset;
        size_t n = model_param_count(&m, t), top = 0;
        double norm = 0;
        for (size_t j = 0; j < n; j++) {
            norm += (double)gt[j] * gt[j];
            if (fabsf(gt[j]) > fabsf(gt[top])) top = j;
        }
        norm = sqrt(norm);
        /* Single entries: the largest and random ones, six smooth ones. */
        int tensor_checked = 0;
        for (int k = 0; k < 200 && tensor_checked < 6; k++) {
            size_t j = k == 0 ? top : (size_t)(urand01() * n);
            float save = p[j];
            p[j] = save + (float)h;
            double lp = batch_loss(&m, x, y, batch);
            int smooth = kink_pattern(&m) == pattern;
            p[j] = save - (float)h;
            double lm = batch_loss(&m, x, y, batch);
            smooth &= kink_pattern(&m) == pattern;
            p[j] = save;
            if (!smooth) { /* a ReLU or max-pool switched: not comparable */
                skipped++;
                continue;
            }
            checked++;
            tensor_checked++;
            double num = (lp - lm) / (2 * h), err = fabs(num - gt[j]);
            worst = err > worst ? err : worst;
            if (err > atol + rtol * fabs(num))
                TEST_FAIL("%s %s[%zu]: backward %.6g, finite difference %.6g",
                          kind, model_param_name(&m, t), j, gt[j], num);
        }
        if (tensor_checked < 3)
            TEST_FAIL("%s %s: only %d smooth entries", kind,
                      model_param_name(&m, t), tensor_checked);
        /* Along the gradient: the slope must be |g|. */
        if (norm > 0) {
            float *save = malloc(n * sizeof(float));
            memcpy(save, p, n * sizeof(float));
            double step = h / norm;
            for (size_t j = 0; j < n; j++)
                p[j] = save[j] + (float)(step * gt[j]);
            double lp = batch_loss(&m, x, y, batch);
            int smooth = kink_pattern(&m) == pattern;
            for (size_t j = 0; j < n; j++)
                p[j] = save[j] - (float)(step * gt[j]);
            double lm = batch_loss(&m, x, y, batch);
            smooth &= kink_pattern(&m) == pattern;
            memcpy(p, save, n * sizeof(float));
            free(save);
            double slope = (lp - lm) / (2 * h);
            if (!smooth)
                skipped++;
            else if (fabs(slope - norm) > atol + rtol * norm)
                TEST_FAIL("%s %s: slope along the gradient %.6g, |g| %.6g",
                          kind, model_param_name(&m, t), slope, norm);
        }
    }
    printf("%s %dx%dx%d: %d entries checked, %d skipped at a kink, largest "
           "finite-difference error %.2g\n",
           kind, in_c, in_h, in_w, checked, skipped, worst);

    free(x), free(g);
    model_free(&m);
}

/* ---- the hook ---- */

typedef struct {
    size_t order[16];
    int calls, fail_at;
    const model_t *m;
    int grad_ready; /* every hooked gradient was already written */
} hook_log_t;

static int record_hook(void *ctx, size_t idx)
{
    hook_log_t *log = ctx;
    if (log->calls < 16) log->order[log->calls] = idx;
    const float *g = model_grad_data(log->m, idx);
    int any = 0;
    for (size_t j = 0; j < model_param_count(log->m, idx); j++)
        any |= g[j] != 0;
    log->grad_ready &= any;
    return ++log->calls == log->fail_at ? -42 : 0;
}

static void test_hook(const char *kind)
{
    model_t m;
    TEST_EQ(model_init(&m, kind, 2, 3), MODEL_OK);
    float *x = calloc((size_t)m.in_count * 2, sizeof(float));
    for (int i = 0; i < m.in_count * 2; i++)
        x[i] = (float)urand01();
    int y[2] = {1, 7};
    hook_log_t log = {.m = &m, .grad_ready = 1};
    batch_loss(&m, x, y, 2);
    model_zero_grad(&m);
    TEST_EQ(model_backward(&m, record_hook, &log), MODEL_OK);
    size_t n = model_num_params(&m);
    TEST_EQ(log.calls, n);
    for (size_t i = 0; i < n && i < 16; i++) /* last first, each once */
        TEST_EQ(log.order[i], n - 1 - i);
    TEST_TRUE(log.grad_ready);
    /* A failing hook stops backward with its status. */
    hook_log_t stop = {.m = &m, .grad_ready = 1, .fail_at = 3};
    TEST_EQ(model_backward(&m, record_hook, &stop), -42);
    TEST_EQ(stop.calls, 3);
    free(x);
    model_free(&m);
}

/* ---- errors, accumulation, predictions ---- */

static void test_errors(void)
{
    model_t m;
    float loss, x[784 * 2] = {0};
    int y[2] = {0, 1}, bad[2] = {0, 10}, pred[2], correct;
    TEST_EQ(model_init(&m, "resnet", 2, 1), MODEL_ERR_ARG);
    TEST_EQ(model_init(&m, "mlp", 0, 1), MODEL_ERR_ARG);
    TEST_EQ(model_init(NULL, "mlp", 2, 1), MODEL_ERR_ARG);
    /* Input shapes: positive, bounded, large enough for the cnn's two
     * 2x2 poolings (4 x 4 at least). */
    TEST_EQ(model_init_shape(&m, "mlp", 0, 28, 28, 2, 1), MODEL_ERR_ARG);
    TEST_EQ(model_init_shape(&m, "mlp", 1, -1, 28, 2, 1), MODEL_ERR_ARG);
    TEST_EQ(model_init_shape(&m, "mlp", 1, 28, 4097, 2, 1), MODEL_ERR_ARG);
    TEST_EQ(model_init_shape(&m, "mlp", 4, 4096, 4096, 2, 1), MODEL_ERR_ARG);
    TEST_EQ(model_init_shape(&m, "cnn", 3, 3, 32, 2, 1), MODEL_ERR_ARG);
    TEST_EQ(model_init_shape(&m, "cnn", 3, 32, 1, 2, 1), MODEL_ERR_ARG);
    TEST_TRUE(m.layers == NULL && m.param_slab == NULL); /* left zeroed */
    TEST_EQ(model_init_shape(&m, "cnn", 1, 4, 5, 2, 1), MODEL_OK);
    TEST_EQ(m.params[4].shape[1], 64); /* 64 x 1 x 1 features */
    model_free(&m);
    TEST_EQ(model_init_shape(&m, "mlp", 1, 1, 1, 2, 1), MODEL_OK);
    model_free(&m);
    TEST_EQ(model_init(&m, "mlp", 2, 1), MODEL_OK);
    TEST_EQ(model_loss(&m, y, 2, &loss), MODEL_ERR_STATE);
    TEST_EQ(model_backward(&m, NULL, NULL), MODEL_ERR_STATE);
    TEST_EQ(model_predict(&m, pred, NULL, NULL), MODEL_ERR_ARG);
    TEST_EQ(model_forward(&m, x, 3, 0), MODEL_ERR_ARG);
    TEST_EQ(model_forward(&m, x, 0, 0), MODEL_ERR_ARG);
    TEST_EQ(model_forward(&m, x, 2, 0), MODEL_OK);
    TEST_EQ(model_loss(&m, y, 1, &loss), MODEL_ERR_ARG);
    TEST_EQ(model_loss(&m, bad, 2, &loss), MODEL_ERR_ARG);
    TEST_EQ(model_backward(&m, NULL, NULL), MODEL_ERR_STATE);
    TEST_EQ(model_loss(&m, y, 2, &loss), MODEL_OK);
    NEAR(loss, log(10.0), 2.0); /* near chance, finite */
    /* Accumulation: two passes give twice one pass. */
    TEST_EQ(model_backward(&m, NULL, NULL), MODEL_OK);
    const float *fc3_bias = model_grad_data(&m, model_num_params(&m) - 1);
    float once = fc3_bias[0];
    m.grad_accumulate = 1;
    TEST_EQ(model_backward(&m, NULL, NULL), MODEL_OK);
    NEAR(fc3_bias[0], 2 * once, 1e-6);
    TEST_TRUE(once != 0);
    /* Predictions are the arg-max of the logits. */
    TEST_EQ(model_predict(&m, pred, y, &correct), MODEL_OK);
    const float *z = model_logits(&m);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 10; c++)
            TEST_TRUE(z[n * 10 + c] <= z[n * 10 + pred[n]]);
    TEST_EQ(correct, (pred[0] == 0) + (pred[1] == 1));
    TEST_TRUE(strcmp(model_strerror(MODEL_ERR_NOMEM), "out of memory") == 0);
    model_free(&m);
}

/* HVD_CONV's and HVD_CONV_TF32's bad values are refused on the CPU too,
 * naming the value; their good ones (cudnn and TF32 are the GPU's,
 * ignored here) are not. */
static void test_conv_env(void)
{
    const char *good[] = {"", "im2col", "cudnn"}, *why = NULL;
    model_t m;
    setenv("HVD_CONV", "xyz", 1);
    TEST_EQ(model_device_available(MODEL_DEVICE_CPU, &why), 0);
    TEST_TRUE(why && !strcmp(why, "HVD_CONV=xyz: expected cudnn or im2col"));
    TEST_EQ(model_init(&m, "mlp", 2, 1), MODEL_ERR_ARG);
    TEST_TRUE(m.layers == NULL && m.param_slab == NULL);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("HVD_CONV", good[i], 1);
        TEST_EQ(model_device_available(MODEL_DEVICE_CPU, NULL), 1);
        TEST_EQ(model_init(&m, "cnn", 2, 1), MODEL_OK);
        model_free(&m);
    }
    unsetenv("HVD_CONV");
    /* HVD_CONV_TF32: 0 or 1 (the CPU has no TF32: both are taken). */
    setenv("HVD_CONV_TF32", "2", 1);
    TEST_EQ(model_device_available(MODEL_DEVICE_CPU, &why), 0);
    TEST_TRUE(why && !strcmp(why, "HVD_CONV_TF32=2: expected 0 or 1"));
    TEST_EQ(model_init(&m, "cnn", 2, 1), MODEL_ERR_ARG);
    setenv("HVD_CONV_TF32", "1", 1);
    TEST_EQ(model_init(&m, "cnn", 2, 1), MODEL_OK);
    model_free(&m);
    unsetenv("HVD_CONV_TF32");
}

/* ---- SGD: two steps of p = 1, g = 0.1, lr = 0.1, worked by hand ---- */

static void sgd_two_steps(float momentum, float wd, int nesterov, double p1,
                          double p2)
{
    model_sgd_t opt;
    float p[2] = {1.0f, 1.0f}, g[2] = {0.1f, 0.1f};
    TEST_EQ(model_sgd_init(&opt, 2, 0.1f, momentum, wd, nesterov), MODEL_OK);
    TEST_EQ(model_sgd_step(&opt, p, g), MODEL_OK);
    NEAR(p[0], p1, 1e-6);
    TEST_EQ(model_sgd_step(&opt, p, g), MODEL_OK);
    NEAR(p[1], p2, 1e-6);
    model_sgd_free(&opt);
    model_sgd_free(&opt);
}

static void test_sgd(void)
{
    /* plain: 1 - 0.1*0.1 = 0.99, then 0.98 */
    sgd_two_steps(0, 0, 0, 0.99, 0.98);
    /* momentum 0.9: v = 0.1, p = 0.99; v = 0.19, p = 0.99 - 0.019 */
    sgd_two_steps(0.9f, 0, 0, 0.99, 0.971);
    /* Nesterov: v = 0.1, g = 0.1 + 0.09, p = 0.981;
     * v = 0.19, g = 0.1 + 0.171 = 0.271, p = 0.981 - 0.0271 */
    sgd_two_steps(0.9f, 0, 1, 0.981, 0.9539);
    /* weight decay 0.01 with momentum: g = 0.11, v = 0.11, p = 0.989;
     * g = 0.1 + 0.00989, v = 0.099 + 0.10989 = 0.20889, p = 0.968111 */
    sgd_two_steps(0.9f, 0.01f, 0, 0.989, 0.968111);
    /* weight decay alone: p = 1 - 0.1 * 0.11 = 0.989 */
    sgd_two_steps(0, 0.01f, 0, 0.989, 0.989 - 0.1 * (0.1 + 0.01 * 0.989));
    model_sgd_t opt;
    TEST_EQ(model_sgd_init(&opt, 4, 0.1f, 0, 0, 1), MODEL_ERR_ARG);
    TEST_EQ(model_sgd_init(&opt, 4, -0.1f, 0, 0, 0), MODEL_ERR_ARG);
    TEST_EQ(model_sgd_init(&opt, 4, 0.1f, -0.5f, 0, 0), MODEL_ERR_ARG);
    TEST_EQ(model_sgd_init(&opt, 4, 0.1f, 0.9f, -0.01f, 0), MODEL_ERR_ARG);
    TEST_EQ(model_sgd_init(&opt, 4, 0.1f, 0.9f, NAN, 0), MODEL_ERR_ARG);
    TEST_TRUE(opt.velocity == NULL); /* refused before allocating */
    TEST_EQ(model_sgd_init(&opt, 4, 0.1f, 0, 0, 0), MODEL_OK);
    TEST_TRUE(opt.velocity == NULL);
    model_sgd_free(&opt);
    TEST_EQ(model_sgd_init(&opt, 4, 0.1f, 0.9f, 0, 0), MODEL_OK);
    TEST_TRUE(opt.velocity && opt.velocity[3] == 0);
    model_sgd_free(&opt);
    /* No optimizer to step: freed, never made, its init refused. */
    float p[1] = {1}, g[1] = {1};
    TEST_EQ(model_sgd_step(&opt, p, g), MODEL_ERR_STATE);
    memset(&opt, 0, sizeof opt);
    TEST_EQ(model_sgd_step(&opt, p, g), MODEL_ERR_STATE);
    TEST_EQ(model_sgd_init(&opt, 0, -1.0f, 0, 0, 0), MODEL_ERR_ARG);
    TEST_EQ(model_sgd_step(&opt, p, g), MODEL_ERR_STATE);
    TEST_TRUE(p[0] == 1);
}

/* A NaN input shows in the loss, as in PyTorch: ReLU and max-pool pass
 * it (they hid it: a finite loss, with NaN gradients spreading). */
static void test_nan_shows(const char *kind)
{
    enum { B = 2 };
    model_t m;
    float x[784 * B] = {0}, loss = 0;
    int y[B] = {3, 7};
    x[14 * 28 + 14] = NAN; /* the middle pixel of the first image */
    TEST_EQ(model_init(&m, kind, B, 5), MODEL_OK);
    loss = batch_loss(&m, x, y, B);
    if (!isnan(loss)) TEST_FAIL("%s: loss %g with a NaN pixel", kind, loss);
    model_free(&m);
}

/* model_sgd_step_range over pieces gives bitwise what model_sgd_step gives
 * over the whole, for each flavour of the rule, and refuses ranges past
 * the count. */
static void test_sgd_range(void)
{
    enum { N = 37 };
    static const float flavours[][3] = {{0, 0, 0}, {0.9f, 0, 0},
                                        {0.9f, 1e-2f, 1}, {0, 1e-2f, 0}};
    for (int f = 0; f < 4; f++) {
        model_sgd_t whole, pieces;
        float p[N], q[N], g[N], work[N];
        TEST_EQ(model_sgd_init(&whole, N, 0.1f, flavours[f][0], flavours[f][1],
                               flavours[f][2] != 0),
                MODEL_OK);
        TEST_EQ(model_sgd_init(&pieces, N, 0.1f, flavours[f][0],
                               flavours[f][1], flavours[f][2] != 0),
                MODEL_OK);
        for (int i = 0; i < N; i++) p[i] = q[i] = 0.37f * (float)(i % 11) - 1;
        for (int step = 0; step < 3; step++) {
            for (int i = 0; i < N; i++)
                g[i] = 0.013f * (float)((i * 7 + step) % 13) - 0.05f;
            TEST_EQ(model_sgd_step(&whole, p, g), MODEL_OK);
            /* Pieces of 10, 1, 20 and 6, each from its gradients. */
            static const size_t cut[] = {0, 10, 11, 31, N};
            memcpy(work, g, sizeof g);
            for (int c = 0; c < 4; c++)
                TEST_EQ(model_sgd_step_range(&pieces, q, cut[c],
                                             work + cut[c],
                                             cut[c + 1] - cut[c]),
                        MODEL_OK);
            memcpy(q, work, sizeof q);
        }
        TEST_TRUE(memcmp(p, q, sizeof p) == 0);
        if (whole.velocity)
            TEST_TRUE(memcmp(whole.velocity, pieces.velocity,
                             N * sizeof(float)) == 0);
        TEST_EQ(model_sgd_step_range(&pieces, q, N - 3, work, 4),
                MODEL_ERR_ARG);
        TEST_EQ(model_sgd_step_range(&pieces, q, N + 1, work, 0),
                MODEL_ERR_ARG);
        TEST_EQ(model_sgd_step_range(&pieces, q, N, work, 0), MODEL_OK);
        model_sgd_free(&whole);
        model_sgd_free(&pieces);
    }
}

static void test_warmup(void)
{
    NEAR(model_lr_warmup(0.1f, 4, 5, 0), 0.1, 1e-7);
    NEAR(model_lr_warmup(0.1f, 4, 5, 2.5), 0.25, 1e-7);
    NEAR(model_lr_warmup(0.1f, 4, 5, 5), 0.4, 1e-7);
    NEAR(model_lr_warmup(0.1f, 4, 5, 9.5), 0.4, 1e-7);
    NEAR(model_lr_warmup(0.1f, 4, 0, 0), 0.4, 1e-7);
    NEAR(model_lr_warmup(0.1f, 1, 5, 1), 0.1, 1e-7);
}

static void test_cosine(void)
{
    NEAR(model_lr_cosine(0.4f, 1, 5, 0.5), 0.4, 1e-7);
    NEAR(model_lr_cosine(0.4f, 1, 5, 1), 0.4, 1e-7);
    NEAR(model_lr_cosine(0.4f, 1, 5, 2), 0.4 * (1 + cos(acos(-1.0) / 4)) / 2, 1e-7);
    NEAR(model_lr_cosine(0.4f, 1, 5, 3), 0.2, 1e-7);
    NEAR(model_lr_cosine(0.4f, 1, 5, 4.999999), 0.0, 1e-7);
    NEAR(model_lr_cosine(0.4f, 1, 5, 5), 0.0, 0);
    NEAR(model_lr_cosine(0.4f, 1, 5, 7), 0.0, 0);
    NEAR(model_lr_cosine(0.4f, 5, 5, 7), 0.4, 1e-7); /* no decay */
}

/* ---- a few steps of training lower the loss ---- */

static void test_training(const char *kind, int steps)
{
    enum { B = 16 };
    model_t m;
    model_sgd_t opt;
    float *x = malloc(sizeof(float) * 784 * B), first = 0, loss = 0;
    int y[B];
    for (int n = 0; n < B; n++) { /* class c lights up rows 2c..2c+2 */
        y[n] = n % 10;
        for (int i = 0; i < 784; i++)
            x[n * 784 + i] =
                (float)(0.2 * urand01()) + (i / 28 / 2 == y[n] ? 1.0f : 0.0f);
    }
    TEST_EQ(model_init(&m, kind, B, 5), MODEL_OK);
    TEST_EQ(model_sgd_init(&opt, m.param_count, 0.05f, 0.9f, 1e-4f, 1),
            MODEL_OK);
    for (int s = 0; s < steps; s++) {
        loss = batch_loss(&m, x, y, B);
        if (s == 0) first = loss;
        TEST_EQ(model_backward(&m, NULL, NULL), MODEL_OK);
        TEST_EQ(model_sgd_step(&opt, m.param_slab, m.grad_slab), MODEL_OK);
    }
    int correct = 0;
    model_forward(&m, x, B, 0);
    model_predict(&m, NULL, y, &correct);
    printf("%s: loss %.4f -> %.4f in %d steps, %d/%d right\n", kind, first,
           loss, steps, correct, B);
    TEST_TRUE(loss < 0.2f * first);
    TEST_EQ(correct, B);
    model_sgd_free(&opt);
    model_free(&m);
    free(x);
}

/* A cnn's gradients, worked out again and again in a thread of its own
 * beside another's: each time bitwise what its thread alone made first
 * (the convolutions' oneDNN plans are the process's: two models at once
 * ran on each other's data). */
typedef struct {
    const char *kind;
    int seed, wrong;
} grads_job_t;

static void *grads_again(void *arg)
{
    enum { B = 8, TIMES = 150 };
    grads_job_t *job = arg;
    model_t m;
    float *x = malloc(sizeof(float) * 784 * B), *first = NULL;
    int y[B];
    for (int i = 0; i < 784 * B; i++) x[i] = (float)((i * 7 + job->seed) % 13);
    for (int n = 0; n < B; n++) y[n] = (n + job->seed) % 10;
    if (model_init(&m, job->kind, B, job->seed) != MODEL_OK) {
        job->wrong = -1;
        free(x);
        return NULL;
    }
    first = malloc(m.param_count * sizeof *first);
    for (int t = 0; t < TIMES; t++) {
        batch_loss(&m, x, y, B);
        model_backward(&m, NULL, NULL);
        if (t == 0)
            memcpy(first, m.grad_slab, m.param_count * sizeof *first);
        else
            job->wrong +=
                memcmp(first, m.grad_slab, m.param_count * sizeof *first) != 0;
    }
    free(first);
    free(x);
    model_free(&m);
    return NULL;
}

static void test_threads(void)
{
    grads_job_t jobs[2] = {{"cnn", 5, 0}, {"cnn", 6, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        TEST_EQ(pthread_create(&t[i], NULL, grads_again, &jobs[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        if (jobs[i].wrong)
            TEST_FAIL("cnn seed %d beside another thread's: %d of 149 "
                      "gradients differ from its first", jobs[i].seed,
                      jobs[i].wrong);
}

/* A denormal survives arithmetic until model_flush_denormals, then reads
 * and results below FLT_MIN are zero. */
static void test_flush_denormals(void)
{
    volatile float tiny = 1e-40f, one = 1.0f, half = 0.5f;
    TEST_TRUE(tiny * one != 0.0f);
    if (!model_flush_denormals()) return; /* no such mode on this CPU */
    TEST_TRUE(tiny * one == 0.0f);
    TEST_TRUE(1e-37f * half * (float)one * 1e-2f == 0.0f);
}

int main(void)
{
    test_flush_denormals();
    test_layout("mlp", 1, 28, 28, 6,
                784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10,
                "fc1.weight", "fc3.bias");
    test_layout("cnn", 1, 28, 28, 8,
                32 * 25 + 32 + 64 * 32 * 25 + 64 + 3136 * 128 + 128 + 128 * 10 +
                    10,
                "conv1.weight", "fc2.bias");
    /* CIFAR-10's 3x32x32: conv1 sees 3 channels, fc1 64 x 8 x 8. */
    test_layout("mlp", 3, 32, 32, 6,
                3072 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10,
                "fc1.weight", "fc3.bias");
    test_layout("cnn", 3, 32, 32, 8,
                32 * 3 * 25 + 32 + 64 * 32 * 25 + 64 + 4096 * 128 + 128 +
                    128 * 10 + 10,
                "conv1.weight", "fc2.bias");
    test_model_grads("mlp", 1, 28, 28, 3);
    test_model_grads("cnn", 1, 28, 28, 2);
    /* Non-square, several channels: a swapped height and width or a
     * channel-stride slip would show. */
    test_model_grads("mlp", 3, 12, 16, 3);
    test_model_grads("cnn", 3, 12, 16, 2);
    test_hook("mlp");
    test_hook("cnn");
    test_errors();
    test_conv_env();
    test_sgd();
    test_sgd_range();
    test_warmup();
    test_cosine();
    test_threads();
    test_nan_shows("mlp");
    test_nan_shows("cnn");
    test_training("mlp", 30);
    test_training("cnn", 30);
    if (!test_failures) printf("models ok\n");
    return test_exit_code();
}
