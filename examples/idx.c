/* examples/idx.c: reads (Fashion-)MNIST IDX files into a data_set_t.
 *
 * An IDX file is a big-endian header, magic 0x00 0x00 type ndims (type 0x08
 * is unsigned byte), then ndims 32-bit sizes, then the bytes. Images are
 * 0x00000803 (count, rows, cols), labels 0x00000801 (count). Files are read
 * through zlib's gzread, which takes gzipped and plain files alike. Only
 * unsigned-byte data is supported; other IDX types are refused.
 *
 * The header is trusted with an allocation only as far as the file could
 * hold what it declares: a plain file exactly, a gzipped one at deflate's
 * best ratio (1032:1). So a corrupt or truncated file is a format error,
 * never a request for gigabytes (a 16-byte file could ask for 6.7 PB).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "examples/data_internal.h"

enum {
    IDX_IMAGES_MAGIC = 0x00000803,
    IDX_LABELS_MAGIC = 0x00000801,
    IDX_MAX_SIDE = 4096,       /* rows, cols */
    IDX_MAX_COUNT = 100000000, /* images */
    IDX_CHUNK_NBYTES = 1 << 16,
    IDX_DEFLATE_MAX_RATIO = 1032, /* bytes out per byte in, at best */
};

/* zlib's error for f, without the "<fd:N>: " that gzerror puts first (f
 * is opened by gzdopen; our messages name the path). */
static const char *idx_zlib_error(gzFile f, int *zerr)
{
    const char *msg = gzerror(f, zerr);
    const char *sep = strstr(msg, ": ");
    return strncmp(msg, "<fd:", 4) == 0 && sep ? sep + 2 : msg;
}

/* Reads exactly nbytes (any size), bytes offset_nbytes.. of the total_nbytes
 * of `what` (for messages). A short read is truncation, a zlib error
 * corruption (both DATA_ERR_FORMAT), a system error DATA_ERR_IO. */
static int idx_read(gzFile f, const char *path, void *buf, size_t nbytes,
                    const char *what, size_t offset_nbytes, size_t total_nbytes,
                    char *err, size_t err_nbytes)
{
    size_t done_nbytes = 0;
    while (done_nbytes < nbytes) {
        size_t want = nbytes - done_nbytes;
        if (want > (1u << 30)) want = 1u << 30;
        int got = gzread(f, (char *)buf + done_nbytes, (unsigned)want);
        int zerr;
        const char *zmsg = idx_zlib_error(f, &zerr);
        size_t at = offset_nbytes + done_nbytes;
        if (zerr == Z_ERRNO)
            return data__fail(err, err_nbytes, DATA_ERR_IO,
                              "%s: cannot read %s: %s", path, what,
                              strerror(errno));
        if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR))
            return data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                              "%s: corrupt after %zu of the %zu bytes of %s "
                              "(zlib: %s)",
                              path, at, total_nbytes, what, zmsg);
        if (got == 0)
            return data__fail(
                err, err_nbytes, DATA_ERR_FORMAT,
                "%s: truncated after %zu of the %zu bytes of "
                "%s%s%s%s",
                path, at, total_nbytes, what, zerr != Z_OK ? " (zlib: " : "",
                zerr != Z_OK ? zmsg : "", zerr != Z_OK ? ")" : "");
        done_nbytes += (size_t)got;
    }
    return DATA_OK;
}

/* Opens path and checks its magic; fills dims[0..ndims) and *file_nbytes,
 * the file's size (-1 when it is not a regular file). */
static int idx_open(const char *path, gzFile *out, uint32_t magic,
                    uint32_t *dims, int ndims, long long *file_nbytes,
                    char *err, size_t err_nbytes)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return data__fail(err, err_nbytes, DATA_ERR_IO, "%s: cannot open: %s",
                          path, strerror(errno));
    struct stat st;
    *file_nbytes =
        fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
    gzFile f = gzdopen(fd, "rb"); /* owns fd from here on */
    if (!f) {
        close(fd);
        return data__fail(err, err_nbytes, DATA_ERR_IO,
                          "%s: cannot open: zlib failed", path);
    }
    gzbuffer(f, 1 << 17);
    unsigned char hdr[4 + 4 * 3];
    size_t hdr_nbytes = 4 + 4 * (size_t)ndims;
    int status = idx_read(f, path, hdr, hdr_nbytes, "the header", 0, hdr_nbytes,
                          err, err_nbytes);
    if (status) goto err_close;
    uint32_t got = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
                   (uint32_t)hdr[2] << 8 | hdr[3];
    if (got != magic) {
        status = data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                            "%s: bad magic 0x%08x, expected 0x%08x (an IDX "
                            "%s file of unsigned bytes)",
                            path, (unsigned)got, (unsigned)magic,
                            magic == IDX_IMAGES_MAGIC ? "images" : "labels");
        goto err_close;
    }
    for (int d = 0; d < ndims; d++) {
        const unsigned char *p = hdr + 4 + 4 * d;
        dims[d] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                  (uint32_t)p[2] << 8 | p[3];
    }
    *out = f;
    return DATA_OK;
err_close:
    gzclose(f);
    return status;
}

/* Whether a file of file_nbytes (-1: not a regular file, so no bound) can
 * hold the data_nbytes its header of hdr_nbytes declares, read through f
 * (after the header, when gzdirect knows whether it is gzipped). */
static int idx_fits(gzFile f, const char *path, long long file_nbytes,
                    size_t hdr_nbytes, size_t data_nbytes, char *err,
                    size_t err_nbytes)
{
    if (file_nbytes < 0) return DATA_OK;
    size_t have = (size_t)file_nbytes;
    if (gzdirect(f) ? hdr_nbytes + data_nbytes <= have
                    : data_nbytes / IDX_DEFLATE_MAX_RATIO <= have)
        return DATA_OK;
    return data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                      "%s: its header declares %zu bytes of data, more than "
                      "its %lld bytes can hold (truncated, or a corrupt "
                      "header)",
                      path, data_nbytes, file_nbytes);
}

/* After the declared data the file must end (this read also makes zlib
 * check the gzip trailer's CRC). */
static int idx_expect_end(gzFile f, const char *path, char *err,
                          size_t err_nbytes)
{
    unsigned char extra;
    int got = gzread(f, &extra, 1);
    int zerr;
    const char *zmsg = idx_zlib_error(f, &zerr);
    if (got < 0 || zerr != Z_OK)
        return data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                          "%s: truncated or corrupt at its end (zlib: %s)",
                          path, zmsg);
    if (got > 0)
        return data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                          "%s: more bytes than its header declares", path);
    return DATA_OK;
}

int data_idx_load_files(data_set_t *ds, const char *images_path,
                        const char *labels_path, char *err, size_t err_nbytes)
{
    if (ds) memset(ds, 0, sizeof(*ds));
    if (!ds || !images_path || !labels_path)
        return data__fail(err, err_nbytes, DATA_ERR_ARG,
                          "data_idx_load_files: NULL argument");
    gzFile fi = NULL, fl = NULL;
    uint8_t *bytes = NULL;
    uint32_t idims[3] = {0}, ldims[1] = {0};
    long long images_nbytes, labels_nbytes;
    int status = idx_open(images_path, &fi, IDX_IMAGES_MAGIC, idims, 3,
                          &images_nbytes, err, err_nbytes);
    if (status) goto out;
    if (idims[0] == 0 || idims[0] > IDX_MAX_COUNT || idims[1] == 0 ||
        idims[1] > IDX_MAX_SIDE || idims[2] == 0 || idims[2] > IDX_MAX_SIDE) {
        status = data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                            "%s: absurd dimensions %u x %u x %u (want 1..%d "
                            "images of 1..%d x 1..%d pixels)",
                            images_path, (unsigned)idims[0], (unsigned)idims[1],
                            (unsigned)idims[2], IDX_MAX_COUNT, IDX_MAX_SIDE,
                            IDX_MAX_SIDE);
        goto out;
    }
    /* At most 1e8 * 4096 * 4096 < 2^51. */
    size_t pixel_count = (size_t)idims[0] * idims[1] * idims[2];
    status = idx_fits(fi, images_path, images_nbytes, 4 + 4 * 3, pixel_count,
                      err, err_nbytes);
    if (status) goto out;
    status = idx_open(labels_path, &fl, IDX_LABELS_MAGIC, ldims, 1,
                      &labels_nbytes, err, err_nbytes);
    if (status) goto out;
    if (ldims[0] != idims[0]) {
        status =
            data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                       "%s: %u labels but %s holds %u images", labels_path,
                       (unsigned)ldims[0], images_path, (unsigned)idims[0]);
        goto out;
    }
    size_t count = idims[0];
    status =
        idx_fits(fl, labels_path, labels_nbytes, 4 + 4, count, err, err_nbytes);
    if (status) goto out;
    status = data__alloc(ds, count, 1, idims[1], idims[2], images_path, err,
                         err_nbytes);
    if (status) goto out;
    bytes = malloc(count > IDX_CHUNK_NBYTES ? count : IDX_CHUNK_NBYTES);
    if (!bytes) {
        status = data__fail(err, err_nbytes, DATA_ERR_NOMEM,
                            "%s: out of memory", labels_path);
        goto err_free_set;
    }
    /* Pixels in chunks, scaled as they come. */
    for (size_t done = 0; done < pixel_count;) {
        size_t n = pixel_count - done;
        if (n > IDX_CHUNK_NBYTES) n = IDX_CHUNK_NBYTES;
        status = idx_read(fi, images_path, bytes, n, "the pixels", done,
                          pixel_count, err, err_nbytes);
        if (status) goto err_free_set;
        data__scale_pixels(ds->images + done, bytes, n);
        done += n;
    }
    status = idx_expect_end(fi, images_path, err, err_nbytes);
    if (status) goto err_free_set;
    status = idx_read(fl, labels_path, bytes, count, "the labels", 0, count,
                      err, err_nbytes);
    if (status) goto err_free_set;
    for (size_t i = 0; i < count; i++) {
        if (bytes[i] >= DATA_CLASS_COUNT) {
            status = data__fail(err, err_nbytes, DATA_ERR_FORMAT,
                                "%s: label %u of item %zu is not in 0..%d",
                                labels_path, bytes[i], i, DATA_CLASS_COUNT - 1);
            goto err_free_set;
        }
        ds->labels[i] = bytes[i];
    }
    status = idx_expect_end(fl, labels_path, err, err_nbytes);
    if (status) goto err_free_set;
    goto out;
err_free_set:
    data_free(ds);
out:
    free(bytes);
    if (fl) gzclose(fl);
    if (fi) gzclose(fi);
    return status;
}

/* dir/name.gz, or dir/name when only the uncompressed file exists. */
static void idx_path(char *path, size_t path_nbytes, const char *dir,
                     const char *name)
{
    snprintf(path, path_nbytes, "%s/%s", dir, name);
    if (access(path, F_OK) == 0) return;
    char plain[4096];
    snprintf(plain, sizeof(plain), "%s/%.*s", dir, (int)(strlen(name) - 3),
             name);
    if (access(plain, F_OK) == 0) snprintf(path, path_nbytes, "%s", plain);
}

int data_idx_load(data_set_t *ds, const char *dir, data_split_t split,
                  char *err, size_t err_nbytes)
{
    if (ds) memset(ds, 0, sizeof(*ds));
    if (!ds || (split != DATA_TRAIN && split != DATA_TEST))
        return data__fail(err, err_nbytes, DATA_ERR_ARG,
                          "data_idx_load: NULL data set or bad split");
    if (!dir) dir = DATA_FMNIST_DIR;
    const char *prefix = split == DATA_TRAIN ? "train" : "t10k";
    char name[64], images_path[4096], labels_path[4096];
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte.gz", prefix);
    idx_path(images_path, sizeof(images_path), dir, name);
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte.gz", prefix);
    idx_path(labels_path, sizeof(labels_path), dir, name);
    return data_idx_load_files(ds, images_path, labels_path, err, err_nbytes);
}
