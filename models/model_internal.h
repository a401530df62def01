/* models/model_internal.h: the host layer kernels and the layer record that
 * model.c strings into a sequential model. Not installed; the tests include
 * it to check each kernel alone.
 *
 * Layout: activations are (batch, C, H, W) row-major floats; a linear layer
 * sees (batch, in). Kernels take no ownership and never allocate; scratch
 * comes from the caller. These are the host's; models/backend.h is the
 * table model.c calls them through (models/backend_cpu.c).
 */
#ifndef HVD_MODEL_INTERNAL_H
#define HVD_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "models/model.h"

typedef enum {
    MODEL__LINEAR,
    MODEL__CONV2D,
    MODEL__RELU,
    MODEL__MAXPOOL,
    MODEL__FLATTEN,
    MODEL__DROPOUT
} model__layer_kind_t;

/* A 2-D convolution's or pooling's geometry, per sample. */
typedef struct {
    int in_c, in_h, in_w; /* input (C, H, W) */
    int out_c;            /* output channels (conv) */
    int k, stride, pad;   /* square kernel */
    int out_h, out_w;     /* (in + 2 pad - k) / stride + 1 */
} model__conv_shape_t;

struct model__layer {
    model__layer_kind_t kind;
    model__conv_shape_t
        s;             /* conv/pool geometry; linear: in_c = in, out_c = out */
    size_t in_count;   /* floats per sample in */
    size_t out_count;  /* floats per sample out */
    float dropout_p;   /* dropout: probability of zeroing */
    long w_idx, b_idx; /* parameter indices, -1 if none */
    float *out;        /* (batch_max, out_count); flatten: aliases input */
    float *dout;       /* (batch_max, out_count) dL/d(out) */
    int32_t *argmax;   /* maxpool: (batch_max, out_count) input plane index */
    float *mask;       /* dropout: (batch_max, out_count) 0 or 1/(1-p) */
};

/* ---- generator: splitmix64 (Steele et al.), tiny and seedable ---- */
uint64_t model__rng_next(uint64_t *state);
float model__rng_uniform(uint64_t *state); /* [0, 1), 24 random bits */

/* ---- kernels ---- */

/* y (batch, out) = x (batch, in) w^T (w: (out, in)) + b (out). */
void model__linear_forward(const float *x, const float *w, const float *b,
                           float *y, int batch, int in, int out);
/* dw (out, in), db (out) overwritten (or added to when accumulate),
 * skipped when dw is NULL; dx (batch, in) overwritten, skipped when NULL.
 * conv2d_backward likewise (dw (out_c, in_c, k, k), db (out_c)). */
void model__linear_backward(const float *x, const float *w, const float *dy,
                            float *dx, float *dw, float *db, int batch, int in,
                            int out, int accumulate);

/* Scratch floats a convolution needs: two im2col matrices. */
size_t model__conv2d_scratch_count(const model__conv_shape_t *s);
/* y (batch, out_c, out_h, out_w) from x (batch, in_c, in_h, in_w),
 * w (out_c, in_c, k, k), b (out_c), through im2col + sgemm per image. */
void model__conv2d_forward(const model__conv_shape_t *s, const float *x,
                           const float *w, const float *b, float *y, int batch,
                           float *scratch);
void model__conv2d_backward(const model__conv_shape_t *s, const float *x,
                            const float *w, const float *dy, float *dx,
                            float *dw, float *db, int batch, float *scratch,
                            int accumulate);

void model__relu_forward(const float *x, float *y, size_t count);
/* Uses the forward's output y: dx = dy where y > 0, else 0. */
void model__relu_backward(const float *y, const float *dy, float *dx,
                          size_t count);

/* Max over k x k windows with the given stride, no padding; argmax holds
 * the winning index within the input plane (first maximum on ties). */
void model__maxpool_forward(const model__conv_shape_t *s, const float *x,
                            float *y, int32_t *argmax, int batch);
void model__maxpool_backward(const model__conv_shape_t *s, const float *dy,
                             const int32_t *argmax, float *dx, int batch);

/* Inverted dropout: mask = 0 with probability p else 1/(1-p), y = x*mask,
 * element i's draw the i-th after rng (models/elem.h; the caller advances
 * its generator by count draws). Not training: y = x and mask = 1. */
void model__dropout_forward(const float *x, float *y, float *mask, size_t count,
                            float p, int train, uint64_t rng);
void model__dropout_backward(const float *dy, const float *mask, float *dx,
                             size_t count);

/* Softmax cross-entropy of each sample into losses (batch), dlogits =
 * (softmax - onehot) / batch. Labels must be in 0..classes-1. */
void model__softmax_xent(const float *logits, const int32_t *labels,
                         float *dlogits, double *losses, int batch,
                         int classes);

/* ---- model.c's, for models/batch.c ---- */

/* MODEL_ERR_ARG when one of labels (batch, host) is not a class of m. */
int model__labels_check(const model_t *m, const int *labels, int batch);
/* model_loss_queue with labels (m->batch) already in m's memory and
 * checked. */
int model__loss_queue(model_t *m, const int32_t *labels);

#endif /* HVD_MODEL_INTERNAL_H */
