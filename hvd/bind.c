/* hvd/bind.c: where each rank runs. hvd_init binds the process (all its
 * threads, the engine's included, which it starts afterwards) to this
 * local rank's own share of the node, found with hwloc:
 *
 *   HVD_BIND=core (default)  local rank r of s gets cores [r n / s,
 *                            (r + 1) n / s) of the node's n cores; with
 *                            more ranks than cores, core r mod n
 *   HVD_BIND=numa            the same over NUMA nodes
 *   HVD_BIND=none            the process stays as it was launched
 *
 * A process the launcher already bound to part of the node (mpirun's
 * --bind-to, srun's --cpu-bind) is left where it was put: the launcher
 * was told where it goes. Placement is an optimisation, so hwloc failing
 * is a warning, not an error. hvd__bind describes the place it chose,
 * which rank 0 logs for every rank (hvd/topology.c).
 *
 * In a CUDA build on a node with GPUs, local rank r takes device
 * r mod (visible devices), made current before any other CUDA call of
 * ours, and binding is to the PUs nearest that device (hwloc's cudart
 * helper) instead of the node: all of them with numa, and with core this
 * rank's share of their cores among the local ranks whose devices have the
 * same nearest PUs (several ranks on one GPU, or the GPUs of one socket),
 * so that ranks near one GPU do not run on the same cores.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, SCHED_BATCH */
#include <hwloc.h>
#if HVD_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <hwloc/cudart.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/bind.h"

/* This rank's share [*lo, *hi) of n objects. */
static void hvd__share(int local_rank, int local_size, int n, int *lo,
                       int *hi)
{
    if (local_size <= n) {
        *lo = (int)((long)local_rank * n / local_size);
        *hi = (int)((long)(local_rank + 1) * n / local_size);
    } else {
        *lo = local_rank % n;
        *hi = *lo + 1;
    }
}

/* This local rank's GPU, made current, and in *count how many are
 * visible; -1 without one (or without CUDA). */
static int hvd__pick_device(int local_rank, int *count)
{
    *count = 0;
#if HVD_HAVE_CUDA
    if (cudaGetDeviceCount(count) != cudaSuccess || *count <= 0) {
        (void)cudaGetLastError(); /* no device: the host path, no error */
        *count = 0;
        return -1;
    }
    int device = local_rank % *count;
    return cudaSetDevice(device) == cudaSuccess ? device : -1;
#else
    (void)local_rank;
    return -1;
#endif
}

/* The PUs nearest the device into set; 0, or -1 when hwloc cannot say. */
static int hvd__device_cpuset(hwloc_topology_t topo, int device,
                              hwloc_bitmap_t set)
{
#if HVD_HAVE_CUDA
    return hwloc_cudart_get_device_cpuset(topo, device, set);
#else
    (void)topo;
    (void)device;
    (void)set;
    return -1;
#endif
}

/* Narrows set, the PUs nearest this rank's device, to this rank's share
 * of their cores among the local ranks whose devices (rank r has device
 * r mod ndevices) are nearest the same PUs. Left whole when hwloc finds
 * no core in it. */
static void hvd__share_near_device(hwloc_topology_t topo, hwloc_bitmap_t set,
                                   int local_rank, int local_size,
                                   int ndevices)
{
    hwloc_bitmap_t theirs = hwloc_bitmap_alloc(), mine = hwloc_bitmap_alloc();
    int index = 0, sharing = 0;
    for (int r = 0; theirs && r < local_size; r++)
        if (r == local_rank ||
            (hvd__device_cpuset(topo, r % ndevices, theirs) == 0 &&
             hwloc_bitmap_isequal(theirs, set))) {
            index += r < local_rank;
            sharing++;
        }
    int cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set,
                                                       HWLOC_OBJ_CORE);
    if (theirs && mine && cores > 0) {
        int lo, hi;
        hvd__share(index, sharing, cores, &lo, &hi);
        for (int i = lo; i < hi; i++)
            hwloc_bitmap_or(mine, mine,
                            hwloc_get_obj_inside_cpuset_by_type(
                                topo, set, HWLOC_OBJ_CORE, (unsigned)i)
                                ->cpuset);
        hwloc_bitmap_and(set, set, mine);
    }
    hwloc_bitmap_free(theirs);
    hwloc_bitmap_free(mine);
}

/* Binds as HVD_BIND says and describes the place in where (n bytes). */
static void hvd__bind_in(hwloc_topology_t topo, hvd__bind_t mode,
                         int device, int ndevices, int local_rank,
                         int local_size, char *where, size_t n)
{
    hwloc_const_cpuset_t all = hwloc_topology_get_allowed_cpuset(topo);
    hwloc_bitmap_t now = hwloc_bitmap_alloc(), set = hwloc_bitmap_alloc();
    char pus[256] = "?";
    if (!now || !set) {
        snprintf(where, n, "not bound: out of memory");
    } else if (hwloc_get_cpubind(topo, now, HWLOC_CPUBIND_PROCESS) == 0 &&
               !hwloc_bitmap_isincluded(all, now)) {
        hwloc_bitmap_list_snprintf(pus, sizeof pus, now);
        snprintf(where, n, "PUs %s, as the launcher bound it", pus);
    } else if (device >= 0 && hvd__device_cpuset(topo, device, set) == 0) {
        if (mode == HVD__BIND_CORE)
            hvd__share_near_device(topo, set, local_rank, local_size,
                                   ndevices);
        hwloc_bitmap_list_snprintf(pus, sizeof pus, set);
        if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0)
            snprintf(where, n, "not bound: hwloc_set_cpubind to PUs %s "
                     "failed", pus);
        else
            snprintf(where, n, "PUs %s, %s the GPU", pus,
                     mode == HVD__BIND_CORE ? "its share of the cores nearest"
                                            : "nearest");
    } else {
        hwloc_obj_type_t type =
            mode == HVD__BIND_NUMA ? HWLOC_OBJ_NUMANODE : HWLOC_OBJ_CORE;
        const char *what = mode == HVD__BIND_NUMA ? "NUMA node" : "core";
        int count = hwloc_get_nbobjs_by_type(topo, type), lo, hi;
        if (count <= 0) {
            snprintf(where, n, "not bound: hwloc finds no %s", what);
        } else {
            hvd__share(local_rank, local_size, count, &lo, &hi);
            for (int i = lo; i < hi; i++)
                hwloc_bitmap_or(set, set,
                                hwloc_get_obj_by_type(topo, type, i)->cpuset);
            hwloc_bitmap_list_snprintf(pus, sizeof pus, set);
            if (hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0)
                snprintf(where, n, "not bound: hwloc_set_cpubind to PUs %s "
                         "failed", pus);
            else if (hi - lo == 1)
                snprintf(where, n, "%s %d of %d (PUs %s)", what, lo, count,
                         pus);
            else
                snprintf(where, n, "%ss %d-%d of %d (PUs %s)", what, lo,
                         hi - 1, count, pus);
        }
    }
    hwloc_bitmap_free(now);
    hwloc_bitmap_free(set);
}

/* The affinity masks, not a second hwloc topology (hvd__bind loads one:
 * ~5 ms each here). Elsewhere than Linux: no and no, so the engine naps. */
int hvd__own_pus(MPI_Comm comm, const int *node_idx, int local_size,
                 int *own, int *single, int *spare)
{
    *own = *single = *spare = 0;
#ifdef __linux__
    int rank, size, overlap = 0, status = HVD_OK;
    cpu_set_t mine, both, *all = NULL;
    HVD_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    HVD_CHECK_MPI(MPI_Comm_size(comm, &size));
    if (!(all = malloc((size_t)size * sizeof *all))) {
        status = HVD_ERR_NOMEM;
        goto out;
    }
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine);
    HVD_CHECK_MPI(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all,
                                (int)sizeof mine, MPI_BYTE, comm));
    for (int r = 0; r < size; r++) {
        if (r == rank || node_idx[r] != node_idx[rank]) continue;
        CPU_AND(&both, &mine, &all[r]);
        overlap |= CPU_COUNT(&both) > 0;
    }
    int n = CPU_COUNT(&mine);
    *own = n > 0 && (!overlap || n >= local_size);
    *single = n == 1;
    *spare = n >= (overlap ? 2 * local_size : 2);
out:
    free(all);
    return status;
#else
    (void)comm;
    (void)node_idx;
    (void)local_size;
#endif
    return HVD_OK;
}

int hvd__sched_batch(pthread_t thread)
{
#ifdef SCHED_BATCH
    struct sched_param param = {0};
    return pthread_setschedparam(thread, SCHED_BATCH, &param) == 0;
#else
    (void)thread;
    return 0;
#endif
}

void hvd__bind(hvd__bind_t mode, int local_rank, int local_size, char *place,
               size_t nbytes)
{
    char where[HVD__PLACE_MAX - 32], gpu[32] = "cpu";
    int ndevices, device = hvd__pick_device(local_rank, &ndevices);
    hwloc_topology_t topo;
    if (mode == HVD__BIND_NONE) {
        snprintf(where, sizeof where, "not bound (HVD_BIND=none)");
    } else if (hwloc_topology_init(&topo) != 0) {
        snprintf(where, sizeof where, "not bound: hwloc_topology_init failed");
    } else {
        if (hwloc_topology_load(topo) != 0)
            snprintf(where, sizeof where,
                     "not bound: hwloc_topology_load failed");
        else
            hvd__bind_in(topo, mode, device, ndevices, local_rank,
                         local_size, where, sizeof where);
        hwloc_topology_destroy(topo);
    }
    if (strncmp(where, "not bound:", 10) == 0)
        hvd__log(HVD__LOG_WARNING, "placement: %s", where);
    if (device >= 0) snprintf(gpu, sizeof gpu, "GPU %d", device);
    snprintf(place, nbytes, "device %s, %s", gpu, where);
}
