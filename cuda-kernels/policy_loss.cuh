// Clipped policy-gradient losses (ALGORITHMS.md §2) — CUDA kernels (issue #3).
#ifndef ARBOR_CUDA_POLICY_LOSS_CUH
#define ARBOR_CUDA_POLICY_LOSS_CUH

#include "common.cuh"

#endif
