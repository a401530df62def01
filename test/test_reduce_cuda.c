/* test/test_reduce_cuda.c: the CUDA reduction kernels against the host
 * reductions (the reference), every dtype x op, including special values
 * and a count that is not a multiple of the block size. Exits 77 (skip)
 * when no GPU is visible, as on the CI machines. */
#include <cuda_runtime.h>
#include <string.h>
#include "ring/reduce_op.h"
#include "ring/ring_internal.h"
#include "test/test.h"

enum { COUNT = 100003 };

static void fill(unsigned char *buf, size_t nbytes, unsigned seed)
{
    /* Arbitrary bit patterns: NaNs, infinities and subnormals included. */
    for (size_t i = 0; i < nbytes; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (unsigned char)(seed >> 16);
    }
}

static int is_nan(const unsigned char *buf, size_t i, ring_dtype_t dtype)
{
    float f;
    double d;
    uint16_t h;
    switch (dtype) {
    case RING_FLOAT32: memcpy(&f, buf + 4 * i, 4); return f != f;
    case RING_FLOAT64: memcpy(&d, buf + 8 * i, 8); return d != d;
    case RING_FLOAT16:
        memcpy(&h, buf + 2 * i, 2);
        return ring__f16_to_f32(h) != ring__f16_to_f32(h);
    case RING_BFLOAT16:
        memcpy(&h, buf + 2 * i, 2);
        return ring__bf16_to_f32(h) != ring__bf16_to_f32(h);
    default: return 0;
    }
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        TEST_SKIP("no CUDA device visible");
    size_t max_bytes = (size_t)COUNT * 8;
    unsigned char *a = malloc(max_bytes), *b = malloc(max_bytes),
                  *want = malloc(max_bytes), *got = malloc(max_bytes);
    void *da, *db, *dz;
    if (cudaMalloc(&da, max_bytes) != cudaSuccess ||
        cudaMalloc(&db, max_bytes) != cudaSuccess ||
        cudaMalloc(&dz, max_bytes) != cudaSuccess)
        return TEST_HARD_ERROR;
    for (int dt = 0; dt < RING_DTYPE_COUNT; dt++) {
        size_t nbytes = COUNT * ring_dtype_size(dt);
        fill(a, nbytes, 1u + dt);
        fill(b, nbytes, 100u + dt);
        cudaMemcpy(da, a, nbytes, cudaMemcpyHostToDevice);
        cudaMemcpy(db, b, nbytes, cudaMemcpyHostToDevice);
        for (int op = 0; op < RING_OP_COUNT; op++) {
            if (op == RING_AVERAGE && dt >= RING_INT32) continue;
            for (int divisor = 1; divisor <= 3; divisor += 2) {
                ring__reduce_host(want, a, b, COUNT, dt, op, divisor);
                TEST_EQ(ring__reduce_cuda(dz, da, db, COUNT, dt, op, divisor, 0),
                        RING_OK);
                TEST_EQ(cudaMemcpy(got, dz, nbytes, cudaMemcpyDeviceToHost),
                        cudaSuccess);
                /* NaN payloads may differ between CPU and GPU arithmetic:
                 * compare NaN-ness for the floating types. */
                size_t esize = ring_dtype_size(dt);
                for (size_t i = 0; i < COUNT; i++) {
                    if (memcmp(got + i * esize, want + i * esize, esize) == 0 ||
                        (is_nan(got, i, dt) && is_nan(want, i, dt)))
                        continue;
                    TEST_FAIL("dtype=%s op=%s divisor=%d: element %zu differs",
                              ring_dtype_name(dt), ring_op_name(op), divisor, i);
                    break;
                }
            }
        }
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dz);
    free(a);
    free(b);
    free(want);
    free(got);
    printf("test_reduce_cuda: %s\n", test_failures ? "FAIL" : "ok");
    return test_exit_code();
}
