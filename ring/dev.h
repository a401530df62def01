/* ring/dev.h: the implementations of the device interface (ring_dev_t,
 * ring/ring.h), internal to ring/. The collectives are written once for
 * two:
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
 * ring_dev() picks one per process, once: emulated when the test-only
 * variable HVD_DEVICE_EMULATE is set (below), else cuda in a CUDA build
 * with a GPU visible, else none (NULL: nothing is device memory).
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

extern const ring_dev_t ring__dev_emulated; /* ring/dev_emu.c */

/* The emulation's mode, as HVD_DEVICE_EMULATE names it: ring_dev() sets
 * it once, before it hands the table out (plain until then). */
typedef enum {
    RING__EMU_PLAIN,
    RING__EMU_DELAY,
    RING__EMU_GUARD
} ring__emu_mode_t;
void ring__dev_emu_configure(ring__emu_mode_t mode, unsigned long seed);
/* How many times this process has waited on the host for the emulated
 * device (stream_sync, event_sync): a test counts a path's waits, each of
 * which, on a GPU the node's processes share, is a turn of all of them. */
uint64_t ring__dev_emu_host_waits(void);
/* How many events this process has made (event_create, timer_create;
 * not those it opened from another's handle): a test counts a path's,
 * each a driver call on a GPU. */
uint64_t ring__dev_emu_events_made(void);
/* How many times this process has freed, through the emulated device,
 * memory or an interprocess event it exported while another process
 * still had it open (each logged): undefined on CUDA, so tests want 0. */
uint64_t ring__dev_emu_misuses(void);
/* From now on every operation on this process's emulated streams first
 * sleeps us microseconds more (0: no more): one rank made slower than its
 * peers, so that a rank reusing memory a peer may still read, without
 * waiting for the peer, overwrites it before the read. */
void ring__dev_emu_lag(unsigned us);
/* What fails from now on (RING_ERR_CUDA, logged), until called with 0:
 * owns, every pointer alike, as cudaPointerGetAttributes does once a
 * CUDA context is broken; the host's waits (stream_sync, event_sync), as
 * CUDA reports a kernel's fault at the next synchronization; making a
 * stream. */
enum {
    RING__EMU_FAIL_OWNS = 1,
    RING__EMU_FAIL_SYNCS = 2,
    RING__EMU_FAIL_STREAMS = 4
};
void ring__dev_emu_fails(unsigned what);
#if HVD_HAVE_CUDA
extern const ring_dev_t ring__dev_cuda; /* ring/dev_cuda.c */
#endif

#ifdef __cplusplus
}
#endif

#endif /* RING_DEV_H */
