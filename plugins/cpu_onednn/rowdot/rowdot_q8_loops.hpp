// The loops of rowdot_q8.hpp over a tier's integer dot (Ops), compiled per tier
// (rowdot_q8_{portable,avx2,avx512}.cpp). Internal linkage (scalar_math.hpp says why).
//
// Ops offers 32 bytes B, 8 int32 lanes L and 4-wide f32 vectors V4 (one lane per output):
//   B load(p); B nibbles(qs16) (qs[i] & 15 in bytes 0-15, qs[i] >> 4 in 16-31);
//   B low(p32), high(p32) (each byte's low / high nibble); B q6(ql32, high, qh32, shift);
//   B q5(qs16, qh4) (nibbles() with bit i of the 32-bit qh as 16 in byte i);
//   B q5k(ql32, high, qh32, bit) (low() or high() of ql, with bit `bit` of qh[i] as 16 in byte i);
//   B iq4(qs16) (kvalues_iq4nl of nibbles(): signed bytes);
//   B sub(B, c); L dot_u(B w, const Q16Block& x) (w unsigned), L dot_s(B w, const Q16Block& x)
//   (w signed): Σ w·Q in lanes, elements 0-15 in lanes 0-3 and 16-31 in 4-7 (each tier takes the
//   form of Q its products want: the two digits, or Q itself); L zero_l();
//   V4 sum4(L[4]) (each vector's 8 lanes summed exactly, as f32); sum4_halves(L[4], lo, hi)
//   (lanes 0-3 and 4-7 apart); V4 zero4, load4, store4, mul4, add4, fmadd4 (one rounding on the
//   vector tiers, two on portable); float half(p) (an IEEE half at p, exactly).
#pragma once

#include <cstdint>

#include "quant/quant_blocks.hpp"
#include "rowdot/rowdot_lanes.hpp"
#include "rowdot/rowdot_q8.hpp"
#include "tier/scalar_math.hpp"

namespace sy::cpu {
namespace {

// The weight decoders: D::at(row, b, w, s0, s1, coeff) gives the 32-element sub-block b of a
// weight row: w its 32 integers (signed when D::kSigned), s0 its scale (D::kHalves: elements
// 0-15's, and s1 16-31's), coeff the offset that multiplies the activation block's sum s
// (D::kOffset: q4_1's m, q4_k's −dmin·m). D::kHalfFirst: each block of 32 is kBlockBytes long and
// starts with its f16 scale (and, with kOffset, its f16 offset next), so a block's factors can be
// read without decoding it (the 8-row forms load the 8 rows' at once); K-quants derive theirs.
template <class Ops>
struct Q8_0W {
  static constexpr bool kHalfFirst = true;
  static constexpr int kBlockBytes = 34;
  static constexpr bool kSigned = true, kOffset = false, kHalves = false;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&, float&) {
    const uint8_t* p = row + kBlockBytes * b;
    w = Ops::load(p + 2);
    s0 = Ops::half(p);
  }
};

template <class Ops>
struct Q4_0W {
  static constexpr bool kHalfFirst = true;
  static constexpr int kBlockBytes = 18;
  static constexpr bool kSigned = true, kOffset = false, kHalves = false;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&, float&) {
    const uint8_t* p = row + kBlockBytes * b;
    w = Ops::sub(Ops::nibbles(p + 2), 8);
    s0 = Ops::half(p);
  }
};

template <class Ops>
struct Q4_1W {
  static constexpr bool kHalfFirst = true;
  static constexpr int kBlockBytes = 20;
  static constexpr bool kSigned = false, kOffset = true, kHalves = false;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&,
                 float& coeff) {
    const uint8_t* p = row + kBlockBytes * b;
    w = Ops::nibbles(p + 4);
    s0 = Ops::half(p);
    coeff = Ops::half(p + 2);
  }
};

// q5_0: d·(q − 16), q the nibble and the fifth bit (dequant_q5_0).
template <class Ops>
struct Q5_0W {
  static constexpr bool kHalfFirst = true;
  static constexpr int kBlockBytes = 22;
  static constexpr bool kSigned = true, kOffset = false, kHalves = false;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&, float&) {
    const uint8_t* p = row + kBlockBytes * b;
    w = Ops::sub(Ops::q5(p + 6, p + 2), 16);
    s0 = Ops::half(p);
  }
};

// q5_1: d·q + m (dequant_q5_1).
template <class Ops>
struct Q5_1W {
  static constexpr bool kHalfFirst = true;
  static constexpr int kBlockBytes = 24;
  static constexpr bool kSigned = false, kOffset = true, kHalves = false;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&,
                 float& coeff) {
    const uint8_t* p = row + kBlockBytes * b;
    w = Ops::q5(p + 8, p + 4);
    s0 = Ops::half(p);
    coeff = Ops::half(p + 2);
  }
};

// q4_k and q5_k's sub-block scales: sub-block j is d·sc_j·q − dmin·m_j, sc_j and m_j 6-bit
// fields at byte 4 of a block of kBytes (quant_blocks.hpp's scale_min_k4).
template <class Ops, int kBytes>
struct K4Scales {
  static void at(const uint8_t* row, int64_t b, float& s0, float& coeff) {
    const uint8_t* p = row + kBytes * (b / 8);
    int sc, m;
    scale_min_k4(int(b % 8), p + 4, sc, m);
    s0 = Ops::half(p) * float(sc);
    coeff = -(Ops::half(p + 2) * float(m));
  }
  // Sub-blocks [8·sb, 8·sb + count) of a row, as at() gives them, d and dmin converted once.
  static void scales(const uint8_t* row, int64_t sb, int count, float* s0, float*, float* coeff,
                     int stride) {
    const uint8_t* p = row + kBytes * sb;
    const float d = Ops::half(p), dmin = Ops::half(p + 2);
    uint8_t sm[16];
    scales_mins_k4(p + 4, sm);
    for (int j = 0; j < count; ++j) {
      s0[j * stride] = d * float(sm[j]);
      coeff[j * stride] = -(dmin * float(sm[8 + j]));
    }
  }
};

// q4_k (quant_blocks.hpp's dequant_q4_k): sub-blocks 2i and 2i + 1 are the low and high nibbles
// of the 32 bytes at 16 + 32i.
template <class Ops>
struct Q4_KW : K4Scales<Ops, 144> {
  static constexpr bool kHalfFirst = false;
  static constexpr bool kSigned = false, kOffset = true, kHalves = false;
  // The 32 bytes whose low (b even) or high nibbles are sub-block b.
  static const uint8_t* nibble_bytes(const uint8_t* row, int64_t b) {
    return row + 144 * (b / 8) + 16 + 32 * (b % 8 / 2);
  }
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&,
                 float& coeff) {
    const uint8_t* q = nibble_bytes(row, b);
    w = b % 2 ? Ops::high(q) : Ops::low(q);
    K4Scales<Ops, 144>::at(row, b, s0, coeff);
  }
};

// q5_k (dequant_q5_k): q4_k's nibbles (at 48 + 32i) with bit j of each of the 32 bytes of qh
// (at 16) as 16.
template <class Ops>
struct Q5_KW : K4Scales<Ops, 176> {
  static constexpr bool kHalfFirst = false;
  static constexpr bool kSigned = false, kOffset = true, kHalves = false;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&,
                 float& coeff) {
    const int j = int(b % 8);
    const uint8_t* p = row + 176 * (b / 8);
    w = Ops::q5k(p + 48 + 32 * (j / 2), j % 2, p + 16, j);
    K4Scales<Ops, 176>::at(row, b, s0, coeff);
  }
};

// iq4_nl (dequant_iq4_nl): d·kvalues_iq4nl[nibble], signed values in [−127, 113].
template <class Ops>
struct Iq4_NLW {
  static constexpr bool kHalfFirst = true;
  static constexpr int kBlockBytes = 18;
  static constexpr bool kSigned = true, kOffset = false, kHalves = false;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&, float&) {
    const uint8_t* p = row + kBlockBytes * b;
    w = Ops::iq4(p + 2);
    s0 = Ops::half(p);
  }
};

// iq4_xs (dequant_iq4_xs): sub-block j as iq4_nl's values under the scale d·(ls_j − 32)
// (quant_blocks.hpp's iq4_xs_scale, with d converted by Ops).
template <class Ops>
struct Iq4_XSW {
  static constexpr bool kHalfFirst = false;
  static constexpr bool kSigned = true, kOffset = false, kHalves = false;
  static float scale(const uint8_t* p, float d, int j) { return d * float(iq4_xs_ls(p, j) - 32); }
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float&, float&) {
    const uint8_t* p = row + 136 * (b / 8);
    const int j = int(b % 8);
    w = Ops::iq4(p + 8 + 16 * j);
    s0 = scale(p, Ops::half(p), j);
  }
  // Sub-blocks [8·sb, 8·sb + count) of a row, as at() gives them, d converted once and the 6-bit
  // scales read off two words (iq4_xs_ls's fields: 4 low bits at 4j of scales_l, 2 high at 2j of
  // scales_h); one field at a time from the bytes cost as much as the 8-row dot it feeds.
  static void scales(const uint8_t* row, int64_t sb, int count, float* s0, float*, float*,
                     int stride) {
    const uint8_t* p = row + 136 * sb;
    const float d = Ops::half(p);
    uint32_t low;
    std::memcpy(&low, p + 4, sizeof low);
    uint32_t high = uint32_t(p[2]) | uint32_t(p[3]) << 8;
    for (int j = 0; j < count; ++j, low >>= 4, high >>= 2)
      s0[j * stride] = d * float(int((low & 15) | (high & 3) << 4) - 32);
  }
};

// q6_k: sub-blocks of 16, d·sc·(q − 32) (dequant_q6_k); an activation block covers two.
template <class Ops>
struct Q6_KW {
  static constexpr bool kHalfFirst = false;
  static constexpr bool kSigned = true, kOffset = false, kHalves = true;
  static void at(const uint8_t* row, int64_t b, typename Ops::B& w, float& s0, float& s1, float&) {
    const uint8_t* p = row + 210 * (b / 8);
    const int j = int(b % 8), h = j / 4, t = j % 4;
    const int8_t* s = reinterpret_cast<const int8_t*>(p + 192) + 8 * h + 2 * t;
    const float d = Ops::half(p + 208);
    w = Ops::sub(Ops::q6(p + 64 * h + 32 * (t % 2), t >= 2, p + 128 + 32 * h, 2 * t), 32);
    s0 = d * float(s[0]);
    s1 = d * float(s[1]);
  }
  // Blocks [8·sb, 8·sb + count) of a row's scales, as at() gives them, d converted once: block j
  // takes the 16-element scales 2j and 2j + 1.
  static void scales(const uint8_t* row, int64_t sb, int count, float* s0, float* s1, float*,
                     int stride) {
    const uint8_t* p = row + 210 * sb;
    const auto* sc = reinterpret_cast<const int8_t*>(p + 192);
    const float d = Ops::half(p + 208);
    for (int j = 0; j < count; ++j)
      s0[j * stride] = d * float(sc[2 * j]), s1[j * stride] = d * float(sc[2 * j + 1]);
  }
};

// RN weight rows (row_bytes apart) × RM rows of x, RN·RM <= 4 outputs, each a lane of Ops' 4-wide
// vectors: out[r][m] = y[m][n + r]. Per activation block b, in order, each output's exact integer
// sum(s) Σ (of both digits), then acc = fma(float(Σ), w_scale · d, acc) (q6_k: its two halves in
// turn) and, with a weight offset, off = fma(offset, s, off); the result is acc + off. Lanes are
// independent, so an output's arithmetic is the same in any tile (rowdot_q8.hpp: batch invariance).
template <class Ops, class D, int RN, int RM>
inline void q8_tile(const uint8_t* w, int64_t row_bytes, const Q16Block* const* x, int64_t blocks,
                    float (&out)[RN][RM]) {
  static_assert(RN * RM <= 4);
  using V = typename Ops::V4;
  V acc = Ops::zero4(), off = Ops::zero4();
  for (int64_t b = 0; b < blocks; ++b) {
    typename Ops::L dot[4] = {Ops::zero_l(), Ops::zero_l(), Ops::zero_l(), Ops::zero_l()};
    float s0[4] = {}, s1[4] = {}, coeff[4] = {}, d[4] = {}, sum[4] = {};
    for (int r = 0; r < RN; ++r) {
      typename Ops::B wb;
      D::at(w + r * row_bytes, b, wb, s0[r * RM], s1[r * RM], coeff[r * RM]);
      for (int m = 0; m < RM; ++m) {
        const Q16Block& xb = x[m][b];
        const int o = r * RM + m;
        s0[o] = s0[r * RM], s1[o] = s1[r * RM], coeff[o] = coeff[r * RM];
        d[o] = xb.d, sum[o] = xb.s;
        if constexpr (D::kSigned)
          dot[o] = Ops::dot_s(wb, xb);
        else
          dot[o] = Ops::dot_u(wb, xb);
      }
    }
    const V dx = Ops::load4(d);
    if constexpr (D::kHalves) {
      V lo, hi;
      Ops::sum4_halves(dot, lo, hi);
      acc = Ops::fmadd4(lo, Ops::mul4(Ops::load4(s0), dx), acc);
      acc = Ops::fmadd4(hi, Ops::mul4(Ops::load4(s1), dx), acc);
    } else {
      acc = Ops::fmadd4(Ops::sum4(dot), Ops::mul4(Ops::load4(s0), dx), acc);
    }
    if constexpr (D::kOffset) off = Ops::fmadd4(Ops::load4(coeff), Ops::load4(sum), off);
  }
  float res[4];
  Ops::store4(res, Ops::add4(acc, off));
  for (int r = 0; r < RN; ++r)
    for (int m = 0; m < RM; ++m) out[r][m] = res[r * RM + m];
}

// Weight rows [n, n + RN) against every row of x, RM rows at a time (the rest one by one).
template <class Ops, class D, int RN, int RM>
void q8_rows(const RowdotQ8Args& a, const uint8_t* w, int64_t row_bytes, int64_t n) {
  const int64_t blocks = a.K / 32;
  auto store = [&](int64_t m, int r, float v) {
    const int64_t at = m * a.N + n + r;
    if (a.y_bf16)
      static_cast<bf16_bits*>(a.y)[at] = from_f32<bf16_bits>(v);
    else
      static_cast<float*>(a.y)[at] = v;
  };
  int64_t m = 0;
  for (; m + RM <= a.M; m += RM) {
    const Q16Block* x[RM];
    for (int i = 0; i < RM; ++i) x[i] = a.xq + (m + i) * blocks;
    float out[RN][RM];
    q8_tile<Ops, D, RN, RM>(w, row_bytes, x, blocks, out);
    for (int r = 0; r < RN; ++r)
      for (int i = 0; i < RM; ++i) store(m + i, r, out[r][i]);
  }
  for (; m < a.M; ++m) {
    const Q16Block* x[1] = {a.xq + m * blocks};
    float out[RN][1];
    q8_tile<Ops, D, RN, 1>(w, row_bytes, x, blocks, out);
    for (int r = 0; r < RN; ++r) store(m, r, out[r][0]);
  }
}

// Decode-sized M: 4 weight rows per tile against one row of x; more rows of x: one weight row
// against 4 rows of x. The weights are swept into the caches in address order ahead of use.
template <class Ops, class D>
void q8_columns_of(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  const int64_t row_bytes = a.K / sy_dtype_block_elements(a.wtype) * sy_dtype_block_bytes(a.wtype);
  const uint8_t* w = static_cast<const uint8_t*>(a.w);
  Sweep sweep(w + n0 * row_bytes);
  int64_t n = n0;
  if (a.M < 4)
    for (; n + 4 <= n1; n += 4) {
      sweep.reach(w + (n + 4) * row_bytes);
      q8_rows<Ops, D, 4, 1>(a, w + n * row_bytes, row_bytes, n);
    }
  for (; n < n1; ++n) {
    sweep.reach(w + (n + 1) * row_bytes);
    q8_rows<Ops, D, 1, 4>(a, w + n * row_bytes, row_bytes, n);
  }
}

// For the 8-row forms (rowdot_q8_rows8_*.hpp): the 8 rows' scales (s1: q6_k's second half-block's)
// and offsets of blocks [b, b + count), as columns: s0[j][r] is row r's scale in block b + j.
// K-quants derive a block's scale from packed 6-bit fields; done once per super-block here, not per
// row and block in the loop.
template <class B, class D>
void q8_scales8(const uint8_t* w, int64_t row_bytes, int64_t b, int64_t count, float (&s0)[8][8],
                float (&s1)[8][8], float (&coeff)[8][8]) {
  if constexpr (requires { D::scales; }) {  // a super-block's scales at once (K-quants, iq4_xs)
    if (b % 8 == 0) {
      for (int r = 0; r < 8; ++r)
        D::scales(w + r * row_bytes, b / 8, int(count), &s0[0][r], &s1[0][r], &coeff[0][r], 8);
      return;
    }
  }
  for (int64_t j = 0; j < count; ++j)
    for (int r = 0; r < 8; ++r) {
      B unused;
      D::at(w + r * row_bytes, b + j, unused, s0[j][r], s1[j][r], coeff[j][r]);
    }
}

// The 8-row forms' results for weight rows [n, n + 8) and row m of x, into y.
inline void q8_store8(const RowdotQ8Args& a, int64_t m, int64_t n, const float (&out)[8]) {
  for (int r = 0; r < 8; ++r) {
    const int64_t at = m * a.N + n + r;
    if (a.y_bf16)
      static_cast<bf16_bits*>(a.y)[at] = from_f32<bf16_bits>(out[r]);
    else
      static_cast<float*>(a.y)[at] = out[r];
  }
}

// Decode-sized M through an 8-row form: rows8(a, w, row_bytes, n, m) for weight rows [n, n + 8)
// against each row m of x (which prefetches the next 8 rows as it goes); the rest of
// the rows (and larger M) through q8_columns_of's 4-row form, whose arithmetic per output is the
// same.
template <class Ops, class D, class Rows8>
void q8_columns_by8(const RowdotQ8Args& a, int64_t n0, int64_t n1, Rows8 rows8) {
  const int64_t row_bytes = a.K / sy_dtype_block_elements(a.wtype) * sy_dtype_block_bytes(a.wtype);
  const uint8_t* w = static_cast<const uint8_t*>(a.w);
  int64_t n = n0;
  if (a.M < 4)
    for (; n + 8 <= n1; n += 8)
      for (int64_t m = 0; m < a.M; ++m) rows8(a, w + n * row_bytes, row_bytes, n, m);
  if (n < n1) q8_columns_of<Ops, D>(a, n, n1);
}

// f(D{}) with D the decoder of `t` on Ops; nothing for a type without one (the envelope's weight
// dtypes, kernel_table.cpp, keep those away). Every q8 path dispatches through this.
template <class Ops, class F>
void with_q8_decoder(sy_dtype t, F&& f) {
  switch (t) {
    case SY_DTYPE_Q8_0: return f(Q8_0W<Ops>{});
    case SY_DTYPE_Q4_0: return f(Q4_0W<Ops>{});
    case SY_DTYPE_Q4_1: return f(Q4_1W<Ops>{});
    case SY_DTYPE_Q5_0: return f(Q5_0W<Ops>{});
    case SY_DTYPE_Q5_1: return f(Q5_1W<Ops>{});
    case SY_DTYPE_Q4_K: return f(Q4_KW<Ops>{});
    case SY_DTYPE_Q5_K: return f(Q5_KW<Ops>{});
    case SY_DTYPE_IQ4_NL: return f(Iq4_NLW<Ops>{});
    case SY_DTYPE_IQ4_XS: return f(Iq4_XSW<Ops>{});
    case SY_DTYPE_Q6_K: return f(Q6_KW<Ops>{});
    default: return;
  }
}

template <class Ops>
void q8_columns(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  with_q8_decoder<Ops>(a.wtype, [&](auto d) { q8_columns_of<Ops, decltype(d)>(a, n0, n1); });
}

// Rows [m0, m1) of x as Q16Blocks, through Ops::quantize on 32 f32 values at a time.
template <class Ops>
void q8_quantize(const float* xf, const uint16_t* xb, int64_t K, int64_t m0, int64_t m1,
                 Q16Block* out) {
  const int64_t blocks = K / 32;
  alignas(64) float wide[32];
  for (int64_t m = m0; m < m1; ++m)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* x = xf ? xf + m * K + 32 * b : wide;
      if (!xf)
        for (int i = 0; i < 32; ++i) wide[i] = to_f32(bf16_bits(xb[m * K + 32 * b + i]));
      Ops::quantize(x, out[m * blocks + b]);
    }
}

template <class Ops>
RowdotQ8Tier make_q8_tier(const char* name) {
  return {name, q8_quantize<Ops>, q8_columns<Ops>, nullptr, 0};
}

}  // namespace
}  // namespace sy::cpu
