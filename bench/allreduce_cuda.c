/* bench/allreduce_cuda.c: allreduce_perf -G on CUDA: each rank takes its
 * node-local rank's GPU (modulo the visible ones, as hvd_init does) and
 * names it by PCI bus id, so that ranks that see one GPU under different
 * CUDA_VISIBLE_DEVICES are still known to share it. Built only when
 * configure finds CUDA; the CUDA runtime is used here and in
 * allreduce_nccl.c alone, the rest of the benchmark is plain C.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>

#include <cuda_runtime.h>

#include "bench/allreduce_perf.h"

/* "cudaSetDevice failed: ..." on stderr, with host and rank. */
static int cuda_failed(const char *call, cudaError_t rc)
{
    fprintf(stderr, "host %s rank %d: %s failed: %s\n", bench_host,
            prog_rank, call, cudaGetErrorString(rc));
    return RING_ERR_CUDA;
}

int bench__cuda_select(int local_rank, char *key, size_t len)
{
    char bus_id[32];
    int ndevices = 0, device;
    cudaError_t rc;

    if ((rc = cudaGetDeviceCount(&ndevices)) != cudaSuccess)
        return cuda_failed("cudaGetDeviceCount", rc);
    if (ndevices < 1)
        return cuda_failed("cudaGetDeviceCount", cudaErrorNoDevice);
    device = local_rank % ndevices;
    if ((rc = cudaSetDevice(device)) != cudaSuccess)
        return cuda_failed("cudaSetDevice", rc);
    rc = cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, device);
    if (rc != cudaSuccess)
        return cuda_failed("cudaDeviceGetPCIBusId", rc);
    snprintf(key, len, "cuda device %d pci %s", device, bus_id);
    return RING_OK;
}
