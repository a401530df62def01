/* models/backend_cuda.c: the GPU's backend table (models/backend.h). */
#include "models/backend.h"

const model__backend_t *model__cuda_open(const char **why);

const model__backend_t *model__cuda_open(const char **why)
{
    if (why) *why = "the CUDA backend is not built yet";
    return NULL;
}
