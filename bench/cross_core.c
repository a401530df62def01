/* bench/cross_core.c: what reading data another core has just written
 * costs, the floor under an allreduce through shared memory. A child
 * process on one PU writes --bytes of floats into shared memory; the
 * parent, on another PU, then reads them and adds them to a local array,
 * as ring_shm_allreduce's reduce and gather do with a peer's block. The
 * two take turns, so every read finds the lines freshly written in the
 * other core's cache. Then the same read from the parent's own array.
 *
 *   bench/cross_core [--bytes N] [--iters K] [--stream]
 *   (prog/prog.h's grammar)
 *
 * Prints "cross-core read+add of N bytes: median T us (G GB/s), best T us;
 * from the own cache: median T us (G GB/s)" over K turns each (the median,
 * not the best: the fastest turns are rare here and say little of what a
 * collective meets), then the writer's median time per turn. --stream has
 * the writer use non-temporal stores, as ring_shm_allreduce may
 * (HVD_SHM_STREAM): its lines then skip the caches, both the reader's
 * (which a write must otherwise take them back from) and its own.
 * Exit status: 0, 1 (no second PU, or a system call failed), 2 (bad
 * flags).
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_* */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "prog/prog.h"

typedef struct {
    _Alignas(64) _Atomic long turn; /* odd: written, even: read */
    _Atomic int unpinned;           /* the writer could not pin itself */
    double write_s;                 /* the writer's median turn */
    _Alignas(64) float data[];
} shared_t;

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* The first two PUs this process may run on; 0 when it has one only. */
static int two_pus(int *a, int *b)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
        if (CPU_ISSET(cpu, &set)) *(n++ ? b : a) = cpu;
    return n == 2;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts t[0..n) and returns its median. */
static double median(double *t, long long n)
{
    qsort(t, (size_t)n, sizeof *t, by_value);
    return t[n / 2];
}

/* Copies src to data, as ring_shm_allreduce posts a segment: through the
 * cache (memcpy) or around it. Returns the seconds it took. */
static double write_turn(float *data, const float *src, size_t n, int stream)
{
    double t = prog_now();
    size_t i = 0;
#if defined(__SSE2__)
    if (stream) {
        for (; i + 4 <= n; i += 4)
            _mm_stream_ps(data + i, _mm_loadu_ps(src + i));
        _mm_sfence();
    }
#else
    (void)stream;
#endif
    memcpy(data + i, src + i, (n - i) * sizeof *data);
    return prog_now() - t;
}

/* acc += src; returns the seconds it took. */
static double read_add(float *restrict acc, const float *restrict src,
                       size_t n)
{
    double t = prog_now();
    for (size_t i = 0; i < n; i++) acc[i] += src[i];
    return prog_now() - t;
}

typedef struct {
    long long bytes, iters;
    int stream;
} options_t;

static const struct option long_options[] = {
    {"bytes", required_argument, NULL, 'b'},
    {"iters", required_argument, NULL, 'n'},
    {"stream", no_argument, NULL, 's'},
    PROG_END_LONG_OPTIONS,
};

static const prog_cli_t cli = {
    .optstring = ":b:n:sh",
    .long_options = long_options,
    .usage_args = "[options]   (one process, no MPI)\n",
    .usage_options =
        "  -b, --bytes N            bytes written and read a turn, "
        "4..1073741824 (481280)\n"
        "  -n, --iters K            turns, 1..1000000 (2000)\n"
        "  -s, --stream             the writer's stores skip the caches\n",
    .usage_notes = "Exit status: 0, 1 no second PU or a system call "
                   "failed, 2 bad options.\n",
};

/* 0: run; 1: --help printed; -1: bad options, explained. */
static int parse_options(int argc, char **argv, options_t *o)
{
    int opt;

    *o = (options_t){.bytes = 470 << 10, .iters = 2000};
    while ((opt = prog_getopt(argc, argv, &cli)) >= 0) {
        if (opt == 's')
            o->stream = 1;
        else if (opt == 'b' && prog_parse_ll(optarg, 4, 1 << 30, &o->bytes))
            return prog_bad_value(long_options, opt, optarg,
                                  "expected an integer from 4 to "
                                  "1073741824");
        else if (opt == 'n' &&
                 prog_parse_ll(optarg, 1, 1000000, &o->iters))
            return prog_bad_value(long_options, opt, optarg,
                                  "expected an integer from 1 to 1000000");
    }
    return opt == PROG_OPT_END ? 0 : opt == PROG_OPT_HELP ? 1 : -1;
}

int main(int argc, char **argv)
{
    options_t o;

    prog_identify("cross_core", 0);
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    long long bytes = o.bytes, iters = o.iters;
    int stream = o.stream;
    int me, peer;
    if (!two_pus(&me, &peer)) {
        fprintf(stderr, "cross_core: needs two PUs to run on\n");
        return 1;
    }
    size_t n = (size_t)bytes / sizeof(float);
    shared_t *sh = mmap(NULL, sizeof *sh + n * sizeof(float),
                        PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    float *acc = calloc(n, sizeof *acc), *own = calloc(n, sizeof *own);
    double *cross = malloc((size_t)iters * sizeof *cross);
    double *local = malloc((size_t)iters * sizeof *local);
    double *writes = malloc((size_t)iters * sizeof *writes);
    if (sh == MAP_FAILED || !acc || !own || !cross || !local || !writes) {
        perror("cross_core: memory");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("cross_core: fork");
        return 1;
    }
    if (child == 0) { /* the writer */
        if (pin(peer) != 0) atomic_store(&sh->unpinned, 1);
        for (long long k = 0; k < iters; k++) {
            while (atomic_load(&sh->turn) != 2 * k) {
            }
            for (size_t i = 0; i < n; i++) own[i] = (float)(k + i);
            writes[k] = write_turn(sh->data, own, n, stream);
            atomic_store(&sh->turn, 2 * k + 1);
        }
        sh->write_s = median(writes, iters);
        _exit(0);
    }
    int status = pin(me);
    for (long long k = 0; k < iters; k++) {
        while (atomic_load(&sh->turn) != 2 * k + 1) {
        }
        cross[k] = read_add(acc, sh->data, n);
        atomic_store(&sh->turn, 2 * k + 2);
    }
    int child_status;
    if (waitpid(child, &child_status, 0) != child || child_status != 0 ||
        atomic_load(&sh->unpinned))
        status = 1;
    for (long long k = 0; k < iters; k++) local[k] = read_add(acc, own, n);
    if (status != 0) {
        fprintf(stderr, "cross_core: could not pin to PUs %d and %d\n", me,
                peer);
        return 1;
    }
    double c = median(cross, iters), l = median(local, iters);
    printf("cross-core read+add of %lld bytes: median %.1f us (%.1f GB/s), "
           "best %.1f us; from the own cache: median %.1f us (%.1f GB/s) "
           "(PUs %d and %d, %lld turns)\n", bytes, c * 1e6,
           (double)bytes / c / 1e9, cross[0] * 1e6, l * 1e6,
           (double)bytes / l / 1e9, me, peer, iters);
    printf("writer, %s stores: median %.1f us a turn\n",
           stream ? "non-temporal" : "cached", sh->write_s * 1e6);
    free(cross);
    free(local);
    free(writes);
    free(acc);
    free(own);
    return 0;
}
