/* test/fuzz/fuzz_cifar.c: the CIFAR-10 reader (examples/cifar.c), which
 * reads the binary batches found in a --data folder.
 *
 * Input: a byte giving the file count (1 + byte % 3), then the files, each
 * but the last a length-prefixed piece (fuzz_take). A failure must be a
 * format or I/O error (never out of memory: sizes come from the files)
 * with a message naming a file and a zeroed set.
 * A success must hold exactly the files' records, in order: every file a
 * positive multiple of 3073 bytes, each label its record's first byte
 * (< 10) and each pixel its byte / 255, as 3 x 32 x 32 images.
 */
#include <string.h>
#include "examples/data.h"
#include "test/fuzz/fuzz.h"

enum { MAX_FILES = 3, IMAGE_NBYTES = 3 * 32 * 32, RECORD_NBYTES = 3073 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t file_count = 1 + data[0] % MAX_FILES;
    data++, size--;
    const uint8_t *files[MAX_FILES];
    size_t nbytes[MAX_FILES];
    const char *paths[MAX_FILES];
    for (size_t f = 0; f < file_count; f++) {
        if (f + 1 < file_count) {
            nbytes[f] = fuzz_take(&data, &size, &files[f]);
        } else {
            files[f] = data;
            nbytes[f] = size;
        }
        paths[f] = fuzz_file((int)f, files[f], nbytes[f]);
    }

    data_set_t ds;
    char err[512] = "";
    int status = data_cifar_load_files(&ds, paths, file_count, err, sizeof err);
    if (status != DATA_OK) {
        /* Not DATA_ERR_NOMEM: the loader allocates by what the files
         * hold, and these are small. */
        FUZZ_CHECK(status == DATA_ERR_IO || status == DATA_ERR_FORMAT);
        int named = 0;
        for (size_t f = 0; f < file_count; f++)
            named |= !!strstr(err, paths[f]);
        FUZZ_CHECK(named);
        FUZZ_CHECK(!ds.images && !ds.labels && ds.count == 0 &&
                   ds.channels == 0 && ds.height == 0 && ds.width == 0);
        return 0;
    }
    FUZZ_CHECK(ds.channels == 3 && ds.height == 32 && ds.width == 32);
    size_t i = 0;
    for (size_t f = 0; f < file_count; f++) {
        FUZZ_CHECK(nbytes[f] > 0 && nbytes[f] % RECORD_NBYTES == 0);
        for (size_t r = 0; r < nbytes[f] / RECORD_NBYTES; r++, i++) {
            const uint8_t *rec = files[f] + r * RECORD_NBYTES;
            FUZZ_CHECK(i < ds.count);
            FUZZ_CHECK(rec[0] < DATA_CLASS_COUNT && ds.labels[i] == rec[0]);
            for (size_t k = 0; k < IMAGE_NBYTES; k++)
                FUZZ_CHECK(ds.images[i * IMAGE_NBYTES + k] ==
                           (float)rec[1 + k] / 255.0f);
        }
    }
    FUZZ_CHECK(i == ds.count);
    data_free(&ds);
    return 0;
}
