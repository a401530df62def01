/* test/fuzz/make_corpus.c: writes the fuzz targets' seed inputs,
 * DIR/NAME/SEED for each target fuzz_NAME, with the real writers where
 * there are some (ckpt_write, hvd__encode_requests, hvd__encode_plan) and
 * by hand where there are none (IDX, CIFAR-10): valid inputs, and the
 * faults test/README.md lists for each reader.
 *
 *   test/fuzz/make_corpus test/fuzz/corpus     (from the top of the tree)
 *
 * test/fuzz/corpus.sh checks that the committed corpus is what this writes
 * now, so seeds follow the formats when those change. Exit 99 on failure.
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "examples/checkpoint.h"
#include "hvd/plan.h"
#include "test/fuzz/fuzz.h"

enum { HARD_ERROR = 99, MAX_SEED = 16384 };

static const char *out_dir;

static void die(const char *what)
{
    fprintf(stderr, "make_corpus: %s: %s\n", what, strerror(errno));
    exit(HARD_ERROR);
}

/* A seed under construction: bytes appended, then written as a file. */
typedef struct {
    uint8_t bytes[MAX_SEED];
    size_t len;
} seed_t;

static void put(seed_t *s, const void *bytes, size_t n)
{
    if (s->len + n > sizeof s->bytes) {
        errno = EOVERFLOW;
        die("seed too long");
    }
    memcpy(s->bytes + s->len, bytes, n);
    s->len += n;
}

static void put_byte(seed_t *s, uint8_t b)
{
    put(s, &b, 1);
}

static void put_be32(seed_t *s, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
                    (uint8_t)v};
    put(s, b, 4);
}

/* fuzz_take's length prefix. */
static void put_len(seed_t *s, size_t n)
{
    uint8_t b[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                    (uint8_t)(n >> 24)};
    put(s, b, 4);
}

static void save(const char *target, const char *name, const seed_t *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) die(path);
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(s->bytes, 1, s->len, f) != s->len || fclose(f) != 0)
        die(path);
}

/* ---- IDX: flags, images (length-prefixed), labels ---- */

/* An images file of count images of rows x cols, short by cut bytes, and
 * a labels file of label_count labels, the last one last_label. */
static void idx_seed(const char *name, int flags, uint32_t magic,
                     uint32_t count, uint32_t rows, uint32_t cols, size_t cut,
                     uint32_t label_count, uint8_t last_label)
{
    seed_t images = {0}, labels = {0}, s = {0};
    put_be32(&images, magic);
    put_be32(&images, count);
    put_be32(&images, rows);
    put_be32(&images, cols);
    for (size_t k = 0; k < (size_t)count * rows * cols; k++)
        put_byte(&images, (uint8_t)(k * 37)); /* 0 and 255 among them */
    images.len -= cut;
    put_be32(&labels, 0x801);
    put_be32(&labels, label_count);
    for (uint32_t i = 0; i < label_count; i++)
        put_byte(&labels,
                 i + 1 == label_count ? last_label : (uint8_t)(i % 10));
    put_byte(&s, (uint8_t)flags);
    put_len(&s, images.len);
    put(&s, images.bytes, images.len);
    put(&s, labels.bytes, labels.len);
    save("idx", name, &s);
}

/* The same files gzipped here, passed as they are (flags 0): mutations
 * then hit zlib's checks of the stream. */
static void idx_gzipped_seed(void)
{
    seed_t images = {0}, labels = {0}, s = {0};
    put_be32(&images, 0x803);
    put_be32(&images, 2);
    put_be32(&images, 28);
    put_be32(&images, 28);
    for (size_t k = 0; k < 2 * 28 * 28; k++)
        put_byte(&images, (uint8_t)(k / 7));
    put_be32(&labels, 0x801);
    put_be32(&labels, 2);
    put_byte(&labels, 9);
    put_byte(&labels, 0);
    size_t gi_nbytes, gl_nbytes;
    uint8_t *gi = fuzz_gzip(images.bytes, images.len, &gi_nbytes);
    uint8_t *gl = fuzz_gzip(labels.bytes, labels.len, &gl_nbytes);
    if (!gi || !gl) die("gzip");
    put_byte(&s, 0);
    put_len(&s, gi_nbytes);
    put(&s, gi, gi_nbytes);
    put(&s, gl, gl_nbytes);
    free(gi);
    free(gl);
    save("idx", "gzipped_28x28", &s);
}

static void idx_seeds(void)
{
    idx_seed("plain", 0, 0x803, 3, 2, 3, 0, 3, 9);
    idx_seed("gzip_both", 3, 0x803, 3, 2, 3, 0, 3, 9);
    idx_seed("gzip_labels", 2, 0x803, 1, 1, 1, 0, 1, 0);
    idx_seed("label_10", 0, 0x803, 3, 2, 3, 0, 3, 10);
    idx_seed("count_mismatch", 0, 0x803, 3, 2, 3, 0, 2, 1);
    idx_seed("pixels_cut", 1, 0x803, 3, 2, 3, 1, 3, 1);
    idx_seed("magic_labels", 0, 0x801, 3, 2, 3, 0, 3, 1);
    idx_seed("absurd_side", 0, 0x803, 1, 4097, 1, 4097, 1, 1);
    idx_gzipped_seed();
}

/* ---- CIFAR-10: file count, files (all but the last length-prefixed) ---- */

enum { CIFAR_RECORD = 3073 };

/* One file of records records, the last one's label last_label, short by
 * cut bytes. */
static void cifar_file(seed_t *file, size_t records, uint8_t last_label,
                       size_t cut)
{
    for (size_t r = 0; r < records; r++) {
        put_byte(file, r + 1 == records ? last_label : (uint8_t)(r % 10));
        for (size_t k = 0; k + 1 < CIFAR_RECORD; k++)
            put_byte(file, (uint8_t)(k * 13 + r));
    }
    file->len -= cut;
}

static void cifar_seed(const char *name, const size_t *records, size_t files,
                       uint8_t last_label, size_t cut)
{
    seed_t s = {0};
    put_byte(&s, (uint8_t)(files - 1));
    for (size_t f = 0; f < files; f++) {
        seed_t file = {0};
        cifar_file(&file, records[f], last_label, f + 1 == files ? cut : 0);
        if (f + 1 < files) put_len(&s, file.len);
        put(&s, file.bytes, file.len);
    }
    save("cifar", name, &s);
}

static void cifar_seeds(void)
{
    cifar_seed("one_record", (size_t[]){1}, 1, 3, 0);
    cifar_seed("three_files", (size_t[]){1, 1, 1}, 3, 9, 0);
    cifar_seed("label_10", (size_t[]){1}, 1, 10, 0);
    cifar_seed("truncated", (size_t[]){1}, 1, 0, 1);
    cifar_seed("empty_second", (size_t[]){1, 0}, 2, 0, 0);
}

/* ---- checkpoints: flags, file ---- */

static char tmp_dir[64];

/* A checkpoint by ckpt_write, then changed at byte at (when at < its
 * length) to value. */
static void ckpt_seed(const char *name, int flags, const char *kind,
                      size_t param_count, size_t velocity_count, int64_t epoch,
                      size_t at, uint8_t value)
{
    float params[8], velocity[8];
    for (size_t i = 0; i < 8; i++) {
        params[i] = 0.25f * (float)i - 1.0f;
        velocity[i] = -0.5f * (float)i;
    }
    ckpt_state_t st = {
        kind,  param_count,        params, velocity_count, velocity,
        epoch, 0x9e3779b97f4a7c15u};
    char path[96], err[256];
    snprintf(path, sizeof path, "%s/ckpt", tmp_dir);
    if (ckpt_write(path, &st, err, sizeof err) != CKPT_OK) {
        fprintf(stderr, "make_corpus: %s\n", err);
        exit(HARD_ERROR);
    }
    seed_t s = {0};
    put_byte(&s, (uint8_t)flags);
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    s.len += fread(s.bytes + s.len, 1, sizeof s.bytes - s.len, f);
    fclose(f);
    unlink(path);
    if (at < s.len - 1) s.bytes[1 + at] = value;
    save("checkpoint", name, &s);
}

static void checkpoint_seeds(void)
{
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/make_corpus-XXXXXX");
    if (!mkdtemp(tmp_dir)) die("mkdtemp");
    size_t none = (size_t)-1;
    ckpt_seed("mlp_momentum", 0, "mlp", 6, 6, 3, none, 0);
    ckpt_seed("cnn_plain", 1, "cnn", 8, 0, 0, none, 0);
    ckpt_seed("other_model", 2, "mlp.c10", 2, 2, 1, none, 0);
    ckpt_seed("crc_wrong", 0, "mlp", 4, 4, 2, 60, 0x7f);
    ckpt_seed("version_1", 1, "mlp", 4, 4, 2, 8, 1);
    ckpt_seed("negative_epoch", 1, "mlp", 1, 0, 0, 43, 0x80);
    ckpt_seed("kind_padding", 1, "cnn", 1, 1, 0, 17, 'x');
    rmdir(tmp_dir);
}

/* ---- the environment: NAME=VALUE lines ---- */

static void env_seed(const char *name, const char *text)
{
    seed_t s = {0};
    put(&s, text, strlen(text));
    save("env", name, &s);
}

static void env_seeds(void)
{
    env_seed("empty", "");
    env_seed("all_valid", "HVD_FUSION_THRESHOLD=64K\n"
                          "HVD_CYCLE_TIME=2.5\n"
                          "HVD_TIMELINE=/tmp/timeline.json\n"
                          "HVD_STALL_CHECK_TIME=30\n"
                          "HVD_STALL_SHUTDOWN_TIME=0.5\n"
                          "HVD_LOG_LEVEL=Debug\n"
                          "HVD_BIND=numa\n"
                          "HVD_INTRANODE=shm\n"
                          "HVD_HIERARCHICAL_ALLREDUCE=1\n"
                          "HVD_SPIN_TIME=0.25\n"
                          "HVD_ALLREDUCE_ALGO=rdb\n"
                          "HVD_RING_SEGMENT_BYTES=64\n"
                          "HVD_RING_SMALL_BYTES=0\n"
                          "HVD_SHM_SEGMENT_BYTES=1073741824\n"
                          "HVD_RING_CHECK=1\n");
    env_seed("sizes", "HVD_FUSION_THRESHOLD=0\nHVD_RING_SEGMENT_BYTES=65536\n"
                      "HVD_FUSION_THRESHOLD=17179869183G\n");
    env_seed("empty_values", "HVD_FUSION_THRESHOLD=\nHVD_ALLREDUCE_ALGO=\n");
    env_seed("bad_bytes", "HVD_FUSION_THRESHOLD=12x\n");
    env_seed("bad_cycle", "HVD_CYCLE_TIME=60001\n");
    env_seed("bad_spin", "HVD_SPIN_TIME=1ms\n");
    env_seed("bad_stall", "HVD_STALL_CHECK_TIME=1s\nHVD_LOG_LEVEL=loud\n");
    env_seed("bad_names", "HVD_BIND=everywhere\nHVD_INTRANODE=tcp\n"
                          "HVD_HIERARCHICAL_ALLREDUCE=yes\n");
    env_seed("bad_ring", "HVD_ALLREDUCE_ALGO=fastest\n"
                         "HVD_RING_SEGMENT_BYTES=12x\n"
                         "HVD_RING_SMALL_BYTES=-5\n"
                         "HVD_SHM_SEGMENT_BYTES=16\n");
    env_seed("ring_too_big", "HVD_RING_SMALL_BYTES=1073741825\n");
    env_seed("ring_units", "HVD_RING_SEGMENT_BYTES=64K\nHVD_RING_SMALL_BYTES=0k\n"
                           "HVD_SHM_SEGMENT_BYTES=1G\n");
    env_seed("ring_units_too_big", "HVD_SHM_SEGMENT_BYTES=2g\n");
    env_seed("bad_check", "HVD_RING_CHECK=on\nHVD_ALLREDUCE_ALGO=ring\n");
    env_seed("shm_stream", "HVD_SHM_STREAM=on\n");
    env_seed("bad_shm_stream", "HVD_SHM_STREAM=ON\n");
    env_seed("ipc_wait", "HVD_RING_IPC_WAIT=host\nHVD_SHM_STREAM=on\n");
    env_seed("bad_ipc_wait", "HVD_RING_IPC_WAIT=gpu\n");
    env_seed("conv", "HVD_CONV=im2col\nHVD_CONV_TF32=1\n");
    env_seed("bad_conv", "HVD_CONV=CUDNN\nHVD_CONV_TF32=yes\n");
}

/* ---- negotiation: selector (bit 0: plan), message ---- */

static hvd__desc_t desc(const char *name, int kind, int dtype, int op, int root,
                        uint64_t count)
{
    hvd__desc_t d = {
        .kind = kind, .dtype = dtype, .op = op, .root = root, .count = count};
    snprintf(d.name, sizeof d.name, "%s", name);
    return d;
}

static void message_seed(const char *name, int selector, char *msg,
                         size_t nbytes)
{
    seed_t s = {0};
    put_byte(&s, (uint8_t)selector);
    put(&s, msg, nbytes);
    free(msg);
    save("negotiation", name, &s);
}

static void requests_seed(const char *name, const hvd__desc_t *descs, size_t n,
                          int joined)
{
    struct hvd_handle handles[4] = {0};
    hvd_handle_t reqs[4];
    for (size_t i = 0; i < n; i++) {
        handles[i].desc = descs[i];
        reqs[i] = &handles[i];
    }
    char *msg;
    size_t nbytes;
    if (hvd__encode_requests(reqs, n, joined, &msg, &nbytes) != HVD_OK)
        die("hvd__encode_requests");
    message_seed(name, 0, msg, nbytes);
}

static void negotiation_seeds(void)
{
    hvd__desc_t descs[4] = {
        desc("fc1.weight", HVD__ALLREDUCE, RING_FLOAT32, RING_AVERAGE, 0, 784),
        desc("fc1.bias", HVD__ALLREDUCE, RING_FLOAT32, RING_AVERAGE, 0, 10),
        desc("params", HVD__BROADCAST, RING_FLOAT32, RING_SUM, 3, 7850),
        desc("", HVD__ALLGATHER, RING_INT64, RING_SUM, 0, 1)};
    descs[3].mem = HVD__MEM_DEVICE; /* a device tensor's request */
    requests_seed("requests_none", NULL, 0, 0);
    requests_seed("requests_joined", NULL, 0, 1);
    requests_seed("requests_four", descs, 4, 0);

    hvd__response_t items[3] = {
        {{HVD_OK, 2, ""}, &descs[0]},
        {{HVD_OK, 1, ""}, &descs[2]},
        {{HVD_ERR_MISMATCH, 1,
          "'params': ranks disagree on root: rank 0 has broadcast ..."},
         &descs[2]}};
    hvd__plan_t plan = {items, 3, 3};
    char *msg;
    size_t nbytes;
    if (hvd__encode_plan(&(hvd__plan_t){0}, &msg, &nbytes) != HVD_OK)
        die("hvd__encode_plan");
    message_seed("plan_empty", 1, msg, nbytes);
    if (hvd__encode_plan(&plan, &msg, &nbytes) != HVD_OK)
        die("hvd__encode_plan");
    message_seed("plan_three", 1, msg, nbytes);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) die(out_dir);
    idx_seeds();
    cifar_seeds();
    checkpoint_seeds();
    env_seeds();
    negotiation_seeds();
    return 0;
}
