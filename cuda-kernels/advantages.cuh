// Advantages and token-level shaping (ALGORITHMS.md §3) — CUDA kernels (issue #4).
#ifndef ARBOR_CUDA_ADVANTAGES_CUH
#define ARBOR_CUDA_ADVANTAGES_CUH

#include "common.cuh"

#endif
