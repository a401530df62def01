/* bench/allreduce_report.c: allreduce_perf's table and footer, in
 * nccl-tests' layout: one row per size (time, algbw, busbw and #wrong out
 * of place and in place; with --compare each implementation's busbw and
 * the ratios between them), then the averages, and with --compare how
 * often and by how much ours won. -G --compare's table is drawn from a
 * list of its columns (gcols), busbw and ratios alike.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/allreduce_perf.h"

/* ---- figures and the table ---- */

static double busbw_gbs(const bench_t *b, size_t nbytes, double seconds)
{
    return bench_busbw_gbs(nbytes, seconds, b->nranks);
}

/* Time in microseconds with nccl-tests' precision: fewer decimals as it
 * grows, so the column keeps its width. */
static void format_time(char *text, size_t len, double seconds)
{
    double us = seconds * 1.0e6;
    int decimals = us >= 10000.0 ? 0 : us >= 100.0 ? 1 : 2;
    snprintf(text, len, "%7.*f", decimals, us);
}

static void format_wrong(char *text, size_t len, int64_t nwrong)
{
    if (nwrong < 0)
        snprintf(text, len, "%6s", "N/A");
    else
        snprintf(text, len, "%6lld", (long long)nwrong);
}

void bench__summary_add(summary_t *s, const bench_t *b,
                        const measurement_t *ms, int nms, size_t nbytes)
{
    for (int i = 0; i < nms; i++) {
        if (ms[i].skipped != NULL)
            continue;
        s->busbw_sum[i] += busbw_gbs(b, nbytes, ms[i].seconds);
        s->busbw_n[i]++;
        if (ms[i].nwrong > 0)
            s->nwrong += ms[i].nwrong;
    }
}

void bench__print_single_header(void)
{
    printf("# %10s  %12s  %8s  %6s  %s  %s\n", "", "", "", "",
           "-------- out-of-place --------",
           "---------- in-place ----------");
    printf("# %10s  %12s  %8s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
           "size", "count", "type", "redop", "time", "algbw", "busbw",
           "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s\n",
           "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "",
           "(us)", "(GB/s)", "(GB/s)");
}

static void print_single_cell(const bench_t *b, const measurement_t *m,
                              size_t nbytes)
{
    char time_text[32], wrong_text[32];

    if (m->skipped != NULL) {
        printf("  %7s  %6s  %6s %6s", "n/a", "n/a", "n/a", "n/a");
        return;
    }
    format_time(time_text, sizeof time_text, m->seconds);
    format_wrong(wrong_text, sizeof wrong_text, m->nwrong);
    printf("  %7s  %6.2f  %6.2f %6s", time_text,
           bench_algbw_gbs(nbytes, m->seconds),
           busbw_gbs(b, nbytes, m->seconds), wrong_text);
}

static void print_row_start(const bench_t *b, size_t nbytes, size_t count)
{
    printf("%12zu  %12zu  %8s  %6s", nbytes, count,
           bench__dtype_label(b->opts.dtype),
           bench__op_label(b->opts.op));
}

void bench__print_single_row(const bench_t *b, const measurement_t *ms,
                             size_t nbytes, size_t count)
{
    print_row_start(b, nbytes, count);
    print_single_cell(b, &ms[0], nbytes);
    print_single_cell(b, &ms[1], nbytes);
    printf("\n");
}


/* Columns 5-8 (ring, mpi, noreduce, shm in-place busbw) are what
 * bench/plot.gp draws against column 1; bench/summarize.py reads 5-16. */
void bench__print_compare_header(void)
{
    printf("# a/b: busbw ratio (b's time / a's time); lim: noreduce, the "
           "ring's messages without reduction\n");
    printf("# %10s  %12s  %8s  %6s  %s  %s\n", "", "", "", "",
           "-------------------------------- in-place busbw "
           "---------------------------------",
           "------ out-of-place busbw ------");
    printf("# %10s  %12s  %8s  %6s  %7s  %7s  %8s  %7s  %8s  %8s  %8s  %8s  "
           "%7s  %7s  %7s  %8s  %6s\n",
           "size", "count", "type", "redop", "ring", "mpi", "noreduce", "shm",
           "ring/mpi", "ring/lim", "shm/lim", "shm/ring", "ring", "mpi",
           "shm", "ring/mpi", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %7s  %7s  %8s  %7s  %8s  %8s  %8s  %8s  "
           "%7s  %7s  %7s\n",
           "(B)", "(elements)", "", "", "(GB/s)", "(GB/s)", "(GB/s)",
           "(GB/s)", "", "", "", "", "(GB/s)", "(GB/s)", "(GB/s)");
}

static void print_busbw(const bench_t *b, const measurement_t *m,
                        size_t nbytes, int width)
{
    if (m->skipped != NULL)
        printf("  %*s", width, "n/a");
    else
        printf("  %*.2f", width, busbw_gbs(b, nbytes, m->seconds));
}

/* Prints busbw(ours) / busbw(theirs), which is their time over ours (so it
 * means something at one rank too) and keeps it for the footer. */
static void print_ratio(const measurement_t *ours, const measurement_t *theirs,
                        double *kept, int *nkept)
{
    if (ours->skipped != NULL || theirs->skipped != NULL ||
        ours->seconds <= 0) {
        printf("  %8s", "n/a");
        return;
    }
    double ratio = theirs->seconds / ours->seconds;
    printf("  %8.2f", ratio);
    if (*nkept < MAX_SIZES)
        kept[(*nkept)++] = ratio;
}

void bench__print_compare_row(const bench_t *b, const measurement_t *ms,
                              size_t nbytes, size_t count, summary_t *s)
{
    int64_t nwrong = -1;

    print_row_start(b, nbytes, count);
    print_busbw(b, &ms[CMP_RING_IP], nbytes, 7);
    print_busbw(b, &ms[CMP_MPI_IP], nbytes, 7);
    print_busbw(b, &ms[CMP_NOREDUCE_IP], nbytes, 8);
    print_busbw(b, &ms[CMP_SHM_IP], nbytes, 7);
    print_ratio(&ms[CMP_RING_IP], &ms[CMP_MPI_IP], s->ratio_ip, &s->nratio_ip);
    print_ratio(&ms[CMP_RING_IP], &ms[CMP_NOREDUCE_IP], s->ratio_lim,
                &s->nratio_lim);
    print_ratio(&ms[CMP_SHM_IP], &ms[CMP_NOREDUCE_IP], s->shm_lim,
                &s->nshm_lim);
    print_ratio(&ms[CMP_SHM_IP], &ms[CMP_RING_IP], s->shm_ring,
                &s->nshm_ring);
    /* Kept for the footer only: the row is wide enough. */
    if (ms[CMP_SHM_IP].skipped == NULL && ms[CMP_MPI_IP].skipped == NULL &&
        ms[CMP_SHM_IP].seconds > 0 && s->nshm_mpi < MAX_SIZES)
        s->shm_mpi[s->nshm_mpi++] =
            ms[CMP_MPI_IP].seconds / ms[CMP_SHM_IP].seconds;
    print_busbw(b, &ms[CMP_RING_OOP], nbytes, 7);
    print_busbw(b, &ms[CMP_MPI_OOP], nbytes, 7);
    print_busbw(b, &ms[CMP_SHM_OOP], nbytes, 7);
    print_ratio(&ms[CMP_RING_OOP], &ms[CMP_MPI_OOP], s->ratio_oop,
                &s->nratio_oop);
    for (int i = 0; i < CMP_COUNT; i++)
        if (ms[i].nwrong >= 0)
            nwrong = (nwrong < 0 ? 0 : nwrong) + ms[i].nwrong;
    char wrong_text[32];
    format_wrong(wrong_text, sizeof wrong_text, nwrong);
    printf("  %6s\n", wrong_text);
}

/* ---- -G --compare: the device table, one entry per column ---- */

typedef struct {
    const char *label;
    int ours;          /* a GCMP_ measurement: its busbw, or the ratio's top */
    int theirs;        /* -1: a busbw column; else ratio ours / theirs */
    int gratio;        /* GRATIO_ kept for the footer, -1: none */
    size_t from_nbytes; /* the sizes the target is for */
    double target;     /* issue 22's target for the ratio */
    const char *from_text;
} gcol_t;

static const gcol_t gcols[] = {
    {"staged", GCMP_STAGED_IP, -1, -1, 0, 0, NULL},
    {"mpi_hostcopy", GCMP_HOSTCOPY_IP, -1, -1, 0, 0, NULL},
    {"ipc", GCMP_IPC_IP, -1, -1, 0, 0, NULL},
    {"nccl", GCMP_NCCL_IP, -1, -1, 0, 0, NULL},
    {"limit", GCMP_LIMIT, -1, -1, 0, 0, NULL},
    {"staged/mpi_hostcopy", GCMP_STAGED_IP, GCMP_HOSTCOPY_IP,
     GRATIO_STAGED_HOSTCOPY, 1u << 20, 1.5, "from 1 MiB"},
    {"ipc/limit", GCMP_IPC_IP, GCMP_LIMIT, GRATIO_IPC_LIMIT, 64u << 20, 0.6,
     "from 64 MiB"},
    {"ipc/staged", GCMP_IPC_IP, GCMP_STAGED_IP, GRATIO_IPC_STAGED, 64u << 20,
     5.0, "from 64 MiB"},
    {"ipc/nccl", GCMP_IPC_IP, GCMP_NCCL_IP, GRATIO_IPC_NCCL, 1u << 20, 1.0,
     "from 1 MiB, a GPU per rank"},
    {"staged_oop", GCMP_STAGED_OOP, -1, -1, 0, 0, NULL},
    {"ipc_oop", GCMP_IPC_OOP, -1, -1, 0, 0, NULL},
    {"mpi_hostcopy_oop", GCMP_HOSTCOPY_OOP, -1, -1, 0, 0, NULL},
    {"nccl_oop", GCMP_NCCL_OOP, -1, -1, 0, 0, NULL},
};

#define NGCOLS (sizeof gcols / sizeof gcols[0])

static int gcol_width(const gcol_t *c)
{
    int len = (int)strlen(c->label);
    return len > 7 ? len : 7;
}

void bench__print_device_header(void)
{
    printf("# busbw in GB/s, in place unless _oop; a/b: busbw ratio (b's "
           "time / a's time); limit: bench/README.md\n");
    printf("# %10s  %12s  %8s  %6s", "size", "count", "type", "redop");
    for (size_t i = 0; i < NGCOLS; i++)
        printf("  %*s", gcol_width(&gcols[i]), gcols[i].label);
    printf("  %6s\n", "#wrong");
}

void bench__print_device_row(const bench_t *b, const measurement_t *ms,
                             size_t nbytes, size_t count, summary_t *s)
{
    int64_t nwrong = -1;
    char wrong_text[32];

    print_row_start(b, nbytes, count);
    for (size_t i = 0; i < NGCOLS; i++) {
        const gcol_t *c = &gcols[i];
        const measurement_t *ours = &ms[c->ours];
        int width = gcol_width(c);
        if (c->theirs < 0) {
            print_busbw(b, ours, nbytes, width);
            continue;
        }
        const measurement_t *theirs = &ms[c->theirs];
        if (ours->skipped != NULL || theirs->skipped != NULL ||
            ours->seconds <= 0) {
            printf("  %*s", width, "n/a");
            continue;
        }
        double ratio = theirs->seconds / ours->seconds;
        printf("  %*.2f", width, ratio);
        int *n = &s->ngratio[c->gratio];
        if (nbytes >= c->from_nbytes && *n < MAX_SIZES)
            s->gratio[c->gratio][(*n)++] = ratio;
    }
    for (int i = 0; i < GCMP_COUNT; i++)
        if (ms[i].nwrong >= 0)
            nwrong = (nwrong < 0 ? 0 : nwrong) + ms[i].nwrong;
    format_wrong(wrong_text, sizeof wrong_text, nwrong);
    printf("  %6s\n", wrong_text);
}

/* Names each measurement that had wrong elements: the row's #wrong column
 * sums them all. */
void bench__print_wrong_details(const measurement_t *ms, int nms,
                                size_t nbytes)
{
    for (int i = 0; i < nms; i++)
        if (ms[i].nwrong > 0)
            printf("# WRONG: %zu B: %s %s: %lld elements wrong\n", nbytes,
                   ms[i].impl->name,
                   ms[i].in_place ? "in-place" : "out-of-place",
                   (long long)ms[i].nwrong);
}

/* ---- the footer ---- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int count_at_least(const double *v, int n, double threshold)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += v[i] >= threshold;
    return k;
}

/* "# label : mean busbw" over the sizes of measurements [first, last], as
 * nccl-tests averages out-of-place and in-place together; `none` when no
 * size ran. */
static void print_mean_busbw(const summary_t *s, const char *label, int first,
                             int last, const char *none)
{
    double sum = 0;
    int n = 0;

    for (int i = first; i <= last; i++) {
        sum += s->busbw_sum[i];
        n += s->busbw_n[i];
    }
    if (n > 0)
        printf("# %-20s : %g\n", label, sum / n);
    else
        printf("# %-20s : %s\n", label, none);
}

/* "12 of 18 sizes (median 1.21)": how often and by how much ring won. */
static void print_wins(const char *placement, double *ratios, int n)
{
    if (n == 0)
        printf("%s n/a", placement);
    else
        printf("%s %d of %d sizes (median ratio %.2f)", placement,
               count_at_least(ratios, n, 1.0), n, median(ratios, n));
}

static void print_median(const char *label, double *ratios, int n)
{
    printf("# %-20s : ", label);
    if (n > 0)
        printf("median %.2f in-place\n", median(ratios, n));
    else
        printf("n/a\n");
}

/* -G --compare: the means, then each ratio against issue 22's target. */
static void print_device_footer(summary_t *s)
{
    print_mean_busbw(s, "Avg bus bandwidth", GCMP_STAGED_OOP, GCMP_STAGED_IP,
                     "0");
    print_mean_busbw(s, "Avg busbw mpi_hostcopy", GCMP_HOSTCOPY_OOP,
                     GCMP_HOSTCOPY_IP, "n/a");
    print_mean_busbw(s, "Avg busbw ipc", GCMP_IPC_OOP, GCMP_IPC_IP, "n/a");
    print_mean_busbw(s, "Avg busbw nccl", GCMP_NCCL_OOP, GCMP_NCCL_IP, "n/a");
    print_mean_busbw(s, "Avg busbw limit", GCMP_LIMIT, GCMP_LIMIT, "n/a");
    for (size_t i = 0; i < NGCOLS; i++) {
        const gcol_t *c = &gcols[i];
        if (c->gratio < 0)
            continue;
        double *v = s->gratio[c->gratio];
        int n = s->ngratio[c->gratio];
        printf("# %-20s : ", c->label);
        if (n == 0)
            printf("n/a");
        else
            printf("median %.2f in-place %s, %d of %d sizes >= %.1f",
                   median(v, n), c->from_text, count_at_least(v, n, c->target),
                   n, c->target);
        printf(" (issue 22: >= %.1f %s)\n", c->target, c->from_text);
    }
    printf("#\n");
}

void bench__print_footer(const bench_t *b, summary_t *s)
{
    int compare = b->opts.impl == NULL;

    printf("# %-20s : %lld %s\n", "Out of bounds values", (long long)s->nwrong,
           s->nwrong ? "FAILED" : "OK");
    if (!compare) {
        print_mean_busbw(s, "Avg bus bandwidth", 0, 1, "0");
        printf("#\n");
        return;
    }
    if (b->opts.device) {
        print_device_footer(s);
        return;
    }
    /* The nccl-tests line is ours, so scripts reading it see our figure;
     * like nccl-tests it stays a number when no size ran. */
    print_mean_busbw(s, "Avg bus bandwidth", CMP_RING_OOP, CMP_RING_IP, "0");
    print_mean_busbw(s, "Avg busbw mpi", CMP_MPI_OOP, CMP_MPI_IP, "n/a");
    print_mean_busbw(s, "Avg busbw noreduce", CMP_NOREDUCE_IP,
                     CMP_NOREDUCE_IP, "n/a");
    printf("# %-20s : ", "ring >= mpi");
    print_wins("in-place", s->ratio_ip, s->nratio_ip);
    print_wins(", out-of-place", s->ratio_oop, s->nratio_oop);
    printf("\n");
    print_median("ring / noreduce", s->ratio_lim, s->nratio_lim);
    print_mean_busbw(s, "Avg busbw shm", CMP_SHM_OOP, CMP_SHM_IP, "n/a");
    printf("# %-20s : ", "shm >= ring");
    print_wins("in-place", s->shm_ring, s->nshm_ring);
    printf("\n# %-20s : ", "shm >= mpi");
    print_wins("in-place", s->shm_mpi, s->nshm_mpi);
    printf("\n");
    print_median("shm / noreduce", s->shm_lim, s->nshm_lim);
    printf("#\n");
}

