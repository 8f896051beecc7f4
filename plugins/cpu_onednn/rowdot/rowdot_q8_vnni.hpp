// The VNNI integer dot of rowdot_q8_loops.hpp: AVX512-VNNI's vpdpbusd on 256-bit vectors, four
// u8 × s8 products into each int32 lane in one instruction (AVX2 takes two and a constant).
// Shared by the vnni and amx files (each compiles it with its own flags). Internal linkage.
#pragma once

#include "rowdot/rowdot_q8_avx2.hpp"

namespace sy::cpu {
namespace {

struct VnniQ8 : Avx2Q8 {
  static L dot_u(B w, B hi, B lo) {
    const L t = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, hi);
    return _mm256_dpbusd_epi32(_mm256_mullo_epi32(t, _mm256_set1_epi32(kQ16Radix)), w, lo);
  }
  static L dot_s(B w, B hi, B lo) {
    return dot_u(_mm256_sign_epi8(w, w), _mm256_sign_epi8(hi, w), _mm256_sign_epi8(lo, w));
  }
  // q5_0 / q5_1 as Avx2Q8::q5, the fifth bits taken as a byte mask (AVX512-BW) in one step.
  static B q5(const uint8_t* qs, const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof bits);
    const B low = nibbles(qs);
    return _mm256_mask_add_epi8(low, __mmask32(bits), low, _mm256_set1_epi8(16));
  }
};

}  // namespace
}  // namespace sy::cpu
