/* models/model.h: the public header of models/: float32 models (mlp, cnn)
 * with forward and backward on the host (CBLAS) or a GPU (a backend per
 * device, models/backend.h), SGD, and the learning-rate schedule. No MPI
 * here: hvd/ reaches these only through the parameter and gradient slabs
 * and the backward hook.
 *
 * Memory: all parameters live in one allocation (param_slab) and all
 * gradients in another (grad_slab) with the same layout, tensor i at
 * params[i].offset, so a range of tensors is one contiguous range of floats
 * that can be reduced or broadcast at once. Tensors lie in reverse order
 * (the last layer's bias at offset 0), the order backward finishes them.
 * The SGD momentum buffer is one allocation of the same length.
 *
 * A model lives on one device (model_init_device): on MODEL_DEVICE_CUDA
 * its slabs, activations and the input given to model_forward are device
 * memory, and the pointers the accessors return are device pointers.
 *
 * Left out here: data loading (examples/). Statuses use the same numbers
 * as ring/ and hvd/.
 */
#ifndef HVD_MODEL_H
#define HVD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_STATUS_MAP(X)                                                    \
    X(OK, 0, "success")                                                        \
    X(ERR_ARG, -1, "invalid argument")                                         \
    X(ERR_STATE, -3, "invalid state")                                          \
    X(ERR_CUDA, -5, "no usable GPU, or a CUDA call failed")                    \
    X(ERR_NOMEM, -6, "out of memory")

typedef enum {
#define MODEL_STATUS_ENUM(name, value, text) MODEL_##name = (value),
    MODEL_STATUS_MAP(MODEL_STATUS_ENUM)
#undef MODEL_STATUS_ENUM
} model_status_t;

/* Text for a status; "unknown status" for numbers outside the map. */
const char *model_strerror(int status);

/* Makes the calling thread's float arithmetic flush denormal results and
 * operands to zero (x86's FTZ and DAZ), as TensorFlow does on the CPU:
 * gradients that shrink into the denormal range otherwise slow the GEMMs
 * down many times over (the mlp on raw Fashion-MNIST pixels trained 25%
 * faster with it, to the same accuracy). Per thread: call it in the thread
 * that trains. Returns 1, or 0 where the CPU has no such mode (then it
 * does nothing). */
int model_flush_denormals(void);

/* The calling thread trains, one rank per core: one BLAS thread (sets
 * OPENBLAS_NUM_THREADS and OMP_NUM_THREADS; call it before the first BLAS
 * call) and denormals flushed (model_flush_denormals). For programs: it
 * changes the process's environment. */
void model_setup_cpu(void);

/* ---- devices ---- */

typedef enum { MODEL_DEVICE_CPU, MODEL_DEVICE_CUDA } model_device_t;

/* Whether models can run on device here: 1, or 0 with *why (may be NULL)
 * saying why not (a build without CUDA, no GPU visible, HVD_CONV or
 * HVD_CONV_TF32 set to a value models/README.md does not list). The CPU
 * can unless one of those is bad. */
int model_device_available(model_device_t device, const char **why);

/* "cpu" or "cuda"; NULL for other values. */
const char *model_device_name(model_device_t device);

/* Where the emulated device (HVD_DEVICE_EMULATE) takes its memory from:
 * calloc by default. A program whose collectives run on ring's emulated
 * device hands over that device's allocator (ring_dev()->alloc and
 * ->release; both return 0 on success), so that the model's slabs are
 * device memory to hvd, which takes its device path with them as on a
 * GPU. The memory must be open to the host (not the guard mode), where
 * the emulated kernels run. Before any model is made; NULL, NULL goes
 * back to calloc. */
void model_emu_memory(int (*alloc)(void **p, size_t bytes),
                      int (*release)(void *p));
/* And the stream the emulated device's work is ordered on (model_stream;
 * NULL by default), with a host wait for it (sync returns 0 on success):
 * ring's emulated device's, so that hvd orders its device collectives
 * with the model's work on it as on a GPU (the DistributedOptimizer's
 * stream, hvd_wait_stream). The emulated kernels run on the host when
 * called, each after a sync: what another library queued on the stream
 * (a wait for its own work) comes first, as on a GPU. The stream stays
 * the caller's; before any model is made; NULL, NULL: none. */
void model_emu_stream(void *stream, int (*sync)(void *stream));

/* ---- models ---- */

enum { MODEL_NAME_MAX = 32, MODEL_MAX_DIMS = 4 };

/* One parameter tensor, carved out of the slabs. */
typedef struct {
    char name[MODEL_NAME_MAX]; /* "conv1.weight", "fc2.bias", ... */
    size_t offset;             /* elements from the slab start */
    size_t count;              /* elements */
    int ndim;
    int shape[MODEL_MAX_DIMS]; /* linear: (out, in); conv: (out, in, kh, kw) */
} model_param_t;

struct model__layer;   /* internal: models/model_internal.h */
struct model__backend; /* internal: models/backend.h */

typedef struct {
    char kind[8];    /* "mlp" or "cnn" */
    int batch_max;   /* samples per forward, at most */
    int in_channels, in_height, in_width; /* per-sample input shape */
    int in_count;    /* per-sample input floats: channels * height * width,
                        784 for (1, 28, 28), 3072 for (3, 32, 32) */
    int num_classes; /* 10 */
    int num_layers;
    struct model__layer *layers; /* (num_layers) */
    size_t num_params;           /* parameter tensors */
    model_param_t *params;       /* (num_params), in forward order */
    size_t param_count;          /* floats in each slab */
    float *param_slab;           /* (param_count) all parameters */
    float *grad_slab;            /* (param_count) all gradients, same layout */
    float *act_slab;             /* layer outputs, (batch_max, ...) each */
    float *dact_slab;            /* gradients of the layer outputs */
    float *scratch;              /* im2col buffers of the convolutions */
    int32_t *argmax_slab;        /* the max-pools' argmax, one allocation */
    const float *input;          /* (batch, in_count): last forward's input */
    int batch;                   /* samples in the last forward */
    int train;                   /* last forward was in training mode */
    int have_loss;               /* model_loss ran since the last forward */
    int grad_accumulate;         /* 0 (default): backward overwrites grads;
                                    1: backward adds to them */
    int hooks_queued;            /* 0 (default): on a device, backward's
                                    hook sees a gradient done; 1: queued
                                    on model_stream (the reader orders
                                    itself after it there) */
    uint64_t rng_state;          /* dropout's generator; checkpoint it */
    model_device_t device;       /* where it all lives */
    const struct model__backend *backend; /* the device's operations */
    float *input_buf;            /* (batch_max, in_count) on a device:
                                    model_forward_host's copy; else NULL */
    int32_t *labels;             /* (batch_max) model_loss's, on device */
    double *losses;              /* (batch_max) per sample, on device */
    double *host_losses;         /* (batch_max) host copies of both */
    float *host_logits;          /* (batch_max, num_classes) */
    struct model__copy *loss_copy; /* losses to host_losses, queued */
    int loss_pending;            /* samples of a queued loss not yet read */
} model_t;

/* Builds a model of the given kind on caller memory, for batches of at
 * most batch_max samples of channels x height x width floats (NCHW):
 *   "mlp": FC (channels x height x width)->256 + ReLU, FC 256->128 +
 *          ReLU, FC 128->10;
 *   "cnn": conv5x5 32 pad 2 + ReLU + maxpool2, conv5x5 64 pad 2 + ReLU +
 *          maxpool2, FC (64 x height/4 x width/4)->128 + ReLU,
 *          FC 128->10 (the pools round down: 1x28x28 gives 3136
 *          features, 3x32x32 4096).
 * channels, height and width are 1..4096 with at most 2^24 floats per
 * sample. The cnn's two 2x2 poolings need height and width >= 4 (each
 * halves them, rounding down); smaller ones are MODEL_ERR_ARG.
 *
 * Weights: He (Kaiming) uniform, U(-b, b) with b = sqrt(6 / fan_in), drawn
 * in slab order from a splitmix64 generator seeded with `seed`; biases 0.
 * The same seed and shape give bitwise the same weights on every machine.
 * Returns MODEL_OK, MODEL_ERR_ARG (unknown kind, batch_max < 1, a shape out
 * of range or too small for the model, HVD_CONV or HVD_CONV_TF32 set to a
 * value models/README.md does not list) or MODEL_ERR_NOMEM; on failure *m
 * holds nothing and needs no model_free. On the CPU. */
int model_init_shape(model_t *m, const char *kind, int channels, int height,
                     int width, int batch_max, uint64_t seed);

/* model_init_shape on device: the same weights (made on the host, then
 * copied), and MODEL_ERR_CUDA where the device cannot be used
 * (model_device_available says why). */
int model_init_device(model_t *m, model_device_t device, const char *kind,
                      int channels, int height, int width, int batch_max,
                      uint64_t seed);

/* model_init_shape for 1x28x28 inputs (Fashion-MNIST). */
int model_init(model_t *m, const char *kind, int batch_max, uint64_t seed);

/* What m runs on, in words: "cpu", "cuda", "cuda (emulated)". */
const char *model_backend_name(const model_t *m);

/* The stream m's work is queued on, as the platform's handle (a
 * cudaStream_t on "cuda"), for a reader that orders itself after it
 * (m->hooks_queued); NULL where work is done when it returns (the CPU,
 * the emulated device). */
void *model_stream(const model_t *m);

/* Releases what model_init allocated; accepts NULL or a zeroed model and
 * leaves *m zeroed. */
void model_free(model_t *m);

/* Forward pass of x, (batch, in_count) floats in the model's memory,
 * which must stay valid until backward. train = 1 enables dropout (none in
 * mlp/cnn so far). Returns MODEL_OK or MODEL_ERR_ARG (NULL, batch outside
 * 1..batch_max). */
int model_forward(model_t *m, const float *x, int batch, int train);

/* model_forward of x in host memory: on a device, copied into the
 * model's own input buffer first. */
int model_forward_host(model_t *m, const float *x, int batch, int train);

/* bytes between host memory and the model's (its device's) memory, after
 * the work queued there so far; on the CPU a plain copy. MODEL_OK or the
 * device's error. */
int model_upload(const model_t *m, void *dst, const void *host_src,
                 size_t bytes);
int model_download(const model_t *m, void *host_dst, const void *src,
                   size_t bytes);

/* The last forward's logits, (batch, num_classes), in the model's
 * memory. */
const float *model_logits(const model_t *m);

/* Softmax cross-entropy of the last forward's logits, the mean over the
 * batch, into *loss; also prepares backward. labels: (batch) in
 * 0..num_classes-1, host memory. Returns MODEL_OK, MODEL_ERR_ARG (batch
 * differs from the forward's, label out of range), MODEL_ERR_STATE (no
 * forward yet) or the device's error (MODEL_ERR_CUDA). */
int model_loss(model_t *m, const int *labels, int batch, float *loss);

/* ---- batches copied ahead ----
 * A batch's images and labels on their way to the model: host buffers
 * the caller fills (pinned on a GPU) and their place in the model's
 * memory. On a GPU the copy runs on a stream of its own, so that with two
 * batches used in turn the next batch's copy overlaps the current step:
 *
 *   model_batch_host(m, &b[k])         b[k]'s last copy has read its host
 *                                      buffers: they may be filled again
 *   fill b[k].x and b[k].labels with n samples
 *   model_batch_send(m, &b[k], n)      queues the copy, returns at once
 *   model_forward_batch(m, &b[k], 1)   runs after the copy
 *   model_loss_batch(m, &b[k], &loss)  (then backward as usual)
 *
 * A batch may be sent again once the step that used it is queued (its
 * copy waits for that step's work). On the CPU the model reads the host
 * buffers themselves and nothing is copied. */
typedef struct {
    float *x;    /* (batch_max, in_count) host: the caller's to fill */
    int *labels; /* (batch_max) host: the caller's to fill */
    /* The model's: */
    int count;   /* samples of the last send; 0 before */
    void *host;  /* labels, then x: one host allocation */
    void *dev;   /* the same layout in the model's memory (host on CPU) */
    size_t x_offset, bytes;
    struct model__copy *copy;
} model_batch_t;

/* A batch of up to m->batch_max samples for m. MODEL_OK, MODEL_ERR_ARG,
 * MODEL_ERR_NOMEM or the device's error; on failure *b holds nothing. */
int model_batch_init(const model_t *m, model_batch_t *b);
/* Waits for b's copy, frees b and zeroes it; accepts a zeroed batch. */
void model_batch_free(const model_t *m, model_batch_t *b);
/* Waits until b's last copy has read its host buffers. MODEL_OK or the
 * device's error. */
int model_batch_host(const model_t *m, model_batch_t *b);
/* Queues the copy of b's first count samples. MODEL_OK, MODEL_ERR_ARG
 * (count outside 1..batch_max, a label out of range) or the device's
 * error. */
int model_batch_send(const model_t *m, model_batch_t *b, int count);
/* model_forward of b's samples, after their copy. MODEL_ERR_STATE when b
 * was not sent. */
int model_forward_batch(model_t *m, model_batch_t *b, int train);
/* model_loss with b's labels, after model_forward_batch of b
 * (MODEL_ERR_STATE otherwise). */
int model_loss_batch(model_t *m, const model_batch_t *b, float *loss);
/* model_loss_batch without waiting for the loss: what backward needs is
 * queued, and so is the losses' copy to the host; model_loss_read waits
 * for it and gives the mean. Backward, and the step after it, may be
 * queued in between, so that a GPU is not left idle while the host
 * waits for the loss (PyTorch's loss.item() after the step). */
int model_loss_queue(model_t *m, const model_batch_t *b);
/* The mean loss of the last model_loss_queue; MODEL_ERR_STATE when none
 * is queued (or it was read), else MODEL_OK or the device's error. */
int model_loss_read(model_t *m, float *loss);

/* Called by backward with a parameter's index as soon as that parameter's
 * gradient is final in grad_slab (on a device with m->hooks_queued: as
 * soon as the work that makes it is queued on model_stream). A non-zero
 * return stops backward, which returns it. */
typedef int (*model_grad_hook_t)(void *ctx, size_t param_idx);

/* Gradients of the last model_loss into grad_slab (overwritten, or added
 * when m->grad_accumulate). hook (may be NULL) is called once per parameter
 * tensor, in decreasing index order: last layer first, bias before weight.
 * Returns MODEL_OK, MODEL_ERR_STATE (no model_loss since the last forward)
 * or the hook's non-zero status. */
int model_backward(model_t *m, model_grad_hook_t hook, void *hook_ctx);

/* Sets grad_slab to zero (for accumulation). */
void model_zero_grad(model_t *m);

/* Parameter tensors: name, data in param_slab, gradient in grad_slab,
 * element count. Index out of range gives NULL / 0. */
size_t model_num_params(const model_t *m);
const char *model_param_name(const model_t *m, size_t param_idx);
float *model_param_data(const model_t *m, size_t param_idx);
float *model_grad_data(const model_t *m, size_t param_idx);
size_t model_param_count(const model_t *m, size_t param_idx);

/* Arg-max class of each of the last forward's samples into pred (batch;
 * may be NULL), and, when labels is not NULL, the number that match into
 * *correct; pred, labels and correct are host memory. Returns MODEL_OK,
 * MODEL_ERR_ARG (no forward yet, pred and correct both NULL, correct
 * without labels) or the device's error. */
int model_predict(const model_t *m, int *pred, const int *labels, int *correct);

/* ---- SGD ---- */

/* PyTorch's SGD (dampening 0), over count floats:
 *   g = grad + weight_decay * p
 *   v = momentum * v + g                       (when momentum > 0)
 *   g = nesterov ? g + momentum * v : v         (when momentum > 0)
 *   p = p - lr * g
 * v starts at zero, which gives v = g on the first step as PyTorch does. */
typedef struct {
    float lr;
    float momentum;
    float weight_decay;
    int nesterov;
    size_t count;    /* floats in params, grads and velocity */
    float *velocity; /* (count) momentum buffer, one allocation; NULL
                        when momentum == 0. Broadcast/checkpoint it. In
                        the memory of the model it was made for. */
    const struct model__backend *backend; /* where the step runs */
} model_sgd_t;

/* Returns MODEL_OK, MODEL_ERR_ARG (negative lr/momentum/weight_decay,
 * nesterov without momentum) or MODEL_ERR_NOMEM. On the host. */
int model_sgd_init(model_sgd_t *opt, size_t count, float lr, float momentum,
                   float weight_decay, int nesterov);
/* model_sgd_init for all of m's parameters, on m's device (the step runs
 * there, on its slabs). */
int model_sgd_init_model(model_sgd_t *opt, const model_t *m, float lr,
                         float momentum, float weight_decay, int nesterov);
void model_sgd_free(model_sgd_t *opt);

/* One step of params (count) from grads (count), with opt->lr;
 * MODEL_ERR_STATE for an optimizer never made, freed, or whose init
 * failed. */
int model_sgd_step(model_sgd_t *opt, float *params, const float *grads);
/* The same step for elements [first, first + n) only, for a sharded step:
 * grad_to_param holds their gradients and receives their new values;
 * params (the whole slab, count) is only read, and the velocity of those
 * elements is updated. Bitwise what model_sgd_step makes of them.
 * MODEL_ERR_ARG when the range is not within count; MODEL_ERR_STATE for
 * an optimizer on a device (a sharded step runs on the host). */
int model_sgd_step_range(model_sgd_t *opt, const float *params, size_t first,
                         float *grad_to_param, size_t n);

/* The linear scaling rule with warm-up (Goyal et al., Horovod's
 * LearningRateWarmupCallback): the learning rate at `epoch` (fractional:
 * epoch + step / steps_per_epoch) rises linearly from base_lr at epoch 0 to
 * base_lr * num_ranks at warmup_epochs, and stays there. warmup_epochs <= 0
 * means no warm-up. A pure function. */
float model_lr_warmup(float base_lr, int num_ranks, double warmup_epochs,
                      double epoch);

/* Cosine decay (Loshchilov and Hutter's SGDR, one cycle without restart):
 * lr until from_epoch, then lr * (1 + cos(pi * t)) / 2 with t going from 0
 * at from_epoch to 1 at to_epoch, and 0 after. to_epoch <= from_epoch
 * means no decay. A pure function. */
float model_lr_cosine(float lr, double from_epoch, double to_epoch,
                      double epoch);

#endif /* HVD_MODEL_H */
