// Fused output projection + token statistics + policy loss — CUDA kernels of the ABI in
// native/include/arbor/fused_linear.h (the two passes are described there). The products are cuBLAS
// (loaded with dlopen at the first call, so the library builds without the cuBLAS headers and loads on
// machines without it: ARBOR_ERR_UNSUPPORTED then); the per-row work reuses the token-stats building
// blocks (block_row_stats, grad_elem) and the shared per-token loss (policy_loss_token.h).
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <mutex>

#include "fused_linear_layout.h"

namespace arbor_cuda {
namespace fl {

// ---- cuBLAS, declared by hand (stable ABI values from cublas_api.h / library_types.h) -------------
enum { kOpN = 0, kOpT = 1, kCompute32F = 68, kGemmDefault = -1 };
typedef void* BlasHandle;
typedef int (*CreateFn)(BlasHandle*);
typedef int (*SetStreamFn)(BlasHandle, cudaStream_t);
typedef int (*GemmExFn)(BlasHandle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,
                        int a_type, int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type,
                        int ldc, int compute_type, int algo);

struct Blas {
    CreateFn create = nullptr;
    SetStreamFn set_stream = nullptr;
    GemmExFn gemm_ex = nullptr;
    bool ok = false;
    char why[200] = "";  // why not ok, for arbor_cuda_last_error
};

// cublasStatus_t's names (cublas_api.h), for the messages of failed calls.
static const char* status_name(int st) {
    switch (st) {
        case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
        case 7: return "CUBLAS_STATUS_INVALID_VALUE";
        case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
        case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
        default: return "unknown status";
    }
}

static const Blas& blas() {
    static Blas b;
    static std::once_flag once;
    std::call_once(once, [] {
        const char* names[] = {getenv("ARBOR_CUBLAS"), "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
        void* lib = nullptr;
        const char* name = nullptr;
        for (const char* n : names) {
            if (n != nullptr && *n && (lib = dlopen(n, RTLD_NOW | RTLD_LOCAL)) != nullptr) {
                name = n;
                break;
            }
            const char* e = n != nullptr && *n ? dlerror() : nullptr;
            if (e != nullptr && b.why[0] == 0)  // the first failure (ARBOR_CUBLAS's where it is set)
                snprintf(b.why, sizeof b.why, "dlopen of ARBOR_CUBLAS / libcublas.so.13 / .12 / .so failed: %s", e);
        }
        if (lib == nullptr) return;
        b.create = (CreateFn)dlsym(lib, "cublasCreate_v2");
        b.set_stream = (SetStreamFn)dlsym(lib, "cublasSetStream_v2");
        b.gemm_ex = (GemmExFn)dlsym(lib, "cublasGemmEx");
        b.ok = b.create && b.set_stream && b.gemm_ex;
        if (!b.ok)
            snprintf(b.why, sizeof b.why, "%s lacks%s%s%s", name, b.create ? "" : " cublasCreate_v2",
                     b.set_stream ? "" : " cublasSetStream_v2", b.gemm_ex ? "" : " cublasGemmEx");
    });
    return b;
}

// One handle per thread and device (cuBLAS handles must not be shared by threads using different
// streams); created at first use and kept for the thread's life.
static int handle_for(cudaStream_t s, BlasHandle* out) {
    const Blas& b = blas();
    if (!b.ok) return record_error(ARBOR_ERR_UNSUPPORTED, "cuBLAS not loaded: %s", b.why);
    int dev = 0;
    const cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return record_cuda_error(err);
    if (dev < 0 || dev >= 64) return record_error(ARBOR_ERR_CUDA, "cuBLAS handles: device %d not in [0, 64)", dev);
    static thread_local BlasHandle handles[64] = {};
    if (handles[dev] == nullptr) {
        const int st = b.create(&handles[dev]);
        if (st != 0) {
            handles[dev] = nullptr;
            return record_error(ARBOR_ERR_CUDA, "cublasCreate_v2 failed on device %d: cuBLAS status %d (%s)", dev, st,
                                status_name(st));
        }
    }
    const int st = b.set_stream(handles[dev], s);
    if (st != 0)
        return record_error(ARBOR_ERR_CUDA, "cublasSetStream_v2 failed on device %d: cuBLAS status %d (%s)", dev, st,
                            status_name(st));
    *out = handles[dev];
    return ARBOR_OK;
}

// A product's cuBLAS status, unchanged; a failure also records the status and the row-major product's shape
// (check_status then maps it to ARBOR_ERR_CUDA).
static int gemm_status(int st, const char* form, int m, int n, int k, int lda, int ldb, int ldc, int in_type) {
    if (st != 0)
        record_error(ARBOR_ERR_CUDA,
                     "cublasGemmEx failed: cuBLAS status %d (%s) for row-major %s, m %d n %d k %d, lda %d ldb %d "
                     "ldc %d, A/B type %d",
                     st, status_name(st), form, m, n, k, lda, ldb, ldc, in_type);
    return st;
}

// Row-major C[m, n] = op(A) op(B) as the column-major product Cᵀ = op(B)ᵀ op(A)ᵀ.
struct Gemm {
    BlasHandle h;
    int in_type;  // CUDA_R_32F or CUDA_R_16BF for the inputs; C is always fp32
    // C[m, n] (+)= A[m, k] · B[n, k]ᵀ   (A, B row-major with leading dimensions lda, ldb)
    int abt(int m, int n, int k, const void* a, int lda, const void* b, int ldb, float beta, float* c, int ldc,
            int a_type, int b_type) const {
        const float one = 1.0f;
        return gemm_status(blas().gemm_ex(h, kOpT, kOpN, n, m, k, &one, b, b_type, ldb, a, a_type, lda, &beta, c,
                                          CUDA_R_32F, ldc, kCompute32F, kGemmDefault),
                           "C[m,n] = A[m,k] B[n,k]^T (logits tile = h W^T)", m, n, k, lda, ldb, ldc, a_type);
    }
    // C[m, n] (+)= A[m, k] · B[k, n]
    int ab(int m, int n, int k, const void* a, int lda, const void* b, int ldb, float beta, float* c, int ldc,
           int a_type, int b_type) const {
        const float one = 1.0f;
        return gemm_status(blas().gemm_ex(h, kOpN, kOpN, n, m, k, &one, b, b_type, ldb, a, a_type, lda, &beta, c,
                                          CUDA_R_32F, ldc, kCompute32F, kGemmDefault),
                           "C[m,n] (+)= A[m,k] B[k,n] (dh = G W)", m, n, k, lda, ldb, ldc, a_type);
    }
    // C[m, n] (+)= A[k, m]ᵀ · B[k, n]
    int atb(int m, int n, int k, const void* a, int lda, const void* b, int ldb, float beta, float* c, int ldc,
            int a_type, int b_type) const {
        const float one = 1.0f;
        return gemm_status(blas().gemm_ex(h, kOpN, kOpT, n, m, k, &one, b, b_type, ldb, a, a_type, lda, &beta, c,
                                          CUDA_R_32F, ldc, kCompute32F, kGemmDefault),
                           "C[m,n] (+)= A[k,m]^T B[k,n] (dW = G^T h)", m, n, k, lda, ldb, ldc, a_type);
    }
};

// ---- per-row kernels ------------------------------------------------------------------------------

__device__ __forceinline__ bool fl_valid(const uint8_t* row_mask, const float* mask, int64_t r) {
    return (row_mask == nullptr || row_mask[r] != 0) && (mask == nullptr || mask[r] > 0.0f);
}

__global__ void fl_init_kernel(int64_t r0, int64_t n, double* M, double* S, double* U, float* zy) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        M[r0 + i] = -INFINITY;
        S[r0 + i] = U[r0 + i] = 0.0;
        zy[r0 + i] = NAN;
    }
}

// Pass 1 on one tile: each block merges its row's segment statistics into the row's (M, S, U) (double,
// the merge of row_stats) and picks up the label's z.
__global__ void __launch_bounds__(ARBOR_ROW_MAX_THREADS)
fl_stats_kernel(const float* __restrict__ tile, int64_t tr, int64_t tv, int64_t r0, int64_t v0,
                const void* __restrict__ labels, int label_dtype, float inv_t, const uint8_t* __restrict__ row_mask,
                const float* __restrict__ mask, double* M, double* S, double* U, float* zy, bool vec_ok) {
    for (int64_t i = blockIdx.x; i < tr; i += gridDim.x) {
        const int64_t r = r0 + i;
        if (!fl_valid(row_mask, mask, r)) continue;
        const float* row = tile + i * tv;
        bool nan;
        const SoftmaxState st = block_row_stats<F32>(row, tv, inv_t, vec_ok, nan);
        if (threadIdx.x != 0) continue;
        if (labels != nullptr) {
            const int64_t y = read_label(labels, label_dtype, r);
            if (y >= v0 && y < v0 + tv) zy[r] = __fmul_rn(row[y - v0], inv_t);
        }
        if (isnan(M[r])) continue;
        if (nan || st.m == INFINITY) {
            M[r] = NAN;
            continue;
        }
        if (st.m == -INFINITY) continue;  // an all -inf segment contributes nothing
        const double cm = st.m, cs = st.s, cu = st.u;
        if (M[r] == -INFINITY) {
            M[r] = cm; S[r] = cs; U[r] = cu;
        } else if (cm > M[r]) {
            const double dm = M[r] - cm, sc = exp(dm);
            U[r] = sc * (U[r] + dm * S[r]) + cu;
            S[r] = sc * S[r] + cs;
            M[r] = cm;
        } else {
            const double dm = cm - M[r], sc = exp(dm);
            U[r] += sc * (cu + dm * cs);
            S[r] += sc * cs;
        }
    }
}

// Finishes pass 1: lse, entropy and (with labels) logprob of every row; the policy loss (cfg != null)
// also the per-token loss → dL/dlogprob, dL/dentropy, partial sums.
__global__ void fl_finish_kernel(int64_t rows, const uint8_t* __restrict__ row_mask, const float* __restrict__ mask,
                                 const double* __restrict__ M, const double* __restrict__ S,
                                 const double* __restrict__ U, const float* __restrict__ zy, float* lse, float* ent,
                                 float* logprob_out, float* entropy_out, float* lse_out, bool with_loss,
                                 arbor_policy_loss_config c, const float* __restrict__ old_logprob,
                                 const float* __restrict__ advantages, const float* __restrict__ weights,
                                 const float* __restrict__ ref_logprob, const float* __restrict__ select_entropy,
                                 float* glp, float* gh, float* parts) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        arbor_pl::Token t;
        float lp = 0.0f, H = 0.0f, L = 0.0f;
        if (!fl_valid(row_mask, mask, r)) {
            t.g_lp = t.g_h = 0.0f;
#pragma unroll
            for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) t.part[k] = 0.0f;
        } else {
            const double m = M[r];
            if (isnan(m) || m == -INFINITY) {
                L = H = lp = NAN;
            } else {
                const double log_s = log(S[r]);
                L = (float)(m + log_s);
                H = (float)(log_s - U[r] / S[r]);
                lp = (float)(((double)zy[r] - m) - log_s);  // as the CPU path: not zy - L (L's fp32 rounding)
            }
            if (with_loss) {
                if (isnan(lp) || isnan(H)) {
                    arbor_pl::token_nan(t);
                    L = NAN;
                } else {
                    arbor_pl::token_loss(c, lp, H, old_logprob[r], advantages[r], mask[r], weights[r],
                                         ref_logprob ? ref_logprob[r] : 0.0f, select_entropy ? select_entropy[r] : H,
                                         t);
                }
            }
        }
        lse[r] = L;
        ent[r] = H;
        if (logprob_out) logprob_out[r] = lp;
        if (entropy_out) entropy_out[r] = H;
        if (lse_out) lse_out[r] = L;
        if (with_loss) {
            glp[r] = t.g_lp;
            gh[r] = t.g_h;
            pl_store_parts(parts, rows, r, t);
        }
    }
}

// Pass 2 on one tile: dL/dlogits of its segment (the token-stats backward element), in place (fp32)
// or into the bf16 copy for the bf16 products. The label column's d_y is formed against lse + what its fp32
// value lost (lse_lo from pass 1's double M, S), as the CPU path's grad_tile.
__global__ void __launch_bounds__(ARBOR_ROW_MAX_THREADS)
fl_grad_kernel(float* tile, uint16_t* tile16, int64_t tr, int64_t tv, int64_t r0, int64_t v0,
               const void* __restrict__ labels, int label_dtype, float inv_t, const float* __restrict__ mask,
               const float* __restrict__ lse, const float* __restrict__ ent, const float* __restrict__ glp,
               const float* __restrict__ gh, const double* __restrict__ M, const double* __restrict__ S) {
    for (int64_t i = blockIdx.x; i < tr; i += gridDim.x) {
        const int64_t r = r0 + i;
        float* row = tile + i * tv;
        uint16_t* row16 = tile16 != nullptr ? tile16 + i * tv : nullptr;
        const bool ok = mask[r] > 0.0f;
        const float L = lse[r], H = ent[r];
        if (!ok || !(isfinite(L) && isfinite(H))) {
            const float fill = ok ? NAN : 0.0f;
            for (int64_t j = threadIdx.x; j < tv; j += blockDim.x) {
                if (row16) row16[j] = BF16::from_f32(fill);
                else row[j] = fill;
            }
            continue;
        }
        const int64_t y = read_label(labels, label_dtype, r);
        const int64_t yl = (y >= v0 && y < v0 + tv) ? y - v0 : -1;
        const float lse_lo = yl >= 0 ? (float)((M[r] + log(S[r])) - (double)L) : 0.0f;
        const float g_lp = glp[r], g_h = gh[r];
        const float a = -(g_lp + g_h * H) * inv_t, b = -g_h * inv_t;
        for (int64_t j = threadIdx.x; j < tv; j += blockDim.x) {
            const float g = grad_elem(__fmul_rn(row[j], inv_t), L, H, a, b, g_lp, g_h, inv_t, j == yl, lse_lo);
            if (row16) row16[j] = BF16::from_f32(g);
            else row[j] = g;
        }
    }
}

// ---- the calls --------------------------------------------------------------------------------------

static bool bad_linear(const void* hidden, int64_t rows, int64_t dim, int64_t hs, const void* weight, int64_t vocab,
                       int64_t ws, int64_t vl, float temperature) {
    if (rows < 0 || dim < 1 || hs < dim || vocab < 1 || ws < dim || vl < 1 || vl > vocab) return true;
    if (dim > INT_MAX || hs > INT_MAX || ws > INT_MAX) return true;
    if (!(temperature > 0.0f) || isinf(temperature)) return true;
    if (rows > 0 && (hidden == nullptr || weight == nullptr)) return true;
    if (rows > 0 && (rows - 1) > (INT64_MAX - dim) / hs) return true;
    return (vocab - 1) > (INT64_MAX - dim) / ws;
}

static bool bad_out_matrix(const float* out, int64_t n, int64_t dim, int64_t stride) {
    if (out == nullptr) return false;
    if (stride < dim || stride > INT_MAX) return true;
    return n > 0 && (n - 1) > (INT64_MAX - dim) / stride;
}

struct Call {
    arbor_fl::Layout l;
    char* base;
    float* f(int64_t off) const { return (float*)(base + off); }
    double* d(int64_t off) const { return (double*)(base + off); }
};

static int check_status(int st) { return st == 0 ? ARBOR_OK : ARBOR_ERR_CUDA; }

// Pass 1 over every row (both calls).
static int pass1(const Call& k, const Gemm& g, const void* h, int64_t rows, int64_t dim, int64_t hs, const void* w,
                 int64_t ws, int64_t vl, int esize, const void* labels, int label_dtype, float inv_t,
                 const uint8_t* row_mask, const float* mask, cudaStream_t s) {
    float* tile = k.f(k.l.tile);
    double *M = k.d(k.l.m), *S = k.d(k.l.s), *U = k.d(k.l.u);
    float* zy = k.f(k.l.lp);  // the label's z (the CPU path turns it into the log-prob in place)
    for (int64_t r0 = 0; r0 < rows; r0 += k.l.tr) {
        const int64_t tr = rows - r0 < k.l.tr ? rows - r0 : k.l.tr;
        fl_init_kernel<<<small_grid(tr, 256), 256, 0, s>>>(r0, tr, M, S, U, zy);
        for (int64_t v0 = 0; v0 < vl; v0 += k.l.tv) {
            const int64_t tv = vl - v0 < k.l.tv ? vl - v0 : k.l.tv;
            int rc = check_status(g.abt((int)tr, (int)tv, (int)dim, (const char*)h + r0 * hs * esize, (int)hs,
                                        (const char*)w + v0 * ws * esize, (int)ws, 0.0f, tile, (int)tv, g.in_type,
                                        g.in_type));
            if (rc != ARBOR_OK) return rc;
            // vector loads need 16-byte aligned rows: tv % 4 and the tile's address (the workspace is only required
            // to be 8-byte aligned, and the layout's offsets are relative to it)
            fl_stats_kernel<<<row_grid(tr), row_block_threads(tv), 0, s>>>(
                tile, tr, tv, r0, v0, labels, label_dtype, inv_t, row_mask, mask, M, S, U, zy, aligned16(tile, tv * 4));
        }
    }
    return record_cuda_error(cudaGetLastError());
}

static int stats(const void* hidden, int64_t rows, int64_t dim, int64_t hs, const void* weight, int64_t vocab,
                 int64_t ws, int64_t vl, int dtype, const void* labels, int label_dtype, float temperature,
                 const uint8_t* row_mask, float* logprob, float* entropy, float* lse, int64_t row_chunk,
                 int64_t vocab_chunk, void* workspace, int64_t workspace_bytes, cudaStream_t s) {
    if (bad_linear(hidden, rows, dim, hs, weight, vocab, ws, vl, temperature)) return ARBOR_ERR_ARG;
    if (dtype != ARBOR_F32 && dtype != ARBOR_BF16) return ARBOR_ERR_UNSUPPORTED;
    if (logprob != nullptr && arbor::bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    Call k{arbor_fl::layout(rows, vl, row_chunk, vocab_chunk, dtype == ARBOR_BF16), (char*)workspace};
    if (k.l.total < 0 || workspace == nullptr || workspace_bytes < k.l.total || (uintptr_t)workspace % 8 != 0)
        return ARBOR_ERR_ARG;
    if (rows == 0) return ARBOR_OK;
    Gemm g;
    int rc = handle_for(s, &g.h);
    if (rc != ARBOR_OK) return rc;
    g.in_type = dtype == ARBOR_F32 ? CUDA_R_32F : CUDA_R_16BF;
    rc = pass1(k, g, hidden, rows, dim, hs, weight, ws, vl, dtype == ARBOR_F32 ? 4 : 2,
               logprob != nullptr ? labels : nullptr, label_dtype, 1.0f / temperature, row_mask, nullptr, s);
    if (rc != ARBOR_OK) return rc;
    arbor_policy_loss_config none{};
    fl_finish_kernel<<<small_grid(rows, 256), 256, 0, s>>>(rows, row_mask, nullptr, k.d(k.l.m), k.d(k.l.s),
                                                           k.d(k.l.u), k.f(k.l.lp), k.f(k.l.lse), k.f(k.l.ent),
                                                           logprob, entropy, lse, false, none, nullptr, nullptr,
                                                           nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    return record_cuda_error(cudaGetLastError());
}

static int policy_loss(const arbor_policy_loss_config* cfg, const void* hidden, int64_t rows, int64_t dim, int64_t hs,
                       const void* weight, int64_t vocab, int64_t ws, int64_t vl, int dtype, const void* labels,
                       int label_dtype, const float* old_logprob, const float* advantages, const float* mask,
                       const float* weights, const float* ref_logprob, const float* select_entropy,
                       float* logprob_out, float* entropy_out, float* gh_out, int64_t ghs, float* gw_out, int64_t gws,
                       int accumulate, double* sums, int64_t row_chunk, int64_t vocab_chunk, void* workspace,
                       int64_t workspace_bytes, cudaStream_t s) {
    if (arbor_pl::bad_config(cfg) || rows < 0 || sums == nullptr) return ARBOR_ERR_ARG;
    if (rows > 0 && (old_logprob == nullptr || advantages == nullptr || mask == nullptr || weights == nullptr))
        return ARBOR_ERR_ARG;
    if (rows > 0 && cfg->kl_type != ARBOR_KL_NONE && ref_logprob == nullptr) return ARBOR_ERR_ARG;
    if (bad_linear(hidden, rows, dim, hs, weight, vocab, ws, vl, cfg->temperature)) return ARBOR_ERR_ARG;
    if (arbor::bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    if (bad_out_matrix(gh_out, rows, dim, ghs) || bad_out_matrix(gw_out, vocab, dim, gws)) return ARBOR_ERR_ARG;
    if (dtype != ARBOR_F32 && dtype != ARBOR_BF16) return ARBOR_ERR_UNSUPPORTED;
    Call k{arbor_fl::layout(rows, vl, row_chunk, vocab_chunk, dtype == ARBOR_BF16), (char*)workspace};
    if (k.l.total < 0 || workspace == nullptr || workspace_bytes < k.l.total || (uintptr_t)workspace % 8 != 0)
        return ARBOR_ERR_ARG;
    Gemm g;
    int rc = handle_for(s, &g.h);
    if (rc != ARBOR_OK) return rc;
    const bool bf16 = dtype == ARBOR_BF16;
    const int esize = bf16 ? 2 : 4;
    g.in_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const float inv_t = 1.0f / cfg->temperature;
    float* parts = arbor_pl::carve(workspace, rows, 0).parts;
    if (rows > 0) {
        rc = pass1(k, g, hidden, rows, dim, hs, weight, ws, vl, esize, labels, label_dtype, inv_t, nullptr, mask, s);
        if (rc != ARBOR_OK) return rc;
        fl_finish_kernel<<<small_grid(rows, 256), 256, 0, s>>>(
            rows, nullptr, mask, k.d(k.l.m), k.d(k.l.s), k.d(k.l.u), k.f(k.l.lp), k.f(k.l.lse), k.f(k.l.ent),
            logprob_out, entropy_out, nullptr, true, *cfg, old_logprob, advantages, weights, ref_logprob,
            select_entropy, k.f(k.l.glp), k.f(k.l.gh), parts);
    }
    pl_reduce_kernel<<<1, 1024, 0, s>>>(parts, rows, sums);
    if (gw_out != nullptr && !accumulate) {
        const int64_t first = rows == 0 ? 0 : vl;  // rows = 0: no product writes dW
        if (vocab > first &&
            cudaMemset2DAsync(gw_out + first * gws, (size_t)gws * 4, 0, (size_t)dim * 4, (size_t)(vocab - first), s) !=
                cudaSuccess)
            return record_cuda_error(cudaGetLastError());
    }
    if ((gh_out == nullptr && gw_out == nullptr) || rows == 0) return record_cuda_error(cudaGetLastError());
    float* tile = k.f(k.l.tile);
    uint16_t* tile16 = bf16 ? (uint16_t*)(k.base + k.l.tile16) : nullptr;
    const void* gsrc = bf16 ? (const void*)tile16 : (const void*)tile;
    for (int64_t v0 = 0; v0 < vl; v0 += k.l.tv) {
        const int64_t tv = vl - v0 < k.l.tv ? vl - v0 : k.l.tv;
        const char* wv = (const char*)weight + v0 * ws * esize;
        for (int64_t r0 = 0; r0 < rows; r0 += k.l.tr) {
            const int64_t tr = rows - r0 < k.l.tr ? rows - r0 : k.l.tr;
            const char* hb = (const char*)hidden + r0 * hs * esize;
            rc = check_status(g.abt((int)tr, (int)tv, (int)dim, hb, (int)hs, wv, (int)ws, 0.0f, tile, (int)tv,
                                    g.in_type, g.in_type));
            if (rc != ARBOR_OK) return rc;
            fl_grad_kernel<<<row_grid(tr), row_block_threads(tv), 0, s>>>(
                tile, tile16, tr, tv, r0, v0, labels, label_dtype, inv_t, mask, k.f(k.l.lse), k.f(k.l.ent),
                k.f(k.l.glp), k.f(k.l.gh), k.d(k.l.m), k.d(k.l.s));
            if (gh_out != nullptr) {  // dh_b (+)= G W_v
                rc = check_status(g.ab((int)tr, (int)dim, (int)tv, gsrc, (int)tv, wv, (int)ws, v0 == 0 ? 0.0f : 1.0f,
                                       gh_out + r0 * ghs, (int)ghs, g.in_type, g.in_type));
                if (rc != ARBOR_OK) return rc;
            }
            if (gw_out != nullptr) {  // dW_v (+)= Gᵀ h_b
                rc = check_status(g.atb((int)tv, (int)dim, (int)tr, gsrc, (int)tv, hb, (int)hs,
                                        (r0 == 0 && !accumulate) ? 0.0f : 1.0f, gw_out + v0 * gws, (int)gws,
                                        g.in_type, g.in_type));
                if (rc != ARBOR_OK) return rc;
            }
        }
    }
    return record_cuda_error(cudaGetLastError());
}

}  // namespace fl
}  // namespace arbor_cuda

extern "C" int arbor_cuda_fused_linear_stats(const void* hidden, int64_t rows, int64_t dim, int64_t hidden_stride,
                                             const void* weight, int64_t vocab, int64_t weight_stride,
                                             int64_t vocab_limit, int dtype, const void* labels, int label_dtype,
                                             float temperature, const uint8_t* row_mask, float* logprob,
                                             float* entropy, float* lse, int64_t row_chunk, int64_t vocab_chunk,
                                             void* workspace, int64_t workspace_bytes, arbor_sgemm_fn sgemm,
                                             void* stream) {
    (void)sgemm;
    return arbor_cuda::fl::stats(hidden, rows, dim, hidden_stride, weight, vocab, weight_stride, vocab_limit, dtype,
                                 labels, label_dtype, temperature, row_mask, logprob, entropy, lse, row_chunk,
                                 vocab_chunk, workspace, workspace_bytes, (cudaStream_t)stream);
}

extern "C" int arbor_cuda_fused_linear_policy_loss(
    const arbor_policy_loss_config* cfg, const void* hidden, int64_t rows, int64_t dim, int64_t hidden_stride,
    const void* weight, int64_t vocab, int64_t weight_stride, int64_t vocab_limit, int dtype, const void* labels,
    int label_dtype, const float* old_logprob, const float* advantages, const float* mask, const float* weights,
    const float* ref_logprob, const float* select_entropy, float* logprob_out, float* entropy_out, float* grad_hidden,
    int64_t grad_hidden_stride, float* grad_weight, int64_t grad_weight_stride, int accumulate_grad_weight,
    double* sums, int64_t row_chunk, int64_t vocab_chunk, void* workspace, int64_t workspace_bytes,
    arbor_sgemm_fn sgemm, void* stream) {
    (void)sgemm;
    return arbor_cuda::fl::policy_loss(cfg, hidden, rows, dim, hidden_stride, weight, vocab, weight_stride,
                                       vocab_limit, dtype, labels, label_dtype, old_logprob, advantages, mask, weights,
                                       ref_logprob, select_entropy, logprob_out, entropy_out, grad_hidden,
                                       grad_hidden_stride, grad_weight, grad_weight_stride, accumulate_grad_weight,
                                       sums, row_chunk, vocab_chunk, workspace, workspace_bytes, (cudaStream_t)stream);
}
