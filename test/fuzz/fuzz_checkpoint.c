/* test/fuzz/fuzz_checkpoint.c: the checkpoint reader (examples/checkpoint.c),
 * which --resume points at a file.
 *
 * Input: a flags byte, then the file. Flags bit 0 patches a valid CRC32
 * into the file's last 4 bytes first: random bytes would almost all fail
 * the CRC, and this lets them reach the header and size checks. Bit 1
 * makes the caller expect an "mlp" of 1 parameter without momentum (a
 * training program's mismatch); otherwise it expects what the header says,
 * as far as a real caller can (a kind of 1..7 characters, at least one
 * parameter, momentum 0 or one per parameter).
 *
 * A failure must be a format or I/O error (never out of memory: the reader
 * allocates the file's size), name the file and leave the caller's state
 * as it was. A success must be the file's bytes exactly; then ckpt_write
 * of what was read must give the same file (up to the bytes after the
 * kind's NUL, which the writer zeroes) and reading that back the same
 * state.
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "examples/checkpoint.h"
#include "test/fuzz/fuzz.h"

enum { HEADER_NBYTES = 52, KIND_AT = 12, FILL = 0xa5 };

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_crc(uint8_t *file, size_t n)
{
    uint32_t crc = (uint32_t)crc32(0L, file, (uInt)(n - 4));
    for (int i = 0; i < 4; i++)
        file[n - 4 + i] = (uint8_t)(crc >> (8 * i));
}

/* A folder for the round trip's file, made once, removed at exit. */
static char tmp_dir[64];
static void remove_tmp_dir(void)
{
    rmdir(tmp_dir);
}
static const char *round_trip_path(void)
{
    static char path[96];
    if (!tmp_dir[0]) {
        struct stat st;
        snprintf(tmp_dir, sizeof tmp_dir, "%s/hvd-fuzz-XXXXXX",
                 stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp");
        FUZZ_CHECK(mkdtemp(tmp_dir) != NULL);
        atexit(remove_tmp_dir);
        snprintf(path, sizeof path, "%s/ckpt", tmp_dir);
    }
    return path;
}

/* The caller's state for a file of n bytes (see the top comment). */
static void expect(ckpt_state_t *st, char *kind, const uint8_t *file, size_t n,
                   int fixed)
{
    *st = (ckpt_state_t){.kind = "mlp", .param_count = 1};
    if (!fixed && n >= HEADER_NBYTES) {
        memcpy(kind, file + KIND_AT, 7);
        kind[7] = 0;
        if (kind[0]) st->kind = kind;
        uint64_t pcount = le64(file + 20), vcount = le64(file + 28);
        if (pcount >= 1 && pcount <= n / 4) st->param_count = pcount;
        if (vcount == st->param_count) st->velocity_count = vcount;
    }
    st->params = malloc(4 * st->param_count);
    st->velocity = malloc(4 * st->velocity_count + 1);
    FUZZ_CHECK(st->params && st->velocity);
    memset(st->params, FILL, 4 * st->param_count);
    memset(st->velocity, FILL, 4 * st->velocity_count);
    st->epoch = -FILL;
    st->rng_state = FILL;
}

static void release(ckpt_state_t *st)
{
    free(st->params);
    free(st->velocity);
}

static int untouched(const ckpt_state_t *st)
{
    const uint8_t *p = (const uint8_t *)st->params;
    const uint8_t *v = (const uint8_t *)st->velocity;
    for (size_t i = 0; i < 4 * st->param_count; i++)
        if (p[i] != FILL) return 0;
    for (size_t i = 0; i < 4 * st->velocity_count; i++)
        if (v[i] != FILL) return 0;
    return st->epoch == -FILL && st->rng_state == FILL;
}

/* The file again, from ckpt_write of st: as file, its kind NUL-padded. */
static void check_round_trip(const ckpt_state_t *st, const uint8_t *file,
                             size_t n)
{
    const char *path = round_trip_path();
    char err[512];
    FUZZ_CHECK(ckpt_write(path, st, err, sizeof err) == CKPT_OK);
    uint8_t *want = malloc(n), *got = malloc(n + 1);
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(want && got && f);
    FUZZ_CHECK(fread(got, 1, n + 1, f) == n);
    fclose(f);
    memcpy(want, file, n);
    size_t kind_len = strlen(st->kind);
    memset(want + KIND_AT + kind_len, 0, 8 - kind_len);
    put_crc(want, n);
    FUZZ_CHECK(memcmp(got, want, n) == 0);

    ckpt_state_t again = *st;
    again.params = malloc(4 * st->param_count);
    again.velocity = malloc(4 * st->velocity_count + 1);
    FUZZ_CHECK(ckpt_read(path, &again, err, sizeof err) == CKPT_OK);
    FUZZ_CHECK(memcmp(again.params, st->params, 4 * st->param_count) == 0);
    FUZZ_CHECK(memcmp(again.velocity, st->velocity, 4 * st->velocity_count) ==
               0);
    FUZZ_CHECK(again.epoch == st->epoch && again.rng_state == st->rng_state);
    release(&again);
    free(want);
    free(got);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int flags = data[0];
    size_t n = size - 1;
    uint8_t *file = malloc(n + 1);
    FUZZ_CHECK(file != NULL);
    memcpy(file, data + 1, n);
    if ((flags & 1) && n >= 4) put_crc(file, n);
    const char *path = fuzz_file(0, file, n);

    ckpt_state_t st;
    char kind[8], err[512] = "";
    expect(&st, kind, file, n, flags & 2);
    int status = ckpt_read(path, &st, err, sizeof err);
    if (status != CKPT_OK) {
        /* Not CKPT_ERR_NOMEM: the reader allocates the file's size. */
        FUZZ_CHECK(status == CKPT_ERR_FORMAT || status == CKPT_ERR_IO);
        FUZZ_CHECK(strstr(err, path) != NULL);
        FUZZ_CHECK(untouched(&st));
    } else {
        FUZZ_CHECK(n == HEADER_NBYTES + 4 * st.param_count +
                            4 * st.velocity_count + 4);
        FUZZ_CHECK(memcmp(file + KIND_AT, st.kind, strlen(st.kind) + 1) == 0);
        FUZZ_CHECK(st.epoch >= 0 && (uint64_t)st.epoch == le64(file + 36));
        FUZZ_CHECK(st.rng_state == le64(file + 44));
        FUZZ_CHECK(
            memcmp(st.params, file + HEADER_NBYTES, 4 * st.param_count) == 0);
        FUZZ_CHECK(memcmp(st.velocity,
                          file + HEADER_NBYTES + 4 * st.param_count,
                          4 * st.velocity_count) == 0);
        check_round_trip(&st, file, n);
    }
    release(&st);
    free(file);
    return 0;
}
