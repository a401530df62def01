/* prog/values.c: elements of any dtype as doubles, for the programs that
 * fill and check collectives' buffers (bench/, test/); contract in
 * prog/prog.h.
 */
#include "prog/prog.h"

/* An integer-valued double as the integer reductions leave it: they wrap,
 * so take it modulo 2^64 here and narrow it modulo 2^bits on store. */
static uint64_t wrap_u64(double v)
{
    return (uint64_t)(int64_t)v;
}

void prog_value_store(void *buf, size_t idx, ring_dtype_t dtype, double v)
{
    uint16_t *u16 = buf;

    switch (dtype) {
    case RING_FLOAT32: ((float *)buf)[idx] = (float)v; break;
    case RING_FLOAT64: ((double *)buf)[idx] = v; break;
    case RING_FLOAT16: u16[idx] = ring_f32_to_f16((float)v); break;
    case RING_BFLOAT16: u16[idx] = ring_f32_to_bf16((float)v); break;
    case RING_INT32:
        ((int32_t *)buf)[idx] = (int32_t)(uint32_t)wrap_u64(v);
        break;
    case RING_INT64: ((int64_t *)buf)[idx] = (int64_t)wrap_u64(v); break;
    case RING_UINT8: ((uint8_t *)buf)[idx] = (uint8_t)wrap_u64(v); break;
    default: break;
    }
}

double prog_value_load(const void *buf, size_t idx, ring_dtype_t dtype)
{
    switch (dtype) {
    case RING_FLOAT32: return ((const float *)buf)[idx];
    case RING_FLOAT64: return ((const double *)buf)[idx];
    case RING_FLOAT16: return ring_f16_to_f32(((const uint16_t *)buf)[idx]);
    case RING_BFLOAT16: return ring_bf16_to_f32(((const uint16_t *)buf)[idx]);
    case RING_INT32: return ((const int32_t *)buf)[idx];
    case RING_INT64: return (double)((const int64_t *)buf)[idx];
    case RING_UINT8: return ((const uint8_t *)buf)[idx];
    default: return 0.0;
    }
}
