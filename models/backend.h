/* models/backend.h: what a model's layers need from the machine they run
 * on, as one table per backend. models/model.c keeps one graph and one
 * memory plan and calls the table; models/backend_cpu.c is the host's
 * (CBLAS, the kernels of models/layers.c), models/backend_cuda.c the
 * GPU's (cuBLAS and the kernels of models/kernels_cuda.cu, whose element
 * arithmetic is models/elem.h, shared with the host).
 *
 * The entries are per layer, not per GEMM: each backend lays out the
 * GEMMs of a convolution its own way (the host one image at a time, for
 * its caches; a GPU a whole batch per call). Shapes and layouts are
 * models/model_internal.h's; every pointer is the backend's memory (host
 * memory for "cpu", device memory for "cuda"), except where it says host.
 *
 * Errors: the layer entries return nothing, as kernels launched on a
 * stream do; a backend keeps its first failure and finish() returns it.
 */
#ifndef HVD_MODEL_BACKEND_H
#define HVD_MODEL_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "models/model_internal.h"

/* A copy that overlaps the work (model_batch_t's): the GPU's events, or
 * the emulated device's copy not yet made. Zeroed before its first use. */
typedef struct model__copy {
    void *ready; /* the GPU's: recorded after the work the copy follows */
    void *done;  /* the GPU's: recorded after the copy */
    void *dst;   /* the emulated device's: the copy it still owes */
    const void *src;
    size_t bytes;
    void *held; /* the emulated device's: a fetch's bytes until the wait */
} model__copy_t;

typedef struct model__backend {
    const char *name; /* "cpu" or "cuda" */

    /* ---- memory ---- */
    /* bytes of zeroed memory; MODEL_OK, MODEL_ERR_NOMEM or MODEL_ERR_CUDA. */
    int (*alloc)(size_t bytes, void **p);
    void (*release)(void *p); /* NULL is a no-op */
    /* Between the backend's memory and the host's, after (upload: before)
     * everything queued so far. */
    int (*upload)(void *dst, const void *host_src, size_t bytes);
    int (*download)(void *host_dst, const void *src, size_t bytes);
    /* Waits until what was queued is done; its first failure, if any. */
    int (*finish)(void);
    /* Where work is queued, as the platform's handle (a cudaStream_t);
     * NULL where work is done when its call returns. */
    void *(*stream)(void);
    void (*fill)(float *x, float value, size_t count);

    /* ---- copies that overlap the work (input batches) ---- */
    /* bytes of zeroed host memory that copies read fastest (pinned on a
     * GPU); MODEL_OK or MODEL_ERR_NOMEM. */
    int (*host_alloc)(size_t bytes, void **p);
    void (*host_release)(void *p); /* NULL is a no-op */
    /* Queues a copy of bytes from host_src (host_alloc's) to dst (the
     * backend's), on a stream of its own after the work queued so far
     * (dst's last readers), and returns without waiting for it. dst must
     * not be read, nor host_src written, until the waits below. */
    int (*copy_start)(model__copy_t *c, void *dst, const void *host_src,
                      size_t bytes);
    /* Queues a copy of bytes from src (the backend's) to host_dst
     * (host_alloc's) after the work queued so far, on the backend's
     * stream, and returns without waiting for it: host_dst must not be
     * read until copy_host_wait. */
    int (*fetch_start)(model__copy_t *c, void *host_dst, const void *src,
                       size_t bytes);
    /* Waits until c's copy has read host_src (a fetch: written host_dst);
     * its first failure, if any. */
    int (*copy_host_wait)(model__copy_t *c);
    /* The work queued from now on runs after c's copy. */
    void (*copy_order)(model__copy_t *c);
    /* Waits for c's copy and frees what it holds; c is zeroed. */
    void (*copy_release)(model__copy_t *c);

    /* ---- layers (models/model_internal.h says what each computes) ---- */
    void (*linear_forward)(const float *x, const float *w, const float *b,
                           float *y, int batch, int in, int out);
    void (*linear_backward)(const float *x, const float *w, const float *dy,
                            float *dx, float *dw, float *db, int batch,
                            int in, int out, int accumulate);
    /* Scratch floats a convolution of up to batch_max images needs. */
    size_t (*conv2d_scratch_count)(const model__conv_shape_t *s,
                                   int batch_max);
    void (*conv2d_forward)(const model__conv_shape_t *s, const float *x,
                           const float *w, const float *b, float *y,
                           int batch, float *scratch);
    void (*conv2d_backward)(const model__conv_shape_t *s, const float *x,
                            const float *w, const float *dy, float *dx,
                            float *dw, float *db, int batch, float *scratch,
                            int accumulate);
    void (*relu_forward)(const float *x, float *y, size_t count);
    void (*relu_backward)(const float *y, const float *dy, float *dx,
                          size_t count);
    void (*maxpool_forward)(const model__conv_shape_t *s, const float *x,
                            float *y, int32_t *argmax, int batch);
    void (*maxpool_backward)(const model__conv_shape_t *s, const float *dy,
                             const int32_t *argmax, float *dx, int batch);
    /* Element i's mask is models/elem.h's model__dropout_mask(rng, i, p,
     * train); the caller advances its generator. */
    void (*dropout_forward)(const float *x, float *y, float *mask,
                            size_t count, float p, int train, uint64_t rng);
    void (*dropout_backward)(const float *dy, const float *mask, float *dx,
                             size_t count);
    /* Per sample n: losses[n] and dlogits, as models/elem.h's
     * model__xent_row. Labels are in range (the caller checked them). */
    void (*softmax_xent)(const float *logits, const int32_t *labels,
                         float *dlogits, double *losses, int batch,
                         int classes);

    /* ---- SGD (model_sgd_t): out[i] = models/elem.h's model__sgd_elem of
     * p[i], g[i] and velocity[i] (NULL when mu is 0); out may be p. ---- */
    void (*sgd_step)(const float *p, const float *g, float *out,
                     float *velocity, size_t count, float lr, float mu,
                     float wd, int nesterov);
} model__backend_t;

/* What HVD_CONV and HVD_CONV_TF32 ask of the convolutions
 * (models/README.md). */
typedef enum {
    MODEL__CONV_ASK_DEFAULT, /* unset or empty */
    MODEL__CONV_ASK_CUDNN,
    MODEL__CONV_ASK_IM2COL
} model__conv_ask_path_t;
typedef struct {
    model__conv_ask_path_t path;
    int tf32; /* cuDNN may use TF32 tensor cores */
} model__conv_ask_t;
/* The variables' values now: 0, or -1 for a value no backend knows, with
 * *why (may be NULL) naming it ("HVD_CONV=xyz: expected cudnn or
 * im2col"; the text lasts until the next call). Every device reads them,
 * the CPU too, which has no cuDNN: a bad value is the user's to fix
 * wherever the model runs. */
int model__conv_ask(model__conv_ask_t *ask, const char **why);

/* The host's table; always there. */
const model__backend_t *model__backend_cpu(void);
/* The GPU's, on the calling thread's current device; NULL in a build
 * without CUDA or where no GPU can be used (*why then says which, when
 * why is not NULL). Under HVD_DEVICE_EMULATE (set, not empty or "0"), as
 * ring's device, the emulated one: the host's kernels on memory of its
 * own, reached only through upload and download, so that a program's
 * device path runs, and is checked against the host's, without a GPU. */
const model__backend_t *model__backend_cuda(const char **why);
/* The emulated device's table (models/backend_emu.c). */
const model__backend_t *model__backend_emu(void);

#endif /* HVD_MODEL_BACKEND_H */
