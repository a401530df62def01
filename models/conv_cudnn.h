/* models/conv_cudnn.h: the GPU table's two convolution paths, for
 * models/backend_cuda.c and test/test_models_cuda.c only: cuDNN's
 * (models/conv_cudnn.c, in a build configured with it) and im2col +
 * cuBLAS (models/backend_cuda.c, in every CUDA build: the reference the
 * tests compare cuDNN's against). HVD_CONV picks one when the table
 * opens; models/README.md says how.
 *
 * No cuDNN type appears here, so that this header compiles without
 * cuDNN's: the handle and the descriptors stay inside conv_cudnn.c.
 */
#ifndef HVD_MODEL_CONV_CUDNN_H
#define HVD_MODEL_CONV_CUDNN_H

#include <stddef.h>
#include <cuda_runtime_api.h>
#include "models/model_internal.h"

typedef enum {
    MODEL__CONV_IM2COL,
    MODEL__CONV_CUDNN,     /* float FMAs only */
    MODEL__CONV_CUDNN_TF32 /* TF32 tensor cores allowed (HVD_CONV_TF32=1) */
} model__conv_path_t;

/* ---- the switch, in models/backend_cuda.c ---- */

/* Makes the open GPU table's conv entries run path from now on. MODEL_OK;
 * MODEL_ERR_STATE when the table is not open or that path cannot run in
 * this process (no cuDNN in the build, or its handle did not open); the
 * path in use is then unchanged. The scratch of a conv2d_scratch_count
 * serves both paths, so a switch needs no new scratch. */
int model__cuda_conv_use(model__conv_path_t path);
/* The path the conv entries run now. */
model__conv_path_t model__cuda_conv_path(void);

/* ---- cuDNN (models/conv_cudnn.c) ----
 * One handle per process, on the GPU table's stream, kept for the
 * process's life as the cuBLAS handle is. Not thread-safe: the table's
 * entries are called from one thread at a time (as cuBLAS's handle
 * requires too). Every function returns MODEL_OK or MODEL_ERR_CUDA, after
 * writing the first failure of the process, with the cuDNN call that
 * failed, to stderr. Pointers are device memory; shapes and layouts are
 * models/model_internal.h's. */

/* The handle on stream. On failure *why (static text) says which call
 * failed and why: the caller runs im2col instead, or refuses the device. */
int model__cudnn_open(cudaStream_t stream, const char **why);

/* y = conv(x, w) + b, for batch images. scratch holds scratch_nbytes
 * bytes, at least what the im2col path needs for this batch: the
 * algorithms are chosen to fit in it, once per (shape, batch, tf32).
 * tf32: TF32 tensor cores may run the convolution (the bias stays in
 * float), as PyTorch's torch.backends.cudnn.allow_tf32. */
int model__cudnn_conv2d_forward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *b, float *y,
                                int batch, void *scratch,
                                size_t scratch_nbytes, int tf32);
/* models/model_internal.h's conv2d_backward: dw and db (+)= when dw is not
 * NULL, dx = when dx is not NULL; scratch and tf32 as the forward's. */
int model__cudnn_conv2d_backward(const model__conv_shape_t *s,
                                 const float *x, const float *w,
                                 const float *dy, float *dx, float *dw,
                                 float *db, int batch, void *scratch,
                                 size_t scratch_nbytes, int accumulate,
                                 int tf32);

#endif /* HVD_MODEL_CONV_CUDNN_H */
