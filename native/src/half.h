// Half-precision <-> fp32 conversions for host code (bit-exact, round-to-nearest-even, NaN kept).
#ifndef ARBOR_HALF_H
#define ARBOR_HALF_H

#include <stdint.h>
#include <string.h>

namespace arbor {

static inline float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

static inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                           // round to nearest even
    return (uint16_t)(u >> 16);
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) return bits_to_f32(sign | 0x7f800000u | (man << 13));  // inf / NaN
    if (exp == 0) {
        if (man == 0) return bits_to_f32(sign);
        // subnormal: value = man * 2^-24
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t u = f32_to_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);          // NaN
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);         // overflow (>= 65520) -> inf
    if (a < 0x38800000u) {                                           // below the smallest normal 2^-14
        // subnormal or zero: round a * 2^24 to the nearest even integer
        float v = bits_to_f32(a) * 16777216.0f;                      // exact scaling
        uint32_t m = (uint32_t)v;
        float rem = v - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1u))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);                      // round to nearest even at bit 13
    r -= 112u << 23;
    return (uint16_t)(sign | (r >> 13));
}

}  // namespace arbor

#endif
