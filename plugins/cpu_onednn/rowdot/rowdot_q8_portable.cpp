// The portable tier of rowdot_q8.hpp (scalar integers the compiler may vectorise; a multiply,
// round, then add), and the choice of tier.
#include <cmath>
#include <cstring>

#include "rowdot/rowdot_q8_loops.hpp"

namespace sy::cpu {
namespace {

struct PortableQ8 {
  struct B {
    uint8_t v[32];
  };
  struct L {
    int32_t v[8];
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
  // kQ16Radix·Σ w·hi + Σ w·lo per lane of 4 bytes; w unsigned (dot_u) or signed (dot_s).
  template <class W>
  static L dot(B w, B hi, B lo) {
    L l;
    for (int i = 0; i < 8; ++i) {
      l.v[i] = 0;
      for (int k = 0; k < 4; ++k) {
        const int32_t wk = W(w.v[4 * i + k]);
        l.v[i] += wk * (kQ16Radix * int8_t(hi.v[4 * i + k]) + int8_t(lo.v[4 * i + k]));
      }
    }
    return l;
  }
  static L dot_u(B w, B hi, B lo) { return dot<uint8_t>(w, hi, lo); }
  static L dot_s(B w, B hi, B lo) { return dot<int8_t>(w, hi, lo); }
  static L zero_l() { return L{}; }
  struct V4 {
    float v[4];
  };
  static void sum4_halves(const L* d, V4& lo, V4& hi) {
    for (int i = 0; i < 4; ++i) {
      lo.v[i] = float(d[i].v[0] + d[i].v[1] + d[i].v[2] + d[i].v[3]);
      hi.v[i] = float(d[i].v[4] + d[i].v[5] + d[i].v[6] + d[i].v[7]);
    }
  }
  static V4 sum4(const L* d) {
    V4 s;
    for (int i = 0; i < 4; ++i) {
      int t = 0;
      for (int32_t e : d[i].v) t += e;
      s.v[i] = float(t);
    }
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
  static void quantize(const float* x, Q16Block& out) {
    float amax = 0.f;
    bool nan = false;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i])), nan |= x[i] != x[i];
    const float d = nan ? std::nanf("") : amax / float(kQ16Max);
    const float id = !nan && d != 0.f ? 1.f / d : 0.f;  // a NaN block: digits 0, d NaN
    out.sum_half[0] = out.sum_half[1] = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = int(std::nearbyint(x[i] * id));
      const int hi = int(std::nearbyint(float(q) / float(kQ16Radix)));
      out.q[i] = int16_t(q);
      out.hi[i] = int8_t(hi);
      out.lo[i] = int8_t(q - kQ16Radix * hi);
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
