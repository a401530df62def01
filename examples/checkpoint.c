/* examples/checkpoint.c: checkpoint files (see checkpoint.h). */
#define _POSIX_C_SOURCE 200809L
#include "examples/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const unsigned char ckpt_magic[8] = {'H', 'V', 'D', 'C',
                                            'K', 'P', 'T', 0};
enum { CKPT_HEADER_BYTES = 52, CKPT_CRC_BYTES = 4 };

const char *ckpt_strerror(int status)
{
    switch (status) {
#define CKPT_STATUS_CASE(name, value, text)                                    \
    case value:                                                                \
        return text;
        CKPT_STATUS_MAP(CKPT_STATUS_CASE)
#undef CKPT_STATUS_CASE
    default:
        return "unknown status";
    }
}

static void ckpt_error(char *err, size_t err_nbytes, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && err_nbytes > 0) {
        vsnprintf(err, err_nbytes, fmt, ap);
    } else if (!err) {
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* zlib's crc32 over n bytes, in chunks its uInt length can hold. */
static uint32_t ckpt_crc(const unsigned char *p, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        crc = crc32(crc, p, (uInt)chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

/* Total file bytes for the counts; 0 when that overflows. */
static size_t ckpt_file_bytes(uint64_t param_count, uint64_t velocity_count)
{
    uint64_t limit = (SIZE_MAX - CKPT_HEADER_BYTES - CKPT_CRC_BYTES) / 8;
    if (param_count > limit || velocity_count > limit) return 0;
    return CKPT_HEADER_BYTES + 4 * (size_t)param_count +
           4 * (size_t)velocity_count + CKPT_CRC_BYTES;
}

/* The folder that holds path ("." or "/" at the ends), malloc'ed; NULL
 * when out of memory. */
static char *ckpt_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    char *dir = malloc((size_t)(slash - path) + 1);
    if (dir) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = 0;
    }
    return dir;
}

/* fsync of the directory that holds path, so the rename is durable. */
static int ckpt_sync_dir(const char *path)
{
    char *dir = ckpt_dir_of(path);
    if (!dir) return -1;
    int fd = open(dir, O_RDONLY
#ifdef O_DIRECTORY
                            | O_DIRECTORY
#endif
    );
    free(dir);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    /* Some file systems refuse fsync on a directory: not an error. */
    if (rc != 0 && (errno == EINVAL || errno == EBADF)) rc = 0;
    close(fd);
    return rc;
}

/* PATH is replaced by rename, a link to a folder too (not followed);
 * PATH.tmp is opened, through a link (followed). */
static int ckpt_is_folder(const char *path, int follow)
{
    struct stat sb;
    return (follow ? stat(path, &sb) : lstat(path, &sb)) == 0 &&
           S_ISDIR(sb.st_mode);
}

int ckpt_check_dir(const char *path, char *err, size_t err_nbytes)
{
    if (!path || !*path) {
        ckpt_error(err, err_nbytes, "checkpoint: empty path");
        return CKPT_ERR_ARG;
    }
    char *dir = ckpt_dir_of(path);
    if (!dir) {
        ckpt_error(err, err_nbytes, "checkpoint %s: out of memory", path);
        return CKPT_ERR_NOMEM;
    }
    struct stat sb;
    const char *why = NULL;
    if (stat(dir, &sb) != 0) why = strerror(errno);
    else if (!S_ISDIR(sb.st_mode)) why = strerror(ENOTDIR);
    else if (access(dir, W_OK | X_OK) != 0) why = strerror(errno);
    if (why)
        ckpt_error(err, err_nbytes, "checkpoint %s: cannot write in its "
                   "folder %s: %s", path, dir, why);
    free(dir);
    if (why) return CKPT_ERR_IO;
    /* The write renames PATH.tmp over PATH: a folder at either would fail
     * it only after a whole epoch. */
    char tmp[PATH_MAX];
    const char *folder = NULL, *base = strrchr(path, '/');
    size_t base_len = strlen(base ? base + 1 : path);
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp ||
        base_len + 4 > NAME_MAX) {
        ckpt_error(err, err_nbytes, "checkpoint: a path of %zu bytes (its "
                   "name %zu), too long for its PATH.tmp: %s", strlen(path),
                   base_len, strerror(ENAMETOOLONG));
        return CKPT_ERR_IO;
    }
    if (path[strlen(path) - 1] == '/' || ckpt_is_folder(path, 0))
        folder = path;
    else if (ckpt_is_folder(tmp, 1))
        folder = tmp;
    if (!folder) return CKPT_OK;
    ckpt_error(err, err_nbytes, "checkpoint %s: %s is a folder, not a file",
               path, folder);
    return CKPT_ERR_IO;
}

int ckpt_write(const char *path, const ckpt_state_t *st, char *err,
               size_t err_nbytes)
{
    if (!path || !*path || !st || !st->kind ||
        strlen(st->kind) >= CKPT_KIND_MAX || !st->params ||
        st->param_count == 0 ||
        (st->velocity_count != 0 && st->velocity_count != st->param_count) ||
        (st->velocity_count != 0 && !st->velocity)) {
        ckpt_error(err, err_nbytes, "checkpoint %s: invalid arguments",
                   path ? path : "(null)");
        return CKPT_ERR_ARG;
    }
    size_t nbytes = ckpt_file_bytes(st->param_count, st->velocity_count);
    size_t path_len = strlen(path);
    unsigned char *buf = nbytes ? malloc(nbytes) : NULL;
    char *tmp = malloc(path_len + 5);
    if (!buf || !tmp) {
        free(buf);
        free(tmp);
        ckpt_error(err, err_nbytes, "checkpoint %s: out of memory", path);
        return CKPT_ERR_NOMEM;
    }
    memcpy(tmp, path, path_len);
    memcpy(tmp + path_len, ".tmp", 5);

    memcpy(buf, ckpt_magic, 8);
    put_u32(buf + 8, CKPT_VERSION);
    memset(buf + 12, 0, CKPT_KIND_MAX);
    memcpy(buf + 12, st->kind, strlen(st->kind));
    put_u64(buf + 20, st->param_count);
    put_u64(buf + 28, st->velocity_count);
    put_u64(buf + 36, (uint64_t)st->epoch);
    put_u64(buf + 44, st->rng_state);
    unsigned char *p = buf + CKPT_HEADER_BYTES;
    memcpy(p, st->params, 4 * st->param_count);
    p += 4 * st->param_count;
    if (st->velocity_count) memcpy(p, st->velocity, 4 * st->velocity_count);
    p += 4 * st->velocity_count;
    put_u32(p, ckpt_crc(buf, nbytes - CKPT_CRC_BYTES));

    const char *what = "open";
    FILE *f = fopen(tmp, "wb");
    if (!f) goto fail;
    what = "write";
    if (fwrite(buf, 1, nbytes, f) != nbytes) goto fail_close;
    what = "flush";
    if (fflush(f) != 0) goto fail_close;
    what = "fsync";
    if (fsync(fileno(f)) != 0) goto fail_close;
    what = "close";
    if (fclose(f) != 0) { f = NULL; goto fail_unlink; }
    f = NULL;
    what = "rename";
    if (rename(tmp, path) != 0) goto fail_unlink;
    if (ckpt_sync_dir(path) != 0) {
        ckpt_error(err, err_nbytes,
                   "checkpoint %s: fsync of its directory failed: %s", path,
                   strerror(errno));
        free(buf);
        free(tmp);
        return CKPT_ERR_IO;
    }
    free(buf);
    free(tmp);
    return CKPT_OK;

fail_close : {
    int e = errno;
    fclose(f);
    errno = e;
}
fail_unlink : {
    int e = errno;
    unlink(tmp);
    errno = e;
}
fail:
    ckpt_error(err, err_nbytes, "checkpoint %s: %s of %s failed: %s", path,
               what, tmp, strerror(errno));
    free(buf);
    free(tmp);
    return CKPT_ERR_IO;
}

int ckpt_read(const char *path, ckpt_state_t *st, char *err,
              size_t err_nbytes)
{
    if (!path || !*path || !st || !st->kind || !st->params ||
        (st->velocity_count != 0 && !st->velocity)) {
        ckpt_error(err, err_nbytes, "checkpoint %s: invalid arguments",
                   path ? path : "(null)");
        return CKPT_ERR_ARG;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        ckpt_error(err, err_nbytes, "checkpoint %s: cannot open: %s", path,
                   strerror(errno));
        return CKPT_ERR_IO;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        ckpt_error(err, err_nbytes, "checkpoint %s: not a regular file", path);
        fclose(f);
        return CKPT_ERR_IO;
    }
    size_t size = (size_t)sb.st_size;
    if ((off_t)size != sb.st_size || size < CKPT_HEADER_BYTES + CKPT_CRC_BYTES) {
        ckpt_error(err, err_nbytes,
                   "checkpoint %s: truncated: %lld bytes, less than a header",
                   path, (long long)sb.st_size);
        fclose(f);
        return CKPT_ERR_FORMAT;
    }
    unsigned char *buf = malloc(size);
    if (!buf) {
        ckpt_error(err, err_nbytes, "checkpoint %s: out of memory", path);
        fclose(f);
        return CKPT_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, size, f);
    int read_err = ferror(f);
    fclose(f);
    int status = CKPT_ERR_FORMAT;
    if (read_err || got != size) {
        ckpt_error(err, err_nbytes, "checkpoint %s: read error (%zu of %zu "
                   "bytes)", path, got, size);
        status = CKPT_ERR_IO;
        goto out;
    }
    if (memcmp(buf, ckpt_magic, 8) != 0) {
        ckpt_error(err, err_nbytes, "checkpoint %s: bad magic: not a hvd "
                   "checkpoint", path);
        goto out;
    }
    uint32_t version = get_u32(buf + 8);
    if (version != CKPT_VERSION) {
        ckpt_error(err, err_nbytes, "checkpoint %s: version %u, expected %d",
                   path, (unsigned)version, CKPT_VERSION);
        goto out;
    }
    uint64_t pcount = get_u64(buf + 20), vcount = get_u64(buf + 28);
    size_t want = ckpt_file_bytes(pcount, vcount);
    if (want == 0 || want != size) {
        ckpt_error(err, err_nbytes,
                   "checkpoint %s: %s: %zu bytes, its header says %zu", path,
                   want > size ? "truncated" : "wrong length", size, want);
        goto out;
    }
    uint32_t crc_file = get_u32(buf + size - CKPT_CRC_BYTES);
    uint32_t crc = ckpt_crc(buf, size - CKPT_CRC_BYTES);
    if (crc != crc_file) {
        ckpt_error(err, err_nbytes, "checkpoint %s: CRC mismatch (file "
                   "0x%08x, computed 0x%08x): corrupt", path,
                   (unsigned)crc_file, (unsigned)crc);
        goto out;
    }
    char kind[CKPT_KIND_MAX + 1];
    memcpy(kind, buf + 12, CKPT_KIND_MAX);
    kind[CKPT_KIND_MAX] = 0;
    if (strcmp(kind, st->kind) != 0) {
        ckpt_error(err, err_nbytes, "checkpoint %s: model \"%s\", expected "
                   "\"%s\"", path, kind, st->kind);
        goto out;
    }
    if (pcount != st->param_count || vcount != st->velocity_count) {
        ckpt_error(err, err_nbytes,
                   "checkpoint %s: %llu parameters and %llu momentum values, "
                   "expected %zu and %zu", path, (unsigned long long)pcount,
                   (unsigned long long)vcount, st->param_count,
                   st->velocity_count);
        goto out;
    }
    int64_t epoch = (int64_t)get_u64(buf + 36);
    if (epoch < 0) {
        ckpt_error(err, err_nbytes, "checkpoint %s: negative epoch %lld",
                   path, (long long)epoch);
        goto out;
    }
    /* Everything checks out: only now copy into the caller's state. */
    const unsigned char *p = buf + CKPT_HEADER_BYTES;
    memcpy(st->params, p, 4 * pcount);
    p += 4 * pcount;
    if (vcount) memcpy(st->velocity, p, 4 * vcount);
    st->epoch = epoch;
    st->rng_state = get_u64(buf + 44);
    status = CKPT_OK;
out:
    free(buf);
    return status;
}
