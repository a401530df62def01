/* ring/reduce_host.c: element-wise reductions of host memory, one loop per
 * dtype x op generated from two short macros. The loops are plain enough for
 * the compiler to vectorise at -O3; they are also the reference the CUDA
 * kernels are tested against.
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
RING__REDUCE_FLOATING(ring__reduce_f16, uint16_t, float, ring__f16_to_f32,
                      ring__f32_to_f16, ring__min_f32, ring__max_f32)
RING__REDUCE_FLOATING(ring__reduce_bf16, uint16_t, float, ring__bf16_to_f32,
                      ring__f32_to_bf16, ring__min_f32, ring__max_f32)
RING__REDUCE_INTEGER(ring__reduce_i32, int32_t, uint32_t)
RING__REDUCE_INTEGER(ring__reduce_i64, int64_t, uint64_t)
RING__REDUCE_INTEGER(ring__reduce_u8, uint8_t, unsigned)

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
