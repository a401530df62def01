/* examples/trainer.c: the pieces the training programs share; see
 * examples/trainer.h.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "examples/trainer.h"
#include "hvd/hvd.h"
#include "prog/prog.h"
#include "ring/ring.h"

/* ---- flags that every rank must be given alike ---- */

/* Bytes each rank sends: '1' and its refusal, or '0' and its values, one
 * a line in the flags' order. */
enum { AGREE_NBYTES = 2048 };

void trainer_flag_text(trainer_flag_t *f, const char *flag,
                       const char *format, ...)
{
    va_list ap;

    f->flag = flag;
    va_start(ap, format);
    vsnprintf(f->value, sizeof f->value, format, ap);
    va_end(ap);
}

/* Value k of a rank's block (after its '0'), of *len bytes. */
static const char *value_at(const char *block, size_t k, int *len)
{
    const char *v = block + 1;

    for (; k > 0; k--)
        v += strcspn(v, "\n") + (v[strcspn(v, "\n")] != 0);
    *len = (int)strcspn(v, "\n");
    return v;
}

/* Every rank's verdict on the gathered blocks: 0 or 2, said as
 * trainer_flags_agree says. */
static int judge(const char *all, int size, int refused,
                 const trainer_flag_t *flags, size_t n)
{
    for (int r = 0; r < size; r++)
        if (all[(size_t)r * AGREE_NBYTES] == '1') {
            if (prog_rank == 0 && !refused)
                fprintf(stderr, "%s: rank %d: %s\n", prog_name, r,
                        all + (size_t)r * AGREE_NBYTES + 1);
            return 2;
        }
    /* Whether some rank differs from this one on flag k is the same on
     * every rank (not all alike), so all stop at the same flag. */
    for (size_t k = 0; k < n; k++)
        for (int r = 0; r < size; r++) {
            int len;
            const char *v = value_at(all + (size_t)r * AGREE_NBYTES, k, &len);
            if ((size_t)len == strlen(flags[k].value) &&
                memcmp(v, flags[k].value, (size_t)len) == 0)
                continue;
            fprintf(stderr, "%s: rank %d: --%s %s here, %.*s on rank %d: "
                    "every rank must be given the same --%s\n", prog_name,
                    prog_rank, flags[k].flag, flags[k].value, len, v, r,
                    flags[k].flag);
            return 2;
        }
    return 0;
}

int trainer_flags_agree(int refused, const trainer_flag_t *flags, size_t n)
{
    int size = hvd_size(), rc = 1;
    char mine[AGREE_NBYTES] = "1";
    char *all = malloc((size_t)size * AGREE_NBYTES);

    if (refused) {
        snprintf(mine + 1, sizeof mine - 1, "%s", prog_refusal());
    } else {
        size_t used = 1;
        mine[0] = '0';
        for (size_t k = 0; k < n && used < sizeof mine; k++)
            used += (size_t)snprintf(mine + used, sizeof mine - used, "%s\n",
                                     flags[k].value);
    }
    if (!all) {
        fprintf(stderr, "%s: out of memory\n", prog_name);
        return 1;
    }
    int status = hvd_allgather(mine, sizeof mine, all, HVD_UINT8,
                               "trainer.flags");
    if (status == HVD_OK)
        rc = judge(all, size, refused, flags, n);
    else
        fprintf(stderr, "%s: rank %d: comparing the flags: %s\n", prog_name,
                prog_rank, hvd_strerror(status));
    free(all);
    return rc;
}

/* ---- where to train ---- */

static ring_stream_t *trainer_emu_stream;

static int trainer_emu_sync(void *stream)
{
    return ring_dev()->stream_sync(stream);
}

int trainer_device_choose(const char **device, int *automatic)
{
    const char *why = NULL, *asked = *device;
    /* The test-only HVD_DEVICE_EMULATE is read by ring (which device
     * memory is) and by models (which kernels run): a value ring refused
     * (its message above; no device used) would give the model emulated
     * kernels on a machine without a device, or in place of the GPU. It
     * leaves no device: cuda is refused, auto takes the CPU. */
    const char *emulate = getenv("HVD_DEVICE_EMULATE");
    const ring_dev_t *dev = ring_dev();
    int refused = emulate && *emulate && strcmp(emulate, "0") != 0 &&
                  (!dev || strcmp(dev->name, "emulated") != 0);
    int gpu = !refused && model_device_available(MODEL_DEVICE_CUDA, &why);
    if (refused)
        why = "HVD_DEVICE_EMULATE has a value the emulated device does not "
              "take (the message above)";
    *automatic = !strcmp(*device, "auto");
    if (*automatic) *device = gpu ? "cuda" : "cpu";
    /* The CPU refuses a bad HVD_CONV or HVD_CONV_TF32 too. */
    if (!strcmp(*device, "cuda")
            ? !gpu
            : !model_device_available(MODEL_DEVICE_CPU, &why))
        return prog_refuse("--device %s: %s", asked, why);
    /* On the emulated device the model's memory is ring's emulated device
     * memory, so that its gradients take hvd's device path, as on a GPU;
     * not in the guard mode, which closes that memory to the host, where
     * the model's emulated kernels run. */
    if (!strcmp(*device, "cuda") && dev && !strcmp(dev->name, "emulated") &&
        emulate && strncmp(emulate, "guard", 5) != 0) {
        model_emu_memory(dev->alloc, dev->release);
        /* And a stream, so that the DistributedOptimizer orders itself
         * after backward on it (trainer_dist_opt_create), as on a GPU;
         * the process's, like a GPU's. */
        if (dev->stream_create(&trainer_emu_stream) != RING_OK)
            return prog_refuse("--device %s: the emulated device cannot "
                               "make a stream", asked);
        model_emu_stream(trainer_emu_stream, trainer_emu_sync);
    }
    return 0;
}

/* ---- hvd's DistributedOptimizer over a model's SGD ---- */

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
        /* On a GPU the optimizer orders itself after backward on the
         * model's stream (a CUDA stream is a ring_stream_t there), so
         * backward reports each gradient when it is queued, not done. */
        hvd_dist_opt_options_t o = {1, 0, HVD_AVERAGE, NULL, NULL};
        if (options) o = *options;
        if (!o.stream && !o.shard_params)
            o.stream = (struct ring_stream *)model_stream(m);
        status = hvd_dist_opt_create(opt, inner, n, names, grads, counts,
                                     &o);
        if (status == HVD_OK && o.stream) sgd->m->hooks_queued = 1;
    }
    free(names);
    free(grads);
    free(counts);
    return status;
}
