/* models/backend.c: which table a device gets (models/backend.h): the
 * GPU's only in a CUDA build, from models/backend_cuda.c. */
#include "models/backend.h"

#if HVD_HAVE_CUDA
const model__backend_t *model__cuda_open(const char **why);
#endif

const model__backend_t *model__backend_cuda(const char **why)
{
#if HVD_HAVE_CUDA
    return model__cuda_open(why);
#else
    if (why) *why = "this build has no CUDA (configure found no nvcc)";
    return NULL;
#endif
}
