/* examples/synthetic_benchmark.c: Horovod's synthetic benchmark
 * (examples/pytorch/pytorch_synthetic_benchmark.py) for our models. Every
 * rank trains its replica on one random batch (seeded, generated once):
 * forward, loss, backward whose hook starts each gradient's allreduce, and
 * the DistributedOptimizer's step (plain SGD, lr 0.01, as Horovod's). After
 * the warm-up batches, rank 0 times --num-iters iterations of
 * --num-batches-per-iter batches and prints images/s per rank for each,
 * then their mean +- 1.96 x std (population) per rank and in total.
 *
 *   mpirun -np N examples/synthetic_benchmark [--model mlp|cnn]
 *       [--batch-size B] [--num-warmup-batches W] [--num-batches-per-iter K]
 *       [--num-iters I] [--fp16-allreduce] [--seed S]
 *
 * Exit status: 0, 1 (model or training error), 2 (bad flags); every rank
 * leaves through hvd_shutdown.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "examples/trainer.h"
#include "hvd/hvd.h"
#include "models/model.h"


typedef struct {
    const char *model;
    long long batch_size, warmup, per_iter, iters, seed;
    int fp16, help;
} options_t;

static const char usage_text[] =
    "usage: mpirun -np N synthetic_benchmark [options]\n"
    "  --model mlp|cnn             network (mlp)\n"
    "  --batch-size B              samples per batch per rank, 1..65536 (32)\n"
    "  --num-warmup-batches W      untimed batches first, 0..1000000 (10)\n"
    "  --num-batches-per-iter K    batches per timed iteration, 1..1000000 (10)\n"
    "  --num-iters I               timed iterations, 1..1000000 (10)\n"
    "  --fp16-allreduce            gradients travel as float16\n"
    "  --seed S                    seed of the weights and the data, 0..2^62 (42)\n"
    "  --help                      this text\n";

/* Flags as "--flag value" or "--flag=value", as train_fmnist's. */
static int parse_options(int argc, char **argv, options_t *o, char *err,
                         size_t n)
{
    *o = (options_t){.model = "mlp", .batch_size = 32, .warmup = 10,
                     .per_iter = 10, .iters = 10, .seed = 42};
    static const struct {
        const char *flag;
        long long lo, hi;
        size_t off;
    } ints[] = {
        {"--batch-size", 1, 65536, offsetof(options_t, batch_size)},
        {"--num-warmup-batches", 0, 1000000, offsetof(options_t, warmup)},
        {"--num-batches-per-iter", 1, 1000000, offsetof(options_t, per_iter)},
        {"--num-iters", 1, 1000000, offsetof(options_t, iters)},
        {"--seed", 0, (long long)1 << 62, offsetof(options_t, seed)},
    };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char flag[64];
        const char *val = trainer_split_flag(arg, flag, sizeof flag);
        if (!strcmp(flag, "--help") || !strcmp(flag, "-h") ||
            !strcmp(flag, "--fp16-allreduce")) {
            if (val) {
                snprintf(err, n, "%s takes no value", flag);
                return -1;
            }
            *(flag[2] == 'f' ? &o->fp16 : &o->help) = 1;
            continue;
        }
        size_t k, nk = sizeof ints / sizeof ints[0];
        for (k = 0; k < nk; k++)
            if (!strcmp(flag, ints[k].flag)) break;
        if (k == nk && strcmp(flag, "--model")) {
            snprintf(err, n, "unknown flag \"%s\"", arg);
            return -1;
        }
        if (!val) val = trainer_next_value(flag, argc, argv, &i, err, n);
        if (!val) return -1;
        if (k < nk) {
            if (trainer_parse_ll(flag, val, ints[k].lo, ints[k].hi,
                         (long long *)((char *)o + ints[k].off), err, n))
                return -1;
        } else if (strcmp(val, "mlp") && strcmp(val, "cnn")) {
            snprintf(err, n, "--model: unknown model \"%s\" (mlp or cnn)",
                     val);
            return -1;
        } else {
            o->model = val;
        }
    }
    return 0;
}

/* splitmix64, and a standard normal from it (Box-Muller), for the data. */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float next_normal(uint64_t *s)
{
    double u1 = ((double)(next_u64(s) >> 11) + 1.0) * 0x1p-53; /* (0, 1] */
    double u2 = (double)(next_u64(s) >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* One full training step on the batch: 0, or a status already printed. */
static int train_step(model_t *m, hvd_dist_opt_t *dopt, const float *x,
                      const int *y, int n, int rank)
{
    float loss;
    int st = model_forward(m, x, n, 1);
    if (st == MODEL_OK) st = model_loss(m, y, n, &loss);
    if (st != MODEL_OK) {
        fprintf(stderr, "synthetic_benchmark: rank %d: %s\n", rank,
                model_strerror(st));
        return st;
    }
    st = model_backward(m, trainer_grad_hook, dopt);
    if (st == 0) st = hvd_dist_opt_step(dopt);
    if (st != 0)
        fprintf(stderr, "synthetic_benchmark: rank %d: %s\n", rank,
                st > -8 ? hvd_strerror(st) : model_strerror(st));
    return st;
}

int main(int argc, char **argv)
{
    trainer_setup_cpu(); /* before the first BLAS call */

    int status = hvd_init(&argc, &argv);
    if (status != HVD_OK) {
        fprintf(stderr, "synthetic_benchmark: hvd_init: %s\n",
                hvd_strerror(status));
        return 1;
    }
    int rank = hvd_rank(), size = hvd_size(), rc = 1;
    options_t opt;
    char err[512] = "";
    model_t m = {0};
    model_sgd_t sgd = {0};
    trainer_sgd_t sctx = {&m, &sgd};
    hvd_dist_opt_t *dopt = NULL;
    float *x = NULL;
    int *y = NULL;
    double *img_secs = NULL;

    if (parse_options(argc, argv, &opt, err, sizeof err) != 0) {
        if (rank == 0)
            fprintf(stderr, "synthetic_benchmark: %s\n(try --help)\n", err);
        rc = 2;
        goto out;
    }
    if (opt.help) {
        if (rank == 0) fputs(usage_text, stdout);
        rc = 0;
        goto out;
    }

    /* ---- model, SGD, DistributedOptimizer ---- */
    int B = (int)opt.batch_size;
    status = model_init(&m, opt.model, B, (uint64_t)opt.seed);
    if (status == MODEL_OK)
        status = model_sgd_init(&sgd, m.param_count, 0.01f, 0.0f, 0.0f, 0);
    if (status != MODEL_OK) {
        if (rank == 0)
            fprintf(stderr, "synthetic_benchmark: model %s: %s\n", opt.model,
                    model_strerror(status));
        goto out;
    }
    x = malloc((size_t)B * (size_t)m.in_count * sizeof *x);
    y = malloc((size_t)B * sizeof *y);
    img_secs = calloc((size_t)opt.iters, sizeof *img_secs);
    if (!x || !y || !img_secs) {
        fprintf(stderr, "synthetic_benchmark: out of memory\n");
        goto out;
    }
    hvd_dist_opt_options_t dopts = {.backward_passes_per_step = 1,
                                    .fp16_compression = opt.fp16,
                                    .op = HVD_AVERAGE};
    status = trainer_dist_opt_create(&dopt, &sctx, &dopts);
    if (status == HVD_OK)
        status = hvd_broadcast_parameters(m.param_slab, m.param_count, 0);
    if (status != HVD_OK) {
        fprintf(stderr, "synthetic_benchmark: rank %d: setup: %s\n", rank,
                hvd_strerror(status));
        goto out;
    }

    /* ---- the random batch: N(0, 1) images, labels 0..9, per rank ---- */
    uint64_t rng = (uint64_t)opt.seed * 1000003ULL + (uint64_t)rank;
    for (size_t i = 0; i < (size_t)B * (size_t)m.in_count; i++)
        x[i] = next_normal(&rng);
    for (int i = 0; i < B; i++)
        y[i] = (int)(next_u64(&rng) % (uint64_t)m.num_classes);

    if (rank == 0) {
        printf("Model: %s\nBatch size: %d\nNumber of ranks: %d\n"
               "fp16 allreduce: %s\nRunning warmup...\n",
               opt.model, B, size, opt.fp16 ? "yes" : "no");
        fflush(stdout);
    }
    for (long long b = 0; b < opt.warmup; b++)
        if (train_step(&m, dopt, x, y, B, rank) != 0) goto out;
    if (rank == 0) {
        printf("Running benchmark...\n");
        fflush(stdout);
    }
    for (long long it = 0; it < opt.iters; it++) {
        double t0 = trainer_now();
        for (long long b = 0; b < opt.per_iter; b++)
            if (train_step(&m, dopt, x, y, B, rank) != 0) goto out;
        double dt = trainer_now() - t0;
        img_secs[it] = (double)B * (double)opt.per_iter / (dt > 0 ? dt : 1e-9);
        if (rank == 0) {
            printf("Iter #%lld: %.1f img/sec per rank\n", it, img_secs[it]);
            fflush(stdout);
        }
    }
    if (rank == 0) {
        double mean = 0, var = 0;
        for (long long i = 0; i < opt.iters; i++) mean += img_secs[i];
        mean /= (double)opt.iters;
        for (long long i = 0; i < opt.iters; i++)
            var += (img_secs[i] - mean) * (img_secs[i] - mean);
        double conf = 1.96 * sqrt(var / (double)opt.iters);
        printf("Img/sec per rank: %.1f +-%.1f\n", mean, conf);
        printf("Total img/sec on %d rank(s): %.1f +-%.1f\n", size,
               size * mean, size * conf);
        fflush(stdout);
    }
    rc = 0;

out:
    hvd_dist_opt_free(&dopt);
    model_sgd_free(&sgd);
    model_free(&m);
    free(x);
    free(y);
    free(img_secs);
    status = hvd_shutdown();
    if (status != HVD_OK && rc == 0) rc = 1;
    return rc;
}
