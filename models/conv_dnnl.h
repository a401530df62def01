/* models/conv_dnnl.h: the CPU table's convolutions through oneDNN
 * (models/conv_dnnl.c; in a build without it, the same functions take no
 * layer), for models/backend_cpu.c and the tests. The reference is im2col + BLAS
 * (models/layers.c), which the CPU table runs where oneDNN does not take
 * a layer, under HVD_CONV=im2col, and when a oneDNN call fails.
 *
 * No oneDNN type appears here, so that this header compiles without
 * oneDNN's. Not thread-safe, as the table's other entries: one thread
 * calls them at a time. Shapes and layouts are models/model_internal.h's;
 * every pointer is host memory.
 */
#ifndef HVD_MODEL_CONV_DNNL_H
#define HVD_MODEL_CONV_DNNL_H

#include "models/model_internal.h"

/* Whether oneDNN runs a layer of shape s in this process: a build with
 * it, HVD_CONV is not im2col, and the input has 16 channels or more
 * (oneDNN's fast kernels block channels by 16: a layer on one to a few
 * input channels, the first of a model, is faster through im2col). */
int model__dnnl_takes(const model__conv_shape_t *s);

/* Scratch floats the backward needs when it accumulates (dw and db are
 * made there, then added). */
size_t model__dnnl_scratch_count(const model__conv_shape_t *s);

/* y = conv(x, w) + b for batch images. MODEL_OK, or MODEL_ERR_STATE
 * when oneDNN failed (said once on stderr): the caller runs im2col. */
int model__dnnl_conv2d_forward(const model__conv_shape_t *s, const float *x,
                               const float *w, const float *b, float *y,
                               int batch);
/* model_internal.h's conv2d_backward: dx = (skipped when NULL); dw, db =
 * or += (accumulate), skipped when dw is NULL; scratch holds
 * model__dnnl_scratch_count floats. Statuses as the forward's. */
int model__dnnl_conv2d_backward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *dy, float *dx,
                                float *dw, float *db, int batch, float *scratch,
                                int accumulate);

#endif /* HVD_MODEL_CONV_DNNL_H */
