// rowdot_q8.hpp on AVX512-VNNI: the integer dot of rowdot_q8_loops.hpp on vpdpbusd (four u8 × s8
// products into each int32 lane in one instruction; AVX2 takes two and a constant), and the
// 16-bit forms of AVX2 (rowdot_q8_rows8_avx2.hpp for decode-sized steps, rowdot_q8_panel_avx2.hpp
// for many rows of x) with vpdpwssd, which multiplies 16-bit pairs and accumulates in one
// instruction. The 8-row form first took the two 8-bit digits of x on 512-bit vpdpbusd; widening
// the weights to 16 bits and multiplying Q itself measured 1.2-1.4× faster at M = 1 (AMD EPYC
// family 25 model 17, docs/numerics.md), so that form is gone.
// Shared by the vnni and amx files (each compiles it with its own flags). Internal linkage.
#pragma once

#include "rowdot/rowdot_q8_panel_avx2.hpp"

namespace sy::cpu {
namespace {

struct VnniQ8 : Avx2Q8 {
  static L digits_u(B w, B hi, B lo) {
    const L t = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, hi);
    return _mm256_dpbusd_epi32(_mm256_mullo_epi32(t, _mm256_set1_epi32(kQ16Radix)), w, lo);
  }
  static L dot_u(B w, const Q16Block& x) { return digits_u(w, load(x.hi), load(x.lo)); }
  static L dot_s(B w, const Q16Block& x) {
    return digits_u(_mm256_sign_epi8(w, w), _mm256_sign_epi8(load(x.hi), w),
                    _mm256_sign_epi8(load(x.lo), w));
  }
  // q5_0 / q5_1 as Avx2Q8::q5, the fifth bits taken as a byte mask (AVX512-BW) in one step.
  static B q5(const uint8_t* qs, const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof bits);
    const B low = nibbles(qs);
    return _mm256_mask_add_epi8(low, __mmask32(bits), low, _mm256_set1_epi8(16));
  }
};

// The 16-bit forms' multiply-accumulate in one instruction.
struct VnniMac {
  static __m256i mac(__m256i sum, __m256i w, __m256i q) { return _mm256_dpwssd_epi32(sum, w, q); }
  static __m256i accumulate(__m256i sum, __m256i w, __m256i q) { return mac(sum, w, q); }
};

}  // namespace
}  // namespace sy::cpu
