/* test/test_hvd_errors.c: how hvd reports misuse (test/hvd_errors_np*.mpi).
 *
 * - Mismatches: the last rank disagrees with the others on a collective of
 *   the same name (count, dtype, op, broadcast root, allgather count, kind,
 *   or the count of an unnamed one); every rank gets HVD_ERR_MISMATCH and,
 *   from hvd_last_error, the engine's message; no output buffer is
 *   touched, and requests fused beside it still succeed.
 * - A name already in flight on a rank: the second call fails at once with
 *   HVD_ERR_STATE and makes no handle; the first completes normally.
 * - Bad arguments fail with HVD_ERR_ARG before anything is sent, and say
 *   which function and why, on stderr and in hvd_last_error (names of 200
 *   bytes and names starting with "__" included); a name of 199 bytes
 *   works.
 * - After each error, a good allreduce of the same name works.
 * - hvd_strerror knows every status.
 */
#define _POSIX_C_SOURCE 200809L /* test/capture.h */
#include <stdint.h>
#include <string.h>
#include <mpi.h>
#include "hvd/hvd.h"
#include "test/capture.h"
#include "test/hvd_harness.h"
#include "test/test.h"

enum { COUNT = 8, SENTINEL = -77 };

static int rank, size, odd; /* odd: the rank that disagrees */
static MPI_Comm oracle;     /* a dup of MPI_COMM_WORLD, to order the ranks */

/* A good allreduce of int32 (rank + i), checked exactly. */
static void good_allreduce(const char *name, const char *after)
{
    int32_t in[COUNT], out[COUNT];
    for (int i = 0; i < COUNT; i++) in[i] = rank + i, out[i] = SENTINEL;
    int status = hvd_allreduce(in, out, COUNT, HVD_INT32, HVD_SUM, name);
    if (status != HVD_OK)
        TEST_FAIL("good allreduce name=%s after %s: %s", name ? name : "(null)",
                  after, hvd_strerror(status));
    for (int i = 0; i < COUNT && status == HVD_OK; i++)
        if (out[i] != size * i + size * (size - 1) / 2) {
            TEST_FAIL("good allreduce name=%s after %s: element %d is %d, "
                      "want %d", name ? name : "(null)", after, i, out[i],
                      size * i + size * (size - 1) / 2);
            break;
        }
}

/* status must be HVD_ERR_MISMATCH, and out (4 * COUNT) still equal ref. */
static void expect_mismatch(int status, const char *what, const int32_t *out,
                            const int32_t *ref)
{
    if (status != HVD_ERR_MISMATCH)
        TEST_FAIL("mismatch n=%d %s (rank %d differs): returned %d (%s), not "
                  "HVD_ERR_MISMATCH", size, what, odd, status,
                  hvd_strerror(status));
    /* The engine's message reaches the caller (hvd_last_error). */
    if (!strstr(hvd_last_error(), "ranks disagree"))
        TEST_FAIL("mismatch n=%d %s: hvd_last_error is \"%s\"", size, what,
                  hvd_last_error());
    for (int i = 0; i < 4 * COUNT; i++)
        if (out[i] != ref[i]) {
            TEST_FAIL("mismatch n=%d %s: output element %d was written (%d, "
                      "was %d)", size, what, i, out[i], ref[i]);
            break;
        }
}

static void test_mismatch(void)
{
    int32_t in[4 * COUNT], out[4 * COUNT], blank[4 * COUNT];
    int me = rank == odd, status;
    for (int i = 0; i < 4 * COUNT; i++) in[i] = rank + i, blank[i] = SENTINEL;
#define RESET() memcpy(out, blank, sizeof out)

    RESET();
    expect_mismatch(hvd_allreduce(in, out, me ? COUNT + 1 : COUNT, HVD_INT32,
                                  HVD_SUM, "mm.count"),
                    "allreduce count", out, blank);
    good_allreduce("mm.count", "a count mismatch");

    RESET();
    expect_mismatch(hvd_allreduce(in, out, COUNT, me ? HVD_FLOAT32 : HVD_INT32,
                                  HVD_MAX, "mm.dtype"),
                    "allreduce dtype", out, blank);
    good_allreduce("mm.dtype", "a dtype mismatch");

    RESET();
    expect_mismatch(hvd_allreduce(in, out, COUNT, HVD_INT32,
                                  me ? HVD_MAX : HVD_SUM, "mm.op"),
                    "allreduce op", out, blank);
    good_allreduce("mm.op", "an op mismatch");

    memcpy(out, in, sizeof out); /* broadcast is in place */
    expect_mismatch(hvd_broadcast(out, COUNT, HVD_INT32, me ? 0 : 1, "mm.root"),
                    "broadcast root", out, in);
    good_allreduce("mm.root", "a root mismatch");

    RESET();
    expect_mismatch(hvd_allgather(in, me ? 2 : 1, out, HVD_INT32, "mm.gather"),
                    "allgather count", out, blank);
    good_allreduce("mm.gather", "an allgather count mismatch");

    if (me) {
        memcpy(out, in, sizeof out);
        status = hvd_broadcast(out, COUNT, HVD_INT32, 0, "mm.kind");
    } else {
        RESET();
        status = hvd_allreduce(in, out, COUNT, HVD_INT32, HVD_SUM, "mm.kind");
    }
    expect_mismatch(status, "kind (allreduce vs broadcast)", out,
                    me ? in : blank);
    good_allreduce("mm.kind", "a kind mismatch");

    RESET();
    expect_mismatch(hvd_allreduce(in, out, me ? 3 : 2, HVD_INT32, HVD_SUM,
                                  NULL),
                    "unnamed allreduce count", out, blank);
    good_allreduce(NULL, "an unnamed mismatch");

    /* Async, with good requests in flight beside it (fusable with it). */
    RESET();
    int32_t good_out[3][COUNT];
    hvd_handle_t h[4] = {NULL, NULL, NULL, NULL};
    const char *names[3] = {"mm.fused.0", "mm.fused.1", "mm.fused.2"};
    TEST_EQ(hvd_allreduce_async(in, good_out[0], COUNT, HVD_INT32, HVD_SUM,
                                names[0], &h[0]), HVD_OK);
    TEST_EQ(hvd_allreduce_async(in, out, me ? COUNT - 1 : COUNT, HVD_INT32,
                                HVD_SUM, "mm.async", &h[3]), HVD_OK);
    TEST_EQ(hvd_allreduce_async(in, good_out[1], COUNT, HVD_INT32, HVD_SUM,
                                names[1], &h[1]), HVD_OK);
    TEST_EQ(hvd_allreduce_async(in, good_out[2], COUNT, HVD_INT32, HVD_SUM,
                                names[2], &h[2]), HVD_OK);
    for (int k = 0; k < 3; k++) {
        status = h[k] ? hvd_wait(h[k]) : HVD_ERR_STATE;
        if (status != HVD_OK)
            TEST_FAIL("%s beside a mismatch: %s", names[k], hvd_strerror(status));
        for (int i = 0; i < COUNT && status == HVD_OK; i++)
            if (good_out[k][i] != size * i + size * (size - 1) / 2) {
                TEST_FAIL("%s beside a mismatch: element %d is %d", names[k], i,
                          good_out[k][i]);
                break;
            }
    }
    /* hvd_poll reports the error too; hvd_wait then returns it. */
    int polled = 0;
    for (long tries = 0; h[3] && polled == 0 && tries < 6000000; tries++)
        polled = hvd_poll(h[3]);
    if (polled >= 0)
        TEST_FAIL("mismatch n=%d async allreduce count: hvd_poll returned %d",
                  size, polled);
    expect_mismatch(h[3] ? hvd_wait(h[3]) : HVD_ERR_STATE,
                    "async allreduce count", out, blank);
    good_allreduce("mm.async", "an async mismatch");
#undef RESET
}

/* Rank 0 starts "dup" while the others hold back (so it cannot complete),
 * then tries the name again: HVD_ERR_STATE, no handle. */
static void test_in_flight(void)
{
    int32_t in[COUNT], out[COUNT], spare[COUNT];
    for (int i = 0; i < COUNT; i++) in[i] = rank + i, spare[i] = 0;
    hvd_handle_t first = NULL, again = NULL;
    if (rank == 0) {
        TEST_EQ(hvd_allreduce_async(in, out, COUNT, HVD_INT32, HVD_SUM, "dup",
                                    &first), HVD_OK);
        TEST_EQ(hvd_allreduce(in, spare, COUNT, HVD_INT32, HVD_SUM, "dup"),
                HVD_ERR_STATE);
        TEST_EQ(hvd_allreduce_async(in, spare, COUNT, HVD_INT32, HVD_SUM,
                                    "dup", &again), HVD_ERR_STATE);
        TEST_TRUE(again == NULL);
        TEST_EQ(hvd_broadcast_async(spare, COUNT, HVD_INT32, 0, "dup", &again),
                HVD_ERR_STATE);
        TEST_TRUE(again == NULL);
        TEST_EQ(hvd_broadcast(spare, COUNT, HVD_INT32, 0, "dup"), HVD_ERR_STATE);
        if (size > 1) TEST_EQ(hvd_poll(first), 0); /* the others hold back */
        for (int i = 0; i < COUNT; i++) TEST_EQ(spare[i], 0);
    }
    MPI_Barrier(oracle);
    if (rank != 0)
        TEST_EQ(hvd_allreduce_async(in, out, COUNT, HVD_INT32, HVD_SUM, "dup",
                                    &first), HVD_OK);
    int status = first ? hvd_wait(first) : HVD_ERR_STATE;
    if (status != HVD_OK)
        TEST_FAIL("in flight n=%d: the first \"dup\" returned %s", size,
                  hvd_strerror(status));
    for (int i = 0; i < COUNT && status == HVD_OK; i++)
        if (out[i] != size * i + size * (size - 1) / 2) {
            TEST_FAIL("in flight n=%d: the first \"dup\": element %d is %d",
                      size, i, out[i]);
            break;
        }
    good_allreduce("dup", "a name in flight");
}

/* Bad arguments, made alike on every rank: HVD_ERR_ARG, nothing sent. */
static void test_bad_arguments(void)
{
    float x[4] = {1, 2, 3, 4};
    hvd_handle_t h = NULL;
    const int a = HVD_ERR_ARG;
    char name[256]; /* 200 bytes: one past the longest name */
    memset(name, 'n', 200);
    name[200] = '\0';
#define AR(why) "error: hvd_allreduce: " why "\n"
#define BC(why) "error: hvd_broadcast: " why "\n"
#define AG(why) "error: hvd_allgather: " why "\n"
    TEST_SAYS(hvd_allreduce(NULL, x, 4, HVD_FLOAT32, HVD_SUM, "bad"), a,
              AR("NULL buffer with count > 0"));
    TEST_SAYS(hvd_allreduce(x, NULL, 4, HVD_FLOAT32, HVD_SUM, "bad"), a,
              AR("NULL buffer with count > 0"));
    TEST_SAYS(hvd_allreduce(x, x, 4, (hvd_dtype_t)99, HVD_SUM, "bad"), a,
              AR("unknown dtype"));
    /* The refusal's text, for bindings to raise (hvd_last_error). */
    if (strcmp(hvd_last_error(), "hvd_allreduce: unknown dtype") != 0)
        TEST_FAIL("hvd_last_error after a bad dtype: \"%s\"",
                  hvd_last_error());
    TEST_SAYS(hvd_allreduce(x, x, 4, (hvd_dtype_t)-1, HVD_SUM, "bad"), a,
              AR("unknown dtype"));
    TEST_SAYS(hvd_allreduce(x, x, 4, HVD_FLOAT32, (hvd_op_t)99, "bad"), a,
              AR("unknown op"));
    TEST_SAYS(hvd_allreduce(x, x, 4, HVD_INT32, HVD_AVERAGE, "bad"), a,
              AR("average is for floating dtypes (use sum)"));
    TEST_SAYS(hvd_allreduce(x, x, 4, HVD_INT64, HVD_AVERAGE, "bad"), a,
              AR("average is for floating dtypes (use sum)"));
    TEST_SAYS(hvd_allreduce(x, x, 4, HVD_UINT8, HVD_AVERAGE, "bad"), a,
              AR("average is for floating dtypes (use sum)"));
    TEST_SAYS(hvd_allreduce_async(x, x, 4, HVD_FLOAT32, HVD_SUM, "bad", NULL),
              a, AR("handle is NULL"));
    TEST_SAYS(hvd_allreduce_async(NULL, x, 4, HVD_FLOAT32, HVD_SUM, "bad", &h),
              a, AR("NULL buffer with count > 0"));
    TEST_SAYS(hvd_allreduce(x, x, 4, HVD_FLOAT32, HVD_SUM, name), a,
              AR("name longer than 199 bytes"));
    TEST_SAYS(hvd_allreduce(x, x, 4, HVD_FLOAT32, HVD_SUM, "__mine"), a,
              AR("names starting with \"__\" are hvd's own"));
    TEST_SAYS(hvd_broadcast(x, 4, HVD_FLOAT32, -1, "bad"), a,
              BC("root is not a rank"));
    TEST_SAYS(hvd_broadcast(x, 4, HVD_FLOAT32, size, "bad"), a,
              BC("root is not a rank"));
    TEST_SAYS(hvd_broadcast(NULL, 4, HVD_FLOAT32, 0, "bad"), a,
              BC("NULL buffer with count > 0"));
    TEST_SAYS(hvd_broadcast(x, 4, (hvd_dtype_t)99, 0, "bad"), a,
              BC("unknown dtype"));
    TEST_SAYS(hvd_broadcast_async(x, 4, HVD_FLOAT32, 0, "bad", NULL), a,
              BC("handle is NULL"));
    TEST_SAYS(hvd_broadcast_async(x, 4, HVD_FLOAT32, size, "bad", &h), a,
              BC("root is not a rank"));
    TEST_SAYS(hvd_broadcast(x, 4, HVD_FLOAT32, 0, "__mine"), a,
              BC("names starting with \"__\" are hvd's own"));
    TEST_SAYS(hvd_allgather(NULL, 1, x, HVD_FLOAT32, "bad"), a,
              AG("NULL buffer with count > 0"));
    TEST_SAYS(hvd_allgather(x, 1, NULL, HVD_FLOAT32, "bad"), a,
              AG("NULL buffer with count > 0"));
    TEST_SAYS(hvd_allgather(x, 1, x, (hvd_dtype_t)99, "bad"), a,
              AG("unknown dtype"));
    TEST_SAYS(hvd_allgather(x, 1, x, HVD_FLOAT32, name), a,
              AG("name longer than 199 bytes"));
    TEST_SAYS(hvd_wait(NULL), a, "error: hvd_wait: handle is NULL\n");
    TEST_SAYS(hvd_poll(NULL), a, "error: hvd_poll: handle is NULL\n");
    TEST_SAYS(hvd_wait_stream(NULL, NULL), a,
              "error: hvd_wait_stream: handle is NULL\n");
#undef AR
#undef BC
#undef AG
    TEST_TRUE(h == NULL);
    TEST_TRUE(x[0] == 1 && x[3] == 4);
    good_allreduce("bad", "bad arguments");
    /* The longest name hvd takes: 199 bytes. */
    name[199] = '\0';
    good_allreduce(name, "a name of 199 bytes");
    /* Count 0 needs no buffers. */
    TEST_EQ(hvd_allreduce(NULL, NULL, 0, HVD_FLOAT32, HVD_SUM, "empty"), HVD_OK);
    TEST_EQ(hvd_broadcast(NULL, 0, HVD_FLOAT32, 0, "empty.bc"), HVD_OK);
    TEST_EQ(hvd_allgather(NULL, 0, NULL, HVD_FLOAT32, "empty.ag"), HVD_OK);
}

static void test_strerror(void)
{
    const int codes[] = {HVD_OK, HVD_ERR_ARG, HVD_ERR_MISMATCH, HVD_ERR_STATE,
                         HVD_ERR_MPI, HVD_ERR_CUDA, HVD_ERR_NOMEM,
                         HVD_ERR_STALL};
    enum { N = sizeof codes / sizeof codes[0] };
    for (int i = 0; i < N; i++) {
        const char *s = hvd_strerror(codes[i]);
        TEST_TRUE(s && *s);
        for (int j = 0; j < i && s; j++)
            if (hvd_strerror(codes[j]) && !strcmp(s, hvd_strerror(codes[j])))
                TEST_FAIL("hvd_strerror(%d) == hvd_strerror(%d): \"%s\"",
                          codes[i], codes[j], s);
    }
    TEST_TRUE(hvd_strerror(-1000) != NULL);
    TEST_TRUE(hvd_strerror(5) != NULL);
}

int main(int argc, char **argv)
{
    int rc = test_hvd_start(&argc, &argv, &oracle, &rank, &size);
    if (rc != 0) return rc;
    odd = size - 1;

    test_strerror();
    test_bad_arguments();
    test_mismatch();
    test_in_flight();
    test_bad_arguments(); /* still the same answers after errors */
    TEST_EQ(hvd_barrier(), HVD_OK);

    return test_hvd_finish("test_hvd_errors", &oracle, rank, size);
}
