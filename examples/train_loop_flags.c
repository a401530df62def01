/* examples/train_loop_flags.c: the training programs' flags in prog/'s
 * grammar (getopt_long, the benchmarks' messages, exit 2), their --help,
 * and the flags every rank must be given alike; see examples/train_loop.h.
 * Values are checked here, before any training, so that a bad flag exits
 * 2 naming it.
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <string.h>

#include "examples/train_loop.h"
#include "prog/prog.h"

enum {
    OPT_MODEL = 256, OPT_EPOCHS, OPT_BATCH_SIZE, OPT_LR, OPT_SEED, OPT_DATA,
    OPT_NORMALIZE, OPT_CHECKPOINT, OPT_RESUME, OPT_FP16, OPT_SHARD,
    OPT_MAX_STEPS, OPT_TRAIN_LIMIT, OPT_DEVICE, OPT_PROGRESS, OPT_PROFILE
};

static const struct option long_options[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch-size", required_argument, NULL, OPT_BATCH_SIZE},
    {"lr", required_argument, NULL, OPT_LR},
    {"seed", required_argument, NULL, OPT_SEED},
    {"data", required_argument, NULL, OPT_DATA},
    {"normalize", required_argument, NULL, OPT_NORMALIZE},
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"fp16-allreduce", no_argument, NULL, OPT_FP16},
    {"shard-optimizer", required_argument, NULL, OPT_SHARD},
    {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
    {"train-limit", required_argument, NULL, OPT_TRAIN_LIMIT},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"progress", required_argument, NULL, OPT_PROGRESS},
    {"profile", no_argument, NULL, OPT_PROFILE},
    PROG_END_LONG_OPTIONS,
};

/* The option lines of --help; the data set's words are cfg's. */
static void usage_options(const train_loop_config_t *cfg, char *buf,
                          size_t n)
{
    snprintf(buf, n,
        "      --model mlp|cnn      network (mlp)\n"
        "      --epochs E           epochs, 1..100000 (2; with --max-steps\n"
        "                           alone, as many as its steps take)\n"
        "      --batch-size B       samples per batch per rank, 1..65536 "
        "(64)\n"
        "      --lr LR              base learning rate, > 0 and <= 100 "
        "(0.05);\n"
        "                           warmed up to LR x ranks over the first\n"
        "                           epoch, then a cosine decay to 0 at the "
        "last\n"
        "      --seed S             seed of the weights and the shuffling "
        "(42)\n"
        "      --data DIR           %s (%s)\n"
        "      --normalize on|off   train and test on (x - mean) / std per\n"
        "                           channel, the data set's statistics "
        "(off:\n"
        "                           pixels in [0, 1] trained better at the\n"
        "                           default LR)\n"
        "      --checkpoint PATH    rank 0 writes PATH after each epoch\n"
        "      --resume             continue from --checkpoint PATH\n"
        "      --fp16-allreduce     gradients travel as float16 (half the\n"
        "                           bytes; the update stays float32)\n"
        "      --shard-optimizer on|off  each rank updates only its share "
        "of\n"
        "                           the parameters and receives the "
        "others'\n"
        "                           (ZeRO stage 1): the same parameters, "
        "less\n"
        "                           work per rank (on, or off with\n"
        "                           --fp16-allreduce or on the GPU)\n"
        "      --max-steps K        stop after K steps in total (counted "
        "from\n"
        "                           epoch 0); alone, K steps are trained\n"
        "      --train-limit N      use only the first N training images\n"
        "      --device cpu|cuda|auto  where to train: the CPU, the rank's\n"
        "                           GPU, or the GPU when one is visible in\n"
        "                           a CUDA build (cpu)\n"
        "      --progress auto|bar|lines  rank 0's progress: one updating "
        "line\n"
        "                           (bar), a line every tenth of an epoch\n"
        "                           (lines), or bar when stdout is a "
        "terminal\n"
        "                           (auto; mpirun may give ranks a "
        "terminal\n"
        "                           even when redirected)\n"
        "      --profile            each rank prints at the end where its\n"
        "                           steps' wall time went, in ms a step:\n"
        "                           batches, forward, backward, the\n"
        "                           DistributedOptimizer's step, reading\n"
        "                           the loss (the first 10 steps left out)\n",
        cfg->data_what, cfg->data_dir);
}

static const char usage_notes[] =
    "Every rank must be given the same flags (checked at start: exit 2\n"
    "naming the flag), except --data (each rank's folder, holding the same\n"
    "files), the PATH of --checkpoint (rank 0's is written; --checkpoint\n"
    "itself is given to all ranks or none), --progress (rank 0 prints) and\n"
    "--profile.\n"
    "Exit status: 0, 1 data, checkpoint or training error, 2 bad flags.\n";

/* A value that must be one of words: the word into *out; 0, or -1
 * (refused, saying want). */
static int word_value(int opt, const char *val, const char *const *words,
                      const char *want, const char **out)
{
    int k = prog_parse_word(val, words);

    if (k < 0) return prog_bad_value(long_options, opt, val, want);
    *out = words[k];
    return 0;
}

/* An integer value in [min, max] into *out; 0, or -1 (refused, saying
 * want). */
static int ll_value(int opt, const char *val, long long min, long long max,
                    const char *want, long long *out)
{
    if (prog_parse_ll(val, min, max, out))
        return prog_bad_value(long_options, opt, val, want);
    return 0;
}

/* One flag with its value into o: 0, or -1 (refused). */
static int parse_value(int opt, const char *val, train_loop_options_t *o)
{
    static const char *const models[] = {"mlp", "cnn", NULL};
    static const char *const devices[] = {"cpu", "cuda", "auto", NULL};
    static const char *const progress[] = {"auto", "bar", "lines", NULL};
    static const char *const off_on[] = {"off", "on", NULL};
    const struct option *lo = long_options;
    int k;

    switch (opt) {
    case OPT_MODEL:
        return word_value(opt, val, models, "expected mlp or cnn", &o->model);
    case OPT_EPOCHS:
        o->epochs_given = 1;
        return ll_value(opt, val, 1, 100000,
                        "expected an integer from 1 to 100000", &o->epochs);
    case OPT_BATCH_SIZE:
        return ll_value(opt, val, 1, 65536,
                        "expected an integer from 1 to 65536",
                        &o->batch_size);
    case OPT_LR:
        if (prog_parse_double(val, &o->lr) || !(o->lr > 0.0) || o->lr > 100)
            return prog_bad_value(lo, opt, val,
                                  "expected a number > 0 and <= 100");
        return 0;
    case OPT_SEED:
        if (prog_parse_u64(val, &o->seed))
            return prog_bad_value(lo, opt, val,
                                  "expected an unsigned 64-bit integer");
        return 0;
    case OPT_DATA:
    case OPT_CHECKPOINT:
        /* A flag where the path should be (`--checkpoint --resume`, or
         * `-h`): getopt takes it as the value. A name that starts with
         * '-' is given as ./-name. */
        if (!*val || *val == '-')
            return prog_bad_value(lo, opt, val, opt == OPT_DATA
                                                    ? "expected a directory"
                                                    : "expected a path");
        *(opt == OPT_DATA ? &o->data : &o->checkpoint) = val;
        return 0;
    case OPT_MAX_STEPS:
    case OPT_TRAIN_LIMIT:
        return ll_value(opt, val, 1, LLONG_MAX / 2, "expected an integer >= 1",
                        opt == OPT_MAX_STEPS ? &o->max_steps
                                             : &o->train_limit);
    case OPT_DEVICE:
        return word_value(opt, val, devices, "expected cpu, cuda or auto",
                          &o->device);
    case OPT_PROGRESS:
        return word_value(opt, val, progress, "expected auto, bar or lines",
                          &o->progress);
    default: /* OPT_NORMALIZE, OPT_SHARD */
        if ((k = prog_parse_word(val, off_on)) < 0)
            return prog_bad_value(lo, opt, val, "expected on or off");
        *(opt == OPT_NORMALIZE ? &o->normalize : &o->shard_optimizer) = k;
        return 0;
    }
}

int train_loop_parse_flags(const train_loop_config_t *cfg, int argc,
                           char **argv, train_loop_options_t *o)
{
    static char options_text[4096];
    const prog_cli_t cli = {.optstring = ":h", .long_options = long_options,
                            .usage_args = "[options]   (run it under "
                                          "mpirun -np N)\n",
                            .usage_options = options_text,
                            .usage_notes = usage_notes};
    int opt;

    usage_options(cfg, options_text, sizeof options_text);
    *o = (train_loop_options_t){.model = "mlp", .epochs = 2,
                                .batch_size = 64, .lr = 0.05, .seed = 42,
                                .data = cfg->data_dir, .device = "cpu",
                                .progress = "auto", .normalize = 0,
                                .shard_optimizer = -1};
    while ((opt = prog_getopt(argc, argv, &cli)) >= 0) {
        if (opt == OPT_RESUME)
            o->resume = 1;
        else if (opt == OPT_FP16)
            o->fp16_allreduce = 1;
        else if (opt == OPT_PROFILE)
            o->profile = 1;
        else if (parse_value(opt, optarg, o) != 0)
            return -1;
    }
    if (opt != PROG_OPT_END) {
        o->help = opt == PROG_OPT_HELP;
        return o->help ? 1 : -1;
    }
    if (o->resume && !o->checkpoint)
        return prog_refuse("--resume needs --checkpoint PATH");
    if (o->shard_optimizer == 1 && o->fp16_allreduce)
        return prog_refuse("--shard-optimizer on: the sharded step reduces "
                           "float32 gradients; drop --fp16-allreduce");
    if (trainer_device_choose(&o->device, &o->device_auto) != 0) return -1;
    int on_gpu = !strcmp(o->device, "cuda");
    if (o->shard_optimizer == 1 && on_gpu)
        return prog_refuse("--shard-optimizer on: the sharded step runs on "
                           "the host; on the GPU drop it");
    if (o->shard_optimizer == -1)
        o->shard_optimizer = !o->fp16_allreduce && !on_gpu;
    return 0;
}

/* A count that 0 leaves unset: "not given" then. */
static void count_flag(trainer_flag_t *f, const char *flag, long long v)
{
    if (v > 0)
        trainer_flag_text(f, flag, "%lld", v);
    else
        trainer_flag_text(f, flag, "not given");
}

size_t train_loop_flags_to_agree(const train_loop_options_t *o,
                                 trainer_flag_t *flags)
{
    static const char *const given[] = {"not given", "given"};
    static const char *const off_on[] = {"off", "on"};
    trainer_flag_t *f = flags;

    trainer_flag_text(f++, "model", "%s", o->model);
    count_flag(f++, "epochs", o->epochs_given ? o->epochs : 0);
    trainer_flag_text(f++, "batch-size", "%lld", o->batch_size);
    trainer_flag_text(f++, "lr", "%.17g", o->lr);
    trainer_flag_text(f++, "seed", "%llu", (unsigned long long)o->seed);
    trainer_flag_text(f++, "normalize", "%s", off_on[o->normalize]);
    trainer_flag_text(f++, "checkpoint", "%s", given[!!o->checkpoint]);
    trainer_flag_text(f++, "resume", "%s", given[o->resume]);
    trainer_flag_text(f++, "fp16-allreduce", "%s",
                      given[o->fp16_allreduce]);
    trainer_flag_text(f++, "shard-optimizer", "%s",
                      off_on[o->shard_optimizer > 0]);
    count_flag(f++, "max-steps", o->max_steps);
    count_flag(f++, "train-limit", o->train_limit);
    trainer_flag_text(f++, "device", "%s", o->device);
    trainer_flag_text(f++, "help", "%s", given[o->help]);
    return (size_t)(f - flags);
}
