/* examples/trainer.h: what the training programs (train_loop.c,
 * synthetic_benchmark) share: one BLAS thread per rank and no denormals,
 * flag parsing in the "--flag value" / "--flag=value" style, a clock, and
 * the glue between a model's SGD and hvd's DistributedOptimizer (the
 * wrapped step and the backward hook). Prefix trainer_. */
#ifndef HVD_EXAMPLES_TRAINER_H
#define HVD_EXAMPLES_TRAINER_H

#include <stddef.h>
#include "hvd/hvd.h"
#include "models/model.h"

/* The calling thread trains: one BLAS thread per rank (call before the
 * first BLAS call) and denormals flushed to zero (model_flush_denormals). */
void trainer_setup_cpu(void);

/* Seconds on a monotonic clock. */
double trainer_now(void);

/* Splits "--flag=value" into flag (of n bytes) and returns the value;
 * otherwise copies arg into flag and returns NULL. */
const char *trainer_split_flag(const char *arg, char *flag, size_t n);

/* A flag's value given as the next argument: argv[*i + 1], advancing *i;
 * NULL with "FLAG: missing value" in err (n bytes) when there is none. */
const char *trainer_next_value(const char *flag, int argc, char **argv,
                               int *i, char *err, size_t n);

/* An integer flag value in [lo, hi]: 0, or -1 with a message naming the
 * flag in err (n bytes). */
int trainer_parse_ll(const char *flag, const char *s, long long lo,
                     long long hi, long long *out, char *err, size_t n);

/* The optimizer hvd wraps: SGD over the model's whole slabs. */
typedef struct {
    model_t *m;
    model_sgd_t *sgd;
} trainer_sgd_t;

/* hvd's DistributedOptimizer over every parameter tensor of sgd->m, named
 * as the model names them, wrapping sgd; options as hvd_dist_opt_create. */
int trainer_dist_opt_create(hvd_dist_opt_t **opt, trainer_sgd_t *sgd,
                            const hvd_dist_opt_options_t *options);

/* hvd_optimizer_t.step and .update for a trainer_sgd_t. */
int trainer_sgd_step(void *ctx);
int trainer_sgd_update(void *ctx, size_t first, float *grad_to_param,
                       size_t n);
/* model_backward's hook for an hvd_dist_opt_t: the gradient is final. */
int trainer_grad_hook(void *ctx, size_t param_idx);

#endif /* HVD_EXAMPLES_TRAINER_H */
