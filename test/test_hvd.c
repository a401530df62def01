/* test/test_hvd.c: the hvd API across ranks (test/hvd_np*.mpi).
 *
 *   test_hvd [NAME=VALUE...]   each argument is setenv'd before hvd_init,
 *                              so one program covers fusion on (default),
 *                              off (HVD_FUSION_THRESHOLD=0) and a fusion
 *                              buffer smaller than a tensor (=64K)
 *
 * Checked: HVD_ERR_STATE before init, on a second init and after shutdown;
 * topology against MPI; allreduce blocking, async + hvd_wait and async +
 * hvd_poll, every dtype and op, in place and out, counts 0 .. 1M; names
 * reused with new counts; NULL names (matched by order); broadcast from
 * every root; allgather; barrier (nobody leaves before all arrived); the
 * same names submitted in a different order on each rank; 500 requests in
 * flight at once; a cached name waiting on one rank while the ranks
 * coordinate a new one; a fused group that tiles one allocation on some
 * ranks and not on others; handles kept per name (a name made again
 * before the last one's wait, a handle waited for twice, thousands of
 * names made once, a handle waited for after shutdown). Every result is compared bitwise with MPI's
 * collective on a copy (the oracle), so runs with fusion on and off agree
 * with each other; rank 0 also prints a checksum of all results to compare
 * runs by eye.
 *
 * The oracle calls MPI from this thread beside the engine's: hvd_init must
 * give MPI_THREAD_MULTIPLE, and the engine must not use MPI_COMM_WORLD's
 * collectives itself (tests use a dup of it).
 */
#define _POSIX_C_SOURCE 200809L /* setenv, clock_gettime, nanosleep */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include "hvd/hvd.h"
#include "ring/ring.h" /* half conversions, dtype names */
#include "test/test.h"
#include "test/values.h" /* (ring_dtype_t)dtype: the same numbers */

enum { ALLREDUCE, BROADCAST, ALLGATHER };
enum { BLOCKING, ASYNC_WAIT, ASYNC_POLL };

static int rank, size;
static MPI_Comm oracle; /* a dup of MPI_COMM_WORLD for the checks */
static uint64_t checksum = 1469598103934665603ull; /* FNV-1a of all results */

/* One collective: its arguments, buffers and expected result. */
typedef struct {
    int kind;
    size_t count;
    hvd_dtype_t dtype;
    hvd_op_t op;
    int root, inplace, seed;
    char name[64]; /* "" for a NULL name */
    char desc[160]; /* the case, for failure messages */
    char *send, *recv, *want;
    hvd_handle_t handle;
} req_t;

/* ---- inputs: small integers, so every sum and product is exact ---- */

static size_t esize(hvd_dtype_t dtype)
{
    return ring_dtype_size((ring_dtype_t)dtype);
}

static int is_half(hvd_dtype_t dtype)
{
    return dtype == HVD_FLOAT16 || dtype == HVD_BFLOAT16;
}

/* The rank moves every value (r * 5 is a multiple of neither 7 nor 3), so
 * a broadcast from the wrong root or an allgather out of order shows. */
static double input_value(int r, size_t i, hvd_dtype_t dtype, hvd_op_t op,
                          int seed)
{
    unsigned h = (unsigned)(r * 5 + (int)(i % 1009) * 13 + seed * 11 + 5);
    static const double factors[3] = {-1, 1, 2};
    if (op == HVD_PRODUCT) /* at most 7 ranks: |product| <= 2^7 */
        return dtype == HVD_UINT8 ? 1 + h % 3 : factors[h % 3];
    double v = (double)(h % 7);
    return dtype == HVD_UINT8 ? v : v - 3;
}

static void fill(void *buf, size_t count, hvd_dtype_t dtype, hvd_op_t op,
                 int r, int seed)
{
    for (size_t i = 0; i < count; i++)
        prog_value_store(buf, i, (ring_dtype_t)dtype,
                         input_value(r, i, dtype, op, seed));
}

/* ---- the oracle: MPI's collectives, half types widened to float ---- */

/* want = MPI_Allreduce of every rank's input; AVERAGE divides the sum once
 * in the widened type, then rounds to dtype. */
static void oracle_allreduce(req_t *q)
{
    size_t n = q->count, wsize = is_half(q->dtype) ? 4 : esize(q->dtype);
    char *in = malloc(n * wsize + 1), *out = malloc(n * wsize + 1);
    for (size_t i = 0; i < n; i++) {
        if (is_half(q->dtype))
            ((float *)in)[i] = (float)prog_value_load(q->send, i,
                                                      (ring_dtype_t)q->dtype);
        else memcpy(in + i * wsize, q->send + i * wsize, wsize);
    }
    MPI_Allreduce(in, out, (int)n, test_mpi_type((ring_dtype_t)q->dtype),
                  test_mpi_op((ring_op_t)q->op), oracle);
    for (size_t i = 0; i < n; i++) {
        if (q->dtype == HVD_FLOAT64) {
            double v = ((double *)out)[i];
            ((double *)q->want)[i] = q->op == HVD_AVERAGE ? v / size : v;
        } else if (q->dtype == HVD_FLOAT32 || is_half(q->dtype)) {
            float v = ((float *)out)[i];
            prog_value_store(q->want, i, (ring_dtype_t)q->dtype,
                             q->op == HVD_AVERAGE ? v / (float)size : v);
        } else {
            memcpy(q->want + i * wsize, out + i * wsize, wsize);
        }
    }
    free(in);
    free(out);
}

/* ---- requests ---- */

static const char *kind_name[] = {"allreduce", "broadcast", "allgather"};

/* Allocates and fills a request's buffers and computes the expected result
 * (collective over the oracle communicator: every rank sets up the same
 * requests in the same order). */
static void req_setup(req_t *q, int kind, size_t count, hvd_dtype_t dtype,
                      hvd_op_t op, int root, int inplace, int seed,
                      const char *name)
{
    memset(q, 0, sizeof *q);
    q->kind = kind, q->count = count, q->dtype = dtype, q->op = op;
    q->root = root, q->inplace = inplace, q->seed = seed;
    if (name) snprintf(q->name, sizeof q->name, "%s", name);
    snprintf(q->desc, sizeof q->desc,
             "%s n=%d count=%zu dtype=%s op=%s root=%d inplace=%d name=%s",
             kind_name[kind], size, count, ring_dtype_name((ring_dtype_t)dtype),
             ring_op_name((ring_op_t)op), root, inplace,
             name ? name : "(null)");
    size_t nbytes = count * esize(dtype);
    size_t rbytes = kind == ALLGATHER ? nbytes * (size_t)size : nbytes;
    q->send = malloc(nbytes + 1);
    q->recv = malloc(rbytes + 1);
    q->want = malloc(rbytes + 1);
    fill(q->send, count, dtype, op, rank, seed);
    memset(q->recv, 0xee, rbytes);
    if (kind == ALLREDUCE) {
        oracle_allreduce(q);
        if (inplace) memcpy(q->recv, q->send, nbytes);
    } else if (kind == BROADCAST) {
        memcpy(q->want, q->send, nbytes);
        MPI_Bcast(q->want, (int)nbytes, MPI_BYTE, root, oracle);
        memcpy(q->recv, q->send, nbytes); /* broadcast is in place */
    } else {
        MPI_Allgather(q->send, (int)nbytes, MPI_BYTE, q->want, (int)nbytes,
                      MPI_BYTE, oracle);
    }
}

static const char *req_name(const req_t *q)
{
    return q->name[0] ? q->name : NULL;
}

/* Starts q; blocking collectives complete here. Returns the call's status. */
static int req_start(req_t *q, int mode)
{
    const void *src = q->inplace ? q->recv : q->send;
    q->handle = NULL;
    if (q->kind == ALLGATHER)
        return hvd_allgather(q->send, q->count, q->recv, q->dtype, req_name(q));
    if (mode == BLOCKING && q->kind == ALLREDUCE)
        return hvd_allreduce(src, q->recv, q->count, q->dtype, q->op,
                             req_name(q));
    if (mode == BLOCKING)
        return hvd_broadcast(q->recv, q->count, q->dtype, q->root, req_name(q));
    if (q->kind == ALLREDUCE)
        return hvd_allreduce_async(src, q->recv, q->count, q->dtype, q->op,
                                   req_name(q), &q->handle);
    return hvd_broadcast_async(q->recv, q->count, q->dtype, q->root,
                               req_name(q), &q->handle);
}

/* Waits for an async request (by hvd_wait, or hvd_poll until done). */
static int req_finish(req_t *q, int mode)
{
    if (mode == ASYNC_POLL) {
        struct timespec nap = {0, 100000};
        int done = 0;
        for (long tries = 0; tries < 600000 && done == 0; tries++) {
            done = hvd_poll(q->handle);
            if (done == 0) nanosleep(&nap, NULL);
        }
        if (done != 1)
            TEST_FAIL("%s: hvd_poll returned %d (%s)", q->desc, done,
                      hvd_strerror(done));
    }
    return hvd_wait(q->handle);
}

/* Checks the status and result of q (collective), folds the result into
 * the checksum and frees q's buffers. */
static void req_check(req_t *q, int status, const char *how)
{
    size_t es = esize(q->dtype);
    size_t n = q->kind == ALLGATHER ? q->count * (size_t)size : q->count;
    if (status != HVD_OK)
        TEST_FAIL("%s %s: returned %d (%s)", q->desc, how, status,
                  hvd_strerror(status));
    for (size_t i = 0; i < n && status == HVD_OK; i++) {
        if (memcmp(q->recv + i * es, q->want + i * es, es) != 0) {
            TEST_FAIL("%s %s: element %zu is %g, MPI says %g", q->desc, how, i,
                      prog_value_load(q->recv, i, (ring_dtype_t)q->dtype),
                      prog_value_load(q->want, i, (ring_dtype_t)q->dtype));
            break;
        }
    }
    if (!test_same_everywhere(q->recv, n * es, oracle))
        TEST_FAIL("%s %s: ranks disagree", q->desc, how);
    if (!q->inplace && q->kind == ALLREDUCE) { /* sendbuf left alone */
        char *orig = malloc(q->count * es + 1);
        fill(orig, q->count, q->dtype, q->op, rank, q->seed);
        if (memcmp(orig, q->send, q->count * es) != 0)
            TEST_FAIL("%s %s: sendbuf was modified", q->desc, how);
        free(orig);
    }
    for (size_t i = 0; i < n * es; i++)
        checksum = (checksum ^ (unsigned char)q->recv[i]) * 1099511628211ull;
    free(q->send);
    free(q->recv);
    free(q->want);
}

/* Runs a batch: blocking ones one at a time; async ones all started (in an
 * order rotated by `rotate` * rank, reversed on odd ranks when asked), then
 * finished in the opposite order. Checks in the batch's own order. */
static void run_batch(req_t *q, int n, int mode, int rotate, int reverse_odd)
{
    static const char *how_name[] = {"blocking", "async+wait", "async+poll"};
    int *status = malloc((size_t)n * sizeof *status + 1);
    int *order = malloc((size_t)n * sizeof *order + 1);
    for (int j = 0; j < n; j++) {
        int k = (j + rotate * rank) % n;
        order[j] = reverse_odd && rank % 2 ? n - 1 - k : k;
    }
    for (int j = 0; j < n; j++) {
        req_t *r = &q[order[j]];
        status[order[j]] = req_start(r, mode);
        if (mode != BLOCKING && status[order[j]] == HVD_OK && !r->handle)
            TEST_FAIL("%s: no handle", r->desc);
    }
    if (mode != BLOCKING)
        for (int j = n - 1; j >= 0; j--) {
            req_t *r = &q[order[j]];
            if (status[order[j]] == HVD_OK && r->handle)
                status[order[j]] = req_finish(r, mode);
        }
    for (int j = 0; j < n; j++) req_check(&q[j], status[j], how_name[mode]);
    free(status);
    free(order);
}

/* ---- the cases ---- */

static int valid(int dtype, int op)
{
    return !(op == HVD_AVERAGE && dtype >= HVD_INT32);
}

/* Every dtype x op x in/out of place, one batch per count. Names leave out
 * the count, so the same names come back with new counts (the engine's
 * cache must notice). */
static void test_allreduce_matrix(void)
{
    const size_t counts[] = {0, 1, (size_t)size + 1, 97, 4099,
                             (size_t)size - 1};
    req_t q[70];
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int mode = c % 3 == 1 ? ASYNC_POLL : ASYNC_WAIT, n = 0;
        for (int dt = 0; dt <= HVD_UINT8; dt++)
            for (int op = 0; op <= HVD_PRODUCT; op++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    if (!valid(dt, op)) continue;
                    char name[64];
                    snprintf(name, sizeof name, "ar.%s.%s.%d",
                             ring_dtype_name(dt), ring_op_name(op), inplace);
                    req_setup(&q[n], ALLREDUCE, counts[c], dt, op, 0, inplace,
                              n + (int)c, name);
                    n++;
                }
        run_batch(q, n, mode, 0, 0);
    }
    /* Blocking, named and unnamed. */
    for (int named = 0; named < 2; named++) {
        int n = 0;
        for (int dt = 0; dt <= HVD_UINT8; dt++)
            for (int op = 0; op <= HVD_PRODUCT; op++)
                if (valid(dt, op))
                    req_setup(&q[n], ALLREDUCE, 33, dt, op, 0, n % 2, n,
                              named ? "ar.blocking" : NULL), n++;
        run_batch(q, n, BLOCKING, 0, 0);
    }
}

static void test_broadcast(void)
{
    const size_t counts[] = {0, 1, 97, 4099};
    req_t q[32];
    for (int root = 0; root < size; root++) {
        int n = 0;
        for (int dt = 0; dt <= HVD_UINT8; dt++)
            for (size_t c = 0; c < 4; c++) {
                char name[64];
                snprintf(name, sizeof name, "bc.%s.%zu", ring_dtype_name(dt), c);
                req_setup(&q[n], BROADCAST, counts[c], dt, HVD_SUM, root, 1,
                          n, name);
                n++;
            }
        run_batch(q, n, root % 2 ? ASYNC_POLL : ASYNC_WAIT, 1, 1);
        req_setup(&q[0], BROADCAST, 13, HVD_INT64, HVD_SUM, root, 1, root,
                  "bc.blocking");
        req_setup(&q[1], BROADCAST, 5, HVD_FLOAT32, HVD_SUM, root, 1, root,
                  NULL);
        run_batch(q, 2, BLOCKING, 0, 0);
    }
}

static void test_allgather(void)
{
    const size_t counts[] = {0, 1, 97, 4099};
    req_t q[8];
    for (size_t c = 0; c < 4; c++) {
        int n = 0;
        for (int dt = 0; dt <= HVD_UINT8; dt++)
            req_setup(&q[n], ALLGATHER, counts[c], dt, HVD_SUM, 0, 0, n,
                      dt == HVD_INT32 ? NULL : ring_dtype_name(dt)), n++;
        run_batch(q, n, BLOCKING, 0, 0);
    }
}

/* The same names on every rank, started in a different order on each, with
 * mixed dtypes and ops (so fusion groups differ from rank to rank). */
static void test_order(void)
{
    enum { N = 24 };
    req_t q[N];
    for (int k = 0; k < N; k++) {
        char name[64];
        snprintf(name, sizeof name, "order.%d", k);
        int dt = k % 7, op = k % 3 == 2 ? HVD_MAX : HVD_SUM;
        if (k % 8 == 5)
            req_setup(&q[k], BROADCAST, 17 + k, dt, op, k % size, 1, k, name);
        else
            req_setup(&q[k], ALLREDUCE, 1 + 37 * k, dt, op, 0, k % 2, k, name);
    }
    run_batch(q, N, ASYNC_WAIT, 5, 1);
}

/* Hundreds of small requests in flight at once, in rotated orders. */
static void test_many(void)
{
    enum { N = 500 };
    req_t *q = malloc(N * sizeof *q);
    for (int k = 0; k < N; k++) {
        char name[64];
        snprintf(name, sizeof name, "many.%d", k);
        int dt = k % 7, op = (int[]){HVD_SUM, HVD_MAX, HVD_MIN}[k % 3];
        req_setup(&q[k], ALLREDUCE, 1 + k % 9, dt, op, 0, k % 2, k, name);
    }
    run_batch(q, N, ASYNC_WAIT, 7, 0);
    /* Unnamed ones in flight together, matched by order. */
    for (int k = 0; k < 50; k++)
        req_setup(&q[k], ALLREDUCE, 1 + k % 5, HVD_INT32, HVD_SUM, 0, 0, k,
                  NULL);
    run_batch(q, 50, ASYNC_WAIT, 0, 0);
    free(q);
}

/* Polls h until it is done, at most 60 s (a request the engine lost fails
 * the test with its name instead of hanging it), without hvd_wait: the
 * handle stays the caller's. */
static void poll_bounded(hvd_handle_t h, const char *name)
{
    struct timespec start, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (hvd_poll(h) == 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 60) {
            fprintf(stderr, "rank %d: '%s' not done after 60 s\n", rank,
                    name);
            MPI_Abort(oracle, 1);
        }
        nanosleep(&nap, NULL);
    }
}

static int wait_bounded(hvd_handle_t h, const char *name)
{
    poll_bounded(h, name);
    return hvd_wait(h);
}

/* Handles are kept per name and used again (hvd/requests.h). A name made
 * again once done but before its hvd_wait gets a handle of its own, and
 * both give their own results, whichever is waited for first; thousands
 * of names made once each, 100 in flight at a time (the kept handles of
 * names not made again are swept while others are in flight), leave a
 * name made all along with its results. */
static void test_kept_handles(void)
{
    enum { ONCE = 3000, BATCH = 100 };
    for (int round = 0; round < 3; round++) {
        int32_t a = rank + round, b = 10 * rank + round, ra = -1, rb = -1;
        hvd_handle_t h1, h2;
        TEST_EQ(hvd_allreduce_async(&a, &ra, 1, HVD_INT32, HVD_SUM,
                                    "kept.again", &h1), HVD_OK);
        poll_bounded(h1, "kept.again");
        TEST_EQ(hvd_allreduce_async(&b, &rb, 1, HVD_INT32, HVD_SUM,
                                    "kept.again", &h2), HVD_OK);
        TEST_TRUE(h1 != h2);
        if (round % 2) {
            TEST_EQ(wait_bounded(h2, "kept.again"), HVD_OK);
            TEST_EQ(hvd_wait(h1), HVD_OK);
        } else {
            TEST_EQ(hvd_wait(h1), HVD_OK);
            TEST_EQ(wait_bounded(h2, "kept.again"), HVD_OK);
        }
        TEST_EQ(ra, size * (size - 1) / 2 + size * round);
        TEST_EQ(rb, 10 * size * (size - 1) / 2 + size * round);
    }
    /* A second hvd_wait on a kept handle is refused in the log and leaves
     * the handle to its name (freeing it left the index a freed handle,
     * which ASan reports at the name's next request). */
    int32_t x = rank, rx = -1;
    hvd_handle_t hx;
    TEST_EQ(hvd_allreduce_async(&x, &rx, 1, HVD_INT32, HVD_SUM, "kept.twice",
                                &hx), HVD_OK);
    TEST_EQ(wait_bounded(hx, "kept.twice"), HVD_OK);
    TEST_EQ(hvd_wait(hx), HVD_OK);
    rx = -1;
    TEST_EQ(hvd_allreduce(&x, &rx, 1, HVD_INT32, HVD_SUM, "kept.twice"),
            HVD_OK);
    TEST_EQ(rx, size * (size - 1) / 2);
    static int32_t in[BATCH], out[BATCH];
    static hvd_handle_t hs[BATCH];
    int32_t step = rank, step_sum = -1;
    for (int k0 = 0; k0 < ONCE; k0 += BATCH) {
        hvd_handle_t hstep;
        TEST_EQ(hvd_allreduce_async(&step, &step_sum, 1, HVD_INT32, HVD_SUM,
                                    "kept.step", &hstep), HVD_OK);
        for (int i = 0; i < BATCH; i++) {
            char name[32];
            snprintf(name, sizeof name, "kept.once.%d", k0 + i);
            in[i] = rank + k0 + i;
            out[i] = -1;
            TEST_EQ(hvd_allreduce_async(&in[i], &out[i], 1, HVD_INT32,
                                        HVD_SUM, name, &hs[i]), HVD_OK);
        }
        for (int i = 0; i < BATCH; i++) {
            TEST_EQ(wait_bounded(hs[i], "kept.once"), HVD_OK);
            if (out[i] != size * (size - 1) / 2 + size * (k0 + i)) {
                TEST_FAIL("kept.once.%d: %d", k0 + i, (int)out[i]);
                k0 = ONCE;
                break;
            }
        }
        TEST_EQ(wait_bounded(hstep, "kept.step"), HVD_OK);
        TEST_EQ(step_sum, size * (size - 1) / 2);
    }
}

/* A name from the response cache, made on rank 0 only, while the ranks
 * coordinate a new name: rank 0's cached request goes to the coordinator
 * with the new one, whose plan later names it; the others make the cached
 * name only once the new one is done. */
static void test_cached_beside_new(void)
{
    for (int round = 0; round < 3; round++) {
        int32_t a = rank + 1, n = 10 * (rank + 1), sum_a = 0, sum_n = 0;
        char fresh[64];
        snprintf(fresh, sizeof fresh, "beside.new.%d", round);
        hvd_handle_t ha = NULL, hn;
        if (round == 0 || rank == 0)
            TEST_EQ(hvd_allreduce_async(&a, &sum_a, 1, HVD_INT32, HVD_SUM,
                                        "beside.cached", &ha), HVD_OK);
        if (round == 0) TEST_EQ(wait_bounded(ha, "beside.cached"), HVD_OK);
        TEST_EQ(hvd_allreduce_async(&n, &sum_n, 1, HVD_INT32, HVD_SUM, fresh,
                                    &hn), HVD_OK);
        TEST_EQ(wait_bounded(hn, fresh), HVD_OK);
        if (round > 0 && rank != 0)
            TEST_EQ(hvd_allreduce_async(&a, &sum_a, 1, HVD_INT32, HVD_SUM,
                                        "beside.cached", &ha), HVD_OK);
        if (round > 0) TEST_EQ(wait_bounded(ha, "beside.cached"), HVD_OK);
        TEST_EQ(sum_a, size * (size + 1) / 2);
        TEST_EQ(sum_n, 10 * size * (size + 1) / 2);
    }
}

/* Tensors larger than a small fusion buffer, fused with small ones. */
static void test_large(void)
{
    req_t q[8];
    const size_t big = (1u << 20) + 3;
    req_setup(&q[0], ALLREDUCE, big, HVD_FLOAT32, HVD_SUM, 0, 0, 1, "big.f32");
    req_setup(&q[1], ALLREDUCE, 3, HVD_FLOAT32, HVD_SUM, 0, 0, 2, "big.small0");
    req_setup(&q[2], ALLREDUCE, 300001, HVD_FLOAT64, HVD_AVERAGE, 0, 1, 3,
              "big.f64");
    req_setup(&q[3], ALLREDUCE, 20000, HVD_FLOAT32, HVD_SUM, 0, 1, 4,
              "big.80k");
    req_setup(&q[4], ALLREDUCE, 7, HVD_FLOAT32, HVD_SUM, 0, 1, 5, "big.small1");
    req_setup(&q[5], ALLREDUCE, big, HVD_BFLOAT16, HVD_MAX, 0, 0, 6, "big.bf16");
    req_setup(&q[6], BROADCAST, big, HVD_FLOAT16, HVD_SUM, size - 1, 1, 7,
              "big.bcast");
    req_setup(&q[7], ALLREDUCE, 100003, HVD_UINT8, HVD_SUM, 0, 0, 8, "big.u8");
    run_batch(q, 8, ASYNC_WAIT, 3, 1);
    req_setup(&q[0], ALLREDUCE, big, HVD_INT32, HVD_SUM, 0, 1, 9, "big.blocking");
    run_batch(q, 1, BLOCKING, 0, 0);
    req_setup(&q[0], ALLGATHER, 100001, HVD_FLOAT32, HVD_SUM, 0, 0, 10,
              "big.gather");
    run_batch(q, 1, BLOCKING, 0, 0);
}

/* A group of in-place allreduces that tile one allocation, in the order
 * they are made, on even ranks (they are reduced where they lie, as a
 * model's gradients are) and lie apart on odd ones (packed): both give
 * every rank the same sums. Several rounds: the first plan comes from the
 * coordinator, the later ones from the response cache. */
static void test_tiled(void)
{
    enum { K = 6, ROUNDS = 3 };
    const size_t counts[K] = {10, 2500, 1, 40000, 333, 7};
    size_t total = 0;
    for (int k = 0; k < K; k++) total += counts[k];
    float *block = malloc(total * sizeof *block), *t[K];
    size_t at = 0;
    for (int k = 0; k < K; k++) {
        t[k] = rank % 2 ? malloc(counts[k] * sizeof *t[k]) : block + at;
        at += counts[k];
    }
    for (int round = 0; round < ROUNDS; round++) {
        hvd_handle_t h[K];
        for (int k = 0; k < K; k++) {
            char name[32];
            snprintf(name, sizeof name, "tiled.%d", k);
            for (size_t j = 0; j < counts[k]; j++)
                t[k][j] = (float)((rank + 1) * (k + 1 + round) + (int)(j % 7));
            TEST_EQ(hvd_allreduce_async(t[k], t[k], counts[k], HVD_FLOAT32,
                                        HVD_SUM, name, &h[k]), HVD_OK);
        }
        for (int k = 0; k < K; k++) TEST_EQ(hvd_wait(h[k]), HVD_OK);
        /* sum over ranks r of (r + 1) (k + 1 + round) + j % 7 */
        for (int k = 0; k < K; k++) {
            size_t bad = 0;
            for (size_t j = 0; j < counts[k]; j++) {
                float want = (float)(size * (size + 1) / 2 * (k + 1 + round) +
                                     size * (int)(j % 7));
                bad += t[k][j] != want;
            }
            if (bad) TEST_FAIL("tiled.%d round %d: %zu wrong", k, round, bad);
        }
    }
    for (int k = 0; k < K && rank % 2; k++) free(t[k]);
    free(block);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* one clock for the whole node */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Nobody leaves hvd_barrier before the last rank has entered it. */
static void test_barrier(void)
{
    struct timespec nap = {0, 20000000L * rank};
    nanosleep(&nap, NULL);
    double in = now(), out, last_in, first_out;
    TEST_EQ(hvd_barrier(), HVD_OK);
    out = now();
    MPI_Allreduce(&in, &last_in, 1, MPI_DOUBLE, MPI_MAX, oracle);
    MPI_Allreduce(&out, &first_out, 1, MPI_DOUBLE, MPI_MIN, oracle);
    if (first_out < last_in)
        TEST_FAIL("barrier n=%d: a rank left at %.6f before the last entered "
                  "at %.6f", size, first_out, last_in);
    for (int i = 0; i < 3; i++) TEST_EQ(hvd_barrier(), HVD_OK);
}

/* Nodes as MPI sees them; the node index counts the nodes whose lowest
 * rank is below ours. */
static void test_topology(void)
{
    int wrank, wsize, lrank, lsize, nodes, before;
    MPI_Comm local;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_split_type(oracle, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    int leader = lrank == 0, lowest = wrank;
    MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, oracle);
    MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, local);
    MPI_Comm_free(&local);
    int *lowests = malloc((size_t)wsize * sizeof *lowests);
    if (!lowests) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Allgather(&lowest, 1, MPI_INT, lowests, 1, MPI_INT, oracle);
    before = 0;
    for (int r = 0; r < wsize; r++) before += lowests[r] == r && r < lowest;
    free(lowests);
    TEST_EQ(hvd_rank(), wrank);
    TEST_EQ(hvd_size(), wsize);
    TEST_EQ(hvd_local_rank(), lrank);
    TEST_EQ(hvd_local_size(), lsize);
    TEST_EQ(hvd_cross_size(), nodes);
    TEST_EQ(hvd_cross_rank(), before);
}

/* Every call but hvd_init fails with HVD_ERR_STATE (before init, after
 * shutdown). */
static void test_not_initialised(const char *when)
{
    float x[2] = {1, 2};
    hvd_handle_t h = NULL;
    int got[] = {
        hvd_rank(), hvd_size(), hvd_local_rank(), hvd_local_size(),
        hvd_cross_rank(), hvd_cross_size(),
        hvd_allreduce(x, x, 2, HVD_FLOAT32, HVD_SUM, "x"),
        hvd_allreduce_async(x, x, 2, HVD_FLOAT32, HVD_SUM, "x", &h),
        hvd_broadcast(x, 2, HVD_FLOAT32, 0, "x"),
        hvd_broadcast_async(x, 2, HVD_FLOAT32, 0, "x", &h),
        hvd_allgather(x, 1, x, HVD_FLOAT32, "x"),
        hvd_barrier(), hvd_join(), hvd_shutdown(),
    };
    for (size_t i = 0; i < sizeof got / sizeof got[0]; i++)
        if (got[i] != HVD_ERR_STATE)
            TEST_FAIL("%s: call %zu (rank, size, local_rank, local_size, "
                      "cross_rank, cross_size, allreduce, allreduce_async, "
                      "broadcast, broadcast_async, allgather, barrier, join, "
                      "shutdown) returned %d, not HVD_ERR_STATE",
                      when, i, got[i]);
    TEST_TRUE(h == NULL);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "usage: test_hvd [NAME=VALUE...]\n");
            return TEST_HARD_ERROR;
        }
        *eq = '\0';
        setenv(argv[i], eq + 1, 1);
        *eq = '=';
    }
    test_not_initialised("before hvd_init");
    int status = hvd_init(&argc, &argv);
    if (status != HVD_OK) {
        fprintf(stderr, "hvd_init: %s\n", hvd_strerror(status));
        return TEST_HARD_ERROR;
    }
    int provided;
    MPI_Query_thread(&provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "hvd_init gave MPI thread level %d: these tests call "
                "MPI beside the engine and need MPI_THREAD_MULTIPLE\n",
                provided);
        return TEST_HARD_ERROR;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &oracle);
    MPI_Comm_rank(oracle, &rank);
    MPI_Comm_size(oracle, &size);
    test_rank = rank;
    TEST_EQ(hvd_init(&argc, &argv), HVD_ERR_STATE);
    TEST_EQ(hvd_init(NULL, NULL), HVD_ERR_STATE);

    test_topology();
    test_barrier();
    test_cached_beside_new(); /* first: the cache keeps only 1024 names */
    test_allreduce_matrix();
    test_broadcast();
    test_allgather();
    test_order();
    test_many();
    test_large();
    test_tiled();
    test_kept_handles();
    test_barrier();

    /* Done, not waited for at shutdown: its hvd_wait, after, still gives
     * its status and frees it (hvd__named_free leaves it to that). */
    int32_t one = 1, all = -1;
    hvd_handle_t late;
    TEST_EQ(hvd_allreduce_async(&one, &all, 1, HVD_INT32, HVD_SUM,
                                "kept.late", &late), HVD_OK);
    poll_bounded(late, "kept.late");

    int failed = test_failures, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, oracle);
    if (rank == 0)
        printf("test_hvd n=%d%s%s: %s, checksum %016llx\n", size,
               argc > 1 ? " " : "", argc > 1 ? argv[1] : "",
               any ? "FAIL" : "ok", (unsigned long long)checksum);
    MPI_Comm_free(&oracle);

    TEST_EQ(hvd_shutdown(), HVD_OK);
    TEST_EQ(hvd_wait(late), HVD_OK);
    TEST_EQ(all, size);
    int finalized = 0;
    MPI_Finalized(&finalized);
    TEST_EQ(finalized, 1); /* hvd_init started MPI, so shutdown ends it */
    test_not_initialised("after hvd_shutdown");
    return test_exit_code();
}
