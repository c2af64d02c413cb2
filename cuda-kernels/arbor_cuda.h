/*
 * CUDA half of Arbor's C ABI. Every arbor_cuda_X has exactly the arguments of arbor_cpu_X
 * (native/include/arbor/arbor.h, where their meaning is documented) except the last: a cudaStream_t
 * passed as void* (NULL = default stream) instead of a thread count. Pointers are device pointers;
 * the calls are asynchronous on the stream and return ARBOR_ERR_CUDA when a launch fails.
 *
 * Differences forced by asynchrony: a label outside [0, vocab_limit) cannot be reported by the
 * return code; its row gets NaN outputs (and a NaN gradient row) instead.
 */
#ifndef ARBOR_CUDA_H
#define ARBOR_CUDA_H

#include "arbor/arbor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices, or a negative value when the runtime/driver is unavailable. */
int arbor_cuda_device_count(void);
/* Text of the last CUDA error seen by this thread in an arbor_cuda_* call ("" if none). */
const char* arbor_cuda_last_error(void);
/* The calling thread's current device, and setting it (cudaGetDevice / cudaSetDevice). */
int arbor_cuda_get_device(int* device);
int arbor_cuda_set_device(int device);
/* Device memory helpers (for tests, harnesses and callers without another CUDA binding). */
int arbor_cuda_malloc(void** ptr, size_t bytes);
int arbor_cuda_free(void* ptr);
int arbor_cuda_memcpy_htod(void* dst, const void* src, size_t bytes);
int arbor_cuda_memcpy_dtoh(void* dst, const void* src, size_t bytes);
/* Blocks until all work on the stream is done; returns ARBOR_ERR_CUDA on a (possibly earlier) fault. */
int arbor_cuda_stream_synchronize(void* stream);

int arbor_cuda_token_stats_fwd_f32(const float* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                   int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                   const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                   void* stream);
int arbor_cuda_token_stats_fwd_bf16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                    int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                    const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                    void* stream);
int arbor_cuda_token_stats_fwd_f16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                   int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                   const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                   void* stream);

int arbor_cuda_token_stats_bwd_f32(const float* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                   int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                   const uint8_t* row_mask, const float* lse, const float* entropy,
                                   const float* grad_logprob, const float* grad_entropy, void* grad_logits,
                                   int grad_dtype, int64_t grad_row_stride, void* stream);
int arbor_cuda_token_stats_bwd_bf16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                    int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                    const uint8_t* row_mask, const float* lse, const float* entropy,
                                    const float* grad_logprob, const float* grad_entropy, void* grad_logits,
                                    int grad_dtype, int64_t grad_row_stride, void* stream);
int arbor_cuda_token_stats_bwd_f16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                   int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                   const uint8_t* row_mask, const float* lse, const float* entropy,
                                   const float* grad_logprob, const float* grad_entropy, void* grad_logits,
                                   int grad_dtype, int64_t grad_row_stride, void* stream);

/* ---- policy loss (docs/algorithms.md §2) ---- */
/* ABI and definitions: native/include/arbor/policy_loss.h. The workspace (device memory,
 * 8-byte aligned, arbor_policy_loss_workspace_bytes) is required. Inputs are not validated on the
 * host: a mask value outside [0, 1] or a valid row's sequence id outside [0, num_seqs) makes the
 * counts and all weights NaN (and so the loss); a bad label gives a NaN row as in token stats. */
int arbor_cuda_policy_loss_weights(const float* mask, const int32_t* seq_ids, int64_t rows, int64_t num_seqs,
                                   int agg_mode, double agg_normalizer, float* weights, double* counts,
                                   void* workspace, int64_t workspace_bytes, void* stream);
int arbor_cuda_policy_loss(const arbor_policy_loss_config* cfg, int64_t rows, const float* logprob,
                           const float* entropy, const float* old_logprob, const float* advantages, const float* mask,
                           const float* weights, const float* ref_logprob, const float* select_entropy,
                           float* grad_logprob, float* grad_entropy, double* sums, void* workspace,
                           int64_t workspace_bytes, void* stream);
int arbor_cuda_policy_loss_fused_f32(const arbor_policy_loss_config* cfg, const float* logits, int64_t rows,
                                     int64_t vocab, int64_t row_stride, int64_t vocab_limit, const void* labels,
                                     int label_dtype, const float* old_logprob, const float* advantages,
                                     const float* mask, const float* weights, const float* ref_logprob,
                                     const float* select_entropy, float* logprob_out, float* entropy_out,
                                     float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,
                                     int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,
                                     int64_t workspace_bytes, void* stream);
int arbor_cuda_policy_loss_fused_bf16(const arbor_policy_loss_config* cfg, const uint16_t* logits, int64_t rows,
                                      int64_t vocab, int64_t row_stride, int64_t vocab_limit, const void* labels,
                                      int label_dtype, const float* old_logprob, const float* advantages,
                                      const float* mask, const float* weights, const float* ref_logprob,
                                      const float* select_entropy, float* logprob_out, float* entropy_out,
                                      float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,
                                      int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,
                                      int64_t workspace_bytes, void* stream);
int arbor_cuda_policy_loss_fused_f16(const arbor_policy_loss_config* cfg, const uint16_t* logits, int64_t rows,
                                     int64_t vocab, int64_t row_stride, int64_t vocab_limit, const void* labels,
                                     int label_dtype, const float* old_logprob, const float* advantages,
                                     const float* mask, const float* weights, const float* ref_logprob,
                                     const float* select_entropy, float* logprob_out, float* entropy_out,
                                     float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,
                                     int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,
                                     int64_t workspace_bytes, void* stream);

/* ---- advantages (docs/algorithms.md §3) ---- */

/* Token-level advantages (arbor/advantages.h). stats is a device array of ARBOR_ADV_NSTATS doubles; the
 * statistics passes write it and the elementwise pass reads it, in stream order (with a small workspace
 * from cudaMallocAsync/cudaFreeAsync on the same stream). A valid token whose
 * sequence id is outside [0, n_seqs) gets NaN; a non-finite entropy in a shaping mode makes every valid
 * output NaN and is counted in stats[ARBOR_ADV_STAT_NONFINITE]. */
int arbor_cuda_token_advantages(const float* seq_adv, int64_t n_seqs, const void* seq_ids, int seq_id_dtype,
                                int64_t n_tokens, int64_t seq_len, const uint8_t* loss_mask, const float* entropy,
                                const uint8_t* post_tool, int mode, float coef, double top_fraction, float* adv_out,
                                double* stats, void* stream);

/* ---- sampling (docs/algorithms.md §10) ---- */
/* Same arguments as arbor_cpu_sample_* (native/include/arbor/sampling.h). The tokens equal the CPU
 * kernel's bit for bit. Asynchrony: a row without a distribution (NaN/+inf/no finite logit) and a
 * row whose per-row parameter (device array) is invalid get token -1 and NaN outputs instead of a
 * return code; scalar parameters and sizes are still checked on the host (ARBOR_ERR_ARG). */
int arbor_cuda_sample_f32(const float* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit,
                          float temperature, const float* temperatures, int32_t top_k, const int32_t* top_ks,
                          float top_p, const float* top_ps, float min_p, const float* min_ps, uint64_t seed,
                          const uint64_t* seeds, const uint64_t* keys, uint64_t step, const uint64_t* steps,
                          const uint8_t* row_mask, void* tokens, int token_dtype, float* logprob_sampled,
                          float* logprob, float* entropy, void* stream);
int arbor_cuda_sample_bf16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                           int64_t vocab_limit, float temperature, const float* temperatures, int32_t top_k,
                           const int32_t* top_ks, float top_p, const float* top_ps, float min_p, const float* min_ps,
                           uint64_t seed, const uint64_t* seeds, const uint64_t* keys, uint64_t step,
                           const uint64_t* steps, const uint8_t* row_mask, void* tokens, int token_dtype,
                           float* logprob_sampled, float* logprob, float* entropy, void* stream);
int arbor_cuda_sample_f16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit,
                          float temperature, const float* temperatures, int32_t top_k, const int32_t* top_ks,
                          float top_p, const float* top_ps, float min_p, const float* min_ps, uint64_t seed,
                          const uint64_t* seeds, const uint64_t* keys, uint64_t step, const uint64_t* steps,
                          const uint8_t* row_mask, void* tokens, int token_dtype, float* logprob_sampled,
                          float* logprob, float* entropy, void* stream);

/* ABI and definitions: native/include/arbor/fused_linear.h. The products are cuBLAS, loaded at the first
 * call (ARBOR_CUBLAS, else libcublas.so.13 / .12 / .so); ARBOR_ERR_UNSUPPORTED when it cannot be loaded.
 * `sgemm` is ignored. The workspace is required (device memory, arbor_fused_linear_workspace_bytes).
 * dtype ARBOR_F32 or ARBOR_BF16 (bf16 products with fp32 accumulation; fp32 tile and gradients). A valid
 * row's label outside [0, vocab_limit) makes that row NaN (logprob, loss sums, its dh row and every dW row). */
int arbor_cuda_fused_linear_stats(const void* hidden, int64_t rows, int64_t dim, int64_t hidden_stride,
                                  const void* weight, int64_t vocab, int64_t weight_stride, int64_t vocab_limit,
                                  int dtype, const void* labels, int label_dtype, float temperature,
                                  const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                  int64_t row_chunk, int64_t vocab_chunk, void* workspace, int64_t workspace_bytes,
                                  arbor_sgemm_fn sgemm, void* stream);
int arbor_cuda_fused_linear_policy_loss(const arbor_policy_loss_config* cfg, const void* hidden, int64_t rows,
                                        int64_t dim, int64_t hidden_stride, const void* weight, int64_t vocab,
                                        int64_t weight_stride, int64_t vocab_limit, int dtype, const void* labels,
                                        int label_dtype, const float* old_logprob, const float* advantages,
                                        const float* mask, const float* weights, const float* ref_logprob,
                                        const float* select_entropy, float* logprob_out, float* entropy_out,
                                        float* grad_hidden, int64_t grad_hidden_stride, float* grad_weight,
                                        int64_t grad_weight_stride, int accumulate_grad_weight, double* sums,
                                        int64_t row_chunk, int64_t vocab_chunk, void* workspace,
                                        int64_t workspace_bytes, arbor_sgemm_fn sgemm, void* stream);

#ifdef __cplusplus
}
#endif

#endif
