// Sampling: fused sample + logprob + entropy — CUDA kernels (issue #7).
#ifndef ARBOR_CUDA_SAMPLING_CUH
#define ARBOR_CUDA_SAMPLING_CUH

#include "common.cuh"

#endif
