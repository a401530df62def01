/* bench/model_perf.c: the models' compute alone, no MPI traffic: CPU time
 * of one training step (forward, loss, backward) of the mlp or cnn on
 * random data, on this thread, with one BLAS thread and denormals flushed
 * as the training programs run. The best of --reps repetitions of --steps
 * steps, so that other load on a shared machine shows least.
 *
 *   bench/model_perf [--model mlp|cnn] [--batch-size B] [--steps K]
 *                    [--reps R]   (prog/prog.h's grammar)
 *
 * Prints "MODEL batch B: T ms of CPU per step (best of R x K), N images/s".
 * Exit status: 0, 1 (the model failed), 2 (bad flags).
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
} options_t;

static const struct option long_options[] = {
    {"model", required_argument, NULL, 'm'},
    {"batch-size", required_argument, NULL, 'b'},
    {"steps", required_argument, NULL, 's'},
    {"reps", required_argument, NULL, 'r'},
    PROG_END_LONG_OPTIONS,
};

static const prog_cli_t cli = {
    .optstring = ":m:b:s:r:h",
    .long_options = long_options,
    .usage_args = "[options]   (one process, no MPI)\n",
    .usage_options =
        "  -m, --model mlp|cnn      network (cnn)\n"
        "  -b, --batch-size B       samples per step, 1..65536 (64)\n"
        "  -s, --steps K            steps per repetition, 1..65536 (10)\n"
        "  -r, --reps R             repetitions, the best kept, 1..65536 "
        "(5)\n",
    .usage_notes = "Exit status: 0, 1 the model failed, 2 bad options.\n",
};

/* 0: run; 1: --help printed; -1: bad options, explained. */
static int parse_options(int argc, char **argv, options_t *o)
{
    static const char *const models[] = {"mlp", "cnn", NULL};
    int opt, *count;

    *o = (options_t){.kind = "cnn", .batch = 64, .steps = 10, .reps = 5};
    while ((opt = prog_getopt(argc, argv, &cli)) >= 0) {
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

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    options_t o;

    prog_identify("model_perf", 0);
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    const char *kind = o.kind;
    long long batch = o.batch, steps = o.steps, reps = o.reps;

    model_setup_cpu();
    model_t m;
    int status = model_init(&m, kind, (int)batch, 1);
    float *x = malloc((size_t)batch * 784 * sizeof *x);
    int *y = malloc((size_t)batch * sizeof *y);
    if (status != MODEL_OK || !x || !y) {
        fprintf(stderr, "model_perf: %s\n",
                status != MODEL_OK ? model_strerror(status) : "out of memory");
        return 1;
    }
    srand(7);
    for (long long i = 0; i < batch * 784; i++)
        x[i] = (float)rand() / (float)RAND_MAX;
    for (long long i = 0; i < batch; i++) y[i] = rand() % 10;

    double best = 1e30;
    for (long long r = 0; r < reps && status == MODEL_OK; r++) {
        double t = thread_cpu_s();
        for (long long k = 0; k < steps && status == MODEL_OK; k++) {
            float loss;
            status = model_forward(&m, x, (int)batch, 1);
            if (status == MODEL_OK)
                status = model_loss(&m, y, (int)batch, &loss);
            if (status == MODEL_OK) status = model_backward(&m, NULL, NULL);
        }
        t = thread_cpu_s() - t;
        if (t < best) best = t;
    }
    if (status == MODEL_OK)
        printf("%s batch %lld: %.2f ms of CPU per step (best of %lld x %lld), "
               "%.0f images/s\n", kind, batch, best / (double)steps * 1e3,
               reps, steps, (double)(batch * steps) / best);
    else
        fprintf(stderr, "model_perf: %s\n", model_strerror(status));
    model_free(&m);
    free(x);
    free(y);
    return status == MODEL_OK ? 0 : 1;
}
