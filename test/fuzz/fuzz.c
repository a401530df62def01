/* test/fuzz/fuzz.c: the fuzz targets' shared helpers (see fuzz.h). */
#define _GNU_SOURCE /* memfd_create */
#include "test/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "fuzz: %s:%d: check failed: %s\n", file, line, what);
    abort();
}

const char *fuzz_file(int slot, const void *bytes, size_t nbytes)
{
    static int fds[FUZZ_FILE_SLOTS];
    static char paths[FUZZ_FILE_SLOTS][32]; /* "": not made yet */
    if (!paths[slot][0]) {
        fds[slot] = memfd_create("fuzz", 0);
        if (fds[slot] < 0) {
            perror("fuzz: memfd_create");
            abort();
        }
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d",
                 fds[slot]);
    }
    if (ftruncate(fds[slot], 0) != 0 ||
        (nbytes > 0 &&
         pwrite(fds[slot], bytes, nbytes, 0) != (ssize_t)nbytes)) {
        perror("fuzz: writing the input file");
        abort();
    }
    return paths[slot];
}

size_t fuzz_take(const uint8_t **data, size_t *size, const uint8_t **piece)
{
    uint32_t want = 0;
    size_t head = *size < 4 ? *size : 4;
    for (size_t i = 0; i < head; i++)
        want |= (uint32_t)(*data)[i] << (8 * i);
    *data += head;
    *size -= head;
    size_t n = want < *size ? want : *size;
    *piece = *data;
    *data += n;
    *size -= n;
    return n;
}

uint8_t *fuzz_gzip(const uint8_t *bytes, size_t n, size_t *gz_nbytes)
{
    enum { GZIP_WINDOW_BITS = 15 + 16 }; /* zlib's way to ask for gzip */
    z_stream zs = {0};
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, GZIP_WINDOW_BITS,
                     8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&zs, (uLong)n);
    uint8_t *out = malloc(cap);
    zs.next_in = (Bytef *)bytes;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = out ? deflate(&zs, Z_FINISH) : Z_MEM_ERROR;
    *gz_nbytes = zs.total_out;
    deflateEnd(&zs);
    FUZZ_CHECK(!out || rc == Z_STREAM_END);
    return out;
}
