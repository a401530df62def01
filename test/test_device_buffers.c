/* test/test_device_buffers.c: CUDA device memory handed to hvd
 * (test/device_buffers_np*.mpi) on a real GPU. hvd takes device tensors:
 * an allreduce, a broadcast and an allgather of cudaMalloc'd buffers give
 * the right results; a request with one buffer on the device and the
 * other on the host is refused with a message, and a good allreduce of
 * host memory works after it. ring_is_device_memory tells device memory
 * from host and managed memory. (The emulated device's version of all
 * this, with fusion, streams and mismatches: test/test_hvd_device.c.)
 * Exits 77 (skip) in a build without CUDA or where no GPU is visible, as
 * on the CI machines.
 */
#define _POSIX_C_SOURCE 200809L /* test/capture.h */
#include <mpi.h>
#if HVD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include "hvd/hvd.h"
#include "ring/ring.h"
#include "test/capture.h"
#include "test/hvd_harness.h"
#include "test/test.h"

enum { COUNT = 1024 };

static float host[COUNT];

/* A good allreduce of host memory, checked exactly. */
static void host_allreduce_works(const char *name)
{
    for (int i = 0; i < COUNT; i++) host[i] = (float)(hvd_rank() + i);
    TEST_EQ(hvd_allreduce(host, host, COUNT, HVD_FLOAT32, HVD_SUM, name),
            HVD_OK);
    int n = hvd_size();
    TEST_EQ(host[7], (float)(n * (n - 1) / 2 + 7 * n));
}

#if HVD_HAVE_CUDA
static void hvd_takes(float *dev)
{
    static float got[COUNT * 8];
    int n = hvd_size();
    for (int i = 0; i < COUNT; i++) host[i] = (float)(hvd_rank() + i);
    cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice);
    TEST_EQ(hvd_allreduce(dev, dev, COUNT, HVD_FLOAT32, HVD_SUM, "dev"),
            HVD_OK);
    cudaMemcpy(got, dev, sizeof host, cudaMemcpyDeviceToHost);
    TEST_EQ(got[7], (float)(n * (n - 1) / 2 + 7 * n));
    TEST_EQ(hvd_broadcast(dev, COUNT, HVD_FLOAT32, 0, "dev.b"), HVD_OK);
    cudaMemcpy(got, dev, sizeof host, cudaMemcpyDeviceToHost);
    TEST_EQ(got[7], (float)(n * (n - 1) / 2 + 7 * n));
    const char *says = "both on the device or both on the host";
    TEST_SAYS(hvd_allreduce(host, dev, COUNT, HVD_FLOAT32, HVD_SUM, "dev"),
              HVD_ERR_ARG, says);
    TEST_SAYS(hvd_allgather(dev, 1, host, HVD_FLOAT32, "dev.g"),
              HVD_ERR_ARG, says);
    host_allreduce_works("dev.h");
}
#endif

int main(int argc, char **argv)
{
#if HVD_HAVE_CUDA
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        TEST_SKIP("no CUDA device visible");
    MPI_Comm oracle;
    int rank, size, status = test_hvd_start(&argc, &argv, &oracle, &rank,
                                            &size);
    if (status != 0) return status;
    float *dev = NULL, *managed = NULL;
    if (cudaMalloc((void **)&dev, COUNT * sizeof(float)) != cudaSuccess ||
        cudaMallocManaged((void **)&managed, sizeof(float),
                          cudaMemAttachGlobal) != cudaSuccess)
        return TEST_HARD_ERROR;
    TEST_EQ(ring_is_device_memory(dev), 1);
    TEST_EQ(ring_is_device_memory(dev + 5), 1);
    TEST_EQ(ring_is_device_memory(host), 0);
    TEST_EQ(ring_is_device_memory(managed), 0);
    TEST_EQ(ring_is_device_memory(NULL), 0);
    hvd_takes(dev);
    cudaFree(dev);
    cudaFree(managed);
    return test_hvd_finish("test_device_buffers", &oracle, rank, size);
#else
    (void)argc;
    (void)argv;
    (void)host_allreduce_works;
    TEST_SKIP("not a CUDA build");
#endif
}
