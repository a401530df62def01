/* bench/model_perf.c: the models' compute alone, no MPI traffic: CPU time
 * of one training step (forward, loss, backward) of the mlp or cnn on
 * random data, on this thread, with one BLAS thread and denormals flushed
 * as the training programs run. The best of --reps repetitions of --steps
 * steps, so that other load on a shared machine shows least.
 *
 *   bench/model_perf [--model mlp|cnn] [--batch-size B] [--steps K]
 *                    [--reps R]
 *
 * Prints "MODEL batch B: T ms of CPU per step (best of R x K), N images/s".
 * Exit status: 0, 1 (the model failed), 2 (bad flags).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "examples/trainer.h"
#include "models/model.h"

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *kind = "cnn";
    long long batch = 64, steps = 10, reps = 5;
    char err[256] = "";
    for (int i = 1; i < argc && !err[0]; i++) {
        char flag[64];
        const char *val = trainer_split_flag(argv[i], flag, sizeof flag);
        if (!strcmp(flag, "--help")) {
            puts("usage: model_perf [--model mlp|cnn] [--batch-size B] "
                 "[--steps K] [--reps R]");
            return 0;
        }
        if (strcmp(flag, "--model") && strcmp(flag, "--batch-size") &&
            strcmp(flag, "--steps") && strcmp(flag, "--reps")) {
            snprintf(err, sizeof err, "unknown flag \"%s\"", argv[i]);
            break;
        }
        if (!val) val = trainer_next_value(flag, argc, argv, &i, err,
                                           sizeof err);
        if (!val) break;
        if (!strcmp(flag, "--model")) {
            if (strcmp(val, "mlp") && strcmp(val, "cnn"))
                snprintf(err, sizeof err, "--model: unknown model \"%s\" "
                         "(mlp or cnn)", val);
            else
                kind = val;
        } else {
            long long *out = !strcmp(flag, "--batch-size") ? &batch
                             : !strcmp(flag, "--steps")    ? &steps
                                                           : &reps;
            trainer_parse_ll(flag, val, 1, 65536, out, err, sizeof err);
        }
    }
    if (err[0]) {
        fprintf(stderr, "model_perf: %s\n", err);
        return 2;
    }

    trainer_setup_cpu();
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
