/* ring/mem.c: memory kinds. Each kind is a table of the few things the
 * algorithms do to data (copy, zero, reduce two inputs or N, divide), so
 * pipeline.c, recursive.c and shm.c are written once for every kind. Host
 * memory is the one kind today; CUDA device memory and the emulated device
 * that tests it without a GPU are the next rows. */
#include <string.h>
#include "ring/ring_internal.h"

static void ring__host_copy(void *dst, const void *src, size_t nbytes)
{
    memcpy(dst, src, nbytes);
}

static void ring__host_zero(void *dst, size_t nbytes)
{
    memset(dst, 0, nbytes);
}

const ring__mem_ops_t ring__mem_host = {
    .name = "host",
    .copy = ring__host_copy,
    .zero = ring__host_zero,
    .reduce = ring__reduce_host,
    .reduce_n = ring__reduce_host_n,
    .divide = ring__divide_host,
};

const ring__mem_ops_t *ring__mem_of(const void *p, const char **why)
{
    if (ring_is_device_memory(p)) {
        *why = "a buffer is CUDA device memory: the collectives take host "
               "memory (device buffers are a later release)";
        return NULL;
    }
    return &ring__mem_host;
}

/* ---- pieces laid end to end (ring__io_t) ---- */

/* The piece holding byte `at` of the whole: the last whose start is at or
 * before it. */
static size_t ring__io_piece(const ring__io_t *io, size_t at)
{
    size_t lo = 0, hi = io->npieces;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (io->starts[mid] <= at) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Moves bytes [at, at + nbytes) of the whole between buf and the pieces
 * with copy: out 0 reads the inputs into buf (zeros for a piece without
 * sendbuf), out 1 writes buf to the outputs (nothing for a piece without
 * recvbuf). */
static void ring__io_move(const ring__io_t *io, size_t at, char *buf,
                          size_t nbytes, int out,
                          void (*copy)(void *, const void *, size_t))
{
    for (size_t p = ring__io_piece(io, at); nbytes > 0; p++) {
        size_t off = at - io->starts[p];
        size_t len = io->starts[p + 1] - at;
        if (len > nbytes) len = nbytes;
        char *piece = out ? io->pieces[p].recvbuf
                          : (char *)io->pieces[p].sendbuf;
        if (piece && out)
            copy(piece + off, buf, len);
        else if (piece)
            copy(buf, piece + off, len);
        else if (!out)
            memset(buf, 0, len);
        buf += len;
        at += len;
        nbytes -= len;
    }
}

void ring__io_read(const ring__io_t *io, size_t at, char *dst, size_t nbytes,
                   void (*copy)(void *, const void *, size_t))
{
    if (io->pieces)
        ring__io_move(io, at, dst, nbytes, 0, copy);
    else
        copy(dst, (const char *)io->sendbuf + at, nbytes);
}

void ring__io_write(const ring__io_t *io, size_t at, const char *src,
                    size_t nbytes, void (*copy)(void *, const void *, size_t))
{
    if (io->pieces)
        ring__io_move(io, at, (char *)src, nbytes, 1, copy);
    else
        copy((char *)io->recvbuf + at, src, nbytes);
}
