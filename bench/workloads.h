/* bench/workloads.h: gradient lists for the benchmarks, as a
 * DistributedOptimizer hands them over: named float32 tensors carved out
 * of one input slab and one result slab per rank.
 *
 *   small     1000 tensors of 4 KiB (1024 elements) each, 4,096,000 B,
 *             issued in order;
 *   resnet50  the 161 trainable tensors of torchvision's ResNet-50, named
 *             and ordered as torchvision's parameters (25,557,032
 *             elements, 102,228,128 B), issued last layer first, as
 *             backward produces them (workloads.c says how the list is
 *             built, and checks its totals).
 *
 * Programs only: a failed allocation or a list that does not add up takes
 * every rank down (bench/common.h), nothing returns an error.
 */
#ifndef HVD_BENCH_WORKLOADS_H
#define HVD_BENCH_WORKLOADS_H

#include <stddef.h>

typedef struct {
    const char *name;     /* "small", "resnet50" */
    int ntensors, cap;    /* tensors added, room for */
    char **tensor_names;  /* (ntensors) "small.17", "fc.weight", ... */
    size_t *counts;       /* (ntensors) elements of each tensor */
    size_t *offsets;      /* (ntensors) its first element in the slabs */
    size_t total_count;   /* elements in all tensors */
    int reverse;          /* issue last tensor first (backward's order) */
    float *send;          /* (total_count) inputs; NULL until alloc_slabs */
    float *recv;          /* (total_count) results, same layout */
} bench_workload_t;

/* The lists, without slabs. */
void bench_workload_small(bench_workload_t *w);
void bench_workload_resnet50(bench_workload_t *w);

/* Allocates w's send and recv slabs (uninitialised). */
void bench_workload_alloc_slabs(bench_workload_t *w);
/* Frees everything and zeroes *w; a zeroed workload is fine too. */
void bench_workload_free(bench_workload_t *w);
/* Bytes in each slab. */
size_t bench_workload_nbytes(const bench_workload_t *w);

#endif
