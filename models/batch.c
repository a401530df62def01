/* models/batch.c: batches copied ahead (models/model.h's model_batch_t).
 * A batch is one host allocation and one in the model's memory, with the
 * same layout (the labels, then the images at x_offset), so that a send
 * is one copy; on the CPU both are the same allocation. The copy itself
 * is the backend's (models/backend.h): on a GPU a stream of its own. */
#include <stdlib.h>
#include "models/backend.h"
#include "models/model.h"
#include "models/model_internal.h"

/* The images start on a line of their own: kernels read them vectorised. */
enum { X_ALIGN = 64 };

static int32_t *dev_labels(const model_batch_t *b) { return b->dev; }

static float *dev_x(const model_batch_t *b)
{
    return (float *)((char *)b->dev + b->x_offset);
}

int model_batch_init(const model_t *m, model_batch_t *b)
{
    if (!b) return MODEL_ERR_ARG;
    *b = (model_batch_t){0};
    if (!m || !m->layers) return MODEL_ERR_ARG;
    const model__backend_t *be = m->backend;
    size_t bm = (size_t)m->batch_max;
    b->x_offset = (bm * sizeof(int32_t) + X_ALIGN - 1) / X_ALIGN * X_ALIGN;
    b->bytes = b->x_offset + bm * (size_t)m->in_count * sizeof(float);
    b->copy = calloc(1, sizeof *b->copy);
    if (!b->copy) return MODEL_ERR_NOMEM;
    int status = be->host_alloc(b->bytes, &b->host);
    if (status == MODEL_OK && m->device == MODEL_DEVICE_CPU)
        b->dev = b->host;
    else if (status == MODEL_OK)
        status = be->alloc(b->bytes, &b->dev);
    if (status != MODEL_OK) {
        model_batch_free(m, b);
        return status;
    }
    b->labels = b->host;
    b->x = (float *)((char *)b->host + b->x_offset);
    return MODEL_OK;
}

void model_batch_free(const model_t *m, model_batch_t *b)
{
    if (!b) return;
    if (m && m->backend) {
        const model__backend_t *be = m->backend;
        if (b->copy) be->copy_release(b->copy);
        if (b->dev != b->host) be->release(b->dev);
        be->host_release(b->host);
    }
    free(b->copy);
    *b = (model_batch_t){0};
}

int model_batch_host(const model_t *m, model_batch_t *b)
{
    if (!m || !m->backend || !b || !b->copy) return MODEL_ERR_ARG;
    return m->backend->copy_host_wait(b->copy);
}

int model_batch_send(const model_t *m, model_batch_t *b, int count)
{
    if (!m || !m->backend || !b || !b->copy || count < 1 ||
        count > m->batch_max || model__labels_check(m, b->labels, count))
        return MODEL_ERR_ARG;
    size_t bytes = b->x_offset + (size_t)count * m->in_count * sizeof(float);
    int status = m->backend->copy_start(b->copy, b->dev, b->host, bytes);
    b->count = status == MODEL_OK ? count : 0;
    return status;
}

int model_forward_batch(model_t *m, model_batch_t *b, int train)
{
    if (!m || !m->backend || !b || !b->copy) return MODEL_ERR_ARG;
    if (!b->count) return MODEL_ERR_STATE;
    m->backend->copy_order(b->copy);
    return model_forward(m, dev_x(b), b->count, train);
}

int model_loss_queue(model_t *m, const model_batch_t *b)
{
    if (!m || !m->layers || !b || !b->copy) return MODEL_ERR_ARG;
    if (!b->count || m->input != dev_x(b) || m->batch != b->count)
        return MODEL_ERR_STATE;
    return model__loss_queue(m, dev_labels(b));
}

int model_loss_batch(model_t *m, const model_batch_t *b, float *loss)
{
    if (!loss) return MODEL_ERR_ARG;
    int status = model_loss_queue(m, b);
    return status == MODEL_OK ? model_loss_read(m, loss) : status;
}
