/* test/fuzz/fuzz_idx.c: the IDX reader (examples/idx.c), which reads
 * Fashion-MNIST files given on the command line, gzipped or plain.
 *
 * Input: a flags byte (bit 0: gzip the images file, bit 1: the labels
 * file, so that structured inputs also go through zlib), the images file
 * as a length-prefixed piece (fuzz_take), then the labels file. A failure
 * must be a format or I/O error (never out of memory: whatever the header
 * claims, the loader allocates only what the files can hold) with a
 * message naming a file and a zeroed set. A success must be exactly the files'
 * contents: the header's dimensions, every pixel byte / 255 and every label <
 * 10 (when the bytes were gzipped by zlib beforehand, only their ranges can be
 * checked).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "examples/data.h"
#include "test/fuzz/fuzz.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

/* Writes a piece to its file, gzipped or not; returns its path, and in
 * *plain whether the reader will see exactly these bytes. */
static const char *idx_file(int slot, const uint8_t *bytes, size_t n,
                            int gzipped, int *plain)
{
    *plain = gzipped || n < 2 || bytes[0] != 0x1f || bytes[1] != 0x8b;
    if (!gzipped) return fuzz_file(slot, bytes, n);
    size_t gz_nbytes;
    uint8_t *gz = fuzz_gzip(bytes, n, &gz_nbytes);
    if (!gz) return NULL;
    const char *path = fuzz_file(slot, gz, gz_nbytes);
    free(gz);
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int flags = data[0];
    data++, size--;
    const uint8_t *images;
    size_t images_nbytes = fuzz_take(&data, &size, &images);
    const uint8_t *labels = data; /* the rest */
    size_t labels_nbytes = size;
    int images_plain, labels_plain;
    const char *ipath =
        idx_file(0, images, images_nbytes, flags & 1, &images_plain);
    const char *lpath =
        idx_file(1, labels, labels_nbytes, flags & 2, &labels_plain);
    if (!ipath || !lpath) return 0;

    data_set_t ds;
    char err[512] = "";
    int status = data_idx_load_files(&ds, ipath, lpath, err, sizeof err);
    if (status != DATA_OK) {
        /* Not DATA_ERR_NOMEM: the loader allocates by what the files
         * hold, and these are small. */
        FUZZ_CHECK(status == DATA_ERR_IO || status == DATA_ERR_FORMAT);
        FUZZ_CHECK(strstr(err, ipath) || strstr(err, lpath));
        FUZZ_CHECK(!ds.images && !ds.labels && ds.count == 0 &&
                   ds.channels == 0 && ds.height == 0 && ds.width == 0);
        return 0;
    }
    size_t image_count = ds.height * ds.width;
    FUZZ_CHECK(ds.count >= 1 && ds.channels == 1);
    FUZZ_CHECK(ds.height >= 1 && ds.height <= 4096);
    FUZZ_CHECK(ds.width >= 1 && ds.width <= 4096);
    FUZZ_CHECK(data_image_count(&ds) == image_count);
    for (size_t i = 0; i < ds.count; i++)
        FUZZ_CHECK(ds.labels[i] >= 0 && ds.labels[i] < DATA_CLASS_COUNT);
    for (size_t k = 0; k < ds.count * image_count; k++) {
        float x = ds.images[k];
        FUZZ_CHECK(x >= 0.0f && x <= 1.0f &&
                   (float)lrintf(x * 255.0f) / 255.0f == x);
    }
    if (images_plain) {
        FUZZ_CHECK(images_nbytes == 16 + ds.count * image_count);
        FUZZ_CHECK(be32(images) == 0x803 && be32(images + 4) == ds.count &&
                   be32(images + 8) == ds.height &&
                   be32(images + 12) == ds.width);
        for (size_t k = 0; k < ds.count * image_count; k++)
            FUZZ_CHECK(ds.images[k] == (float)images[16 + k] / 255.0f);
    }
    if (labels_plain) {
        FUZZ_CHECK(labels_nbytes == 8 + ds.count);
        FUZZ_CHECK(be32(labels) == 0x801 && be32(labels + 4) == ds.count);
        for (size_t i = 0; i < ds.count; i++)
            FUZZ_CHECK(ds.labels[i] == labels[8 + i]);
    }
    data_free(&ds);
    return 0;
}
