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
 *       [--device cpu|cuda|auto]
 *
 * On the GPU the batch (images and labels) is copied there once, as
 * Horovod's keeps its random batch on the device, and each step's loss is
 * queued and read at the next step, so that the host never waits for the
 * device within a step (Horovod's step never reads its loss).
 *
 * Flags in prog/prog.h's grammar; every rank must be given the same ones
 * (trainer_flags_agree). Exit status: 0, 1 (model or training error), 2
 * (bad flags); every rank leaves through hvd_shutdown.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/trainer.h"
#include "hvd/hvd.h"
#include "models/model.h"
#include "prog/prog.h"

typedef struct {
    const char *model, *device;
    long long batch_size, warmup, per_iter, iters, seed;
    int fp16, help, device_auto;
} options_t;

/* The integer flags: long_options' first rows, in this order, whose
 * getopt values are OPT_INTS + their index. */
static const struct {
    long long lo, hi;
    size_t off;
    const char *want;
} ints[] = {
    {1, 65536, offsetof(options_t, batch_size),
     "expected an integer from 1 to 65536"},
    {0, 1000000, offsetof(options_t, warmup),
     "expected an integer from 0 to 1000000"},
    {1, 1000000, offsetof(options_t, per_iter),
     "expected an integer from 1 to 1000000"},
    {1, 1000000, offsetof(options_t, iters),
     "expected an integer from 1 to 1000000"},
    {0, (long long)1 << 62, offsetof(options_t, seed),
     "expected an integer from 0 to 2^62"},
};

enum { OPT_INTS = 256, OPT_MODEL = OPT_INTS + 5, OPT_FP16, OPT_DEVICE };

static const struct option long_options[] = {
    {"batch-size", required_argument, NULL, OPT_INTS},
    {"num-warmup-batches", required_argument, NULL, OPT_INTS + 1},
    {"num-batches-per-iter", required_argument, NULL, OPT_INTS + 2},
    {"num-iters", required_argument, NULL, OPT_INTS + 3},
    {"seed", required_argument, NULL, OPT_INTS + 4},
    {"model", required_argument, NULL, OPT_MODEL},
    {"fp16-allreduce", no_argument, NULL, OPT_FP16},
    {"device", required_argument, NULL, OPT_DEVICE},
    PROG_END_LONG_OPTIONS,
};

static const prog_cli_t cli = {
    .optstring = ":h",
    .long_options = long_options,
    .usage_args = "[options]   (run it under mpirun -np N)\n",
    .usage_options =
        "      --model mlp|cnn      network (mlp)\n"
        "      --batch-size B       samples per batch per rank, 1..65536 "
        "(32)\n"
        "      --num-warmup-batches W  untimed batches first, 0..1000000 "
        "(10)\n"
        "      --num-batches-per-iter K  batches per timed iteration,\n"
        "                           1..1000000 (10)\n"
        "      --num-iters I        timed iterations, 1..1000000 (10)\n"
        "      --fp16-allreduce     gradients travel as float16\n"
        "      --seed S             seed of the weights and the data, "
        "0..2^62 (42)\n"
        "      --device cpu|cuda|auto  where to train: the CPU, the rank's\n"
        "                           GPU, or the GPU when one is visible in\n"
        "                           a CUDA build (cpu)\n",
    .usage_notes =
        "Every rank must be given the same flags (checked at start: exit 2\n"
        "naming the flag).\n"
        "Exit status: 0, 1 model or training error, 2 bad flags.\n",
};

/* 0: run; 1: --help printed; -1: refused (prog_refuse). */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const char *const models[] = {"mlp", "cnn", NULL};
    static const char *const devices[] = {"cpu", "cuda", "auto", NULL};
    int opt, k;

    *o = (options_t){.model = "mlp", .device = "cpu", .batch_size = 32,
                     .warmup = 10, .per_iter = 10, .iters = 10, .seed = 42};
    while ((opt = prog_getopt(argc, argv, &cli)) >= 0) {
        if (opt == OPT_FP16) {
            o->fp16 = 1;
        } else if (opt == OPT_MODEL) {
            if ((k = prog_parse_word(optarg, models)) < 0)
                return prog_bad_value(long_options, opt, optarg,
                                      "expected mlp or cnn");
            o->model = models[k];
        } else if (opt == OPT_DEVICE) {
            if ((k = prog_parse_word(optarg, devices)) < 0)
                return prog_bad_value(long_options, opt, optarg,
                                      "expected cpu, cuda or auto");
            o->device = devices[k];
        } else if (prog_parse_ll(optarg, ints[opt - OPT_INTS].lo,
                                 ints[opt - OPT_INTS].hi,
                                 (long long *)((char *)o +
                                               ints[opt - OPT_INTS].off))) {
            return prog_bad_value(long_options, opt, optarg,
                                  ints[opt - OPT_INTS].want);
        }
    }
    o->help = opt == PROG_OPT_HELP;
    if (opt != PROG_OPT_END) return o->help ? 1 : -1;
    return trainer_device_choose(&o->device, &o->device_auto);
}

/* The flags that every rank must be given alike: all of them. */
static size_t flags_to_agree(const options_t *o, trainer_flag_t *f)
{
    size_t n = 0;

    trainer_flag_text(&f[n++], "model", "%s", o->model);
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        trainer_flag_text(&f[n++], long_options[k].name, "%lld",
                          *(const long long *)((const char *)o +
                                               ints[k].off));
    trainer_flag_text(&f[n++], "fp16-allreduce", "%s",
                      o->fp16 ? "given" : "not given");
    trainer_flag_text(&f[n++], "device", "%s", o->device);
    trainer_flag_text(&f[n++], "help", "%s",
                      o->help ? "given" : "not given");
    return n;
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

/* One step on b: the last step's loss read (none before the first),
 * forward, the loss queued, backward, the DistributedOptimizer's step. 0,
 * or a status already printed. */
static int train_step(model_t *m, hvd_dist_opt_t *dopt, model_batch_t *b,
                      int rank)
{
    float loss;
    int st = model_loss_read(m, &loss);
    if (st == MODEL_ERR_STATE) st = MODEL_OK;
    if (st == MODEL_OK) st = model_forward_batch(m, b, 1);
    if (st == MODEL_OK) st = model_loss_queue(m, b);
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
    model_setup_cpu(); /* before the first BLAS call */

    int status = hvd_init(&argc, &argv);
    if (status != HVD_OK) {
        fprintf(stderr, "synthetic_benchmark: hvd_init: %s\n",
                hvd_strerror(status));
        return 1;
    }
    int rank = hvd_rank(), size = hvd_size(), rc = 1;
    options_t opt;
    trainer_flag_t agreed[4 + sizeof ints / sizeof ints[0]]; /* all */
    model_t m = {0};
    model_sgd_t sgd = {0};
    trainer_sgd_t sctx = {&m, &sgd};
    hvd_dist_opt_t *dopt = NULL;
    model_batch_t batch = {0};
    double *img_secs = NULL;

    prog_identify("synthetic_benchmark", rank);
    int parsed = parse_options(argc, argv, &opt);
    rc = trainer_flags_agree(parsed < 0, agreed,
                             flags_to_agree(&opt, agreed));
    if (rc != 0 || opt.help)
        goto out;
    rc = 1;

    /* ---- model, SGD, DistributedOptimizer ---- */
    int B = (int)opt.batch_size;
    model_device_t device = strcmp(opt.device, "cuda") ? MODEL_DEVICE_CPU
                                                         : MODEL_DEVICE_CUDA;
    status = model_init_device(&m, device, opt.model, 1, 28, 28, /* as
                               model_init: Fashion-MNIST's images */
                               B, (uint64_t)opt.seed);
    if (status == MODEL_OK)
        status = model_sgd_init_model(&sgd, &m, 0.01f, 0.0f, 0.0f, 0);
    /* Every rank says so: on a GPU, memory runs out on one rank alone. */
    if (status != MODEL_OK) {
        fprintf(stderr, "synthetic_benchmark: rank %d: model %s at batch %d "
                "on %s: %s\n", rank, opt.model, B, opt.device,
                model_strerror(status));
        goto out;
    }
    status = model_batch_init(&m, &batch);
    img_secs = calloc((size_t)opt.iters, sizeof *img_secs);
    if (status != MODEL_OK || !img_secs) {
        fprintf(stderr, "synthetic_benchmark: rank %d: the batch: %s\n", rank,
                model_strerror(status != MODEL_OK ? status : MODEL_ERR_NOMEM));
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
        batch.x[i] = next_normal(&rng);
    for (int i = 0; i < B; i++)
        batch.labels[i] = (int)(next_u64(&rng) % (uint64_t)m.num_classes);
    status = model_batch_send(&m, &batch, B);
    if (status != MODEL_OK) {
        fprintf(stderr, "synthetic_benchmark: rank %d: copying the batch to "
                "the device: %s\n", rank, model_strerror(status));
        goto out;
    }

    if (rank == 0) {
        printf("Model: %s\nBatch size: %d\nNumber of ranks: %d\n"
               "fp16 allreduce: %s\nDevice: %s%s\nRunning warmup...\n",
               opt.model, B, size, opt.fp16 ? "yes" : "no",
               model_backend_name(&m),
               opt.device_auto ? " (--device auto)" : "");
        fflush(stdout);
    }
    for (long long b = 0; b < opt.warmup; b++)
        if (train_step(&m, dopt, &batch, rank) != 0) goto out;
    if (rank == 0) {
        printf("Running benchmark...\n");
        fflush(stdout);
    }
    for (long long it = 0; it < opt.iters; it++) {
        double t0 = prog_now();
        for (long long b = 0; b < opt.per_iter; b++)
            if (train_step(&m, dopt, &batch, rank) != 0) goto out;
        double dt = prog_now() - t0;
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
    model_batch_free(&m, &batch);
    model_free(&m);
    free(img_secs);
    status = hvd_shutdown();
    if (status != HVD_OK && rc == 0) rc = 1;
    return rc;
}
