/* test/test_data.c: the examples' data readers and sharding, in one process.
 *
 * Readers: small IDX (gzipped and plain) and CIFAR-10 files written into a
 * mkdtemp directory are read back exactly; missing, corrupt, truncated and
 * mismatched files fail with the right status, a message naming the file,
 * and a zeroed data set. Sharding: ranks N = 1..5 simulated in a loop. If
 * the real Fashion-MNIST is installed it is loaded and checked too (that
 * part alone is skipped when it is absent).
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "examples/data.h"
#include "test/test.h"

static char root[64];

/* ---- writing test files ---- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void write_file(const char *path, const void *buf, size_t nbytes, int gz)
{
    int ok;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ok = f &&
             (nbytes == 0 || gzwrite(f, buf, (unsigned)nbytes) == (int)nbytes);
        ok = f && gzclose(f) == Z_OK && ok;
    } else {
        FILE *f = fopen(path, "wb");
        ok = f && fwrite(buf, 1, nbytes, f) == nbytes;
        ok = f && fclose(f) == 0 && ok;
    }
    if (!ok) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(TEST_HARD_ERROR);
    }
}

static uint8_t *read_whole(const char *path, size_t *nbytes)
{
    static uint8_t buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (!f) exit(TEST_HARD_ERROR);
    *nbytes = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return buf;
}

static char *dir_make(const char *name)
{
    static char dirs[32][128];
    static int dir_count;
    char *d = dirs[dir_count++];
    snprintf(d, 128, "%s/%s", root, name);
    if (mkdir(d, 0700) != 0) exit(TEST_HARD_ERROR);
    return d;
}

static uint8_t pixel(size_t i, size_t k)
{
    return (uint8_t)(i * 31 + k * 7); /* hits 0 and 255 */
}

/* An IDX images file of count images of rows x cols (+ extra bytes, or
 * short by -extra), and a labels file of label_count labels i % 10. */
static void write_idx(const char *dir, const char *prefix, int gz,
                      uint32_t magic, uint32_t count, uint32_t rows,
                      uint32_t cols, int extra, uint32_t label_count)
{
    static uint8_t buf[1 << 20];
    char path[256];
    size_t nbytes = 16 + (size_t)count * rows * cols;
    put_be32(buf, magic);
    put_be32(buf + 4, count), put_be32(buf + 8, rows), put_be32(buf + 12, cols);
    for (size_t k = 16; k < nbytes + (extra > 0 ? extra : 0); k++)
        buf[k] = pixel((k - 16) / (rows * cols), (k - 16) % (rows * cols));
    snprintf(path, sizeof(path), "%s/%s-images-idx3-ubyte%s", dir, prefix,
             gz ? ".gz" : "");
    write_file(path, buf, nbytes + extra, gz);
    put_be32(buf, 0x801), put_be32(buf + 4, label_count);
    for (size_t i = 0; i < label_count; i++)
        buf[8 + i] = (uint8_t)(i % 10);
    snprintf(path, sizeof(path), "%s/%s-labels-idx1-ubyte%s", dir, prefix,
             gz ? ".gz" : "");
    write_file(path, buf, 8 + label_count, gz);
}

/* ---- checks ---- */

static int is_zeroed(const data_set_t *ds)
{
    return !ds->images && !ds->labels && ds->count == 0 && ds->channels == 0;
}

/* status is want, ds is zeroed, and err names file and says what. */
#define EXPECT_ERR(status, want, ds, err, file, what)                          \
    do {                                                                       \
        TEST_EQ(status, want);                                                 \
        TEST_TRUE(is_zeroed(&(ds)));                                           \
        printf("  expected error: %s\n", err);                                 \
        if (!strstr(err, file) || !strstr(err, what))                          \
            TEST_FAIL("message \"%s\" lacks \"%s\" or \"%s\"", err, file,      \
                      what);                                                   \
    } while (0)

static void check_idx_set(const data_set_t *ds, size_t count, size_t rows,
                          size_t cols)
{
    TEST_EQ(ds->count, count);
    TEST_EQ(ds->channels, 1);
    TEST_EQ(ds->height, rows);
    TEST_EQ(ds->width, cols);
    TEST_EQ(data_image_count(ds), rows * cols);
    for (size_t i = 0; i < ds->count && i < count; i++) {
        TEST_EQ(ds->labels[i], i % 10);
        for (size_t k = 0; k < rows * cols; k++)
            if (ds->images[i * rows * cols + k] !=
                (float)pixel(i, k) / 255.0f) {
                TEST_FAIL("image %zu pixel %zu = %g", i, k,
                          ds->images[i * rows * cols + k]);
                return;
            }
    }
}

static void test_idx_good(void)
{
    char err[512] = "";
    data_set_t ds;
    /* gzipped, rows != cols to catch a swap */
    char *d = dir_make("idx_gz");
    write_idx(d, "train", 1, 0x803, 23, 3, 5, 0, 23);
    write_idx(d, "t10k", 1, 0x803, 4, 3, 5, 0, 4);
    TEST_EQ(data_idx_load(&ds, d, DATA_TRAIN, err, sizeof(err)), 0);
    check_idx_set(&ds, 23, 3, 5);
    data_free(&ds);
    TEST_TRUE(is_zeroed(&ds));
    data_free(&ds); /* twice is fine */
    TEST_EQ(data_idx_load(&ds, d, DATA_TEST, err, sizeof(err)), 0);
    check_idx_set(&ds, 4, 3, 5);
    data_free(&ds);
    /* plain files without .gz: found by the fallback, read by gzread */
    d = dir_make("idx_plain");
    write_idx(d, "train", 0, 0x803, 300, 28, 28, 0, 300);
    TEST_EQ(data_idx_load(&ds, d, DATA_TRAIN, err, sizeof(err)), 0);
    check_idx_set(&ds, 300, 28, 28);
    data_free(&ds);
}

static void test_idx_errors(void)
{
    char err[512], path[256];
    data_set_t ds;
    int st;
#define LOAD(dir)                                                              \
    (memset(&ds, 0xab, sizeof(ds)), err[0] = 0,                                \
     data_idx_load(&ds, dir, DATA_TRAIN, err, sizeof(err)))
    char *d = dir_make("idx_missing");
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_IO, ds, err, "train-images-idx3-ubyte.gz",
               "No such file");
    write_idx(d, "t10k", 1, 0x803, 2, 2, 2, 0, 2); /* wrong split only */
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_IO, ds, err, "train-images", "cannot open");

    d = dir_make("idx_nolabels");
    write_idx(d, "train", 1, 0x803, 2, 2, 2, 0, 2);
    snprintf(path, sizeof(path), "%s/train-labels-idx1-ubyte.gz", d);
    unlink(path);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_IO, ds, err, "train-labels-idx1-ubyte.gz",
               "No such file");

    d = dir_make("idx_magic");
    write_idx(d, "train", 1, 0x801, 2, 2, 2, 0, 2);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "bad magic");

    d = dir_make("idx_mismatch");
    write_idx(d, "train", 1, 0x803, 7, 2, 2, 0, 6);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-labels", "6 labels");
    TEST_TRUE(strstr(err, "7 images") != NULL);

    d = dir_make("idx_short");
    write_idx(d, "train", 1, 0x803, 7, 2, 2, -1, 7);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "truncated");

    d = dir_make("idx_long");
    write_idx(d, "train", 0, 0x803, 7, 2, 2, 3, 7);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "more bytes");

    d = dir_make("idx_absurd");
    write_idx(d, "train", 1, 0x803, 2, 0, 2, 0, 2);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "absurd");
    uint8_t hdr[16] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0x86, 0xa0};
    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", d);
    write_file(path, hdr, sizeof(hdr), 1); /* 1 x 100000 */
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "absurd");

    d = dir_make("idx_label10");
    write_idx(d, "train", 1, 0x803, 11, 2, 2, 0, 11);
    snprintf(path, sizeof(path), "%s/train-labels-idx1-ubyte.gz", d);
    uint8_t lab[8 + 11] = {0, 0, 8, 1, 0, 0, 0, 11};
    lab[8 + 9] = 10;
    write_file(path, lab, sizeof(lab), 1);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-labels", "label 10");

    /* A gzip stream cut short, one with a flipped byte, a 3-byte file. */
    size_t nbytes;
    d = dir_make("idx_cut");
    write_idx(d, "train", 1, 0x803, 200, 8, 8, 0, 200);
    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", d);
    uint8_t *gz = read_whole(path, &nbytes);
    write_file(path, gz, nbytes - 9, 0); /* into the trailer */
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "truncated");
    write_file(path, gz, nbytes / 2, 0);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "truncated");
    gz[nbytes / 2] ^= 0x55;
    write_file(path, gz, nbytes, 0);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "corrupt");
    write_file(path, "\0\0\x08", 3, 0);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "train-images", "header");

    /* A directory where a file should be; a tiny err buffer; stderr. */
    d = dir_make("idx_dir");
    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz", d);
    mkdir(path, 0700);
    st = LOAD(d);
    EXPECT_ERR(st, DATA_ERR_IO, ds, err, "train-images", "Is a directory");
    char tiny[8];
    memset(tiny, 'x', sizeof(tiny));
    TEST_EQ(data_idx_load(&ds, d, DATA_TRAIN, tiny, sizeof(tiny)) < 0, 1);
    TEST_EQ(strlen(tiny), 7);
    fprintf(stderr, "(expected error on stderr follows)\n");
    TEST_EQ(data_idx_load(&ds, d, DATA_TRAIN, NULL, 0) < 0, 1);
    TEST_EQ(data_idx_load(&ds, d, (data_split_t)7, err, sizeof(err)),
            DATA_ERR_ARG);
#undef LOAD
}

/* ---- CIFAR-10 ---- */

static uint8_t cifar_pixel(size_t i, size_t k)
{
    return (uint8_t)(i * 13 + k * 5 + k / 1024);
}

/* record_count records, global numbering from first_idx; label i % 10. */
static void write_cifar(const char *dir, const char *name, size_t first_idx,
                        size_t record_count, int extra)
{
    static uint8_t buf[8 * 3073 + 16];
    char path[256];
    for (size_t r = 0; r < record_count; r++) {
        buf[r * 3073] = (uint8_t)((first_idx + r) % 10);
        for (size_t k = 0; k < 3072; k++)
            buf[r * 3073 + 1 + k] = cifar_pixel(first_idx + r, k);
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    write_file(path, buf, record_count * 3073 + extra, 0);
}

static void write_cifar_set(const char *dir)
{
    static const size_t counts[5] = {2, 3, 1, 2, 4};
    char name[32];
    for (size_t f = 0, first = 0; f < 5; first += counts[f++]) {
        snprintf(name, sizeof(name), "data_batch_%zu.bin", f + 1);
        write_cifar(dir, name, first, counts[f], 0);
    }
    write_cifar(dir, "test_batch.bin", 0, 3, 0);
}

static void test_cifar(void)
{
    char err[512] = "", path[256];
    data_set_t ds;
    char *d = dir_make("cifar");
    write_cifar_set(d);
    TEST_EQ(data_cifar_load(&ds, d, DATA_TRAIN, err, sizeof(err)), 0);
    TEST_EQ(ds.count, 12);
    TEST_EQ(ds.channels, 3);
    TEST_EQ(ds.height, 32);
    TEST_EQ(ds.width, 32);
    int bad = 0;
    for (size_t i = 0; i < ds.count; i++) {
        TEST_EQ(ds.labels[i], i % 10);
        for (size_t ch = 0; ch < 3; ch++)
            for (size_t y = 0; y < 32; y++)
                for (size_t x = 0; x < 32; x++)
                    bad +=
                        ds.images[((i * 3 + ch) * 32 + y) * 32 + x] !=
                        (float)cifar_pixel(i, ch * 1024 + y * 32 + x) / 255.0f;
    }
    TEST_EQ(bad, 0);
    /* gather: samples 11 and 0 */
    float img[2 * 3072];
    int lab[2];
    size_t idx[2] = {11, 0};
    data_gather(&ds, idx, 2, img, lab);
    TEST_EQ(lab[0], 1);
    TEST_EQ(lab[1], 0);
    TEST_TRUE(memcmp(img, ds.images + 11 * 3072, 3072 * sizeof(float)) == 0);
    TEST_TRUE(memcmp(img + 3072, ds.images, 3072 * sizeof(float)) == 0);
    data_free(&ds);
    TEST_EQ(data_cifar_load(&ds, d, DATA_TEST, err, sizeof(err)), 0);
    TEST_EQ(ds.count, 3);
    data_free(&ds);

    int st;
#define LOAD()                                                                 \
    (memset(&ds, 0xab, sizeof(ds)), err[0] = 0,                                \
     data_cifar_load(&ds, d, DATA_TRAIN, err, sizeof(err)))
    write_cifar(d, "data_batch_3.bin", 5, 2, 5);
    st = LOAD();
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "data_batch_3.bin", "multiple");
    write_cifar(d, "data_batch_3.bin", 5, 0, 0);
    st = LOAD();
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "data_batch_3.bin", "multiple");
    write_cifar(d, "data_batch_3.bin", 5, 1, 0);
    snprintf(path, sizeof(path), "%s/data_batch_4.bin", d);
    uint8_t *rec = read_whole(path, &(size_t){0});
    rec[3073] = 10; /* record 1's label */
    write_file(path, rec, 2 * 3073, 0);
    st = LOAD();
    EXPECT_ERR(st, DATA_ERR_FORMAT, ds, err, "data_batch_4.bin", "label 10");
    TEST_TRUE(strstr(err, "record 1") != NULL);
    unlink(path);
    st = LOAD();
    EXPECT_ERR(st, DATA_ERR_IO, ds, err, "data_batch_4.bin", "No such file");
    mkdir(path, 0700); /* a folder where the file should be */
    st = LOAD();
    EXPECT_ERR(st, DATA_ERR_IO, ds, err, "data_batch_4.bin",
               "not a regular file");
#undef LOAD
}

/* ---- normalisation ---- */

static void test_normalize(void)
{
    /* 2 images of 3 channels of 2 x 2: channel ch of image i is i + ch. */
    float x[2 * 3 * 4], want[2 * 3 * 4];
    const float mean[3] = {0.5f, 1.0f, -2.0f}, sd[3] = {0.25f, 2.0f, 1.0f};
    for (size_t k = 0; k < 24; k++) {
        size_t i = k / 12, ch = k / 4 % 3;
        x[k] = (float)(i + ch) + 0.125f * (float)(k % 4);
        want[k] = (x[k] - mean[ch]) / sd[ch];
    }
    TEST_EQ(data_normalize(x, 2, 3, 4, mean, sd), 0);
    TEST_TRUE(memcmp(x, want, sizeof x) == 0);
    TEST_TRUE(x[0] == -2.0f && x[23] == 5.375f); /* by hand */
    /* Bad statistics are refused and leave the images alone. */
    const float zero[3] = {0.25f, 0.0f, 1.0f}, neg[3] = {1, 1, -1};
    TEST_EQ(data_normalize(x, 2, 3, 4, mean, zero), DATA_ERR_ARG);
    TEST_EQ(data_normalize(x, 2, 3, 4, mean, neg), DATA_ERR_ARG);
    TEST_EQ(data_normalize(x, 2, 3, 4, NULL, sd), DATA_ERR_ARG);
    TEST_TRUE(memcmp(x, want, sizeof x) == 0);
    /* The data sets' constants have one value per channel. */
    const float fm[] = DATA_FMNIST_MEAN, cs[] = DATA_CIFAR_STD;
    TEST_EQ(sizeof fm / sizeof fm[0], 1);
    TEST_EQ(sizeof cs / sizeof cs[0], 3);
}

/* ---- sharding ---- */

static void test_rng(void)
{
    /* Reference outputs of splitmix64 for seed 1234567. */
    static const uint64_t want[3] = {6457827717110365317u, 3203168211198807973u,
                                     9817491932198370423u};
    uint64_t s = 1234567;
    for (int k = 0; k < 3; k++)
        TEST_TRUE(data_splitmix64(&s) == want[k]);
    /* Unbiased: all 6 orders of 3 items equally often over 60000 epochs. */
    int seen[6] = {0};
    size_t o[3];
    for (uint64_t e = 0; e < 60000; e++) {
        data_shuffle(o, 3, 42, e);
        seen[o[0] * 2 + (o[1] > o[2])]++;
    }
    for (int p = 0; p < 6; p++)
        if (seen[p] < 9500 || seen[p] > 10500)
            TEST_FAIL("order %d seen %d times of 60000, want ~10000", p,
                      seen[p]);
}

/* The padded global order rebuilt from the ranks' shards, checked. */
static void check_epoch(size_t sample_count, size_t rank_count,
                        size_t batch_size, uint64_t seed, uint64_t epoch,
                        size_t *order, size_t *single)
{
    data_shard_t sh[5];
    size_t shard_count = (sample_count + rank_count - 1) / rank_count;
    size_t total = shard_count * rank_count;
    for (size_t r = 0; r < rank_count; r++) {
        TEST_EQ(data_shard_init(&sh[r], sample_count, r, rank_count, batch_size,
                                seed ^ 1),
                0);
        data_shard_set_epoch(&sh[r], epoch + 5);
        data_shard_set_epoch(&sh[r], epoch); /* going back reproduces */
        TEST_EQ(sh[r].shard_count, shard_count);
        TEST_EQ(data_shard_batch_count(&sh[r]),
                (shard_count + batch_size - 1) / batch_size);
        /* Batches, in order, are the shard: full but for the last. */
        size_t j = 0;
        for (size_t b = 0; b < data_shard_batch_count(&sh[r]); b++) {
            const size_t *idx;
            size_t n = data_shard_batch(&sh[r], b, &idx);
            TEST_TRUE(n == batch_size ||
                      (b + 1 == data_shard_batch_count(&sh[r]) && n > 0));
            for (size_t k = 0; k < n; k++, j++)
                order[j * rank_count + r] = idx[k];
        }
        TEST_EQ(j, shard_count);
        const size_t *none;
        TEST_EQ(data_shard_batch(&sh[r], j, &none), 0);
    }
    /* Disjoint and covering: the first sample_count are a permutation,
     * and they are the order a single rank with the same seed sees. */
    char *hit = calloc(sample_count, 1);
    data_shuffle(single, sample_count, seed ^ 1, epoch);
    for (size_t k = 0; k < sample_count; k++) {
        TEST_TRUE(order[k] < sample_count && !hit[order[k]]);
        if (order[k] < sample_count) hit[order[k]] = 1;
        if (order[k] != single[k]) {
            TEST_FAIL("n=%zu N=%zu: position %zu differs from one rank's "
                      "order",
                      sample_count, rank_count, k);
            break;
        }
    }
    /* The padding wraps around to the start of the order. */
    for (size_t k = sample_count; k < total; k++)
        TEST_EQ(order[k], order[k % sample_count]);
    free(hit);
    for (size_t r = 0; r < rank_count; r++)
        data_shard_free(&sh[r]);
    TEST_TRUE(sh[0].shard_idx == NULL);
}

static void test_shard(void)
{
    static const size_t sample_counts[] = {1, 2, 3, 7, 10, 13, 64, 1001};
    static const size_t batch_sizes[] = {1, 3, 32};
    size_t *order = malloc(2000 * sizeof(size_t));
    size_t *single = malloc(2000 * sizeof(size_t));
    size_t *prev = malloc(2000 * sizeof(size_t));
    for (size_t s = 0; s < sizeof(sample_counts) / sizeof(size_t); s++)
        for (size_t n = 1; n <= 5; n++)
            for (size_t b = 0; b < 3; b++)
                for (uint64_t e = 0; e < 3; e++)
                    check_epoch(sample_counts[s], n, batch_sizes[b], 99, e,
                                order, single);
    /* Epochs and seeds change the order. */
    data_shuffle(prev, 1001, 7, 0);
    data_shuffle(order, 1001, 7, 1);
    TEST_TRUE(memcmp(prev, order, 1001 * sizeof(size_t)) != 0);
    data_shuffle(order, 1001, 8, 0);
    TEST_TRUE(memcmp(prev, order, 1001 * sizeof(size_t)) != 0);
    data_shuffle(order, 1001, 7, 0);
    TEST_TRUE(memcmp(prev, order, 1001 * sizeof(size_t)) == 0);
    /* N ranks with batch B see, per step, one rank's batch N*B. */
    for (size_t n = 1; n <= 5; n++) {
        data_shard_t one, sh;
        TEST_EQ(data_shard_init(&one, 60, 0, 1, 2 * n, 3), 0);
        data_shard_set_epoch(&one, 4);
        for (size_t step = 0; step < 60 / (2 * n); step++) {
            char in_one[60] = {0};
            const size_t *idx;
            size_t got = data_shard_batch(&one, step, &idx);
            for (size_t k = 0; k < got; k++)
                in_one[idx[k]]++;
            for (size_t r = 0; r < n; r++) {
                TEST_EQ(data_shard_init(&sh, 60, r, n, 2, 3), 0);
                data_shard_set_epoch(&sh, 4);
                got = data_shard_batch(&sh, step, &idx);
                for (size_t k = 0; k < got; k++)
                    in_one[idx[k]]--;
                data_shard_free(&sh);
            }
            for (size_t k = 0; k < 60; k++)
                TEST_EQ(in_one[k], 0);
        }
        data_shard_free(&one);
    }
    data_shard_t sh;
    TEST_EQ(data_shard_init(&sh, 0, 0, 1, 1, 0), DATA_ERR_ARG);
    TEST_EQ(data_shard_init(&sh, 5, 2, 2, 1, 0), DATA_ERR_ARG);
    TEST_EQ(data_shard_init(&sh, 5, 0, 2, 0, 0), DATA_ERR_ARG);
    free(prev);
    free(single);
    free(order);
}

/* ---- the real Fashion-MNIST, when installed ---- */

static void test_real_fmnist(void)
{
    char err[512], path[256];
    snprintf(path, sizeof(path), "%s/train-images-idx3-ubyte.gz",
             DATA_FMNIST_DIR);
    if (access(path, R_OK) != 0) {
        printf("skipping the real Fashion-MNIST: %s absent\n", path);
        return;
    }
    static const size_t want[2] = {60000, 10000};
    for (int split = 0; split < 2; split++) {
        data_set_t ds;
        int st =
            data_idx_load(&ds, NULL, (data_split_t)split, err, sizeof(err));
        TEST_EQ(st, 0);
        if (st) {
            fprintf(stderr, "%s\n", err);
            continue;
        }
        TEST_EQ(ds.count, want[split]);
        TEST_EQ(ds.channels, 1);
        TEST_EQ(ds.height, 28);
        TEST_EQ(ds.width, 28);
        size_t per_class[DATA_CLASS_COUNT] = {0}, out_of_range = 0;
        for (size_t i = 0; i < ds.count; i++)
            if (ds.labels[i] >= 0 && ds.labels[i] < DATA_CLASS_COUNT)
                per_class[ds.labels[i]]++;
        for (int c = 0; c < DATA_CLASS_COUNT; c++)
            TEST_EQ(per_class[c], want[split] / 10); /* balanced classes */
        for (size_t k = 0; k < ds.count * 784; k++)
            out_of_range += !(ds.images[k] >= 0 && ds.images[k] <= 1);
        TEST_EQ(out_of_range, 0);
        data_free(&ds);
    }
    printf("real Fashion-MNIST: 60000 + 10000 images checked\n");
}

static int remove_entry(const char *path, const struct stat *st, int type,
                        struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/hvd_test_data_XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return TEST_HARD_ERROR;
    }
    test_idx_good();
    test_idx_errors();
    test_cifar();
    test_normalize();
    test_rng();
    test_shard();
    test_real_fmnist();
    nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_exit_code();
}
