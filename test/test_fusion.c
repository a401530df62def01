/* test/test_fusion.c: which allreduces fuse (hvd/plan.c; the hint in
 * hvd/requests.c), in one process. Small allreduces of one dtype and op
 * fuse up to the threshold; a large one joins a group only when every
 * rank said it follows the group's last member in memory
 * (hvd__chain_link's hint), and never across a dtype, an op, a kind,
 * the threshold, or host and device memory. The hint is set only for an
 * in-place allreduce that starts where the previous one, in place and of
 * the same dtype and op, ended; and it is not part of what ranks match.
 */
#include <string.h>
#include "hvd/plan.h"
#include "test/test.h"

enum { SMALL = 256, LARGE = 1 << 18 }; /* float32 elements: 1 KiB, 1 MiB */

static hvd__desc_t desc(const char *name, uint64_t count, int dtype,
                        const char *follows)
{
    hvd__desc_t d = {.kind = HVD__ALLREDUCE, .dtype = dtype, .op = HVD_SUM,
                     .count = count};
    strcpy(d.name, name);
    d.follows = follows ? hvd__name_hash(follows) : 0;
    return d;
}

/* The plan's group sizes, as "2 1 1", for descs under threshold. */
static void groups(const hvd__desc_t *descs, size_t n, size_t threshold,
                   char *out, size_t len)
{
    hvd__plan_t plan = {0};
    hvd__engine.config.fusion_threshold = threshold;
    out[0] = '\0';
    if (hvd__plan_group(descs, n, &plan) != HVD_OK) {
        snprintf(out, len, "error");
        return;
    }
    for (size_t i = 0, used = 0; i < plan.len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%d", i ? " " : "",
                                 plan.items[i].head.ndescs);
    hvd__plan_free(&plan);
}

#define EXPECT_GROUPS(want, threshold, ...)                                    \
    do {                                                                       \
        const hvd__desc_t ds_[] = {__VA_ARGS__};                               \
        char got_[64];                                                         \
        groups(ds_, sizeof ds_ / sizeof ds_[0], threshold, got_,               \
               sizeof got_);                                                   \
        if (strcmp(got_, want))                                                \
            TEST_FAIL("groups of %s: \"%s\", want \"%s\"", #__VA_ARGS__, got_, \
                      want);                                                   \
    } while (0)

static void test_groups(void)
{
    const size_t big = 64 << 20;
    const int F = HVD_FLOAT32;
    EXPECT_GROUPS("2", big, desc("a", SMALL, F, NULL),
                  desc("b", SMALL, F, NULL));
    /* Large and unhinted: alone, either side. */
    EXPECT_GROUPS("1 1 1", big, desc("a", SMALL, F, NULL),
                  desc("w", LARGE, F, NULL), desc("b", SMALL, F, NULL));
    /* Large and following its predecessor, in either order. */
    EXPECT_GROUPS("2", big, desc("a", SMALL, F, NULL),
                  desc("w", LARGE, F, "a"));
    EXPECT_GROUPS("2", big, desc("w", LARGE, F, NULL),
                  desc("a", SMALL, F, "w"));
    EXPECT_GROUPS("4", big, desc("a", SMALL, F, NULL),
                  desc("b", SMALL, F, NULL), desc("w", LARGE, F, "b"),
                  desc("v", LARGE, F, "w"));
    /* Following some other tensor is no reason. */
    EXPECT_GROUPS("1 1", big, desc("a", SMALL, F, NULL),
                  desc("w", LARGE, F, "b"));
    /* Nor across a dtype, an op, a kind, or the threshold. */
    EXPECT_GROUPS("1 1", big, desc("a", SMALL, F, NULL),
                  desc("w", LARGE, HVD_FLOAT64, "a"));
    hvd__desc_t max = desc("w", LARGE, F, "a");
    max.op = HVD_MAX;
    EXPECT_GROUPS("1 1", big, desc("a", SMALL, F, NULL), max);
    hvd__desc_t bcast = desc("w", LARGE, F, "a");
    bcast.kind = HVD__BROADCAST;
    EXPECT_GROUPS("1 1", big, desc("a", SMALL, F, NULL), bcast);
    EXPECT_GROUPS("1 1", LARGE * 4, desc("a", SMALL, F, NULL),
                  desc("w", LARGE, F, "a"));
    EXPECT_GROUPS("2", LARGE * 4 + SMALL * 4, desc("a", SMALL, F, NULL),
                  desc("w", LARGE, F, "a"));
    EXPECT_GROUPS("1 1", 0, desc("a", SMALL, F, NULL),
                  desc("b", SMALL, F, NULL));
    /* Host and device tensors never fuse, even following in memory;
     * device ones fuse with each other. */
    hvd__desc_t dev_a = desc("da", SMALL, F, NULL);
    hvd__desc_t dev_b = desc("db", SMALL, F, NULL);
    hvd__desc_t dev_w = desc("dw", LARGE, F, "h");
    dev_a.mem = dev_b.mem = dev_w.mem = HVD__MEM_DEVICE;
    EXPECT_GROUPS("1 2 1", big, desc("h", SMALL, F, NULL), dev_a, dev_b,
                  desc("h2", SMALL, F, NULL));
    EXPECT_GROUPS("1 1", big, desc("h", SMALL, F, NULL), dev_w);
}

static void test_chain(void)
{
    static float grads[3 * SMALL];
    hvd__chain_t chain = {0};
    hvd__desc_t a = desc("a", SMALL, HVD_FLOAT32, NULL),
                b = desc("b", SMALL, HVD_FLOAT32, NULL),
                c = desc("c", SMALL, HVD_FLOAT32, NULL);
    hvd__chain_link(&chain, &a, grads, grads);
    TEST_EQ(a.follows, 0);
    hvd__chain_link(&chain, &b, grads + SMALL, grads + SMALL);
    TEST_TRUE(b.follows == hvd__name_hash("a"));
    hvd__chain_link(&chain, &c, grads + 2 * SMALL, grads + 2 * SMALL);
    TEST_TRUE(c.follows == hvd__name_hash("b"));

    /* A gap, out of place, another dtype, another op, another kind. */
    hvd__chain_link(&chain, &a, grads, grads);
    hvd__chain_link(&chain, &b, grads + SMALL + 1, grads + SMALL + 1);
    TEST_EQ(b.follows, 0);
    hvd__chain_link(&chain, &a, grads, grads);
    hvd__chain_link(&chain, &b, grads, grads + SMALL);
    TEST_EQ(b.follows, 0);
    hvd__chain_link(&chain, &c, grads + 2 * SMALL, grads + 2 * SMALL);
    TEST_EQ(c.follows, 0); /* b was out of place: nothing to follow */
    hvd__chain_link(&chain, &a, grads, grads);
    b.dtype = HVD_INT32;
    hvd__chain_link(&chain, &b, grads + SMALL, grads + SMALL);
    TEST_EQ(b.follows, 0);
    b.dtype = HVD_FLOAT32;
    hvd__chain_link(&chain, &a, grads, grads);
    b.op = HVD_MAX;
    hvd__chain_link(&chain, &b, grads + SMALL, grads + SMALL);
    TEST_EQ(b.follows, 0);
    b.op = HVD_SUM;
    hvd__chain_link(&chain, &a, grads, grads);
    b.kind = HVD__BROADCAST;
    hvd__chain_link(&chain, &b, grads + SMALL, grads + SMALL);
    TEST_EQ(b.follows, 0);
    b.kind = HVD__ALLREDUCE;

    /* The hint is not part of the match. */
    hvd__desc_t x = desc("x", SMALL, HVD_FLOAT32, "a"), y = x;
    y.follows = 0;
    TEST_TRUE(hvd__desc_same_fields(&x, &y));
    y.count++;
    TEST_TRUE(!hvd__desc_same_fields(&x, &y));
}

int main(void)
{
    test_groups();
    test_chain();
    printf("test_fusion: %s\n", test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
