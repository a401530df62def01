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
        *why = "a buffer is device memory, which this call does not take "
               "(ring_ctx_allreduce, broadcast, allgather and "
               "reduce_scatter do)";
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

/* Where piece p's data lies on one side: its sendbuf (out 0) or recvbuf
 * (out 1); NULL when it has none. */
static char *ring__io_side(const ring__io_t *io, size_t p, int out)
{
    return out ? io->pieces[p].recvbuf : (char *)io->pieces[p].sendbuf;
}

/* Pieces whose buffers follow each other merge into one run, as tensors
 * carved one after another from a slab do, so that a copy moves the
 * whole run at once: a copy per 4 KiB tensor made the window's gather
 * twice as slow as one copy of the same bytes. */
size_t ring__io_span(const ring__io_t *io, size_t at, size_t nbytes, int out,
                     char **data)
{
    if (!io->pieces) {
        *data = (out ? (char *)io->recvbuf : (char *)io->sendbuf) + at;
        return nbytes;
    }
    size_t p = ring__io_piece(io, at), end = io->starts[p + 1];
    char *side = ring__io_side(io, p, out);
    *data = side ? side + (at - io->starts[p]) : NULL;
    for (size_t q = p + 1; q < io->npieces && end - at < nbytes; q++) {
        if (io->starts[q + 1] == io->starts[q]) continue; /* holds nothing */
        char *next = ring__io_side(io, q, out);
        if (next != (*data ? *data + (end - at) : NULL)) break;
        end = io->starts[q + 1];
    }
    return end - at < nbytes ? end - at : nbytes;
}


void ring__io_read(const ring__io_t *io, size_t at, char *dst, size_t nbytes,
                   void (*copy)(void *, const void *, size_t))
{
    for (size_t len; nbytes > 0; at += len, dst += len, nbytes -= len) {
        char *run;
        len = ring__io_span(io, at, nbytes, 0, &run);
        if (run)
            copy(dst, run, len);
        else
            memset(dst, 0, len);
    }
}

void ring__io_write(const ring__io_t *io, size_t at, const char *src,
                    size_t nbytes, void (*copy)(void *, const void *, size_t))
{
    for (size_t len; nbytes > 0; at += len, src += len, nbytes -= len) {
        char *run;
        len = ring__io_span(io, at, nbytes, 1, &run);
        if (run) copy(run, src, len);
    }
}
