/* examples/data.h: the training programs' data, in memory, and each rank's
 * share of it. Readers for Fashion-MNIST's IDX files (gzipped or plain,
 * through zlib) and CIFAR-10's binary batches; sharding and per-epoch
 * shuffling from a seed shared by all ranks.
 *
 * Pure data code: no MPI here. Sharding takes the rank and the number of
 * ranks as arguments, so it can be tested by simulating ranks in a loop.
 * The loaders only scale pixels to [0, 1]; per-channel mean/std
 * normalisation is data_normalize's, which the training loop applies to
 * each gathered batch (so the sets in memory keep their [0, 1] pixels).
 * Left out: augmentation, streaming from disk (a whole split is read into
 * memory).
 */
#ifndef HVD_EXAMPLES_DATA_H
#define HVD_EXAMPLES_DATA_H

#include <stddef.h>
#include <stdint.h>

/* Statuses: 0 or negative. ARG and NOMEM share hvd's values. */
#define DATA_STATUS_MAP(X)                                                     \
    X(OK, 0, "success")                                                        \
    X(ERR_ARG, -1, "invalid argument")                                         \
    X(ERR_NOMEM, -6, "out of memory")                                          \
    X(ERR_IO, -20, "data file missing or unreadable")                          \
    X(ERR_FORMAT, -21, "data file malformed (bad header, size or value)")

typedef enum {
#define DATA_STATUS_ENUM(name, value, text) DATA_##name = value,
    DATA_STATUS_MAP(DATA_STATUS_ENUM)
#undef DATA_STATUS_ENUM
} data_status_t;

const char *data_strerror(int status);

enum { DATA_CLASS_COUNT = 10 }; /* both data sets */
#define DATA_FMNIST_DIR "/usr/share/datasets/fashion-mnist"
#define DATA_CIFAR_DIR "/usr/share/datasets/cifar-10"

typedef enum { DATA_TRAIN, DATA_TEST } data_split_t;

/* A labelled image set. Pixels are float32 in [0, 1], exactly
 * (float)byte / 255.0f, stored channel-major like CIFAR's files and NCHW
 * convolutions: image i, channel ch, row y, column x is
 *   images[((i * channels + ch) * height + y) * width + x].
 * Fashion-MNIST: channels 1, 28 x 28; CIFAR-10: channels 3, 32 x 32. */
typedef struct {
    float *images; /* (count, channels, height, width) */
    int *labels;   /* (count), each in [0, DATA_CLASS_COUNT) */
    size_t count;  /* images */
    size_t channels, height, width;
} data_set_t;

/* Floats per image: channels * height * width. */
size_t data_image_count(const data_set_t *ds);

/* A 32-bit checksum (zlib's crc32) of ds's labels and of up to 64 of its
 * images, evenly spaced: for ranks that loaded their sets apart to see
 * whether they hold the same data, without reading every pixel again. */
uint32_t data_fingerprint(const data_set_t *ds);

/* Releases ds's arrays and zeroes it; accepts NULL and a zeroed or freed
 * set. */
void data_free(data_set_t *ds);

/* Error reporting for the loaders below: on failure the message (naming
 * the file and what is wrong) is written to err (err_nbytes bytes, always
 * NUL-terminated) or, when err is NULL, printed on stderr. On failure *ds
 * is left zeroed: never half-filled. *ds is overwritten, not freed first. */

/* Fashion-MNIST / MNIST IDX files of a split from dir (NULL: the default
 * DATA_FMNIST_DIR): train-images-idx3-ubyte.gz and train-labels-idx1-ubyte.gz,
 * or t10k-*; a name without .gz (uncompressed) is tried when the .gz one
 * does not exist. Checks magics (0x803 images, 0x801 labels), dimensions
 * (1..4096 per side), that image and label counts agree, that the data is
 * neither short nor followed by more bytes, and labels < 10.
 * Returns 0, DATA_ERR_IO, DATA_ERR_FORMAT, DATA_ERR_NOMEM or DATA_ERR_ARG. */
int data_idx_load(data_set_t *ds, const char *dir, data_split_t split,
                  char *err, size_t err_nbytes);

/* The same from two explicit paths (gzipped or plain). */
int data_idx_load_files(data_set_t *ds, const char *images_path,
                        const char *labels_path, char *err, size_t err_nbytes);

/* CIFAR-10 binary batches of a split from dir: data_batch_1.bin ..
 * data_batch_5.bin (train) or test_batch.bin (test), records of one label
 * byte and 3072 pixel bytes (3 x 32 x 32, channel-major). A file that is
 * empty or whose size is not a multiple of 3073 bytes, or a label > 9, is
 * DATA_ERR_FORMAT naming the file (and the record). Statuses as above. */
int data_cifar_load(data_set_t *ds, const char *dir, data_split_t split,
                    char *err, size_t err_nbytes);

/* The same from file_count explicit paths, concatenated in order. */
int data_cifar_load_files(data_set_t *ds, const char *const *paths,
                          size_t file_count, char *err, size_t err_nbytes);

/* Copies the images and labels of sample_count samples, sample_idx[k] for
 * k < sample_count, into images (sample_count * data_image_count(ds)
 * floats) and labels (sample_count ints). Indices must be < ds->count. */
void data_gather(const data_set_t *ds, const size_t *sample_idx,
                 size_t sample_count, float *images, int *labels);

/* Per-channel standardisation in place, as torchvision's Normalize:
 * x = (x - mean[ch]) / std[ch] for every float of channel ch of each of
 * sample_count images of channels x plane_count floats (plane_count:
 * height * width), laid out as data_set_t's. mean and std hold channels
 * values; each std must be > 0 and finite. Returns 0 or DATA_ERR_ARG
 * (NULL arrays, a bad std; then images is unchanged). */
int data_normalize(float *images, size_t sample_count, size_t channels,
                   size_t plane_count, const float *mean, const float *std);

/* Fashion-MNIST's and CIFAR-10's per-channel statistics of the training
 * pixels in [0, 1], the values the PyTorch examples use. */
#define DATA_FMNIST_MEAN {0.2860f}
#define DATA_FMNIST_STD {0.3530f}
#define DATA_CIFAR_MEAN {0.4914f, 0.4822f, 0.4465f}
#define DATA_CIFAR_STD {0.2470f, 0.2435f, 0.2616f}

/* ---- sharding and shuffling (examples/shard.c) ---- */

/* splitmix64 (Steele, Lea, Flood 2014): advances *state and returns the
 * next 64 random bits. Deterministic on every platform. */
uint64_t data_splitmix64(uint64_t *state);

/* Writes a permutation of 0..count-1 into order_idx, a function of (seed,
 * epoch) only: Fisher-Yates driven by splitmix64, unbiased. */
void data_shuffle(size_t *order_idx, size_t count, uint64_t seed,
                  uint64_t epoch);

/* One rank's share of an epoch, as PyTorch's DistributedSampler does it:
 * every rank shuffles all sample_count indices the same way (same seed and
 * epoch), pads the order to a multiple of rank_count by wrapping around to
 * its start (so the first pad samples are seen twice in that epoch), and
 * takes every rank_count-th entry starting at its rank:
 *
 *   sample_count 7, rank_count 3, order 4 0 6 2 5 1 3 | pad 4 0
 *   rank 0: 4 2 3    rank 1: 0 5 4    rank 2: 6 1 0
 *
 * Every rank gets shard_count = ceil(sample_count / rank_count) samples and
 * so the same number of batches. Strided shards also make the ranks' batch
 * b together the single-rank batch b of rank_count times the size: N ranks
 * with batch B/N see the same data per step as one rank with batch B. */
typedef struct {
    size_t sample_count; /* samples in the data set */
    size_t shard_count;  /* samples per rank per epoch, padding included */
    size_t batch_size;   /* samples per batch on this rank */
    size_t rank_idx, rank_count;
    uint64_t seed, epoch;
    size_t *shard_idx; /* (shard_count) this epoch's samples, in order */
    size_t *order_idx; /* (sample_count) scratch: the global order */
} data_shard_t;

/* Sets up rank rank_idx of rank_count (rank_idx < rank_count) over
 * sample_count > 0 samples in batches of batch_size > 0, and shuffles
 * epoch 0. Returns 0, DATA_ERR_ARG or DATA_ERR_NOMEM (then *sh is
 * zeroed). Free with data_shard_free. */
int data_shard_init(data_shard_t *sh, size_t sample_count, size_t rank_idx,
                    size_t rank_count, size_t batch_size, uint64_t seed);

/* Reshuffles for epoch: the order depends on (seed, epoch) only, so a
 * resumed run calls this with the epoch it resumes at and gets the same
 * order as the uninterrupted one. */
void data_shard_set_epoch(data_shard_t *sh, uint64_t epoch);

/* Batches per epoch: ceil(shard_count / batch_size), the same on every
 * rank; the last one is short when batch_size does not divide
 * shard_count. */
size_t data_shard_batch_count(const data_shard_t *sh);

/* Points *sample_idx at batch batch_idx (< data_shard_batch_count) of the
 * current epoch and returns its sample count (0 for a batch_idx out of
 * range). The pointer is valid until the next set_epoch or free. */
size_t data_shard_batch(const data_shard_t *sh, size_t batch_idx,
                        const size_t **sample_idx);

/* Releases sh's arrays and zeroes it; accepts NULL and a freed shard. */
void data_shard_free(data_shard_t *sh);

#endif /* HVD_EXAMPLES_DATA_H */
