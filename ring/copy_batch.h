/* ring/copy_batch.h: the body of the batched copy (ring_dev_t's
 * copy_batch), written once and run two ways: by the CUDA kernel in
 * ring/reduce_cuda.cu, one call per thread of the grid, and by the
 * emulated device (ring/dev_emu.c), which calls it for every thread of
 * the same grid in turn. Packing a fusion buffer of many small tensors is
 * then one launch, not a copy per tensor.
 *
 * Block b of the grid copies copies[b], copies[b + nblocks], ...; its
 * threads share each copy, in 16-byte words where source and destination
 * are both 16-byte aligned (tensors carved from a slab usually are), else
 * byte by byte. Threads of a block write disjoint bytes, so the order in
 * which the emulation runs them does not matter.
 */
#ifndef RING_COPY_BATCH_H
#define RING_COPY_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include "ring/ring.h"
#include "ring/reduce_op.h" /* RING_HD */

typedef struct {
    uint64_t w[2];
} ring__word16_t;

RING_HD void ring__copy_batch_thread(const ring_copy_t *copies, size_t n,
                                     size_t block, size_t nblocks,
                                     size_t thread, size_t nthreads)
{
    for (size_t c = block; c < n; c += nblocks) {
        char *dst = (char *)copies[c].dst;
        const char *src = (const char *)copies[c].src;
        size_t nbytes = copies[c].nbytes, done = 0;
        if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0) {
            size_t nwords = nbytes / 16;
            for (size_t i = thread; i < nwords; i += nthreads)
                ((ring__word16_t *)dst)[i] =
                    ((const ring__word16_t *)src)[i];
            done = nwords * 16;
        }
        for (size_t i = done + thread; i < nbytes; i += nthreads)
            dst[i] = src[i];
    }
}

#endif /* RING_COPY_BATCH_H */
