/* models/sgd.c: SGD with momentum, Nesterov and weight decay over one flat
 * range of floats (the whole parameter slab), and the warm-up schedule.
 * The momentum buffer is one allocation so it can be broadcast and
 * checkpointed as a single range; it lives, and the step runs, where the
 * model's slabs do (its backend, models/backend.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "models/backend.h"
#include "models/model.h"

static int sgd_init(model_sgd_t *opt, const model__backend_t *backend,
                    size_t count, float lr, float momentum,
                    float weight_decay, int nesterov)
{
    if (!opt) return MODEL_ERR_ARG;
    memset(opt, 0, sizeof(*opt));
    if (!(lr >= 0) || !(momentum >= 0) || !(weight_decay >= 0) ||
        (nesterov && momentum == 0))
        return MODEL_ERR_ARG;
    if (momentum > 0 && count > 0) {
        int status = backend->alloc(count * sizeof(float),
                                    (void **)&opt->velocity);
        if (status != MODEL_OK) return status;
    }
    opt->lr = lr;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->nesterov = nesterov;
    opt->count = count;
    opt->backend = backend;
    return MODEL_OK;
}

int model_sgd_init(model_sgd_t *opt, size_t count, float lr, float momentum,
                   float weight_decay, int nesterov)
{
    return sgd_init(opt, model__backend_cpu(), count, lr, momentum,
                    weight_decay, nesterov);
}

int model_sgd_init_model(model_sgd_t *opt, const model_t *m, float lr,
                         float momentum, float weight_decay, int nesterov)
{
    if (!m || !m->backend) {
        if (opt) memset(opt, 0, sizeof(*opt));
        return MODEL_ERR_ARG;
    }
    return sgd_init(opt, m->backend, m->param_count, lr, momentum,
                    weight_decay, nesterov);
}

void model_sgd_free(model_sgd_t *opt)
{
    if (!opt) return;
    if (opt->backend) opt->backend->release(opt->velocity);
    memset(opt, 0, sizeof(*opt));
}

/* n elements from `first` on: out[i] = the stepped p[i], p, g and out all
 * at that element (out may be p or g: element i is read before it is
 * written). */
static void model__sgd_range(model_sgd_t *opt, size_t first, const float *p,
                             const float *g, float *out, size_t n)
{
    opt->backend->sgd_step(p, g, out, opt->velocity ? opt->velocity + first
                                                    : NULL,
                           n, opt->lr, opt->momentum, opt->weight_decay,
                           opt->nesterov);
}

int model_sgd_step(model_sgd_t *opt, float *params, const float *grads)
{
    if (!opt || (opt->count && (!params || !grads))) return MODEL_ERR_ARG;
    /* Zeroed, freed, or its init failed (which zeroes it). */
    if (!opt->backend || (opt->momentum > 0 && opt->count && !opt->velocity))
        return MODEL_ERR_STATE;
    model__sgd_range(opt, 0, params, grads, params, opt->count);
    return MODEL_OK;
}

int model_sgd_step_range(model_sgd_t *opt, const float *params, size_t first,
                         float *grad_to_param, size_t n)
{
    if (!opt || (n && (!params || !grad_to_param)) || first > opt->count ||
        n > opt->count - first)
        return MODEL_ERR_ARG;
    if ((opt->momentum > 0 && n && !opt->velocity) ||
        opt->backend != model__backend_cpu())
        return MODEL_ERR_STATE;
    model__sgd_range(opt, first, params + first, grad_to_param, grad_to_param,
                     n);
    return MODEL_OK;
}

float model_lr_warmup(float base_lr, int num_ranks, double warmup_epochs,
                      double epoch)
{
    double target = (double)base_lr * (num_ranks > 0 ? num_ranks : 1);
    if (warmup_epochs <= 0 || epoch >= warmup_epochs) return (float)target;
    if (epoch < 0) epoch = 0;
    return (float)(base_lr + (target - base_lr) * (epoch / warmup_epochs));
}

float model_lr_cosine(float lr, double from_epoch, double to_epoch,
                      double epoch)
{
    if (to_epoch <= from_epoch || epoch <= from_epoch) return lr;
    if (epoch >= to_epoch) return 0.0f;
    double t = (epoch - from_epoch) / (to_epoch - from_epoch);
    return (float)(lr * 0.5 * (1.0 + cos(acos(-1.0) * t)));
}
