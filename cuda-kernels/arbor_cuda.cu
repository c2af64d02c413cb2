// Unity build of the CUDA library: compiled by nvcc through the ArborCuda binding's include list
// (and by cuda-kernels/test/gpu-check). Add a kernel's .cuh here.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arbor_cuda.h"
#include "common.cuh"

namespace arbor_cuda {

static thread_local char g_last_error[256] = "";

int record_cuda_error(cudaError_t err) {
    if (err == cudaSuccess) return ARBOR_OK;
    snprintf(g_last_error, sizeof g_last_error, "%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
    return ARBOR_ERR_CUDA;
}

int record_error(int code, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    return code;
}

}  // namespace arbor_cuda

extern "C" int arbor_cuda_device_count(void) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        arbor_cuda::record_cuda_error(err);
        cudaGetLastError();  // clear the sticky-free error so later probes start clean
        return -1;
    }
    return n;
}

extern "C" const char* arbor_cuda_last_error(void) { return arbor_cuda::g_last_error; }

extern "C" int arbor_cuda_get_device(int* device) { return arbor_cuda::record_cuda_error(cudaGetDevice(device)); }

extern "C" int arbor_cuda_set_device(int device) { return arbor_cuda::record_cuda_error(cudaSetDevice(device)); }

extern "C" int arbor_cuda_malloc(void** ptr, size_t bytes) { return arbor_cuda::record_cuda_error(cudaMalloc(ptr, bytes)); }

extern "C" int arbor_cuda_free(void* ptr) { return arbor_cuda::record_cuda_error(cudaFree(ptr)); }

extern "C" int arbor_cuda_memcpy_htod(void* dst, const void* src, size_t bytes) {
    return arbor_cuda::record_cuda_error(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

extern "C" int arbor_cuda_memcpy_dtoh(void* dst, const void* src, size_t bytes) {
    return arbor_cuda::record_cuda_error(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

extern "C" int arbor_cuda_stream_synchronize(void* stream) {
    return arbor_cuda::record_cuda_error(cudaStreamSynchronize((cudaStream_t)stream));
}

#include "token_stats.cuh"

#include "policy_loss.cuh"

#include "advantages.cuh"

#include "sampling.cuh"

#include "fused_linear.cuh"
