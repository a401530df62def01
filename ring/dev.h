/* ring/dev.h: the device interface, internal to ring/: everything ring/
 * asks of a GPU, as one table of functions, so that the collectives are
 * written once for two implementations:
 *
 *   cuda      ring/dev_cuda.c over the CUDA runtime, its kernels in
 *             ring/reduce_cuda.cu;
 *   emulated  ring/dev_emu.c, on the host, for tests without a GPU:
 *             "device memory" is memory the emulation allocated and knows,
 *             each stream is a worker thread running its queued work in
 *             order, events are sequence numbers, and kernels run their
 *             __host__ __device__ bodies (ring/reduce_op.h,
 *             ring/copy_batch.h) over the grid on the host.
 *
 * ring__dev() picks one per process, once: emulated when the test-only
 * variable HVD_DEVICE_EMULATE is set (below), else cuda in a CUDA build
 * with a GPU visible, else none (NULL: nothing is device memory).
 *
 * Semantics are CUDA's, so that what passes on the emulation holds on a
 * GPU: work queued on one stream runs in order, streams run concurrently,
 * and nothing queued is done until an event or a stream sync says so.
 * Every function returns a status (RING_OK, RING_ERR_CUDA after logging
 * what failed, RING_ERR_NOMEM, RING_ERR_ARG); the queueing functions do
 * not wait for the work. Arrays passed to a queueing function (copies,
 * reduce_n's inputs) are read before it returns, so they may live on the
 * caller's stack.
 *
 * HVD_DEVICE_EMULATE (tests only; ring/README.md):
 *   unset, "", 0  no emulation
 *   1              the emulated device
 *   delay[:SEED]   each queued operation first sleeps a random time drawn
 *                  from SEED (default 1): a wait that is missing gives
 *                  wrong data instead of passing by luck
 *   guard          emulated device memory is inaccessible (PROT_NONE)
 *                  outside the queued operations that use it: a device
 *                  pointer handed to MPI or memcpy faults
 */
#ifndef RING_DEV_H
#define RING_DEV_H

#include <stddef.h>
#include "ring/ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ring__stream ring__stream_t;
typedef struct ring__event ring__event_t;

/* A device allocation as another process of the node opens it:
 * cudaIpcMemHandle_t is 64 bytes; the emulation's fits as well. */
typedef struct {
    unsigned char bytes[64];
} ring__ipc_handle_t;

/* One copy of a batch (copy_batch): nbytes from src to dst. */
typedef struct {
    void *dst;
    const void *src;
    size_t nbytes;
} ring__copy_t;

typedef struct {
    const char *name; /* "cuda" or "emulated" */

    /* ---- memory ---- */
    /* Device memory of this process's device; release(NULL) is a no-op. */
    int (*alloc)(void **p, size_t nbytes);
    int (*release)(void *p);
    /* Page-locked host memory, for staging: host code reads and writes
     * it, and copies to and from the device run at full speed. */
    int (*alloc_pinned)(void **p, size_t nbytes);
    int (*release_pinned)(void *p);
    /* 1 when p points into device memory this implementation knows
     * (allocated here, or opened from another process), with *device its
     * ordinal; else 0 (host, pinned or managed memory). */
    int (*owns)(const void *p, int *device);
    /* The device this thread uses, and selecting it (cudaSetDevice). */
    int (*device)(int *device);
    int (*set_device)(int device);

    /* ---- streams and events ---- */
    int (*stream_create)(ring__stream_t **s);
    int (*stream_destroy)(ring__stream_t *s); /* NULL: no-op */
    int (*stream_sync)(ring__stream_t *s);
    int (*event_create)(ring__event_t **e);
    int (*event_destroy)(ring__event_t *e); /* NULL: no-op */
    /* e marks the work queued on s so far. */
    int (*event_record)(ring__event_t *e, ring__stream_t *s);
    /* Blocks the calling thread until that work is done (at once for an
     * event never recorded). */
    int (*event_sync)(ring__event_t *e);
    /* *done = 1 when it is done, without blocking. */
    int (*event_query)(ring__event_t *e, int *done);
    /* Work queued on s after this call waits for e's work first. */
    int (*stream_wait)(ring__stream_t *s, ring__event_t *e);

    /* ---- work queued on a stream ---- */
    /* Any direction: device or pinned or plain host memory either side. */
    int (*copy)(void *dst, const void *src, size_t nbytes, ring__stream_t *s);
    /* n copies as one kernel launch (Horovod's batched D2D memcpy): packs
     * and unpacks a fusion buffer. Device memory on both sides. */
    int (*copy_batch)(const ring__copy_t *copies, size_t n,
                      ring__stream_t *s);
    int (*zero)(void *dst, size_t nbytes, ring__stream_t *s);
    /* ring__mem_ops_t's reduce, reduce_n and divide on device memory, with
     * the same arithmetic bit for bit (ring/reduce_op.h). in[] holds n
     * device pointers (n <= RING__DEV_MAX_INPUTS). */
    int (*reduce)(void *dst, const void *a, const void *b, size_t count,
                  ring_dtype_t dtype, ring_op_t op, int divisor,
                  ring__stream_t *s);
    int (*reduce_n)(void *dst, const void *const *in, int n, size_t count,
                    ring_dtype_t dtype, ring_op_t op, int divisor,
                    ring__stream_t *s);
    int (*divide)(void *buf, size_t count, ring_dtype_t dtype, int divisor,
                  ring__stream_t *s);

    /* ---- within a node: one process's allocation opened by another ---- */
    /* p must be the start of an allocation. */
    int (*ipc_export)(void *p, ring__ipc_handle_t *h);
    int (*ipc_open)(const ring__ipc_handle_t *h, void **p);
    int (*ipc_close)(void *p);
} ring__dev_t;

enum { RING__DEV_MAX_INPUTS = 16 };

/* This process's device, chosen once (see above); NULL for none. A bad
 * HVD_DEVICE_EMULATE value is logged once, and no device is used. */
const ring__dev_t *ring__dev(void);

extern const ring__dev_t ring__dev_emulated; /* ring/dev_emu.c */

/* The emulation's mode, as HVD_DEVICE_EMULATE names it: ring__dev() sets
 * it once, before it hands the table out (plain until then). */
typedef enum {
    RING__EMU_PLAIN,
    RING__EMU_DELAY,
    RING__EMU_GUARD
} ring__emu_mode_t;
void ring__dev_emu_configure(ring__emu_mode_t mode, unsigned long seed);
#if HVD_HAVE_CUDA
extern const ring__dev_t ring__dev_cuda; /* ring/dev_cuda.c */
#endif

#ifdef __cplusplus
}
#endif

#endif /* RING_DEV_H */
