// Unity build of the CPU library: the JavaCPP plugin compiles this file (through the binding's
// @Platform include list) together with the generated JNI code, and cuda-kernels/test links it as the
// reference. Add a kernel's .cpp here.
#include "arbor/arbor.h"
#include "cpu_dispatch.h"

namespace arbor {

static int g_force_scalar = 0;

static int detect_avx2() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

int cpu_use_avx2() {
    static const int has_avx2 = detect_avx2();
    return has_avx2 && !g_force_scalar;
}

}  // namespace arbor

extern "C" const char* arbor_cpu_isa(void) { return arbor::cpu_use_avx2() ? "avx2-fma" : "scalar"; }
extern "C" void arbor_cpu_force_scalar(int force) { arbor::g_force_scalar = force ? 1 : 0; }
extern "C" float arbor_bf16_to_f32(uint16_t h) { return arbor::bf16_to_f32(h); }
extern "C" uint16_t arbor_f32_to_bf16(float f) { return arbor::f32_to_bf16(f); }
extern "C" float arbor_f16_to_f32(uint16_t h) { return arbor::f16_to_f32(h); }
extern "C" uint16_t arbor_f32_to_f16(float f) { return arbor::f32_to_f16(f); }

#include "reference.cpp"
#include "token_stats.cpp"

#include "policy_loss.cpp"

#include "advantages.cpp"

#include "sampling.cpp"

#include "fused_linear.cpp"
