/* models/backend.c: which table a device gets (models/backend.h): the
 * GPU's only in a CUDA build, from models/backend_cuda.c; the emulated
 * one under HVD_DEVICE_EMULATE, as ring's device (ring/dev.c). And
 * HVD_CONV's one reading, which every table follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "models/backend.h"

#if HVD_HAVE_CUDA
const model__backend_t *model__cuda_open(const char **why);
#endif

const model__backend_t *model__backend_cuda(const char **why)
{
    const char *emulate = getenv("HVD_DEVICE_EMULATE");
    if (emulate && *emulate && strcmp(emulate, "0") != 0)
        return model__backend_emu();
#if HVD_HAVE_CUDA
    return model__cuda_open(why);
#else
    if (why) *why = "this build has no CUDA (configure found no nvcc)";
    return NULL;
#endif
}

/* name's value: 0 for unset or empty, else 1 + its index in values
 * (n of them), or -1 with *why naming it and what was expected. */
static int env_choice(const char *name, const char *const *values, int n,
                      const char *expected, const char **why)
{
    static char text[128];
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(v, values[i])) return 1 + i;
    snprintf(text, sizeof text, "%s=%.40s: expected %s", name, v, expected);
    if (why) *why = text;
    return -1;
}

int model__conv_ask(model__conv_ask_t *ask, const char **why)
{
    /* in model__conv_ask_path_t's order, after DEFAULT */
    static const char *const paths[] = {"cudnn", "im2col"};
    static const char *const bits[] = {"0", "1"};
    int path = env_choice("HVD_CONV", paths, 2, "cudnn or im2col", why);
    int tf32 =
        path < 0 ? 0 : env_choice("HVD_CONV_TF32", bits, 2, "0 or 1", why);
    *ask = (model__conv_ask_t){0};
    if (path < 0 || tf32 < 0) return -1;
    ask->path = (model__conv_ask_path_t)path;
    ask->tf32 = tf32 == 2; /* "1" */
    return 0;
}
