/*
 * Fused output projection + token statistics + policy loss (docs/algorithms.md §1, §2; the memory
 * design of verl's and Liger's fused linear-cross-entropy kernels). Included by arbor/arbor.h; its
 * conventions hold here.
 *
 * From hidden states h [rows, dim] (row stride hidden_stride) and the output projection W [vocab, dim]
 * (row stride weight_stride; rows >= vocab_limit are embedding padding and never read), the logits are
 * logits = h Wᵀ [rows, vocab_limit] — never materialised: the kernels work on tiles of row_chunk rows
 * × vocab_chunk columns (one tile of fp32 scratch), so their extra memory is O(row_chunk · vocab_chunk +
 * rows), independent of rows · vocab:
 *   pass 1  per row block, per vocabulary block: tile = h_b W_vᵀ (sgemm), each tile row's softmax
 *           statistics (the token-stats row kernel) merged into the row's running (max, Σe, Σe·z)
 *           → lse, entropy, logprob of the label, then the per-token loss (policy_loss_token.h) →
 *           dL/dlogprob, dL/dentropy per row;
 *   pass 2  per vocabulary block, per row block: tile recomputed, overwritten with dL/dlogits (the
 *           token-stats backward row kernel), then dh_b += tile W_v and dW_v += tileᵀ h_b (sgemm).
 * So the backward costs two extra products of the logits' size (4 instead of 3), traded for never
 * holding the [rows, vocab] logits or their gradient. Except with whole-vocabulary tiles (vocab_chunk >=
 * vocab_limit, CPU): then the work goes row block by row block — pass 1, the block's losses, pass 2 on the
 * tile pass 1 left — and the tile is not recomputed (three products; the tile holds row_chunk x vocab_limit
 * logits). The same calls in the same order per dh block and per dW block as the general order, so the
 * same results.
 *
 * The loss, its weights and its sums are exactly those of arbor_cpu_policy_loss_fused_* (policy_loss.h):
 * weights come from arbor_cpu_policy_loss_weights over the whole batch (global normalizers included),
 * sums[ARBOR_PL_NUM_SUMS] are per-row partials reduced in row order, masked rows (mask <= 0) are not
 * computed, their labels are not read, and they contribute 0 to dh and dW.
 *
 * CPU: the products go through the caller's sgemm, a function with cblas_sgemm's signature (OpenBLAS:
 * the JavaCPP openblas preset's cblas_sgemm, whose address the Java layer looks up), so this library
 * needs no BLAS at link time. OpenBLAS runs its own threads; num_threads is for the per-element work.
 * CUDA (arbor_cuda_fused_linear_*): cuBLAS, loaded at the first call (libcublas.so.13 / .12, or the
 * path in ARBOR_CUBLAS); `sgemm` is ignored. ARBOR_ERR_UNSUPPORTED when cuBLAS cannot be loaded.
 *
 * dtype: ARBOR_F32 or ARBOR_BF16 for h and W, and ARBOR_F16 on the CPU. CUDA: bf16 tensor-core products with fp32
 * accumulation; the logits tile, the statistics and dL/dh, dL/dW stay fp32, but the tile's dL/dlogits is rounded to
 * bf16 for the two backward products (their inputs are bf16, as in PyTorch's bf16 autograd and Liger's kernel: a
 * relative error of 2^-9 per element of dL/dlogits before the fp32 accumulation). CPU: bf16 and fp16 are widened to fp32 a block at a time — the tile's rows of h and its
 * vocabulary block of W (all of W's first vocab_limit rows with whole-vocabulary tiles, widened once) — into
 * buffers the call allocates beside the workspace (row_chunk x dim and vocab_chunk x dim fp32, clamped to the
 * call's sizes), so the results are those of the fp32 call on the widened values. Gradients are always fp32.
 * --------------------------------------------------------------------------------------------- */
#ifndef ARBOR_FUSED_LINEAR_H
#define ARBOR_FUSED_LINEAR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cblas_sgemm (row-major layout 101, no-trans 111, trans 112; 32-bit integer sizes). */
typedef void (*arbor_sgemm_fn)(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha,
                               const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

/*
 * Bytes of scratch memory of one fused-linear call (dtype of h and W): the fp32 tile (plus its bf16 copy for bf16), the
 * per-row statistics, upstream gradients and loss partials. O(row_chunk · vocab_chunk + rows).
 * CPU kernels accept workspace NULL (they allocate it); CUDA kernels require it (device memory,
 * 8-byte aligned). Returns -1 for negative, zero chunk or overflowing sizes.
 */
int64_t arbor_fused_linear_workspace_bytes(int64_t rows, int64_t vocab_limit, int64_t row_chunk, int64_t vocab_chunk,
                                           int dtype);

/*
 * Token statistics of logits = h Wᵀ / temperature (arbor_cpu_token_stats_fwd's outputs: logprob of
 * the label, entropy, lse; each may be NULL; labels may be NULL when logprob is), without the logits:
 * pass 1 only (one product). row_mask: uint8, NULL = every row valid; masked rows get 0 and are not
 * computed. A valid row's label outside [0, vocab_limit) gives NaN logprob and ARBOR_ERR_LABEL.
 */
int arbor_cpu_fused_linear_stats(const void* hidden, int64_t rows, int64_t dim, int64_t hidden_stride,
                                 const void* weight, int64_t vocab, int64_t weight_stride, int64_t vocab_limit,
                                 int dtype, const void* labels, int label_dtype, float temperature,
                                 const uint8_t* row_mask, float* logprob, float* entropy, float* lse,
                                 int64_t row_chunk, int64_t vocab_chunk, void* workspace, int64_t workspace_bytes,
                                 arbor_sgemm_fn sgemm, int num_threads);

/*
 * Policy loss over logits = h Wᵀ (cfg->temperature scales the logits as in the fused policy loss),
 * with the per-row inputs of arbor_cpu_policy_loss_fused_* (labels, old_logprob, advantages, mask,
 * weights, ref_logprob, select_entropy) and its sums. Outputs (each optional, NULL = not wanted):
 *   logprob_out, entropy_out   per row (0 on masked rows)
 *   grad_hidden [rows, dim]    dL/dh, row stride grad_hidden_stride; overwritten
 *   grad_weight [vocab, dim]   dL/dW, row stride grad_weight_stride; overwritten (rows >= vocab_limit
 *                              get 0), or added to when accumulate_grad_weight != 0 — for tied
 *                              embeddings, W's gradient from the embedding lookup and from this head
 *                              accumulate into one tensor (padding rows are then left as they are).
 * With neither gradient pass 2 is skipped (the loss value only). Outputs must not overlap the inputs
 * or each other. A valid row without a distribution (NaN/inf logits) gives NaN outputs, and NaN
 * propagates into dh's row and into every dW row (as it would through the unfused matmul).
 */
int arbor_cpu_fused_linear_policy_loss(const arbor_policy_loss_config* cfg, const void* hidden, int64_t rows,
                                       int64_t dim, int64_t hidden_stride, const void* weight, int64_t vocab,
                                       int64_t weight_stride, int64_t vocab_limit, int dtype, const void* labels,
                                       int label_dtype, const float* old_logprob, const float* advantages,
                                       const float* mask, const float* weights, const float* ref_logprob,
                                       const float* select_entropy, float* logprob_out, float* entropy_out,
                                       float* grad_hidden, int64_t grad_hidden_stride, float* grad_weight,
                                       int64_t grad_weight_stride, int accumulate_grad_weight, double* sums,
                                       int64_t row_chunk, int64_t vocab_chunk, void* workspace,
                                       int64_t workspace_bytes, arbor_sgemm_fn sgemm, int num_threads);

#ifdef __cplusplus
}
#endif

#endif
