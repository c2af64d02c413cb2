// Shared device helpers of Arbor's CUDA kernels: element types, 16-byte vector loads/stores, the
// online softmax state and its warp/block reductions, error bookkeeping for the C ABI.
#ifndef ARBOR_CUDA_COMMON_CUH
#define ARBOR_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "arbor_cuda.h"

namespace arbor_cuda {

// Below this e^d underflows fp32's normal range and is taken as exactly 0 (same as the CPU kernels).
#define ARBOR_EXP_LO (-87.3365447505531f)

// Element types: storage type, elements per 16-byte vector, conversions.
struct F32 {
    typedef float T;
    static constexpr int VEC = 4;
    __device__ __forceinline__ static float to_f32(float x) { return x; }
    __device__ __forceinline__ static float from_f32(float x) { return x; }
};
struct BF16 {
    typedef uint16_t T;
    static constexpr int VEC = 8;
    __device__ __forceinline__ static float to_f32(uint16_t x) { return __uint_as_float((unsigned)x << 16); }
    __device__ __forceinline__ static uint16_t from_f32(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};
struct F16 {
    typedef uint16_t T;
    static constexpr int VEC = 8;
    __device__ __forceinline__ static float to_f32(uint16_t x) { return __half2float(__ushort_as_half(x)); }
    __device__ __forceinline__ static uint16_t from_f32(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

// Loads N consecutive elements of type E (N * sizeof(E::T) a multiple of 16 bytes, p 16-byte aligned)
// through the read-only path and converts them to fp32.
template <class E, int N>
__device__ __forceinline__ void load_vec(const typename E::T* p, float (&out)[N]) {
    constexpr int NV = N * (int)sizeof(typename E::T) / 16;
    union {
        uint4 v[NV];
        typename E::T e[N];
    } u;
#pragma unroll
    for (int i = 0; i < NV; ++i) u.v[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = E::to_f32(u.e[i]);
}

template <class E, int N>
__device__ __forceinline__ void store_vec(typename E::T* p, const float (&in)[N]) {
    constexpr int NV = N * (int)sizeof(typename E::T) / 16;
    union {
        uint4 v[NV];
        typename E::T e[N];
    } u;
#pragma unroll
    for (int i = 0; i < N; ++i) u.e[i] = E::from_f32(in[i]);
#pragma unroll
    for (int i = 0; i < NV; ++i) reinterpret_cast<uint4*>(p)[i] = u.v[i];
}

// Online softmax state of a set of z values, relative to its max m:
//   s = sum e^{z-m},  u = sum e^{z-m} (z-m)        (docs/algorithms.md §1: U, S)
struct SoftmaxState {
    float m, s, u;
};

__device__ __forceinline__ SoftmaxState state_empty() { return SoftmaxState{-INFINITY, 0.0f, 0.0f}; }

// Adds k values (already scaled by 1/temperature) with one rescale for the group.
template <int K>
__device__ __forceinline__ void state_add(SoftmaxState& st, const float (&x)[K], int k, bool& nan) {
    float lm = -INFINITY;
#pragma unroll
    for (int i = 0; i < K; ++i) {
        if (i < k) {
            nan |= (x[i] != x[i]);
            lm = fmaxf(lm, x[i]);
        }
    }
    if (lm == -INFINITY) return;
    if (lm > st.m) {
        if (st.m == -INFINITY) {
            st.s = 0.0f;
            st.u = 0.0f;
        } else {
            const float d = st.m - lm, sc = __expf(d);
            st.u = sc * (st.u + d * st.s);
            st.s *= sc;
        }
        st.m = lm;
    }
#pragma unroll
    for (int i = 0; i < K; ++i) {
        if (i < k) {
            const float d = x[i] - st.m, dc = fmaxf(d, ARBOR_EXP_LO);
            const float e = d >= ARBOR_EXP_LO ? __expf(dc) : 0.0f;
            st.s += e;
            st.u = fmaf(e, dc, st.u);
        }
    }
}

__device__ __forceinline__ SoftmaxState state_merge(SoftmaxState a, SoftmaxState b) {
    if (b.m > a.m) {
        SoftmaxState t = a;
        a = b;
        b = t;
    }
    if (b.m == -INFINITY) return a;
    const float d = b.m - a.m, sc = __expf(d);
    a.u += sc * (b.u + d * b.s);
    a.s += sc * b.s;
    return a;
}

__device__ __forceinline__ SoftmaxState warp_merge(SoftmaxState st) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        SoftmaxState o;
        o.m = __shfl_xor_sync(0xffffffffu, st.m, off);
        o.s = __shfl_xor_sync(0xffffffffu, st.s, off);
        o.u = __shfl_xor_sync(0xffffffffu, st.u, off);
        st = state_merge(st, o);
    }
    return st;
}

// Block-wide merge; every thread gets the result. blockDim.x must be a multiple of 32 (<= 1024).
__device__ __forceinline__ SoftmaxState block_merge(SoftmaxState st) {
    __shared__ SoftmaxState partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    st = warp_merge(st);
    __syncthreads();  // partial[] may still be read by a previous call
    if (lane == 0) partial[warp] = st;
    __syncthreads();
    st = lane < nwarps ? partial[lane] : state_empty();
    return warp_merge(st);
}

// Softmax statistics of z = row[0:n] * inv_t computed by the whole block (one read of the row). The products are
// __fmul_rn: rounded, never merged into an FMA with the z - m that follows (the CPU kernels' zrel, the label's
// log-prob and the max take the rounded product).
// `vec_ok`: the row start is 16-byte aligned, so the vector path may be used.
template <class E>
__device__ SoftmaxState block_row_stats(const typename E::T* row, int64_t n, float inv_t, bool vec_ok, bool& nan_out) {
    constexpr int VEC = E::VEC;
    SoftmaxState st = state_empty();
    bool nan = false;
    const int64_t nvec = vec_ok ? n / VEC : 0;
    for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
        float x[VEC];
        load_vec<E, VEC>(row + i * VEC, x);
#pragma unroll
        for (int k = 0; k < VEC; ++k) x[k] = __fmul_rn(x[k], inv_t);
        state_add<VEC>(st, x, VEC, nan);
    }
    for (int64_t j = nvec * VEC + threadIdx.x; j < n; j += blockDim.x) {
        float x[1] = {__fmul_rn(E::to_f32(row[j]), inv_t)};
        state_add<1>(st, x, 1, nan);
    }
    nan_out = __syncthreads_or(nan) != 0;
    return block_merge(st);
}

// Threads per block for a row of n columns (at most ARBOR_ROW_MAX_THREADS).
#define ARBOR_ROW_MAX_THREADS 512
static inline int row_block_threads(int64_t n) { return n >= 32768 ? 512 : (n >= 2048 ? 256 : 128); }

static inline unsigned row_grid(int64_t rows) { return (unsigned)(rows < (1 << 20) ? rows : (1 << 20)); }

static inline bool aligned16(const void* p, int64_t row_stride_bytes) {
    return ((uintptr_t)p % 16 == 0) && (row_stride_bytes % 16 == 0);
}

__device__ __forceinline__ int64_t read_label(const void* labels, int label_dtype, int64_t r) {
    return label_dtype == ARBOR_I32 ? (int64_t)((const int32_t*)labels)[r] : ((const int64_t*)labels)[r];
}

// Records a CUDA error for arbor_cuda_last_error and maps it to the ABI's code.
int record_cuda_error(cudaError_t err);

// Records a message (printf format) for arbor_cuda_last_error and returns `code`: failures that are not CUDA
// errors (cuBLAS statuses, cuBLAS not loaded).
int record_error(int code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace arbor_cuda

#endif
