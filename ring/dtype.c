/* ring/dtype.c: names and sizes of dtypes, operators and algorithms, and
 * the half conversions for callers outside ring/ (the arithmetic itself is
 * ring/reduce_op.h). */
#include <string.h>
#include "ring/reduce_op.h"
#include "ring/ring_internal.h"

static const struct {
    const char *name;
    size_t size;
} ring__dtypes[RING_DTYPE_COUNT] = {
    [RING_FLOAT32] = {"f32", 4}, [RING_FLOAT64] = {"f64", 8},
    [RING_FLOAT16] = {"f16", 2}, [RING_BFLOAT16] = {"bf16", 2},
    [RING_INT32] = {"i32", 4},   [RING_INT64] = {"i64", 8},
    [RING_UINT8] = {"u8", 1},
};

static const char *const ring__ops[RING_OP_COUNT] = {
    [RING_SUM] = "sum", [RING_AVERAGE] = "avg", [RING_MIN] = "min",
    [RING_MAX] = "max", [RING_PRODUCT] = "prod",
};

static const char *const ring__algos[RING_ALGO_COUNT] = {
    [RING_ALGO_AUTO] = "auto", [RING_ALGO_RING] = "ring",
    [RING_ALGO_RDB] = "rdb", [RING_ALGO_RHD] = "rhd",
};

size_t ring_dtype_size(ring_dtype_t dtype)
{
    return (unsigned)dtype < RING_DTYPE_COUNT ? ring__dtypes[dtype].size : 0;
}

const char *ring_dtype_name(ring_dtype_t dtype)
{
    return (unsigned)dtype < RING_DTYPE_COUNT ? ring__dtypes[dtype].name : NULL;
}

const char *ring_op_name(ring_op_t op)
{
    return (unsigned)op < RING_OP_COUNT ? ring__ops[op] : NULL;
}

const char *ring_algo_name(ring_algo_t algo)
{
    return (unsigned)algo < RING_ALGO_COUNT ? ring__algos[algo] : NULL;
}

int ring_algo_parse(const char *name, ring_algo_t *algo)
{
    for (int i = 0; name && i < RING_ALGO_COUNT; i++) {
        if (strcmp(name, ring__algos[i]) == 0) {
            *algo = (ring_algo_t)i;
            return RING_OK;
        }
    }
    return RING_ERR_ARG;
}

uint16_t ring_f32_to_f16(float value) { return ring__f32_to_f16(value); }
float ring_f16_to_f32(uint16_t bits) { return ring__f16_to_f32(bits); }

/* Whole arrays: with F16C where the CPU has it, 8 at a time (the
 * DistributedOptimizer's fp16 compression converts every gradient twice a
 * step), and the rest in loops the compiler vectorises (the portable
 * conversions are branch-free). test_reduce checks both against the
 * scalar conversions, bit for bit, on every half. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static size_t
ring__f32_to_f16_f16c(uint16_t *out, const float *in, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + i),
                                         _MM_FROUND_TO_NEAREST_INT));
    return i;
}

__attribute__((target("avx,f16c"))) static size_t
ring__f16_to_f32_f16c(float *out, const uint16_t *in, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                      (const __m128i *)(in + i))));
    return i;
}
#endif

void ring_f32_to_f16_array(uint16_t *out, const float *in, size_t n)
{
    size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ring__have_f16c()) i = ring__f32_to_f16_f16c(out, in, n);
#endif
    for (; i < n; i++) out[i] = ring__f32_to_f16(in[i]);
}

void ring_f16_to_f32_array(float *out, const uint16_t *in, size_t n)
{
    size_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (ring__have_f16c()) i = ring__f16_to_f32_f16c(out, in, n);
#endif
    for (; i < n; i++) out[i] = ring__f16_to_f32(in[i]);
}
uint16_t ring_f32_to_bf16(float value) { return ring__f32_to_bf16(value); }
float ring_bf16_to_f32(uint16_t bits) { return ring__bf16_to_f32(bits); }
