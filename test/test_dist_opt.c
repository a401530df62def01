/* test/test_dist_opt.c: the DistributedOptimizer's defining property. N
 * ranks, each training on its B/N samples of every batch, must end with the
 * parameters one process gets from the whole batch B, from the same initial
 * weights and data order (to float tolerance, as the sums are grouped
 * differently). Rank 0 computes that single-process reference itself.
 *
 *   test_dist_opt [fp16] [passes=K] [shard]
 *     fp16: gradients travel as float16 (looser tolerance);
 *     passes=K: backward_passes_per_step K, each rank's share of a batch
 *       split into K micro-batches;
 *     ring: HVD_INTRANODE=ring, so that a sharded step takes the path
 *       off shared memory (every rank applies the whole range);
 *     shard: a sharded step (shard_params), which must also give bitwise
 *       the parameters, and after hvd_dist_opt_sync_state the momentum, of
 *       the unsharded one, trained beside it in the same process; and the
 *       sharded step's misuse (no update, fp16, gradients in pieces, a
 *       joined rank, a count that differs across ranks) is refused by
 *       name.
 * Also: parameters broadcast from rank 0 replace every rank's own; bad
 * arguments and misuse (a NULL name or gradient, a tensor out of range, a
 * gradient made ready twice, a NULL optimizer) fail with hvd's message and
 * status, and leave no optimizer or a working one.
 */
#define _POSIX_C_SOURCE 200809L /* test/capture.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/hvd.h"
#include "models/model.h"
#include "test/capture.h"
#include "test/test.h"

enum { BATCH = 12, STEPS = 6, IN = 784 };
static const float LR = 0.02f;

typedef struct {
    model_t *m;
    model_sgd_t *sgd;
} step_ctx_t;

static int sgd_step(void *ctx)
{
    step_ctx_t *c = ctx;
    return model_sgd_step(c->sgd, c->m->param_slab, c->m->grad_slab);
}

static int sgd_update(void *ctx, size_t first, float *grad_to_param,
                      size_t n)
{
    step_ctx_t *c = ctx;
    return model_sgd_step_range(c->sgd, c->m->param_slab, first,
                                grad_to_param, n);
}

static int grad_hook(void *ctx, size_t idx)
{
    return hvd_dist_opt_grad_ready(ctx, idx);
}

static int noop_step(void *ctx)
{
    (void)ctx;
    return 0;
}

/* Misuse on a small optimizer of its own (2 tensors of 4, summed), so that
 * the training below is untouched. */
static void test_misuse(int size)
{
    float g[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    float *grads[2] = {g[0], g[1]}, *no_grad[2] = {g[0], NULL};
    size_t counts[2] = {4, 4};
    const char *names[2] = {"misuse.a", "misuse.b"};
    const char *no_name[2] = {"misuse.a", NULL};
    hvd_optimizer_t inner = {noop_step, NULL, NULL};
    hvd_dist_opt_options_t sum = {1, 0, HVD_SUM, NULL, NULL};
    hvd_dist_opt_t *opt = (hvd_dist_opt_t *)&opt; /* must become NULL */
    const char *create = "error: hvd_dist_opt_create: ";
    char want[128];
    snprintf(want, sizeof want, "%snames[1] is NULL", create);
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, 2, no_name, grads, counts,
                                  &sum),
              HVD_ERR_ARG, want);
    TEST_TRUE(opt == NULL);
    snprintf(want, sizeof want, "%sgrads[1] is NULL, with counts[1] = 4",
             create);
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, 2, names, no_grad, counts,
                                  &sum),
              HVD_ERR_ARG, want);
    TEST_TRUE(opt == NULL);
    TEST_SAYS(hvd_dist_opt_create(NULL, inner, 2, names, grads, counts, &sum),
              HVD_ERR_ARG, "error: hvd_dist_opt_create: invalid argument");
    TEST_SAYS(hvd_dist_opt_step(NULL), HVD_ERR_ARG,
              "error: hvd_dist_opt_step: opt is NULL");
    TEST_SAYS(hvd_dist_opt_grad_ready(NULL, 0), HVD_ERR_ARG,
              "error: hvd_dist_opt_grad_ready: opt is NULL");

    TEST_EQ(hvd_dist_opt_create(&opt, inner, 2, names, grads, counts, &sum),
            HVD_OK);
    TEST_SAYS(hvd_dist_opt_grad_ready(opt, 2), HVD_ERR_ARG,
              "error: hvd_dist_opt_grad_ready: tensor 2, but the optimizer "
              "has 2");
    TEST_EQ(hvd_dist_opt_grad_ready(opt, 0), HVD_OK);
    TEST_SAYS(hvd_dist_opt_grad_ready(opt, 0), HVD_ERR_STATE,
              "error: gradient 'misuse.a' was made ready twice in one step");
    /* The step still reduces both, once: the one in flight and the one
     * never made ready. */
    TEST_EQ(hvd_dist_opt_step(opt), HVD_OK);
    for (int i = 0; i < 4; i++) {
        TEST_EQ(g[0][i], (i + 1) * size);
        TEST_EQ(g[1][i], (i + 5) * size);
    }
    hvd_dist_opt_free(&opt);
    TEST_TRUE(opt == NULL);
    /* In a pass before the last too (accepted before: nothing starts
     * there); the next pass may make it ready again. */
    hvd_dist_opt_options_t two = sum;
    two.backward_passes_per_step = 2;
    TEST_EQ(hvd_dist_opt_create(&opt, inner, 2, names, grads, counts, &two),
            HVD_OK);
    TEST_EQ(hvd_dist_opt_grad_ready(opt, 1), HVD_OK);
    TEST_SAYS(hvd_dist_opt_grad_ready(opt, 1), HVD_ERR_STATE,
              "error: gradient 'misuse.b' was made ready twice in one "
              "backward pass");
    TEST_EQ(hvd_dist_opt_step(opt), HVD_OK); /* the first pass ends */
    TEST_EQ(hvd_dist_opt_grad_ready(opt, 1), HVD_OK);
    TEST_EQ(hvd_dist_opt_step(opt), HVD_OK);
    hvd_dist_opt_free(&opt);
}

static int noop_update(void *ctx, size_t first, float *data, size_t n)
{
    (void)ctx, (void)first, (void)data, (void)n;
    return 0;
}

/* The sharded step's misuse, on a small optimizer of its own. */
static void test_shard_misuse(int rank, int size)
{
    float g[8] = {0}, p[8] = {0}, state[8] = {0};
    float *grads[2] = {g + 4, g}, *gapped[2] = {g, g + 5};
    size_t counts[2] = {4, 4}, gapped_counts[2] = {4, 3};
    const char *names[2] = {"shard.a", "shard.b"};
    hvd_optimizer_t inner = {noop_step, NULL, noop_update};
    hvd_optimizer_t no_update = {noop_step, NULL, NULL};
    hvd_dist_opt_options_t shard = {1, 0, HVD_AVERAGE, p, NULL};
    hvd_dist_opt_options_t fp16 = {1, 1, HVD_AVERAGE, p};
    hvd_dist_opt_t *opt = NULL;
    const char *create = "error: hvd_dist_opt_create: shard_params";
    char want[160];
    snprintf(want, sizeof want, "%s needs inner.update", create);
    TEST_SAYS(hvd_dist_opt_create(&opt, no_update, 2, names, grads, counts,
                                  &shard),
              HVD_ERR_ARG, want);
    snprintf(want, sizeof want, "%s needs float32 gradients (not "
             "fp16_compression)", create);
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, 2, names, grads, counts,
                                  &fp16),
              HVD_ERR_ARG, want);
    snprintf(want, sizeof want, "%s: the gradients do not lie back to back "
             "in one range", create);
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, 2, names, gapped,
                                  gapped_counts, &shard),
              HVD_ERR_ARG, want);
    TEST_TRUE(opt == NULL);
    /* In reverse order they still tile g: accepted. */
    TEST_EQ(hvd_dist_opt_create(&opt, inner, 2, names, grads, counts, &shard),
            HVD_OK);
    TEST_SAYS(hvd_dist_opt_sync_state(opt, state, 7), HVD_ERR_ARG,
              "error: hvd_dist_opt_sync_state: count is not the parameters' "
              "number");
    TEST_SAYS(hvd_dist_opt_sync_state(NULL, state, 8), HVD_ERR_ARG,
              "error: hvd_dist_opt_sync_state: opt is NULL");
    TEST_SAYS(hvd_dist_opt_sync_state(opt, NULL, 8), HVD_ERR_ARG,
              "error: hvd_dist_opt_sync_state: state is NULL");
    /* Twice, so that the step's response is cached and the join below
     * meets the engine's fast path too. */
    TEST_EQ(hvd_dist_opt_step(opt), HVD_OK);
    TEST_EQ(hvd_dist_opt_step(opt), HVD_OK);
    if (size > 1) {
        /* The last rank's model is one element smaller: every rank's step
         * fails by name instead of reducing ranges that do not match. */
        float *shorter[2] = {g + 3, g};
        size_t shorter_counts[2] = {4, 3};
        int last = rank == size - 1;
        hvd_dist_opt_t *odd = NULL;
        TEST_EQ(hvd_dist_opt_create(&odd, inner, 2, names,
                                    last ? shorter : grads,
                                    last ? shorter_counts : counts, &shard),
                HVD_OK);
        TEST_SAYS(hvd_dist_opt_step(odd), HVD_ERR_MISMATCH,
                  "'hvd.sharded_step': ranks disagree on count");
        hvd_dist_opt_free(&odd);
    }
    if (size > 1) {
        /* The last rank has run out of data: the others' sharded step
         * fails by name, since nobody would update its share. */
        if (rank == size - 1) {
            TEST_EQ(hvd_join(), HVD_OK);
        } else {
            snprintf(want, sizeof want, "'hvd.sharded_step': a sharded "
                     "optimizer step needs every rank, and rank %d has "
                     "joined", size - 1);
            TEST_SAYS(hvd_dist_opt_step(opt), HVD_ERR_MISMATCH, want);
            TEST_EQ(hvd_join(), HVD_OK);
        }
    }
    hvd_dist_opt_free(&opt);
}

/* Inputs and labels of global batch `step`, the same on every rank. */
static void make_batch(int step, float *x, int *labels)
{
    uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(step + 1);
    for (int i = 0; i < BATCH * IN; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((s >> 40) & 0xff) / 255.0f;
    }
    for (int i = 0; i < BATCH; i++) labels[i] = (i * 7 + step) % 10;
}

/* One process, whole batches: the reference. */
static void train_reference(float *params_out)
{
    model_t m;
    model_sgd_t sgd;
    float x[BATCH * IN], loss;
    int labels[BATCH];
    TEST_EQ(model_init(&m, "mlp", BATCH, 42), MODEL_OK);
    TEST_EQ(model_sgd_init(&sgd, m.param_count, LR, 0.9f, 1e-4f, 1),
            MODEL_OK);
    for (int step = 0; step < STEPS; step++) {
        make_batch(step, x, labels);
        model_forward(&m, x, BATCH, 1);
        model_loss(&m, labels, BATCH, &loss);
        model_backward(&m, NULL, NULL);
        model_sgd_step(&sgd, m.param_slab, m.grad_slab);
    }
    memcpy(params_out, m.param_slab, m.param_count * sizeof(float));
    model_sgd_free(&sgd);
    model_free(&m);
}

/* Trains STEPS steps on this rank's share of every batch from rank 0's
 * initial weights, through a DistributedOptimizer with options o; the
 * parameters and (after hvd_dist_opt_sync_state) the momentum into
 * params and velocity. */
static void train(const hvd_dist_opt_options_t *opts, int shard,
                  float *params, float *velocity)
{
    int rank = hvd_rank(), size = hvd_size();
    int k = opts->backward_passes_per_step;
    int micro = BATCH / size / k; /* samples per rank per pass */
    model_t m;
    model_sgd_t sgd;
    /* Each rank starts from its own seed: the broadcast must fix that. */
    TEST_EQ(model_init(&m, "mlp", micro, 42 + (uint64_t)rank), MODEL_OK);
    TEST_EQ(model_sgd_init(&sgd, m.param_count, LR, 0.9f, 1e-4f, 1),
            MODEL_OK);
    TEST_EQ(hvd_broadcast_parameters(m.param_slab, m.param_count, 0), HVD_OK);
    m.grad_accumulate = k > 1;

    size_t n = model_num_params(&m);
    const char **names = malloc(n * sizeof *names);
    float **grads = malloc(n * sizeof *grads);
    size_t *counts = malloc(n * sizeof *counts);
    for (size_t i = 0; i < n; i++) {
        names[i] = model_param_name(&m, i);
        grads[i] = model_grad_data(&m, i);
        counts[i] = model_param_count(&m, i);
    }
    step_ctx_t ctx = {&m, &sgd};
    hvd_optimizer_t inner = {sgd_step, &ctx, sgd_update};
    hvd_dist_opt_options_t o = *opts;
    o.shard_params = shard ? m.param_slab : NULL;
    hvd_dist_opt_t *opt;
    /* Bad arguments are refused, leaving no optimizer behind. */
    hvd_dist_opt_options_t no_passes = {0, 0, HVD_AVERAGE, NULL, NULL};
    hvd_dist_opt_options_t max_op = {1, 0, HVD_MAX, NULL, NULL};
    const char *invalid = "error: hvd_dist_opt_create: invalid argument (NULL "
                          "array or step, backward_passes_per_step < 1, or "
                          "an op other than average or sum)";
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, n, names, grads, counts,
                                  &no_passes),
              HVD_ERR_ARG, invalid);
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, n, names, grads, counts,
                                  &max_op),
              HVD_ERR_ARG, invalid);
    TEST_SAYS(hvd_dist_opt_create(&opt, (hvd_optimizer_t){NULL, NULL, NULL},
                                  n, names, grads, counts, NULL),
              HVD_ERR_ARG, invalid);
    TEST_EQ(hvd_dist_opt_create(&opt, inner, n, names, grads, counts, &o),
            HVD_OK);

    TEST_EQ(hvd_dist_opt_grad_ready(opt, n), HVD_ERR_ARG); /* no such tensor */

    float x[BATCH * IN], loss;
    int labels[BATCH];
    for (int step = 0; step < STEPS; step++) {
        make_batch(step, x, labels);
        model_zero_grad(&m);
        for (int p = 0; p < k; p++) {
            int first = (rank * k + p) * micro; /* this rank's micro-batch */
            model_forward(&m, x + first * IN, micro, 1);
            model_loss(&m, labels + first, micro, &loss);
            TEST_EQ(model_backward(&m, grad_hook, opt), HVD_OK);
            TEST_EQ(hvd_dist_opt_step(opt), HVD_OK);
        }
    }
    TEST_EQ(hvd_dist_opt_sync_state(opt, sgd.velocity, sgd.count), HVD_OK);
    memcpy(params, m.param_slab, m.param_count * sizeof(float));
    memcpy(velocity, sgd.velocity, sgd.count * sizeof(float));
    hvd_dist_opt_free(&opt);
    TEST_TRUE(opt == NULL);
    free(names);
    free(grads);
    free(counts);
    model_sgd_free(&sgd);
    model_free(&m);
}

/* Rank 0's copy of count floats equals every rank's, bitwise. */
static void expect_same_everywhere(const float *x, size_t count,
                                   const char *what)
{
    float *rank0 = malloc(count * sizeof(float));
    memcpy(rank0, x, count * sizeof(float));
    TEST_EQ(hvd_broadcast(rank0, count, HVD_FLOAT32, 0, what), HVD_OK);
    if (memcmp(rank0, x, count * sizeof(float)) != 0)
        TEST_FAIL("%s: this rank's differ from rank 0's", what);
    free(rank0);
}

/* The sharded run's x against the unsharded run's want: bitwise when rel
 * is 0, else |x - want| <= rel (1e-3 + |want|) everywhere. */
static void expect_close(const float *x, const float *want, size_t count,
                         double rel, const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++) {
        int ok = rel == 0 ? memcmp(&x[i], &want[i], sizeof *x) == 0
                          : fabs((double)x[i] - want[i]) <=
                                rel * (1e-3 + fabs((double)want[i]));
        if (!ok && bad++ == 0) first = i;
    }
    if (bad)
        TEST_FAIL("sharded %s differ from the unsharded ones at %zu of %zu "
                  "elements (first: %zu, %.9g against %.9g)", what, bad,
                  count, first, x[first], want[first]);
}

int main(int argc, char **argv)
{
    hvd_dist_opt_options_t o = {1, 0, HVD_AVERAGE, NULL, NULL};
    int shard = 0, ring = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "fp16") == 0) o.fp16_compression = 1;
        else if (strcmp(argv[i], "shard") == 0) shard = 1;
        else if (strcmp(argv[i], "ring") == 0)
            ring = setenv("HVD_INTRANODE", "ring", 1) == 0;
        else if (strncmp(argv[i], "passes=", 7) == 0)
            o.backward_passes_per_step = atoi(argv[i] + 7);
    }
    /* The sharded step always goes through shared memory; the unsharded
     * one it is checked against bitwise must too. Under the default
     * (auto), a group under 4 KiB goes around the ring, whose sum starts
     * at another rank, and whether the small tensors fuse past 4 KiB
     * depends on timing: at 4 ranks on a busy 16-PU node, fc3.bias came
     * out one ulp apart. */
    if (shard && !ring) setenv("HVD_INTRANODE", "shm", 1);
    if (hvd_init(&argc, &argv) != HVD_OK) return TEST_HARD_ERROR;
    int rank = hvd_rank(), size = hvd_size(), k = o.backward_passes_per_step;
    test_rank = rank;
    if (BATCH / size / k * size * k != BATCH) TEST_SKIP("batch not divisible");
    test_misuse(size);
    if (shard) test_shard_misuse(rank, size);

    size_t count;
    {
        model_t probe;
        TEST_EQ(model_init(&probe, "mlp", 1, 42), MODEL_OK);
        count = probe.param_count;
        model_free(&probe);
    }
    float *params = malloc(count * sizeof(float));
    float *velocity = malloc(count * sizeof(float));
    train(&o, shard, params, velocity);

    if (rank == 0) {
        float *want = malloc(count * sizeof(float));
        train_reference(want);
        /* Float: |difference| <= 1e-5 + 1e-4 |w|; fp16 gradients: within
         * 1% of the largest weight. Summing instead of averaging, a missed
         * tensor or a wrong micro-batch is off by far more. */
        double wmax = 0, worst = 0;
        size_t worst_idx = 0;
        for (size_t i = 0; i < count; i++)
            wmax = fmax(wmax, fabs((double)want[i]));
        for (size_t i = 0; i < count; i++) {
            double d = fabs((double)params[i] - want[i]);
            double allowed = o.fp16_compression ? 1e-2 * wmax
                                                : 1e-5 + 1e-4 * fabs(want[i]);
            if (d / allowed > worst) worst = d / allowed, worst_idx = i;
        }
        if (worst > 1)
            TEST_FAIL("n=%d passes=%d fp16=%d shard=%d: param %zu is %g, one "
                      "process with the whole batch says %g (%.2g x the "
                      "tolerance)", size, k, o.fp16_compression, shard,
                      worst_idx, params[worst_idx], want[worst_idx], worst);
        printf("test_dist_opt n=%d passes=%d fp16=%d shard=%d: worst "
               "difference %.2g x the tolerance\n", size, k,
               o.fp16_compression, shard, worst);
        free(want);
    }
    /* Every rank holds rank 0's parameters and momentum, bitwise: the same
     * averaged gradients went into the same optimizer. */
    expect_same_everywhere(params, count, "parameters");
    expect_same_everywhere(velocity, count, "momentum");
    if (shard) {
        /* The unsharded step, from the same start, makes the same bits
         * through shared memory (HVD_INTRANODE=shm above), which sums in
         * rank order however the tensors are grouped. Around the ring each
         * block's sum starts at another rank, so grouping the gradients
         * differently rounds differently: there the two agree to float
         * tolerance. */
        float *plain = malloc(count * sizeof(float));
        float *plain_v = malloc(count * sizeof(float));
        train(&o, 0, plain, plain_v);
        expect_close(params, plain, count, ring ? 1e-4 : 0, "parameters");
        expect_close(velocity, plain_v, count, ring ? 1e-4 : 0, "momentum");
        free(plain);
        free(plain_v);
    }
    free(params);
    free(velocity);
    hvd_shutdown();
    return test_exit_code();
}
