/* examples/train_fmnist.c: the main job. Data-parallel training of an mlp
 * or cnn on Fashion-MNIST: every rank holds a replica, reads its own shard
 * of the training set (reshuffled every epoch from the shared seed), and
 * the DistributedOptimizer averages the gradients across ranks while
 * backward goes on. Rank 0 prints progress and the test accuracy after
 * each epoch (computed on all ranks over their part of the test set and
 * reduced), and writes a checkpoint each epoch; --resume continues from it
 * exactly (bitwise on the CPU).
 *
 *   mpirun -np N examples/train_fmnist [--model mlp|cnn] [--epochs E]
 *       [--batch-size B] [--lr LR] [--seed S] [--data DIR]
 *       [--checkpoint PATH] [--resume] [--max-steps K] [--train-limit N]
 *       [--device cpu] [--progress auto|bar|lines]
 *
 * Exit status: 0, 1 (data, checkpoint or training error), 2 (bad flags).
 * Left out: --device cuda (refused), Nesterov / weight decay flags, test
 * loss per class.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "examples/checkpoint.h"
#include "examples/data.h"
#include "examples/trainer.h"
#include "hvd/hvd.h"
#include "models/model.h"


#define MOMENTUM 0.9f
#define WARMUP_EPOCHS 1.0

typedef struct {
    const char *model;
    long long epochs;
    long long batch_size; /* per rank */
    double lr;            /* base: scaled by the number of ranks over warm-up */
    uint64_t seed;
    const char *data;
    const char *checkpoint;
    int resume;
    long long max_steps;   /* 0: no limit */
    long long train_limit; /* 0: every training image */
    const char *device;
    const char *progress; /* auto, bar (\r) or lines */
    int help;
} options_t;

static const char usage_text[] =
    "usage: mpirun -np N train_fmnist [options]\n"
    "  --model mlp|cnn        network (mlp)\n"
    "  --epochs E             epochs, 1..100000 (2)\n"
    "  --batch-size B         samples per batch per rank, 1..65536 (64)\n"
    "  --lr LR                base learning rate, > 0 and <= 100 (0.05);\n"
    "                         warmed up to LR x ranks over the first epoch\n"
    "  --seed S               seed of the weights and the shuffling (42)\n"
    "  --data DIR             Fashion-MNIST IDX files (" DATA_FMNIST_DIR ")\n"
    "  --checkpoint PATH      rank 0 writes PATH after each epoch\n"
    "  --resume               continue from --checkpoint PATH\n"
    "  --max-steps K          stop after K steps in total (counted from\n"
    "                         epoch 0), for tests\n"
    "  --train-limit N        use only the first N training images\n"
    "  --device cpu           where to train (cuda: not supported yet)\n"
    "  --progress auto|bar|lines  rank 0's progress: one updating line (bar),\n"
    "                         a line every tenth of an epoch (lines), or bar\n"
    "                         when stdout is a terminal (auto; mpirun may\n"
    "                         give ranks a terminal even when redirected)\n"
    "  --help                 this text\n";

/* Parsers of flag values: 0, or -1 with a message in err. */
static int parse_u64(const char *flag, const char *s, uint64_t *out,
                     char *err, size_t n)
{
    char *end;
    errno = 0;
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || *end || *p == '-' || errno == ERANGE) {
        snprintf(err, n, "%s: \"%s\" is not an unsigned 64-bit integer", flag,
                 s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int parse_lr(const char *flag, const char *s, double *out, char *err,
                    size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v)) {
        snprintf(err, n, "%s: \"%s\" is not a number", flag, s);
        return -1;
    }
    if (!(v > 0.0) || v > 100.0) {
        snprintf(err, n, "%s: %g is out of range (0, 100]", flag, v);
        return -1;
    }
    *out = v;
    return 0;
}

/* Flags as "--flag value" or "--flag=value". Returns 0 or -1 (err). */
static int parse_options(int argc, char **argv, options_t *o, char *err,
                         size_t n)
{
    *o = (options_t){.model = "mlp", .epochs = 2, .batch_size = 64,
                     .lr = 0.05, .seed = 42, .data = DATA_FMNIST_DIR,
                     .device = "cpu", .progress = "auto"};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char flag[64];
        const char *val = trainer_split_flag(arg, flag, sizeof flag);
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
            o->help = 1;
            continue;
        }
        if (!strcmp(flag, "--resume")) {
            if (val) {
                snprintf(err, n, "--resume takes no value");
                return -1;
            }
            o->resume = 1;
            continue;
        }
        static const char *const with_value[] = {
            "--model", "--epochs", "--batch-size", "--lr", "--seed", "--data",
            "--checkpoint", "--max-steps", "--train-limit", "--device",
            "--progress"};
        size_t k, nk = sizeof with_value / sizeof with_value[0];
        for (k = 0; k < nk; k++)
            if (!strcmp(flag, with_value[k])) break;
        if (k == nk) {
            snprintf(err, n, "unknown flag \"%s\"", arg);
            return -1;
        }
        if (!val) val = trainer_next_value(flag, argc, argv, &i, err, n);
        if (!val) return -1;
        int rc = 0;
        if (!strcmp(flag, "--model")) {
            if (strcmp(val, "mlp") && strcmp(val, "cnn")) {
                snprintf(err, n, "--model: unknown model \"%s\" (mlp or cnn)",
                         val);
                return -1;
            }
            o->model = val;
        } else if (!strcmp(flag, "--epochs")) {
            rc = trainer_parse_ll(flag, val, 1, 100000, &o->epochs, err, n);
        } else if (!strcmp(flag, "--batch-size")) {
            rc = trainer_parse_ll(flag, val, 1, 65536, &o->batch_size, err, n);
        } else if (!strcmp(flag, "--lr")) {
            rc = parse_lr(flag, val, &o->lr, err, n);
        } else if (!strcmp(flag, "--seed")) {
            rc = parse_u64(flag, val, &o->seed, err, n);
        } else if (!strcmp(flag, "--data")) {
            if (!*val) {
                snprintf(err, n, "--data: empty directory");
                return -1;
            }
            o->data = val;
        } else if (!strcmp(flag, "--checkpoint")) {
            if (!*val) {
                snprintf(err, n, "--checkpoint: empty path");
                return -1;
            }
            o->checkpoint = val;
        } else if (!strcmp(flag, "--max-steps")) {
            rc = trainer_parse_ll(flag, val, 1, LLONG_MAX / 2, &o->max_steps, err, n);
        } else if (!strcmp(flag, "--train-limit")) {
            rc = trainer_parse_ll(flag, val, 1, LLONG_MAX / 2, &o->train_limit, err,
                          n);
        } else if (!strcmp(flag, "--device")) {
            if (strcmp(val, "cpu") && strcmp(val, "cuda")) {
                snprintf(err, n, "--device: unknown device \"%s\" (cpu or "
                         "cuda)", val);
                return -1;
            }
            o->device = val;
        } else if (!strcmp(flag, "--progress")) {
            if (strcmp(val, "auto") && strcmp(val, "bar") &&
                strcmp(val, "lines")) {
                snprintf(err, n, "--progress: unknown mode \"%s\" (auto, bar "
                         "or lines)", val);
                return -1;
            }
            o->progress = val;
        }
        if (rc) return -1;
    }
    if (o->resume && !o->checkpoint) {
        snprintf(err, n, "--resume needs --checkpoint PATH");
        return -1;
    }
    return 0;
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

/* 1 on every rank when any rank's `failed` is set; the lowest failing rank
 * prints msg. -1 when the collective itself fails. */
static int any_failed(int failed, const char *msg, int rank, int size,
                      const char *name)
{
    int32_t lowest = failed ? rank : size, got = size;
    if (hvd_allreduce(&lowest, &got, 1, HVD_INT32, HVD_MIN, name) != HVD_OK)
        return -1;
    if (got < size && got == rank && msg)
        fprintf(stderr, "train_fmnist: %s\n", msg);
    return got < size;
}

int main(int argc, char **argv)
{
    trainer_one_blas_thread(); /* before the first BLAS call */

    int status = hvd_init(&argc, &argv);
    if (status != HVD_OK) {
        fprintf(stderr, "train_fmnist: hvd_init: %s\n", hvd_strerror(status));
        return 1;
    }
    int rank = hvd_rank(), size = hvd_size(), rc = 1;
    int tty = 0;

    options_t opt;
    char err[1024] = "";
    data_set_t train = {0}, test = {0};
    model_t m = {0};
    model_sgd_t sgd = {0};
    trainer_sgd_t sctx = {&m, &sgd};
    hvd_dist_opt_t *dopt = NULL;
    data_shard_t shard = {0};
    float *xbuf = NULL;
    int *ybuf = NULL;

    if (parse_options(argc, argv, &opt, err, sizeof err) != 0) {
        if (rank == 0)
            fprintf(stderr, "train_fmnist: %s\n(try --help)\n", err);
        rc = 2;
        goto out;
    }
    tty = rank == 0 && (!strcmp(opt.progress, "bar") ||
                        (!strcmp(opt.progress, "auto") &&
                         isatty(STDOUT_FILENO)));
    if (opt.help) {
        if (rank == 0) fputs(usage_text, stdout);
        rc = 0;
        goto out;
    }
    if (strcmp(opt.device, "cpu") != 0) {
        if (rank == 0)
            fprintf(stderr, "train_fmnist: --device %s: not supported yet; "
                    "this build trains on the CPU only (--device cpu)\n",
                    opt.device);
        rc = 2;
        goto out;
    }

    /* ---- data: every rank reads both splits ---- */
    status = data_idx_load(&train, opt.data, DATA_TRAIN, err, sizeof err);
    if (status == 0)
        status = data_idx_load(&test, opt.data, DATA_TEST, err, sizeof err);
    if (status == 0 && (train.channels != 1 || train.height != 28 ||
                        train.width != 28 || test.channels != 1 ||
                        test.height != 28 || test.width != 28)) {
        snprintf(err, sizeof err, "%s: images are %zux%zux%zu, not 1x28x28",
                 opt.data, train.channels, train.height, train.width);
        status = DATA_ERR_FORMAT;
    }
    if (any_failed(status != 0, err, rank, size, "train_fmnist.data") != 0)
        goto out;
    if (opt.train_limit > 0 && (size_t)opt.train_limit < train.count)
        train.count = (size_t)opt.train_limit;

    /* ---- model, optimizer, DistributedOptimizer ---- */
    status = model_init(&m, opt.model, (int)opt.batch_size, opt.seed);
    if (status == MODEL_OK)
        status = model_sgd_init(&sgd, m.param_count, (float)opt.lr, MOMENTUM,
                                0.0f, 0);
    if (status != MODEL_OK) {
        if (rank == 0)
            fprintf(stderr, "train_fmnist: model %s: %s\n", opt.model,
                    model_strerror(status));
        goto out;
    }
    xbuf = malloc((size_t)opt.batch_size * 784 * sizeof *xbuf);
    ybuf = malloc((size_t)opt.batch_size * sizeof *ybuf);
    if (!xbuf || !ybuf) {
        fprintf(stderr, "train_fmnist: out of memory\n");
        goto out;
    }
    status = trainer_dist_opt_create(&dopt, &sctx, NULL);
    if (status != HVD_OK) {
        fprintf(stderr, "train_fmnist: hvd_dist_opt_create: %s\n",
                hvd_strerror(status));
        goto out;
    }
    status = data_shard_init(&shard, train.count, (size_t)rank, (size_t)size,
                             (size_t)opt.batch_size, opt.seed);
    if (status != 0) {
        fprintf(stderr, "train_fmnist: sharding: %s\n", data_strerror(status));
        goto out;
    }

    /* ---- initial state: rank 0's (from the checkpoint on --resume) ---- */
    int64_t start_epoch = 0;
    if (opt.resume) {
        int64_t info[3] = {0, 0, 0}; /* status, epoch, rng state */
        if (rank == 0) {
            ckpt_state_t st = {.kind = m.kind, .param_count = m.param_count,
                               .params = m.param_slab,
                               .velocity_count = sgd.velocity ? sgd.count : 0,
                               .velocity = sgd.velocity};
            info[0] = ckpt_read(opt.checkpoint, &st, err, sizeof err);
            if (info[0] != 0)
                fprintf(stderr, "train_fmnist: --resume: %s\n", err);
            info[1] = st.epoch;
            info[2] = (int64_t)st.rng_state;
        }
        status = hvd_broadcast(info, 3, HVD_INT64, 0, "train_fmnist.resume");
        if (status != HVD_OK || info[0] != 0) goto out;
        start_epoch = info[1];
        m.rng_state = (uint64_t)info[2];
        if (sgd.velocity) {
            status = hvd_broadcast_optimizer_state(sgd.velocity, sgd.count, 0);
            if (status != HVD_OK) {
                fprintf(stderr, "train_fmnist: broadcast of the optimizer "
                        "state: %s\n", hvd_strerror(status));
                goto out;
            }
        }
        if (rank == 0)
            printf("resumed from %s at epoch %lld\n", opt.checkpoint,
                   (long long)start_epoch);
    }
    status = hvd_broadcast_parameters(m.param_slab, m.param_count, 0);
    if (status != HVD_OK) {
        fprintf(stderr, "train_fmnist: broadcast of the parameters: %s\n",
                hvd_strerror(status));
        goto out;
    }

    size_t spe = data_shard_batch_count(&shard); /* steps per epoch */
    long long first_step = start_epoch * (long long)spe;
    long long end_step = opt.epochs * (long long)spe;
    if (opt.max_steps > 0 && opt.max_steps < end_step) end_step = opt.max_steps;
    long long run_steps = end_step > first_step ? end_step - first_step : 0;
    long long log_every = spe / 10 > 0 ? (long long)spe / 10 : 1;
    if (rank == 0)
        printf("train_fmnist: %s, %zu parameters, %d rank%s, batch %lld per "
               "rank, %zu training images (%zu steps per epoch), %zu test "
               "images, lr %g x %d after %g warm-up epoch\n",
               opt.model, m.param_count, size, size == 1 ? "" : "s",
               opt.batch_size, train.count, spe, test.count, opt.lr, size,
               WARMUP_EPOCHS);
    if (run_steps == 0 && rank == 0)
        printf("nothing to do: epoch %lld of %lld reached\n",
               (long long)start_epoch, opt.epochs);
    fflush(stdout);

    /* ---- training ---- */
    long long gstep = first_step, done_steps = 0;
    double train_time = 0, total_images = 0, last_acc = -1;
    for (int64_t epoch = start_epoch; epoch < opt.epochs && gstep < end_step;
         epoch++) {
        data_shard_set_epoch(&shard, (uint64_t)epoch);
        double t_epoch = trainer_now(), t_win = t_epoch, loss_win = 0;
        double loss_epoch = 0, images_win = 0, images_epoch = 0;
        long long steps_win = 0, steps_epoch = 0;
        int stopped = 0;
        for (size_t b = 0; b < spe; b++) {
            if (gstep >= end_step) {
                stopped = 1;
                break;
            }
            const size_t *idx;
            size_t n = data_shard_batch(&shard, b, &idx);
            data_gather(&train, idx, n, xbuf, ybuf);
            sgd.lr = model_lr_warmup((float)opt.lr, size, WARMUP_EPOCHS,
                                     (double)epoch + (double)b / (double)spe);
            float loss = 0;
            status = model_forward(&m, xbuf, (int)n, 1);
            if (status == MODEL_OK)
                status = model_loss(&m, ybuf, (int)n, &loss);
            if (status != MODEL_OK) {
                fprintf(stderr, "train_fmnist: rank %d: step %lld: %s\n", rank,
                        gstep, model_strerror(status));
                goto out;
            }
            status = model_backward(&m, trainer_grad_hook, dopt);
            if (status == 0) status = hvd_dist_opt_step(dopt);
            if (status != 0) {
                fprintf(stderr, "train_fmnist: rank %d: step %lld: %s\n", rank,
                        gstep, status > -8 ? hvd_strerror(status)
                                           : model_strerror(status));
                goto out;
            }
            gstep++;
            done_steps++;
            steps_win++;
            steps_epoch++;
            loss_win += loss;
            loss_epoch += loss;
            images_win += (double)n * size;
            images_epoch += (double)n * size;
            if (rank != 0) continue;
            double t = trainer_now();
            int last = b + 1 == spe || gstep == end_step;
            int show = tty ? (t - t_win >= 0.25 || last)
                           : (gstep % log_every == 0 || last);
            if (!show) continue;
            double elapsed = train_time + (t - t_epoch);
            double left = elapsed / (double)done_steps *
                          (double)(run_steps - done_steps);
            char eta[32];
            format_duration(left, eta, sizeof eta);
            printf("%sstep %lld/%lld  epoch %lld  loss %.4f  %.0f images/s  "
                   "lr %.4g  left %s%s",
                   tty ? "\r" : "", gstep, end_step, (long long)epoch + 1,
                   loss_win / (double)steps_win,
                   images_win / (t - t_win > 0 ? t - t_win : 1e-9),
                   (double)sgd.lr, eta, tty ? "\033[K" : "\n");
            fflush(stdout);
            t_win = t;
            loss_win = 0;
            steps_win = 0;
            images_win = 0;
        }
        double epoch_time = trainer_now() - t_epoch;
        train_time += epoch_time;
        total_images += images_epoch;

        /* ---- test accuracy: each rank a contiguous part, reduced ---- */
        size_t lo = test.count * (size_t)rank / (size_t)size;
        size_t hi = test.count * (size_t)(rank + 1) / (size_t)size;
        double sums[4] = {0, 0, 0, 0}; /* correct, count, loss sum, train loss */
        size_t per = data_image_count(&test);
        for (size_t i = lo; i < hi; i += (size_t)opt.batch_size) {
            int n = (int)(hi - i < (size_t)opt.batch_size ? hi - i
                                                          : (size_t)opt.batch_size);
            int correct = 0;
            float loss = 0;
            status = model_forward(&m, test.images + i * per, n, 0);
            if (status == MODEL_OK)
                status = model_predict(&m, NULL, test.labels + i, &correct);
            if (status == MODEL_OK)
                status = model_loss(&m, test.labels + i, n, &loss);
            if (status != MODEL_OK) {
                fprintf(stderr, "train_fmnist: rank %d: evaluation: %s\n",
                        rank, model_strerror(status));
                goto out;
            }
            sums[0] += correct;
            sums[1] += n;
            sums[2] += (double)loss * n;
        }
        sums[3] = steps_epoch ? loss_epoch / (double)steps_epoch : 0;
        double tot[4];
        status = hvd_allreduce(sums, tot, 4, HVD_FLOAT64, HVD_SUM,
                               "train_fmnist.eval");
        if (status != HVD_OK) {
            fprintf(stderr, "train_fmnist: rank %d: allreduce of the test "
                    "results: %s\n", rank, hvd_strerror(status));
            goto out;
        }
        last_acc = tot[1] > 0 ? tot[0] / tot[1] : 0;
        if (rank == 0) {
            printf("%sepoch %lld/%lld  train_loss %.4f  test_loss %.4f  "
                   "test_acc %.4f  (%.0f/%.0f)  time %.1f s  %.0f images/s%s\n",
                   tty ? "\r" : "", (long long)epoch + 1, opt.epochs,
                   tot[3] / size, tot[1] > 0 ? tot[2] / tot[1] : 0, last_acc,
                   tot[0], tot[1], epoch_time,
                   images_epoch / (epoch_time > 0 ? epoch_time : 1e-9),
                   stopped ? "  (stopped by --max-steps)" : "");
            fflush(stdout);
        }

        /* ---- checkpoint of a complete epoch, rank 0 ---- */
        if (opt.checkpoint && !stopped && steps_epoch == (long long)spe) {
            int32_t ck = 0;
            if (rank == 0) {
                ckpt_state_t st = {.kind = m.kind, .param_count = m.param_count,
                                   .params = m.param_slab,
                                   .velocity_count = sgd.velocity ? sgd.count
                                                                  : 0,
                                   .velocity = sgd.velocity,
                                   .epoch = epoch + 1,
                                   .rng_state = m.rng_state};
                ck = ckpt_write(opt.checkpoint, &st, err, sizeof err);
                if (ck != 0) fprintf(stderr, "train_fmnist: %s\n", err);
            }
            status = hvd_broadcast(&ck, 1, HVD_INT32, 0,
                                   "train_fmnist.checkpoint");
            if (status != HVD_OK || ck != 0) goto out;
        }
    }
    if (rank == 0 && done_steps > 0) {
        printf("done: %lld steps, %.0f images in %.1f s of training: %.0f "
               "images/s (%.0f per rank), test_acc %.4f\n",
               done_steps, total_images, train_time,
               total_images / (train_time > 0 ? train_time : 1e-9),
               total_images / (train_time > 0 ? train_time : 1e-9) / size,
               last_acc);
        fflush(stdout);
    }
    rc = 0;

out:
    hvd_dist_opt_free(&dopt);
    data_shard_free(&shard);
    model_sgd_free(&sgd);
    model_free(&m);
    data_free(&train);
    data_free(&test);
    free(xbuf);
    free(ybuf);
    status = hvd_shutdown();
    if (status != HVD_OK && rc == 0) rc = 1;
    return rc;
}
