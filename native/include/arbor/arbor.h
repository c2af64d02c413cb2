/*
 * Arbor C ABI — the contract between the JVM (bindings/), the CPU kernels (native/) and the CUDA
 * kernels (cuda-kernels/).
 *
 * Conventions shared by every kernel:
 *  - Plain extern "C" functions over pointers and sizes. No allocation visible to the caller, no
 *    exceptions across the boundary. Every function returns ARBOR_OK or an ARBOR_ERR_* code.
 *  - A CPU function arbor_cpu_X(args..., int num_threads) has a CUDA twin
 *    arbor_cuda_X(args..., void* stream) with the same arguments, except that the last one, the
 *    execution resource, is a cudaStream_t (0 = default stream) instead of a thread count.
 *    CUDA pointers are device pointers; CUDA functions are asynchronous on the stream.
 *  - Logits are a [rows, vocab] matrix whose row r starts at element r * row_stride
 *    (row_stride >= vocab), so a [B, L, V] tensor viewed with one position dropped needs no copy.
 *    Columns j >= vocab_limit (embedding padding) are absent: they do not enter any statistic and
 *    their gradient is written as 0.
 *  - Half-precision values (bf16, fp16) are passed as their uint16_t bit patterns.
 *  - Accumulation is fp32 or wider; maxima start at -inf; 0 * log 0 never produces NaN.
 *  - A row mask (uint8, 1 = valid, NULL = all valid) makes a row produce 0 outputs and 0 gradient;
 *    its label is not read (so -100 "ignore" labels are fine on masked rows).
 *  - num_threads <= 0 means "all hardware threads". Results are bitwise identical for every
 *    thread count.
 *
 * Formulas: docs/algorithms.md at the repository root (cited as docs/algorithms.md §N in comments).
 */
#ifndef ARBOR_ARBOR_H
#define ARBOR_ARBOR_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define ARBOR_OK 0
#define ARBOR_ERR_ARG 1         /* a size, stride, pointer or scalar argument is invalid */
#define ARBOR_ERR_LABEL 2       /* a label of a valid row is outside [0, vocab_limit) */
#define ARBOR_ERR_CUDA 3        /* a CUDA runtime call failed (see arbor_cuda_last_error) */
#define ARBOR_ERR_UNSUPPORTED 4 /* a dtype combination this kernel does not implement */
#define ARBOR_ERR_NAN 5         /* NaN in an input where the kernel must decide (e.g. sampling) */
#define ARBOR_ERR_ALLOC 6       /* the kernel could not allocate its host scratch memory (CPU) */

/* Element types. */
#define ARBOR_F32 0
#define ARBOR_BF16 1
#define ARBOR_F16 2
#define ARBOR_I32 3
#define ARBOR_I64 4
#define ARBOR_U8 5

/* Which SIMD path the CPU kernels use now: "avx512", "avx2-fma" or "scalar". Chosen at load time from
 * CPUID (the best the CPU has); the environment variable ARBOR_CPU_ISA (one of those names, or "avx2"),
 * read once at first use, caps the choice. */
const char* arbor_cpu_isa(void);

/* The best path this CPU has (after ARBOR_CPU_ISA), whatever is forced now. */
const char* arbor_cpu_best_isa(void);

/* Forces the portable path (1) or restores runtime dispatch (0); for tests and benchmarks. */
void arbor_cpu_force_scalar(int force);

/* Forces the path named ("avx512", "avx2-fma" / "avx2", "scalar"), or restores runtime dispatch (NULL).
 * ARBOR_ERR_UNSUPPORTED for an unknown name or a path above arbor_cpu_best_isa(). Process-wide; for
 * tests and benchmarks (not to be changed while kernels run on other threads). */
int arbor_cpu_force_isa(const char* name);

/* The memory floor the CPU kernels are measured against: per row r of a contiguous fp32 [rows, cols]
 * matrix, sums[r] = the sum of src[r, :] (a vector-load read, STREAM "read"), and dst = src (vector
 * loads and non-temporal stores, STREAM "copy"), rows split over num_threads as the kernels split them. */
int arbor_cpu_stream_read(const float* src, int64_t rows, int64_t cols, float* sums, int num_threads);
int arbor_cpu_stream_copy(const float* src, float* dst, int64_t rows, int64_t cols, int num_threads);

/* The kernels' vector exp on the current path, for its tests: dc NULL: out[i] = e^x[i] over the whole
 * float range (denormal results, +inf on overflow, 0 for -inf, NaN for NaN). dc not NULL: the kernels'
 * form, out[i] = e^x[i] for x[i] >= ln FLT_MIN (-87.3365...), exactly 0 below and for -inf, NaN for
 * NaN, dc[i] = max(x[i], ln FLT_MIN) (NaN for NaN); only x <= 0 is defined here. */
int arbor_cpu_exp(const float* x, int64_t n, float* out, float* dc);

/* The kernels' bf16 store on the current path, for its tests: out[i] = x[i] rounded to bf16 (nearest
 * even, NaN quiet, denormals kept), as every bf16 gradient and output is written. */
int arbor_cpu_to_bf16(const float* x, int64_t n, uint16_t* out);

/* ------------------------------------------------------------------------------------------------
 * Token statistics (docs/algorithms.md §1).
 *
 * Forward, per row r with z = logits[r, :vocab_limit] / temperature:
 *   lse[r] = log sum_j exp(z_j);  logprob[r] = z_label - lse[r];  entropy[r] = lse[r] - sum_j p_j z_j
 * labels: int32 or int64 (label_dtype = ARBOR_I32 | ARBOR_I64). Any of logprob/entropy/lse may be
 * NULL when not wanted (labels may be NULL when logprob is NULL).
 * A label outside [0, vocab_limit) on a valid row gives NaN logprob and ARBOR_ERR_LABEL (the other
 * rows are still computed).
 * One read of the logits; extra memory O(1) per thread.
 * --------------------------------------------------------------------------------------------- */
int arbor_cpu_token_stats_fwd_f32(const float* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                  int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                  const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                  int num_threads);
int arbor_cpu_token_stats_fwd_bf16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                   int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                   const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                   int num_threads);
int arbor_cpu_token_stats_fwd_f16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                  int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                  const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                  int num_threads);

/*
 * Backward (docs/algorithms.md §1): from per-row upstream gradients g_lp = dL/dlogprob and
 * g_H = dL/dentropy (either may be NULL = 0) writes
 *   dL/dlogits[r, j] = ( g_lp (1[j=y] - p_j) - g_H p_j (z_j - sum_k p_k z_k) ) / temperature
 * for j < vocab_limit, and 0 for vocab_limit <= j < vocab (and for masked rows).
 * lse and entropy are the forward's saved outputs; when either is NULL the kernel recomputes both
 * from the row first (the row is then read twice, the second time mostly from cache).
 * grad_logits has grad_dtype (ARBOR_F32 or the logits' own dtype) and its own row stride. It may
 * alias logits exactly (same pointer, dtype and stride): the gradient is then written in place.
 * Labels are read only when g_lp is non-NULL.
 */
int arbor_cpu_token_stats_bwd_f32(const float* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                  int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                  const uint8_t* row_mask, const float* lse, const float* entropy,
                                  const float* grad_logprob, const float* grad_entropy, void* grad_logits,
                                  int grad_dtype, int64_t grad_row_stride, int num_threads);
int arbor_cpu_token_stats_bwd_bf16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                   int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                   const uint8_t* row_mask, const float* lse, const float* entropy,
                                   const float* grad_logprob, const float* grad_entropy, void* grad_logits,
                                   int grad_dtype, int64_t grad_row_stride, int num_threads);
int arbor_cpu_token_stats_bwd_f16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                  int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                  const uint8_t* row_mask, const float* lse, const float* entropy,
                                  const float* grad_logprob, const float* grad_entropy, void* grad_logits,
                                  int grad_dtype, int64_t grad_row_stride, int num_threads);

/* ------------------------------------------------------------------------------------------------
 * Scalar double-precision references (native/src/reference.cpp). Straightforward two-pass loops,
 * written for clarity, used by the JUnit tests and by cuda-kernels/test as the ground truth.
 * Labels are int64; masked rows give 0. Same layout conventions as the kernels.
 * --------------------------------------------------------------------------------------------- */
void arbor_ref_token_stats_fwd(const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                               int64_t vocab_limit, const int64_t* labels, double temperature,
                               const uint8_t* row_mask, double* logprob, double* entropy, double* lse);
void arbor_ref_token_stats_bwd(const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                               int64_t vocab_limit, const int64_t* labels, double temperature,
                               const uint8_t* row_mask, const double* grad_logprob, const double* grad_entropy,
                               double* grad_logits);

/* Half-precision conversions used everywhere (round-to-nearest-even; NaN preserved). */
float arbor_bf16_to_f32(uint16_t h);
uint16_t arbor_f32_to_bf16(float f);
float arbor_f16_to_f32(uint16_t h);
uint16_t arbor_f32_to_f16(float f);

/* Process exit without the C++ static destructors of the libraries loaded before this call (libtorch,
 * OpenBLAS, the CUDA runtime): registers, with glibc's on_exit, a handler that flushes stdout and stderr
 * (without taking their locks) and ends the process with _exit(status), status being the one exit()
 * was given. exit() runs handlers in the reverse order of registration, so everything registered
 * earlier — the destructors of those libraries' globals among them — is skipped, and so are the
 * libraries' own destructors that exit() runs after the handlers.
 *
 * Why: the JVM exits (System.exit, SIGTERM, SIGINT, the end of main) with exit() while threads that are
 * inside a native call keep running; exit() then destroys libtorch's globals under a running backward,
 * which faults (SIGSEGV in at::accelerator::getAccelerator, docs/training.md, "Stopping a run"). The JVM calls this
 * from a shutdown hook, so the handler is the last one registered before its exit(). Each call
 * registers one more handler; call it once per exit. ARBOR_ERR_UNSUPPORTED without glibc,
 * ARBOR_ERR_ARG when on_exit fails. */
int arbor_exit_skip_destructors(void);

#ifdef __cplusplus
}
#endif

/* Kernel families beyond token statistics, one header each (same conventions as above). */
#include "arbor/policy_loss.h" /* clipped policy-gradient losses, fused with token stats (§2) */

#include "arbor/advantages.h"  /* advantage estimators and token-level shaping (§3) */

#include "arbor/sampling.h"    /* fused sample + logprob + entropy (§10) */

#include "arbor/fused_linear.h" /* output projection fused with token stats and the policy loss (§1, §2) */

#endif /* ARBOR_ARBOR_H */
