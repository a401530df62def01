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

int model__conv_ask(model__conv_ask_t *ask, const char **why)
{
    static char text[96];
    const char *v = getenv("HVD_CONV");
    *ask = MODEL__CONV_ASK_DEFAULT;
    if (!v || !*v) return 0;
    if (!strcmp(v, "cudnn") || !strcmp(v, "im2col")) {
        *ask = v[0] == 'c' ? MODEL__CONV_ASK_CUDNN : MODEL__CONV_ASK_IM2COL;
        return 0;
    }
    snprintf(text, sizeof text, "HVD_CONV=%.40s: expected cudnn or im2col",
             v);
    if (why) *why = text;
    return -1;
}
