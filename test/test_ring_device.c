/* test/test_ring_device.c: the collectives on device buffers, staged
 * through pinned host memory (ring/staged.c), across ranks.
 *
 * Run through mpirun at 1-7 ranks on the emulated device
 * (test/ring_device_np*.mpi) and on a GPU (scripts/gpu-check). Every case
 * runs twice on the same inputs, from host memory and from device memory,
 * through the same context (and through the MPI_Comm entry points): the
 * device results must equal the host path's bit for bit, and agree across
 * ranks. Float inputs are not small integers, so a staged call that
 * reduced an element in another order than the host would show. Device
 * memory is only ever touched through the device's own copies, so the
 * guard mode faults on any host access the library makes. A failing case
 * prints one line naming it.
 *
 * Options: --emulate MODE sets HVD_DEVICE_EMULATE (1, delay:SEED, guard;
 * without it a GPU is needed, else the test skips); --staging-bytes N sets
 * HVD_RING_STAGING_BYTES and --ipc-bytes N HVD_RING_IPC_BYTES, so that
 * small areas force many chunks (staged, and on the IPC path);
 * --intranode auto|shm|ring picks the context's path within the node;
 * --ipc auto|off sets HVD_RING_IPC: within a node, large allreduces read
 * each other's device memory (ring/ipc.c) or stage through the shared
 * window. The test checks which one the context took. --cuda-aware 1
 * sets HVD_CUDA_AWARE: MPI is handed device pointers (the emulated
 * device's memory is host memory MPI can read, except in guard mode).
 * --quick: fewer counts and no count over 1M (for compute-sanitizer).
 * --hier makes the context hierarchical (test/netns.sh runs it across
 * two fake hosts: IPC within each, staged across).
 */
#define _POSIX_C_SOURCE 200809L /* setenv; capture.h: dup, dup2, fileno */
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"
#include "test/capture.h"
#include "test/test.h"
#include "test/values.h"

static int rank, size, quick;
static int hier; /* --hier: the context is hierarchical */
/* The emulated device (which counts the host's waits for it), and MPI
 * handed device memory (--cuda-aware 1). */
static int emulated, cuda_aware;
static const ring_dev_t *dev;
static ring_stream_t *stream;
static ring_ctx_t *ctx;
static char case_name[200];

/* ---- device memory, reached only through the device's copies ---- */

static void *dev_alloc(size_t nbytes)
{
    void *p = NULL;
    if (dev->alloc(&p, nbytes ? nbytes : 1) != RING_OK) {
        TEST_FAIL("%s: device alloc of %zu bytes failed", case_name, nbytes);
        MPI_Abort(MPI_COMM_WORLD, TEST_HARD_ERROR);
    }
    return p;
}

static void dev_copy(void *dst, const void *src, size_t nbytes)
{
    if (nbytes == 0) return;
    if (dev->copy(dst, src, nbytes, stream) != RING_OK ||
        dev->stream_sync(stream) != RING_OK)
        TEST_FAIL("%s: device copy failed", case_name);
}

/* ---- inputs ---- */

/* Floats with many significant bits (order of reduction shows); small
 * integers for the integer types; near 1 for products. */
static double input_value(int r, size_t i, ring_dtype_t dtype, ring_op_t op)
{
    unsigned h = (unsigned)(r * 7919 + (int)(i % 10007) * 104729 + 17);
    if (dtype >= RING_INT32)
        return op == RING_PRODUCT ? 1 + h % 2 : (double)(h % 41);
    if (op == RING_PRODUCT) return 1 + ((double)(h % 201) - 100) / 1000.0;
    return ((double)(h % 20011) - 10005.0) / 7.0;
}

static char *filled(size_t count, ring_dtype_t dtype, ring_op_t op, int r)
{
    char *buf = malloc(count * ring_dtype_size(dtype) + 1);
    for (size_t i = 0; i < count; i++)
        prog_value_store(buf, i, dtype, input_value(r, i, dtype, op));
    return buf;
}

static void expect_ok(int status, const char *what)
{
    if (status != RING_OK)
        TEST_FAIL("%s: %s returned %s", case_name, what,
                  ring_strerror(status));
}

/* got (copied back from the device) against the host path's want; the
 * same on every rank unless each rank gets its own block. */
static int own_blocks;

static void expect_same(const char *got, const char *want, size_t nbytes)
{
    if (nbytes > 0 && memcmp(got, want, nbytes) != 0) {
        size_t i = 0;
        while (got[i] == want[i]) i++;
        TEST_FAIL("%s: byte %zu differs from the host path's", case_name, i);
    }
    if (!own_blocks && !test_same_everywhere(got, nbytes, MPI_COMM_WORLD))
        TEST_FAIL("%s: ranks disagree", case_name);
}

/* ---- one case per collective: host path, then device ---- */

/* in: host input of in_bytes; the call's result is out_bytes. run gets
 * (send, recv) either both host or both device (or mixed, `mixed`). */
typedef int run_fn(const void *send, void *recv, void *arg);

static void compare(size_t in_bytes, size_t out_bytes, const char *in,
                    int inplace, size_t in_at, run_fn *run, void *arg,
                    int mixed)
{
    size_t whole = in_bytes > out_bytes ? in_bytes : out_bytes;
    char *want = calloc(whole + 1, 1), *got = calloc(whole + 1, 1);
    /* Host path: in place means the input already lies in recv. */
    char *hsend = malloc(in_bytes + 1);
    memcpy(hsend, in, in_bytes);
    if (inplace) memcpy(want + in_at, in, in_bytes);
    expect_ok(run(inplace ? want + in_at : hsend, want, arg), "host call");

    char *drecv = dev_alloc(whole), *dsend = inplace ? NULL
                                                     : dev_alloc(in_bytes);
    dev_copy(drecv, got, whole); /* zeros where nothing lands */
    dev_copy(inplace ? drecv + in_at : dsend, in, in_bytes);
    const void *send = inplace ? drecv + in_at : dsend;
    void *recv = drecv;
    if (mixed == 1) send = hsend; /* host in, device out */
    if (mixed == 2) recv = got;   /* device in, host out */
    expect_ok(run(send, recv, arg), "device call");
    if (mixed != 2) dev_copy(got, drecv, out_bytes);
    expect_same(got, want, out_bytes);
    dev->release(drecv);
    dev->release(dsend);
    free(hsend);
    free(want);
    free(got);
}

typedef struct {
    size_t count;
    ring_dtype_t dtype;
    ring_op_t op;
    int root, comm; /* comm: the MPI_Comm entry point, not the context */
} call_t;

static int run_allreduce(const void *send, void *recv, void *arg)
{
    const call_t *c = arg;
    if (c->comm)
        return ring_allreduce(send, recv, c->count, c->dtype, c->op,
                              MPI_COMM_WORLD);
    return ring_ctx_allreduce(ctx, send, recv, c->count, c->dtype, c->op);
}

static int run_reduce_scatter(const void *send, void *recv, void *arg)
{
    const call_t *c = arg;
    return ring_ctx_reduce_scatter(ctx, send, recv, c->count, c->dtype,
                                   c->op);
}

static int run_allgather(const void *send, void *recv, void *arg)
{
    const call_t *c = arg;
    if (c->comm)
        return ring_allgather(send, recv, c->count, c->dtype, MPI_COMM_WORLD);
    return ring_ctx_allgather(ctx, send, recv, c->count, c->dtype);
}

static int run_broadcast(const void *send, void *recv, void *arg)
{
    const call_t *c = arg;
    (void)send; /* in place: the data is in recv */
    if (c->comm)
        return ring_broadcast(recv, c->count, c->dtype, c->root,
                              MPI_COMM_WORLD);
    return ring_ctx_broadcast(ctx, recv, c->count, c->dtype, c->root);
}

static void name_case(const char *what, const call_t *c, int inplace,
                      int mixed)
{
    snprintf(case_name, sizeof case_name,
             "%s n=%d count=%zu dtype=%s op=%s root=%d inplace=%d mixed=%d "
             "%s", what, size, c->count, ring_dtype_name(c->dtype),
             c->op == RING__NO_OP ? "none" : ring_op_name(c->op), c->root,
             inplace, mixed, c->comm ? "comm" : "ctx");
}

static void test_allreduce(call_t c, int inplace, int mixed)
{
    size_t nbytes = c.count * ring_dtype_size(c.dtype);
    char *in = filled(c.count, c.dtype, c.op, rank);
    name_case("allreduce", &c, inplace, mixed);
    compare(nbytes, nbytes, in, inplace, 0, run_allreduce, &c, mixed);
    free(in);
}

static void test_reduce_scatter(call_t c, int inplace, int mixed)
{
    size_t nbytes = c.count * ring_dtype_size(c.dtype);
    char *in = filled(c.count * (size_t)size, c.dtype, c.op, rank);
    name_case("reduce_scatter", &c, inplace, mixed);
    own_blocks = 1;
    /* In place the result is block `rank` of the buffer: compare it. */
    if (inplace) {
        char *want = malloc(nbytes * (size_t)size + 1);
        memcpy(want, in, nbytes * (size_t)size);
        expect_ok(run_reduce_scatter(want, want, &c), "host call");
        char *d = dev_alloc(nbytes * (size_t)size);
        char *got = malloc(nbytes * (size_t)size + 1);
        dev_copy(d, in, nbytes * (size_t)size);
        expect_ok(run_reduce_scatter(d, d, &c), "device call");
        dev_copy(got, d, nbytes * (size_t)size);
        expect_same(got + nbytes * (size_t)rank,
                    want + nbytes * (size_t)rank, nbytes);
        dev->release(d);
        free(got);
        free(want);
    } else {
        compare(nbytes * (size_t)size, nbytes, in, 0, 0, run_reduce_scatter,
                &c, mixed);
    }
    own_blocks = 0;
    free(in);
}

static void test_allgather(call_t c, int inplace)
{
    size_t nbytes = c.count * ring_dtype_size(c.dtype);
    char *in = filled(c.count, c.dtype, RING_SUM, rank);
    name_case("allgather", &c, inplace, 0);
    compare(nbytes, nbytes * (size_t)size, in, inplace,
            nbytes * (size_t)rank, run_allgather, &c, 0);
    free(in);
}

static void test_broadcast(call_t c)
{
    size_t nbytes = c.count * ring_dtype_size(c.dtype);
    char *in = filled(c.count, c.dtype, RING_SUM, rank);
    name_case("broadcast", &c, 1, 0);
    compare(nbytes, nbytes, in, 1, 0, run_broadcast, &c, 0);
    free(in);
}

static int valid(ring_dtype_t dtype, ring_op_t op)
{
    return !(op == RING_AVERAGE && dtype >= RING_INT32);
}

static void test_all(void)
{
    const size_t counts[] = {0, 1, (size_t)size + 1, 97, 4099, 65537};
    const size_t ncounts = quick ? 3 : sizeof counts / sizeof counts[0];
    for (int d = 0; d < RING_DTYPE_COUNT; d++)
        for (int o = 0; o < RING_OP_COUNT; o++) {
            if (!valid((ring_dtype_t)d, (ring_op_t)o)) continue;
            for (size_t i = 0; i < ncounts; i++) {
                call_t c = {counts[i], (ring_dtype_t)d, (ring_op_t)o, 0, 0};
                test_allreduce(c, (int)(i & 1), 0);
            }
        }
    /* Over 1M elements, and the other ways in. */
    const size_t large = quick ? 70001 : (1u << 20) + 3;
    test_allreduce((call_t){large, RING_FLOAT32, RING_SUM, 0, 0}, 0, 0);
    test_allreduce((call_t){large, RING_BFLOAT16, RING_AVERAGE, 0, 0}, 1, 0);
    test_allreduce((call_t){large, RING_FLOAT64, RING_SUM, 0, 1}, 1, 0);
    test_allreduce((call_t){4099, RING_FLOAT32, RING_SUM, 0, 0}, 0, 1);
    test_allreduce((call_t){4099, RING_FLOAT16, RING_MAX, 0, 0}, 0, 2);
    test_reduce_scatter((call_t){4099, RING_FLOAT32, RING_SUM, 0, 0}, 0, 1);
    test_reduce_scatter((call_t){4099, RING_FLOAT16, RING_MAX, 0, 0}, 0, 2);

    const ring_dtype_t dtypes[] = {RING_FLOAT32, RING_FLOAT16, RING_INT64,
                                   RING_UINT8};
    const size_t sub[] = {0, 1, 1000, 70001};
    for (int d = 0; d < 4; d++)
        for (int i = 0; i < 4; i++) {
            test_reduce_scatter((call_t){sub[i], dtypes[d], RING_SUM, 0, 0},
                                i & 1, 0);
            test_reduce_scatter((call_t){sub[i], dtypes[d], RING_MIN, 0, 0},
                                !(i & 1), 0);
            test_allgather((call_t){sub[i], dtypes[d], RING__NO_OP, 0, i & 1},
                           i & 1);
            test_broadcast((call_t){sub[i] * 3 + 1, dtypes[d], RING__NO_OP,
                                    (i + d) % size, i & 1});
        }
}

/* A registered device buffer (hvd's fusion buffer), reduced where it lies
 * through ring_ctx_allreduce_registered: the host path's result, bit for
 * bit. The calls run back to back, each rank writing its buffer again as
 * soon as its call returns (the host path's results are made first, and
 * checked after), so a call that returned while another rank still read
 * the buffer would show. Every other call's input is still queued on
 * the caller's stream, behind other work, with an event to wait for
 * (ready): a call that read the buffer without waiting would see the
 * last call's; staged (under 4 KiB), the host waits for the device no
 * more often for such a call than for one without (emulated device),
 * and a rank alone never. A count that overruns it, or none registered,
 * is refused. */
static void test_registered(void)
{
    enum { REG_BYTES = 1 << 20, NCASES = 6 };
    const call_t cases[NCASES] = {
        {70001, RING_FLOAT32, RING_SUM, 0, 0},
        {REG_BYTES / 2, RING_FLOAT16, RING_AVERAGE, 0, 0},
        {5, RING_INT64, RING_MAX, 0, 0},
        {4099, RING_BFLOAT16, RING_MIN, 0, 0},
        /* below 4 KiB: over MPI, staged, whatever the node */
        {33, RING_FLOAT64, RING_PRODUCT, 0, 0},
        {97, RING_INT32, RING_SUM, 0, 0}};
    char *reg = dev_alloc(REG_BYTES), *in[NCASES], *want[NCASES], *got[NCASES];
    size_t nbytes[NCASES];
    uint64_t waits[NCASES];
    expect_ok(ring_ctx_register(ctx, reg, REG_BYTES), "ring_ctx_register");
    for (int k = 0; k < NCASES; k++) {
        nbytes[k] = cases[k].count * ring_dtype_size(cases[k].dtype);
        in[k] = filled(cases[k].count, cases[k].dtype, cases[k].op, rank);
        want[k] = malloc(nbytes[k]);
        got[k] = malloc(nbytes[k]);
        name_case("allreduce_registered", &cases[k], 1, 0);
        expect_ok(run_allreduce(in[k], want[k], (void *)&cases[k]),
                  "host call");
    }
    ring_event_t *ready;
    expect_ok(dev->event_create(&ready), "event_create");
    for (int k = 0; k < NCASES; k++) {
        if (k % 2) {
            for (int z = 0; z < 20; z++)
                expect_ok(dev->zero(reg, REG_BYTES, stream), "zero");
            expect_ok(dev->copy(reg, in[k], nbytes[k], stream), "copy");
            expect_ok(dev->event_record(ready, stream), "event_record");
        } else {
            dev_copy(reg, in[k], nbytes[k]);
        }
        waits[k] = emulated ? ring__dev_emu_host_waits() : 0;
        expect_ok(ring_ctx_allreduce_registered(ctx, cases[k].count,
                                                cases[k].dtype, cases[k].op,
                                                k % 2 ? ready : NULL, NULL),
                  "ring_ctx_allreduce_registered");
        waits[k] = emulated ? ring__dev_emu_host_waits() - waits[k] : 0;
        dev_copy(got[k], reg, nbytes[k]);
    }
    dev->event_destroy(ready);
    /* Staged, the copies up wait for ready on the device: the host waits
     * no more often for a call with it than for one without. MPI handed
     * device memory (--cuda-aware 1) needs the host to wait. */
    name_case("allreduce_registered", &cases[5], 1, 0);
    if (!cuda_aware && waits[5] != waits[4])
        TEST_FAIL("%s: the host waited for the device %llu times with an "
                  "event to wait for, %llu times without",
                  case_name, (unsigned long long)waits[5],
                  (unsigned long long)waits[4]);
    /* Through the window (4 KiB and up) a rank's stream waits for the
     * others' events on the device, and the host waits once, at the
     * call's end; under HVD_RING_IPC_WAIT=host the host also waits for
     * each other rank's posted and reduced events. (Hierarchical, the
     * stage across nodes waits more.) */
    const char *ipc_wait = getenv("HVD_RING_IPC_WAIT");
    int host_wait = ipc_wait && strcmp(ipc_wait, "host") == 0;
    uint64_t least = 1 + 2 * (uint64_t)(size - 1);
    for (int k = 0; k < NCASES && emulated && ctx->ipc && !hier; k++) {
        name_case("allreduce_registered", &cases[k], 1, 0);
        if (nbytes[k] < 4096) continue;
        if (host_wait ? waits[k] < least : waits[k] >= least)
            TEST_FAIL("%s: the host waited for the device %llu times, %s "
                      "%llu under HVD_RING_IPC_WAIT=%s", case_name,
                      (unsigned long long)waits[k],
                      host_wait ? "fewer than" : "not fewer than",
                      (unsigned long long)least,
                      host_wait ? "host" : "device");
    }
    /* A rank alone: the identity, in place, with or without ready; it
     * went staged through the host, which waited for the device. */
    for (int k = 0; k < NCASES && size == 1; k++) {
        name_case("allreduce_registered", &cases[k], 1, 0);
        if (waits[k] != 0)
            TEST_FAIL("%s: one rank alone waited for the device %llu times",
                      case_name, (unsigned long long)waits[k]);
    }
    for (int k = 0; k < NCASES; k++) {
        name_case("allreduce_registered", &cases[k], 1, 0);
        expect_same(got[k], want[k], nbytes[k]);
        free(in[k]);
        free(want[k]);
        free(got[k]);
    }
    snprintf(case_name, sizeof case_name, "registered refusals n=%d", size);
    TEST_EQ(ring_ctx_allreduce_registered(ctx, REG_BYTES / 4 + 1,
                                          RING_FLOAT32, RING_SUM, NULL, NULL),
            RING_ERR_ARG);
    expect_ok(ring_ctx_register(ctx, NULL, 0), "unregister");
    TEST_EQ(ring_ctx_allreduce_registered(ctx, 1, RING_FLOAT32, RING_SUM,
                                          NULL, NULL),
            RING_ERR_ARG);
    dev->release(reg);
}

/* Registered calls with a done event, back to back as hvd's engine makes
 * them: each round's input copied into the buffer on the caller's stream
 * (ready behind it), the call, the result copied out on a second stream
 * after done (and the next round's copy in after that copy out), and the
 * host waits for nothing until the last round (the copies go to and from
 * pinned memory: CUDA's copy into pageable memory would wait for done).
 * Every round is the host path's result bit for bit (delay:SEED: a done
 * recorded before another rank's gather of this rank's block is through
 * lets the next round's input land under that gather, one before this
 * rank's own gather or, a rank alone, before ready, leaves the copy out
 * stale); within a node (the device slabs) and for a rank alone the
 * calls make the host wait for the device not once (emulated).
 * `to`: out of place (ring_ctx_allreduce_registered_to), into a buffer
 * of its own, the next round's copy in after freed: count 3001 reduces
 * in one step at any size (HVD_RING_IPC_ONESHOT), 70001 (280 KB) at two
 * ranks only (delay:SEED: a step that did not wait for every rank's
 * input, or a freed recorded before the others' reads, gives other
 * bits). */
static void test_registered_done(int to, size_t count)
{
    enum { ROUNDS = 12 };
    call_t k = {count, RING_FLOAT32, RING_SUM, 0, 0}; /* the slabs */
    size_t nbytes = k.count * sizeof(float);
    char *reg = dev_alloc(nbytes), *in[ROUNDS], *want[ROUNDS], *got[ROUNDS];
    char *res[ROUNDS];
    ring_stream_t *out;
    ring_event_t *ready, *done, *read, *freed = NULL;
    expect_ok(ring_ctx_register(ctx, reg, nbytes), "ring_ctx_register");
    expect_ok(dev->stream_create(&out), "stream_create");
    expect_ok(dev->event_create(&ready), "event_create");
    expect_ok(dev->event_create(&done), "event_create");
    expect_ok(dev->event_create(&read), "event_create");
    if (to) expect_ok(dev->event_create(&freed), "event_create");
    snprintf(case_name, sizeof case_name,
             "allreduce_registered%s done n=%d count=%zu", to ? "_to" : "",
             size, count);
    for (int i = 0; i < ROUNDS; i++) {
        k.op = i % 3 ? RING_SUM : RING_AVERAGE;
        char *host = filled(k.count, k.dtype, k.op, rank + size * i);
        want[i] = malloc(nbytes);
        expect_ok(run_allreduce(host, want[i], &k), "host call");
        expect_ok(dev->alloc_pinned((void **)&in[i], nbytes), "alloc_pinned");
        expect_ok(dev->alloc_pinned((void **)&got[i], nbytes),
                  "alloc_pinned");
        memcpy(in[i], host, nbytes);
        free(host);
        res[i] = to ? dev_alloc(nbytes) : reg;
    }
    uint64_t waits = emulated ? ring__dev_emu_host_waits() : 0;
    /* The last rank's device behind the others: freed, or read, before
     * the peers are through with reg would let the next copy in change
     * what they read. */
    int lags = emulated && size > 1 && rank == size - 1;
    if (lags) ring__dev_emu_lag(1000);
    for (int i = 0; i < ROUNDS; i++) {
        ring_op_t op = i % 3 ? RING_SUM : RING_AVERAGE;
        /* Out of place, each round's result in a buffer of its own: the
         * copy in waits for nothing but freed. */
        if (i > 0)
            expect_ok(dev->stream_wait(stream, to ? freed : read),
                      "stream_wait");
        expect_ok(dev->copy(reg, in[i], nbytes, stream), "copy");
        expect_ok(dev->event_record(ready, stream), "event_record");
        expect_ok(to ? ring_ctx_allreduce_registered_to(ctx, k.count,
                                                        k.dtype, op, res[i],
                                                        ready, done, freed)
                     : ring_ctx_allreduce_registered(ctx, k.count, k.dtype,
                                                     op, ready, done),
                  "ring_ctx_allreduce_registered");
        expect_ok(dev->stream_wait(out, done), "stream_wait");
        expect_ok(dev->copy(got[i], res[i], nbytes, out), "copy");
        expect_ok(dev->event_record(read, out), "event_record");
    }
    waits = emulated ? ring__dev_emu_host_waits() - waits : 0;
    /* Unregistered at once, the last call's work still queued: when that
     * returns nobody reads the buffers (the guard and delay modes fault
     * on a read of one closed or freed): out of place, reg is freed then
     * (a rank alone's copy out of it was left running). */
    expect_ok(ring_ctx_register(ctx, NULL, 0), "unregister");
    if (to) {
        dev->release(reg);
        reg = NULL;
    }
    expect_ok(dev->stream_sync(out), "stream_sync");
    if (lags) ring__dev_emu_lag(0);
    const char *ipc_wait = getenv("HVD_RING_IPC_WAIT");
    int host_wait = ipc_wait && strcmp(ipc_wait, "host") == 0;
    if (waits > 0 && (size == 1 || (ctx->ipc && !hier && !host_wait)))
        TEST_FAIL("%s: %d calls made the host wait for the device %llu "
                  "times", case_name, ROUNDS, (unsigned long long)waits);
    for (int i = 0; i < ROUNDS; i++) {
        snprintf(case_name, sizeof case_name,
                 "allreduce_registered%s done n=%d count=%zu round %d",
                 to ? "_to" : "", size, count, i);
        expect_same(got[i], want[i], nbytes);
        if (to) dev->release(res[i]);
        dev->release_pinned(in[i]);
        dev->release_pinned(got[i]);
        free(want[i]);
    }
    if (to) dev->event_destroy(freed);
    dev->event_destroy(read);
    dev->event_destroy(done);
    dev->event_destroy(ready);
    dev->stream_destroy(out);
    if (reg) dev->release(reg);
}

/* A registered device buffer that is not the start of its allocation:
 * a handle opens an allocation at its start (CUDA IPC), so the others
 * would read other bytes than this rank's buffer. The export is refused,
 * saying so, and every rank reduces it the unregistered way, the host
 * path's bits. (The emulated device always refused it; CUDA's export
 * went through, its wrong bits wait for a GPU to be seen.) Rank 0's
 * alone: the others, whose buffers start their allocations, do not try
 * to open the handle it could not make, and say nothing (before, each
 * logged its failed open). */
static void test_registered_interior(void)
{
    const call_t k = {3001, RING_FLOAT32, RING_SUM, 0, 0};
    size_t nbytes = k.count * sizeof(float), skip = 256;
    char *alloc = dev_alloc(nbytes + skip), *reg = alloc + (rank ? 0 : skip);
    char *in = filled(k.count, k.dtype, k.op, rank), *want = malloc(nbytes);
    char *got = malloc(nbytes);
    name_case("allreduce_registered interior", &k, 1, 0);
    expect_ok(run_allreduce(in, want, (void *)&k), "host call");
    TEST_SAYS(ring_ctx_register(ctx, reg, nbytes), RING_OK,
              ctx->ipc && rank == 0 ? "is not the start of" : NULL);
    dev_copy(reg, in, nbytes);
    expect_ok(ring_ctx_allreduce_registered(ctx, k.count, k.dtype, k.op,
                                            NULL, NULL),
              "ring_ctx_allreduce_registered");
    dev_copy(got, reg, nbytes);
    expect_same(got, want, nbytes);
    expect_ok(ring_ctx_register(ctx, NULL, 0), "unregister");
    dev->release(alloc);
    free(got);
    free(want);
    free(in);
}

/* A registered buffer of host memory, its input still on its way from
 * the device, queued behind other work with an event to wait for
 * (ready): the host path reads it only after the event. Registering it
 * logs nothing. */
static void test_registered_host(void)
{
    const call_t k = {70001, RING_FLOAT32, RING_SUM, 0, 0};
    size_t nbytes = k.count * sizeof(float);
    char *in = filled(k.count, k.dtype, k.op, rank), *want = malloc(nbytes);
    char *reg = calloc(1, nbytes), *d = dev_alloc(nbytes);
    char *busy = dev_alloc(nbytes); /* work for the copy to queue behind */
    ring_event_t *ready;
    name_case("allreduce_registered host", &k, 1, 0);
    expect_ok(run_allreduce(in, want, (void *)&k), "host call");
    /* host memory is not offered for export: nothing to log */
    TEST_SAYS(ring_ctx_register(ctx, reg, nbytes), RING_OK, NULL);
    expect_ok(dev->event_create(&ready), "event_create");
    dev_copy(d, in, nbytes);
    for (int z = 0; z < 20; z++)
        expect_ok(dev->zero(busy, nbytes, stream), "zero");
    expect_ok(dev->copy(reg, d, nbytes, stream), "copy");
    expect_ok(dev->event_record(ready, stream), "event_record");
    expect_ok(ring_ctx_allreduce_registered(ctx, k.count, k.dtype, k.op,
                                            ready, NULL),
              "ring_ctx_allreduce_registered");
    expect_ok(dev->stream_sync(stream), "stream_sync");
    name_case("allreduce_registered host", &k, 1, 0);
    expect_same(reg, want, nbytes);
    expect_ok(ring_ctx_register(ctx, NULL, 0), "unregister");
    dev->event_destroy(ready);
    dev->release(busy);
    dev->release(d);
    free(reg);
    free(want);
    free(in);
}

/* A device that cannot tell what memory is (a CUDA context broken by an
 * earlier error; here the emulated device's owns made to fail): host
 * buffers still reduce on the host; device memory the host cannot read
 * (guard mode) is refused on every rank, RING_ERR_CUDA with a message,
 * where the host path would fault on it. Under the window's 4 KiB: a call
 * through it that every rank refuses so gives up there too (a rank alone
 * refusing must not leave the others waiting), which would leave the
 * window failing the calls after. */
static void test_owns_fails(void)
{
    const call_t k = {1000, RING_FLOAT32, RING_SUM, 0, 0};
    size_t nbytes = k.count * sizeof(float);
    const char *mode = getenv("HVD_DEVICE_EMULATE");
    int guard = mode && strcmp(mode, "guard") == 0;
    char *in = filled(k.count, k.dtype, k.op, rank), *want = malloc(nbytes);
    char *got = malloc(nbytes), *d = dev_alloc(nbytes);
    name_case("owns fails", &k, 0, 0);
    expect_ok(run_allreduce(in, want, (void *)&k), "host call");
    dev_copy(d, in, nbytes);
    ring__dev_emu_fails(RING__EMU_FAIL_OWNS);
    TEST_EQ(ring_is_device_memory(in), 0);
    TEST_EQ(ring_is_device_memory(d), guard ? RING_ERR_CUDA : 0);
    expect_ok(run_allreduce(in, got, (void *)&k), "host buffers");
    expect_same(got, want, nbytes);
    if (guard)
        TEST_SAYS(ring_ctx_allreduce(ctx, d, d, k.count, k.dtype, k.op),
                  RING_ERR_CUDA, "and the host cannot read it");
    ring__dev_emu_fails(0);
    expect_ok(run_allreduce(d, d, (void *)&k), "device buffer after");
    dev_copy(got, d, nbytes);
    expect_same(got, want, nbytes);
    dev->release(d);
    free(got);
    free(want);
    free(in);
}

/* Calls that take host memory only refuse device buffers with a
 * message, before any data moves, and a registered call out of place
 * refuses freed without done; a good call works after them. */
static void test_refused(void)
{
    char *d = dev_alloc(64);
    float host[16] = {0};
    ring_piece_t piece = {d, d, 16};
    snprintf(case_name, sizeof case_name, "refused n=%d", size);
    TEST_EQ(ring_ctx_allreduce_pieces(ctx, &piece, 1, RING_FLOAT32,
                                      RING_SUM),
            RING_ERR_ARG);
    TEST_EQ(ring_allreduce_hier(d, host, 16, RING_FLOAT32, RING_SUM,
                                MPI_COMM_SELF, MPI_COMM_WORLD),
            RING_ERR_ARG);
    /* freed says when the buffer is the caller's again, after the
     * result: without done there is no result to be after. */
    char *res = dev_alloc(64);
    ring_event_t *freed;
    expect_ok(dev->event_create(&freed), "event_create");
    expect_ok(ring_ctx_register(ctx, d, 64), "ring_ctx_register");
    TEST_SAYS(ring_ctx_allreduce_registered_to(ctx, 16, RING_FLOAT32,
                                               RING_SUM, res, NULL, NULL,
                                               freed),
              RING_ERR_ARG, "ring_ctx_allreduce_registered_to: freed "
                            "without done\n");
    expect_ok(ring_ctx_register(ctx, NULL, 0), "unregister");
    dev->event_destroy(freed);
    dev->release(res);
    expect_ok(ring_ctx_allreduce(ctx, d, d, 16, RING_FLOAT32, RING_SUM),
              "ring_ctx_allreduce after refusals");
    dev->release(d);
}

/* A rank whose call fails midway must not leave the node's others
 * waiting for it. On the emulated device rank 1's input is shorter than
 * the call, which the device refuses when its copy in is queued (CUDA
 * would read past it; any failure there, a refused launch or a sticky
 * error, leaves the call the same way): every rank's call fails, none
 * hangs, and the window refuses the next call everywhere, its counters
 * no longer agreeing. A context of its own, whose window is then left
 * unusable. Where the main context took the window (ctx->ipc), within
 * one node. */
static void test_peer_gives_up(const ring_ctx_opts_t *opts)
{
    const size_t count = 8192, nbytes = count * sizeof(float); /* 32 KiB */
    ring_ctx_t *mine = NULL;
    snprintf(case_name, sizeof case_name, "peer gives up n=%d", size);
    expect_ok(ring_ctx_create(MPI_COMM_WORLD, opts, &mine), "ring_ctx_create");
    if (!mine) return;
    /* past a chunk's start, whatever the chunk: one straddles the end */
    char *in = dev_alloc(rank == 1 ? nbytes / 2 + 100 : nbytes);
    char *good = dev_alloc(nbytes), *out = dev_alloc(nbytes);
    TEST_EQ(ring_ctx_allreduce(mine, in, out, count, RING_FLOAT32, RING_SUM),
            rank == 1 ? RING_ERR_ARG : RING_ERR_STATE);
    TEST_TRUE(mine->ipc != NULL);
    TEST_EQ(ring_ctx_allreduce(mine, good, out, count, RING_FLOAT32,
                               RING_SUM),
            RING_ERR_STATE);
    ring_ctx_free(&mine);
    dev->release(in);
    dev->release(good);
    dev->release(out);
}

/* A rank that fails before its call and says so (ring_ctx_give_up, as
 * hvd does when its pack of the fusion buffer fails): the others' calls
 * through the window end with RING_ERR_STATE instead of waiting for it
 * forever, and so does every later one. A context of its own, as above. */
static void test_give_up(const ring_ctx_opts_t *opts)
{
    const size_t count = 8192, nbytes = count * sizeof(float); /* 32 KiB */
    const int quitter = size - 1;
    ring_ctx_t *mine = NULL;
    snprintf(case_name, sizeof case_name, "give up n=%d", size);
    expect_ok(ring_ctx_create(MPI_COMM_WORLD, opts, &mine), "ring_ctx_create");
    if (!mine) return;
    char *d = dev_alloc(nbytes);
    expect_ok(ring_ctx_allreduce(mine, d, d, count, RING_FLOAT32, RING_SUM),
              "the window's first call");
    TEST_TRUE(mine->ipc != NULL);
    TEST_EQ(rank == quitter ? ring_ctx_give_up(mine, RING_ERR_CUDA)
                            : ring_ctx_allreduce(mine, d, d, count,
                                                 RING_FLOAT32, RING_SUM),
            rank == quitter ? RING_ERR_CUDA : RING_ERR_STATE);
    TEST_EQ(ring_ctx_allreduce(mine, d, d, count, RING_FLOAT32, RING_SUM),
            RING_ERR_STATE);
    ring_ctx_free(&mine);
    dev->release(d);
}

/* One rank whose device cannot tell the call's memory (a CUDA context
 * broken by an earlier error; the emulated device's owns made to fail, in
 * guard mode, where the host cannot read device memory either) is
 * refused at its call's opening, RING_ERR_CUDA, while the others' calls
 * go through the window and would wait for it there: they are told, and
 * fail with RING_ERR_STATE (before, they waited forever), and so does
 * every later call: a plain call, then a registered one. A call that
 * would open the window (the context's first; across nodes too, where
 * the window is made over every rank) is refused so on one rank, or on
 * every rank, or on one rank while the others refuse it for their
 * arguments (a NULL buffer): each rank comes to the window's making all
 * the same, nothing is made, every call fails (before, the others made
 * the window with the refused rank's next call, paired wrongly from then
 * on, or it waited for them in the making), and the next call opens the
 * window and sums. A context of its own for each, as above. */
static void test_kind_fails_alone(const ring_ctx_opts_t *opts)
{
    const size_t count = 8192, nbytes = count * sizeof(float); /* 32 KiB */
    const int broken = size / 2;
    static const struct {
        const char *name;
        int registered, first, all, others_null;
    } cases[] = {{"", 0, 0, 0, 0},
                 {" registered", 1, 0, 0, 0},
                 {" first call", 0, 1, 0, 0},
                 {" first call, every rank", 0, 1, 1, 0},
                 {" first call, the others NULL", 0, 1, 0, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int registered = cases[k].registered, first = cases[k].first;
        int fails = rank == broken || cases[k].all;
        /* Across nodes the ranks of an open window meet in MPI. */
        if (hier && !first) continue;
        ring_ctx_t *mine = NULL;
        snprintf(case_name, sizeof case_name, "kind fails alone n=%d%s", size,
                 cases[k].name);
        expect_ok(ring_ctx_create(MPI_COMM_WORLD, opts, &mine),
                  "ring_ctx_create");
        if (!mine) return;
        const call_t sum = {count, RING_FLOAT32, RING_SUM, 0, 0};
        char *in = filled(count, RING_FLOAT32, RING_SUM, rank);
        char *want = malloc(nbytes), *got = malloc(nbytes);
        char *d = dev_alloc(nbytes);
        expect_ok(run_allreduce(in, want, (void *)&sum), "host call");
        if (registered)
            expect_ok(ring_ctx_register(mine, d, nbytes), "ring_ctx_register");
        if (!first) {
            expect_ok(ring_ctx_allreduce(mine, d, d, count, RING_FLOAT32,
                                         RING_SUM),
                      "the window's first call");
            TEST_TRUE(mine->ipc != NULL);
        }
        int null = !fails && cases[k].others_null;
        int status = fails  ? RING_ERR_CUDA
                     : null ? RING_ERR_ARG
                            : RING_ERR_STATE;
        const char *told = fails   ? "and the host cannot read it"
                           : null  ? "NULL buffer with count > 0"
                           : first ? "refused the call that opens the window"
                                   : "gave up a call";
        if (fails) ring__dev_emu_fails(RING__EMU_FAIL_OWNS);
        TEST_SAYS(registered ? ring_ctx_allreduce_registered(
                                   mine, count, RING_FLOAT32, RING_SUM, NULL,
                                   NULL)
                             : ring_ctx_allreduce(mine, null ? NULL : d, d,
                                                  count, RING_FLOAT32,
                                                  RING_SUM),
                  status, told);
        ring__dev_emu_fails(0);
        TEST_TRUE((mine->ipc != NULL) == !first);
        dev_copy(d, in, nbytes);
        TEST_EQ(ring_ctx_allreduce(mine, d, d, count, RING_FLOAT32, RING_SUM),
                first ? RING_OK : RING_ERR_STATE);
        if (first) {
            TEST_TRUE(mine->ipc != NULL);
            dev_copy(got, d, nbytes);
            expect_same(got, want, nbytes);
        }
        if (registered)
            expect_ok(ring_ctx_register(mine, NULL, 0), "unregister");
        ring_ctx_free(&mine);
        dev->release(d);
        free(got);
        free(want);
        free(in);
    }
}

int main(int argc, char **argv)
{
    static const char *const env_options[][2] = {
        {"--emulate", "HVD_DEVICE_EMULATE"},
        {"--staging-bytes", "HVD_RING_STAGING_BYTES"},
        {"--ipc-bytes", "HVD_RING_IPC_BYTES"},
        {"--ipc", "HVD_RING_IPC"},
        {"--cuda-aware", "HVD_CUDA_AWARE"},
        {"--ipc-wait", "HVD_RING_IPC_WAIT"}};
    const char *intranode = "auto";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--hier") == 0) hier = 1;
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        if (i + 1 == argc) break;
        if (strcmp(argv[i], "--intranode") == 0) intranode = argv[++i];
        for (size_t k = 0; k < sizeof env_options / sizeof *env_options; k++)
            if (strcmp(argv[i], env_options[k][0]) == 0)
                setenv(env_options[k][1], argv[++i], 1);
    }
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return TEST_HARD_ERROR;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_rank = rank;
    dev = ring_dev();
    if (!dev) {
        MPI_Finalize();
        TEST_SKIP("no device: neither a GPU nor HVD_DEVICE_EMULATE");
    }
    emulated = dev == &ring__dev_emulated;
    const char *aware = getenv("HVD_CUDA_AWARE");
    cuda_aware = aware && strcmp(aware, "1") == 0;
    ring_ctx_opts_t opts = {
        .intranode = strcmp(intranode, "shm") == 0    ? RING_INTRANODE_SHM
                     : strcmp(intranode, "ring") == 0 ? RING_INTRANODE_RING
                                                      : RING_INTRANODE_AUTO,
        .hierarchical = hier};
    if (dev->stream_create(&stream) != RING_OK ||
        ring_ctx_create(MPI_COMM_WORLD, &opts, &ctx) != RING_OK) {
        MPI_Finalize();
        return TEST_HARD_ERROR;
    }
    test_all();
    test_registered();
    test_registered_done(0, 3001); /* 12 KB */
    test_registered_done(1, 3001);
    test_registered_done(1, 70001);
    test_registered_host();
    test_registered_interior();
    test_refused();
    if (emulated) test_owns_fails();
    /* Every case above of 4 KiB or more went through the window. */
    const char *ipc = getenv("HVD_RING_IPC");
    int want_ipc = size > 1 && ctx->shm && !(ipc && strcmp(ipc, "off") == 0);
    snprintf(case_name, sizeof case_name, "ipc n=%d", size);
    if ((ctx->ipc != NULL) != want_ipc)
        TEST_FAIL("%s: the context %s device slabs across the node", case_name,
                  ctx->ipc ? "opened" : "did not open");
    /* Within a node: across nodes the ranks meet in MPI, where one that
     * gave up leaves the others as a host call would. */
    if (ctx->ipc && emulated && !hier) test_peer_gives_up(&opts);
    if (ctx->ipc && !hier) test_give_up(&opts);
    const char *mode = getenv("HVD_DEVICE_EMULATE");
    if (ctx->ipc && emulated && mode && strcmp(mode, "guard") == 0)
        test_kind_fails_alone(&opts);
    ring_ctx_free(&ctx);
    dev->stream_destroy(stream);
    /* nothing exported was freed while another rank had it open */
    if (emulated) TEST_EQ(ring__dev_emu_misuses(), 0u);

    int failed = test_failures, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ring_device n=%d on %s: %s\n", size, dev->name,
               any ? "FAIL" : "ok");
    MPI_Finalize();
    return test_exit_code();
}
