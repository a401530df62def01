/* test/test_model_batch.c: batches copied ahead (models/model.h's
 * model_batch_t), on the CPU and on the emulated device, whose copies are
 * made at their worst (models/backend_emu.c): the device side is zeroed
 * when a copy starts and the host side read only when a wait says so.
 *
 * Training the mlp and the cnn with two batches used in turn, the next
 * one sent while the current step runs, as examples/train_loop.c does,
 * gives bitwise the losses and parameters of model_forward_host on the
 * CPU, with full and partial batches, the loss read at once or queued and
 * read after the step; the errors; and on the emulated device, that a
 * reader or writer that does not wait is seen.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>
#include "models/model.h"
#include "test/test.h"

enum { C = 2, H = 8, W = 8, IN = C * H * W, BMAX = 6, STEPS = 7 };

/* Batch sizes in turn: full ones and partial ones. */
static const int sizes[STEPS] = {6, 6, 4, 6, 1, 5, 6};

static uint64_t rng = 7;
static float urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(rng >> 40) / (float)(1u << 24);
}

/* Samples of every step, made once: x (STEPS, BMAX, IN), y (STEPS, BMAX). */
static float xs[STEPS][BMAX * IN];
static int ys[STEPS][BMAX];

static void make_data(void)
{
    for (int s = 0; s < STEPS; s++)
        for (int n = 0; n < BMAX; n++) {
            ys[s][n] = (int)(urand() * 10) % 10;
            for (int i = 0; i < IN; i++) xs[s][n * IN + i] = urand();
        }
}

static void fill(model_batch_t *b, int step)
{
    memcpy(b->x, xs[step], sizeof(float) * (size_t)sizes[step] * IN);
    memcpy(b->labels, ys[step], sizeof(int) * (size_t)sizes[step]);
}

/* The host's training, one step at a time from host memory: losses and
 * final parameters. */
static void train_plain(const char *kind, float *losses, float *params)
{
    model_t m;
    model_sgd_t opt;
    TEST_EQ(model_init_shape(&m, kind, C, H, W, BMAX, 3), MODEL_OK);
    TEST_EQ(model_sgd_init_model(&opt, &m, 0.1f, 0.9f, 0, 0), MODEL_OK);
    for (int s = 0; s < STEPS; s++) {
        TEST_EQ(model_forward_host(&m, xs[s], sizes[s], 1), MODEL_OK);
        TEST_EQ(model_loss(&m, ys[s], sizes[s], &losses[s]), MODEL_OK);
        TEST_EQ(model_backward(&m, NULL, NULL), MODEL_OK);
        TEST_EQ(model_sgd_step(&opt, m.param_slab, m.grad_slab), MODEL_OK);
    }
    memcpy(params, m.param_slab, m.param_count * sizeof(float));
    model_sgd_free(&opt);
    model_free(&m);
}

/* The same with two batches in turn, the next one sent after the
 * current one's forward; queued: the loss read after the step. */
static void train_batches(model_device_t device, const char *kind,
                          int queued, float *losses, float *params)
{
    model_t m;
    model_sgd_t opt;
    model_batch_t b[2];
    TEST_EQ(model_init_device(&m, device, kind, C, H, W, BMAX, 3), MODEL_OK);
    TEST_EQ(model_sgd_init_model(&opt, &m, 0.1f, 0.9f, 0, 0), MODEL_OK);
    for (int k = 0; k < 2; k++) TEST_EQ(model_batch_init(&m, &b[k]), MODEL_OK);
    fill(&b[0], 0);
    TEST_EQ(model_batch_send(&m, &b[0], sizes[0]), MODEL_OK);
    for (int s = 0; s < STEPS; s++) {
        model_batch_t *cur = &b[s % 2], *next = &b[(s + 1) % 2];
        TEST_EQ(cur->count, sizes[s]);
        TEST_EQ(model_forward_batch(&m, cur, 1), MODEL_OK);
        if (s + 1 < STEPS) {
            TEST_EQ(model_batch_host(&m, next), MODEL_OK);
            fill(next, s + 1);
            TEST_EQ(model_batch_send(&m, next, sizes[s + 1]), MODEL_OK);
        }
        if (queued)
            TEST_EQ(model_loss_queue(&m, cur), MODEL_OK);
        else
            TEST_EQ(model_loss_batch(&m, cur, &losses[s]), MODEL_OK);
        TEST_EQ(model_backward(&m, NULL, NULL), MODEL_OK);
        TEST_EQ(model_sgd_step(&opt, m.param_slab, m.grad_slab), MODEL_OK);
        if (queued) TEST_EQ(model_loss_read(&m, &losses[s]), MODEL_OK);
    }
    TEST_EQ(model_download(&m, params, m.param_slab,
                           m.param_count * sizeof(float)),
            MODEL_OK);
    for (int k = 0; k < 2; k++) model_batch_free(&m, &b[k]);
    model_batch_free(&m, &b[0]); /* again: a no-op */
    model_sgd_free(&opt);
    model_free(&m);
}

static void test_training(model_device_t device, const char *kind)
{
    model_t probe;
    TEST_EQ(model_init_shape(&probe, kind, C, H, W, BMAX, 3), MODEL_OK);
    size_t count = probe.param_count;
    model_free(&probe);
    float want_loss[STEPS], got_loss[STEPS];
    float *want = malloc(count * sizeof(float));
    float *got = malloc(count * sizeof(float));
    train_plain(kind, want_loss, want);
    for (int queued = 0; queued < 2; queued++) {
        memset(got_loss, 0, sizeof got_loss);
        memset(got, 0, count * sizeof(float));
        train_batches(device, kind, queued, got_loss, got);
        TEST_TRUE(memcmp(want_loss, got_loss, sizeof want_loss) == 0);
        TEST_TRUE(memcmp(want, got, count * sizeof(float)) == 0);
    }
    TEST_TRUE(want_loss[STEPS - 1] != want_loss[0]); /* it trained */
    free(want);
    free(got);
}

static void test_errors(model_device_t device)
{
    model_t m, other;
    model_batch_t b, zero = {0};
    float loss;
    TEST_EQ(model_batch_init(NULL, &b), MODEL_ERR_ARG);
    TEST_EQ(model_init_device(&m, device, "mlp", C, H, W, BMAX, 3), MODEL_OK);
    TEST_EQ(model_batch_init(&m, NULL), MODEL_ERR_ARG);
    TEST_EQ(model_batch_init(&m, &b), MODEL_OK);
    TEST_EQ(model_forward_batch(&m, &b, 1), MODEL_ERR_STATE); /* not sent */
    fill(&b, 0);
    TEST_EQ(model_batch_send(&m, &b, 0), MODEL_ERR_ARG);
    TEST_EQ(model_batch_send(&m, &b, BMAX + 1), MODEL_ERR_ARG);
    b.labels[1] = -1;
    TEST_EQ(model_batch_send(&m, &b, 2), MODEL_ERR_ARG);
    b.labels[1] = 10;
    TEST_EQ(model_batch_send(&m, &b, 2), MODEL_ERR_ARG);
    TEST_EQ(b.count, 0);
    TEST_EQ(model_batch_send(&m, &b, 1), MODEL_OK); /* labels[1] not sent */
    b.labels[1] = 9;
    TEST_EQ(model_batch_send(&m, &b, 2), MODEL_OK);
    TEST_EQ(model_loss_batch(&m, &b, &loss), MODEL_ERR_STATE); /* no forward */
    TEST_EQ(model_loss_queue(&m, &b), MODEL_ERR_STATE);
    TEST_EQ(model_loss_read(&m, &loss), MODEL_ERR_STATE); /* none queued */
    TEST_EQ(model_forward_batch(&m, &b, 1), MODEL_OK);
    TEST_EQ(model_loss_batch(&m, &b, NULL), MODEL_ERR_ARG);
    TEST_EQ(model_loss_batch(&m, &b, &loss), MODEL_OK);
    TEST_EQ(model_loss_read(&m, &loss), MODEL_ERR_STATE); /* read already */
    TEST_EQ(model_loss_queue(&m, &b), MODEL_OK);
    TEST_EQ(model_loss_read(&m, NULL), MODEL_ERR_ARG);
    TEST_EQ(model_loss_read(&m, &loss), MODEL_OK);
    /* The loss is of the batch the last forward saw. */
    TEST_EQ(model_forward_host(&m, xs[0], 2, 1), MODEL_OK);
    TEST_EQ(model_loss_batch(&m, &b, &loss), MODEL_ERR_STATE);
    TEST_EQ(model_init_device(&other, device, "mlp", C, H, W, BMAX, 3),
            MODEL_OK);
    TEST_EQ(model_forward_batch(&other, &zero, 1), MODEL_ERR_ARG);
    model_free(&other);
    model_batch_free(&m, &b);
    TEST_TRUE(b.x == NULL && b.copy == NULL);
    model_batch_free(&m, &zero);
    model_batch_free(NULL, NULL);
    model_free(&m);
}

/* The logits of the mlp's forward of n samples of x, from host memory. */
static void logits_of(model_t *m, const float *x, int n, float *z)
{
    TEST_EQ(model_forward_host(m, x, n, 0), MODEL_OK);
    TEST_EQ(model_download(m, z, model_logits(m), sizeof(float) * 10 * n),
            MODEL_OK);
}

/* On the emulated device, what a program that does not wait meets. */
static void test_emulated_hazards(void)
{
    model_t m;
    model_batch_t b;
    float z_old[10], z_new[10], z[10];
    int *in_model = malloc(sizeof(int) * BMAX);
    TEST_EQ(model_init_device(&m, MODEL_DEVICE_CUDA, "mlp", C, H, W, BMAX, 3),
            MODEL_OK);
    TEST_EQ(model_batch_init(&m, &b), MODEL_OK);
    logits_of(&m, xs[0], 1, z_old);
    logits_of(&m, xs[1], 1, z_new);
    TEST_TRUE(memcmp(z_old, z_new, sizeof z) != 0);

    /* Before a wait the device side is zeros: neither the last batch
     * nor this one. */
    fill(&b, 0);
    b.labels[0] = 3;
    TEST_EQ(model_batch_send(&m, &b, 1), MODEL_OK);
    TEST_EQ(model_forward_batch(&m, &b, 0), MODEL_OK);
    TEST_EQ(model_download(&m, in_model, b.dev, sizeof(int)), MODEL_OK);
    TEST_EQ(in_model[0], 3);
    b.labels[0] = 5;
    TEST_EQ(model_batch_send(&m, &b, 1), MODEL_OK);
    TEST_EQ(model_download(&m, in_model, b.dev, sizeof(int)), MODEL_OK);
    TEST_EQ(in_model[0], 0);
    /* A host write before the wait changes what arrives. */
    memcpy(b.x, xs[1], sizeof(float) * IN);
    TEST_EQ(model_forward_batch(&m, &b, 0), MODEL_OK);
    TEST_EQ(model_download(&m, z, model_logits(&m), sizeof z), MODEL_OK);
    TEST_TRUE(memcmp(z, z_new, sizeof z) == 0);
    TEST_EQ(model_download(&m, in_model, b.dev, sizeof(int)), MODEL_OK);
    TEST_EQ(in_model[0], 5);

    /* After model_batch_host the copy is made: the write is the next
     * batch's only. */
    fill(&b, 0);
    TEST_EQ(model_batch_send(&m, &b, 1), MODEL_OK);
    TEST_EQ(model_batch_host(&m, &b), MODEL_OK);
    memcpy(b.x, xs[1], sizeof(float) * IN);
    TEST_EQ(model_forward_batch(&m, &b, 0), MODEL_OK);
    TEST_EQ(model_download(&m, z, model_logits(&m), sizeof z), MODEL_OK);
    TEST_TRUE(memcmp(z, z_old, sizeof z) == 0);

    /* A queued loss reaches the host at the read, not before. */
    float loss;
    TEST_EQ(model_loss_queue(&m, &b), MODEL_OK);
    TEST_TRUE(m.host_losses[0] == 0.0);
    TEST_EQ(model_loss_read(&m, &loss), MODEL_OK);
    TEST_TRUE(loss > 0 && (float)m.host_losses[0] == loss);
    model_batch_free(&m, &b);
    model_free(&m);
    free(in_model);
}

int main(void)
{
    make_data();
    const char *kinds[] = {"mlp", "cnn"};
    for (int k = 0; k < 2; k++) test_training(MODEL_DEVICE_CPU, kinds[k]);
    test_errors(MODEL_DEVICE_CPU);
    setenv("HVD_DEVICE_EMULATE", "1", 1);
    for (int k = 0; k < 2; k++) test_training(MODEL_DEVICE_CUDA, kinds[k]);
    test_errors(MODEL_DEVICE_CUDA);
    test_emulated_hazards();
    if (!test_failures) printf("model batches ok\n");
    return test_exit_code();
}
