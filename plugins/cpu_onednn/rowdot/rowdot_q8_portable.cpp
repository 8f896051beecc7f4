// The portable tier of rowdot_q8.hpp (SSE2, which baseline x86-64 has, for the integer products;
// scalar float steps the compiler may vectorise: a multiply, round, then add), and the choice of
// tier.
#include <emmintrin.h>

#include <cmath>
#include <cstring>

#include "rowdot/rowdot_q8_loops.hpp"

namespace sy::cpu {
namespace {

struct PortableQ8 {
  struct B {
    uint8_t v[32];
  };
  // Elements 0-15's products summed in pairs into lo's 4 lanes, 16-31's into hi's.
  struct L {
    __m128i lo, hi;
  };
  static B load(const void* p) {
    B b;
    std::memcpy(b.v, p, 32);
    return b;
  }
  static B nibbles(const uint8_t* qs) {
    B b;
    for (int i = 0; i < 16; ++i) b.v[i] = qs[i] & 0x0f, b.v[i + 16] = qs[i] >> 4;
    return b;
  }
  static B low(const uint8_t* p) {
    B b;
    for (int i = 0; i < 32; ++i) b.v[i] = p[i] & 0x0f;
    return b;
  }
  static B high(const uint8_t* p) {
    B b;
    for (int i = 0; i < 32; ++i) b.v[i] = p[i] >> 4;
    return b;
  }
  static B q6(const uint8_t* ql, bool hi, const uint8_t* qh, int shift) {
    B b = hi ? high(ql) : low(ql);
    for (int i = 0; i < 32; ++i) b.v[i] = uint8_t(b.v[i] | ((qh[i] >> shift) & 3) << 4);
    return b;
  }
  static B q5(const uint8_t* qs, const uint8_t* qh) {
    B b = nibbles(qs);
    const uint32_t bits = block_qh(qh);
    for (int i = 0; i < 32; ++i) b.v[i] = uint8_t(b.v[i] | ((bits >> i) & 1) << 4);
    return b;
  }
  static B q5k(const uint8_t* ql, bool hi, const uint8_t* qh, int bit) {
    B b = hi ? high(ql) : low(ql);
    for (int i = 0; i < 32; ++i) b.v[i] = uint8_t(b.v[i] | ((qh[i] >> bit) & 1) << 4);
    return b;
  }
  static B iq4(const uint8_t* qs) {
    B b = nibbles(qs);
    for (uint8_t& e : b.v) e = uint8_t(int8_t(sy_iq4nl_value(e)));
    return b;
  }
  static B sub(B w, int c) {
    for (uint8_t& e : w.v) e = uint8_t(e - c);
    return w;
  }
  // Σ w·Q with Q itself on SSE2's pmaddwd, which every x86-64 CPU has: the weights widened to 16
  // bits (sign- or zero-extended), 8 products a step summed in pairs into int32. The two-digit
  // form this replaced cost 2 scalar products per element and was 3-8× slower than the exact
  // kernel on this tier; |w·Q| <= 255 · 32258, so a pair never overflows.
  template <bool Signed>
  static L dot(const B& w, const Q16Block& x) {
    const __m128i zero = _mm_setzero_si128();
    __m128i half[2];
    for (int h = 0; h < 2; ++h) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.v + 16 * h));
      const __m128i w0 =
          Signed ? _mm_srai_epi16(_mm_unpacklo_epi8(b, b), 8) : _mm_unpacklo_epi8(b, zero);
      const __m128i w1 =
          Signed ? _mm_srai_epi16(_mm_unpackhi_epi8(b, b), 8) : _mm_unpackhi_epi8(b, zero);
      const auto* q = reinterpret_cast<const __m128i*>(x.q + 16 * h);
      half[h] = _mm_add_epi32(_mm_madd_epi16(w0, _mm_loadu_si128(q)),
                              _mm_madd_epi16(w1, _mm_loadu_si128(q + 1)));
    }
    return {half[0], half[1]};
  }
  static L dot_u(const B& w, const Q16Block& x) { return dot<false>(w, x); }
  static L dot_s(const B& w, const Q16Block& x) { return dot<true>(w, x); }
  static L zero_l() { return {_mm_setzero_si128(), _mm_setzero_si128()}; }
  static int32_t sum_lanes(__m128i v) {
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
    return _mm_cvtsi128_si32(v);
  }
  struct V4 {
    float v[4];
  };
  static void sum4_halves(const L* d, V4& lo, V4& hi) {
    for (int i = 0; i < 4; ++i) {
      lo.v[i] = float(sum_lanes(d[i].lo));
      hi.v[i] = float(sum_lanes(d[i].hi));
    }
  }
  static V4 sum4(const L* d) {
    V4 s;
    for (int i = 0; i < 4; ++i) s.v[i] = float(sum_lanes(_mm_add_epi32(d[i].lo, d[i].hi)));
    return s;
  }
  static V4 zero4() { return V4{}; }
  static V4 load4(const float* p) {
    V4 v;
    std::memcpy(v.v, p, sizeof v.v);
    return v;
  }
  static void store4(float* p, V4 v) { std::memcpy(p, v.v, sizeof v.v); }
  static V4 mul4(V4 a, V4 b) {
    for (int i = 0; i < 4; ++i) a.v[i] *= b.v[i];
    return a;
  }
  static V4 add4(V4 a, V4 b) {
    for (int i = 0; i < 4; ++i) a.v[i] += b.v[i];
    return a;
  }
  // Baseline x86-64 has no FMA: multiply, round, add.
  static V4 fmadd4(V4 a, V4 b, V4 c) { return add4(mul4(a, b), c); }
  static float half(const uint8_t* p) { return block_half(p); }
  // Q and its sums only: this tier's dot multiplies Q itself, so the two 8-bit digits (the int8
  // forms' operands on the other tiers) are left unset.
  static void quantize(const float* x, Q16Block& out) {
    float amax = 0.f;
    bool nan = false;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i])), nan |= x[i] != x[i];
    const float d = nan ? std::nanf("") : amax / float(kQ16Max);
    const float id = !nan && d != 0.f ? 1.f / d : 0.f;  // a NaN block: digits 0, d NaN
    out.sum_half[0] = out.sum_half[1] = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = int(std::nearbyint(x[i] * id));
      out.q[i] = int16_t(q);
      out.sum_half[i / 16] += q;
    }
    out.d = d;
    out.s = d * float(out.sum_half[0] + out.sum_half[1]);
  }
};

const RowdotQ8Tier kTier = make_q8_tier<PortableQ8>("q8_portable");

}  // namespace

const RowdotQ8Tier& rowdot_q8_portable() {
  return kTier;
}

const RowdotQ8Tier& rowdot_q8_tier(const TierChoice& tier) {
  __builtin_cpu_init();
  if (tier.tier == CpuTier::amx && __builtin_cpu_supports("amx-int8") &&
      __builtin_cpu_supports("avx512vnni"))
    return rowdot_q8_amx();
  if (has_avx512(tier.tier) && __builtin_cpu_supports("avx512vnni")) return rowdot_q8_vnni();
  if (tier.tier >= CpuTier::avx2) return rowdot_q8_avx2();
  return rowdot_q8_portable();
}

}  // namespace sy::cpu
