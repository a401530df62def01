/* examples/cifar.c: reads CIFAR-10's binary batches into a data_set_t.
 *
 * Each file is a sequence of 3073-byte records: one label byte (0..9), then
 * 1024 red, 1024 green and 1024 blue bytes of a 32 x 32 image, rows top to
 * bottom. The layout is kept (channel-major). Sizes of all files are checked
 * before anything is allocated; CIFAR-100's two-label format is not read.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "examples/data_internal.h"

enum {
    CIFAR_SIDE = 32,
    CIFAR_CHANNELS = 3,
    CIFAR_IMAGE_NBYTES = CIFAR_CHANNELS * CIFAR_SIDE * CIFAR_SIDE,
    CIFAR_RECORD_NBYTES = 1 + CIFAR_IMAGE_NBYTES,
    CIFAR_CHUNK_RECORDS = 64,
};

/* Records in path, or a negative status. */
static int cifar_count(const char *path, size_t *record_count, char *err,
                       size_t err_nbytes)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return data__fail(err, err_nbytes, DATA_ERR_IO, "%s: cannot open: %s",
                          path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return data__fail(err, err_nbytes, DATA_ERR_IO,
                          "%s: not a regular file", path);
    if (st.st_size == 0 || st.st_size % CIFAR_RECORD_NBYTES != 0)
        return data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                          "%s: size %lld bytes is not a positive multiple of "
                          "the %d-byte CIFAR-10 record (truncated or not "
                          "CIFAR-10 binary)",
                          path, (long long)st.st_size, CIFAR_RECORD_NBYTES);
    *record_count = (size_t)(st.st_size / CIFAR_RECORD_NBYTES);
    return DATA_OK;
}

/* Reads record_count records of path into ds from sample first_idx on. */
static int cifar_read(data_set_t *ds, size_t first_idx, const char *path,
                      size_t record_count, uint8_t *chunk, char *err,
                      size_t err_nbytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return data__fail(err, err_nbytes, DATA_ERR_IO, "%s: cannot open: %s",
                          path, strerror(errno));
    int status = DATA_OK;
    for (size_t r = 0; r < record_count;) {
        size_t n = record_count - r;
        if (n > CIFAR_CHUNK_RECORDS) n = CIFAR_CHUNK_RECORDS;
        if (fread(chunk, CIFAR_RECORD_NBYTES, n, f) != n) {
            status = data__fail(
                err, err_nbytes, ferror(f) ? DATA_ERR_IO : DATA_ERR_FORMAT,
                "%s: %s before record %zu of %zu", path,
                ferror(f) ? "read error" : "truncated", r + n, record_count);
            goto out;
        }
        for (size_t k = 0; k < n; k++, r++) {
            const uint8_t *rec = chunk + k * CIFAR_RECORD_NBYTES;
            if (rec[0] >= DATA_CLASS_COUNT) {
                status = data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                                    "%s: record %zu has label %u, not in "
                                    "0..%d",
                                    path, r, rec[0], DATA_CLASS_COUNT - 1);
                goto out;
            }
            size_t i = first_idx + r;
            ds->labels[i] = rec[0];
            data__scale_pixels(ds->images + i * CIFAR_IMAGE_NBYTES, rec + 1,
                               CIFAR_IMAGE_NBYTES);
        }
    }
out:
    fclose(f);
    return status;
}

int data_cifar_load_files(data_set_t *ds, const char *const *paths,
                          size_t file_count, char *err, size_t err_nbytes)
{
    if (ds) memset(ds, 0, sizeof(*ds));
    if (!ds || !paths || file_count == 0)
        return data__fail(err, err_nbytes, DATA_ERR_ARG,
                          "data_cifar_load_files: no data set or no files");
    size_t total = 0, *counts = calloc(file_count, sizeof(size_t));
    uint8_t *chunk = malloc(CIFAR_CHUNK_RECORDS * CIFAR_RECORD_NBYTES);
    int status = DATA_OK;
    if (!counts || !chunk) {
        status = data__fail(err, err_nbytes, DATA_ERR_NOMEM,
                            "CIFAR-10 reader: out of memory");
        goto out;
    }
    for (size_t f = 0; f < file_count; f++) {
        status = cifar_count(paths[f], &counts[f], err, err_nbytes);
        if (status) goto out;
        total += counts[f];
    }
    status = data__alloc(ds, total, CIFAR_CHANNELS, CIFAR_SIDE, CIFAR_SIDE,
                         paths[0], err, err_nbytes);
    if (status) goto out;
    for (size_t f = 0, first = 0; f < file_count; first += counts[f++]) {
        status =
            cifar_read(ds, first, paths[f], counts[f], chunk, err, err_nbytes);
        if (status) goto err_free_set;
    }
    goto out;
err_free_set:
    data_free(ds);
out:
    free(chunk);
    free(counts);
    return status;
}

int data_cifar_load(data_set_t *ds, const char *dir, data_split_t split,
                    char *err, size_t err_nbytes)
{
    if (ds) memset(ds, 0, sizeof(*ds));
    if (!ds || !dir || (split != DATA_TRAIN && split != DATA_TEST))
        return data__fail(err, err_nbytes, DATA_ERR_ARG,
                          "data_cifar_load: NULL argument or bad split");
    char paths[5][4096];
    const char *path_ptrs[5];
    size_t file_count = split == DATA_TRAIN ? 5 : 1;
    for (size_t f = 0; f < file_count; f++) {
        if (split == DATA_TRAIN)
            snprintf(paths[f], sizeof(paths[f]), "%s/data_batch_%zu.bin", dir,
                     f + 1);
        else
            snprintf(paths[f], sizeof(paths[f]), "%s/test_batch.bin", dir);
        path_ptrs[f] = paths[f];
    }
    return data_cifar_load_files(ds, path_ptrs, file_count, err, err_nbytes);
}
