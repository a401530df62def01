/* test/test_reduce.c: the host reductions and half conversions, in one
 * process, against references written independently here (arithmetic in
 * double, rounding with nearbyint, decoding with ldexp). Also the block
 * layout that the ring cuts messages into, and the host memory kind's copy
 * (its own vector loop from 2 KiB) at every length around its thresholds
 * and at odd offsets, against memcpy, with the bytes around untouched.
 *
 * Documented behaviour of special values, checked below:
 *   - SUM/PRODUCT follow IEEE: inf + -inf and NaN inputs give NaN.
 *   - MIN/MAX: NaN wins; min(-0, +0) = -0 and max(-0, +0) = +0 in either
 *     order, so the result never depends on operand order.
 *   - f16: results beyond 65504 round to inf (65520 is the tie: to inf).
 *   - f16/bf16 conversions round to nearest even, keep subnormals, and keep
 *     a NaN a NaN (a naive bf16 rounding turns some NaNs into inf).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ring/reduce_op.h"
#include "ring/ring_internal.h"
#include "test/test.h"

/* ---- independent references ---- */

static double ref_f16_decode(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v = exp == 0 ? ldexp(man, -24)
               : exp == 31 ? (man ? NAN : INFINITY)
                           : ldexp(1024 + man, exp - 25);
    return sign ? -v : v;
}

/* v rounded to a float format with `bits` mantissa bits (hidden bit
 * included), smallest normal exponent emin and largest finite value max. */
static double ref_round(double v, int bits, int emin, double max)
{
    if (isnan(v) || isinf(v) || v == 0) return v;
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    e = e - 1 < emin ? emin : e - 1;
    double ulp = ldexp(1, e - bits + 1);
    double r = nearbyint(v / ulp) * ulp;
    return fabs(r) > max ? copysign(INFINITY, v) : r;
}

static double ref_f16_round(double v) { return ref_round(v, 11, -14, 65504); }
static double ref_bf16_round(double v)
{
    return ref_round(v, 8, -126, 0x1.fep127);
}

/* Same value, or both NaN; zeros must agree in sign. */
static int same_value(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return a == b && signbit(a) == signbit(b);
}

/* ---- conversions ---- */

static void test_f16_decode_all(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        double got = ring__f16_to_f32((uint16_t)h), want = ref_f16_decode((uint16_t)h);
        if (!same_value(got, want)) {
            TEST_FAIL("f16 0x%04x decodes to %g, want %g", h, got, want);
            return;
        }
    }
}

/* The array conversions give what the scalar ones give, bit for bit: every
 * half decoded, and every decoded half and its neighbours encoded. */
static void test_f16_arrays(void)
{
    enum { N = 65536 };
    static uint16_t halves[N], back[N * 3];
    static float floats[N], near[N * 3];
    for (uint32_t h = 0; h < N; h++) halves[h] = (uint16_t)h;
    ring_f16_to_f32_array(floats, halves, N);
    for (uint32_t h = 0; h < N; h++) {
        float want = ring_f16_to_f32(halves[h]);
        if (memcmp(&floats[h], &want, sizeof want) != 0) {
            TEST_FAIL("f16 0x%04x: array decode differs", h);
            return;
        }
        near[3 * h] = floats[h];
        near[3 * h + 1] = nextafterf(floats[h], INFINITY);
        near[3 * h + 2] = floats[h] * 1.0004f;
    }
    ring_f32_to_f16_array(back, near, N * 3);
    for (size_t i = 0; i < (size_t)N * 3; i++)
        if (back[i] != ring_f32_to_f16(near[i])) {
            TEST_FAIL("%a: array encode 0x%04x, scalar 0x%04x", near[i],
                      back[i], ring_f32_to_f16(near[i]));
            return;
        }
}

/* Every half's neighbourhood: the value, the midpoint to the next half
 * (a tie), and one float ulp either side of the midpoint. */
static void test_f16_encode_ties(void)
{
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float lo = ring__f16_to_f32((uint16_t)h), hi = ring__f16_to_f32((uint16_t)(h + 1));
        float mid = (float)(((double)lo + (double)hi) / 2);
        float probes[4] = {lo, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
        for (int p = 0; p < 4; p++) {
            for (int sign = 0; sign < 2; sign++) {
                float x = sign ? -probes[p] : probes[p];
                double got = ring__f16_to_f32(ring__f32_to_f16(x));
                double want = ref_f16_round(x);
                if (!same_value(got, want)) {
                    TEST_FAIL("f16 round(%a) = %a, want %a", x, got, want);
                    return;
                }
            }
        }
    }
}

/* bf16 over a spread of float bit patterns, including every exponent. */
static void test_bf16_encode(void)
{
    for (uint64_t u = 0; u <= 0xffffffffu; u += 65521) {
        uint32_t bits = (uint32_t)u;
        float x = ring__bits_f32(bits);
        uint16_t b = ring__f32_to_bf16(x);
        double got = ring__bf16_to_f32(b), want = ref_bf16_round(x);
        if (!same_value(got, want)) {
            TEST_FAIL("bf16 round(%a) = %a, want %a", x, got, want);
            return;
        }
    }
    /* A NaN whose payload sits below bf16's bits must stay NaN. */
    TEST_TRUE(isnan(ring__bf16_to_f32(ring__f32_to_bf16(ring__bits_f32(0x7f800001u)))));
    /* Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1). */
    TEST_EQ(ring__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    TEST_EQ(ring__f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);
}

static void test_f16_specials(void)
{
    TEST_EQ(ring__f32_to_f16(65504.0f), 0x7bff);
    TEST_EQ(ring__f32_to_f16(65519.0f), 0x7bff);
    TEST_EQ(ring__f32_to_f16(65520.0f), 0x7c00); /* the tie goes to inf */
    TEST_EQ(ring__f32_to_f16(INFINITY), 0x7c00);
    TEST_EQ(ring__f32_to_f16(-0.0f), 0x8000);
    TEST_EQ(ring__f32_to_f16(0x1p-24f), 0x0001);  /* smallest subnormal */
    TEST_EQ(ring__f32_to_f16(0x1p-25f), 0x0000);  /* tie to even: 0 */
    TEST_EQ(ring__f32_to_f16(0x1.8p-25f), 0x0001);
    TEST_TRUE((ring__f32_to_f16(NAN) & 0x7fff) > 0x7c00);
}

/* ---- reductions ---- */

static const float special_f32[] = {0.0f, -0.0f, 1.0f, -2.5f, INFINITY,
                                    -INFINITY, NAN};
enum { NSPECIAL = sizeof special_f32 / sizeof special_f32[0] };

/* What the documented semantics give for a op b, in double. */
static double ref_op(double a, double b, ring_op_t op, int divisor)
{
    switch (op) {
    case RING_SUM: return a + b;
    case RING_AVERAGE: return (a + b) / divisor;
    case RING_PRODUCT: return a * b;
    case RING_MIN:
    case RING_MAX:
        if (isnan(a) || isnan(b)) return NAN;
        if (a == b) return (op == RING_MIN) == (signbit(a) != 0) ? a : b;
        return (op == RING_MIN) == (a < b) ? a : b;
    default: return NAN;
    }
}

/* Every pair of special values through every floating dtype and op. */
static void test_special_values(void)
{
    for (int dt = RING_FLOAT32; dt <= RING_BFLOAT16; dt++) {
        for (int op = 0; op < RING_OP_COUNT; op++) {
            for (int i = 0; i < NSPECIAL; i++) {
                for (int j = 0; j < NSPECIAL; j++) {
                    double a = special_f32[i], b = special_f32[j];
                    unsigned char x[8], y[8], z[8];
                    double got;
                    if (dt == RING_FLOAT32) {
                        float fa = (float)a, fb = (float)b, fz;
                        ring__reduce_host(&fz, &fa, &fb, 1, dt, op, 1);
                        got = fz;
                    } else if (dt == RING_FLOAT64) {
                        double dz;
                        ring__reduce_host(&dz, &a, &b, 1, dt, op, 1);
                        got = dz;
                    } else {
                        uint16_t ha = dt == RING_FLOAT16 ? ring__f32_to_f16((float)a) : ring__f32_to_bf16((float)a);
                        uint16_t hb = dt == RING_FLOAT16 ? ring__f32_to_f16((float)b) : ring__f32_to_bf16((float)b);
                        uint16_t hz;
                        memcpy(x, &ha, 2);
                        memcpy(y, &hb, 2);
                        ring__reduce_host(z, x, y, 1, dt, op, 1);
                        memcpy(&hz, z, 2);
                        got = dt == RING_FLOAT16 ? ring__f16_to_f32(hz) : ring__bf16_to_f32(hz);
                    }
                    double want = ref_op(a, b, op, 1);
                    if (!same_value(got, want))
                        TEST_FAIL("%s %s(%g, %g) = %g, want %g",
                                  ring_dtype_name(dt), ring_op_name(op), a, b,
                                  got, want);
                }
            }
        }
    }
    /* f16 overflow on a sum: 65504 + 32 = 65536, beyond the largest half. */
    uint16_t a = ring__f32_to_f16(65504.0f), b = ring__f32_to_f16(32.0f), z;
    ring__reduce_host(&z, &a, &b, 1, RING_FLOAT16, RING_SUM, 1);
    TEST_EQ(z, 0x7c00);
}

/* Random operands through every dtype x op, for counts that exercise the
 * vector loops' tails, with dst aliasing a as the ring uses it. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random value of dtype: halves with exponents in [-5, 5], so that a sum
 * of two is exact in float and the reference's single rounding agrees. */
static double random_value(ring_dtype_t dtype)
{
    uint64_t r = next_random();
    double m = (double)(r % 2048) / 1024.0 - 1.0; /* [-1, 1) */
    switch (dtype) {
    case RING_FLOAT16: return ref_f16_round(ldexp(m, (int)(r >> 20) % 11 - 5));
    case RING_BFLOAT16: return ref_bf16_round(ldexp(m, (int)(r >> 20) % 11 - 5));
    case RING_FLOAT32: return (float)ldexp(m, (int)(r >> 20) % 41 - 20);
    case RING_FLOAT64: return ldexp(m, (int)(r >> 20) % 41 - 20);
    case RING_INT32: return (double)(int32_t)(r >> 32);
    case RING_INT64: return (double)(int64_t)r;
    default: return (double)(uint8_t)r;
    }
}

static void put(void *buf, size_t i, ring_dtype_t dtype, double v, uint64_t raw)
{
    switch (dtype) {
    case RING_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case RING_FLOAT64: ((double *)buf)[i] = v; break;
    case RING_FLOAT16: ((uint16_t *)buf)[i] = ring__f32_to_f16((float)v); break;
    case RING_BFLOAT16: ((uint16_t *)buf)[i] = ring__f32_to_bf16((float)v); break;
    case RING_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)raw; break;
    case RING_INT64: ((int64_t *)buf)[i] = (int64_t)raw; break;
    default: ((uint8_t *)buf)[i] = (uint8_t)raw; break;
    }
}

static int check_integer(const void *za, const void *xa, const void *ya,
                         size_t i, ring_dtype_t dtype, ring_op_t op)
{
    uint64_t x, y, z, want;
    int64_t sx, sy;
    switch (dtype) {
    case RING_INT32:
        sx = ((const int32_t *)xa)[i]; sy = ((const int32_t *)ya)[i];
        x = (uint32_t)sx; y = (uint32_t)sy; z = (uint32_t)((const int32_t *)za)[i];
        break;
    case RING_INT64:
        sx = ((const int64_t *)xa)[i]; sy = ((const int64_t *)ya)[i];
        x = (uint64_t)sx; y = (uint64_t)sy; z = (uint64_t)((const int64_t *)za)[i];
        break;
    default:
        x = ((const uint8_t *)xa)[i]; y = ((const uint8_t *)ya)[i];
        sx = (int64_t)x; sy = (int64_t)y; z = ((const uint8_t *)za)[i];
        break;
    }
    uint64_t mask = dtype == RING_INT32 ? 0xffffffffu : dtype == RING_UINT8 ? 0xff : ~0ull;
    switch (op) {
    case RING_SUM: want = (x + y) & mask; break;
    case RING_PRODUCT: want = (x * y) & mask; break;
    case RING_MIN: want = (sx < sy ? x : y) & mask; break;
    default: want = (sx > sy ? x : y) & mask; break;
    }
    return z == want;
}

static void test_random_reductions(void)
{
    const size_t counts[] = {1, 2, 7, 8, 15, 16, 17, 31, 33, 1000, 1027};
    for (int dt = 0; dt < RING_DTYPE_COUNT; dt++) {
        for (int op = 0; op < RING_OP_COUNT; op++) {
            if (op == RING_AVERAGE && dt >= RING_INT32) continue;
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                size_t n = counts[c], esize = ring_dtype_size(dt);
                int divisor = op == RING_AVERAGE ? 3 : 1;
                unsigned char x[1027 * 8], y[1027 * 8], z[1027 * 8];
                double xv[1027], yv[1027];
                for (size_t i = 0; i < n; i++) {
                    xv[i] = random_value(dt);
                    yv[i] = random_value(dt);
                    put(x, i, dt, xv[i], next_random());
                    put(y, i, dt, yv[i], next_random());
                }
                memcpy(z, x, n * esize);
                ring__reduce_host(z, z, y, n, dt, op, divisor); /* dst == a */
                for (size_t i = 0; i < n; i++) {
                    int ok;
                    if (dt >= RING_INT32) {
                        ok = check_integer(z, x, y, i, dt, op);
                    } else {
                        double a, b, got, want;
                        if (dt == RING_FLOAT32) {
                            a = ((float *)x)[i]; b = ((float *)y)[i];
                            got = ((float *)z)[i];
                            /* AVERAGE: the float sum, then divided. */
                            want = op == RING_AVERAGE
                                       ? (float)((float)(a + b) / divisor)
                                       : (float)ref_op(a, b, op, divisor);
                        } else if (dt == RING_FLOAT64) {
                            a = ((double *)x)[i]; b = ((double *)y)[i];
                            got = ((double *)z)[i];
                            want = ref_op(a, b, op, divisor);
                        } else {
                            int h = dt == RING_FLOAT16;
                            uint16_t hx, hy, hz;
                            memcpy(&hx, x + 2 * i, 2);
                            memcpy(&hy, y + 2 * i, 2);
                            memcpy(&hz, z + 2 * i, 2);
                            a = h ? ref_f16_decode(hx) : ring__bf16_to_f32(hx);
                            b = h ? ref_f16_decode(hy) : ring__bf16_to_f32(hy);
                            got = h ? ref_f16_decode(hz) : ring__bf16_to_f32(hz);
                            want = ref_op(a, b, op, divisor);
                            want = h ? ref_f16_round(want) : ref_bf16_round(want);
                        }
                        ok = same_value(got, want);
                        if (!ok)
                            TEST_FAIL("%s %s(%a, %a) = %a, want %a",
                                      ring_dtype_name(dt), ring_op_name(op), a,
                                      b, got, want);
                    }
                    if (!ok) {
                        TEST_FAIL("dtype=%s op=%s count=%zu: element %zu wrong",
                                  ring_dtype_name(dt), ring_op_name(op), n, i);
                        break;
                    }
                }
            }
        }
    }
}

/* ---- N inputs in one pass ---- */

/* Half types widened to float (others unchanged) into out. */
static ring_dtype_t widen_half(const void *in, size_t count, ring_dtype_t dt,
                               void *out)
{
    if (dt != RING_FLOAT16 && dt != RING_BFLOAT16) {
        memcpy(out, in, count * ring_dtype_size(dt));
        return dt;
    }
    for (size_t i = 0; i < count; i++)
        ((float *)out)[i] = dt == RING_FLOAT16
                                ? ring__f16_to_f32(((const uint16_t *)in)[i])
                                : ring__bf16_to_f32(((const uint16_t *)in)[i]);
    return RING_FLOAT32;
}

/* ring__reduce_host_n against a chain of ring__reduce_host over the same
 * inputs in the same order, half types widened first and rounded once at
 * the end (what one pass promises); bitwise. The result overwrites the
 * last input, as shm's packed own input can be. Counts cross the tile. */
static void test_reduce_n(void)
{
    enum { MAXN = 5, MAXC = 1300 };
    const size_t counts[] = {1, 511, 512, 513, MAXC};
    static unsigned char in[MAXN][MAXC * 8], wide[MAXN][MAXC * 8],
        want[MAXC * 8], back[MAXC * 8];
    for (int dt = 0; dt < RING_DTYPE_COUNT; dt++)
        for (int op = 0; op < RING_OP_COUNT; op++)
            for (int n = 1; n <= MAXN; n++)
                for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                    if (op == RING_AVERAGE && dt >= RING_INT32) continue;
                    size_t count = counts[c], esize = ring_dtype_size(dt);
                    int divisor = op == RING_AVERAGE ? n : 1;
                    const void *ins[MAXN];
                    ring_dtype_t wt = (ring_dtype_t)dt;
                    for (int k = 0; k < n; k++) {
                        for (size_t i = 0; i < count; i++)
                            put(in[k], i, dt, random_value(dt), next_random());
                        wt = widen_half(in[k], count, dt, wide[k]);
                        ins[k] = in[k];
                    }
                    memcpy(want, wide[0], count * ring_dtype_size(wt));
                    for (int k = 1; k < n; k++)
                        ring__reduce_host(want, want, wide[k], count, wt, op,
                                          k == n - 1 ? divisor : 1);
                    for (size_t i = 0; wt != (ring_dtype_t)dt && i < count; i++) {
                        float v = ((float *)want)[i];
                        ((uint16_t *)back)[i] = dt == RING_FLOAT16
                                                    ? ring__f32_to_f16(v)
                                                    : ring__f32_to_bf16(v);
                    }
                    const void *expect = wt != (ring_dtype_t)dt ? back : want;
                    ring__reduce_host_n(in[n - 1], ins, n, count, dt, op,
                                        divisor);
                    if (memcmp(in[n - 1], expect, count * esize) != 0)
                        TEST_FAIL("reduce_host_n dtype=%s op=%s n=%d "
                                  "count=%zu differs from the chain",
                                  ring_dtype_name(dt), ring_op_name(op), n,
                                  count);
                }
}

/* ---- block layout, simulated for many rank counts ---- */

static void test_block_layout(void)
{
    const size_t counts[] = {0, 1, 2, 5, 6, 7, 97, 1000003};
    for (int n = 1; n <= 9; n++) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t next = 0, lo = (size_t)-1, hi = 0;
            for (int b = 0; b < n; b++) {
                size_t bc = ring__block_count(counts[c], n, b);
                TEST_EQ(ring__block_offset(counts[c], n, b), next);
                next += bc;
                lo = bc < lo ? bc : lo;
                hi = bc > hi ? bc : hi;
            }
            TEST_EQ(next, counts[c]);
            TEST_TRUE(hi - lo <= 1);
        }
    }
    TEST_EQ(ring__mod(-1, 5), 4);
    TEST_EQ(ring__mod(-7, 5), 3);
}

static void test_host_copy(void)
{
    enum { MAX = 9000, PAD = 64 };
    static unsigned char src[MAX + 2 * PAD], dst[MAX + 2 * PAD],
        want[MAX + 2 * PAD];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)(i * 7 + 3);
    static const size_t lens[] = {0,    1,    15,   63,   64,   127,
                                  2047, 2048, 2049, 2111, 2112, 2175,
                                  4096, 4097, 8191, 8192, MAX};
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t so = 0; so < 3; so++)
            for (size_t doff = 0; doff < 3; doff++) {
                size_t n = lens[l];
                memset(dst, 0xA5, sizeof dst);
                memset(want, 0xA5, sizeof want);
                memcpy(want + PAD + doff, src + PAD + so, n);
                ring__mem_host.copy(dst + PAD + doff, src + PAD + so, n);
                if (memcmp(dst, want, sizeof dst) != 0) {
                    TEST_FAIL("host copy of %zu bytes (src +%zu, dst +%zu)",
                              n, so, doff);
                    return;
                }
            }
}

static void test_names(void)
{
    TEST_EQ(ring_dtype_size(RING_BFLOAT16), 2);
    TEST_EQ(ring_dtype_size((ring_dtype_t)42), 0);
    TEST_TRUE(ring_dtype_name((ring_dtype_t)-1) == NULL);
    TEST_TRUE(strcmp(ring_op_name(RING_AVERAGE), "avg") == 0);
    TEST_TRUE(strcmp(ring_strerror(RING_ERR_ARG), "invalid argument") == 0);
    TEST_TRUE(strcmp(ring_strerror(12345), "unknown status") == 0);
}

int main(void)
{
    test_f16_decode_all();
    test_f16_arrays();
    test_f16_encode_ties();
    test_f16_specials();
    test_bf16_encode();
    test_special_values();
    test_random_reductions();
    test_reduce_n();
    test_block_layout();
    test_names();
    test_host_copy();
    printf("test_reduce: %s\n", test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
