/* bench/allreduce_perf.h: what the files of bench/allreduce_perf share:
 * the run's options and buffers (bench_t), the implementations' callback
 * struct, one measurement, the totals for the footer, and the functions
 * each file gives the others. Not installed; bench/common.h holds what
 * every benchmark shares.
 *
 *   allreduce_perf.c     the size loop, timing and checking, the header,
 *                        set-up and main (the file that says what the
 *                        benchmark does)
 *   allreduce_options.c  the options, and the names of dtypes and ops
 *   allreduce_impls.c    inputs, expected results, the implementations
 *   allreduce_report.c   the table's rows and the footer
 */
#ifndef HVD_BENCH_ALLREDUCE_PERF_H
#define HVD_BENCH_ALLREDUCE_PERF_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "bench/common.h"
#include "ring/ring.h"

/* ---- the run ---- */

typedef struct bench_impl bench_impl_t;

typedef struct {
    size_t min_nbytes, max_nbytes;
    size_t step_factor;
    bench_loop_t loop; /* -n, -w, -r, -c */
    ring_dtype_t dtype;
    ring_op_t op;
    ring_algo_t algo;
    const bench_impl_t *impl; /* NULL with --compare: all of them */
} bench_opts_t;

typedef struct {
    bench_opts_t opts;
    int rank, nranks;
    size_t elsize;     /* bytes per element of opts.dtype */
    char *sendbuf;     /* inputs; max_nbytes / elsize elements each */
    char *recvbuf;     /* results, and the data of in-place calls; shm's
                          slab when shm runs */
    char *expected;    /* what recvbuf must hold after one call */
    ring_shm_t *shm;   /* NULL when shm is not run, or cannot be */
    MPI_Comm node, cross; /* hier's; MPI_COMM_NULL when it cannot run */
} bench_t;

/* One implementation: whether it can run a call, and the call itself. */
struct bench_impl {
    const char *name;
    /* Why `count` elements cannot run here (NULL: they can). The answer must
     * be the same on every rank, as all ranks skip together. */
    const char *(*unsupported)(const bench_t *b, size_t count);
    /* One all-reduce; sendbuf == recvbuf is in place. */
    void (*run)(const bench_t *b, const void *sendbuf, void *recvbuf,
                size_t count);
    int checkable; /* noreduce moves data without reducing: nothing to check */
};

/* ---- one measurement: an implementation, in place or not, at one size ---- */

#define MAX_MEASUREMENTS 8

typedef struct {
    const bench_impl_t *impl;
    int in_place;
    const char *skipped; /* why it does not run at this size; NULL: it runs */
    double seconds;      /* mean per call on each rank, max over ranks */
    int64_t nwrong;      /* elements wrong, summed over ranks; -1 unchecked */
} measurement_t;

/* --compare: which measurement is which, in the order they are timed. */
enum { CMP_RING_OOP, CMP_RING_IP, CMP_MPI_OOP, CMP_MPI_IP, CMP_NOREDUCE_IP,
       CMP_SHM_OOP, CMP_SHM_IP, CMP_COUNT };

/* Sizes grow by a factor >= 2 and fit a size_t: at most 64 of them. */
#define MAX_SIZES 64

/* Totals over all sizes, for the footer. */
typedef struct {
    int64_t nwrong;             /* wrong elements, all measurements */
    double busbw_sum[MAX_MEASUREMENTS];
    int busbw_n[MAX_MEASUREMENTS];
    /* --compare: busbw ratios, one per size (in place unless _oop) */
    double ratio_ip[MAX_SIZES], ratio_oop[MAX_SIZES], ratio_lim[MAX_SIZES];
    int nratio_ip, nratio_oop, nratio_lim;
    double shm_lim[MAX_SIZES], shm_ring[MAX_SIZES], shm_mpi[MAX_SIZES];
    int nshm_lim, nshm_ring, nshm_mpi;
} summary_t;

/* ---- allreduce_options.c ---- */

/* 0: run; 1: --help printed; -1: bad options, explained on rank 0. */
int bench__parse_options(int argc, char **argv, bench_opts_t *o);
/* The name printed for a dtype or an op ("float", "avg"). */
const char *bench__dtype_label(ring_dtype_t dtype);
const char *bench__op_label(ring_op_t op);

/* ---- allreduce_impls.c ---- */

extern const bench_impl_t bench__impl_ring, bench__impl_mpi,
    bench__impl_noreduce, bench__impl_shm, bench__impl_hier,
    bench__impl_hiershm;
/* The implementation called `name` (--impl), or NULL. */
const bench_impl_t *bench__impl_named(const char *name);

/* sendbuf's first count elements: this rank's inputs. */
void bench__fill_inputs(const bench_t *b, size_t count);
/* expected's first count elements: the reduction over all ranks. */
void bench__fill_expected(const bench_t *b, size_t count);
/* Elements of recvbuf that differ from expected; the first one is printed,
 * so a failure says where and what. */
int64_t bench__count_wrong(const bench_t *b, const char *what, size_t count);

/* ---- allreduce_report.c (rank 0 prints) ---- */

void bench__summary_add(summary_t *s, const bench_t *b,
                        const measurement_t *ms, int nms, size_t nbytes);
/* --impl: two measurements, out of place then in place. */
void bench__print_single_header(void);
void bench__print_single_row(const bench_t *b, const measurement_t *ms,
                             size_t nbytes, size_t count);
/* --compare: CMP_COUNT measurements, in the order of the CMP_ enum. */
void bench__print_compare_header(void);
void bench__print_compare_row(const bench_t *b, const measurement_t *ms,
                              size_t nbytes, size_t count, summary_t *s);
void bench__print_wrong_details(const measurement_t *ms, int nms,
                                size_t nbytes);
void bench__print_footer(const bench_t *b, summary_t *s);

#endif
