/* test/test_dist_opt_device.c: the DistributedOptimizer on device
 * gradients (test/dist_opt_device_np*.mpi, on the emulated device).
 *
 * Two optimizers side by side in each rank, over the same gradient
 * values: one on host memory, one on a device slab. After every step the
 * device gradients, copied back, must equal the host ones bit for bit
 * (the device path averages, divides by the passes and compresses with
 * the same arithmetic), with averaging, summing, fp16 compression and
 * backward_passes_per_step 2; and with options.stream, the gradients
 * written, reported and read back on the caller's stream with no sync in
 * between (the delay mode then shows any missing order), and the step
 * makes the host wait for the device not once (emulated: within a node
 * ring's streams wait for each other on the device) and makes no event
 * after the first (hvd keeps the stream variants' events). The wrapped step
 * counts its calls. Also: gradients of mixed kinds, and a
 * sharded step on device gradients, are refused by name; device
 * parameters broadcast from rank 0 replace every rank's own.
 *
 *   test_dist_opt_device [MODE]   MODE: 1, delay:SEED or guard (the
 *                                 emulated device); none: a GPU, else skip
 */
#define _POSIX_C_SOURCE 200809L /* setenv; test/capture.h */
#include <stdlib.h>
#include <string.h>
#include "hvd/hvd.h"
#include "ring/dev.h"
#include "ring/ring.h"
#include "test/capture.h"
#include "test/hvd_harness.h"
#include "test/test.h"

enum { NTENSORS = 5, STEPS = 3 };
/* At least 4 KiB even as float16: every fused group then takes the path
 * that sums in rank order on host and device alike (the shared window,
 * its device twin), so the two agree bit for bit at any rank count. */
static const size_t counts[NTENSORS] = {2048, 3000, 4099, 2050, 20000};
static const char *const names[NTENSORS] = {"g.a", "g.b", "g.c", "g.d",
                                            "g.e"};

static const ring_dev_t *dev;
static int emulated; /* which counts the host's waits for it */
static ring_stream_t *stream;
static int rank, size;

static void dev_copy(void *dst, const void *src, size_t nbytes)
{
    TEST_EQ(dev->copy(dst, src, nbytes, stream), RING_OK);
    TEST_EQ(dev->stream_sync(stream), RING_OK);
}

static int count_steps(void *ctx)
{
    ++*(int *)ctx;
    return 0;
}

static int no_update(void *ctx, size_t first, float *grad_to_param, size_t n)
{
    (void)ctx, (void)first, (void)grad_to_param, (void)n;
    return 0;
}

/* A gradient of one pass: values whose float16 rounding and averages
 * depend on rank, step, pass and index. */
static float grad_value(int step, int pass, size_t t, size_t i)
{
    unsigned h = (unsigned)(rank * 7919 + step * 104729 + pass * 31 +
                            (int)t * 13 + (int)(i % 997) * 7);
    return ((float)(h % 2001) - 1000.0f) / 37.0f;
}

/* dst from src, queued on s; on the test's own stream, waited for. */
static void dev_copy_on(void *dst, const void *src, size_t nbytes,
                        ring_stream_t *s)
{
    TEST_EQ(dev->copy(dst, src, nbytes, s ? s : stream), RING_OK);
    if (!s) TEST_EQ(dev->stream_sync(stream), RING_OK);
}

/* One configuration: both optimizers trained STEPS steps. With
 * o.stream, the device side never waits for that stream but at the end
 * of a step, as a training loop on a GPU would, and (emulated, the
 * fusion buffer made) hvd_dist_opt_step never waits for the device on
 * the host: the averaged gradients are ordered on the stream, where the
 * inner step's kernels would follow them. */
static void compare(const char *what, hvd_dist_opt_options_t o)
{
    size_t total = 0, off[NTENSORS];
    for (int t = 0; t < NTENSORS; t++) {
        off[t] = total;
        total += counts[t];
    }
    float *host = calloc(total, sizeof *host), *back = calloc(total, 4);
    /* What goes up: the host optimizer reduces host in place while the
     * copy up may still be queued. */
    float *up = calloc(total, sizeof *up);
    float *slab = NULL, *hg[NTENSORS], *dg[NTENSORS];
    TEST_EQ(dev->alloc((void **)&slab, total * sizeof(float)), RING_OK);
    char hnames[NTENSORS][16], dnames[NTENSORS][16];
    const char *hn[NTENSORS], *dn[NTENSORS];
    for (int t = 0; t < NTENSORS; t++) {
        hg[t] = host + off[t];
        dg[t] = slab + off[t];
        snprintf(hnames[t], sizeof hnames[t], "h.%s", names[t]);
        snprintf(dnames[t], sizeof dnames[t], "d.%s", names[t]);
        hn[t] = hnames[t];
        dn[t] = dnames[t];
    }
    int hsteps = 0, dsteps = 0;
    hvd_dist_opt_t *hopt = NULL, *dopt = NULL;
    hvd_optimizer_t hinner = {count_steps, &hsteps, NULL};
    hvd_optimizer_t dinner = {count_steps, &dsteps, NULL};
    hvd_dist_opt_options_t ho = o;
    ho.stream = NULL; /* host gradients */
    TEST_EQ(hvd_dist_opt_create(&hopt, hinner, NTENSORS, hn, hg, counts, &ho),
            HVD_OK);
    TEST_EQ(hvd_dist_opt_create(&dopt, dinner, NTENSORS, dn, dg, counts, &o),
            HVD_OK);
    for (int step = 0; step < STEPS; step++) {
        memset(host, 0, total * sizeof *host);
        for (int pass = 0; pass < o.backward_passes_per_step; pass++) {
            /* The caller accumulates over passes, as backward does. */
            for (int t = 0; t < NTENSORS; t++)
                for (size_t i = 0; i < counts[t]; i++)
                    hg[t][i] += grad_value(step, pass, (size_t)t, i);
            memcpy(up, host, total * sizeof *host);
            dev_copy_on(slab, up, total * sizeof *up, o.stream);
            uint64_t made = emulated ? ring__dev_emu_events_made() : 0;
            /* Device tensors in another order than the host ones. */
            for (int t = 0; t < NTENSORS; t++) {
                TEST_EQ(hvd_dist_opt_grad_ready(hopt, (size_t)t), HVD_OK);
                TEST_EQ(hvd_dist_opt_grad_ready(dopt,
                                                (size_t)(NTENSORS - 1 - t)),
                        HVD_OK);
            }
            TEST_EQ(hvd_dist_opt_step(hopt), HVD_OK);
            uint64_t waits = emulated ? ring__dev_emu_host_waits() : 0;
            TEST_EQ(hvd_dist_opt_step(dopt), HVD_OK);
            waits = emulated ? ring__dev_emu_host_waits() - waits : 0;
            made = emulated ? ring__dev_emu_events_made() - made : 0;
            if (o.stream && step > 0 && waits > 0)
                TEST_FAIL("%s n=%d step %d: the device step waited for the "
                          "device on the host %llu times", what, size, step,
                          (unsigned long long)waits);
            /* Each allreduce's two events: kept since the first step. */
            if (o.stream && step > 0 && made > 0)
                TEST_FAIL("%s n=%d step %d: the device step made %llu "
                          "events", what, size, step,
                          (unsigned long long)made);
            /* up is rewritten next pass: the copy up must be done. */
            if (o.stream) TEST_EQ(dev->stream_sync(o.stream), RING_OK);
        }
        dev_copy_on(back, slab, total * sizeof *back, o.stream);
        if (o.stream) TEST_EQ(dev->stream_sync(o.stream), RING_OK);
        if (memcmp(back, host, total * sizeof *host) != 0) {
            size_t i = 0;
            while (back[i] == host[i]) i++;
            TEST_FAIL("%s n=%d step %d: device gradient %zu is %g, host %g",
                      what, size, step, i, back[i], host[i]);
        }
    }
    TEST_EQ(hsteps, STEPS);
    TEST_EQ(dsteps, STEPS);
    hvd_dist_opt_free(&hopt);
    hvd_dist_opt_free(&dopt);
    dev->release(slab);
    free(host);
    free(back);
    free(up);
}

static void test_misuse(void)
{
    float host[4] = {0}, *d = NULL;
    TEST_EQ(dev->alloc((void **)&d, sizeof host), RING_OK);
    float *mixed[2] = {host, d};
    const size_t two[2] = {4, 4};
    const char *nm[2] = {"m.a", "m.b"};
    int steps = 0;
    hvd_optimizer_t inner = {count_steps, &steps, NULL};
    hvd_dist_opt_t *opt = NULL;
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, 2, nm, mixed, two, NULL),
              HVD_ERR_ARG, "all be host or all device memory");
    TEST_TRUE(opt == NULL);
    float *host_only[2] = {host, host + 2};
    const size_t twos[2] = {2, 2};
    hvd_dist_opt_options_t on_stream = {1, 0, HVD_AVERAGE, NULL, stream};
    TEST_SAYS(hvd_dist_opt_create(&opt, inner, 2, nm, host_only, twos,
                                  &on_stream),
              HVD_ERR_ARG, "a stream with host gradients");
    TEST_TRUE(opt == NULL);
    float params[8];
    hvd_dist_opt_options_t shard = {1, 0, HVD_AVERAGE, params, NULL};
    float *dev_only[2] = {d, d + 2};
    const size_t halves[2] = {2, 2};
    hvd_optimizer_t sharded = {count_steps, &steps, no_update};
    TEST_SAYS(hvd_dist_opt_create(&opt, sharded, 2, nm, dev_only, halves,
                                  &shard),
              HVD_ERR_ARG, "shard_params with device gradients");
    /* Gradients of no kind that can be told (a broken CUDA context, and
     * memory the host cannot read): refused, not taken for host memory. */
    const char *mode = getenv("HVD_DEVICE_EMULATE");
    if (emulated && mode && strcmp(mode, "guard") == 0) {
        ring__dev_emu_fails(RING__EMU_FAIL_OWNS);
        TEST_SAYS(hvd_dist_opt_create(&opt, inner, 2, nm, dev_only, halves,
                                      NULL),
                  HVD_ERR_CUDA, "grads[0]'s memory kind cannot be told");
        TEST_TRUE(opt == NULL);
        ring__dev_emu_fails(0);
    }
    dev->release(d);
}

static void test_broadcast_parameters(void)
{
    enum { N = 5000 };
    float *h = malloc(N * sizeof *h), *d = NULL;
    TEST_EQ(dev->alloc((void **)&d, N * sizeof *h), RING_OK);
    for (int i = 0; i < N; i++) h[i] = (float)(rank * 1000 + i);
    dev_copy(d, h, N * sizeof *h);
    TEST_EQ(hvd_broadcast_parameters(d, N, 0), HVD_OK);
    dev_copy(h, d, N * sizeof *h);
    for (int i = 0; i < N; i++)
        if (h[i] != (float)i) {
            TEST_FAIL("broadcast parameter %d is %g, rank 0 has %d", i, h[i],
                      i);
            break;
        }
    dev->release(d);
    free(h);
}

int main(int argc, char **argv)
{
    if (argc > 1) setenv("HVD_DEVICE_EMULATE", argv[1], 1);
    if (!ring_dev()) TEST_SKIP("no device: neither a GPU nor an emulated one");
    MPI_Comm oracle;
    int status = test_hvd_start(&argc, &argv, &oracle, &rank, &size);
    if (status != 0) return status;
    dev = ring_dev();
    if (!dev || dev->stream_create(&stream) != RING_OK) return TEST_HARD_ERROR;
    emulated = dev == &ring__dev_emulated;
    compare("average", (hvd_dist_opt_options_t){1, 0, HVD_AVERAGE, NULL, NULL});
    compare("sum", (hvd_dist_opt_options_t){1, 0, HVD_SUM, NULL, NULL});
    compare("fp16", (hvd_dist_opt_options_t){1, 1, HVD_AVERAGE, NULL, NULL});
    compare("passes=2 fp16",
            (hvd_dist_opt_options_t){2, 1, HVD_AVERAGE, NULL, NULL});
    ring_stream_t *caller = NULL;
    TEST_EQ(dev->stream_create(&caller), RING_OK);
    compare("on the caller's stream",
            (hvd_dist_opt_options_t){1, 0, HVD_AVERAGE, NULL, caller});
    compare("on the caller's stream, passes=2 fp16",
            (hvd_dist_opt_options_t){2, 1, HVD_AVERAGE, NULL, caller});
    dev->stream_destroy(caller);
    test_misuse();
    test_broadcast_parameters();
    dev->stream_destroy(stream);
    return test_hvd_finish("test_dist_opt_device", &oracle, rank, size);
}
