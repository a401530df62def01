/* ring/reduce_cuda.cu: the device kernels behind ring__dev_cuda
 * (ring/dev_cuda.c), and their launchers:
 *
 *   reduce     dst = a (op) b, the ring's hop (ring__reduce_host);
 *   reduce_n   dst = in[0] (op) ... (op) in[n-1] in one pass, the shared
 *              window's and IPC's reduction (ring__reduce_host_n);
 *   divide     buf /= divisor, hierarchical AVERAGE's last step
 *              (ring__divide_host);
 *   copy_batch many copies in one launch, packing and unpacking a fusion
 *              buffer (ring/copy_batch.h's body).
 *
 * The per-element arithmetic (half conversions, NaN-aware min/max) is
 * ring/reduce_op.h, shared with the host, and each kernel combines
 * elements in the host loop's order, dividing where it divides, so results
 * are the host's bit for bit (NaN payloads aside: GPUs make one canonical
 * NaN). One kernel template per operation covers every dtype x op; a dtype
 * is a small traits struct saying how it widens. Elementwise kernels read
 * and write 16 bytes a thread where every pointer is 16-byte aligned (the
 * tail, under 16 bytes, element by element), else one element a thread.
 * Not here: anything that decides what to run (ring/dev_cuda.c and the
 * collectives do).
 */
#define OMPI_SKIP_MPICXX 1 /* MPI's C++ bindings: not used, not linked */
#define MPICH_SKIP_MPICXX 1
#include <cuda_runtime.h>
#include "ring/ring_internal.h"
#include "ring/reduce_op.h"
#include "ring/copy_batch.h"

namespace {

/* ---- dtypes: T is the stored type, W the type the arithmetic is in ---- */

template <typename T_, typename W_> struct ring_native {
    typedef T_ T;
    typedef W_ W;
    __device__ static W load(T v) { return (W)v; }
    __device__ static T store(W v) { return (T)v; }
};
/* Floating types divide in W, before rounding back to T. */
template <typename T_, typename W_> struct ring_floating : ring_native<T_, W_> {
    static const bool integer = false;
    __device__ static W_ div(W_ v, int divisor) { return v / (W_)divisor; }
};
struct ring_f32 : ring_floating<float, float> {
    __device__ static float min(float a, float b) { return ring__min_f32(a, b); }
    __device__ static float max(float a, float b) { return ring__max_f32(a, b); }
};
struct ring_f64 : ring_floating<double, double> {
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
 * on the host (mod 2^bits of T, whatever W's width), and compare and
 * divide as the stored type T (the host's reduce_n divides T by
 * (T)divisor, truncating toward zero). */
template <typename T_, typename W_> struct ring_integer : ring_native<T_, W_> {
    static const bool integer = true;
    __device__ static W_ min(W_ a, W_ b) { return (T_)a < (T_)b ? a : b; }
    __device__ static W_ max(W_ a, W_ b) { return (T_)a > (T_)b ? a : b; }
    __device__ static W_ div(W_ v, int divisor)
    {
        return (W_)(T_)((T_)v / (T_)divisor);
    }
};
struct ring_i32 : ring_integer<int32_t, uint32_t> {};
struct ring_i64 : ring_integer<int64_t, uint64_t> {};
struct ring_u8 : ring_integer<uint8_t, uint32_t> {};

template <typename D>
__device__ __forceinline__ typename D::W ring_apply(typename D::W x,
                                                    typename D::W y,
                                                    ring_op_t op)
{
    switch (op) {
    case RING_PRODUCT: return x * y;
    case RING_MIN: return D::min(x, y);
    case RING_MAX: return D::max(x, y);
    default: return x + y; /* SUM and AVERAGE */
    }
}

/* V elements of T in one aligned load: 16 bytes for V = 16 / sizeof(T). */
template <typename T, int V> struct alignas(sizeof(T) * V) ring_vec {
    T v[V];
};

/* Vector i of p (16-byte aligned when 16 bytes), read and written as one
 * int4, so that every dtype gets one 128-bit access (llm.c's load128). */
template <typename T, int V>
__device__ __forceinline__ ring_vec<T, V> ring_load(const T *p, size_t i)
{
    ring_vec<T, V> x;
    if constexpr (sizeof(x) == 16) {
        int4 bits = ((const int4 *)p)[i];
        memcpy(&x, &bits, 16);
    } else {
        x = ((const ring_vec<T, V> *)p)[i];
    }
    return x;
}

template <typename T, int V>
__device__ __forceinline__ void ring_store(T *p, size_t i, ring_vec<T, V> x)
{
    if constexpr (sizeof(x) == 16) {
        int4 bits;
        memcpy(&bits, &x, 16);
        ((int4 *)p)[i] = bits;
    } else {
        ((ring_vec<T, V> *)p)[i] = x;
    }
}

/* The grid: 256 threads a block, blocks enough for one item a thread,
 * capped (a grid-stride loop does the rest); at least one block. */
enum { RING_THREADS = 256, RING_MAX_BLOCKS = 4096 };

static unsigned ring_blocks(size_t items)
{
    size_t blocks = (items + RING_THREADS - 1) / RING_THREADS;
    if (blocks > RING_MAX_BLOCKS) blocks = RING_MAX_BLOCKS;
    return blocks ? (unsigned)blocks : 1u;
}

static bool ring_aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* ---- reduce: dst = a (op) b ---- */

/* ring__reduce_host's element: AVERAGE with divisor > 1 divides the sum
 * before rounding (floating types only: AVERAGE is refused for integers,
 * and the host's integer loop has no AVERAGE). */
template <typename D>
__device__ __forceinline__ typename D::T
ring_reduce_elem(typename D::T a, typename D::T b, ring_op_t op, int divisor)
{
    typename D::W v = ring_apply<D>(D::load(a), D::load(b), op);
    if (!D::integer && op == RING_AVERAGE && divisor > 1)
        v = D::div(v, divisor);
    return D::store(v);
}

/* V > 1: a, b and dst are 16-byte aligned; the first count / V vectors
 * go V at a time, the count % V left one each by the grid's first
 * threads. dst may be a or b: each thread reads its elements before
 * writing them. */
template <typename D, int V>
__global__ void ring_reduce_kernel(typename D::T *dst, const typename D::T *a,
                                   const typename D::T *b, size_t count,
                                   ring_op_t op, int divisor)
{
    typedef typename D::T T;
    typedef ring_vec<T, V> vec;
    size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t nvec = count / V;
    for (size_t i = first; i < nvec; i += stride) {
        vec x = ring_load<T, V>(a, i), y = ring_load<T, V>(b, i), z;
#pragma unroll
        for (int j = 0; j < V; j++)
            z.v[j] = ring_reduce_elem<D>(x.v[j], y.v[j], op, divisor);
        ring_store<T, V>(dst, i, z);
    }
    size_t t = nvec * V + first;
    if (V > 1 && t < count) dst[t] = ring_reduce_elem<D>(a[t], b[t], op, divisor);
}

template <typename D>
cudaError_t ring_reduce_launch(void *dst, const void *a, const void *b,
                               size_t count, ring_op_t op, int divisor,
                               cudaStream_t stream)
{
    typedef typename D::T T;
    const int V = 16 / sizeof(T);
    if (ring_aligned16(dst) && ring_aligned16(a) && ring_aligned16(b))
        ring_reduce_kernel<D, V><<<ring_blocks(count / V), RING_THREADS, 0,
                                   stream>>>((T *)dst, (const T *)a,
                                             (const T *)b, count, op, divisor);
    else
        ring_reduce_kernel<D, 1><<<ring_blocks(count), RING_THREADS, 0,
                                   stream>>>((T *)dst, (const T *)a,
                                             (const T *)b, count, op, divisor);
    return cudaGetLastError();
}

/* ---- reduce_n: dst = in[0] (op) ... (op) in[n-1] ---- */

/* The inputs by value, as a kernel parameter (128 bytes). */
struct ring_inputs {
    const void *p[RING_DEV_MAX_INPUTS];
};

/* ring__reduce_host_n's order: the partial result starts as in[0], each
 * input in turn is combined into it (x the partial, y the input), and
 * AVERAGE with divisor > 1 divides at the end, before the one rounding.
 * n = 1 with AVERAGE is ring__divide_host. dst may be any input. */
template <typename D, int V>
__global__ void ring_reduce_n_kernel(typename D::T *dst, ring_inputs in, int n,
                                     size_t count, ring_op_t op, int divisor)
{
    typedef typename D::T T;
    typedef typename D::W W;
    typedef ring_vec<T, V> vec;
    size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t nvec = count / V;
    bool average = op == RING_AVERAGE && divisor > 1;
    for (size_t i = first; i < nvec; i += stride) {
        W acc[V];
        vec x = ring_load<T, V>((const T *)in.p[0], i);
#pragma unroll
        for (int j = 0; j < V; j++) acc[j] = D::load(x.v[j]);
        for (int k = 1; k < n; k++) {
            vec y = ring_load<T, V>((const T *)in.p[k], i);
#pragma unroll
            for (int j = 0; j < V; j++)
                acc[j] = ring_apply<D>(acc[j], D::load(y.v[j]), op);
        }
#pragma unroll
        for (int j = 0; j < V; j++)
            x.v[j] = D::store(average ? D::div(acc[j], divisor) : acc[j]);
        ring_store<T, V>(dst, i, x);
    }
    size_t t = nvec * V + first;
    if (V > 1 && t < count) {
        W acc = D::load(((const T *)in.p[0])[t]);
        for (int k = 1; k < n; k++)
            acc = ring_apply<D>(acc, D::load(((const T *)in.p[k])[t]), op);
        dst[t] = D::store(average ? D::div(acc, divisor) : acc);
    }
}

template <typename D>
cudaError_t ring_reduce_n_launch(void *dst, const ring_inputs &in, int n,
                                 size_t count, ring_op_t op, int divisor,
                                 cudaStream_t stream)
{
    typedef typename D::T T;
    const int V = 16 / sizeof(T);
    bool aligned = ring_aligned16(dst);
    for (int k = 0; k < n; k++) aligned = aligned && ring_aligned16(in.p[k]);
    if (aligned)
        ring_reduce_n_kernel<D, V><<<ring_blocks(count / V), RING_THREADS, 0,
                                     stream>>>((T *)dst, in, n, count, op,
                                               divisor);
    else
        ring_reduce_n_kernel<D, 1><<<ring_blocks(count), RING_THREADS, 0,
                                     stream>>>((T *)dst, in, n, count, op,
                                               divisor);
    return cudaGetLastError();
}

/* ---- copy_batch: ring/copy_batch.h's body over the grid ---- */

/* The copies travel as a kernel parameter, by value: nothing to allocate,
 * stage or free per call, and the caller's array may be on its stack
 * (ring_dev_t's contract) since the launch has copied it by the time it
 * returns. Kernel parameters are limited to 4 KB (more only from CUDA
 * 12.1 on Volta and later), so a batch goes in launches of up to 160
 * copies (160 x 24 bytes + the count = 3848 bytes), queued in order on
 * the same stream. A fusion buffer's group is rarely larger; a device
 * array would cost an allocation and a copy for every call. */
enum { RING_COPY_BATCH_LAUNCH = 160 };

struct ring_copy_batch_args {
    ring_copy_t copies[RING_COPY_BATCH_LAUNCH];
};

static_assert(sizeof(ring_copy_batch_args) + sizeof(size_t) <= 4096,
              "copy_batch's kernel parameters must fit in 4 KB");

/* A block a chunk (ring/copy_batch.h), its threads striding through it in
 * 16-byte words where both sides are aligned. */
__global__ void ring_copy_batch_kernel(ring_copy_batch_args args, size_t n)
{
    ring__copy_batch_thread(args.copies, n, blockIdx.x, gridDim.x,
                            threadIdx.x, blockDim.x);
}

/* A grid of up to 1024 blocks covers the SMs of any GPU several times. */
enum { RING_COPY_THREADS = 512, RING_COPY_BLOCKS = 1024 };

/* ring_dev_t's convert: reduce_op.h's element, as the host loop runs it
 * (ring__convert_host). */
__global__ void ring_convert_kernel(void *dst, ring_dtype_t dst_dtype,
                                    const void *src, ring_dtype_t src_dtype,
                                    size_t count)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += stride)
        ring__store_f32(dst, dst_dtype, i, ring__load_f32(src, src_dtype, i));
}

} // namespace

/* ---- the launchers (extern "C", declared in ring/ring_internal.h) ---- */

/* RING_CHECK_CUDA for a launch's cudaGetLastError(), naming the kernel. */
#define RING_CHECK_LAUNCH(err, kernel)                                         \
    do {                                                                       \
        cudaError_t ring__launch_err = (err);                                  \
        if (ring__launch_err != cudaSuccess) {                                 \
            ring__log_cuda_error((int)ring__launch_err, kernel, __FILE__,      \
                                 __LINE__);                                    \
            status = RING_ERR_CUDA;                                            \
            goto out;                                                          \
        }                                                                      \
    } while (0)

/* One dtype switch for every elementwise launcher: calls launch<D>(...)
 * for dtype's traits D. */
#define RING_DTYPE_SWITCH(dtype, err, launch, ...)                             \
    switch (dtype) {                                                           \
    case RING_FLOAT32: err = launch<ring_f32>(__VA_ARGS__); break;             \
    case RING_FLOAT64: err = launch<ring_f64>(__VA_ARGS__); break;             \
    case RING_FLOAT16: err = launch<ring_f16>(__VA_ARGS__); break;             \
    case RING_BFLOAT16: err = launch<ring_bf16>(__VA_ARGS__); break;           \
    case RING_INT32: err = launch<ring_i32>(__VA_ARGS__); break;               \
    case RING_INT64: err = launch<ring_i64>(__VA_ARGS__); break;               \
    case RING_UINT8: err = launch<ring_u8>(__VA_ARGS__); break;                \
    default: return RING_ERR_ARG;                                              \
    }

extern "C" int ring__reduce_cuda(void *dst, const void *a, const void *b,
                                 size_t count, ring_dtype_t dtype, ring_op_t op,
                                 int divisor, void *stream)
{
    int status = RING_OK;
    cudaError_t err = cudaSuccess;
    if (count == 0) return RING_OK;
    RING_DTYPE_SWITCH(dtype, err, ring_reduce_launch, dst, a, b, count, op,
                      divisor, (cudaStream_t)stream);
    RING_CHECK_LAUNCH(err, "ring_reduce_kernel<<<>>>");
out:
    return status;
}

extern "C" int ring__reduce_n_cuda(void *dst, const void *const *in, int n,
                                   size_t count, ring_dtype_t dtype,
                                   ring_op_t op, int divisor, void *stream)
{
    int status = RING_OK;
    cudaError_t err = cudaSuccess;
    ring_inputs inputs = {};
    if (n < 1 || n > RING_DEV_MAX_INPUTS) {
        ring__log("ring__reduce_n_cuda: %d inputs (1 to %d)", n,
                  (int)RING_DEV_MAX_INPUTS);
        return RING_ERR_ARG;
    }
    if (count == 0) return RING_OK;
    for (int k = 0; k < n; k++) inputs.p[k] = in[k];
    RING_DTYPE_SWITCH(dtype, err, ring_reduce_n_launch, dst, inputs, n, count,
                      op, divisor, (cudaStream_t)stream);
    RING_CHECK_LAUNCH(err, "ring_reduce_n_kernel<<<>>>");
out:
    return status;
}

extern "C" int ring__divide_cuda(void *buf, size_t count, ring_dtype_t dtype,
                                 int divisor, void *stream)
{
    /* As the host does it: a reduction of one input, AVERAGE. With
     * divisor <= 1 it still rewrites each element through its widening
     * (a signalling NaN comes back quiet), as the host's does. */
    const void *in = buf;
    return ring__reduce_n_cuda(buf, &in, 1, count, dtype, RING_AVERAGE,
                               divisor, stream);
}

extern "C" int ring__convert_cuda(void *dst, ring_dtype_t dst_dtype,
                                  const void *src, ring_dtype_t src_dtype,
                                  size_t count, void *stream)
{
    int status = RING_OK;
    if (!ring__convert_ok(dst_dtype, src_dtype)) return RING_ERR_ARG;
    if (count == 0) return RING_OK;
    size_t blocks = (count + RING_THREADS - 1) / RING_THREADS;
    if (blocks > RING_MAX_BLOCKS) blocks = RING_MAX_BLOCKS;
    ring_convert_kernel<<<(unsigned)blocks, RING_THREADS, 0,
                          (cudaStream_t)stream>>>(dst, dst_dtype, src,
                                                  src_dtype, count);
    RING_CHECK_LAUNCH(cudaGetLastError(), "ring_convert_kernel<<<>>>");
out:
    return status;
}

extern "C" int ring__copy_batch_cuda(const ring_copy_t *copies, size_t n,
                                     void *stream)
{
    int status = RING_OK;
    ring_copy_batch_args args;
    for (size_t at = 0; at < n; at += RING_COPY_BATCH_LAUNCH) {
        size_t len = n - at;
        if (len > RING_COPY_BATCH_LAUNCH) len = RING_COPY_BATCH_LAUNCH;
        memcpy(args.copies, copies + at, len * sizeof(ring_copy_t));
        unsigned nblocks = (unsigned)ring__copy_batch_blocks(
            args.copies, len, RING_COPY_BLOCKS);
        ring_copy_batch_kernel<<<nblocks, RING_COPY_THREADS, 0,
                                 (cudaStream_t)stream>>>(args, len);
        RING_CHECK_LAUNCH(cudaGetLastError(), "ring_copy_batch_kernel<<<>>>");
    }
out:
    return status;
}
