/* models/backend.c: which table a device gets (models/backend.h): the
 * GPU's only in a CUDA build, from models/backend_cuda.c; the emulated
 * one under HVD_DEVICE_EMULATE, as ring's device (ring/dev.c). */
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
