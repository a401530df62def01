/* bench/common.c: the pieces bench/allreduce_perf.c and bench/fusion_perf.c
 * share (contracts in bench/common.h): fatal checks, the common options
 * and getopt loop, the rank map and MPI version header lines, bandwidth
 * figures, input hashing and elements as doubles.
 *
 * Left out: each benchmark's own options, workloads, tables and footers.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench/common.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- who this process is ---- */

const char *bench_prog = "bench";
int bench_rank = -1;
char bench_host[256] = "?";

void bench_identify(const char *prog, int rank)
{
    bench_prog = prog;
    bench_rank = rank;
    if (gethostname(bench_host, sizeof bench_host - 1) != 0)
        snprintf(bench_host, sizeof bench_host, "?");
}

/* ---- fatal checks ---- */

_Noreturn void bench_die_mpi(int rc, const char *call, const char *file,
                             int line)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    fprintf(stderr, "%s:%d: host %s rank %d: %s failed: %s\n", file, line,
            bench_host, bench_rank, call, text);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; this tells the compiler so */
}

_Noreturn void bench_die_ring(int status, const char *call, const char *file,
                              int line)
{
    fprintf(stderr, "%s:%d: host %s rank %d: %s failed: %s (%d)\n", file,
            line, bench_host, bench_rank, call, ring_strerror(status),
            status);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

_Noreturn void bench_die_nomem(const char *what, size_t nbytes)
{
    fprintf(stderr, "host %s rank %d: cannot allocate %zu bytes for %s\n",
            bench_host, bench_rank, nbytes, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void *bench_malloc(size_t nbytes, const char *what)
{
    void *p = malloc(nbytes > 0 ? nbytes : 1);

    if (p == NULL)
        bench_die_nomem(what, nbytes);
    return p;
}

/* ---- options ---- */

void bench_print_usage(FILE *out, const bench_cli_t *cli)
{
    fprintf(out, "Usage: %s [options]   (run it under mpirun)\n%s"
            "  -h, --help               this text\n%s"
            "Exit status: 0 all results right, 1 wrong results, 2 bad "
            "options.\n", bench_prog, cli->usage_options, cli->usage_notes);
}

int bench_getopt(int argc, char **argv, const bench_cli_t *cli)
{
    int opt;

    opterr = 0; /* getopt would complain once per rank; rank 0 does below */
    opt = getopt_long(argc, argv, cli->optstring, cli->long_options, NULL);
    if (opt == 'h') {
        if (bench_rank == 0)
            bench_print_usage(stdout, cli);
        return BENCH_OPT_HELP;
    }
    if (opt == '?' || opt == ':') {
        if (bench_rank == 0) {
            fprintf(stderr, "%s: %s '%s'\n", bench_prog,
                    opt == ':' ? "missing value for" : "unknown option",
                    argv[optind - 1]);
            bench_print_usage(stderr, cli);
        }
        return BENCH_OPT_BAD;
    }
    if (opt == -1 && optind < argc) {
        if (bench_rank == 0)
            fprintf(stderr, "%s: unexpected argument '%s'\n", bench_prog,
                    argv[optind]);
        return BENCH_OPT_BAD;
    }
    return opt == -1 ? BENCH_OPT_END : opt;
}

/* "-b/--minbytes" or "--impl", for error messages. */
static const char *flag_name(const struct option *long_options, int opt)
{
    static char text[64];

    for (const struct option *lo = long_options; lo->name != NULL; lo++)
        if (lo->val == opt) {
            if (opt < 256)
                snprintf(text, sizeof text, "-%c/--%s", opt, lo->name);
            else
                snprintf(text, sizeof text, "--%s", lo->name);
            return text;
        }
    return "?";
}

/* Every rank saw the same argv and fails alike: rank 0 explains. */
int bench_bad_value(const struct option *long_options, int opt,
                    const char *value, const char *want)
{
    if (bench_rank == 0)
        fprintf(stderr, "%s: invalid value '%s' for %s: %s\n", bench_prog,
                value, flag_name(long_options, opt), want);
    return -1;
}

int bench_parse_int(const char *text, long min, long max, int *out)
{
    char *end;
    long value;

    errno = 0;
    value = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || value < min ||
        value > max)
        return -1;
    *out = (int)value;
    return 0;
}

int bench_parse_loop_opt(const struct option *long_options, int opt,
                         const char *arg, bench_loop_t *loop)
{
    const struct option *lo = long_options;

    switch (opt) {
    case 'n':
        if (bench_parse_int(arg, 1, INT_MAX, &loop->iters))
            return bench_bad_value(lo, opt, arg, "expected an integer >= 1");
        return 0;
    case 'w':
        if (bench_parse_int(arg, 0, INT_MAX, &loop->warmup_iters))
            return bench_bad_value(lo, opt, arg, "expected an integer >= 0");
        return 0;
    case 'r':
        if (bench_parse_int(arg, 1, INT_MAX, &loop->rounds))
            return bench_bad_value(lo, opt, arg, "expected an integer >= 1");
        return 0;
    case 'c':
        if (bench_parse_int(arg, 0, 1, &loop->check))
            return bench_bad_value(lo, opt, arg, "expected 0 or 1");
        return 0;
    default:
        return 1;
    }
}

/* ---- the header ---- */

typedef struct {
    int pid;
    int local_rank;
    char host[sizeof bench_host];
} rank_info_t;

static int node_local_rank(MPI_Comm comm)
{
    MPI_Comm node;
    int local_rank;

    MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &local_rank));
    MPI_CHECK(MPI_Comm_free(&node));
    return local_rank;
}

void bench_print_rank_map(MPI_Comm comm)
{
    rank_info_t mine = {.pid = (int)getpid(),
                        .local_rank = node_local_rank(comm)};
    rank_info_t *all = NULL;
    int rank, nranks;

    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &nranks));
    memcpy(mine.host, bench_host, sizeof mine.host);
    if (rank == 0)
        all = bench_malloc((size_t)nranks * sizeof *all, "the rank map");
    MPI_CHECK(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all,
                         (int)sizeof mine, MPI_BYTE, 0, comm));
    if (rank == 0) {
        printf("# Using ranks (host memory)\n");
        for (int r = 0; r < nranks; r++)
            printf("#  Rank %2d Local %2d Pid %7d on %10s\n", r,
                   all[r].local_rank, all[r].pid, all[r].host);
        printf("#\n");
    }
    free(all);
}

void bench_print_mpi_version(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    MPI_CHECK(MPI_Get_library_version(version, &len));
    version[strcspn(version, "\r\n")] = '\0'; /* first line only */
    printf("# MPI library: %s\n", version);
}

/* ---- figures ---- */

double bench_algbw_gbs(size_t nbytes, double seconds)
{
    return seconds > 0 ? (double)nbytes / 1.0e9 / seconds : 0.0;
}

double bench_busbw_gbs(size_t nbytes, double seconds, int nranks)
{
    return bench_algbw_gbs(nbytes, seconds) * 2.0 * (nranks - 1) / nranks;
}

/* ---- inputs ---- */

/* splitmix64's finaliser. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

uint64_t bench_input_hash(int rank, size_t idx)
{
    return mix64((uint64_t)idx * 0x9e3779b97f4a7c15u +
                 (uint64_t)(rank + 1) * 0xd1b54a32d192ed03u);
}

/* An integer-valued double as the integer reductions leave it: they wrap,
 * so take it modulo 2^64 here and narrow it modulo 2^bits on store. */
static uint64_t wrap_u64(double v)
{
    return (uint64_t)(int64_t)v;
}

void bench_value_store(void *buf, size_t idx, ring_dtype_t dtype, double v)
{
    uint16_t *u16 = buf;

    switch (dtype) {
    case RING_FLOAT32: ((float *)buf)[idx] = (float)v; break;
    case RING_FLOAT64: ((double *)buf)[idx] = v; break;
    case RING_FLOAT16: u16[idx] = ring_f32_to_f16((float)v); break;
    case RING_BFLOAT16: u16[idx] = ring_f32_to_bf16((float)v); break;
    case RING_INT32:
        ((int32_t *)buf)[idx] = (int32_t)(uint32_t)wrap_u64(v);
        break;
    case RING_INT64: ((int64_t *)buf)[idx] = (int64_t)wrap_u64(v); break;
    case RING_UINT8: ((uint8_t *)buf)[idx] = (uint8_t)wrap_u64(v); break;
    default: break;
    }
}

double bench_value_load(const void *buf, size_t idx, ring_dtype_t dtype)
{
    switch (dtype) {
    case RING_FLOAT32: return ((const float *)buf)[idx];
    case RING_FLOAT64: return ((const double *)buf)[idx];
    case RING_FLOAT16: return ring_f16_to_f32(((const uint16_t *)buf)[idx]);
    case RING_BFLOAT16: return ring_bf16_to_f32(((const uint16_t *)buf)[idx]);
    case RING_INT32: return ((const int32_t *)buf)[idx];
    case RING_INT64: return (double)((const int64_t *)buf)[idx];
    case RING_UINT8: return ((const uint8_t *)buf)[idx];
    default: return 0.0;
    }
}
