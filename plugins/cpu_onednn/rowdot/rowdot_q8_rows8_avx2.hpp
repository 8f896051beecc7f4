// Decode-sized steps of rowdot_q8.hpp on AVX2: 8 weight rows against one row of x per pass, the
// weights widened to 16 bits and multiplied with Q itself (Q16Block::q) by pmaddwd, the 8 exact
// block sums reduced together, and the 8 rows' f16 scales (and offsets) converted in one
// instruction. AVX2 has no VNNI: the two 8-bit digits of the 4-row form cost two maddubs, two
// madd and the signs of a signed w per block, and its horizontal sum per 4 outputs and scalar
// half-to-float conversions cost as much again. pmaddwd takes signed 16-bit operands, so a
// signed w needs no sign trick and |w · Q| pairs (2 · 128 · 32258) cannot overflow.
//
// The arithmetic per output is the 4-row form's (the exact Σ, then acc = fma(float(Σ),
// w_scale · d, acc), off = fma(offset, s, off), the result acc + off), so a row's result is the
// same whichever form computed it (Tiers/BatchInvariance.MatmulQ16RowsDoNotDependOnTheirCompany).
// Compiled into the avx2 file only. Internal linkage.
#pragma once

#include <algorithm>

#include "rowdot/rowdot_q8_avx2.hpp"

namespace sy::cpu {
namespace {

// The int32 sums of two vectors' lanes, interleaved as hadd leaves them: a row pair's partial
// sums, taken as soon as the pair is multiplied so that 4 vectors, not 8, stay live (AVX2 has 16
// registers; 8 sums spilled to the stack every block).
inline __m256i sum_pair_avx2(__m256i d0, __m256i d1) {
  return _mm256_hadd_epi32(d0, d1);
}

// The 8 int32 sums of 4 row pairs (p[i]: rows 2i and 2i+1, sum_pair_avx2), in row order.
// Integer sums are exact, so the order of the additions does not matter.
inline __m256i sum_rows8_avx2(const __m256i (&p)[4]) {
  // Each 128-bit half: rows 0-3 (4-7) summed over that half's lanes.
  const __m256i ab = _mm256_hadd_epi32(p[0], p[1]), ce = _mm256_hadd_epi32(p[2], p[3]);
  return _mm256_add_epi32(_mm256_permute2x128_si256(ab, ce, 0x20),
                          _mm256_permute2x128_si256(ab, ce, 0x31));
}

// The low 16 bits of each of 8 lanes, as IEEE halves, widened to f32 (exactly).
inline __m256 halves8(__m256i v) {
  const __m256i p =
      _mm256_packus_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_setzero_si256());
  return _mm256_cvtph_ps(
      _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0))));
}

// Sub-block b of a weight row as 16-bit elements 0-15 (lo) and 16-31 (hi), less kBias: the
// integers D::at gives, w = lo/hi − kBias. A nibble type is widened straight from its 16 bytes
// and its bias (q4_0's 8, the iq4 lookups' 128) taken off the 8 rows' sums at once as kBias·ΣQ
// (exact: integers); the others go through D::at and a sign or zero extension.
template <class D>
struct Wide16 {
  static constexpr int kBias = 0;
  static void at(const uint8_t* row, int64_t b, __m256i& lo, __m256i& hi) {
    __m256i w;
    float unused[3];
    D::at(row, b, w, unused[0], unused[1], unused[2]);
    const __m128i a = _mm256_castsi256_si128(w), c = _mm256_extracti128_si256(w, 1);
    lo = D::kSigned ? _mm256_cvtepi8_epi16(a) : _mm256_cvtepu8_epi16(a);
    hi = D::kSigned ? _mm256_cvtepi8_epi16(c) : _mm256_cvtepu8_epi16(c);
  }
};

inline void nibbles16(const uint8_t* qs, __m256i& lo, __m256i& hi) {
  const __m256i t = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  lo = _mm256_and_si256(t, _mm256_set1_epi16(15));
  hi = _mm256_srli_epi16(t, 4);
}

template <class Ops>
struct Wide16<Q4_0W<Ops>> {
  static constexpr int kBias = 8;
  static void at(const uint8_t* row, int64_t b, __m256i& lo, __m256i& hi) {
    nibbles16(row + Q4_0W<Ops>::kBlockBytes * b + 2, lo, hi);
  }
};

template <class Ops>
struct Wide16<Q4_1W<Ops>> {
  static constexpr int kBias = 0;
  static void at(const uint8_t* row, int64_t b, __m256i& lo, __m256i& hi) {
    nibbles16(row + Q4_1W<Ops>::kBlockBytes * b + 4, lo, hi);
  }
};

template <class Ops>
struct Wide16<Q4_KW<Ops>> {
  static constexpr int kBias = 0;
  static void at(const uint8_t* row, int64_t b, __m256i& lo, __m256i& hi) {
    const auto* q = reinterpret_cast<const __m128i*>(Q4_KW<Ops>::nibble_bytes(row, b));
    lo = _mm256_cvtepu8_epi16(_mm_loadu_si128(q));
    hi = _mm256_cvtepu8_epi16(_mm_loadu_si128(q + 1));
    const auto nibble = [&](__m256i v) {
      return b % 2 ? _mm256_srli_epi16(v, 4) : _mm256_and_si256(v, _mm256_set1_epi16(15));
    };
    lo = nibble(lo), hi = nibble(hi);
  }
};

template <class Ops>
struct Wide16<Q8_0W<Ops>> {
  static constexpr int kBias = 0;
  static void at(const uint8_t* row, int64_t b, __m256i& lo, __m256i& hi) {
    const auto* q = reinterpret_cast<const __m128i*>(row + Q8_0W<Ops>::kBlockBytes * b + 2);
    lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(q));
    hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1));
  }
};

// iq4_nl / iq4_xs: the 16 bytes of nibbles at qs looked up as 16-bit elements, value + 128 (in
// [1, 241], so zero-extended: the −128 is taken off the 8 rows' sums at once, as q4_0's −8). One
// pshufb per 16 elements: pshufb zeroes a byte whose index has its top bit set, so a lane's high
// byte is given such an index (0xf0 or'ed in, kept by the mask and by the arithmetic shift).
// Looking up bytes and widening them cost 3 more instructions per block and row.
inline void iq4_wide16(const uint8_t* qs, __m256i& lo, __m256i& hi) {
  const __m256i table = _mm256_xor_si256(Avx2Q8::iq4_table(), _mm256_set1_epi8(char(0x80)));
  const __m256i t =
      _mm256_or_si256(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs))),
                      _mm256_set1_epi16(int16_t(0xf000)));
  lo = _mm256_shuffle_epi8(table, _mm256_and_si256(t, _mm256_set1_epi16(int16_t(0x800f))));
  hi = _mm256_shuffle_epi8(table, _mm256_srai_epi16(t, 4));
}

template <class Ops>
struct Wide16<Iq4_NLW<Ops>> {
  static constexpr int kBias = 128;
  static void at(const uint8_t* row, int64_t b, __m256i& lo, __m256i& hi) {
    iq4_wide16(row + Iq4_NLW<Ops>::kBlockBytes * b + 2, lo, hi);
  }
};

template <class Ops>
struct Wide16<Iq4_XSW<Ops>> {
  static constexpr int kBias = 128;
  static void at(const uint8_t* row, int64_t b, __m256i& lo, __m256i& hi) {
    iq4_wide16(row + 136 * (b / 8) + 8 + 16 * (b % 8), lo, hi);
  }
};

// The multiply-accumulate of the 16-bit forms (here and rowdot_q8_panel_avx2.hpp): sum + the
// products of 16-bit pairs w · q, per 32-bit lane. AVX2 takes pmaddwd and an add; AVX512-VNNI's
// vpdpwssd does both (Mac there).
struct Avx2Mac {
  static __m256i mac(__m256i sum, __m256i w, __m256i q) {
    return _mm256_add_epi32(sum, _mm256_madd_epi16(w, q));
  }
  // mac into a running sum of a loop, with the add written as an instruction whose destination
  // is the sum: GCC 12 otherwise adds into the product's register and copies it back, one
  // vmovdqa per multiply-accumulate (a quarter of the panel loop's instructions). The first add
  // of a loop's sum, onto zero, is then not folded away: one add per loop, against a copy per
  // step. Not for a sum that is only ever one product (the 8-row form's d = mac(zero, …)).
  static __m256i accumulate(__m256i sum, __m256i w, __m256i q) {
    const __m256i product = _mm256_madd_epi16(w, q);
    __asm__("vpaddd %1, %0, %0" : "+x"(sum) : "x"(product));
    return sum;
  }
};

// The scales (s1: q6_k's second half-block's) and offsets of 8 weight rows at w, block by block
// in order, as lanes (lane r: row r): read from the blocks of a type whose f16 scale leads its
// block, else from q8_scales8's table, filled once per super-block. Only what D uses is set.
template <class D>
class RowScales8 {
 public:
  RowScales8(const uint8_t* w, int64_t row_bytes, int64_t blocks)
      : w_(w), row_bytes_(row_bytes), blocks_(blocks) {}
  void at(int64_t b, __m256& s0, __m256& s1, __m256& coeff) {
    if constexpr (D::kHalfFirst && D::kOffset) {
      const __m256i h = first_words(w_ + D::kBlockBytes * b);
      s0 = halves8(h);
      coeff = halves8(_mm256_srli_epi32(h, 16));
    } else if constexpr (D::kHalfFirst) {
      s0 = _mm256_cvtph_ps(first_halves(w_ + D::kBlockBytes * b));
    } else {
      if (b % 8 == 0)
        q8_scales8<__m256i, D>(w_, row_bytes_, b, std::min<int64_t>(8, blocks_ - b), s0_, s1_,
                               coeff_);
      s0 = _mm256_load_ps(s0_[b % 8]);
      if constexpr (D::kHalves) s1 = _mm256_load_ps(s1_[b % 8]);
      if constexpr (D::kOffset) coeff = _mm256_load_ps(coeff_[b % 8]);
    }
  }

 private:
  // The first 32 bits of the 8 rows' block at p (its f16 scale, and the offset after it), lane r
  // row r's. Loaded one by one: vpgatherdd is microcoded and slow on AMD before Zen 4, and
  // Debian's qemu 7.2 (the CPU guard's AVX2 CPU) returns lane 0's word in every lane.
  __m256i first_words(const uint8_t* p) const {
    int32_t v[8];
    for (int r = 0; r < 8; ++r) std::memcpy(&v[r], p + r * row_bytes_, sizeof v[r]);
    return _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
  }

  // The first 16 bits of the 8 rows' block at p, lane r row r's: inserted from memory one by
  // one, 5 instructions fewer per block than first_words and its pack.
  __m128i first_halves(const uint8_t* p) const {
    const auto at = [&](int r) {
      uint16_t v;
      std::memcpy(&v, p + r * row_bytes_, sizeof v);
      return int(v);
    };
    // Two chains of 4: one chain of 8 dependent inserts held the q8_0 loop back.
    __m128i a = _mm_cvtsi32_si128(at(0)), c = _mm_cvtsi32_si128(at(4));
    a = _mm_insert_epi16(a, at(1), 1), c = _mm_insert_epi16(c, at(5), 1);
    a = _mm_insert_epi16(a, at(2), 2), c = _mm_insert_epi16(c, at(6), 2);
    a = _mm_insert_epi16(a, at(3), 3), c = _mm_insert_epi16(c, at(7), 3);
    return _mm_unpacklo_epi64(a, c);
  }

  const uint8_t* w_;
  int64_t row_bytes_, blocks_;
  alignas(32) float s0_[8][8], s1_[8][8], coeff_[8][8];
};

// Streams the 8 weight rows after a group's 8 (one run of 8 · row_bytes bytes) into the cache
// over the group's blocks, a block's share of lines at each, in order: the next group arrives as
// this one is multiplied. A burst at the group's start stalled on full miss queues; a fixed
// distance ahead was outrun by a group of long rows (q6_k, K 1536: 10 KiB).
class NextRows8Prefetch {
 public:
  NextRows8Prefetch(const uint8_t* w, int64_t row_bytes, int64_t blocks)
      : next_(w + 8 * row_bytes), share_((8 * row_bytes + blocks - 1) / blocks) {}
  void at(int64_t b) const {
    const uint8_t* p = next_ + b * share_;
    for (int64_t o = 0; o < share_; o += 64) __builtin_prefetch(p + o, 0, 3);
  }

 private:
  const uint8_t* next_;
  int64_t share_;
};

// Weight rows [n, n + 8) against row m of x: y[m][n..n+8).
template <class D, class Mac = Avx2Mac>
void q8_rows8_avx2(const RowdotQ8Args& a, const uint8_t* w, int64_t row_bytes, int64_t n,
                   int64_t m) {
  const int64_t blocks = a.K / 32;
  const Q16Block* x = a.xq + m * blocks;
  RowScales8<D> scales(w, row_bytes, blocks);
  const NextRows8Prefetch prefetch(w, row_bytes, blocks);
  __m256 acc = _mm256_setzero_ps(), off = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    prefetch.at(b);
    const __m256i q_lo = Avx2Q8::load(x[b].q), q_hi = Avx2Q8::load(x[b].q + 16);
    __m256i dot[4], dot_hi[4];  // row pairs' partial sums; q6_k: elements 0-15 and 16-31 apart
    for (int r = 0; r < 8; r += 2) {
      __m256i d[2], d_hi[2];
      for (int i = 0; i < 2; ++i) {
        __m256i w_lo, w_hi;
        Wide16<D>::at(w + (r + i) * row_bytes, b, w_lo, w_hi);
        const __m256i zero = _mm256_setzero_si256();
        d[i] = Mac::mac(zero, w_lo, q_lo);
        if constexpr (D::kHalves)
          d_hi[i] = Mac::mac(zero, w_hi, q_hi);
        else
          d[i] = Mac::mac(d[i], w_hi, q_hi);
      }
      dot[r / 2] = sum_pair_avx2(d[0], d[1]);
      if constexpr (D::kHalves) dot_hi[r / 2] = sum_pair_avx2(d_hi[0], d_hi[1]);
    }
    __m256 scale, scale1, offset;
    scales.at(b, scale, scale1, offset);
    const __m256 d = _mm256_set1_ps(x[b].d);
    __m256i sums = sum_rows8_avx2(dot);
    if constexpr (Wide16<D>::kBias != 0) {
      static_assert(!D::kHalves);
      sums = _mm256_sub_epi32(
          sums, _mm256_set1_epi32(Wide16<D>::kBias * (x[b].sum_half[0] + x[b].sum_half[1])));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(scale, d), acc);
    if constexpr (D::kHalves)
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_rows8_avx2(dot_hi)), _mm256_mul_ps(scale1, d),
                            acc);
    if constexpr (D::kOffset) off = _mm256_fmadd_ps(offset, _mm256_set1_ps(x[b].s), off);
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_add_ps(acc, off));
  q8_store8(a, m, n, out);
}

}  // namespace
}  // namespace sy::cpu
