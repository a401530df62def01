/* bench/soak.c: many named collectives of random size, type and kind, made
 * in a different random order on every rank, for a bounded time; every
 * result is checked exactly, and the resident memory is sampled so that a
 * leak shows as growth.
 *
 *   mpirun -np N bench/soak [--seconds S] [--seed X]
 *
 * Each round, every rank draws the same batch of 1 to 16 collectives from
 * the shared seed: allreduce (sum, average, min or max), broadcast from a
 * random root, or allgather; any dtype; 0 to 100,000 elements (log-uniform);
 * named "soak.ROUND.K". Each rank submits them asynchronously in its own
 * shuffled order, waits for all, and compares every element with what it
 * computes alone. Inputs are small integers, so every result is exact in
 * every dtype (averages are divided as the library does: in float, or
 * double for float64, then rounded once).
 *
 * Prints, on rank 0, the collectives run, wrong elements, failed calls, and
 * the largest RSS of any rank at each quarter of the run. Exit status 0
 * when nothing was wrong or failed and the RSS of the last quarter is within
 * 10% (plus 4 MiB) of the second's; 1 otherwise; 2 on bad flags.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/common.h"
#include "hvd/hvd.h"

enum { MAX_BATCH = 16, MAX_COUNT = 100000 };

/* splitmix64: the shared and per-rank random streams. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    int kind; /* 0 allreduce, 1 broadcast, 2 allgather */
    hvd_dtype_t dtype;
    hvd_op_t op;
    int root;
    size_t count;
    char name[64];
    char *in, *out;
    hvd_handle_t handle;
} job_t;

static int is_float(hvd_dtype_t d)
{
    return d == HVD_FLOAT32 || d == HVD_FLOAT64 || d == HVD_FLOAT16 ||
           d == HVD_BFLOAT16;
}

/* Rank r's element i of job k: 0..3, so sums over 5 ranks stay exact. */
static double input(int r, size_t i, int k)
{
    return (double)(bench_input_hash(r * 31 + k, i) % 4);
}

static double expected(const job_t *j, int k, size_t i, int size)
{
    if (j->kind == 1) return input(j->root, i, k);
    if (j->kind == 2) return input((int)(i / j->count), i % j->count, k);
    double acc = input(0, i, k);
    for (int r = 1; r < size; r++) {
        double x = input(r, i, k);
        if (j->op == HVD_MIN) acc = x < acc ? x : acc;
        else if (j->op == HVD_MAX) acc = x > acc ? x : acc;
        else acc += x;
    }
    if (j->op == HVD_AVERAGE)
        acc = j->dtype == HVD_FLOAT64 ? acc / size
                                      : (double)((float)acc / (float)size);
    /* Rounded to the dtype, as the result is. */
    char one[8];
    prog_value_store(one, 0, (ring_dtype_t)j->dtype, acc);
    return prog_value_load(one, 0, (ring_dtype_t)j->dtype);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Resident set size of this process in bytes. */
static long rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

static void draw(job_t *j, uint64_t *shared, int size, long round, int k)
{
    static const hvd_op_t ops[] = {HVD_SUM, HVD_AVERAGE, HVD_MIN, HVD_MAX};
    j->kind = (int)(next(shared) % 3);
    j->dtype = (hvd_dtype_t)(next(shared) % 7);
    j->op = ops[next(shared) % 4];
    if (j->op == HVD_AVERAGE && !is_float(j->dtype)) j->op = HVD_SUM;
    j->root = (int)(next(shared) % (uint64_t)size);
    /* Log-uniform from 0 to MAX_COUNT: small and large both come up. */
    double u = (double)(next(shared) % 1000000) / 1e6;
    j->count = (size_t)exp(u * log(MAX_COUNT + 1.0)) - 1;
    snprintf(j->name, sizeof j->name, "soak.%ld.%d", round, k);
}

int main(int argc, char **argv)
{
    double seconds = 60;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = strtod(argv[++i], &end);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], &end, 10);
        if (!end || *end || seconds <= 0 || seconds > 86400) {
            fprintf(stderr, "usage: soak [--seconds S (0 < S <= 86400)] "
                            "[--seed X]  (bad: \"%s\")\n", argv[i]);
            return 2;
        }
    }
    if (hvd_init(&argc, &argv) != HVD_OK) return 1;
    int rank = hvd_rank(), size = hvd_size();
    uint64_t shared = seed, mine = seed * 1000003u + (uint64_t)rank;
    long rounds = 0, ran = 0, wrong = 0, failed = 0, rss[4] = {0};
    double start = now_s(), quarter = seconds / 4;
    job_t jobs[MAX_BATCH];
    int order[MAX_BATCH], stop = 0;
    while (!stop) {
        int n = 1 + (int)(next(&shared) % MAX_BATCH);
        for (int k = 0; k < n; k++) {
            job_t *j = &jobs[k];
            draw(j, &shared, size, rounds, k);
            size_t esize = ring_dtype_size((ring_dtype_t)j->dtype);
            size_t out_count = j->kind == 2 ? j->count * (size_t)size
                                            : j->count;
            j->in = malloc(j->count * esize + 1);
            j->out = malloc(out_count * esize + 1);
            for (size_t i = 0; i < j->count; i++)
                prog_value_store(j->kind == 1 ? j->out : j->in, i,
                                  (ring_dtype_t)j->dtype, input(rank, i, k));
            order[k] = k;
        }
        for (int k = n - 1; k > 0; k--) { /* this rank's own order */
            int o = (int)(next(&mine) % (uint64_t)(k + 1)), t = order[k];
            order[k] = order[o];
            order[o] = t;
        }
        for (int m = 0; m < n; m++) {
            job_t *j = &jobs[order[m]];
            int s = j->kind == 0
                        ? hvd_allreduce_async(j->in, j->out, j->count,
                                              j->dtype, j->op, j->name,
                                              &j->handle)
                    : j->kind == 1
                        ? hvd_broadcast_async(j->out, j->count, j->dtype,
                                              j->root, j->name, &j->handle)
                        : HVD_OK;
            if (s != HVD_OK) {
                failed++;
                j->handle = NULL;
            }
        }
        for (int k = 0; k < n; k++) {
            job_t *j = &jobs[k];
            int s = j->kind == 2 ? hvd_allgather(j->in, j->count, j->out,
                                                 j->dtype, j->name)
                    : j->handle ? hvd_wait(j->handle)
                                : HVD_ERR_STATE;
            size_t total = j->kind == 2 ? j->count * (size_t)size : j->count;
            if (s != HVD_OK) failed++;
            for (size_t i = 0; s == HVD_OK && i < total; i++)
                if (prog_value_load(j->out, i, (ring_dtype_t)j->dtype) !=
                    expected(j, k, i, size)) {
                    if (!wrong)
                        fprintf(stderr, "soak rank %d: %s element %zu wrong\n",
                                rank, j->name, i);
                    wrong++;
                }
            free(j->in);
            free(j->out);
            ran++;
        }
        rounds++;
        double t = now_s() - start;
        int q = (int)(t / quarter);
        if (q > 3) q = 3;
        long r = rss_bytes();
        if (r > rss[q]) rss[q] = r;
        stop = t >= seconds;
        /* Rank 0's clock decides, so every rank stops after the same round. */
        if (hvd_broadcast(&stop, 1, HVD_INT32, 0, "soak.stop") != HVD_OK) {
            failed++;
            stop = 1;
        }
    }
    long totals[3] = {ran, wrong, failed}, all[3], rss_max[4];
    hvd_allreduce(totals, all, 3, HVD_INT64, HVD_SUM, "soak.totals");
    hvd_allreduce(rss, rss_max, 4, HVD_INT64, HVD_MAX, "soak.rss");
    int ok = all[1] == 0 && all[2] == 0 &&
             rss_max[3] <= rss_max[1] + rss_max[1] / 10 + (4 << 20);
    if (rank == 0) {
        printf("soak: %d ranks, %.0f s, %ld rounds: %ld collectives on each "
               "rank (%ld in all), %ld wrong elements, %ld failed calls\n",
               size, seconds, rounds, all[0] / size, all[0], all[1], all[2]);
        printf("soak: largest RSS of a rank per quarter: %.1f %.1f %.1f "
               "%.1f MiB\n", rss_max[0] / 1048576.0, rss_max[1] / 1048576.0,
               rss_max[2] / 1048576.0, rss_max[3] / 1048576.0);
        printf("soak: %s\n", ok ? "ok" : "FAILED");
    }
    hvd_shutdown();
    return ok ? 0 : 1;
}
