/* bench/allreduce_device.c: allreduce_perf -G, all-reduces on device
 * buffers of ring_dev() (CUDA, or the emulated device under
 * HVD_DEVICE_EMULATE). The size loop, timing and checks are
 * allreduce_perf.c's; here are the device's set-up and its
 * implementations:
 *
 *   staged        ring_ctx_allreduce with intranode RING: the host ring
 *                 over MPI, staged through pinned memory (ring/staged.c);
 *   ipc           ring_ctx_allreduce with the default context: within a
 *                 node each rank reduces its block reading every rank's
 *                 device memory (ring/ipc.c; staged through the shared
 *                 window under HVD_RING_IPC=off, or where IPC cannot
 *                 open); in place on the receive buffer, registered with
 *                 the context as hvd's fusion buffer is, read where it
 *                 lies (ring_ctx_allreduce_registered);
 *   mpi_hostcopy  what users write by hand, and what Open MPI's CUDA
 *                 collective does: the whole input to a plain host buffer,
 *                 MPI_Allreduce, the whole result back, no overlap;
 *   nccl          ncclAllReduce (allreduce_nccl.c; NCCL builds, one GPU
 *                 per rank: NCCL refuses ranks that share one);
 *   limit         not timed but computed: with every rank on one device,
 *                 reading every rank's input once and writing every rank's
 *                 output once at the device's copy bandwidth (measured at
 *                 start); with a device per rank on one node, busbw at the
 *                 measured peer-to-peer copy bandwidth.
 *
 * Left out: choosing between CUDA-aware MPI and staging (ring/ decides),
 * several devices per rank.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench/allreduce_perf.h"

/* Device-to-device copies that measure the limit: large enough to leave
 * every cache (an H100's L2 is 50 MiB); smaller on the emulated device,
 * whose memory is the host's. */
#define LIMIT_COPY_NBYTES_CUDA ((size_t)256 << 20)
#define LIMIT_COPY_NBYTES_EMULATED ((size_t)64 << 20)
#define LIMIT_COPY_REPEATS 5

/* ---- the implementations ---- */

static const char *runs_always(const bench_t *b, size_t count)
{
    (void)b;
    (void)count;
    return NULL;
}

static void staged_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                       size_t count)
{
    RING_CHECK(ring_ctx_allreduce(b->gpu.ctx_ring, sendbuf, recvbuf, count,
                                  b->opts.dtype, b->opts.op));
}

/* In place the receive buffer is registered with the context, as hvd's
 * device fusion buffer is: reduced where it lies. */
static void ipc_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                    size_t count)
{
    if (sendbuf == recvbuf && recvbuf == b->callrecv)
        RING_CHECK(ring_ctx_allreduce_registered(
            b->gpu.ctx_shm, count, b->opts.dtype, b->opts.op, NULL, NULL));
    else
        RING_CHECK(ring_ctx_allreduce(b->gpu.ctx_shm, sendbuf, recvbuf,
                                      count, b->opts.dtype, b->opts.op));
}

/* MPI_Allreduce's limits (dtypes, int counts) hold here too. */
static const char *hostcopy_unsupported(const bench_t *b, size_t count)
{
    return bench__impl_mpi.unsupported(b, count);
}

/* Device to host, MPI_Allreduce in place (mpi's run, its average
 * included), host to device; each copy waited for. */
static void hostcopy_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                         size_t count)
{
    size_t nbytes = count * b->elsize;

    bench__copy(b, b->gpu.hostcopy, sendbuf, nbytes);
    bench__impl_mpi.run(b, b->gpu.hostcopy, b->gpu.hostcopy, count);
    bench__copy(b, recvbuf, b->gpu.hostcopy, nbytes);
}

static const char *nccl_unsupported(const bench_t *b, size_t count)
{
    (void)count;
    return b->gpu.nccl_why;
}

static void nccl_run(const bench_t *b, const void *sendbuf, void *recvbuf,
                     size_t count)
{
#if HVD_HAVE_NCCL
    bench__nccl_run(b, sendbuf, recvbuf, count);
#else
    (void)b, (void)sendbuf, (void)recvbuf, (void)count; /* never runs */
#endif
}

static const char *limit_unsupported(const bench_t *b, size_t count)
{
    (void)count;
    return b->gpu.limit_bps > 0 ? NULL : b->gpu.limit_how;
}

/* The time the limit allows for count elements. One device: every rank's
 * input read once and every output written once, 2 N S bytes at the copy
 * bandwidth (read plus written). A device each: busbw equals the
 * peer-to-peer bandwidth, so S 2(N-1)/N bytes cross each link. */
static double limit_seconds(const bench_t *b, size_t count)
{
    double nbytes = (double)count * (double)b->elsize;
    double n = b->nranks;

    if (b->gpu.ndevices == 1)
        return 2.0 * n * nbytes / b->gpu.limit_bps;
    return nbytes * 2.0 * (n - 1.0) / n / b->gpu.limit_bps;
}

/* name, unsupported, run, checkable, device, model_seconds */
const bench_impl_t bench__impl_staged = {"staged", runs_always, staged_run,
                                         1, 1, NULL};
const bench_impl_t bench__impl_ipc = {"ipc", runs_always, ipc_run, 1, 1,
                                      NULL};
const bench_impl_t bench__impl_hostcopy = {"mpi_hostcopy",
                                           hostcopy_unsupported,
                                           hostcopy_run, 1, 1, NULL};
const bench_impl_t bench__impl_nccl = {"nccl", nccl_unsupported, nccl_run,
                                       1, 1, NULL};
const bench_impl_t bench__impl_limit = {"limit", limit_unsupported, NULL, 0,
                                        1, limit_seconds};

/* ---- which device each rank has ---- */

static int compare_keys(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The device's ordinal, and on CUDA its PCI bus id, so that ranks that see
 * one GPU through different CUDA_VISIBLE_DEVICES still match. */
static void find_device(bench_t *b, int local_rank)
{
    bench_gpu_t *g = &b->gpu;
    char id[64] = "";
    int ordinal = 0;

    if (strcmp(g->dev->name, "cuda") == 0) {
#if HVD_HAVE_CUDA
        RING_CHECK(bench__cuda_select(local_rank, id, sizeof id));
#endif
    }
    (void)local_rank;
    RING_CHECK(g->dev->device(&ordinal));
    if (id[0] == '\0')
        snprintf(id, sizeof id, "%s device %d", g->dev->name, ordinal);
    snprintf(g->key, sizeof g->key, "%s %s", bench_host, id);
}

/* Collective: g->ndevices, the distinct keys over all ranks. */
static void count_devices(bench_t *b)
{
    size_t len = sizeof b->gpu.key;
    char *all = bench_malloc((size_t)b->nranks * len, "the device keys");

    MPI_CHECK(MPI_Allgather(b->gpu.key, (int)len, MPI_CHAR, all, (int)len,
                            MPI_CHAR, MPI_COMM_WORLD));
    qsort(all, (size_t)b->nranks, len, compare_keys);
    b->gpu.ndevices = 1;
    for (int r = 1; r < b->nranks; r++)
        b->gpu.ndevices += strcmp(all + r * len, all + (r - 1) * len) != 0;
    free(all);
}

/* ---- the limit ---- */

/* Best seconds of LIMIT_COPY_REPEATS copies of nbytes (after one warm-up),
 * ranks one at a time so that ranks sharing a device do not split it;
 * the max over ranks (the slowest rank bounds the collective). */
static double time_copies(const bench_t *b, void *dst, const void *src,
                          size_t nbytes)
{
    double best_s = 0;

    for (int r = 0; r < b->nranks; r++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (r != b->rank)
            continue;
        bench__copy(b, dst, src, nbytes); /* warm-up */
        for (int i = 0; i < LIMIT_COPY_REPEATS; i++) {
            double t0 = prog_now();
            bench__copy(b, dst, src, nbytes);
            double t = prog_now() - t0;
            if (best_s == 0 || t < best_s)
                best_s = t;
        }
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &best_s, 1, MPI_DOUBLE, MPI_MAX,
                            MPI_COMM_WORLD));
    return best_s;
}

/* Collective. One device: a copy within it, bytes read plus written per
 * second. A device per rank on one node: each rank copies from its right
 * neighbour's device memory, opened through IPC (not run yet: no node with
 * several GPUs was lent; the lent one has one). */
static void measure_limit(bench_t *b)
{
    bench_gpu_t *g = &b->gpu;
    const ring_dev_t *dev = g->dev;
    int peer = g->ndevices == b->nranks && b->nranks > 1;
    size_t nbytes = strcmp(dev->name, "cuda") == 0
                        ? LIMIT_COPY_NBYTES_CUDA
                        : LIMIT_COPY_NBYTES_EMULATED;
    void *src = NULL, *dst = NULL, *peer_src = NULL;
    ring_ipc_handle_t *handles = NULL;

    if (g->ndevices != 1 && !peer) {
        snprintf(g->limit_how, sizeof g->limit_how,
                 "n/a: some ranks share a device and some do not");
        return;
    }
    if (peer && !g->one_node) {
        snprintf(g->limit_how, sizeof g->limit_how,
                 "n/a: ranks on several nodes (the network is not "
                 "measured)");
        return;
    }
    RING_CHECK(dev->alloc(&src, nbytes));
    RING_CHECK(dev->alloc(&dst, nbytes));
    RING_CHECK(dev->zero(src, nbytes, g->stream));
    RING_CHECK(dev->stream_sync(g->stream));
    if (!peer) {
        g->limit_bps = 2.0 * (double)nbytes / time_copies(b, dst, src, nbytes);
        snprintf(g->limit_how, sizeof g->limit_how,
                 "every rank's input read once and output written once at "
                 "the device's copy bandwidth, %.1f GB/s read+written (best "
                 "of %d copies of %zu MiB within the device)",
                 g->limit_bps / 1e9, LIMIT_COPY_REPEATS, nbytes >> 20);
    } else {
        ring_ipc_handle_t mine;
        handles = bench_malloc((size_t)b->nranks * sizeof *handles,
                               "the IPC handles");
        RING_CHECK(dev->ipc_export(src, &mine));
        MPI_CHECK(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, handles,
                                (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD));
        RING_CHECK(dev->ipc_open(&handles[(b->rank + 1) % b->nranks],
                                 &peer_src));
        g->limit_bps = (double)nbytes / time_copies(b, dst, peer_src, nbytes);
        snprintf(g->limit_how, sizeof g->limit_how,
                 "busbw at the peer-to-peer copy bandwidth, %.1f GB/s (best "
                 "of %d copies of %zu MiB from the right neighbour's device)",
                 g->limit_bps / 1e9, LIMIT_COPY_REPEATS, nbytes >> 20);
        RING_CHECK(dev->ipc_close(peer_src));
        /* No rank closes its handle while a peer still copies from it. */
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        free(handles);
    }
    RING_CHECK(dev->release(src));
    RING_CHECK(dev->release(dst));
}

/* ---- set-up ---- */

static void find_node(bench_t *b, int *local_rank)
{
    MPI_Comm node;
    int node_size;

    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                                  MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, local_rank));
    MPI_CHECK(MPI_Comm_size(node, &node_size));
    MPI_CHECK(MPI_Comm_free(&node));
    b->gpu.one_node = node_size == b->nranks;
}

static void *device_alloc(const ring_dev_t *dev, size_t nbytes)
{
    void *p = NULL;
    RING_CHECK(dev->alloc(&p, nbytes));
    return p;
}

void bench__device_setup(bench_t *b, size_t nbytes)
{
    bench_gpu_t *g = &b->gpu;
    const ring_ctx_opts_t over_mpi = {.intranode = RING_INTRANODE_RING};
    int local_rank = 0;

    g->dev = ring_dev(); /* main checked that there is one */
    find_node(b, &local_rank);
    find_device(b, local_rank);
    count_devices(b);
    RING_CHECK(g->dev->stream_create(&g->stream));
    b->callsend = device_alloc(g->dev, nbytes);
    b->callrecv = device_alloc(g->dev, nbytes);
    g->hostcopy = bench_malloc(nbytes, "mpi_hostcopy's host buffer");
    RING_CHECK(ring_ctx_create(MPI_COMM_WORLD, &over_mpi, &g->ctx_ring));
    RING_CHECK(ring_ctx_create(MPI_COMM_WORLD, NULL, &g->ctx_shm));
    RING_CHECK(ring_ctx_register(g->ctx_shm, b->callrecv, nbytes));
    measure_limit(b);
    if (strcmp(g->dev->name, "cuda") != 0)
        g->nccl_why = "NCCL needs a GPU, not the emulated device";
    else if (g->ndevices < b->nranks)
        g->nccl_why = "ranks share a GPU, which NCCL refuses";
    else
#if HVD_HAVE_NCCL
        g->nccl_why = bench__nccl_setup(b);
#else
        g->nccl_why = "this build has no NCCL (configure found none)";
#endif
}

void bench__device_free(bench_t *b)
{
    bench_gpu_t *g = &b->gpu;

    if (g->dev == NULL)
        return;
#if HVD_HAVE_NCCL
    bench__nccl_free(b);
#endif
    RING_CHECK(ring_ctx_free(&g->ctx_shm));
    RING_CHECK(ring_ctx_free(&g->ctx_ring));
    RING_CHECK(g->dev->release(b->callsend));
    RING_CHECK(g->dev->release(b->callrecv));
    RING_CHECK(g->dev->stream_destroy(g->stream));
    free(g->hostcopy);
    b->callsend = b->callrecv = g->hostcopy = NULL;
    g->dev = NULL;
}

/* ---- the header ---- */

void bench__device_print_header(const bench_t *b)
{
    const bench_gpu_t *g = &b->gpu;
    size_t len = sizeof g->key;
    char *all = b->rank == 0 ? bench_malloc((size_t)b->nranks * len,
                                            "the device map")
                             : NULL;

    MPI_CHECK(MPI_Gather(g->key, (int)len, MPI_CHAR, all, (int)len,
                         MPI_CHAR, 0, MPI_COMM_WORLD));
    if (b->rank == 0) {
        printf("# Device: device=%s, %d ranks on %d device%s: %s\n",
               g->dev->name, b->nranks, g->ndevices,
               g->ndevices == 1 ? "" : "s",
               g->ndevices < b->nranks ? "ranks share a GPU"
                                       : "each rank its own GPU");
        for (int r = 0; r < b->nranks; r++)
            printf("#  Rank %2d device %s\n", r, all + r * len);
        printf("# limit: %s\n", g->limit_how);
        const char *ipc = getenv("HVD_RING_IPC");
        printf("# ipc: %s\n",
               ipc && strcmp(ipc, "off") == 0
                   ? "HVD_RING_IPC=off: staged through the shared window"
                   : "IPC within the node where every rank opens the "
                     "others' device memory (ring/ipc.c)");
        if (g->nccl_why != NULL)
            printf("# nccl: left out: %s\n", g->nccl_why);
    }
    free(all);
}
