/* examples/train_loop.c: the training loop of examples/train_loop.h: data,
 * model and DistributedOptimizer set-up, resume, the epoch loop with rank
 * 0's progress lines, the test set's evaluation reduced over the ranks, and
 * rank 0's checkpoints. The learning-rate schedule is schedule_lr, the one
 * place to change it.
 *
 * Every failure that one rank alone can meet (a file, a checkpoint) is
 * agreed on by all ranks with a collective before they go on, so that all
 * leave through hvd_shutdown instead of some waiting for the others.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "examples/checkpoint.h"
#include "examples/train_loop.h"
#include "examples/trainer.h"
#include "hvd/hvd.h"
#include "models/model.h"
#include "prog/prog.h"

/* ---- the learning-rate schedule: change it here ---- */

#define MOMENTUM 0.9f
#define WARMUP_EPOCHS 1.0

/* The learning rate at `epoch` (fractional: epoch + step / steps per
 * epoch) of a run of total_epochs: the linear scaling rule, warmed up from
 * base_lr to base_lr x ranks over the first WARMUP_EPOCHS (Goyal et al.),
 * then a cosine decay to 0 at the end. The decay took Fashion-MNIST's test
 * accuracy after 5 epochs from 0.865 to 0.881-0.885 (mlp) and from 0.901
 * to 0.919 (cnn); bench/README.md has the runs. */
static float schedule_lr(double base_lr, int ranks, double epoch,
                         double total_epochs)
{
    float lr = model_lr_warmup((float)base_lr, ranks, WARMUP_EPOCHS, epoch);
    return model_lr_cosine(lr, WARMUP_EPOCHS, total_epochs, epoch);
}

/* The schedule in words, for the first line of output. */
static void schedule_describe(double base_lr, int ranks, char *buf, size_t n)
{
    snprintf(buf, n, "lr %g x %d after %g warm-up epoch, cosine decay",
             base_lr, ranks, WARMUP_EPOCHS);
}

/* ---- the loop's state ---- */

/* Where a training step's wall time goes, on this rank's host: on the
 * CPU forward and backward are the compute; on a GPU they are the
 * launches, and the device's time shows where the host waits for it
 * (reading the loss, or the step waiting for the allreduces). */
enum { PH_BATCH, PH_FORWARD, PH_BACKWARD, PH_STEP, PH_LOSS, PHASES };
static const char *const phase_names[PHASES] = {
    "batches", "forward", "backward", "optimizer step", "loss read"};
/* Steps left out of the profile: the first make cuDNN's plans and touch
 * the buffers. */
#define PROFILE_WARMUP 10

typedef struct {
    const train_loop_config_t *cfg;
    train_loop_options_t opt;
    int rank, size, tty;
    char err[1024];
    data_set_t train, test;
    model_t m;
    model_sgd_t sgd;
    trainer_sgd_t sctx;
    hvd_dist_opt_t *dopt;
    data_shard_t shard;
    /* Two batches in turn: on a device the next one is copied to the
     * model while the step on the current one runs (models/model.h). On
     * the CPU, where that would only do the same work sooner, a step
     * gathers its batch just before its forward, while the images are
     * still in cache when the forward reads them. */
    model_batch_t batch[2];
    int send_ahead;
    /* On a GPU, host copies of the parameters and the momentum for the
     * checkpoints (NULL on the CPU: the checkpoints use the slabs). */
    float *host_params, *host_velocity;
    char kind[CKPT_KIND_MAX]; /* the checkpoints' model name */
    size_t spe;               /* steps per epoch */
    long long gstep, end_step, run_steps, done_steps;
    double lr_epochs; /* the schedule's length in epochs (run) */
    double train_time, total_images, last_acc;
    double phase_s[PHASES]; /* over the steps after PROFILE_WARMUP */
} loop_t;

/* What one epoch of training leaves for its report. */
typedef struct {
    double time, images, loss_sum;
    long long steps;
    int stopped; /* by --max-steps */
} epoch_t;

/* 1 on every rank when any rank's `failed` is set; the lowest failing rank
 * prints L->err. -1 when the collective itself fails. */
static int any_failed(loop_t *L, int failed, const char *name)
{
    int32_t lowest = failed ? L->rank : L->size, got = L->size;
    if (hvd_allreduce(&lowest, &got, 1, HVD_INT32, HVD_MIN, name) != HVD_OK)
        return -1;
    if (got < L->size && got == L->rank)
        fprintf(stderr, "%s: %s\n", L->cfg->name, L->err);
    return got < L->size;
}

static void format_duration(double s, char *buf, size_t n)
{
    if (!(s >= 0) || s > 1e7) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

/* n images in x, as the model sees them: normalised unless turned off. */
static void prepare_inputs(const loop_t *L, float *x, size_t n)
{
    const train_loop_config_t *c = L->cfg;
    if (L->opt.normalize) /* statistics checked at start-up */
        data_normalize(x, n, c->channels, c->height * c->width, c->mean,
                       c->std);
}

/* ---- set-up ---- */

/* --data may name each rank's own folder (a node's local disk), which
 * must hold the same data: ranks with more steps an epoch would wait for
 * the others in a collective they never join (hvd's stall check, after
 * minutes), and ranks with the same counts but other images would train
 * on other samples than the shards say. Each split's count and
 * fingerprint compared on every rank; 0, or 1 with every rank saying
 * what differs. */
static int data_agree(loop_t *L)
{
    enum { N = 4 };
    static const char *const what[N] = {"training images", "test images",
                                        "training set", "test set"};
    int64_t mine[2 * N] = {(int64_t)L->train.count, (int64_t)L->test.count,
                           data_fingerprint(&L->train),
                           data_fingerprint(&L->test)},
            range[2 * N];
    for (int i = 0; i < N; i++) mine[N + i] = -mine[i];
    /* One reduction gives both ends: max of v and of -v (= -min). */
    if (hvd_allreduce(mine, range, 2 * N, HVD_INT64, HVD_MAX,
                      "train_loop.data_agree") != HVD_OK)
        return 1;
    for (int i = 0; i < N; i++) {
        if (range[i] == -range[N + i]) continue;
        if (i < 2)
            fprintf(stderr, "%s: rank %d: --data %s: %lld %s here, from %lld "
                    "to %lld across the ranks: every rank must load the "
                    "same data\n", L->cfg->name, L->rank, L->opt.data,
                    (long long)mine[i], what[i], (long long)-range[N + i],
                    (long long)range[i]);
        else
            fprintf(stderr, "%s: rank %d: --data %s: the %s differs across "
                    "the ranks (the same count, other images or labels): "
                    "every rank must load the same data\n", L->cfg->name,
                    L->rank, L->opt.data, what[i]);
        return 1;
    }
    return 0;
}

/* Both splits on every rank, of the configured image shape; 0 or 1. */
static int load_data(loop_t *L)
{
    const train_loop_config_t *c = L->cfg;
    int status = c->load(&L->train, L->opt.data, DATA_TRAIN, L->err,
                         sizeof L->err);
    if (status == 0)
        status = c->load(&L->test, L->opt.data, DATA_TEST, L->err,
                         sizeof L->err);
    for (int s = 0; s < 2 && status == 0; s++) {
        const data_set_t *ds = s ? &L->test : &L->train;
        if (ds->channels != c->channels || ds->height != c->height ||
            ds->width != c->width) {
            snprintf(L->err, sizeof L->err, "%s: %s images are %zux%zux%zu, "
                     "not %zux%zux%zu", L->opt.data, s ? "test" : "training",
                     ds->channels, ds->height, ds->width, c->channels,
                     c->height, c->width);
            status = DATA_ERR_FORMAT;
        }
    }
    if (any_failed(L, status != 0, "train_loop.data") != 0) return 1;
    if (L->opt.train_limit > 0 && (size_t)L->opt.train_limit < L->train.count)
        L->train.count = (size_t)L->opt.train_limit;
    return data_agree(L);
}

/* Model, SGD, batch buffers, DistributedOptimizer and shard; 0 or 1. */
static int build(loop_t *L)
{
    const train_loop_config_t *c = L->cfg;
    const train_loop_options_t *o = &L->opt;
    model_device_t device = strcmp(o->device, "cuda") ? MODEL_DEVICE_CPU
                                                       : MODEL_DEVICE_CUDA;
    int status = model_init_device(&L->m, device, o->model,
                                   (int)c->channels, (int)c->height,
                                   (int)c->width, (int)o->batch_size,
                                   o->seed);
    if (status == MODEL_OK)
        status = model_sgd_init_model(&L->sgd, &L->m, (float)o->lr, MOMENTUM,
                                      0.0f, 0);
    /* Every rank says so: on a GPU, memory runs out on one rank alone. */
    if (status != MODEL_OK) {
        fprintf(stderr, "%s: rank %d: model %s at batch %lld on %s: %s\n",
                c->name, L->rank, o->model, (long long)o->batch_size,
                o->device, model_strerror(status));
        return 1;
    }
    if (c->ckpt_tag)
        snprintf(L->kind, sizeof L->kind, "%s.%s", L->m.kind, c->ckpt_tag);
    else
        snprintf(L->kind, sizeof L->kind, "%s", L->m.kind);
    L->send_ahead = device != MODEL_DEVICE_CPU;
    for (int k = 0; k < 2 && status == MODEL_OK; k++)
        status = model_batch_init(&L->m, &L->batch[k]);
    if (status != MODEL_OK) {
        fprintf(stderr, "%s: batch buffers: %s\n", c->name,
                model_strerror(status));
        return 1;
    }
    if (device != MODEL_DEVICE_CPU) {
        L->host_params = malloc((L->m.param_count + 1) * sizeof(float));
        L->host_velocity = malloc((L->m.param_count + 1) * sizeof(float));
        if (!L->host_params || !L->host_velocity) {
            fprintf(stderr, "%s: out of memory\n", c->name);
            return 1;
        }
    }
    L->sctx = (trainer_sgd_t){&L->m, &L->sgd};
    hvd_dist_opt_options_t dopt = {.backward_passes_per_step = 1,
                                   .fp16_compression = o->fp16_allreduce,
                                   .op = HVD_AVERAGE,
                                   .shard_params = o->shard_optimizer
                                                       ? L->m.param_slab
                                                       : NULL};
    status = trainer_dist_opt_create(&L->dopt, &L->sctx, &dopt);
    if (status != HVD_OK) {
        fprintf(stderr, "%s: hvd_dist_opt_create: %s\n", c->name,
                hvd_strerror(status));
        return 1;
    }
    status = data_shard_init(&L->shard, L->train.count, (size_t)L->rank,
                             (size_t)L->size, (size_t)o->batch_size, o->seed);
    if (status != 0) {
        fprintf(stderr, "%s: sharding: %s\n", c->name, data_strerror(status));
        return 1;
    }
    return 0;
}

/* Rank 0's status of a checkpoint call (0 elsewhere), its message in
 * L->err when not 0, told to every rank under `name`: 0 when it worked,
 * else 1 on every rank. */
static int rank0_verdict(loop_t *L, int32_t status, const char *name)
{
    if (status != 0) fprintf(stderr, "%s: %s\n", L->cfg->name, L->err);
    return hvd_broadcast(&status, 1, HVD_INT32, 0, name) != HVD_OK ||
           status != 0;
}

/* What a checkpoint holds of the loop (epoch and RNG state filled in by
 * the caller when writing): the slabs, or on a GPU their host copies. */
static ckpt_state_t ckpt_state(loop_t *L)
{
    int host = L->host_params == NULL;
    return (ckpt_state_t){.kind = L->kind, .param_count = L->m.param_count,
                          .params = host ? L->m.param_slab : L->host_params,
                          .velocity_count = L->sgd.velocity ? L->sgd.count
                                                            : 0,
                          .velocity = host ? L->sgd.velocity
                                           : L->host_velocity};
}

/* On a GPU, the host copies from (to_host) or into the device's slabs; 0,
 * or the model's error. */
static int ckpt_copies(loop_t *L, int to_host)
{
    if (!L->host_params) return MODEL_OK;
    size_t bytes = L->m.param_count * sizeof(float);
    int status = to_host ? model_download(&L->m, L->host_params,
                                          L->m.param_slab, bytes)
                         : model_upload(&L->m, L->m.param_slab,
                                        L->host_params, bytes);
    if (status == MODEL_OK && L->sgd.velocity)
        status = to_host ? model_download(&L->m, L->host_velocity,
                                          L->sgd.velocity, bytes)
                         : model_upload(&L->m, L->sgd.velocity,
                                        L->host_velocity, bytes);
    return status;
}

/* Whether rank 0 can write checkpoints where --checkpoint says (before any
 * training), then rank 0's state, from the checkpoint on --resume, to
 * every rank; the epoch to start at into *start_epoch. 0 or 1. */
static int initial_state(loop_t *L, int64_t *start_epoch)
{
    const char *name = L->cfg->name;
    int status;
    *start_epoch = 0;
    if (L->opt.checkpoint &&
        rank0_verdict(L, L->rank == 0 ? ckpt_check_dir(L->opt.checkpoint,
                                                       L->err, sizeof L->err)
                                      : 0,
                      "train_loop.ckpt_dir"))
        return 1;
    if (L->opt.resume) {
        int64_t info[3] = {0, 0, 0}; /* status, epoch, rng state */
        if (L->rank == 0) {
            ckpt_state_t st = ckpt_state(L);
            info[0] = ckpt_read(L->opt.checkpoint, &st, L->err,
                                sizeof L->err);
            if (info[0] == 0 && (status = ckpt_copies(L, 0)) != MODEL_OK) {
                snprintf(L->err, sizeof L->err, "copying it to the device: "
                         "%s", model_strerror(status));
                info[0] = 1;
            }
            if (info[0] != 0)
                fprintf(stderr, "%s: --resume: %s\n", name, L->err);
            info[1] = st.epoch;
            info[2] = (int64_t)st.rng_state;
        }
        status = hvd_broadcast(info, 3, HVD_INT64, 0, "train_loop.resume");
        if (status != HVD_OK || info[0] != 0) return 1;
        *start_epoch = info[1];
        L->m.rng_state = (uint64_t)info[2];
        if (L->sgd.velocity) {
            status = hvd_broadcast_optimizer_state(L->sgd.velocity,
                                                   L->sgd.count, 0);
            if (status != HVD_OK) {
                fprintf(stderr, "%s: broadcast of the optimizer state: %s\n",
                        name, hvd_strerror(status));
                return 1;
            }
        }
        if (L->rank == 0)
            printf("resumed from %s at epoch %lld\n", L->opt.checkpoint,
                   (long long)*start_epoch);
    }
    status = hvd_broadcast_parameters(L->m.param_slab, L->m.param_count, 0);
    if (status != HVD_OK) {
        fprintf(stderr, "%s: broadcast of the parameters: %s\n", name,
                hvd_strerror(status));
        return 1;
    }
    return 0;
}

/* ---- one epoch ---- */

/* Rank 0's progress line after step b of the epoch. */
static void show_progress(loop_t *L, int64_t epoch, double t_epoch,
                          double *t_win, double loss_win, long long steps_win,
                          double images_win)
{
    double t = prog_now();
    double elapsed = L->train_time + (t - t_epoch);
    double left = elapsed / (double)L->done_steps *
                  (double)(L->run_steps - L->done_steps);
    char eta[32];
    format_duration(left, eta, sizeof eta);
    printf("%sstep %lld/%lld  epoch %lld  loss %.4f  %.0f images/s  "
           "lr %.4g  left %s%s",
           L->tty ? "\r" : "", L->gstep, L->end_step, (long long)epoch + 1,
           loss_win / (double)steps_win,
           images_win / (t - *t_win > 0 ? t - *t_win : 1e-9),
           (double)L->sgd.lr, eta, L->tty ? "\033[K" : "\n");
    fflush(stdout);
    *t_win = t;
}

/* n samples of ds, idx[k] for k < n (NULL: from first on), prepared
 * into bt and sent on their way to the model; a model status. */
static int send_batch(loop_t *L, const data_set_t *ds, const size_t *idx,
                      size_t first, size_t n, model_batch_t *bt)
{
    int status = model_batch_host(&L->m, bt);
    if (status != MODEL_OK) return status;
    if (idx) {
        data_gather(ds, idx, n, bt->x, bt->labels);
    } else {
        size_t per = data_image_count(ds);
        memcpy(bt->x, ds->images + first * per, n * per * sizeof(float));
        memcpy(bt->labels, ds->labels + first, n * sizeof(int));
    }
    prepare_inputs(L, bt->x, n);
    return model_batch_send(&L->m, bt, (int)n);
}

/* Batch b of this epoch's shard into bt; a model status. */
static int send_train_batch(loop_t *L, size_t b, model_batch_t *bt)
{
    const size_t *idx;
    size_t n = data_shard_batch(&L->shard, b, &idx);
    return send_batch(L, &L->train, idx, 0, n, bt);
}

/* Adds the time since *t to phase; *t becomes now. */
static void lap(loop_t *L, int phase, double *t)
{
    double now = prog_now();
    L->phase_s[phase] += now - *t;
    *t = now;
}

/* One forward, loss, backward and DistributedOptimizer step on batch b
 * of the epoch, whose samples it counts into *n. Sending ahead, batch b
 * went out during the step before (or at the epoch's start), and batch
 * b + 1, when `more`, goes while this forward runs. The loss is read once
 * the step is queued. 0 or 1. */
static int train_step(loop_t *L, size_t b, int more, float *loss, size_t *n)
{
    model_batch_t *cur = &L->batch[L->send_ahead ? b % 2 : 0];
    if (L->done_steps == PROFILE_WARMUP)
        memset(L->phase_s, 0, sizeof L->phase_s);
    double t = prog_now();
    int status = L->send_ahead ? MODEL_OK : send_train_batch(L, b, cur);
    lap(L, PH_BATCH, &t);
    if (status == MODEL_OK) status = model_forward_batch(&L->m, cur, 1);
    lap(L, PH_FORWARD, &t);
    if (status == MODEL_OK && L->send_ahead && more)
        status = send_train_batch(L, b + 1, &L->batch[(b + 1) % 2]);
    lap(L, PH_BATCH, &t);
    *n = (size_t)cur->count;
    if (status == MODEL_OK) status = model_loss_queue(&L->m, cur);
    if (status == MODEL_OK)
        status = model_backward(&L->m, trainer_grad_hook, L->dopt);
    lap(L, PH_BACKWARD, &t);
    if (status == 0) status = hvd_dist_opt_step(L->dopt);
    lap(L, PH_STEP, &t);
    if (status == 0) status = model_loss_read(&L->m, loss);
    lap(L, PH_LOSS, &t);
    if (status == 0) return 0;
    fprintf(stderr, "%s: rank %d: step %lld: %s\n", L->cfg->name, L->rank,
            L->gstep, status > -8 ? hvd_strerror(status)
                                  : model_strerror(status));
    return 1;
}

/* --profile: this rank's line, the phases in ms a step. */
static void print_profile(const loop_t *L)
{
    long long steps = L->done_steps - PROFILE_WARMUP;
    if (steps <= 0) {
        printf("profile: rank %d: no steps after the first %d\n", L->rank,
               PROFILE_WARMUP);
        fflush(stdout);
        return;
    }
    char line[512];
    int len = snprintf(line, sizeof line, "profile: rank %d: %lld steps, ms "
                       "a step:", L->rank, steps);
    double sum = 0;
    for (int k = 0; k < PHASES && len > 0 && (size_t)len < sizeof line;
         k++) {
        sum += L->phase_s[k];
        len += snprintf(line + len, sizeof line - (size_t)len, " %s %.3f,",
                        phase_names[k], 1e3 * L->phase_s[k] / (double)steps);
    }
    printf("%s total %.3f\n", line, 1e3 * sum / (double)steps);
    fflush(stdout);
}

/* Trains epoch `epoch` up to its end or end_step; 0 or 1. */
static int train_epoch(loop_t *L, int64_t epoch, epoch_t *e)
{
    long long log_every = L->spe / 10 > 0 ? (long long)L->spe / 10 : 1;
    *e = (epoch_t){0};
    data_shard_set_epoch(&L->shard, (uint64_t)epoch);
    double t_epoch = prog_now(), t_win = t_epoch, loss_win = 0;
    double images_win = 0;
    long long steps_win = 0;
    double t = t_epoch;
    int status = L->send_ahead && L->gstep < L->end_step
                     ? send_train_batch(L, 0, &L->batch[0])
                     : MODEL_OK;
    lap(L, PH_BATCH, &t); /* the epoch's first step's batch */
    if (status != MODEL_OK) {
        fprintf(stderr, "%s: rank %d: step %lld: %s\n", L->cfg->name,
                L->rank, L->gstep, model_strerror(status));
        return 1;
    }
    for (size_t b = 0; b < L->spe; b++) {
        if (L->gstep >= L->end_step) {
            e->stopped = 1;
            break;
        }
        int more = b + 1 < L->spe && L->gstep + 1 < L->end_step;
        size_t n = 0;
        L->sgd.lr = schedule_lr(L->opt.lr, L->size,
                                (double)epoch + (double)b / (double)L->spe,
                                L->lr_epochs);
        float loss = 0;
        if (train_step(L, b, more, &loss, &n)) return 1;
        L->gstep++;
        L->done_steps++;
        steps_win++;
        e->steps++;
        loss_win += loss;
        e->loss_sum += loss;
        images_win += (double)n * L->size;
        e->images += (double)n * L->size;
        if (L->rank != 0) continue;
        int last = b + 1 == L->spe || L->gstep == L->end_step;
        int show = L->tty ? (prog_now() - t_win >= 0.25 || last)
                          : (L->gstep % log_every == 0 || last);
        if (!show) continue;
        show_progress(L, epoch, t_epoch, &t_win, loss_win, steps_win,
                      images_win);
        loss_win = 0;
        steps_win = 0;
        images_win = 0;
    }
    e->time = prog_now() - t_epoch;
    L->train_time += e->time;
    L->total_images += e->images;
    return 0;
}

/* The test images from first on, a batch of them up to end, into bt; a
 * model status. */
static int send_test_batch(loop_t *L, size_t first, size_t end,
                           model_batch_t *bt)
{
    size_t n = end - first, bs = (size_t)L->opt.batch_size;
    return send_batch(L, &L->test, NULL, first, n < bs ? n : bs, bt);
}

/* Test accuracy and loss, each rank over a contiguous part of the test
 * set, reduced; rank 0 prints the epoch's line. 0 or 1. */
static int evaluate(loop_t *L, int64_t epoch, const epoch_t *e)
{
    const data_set_t *t = &L->test;
    size_t bs = (size_t)L->opt.batch_size;
    size_t lo = t->count * (size_t)L->rank / (size_t)L->size;
    size_t hi = t->count * (size_t)(L->rank + 1) / (size_t)L->size;
    double sums[4] = {0, 0, 0, 0}; /* correct, count, loss sum, train loss */
    int status = lo < hi ? send_test_batch(L, lo, hi, &L->batch[0]) : MODEL_OK;
    for (size_t i = lo, k = 0; i < hi; i += bs, k ^= 1) {
        model_batch_t *cur = &L->batch[k];
        int n = cur->count, correct = 0;
        float loss = 0;
        if (status == MODEL_OK) status = model_forward_batch(&L->m, cur, 0);
        if (status == MODEL_OK && i + bs < hi)
            status = send_test_batch(L, i + bs, hi, &L->batch[k ^ 1]);
        if (status == MODEL_OK)
            status = model_predict(&L->m, NULL, cur->labels, &correct);
        if (status == MODEL_OK) status = model_loss_batch(&L->m, cur, &loss);
        if (status != MODEL_OK) {
            fprintf(stderr, "%s: rank %d: evaluation: %s\n", L->cfg->name,
                    L->rank, model_strerror(status));
            return 1;
        }
        sums[0] += correct;
        sums[1] += n;
        sums[2] += (double)loss * n;
    }
    sums[3] = e->steps ? e->loss_sum / (double)e->steps : 0;
    double tot[4];
    status = hvd_allreduce(sums, tot, 4, HVD_FLOAT64, HVD_SUM,
                           "train_loop.eval");
    if (status != HVD_OK) {
        fprintf(stderr, "%s: rank %d: allreduce of the test results: %s\n",
                L->cfg->name, L->rank, hvd_strerror(status));
        return 1;
    }
    L->last_acc = tot[1] > 0 ? tot[0] / tot[1] : 0;
    if (L->rank == 0) {
        printf("%sepoch %lld/%lld  train_loss %.4f  test_loss %.4f  "
               "test_acc %.4f  (%.0f/%.0f)  time %.1f s  %.0f images/s%s\n",
               L->tty ? "\r" : "", (long long)epoch + 1, L->opt.epochs,
               tot[3] / L->size, tot[1] > 0 ? tot[2] / tot[1] : 0,
               L->last_acc, tot[0], tot[1], e->time,
               e->images / (e->time > 0 ? e->time : 1e-9),
               e->stopped ? "  (stopped by --max-steps)" : "");
        fflush(stdout);
    }
    return 0;
}

/* Rank 0 writes the checkpoint of `epochs_done` complete epochs; every
 * rank learns whether it worked. 0 or 1. */
static int checkpoint(loop_t *L, int64_t epochs_done)
{
    int32_t ck = 0;
    /* A sharded step left each rank's momentum current for its share. */
    if (L->sgd.velocity) {
        int status = hvd_dist_opt_sync_state(L->dopt, L->sgd.velocity,
                                             L->sgd.count);
        if (status != HVD_OK) {
            fprintf(stderr, "%s: gathering the optimizer state: %s\n",
                    L->cfg->name, hvd_strerror(status));
            return 1;
        }
    }
    if (L->rank == 0) {
        ckpt_state_t st = ckpt_state(L);
        st.epoch = epochs_done;
        st.rng_state = L->m.rng_state;
        int status = ckpt_copies(L, 1);
        if (status == MODEL_OK)
            ck = ckpt_write(L->opt.checkpoint, &st, L->err, sizeof L->err);
        else
            ck = snprintf(L->err, sizeof L->err, "checkpoint: copying the "
                          "state from the device: %s",
                          model_strerror(status)) > 0;
    }
    return rank0_verdict(L, ck, "train_loop.checkpoint");
}

/* ---- the program ---- */

/* Steps, the first line of output, and the epochs; 0 or 1. */
static int run(loop_t *L, int64_t start_epoch)
{
    const train_loop_options_t *o = &L->opt;
    L->spe = data_shard_batch_count(&L->shard);
    /* --max-steps K alone trains K steps, in as many epochs as they take
     * (K < 2^62: no overflow); the schedule decays over them, to 0 after
     * the K-th step, not at the end of the last epoch begun. */
    L->lr_epochs = (double)o->epochs;
    if (o->max_steps > 0 && !o->epochs_given) {
        L->opt.epochs = (o->max_steps + (long long)L->spe - 1) /
                        (long long)L->spe;
        L->lr_epochs = (double)o->max_steps / (double)L->spe;
    }
    /* A checkpoint may hold any epoch >= 0 (its CRC says only that it is
     * whole): steps are counted up to --epochs at most, so that epoch x
     * steps cannot overflow. */
    long long first_step =
        (start_epoch < o->epochs ? start_epoch : o->epochs) *
        (long long)L->spe;
    L->end_step = o->epochs * (long long)L->spe;
    if (o->max_steps > 0 && o->max_steps < L->end_step)
        L->end_step = o->max_steps;
    L->run_steps = L->end_step > first_step ? L->end_step - first_step : 0;
    L->gstep = first_step;
    if (L->rank == 0) {
        char sched[128];
        schedule_describe(o->lr, L->size, sched, sizeof sched);
        printf("%s: %s, %zu parameters, %d rank%s, batch %lld per rank, %zu "
               "training images (%zu steps per epoch), %zu test images, %s, "
               "%s inputs%s%s%s%s\n",
               L->cfg->name, o->model, L->m.param_count, L->size,
               L->size == 1 ? "" : "s", o->batch_size, L->train.count, L->spe,
               L->test.count, sched, o->normalize ? "normalized" : "raw",
               o->shard_optimizer && L->size > 1 ? ", sharded optimizer step"
                                                 : "",
               L->m.device != MODEL_DEVICE_CPU || o->device_auto ? ", on " : "",
               L->m.device != MODEL_DEVICE_CPU || o->device_auto
                   ? model_backend_name(&L->m)
                   : "",
               o->device_auto ? " (--device auto)" : "");
        if (L->run_steps == 0)
            printf("nothing to do: epoch %lld of %lld reached\n",
                   (long long)start_epoch, o->epochs);
        fflush(stdout);
    }
    for (int64_t epoch = start_epoch; epoch < o->epochs &&
                                      L->gstep < L->end_step; epoch++) {
        epoch_t e;
        if (train_epoch(L, epoch, &e) || evaluate(L, epoch, &e)) return 1;
        if (o->checkpoint && !e.stopped && e.steps == (long long)L->spe &&
            checkpoint(L, epoch + 1))
            return 1;
    }
    if (o->profile) print_profile(L);
    if (L->rank == 0 && L->done_steps > 0) {
        double rate = L->total_images /
                      (L->train_time > 0 ? L->train_time : 1e-9);
        printf("done: %lld steps, %.0f images in %.1f s of training: %.0f "
               "images/s (%.0f per rank), test_acc %.4f\n",
               L->done_steps, L->total_images, L->train_time, rate,
               rate / L->size, L->last_acc);
        fflush(stdout);
    }
    return 0;
}

/* Flags, their agreement across the ranks and the checks that need no
 * data: -1 to go on, else the exit status. */
static int check_flags(loop_t *L, int argc, char **argv)
{
    const train_loop_config_t *c = L->cfg;
    const train_loop_options_t *o = &L->opt;
    trainer_flag_t agreed[TRAIN_LOOP_AGREED_MAX];
    prog_identify(c->name, L->rank);
    int parsed = train_loop_parse_flags(c, argc, argv, &L->opt);
    size_t n = train_loop_flags_to_agree(o, agreed);
    int rc = trainer_flags_agree(parsed < 0, agreed, n);
    if (rc != 0) return rc;
    if (o->help) return 0;
    float probe = 0; /* zero planes: only the constants are checked */
    if (c->channels < 1 || c->channels > TRAIN_LOOP_CHANNELS_MAX ||
        data_normalize(&probe, 1, c->channels, 0, c->mean, c->std) != 0) {
        fprintf(stderr, "%s: bad normalisation constants in the program\n",
                c->name);
        return 1;
    }
    L->tty = L->rank == 0 &&
             (!strcmp(o->progress, "bar") ||
              (!strcmp(o->progress, "auto") && isatty(STDOUT_FILENO)));
    return -1;
}

int train_loop_main(const train_loop_config_t *cfg, int argc, char **argv)
{
    model_setup_cpu(); /* before the first BLAS call */

    int status = hvd_init(&argc, &argv);
    if (status != HVD_OK) {
        fprintf(stderr, "%s: hvd_init: %s\n", cfg->name, hvd_strerror(status));
        return 1;
    }
    loop_t *L = calloc(1, sizeof *L);
    int rc = 1;
    if (!L) {
        fprintf(stderr, "%s: out of memory\n", cfg->name);
        goto out;
    }
    L->cfg = cfg;
    L->rank = hvd_rank();
    L->size = hvd_size();
    L->last_acc = -1;
    rc = check_flags(L, argc, argv);
    if (rc >= 0) goto out;
    rc = 1;
    int64_t start_epoch;
    if (load_data(L) || build(L) || initial_state(L, &start_epoch) ||
        run(L, start_epoch))
        goto out;
    rc = 0;

out:
    if (L) {
        hvd_dist_opt_free(&L->dopt);
        data_shard_free(&L->shard);
        model_sgd_free(&L->sgd);
        for (int k = 0; k < 2; k++) model_batch_free(&L->m, &L->batch[k]);
        model_free(&L->m);
        data_free(&L->train);
        data_free(&L->test);
        free(L->host_params);
        free(L->host_velocity);
        free(L);
    }
    status = hvd_shutdown();
    if (status != HVD_OK && rc == 0) rc = 1;
    return rc;
}
