// Workspace layout of the fused linear kernels (arbor/fused_linear.h), shared by the CPU
// (fused_linear.cpp) and CUDA (cuda-kernels/fused_linear.cuh) implementations.
#ifndef ARBOR_FUSED_LINEAR_LAYOUT_H
#define ARBOR_FUSED_LINEAR_LAYOUT_H

#include <stdint.h>

#include "policy_loss_token.h"

namespace arbor_fl {

// Byte offsets of the parts of one call's workspace; total < 0 for invalid sizes.
//   parts  the policy loss's per-row partial sums (arbor_pl::parts_bytes, at offset 0)
//   tile   fp32 [tr, tv]; tile16 its bf16 copy (the CUDA bf16 backward products)
//   per row: lse, entropy, dL/dlogprob, dL/dentropy, the label's log-prob (f32), and the running softmax
//   state of pass 1 (max, Σ e^{z-max}, Σ e^{z-max}(z-max); f64)
struct Layout {
    int64_t tr, tv;  // tile rows and columns actually used
    int64_t tile, tile16, lse, ent, glp, gh, lp, m, s, u, total;
};

ARBOR_PL_HD inline int64_t align_up(int64_t v) { return (v + 255) / 256 * 256; }

// bf16: the call's products read bf16 (CUDA), so the tile has a bf16 copy (tile16); else tile16 is empty.
ARBOR_PL_HD inline Layout layout(int64_t rows, int64_t vocab_limit, int64_t row_chunk, int64_t vocab_chunk, bool bf16) {
    Layout l;
    l.total = -1;
    const int64_t lim = (int64_t)1 << 40;
    if (rows < 0 || rows > lim || vocab_limit < 1 || vocab_limit > lim || row_chunk < 1 || vocab_chunk < 1) return l;
    l.tr = row_chunk < rows ? row_chunk : (rows > 0 ? rows : 1);
    l.tv = vocab_chunk < vocab_limit ? vocab_chunk : vocab_limit;
    if (l.tr > (1 << 30) || l.tv > (1 << 30) || l.tr * l.tv > ((int64_t)1 << 36)) return l;  // int sizes for BLAS
    const int64_t pb = arbor_pl::workspace_bytes(rows, 0);
    if (pb < 0) return l;
    l.tile = align_up(pb);
    l.tile16 = align_up(l.tile + 4 * l.tr * l.tv);
    l.lse = align_up(l.tile16 + (bf16 ? 2 * l.tr * l.tv : 0));
    l.ent = align_up(l.lse + 4 * rows);
    l.glp = align_up(l.ent + 4 * rows);
    l.gh = align_up(l.glp + 4 * rows);
    l.lp = align_up(l.gh + 4 * rows);
    l.m = align_up(l.lp + 4 * rows);
    l.s = align_up(l.m + 8 * rows);
    l.u = align_up(l.s + 8 * rows);
    l.total = align_up(l.u + 8 * rows);
    return l;
}

}  // namespace arbor_fl

#endif
