/* ring/reduce_op.h: the per-element arithmetic of every reduction, written
 * once and compiled both by the C compiler (ring/reduce_host.c) and by nvcc
 * (ring/reduce_cuda.cu), so the host tests check the arithmetic the GPU runs.
 *
 * Half types are widened to float, combined, and rounded back to nearest
 * even. The conversions are branch-free bit manipulation so that loops over
 * them vectorise; they handle subnormals, infinities and NaN (a NaN stays a
 * quiet NaN, keeping its sign and top payload bits).
 */
#ifndef RING_REDUCE_OP_H
#define RING_REDUCE_OP_H

#include <stdint.h>
#include <string.h>
#include "ring/ring.h" /* ring_dtype_t */

#ifdef __CUDACC__
#define RING_HD __host__ __device__ __forceinline__
#else
#define RING_HD static inline
#endif

RING_HD uint32_t ring__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

RING_HD float ring__bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- bfloat16 ---- */

RING_HD float ring__bf16_to_f32(uint16_t h)
{
    return ring__bits_f32((uint32_t)h << 16);
}

RING_HD uint16_t ring__f32_to_bf16(float f)
{
    uint32_t u = ring__f32_bits(f);
    uint32_t is_nan = (u & 0x7fffffffu) > 0x7f800000u;
    /* Adding 0x7fff plus the lowest kept bit rounds to nearest, ties even. */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet = (u >> 16) | 0x0040u;
    return (uint16_t)(is_nan ? quiet : rounded);
}

/* ---- IEEE binary16 ---- */

RING_HD float ring__f16_to_f32(uint16_t h)
{
    /* Normals rebias the exponent by +112; subnormals (m * 2^-24) go through
     * an exact integer-to-float conversion, so no float denormal (slow on
     * x86) is ever touched; inf/NaN keep their mantissa, and a NaN comes
     * out quiet, as IEEE 754 conversions (and F16C's) make it. Selects, not
     * branches, so loops vectorise. */
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t normal = (em << 13) + 0x38000000u;
    uint32_t tiny = ring__f32_bits((float)em * 0x1p-24f);
    uint32_t quiet = em > 0x7c00u ? 0x00400000u : 0u;
    uint32_t special = 0x7f800000u | quiet | (em & 0x3ffu) << 13;
    uint32_t bits = em >= 0x7c00u ? special : em < 0x400u ? tiny : normal;
    return ring__bits_f32(sign | bits);
}

RING_HD uint16_t ring__f32_to_f16(float f)
{
    /* All three cases are computed and one is selected, so that loops over
     * this stay branch-free and vectorise. */
    uint32_t u = ring__f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    /* Overflow goes to inf; inf stays inf; NaN stays a quiet NaN. */
    uint32_t big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
    /* Subnormal or zero: adding 0.5 (2^-1) lines the half's subnormal step
     * up with the float's last bit, and the FPU rounds to nearest even. */
    uint32_t tiny = ring__f32_bits(ring__bits_f32(a) + 0.5f) - 0x3f000000u;
    /* Normal: rebias the exponent by -112, round to nearest even on bit 13. */
    uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint32_t out = a >= 0x47800000u ? big : a < 0x38800000u ? tiny : normal;
    return (uint16_t)(sign | out);
}

/* ---- operators on widened values ---- */

/* MIN/MAX: NaN wins, and -0 < +0, so the result never depends on which
 * operand came first. x != x is NaN without needing math.h in device code. */
#define RING__MINMAX(name, lt)                                                 \
    RING_HD float ring__##name##_f32(float a, float b)                         \
    {                                                                          \
        if (a != a || b != b) return a + b;                                    \
        if (a == b) return (ring__f32_bits(a) lt ring__f32_bits(b)) ? b : a;   \
        return (a lt b) ? a : b;                                               \
    }                                                                          \
    RING_HD double ring__##name##_f64(double a, double b)                      \
    {                                                                          \
        if (a != a || b != b) return a + b;                                    \
        if (a == b) {                                                          \
            uint64_t ua, ub;                                                   \
            memcpy(&ua, &a, 8);                                                \
            memcpy(&ub, &b, 8);                                                \
            return (ua lt ub) ? b : a;                                         \
        }                                                                      \
        return (a lt b) ? a : b;                                               \
    }
/* For equal values (the zeros): min wants the set sign bit, the larger
 * pattern; max the clear one. "a < b ? b : a" on the bits picks the larger. */
RING__MINMAX(min, <)
RING__MINMAX(max, >)
#undef RING__MINMAX

/* ---- conversions for compressed gradients (ring_dev_t's convert) ---- */

/* Element i of src (float32, float16 or bfloat16) as a float. */
RING_HD float ring__load_f32(const void *src, ring_dtype_t src_dtype,
                             size_t i)
{
    if (src_dtype == RING_FLOAT16)
        return ring__f16_to_f32(((const uint16_t *)src)[i]);
    if (src_dtype == RING_BFLOAT16)
        return ring__bf16_to_f32(((const uint16_t *)src)[i]);
    return ((const float *)src)[i];
}

/* Stores v as element i of dst, of that dtype. */
RING_HD void ring__store_f32(void *dst, ring_dtype_t dst_dtype, size_t i,
                             float v)
{
    if (dst_dtype == RING_FLOAT16)
        ((uint16_t *)dst)[i] = ring__f32_to_f16(v);
    else if (dst_dtype == RING_BFLOAT16)
        ((uint16_t *)dst)[i] = ring__f32_to_bf16(v);
    else
        ((float *)dst)[i] = v;
}

#endif /* RING_REDUCE_OP_H */
