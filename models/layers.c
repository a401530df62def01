/* models/layers.c: host (CBLAS) forward and backward of each layer kind,
 * on plain arrays; models/model.c strings them together. The matrix work
 * goes through cblas_sgemm: linear directly, conv2d as im2col + GEMM one
 * image at a time (measured faster here than one GEMM over a batched
 * im2col, whose buffer outgrows the caches).
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include "models/elem.h"
#include "models/model.h"
#include "models/model_internal.h"

/* ---- generator (models/elem.h's, one draw at a time) ---- */

uint64_t model__rng_next(uint64_t *state)
{
    return model__mix64(*state += MODEL__RNG_GAMMA);
}

float model__rng_uniform(uint64_t *state)
{
    float u = model__uniform_at(*state, 0);
    *state += MODEL__RNG_GAMMA;
    return u;
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
 * y_img (out_c, out_h*out_w) = w (out_c, in_c*k*k) col.
 *
 * im2col reads from a zero-bordered copy of the image (in_c, in_h + 2 pad,
 * in_w + 2 pad), so every row segment is a plain copy with no bounds tests;
 * col2im adds into such a copy and then takes its interior. Per-element
 * bounds tests made these two over a third of a cnn step. */

static int padded_h(const model__conv_shape_t *s) { return s->in_h + 2 * s->pad; }
static int padded_w(const model__conv_shape_t *s) { return s->in_w + 2 * s->pad; }

/* Where the parts of a convolution's scratch start, in floats: col and
 * dcol (ckk, out_h*out_w) each, the padded image, the transposed weight
 * gradient (ckk, out_c); end is the whole. */
typedef struct {
    size_t col, dcol, padded, dw_t, end;
} conv_layout_t;

static conv_layout_t conv_layout(const model__conv_shape_t *s)
{
    size_t ckk = (size_t)s->in_c * s->k * s->k;
    conv_layout_t l = {.col = 0, .dcol = ckk * s->out_h * s->out_w};
    l.padded = 2 * l.dcol;
    l.dw_t = l.padded + (size_t)s->in_c * padded_h(s) * padded_w(s);
    l.end = l.dw_t + ckk * s->out_c;
    return l;
}

size_t model__conv2d_scratch_count(const model__conv_shape_t *s)
{
    return conv_layout(s).end;
}

/* Row segments are short (14 to 28 floats in the cnn): fixed-size chunks
 * become single vector moves, where a memcpy call costs more than the
 * copy itself. The last chunk ends at n, overlapping the one before. */
static inline void copy_floats(float *restrict dst, const float *restrict src,
                               int n)
{
    enum { CHUNK = 8 };
    if (n < CHUNK) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (int i = 0; i + CHUNK <= n; i += CHUNK)
        memcpy(dst + i, src + i, CHUNK * sizeof(float));
    memcpy(dst + n - CHUNK, src + n - CHUNK, CHUNK * sizeof(float));
}

/* dst += src, leaving src zero for the next GEMM to add into. */
static inline void move_add_floats(float *restrict dst, float *restrict src,
                                   int n)
{
    for (int i = 0; i < n; i++) {
        dst[i] += src[i];
        src[i] = 0.0f;
    }
}

/* Copies between an image (in_c, in_h, in_w) and the interior of its
 * padded copy; to_padded chooses the direction. */
static void pad_copy(const model__conv_shape_t *s, float *img, float *padded,
                     int to_padded)
{
    int ph = padded_h(s), pw = padded_w(s);
    for (int c = 0; c < s->in_c; c++)
        for (int y = 0; y < s->in_h; y++) {
            float *row = img + ((size_t)c * s->in_h + y) * s->in_w;
            float *prow =
                padded + ((size_t)c * ph + y + s->pad) * pw + s->pad;
            if (to_padded)
                copy_floats(prow, row, s->in_w);
            else
                copy_floats(row, prow, s->in_w);
        }
}

/* im2col (to_col: col = im2col(padded)) and its adjoint (padded +=
 * col2im(col), which leaves col zero) in one walk over the row segments. */
static void im2col_walk(const model__conv_shape_t *s, float *padded,
                        float *col, int to_col)
{
    int ph = padded_h(s), pw = padded_w(s);
    float *seg = col;
    for (int c = 0; c < s->in_c; c++)
        for (int ki = 0; ki < s->k; ki++)
            for (int kj = 0; kj < s->k; kj++)
                for (int oy = 0; oy < s->out_h; oy++, seg += s->out_w) {
                    float *in = padded +
                                ((size_t)c * ph + oy * s->stride + ki) * pw + kj;
                    if (s->stride == 1 && to_col)
                        copy_floats(seg, in, s->out_w);
                    else if (s->stride == 1)
                        move_add_floats(in, seg, s->out_w);
                    else if (to_col)
                        for (int ox = 0; ox < s->out_w; ox++)
                            seg[ox] = in[ox * s->stride];
                    else
                        for (int ox = 0; ox < s->out_w; ox++) {
                            in[ox * s->stride] += seg[ox];
                            seg[ox] = 0.0f;
                        }
                }
}

static void zero_padded(const model__conv_shape_t *s, float *padded)
{
    memset(padded, 0,
           (size_t)s->in_c * padded_h(s) * padded_w(s) * sizeof(float));
}

/* col (in_c*k*k, out_h*out_w) from x (in_c, in_h, in_w). */
static void im2col(const model__conv_shape_t *s, const float *x, float *col,
                   float *padded)
{
    zero_padded(s, padded); /* small beside col */
    pad_copy(s, (float *)x, padded, 1); /* x is only read */
    im2col_walk(s, padded, col, 1);
}

/* dx (in_c, in_h, in_w) = the adjoint of im2col applied to dcol, which
 * is left zero: the next image's GEMM adds into it, cheaper than having
 * OpenBLAS clear it first (9.4 against 10.4 ms per batch of 64). */
static void col2im(const model__conv_shape_t *s, float *dcol, float *dx,
                   float *padded)
{
    zero_padded(s, padded);
    im2col_walk(s, padded, dcol, 0);
    pad_copy(s, dx, padded, 0);
}

/* sums[r] += the sum of row r of a (rows, cols). Eight partial sums let the
 * compiler vectorise what would otherwise be a serial float reduction. */
static void add_row_sums(const float *a, int rows, int cols, float *sums)
{
    for (int r = 0; r < rows; r++) {
        const float *row = a + (size_t)r * cols;
        float part[8] = {0};
        int i = 0;
        for (; i + 8 <= cols; i += 8)
            for (int j = 0; j < 8; j++) part[j] += row[i + j];
        float total = 0.0f;
        for (; i < cols; i++) total += row[i];
        for (int j = 0; j < 8; j++) total += part[j];
        sums[r] += total;
    }
}

void model__conv2d_forward(const model__conv_shape_t *s, const float *x,
                           const float *w, const float *b, float *y, int batch,
                           float *scratch)
{
    int ohw = s->out_h * s->out_w, ckk = s->in_c * s->k * s->k;
    size_t in_count = (size_t)s->in_c * s->in_h * s->in_w;
    size_t out_count = (size_t)s->out_c * ohw;
    conv_layout_t l = conv_layout(s);
    float *col = scratch + l.col, *padded = scratch + l.padded;
    for (int n = 0; n < batch; n++) {
        float *yn = y + n * out_count;
        im2col(s, x + n * in_count, col, padded);
        for (int o = 0; o < s->out_c; o++)
            for (int i = 0; i < ohw; i++)
                yn[(size_t)o * ohw + i] = b[o];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->out_c, ohw,
                    ckk, 1.0f, w, ckk, col, ohw, 1.0f, yn, ohw);
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
    conv_layout_t l = conv_layout(s);
    float *col = scratch + l.col, *dcol = scratch + l.dcol;
    float *padded = scratch + l.padded;
    /* The weight gradient is summed transposed, (ckk, out_c): OpenBLAS
     * runs that GEMM 14% faster here than the (out_c, ckk) one, and the
     * transpose back is one small pass per batch. */
    float *dw_t = scratch + l.dw_t;
    if (dx) memset(dcol, 0, (size_t)ckk * ohw * sizeof(float));
    if (dw) {
        memset(dw_t, 0, (size_t)ckk * s->out_c * sizeof(float));
        if (!accumulate) memset(db, 0, (size_t)s->out_c * sizeof(float));
    }
    for (int n = 0; n < batch; n++) {
        const float *dyn = dy + n * out_count;
        if (dw) {
            im2col(s, x + n * in_count, col, padded);
            /* dw_t (ckk, out_c) += col (ckk, ohw) dy_n^T (ohw, out_c) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ckk, s->out_c,
                        ohw, 1.0f, col, ohw, dyn, ohw, 1.0f, dw_t, s->out_c);
            add_row_sums(dyn, s->out_c, ohw, db);
        }
        if (!dx) continue;
        /* dcol (ckk, ohw) = w^T (ckk, out_c) dy_n (out_c, ohw), into the
         * zeros col2im leaves */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, ohw, s->out_c,
                    1.0f, w, ckk, dyn, ohw, 1.0f, dcol, ohw);
        col2im(s, dcol, dx + n * in_count, padded);
    }
    for (int o = 0; dw && o < s->out_c; o++)
        for (int k = 0; k < ckk; k++)
            dw[(size_t)o * ckk + k] =
                (accumulate ? dw[(size_t)o * ckk + k] : 0.0f) +
                dw_t[(size_t)k * s->out_c + o];
}

/* ---- relu ---- */

void model__relu_forward(const float *x, float *y, size_t count)
{
    for (size_t i = 0; i < count; i++) y[i] = model__relu(x[i]);
}

void model__relu_backward(const float *y, const float *dy, float *dx,
                          size_t count)
{
    for (size_t i = 0; i < count; i++) dx[i] = model__relu_grad(y[i], dy[i]);
}

/* ---- max-pool ---- */

/* Four outputs of a 2x2, stride 2 window at once, from two input rows
 * (top, below) of 8 floats each: vector extensions, so every target gets
 * what it has (SSE2 on any x86-64) and the search order, ties and NaN stay
 * those of the scalar loop: a later candidate wins when greater or NaN. */
typedef float model__v4f __attribute__((vector_size(16)));
typedef int32_t model__v4i __attribute__((vector_size(16)));

static inline void pool2x2_four(const float *top, const float *below,
                                int32_t corner, int32_t in_w, float *y,
                                int32_t *argmax)
{
    model__v4f a, b, c, d;
    memcpy(&a, top, sizeof a);
    memcpy(&b, top + 4, sizeof b);
    memcpy(&c, below, sizeof c);
    memcpy(&d, below + 4, sizeof d);
    model__v4f cand[4] = {__builtin_shufflevector(a, b, 0, 2, 4, 6),
                          __builtin_shufflevector(a, b, 1, 3, 5, 7),
                          __builtin_shufflevector(c, d, 0, 2, 4, 6),
                          __builtin_shufflevector(c, d, 1, 3, 5, 7)};
    const int32_t step[4] = {0, 1, in_w, in_w + 1};
    model__v4i idx = {corner, corner + 2, corner + 4, corner + 6};
    model__v4f best = cand[0];
    model__v4i best_idx = idx;
    for (int t = 1; t < 4; t++) {
        /* model__pool_beats, four at a time */
        model__v4i win = (cand[t] > best) | (cand[t] != cand[t]);
        best = (model__v4f)(((model__v4i)cand[t] & win) |
                            ((model__v4i)best & ~win));
        best_idx = ((idx + step[t]) & win) | (best_idx & ~win);
    }
    memcpy(y, &best, sizeof best);
    memcpy(argmax, &best_idx, sizeof best_idx);
}


void model__maxpool_forward(const model__conv_shape_t *s, const float *x,
                            float *y, int32_t *argmax, int batch)
{
    size_t plane = (size_t)s->in_h * s->in_w;
    size_t oplane = (size_t)s->out_h * s->out_w;
    int quad = s->k == 2 && s->stride == 2;
    for (size_t nc = 0; nc < (size_t)batch * s->in_c; nc++) {
        const float *xp = x + nc * plane;
        float *yp = y + nc * oplane;
        int32_t *ap = argmax + nc * oplane;
        for (int oy = 0; oy < s->out_h; oy++) {
            int ox = 0;
            /* Four at a time while the 8 floats read stay in the row; the
             * last 1-3 as the last four, again for those done already (the
             * scalar loop, NaN-aware, made the host's cnn 7% slower where
             * they were its 2 of 14 and 3 of 7). */
            for (int four = quad && s->out_w >= 4; four && ox < s->out_w;
                 ox += 4) {
                if (2 * ox + 8 > s->in_w) ox = s->out_w - 4;
                int32_t corner = 2 * oy * s->in_w + 2 * ox;
                pool2x2_four(xp + corner, xp + corner + s->in_w, corner,
                             s->in_w, yp + oy * s->out_w + ox,
                             ap + oy * s->out_w + ox);
            }
            for (; ox < s->out_w; ox++) {
                /* The window's first element starts the search, so the
                 * index is valid even when every element is -inf or NaN. */
                int32_t corner = oy * s->stride * s->in_w + ox * s->stride;
                int32_t best_idx = corner;
                float best = xp[corner];
                if (s->k == 2) { /* the usual window, unrolled */
                    int32_t idx[3] = {corner + 1, corner + s->in_w,
                                      corner + s->in_w + 1};
                    for (int t = 0; t < 3; t++)
                        if (model__pool_beats(xp[idx[t]], best)) {
                            best = xp[idx[t]];
                            best_idx = idx[t];
                        }
                } else {
                    for (int ki = 0; ki < s->k; ki++)
                        for (int kj = 0; kj < s->k; kj++) {
                            int32_t idx = corner + ki * s->in_w + kj;
                            if (model__pool_beats(xp[idx], best)) {
                                best = xp[idx];
                                best_idx = idx;
                            }
                        }
                }
                yp[oy * s->out_w + ox] = best;
                ap[oy * s->out_w + ox] = best_idx;
            }
        }
    }
}

void model__maxpool_backward(const model__conv_shape_t *s, const float *dy,
                             const int32_t *argmax, float *dx, int batch)
{
    size_t plane = (size_t)s->in_h * s->in_w;
    size_t oplane = (size_t)s->out_h * s->out_w;
    /* Each plane is cleared just before it is scattered into, while it
     * is in cache, not the whole batch up front. */
    for (size_t nc = 0; nc < (size_t)batch * s->in_c; nc++) {
        float *dxp = dx + nc * plane;
        const float *dyp = dy + nc * oplane;
        const int32_t *ap = argmax + nc * oplane;
        memset(dxp, 0, plane * sizeof(float));
        for (size_t i = 0; i < oplane; i++) dxp[ap[i]] += dyp[i];
    }
}

/* ---- dropout ---- */

void model__dropout_forward(const float *x, float *y, float *mask, size_t count,
                            float p, int train, uint64_t rng)
{
    for (size_t i = 0; i < count; i++) {
        mask[i] = model__dropout_mask(rng, i, p, train);
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

void model__softmax_xent(const float *logits, const int32_t *labels,
                         float *dlogits, double *losses, int batch,
                         int classes)
{
    for (int n = 0; n < batch; n++)
        losses[n] = model__xent_row(logits + (size_t)n * classes, labels[n],
                                    dlogits + (size_t)n * classes, classes,
                                    batch);
}
