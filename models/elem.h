/* models/elem.h: the per-element arithmetic of the layers, written once
 * for the host (models/backend_cpu.c, models/layers.c) and the GPU
 * (models/kernels_cuda.cu): under nvcc MODEL__HD makes each function
 * __host__ __device__, so what a CUDA kernel computes per element is what
 * the host tests check here.
 */
#ifndef HVD_MODEL_ELEM_H
#define HVD_MODEL_ELEM_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define MODEL__HD __host__ __device__ static inline
#else
#define MODEL__HD static inline
#endif

/* ---- dropout's generator: splitmix64 (Steele et al.) by counter ----
 * The i-th draw after state s is mix(s + (i + 1) * gamma), so element i
 * of a forward finds its own draw without the i before it: a GPU thread
 * per element gives the host's sequence exactly, and a CPU and a GPU run
 * from one seed drop the same elements. */
enum { MODEL__UNIFORM_BITS = 24 };
#define MODEL__RNG_GAMMA 0x9e3779b97f4a7c15ull

MODEL__HD uint64_t model__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The draw i (from 0) after state, uniform in [0, 1) with 24 bits. */
MODEL__HD float model__uniform_at(uint64_t state, uint64_t i)
{
    uint64_t z = model__mix64(state + (i + 1) * MODEL__RNG_GAMMA);
    return (float)(z >> (64 - MODEL__UNIFORM_BITS)) *
           (1.0f / (float)(1u << MODEL__UNIFORM_BITS));
}

/* Inverted dropout's mask for one element: 0 with probability p, else
 * 1 / (1 - p); 1 outside training. */
MODEL__HD float model__dropout_mask(uint64_t state, uint64_t i, float p,
                                    int train)
{
    if (!train) return 1.0f;
    float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    return model__uniform_at(state, i) < p ? 0.0f : keep_scale;
}

/* ---- element-wise layers ---- */

/* NaN passes ReLU and wins a max-pool's window, as in PyTorch: a model
 * gone to NaN shows a NaN loss, not a finite one stuck at chance. */
MODEL__HD float model__relu(float x) { return !(x <= 0.0f) ? x : 0.0f; }

/* From the forward's output y: the gradient passes where y > 0 or NaN. */
MODEL__HD float model__relu_grad(float y, float dy)
{
    return !(y <= 0.0f) ? dy : 0.0f;
}

/* Whether a max-pool's candidate takes the window from the best so far:
 * larger, or NaN (PyTorch's rule: the window's last NaN wins). */
MODEL__HD int model__pool_beats(float cand, float best)
{
    return (cand > best) | (cand != cand);
}

/* ---- softmax cross-entropy of one sample ----
 * Its loss, in double, and dz = (softmax(z) - onehot(label)) / batch. */
MODEL__HD double model__xent_row(const float *z, int label, float *dz,
                                 int classes, int batch)
{
    float zmax = z[0];
    for (int c = 1; c < classes; c++) zmax = z[c] > zmax ? z[c] : zmax;
    double sum = 0;
    for (int c = 0; c < classes; c++) sum += exp((double)z[c] - zmax);
    double log_sum = log(sum);
    for (int c = 0; c < classes; c++) {
        double prob = exp((double)z[c] - zmax - log_sum);
        dz[c] = (float)((prob - (c == label)) / batch);
    }
    return log_sum - ((double)z[label] - zmax);
}

/* ---- SGD (models/model.h's model_sgd_t) on one element ----
 * p - lr * d, d = g + wd * p, through the velocity v when mu > 0. */
MODEL__HD float model__sgd_elem(float p, float g, float *v, float lr,
                                float mu, float wd, int nesterov)
{
    float d = g + wd * p;
    if (mu > 0) {
        *v = mu * *v + d;
        d = nesterov ? d + mu * *v : *v;
    }
    return p - lr * d;
}

#endif /* HVD_MODEL_ELEM_H */
