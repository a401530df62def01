/* ring/device.c: whether a buffer is device memory, as ring_dev() (CUDA
 * with a GPU visible, or the emulated device) knows it. Without either,
 * nothing is, and no CUDA call is made after ring_dev()'s first look.
 * Managed and pinned memory are host-readable: they are host memory. */
#include "ring/ring_internal.h"

int ring_is_device_memory(const void *p)
{
    const ring_dev_t *dev = ring_dev();
    int device;
    return p && dev && dev->owns(p, &device);
}
