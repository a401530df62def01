/* bench/common.h: what the benchmarks (bench/allreduce_perf.c,
 * bench/fusion_perf.c) share: fatal checks that say where and who before
 * taking every rank down, their common timing options, the rank map and
 * MPI version lines of the header, bandwidth figures and input hashing.
 *
 * Left out: the command-line grammar, its messages and elements of any
 * dtype as doubles (prog/prog.h, shared with examples/ and test/),
 * anything about one benchmark's workloads, tables or footers, and hvd's
 * own checks (only fusion_perf calls hvd; they stay there).
 * Programs only: these abort with MPI_Abort, never return an error.
 */
#ifndef HVD_BENCH_COMMON_H
#define HVD_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "prog/prog.h"
#include "ring/ring.h"

/* ---- who this process is, for every message ---- */

/* The host, set by bench_identify(), after MPI has started; until then
 * "?". The program's name and rank are prog_name and prog_rank. */
extern char bench_host[256];

/* Records the program's name and this rank (prog_identify), and looks up
 * the host name. */
void bench_identify(const char *prog, int rank);

/* ---- fatal checks: print where and who, then take every rank down ---- */

/* "FILE:LINE: host H rank R: CALL failed: MPI's error string". */
_Noreturn void bench_die_mpi(int rc, const char *call, const char *file,
                             int line);
/* The same with ring_strerror(status) and the status number. */
_Noreturn void bench_die_ring(int status, const char *call, const char *file,
                              int line);
/* "host H rank R: cannot allocate NBYTES bytes for WHAT". */
_Noreturn void bench_die_nomem(const char *what, size_t nbytes);

/* malloc(nbytes), at least 1 byte; bench_die_nomem(what, ...) on failure. */
void *bench_malloc(size_t nbytes, const char *what);

#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int mpi_rc_ = (call);                                                  \
        if (mpi_rc_ != MPI_SUCCESS)                                            \
            bench_die_mpi(mpi_rc_, #call, __FILE__, __LINE__);                 \
    } while (0)

#define RING_CHECK(call)                                                       \
    do {                                                                       \
        int ring_rc_ = (call);                                                 \
        if (ring_rc_ != RING_OK)                                               \
            bench_die_ring(ring_rc_, #call, __FILE__, __LINE__);               \
    } while (0)

/* ---- options ---- */

/* The timing options every benchmark takes (-n, -w, -r, -c). */
typedef struct {
    int iters;        /* timed calls or iterations per measurement, >= 1 */
    int warmup_iters; /* untimed ones before them, >= 0 */
    int rounds;       /* times the timing repeats, interleaved, >= 1 */
    int check;        /* 1: check results after the timed loops */
} bench_loop_t;

/* The defaults that each benchmark's usage text states. */
#define BENCH_LOOP_DEFAULTS                                                    \
    {.iters = 20, .warmup_iters = 5, .rounds = 1, .check = 1}

/* The rows of a benchmark's long_options table for bench_loop_t's options
 * (bench_parse_loop_opt reads them); the table ends in
 * PROG_END_LONG_OPTIONS and is read by prog_getopt. */
#define BENCH_LOOP_LONG_OPTIONS                                                \
    {"iters", required_argument, NULL, 'n'},                                   \
    {"warmup_iters", required_argument, NULL, 'w'},                            \
    {"rounds", required_argument, NULL, 'r'},                                  \
    {"check", required_argument, NULL, 'c'}

/* A benchmark's usage_args and the exit statuses its usage_notes end in. */
#define BENCH_USAGE_ARGS "[options]   (run it under mpirun)\n"
#define BENCH_USAGE_EXIT                                                       \
    "Exit status: 0 all results right, 1 wrong results, 2 bad options.\n"

/* -n, -w, -r and -c into loop: 0 when opt is one of them and arg valid,
 * -1 when arg is not (explained by prog_bad_value), 1 when opt is none of
 * them. */
int bench_parse_loop_opt(const struct option *long_options, int opt,
                         const char *arg, bench_loop_t *loop);

/* ---- the header ---- */

/* nccl-tests' "Using devices" map, printed by rank 0: which rank of comm
 * runs where (rank, node-local rank, pid, host). Collective over comm. */
void bench_print_rank_map(MPI_Comm comm);

/* "# MPI library: ..." (the first line of MPI's version string). */
void bench_print_mpi_version(void);

/* ---- figures ---- */

/* nbytes / seconds in GB/s (1 GB = 1e9 B); 0 when seconds is not > 0. */
double bench_algbw_gbs(size_t nbytes, double seconds);

/* A ring all-reduce moves 2(n-1)/n of the data through each rank's link, so
 * busbw = algbw * 2(n-1)/n compares with the hardware whatever n is. */
double bench_busbw_gbs(size_t nbytes, double seconds, int nranks);

/* ---- inputs ---- */

/* 64 well-mixed bits for element idx of rank's input: inputs hash the
 * index, rather than cycle, so a block at the wrong offset shows up as
 * wrong data. */
uint64_t bench_input_hash(int rank, size_t idx);

#endif /* HVD_BENCH_COMMON_H */
