// Unity build of the CPU library: the JavaCPP plugin compiles this file (through the binding's
// @Platform include list) together with the generated JNI code, and cuda-kernels/test links it as the
// reference. Add a kernel's .cpp here.
#include "arbor/arbor.h"
#include "cpu_dispatch.h"

#include <stdlib.h>
#include <string.h>

namespace arbor {

static int detect_isa() {
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
        return ISA_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return __builtin_cpu_supports("avx512bf16") ? ISA_AVX512_BF16 : ISA_AVX512;
    return ISA_AVX2;
}

static int isa_of_name(const char* name) {
    if (name == nullptr || *name == 0) return -1;
    if (strcmp(name, "avx512-bf16") == 0) return ISA_AVX512_BF16;
    if (strcmp(name, "avx512") == 0) return ISA_AVX512;
    if (strcmp(name, "avx2") == 0 || strcmp(name, "avx2-fma") == 0) return ISA_AVX2;
    if (strcmp(name, "scalar") == 0) return ISA_SCALAR;
    return -2;
}

// The best this CPU has, capped by ARBOR_CPU_ISA when set to a known name (an unknown name or one
// the CPU lacks is ignored there; arbor_cpu_force_isa reports it instead).
static int best_isa() {
    static const int best = [] {
        const int hw = detect_isa();
        const int env = isa_of_name(getenv("ARBOR_CPU_ISA"));
        const int isa = env >= 0 && env < hw ? env : hw;
        g_bf16_store = isa == ISA_AVX512_BF16;
        return isa;
    }();
    return best;
}

static int g_forced = -1;  // -1: none
bool g_bf16_store = false;

int cpu_isa() {
    const int best = best_isa();
    return g_forced >= 0 && g_forced < best ? g_forced : best;
}

}  // namespace arbor

static const char* isa_name(int isa) {
    return isa == arbor::ISA_AVX512_BF16 ? "avx512-bf16"
           : isa == arbor::ISA_AVX512    ? "avx512"
           : isa == arbor::ISA_AVX2      ? "avx2-fma"
                                         : "scalar";
}

extern "C" const char* arbor_cpu_isa(void) { return isa_name(arbor::cpu_isa()); }
extern "C" const char* arbor_cpu_best_isa(void) { return isa_name(arbor::best_isa()); }
extern "C" void arbor_cpu_force_scalar(int force) {
    arbor::g_forced = force ? arbor::ISA_SCALAR : -1;
    arbor::g_bf16_store = arbor::cpu_isa() == arbor::ISA_AVX512_BF16;
}
extern "C" int arbor_cpu_force_isa(const char* name) {
    const int isa = name == nullptr ? -1 : arbor::isa_of_name(name);
    if (name != nullptr && (isa < 0 || isa > arbor::best_isa())) return ARBOR_ERR_UNSUPPORTED;
    arbor::g_forced = isa;
    arbor::g_bf16_store = arbor::cpu_isa() == arbor::ISA_AVX512_BF16;
    return ARBOR_OK;
}
extern "C" float arbor_bf16_to_f32(uint16_t h) { return arbor::bf16_to_f32(h); }
extern "C" uint16_t arbor_f32_to_bf16(float f) { return arbor::f32_to_bf16(f); }
extern "C" float arbor_f16_to_f32(uint16_t h) { return arbor::f16_to_f32(h); }
extern "C" uint16_t arbor_f32_to_f16(float f) { return arbor::f32_to_f16(f); }

#include "process_exit.cpp"

#include "reference.cpp"
#include "token_stats.cpp"

#include "policy_loss.cpp"

#include "advantages.cpp"

#include "sampling.cpp"

#include "fused_linear.cpp"

#include "stream.cpp"
