/* bench/allreduce_options.c: allreduce_perf's options, nccl-tests' names
 * and defaults where nccl-tests has them (-b -e -f -n -w -c -d -o), plus
 * -r, --impl, --algo, --compare and -G (--device: nccl-tests has no such
 * flag, its buffers are always on the GPU); and the names of dtypes and ops, which
 * the options read and the table prints. A bad value is refused by name
 * (prog/prog.c's prog_bad_value), on rank 0.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "bench/allreduce_perf.h"

/* A table of names for an enum value; names[0] is the one printed. */
typedef struct {
    int value;
    const char *names[5];
} named_t;

static const named_t dtype_names[] = {
    {RING_FLOAT32, {"float", "float32", "f32", "fp32", NULL}},
    {RING_FLOAT64, {"double", "float64", "f64", "fp64", NULL}},
    {RING_FLOAT16, {"half", "float16", "f16", "fp16", NULL}},
    {RING_BFLOAT16, {"bfloat16", "bf16", NULL}},
    {RING_INT32, {"int32", "i32", "int", NULL}},
    {RING_INT64, {"int64", "i64", NULL}},
    {RING_UINT8, {"uint8", "u8", NULL}},
};

static const named_t op_names[] = {
    {RING_SUM, {"sum", NULL}},
    {RING_AVERAGE, {"avg", "average", "mean", NULL}},
    {RING_MIN, {"min", NULL}},
    {RING_MAX, {"max", NULL}},
    {RING_PRODUCT, {"prod", "product", NULL}},
};

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* 0 and *value set when text is one of the table's names (any case). */
static int named_parse(const named_t *table, size_t n, const char *text,
                       int *value)
{
    for (size_t i = 0; i < n; i++)
        for (int j = 0; table[i].names[j] != NULL; j++)
            if (strcasecmp(text, table[i].names[j]) == 0) {
                *value = table[i].value;
                return 0;
            }
    return -1;
}

static const char *named_name(const named_t *table, size_t n, int value)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].value == value)
            return table[i].names[0];
    return "?";
}

const char *bench__dtype_label(ring_dtype_t dtype)
{
    return named_name(dtype_names, NELEMS(dtype_names), (int)dtype);
}

const char *bench__op_label(ring_op_t op)
{
    return named_name(op_names, NELEMS(op_names), (int)op);
}

int bench__dtype_is_float(ring_dtype_t dtype)
{
    return dtype == RING_FLOAT32 || dtype == RING_FLOAT64 ||
           dtype == RING_FLOAT16 || dtype == RING_BFLOAT16;
}

/* ---- options ---- */

enum { OPT_IMPL = 256, OPT_ALGO, OPT_COMPARE };

static const struct option long_options[] = {
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},
    BENCH_LOOP_LONG_OPTIONS, /* -n, -w, -r, -c */
    {"datatype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, 'o'},
    {"impl", required_argument, NULL, OPT_IMPL},
    {"algo", required_argument, NULL, OPT_ALGO},
    {"compare", no_argument, NULL, OPT_COMPARE},
    {"device", no_argument, NULL, 'G'},
    PROG_END_LONG_OPTIONS,
};

static const prog_cli_t cli = {
    .optstring = ":b:e:f:n:w:c:d:o:r:Gh",
    .long_options = long_options,
    .usage_args = BENCH_USAGE_ARGS,
    .usage_options =
        "  -b, --minbytes SIZE      smallest message (default 32M)\n"
        "  -e, --maxbytes SIZE      largest message (default 32M)\n"
        "  -f, --stepfactor N       multiply the size by N each step, N >= 2 "
        "(default 2)\n"
        "  -n, --iters N            timed calls per size (default 20)\n"
        "  -w, --warmup_iters N     untimed calls before them (default 5)\n"
        "  -c, --check 0|1          check results (default 1)\n"
        "  -d, --datatype TYPE      float, double, half, bfloat16, int32, "
        "int64, uint8 (or f32, f64, f16, bf16, i32, i64, u8)\n"
        "  -o, --op OP              sum, avg, min, max, prod (default sum)\n"
        "  -r, --rounds N           repeat the timing N times, interleaved "
        "with the other implementations (default 1)\n"
        "      --impl IMPL          ring (ours, default), mpi "
        "(MPI_Allreduce), noreduce (the ring's messages, no reduction) or "
        "shm (ours, through shared memory, one node), hier (ours, "
        "hierarchical) or hiershm (hier, shared memory within nodes)\n"
        "      --algo ALGO          ring's algorithm: auto, ring, rdb "
        "(default auto)\n"
        "      --compare            time ring, mpi, noreduce and shm "
        "interleaved, one table\n"
        "  -G, --device             device buffers (ring_dev(): CUDA, or the "
        "emulated device under HVD_DEVICE_EMULATE); --impl staged (default), "
        "ipc, mpi_hostcopy or nccl; --compare times them all beside "
        "the device's limit (bench/README.md)\n",
    .usage_notes =
        "SIZE is bytes with an optional K, M or G suffix (powers of 1024).\n"
        BENCH_USAGE_EXIT,
};


#define BYTES_WANTED "expected bytes such as 8, 64K, 16M or 1G"

/* -b, -e, -f: 0 when the value is valid, else -1. */
static int parse_size_opt(int opt, const char *arg, bench_opts_t *o)
{
    const struct option *lo = long_options;
    int factor;

    switch (opt) {
    case 'b':
        if (ring_parse_bytes(arg, &o->min_nbytes) != RING_OK)
            return prog_bad_value(lo, opt, arg, BYTES_WANTED);
        return 0;
    case 'e':
        if (ring_parse_bytes(arg, &o->max_nbytes) != RING_OK)
            return prog_bad_value(lo, opt, arg, BYTES_WANTED);
        return 0;
    default: /* 'f' */
        if (prog_parse_int(arg, 2, INT_MAX, &factor))
            return prog_bad_value(lo, opt, arg, "expected an integer >= 2");
        o->step_factor = (size_t)factor;
        return 0;
    }
}

/* -d, -o, --impl, --algo: 0 when the value is valid, else -1. */
static int parse_name_opt(int opt, const char *arg, bench_opts_t *o)
{
    const struct option *lo = long_options;
    int value;

    switch (opt) {
    case 'd':
        if (named_parse(dtype_names, NELEMS(dtype_names), arg, &value))
            return prog_bad_value(lo, opt, arg, "expected float, double, "
                                   "half, bfloat16, int32, int64 or uint8");
        o->dtype = (ring_dtype_t)value;
        return 0;
    case 'o':
        if (named_parse(op_names, NELEMS(op_names), arg, &value))
            return prog_bad_value(lo, opt, arg,
                                   "expected sum, avg, min, max or prod");
        o->op = (ring_op_t)value;
        return 0;
    case OPT_IMPL:
        if ((o->impl = bench__impl_named(arg)) == NULL)
            return prog_bad_value(lo, opt, arg,
                                  "expected ring, mpi, noreduce, shm, "
                                  "hier or hiershm (with -G: staged, "
                                  "ipc, mpi_hostcopy or nccl)");
        return 0;
    default: /* OPT_ALGO */
        if (ring_algo_parse(arg, &o->algo) != RING_OK)
            return prog_bad_value(lo, opt, arg, "expected auto, ring or rdb");
        return 0;
    }
}

static int parse_one(int opt, const char *arg, bench_opts_t *o)
{
    int rc = bench_parse_loop_opt(long_options, opt, arg, &o->loop);

    if (rc <= 0)
        return rc; /* -n, -w, -r, -c */
    /* Long-only options are >= 256, which strchr would truncate to a char. */
    if (opt < 256 && strchr("bef", opt) != NULL)
        return parse_size_opt(opt, arg, o);
    return parse_name_opt(opt, arg, o);
}

/* Rules that involve several options, checked once all are read. */
static int check_opts(const bench_opts_t *o, int impl_given, int compare)
{
    const char *why = NULL;

    if (o->min_nbytes == 0)
        why = "-b/--minbytes must be at least 1";
    else if (o->max_nbytes < o->min_nbytes)
        why = "-e/--maxbytes is smaller than -b/--minbytes";
    else if (compare && impl_given)
        why = "--compare runs ring, mpi, noreduce and shm: drop --impl";
    else if (o->impl != NULL && o->impl->device != o->device)
        return prog_refuse("--impl %s %s: with%s -G, --impl takes %s",
                           o->impl->name,
                           o->device ? "runs on host buffers"
                                     : "runs on device buffers (-G)",
                           o->device ? "" : "out", bench__impl_names(o->device));
    else if (o->max_nbytes < ring_dtype_size(o->dtype))
        return prog_refuse("-e/--maxbytes %zu is less than one %s element "
                           "(%zu bytes): no size to run",
                           o->max_nbytes, bench__dtype_label(o->dtype),
                           ring_dtype_size(o->dtype));
    else if (o->op == RING_AVERAGE && !bench__dtype_is_float(o->dtype))
        why = "-o avg needs a floating-point -d (float, double, half, "
              "bfloat16)";
    return why != NULL ? prog_refuse("%s", why) : 0;
}

int bench__parse_options(int argc, char **argv, bench_opts_t *o)
{
    int opt, impl_given = 0, compare = 0;

    *o = (bench_opts_t){
        .min_nbytes = 32u << 20, .max_nbytes = 32u << 20, .step_factor = 2,
        .loop = BENCH_LOOP_DEFAULTS,
        .dtype = RING_FLOAT32, .op = RING_SUM, .algo = RING_ALGO_AUTO,
        .impl = &bench__impl_ring,
    };
    while ((opt = prog_getopt(argc, argv, &cli)) >= 0) {
        impl_given |= opt == OPT_IMPL;
        compare |= opt == OPT_COMPARE;
        o->device |= opt == 'G';
        if (opt != OPT_COMPARE && opt != 'G' && parse_one(opt, optarg, o) != 0)
            return -1;
    }
    if (opt != PROG_OPT_END)
        return opt == PROG_OPT_HELP ? 1 : -1;
    if (o->device && !impl_given)
        o->impl = &bench__impl_staged;
    if (compare)
        o->impl = NULL;
    return check_opts(o, impl_given, compare);
}

