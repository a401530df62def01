/* ring/device.c: whether a buffer is device memory, as ring_dev() (CUDA
 * with a GPU visible, or the emulated device) knows it. Without either,
 * nothing is, and no CUDA call is made after ring_dev()'s first look.
 * Managed and pinned memory are host-readable: they are host memory.
 *
 * A CUDA context broken by an earlier error (an illegal address in some
 * kernel) answers every pointer query with that error. Memory the host
 * can read is then taken for host memory, as it would have been; other
 * memory is of no kind a call can take: where host code would fault on
 * a device pointer taken for host memory, the call fails instead. */
#include <errno.h>
#include <unistd.h>
#include "ring/ring_internal.h"

const char ring__kind_unknown[] =
    "the device cannot tell whether a buffer is its memory (CUDA's error "
    "above), and the host cannot read it";

/* Whether the host can read p's first byte, asked of the kernel (a pipe
 * write fails with EFAULT on memory the process cannot read), not by a
 * load that would fault. */
static int ring__host_readable(const void *p)
{
    int fds[2];
    if (pipe(fds) != 0) return 1; /* cannot tell: as before */
    ssize_t n;
    do {
        n = write(fds[1], p, 1);
    } while (n < 0 && errno == EINTR);
    int readable = n == 1 || errno != EFAULT;
    close(fds[0]);
    close(fds[1]);
    return readable;
}

int ring__memory_kind(const void *p, int *device)
{
    const ring_dev_t *dev = ring_dev();
    if (!p || !dev) return 0;
    int kind = dev->owns(p, device);
    if (kind >= 0 || ring__host_readable(p)) return kind > 0;
    return RING_ERR_CUDA;
}

int ring_is_device_memory(const void *p)
{
    int device;
    return ring__memory_kind(p, &device);
}
