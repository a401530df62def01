/* examples/checkpoint.h: the training programs' checkpoints: a model's
 * parameters, the SGD momentum buffer, the epochs completed and the model's
 * RNG state, in one file checked by a CRC32, written atomically.
 *
 * File layout (all integers little-endian; floats in the host's byte
 * order, which is little-endian on every machine we build for):
 *   offset  size
 *   0       8   magic "HVDCKPT\0"
 *   8       4   version (CKPT_VERSION)
 *   12      8   model kind, NUL-padded ("mlp", "cnn")
 *   20      8   param_count
 *   28      8   velocity_count (param_count, or 0 without momentum)
 *   36      8   epoch: epochs completed (int64)
 *   44      8   rng_state: the model's generator (uint64)
 *   52      4 * param_count     parameters (float32)
 *   ...     4 * velocity_count  momentum buffer (float32)
 *   end-4   4   CRC32 (zlib's crc32) of every byte before it
 *
 * Writing goes to PATH.tmp, which is flushed, fsync'ed and renamed onto
 * PATH, and then the directory is fsync'ed: a crash leaves the old file or
 * the new one, never a mix. Reading checks the magic, version, kind, sizes
 * (the file must be exactly as long as its header says) and the CRC before
 * it copies anything out: a corrupt, truncated or mismatched file is
 * refused and the caller's buffers are left untouched.
 *
 * No MPI here: the training program reads on rank 0 and broadcasts.
 * Left out: other optimizers' state, fp16 parameters, big-endian hosts.
 */
#ifndef HVD_EXAMPLES_CHECKPOINT_H
#define HVD_EXAMPLES_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

/* 2: parameters in models/'s reverse layout (last tensor first); a version
 * 1 file holds them in forward order and is refused, not misread. */
enum { CKPT_VERSION = 2, CKPT_KIND_MAX = 8 };

/* Statuses: 0 or negative; ARG and NOMEM share hvd's values, IO and FORMAT
 * examples/data.h's. */
#define CKPT_STATUS_MAP(X)                                                     \
    X(OK, 0, "success")                                                        \
    X(ERR_ARG, -1, "invalid argument")                                         \
    X(ERR_NOMEM, -6, "out of memory")                                          \
    X(ERR_IO, -20, "checkpoint file missing, unreadable or unwritable")        \
    X(ERR_FORMAT, -21, "checkpoint file corrupt, truncated or mismatched")

typedef enum {
#define CKPT_STATUS_ENUM(name, value, text) CKPT_##name = value,
    CKPT_STATUS_MAP(CKPT_STATUS_ENUM)
#undef CKPT_STATUS_ENUM
} ckpt_status_t;

const char *ckpt_strerror(int status);

/* What a checkpoint holds. The arrays belong to the caller: ckpt_write
 * reads them, ckpt_read fills them (only when the whole file checks out). */
typedef struct {
    const char *kind;      /* model kind, < CKPT_KIND_MAX chars */
    size_t param_count;    /* floats in params */
    float *params;         /* (param_count) */
    size_t velocity_count; /* param_count, or 0 (then velocity may be NULL) */
    float *velocity;       /* (velocity_count) SGD momentum buffer */
    int64_t epoch;         /* epochs completed */
    uint64_t rng_state;    /* the model's RNG state */
} ckpt_state_t;

/* Error reporting: on failure a message naming the file and what is wrong
 * goes to err (err_nbytes bytes, always NUL-terminated) or, when err is
 * NULL, to stderr. */

/* Whether a checkpoint could be written at path: its folder exists and we
 * may create files in it, and neither path nor its PATH.tmp is a
 * folder. Training programs ask before the first epoch, so that a typo in
 * the path does not cost an epoch. Returns CKPT_OK, CKPT_ERR_ARG (empty
 * path) or CKPT_ERR_IO. */
int ckpt_check_dir(const char *path, char *err, size_t err_nbytes);

/* Writes st to path atomically (see above). Returns CKPT_OK, CKPT_ERR_ARG
 * or CKPT_ERR_IO (PATH.tmp is removed then; PATH is left as it was). */
int ckpt_write(const char *path, const ckpt_state_t *st, char *err,
               size_t err_nbytes);

/* Reads path into st: st->kind, param_count and velocity_count say what the
 * caller expects and must match the file's; params and velocity receive
 * the arrays, epoch and rng_state the scalars. Returns CKPT_OK,
 * CKPT_ERR_ARG, CKPT_ERR_NOMEM, CKPT_ERR_IO (missing or unreadable) or
 * CKPT_ERR_FORMAT (bad magic, version, kind, sizes, length or CRC); on
 * failure nothing in st is changed. */
int ckpt_read(const char *path, ckpt_state_t *st, char *err,
              size_t err_nbytes);

#endif /* HVD_EXAMPLES_CHECKPOINT_H */
