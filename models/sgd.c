/* models/sgd.c: SGD with momentum, Nesterov and weight decay over one flat
 * range of floats (the whole parameter slab), and the warm-up schedule.
 * The momentum buffer is one allocation so it can be broadcast and
 * checkpointed as a single range.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "models/model.h"

int model_sgd_init(model_sgd_t *opt, size_t count, float lr, float momentum,
                   float weight_decay, int nesterov)
{
    if (!opt) return MODEL_ERR_ARG;
    memset(opt, 0, sizeof(*opt));
    if (!(lr >= 0) || !(momentum >= 0) || !(weight_decay >= 0) ||
        (nesterov && momentum == 0))
        return MODEL_ERR_ARG;
    if (momentum > 0 && count > 0) {
        opt->velocity = calloc(count, sizeof(float));
        if (!opt->velocity) return MODEL_ERR_NOMEM;
    }
    opt->lr = lr;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->nesterov = nesterov;
    opt->count = count;
    return MODEL_OK;
}

void model_sgd_free(model_sgd_t *opt)
{
    if (!opt) return;
    free(opt->velocity);
    memset(opt, 0, sizeof(*opt));
}

int model_sgd_step(model_sgd_t *opt, float *params, const float *grads)
{
    if (!opt || (opt->count && (!params || !grads))) return MODEL_ERR_ARG;
    const float lr = opt->lr, mu = opt->momentum, wd = opt->weight_decay;
    float *v = opt->velocity;
    if (mu > 0 && opt->count && !v) return MODEL_ERR_STATE;
    for (size_t i = 0; i < opt->count; i++) {
        float g = grads[i] + wd * params[i];
        if (mu > 0) {
            v[i] = mu * v[i] + g;
            g = opt->nesterov ? g + mu * v[i] : v[i];
        }
        params[i] -= lr * g;
    }
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
