/* models/kernels_cuda.h: the launchers of models/kernels_cuda.cu, for
 * models/backend_cuda.c only. Each queues its kernel on stream and returns
 * the launch's cudaGetLastError() (an error of the kernel's run comes
 * later, from a synchronisation). Shapes and layouts are those of
 * models/model_internal.h; every pointer is device memory.
 */
#ifndef HVD_MODEL_KERNELS_CUDA_H
#define HVD_MODEL_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "models/model_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t model__cuda_fill(float *x, float value, size_t count,
                             cudaStream_t stream);
/* y[i] = b[(i / inner) % channels] for i < count: a linear layer's bias
 * rows (inner 1), a convolution's per-channel planes (inner out_h*out_w). */
cudaError_t model__cuda_bias(float *y, const float *b, size_t count,
                             size_t inner, int channels, cudaStream_t stream);
/* db[o] = (accumulate ? db[o] : 0) + the sum over n < batch and i < inner
 * of dy[(n * channels + o) * inner + i]. */
cudaError_t model__cuda_channel_sum(const float *dy, float *db, int batch,
                                    int channels, size_t inner,
                                    int accumulate, cudaStream_t stream);
/* col (batch, in_c*k*k, out_h*out_w) from x (batch, in_c, in_h, in_w),
 * zero where a window reaches into the padding. */
cudaError_t model__cuda_im2col(const model__conv_shape_t *s, const float *x,
                               float *col, int batch, cudaStream_t stream);
/* dx (batch, in_c, in_h, in_w) = im2col's adjoint applied to col,
 * overwritten. */
cudaError_t model__cuda_col2im(const model__conv_shape_t *s, const float *col,
                               float *dx, int batch, cudaStream_t stream);
cudaError_t model__cuda_relu_forward(const float *x, float *y, size_t count,
                                     cudaStream_t stream);
cudaError_t model__cuda_relu_backward(const float *y, const float *dy,
                                      float *dx, size_t count,
                                      cudaStream_t stream);
cudaError_t model__cuda_maxpool_forward(const model__conv_shape_t *s,
                                        const float *x, float *y,
                                        int32_t *argmax, int batch,
                                        cudaStream_t stream);
cudaError_t model__cuda_maxpool_backward(const model__conv_shape_t *s,
                                         const float *dy,
                                         const int32_t *argmax, float *dx,
                                         int batch, cudaStream_t stream);
cudaError_t model__cuda_dropout_forward(const float *x, float *y, float *mask,
                                        size_t count, float p, int train,
                                        uint64_t rng, cudaStream_t stream);
cudaError_t model__cuda_dropout_backward(const float *dy, const float *mask,
                                         float *dx, size_t count,
                                         cudaStream_t stream);
/* out[i] = model__sgd_elem(p[i], g[i], &velocity[i], ...) (velocity may
 * be NULL when mu is 0; out may be p). */
cudaError_t model__cuda_sgd_step(const float *p, const float *g, float *out,
                                 float *velocity, size_t count, float lr,
                                 float mu, float wd, int nesterov,
                                 cudaStream_t stream);
cudaError_t model__cuda_softmax_xent(const float *logits,
                                     const int32_t *labels, float *dlogits,
                                     double *losses, int batch, int classes,
                                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* HVD_MODEL_KERNELS_CUDA_H */
