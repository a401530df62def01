/* examples/train_loop_flags.c: the training programs' flags and --help;
 * see examples/train_loop.h. Values are checked here, before MPI work
 * starts, so that a bad flag exits 2 naming it on every rank alike. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/train_loop.h"
#include "examples/trainer.h"

void train_loop_usage(const train_loop_config_t *cfg, FILE *f)
{
    fprintf(f,
        "usage: mpirun -np N %s [options]\n"
        "  --model mlp|cnn        network (mlp)\n"
        "  --epochs E             epochs, 1..100000 (2)\n"
        "  --batch-size B         samples per batch per rank, 1..65536 (64)\n"
        "  --lr LR                base learning rate, > 0 and <= 100 (0.05);\n"
        "                         warmed up to LR x ranks over the first "
        "epoch,\n"
        "                         then a cosine decay to 0 at the last\n"
        "  --seed S               seed of the weights and the shuffling (42)\n"
        "  --data DIR             %s (%s)\n"
        "  --normalize on|off     train and test on (x - mean) / std per\n"
        "                         channel, the data set's statistics (off:\n"
        "                         pixels in [0, 1] trained better at the\n"
        "                         default LR)\n"
        "  --checkpoint PATH      rank 0 writes PATH after each epoch\n"
        "  --resume               continue from --checkpoint PATH\n"
        "  --fp16-allreduce       gradients travel as float16 (half the "
        "bytes;\n"
        "                         the update stays float32)\n"
        "  --shard-optimizer on|off  each rank updates only its share of\n"
        "                         the parameters and receives the others'\n"
        "                         (ZeRO stage 1): the same parameters, less\n"
        "                         work per rank (on, or off with\n"
        "                         --fp16-allreduce)\n"
        "  --max-steps K          stop after K steps in total (counted from\n"
        "                         epoch 0), for tests\n"
        "  --train-limit N        use only the first N training images\n"
        "  --device cpu           where to train (cuda: not supported yet)\n"
        "  --progress auto|bar|lines  rank 0's progress: one updating line "
        "(bar),\n"
        "                         a line every tenth of an epoch (lines), or "
        "bar\n"
        "                         when stdout is a terminal (auto; mpirun may\n"
        "                         give ranks a terminal even when redirected)\n"
        "  --help                 this text\n",
        cfg->name, cfg->data_what, cfg->data_dir);
}

/* Parsers of flag values: 0, or -1 with a message in err. Decimal, as
 * synthetic_benchmark's: base 0 read --seed 010 as 8. */
static int parse_u64(const char *flag, const char *s, uint64_t *out,
                     char *err, size_t n)
{
    char *end;
    errno = 0;
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || *p == '-' || errno == ERANGE) {
        snprintf(err, n, "%s: \"%s\" is not an unsigned 64-bit integer", flag,
                 s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int parse_lr(const char *flag, const char *s, double *out, char *err,
                    size_t n)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v)) {
        snprintf(err, n, "%s: \"%s\" is not a number", flag, s);
        return -1;
    }
    if (!(v > 0.0) || v > 100.0) {
        snprintf(err, n, "%s: %g is out of range (0, 100]", flag, v);
        return -1;
    }
    *out = v;
    return 0;
}

/* A value that must be one of the words in `words` (NULL-terminated);
 * what names them in the message ("model", "device", ...). */
static int parse_word(const char *flag, const char *val,
                      const char *const *words, const char *what,
                      const char *choices, const char **out, char *err,
                      size_t n)
{
    for (size_t k = 0; words[k]; k++)
        if (!strcmp(val, words[k])) {
            *out = words[k];
            return 0;
        }
    snprintf(err, n, "%s: unknown %s \"%s\" (%s)", flag, what, val, choices);
    return -1;
}

/* A path-like value that must not be empty. */
static int parse_path(const char *flag, const char *val, const char *what,
                      const char **out, char *err, size_t n)
{
    if (!*val) {
        snprintf(err, n, "%s: empty %s", flag, what);
        return -1;
    }
    *out = val;
    return 0;
}

/* One flag with its value; 0 or -1 (err). */
static int parse_value(const char *flag, const char *val,
                       train_loop_options_t *o, char *err, size_t n)
{
    static const char *const models[] = {"mlp", "cnn", NULL};
    static const char *const devices[] = {"cpu", "cuda", NULL};
    static const char *const progress[] = {"auto", "bar", "lines", NULL};
    static const char *const on_off[] = {"on", "off", NULL};
    const char *word;
    if (!strcmp(flag, "--model"))
        return parse_word(flag, val, models, "model", "mlp or cnn", &o->model,
                          err, n);
    if (!strcmp(flag, "--epochs"))
        return trainer_parse_ll(flag, val, 1, 100000, &o->epochs, err, n);
    if (!strcmp(flag, "--batch-size"))
        return trainer_parse_ll(flag, val, 1, 65536, &o->batch_size, err, n);
    if (!strcmp(flag, "--lr")) return parse_lr(flag, val, &o->lr, err, n);
    if (!strcmp(flag, "--seed")) return parse_u64(flag, val, &o->seed, err, n);
    if (!strcmp(flag, "--data"))
        return parse_path(flag, val, "directory", &o->data, err, n);
    if (!strcmp(flag, "--checkpoint"))
        return parse_path(flag, val, "path", &o->checkpoint, err, n);
    if (!strcmp(flag, "--max-steps"))
        return trainer_parse_ll(flag, val, 1, LLONG_MAX / 2, &o->max_steps,
                                err, n);
    if (!strcmp(flag, "--train-limit"))
        return trainer_parse_ll(flag, val, 1, LLONG_MAX / 2, &o->train_limit,
                                err, n);
    if (!strcmp(flag, "--device"))
        return parse_word(flag, val, devices, "device", "cpu or cuda",
                          &o->device, err, n);
    if (!strcmp(flag, "--progress"))
        return parse_word(flag, val, progress, "mode", "auto, bar or lines",
                          &o->progress, err, n);
    if (!strcmp(flag, "--normalize") || !strcmp(flag, "--shard-optimizer")) {
        if (parse_word(flag, val, on_off, "value", "on or off", &word, err,
                       n))
            return -1;
        *(!strcmp(flag, "--normalize") ? &o->normalize
                                       : &o->shard_optimizer) =
            !strcmp(word, "on");
        return 0;
    }
    snprintf(err, n, "unknown flag \"%s\"", flag);
    return -1;
}

int train_loop_parse_flags(const train_loop_config_t *cfg, int argc,
                           char **argv, train_loop_options_t *o, char *err,
                           size_t n)
{
    *o = (train_loop_options_t){.model = "mlp", .epochs = 2,
                                .batch_size = 64, .lr = 0.05, .seed = 42,
                                .data = cfg->data_dir, .device = "cpu",
                                .progress = "auto", .normalize = 0,
                                .shard_optimizer = -1};
    static const char *const with_value[] = {
        "--model", "--epochs", "--batch-size", "--lr", "--seed", "--data",
        "--checkpoint", "--max-steps", "--train-limit", "--device",
        "--progress", "--normalize", "--shard-optimizer"};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char flag[64];
        const char *val = trainer_split_flag(arg, flag, sizeof flag);
        int *on_off_flag = !strcmp(flag, "--help") || !strcmp(flag, "-h")
                               ? &o->help
                           : !strcmp(flag, "--resume") ? &o->resume
                           : !strcmp(flag, "--fp16-allreduce")
                               ? &o->fp16_allreduce
                               : NULL;
        if (on_off_flag) {
            if (val) {
                snprintf(err, n, "%s takes no value", flag);
                return -1;
            }
            *on_off_flag = 1;
            continue;
        }
        size_t k, nk = sizeof with_value / sizeof with_value[0];
        for (k = 0; k < nk; k++)
            if (!strcmp(flag, with_value[k])) break;
        if (k == nk) {
            snprintf(err, n, "unknown flag \"%s\"", arg);
            return -1;
        }
        if (!val) val = trainer_next_value(flag, argc, argv, &i, err, n);
        if (!val || parse_value(flag, val, o, err, n)) return -1;
    }
    if (o->resume && !o->checkpoint) {
        snprintf(err, n, "--resume needs --checkpoint PATH");
        return -1;
    }
    if (o->shard_optimizer == 1 && o->fp16_allreduce) {
        snprintf(err, n, "--shard-optimizer on: the sharded step reduces "
                         "float32 gradients; drop --fp16-allreduce");
        return -1;
    }
    if (o->shard_optimizer == -1) o->shard_optimizer = !o->fp16_allreduce;
    return 0;
}
