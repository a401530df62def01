/* ring/reduce_host.c: element-wise reductions of host memory, one loop per
 * dtype x op generated from short macros: of two inputs (the ring's hops),
 * and of N inputs in one pass (shared memory, which reads every rank's
 * block at once). The loops are plain enough for the compiler to vectorise
 * at -O3; they are also the reference the CUDA kernels are tested against.
 */
#include "ring/reduce_op.h"
#include "ring/ring_internal.h"

#define RING__ID(v) (v)

/* The element loop: x and y are the operands widened to W. */
#define RING__LOOP(T, W, load, store, expr)                                    \
    do {                                                                       \
        T *d = dst;                                                            \
        const T *pa = a, *pb = b;                                              \
        for (size_t i = 0; i < count; i++) {                                   \
            W x = load(pa[i]), y = load(pb[i]);                                \
            d[i] = store(expr);                                                \
        }                                                                      \
    } while (0)

/* Floating types, native (float, double) or stored as 16 bits and widened
 * to float. AVERAGE divides once, in the last step, before rounding. */
#define RING__REDUCE_FLOATING(fn, T, W, load, store, min, max)                 \
    static void fn(void *dst, const void *a, const void *b, size_t count,      \
                   ring_op_t op, int divisor)                                  \
    {                                                                          \
        W n = (W)divisor;                                                      \
        switch (op) {                                                          \
        case RING_AVERAGE:                                                     \
            if (divisor > 1) {                                                 \
                RING__LOOP(T, W, load, store, (x + y) / n);                    \
                break;                                                         \
            }                                                                  \
            /* fall through */                                                 \
        case RING_SUM: RING__LOOP(T, W, load, store, x + y); break;            \
        case RING_PRODUCT: RING__LOOP(T, W, load, store, x * y); break;        \
        case RING_MIN: RING__LOOP(T, W, load, store, min(x, y)); break;        \
        case RING_MAX: RING__LOOP(T, W, load, store, max(x, y)); break;        \
        default: break;                                                        \
        }                                                                      \
    }

/* Integer types wrap on overflow: the arithmetic is done unsigned (U). */
#define RING__REDUCE_INTEGER(fn, T, U)                                         \
    static void fn(void *dst, const void *a, const void *b, size_t count,      \
                   ring_op_t op, int divisor)                                  \
    {                                                                          \
        (void)divisor;                                                         \
        switch (op) {                                                          \
        case RING_SUM: RING__LOOP(T, T, RING__ID, (T), (U)x + (U)y); break;    \
        case RING_PRODUCT: RING__LOOP(T, T, RING__ID, (T), (U)x * (U)y); break;\
        case RING_MIN: RING__LOOP(T, T, RING__ID, RING__ID, x < y ? x : y); break;\
        case RING_MAX: RING__LOOP(T, T, RING__ID, RING__ID, x > y ? x : y); break;\
        default: break;                                                        \
        }                                                                      \
    }

RING__REDUCE_FLOATING(ring__reduce_f32, float, float, RING__ID, RING__ID,
                      ring__min_f32, ring__max_f32)
RING__REDUCE_FLOATING(ring__reduce_f64, double, double, RING__ID, RING__ID,
                      ring__min_f64, ring__max_f64)
RING__REDUCE_FLOATING(ring__reduce_f16_portable, uint16_t, float,
                      ring__f16_to_f32, ring__f32_to_f16, ring__min_f32,
                      ring__max_f32)
RING__REDUCE_FLOATING(ring__reduce_bf16, uint16_t, float, ring__bf16_to_f32,
                      ring__f32_to_bf16, ring__min_f32, ring__max_f32)
RING__REDUCE_INTEGER(ring__reduce_i32, int32_t, uint32_t)
RING__REDUCE_INTEGER(ring__reduce_i64, int64_t, uint64_t)
RING__REDUCE_INTEGER(ring__reduce_u8, uint8_t, unsigned)

/* float16 sum, average and product with the F16C conversions, 8 at a
 * time, where the CPU has them: the portable conversions cost ~2.5 ns an
 * element (a 400 KB half allreduce took 280 us against 36 for float). The
 * same rounding (to nearest even); test_reduce checks the results against
 * a reference either way. Returns how many leading elements it did. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
__attribute__((target("avx,f16c"))) static size_t
ring__reduce_f16_f16c(uint16_t *d, const uint16_t *a, const uint16_t *b,
                      size_t count, ring_op_t op, int divisor)
{
    __m256 n = _mm256_set1_ps((float)divisor);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i)));
        __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i)));
        __m256 z = op == RING_PRODUCT ? _mm256_mul_ps(x, y)
                                      : _mm256_add_ps(x, y);
        if (op == RING_AVERAGE && divisor > 1) z = _mm256_div_ps(z, n);
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(z, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

/* F16C from cpuid (leaf 1, ecx), asked once: clang 14's
 * __builtin_cpu_supports takes "avx" (which also checks that the OS saves
 * the ymm registers) but not "f16c". */
int ring__have_f16c(void)
{
    static _Atomic int have = -1; /* -1: not asked yet */
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        unsigned eax, ebx, ecx, edx;
        h = __builtin_cpu_supports("avx") &&
            __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h;
}
#endif

static void ring__reduce_f16(void *dst, const void *a, const void *b,
                             size_t count, ring_op_t op, int divisor)
{
    size_t done = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    if (op != RING_MIN && op != RING_MAX && ring__have_f16c())
        done = ring__reduce_f16_f16c(dst, a, b, count, op, divisor);
#endif
    ring__reduce_f16_portable((uint16_t *)dst + done,
                              (const uint16_t *)a + done,
                              (const uint16_t *)b + done, count - done, op,
                              divisor);
}

typedef void ring__reduce_fn(void *, const void *, const void *, size_t,
                             ring_op_t, int);

static ring__reduce_fn *const ring__reducers[RING_DTYPE_COUNT] = {
    [RING_FLOAT32] = ring__reduce_f32, [RING_FLOAT64] = ring__reduce_f64,
    [RING_FLOAT16] = ring__reduce_f16, [RING_BFLOAT16] = ring__reduce_bf16,
    [RING_INT32] = ring__reduce_i32,   [RING_INT64] = ring__reduce_i64,
    [RING_UINT8] = ring__reduce_u8,
};

void ring__reduce_host(void *dst, const void *a, const void *b, size_t count,
                       ring_dtype_t dtype, ring_op_t op, int divisor)
{
    ring__reducers[dtype](dst, a, b, count, op, divisor);
}

/* ---- N inputs in one pass ---- */
/* A tile of widened partial results stays in L1 while each input streams
 * through it once; the output is written once, rounded once. */
enum { RING__TILE = 512 };

/* acc[j] = expr over the tile, x the partial result, y input p's element. */
#define RING__ACC(load, expr)                                                  \
    for (size_t j = 0; j < len; j++) {                                         \
        __typeof__(acc[0]) x = acc[j], y = load(p[j]);                         \
        acc[j] = (expr);                                                       \
    }

/* One reducer per dtype: T stored, W widened, U the type integer SUM and
 * PRODUCT wrap in (W for floating types). */
#define RING__REDUCE_N(fn, T, W, U, load, store, min, max)                     \
    static void fn(void *dst, const void *const *in, int n, size_t count,      \
                   ring_op_t op, int divisor)                                  \
    {                                                                          \
        W acc[RING__TILE];                                                     \
        for (size_t at = 0; at < count; at += RING__TILE) {                    \
            size_t len = count - at < RING__TILE ? count - at : RING__TILE;    \
            const T *p = (const T *)in[0] + at;                                \
            for (size_t j = 0; j < len; j++) acc[j] = load(p[j]);              \
            for (int k = 1; k < n; k++) {                                      \
                p = (const T *)in[k] + at;                                     \
                switch (op) {                                                  \
                case RING_SUM:                                                 \
                case RING_AVERAGE: RING__ACC(load, (W)((U)x + (U)y)); break;   \
                case RING_PRODUCT: RING__ACC(load, (W)((U)x * (U)y)); break;   \
                case RING_MIN: RING__ACC(load, min(x, y)); break;              \
                case RING_MAX: RING__ACC(load, max(x, y)); break;              \
                default: break;                                                \
                }                                                              \
            }                                                                  \
            T *d = (T *)dst + at;                                              \
            if (op == RING_AVERAGE && divisor > 1)                             \
                for (size_t j = 0; j < len; j++)                               \
                    d[j] = store(acc[j] / (W)divisor);                         \
            else                                                               \
                for (size_t j = 0; j < len; j++) d[j] = store(acc[j]);         \
        }                                                                      \
    }

#define RING__MIN_INT(x, y) ((x) < (y) ? (x) : (y))
#define RING__MAX_INT(x, y) ((x) > (y) ? (x) : (y))

RING__REDUCE_N(ring__reduce_n_f32, float, float, float, RING__ID, RING__ID,
               ring__min_f32, ring__max_f32)
RING__REDUCE_N(ring__reduce_n_f64, double, double, double, RING__ID, RING__ID,
               ring__min_f64, ring__max_f64)
RING__REDUCE_N(ring__reduce_n_f16, uint16_t, float, float, ring__f16_to_f32,
               ring__f32_to_f16, ring__min_f32, ring__max_f32)
RING__REDUCE_N(ring__reduce_n_bf16, uint16_t, float, float, ring__bf16_to_f32,
               ring__f32_to_bf16, ring__min_f32, ring__max_f32)
RING__REDUCE_N(ring__reduce_n_i32, int32_t, int32_t, uint32_t, RING__ID,
               RING__ID, RING__MIN_INT, RING__MAX_INT)
RING__REDUCE_N(ring__reduce_n_i64, int64_t, int64_t, uint64_t, RING__ID,
               RING__ID, RING__MIN_INT, RING__MAX_INT)
RING__REDUCE_N(ring__reduce_n_u8, uint8_t, uint8_t, unsigned, RING__ID,
               RING__ID, RING__MIN_INT, RING__MAX_INT)

typedef void ring__reduce_n_fn(void *, const void *const *, int, size_t,
                               ring_op_t, int);

static ring__reduce_n_fn *const ring__reducers_n[RING_DTYPE_COUNT] = {
    [RING_FLOAT32] = ring__reduce_n_f32, [RING_FLOAT64] = ring__reduce_n_f64,
    [RING_FLOAT16] = ring__reduce_n_f16, [RING_BFLOAT16] = ring__reduce_n_bf16,
    [RING_INT32] = ring__reduce_n_i32,   [RING_INT64] = ring__reduce_n_i64,
    [RING_UINT8] = ring__reduce_n_u8,
};

void ring__reduce_host_n(void *dst, const void *const *in, int n, size_t count,
                         ring_dtype_t dtype, ring_op_t op, int divisor)
{
    /* Two inputs are already one pass, without the tile's round trip. */
    if (n == 2)
        ring__reducers[dtype](dst, in[0], in[1], count, op, divisor);
    else
        ring__reducers_n[dtype](dst, in, n, count, op, divisor);
}

void ring__divide_host(void *buf, size_t count, ring_dtype_t dtype,
                       int divisor)
{
    const void *in = buf;
    ring__reducers_n[dtype](buf, &in, 1, count, RING_AVERAGE, divisor);
}

int ring__convert_ok(ring_dtype_t dst_dtype, ring_dtype_t src_dtype)
{
    int dst_half = dst_dtype == RING_FLOAT16 || dst_dtype == RING_BFLOAT16;
    int src_half = src_dtype == RING_FLOAT16 || src_dtype == RING_BFLOAT16;
    return (dst_half && src_dtype == RING_FLOAT32) ||
           (src_half && dst_dtype == RING_FLOAT32);
}

void ring__convert_host(void *dst, ring_dtype_t dst_dtype, const void *src,
                        ring_dtype_t src_dtype, size_t count)
{
    for (size_t i = 0; i < count; i++)
        ring__store_f32(dst, dst_dtype, i, ring__load_f32(src, src_dtype, i));
}
