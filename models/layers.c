/* models/layers.c: host (CBLAS) forward and backward of each layer kind,
 * on plain arrays; models/model.c strings them together. The matrix work
 * goes through cblas_sgemm: linear directly, conv2d as im2col + GEMM one
 * image at a time (batched im2col would be faster; left for later).
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include "models/model.h"
#include "models/model_internal.h"

/* ---- generator ---- */

uint64_t model__rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float model__rng_uniform(uint64_t *state)
{
    return (float)(model__rng_next(state) >> 40) * (1.0f / 16777216.0f);
}

/* ---- linear ---- */

void model__linear_forward(const float *x, const float *w, const float *b,
                           float *y, int batch, int in, int out)
{
    for (int n = 0; n < batch; n++)
        memcpy(y + (size_t)n * out, b, (size_t)out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f,
                x, in, w, in, 1.0f, y, out);
}

void model__linear_backward(const float *x, const float *w, const float *dy,
                            float *dx, float *dw, float *db, int batch, int in,
                            int out, int accumulate)
{
    if (dw) {
        /* dw (out, in) = dy^T (out, batch) x (batch, in) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch,
                    1.0f, dy, out, x, in, accumulate ? 1.0f : 0.0f, dw, in);
        if (!accumulate) memset(db, 0, (size_t)out * sizeof(float));
        for (int n = 0; n < batch; n++)
            for (int o = 0; o < out; o++)
                db[o] += dy[(size_t)n * out + o];
    }
    /* dx (batch, in) = dy (batch, out) w (out, in) */
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out,
                    1.0f, dy, out, w, in, 0.0f, dx, in);
}

/* ---- conv2d: im2col + GEMM ----
 * col is (in_c * k * k, out_h * out_w): row (c, ki, kj), column (oy, ox)
 * holds x[c][oy*stride - pad + ki][ox*stride - pad + kj], 0 outside. Then
 * y_img (out_c, out_h*out_w) = w (out_c, in_c*k*k) col. */

size_t model__conv2d_scratch_count(const model__conv_shape_t *s)
{
    return 2 * (size_t)s->in_c * s->k * s->k * s->out_h * s->out_w;
}

static void im2col(const model__conv_shape_t *s, const float *x, float *col)
{
    size_t ohw = (size_t)s->out_h * s->out_w;
    for (int c = 0; c < s->in_c; c++)
        for (int ki = 0; ki < s->k; ki++)
            for (int kj = 0; kj < s->k; kj++) {
                float *row = col + ((size_t)(c * s->k + ki) * s->k + kj) * ohw;
                for (int oy = 0; oy < s->out_h; oy++) {
                    int iy = oy * s->stride - s->pad + ki;
                    for (int ox = 0; ox < s->out_w; ox++) {
                        int ix = ox * s->stride - s->pad + kj;
                        int inside =
                            iy >= 0 && iy < s->in_h && ix >= 0 && ix < s->in_w;
                        row[oy * s->out_w + ox] =
                            inside
                                ? x[((size_t)c * s->in_h + iy) * s->in_w + ix]
                                : 0.0f;
                    }
                }
            }
}

/* The adjoint of im2col: dx (in_c, in_h, in_w) = sum of dcol's entries. */
static void col2im(const model__conv_shape_t *s, const float *dcol, float *dx)
{
    size_t ohw = (size_t)s->out_h * s->out_w;
    memset(dx, 0, (size_t)s->in_c * s->in_h * s->in_w * sizeof(float));
    for (int c = 0; c < s->in_c; c++)
        for (int ki = 0; ki < s->k; ki++)
            for (int kj = 0; kj < s->k; kj++) {
                const float *row =
                    dcol + ((size_t)(c * s->k + ki) * s->k + kj) * ohw;
                for (int oy = 0; oy < s->out_h; oy++) {
                    int iy = oy * s->stride - s->pad + ki;
                    if (iy < 0 || iy >= s->in_h) continue;
                    for (int ox = 0; ox < s->out_w; ox++) {
                        int ix = ox * s->stride - s->pad + kj;
                        if (ix < 0 || ix >= s->in_w) continue;
                        dx[((size_t)c * s->in_h + iy) * s->in_w + ix] +=
                            row[oy * s->out_w + ox];
                    }
                }
            }
}

void model__conv2d_forward(const model__conv_shape_t *s, const float *x,
                           const float *w, const float *b, float *y, int batch,
                           float *scratch)
{
    int ohw = s->out_h * s->out_w, ckk = s->in_c * s->k * s->k;
    size_t in_count = (size_t)s->in_c * s->in_h * s->in_w;
    size_t out_count = (size_t)s->out_c * ohw;
    for (int n = 0; n < batch; n++) {
        float *yn = y + n * out_count;
        im2col(s, x + n * in_count, scratch);
        for (int o = 0; o < s->out_c; o++)
            for (int i = 0; i < ohw; i++)
                yn[(size_t)o * ohw + i] = b[o];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->out_c, ohw,
                    ckk, 1.0f, w, ckk, scratch, ohw, 1.0f, yn, ohw);
    }
}

void model__conv2d_backward(const model__conv_shape_t *s, const float *x,
                            const float *w, const float *dy, float *dx,
                            float *dw, float *db, int batch, float *scratch,
                            int accumulate)
{
    int ohw = s->out_h * s->out_w, ckk = s->in_c * s->k * s->k;
    size_t in_count = (size_t)s->in_c * s->in_h * s->in_w;
    size_t out_count = (size_t)s->out_c * ohw;
    float *col = scratch, *dcol = scratch + (size_t)ckk * ohw;
    if (dw && !accumulate) {
        memset(dw, 0, (size_t)s->out_c * ckk * sizeof(float));
        memset(db, 0, (size_t)s->out_c * sizeof(float));
    }
    for (int n = 0; n < batch; n++) {
        const float *dyn = dy + n * out_count;
        if (dw) {
            im2col(s, x + n * in_count, col);
            /* dw (out_c, ckk) += dy_n (out_c, ohw) col^T (ohw, ckk) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->out_c, ckk,
                        ohw, 1.0f, dyn, ohw, col, ohw, 1.0f, dw, ckk);
            for (int o = 0; o < s->out_c; o++)
                for (int i = 0; i < ohw; i++)
                    db[o] += dyn[(size_t)o * ohw + i];
        }
        if (!dx) continue;
        /* dcol (ckk, ohw) = w^T (ckk, out_c) dy_n (out_c, ohw) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, ohw, s->out_c,
                    1.0f, w, ckk, dyn, ohw, 0.0f, dcol, ohw);
        col2im(s, dcol, dx + n * in_count);
    }
}

/* ---- relu ---- */

void model__relu_forward(const float *x, float *y, size_t count)
{
    for (size_t i = 0; i < count; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void model__relu_backward(const float *y, const float *dy, float *dx,
                          size_t count)
{
    for (size_t i = 0; i < count; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---- max-pool ---- */

void model__maxpool_forward(const model__conv_shape_t *s, const float *x,
                            float *y, int32_t *argmax, int batch)
{
    size_t plane = (size_t)s->in_h * s->in_w;
    size_t oplane = (size_t)s->out_h * s->out_w;
    for (size_t nc = 0; nc < (size_t)batch * s->in_c; nc++) {
        const float *xp = x + nc * plane;
        for (int oy = 0; oy < s->out_h; oy++)
            for (int ox = 0; ox < s->out_w; ox++) {
                float best = -FLT_MAX;
                int32_t best_idx = -1;
                for (int ki = 0; ki < s->k; ki++)
                    for (int kj = 0; kj < s->k; kj++) {
                        int32_t idx = (oy * s->stride + ki) * s->in_w +
                                      ox * s->stride + kj;
                        if (best_idx < 0 || xp[idx] > best) {
                            best = xp[idx];
                            best_idx = idx;
                        }
                    }
                y[nc * oplane + oy * s->out_w + ox] = best;
                argmax[nc * oplane + oy * s->out_w + ox] = best_idx;
            }
    }
}

void model__maxpool_backward(const model__conv_shape_t *s, const float *dy,
                             const int32_t *argmax, float *dx, int batch)
{
    size_t plane = (size_t)s->in_h * s->in_w;
    size_t oplane = (size_t)s->out_h * s->out_w;
    memset(dx, 0, (size_t)batch * s->in_c * plane * sizeof(float));
    for (size_t nc = 0; nc < (size_t)batch * s->in_c; nc++)
        for (size_t i = 0; i < oplane; i++)
            dx[nc * plane + argmax[nc * oplane + i]] += dy[nc * oplane + i];
}

/* ---- dropout ---- */

void model__dropout_forward(const float *x, float *y, float *mask, size_t count,
                            float p, int train, uint64_t *rng)
{
    float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    for (size_t i = 0; i < count; i++) {
        mask[i] = !train                        ? 1.0f
                  : model__rng_uniform(rng) < p ? 0.0f
                                                : keep_scale;
        y[i] = x[i] * mask[i];
    }
}

void model__dropout_backward(const float *dy, const float *mask, float *dx,
                             size_t count)
{
    for (size_t i = 0; i < count; i++)
        dx[i] = dy[i] * mask[i];
}

/* ---- softmax cross-entropy ---- */

int model__softmax_xent(const float *logits, const int *labels, float *dlogits,
                        int batch, int classes, float *loss)
{
    double total = 0;
    for (int n = 0; n < batch; n++)
        if (labels[n] < 0 || labels[n] >= classes) return MODEL_ERR_ARG;
    for (int n = 0; n < batch; n++) {
        const float *z = logits + (size_t)n * classes;
        float *dz = dlogits + (size_t)n * classes;
        float zmax = z[0];
        for (int c = 1; c < classes; c++)
            zmax = z[c] > zmax ? z[c] : zmax;
        double sum = 0;
        for (int c = 0; c < classes; c++)
            sum += exp((double)z[c] - zmax);
        double log_sum = log(sum);
        total += log_sum - ((double)z[labels[n]] - zmax);
        for (int c = 0; c < classes; c++) {
            double prob = exp((double)z[c] - zmax - log_sum);
            dz[c] = (float)((prob - (c == labels[n])) / batch);
        }
    }
    *loss = (float)(total / batch);
    return MODEL_OK;
}
