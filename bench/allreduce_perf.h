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
 *   allreduce_device.c   -G: device buffers, the device implementations,
 *                        the limit and who shares a GPU
 *   allreduce_cuda.c     -G on CUDA: each rank's GPU and its PCI bus id
 *                        (CUDA builds only; the CUDA runtime is here)
 *   allreduce_nccl.c     -G's nccl column (NCCL builds only)
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
    int device;               /* -G: device buffers (allreduce_device.c) */
} bench_opts_t;

/* -G's state (allreduce_device.c); all zero in host mode. */
typedef struct {
    const ring_dev_t *dev;  /* ring_dev() */
    ring_stream_t *stream;  /* the benchmark's own copies */
    char *hostcopy;         /* mpi_hostcopy's plain malloc'ed buffer */
    ring_ctx_t *ctx_ring;   /* staged: RING_INTRANODE_RING */
    ring_ctx_t *ctx_shm;    /* ipc: the default context */
    char key[336];          /* this rank's device: host and PCI bus id or
                               ordinal */
    int ndevices;           /* distinct keys over all ranks */
    int one_node;           /* 1: every rank on this node */
    /* limit: with every rank on one device (ndevices == 1), the device's
     * copy bandwidth, bytes read plus written per second; with a device
     * per rank on one node, the peer-to-peer copy bandwidth; 0: n/a. */
    double limit_bps;
    char limit_how[256];    /* what limit_bps is, or why it is n/a */
    const char *nccl_why;   /* why nccl is left out; NULL: it runs */
    void *nccl;             /* allreduce_nccl.c's communicator and stream */
} bench_gpu_t;

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
    /* What the implementations get: sendbuf and recvbuf, or with -G
     * device buffers that the checks reach through copies. */
    char *callsend, *callrecv;
    bench_gpu_t gpu;
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
    int device;    /* 1: runs on device buffers (-G) */
    /* Not NULL: a bound, computed rather than timed (limit); run is NULL. */
    double (*model_seconds)(const bench_t *b, size_t count);
};

/* ---- one measurement: an implementation, in place or not, at one size ---- */

#define MAX_MEASUREMENTS 12

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
/* -G --compare: the same, on device buffers. */
enum { GCMP_STAGED_OOP, GCMP_STAGED_IP, GCMP_IPC_OOP, GCMP_IPC_IP,
       GCMP_HOSTCOPY_OOP, GCMP_HOSTCOPY_IP, GCMP_NCCL_OOP, GCMP_NCCL_IP,
       GCMP_LIMIT, GCMP_COUNT };
/* -G --compare's ratio columns, kept for the footer. */
enum { GRATIO_STAGED_HOSTCOPY, GRATIO_IPC_LIMIT, GRATIO_IPC_STAGED,
       GRATIO_IPC_NCCL, GRATIO_COUNT };

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
    /* -G --compare: in-place ratios per GRATIO_ column, at the sizes the
     * column's target is for */
    double gratio[GRATIO_COUNT][MAX_SIZES];
    int ngratio[GRATIO_COUNT];
} summary_t;

/* ---- allreduce_options.c ---- */

/* 0: run; 1: --help printed; -1: bad options, explained on rank 0. */
int bench__parse_options(int argc, char **argv, bench_opts_t *o);
/* The name printed for a dtype or an op ("float", "avg"). */
const char *bench__dtype_label(ring_dtype_t dtype);
int bench__dtype_is_float(ring_dtype_t dtype);
const char *bench__op_label(ring_op_t op);

/* ---- allreduce_impls.c ---- */

extern const bench_impl_t bench__impl_ring, bench__impl_mpi,
    bench__impl_noreduce, bench__impl_shm, bench__impl_hier,
    bench__impl_hiershm;
/* The implementation called `name` (--impl), or NULL. */
const bench_impl_t *bench__impl_named(const char *name);
/* "ring, mpi, ..." or "staged, ...": the names --impl takes without or
 * with -G. */
const char *bench__impl_names(int device);

/* The buffers the implementations get (callsend, callrecv): nbytes from
 * src to dst, host or device either side, done when it returns. */
void bench__copy(const bench_t *b, void *dst, const void *src,
                 size_t nbytes);

/* sendbuf's first count elements: this rank's inputs. */
void bench__fill_inputs(const bench_t *b, size_t count);
/* expected's first count elements: the reduction over all ranks. */
void bench__fill_expected(const bench_t *b, size_t count);
/* Elements of recvbuf that differ from expected; the first one is printed,
 * so a failure says where and what. */
int64_t bench__count_wrong(const bench_t *b, const char *what, size_t count);

/* ---- allreduce_device.c (-G) ---- */

extern const bench_impl_t bench__impl_staged, bench__impl_hostcopy,
    bench__impl_ipc, bench__impl_limit, bench__impl_nccl;
/* Collective. Exits the whole run with 2 when there is no device (rank 0
 * says why); else allocates callsend and callrecv on the device, makes
 * the contexts, finds who shares a device, measures the limit and sets
 * up nccl. */
void bench__device_setup(bench_t *b, size_t nbytes);
void bench__device_free(bench_t *b);
/* The header's device lines (rank 0 prints; collective: the rank map). */
void bench__device_print_header(const bench_t *b);

/* ---- allreduce_cuda.c (CUDA builds) and allreduce_nccl.c (NCCL) ---- */

/* Selects local_rank's GPU (modulo the visible ones) and writes its PCI
 * bus id to key. RING_OK, or RING_ERR_CUDA after saying why. */
int bench__cuda_select(int local_rank, char *key, size_t len);
/* NULL when nccl can run (b->gpu.nccl set), else why not: the same on
 * every rank. Collective; after bench__cuda_select. */
const char *bench__nccl_setup(bench_t *b);
void bench__nccl_free(bench_t *b);
void bench__nccl_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                     size_t count);

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
/* -G --compare: GCMP_COUNT measurements, in the order of the GCMP_ enum. */
void bench__print_device_header(void);
void bench__print_device_row(const bench_t *b, const measurement_t *ms,
                             size_t nbytes, size_t count, summary_t *s);
void bench__print_wrong_details(const measurement_t *ms, int nms,
                                size_t nbytes);
void bench__print_footer(const bench_t *b, summary_t *s);

#endif
