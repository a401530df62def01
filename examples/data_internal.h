/* examples/data_internal.h: helpers shared by the data readers (idx.c,
 * cifar.c) and defined in data.c; not for the training programs. */
#ifndef HVD_EXAMPLES_DATA_INTERNAL_H
#define HVD_EXAMPLES_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "examples/data.h"

/* Formats a message into err (or stderr when err is NULL) and returns
 * status, so that failures read `return data__fail(...)`. */
int data__fail(char *err, size_t err_nbytes, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Allocates ds's arrays for count images of channels x height x width,
 * refusing sizes whose byte counts overflow. ds is zeroed on failure. */
int data__alloc(data_set_t *ds, size_t count, size_t channels, size_t height,
                size_t width, const char *what, char *err, size_t err_nbytes);

/* Pixels: dst[k] = (float)src[k] / 255.0f for k < count. */
void data__scale_pixels(float *dst, const uint8_t *src, size_t count);

#endif /* HVD_EXAMPLES_DATA_INTERNAL_H */
