// Dequantization of one block of each block-quantized dtype (vocabulary.h, docs/abi.md §5a), with
// GGUF's formulas (ggml's dequantize_row_*): the values a reference that dequantizes to f32 sees,
// so kernels built on these compute exactly what transformers' GGUF loader computes, up to the
// order of f32 sums. Internal linkage (scalar_math.hpp says why): the quant tier files compile
// these for their instruction sets.
#pragma once

#include <cstdint>
#include <cstring>

#include "switchyard/vocabulary.h"
#include "tier/scalar_math.hpp"

namespace sy::cpu {
namespace {

inline float block_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return half_to_f32(h);
}

// y[0..32) of a q8_0 block: d·q.
inline void dequant_q8_0(const uint8_t* b, float* y) {
  const float d = block_half(b);
  const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int i = 0; i < 32; ++i) y[i] = d * float(q[i]);
}

// q4_0: element i in the low nibble of qs[i], element i + 16 in its high nibble; d·(q − 8).
inline void dequant_q4_0(const uint8_t* b, float* y) {
  const float d = block_half(b);
  const uint8_t* qs = b + 2;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float(int(qs[i] & 0x0f) - 8);
    y[i + 16] = d * float(int(qs[i] >> 4) - 8);
  }
}

// q4_1: d·q + m.
inline void dequant_q4_1(const uint8_t* b, float* y) {
  const float d = block_half(b), m = block_half(b + 2);
  const uint8_t* qs = b + 4;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float(qs[i] & 0x0f) + m;
    y[i + 16] = d * float(qs[i] >> 4) + m;
  }
}

// The fifth bits of a q5_0 / q5_1 block: bit i of the little-endian word is element i's.
inline uint32_t block_qh(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// q5_0: q = nibble (as q4_0) + 16·(fifth bit); d·(q − 16).
inline void dequant_q5_0(const uint8_t* b, float* y) {
  const float d = block_half(b);
  const uint32_t qh = block_qh(b + 2);
  const uint8_t* qs = b + 6;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float(int((qs[i] & 0x0f) | ((qh >> i & 1) << 4)) - 16);
    y[i + 16] = d * float(int((qs[i] >> 4) | ((qh >> (i + 16) & 1) << 4)) - 16);
  }
}

// q5_1: d·q + m, q as q5_0's.
inline void dequant_q5_1(const uint8_t* b, float* y) {
  const float d = block_half(b), m = block_half(b + 2);
  const uint32_t qh = block_qh(b + 4);
  const uint8_t* qs = b + 8;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float((qs[i] & 0x0f) | ((qh >> i & 1) << 4)) + m;
    y[i + 16] = d * float((qs[i] >> 4) | ((qh >> (i + 16) & 1) << 4)) + m;
  }
}

// 32 iq4 elements: scale·kvalues_iq4nl[nibble], nibbles of the 16 bytes at qs as q4_0's.
inline void dequant_iq4_values(const uint8_t* qs, float scale, float* y) {
  for (int i = 0; i < 16; ++i) {
    y[i] = scale * float(sy_iq4nl_value(qs[i] & 0x0f));
    y[i + 16] = scale * float(sy_iq4nl_value(qs[i] >> 4));
  }
}

// iq4_nl: d·kvalues_iq4nl[nibble].
inline void dequant_iq4_nl(const uint8_t* b, float* y) {
  dequant_iq4_values(b + 2, block_half(b), y);
}

// iq4_xs: 8 sub-blocks of 32, each as iq4_nl under the scale d·(ls − 32) (rounded once, as
// GGUF's), ls = the low 4 bits from nibble j%2 of scales_l[j/2] and the high 2 from bits 2j of
// scales_h.
inline int iq4_xs_ls(const uint8_t* b, int j) {
  const unsigned scales_h = unsigned(b[2]) | unsigned(b[3]) << 8;
  return ((b[4 + j / 2] >> 4 * (j % 2)) & 0x0f) | int((scales_h >> 2 * j) & 3) << 4;
}
inline float iq4_xs_scale(const uint8_t* b, int j) {
  return block_half(b) * float(iq4_xs_ls(b, j) - 32);
}

inline void dequant_iq4_xs(const uint8_t* b, float* y) {
  for (int j = 0; j < 8; ++j) dequant_iq4_values(b + 8 + 16 * j, iq4_xs_scale(b, j), y + 32 * j);
}

// q2_k (ggml's dequantize_row_q2_K): halves of 128; in each, four shifts of the 32 bytes of q,
// each two sub-blocks of 16 under scales[is] (low nibble: scale, high: min).
inline void dequant_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = block_half(b + 80), dmin = block_half(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32)
    for (int shift = 0; shift < 8; shift += 2)
      for (int half = 0; half < 2; ++half, ++is) {
        const float dl = d * float(scales[is] & 0x0f), ml = dmin * float(scales[is] >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
      }
}

// The 16 signed 6-bit scales of a q3_k block (ggml's kmask1 / kmask2 unpacking), minus 32.
inline void q3_k_scales(const uint8_t* packed, int* out) {
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2], k1 = 0x03030303, k2 = 0x0f0f0f0f;
  aux[2] = ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4);
  aux[3] = ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4);
  aux[0] = (aux[0] & k2) | (((tmp >> 0) & k1) << 4);
  aux[1] = (aux[1] & k2) | (((tmp >> 2) & k1) << 4);
  const auto* s = reinterpret_cast<const int8_t*>(aux);
  for (int i = 0; i < 16; ++i) out[i] = int(s[i]) - 32;
}

// The per-16-element factors of a q2_k block (scale d·(sc & 15), min dmin·(sc >> 4)) or a q3_k
// block (scale d·(sc − 32), min 0), each rounded once as GGUF's: what the register decoders'
// tables are made of.
struct K23Factors {
  float scale[16], min[16];
};
inline K23Factors k23_factors(sy_dtype t, const uint8_t* b) {
  K23Factors f;
  if (t == SY_DTYPE_Q2_K) {
    const float d = block_half(b + 80), dmin = block_half(b + 82);
    for (int j = 0; j < 16; ++j)
      f.scale[j] = d * float(b[j] & 15), f.min[j] = dmin * float(b[j] >> 4);
    return f;
  }
  int sc[16];
  q3_k_scales(b + 96, sc);
  const float d = block_half(b + 108);
  for (int j = 0; j < 16; ++j) f.scale[j] = d * float(sc[j]), f.min[j] = 0;
  return f;
}

// q3_k: as q2_k's walk, each value (2 low bits) − 4 unless its bit of hmask is set, times
// d·(scale − 32).
inline void dequant_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  int sc[16];
  q3_k_scales(b + 96, sc);
  const float d = block_half(b + 108);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128, q += 32)
    for (int shift = 0; shift < 8; shift += 2, m <<= 1)
      for (int half = 0; half < 2; ++half, ++is) {
        const float dl = d * float(sc[is]);
        for (int l = 0; l < 16; ++l) {
          const int i = l + 16 * half;
          *y++ = dl * float(int((q[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4));
        }
      }
}

// The 6-bit scale and min of sub-block j of a q4_k / q5_k block (ggml's get_scale_min_k4).
inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// All eight scales and mins of a q4_k / q5_k block's 12 bytes at q (scale_min_k4 for j = 0..7),
// on 32-bit words: out[0..7] the scales, out[8..15] the mins. The loops over weight rows call
// this once per block and row; eight scale_min_k4 calls cost more than the block's products.
inline void scales_mins_k4(const uint8_t* q, uint8_t (&out)[16]) {
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t w[4] = {a & 0x3f3f3f3f, (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030), b & 0x3f3f3f3f,
                         ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030)};
  std::memcpy(out, w, sizeof w);
}

// q4_k: 8 sub-blocks of 32, each d·sc·q − dmin·m; qs holds sub-blocks 2i and 2i + 1 in the low
// and high nibbles of 32 bytes.
inline void dequant_q4_k(const uint8_t* b, float* y) {
  const float d = block_half(b), dmin = block_half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
    int sc, m;
    scale_min_k4(is, scales, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) y[j + l] = d1 * float(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) y[j + 32 + l] = d2 * float(q[l] >> 4) - m2;
  }
}

// q5_k: as q4_k with a fifth bit per element from qh.
inline void dequant_q5_k(const uint8_t* b, float* y) {
  const float d = block_half(b), dmin = block_half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  unsigned u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    int sc, m;
    scale_min_k4(is, scales, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) y[j + l] = d1 * float((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      y[j + 32 + l] = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
  }
}

// q6_k: 16 sub-blocks of 16, each d·sc·(q − 32), q = 4 low bits from ql and 2 high from qh.
inline void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = block_half(b + 208);
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[n + l] = d * float(sc[is]) * float(q1);
      y[n + l + 32] = d * float(sc[is + 2]) * float(q2);
      y[n + l + 64] = d * float(sc[is + 4]) * float(q3);
      y[n + l + 96] = d * float(sc[is + 6]) * float(q4);
    }
  }
}

// The E8M0 scale 2^(e − 127) as f32, exactly: e = 0 is the subnormal 2^-127. (e = 0xFF, NaN in
// E8M0, reads as +inf here; the host refuses such weights before a kernel sees them.)
inline float e8m0_scale(uint8_t e) {
  const uint32_t bits = e == 0 ? 0x00400000u : uint32_t(e) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// mxfp4: E2M1 values (sy_e2m1_value) under the block's E8M0 scale; nibble order as q4_0's.
inline void dequant_mxfp4(const uint8_t* b, float* y) {
  const float d = e8m0_scale(b[0]);
  const uint8_t* qs = b + 1;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * sy_e2m1_value(qs[i] & 0x0f);
    y[i + 16] = d * sy_e2m1_value(qs[i] >> 4);
  }
}

using DequantBlockFn = void (*)(const uint8_t* block, float* y);

// The block dequantizer of a block-quantized dtype; nullptr for the others.
inline DequantBlockFn dequant_block_of(sy_dtype d) {
  switch (d) {
    case SY_DTYPE_Q8_0: return dequant_q8_0;
    case SY_DTYPE_Q4_0: return dequant_q4_0;
    case SY_DTYPE_Q4_1: return dequant_q4_1;
    case SY_DTYPE_Q4_K: return dequant_q4_k;
    case SY_DTYPE_Q5_K: return dequant_q5_k;
    case SY_DTYPE_Q6_K: return dequant_q6_k;
    case SY_DTYPE_Q5_0: return dequant_q5_0;
    case SY_DTYPE_Q5_1: return dequant_q5_1;
    case SY_DTYPE_IQ4_NL: return dequant_iq4_nl;
    case SY_DTYPE_IQ4_XS: return dequant_iq4_xs;
    case SY_DTYPE_Q2_K: return dequant_q2_k;
    case SY_DTYPE_Q3_K: return dequant_q3_k;
    case SY_DTYPE_MXFP4: return dequant_mxfp4;
    default: return nullptr;
  }
}

}  // namespace
}  // namespace sy::cpu
