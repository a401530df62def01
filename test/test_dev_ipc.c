/* test/test_dev_ipc.c: the emulated device's ipc between the ranks of a
 * node (test/dev_ipc_np*.mpi): `test_dev_ipc plain|delay|guard` sets
 * HVD_DEVICE_EMULATE to 1, delay:3 or guard. Each rank allocates device
 * memory, fills its first part with a pattern of its own, exports it, and
 * the handles go round by MPI_Allgather. Each rank opens every other
 * rank's allocation, reads the pattern back with a copy on its own stream,
 * and writes its own pattern into its slot of the peer's second part;
 * then each owner finds every peer's pattern in its slots. Writes through
 * a mapping must reach the owner: the memory is shared, not copied.
 *
 * Then interprocess events, two rounds: each owner queues a new pattern
 * into its memory behind other work and records its event; once told
 * (a barrier), each peer's stream waits for that event and copies the
 * pattern out. Under delay the pattern lands milliseconds after the
 * record, so a wait that does not hold reads the old one; the second
 * round records the event again, and the wait must see the new record.
 *
 * Each owner frees its memory and events only after every peer closed
 * them, and the emulator must count no misuse; then rank 0 frees a
 * buffer and an event that rank 1 still has open, and it must count two.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ring/dev.h"
#include "test/test.h"

enum { COUNT = 10007 }; /* elements per pattern */

#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        if ((call) != MPI_SUCCESS) {                                           \
            fprintf(stderr, "rank %d %s:%d: %s failed\n", test_rank, __FILE__, \
                    __LINE__, #call);                                          \
            MPI_Abort(MPI_COMM_WORLD, TEST_HARD_ERROR);                        \
        }                                                                      \
    } while (0)

#define DEV_OK(call) TEST_EQ((call), RING_OK)

static int32_t value(int rank, size_t i)
{
    return (int32_t)(rank * 1000003 + (int)i);
}

static void pattern(int32_t *buf, int rank)
{
    for (size_t i = 0; i < COUNT; i++)
        buf[i] = value(rank, i);
}

/* Counts the elements of buf that are not rank's pattern, and reports the
 * first. */
static void check_pattern(const int32_t *buf, int rank, const char *what)
{
    for (size_t i = 0; i < COUNT; i++) {
        if (buf[i] != value(rank, i)) {
            TEST_FAIL("%s: element %zu is %d, want %d (rank %d's)", what, i,
                      (int)buf[i], (int)value(rank, i), rank);
            return;
        }
    }
}

/* Interprocess events (see the top): mem is this rank's allocation,
 * peer[r] rank r's opened here. */
static void test_events(const ring_dev_t *dev, ring_stream_t *s, char *mem,
                        void **peer, int rank, int size)
{
    size_t slot_bytes = COUNT * sizeof(int32_t);
    int32_t *host = malloc(slot_bytes), *back = malloc(slot_bytes);
    ring_ipc_handle_t own, *all = malloc((size_t)size * sizeof(*all));
    ring_event_t **ev = calloc((size_t)size, sizeof(*ev));
    DEV_OK(dev->ipc_event_create(&ev[rank], &own));
    TEST_EQ(dev->ipc_event_open(&own, &ev[(rank + 1) % size]), RING_ERR_ARG);
    ring_ipc_handle_t memory;
    DEV_OK(dev->ipc_export(mem, &memory));
    TEST_EQ(dev->ipc_event_open(&memory, &ev[(rank + 1) % size]),
            RING_ERR_ARG);
    MPI_CHECK(MPI_Allgather(&own, sizeof(own), MPI_BYTE, all, sizeof(own),
                            MPI_BYTE, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        if (r != rank) DEV_OK(dev->ipc_event_open(&all[r], &ev[r]));
    for (int round = 1; round <= 2; round++) {
        pattern(host, rank + 100 * round);
        for (int k = 0; k < 40; k++) DEV_OK(dev->zero(mem, slot_bytes, s));
        DEV_OK(dev->copy(mem, host, slot_bytes, s));
        DEV_OK(dev->event_record(ev[rank], s));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); /* every event recorded */
        for (int r = 0; r < size; r++) {
            if (r == rank || !peer[r] || !ev[r]) continue;
            DEV_OK(dev->stream_wait(s, ev[r]));
            DEV_OK(dev->copy(back, peer[r], slot_bytes, s));
            DEV_OK(dev->stream_sync(s));
            check_pattern(back, r + 100 * round, "behind a peer's event");
        }
        int done = 0;
        DEV_OK(dev->event_sync(ev[(rank + 1) % size]));
        DEV_OK(dev->event_query(ev[(rank + 1) % size], &done));
        TEST_EQ(done, 1);
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); /* read before rewritten */
    }
    /* the peers' events first, everywhere, then our own */
    for (int r = 0; r < size; r++)
        if (r != rank) DEV_OK(dev->event_destroy(ev[r]));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    DEV_OK(dev->event_destroy(ev[rank]));
    free(ev);
    free(all);
    free(back);
    free(host);
}

/* The emulator counts what CUDA leaves undefined: rank 0 frees memory
 * and destroys an event that it exported while rank 1 still has them
 * open (two misuses on rank 0); rank 1 then closes its copies, which is
 * no misuse. */
static void test_misuse(const ring_dev_t *dev, int rank)
{
    uint64_t before = ring__dev_emu_misuses();
    void *mem = NULL, *opened = NULL;
    ring_event_t *ev = NULL, *opened_ev = NULL;
    ring_ipc_handle_t h[2];
    memset(h, 0, sizeof h);
    if (rank == 0) {
        DEV_OK(dev->alloc(&mem, 4096));
        DEV_OK(dev->ipc_export(mem, &h[0]));
        DEV_OK(dev->ipc_event_create(&ev, &h[1]));
    }
    MPI_CHECK(MPI_Bcast(h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (rank == 1) {
        DEV_OK(dev->ipc_open(&h[0], &opened));
        DEV_OK(dev->ipc_event_open(&h[1], &opened_ev));
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); /* open on rank 1 */
    if (rank == 0) {
        DEV_OK(dev->release(mem));
        DEV_OK(dev->event_destroy(ev));
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); /* freed too early */
    if (rank == 1) {
        DEV_OK(dev->ipc_close(opened));
        DEV_OK(dev->event_destroy(opened_ev));
    }
    TEST_EQ(ring__dev_emu_misuses() - before, rank == 0 ? 2u : 0u);
}

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "plain";
    const char *env = strcmp(mode, "delay") == 0   ? "delay:3"
                      : strcmp(mode, "guard") == 0 ? "guard"
                                                   : "1";
    int rank, size;
    setenv("HVD_DEVICE_EMULATE", env, 1);
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return TEST_HARD_ERROR;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    test_rank = rank;
    const ring_dev_t *dev = ring_dev();
    TEST_TRUE(dev == &ring__dev_emulated);
    if (!dev) MPI_Abort(MPI_COMM_WORLD, 1);

    /* [own pattern | slot per rank] */
    size_t nbytes = (size_t)(1 + size) * COUNT * sizeof(int32_t);
    size_t slot_bytes = COUNT * sizeof(int32_t);
    int32_t *host = malloc(slot_bytes), *back = malloc(nbytes);
    ring_ipc_handle_t own, none, zeros = {{0}},
                           *all = malloc((size_t)size * sizeof(*all));
    void **peer = calloc((size_t)size, sizeof(*peer));
    char *mem = NULL;
    ring_stream_t *s;
    DEV_OK(dev->stream_create(&s));
    DEV_OK(dev->alloc((void **)&mem, nbytes));
    pattern(host, rank);
    DEV_OK(dev->zero(mem, nbytes, s));
    DEV_OK(dev->copy(mem, host, slot_bytes, s));
    DEV_OK(dev->stream_sync(s));
    DEV_OK(dev->ipc_export(mem, &own));
    /* refused, leaving no handle: all zeros (ring.h), as CUDA's */
    memset(&none, 0x5a, sizeof none);
    TEST_EQ(dev->ipc_export(mem + 4, &none), RING_ERR_ARG);
    TEST_EQ(memcmp(&none, &zeros, sizeof none), 0);
    TEST_EQ(dev->ipc_open(&own, &peer[rank]), RING_ERR_ARG); /* own */
    MPI_CHECK(MPI_Allgather(&own, sizeof(own), MPI_BYTE, all, sizeof(own),
                            MPI_BYTE, MPI_COMM_WORLD));

    for (int r = 0; r < size; r++) {
        int ordinal = -1;
        if (r == rank) continue;
        DEV_OK(dev->ipc_open(&all[r], &peer[r]));
        if (!peer[r]) continue;
        TEST_EQ(dev->owns(peer[r], &ordinal), 1);
        TEST_EQ(ordinal, 0);
        DEV_OK(dev->copy(back, peer[r], slot_bytes, s));
        DEV_OK(dev->stream_sync(s));
        check_pattern(back, r, "read from a peer");
        char *slot = (char *)peer[r] + (size_t)(1 + rank) * slot_bytes;
        DEV_OK(dev->copy(slot, mem, slot_bytes, s));
    }
    DEV_OK(dev->stream_sync(s));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); /* every peer has written */

    DEV_OK(dev->copy(back, mem, nbytes, s));
    DEV_OK(dev->stream_sync(s));
    for (int r = 0; r < size; r++)
        if (r != rank)
            check_pattern(back + (size_t)(1 + r) * COUNT, r,
                          "written by a peer");
    test_events(dev, s, mem, peer, rank, size);
    for (int r = 0; r < size; r++) {
        if (r == rank || !peer[r]) continue;
        DEV_OK(dev->ipc_close(peer[r]));
        TEST_EQ(dev->owns(peer[r], NULL), 0);
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); /* closed before released */
    DEV_OK(dev->release(mem));
    DEV_OK(dev->stream_destroy(s));
    /* every free above came after the peers closed */
    TEST_EQ(ring__dev_emu_misuses(), 0u);
    if (size >= 2) test_misuse(dev, rank);
    free(host);
    free(back);
    free(all);
    free(peer);
    MPI_CHECK(MPI_Finalize());
    return test_exit_code();
}
