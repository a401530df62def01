/* bench/fusion_perf.c: what hvd's tensor fusion buys, measured through the
 * public API (hvd/hvd.h) on two gradient lists, against MPI and our ring.
 *
 * Workloads (bench/workloads.h): small, 1000 tensors of 4 KiB, issued in
 * order; resnet50, the 161 trainable tensors of torchvision's ResNet-50
 * (25,557,032 float32 elements), issued last layer first, as backward
 * produces them. Every tensor is carved out of one slab per rank, as a
 * DistributedOptimizer hands them over.
 *
 * Methods, each reducing every tensor of a workload once per iteration:
 *   hvd-fused    hvd_allreduce_async() per tensor (named "small.17",
 *                "layer3.2.conv1.weight", ...), then hvd_wait() on every
 *                handle, with the engine's HVD_FUSION_THRESHOLD;
 *   hvd-unfused  the same in a run with --fusion off, which sets
 *                HVD_FUSION_THRESHOLD=0 before hvd_init (the engine reads it
 *                once there, so fused and unfused are two launches:
 *                compare their time/mpi and time/ring columns, which are
 *                taken inside each launch, not their raw times);
 *   mpi          one MPI_Allreduce per tensor (average: MPI_SUM and then a
 *                division on each rank, timed);
 *   ring         one ring_allreduce of the whole slab, the same total bytes
 *                in one call: the bound fusion can approach.
 * mpi and ring run on a duplicate of MPI_COMM_WORLD taken before hvd_init:
 * the same ranks and cost, but never the communicator the engine's thread
 * may be using (two threads' collectives on one communicator would be
 * erroneous even under MPI_THREAD_MULTIPLE).
 *
 * Threads: the program starts MPI itself with MPI_THREAD_MULTIPLE, then
 * calls hvd_init (which uses the running MPI and leaves MPI_Finalize to
 * us), and finalises MPI after hvd_shutdown. With MPI_THREAD_MULTIPLE the
 * methods are timed interleaved, round by round, while the engine runs
 * (--order interleaved, the default); no hvd request is in flight during
 * the mpi and ring phases, and hvd_barrier() separates every phase. If MPI
 * gives less, or with --order separate, mpi and ring are all timed before
 * hvd_init, with no engine thread at all.
 *
 * Time per iteration is the mean over -n timed iterations (after -w
 * untimed ones), summed over -r rounds and divided by them, then the max
 * over ranks. Inputs are small integers (|x| <= 2), so sums are exact and
 * results are checked with == against what each rank computes alone, once
 * per workload and method, outside the timed loops (inputs must come back
 * unchanged too). The footer gives two targets: on small, hvd-fused at
 * least 10x faster than mpi; on resnet50, hvd-fused within 1.10x of ring.
 *
 * Exit status: 0 all results right, 1 wrong results, 2 bad options.
 * Left out: other dtypes and ops, CUDA buffers, in-place calls, and a
 * fused/unfused comparison inside one launch (the threshold is fixed at
 * hvd_init, and the API promises nothing about a second hvd_init).
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "bench/common.h"
#include "bench/workloads.h"
#include "hvd/hvd.h"
#include "ring/ring.h"

/* ---- hvd's fatal checks (MPI's and ring's are in bench/common.h) ---- */

/* `tensor` names the tensor a per-tensor call was about, or is NULL. */
static _Noreturn void die_hvd(int status, const char *call,
                              const char *tensor, const char *file, int line)
{
    fprintf(stderr, "%s:%d: host %s rank %d: %s failed%s%s: %s (%d)\n", file,
            line, bench_host, prog_rank, call,
            tensor ? " for tensor " : "", tensor ? tensor : "",
            hvd_strerror(status), status);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

#define HVD_CHECK(call)                                                        \
    do {                                                                       \
        int hvd_rc_ = (call);                                                  \
        if (hvd_rc_ != HVD_OK)                                                 \
            die_hvd(hvd_rc_, #call, NULL, __FILE__, __LINE__);                 \
    } while (0)

/* The same, for a call about one tensor: the message names it. */
#define HVD_CHECK_TENSOR(call, tensor)                                         \
    do {                                                                       \
        int hvd_rc_ = (call);                                                  \
        if (hvd_rc_ != HVD_OK)                                                 \
            die_hvd(hvd_rc_, #call, (tensor), __FILE__, __LINE__);             \
    } while (0)

/* ---- workloads (bench/workloads.h) ---- */

enum { WL_SMALL, WL_RESNET50, NWORKLOADS };

/* ---- options ---- */

enum { ORDER_INTERLEAVED, ORDER_SEPARATE };

typedef struct {
    bench_loop_t loop; /* -n, -w, -r, -c */
    hvd_op_t op;       /* HVD_SUM or HVD_AVERAGE */
    int fusion;        /* 0: HVD_FUSION_THRESHOLD=0 set before hvd_init */
    int workloads;     /* bit (1 << WL_*) per workload to run */
    int order;         /* ORDER_*, as asked; may become separate */
} opts_t;

enum { OPT_FUSION = 256, OPT_WORKLOAD, OPT_ORDER };

static const struct option long_options[] = {
    BENCH_LOOP_LONG_OPTIONS, /* -n, -w, -r, -c */
    {"op", required_argument, NULL, 'o'},
    {"fusion", required_argument, NULL, OPT_FUSION},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"order", required_argument, NULL, OPT_ORDER},
    PROG_END_LONG_OPTIONS,
};

static const prog_cli_t cli = {
    .optstring = ":n:w:r:c:o:h",
    .long_options = long_options,
    .usage_args = BENCH_USAGE_ARGS,
    .usage_options =
        "  -n, --iters N            timed iterations per workload and "
        "method (default 20)\n"
        "  -w, --warmup_iters N     untimed iterations before them "
        "(default 5)\n"
        "  -r, --rounds N           repeat the timing N times, methods "
        "interleaved (default 1)\n"
        "  -c, --check 0|1          check results (default 1)\n"
        "  -o, --op OP              sum or avg (default sum)\n"
        "      --fusion on|off      off sets HVD_FUSION_THRESHOLD=0 before "
        "hvd_init (default on)\n"
        "      --workload W         all, small or resnet50 (default all)\n"
        "      --order O            interleaved (default; needs "
        "MPI_THREAD_MULTIPLE) or separate\n"
        "                           (mpi and ring timed before hvd_init)\n",
    .usage_notes = BENCH_USAGE_EXIT,
};

static int parse_word_opt(int opt, const char *arg, opts_t *o)
{
    const struct option *lo = long_options;
    static const char *const ops[] = {"sum", "avg", NULL};
    static const char *const onoff[] = {"off", "on", NULL};
    static const char *const wls[] = {"small", "resnet50", "all", NULL};
    static const char *const orders[] = {"interleaved", "separate", NULL};
    int i;

    switch (opt) {
    case 'o':
        if ((i = prog_parse_word(arg, ops)) < 0)
            return prog_bad_value(lo, opt, arg, "expected sum or avg");
        o->op = i == 0 ? HVD_SUM : HVD_AVERAGE;
        return 0;
    case OPT_FUSION:
        if ((i = prog_parse_word(arg, onoff)) < 0)
            return prog_bad_value(lo, opt, arg, "expected on or off");
        o->fusion = i;
        return 0;
    case OPT_WORKLOAD:
        if ((i = prog_parse_word(arg, wls)) < 0)
            return prog_bad_value(lo, opt, arg,
                                   "expected all, small or resnet50");
        o->workloads = i == 2 ? (1 << WL_SMALL) | (1 << WL_RESNET50) : 1 << i;
        return 0;
    default: /* OPT_ORDER */
        if ((i = prog_parse_word(arg, orders)) < 0)
            return prog_bad_value(lo, opt, arg,
                                   "expected interleaved or separate");
        o->order = i;
        return 0;
    }
}

/* Whether an HVD_FUSION_THRESHOLD value means 0 bytes: zeros, then an
 * optional K, M or G. */
static int threshold_is_zero(const char *text)
{
    size_t nzeros = strspn(text, "0");
    const char *rest = text + nzeros;

    if (nzeros == 0)
        return 0;
    if (*rest != '\0' && strchr("kKmMgG", *rest) != NULL)
        rest++;
    return *rest == '\0';
}

/* --fusion on with HVD_FUSION_THRESHOLD=0 would measure the unfused engine
 * under the fused name. */
static int check_fusion_env(const opts_t *o)
{
    const char *env = getenv("HVD_FUSION_THRESHOLD");

    if (!o->fusion || env == NULL || !threshold_is_zero(env))
        return 0;
    return prog_refuse("--fusion on, but HVD_FUSION_THRESHOLD=%s turns "
                       "fusion off: unset it or pass --fusion off", env);
}

/* 0: run; 1: --help printed; -1: bad options, explained on rank 0. */
static int parse_options(int argc, char **argv, opts_t *o)
{
    int opt;

    *o = (opts_t){.loop = BENCH_LOOP_DEFAULTS, .op = HVD_SUM, .fusion = 1,
                  .workloads = (1 << WL_SMALL) | (1 << WL_RESNET50),
                  .order = ORDER_INTERLEAVED};
    while ((opt = prog_getopt(argc, argv, &cli)) >= 0) {
        int rc = bench_parse_loop_opt(long_options, opt, optarg, &o->loop);
        if (rc > 0) /* not -n, -w, -r or -c */
            rc = parse_word_opt(opt, optarg, o);
        if (rc != 0)
            return -1;
    }
    if (opt != PROG_OPT_END)
        return opt == PROG_OPT_HELP ? 1 : -1;
    return check_fusion_env(o);
}

/* ---- the benchmark's state ---- */

enum { M_HVD, M_MPI, M_RING, NMETHODS };

typedef struct {
    opts_t opts;
    int rank, nranks;
    int thread_level;  /* what MPI_Init_thread provided */
    int separate;      /* mpi and ring timed before hvd_init */
    int hvd_running;   /* between hvd_init and hvd_shutdown */
    MPI_Comm comm;     /* MPI_COMM_WORLD's duplicate, for mpi and ring */
    bench_workload_t wl[NWORKLOADS];
    hvd_handle_t *handles; /* room for the largest workload's requests */
    /* Per iteration: summed over rounds on this rank, then the mean over
     * rounds and the max over ranks (reduce_results). */
    double seconds[NWORKLOADS][NMETHODS];
    /* Elements wrong, this rank's, then summed; -1: not checked. */
    int64_t nwrong[NWORKLOADS][NMETHODS];
} bench_t;

static int workload_selected(const bench_t *b, int w_idx)
{
    return (b->opts.workloads >> w_idx) & 1;
}

static const char *method_label(const bench_t *b, int m)
{
    static const char *const labels[NMETHODS] = {NULL, "mpi", "ring"};

    if (m == M_HVD)
        return b->opts.fusion ? "hvd-fused" : "hvd-unfused";
    return labels[m];
}

/* Whether the main thread may call MPI now: always before hvd_init and
 * after hvd_shutdown; while the engine runs, only under
 * MPI_THREAD_MULTIPLE. */
static int main_may_call_mpi(const bench_t *b)
{
    return !b->hvd_running || b->thread_level == MPI_THREAD_MULTIPLE;
}

/* ---- inputs and expected results ---- */

/* Element idx of the slab on `rank`: an integer in [-2, 2]. It hashes the
 * slab index, so a tensor reduced at the wrong offset shows as wrong. Sums
 * of up to 2^22 ranks stay exact in float32. */
static float input_value(int rank, size_t idx)
{
    return (float)(bench_input_hash(rank, idx) % 5) - 2.0f;
}

/* The exact sum; the average is it divided once, in float, as ring's
 * RING_AVERAGE and our MPI division both do. */
static float expected_value(const bench_t *b, size_t idx)
{
    float sum = 0.0f;

    for (int r = 0; r < b->nranks; r++)
        sum += input_value(r, idx);
    return b->opts.op == HVD_AVERAGE ? sum / (float)b->nranks : sum;
}

static void fill_inputs(const bench_t *b, bench_workload_t *w)
{
    for (size_t i = 0; i < w->total_count; i++)
        w->send[i] = input_value(b->rank, i);
}

/* Never a result: |sum| <= 2 x nranks. Elements a method fails to write
 * stay at it and count as wrong. */
#define POISON 1.0e9f

static void poison_results(bench_workload_t *w)
{
    for (size_t i = 0; i < w->total_count; i++)
        w->recv[i] = POISON;
}

/* Wrong elements of one tensor: results that differ from the expected
 * ones, and inputs the method changed. The first is printed. */
static int64_t tensor_wrong(const bench_t *b, const bench_workload_t *w,
                            int t, const char *method, int64_t nwrong_before)
{
    int64_t nwrong = 0;

    for (size_t i = 0; i < w->counts[t]; i++) {
        size_t idx = w->offsets[t] + i;
        float want = expected_value(b, idx), got = w->recv[idx];
        float input = input_value(b->rank, idx);
        int bad_out = got != want, bad_in = w->send[idx] != input;
        if (!bad_out && !bad_in)
            continue;
        if (nwrong_before + nwrong++ == 0)
            fprintf(stderr, "host %s rank %d: %s %s: tensor %d '%s' (%zu "
                    "elements), element %zu: %s %g, expected %g\n",
                    bench_host, b->rank, w->name, method, t, w->tensor_names[t],
                    w->counts[t], i, bad_out ? "result" : "input changed to",
                    bad_out ? got : w->send[idx], bad_out ? want : input);
    }
    return nwrong;
}

static int64_t workload_wrong(const bench_t *b, const bench_workload_t *w,
                              const char *method)
{
    int64_t nwrong = 0;

    for (int t = 0; t < w->ntensors; t++)
        nwrong += tensor_wrong(b, w, t, method, nwrong);
    return nwrong;
}

/* ---- the methods: one iteration each ---- */

static void run_hvd(const bench_t *b, bench_workload_t *w)
{
    for (int i = 0; i < w->ntensors; i++) {
        int t = w->reverse ? w->ntensors - 1 - i : i;
        HVD_CHECK_TENSOR(
            hvd_allreduce_async(w->send + w->offsets[t],
                                w->recv + w->offsets[t], w->counts[t],
                                HVD_FLOAT32, b->opts.op, w->tensor_names[t],
                                &b->handles[t]),
            w->tensor_names[t]);
    }
    for (int i = 0; i < w->ntensors; i++) {
        int t = w->reverse ? w->ntensors - 1 - i : i;
        HVD_CHECK_TENSOR(hvd_wait(b->handles[t]), w->tensor_names[t]);
    }
}

/* MPI has no average: MPI_SUM, then a division on each rank. */
static void run_mpi(const bench_t *b, bench_workload_t *w)
{
    for (int i = 0; i < w->ntensors; i++) {
        int t = w->reverse ? w->ntensors - 1 - i : i;
        float *recv = w->recv + w->offsets[t];
        MPI_CHECK(MPI_Allreduce(w->send + w->offsets[t], recv,
                                (int)w->counts[t], MPI_FLOAT, MPI_SUM,
                                b->comm));
        if (b->opts.op == HVD_AVERAGE)
            for (size_t j = 0; j < w->counts[t]; j++)
                recv[j] /= (float)b->nranks;
    }
}

static void run_ring(const bench_t *b, bench_workload_t *w)
{
    ring_op_t op = b->opts.op == HVD_AVERAGE ? RING_AVERAGE : RING_SUM;

    RING_CHECK(ring_allreduce(w->send, w->recv, w->total_count, RING_FLOAT32,
                              op, b->comm));
}

static void run_method(const bench_t *b, bench_workload_t *w, int m)
{
    switch (m) {
    case M_HVD: run_hvd(b, w); break;
    case M_MPI: run_mpi(b, w); break;
    default: run_ring(b, w); break;
    }
}

/* ---- timing and checking ---- */

/* Monotonic seconds; not MPI_Wtime, which is an MPI call, and the main
 * thread may not make those while the engine runs without
 * MPI_THREAD_MULTIPLE. */
static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* Between phases: hvd_barrier() so that no rank still has hvd work in
 * flight, then, where allowed, MPI_Barrier so that the clocks start
 * together (hvd_barrier returns at each rank's next engine cycle). */
static void sync_phase(const bench_t *b)
{
    if (b->hvd_running)
        HVD_CHECK(hvd_barrier());
    if (main_may_call_mpi(b))
        MPI_CHECK(MPI_Barrier(b->comm));
}

/* Mean seconds per iteration on this rank. */
static double time_method(const bench_t *b, bench_workload_t *w, int m)
{
    sync_phase(b);
    for (int i = 0; i < b->opts.loop.warmup_iters; i++)
        run_method(b, w, m);
    sync_phase(b);
    double start_s = now_s();
    for (int i = 0; i < b->opts.loop.iters; i++)
        run_method(b, w, m);
    return (now_s() - start_s) / b->opts.loop.iters;
}

/* One untimed iteration on poisoned results; this rank's wrong elements. */
static int64_t check_method(const bench_t *b, bench_workload_t *w, int m)
{
    poison_results(w);
    sync_phase(b);
    run_method(b, w, m);
    return workload_wrong(b, w, method_label(b, m));
}

/* Times the methods in the mask (bit 1 << M_*), rounds outermost so that
 * the machine's slow spells fall on all of them alike, then checks each. */
static void run_methods(bench_t *b, unsigned methods)
{
    for (int round = 0; round < b->opts.loop.rounds; round++)
        for (int w = 0; w < NWORKLOADS; w++)
            for (int m = 0; m < NMETHODS; m++)
                if (workload_selected(b, w) && ((methods >> m) & 1u))
                    b->seconds[w][m] += time_method(b, &b->wl[w], m);
    if (!b->opts.loop.check)
        return;
    for (int w = 0; w < NWORKLOADS; w++)
        for (int m = 0; m < NMETHODS; m++)
            if (workload_selected(b, w) && ((methods >> m) & 1u))
                b->nwrong[w][m] = check_method(b, &b->wl[w], m);
}

/* ---- hvd's lifetime ---- */

static void hvd_start(bench_t *b)
{
    int rank, size;

    /* Read once by hvd_init: this is the only way to turn fusion off. */
    if (!b->opts.fusion && setenv("HVD_FUSION_THRESHOLD", "0", 1) != 0) {
        perror("fusion_perf: setenv HVD_FUSION_THRESHOLD");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    HVD_CHECK(hvd_init(NULL, NULL));
    b->hvd_running = 1;
    rank = hvd_rank();
    size = hvd_size();
    if (rank != b->rank || size != b->nranks) {
        fprintf(stderr, "host %s rank %d: hvd_rank() %d, hvd_size() %d; MPI "
                "says rank %d of %d\n", bench_host, b->rank, rank, size,
                b->rank, b->nranks);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void hvd_stop(bench_t *b)
{
    HVD_CHECK(hvd_barrier());
    HVD_CHECK(hvd_shutdown());
    b->hvd_running = 0;
}

/* Every measurement, in the order MPI's thread level allows. */
static void run_all(bench_t *b)
{
    if (b->separate) {
        run_methods(b, 1u << M_MPI | 1u << M_RING);
        hvd_start(b);
        run_methods(b, 1u << M_HVD);
    } else {
        hvd_start(b);
        run_methods(b, 1u << M_HVD | 1u << M_MPI | 1u << M_RING);
    }
    hvd_stop(b);
}

/* After hvd_shutdown: mean over rounds, max over ranks; wrong summed. */
static void reduce_results(bench_t *b)
{
    double *seconds = &b->seconds[0][0];
    int64_t *nwrong = &b->nwrong[0][0];
    int n = NWORKLOADS * NMETHODS;

    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, seconds, n, MPI_DOUBLE, MPI_MAX,
                            b->comm));
    for (int i = 0; i < n; i++)
        seconds[i] /= b->opts.loop.rounds;
    /* -1 (not checked) is the same on every rank: keep it. */
    if (b->opts.loop.check)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, nwrong, n, MPI_INT64_T, MPI_SUM,
                                b->comm));
}

/* ---- the header ---- */

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "?";
    }
}

static void print_env(const char *name, const char *unset)
{
    const char *value = getenv(name);

    printf("# %s: %s\n", name, value ? value : unset);
}

static void print_order(const bench_t *b)
{
    printf("# MPI thread level: %s\n", thread_level_name(b->thread_level));
    if (!b->separate)
        printf("# Order: interleaved: per round and workload, %s, mpi, ring; "
               "mpi and ring run while the engine is up, with no hvd request "
               "in flight\n", method_label(b, M_HVD));
    else if (b->opts.order == ORDER_SEPARATE)
        printf("# Order: separate (--order separate): mpi and ring, all "
               "rounds, before hvd_init; then %s\n", method_label(b, M_HVD));
    else
        printf("# Order: separate, as MPI gave less than "
               "MPI_THREAD_MULTIPLE: mpi and ring, all rounds, before "
               "hvd_init; then %s\n", method_label(b, M_HVD));
}

static void print_workloads(const bench_t *b)
{
    for (int w = 0; w < NWORKLOADS; w++) {
        const bench_workload_t *wl = &b->wl[w];
        size_t largest = 0;
        if (!workload_selected(b, w))
            continue;
        for (int t = 0; t < wl->ntensors; t++)
            largest = wl->counts[t] > largest ? wl->counts[t] : largest;
        printf("# Workload %-8s: %4d float32 tensors, %zu elements, %zu B, "
               "largest %zu elements; issued %s\n", wl->name, wl->ntensors,
               wl->total_count, bench_workload_nbytes(wl), largest,
               wl->reverse ? "last first (backward's order)" : "in order");
    }
}

static void print_header(const bench_t *b)
{
    const opts_t *o = &b->opts;

    if (b->rank == 0) {
        printf("# fusion_perf: nranks %d warmup iters: %d iters: %d rounds: "
               "%d validation: %d\n", b->nranks, o->loop.warmup_iters,
               o->loop.iters, o->loop.rounds, o->loop.check);
        printf("# Datatype: float  Op: %s  Fusion: %s\n",
               o->op == HVD_AVERAGE ? "avg" : "sum", o->fusion ? "on" : "off");
        print_env("HVD_FUSION_THRESHOLD", o->fusion ? "unset (engine default)"
                                                    : "unset");
        if (!o->fusion)
            printf("#   set to 0 before hvd_init (--fusion off)\n");
        print_env("HVD_CYCLE_TIME", "unset (engine default)");
        print_order(b);
        print_workloads(b);
        printf("# Methods: %s (hvd_allreduce_async per tensor, then hvd_wait "
               "on each); mpi (MPI_Allreduce per tensor%s); ring (one "
               "ring_allreduce of the whole slab, the bound)\n",
               method_label(b, M_HVD),
               o->op == HVD_AVERAGE ? ", MPI_SUM then a division" : "");
        printf("# Time: per iteration (all tensors of a workload), mean over "
               "iters x rounds on each rank, then the max over ranks\n");
        printf("# algbw = workload bytes / time (1 GB = 1e9 B); busbw = "
               "algbw * 2(n-1)/n; time/mpi, time/ring: this time over theirs "
               "(below 1: faster)\n");
        bench_print_mpi_version();
        printf("#\n");
    }
    bench_print_rank_map(b->comm);
}

/* ---- the table and the footer ---- */

static void print_table_header(void)
{
    printf("# %9s  %7s  %12s  %-11s  %9s  %6s  %6s  %8s  %9s  %6s\n",
           "workload", "tensors", "total", "method", "time", "algbw",
           "busbw", "time/mpi", "time/ring", "#wrong");
    printf("# %9s  %7s  %12s  %-11s  %9s  %6s  %6s\n", "", "", "(B)", "",
           "(ms)", "(GB/s)", "(GB/s)");
}

static void print_row(const bench_t *b, int w, int m)
{
    const bench_workload_t *wl = &b->wl[w];
    size_t nbytes = bench_workload_nbytes(wl);
    double t = b->seconds[w][m], t_mpi = b->seconds[w][M_MPI];
    double t_ring = b->seconds[w][M_RING];
    char wrong[32];

    if (b->nwrong[w][m] < 0)
        snprintf(wrong, sizeof wrong, "N/A");
    else
        snprintf(wrong, sizeof wrong, "%lld", (long long)b->nwrong[w][m]);
    printf("%11s  %7d  %12zu  %-11s  %9.3f  %6.2f  %6.2f  %8.3f  %9.3f  "
           "%6s\n", wl->name, wl->ntensors, nbytes, method_label(b, m),
           t * 1.0e3, bench_algbw_gbs(nbytes, t),
           bench_busbw_gbs(nbytes, t, b->nranks),
           t_mpi > 0 ? t / t_mpi : 0.0, t_ring > 0 ? t / t_ring : 0.0, wrong);
}

static int64_t total_wrong(const bench_t *b)
{
    int64_t nwrong = 0;

    for (int w = 0; w < NWORKLOADS; w++)
        for (int m = 0; m < NMETHODS; m++)
            if (workload_selected(b, w) && b->nwrong[w][m] > 0) {
                printf("# WRONG: %s %s: %lld elements wrong (first one on "
                       "stderr)\n", b->wl[w].name, method_label(b, m),
                       (long long)b->nwrong[w][m]);
                nwrong += b->nwrong[w][m];
            }
    return nwrong;
}

/* Why a target cannot be judged in this run, or NULL. */
static const char *target_na(const bench_t *b, int w)
{
    if (!workload_selected(b, w))
        return "workload not run (--workload)";
    if (!b->opts.fusion)
        return "fusion is off in this run (--fusion off)";
    return NULL;
}

static void print_targets(const bench_t *b)
{
    const double(*s)[NMETHODS] = b->seconds;
    const char *na;

    if ((na = target_na(b, WL_SMALL)) != NULL)
        printf("# Target small    : n/a: %s\n", na);
    else {
        double speedup = s[WL_SMALL][M_MPI] / s[WL_SMALL][M_HVD];
        printf("# Target small    : hvd-fused speedup over mpi (mpi time / "
               "hvd-fused time) %.2fx, target >= 10x: %s (ring: %.2fx)\n",
               speedup, speedup >= 10.0 ? "met" : "NOT met",
               s[WL_SMALL][M_MPI] / s[WL_SMALL][M_RING]);
    }
    if ((na = target_na(b, WL_RESNET50)) != NULL)
        printf("# Target resnet50 : n/a: %s\n", na);
    else {
        double ratio = s[WL_RESNET50][M_HVD] / s[WL_RESNET50][M_RING];
        printf("# Target resnet50 : hvd-fused time / ring time %.3f, "
               "target <= 1.10: %s\n", ratio, ratio <= 1.10 ? "met" :
               "NOT met");
    }
}

/* Rank 0 only; returns the number of wrong elements. */
static int64_t print_results(const bench_t *b)
{
    int64_t nwrong;

    print_table_header();
    for (int w = 0; w < NWORKLOADS; w++)
        for (int m = 0; m < NMETHODS; m++)
            if (workload_selected(b, w))
                print_row(b, w, m);
    nwrong = total_wrong(b);
    printf("# %-16s: %lld %s\n", "Out of bounds values", (long long)nwrong,
           nwrong ? "FAILED" : "OK");
    print_targets(b);
    printf("#\n");
    return nwrong;
}

/* ---- main ---- */

static void start_mpi(bench_t *b, int *argc, char ***argv)
{
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE,
                              &b->thread_level));
    MPI_CHECK(MPI_Query_thread(&b->thread_level));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &b->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &b->nranks));
    bench_identify("fusion_perf", b->rank);
    /* Ours alone: the engine's thread never sees it (see the top). */
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &b->comm));
    /* Errors come back to MPI_CHECK, which says where before aborting. */
    MPI_CHECK(MPI_Comm_set_errhandler(b->comm, MPI_ERRORS_RETURN));
}

static void build_workloads(bench_t *b)
{
    for (int w = 0; w < NWORKLOADS; w++)
        for (int m = 0; m < NMETHODS; m++)
            b->nwrong[w][m] = -1;
    if (workload_selected(b, WL_SMALL))
        bench_workload_small(&b->wl[WL_SMALL]);
    if (workload_selected(b, WL_RESNET50))
        bench_workload_resnet50(&b->wl[WL_RESNET50]);
    int most = 0;
    for (int w = 0; w < NWORKLOADS; w++)
        if (workload_selected(b, w)) {
            bench_workload_alloc_slabs(&b->wl[w]);
            fill_inputs(b, &b->wl[w]);
            most = b->wl[w].ntensors > most ? b->wl[w].ntensors : most;
        }
    b->handles = bench_malloc((size_t)most * sizeof *b->handles, "handles");
}

int main(int argc, char **argv)
{
    bench_t b = {0};
    int64_t nwrong = 0;

    start_mpi(&b, &argc, &argv);
    int rc = parse_options(argc, argv, &b.opts);
    if (rc != 0) {
        MPI_CHECK(MPI_Comm_free(&b.comm));
        MPI_CHECK(MPI_Finalize());
        return rc > 0 ? 0 : 2;
    }
    b.separate = b.opts.order == ORDER_SEPARATE ||
                 b.thread_level < MPI_THREAD_MULTIPLE;
    build_workloads(&b);
    print_header(&b);
    run_all(&b);
    reduce_results(&b);
    if (b.rank == 0) {
        nwrong = print_results(&b);
        fflush(stdout);
    }
    MPI_CHECK(MPI_Bcast(&nwrong, 1, MPI_INT64_T, 0, b.comm));
    for (int w = 0; w < NWORKLOADS; w++)
        bench_workload_free(&b.wl[w]);
    free(b.handles);
    MPI_CHECK(MPI_Comm_free(&b.comm));
    MPI_CHECK(MPI_Finalize());
    return nwrong > 0 ? 1 : 0;
}
