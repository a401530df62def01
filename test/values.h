/* test/values.h: what the multi-rank tests that check collectives
 * (test/test_ring.c, test/test_hvd.c) share about the values they check:
 * whether every rank holds the same bytes. Elements of any dtype as
 * doubles are prog/prog.h's (prog_value_store, prog_value_load), which
 * the benchmarks use too.
 *
 * Dtypes are ring's; hvd's number the same (ring/ring.h says so), so hvd
 * tests pass (ring_dtype_t)dtype. Also the MPI types and operators of the
 * oracle. Left out: inputs, which each test words for its own layer.
 */
#ifndef HVD_TEST_VALUES_H
#define HVD_TEST_VALUES_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include "prog/prog.h"
#include "ring/ring.h"

/* 1 when every rank of comm holds the same nbytes at buf: an FNV-1a hash
 * of them, whose min and max over the ranks agree. Collective. */
static inline int test_same_everywhere(const void *buf, size_t nbytes,
                                       MPI_Comm comm)
{
    uint64_t h = 1469598103934665603ull, lo, hi;
    for (size_t i = 0; i < nbytes; i++)
        h = (h ^ ((const unsigned char *)buf)[i]) * 1099511628211ull;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
    return lo == hi;
}

/* ---- the oracle's MPI types: half types are widened to float ---- */

static inline MPI_Datatype test_mpi_type(ring_dtype_t dtype)
{
    switch (dtype) {
    case RING_FLOAT64: return MPI_DOUBLE;
    case RING_INT32: return MPI_INT32_T;
    case RING_INT64: return MPI_INT64_T;
    case RING_UINT8: return MPI_UINT8_T;
    default: return MPI_FLOAT; /* f32, and the widened halves */
    }
}

static inline MPI_Op test_mpi_op(ring_op_t op)
{
    switch (op) {
    case RING_MIN: return MPI_MIN;
    case RING_MAX: return MPI_MAX;
    case RING_PRODUCT: return MPI_PROD;
    default: return MPI_SUM; /* AVERAGE divides afterwards */
    }
}

#endif /* HVD_TEST_VALUES_H */
