/* ring/device.c: whether a buffer is device memory: the emulated device's
 * (ring/dev.h, under HVD_DEVICE_EMULATE) or CUDA's. The collectives take
 * host memory (device buffers are a later release), and a device pointer
 * handed to them would crash the first copy: ring__check_args and hvd's
 * submission refuse it with a message instead. Without CUDA, or without a
 * GPU visible, nothing is device memory and no CUDA call is made after the
 * first look. Managed memory is host-readable: it passes. */
#include <pthread.h>
#if HVD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include "ring/dev.h"
#include "ring/ring_internal.h"

#if HVD_HAVE_CUDA
static pthread_once_t ring__gpu_once = PTHREAD_ONCE_INIT;
static int ring__gpu_visible;

static void ring__look_for_gpu(void)
{
    int n = 0;
    ring__gpu_visible = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    if (!ring__gpu_visible) (void)cudaGetLastError();
}
#endif

int ring_is_device_memory(const void *p)
{
    const ring__dev_t *dev = ring__dev();
    int ordinal;
    if (dev == &ring__dev_emulated) return p && dev->owns(p, &ordinal);
#if HVD_HAVE_CUDA
    struct cudaPointerAttributes attr;
    if (!p) return 0;
    pthread_once(&ring__gpu_once, ring__look_for_gpu);
    if (!ring__gpu_visible) return 0;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* plain host memory on old runtimes */
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice;
#else
    (void)p;
    return 0;
#endif
}
