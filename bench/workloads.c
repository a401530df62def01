/* bench/workloads.c: the gradient lists of bench/workloads.h.
 *
 * resnet50 follows torchvision's resnet50(): conv1 64x3x7x7 and bn1 gamma
 * and beta; 16 bottleneck blocks (3, 4, 6, 3 in layer1-4, planes 64, 128,
 * 256, 512): conv 1x1 in->planes, 3x3 planes->planes, 1x1 planes->4planes,
 * no bias, each followed by a batch norm's gamma and beta, and in each
 * layer's first block a 1x1 downsample conv + its batch norm; fc
 * 1000x2048 weight and 1000 bias. 3 + 16 x 9 + 4 x 3 + 2 = 161 tensors.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench/common.h"
#include "bench/workloads.h"

static void workload_init(bench_workload_t *w, const char *name, int cap,
                          int reverse)
{
    *w = (bench_workload_t){.name = name, .cap = cap, .reverse = reverse};
    w->tensor_names =
        bench_malloc((size_t)cap * sizeof *w->tensor_names, "names");
    w->counts = bench_malloc((size_t)cap * sizeof *w->counts, "counts");
    w->offsets = bench_malloc((size_t)cap * sizeof *w->offsets, "offsets");
}

/* Appends a tensor of `count` elements named by a printf format. */
__attribute__((format(printf, 3, 4))) static void
workload_add(bench_workload_t *w, size_t count, const char *fmt, ...)
{
    char name[128];
    va_list ap;

    if (w->ntensors == w->cap) {
        fprintf(stderr, "%s: bug: more than %d tensors in %s\n",
                prog_name, w->cap, w->name);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    w->tensor_names[w->ntensors] = bench_malloc(strlen(name) + 1, "a name");
    strcpy(w->tensor_names[w->ntensors], name);
    w->counts[w->ntensors] = count;
    w->offsets[w->ntensors] = w->total_count;
    w->total_count += count;
    w->ntensors++;
}

void bench_workload_alloc_slabs(bench_workload_t *w)
{
    size_t nbytes = w->total_count * sizeof(float);

    w->send = bench_malloc(nbytes, "the input slab");
    w->recv = bench_malloc(nbytes, "the result slab");
}

void bench_workload_free(bench_workload_t *w)
{
    for (int t = 0; t < w->ntensors; t++)
        free(w->tensor_names[t]);
    free(w->tensor_names);
    free(w->counts);
    free(w->offsets);
    free(w->send);
    free(w->recv);
    *w = (bench_workload_t){0};
}

size_t bench_workload_nbytes(const bench_workload_t *w)
{
    return w->total_count * sizeof(float);
}

#define SMALL_NTENSORS 1000
#define SMALL_COUNT 1024 /* 4 KiB of float32 */

void bench_workload_small(bench_workload_t *w)
{
    workload_init(w, "small", SMALL_NTENSORS, 0);
    for (int t = 0; t < SMALL_NTENSORS; t++)
        workload_add(w, SMALL_COUNT, "small.%d", t);
}

/* A bias-free convolution (out, in, k, k) and its batch norm's gamma and
 * beta (out each), named as torchvision names them. */
static void add_conv_bn(bench_workload_t *w, const char *prefix,
                        const char *conv, const char *bn, size_t out,
                        size_t in, size_t k)
{
    workload_add(w, out * in * k * k, "%s%s.weight", prefix, conv);
    workload_add(w, out, "%s%s.weight", prefix, bn);
    workload_add(w, out, "%s%s.bias", prefix, bn);
}

static void add_bottleneck(bench_workload_t *w, int layer, int block,
                           size_t in, size_t planes)
{
    char prefix[32];

    snprintf(prefix, sizeof prefix, "layer%d.%d.", layer, block);
    add_conv_bn(w, prefix, "conv1", "bn1", planes, in, 1);
    add_conv_bn(w, prefix, "conv2", "bn2", planes, planes, 3);
    add_conv_bn(w, prefix, "conv3", "bn3", 4 * planes, planes, 1);
    if (block == 0)
        add_conv_bn(w, prefix, "downsample.0", "downsample.1", 4 * planes, in,
                    1);
}

#define RESNET50_NTENSORS 161
#define RESNET50_COUNT 25557032u /* torchvision's resnet50(): 25.6M */

void bench_workload_resnet50(bench_workload_t *w)
{
    static const int nblocks[4] = {3, 4, 6, 3};
    size_t in = 64;

    workload_init(w, "resnet50", RESNET50_NTENSORS, 1);
    add_conv_bn(w, "", "conv1", "bn1", 64, 3, 7);
    for (int layer = 0; layer < 4; layer++) {
        size_t planes = (size_t)64 << layer;
        for (int block = 0; block < nblocks[layer]; block++) {
            add_bottleneck(w, layer + 1, block, in, planes);
            in = 4 * planes;
        }
    }
    workload_add(w, 1000 * 2048, "fc.weight");
    workload_add(w, 1000, "fc.bias");
    if (w->ntensors != RESNET50_NTENSORS || w->total_count != RESNET50_COUNT) {
        fprintf(stderr, "%s: bug: ResNet-50 has %d tensors, %zu elements; "
                "expected %d, %u\n", prog_name, w->ntensors,
                w->total_count, RESNET50_NTENSORS, RESNET50_COUNT);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}
