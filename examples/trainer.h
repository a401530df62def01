/* examples/trainer.h: what the training programs (train_loop.c,
 * synthetic_benchmark) share: the check that every rank was given the
 * flags that must agree, and the glue between a model's SGD and hvd's
 * DistributedOptimizer (the wrapped step and the backward hook).
 * Prefix trainer_.
 *
 * Left out: the command-line grammar and the clock (prog/prog.h), one BLAS
 * thread per rank (model_setup_cpu), which bench/ uses too.
 */
#ifndef HVD_EXAMPLES_TRAINER_H
#define HVD_EXAMPLES_TRAINER_H

#include <stddef.h>
#include "hvd/hvd.h"
#include "models/model.h"

/* ---- flags that every rank must be given alike ---- */

/* One, as the program parsed it (so that "--seed 010" and "--seed 10"
 * agree): its name and its value in words. */
typedef struct {
    const char *flag; /* "seed", as long_options names it */
    char value[48];   /* "10", "not given" */
} trainer_flag_t;

/* Sets f to flag and the printf-formatted value (cut to fit). */
void trainer_flag_text(trainer_flag_t *f, const char *flag,
                       const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* After each rank read its own command line, which may differ from the
 * others' (refused: 1 when prog/ refused it, prog_refusal() saying why),
 * every rank learns whether all ranks read theirs and were given
 * flags[0..n) alike: one hvd_allgather ("trainer.flags"), the program's
 * first collective. Returns 0 when so. Else 2, the exit status of bad
 * flags, on every rank: rank 0 said "PROG: rank R: WHY" for a refusal on
 * another rank only (its own was said), or each rank said "PROG: rank R:
 * --FLAG V here, W on rank S: ..." for the first flag that differs. 1
 * when the allgather failed. After prog_identify(). */
int trainer_flags_agree(int refused, const trainer_flag_t *flags, size_t n);

/* --device's word (cpu, cuda or auto) made a choice, before the flags are
 * compared, so that the ranks compare choices: *device becomes "cpu" or
 * "cuda", *automatic says whether auto chose it. 0, or -1 refused
 * (prog_refuse: cuda where none can be used, or any device when HVD_CONV
 * or HVD_CONV_TF32 has a bad value, saying why). */
int trainer_device_choose(const char **device, int *automatic);

/* ---- hvd's DistributedOptimizer over a model's SGD ---- */

/* The optimizer hvd wraps: SGD over the model's whole slabs. */
typedef struct {
    model_t *m;
    model_sgd_t *sgd;
} trainer_sgd_t;

/* hvd's DistributedOptimizer over every parameter tensor of sgd->m, named
 * as the model names them, wrapping sgd; options as hvd_dist_opt_create.
 * On a GPU (model_stream) it takes the model's stream, and sgd->m's
 * backward hooks then fire when a gradient is queued (hooks_queued). */
int trainer_dist_opt_create(hvd_dist_opt_t **opt, trainer_sgd_t *sgd,
                            const hvd_dist_opt_options_t *options);

/* hvd_optimizer_t.step and .update for a trainer_sgd_t. */
int trainer_sgd_step(void *ctx);
int trainer_sgd_update(void *ctx, size_t first, float *grad_to_param,
                       size_t n);
/* model_backward's hook for an hvd_dist_opt_t: the gradient is final. */
int trainer_grad_hook(void *ctx, size_t param_idx);

#endif /* HVD_EXAMPLES_TRAINER_H */
