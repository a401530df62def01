/* bench/model_perf.c: the models' compute alone, no MPI traffic: one
 * training step (forward, loss, backward; no optimizer step) of the mlp
 * or cnn on random data, on this thread, with one BLAS thread and
 * denormals flushed as the training programs run. The best of --reps
 * repetitions of --steps steps, so that other load on a shared machine
 * shows least.
 *
 *   bench/model_perf [--model mlp|cnn] [--batch-size B] [--steps K]
 *                    [--reps R] [--device cpu|cuda]  (prog/prog.h's grammar)
 *
 * On the CPU a step is timed in this thread's CPU time. On the GPU
 * (--device cuda, or the emulated one under HVD_DEVICE_EMULATE) in wall
 * time, each step ending as a training step does, with the host waiting
 * for the loss (model_loss_read): set beside train_fmnist's step at one
 * rank, it says how much of that step is the model's kernels and their
 * launches, and how much the loop around them (batches, hvd).
 *
 * Prints "MODEL batch B: T ms of CPU per step (best of R x K), N images/s"
 * ("T ms on cuda per step" on a GPU, "on cuda (emulated)" there). Exit
 * status: 0, 1 (the model failed), 2 (bad flags, or --device cuda where
 * no GPU can be used).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "models/model.h"
#include "prog/prog.h"

typedef struct {
    const char *kind;
    int batch, steps, reps;
    model_device_t device;
} options_t;

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"batch-size", required_argument, NULL, 'b'},
    {"steps", required_argument, NULL, 's'},
    {"reps", required_argument, NULL, 'r'},
    {"device", required_argument, NULL, 'd'},
    PROG_END_LONG_OPTIONS,
};

static const prog_cli_t cli = {
    .optstring = ":m:b:s:r:d:h",
    .long_options = long_options,
    .usage_args = "[options]   (one process, no MPI)\n",
    .usage_options =
        "  -m, --model mlp|cnn      network (cnn)\n"
        "  -b, --batch-size B       samples per step, 1..65536 (64)\n"
        "  -s, --steps K            steps per repetition, 1..65536 (10)\n"
        "  -r, --reps R             repetitions, the best kept, 1..65536 "
        "(5)\n"
        "  -d, --device cpu|cuda    where the model runs (cpu)\n",
    .usage_notes = "Exit status: 0, 1 the model failed, 2 bad options.\n",
};

/* 0: run; 1: --help printed; -1: bad options, explained. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const char *const models[] = {"mlp", "cnn", NULL};
    static const char *const devices[] = {"cpu", "cuda", NULL};
    int opt, *count;

    *o = (options_t){.kind = "cnn", .batch = 64, .steps = 10, .reps = 5};
    while ((opt = prog_getopt(argc, argv, &cli)) >= 0) {
        if (opt == 'd') {
            int d = prog_parse_word(optarg, devices);
            if (d < 0)
                return prog_bad_value(long_options, opt, optarg,
                                      "expected cpu or cuda");
            o->device = d ? MODEL_DEVICE_CUDA : MODEL_DEVICE_CPU;
            continue;
        }
        if (opt == 'm') {
            if (prog_parse_word(optarg, models) < 0)
                return prog_bad_value(long_options, opt, optarg,
                                      "expected mlp or cnn");
            o->kind = optarg;
            continue;
        }
        count = opt == 'b' ? &o->batch : opt == 's' ? &o->steps : &o->reps;
        if (prog_parse_int(optarg, 1, 65536, count))
            return prog_bad_value(long_options, opt, optarg,
                                  "expected an integer from 1 to 65536");
    }
    return opt == PROG_OPT_END ? 0 : opt == PROG_OPT_HELP ? 1 : -1;
}

/* Seconds: this thread's CPU time on the CPU, where the step is all
 * ours; wall time on a device, whose work the host only queues. */
static double now_s(model_device_t device)
{
    struct timespec t;
    clock_gettime(device == MODEL_DEVICE_CPU ? CLOCK_THREAD_CPUTIME_ID
                                             : CLOCK_MONOTONIC,
                  &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One step on b, sent before: the host waits for the loss at its end. */
static int step(model_t *m, model_batch_t *b)
{
    float loss;
    int status = model_forward_batch(m, b, 1);
    if (status == MODEL_OK) status = model_loss_queue(m, b);
    if (status == MODEL_OK) status = model_backward(m, NULL, NULL);
    if (status == MODEL_OK) status = model_loss_read(m, &loss);
    return status;
}

int main(int argc, char **argv)
{
    options_t o;
    const char *why = NULL;

    prog_identify("model_perf", 0);
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    const char *kind = o.kind, *dev = model_device_name(o.device);
    long long batch = o.batch, steps = o.steps, reps = o.reps;
    if (!model_device_available(o.device, &why)) {
        fprintf(stderr, "model_perf: --device %s: %s\n", dev, why);
        return 2;
    }

    model_setup_cpu();
    model_t m;
    model_batch_t b = {0};
    int status = model_init_device(&m, o.device, kind, 1, 28, 28, (int)batch,
                                   1);
    if (status == MODEL_OK) status = model_batch_init(&m, &b);
    if (status != MODEL_OK) {
        fprintf(stderr, "model_perf: %s\n", model_strerror(status));
        return 1;
    }
    srand(7);
    for (long long i = 0; i < batch * 784; i++)
        b.x[i] = (float)rand() / (float)RAND_MAX;
    for (long long i = 0; i < batch; i++) b.labels[i] = rand() % 10;
    status = model_batch_send(&m, &b, (int)batch);
    /* a first step outside the timing: a GPU's plans and lazy loading */
    if (status == MODEL_OK) status = step(&m, &b);

    double best = 1e30;
    for (long long r = 0; r < reps && status == MODEL_OK; r++) {
        double t = now_s(o.device);
        for (long long k = 0; k < steps && status == MODEL_OK; k++)
            status = step(&m, &b);
        t = now_s(o.device) - t;
        if (t < best) best = t;
    }
    if (status == MODEL_OK)
        printf("%s batch %lld: %.2f ms %s%s per step (best of %lld x %lld), "
               "%.0f images/s\n",
               kind, batch, best / (double)steps * 1e3,
               o.device == MODEL_DEVICE_CPU ? "of " : "on ",
               o.device == MODEL_DEVICE_CPU ? "CPU" : model_backend_name(&m),
               reps, steps, (double)(batch * steps) / best);
    else
        fprintf(stderr, "model_perf: %s\n", model_strerror(status));
    model_batch_free(&m, &b);
    model_free(&m);
    return status == MODEL_OK ? 0 : 1;
}
