/* models/kernels_cuda.cu: the GPU kernels of models/backend_cuda.c (the
 * GEMMs are cuBLAS's, there), and their launchers (models/kernels_cuda.h).
 *
 * Almost every kernel is one thread per output element, written as a small
 * functor run by one grid-stride kernel (for_each), so the loop, the
 * launch geometry and the launch check exist once. Indices are 64-bit: a
 * batch of activations or of im2col columns can pass 2^31 elements. The
 * per-element arithmetic (ReLU, dropout's mask, the softmax row) is
 * models/elem.h's, shared with the host.
 *
 * Where the host adds several terms into one element (col2im, max-pool's
 * backward), the kernel gathers them in the host loop's order instead of
 * scattering with atomics: no atomics, and the result is the host's bit
 * for bit for the same inputs. Only the per-channel sums (bias gradients)
 * add in another order than the host's.
 */
#include <cuda_runtime.h>
#include "models/elem.h"
#include "models/kernels_cuda.h"

namespace {

enum { THREADS = 256, MAX_BLOCKS = 65535 };

template <typename Op> __global__ void for_each(size_t count, Op op)
{
    size_t step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += step)
        op(i);
}

/* Enough blocks for one element a thread, up to MAX_BLOCKS (the loop
 * covers the rest). */
template <typename Op>
cudaError_t launch(size_t count, const Op &op, cudaStream_t stream)
{
    if (count == 0) return cudaSuccess; /* a 0-block grid is an error */
    size_t blocks = (count + THREADS - 1) / THREADS;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    for_each<<<(unsigned)blocks, THREADS, 0, stream>>>(count, op);
    return cudaGetLastError();
}

/* ---- element-wise ---- */

struct fill_op {
    float *x;
    float value;
    __device__ void operator()(size_t i) const { x[i] = value; }
};

struct bias_op {
    float *y;
    const float *b;
    size_t inner;
    int channels;
    __device__ void operator()(size_t i) const
    {
        y[i] = b[(i / inner) % (size_t)channels];
    }
};

struct relu_forward_op {
    const float *x;
    float *y;
    __device__ void operator()(size_t i) const { y[i] = model__relu(x[i]); }
};

struct relu_backward_op {
    const float *y, *dy;
    float *dx;
    __device__ void operator()(size_t i) const
    {
        dx[i] = model__relu_grad(y[i], dy[i]);
    }
};

struct dropout_forward_op {
    const float *x;
    float *y, *mask;
    float p;
    int train;
    uint64_t rng;
    __device__ void operator()(size_t i) const
    {
        mask[i] = model__dropout_mask(rng, i, p, train);
        y[i] = x[i] * mask[i];
    }
};

struct dropout_backward_op {
    const float *dy, *mask;
    float *dx;
    __device__ void operator()(size_t i) const { dx[i] = dy[i] * mask[i]; }
};

struct sgd_op {
    const float *p, *g;
    float *out, *velocity;
    float lr, mu, wd;
    int nesterov;
    __device__ void operator()(size_t i) const
    {
        out[i] = model__sgd_elem(p[i], g[i], velocity ? &velocity[i] : NULL,
                                 lr, mu, wd, nesterov);
    }
};

/* ---- convolution ---- */

/* Element i of col (batch, c, ki, kj, oy, ox). */
struct im2col_op {
    model__conv_shape_t s;
    const float *x;
    float *col;
    __device__ void operator()(size_t i) const
    {
        size_t t = i;
        int ox = (int)(t % s.out_w); t /= s.out_w;
        int oy = (int)(t % s.out_h); t /= s.out_h;
        int kj = (int)(t % s.k); t /= s.k;
        int ki = (int)(t % s.k); t /= s.k; /* t: n * in_c + c */
        int y = oy * s.stride - s.pad + ki, xx = ox * s.stride - s.pad + kj;
        col[i] = y >= 0 && y < s.in_h && xx >= 0 && xx < s.in_w
                     ? x[(t * s.in_h + y) * s.in_w + xx]
                     : 0.0f;
    }
};

/* Element i of dx (batch, c, y, x): the col entries that im2col copied it
 * to, by ki then kj, the order in which the host's col2im adds them. */
struct col2im_op {
    model__conv_shape_t s;
    const float *col;
    float *dx;
    __device__ void operator()(size_t i) const
    {
        size_t t = i;
        int x = (int)(t % s.in_w); t /= s.in_w;
        int y = (int)(t % s.in_h); t /= s.in_h; /* t: n * in_c + c */
        size_t ohw = (size_t)s.out_h * s.out_w;
        const float *rows = col + t * s.k * s.k * ohw; /* row (c, 0, 0) */
        float sum = 0.0f;
        for (int ki = 0; ki < s.k; ki++) {
            int yy = y + s.pad - ki; /* oy * stride */
            if (yy < 0) break;
            if (yy % s.stride || yy / s.stride >= s.out_h) continue;
            for (int kj = 0; kj < s.k; kj++) {
                int xx = x + s.pad - kj;
                if (xx < 0) break;
                if (xx % s.stride || xx / s.stride >= s.out_w) continue;
                sum += rows[(size_t)(ki * s.k + kj) * ohw +
                            (size_t)(yy / s.stride) * s.out_w +
                            xx / s.stride];
            }
        }
        dx[i] = sum;
    }
};

/* One block per channel: its threads add strided terms, then a tree in
 * shared memory. */
__global__ void channel_sum(const float *dy, float *db, int batch,
                            int channels, size_t inner, int accumulate)
{
    __shared__ float part[THREADS];
    int o = blockIdx.x;
    size_t terms = (size_t)batch * inner;
    float sum = 0.0f;
    for (size_t j = threadIdx.x; j < terms; j += blockDim.x)
        sum += dy[((j / inner) * channels + o) * inner + j % inner];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[o] = (accumulate ? db[o] : 0.0f) + part[0];
}

/* ---- max-pool (no padding) ---- */

/* Output i (batch, c, oy, ox): the window searched by rows, a later
 * element winning when greater or NaN (model__pool_beats), as on the
 * host. */
struct maxpool_forward_op {
    model__conv_shape_t s;
    const float *x;
    float *y;
    int32_t *argmax;
    __device__ void operator()(size_t i) const
    {
        size_t oplane = (size_t)s.out_h * s.out_w;
        const float *xp = x + i / oplane * s.in_h * s.in_w;
        int oy = (int)(i % oplane / s.out_w), ox = (int)(i % s.out_w);
        int32_t corner = oy * s.stride * s.in_w + ox * s.stride;
        int32_t best_idx = corner;
        float best = xp[corner];
        for (int ki = 0; ki < s.k; ki++)
            for (int kj = 0; kj < s.k; kj++) {
                int32_t idx = corner + ki * s.in_w + kj;
                if (model__pool_beats(xp[idx], best)) {
                    best = xp[idx];
                    best_idx = idx;
                }
            }
        y[i] = best;
        argmax[i] = best_idx;
    }
};

/* Input i (batch, c, y, x): the dy of each window over it whose argmax it
 * is, in output order (the host's scatter order); windows overlap when
 * stride < k. */
struct maxpool_backward_op {
    model__conv_shape_t s;
    const float *dy;
    const int32_t *argmax;
    float *dx;
    __device__ void operator()(size_t i) const
    {
        size_t plane = (size_t)s.in_h * s.in_w;
        size_t oplane = (size_t)s.out_h * s.out_w;
        size_t nc = i / plane;
        int32_t p = (int32_t)(i % plane);
        int y = p / s.in_w, x = p % s.in_w;
        /* Windows oy with oy * stride <= y < oy * stride + k. */
        int oy_lo = y < s.k ? 0 : (y - s.k) / s.stride + 1;
        int ox_lo = x < s.k ? 0 : (x - s.k) / s.stride + 1;
        int oy_hi = min(y / s.stride, s.out_h - 1);
        int ox_hi = min(x / s.stride, s.out_w - 1);
        const float *dyp = dy + nc * oplane;
        const int32_t *ap = argmax + nc * oplane;
        float sum = 0.0f;
        for (int oy = oy_lo; oy <= oy_hi; oy++)
            for (int ox = ox_lo; ox <= ox_hi; ox++)
                if (ap[oy * s.out_w + ox] == p) sum += dyp[oy * s.out_w + ox];
        dx[i] = sum;
    }
};

/* ---- loss: one thread per sample ---- */

struct softmax_xent_op {
    const float *logits;
    const int32_t *labels;
    float *dlogits;
    double *losses;
    int batch, classes;
    __device__ void operator()(size_t n) const
    {
        size_t row = n * classes;
        losses[n] = model__xent_row(logits + row, labels[n], dlogits + row,
                                    classes, batch);
    }
};

} // namespace

/* ---- launchers ---- */

extern "C" {

cudaError_t model__cuda_fill(float *x, float value, size_t count,
                             cudaStream_t stream)
{
    return launch(count, fill_op{x, value}, stream);
}

cudaError_t model__cuda_bias(float *y, const float *b, size_t count,
                             size_t inner, int channels, cudaStream_t stream)
{
    return launch(count, bias_op{y, b, inner, channels}, stream);
}

cudaError_t model__cuda_channel_sum(const float *dy, float *db, int batch,
                                    int channels, size_t inner,
                                    int accumulate, cudaStream_t stream)
{
    if (channels == 0) return cudaSuccess;
    channel_sum<<<channels, THREADS, 0, stream>>>(dy, db, batch, channels,
                                                  inner, accumulate);
    return cudaGetLastError();
}

cudaError_t model__cuda_im2col(const model__conv_shape_t *s, const float *x,
                               float *col, int batch, cudaStream_t stream)
{
    size_t count = (size_t)batch * s->in_c * s->k * s->k * s->out_h * s->out_w;
    return launch(count, im2col_op{*s, x, col}, stream);
}

cudaError_t model__cuda_col2im(const model__conv_shape_t *s, const float *col,
                               float *dx, int batch, cudaStream_t stream)
{
    size_t count = (size_t)batch * s->in_c * s->in_h * s->in_w;
    return launch(count, col2im_op{*s, col, dx}, stream);
}

cudaError_t model__cuda_relu_forward(const float *x, float *y, size_t count,
                                     cudaStream_t stream)
{
    return launch(count, relu_forward_op{x, y}, stream);
}

cudaError_t model__cuda_relu_backward(const float *y, const float *dy,
                                      float *dx, size_t count,
                                      cudaStream_t stream)
{
    return launch(count, relu_backward_op{y, dy, dx}, stream);
}

cudaError_t model__cuda_maxpool_forward(const model__conv_shape_t *s,
                                        const float *x, float *y,
                                        int32_t *argmax, int batch,
                                        cudaStream_t stream)
{
    size_t count = (size_t)batch * s->in_c * s->out_h * s->out_w;
    return launch(count, maxpool_forward_op{*s, x, y, argmax}, stream);
}

cudaError_t model__cuda_maxpool_backward(const model__conv_shape_t *s,
                                         const float *dy,
                                         const int32_t *argmax, float *dx,
                                         int batch, cudaStream_t stream)
{
    size_t count = (size_t)batch * s->in_c * s->in_h * s->in_w;
    return launch(count, maxpool_backward_op{*s, dy, argmax, dx}, stream);
}

cudaError_t model__cuda_dropout_forward(const float *x, float *y, float *mask,
                                        size_t count, float p, int train,
                                        uint64_t rng, cudaStream_t stream)
{
    return launch(count, dropout_forward_op{x, y, mask, p, train, rng},
                  stream);
}

cudaError_t model__cuda_sgd_step(const float *p, const float *g, float *out,
                                 float *velocity, size_t count, float lr,
                                 float mu, float wd, int nesterov,
                                 cudaStream_t stream)
{
    return launch(count, sgd_op{p, g, out, velocity, lr, mu, wd, nesterov},
                  stream);
}

cudaError_t model__cuda_dropout_backward(const float *dy, const float *mask,
                                         float *dx, size_t count,
                                         cudaStream_t stream)
{
    return launch(count, dropout_backward_op{dy, mask, dx}, stream);
}

cudaError_t model__cuda_softmax_xent(const float *logits,
                                     const int32_t *labels, float *dlogits,
                                     double *losses, int batch, int classes,
                                     cudaStream_t stream)
{
    return launch((size_t)batch,
                  softmax_xent_op{logits, labels, dlogits, losses, batch,
                                  classes},
                  stream);
}

} // extern "C"
