/* bench/allreduce_perf.c: all-reduce bandwidth benchmark in the shape of
 * nccl-tests' all_reduce_perf (same options, same table, same footer).
 *
 * For each size from -b to -e (times -f each step) it times one
 * implementation out of place and in place and prints time, algbw, busbw and
 * #wrong per size. The implementations plug in through one callback struct
 * (bench_impl_t):
 *   ring      ours, ring_allreduce_algo() with --algo;
 *   mpi       the MPI library's MPI_Allreduce on the same buffers;
 *   noreduce  the very messages our ring moves (2(N-1) steps of count/N
 *             elements to the right neighbour) with no reduction: the limit
 *             a ring can reach on this machine (shared/BENCHMARKING.md);
 *   shm       ours, ring_shm_allreduce(): every rank reduces its block
 *             straight from the others' memory (all ranks on one node);
 *   hier      ours, ring_allreduce_hier(): reduce-scatter within each node,
 *             allreduce across nodes, allgather within (--impl only);
 *   hiershm   the same with the node's stages through shm's window
 *             (ring_shm_allreduce_hier; --impl only).
 * When shm runs, recvbuf is shm's slab for every implementation (ring and
 * MPI do not mind where their memory is): in place, shm then reduces data
 * that already lies in shared memory, as hvd's fusion buffer does, and out
 * of place it reads a private sendbuf.
 * --compare times all four interleaved per size on the same buffers,
 * because on noisy machines only measurements taken side by side compare.
 *
 * Inputs are small integers, so every sum, product and average is exact in
 * every dtype and the check is `==` against a result each rank computes
 * alone. Checks run after the timed loops, never inside them.
 *
 * -G (--device) runs the same loop on device buffers (ring_dev(): CUDA or
 * the emulated device) with the device's implementations: staged,
 * ipc, mpi_hostcopy, nccl, and a computed limit
 * (bench/allreduce_device.c says what each is). The implementations get
 * callsend and callrecv, device buffers then; inputs go up and results
 * come back for the check through bench__copy, outside the timed loops.
 *
 * Left out: several threads or devices per rank, and nccl-tests' CSV and
 * CUDA-graph modes.
 *
 * This file holds the size loop, timing and checking, the header, set-up
 * and main; bench/allreduce_perf.h says where the rest is.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench/allreduce_perf.h"

/* ---- one measurement: an implementation, in place or not, at one size ---- */

void bench__copy(const bench_t *b, void *dst, const void *src, size_t nbytes)
{
    if (b->gpu.dev == NULL) {
        memcpy(dst, src, nbytes);
        return;
    }
    RING_CHECK(b->gpu.dev->copy(dst, src, nbytes, b->gpu.stream));
    RING_CHECK(b->gpu.dev->stream_sync(b->gpu.stream));
}

/* Seconds per call on this rank: warm-up calls, a barrier so that all ranks
 * start together, then the timed calls. In-place data starts as the inputs
 * each time; the timed calls then reduce it again and again, as in
 * nccl-tests, which is why checks run separately. */
static double time_calls(const bench_t *b, const measurement_t *m,
                         size_t count)
{
    const void *src = m->in_place ? b->callrecv : b->callsend;

    if (m->impl->model_seconds != NULL)
        return m->impl->model_seconds(b, count);
    if (m->in_place)
        bench__copy(b, b->callrecv, b->callsend, count * b->elsize);
    for (int i = 0; i < b->opts.loop.warmup_iters; i++)
        m->impl->run(b, src, b->callrecv, count);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double start_s = MPI_Wtime();
    for (int i = 0; i < b->opts.loop.iters; i++)
        m->impl->run(b, src, b->callrecv, count);
    return (MPI_Wtime() - start_s) / b->opts.loop.iters;
}

/* Out of place, recvbuf starts as a value no result has, so every
 * element the call fails to write counts as wrong: NaN for floats (equal
 * to nothing; expected + 1 rounds back to expected in bfloat16 from 256,
 * a product's value at 8 ranks), expected + 1 for integers (all ones
 * bytes would read as -1, a value sums reach). */
static void poison_recvbuf(const bench_t *b, size_t count)
{
    int is_float = bench__dtype_is_float(b->opts.dtype);
    for (size_t i = 0; i < count; i++)
        prog_value_store(b->recvbuf, i, b->opts.dtype,
                         is_float ? NAN
                                  : prog_value_load(b->expected, i,
                                                    b->opts.dtype) + 1.0);
}

/* One untimed call from fresh inputs; returns this rank's wrong elements.
 * With -G the poison goes up and the results come back to recvbuf. */
static int64_t check_once(const bench_t *b, const measurement_t *m,
                          size_t count)
{
    char what[64];
    const void *src = m->in_place ? b->callrecv : b->callsend;
    size_t nbytes = count * b->elsize;

    if (m->in_place) {
        bench__copy(b, b->callrecv, b->callsend, nbytes);
    } else {
        poison_recvbuf(b, count);
        if (b->callrecv != b->recvbuf)
            bench__copy(b, b->callrecv, b->recvbuf, nbytes);
    }
    m->impl->run(b, src, b->callrecv, count);
    if (b->callrecv != b->recvbuf)
        bench__copy(b, b->recvbuf, b->callrecv, nbytes);
    snprintf(what, sizeof what, "%s %s", m->impl->name,
             m->in_place ? "in-place" : "out-of-place");
    return bench__count_wrong(b, what, count);
}

static void time_all(const bench_t *b, measurement_t *ms, int nms,
                     size_t count)
{
    double sum_s[MAX_MEASUREMENTS] = {0};

    /* Rounds outermost: each round times every implementation once, so the
     * machine's slow spells fall on all of them alike. */
    for (int round = 0; round < b->opts.loop.rounds; round++)
        for (int i = 0; i < nms; i++)
            if (ms[i].skipped == NULL)
                sum_s[i] += time_calls(b, &ms[i], count);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sum_s, nms, MPI_DOUBLE, MPI_MAX,
                            MPI_COMM_WORLD));
    for (int i = 0; i < nms; i++)
        ms[i].seconds = sum_s[i] / b->opts.loop.rounds;
}

static void check_all(const bench_t *b, measurement_t *ms, int nms,
                      size_t count)
{
    int64_t nwrong[MAX_MEASUREMENTS] = {0};

    for (int i = 0; i < nms; i++)
        ms[i].nwrong = -1;
    if (!b->opts.loop.check)
        return;
    bench__fill_expected(b, count);
    for (int i = 0; i < nms; i++)
        if (ms[i].skipped == NULL && ms[i].impl->checkable)
            nwrong[i] = check_once(b, &ms[i], count);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, nwrong, nms, MPI_INT64_T, MPI_SUM,
                            MPI_COMM_WORLD));
    for (int i = 0; i < nms; i++)
        if (ms[i].skipped == NULL && ms[i].impl->checkable)
            ms[i].nwrong = nwrong[i];
}

static void bench_size(const bench_t *b, measurement_t *ms, int nms,
                       size_t count)
{
    for (int i = 0; i < nms; i++)
        ms[i].skipped = ms[i].impl->unsupported(b, count);
    bench__fill_inputs(b, count);
    if (b->callsend != b->sendbuf)
        bench__copy(b, b->callsend, b->sendbuf, count * b->elsize);
    time_all(b, ms, nms, count);
    check_all(b, ms, nms, count);
}

/* ---- the size loop ---- */

static measurement_t measured(const bench_impl_t *impl, int in_place)
{
    return (measurement_t){.impl = impl, .in_place = in_place};
}

static int plan_measurements(const bench_t *b, measurement_t *ms)
{
    if (b->opts.impl != NULL) {
        ms[0] = measured(b->opts.impl, 0);
        ms[1] = measured(b->opts.impl, 1);
        return 2;
    }
    if (b->opts.device) {
        ms[GCMP_STAGED_OOP] = measured(&bench__impl_staged, 0);
        ms[GCMP_STAGED_IP] = measured(&bench__impl_staged, 1);
        ms[GCMP_IPC_OOP] = measured(&bench__impl_ipc, 0);
        ms[GCMP_IPC_IP] = measured(&bench__impl_ipc, 1);
        ms[GCMP_HOSTCOPY_OOP] = measured(&bench__impl_hostcopy, 0);
        ms[GCMP_HOSTCOPY_IP] = measured(&bench__impl_hostcopy, 1);
        ms[GCMP_NCCL_OOP] = measured(&bench__impl_nccl, 0);
        ms[GCMP_NCCL_IP] = measured(&bench__impl_nccl, 1);
        ms[GCMP_LIMIT] = measured(&bench__impl_limit, 1);
        return GCMP_COUNT;
    }
    ms[CMP_RING_OOP] = measured(&bench__impl_ring, 0);
    ms[CMP_RING_IP] = measured(&bench__impl_ring, 1);
    ms[CMP_MPI_OOP] = measured(&bench__impl_mpi, 0);
    ms[CMP_MPI_IP] = measured(&bench__impl_mpi, 1);
    ms[CMP_NOREDUCE_IP] = measured(&bench__impl_noreduce, 1);
    ms[CMP_SHM_OOP] = measured(&bench__impl_shm, 0);
    ms[CMP_SHM_IP] = measured(&bench__impl_shm, 1);
    return CMP_COUNT;
}

static void run_sizes(const bench_t *b, summary_t *s)
{
    measurement_t ms[MAX_MEASUREMENTS];
    int nms = plan_measurements(b, ms);
    const bench_opts_t *o = &b->opts;

    for (size_t nbytes = o->min_nbytes;;) {
        size_t count = nbytes / b->elsize; /* whole elements only */
        if (count > 0) {
            size_t used_nbytes = count * b->elsize;
            bench_size(b, ms, nms, count);
            bench__summary_add(s, b, ms, nms, used_nbytes);
            if (b->rank == 0) {
                bench__print_wrong_details(ms, nms, used_nbytes);
                if (o->impl != NULL)
                    bench__print_single_row(b, ms, used_nbytes, count);
                else if (o->device)
                    bench__print_device_row(b, ms, used_nbytes, count, s);
                else
                    bench__print_compare_row(b, ms, used_nbytes, count, s);
                fflush(stdout);
            }
        }
        if (nbytes > o->max_nbytes / o->step_factor)
            break; /* the next size would pass -e (or overflow) */
        nbytes *= o->step_factor;
    }
}

/* ---- the header ---- */

static void print_impl_line(const bench_t *b)
{
    const bench_opts_t *o = &b->opts;
    const char *algo = ring_algo_name(o->algo);

    if (o->impl == NULL && o->device)
        printf("# Compare: per size and round, timed in this order: staged, "
               "ipc, mpi_hostcopy, nccl out-of-place, in-place; limit "
               "computed\n");
    else if (o->impl == NULL)
        printf("# Compare: per size and round, timed in this order: ring "
               "(algo %s) out-of-place, in-place; MPI_Allreduce out-of-place, "
               "in-place; noreduce in-place; shm out-of-place, in-place\n",
               algo ? algo : "?");
    else if (o->impl == &bench__impl_ring)
        printf("# Impl: ring (ring_allreduce_algo, algo %s)\n",
               algo ? algo : "?");
    else if (o->impl == &bench__impl_mpi)
        printf("# Impl: mpi (MPI_Allreduce)\n");
    else if (o->impl == &bench__impl_hier)
        printf("# Impl: hier (ring_allreduce_hier: within nodes, then "
               "across, then within)\n");
    else if (o->impl == &bench__impl_hiershm)
        printf("# Impl: hiershm (ring_shm_allreduce_hier: hier with the "
               "node's stages through shared memory)\n");
    else if (o->impl->device)
        printf("# Impl: %s (device buffers)\n", o->impl->name);
    else if (o->impl == &bench__impl_noreduce)
        printf("# Impl: noreduce (the ring's 2(n-1) messages, no reduction, "
               "nothing to check)\n");
    else
        printf("# Impl: shm (ring_shm_allreduce: blocks reduced straight "
               "from the other ranks' memory)\n");
    if ((o->impl == NULL || o->impl == &bench__impl_mpi ||
         o->impl == &bench__impl_hostcopy) &&
        o->op == RING_AVERAGE)
        printf("# MPI has no average: mpi is MPI_SUM, then a division by %d "
               "on each rank (timed)\n", b->nranks);
    const char *why = bench__impl_mpi.unsupported(b, 1);
    if (o->impl == NULL && why != NULL)
        printf("# mpi columns n/a: MPI_Allreduce cannot run %s %s: %s\n",
               bench__dtype_label(o->dtype), bench__op_label(o->op), why);
}

static void print_header(const bench_t *b)
{
    const bench_opts_t *o = &b->opts;

    if (b->rank == 0) {
        printf("# allreduce_perf: nranks %d minBytes %zu maxBytes %zu step: "
               "%zu(factor) warmup iters: %d iters: %d rounds: %d "
               "validation: %d\n",
               b->nranks, o->min_nbytes, o->max_nbytes, o->step_factor,
               o->loop.warmup_iters, o->loop.iters, o->loop.rounds,
               o->loop.check);
        printf("# Datatype: %s  Op: %s\n", bench__dtype_label(o->dtype),
               bench__op_label(o->op));
        print_impl_line(b);
        printf("# Time: mean per call over iters x rounds on each rank, then "
               "the max over ranks\n");
        printf("# algbw = size / time (1 GB = 1e9 B); busbw = algbw * "
               "2(n-1)/n\n");
        bench_print_mpi_version();
    }
    if (o->device)
        bench__device_print_header(b);
    if (b->rank == 0)
        printf("#\n");
    bench_print_rank_map(MPI_COMM_WORLD);
}

/* ---- main ---- */

static void alloc_buffers(bench_t *b)
{
    /* At least one element: -e below one is refused. */
    size_t nbytes = b->opts.max_nbytes / b->elsize * b->elsize;

    b->sendbuf = malloc(nbytes);
    if (b->opts.device)
        b->recvbuf = malloc(nbytes);
    else if (b->shm)
        RING_CHECK(ring_shm_slab(b->shm, (void **)&b->recvbuf, NULL));
    else
        b->recvbuf = malloc(nbytes);
    b->expected = malloc(nbytes);
    if (b->sendbuf == NULL || b->recvbuf == NULL || b->expected == NULL)
        bench_die_nomem("3 buffers of -e/--maxbytes each (lower it)",
                        3 * nbytes);
    b->callsend = b->sendbuf;
    b->callrecv = b->recvbuf;
    if (b->opts.device)
        bench__device_setup(b, nbytes);
}

/* The shared window for shm, when it runs and every rank is on this node;
 * its slab holds the largest message, so no call is cut into chunks. */
static void make_shm(bench_t *b)
{
    MPI_Comm node;
    int node_size;

    if (b->opts.device ||
        (b->opts.impl != NULL && b->opts.impl != &bench__impl_shm))
        return;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_size(node, &node_size));
    MPI_CHECK(MPI_Comm_free(&node));
    /* One rank with every rank on its node means all have: no vote. */
    if (node_size == b->nranks)
        RING_CHECK(ring_shm_create(MPI_COMM_WORLD,
                                   b->opts.max_nbytes + b->elsize, &b->shm));
}

/* hier's communicators: the node, and the ranks with this local rank on
 * every node; left MPI_COMM_NULL when the nodes differ in size. */
static void make_hier(bench_t *b)
{
    MPI_Comm node;
    int local_rank, local_size, min_size, max_size;

    b->node = b->cross = MPI_COMM_NULL;
    if (b->opts.impl != &bench__impl_hier &&
        b->opts.impl != &bench__impl_hiershm)
        return;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &local_rank));
    MPI_CHECK(MPI_Comm_size(node, &local_size));
    MPI_CHECK(MPI_Allreduce(&local_size, &min_size, 1, MPI_INT, MPI_MIN,
                            MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(&local_size, &max_size, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (min_size != max_size) {
        MPI_CHECK(MPI_Comm_free(&node));
        return;
    }
    b->node = node;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, local_rank, b->rank, &b->cross));
    /* hiershm's window, on the node; recvbuf is its slab, as for shm. */
    if (b->opts.impl == &bench__impl_hiershm)
        RING_CHECK(ring_shm_create(node, b->opts.max_nbytes + b->elsize,
                                   &b->shm));
}

static void free_buffers(bench_t *b)
{
    bench__device_free(b);
    if (b->node != MPI_COMM_NULL)
        MPI_CHECK(MPI_Comm_free(&b->node));
    if (b->cross != MPI_COMM_NULL)
        MPI_CHECK(MPI_Comm_free(&b->cross));
    free(b->sendbuf);
    if (b->shm)
        RING_CHECK(ring_shm_free(&b->shm));
    else
        free(b->recvbuf);
    free(b->expected);
    b->sendbuf = b->recvbuf = b->expected = NULL;
}

/* With a single implementation that cannot run this dtype or op at all,
 * say so and skip the run rather than print a table of n/a. */
static int whole_run_unsupported(const bench_t *b)
{
    const char *why;

    if (b->opts.impl == NULL || (why = b->opts.impl->unsupported(b, 1)) == NULL)
        return 0;
    if (b->rank == 0)
        printf("# Skipped: %s cannot run %s %s: %s\n#\n", b->opts.impl->name,
               bench__dtype_label(b->opts.dtype), bench__op_label(b->opts.op),
               why);
    return 1;
}

/* FNV-1a of the command line's arguments, each with its end. */
static unsigned long long args_hash(int argc, char **argv)
{
    unsigned long long h = 14695981039346656037ull;
    for (int i = 1; i < argc; i++)
        for (const char *c = argv[i];; c++) {
            h = (h ^ (unsigned char)*c) * 1099511628211ull;
            if (*c == '\0') break;
        }
    return h;
}

/* Each rank parses its own command line (rc: bench__parse_options'), and
 * under -G looks for its own device: the ranks agree before their first
 * collective, where a rank that stopped alone (given other arguments by
 * an MPMD launch or a wrapper; a node without a GPU) left the others
 * waiting. Returns the exit status when they stop, else -1. */
static int agree_to_start(const bench_t *b, int rc, int argc, char **argv)
{
    enum { REFUSED, HELP, NO_DEV, HAS_DEV, HASH, NOT_HASH, N };
    int no_dev = rc == 0 && b->opts.device && ring_dev() == NULL;
    unsigned long long h = args_hash(argc, argv), any[N] = {
        [REFUSED] = rc < 0, [HELP] = rc > 0, [NO_DEV] = no_dev,
        [HAS_DEV] = !no_dev, [HASH] = h, [NOT_HASH] = ~h};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, any, N, MPI_UNSIGNED_LONG_LONG,
                            MPI_MAX, MPI_COMM_WORLD));
    if (any[HASH] != ~any[NOT_HASH]) { /* MAX != MIN */
        if (b->rank == 0)
            fprintf(stderr, "allreduce_perf: the ranks were given different "
                    "arguments: every rank must run the same command\n");
        return 2;
    }
    if (any[REFUSED] || any[HELP]) /* alike on every rank: rank 0 said */
        return any[REFUSED] ? 2 : 0;
    if (!any[NO_DEV])
        return -1;
    if (!any[HAS_DEV] && b->rank == 0)
        fprintf(stderr, "allreduce_perf: -G: no device: no GPU visible in "
                "this CUDA build (or HVD_DEVICE_EMULATE for the emulated "
                "one)\n");
    else if (any[HAS_DEV] && no_dev)
        fprintf(stderr, "allreduce_perf: -G: rank %d has no device where "
                "other ranks have one (no GPU visible to it, or no "
                "HVD_DEVICE_EMULATE)\n", b->rank);
    return 2;
}

int main(int argc, char **argv)
{
    bench_t b = {0};
    summary_t summary = {0};

    MPI_CHECK(MPI_Init(&argc, &argv));
    /* Errors come back to MPI_CHECK, which says where before aborting. */
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &b.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &b.nranks));
    bench_identify("allreduce_perf", b.rank);

    int rc = agree_to_start(&b, bench__parse_options(argc, argv, &b.opts),
                            argc, argv);
    if (rc >= 0) {
        MPI_CHECK(MPI_Finalize());
        return rc;
    }
    b.elsize = ring_dtype_size(b.opts.dtype);
    make_shm(&b);
    make_hier(&b);
    /* Before the header: -G's set-up finds what the header reports. */
    alloc_buffers(&b);
    print_header(&b);
    if (!whole_run_unsupported(&b)) {
        if (b.rank == 0) {
            if (b.opts.impl != NULL)
                bench__print_single_header();
            else if (b.opts.device)
                bench__print_device_header();
            else
                bench__print_compare_header();
        }
        run_sizes(&b, &summary);
        if (b.rank == 0)
            bench__print_footer(&b, &summary);
    }
    free_buffers(&b);
    MPI_CHECK(MPI_Finalize());
    return summary.nwrong > 0 ? 1 : 0;
}
