/* examples/data.c: what the data readers share: statuses, error messages,
 * allocation and release of a data set, pixel scaling, gathering a batch's
 * samples into contiguous buffers, and their per-channel normalisation. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "examples/data_internal.h"

const char *data_strerror(int status)
{
    switch (status) {
#define DATA_STATUS_TEXT(name, value, text)                                    \
    case DATA_##name:                                                          \
        return text;
        DATA_STATUS_MAP(DATA_STATUS_TEXT)
#undef DATA_STATUS_TEXT
    }
    return "unknown data status";
}

int data__fail(char *err, size_t err_nbytes, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err) {
        if (err_nbytes > 0) vsnprintf(err, err_nbytes, fmt, ap);
    } else {
        fputs("data: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
    return status;
}

size_t data_image_count(const data_set_t *ds)
{
    return ds->channels * ds->height * ds->width;
}

uint32_t data_fingerprint(const data_set_t *ds)
{
    enum { SAMPLES = 64 };
    size_t n = ds->count < SAMPLES ? ds->count : SAMPLES;
    size_t floats = data_image_count(ds);
    uLong crc = crc32_z(crc32(0L, Z_NULL, 0), (const Bytef *)ds->labels,
                        ds->count * sizeof *ds->labels);
    for (size_t k = 0; k < n; k++)
        crc = crc32_z(crc,
                      (const Bytef *)(ds->images +
                                      k * ds->count / n * floats),
                      floats * sizeof *ds->images);
    return (uint32_t)crc;
}

void data_free(data_set_t *ds)
{
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    memset(ds, 0, sizeof(*ds));
}

int data__alloc(data_set_t *ds, size_t count, size_t channels, size_t height,
                size_t width, const char *what, char *err, size_t err_nbytes)
{
    memset(ds, 0, sizeof(*ds));
    size_t image_count = channels * height * width; /* each <= 4096 */
    if (count > 0 && image_count > SIZE_MAX / sizeof(float) / count)
        return data__fail(err, err_nbytes, DATA_ERR_NOMEM,
                          "%s: %zu images of %zu floats do not fit in memory",
                          what, count, image_count);
    ds->images = malloc(count * image_count * sizeof(float) + 1);
    ds->labels = malloc(count * sizeof(int) + 1);
    if (!ds->images || !ds->labels) {
        data_free(ds);
        return data__fail(err, err_nbytes, DATA_ERR_NOMEM,
                          "%s: out of memory for %zu images of %zu floats",
                          what, count, image_count);
    }
    ds->count = count;
    ds->channels = channels;
    ds->height = height;
    ds->width = width;
    return DATA_OK;
}

void data__scale_pixels(float *dst, const uint8_t *src, size_t count)
{
    for (size_t k = 0; k < count; k++)
        dst[k] = (float)src[k] / 255.0f;
}

void data_gather(const data_set_t *ds, const size_t *sample_idx,
                 size_t sample_count, float *images, int *labels)
{
    size_t image_count = data_image_count(ds);
    for (size_t k = 0; k < sample_count; k++) {
        size_t i = sample_idx[k];
        memcpy(images + k * image_count, ds->images + i * image_count,
               image_count * sizeof(float));
        labels[k] = ds->labels[i];
    }
}

int data_normalize(float *images, size_t sample_count, size_t channels,
                   size_t plane_count, const float *mean, const float *std)
{
    if (!images || !mean || !std) return DATA_ERR_ARG;
    for (size_t ch = 0; ch < channels; ch++)
        if (!(std[ch] > 0.0f) || !isfinite(std[ch]) || !isfinite(mean[ch]))
            return DATA_ERR_ARG;
    for (size_t i = 0; i < sample_count; i++)
        for (size_t ch = 0; ch < channels; ch++) {
            float *x = images + (i * channels + ch) * plane_count;
            /* A division, not a product with 1/std: torchvision's result. */
            for (size_t k = 0; k < plane_count; k++)
                x[k] = (x[k] - mean[ch]) / std[ch];
        }
    return DATA_OK;
}
