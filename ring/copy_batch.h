/* ring/copy_batch.h: the body of the batched copy (ring_dev_t's
 * copy_batch), written once and run two ways: by the CUDA kernel in
 * ring/reduce_cuda.cu, one call per thread of the grid, and by the
 * emulated device (ring/dev_emu.c), which calls it for every thread of a
 * smaller grid in turn. Packing a fusion buffer of many small tensors is
 * then one launch, not a copy per tensor.
 *
 * The copies go in chunks of RING__COPY_CHUNK bytes, counted over the
 * batch in order, and block b of the grid takes chunks b, b + nblocks,
 * ...: a large copy spreads over the whole grid (one block would leave
 * the GPU's other SMs idle while it copies), small ones take a block
 * each. A block's threads share each chunk, in 16-byte words where
 * source and destination are both 16-byte aligned (tensors carved from a
 * slab usually are; a chunk keeps its copy's alignment), else byte by
 * byte. Threads write disjoint bytes, so the order in which the
 * emulation runs them does not matter.
 */
#ifndef RING_COPY_BATCH_H
#define RING_COPY_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include "ring/ring.h"
#include "ring/reduce_op.h" /* RING_HD */

enum { RING__COPY_CHUNK = 64 << 10 };

/* Aligned as its size, so that a word is one 16-byte load and store. */
typedef struct __attribute__((aligned(16))) {
    uint64_t w[2];
} ring__word16_t;

/* The chunks of a copy of nbytes. */
RING_HD size_t ring__copy_chunks(size_t nbytes)
{
    return nbytes / RING__COPY_CHUNK + (nbytes % RING__COPY_CHUNK != 0);
}

/* The grid for a batch: a block a chunk, one at least, max_blocks at
 * most. */
RING_HD size_t ring__copy_batch_blocks(const ring_copy_t *copies, size_t n,
                                       size_t max_blocks)
{
    size_t chunks = 0;
    for (size_t c = 0; c < n; c++)
        chunks += ring__copy_chunks(copies[c].nbytes);
    return chunks < 1 ? 1 : chunks < max_blocks ? chunks : max_blocks;
}

/* nbytes from src to dst, thread's share of nthreads. */
RING_HD void ring__copy_span(char *dst, const char *src, size_t nbytes,
                             size_t thread, size_t nthreads)
{
    size_t done = 0;
    if ((((uintptr_t)dst | (uintptr_t)src) & 15u) == 0) {
        size_t nwords = nbytes / 16;
        for (size_t i = thread; i < nwords; i += nthreads)
            ((ring__word16_t *)dst)[i] = ((const ring__word16_t *)src)[i];
        done = nwords * 16;
    }
    for (size_t i = done + thread; i < nbytes; i += nthreads)
        dst[i] = src[i];
}

RING_HD void ring__copy_batch_thread(const ring_copy_t *copies, size_t n,
                                     size_t block, size_t nblocks,
                                     size_t thread, size_t nthreads)
{
    size_t first = 0; /* the batch's index of copies[c]'s first chunk */
    for (size_t c = 0; c < n; c++) {
        size_t nbytes = copies[c].nbytes;
        size_t end = first + ring__copy_chunks(nbytes);
        /* This block's first chunk from there on. */
        size_t k = first + (block + nblocks - first % nblocks) % nblocks;
        for (; k < end; k += nblocks) {
            size_t off = (k - first) * RING__COPY_CHUNK;
            size_t len = nbytes - off < RING__COPY_CHUNK ? nbytes - off
                                                         : RING__COPY_CHUNK;
            ring__copy_span((char *)copies[c].dst + off,
                            (const char *)copies[c].src + off, len, thread,
                            nthreads);
        }
        first = end;
    }
}

#endif /* RING_COPY_BATCH_H */
