/* ring/reduce_cuda.cu: the reductions of ring/reduce_host.c as CUDA kernels,
 * for device buffers. The per-element arithmetic (half conversions, NaN-aware
 * min/max) is ring/reduce_op.h, shared with the host, so the host tests check
 * it; this file only adds the launch. One kernel template covers every
 * dtype x op; a dtype is a small traits struct saying how it widens.
 */
#define OMPI_SKIP_MPICXX 1 /* MPI's C++ bindings: not used, not linked */
#define MPICH_SKIP_MPICXX 1
#include <cuda_runtime.h>
#include "ring/ring_internal.h"
#include "ring/reduce_op.h"

namespace {

/* T is the stored type, W the type the arithmetic happens in. */
template <typename T_, typename W_> struct ring_native {
    typedef T_ T;
    typedef W_ W;
    __device__ static W load(T v) { return (W)v; }
    __device__ static T store(W v) { return (T)v; }
};
struct ring_f32 : ring_native<float, float> {
    static const bool integer = false;
    __device__ static float min(float a, float b) { return ring__min_f32(a, b); }
    __device__ static float max(float a, float b) { return ring__max_f32(a, b); }
};
struct ring_f64 : ring_native<double, double> {
    static const bool integer = false;
    __device__ static double min(double a, double b) { return ring__min_f64(a, b); }
    __device__ static double max(double a, double b) { return ring__max_f64(a, b); }
};
struct ring_f16 : ring_f32 {
    typedef uint16_t T;
    __device__ static float load(uint16_t v) { return ring__f16_to_f32(v); }
    __device__ static uint16_t store(float v) { return ring__f32_to_f16(v); }
};
struct ring_bf16 : ring_f32 {
    typedef uint16_t T;
    __device__ static float load(uint16_t v) { return ring__bf16_to_f32(v); }
    __device__ static uint16_t store(float v) { return ring__f32_to_bf16(v); }
};
/* Integers add and multiply in their unsigned twin W, so overflow wraps as
 * on the host, and compare as the signed stored type T. */
template <typename T_, typename W_> struct ring_integer : ring_native<T_, W_> {
    static const bool integer = true;
    __device__ static W_ min(W_ a, W_ b) { return (T_)a < (T_)b ? a : b; }
    __device__ static W_ max(W_ a, W_ b) { return (T_)a > (T_)b ? a : b; }
};
struct ring_i32 : ring_integer<int32_t, uint32_t> {};
struct ring_i64 : ring_integer<int64_t, uint64_t> {};
struct ring_u8 : ring_integer<uint8_t, uint32_t> {};

template <typename D>
__device__ typename D::W ring_apply(typename D::W x, typename D::W y,
                                    ring_op_t op)
{
    switch (op) {
    case RING_PRODUCT: return x * y;
    case RING_MIN: return D::min(x, y);
    case RING_MAX: return D::max(x, y);
    default: return x + y; /* SUM and AVERAGE */
    }
}

template <typename D>
__global__ void ring_reduce_kernel(typename D::T *dst, const typename D::T *a,
                                   const typename D::T *b, size_t count,
                                   ring_op_t op, int divisor)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += stride) {
        typename D::W v = ring_apply<D>(D::load(a[i]), D::load(b[i]), op);
        if (!D::integer && op == RING_AVERAGE && divisor > 1)
            v = v / (typename D::W)divisor;
        dst[i] = D::store(v);
    }
}

template <typename D>
cudaError_t ring_launch(void *dst, const void *a, const void *b, size_t count,
                        ring_op_t op, int divisor, cudaStream_t stream)
{
    const unsigned threads = 256;
    size_t blocks = (count + threads - 1) / threads;
    if (blocks > 4096) blocks = 4096; /* the grid-stride loop does the rest */
    ring_reduce_kernel<D><<<(unsigned)blocks, threads, 0, stream>>>(
        (typename D::T *)dst, (const typename D::T *)a,
        (const typename D::T *)b, count, op, divisor);
    return cudaGetLastError();
}

} // namespace

extern "C" int ring__reduce_cuda(void *dst, const void *a, const void *b,
                                 size_t count, ring_dtype_t dtype, ring_op_t op,
                                 int divisor, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t err = cudaSuccess;
    if (count == 0) return RING_OK;
    switch (dtype) {
    case RING_FLOAT32: err = ring_launch<ring_f32>(dst, a, b, count, op, divisor, s); break;
    case RING_FLOAT64: err = ring_launch<ring_f64>(dst, a, b, count, op, divisor, s); break;
    case RING_FLOAT16: err = ring_launch<ring_f16>(dst, a, b, count, op, divisor, s); break;
    case RING_BFLOAT16: err = ring_launch<ring_bf16>(dst, a, b, count, op, divisor, s); break;
    case RING_INT32: err = ring_launch<ring_i32>(dst, a, b, count, op, divisor, s); break;
    case RING_INT64: err = ring_launch<ring_i64>(dst, a, b, count, op, divisor, s); break;
    case RING_UINT8: err = ring_launch<ring_u8>(dst, a, b, count, op, divisor, s); break;
    default: return RING_ERR_ARG;
    }
    if (err != cudaSuccess) {
        ring__log("ring__reduce_cuda: kernel launch failed: %s",
                  cudaGetErrorString(err));
        return RING_ERR_CUDA;
    }
    return RING_OK;
}
