/* examples/train_loop.h: the data-parallel training loop that the training
 * programs (train_fmnist, train_cifar10) share. Every rank holds a replica,
 * reads its own shard of the training set (reshuffled every epoch from the
 * shared seed), normalises each batch per channel, and hvd's
 * DistributedOptimizer averages the gradients while backward goes on. Rank 0
 * prints progress and the test accuracy after each epoch (computed on all
 * ranks over their part of the test set and reduced) and writes a
 * checkpoint each epoch; --resume continues from it exactly (bitwise on the
 * CPU).
 *
 * A program is a train_loop_config_t (its name, data set, loader, image
 * shape and normalisation constants) handed to train_loop_main, which
 * parses the flags (train_loop_flags.c), checks that every rank was given
 * the same ones where they must agree, and runs the rest (train_loop.c).
 * The learning-rate schedule is one function in train_loop.c.
 * --device cuda trains on the rank's GPU (the model's backend): batches
 * are copied to it, the step runs there, checkpoints hold host copies in
 * the same format (a GPU run resumes on the CPU and the other way round).
 * Left out: Nesterov / weight decay flags, augmentation, the sharded step
 * on the GPU. Prefix train_loop_.
 */
#ifndef HVD_EXAMPLES_TRAIN_LOOP_H
#define HVD_EXAMPLES_TRAIN_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include "examples/data.h"
#include "examples/trainer.h"

enum { TRAIN_LOOP_CHANNELS_MAX = 4 };

/* A data set's loader: data_idx_load or data_cifar_load. */
typedef int (*train_loop_load_t)(data_set_t *ds, const char *dir,
                                 data_split_t split, char *err,
                                 size_t err_nbytes);

/* What one training program is. */
typedef struct {
    const char *name;      /* "train_fmnist": usage and every message */
    const char *data_what; /* --help's words for --data: "Fashion-MNIST IDX
                              files" */
    const char *data_dir;  /* --data's default */
    train_loop_load_t load;
    size_t channels, height, width; /* the images load must give */
    /* Per-channel statistics of the [0, 1] pixels (channels values each):
     * --normalize on trains on (x - mean[ch]) / std[ch]. */
    float mean[TRAIN_LOOP_CHANNELS_MAX], std[TRAIN_LOOP_CHANNELS_MAX];
    /* Checkpoints name their model "KIND.TAG" ("cnn.c10"), or just "KIND"
     * when tag is NULL, so that one program refuses another's checkpoint by
     * name; KIND.TAG must stay under CKPT_KIND_MAX (8) characters. */
    const char *ckpt_tag;
} train_loop_config_t;

/* The flags, parsed. */
typedef struct {
    const char *model;    /* mlp or cnn */
    long long epochs;     /* 2 unless given; see max_steps */
    int epochs_given;
    long long batch_size; /* per rank */
    double lr;            /* base: the schedule scales it (train_loop.c) */
    uint64_t seed;
    const char *data;
    const char *checkpoint;
    int resume;
    int fp16_allreduce;    /* 1: gradients travel as float16 */
    int shard_optimizer;   /* 1: each rank steps its share (ZeRO-1); the
                              default, unless fp16_allreduce */
    long long max_steps;   /* 0: no limit; without --epochs, the epochs
                              are as many as these steps take */
    long long train_limit; /* 0: every training image */
    const char *device;   /* cpu or cuda: auto is resolved when parsed */
    int device_auto;      /* 1: --device auto chose it */
    const char *progress; /* auto, bar (\r) or lines */
    int normalize;        /* 1: per-channel mean/std of the config */
    int profile;          /* 1: each rank prints where its steps' time went */
    int help;
} train_loop_options_t;

/* Parses argv in prog/'s grammar into *opt, with cfg's defaults, after
 * prog_identify(). Returns 0; 1 after --help (usage printed by rank 0);
 * -1 when refused (prog_refuse: rank 0 said why, prog_refusal() keeps it).
 */
int train_loop_parse_flags(const train_loop_config_t *cfg, int argc,
                           char **argv, train_loop_options_t *opt);

/* Enough for train_loop_flags_to_agree's list. */
enum { TRAIN_LOOP_AGREED_MAX = 16 };

/* The flags of opt that every rank must be given alike, into flags (room
 * for TRAIN_LOOP_AGREED_MAX); returns how many. */
size_t train_loop_flags_to_agree(const train_loop_options_t *opt,
                                 trainer_flag_t *flags);

/* The whole program: hvd_init, flags, data, model, training, hvd_shutdown.
 * Returns the exit status: 0, 1 (data, checkpoint or training error), 2
 * (bad flags). Messages start with cfg->name. */
int train_loop_main(const train_loop_config_t *cfg, int argc, char **argv);

#endif /* HVD_EXAMPLES_TRAIN_LOOP_H */
