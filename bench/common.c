/* bench/common.c: the pieces bench/allreduce_perf.c and bench/fusion_perf.c
 * share (contracts in bench/common.h): fatal checks, the common timing
 * options, the rank map and MPI version header lines, bandwidth figures
 * and input hashing.
 *
 * Left out: each benchmark's own options, workloads, tables and footers;
 * the getopt loop and its messages (prog/prog.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench/common.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- who this process is ---- */

char bench_host[256] = "?";

void bench_identify(const char *prog, int rank)
{
    prog_identify(prog, rank);
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
            bench_host, prog_rank, call, text);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort(); /* MPI_Abort does not return; this tells the compiler so */
}

_Noreturn void bench_die_ring(int status, const char *call, const char *file,
                              int line)
{
    fprintf(stderr, "%s:%d: host %s rank %d: %s failed: %s (%d)\n", file,
            line, bench_host, prog_rank, call, ring_strerror(status),
            status);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

_Noreturn void bench_die_nomem(const char *what, size_t nbytes)
{
    fprintf(stderr, "host %s rank %d: cannot allocate %zu bytes for %s\n",
            bench_host, prog_rank, nbytes, what);
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

int bench_parse_loop_opt(const struct option *long_options, int opt,
                         const char *arg, bench_loop_t *loop)
{
    const struct option *lo = long_options;

    switch (opt) {
    case 'n':
        if (prog_parse_int(arg, 1, INT_MAX, &loop->iters))
            return prog_bad_value(lo, opt, arg, "expected an integer >= 1");
        return 0;
    case 'w':
        if (prog_parse_int(arg, 0, INT_MAX, &loop->warmup_iters))
            return prog_bad_value(lo, opt, arg, "expected an integer >= 0");
        return 0;
    case 'r':
        if (prog_parse_int(arg, 1, INT_MAX, &loop->rounds))
            return prog_bad_value(lo, opt, arg, "expected an integer >= 1");
        return 0;
    case 'c':
        if (prog_parse_int(arg, 0, 1, &loop->check))
            return prog_bad_value(lo, opt, arg, "expected 0 or 1");
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
        printf("# Using ranks\n");
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
