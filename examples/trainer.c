/* examples/trainer.c: the pieces the training programs share; see
 * examples/trainer.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "examples/trainer.h"
#include "hvd/hvd.h"

/* OpenBLAS's thread count; weak, so the program links with other BLAS. */
void openblas_set_num_threads(int num_threads) __attribute__((weak));

void trainer_setup_cpu(void)
{
    /* The variable alone is too late for an OpenBLAS already loaded. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 0);
    if (openblas_set_num_threads) openblas_set_num_threads(1);
    model_flush_denormals();
}

double trainer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *trainer_split_flag(const char *arg, char *flag, size_t n)
{
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) == 0 && eq && (size_t)(eq - arg) < n) {
        memcpy(flag, arg, (size_t)(eq - arg));
        flag[eq - arg] = 0;
        return eq + 1;
    }
    snprintf(flag, n, "%s", arg);
    return NULL;
}

const char *trainer_next_value(const char *flag, int argc, char **argv,
                               int *i, char *err, size_t n)
{
    if (*i + 1 >= argc) {
        snprintf(err, n, "%s: missing value", flag);
        return NULL;
    }
    return argv[++*i];
}

int trainer_parse_ll(const char *flag, const char *s, long long lo,
                     long long hi, long long *out, char *err, size_t n)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE) {
        snprintf(err, n, "%s: \"%s\" is not an integer", flag, s);
        return -1;
    }
    if (v < lo || v > hi) {
        snprintf(err, n, "%s: %lld is out of range %lld..%lld", flag, v, lo,
                 hi);
        return -1;
    }
    *out = v;
    return 0;
}

int trainer_sgd_step(void *ctx)
{
    trainer_sgd_t *c = ctx;
    return model_sgd_step(c->sgd, c->m->param_slab, c->m->grad_slab);
}

int trainer_sgd_update(void *ctx, size_t first, float *grad_to_param,
                       size_t n)
{
    trainer_sgd_t *c = ctx;
    return model_sgd_step_range(c->sgd, c->m->param_slab, first,
                                grad_to_param, n);
}

int trainer_grad_hook(void *ctx, size_t param_idx)
{
    return hvd_dist_opt_grad_ready((hvd_dist_opt_t *)ctx, param_idx);
}

int trainer_dist_opt_create(hvd_dist_opt_t **opt, trainer_sgd_t *sgd,
                            const hvd_dist_opt_options_t *options)
{
    const model_t *m = sgd->m;
    size_t n = model_num_params(m);
    const char **names = calloc(n + 1, sizeof *names);
    float **grads = calloc(n + 1, sizeof *grads);
    size_t *counts = calloc(n + 1, sizeof *counts);
    int status = HVD_ERR_NOMEM;
    if (names && grads && counts) {
        for (size_t i = 0; i < n; i++) {
            names[i] = model_param_name(m, i);
            grads[i] = model_grad_data(m, i);
            counts[i] = model_param_count(m, i);
        }
        /* hvd copies the arrays: they are ours to free. */
        hvd_optimizer_t inner = {trainer_sgd_step, sgd, trainer_sgd_update};
        status = hvd_dist_opt_create(opt, inner, n, names, grads, counts,
                                     options);
    }
    free(names);
    free(grads);
    free(counts);
    return status;
}
