#include "rowdot/weight_layout.hpp"

#include <emmintrin.h>

#include <cstring>

#include "quant/quant_blocks.hpp"
#include "tier/cpu_tier.hpp"

namespace sy::cpu {
namespace {

// A type packed 8 rows interleaved, in units of 8 rows × unit_blocks blocks of 32: stored_bytes
// of one row's unit as stored, packed_bytes of the 8 rows' unit packed. pack reads the 8 rows'
// unit at src (row r's at src + r·row_bytes); unpack is its exact inverse (row r's at
// stored + r·stored_bytes), or nullptr where no reader needs the stored bytes back.
struct Rows8Type {
  sy_dtype dtype;
  uint32_t layout;
  int64_t unit_blocks, stored_bytes, packed_bytes;
  void (*pack)(const uint8_t* src, int64_t row_bytes, uint8_t* dst);
  void (*unpack)(const uint8_t* packed, uint8_t* stored);
  const char* name;
};

// 16 bytes of each of 8 rows (row r's at rows + r·stride) as 8 chunks of 16: chunk j holds bytes
// 2j and 2j + 1 of every row, row r's at 2r and 2r + 1.
void rows_to_chunks(const uint8_t* rows, int64_t stride, uint8_t* chunks) {
  for (int r = 0; r < 8; ++r)
    for (int j = 0; j < 8; ++j) std::memcpy(chunks + 16 * j + 2 * r, rows + r * stride + 2 * j, 2);
}

// rows_to_chunks' inverse: an 8 × 8 transpose of 16-bit words. SSE2 is every x86-64's, so this
// base-flags file may use it (the amx tier unpacks a block of 16 rows for every tile row).
void chunks_to_rows(const uint8_t* chunks, uint8_t* rows, int64_t stride) {
  __m128i v[8], u[8];
  for (int j = 0; j < 8; ++j)
    v[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(chunks + 16 * j));
  for (int i = 0; i < 4; ++i) {
    u[2 * i] = _mm_unpacklo_epi16(v[2 * i], v[2 * i + 1]);
    u[2 * i + 1] = _mm_unpackhi_epi16(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 2; ++k) {
      v[4 * i + 2 * k] = _mm_unpacklo_epi32(u[4 * i + k], u[4 * i + k + 2]);
      v[4 * i + 2 * k + 1] = _mm_unpackhi_epi32(u[4 * i + k], u[4 * i + k + 2]);
    }
  // v[4i + 2k + h] holds rows 4k + 2h and 4k + 2h + 1's words 4i..4i+3.
  for (int k = 0; k < 2; ++k)
    for (int h = 0; h < 2; ++h) {
      const __m128i a = v[2 * k + h], b = v[4 + 2 * k + h];
      const int r = 4 * k + 2 * h;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(rows + r * stride), _mm_unpacklo_epi64(a, b));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(rows + (r + 1) * stride),
                       _mm_unpackhi_epi64(a, b));
    }
}

// A q5 block's fifth bits (bit i: element i's) as the packed form reads them: the even
// elements' bits in the low 16 (bit j: element 2j's), the odd elements' in the high 16.
uint32_t fifth_bits_by_parity(uint32_t bits) {
  uint32_t out = 0;
  for (int j = 0; j < 16; ++j) {
    out |= ((bits >> (2 * j)) & 1u) << j;
    out |= ((bits >> (2 * j + 1)) & 1u) << (16 + j);
  }
  return out;
}

// fifth_bits_by_parity's inverse: bit i of the result is element i's.
uint32_t fifth_bits_in_order(uint32_t by_parity) {
  uint32_t out = 0;
  for (int j = 0; j < 16; ++j) {
    out |= ((by_parity >> j) & 1u) << (2 * j);
    out |= ((by_parity >> (16 + j)) & 1u) << (2 * j + 1);
  }
  return out;
}

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian, as GGUF stores it
  return v;
}

// ---- Types whose unit is one block of 32: kFields f16 header fields (the scale, then q4_1's
// and q5_1's offset), q5's 32-bit mask of fifth bits (kFifth), then kQuants quant bytes. Packed:
// field f of the 8 rows at 16f (row r's at 2r), the 8 rows' fifth-bit masks by parity (4 bytes
// each), then the quants in chunks (rows_to_chunks per 16 quant bytes).
template <int kFields, bool kFifth, int kQuants>
struct PerBlock {
  static constexpr int64_t kUnitBlocks = 1, kStored = 2 * kFields + (kFifth ? 4 : 0) + kQuants;
  static constexpr int64_t kPacked = 8 * kStored;
  static void pack(const uint8_t* src, int64_t row_bytes, uint8_t* out) {
    uint8_t* chunks = out + 16 * kFields + (kFifth ? 32 : 0);
    for (int r = 0; r < 8; ++r) {
      const uint8_t* in = src + r * row_bytes;
      for (int f = 0; f < kFields; ++f) std::memcpy(out + 16 * f + 2 * r, in + 2 * f, 2);
      if (kFifth) {
        const uint32_t bits = fifth_bits_by_parity(load32(in + 2 * kFields));
        std::memcpy(out + 16 * kFields + 4 * r, &bits, 4);
      }
    }
    const int64_t at = kStored - kQuants;
    for (int half = 0; half < kQuants / 16; ++half)
      rows_to_chunks(src + at + 16 * half, row_bytes, chunks + 128 * half);
  }
  static void unpack(const uint8_t* packed, uint8_t* stored) {
    for (int r = 0; r < 8; ++r) {
      uint8_t* out = stored + r * kStored;
      for (int f = 0; f < kFields; ++f) std::memcpy(out + 2 * f, packed + 16 * f + 2 * r, 2);
      if (kFifth) {
        const uint32_t bits = fifth_bits_in_order(load32(packed + 16 * kFields + 4 * r));
        std::memcpy(out + 2 * kFields, &bits, 4);
      }
    }
    const uint8_t* chunks = packed + 16 * kFields + (kFifth ? 32 : 0);
    for (int half = 0; half < kQuants / 16; ++half)
      chunks_to_rows(chunks + 128 * half, stored + kStored - kQuants + 16 * half, kStored);
  }
};

// ---- Super-block types: a unit is one block of 256, 8 sub-blocks of 32 -----------------------
// Each sub-block's nibbles are packed as q4_0's are ordered (byte i: element i in its low nibble,
// i + 16 in its high), so that every packed type's chunks widen alike.

// Sub-block values v[32] (4 bits each) in q4_0's order, and back.
void to_q4_order(const uint8_t (&v)[32], uint8_t* out16) {
  for (int i = 0; i < 16; ++i) out16[i] = uint8_t(v[i] | v[i + 16] << 4);
}
void from_q4_order(const uint8_t* in16, uint8_t (&v)[32]) {
  for (int i = 0; i < 16; ++i) v[i] = in16[i] & 15, v[i + 16] = in16[i] >> 4;
}

// q4_k's and q5_k's 12 bytes of 6-bit scales and mins (quant_blocks.hpp's scale_min_k4) from
// sm[0..7] (scales) and sm[8..15] (mins): every one of the 96 bits is a field's, so this is
// scales_mins_k4's inverse.
void encode_scales_mins_k4(const uint8_t (&sm)[16], uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = uint8_t(sm[j] | (sm[j + 4] >> 4) << 6);
    q[j + 4] = uint8_t(sm[8 + j] | (sm[12 + j] >> 4) << 6);
    q[j + 8] = uint8_t((sm[j + 4] & 15) | (sm[12 + j] & 15) << 4);
  }
}

// q4_k (144 bytes: d, dmin, 12 bytes of scales, 128 of nibbles) and q5_k (176: the same with the
// 32 bytes of qh before the nibbles). Packed unit: the 8 rows' f16 d (16 bytes) and dmin (16),
// then per sub-block j the 8 rows' 6-bit scales as bytes (8), their mins (8), q5_k's fifth-bit
// masks by parity (32), and the nibbles in q4_0's order as chunks (128).
template <bool kQ5>
struct KQuant {
  static constexpr int64_t kUnitBlocks = 8, kStored = kQ5 ? 176 : 144, kQs = kQ5 ? 48 : 16;
  static constexpr int64_t kSub = 16 + (kQ5 ? 32 : 0) + 128, kPacked = 32 + 8 * kSub;
  // Sub-block j of a stored row: its values' low 4 bits, and (q5_k) its fifth bits by element.
  static void sub_block(const uint8_t* row, int j, uint8_t (&v)[32], uint32_t& fifth) {
    const uint8_t* q = row + kQs + 32 * (j / 2);
    fifth = 0;
    for (int e = 0; e < 32; ++e) {
      v[e] = j % 2 ? q[e] >> 4 : q[e] & 15;
      if (kQ5) fifth |= uint32_t((row[16 + e] >> j) & 1) << e;
    }
  }
  static void pack(const uint8_t* src, int64_t row_bytes, uint8_t* out) {
    uint8_t rows[8][16 * 8];  // per row, the 8 sub-blocks' nibbles in q4_0's order
    for (int r = 0; r < 8; ++r) {
      const uint8_t* in = src + r * row_bytes;
      std::memcpy(out + 2 * r, in, 2);
      std::memcpy(out + 16 + 2 * r, in + 2, 2);
      uint8_t sm[16];
      scales_mins_k4(in + 4, sm);
      for (int j = 0; j < 8; ++j) {
        uint8_t* sub = out + 32 + kSub * j;
        sub[r] = sm[j], sub[8 + r] = sm[8 + j];
        uint8_t v[32];
        uint32_t fifth;
        sub_block(in, j, v, fifth);
        to_q4_order(v, rows[r] + 16 * j);
        if (kQ5) {
          const uint32_t bits = fifth_bits_by_parity(fifth);
          std::memcpy(sub + 16 + 4 * r, &bits, 4);
        }
      }
    }
    for (int j = 0; j < 8; ++j)
      rows_to_chunks(rows[0] + 16 * j, sizeof rows[0], out + 32 + kSub * j + kSub - 128);
  }
  static void unpack(const uint8_t* packed, uint8_t* stored) {
    uint8_t rows[8][16 * 8];
    for (int j = 0; j < 8; ++j)
      chunks_to_rows(packed + 32 + kSub * j + kSub - 128, rows[0] + 16 * j, sizeof rows[0]);
    for (int r = 0; r < 8; ++r) {
      uint8_t* out = stored + r * kStored;
      std::memcpy(out, packed + 2 * r, 2);
      std::memcpy(out + 2, packed + 16 + 2 * r, 2);
      uint8_t sm[16];
      for (int j = 0; j < 8; ++j)
        sm[j] = packed[32 + kSub * j + r], sm[8 + j] = packed[32 + kSub * j + 8 + r];
      encode_scales_mins_k4(sm, out + 4);
      if (kQ5) std::memset(out + 16, 0, 32);
      for (int j = 0; j < 8; ++j) {
        uint8_t v[32];
        from_q4_order(rows[r] + 16 * j, v);
        const uint32_t fifth =
            kQ5 ? fifth_bits_in_order(load32(packed + 32 + kSub * j + 16 + 4 * r)) : 0;
        uint8_t* q = out + kQs + 32 * (j / 2);
        for (int e = 0; e < 32; ++e) {
          q[e] = uint8_t(j % 2 ? (q[e] & 15) | v[e] << 4 : v[e]);
          if (kQ5) out[16 + e] = uint8_t(out[16 + e] | ((fifth >> e) & 1) << j);
        }
      }
    }
  }
};

// iq4_xs (136 bytes: d, scales_h, scales_l[4], 8 sub-blocks of 16 nibble bytes in q4_0's order).
// Packed unit: the 8 rows' f16 d (16 bytes), then per sub-block j the 8 rows' ls_j − 32 as signed
// bytes (8) and the nibbles as chunks (128).
struct Iq4Xs {
  static constexpr int64_t kUnitBlocks = 8, kStored = 136, kSub = 8 + 128, kPacked = 16 + 8 * kSub;
  static void pack(const uint8_t* src, int64_t row_bytes, uint8_t* out) {
    for (int r = 0; r < 8; ++r) {
      const uint8_t* in = src + r * row_bytes;
      std::memcpy(out + 2 * r, in, 2);
      for (int j = 0; j < 8; ++j) out[16 + kSub * j + r] = uint8_t(iq4_xs_ls(in, j) - 32);
    }
    for (int j = 0; j < 8; ++j)
      rows_to_chunks(src + 8 + 16 * j, row_bytes, out + 16 + kSub * j + 8);
  }
  static void unpack(const uint8_t* packed, uint8_t* stored) {
    for (int j = 0; j < 8; ++j)
      chunks_to_rows(packed + 16 + kSub * j + 8, stored + 8 + 16 * j, kStored);
    for (int r = 0; r < 8; ++r) {
      uint8_t* out = stored + r * kStored;
      std::memcpy(out, packed + 2 * r, 2);
      unsigned high = 0;
      std::memset(out + 4, 0, 4);
      for (int j = 0; j < 8; ++j) {
        const unsigned ls = uint8_t(packed[16 + kSub * j + r] + 32);
        out[4 + j / 2] = uint8_t(out[4 + j / 2] | (ls & 15) << 4 * (j % 2));
        high |= (ls >> 4) << 2 * j;
      }
      out[2] = uint8_t(high), out[3] = uint8_t(high >> 8);
    }
  }
};

// q6_k (210 bytes: ql[128], qh[64], 16 signed scales of 16 elements, d). Packed unit: the 8 rows'
// f16 d (16 bytes), then per sub-block j of 32 the 8 rows' two scales (row r's at r and 8 + r),
// the high 2 bits of elements 0-15 and of 16-31 (each 8 rows × 32 bits: element 2i's at bit 2i,
// 2i + 1's at 16 + 2i, so that the bits of pair i sit at the bottom of each 16-bit half after a
// shift by 2i), and the low 4 bits in q4_0's order as chunks (128).
struct Q6K {
  static constexpr int64_t kUnitBlocks = 8, kStored = 210, kSub = 16 + 64 + 128,
                           kPacked = 16 + 8 * kSub;
  // Element e's 6-bit value: ggml's dequantize_row_q6_K, by halves of 128, quarters of 32.
  static int value(const uint8_t* row, int e) {
    const int h = e / 128, t = e % 128 / 32, l = e % 32;
    const uint8_t ql = row[64 * h + 32 * (t % 2) + l];
    return (t >= 2 ? ql >> 4 : ql & 15) | ((row[128 + 32 * h + l] >> 2 * t) & 3) << 4;
  }
  static void pack(const uint8_t* src, int64_t row_bytes, uint8_t* out) {
    uint8_t rows[8][16 * 8];
    for (int r = 0; r < 8; ++r) {
      const uint8_t* in = src + r * row_bytes;
      std::memcpy(out + 2 * r, in + 208, 2);
      for (int j = 0; j < 8; ++j) {
        uint8_t* sub = out + 16 + kSub * j;
        sub[r] = in[192 + 2 * j], sub[8 + r] = in[192 + 2 * j + 1];
        uint8_t v[32];
        uint32_t high[2] = {0, 0};
        for (int e = 0; e < 32; ++e) {
          const int q = value(in, 32 * j + e);
          v[e] = uint8_t(q & 15);
          high[e / 16] |= uint32_t(q >> 4) << (e % 2 * 16 + 2 * (e % 16 / 2));
        }
        to_q4_order(v, rows[r] + 16 * j);
        std::memcpy(sub + 16 + 4 * r, &high[0], 4);
        std::memcpy(sub + 48 + 4 * r, &high[1], 4);
      }
    }
    for (int j = 0; j < 8; ++j)
      rows_to_chunks(rows[0] + 16 * j, sizeof rows[0], out + 16 + kSub * j + 80);
  }
  // No unpack: the one reader of stored bytes, the amx tier's tiles, never takes q6_k (two
  // scales per block of 32 go the vnni way), and an inverse no path reads would be untested.
  static constexpr void (*unpack)(const uint8_t*, uint8_t*) = nullptr;
};

template <class T>
constexpr Rows8Type rows8(sy_dtype d, uint32_t layout, const char* name) {
  return {d, layout, T::kUnitBlocks, T::kStored, T::kPacked, T::pack, T::unpack, name};
}

constexpr Rows8Type kRows8Types[] = {
    rows8<PerBlock<1, false, 16>>(SY_DTYPE_Q4_0, kLayoutQ4_0Rows8, "q4_0, 8 rows interleaved"),
    rows8<PerBlock<2, false, 16>>(SY_DTYPE_Q4_1, kLayoutQ4_1Rows8, "q4_1, 8 rows interleaved"),
    rows8<PerBlock<1, false, 32>>(SY_DTYPE_Q8_0, kLayoutQ8_0Rows8, "q8_0, 8 rows interleaved"),
    rows8<PerBlock<1, false, 16>>(SY_DTYPE_IQ4_NL, kLayoutIq4_NLRows8,
                                  "iq4_nl, 8 rows interleaved"),
    rows8<PerBlock<1, true, 16>>(SY_DTYPE_Q5_0, kLayoutQ5_0Rows8, "q5_0, 8 rows interleaved"),
    rows8<PerBlock<2, true, 16>>(SY_DTYPE_Q5_1, kLayoutQ5_1Rows8, "q5_1, 8 rows interleaved"),
    rows8<KQuant<false>>(SY_DTYPE_Q4_K, kLayoutQ4_KRows8, "q4_k, 8 rows interleaved"),
    rows8<KQuant<true>>(SY_DTYPE_Q5_K, kLayoutQ5_KRows8, "q5_k, 8 rows interleaved"),
    rows8<Iq4Xs>(SY_DTYPE_IQ4_XS, kLayoutIq4_XSRows8, "iq4_xs, 8 rows interleaved"),
    rows8<Q6K>(SY_DTYPE_Q6_K, kLayoutQ6_KRows8, "q6_k, 8 rows interleaved")};

// The packed type of dtype t, or nullptr.
const Rows8Type* rows8_type(sy_dtype t) {
  for (const Rows8Type& r : kRows8Types)
    if (r.dtype == t) return &r;
  return nullptr;
}

// The type packed in `layout`, or nullptr.
const Rows8Type* rows8_type_of(uint32_t layout) {
  for (const Rows8Type& r : kRows8Types)
    if (r.layout == layout) return &r;
  return nullptr;
}

void pack_rows8(const Rows8Type& t, const uint8_t* src, uint8_t* dst, int64_t N, int64_t K) {
  const int64_t units = K / 32 / t.unit_blocks, row_bytes = units * t.stored_bytes;
  for (int64_t g = 0; g < N / 8; ++g)
    for (int64_t u = 0; u < units; ++u)
      t.pack(src + 8 * g * row_bytes + u * t.stored_bytes, row_bytes,
             dst + (g * units + u) * t.packed_bytes);
}

}  // namespace

Rows8Unit rows8_unit(uint32_t layout) {
  const Rows8Type* t = rows8_type_of(layout);
  if (!t) return {};
  return {t->unit_blocks, t->stored_bytes, t->packed_bytes};
}

void unpack_rows8_unit(uint32_t layout, const uint8_t* packed, uint8_t* stored) {
  if (const Rows8Type* t = rows8_type_of(layout); t && t->unpack) t->unpack(packed, stored);
}

sy::edge::WeightLayout q16_weight_layout(sy_dtype wtype, int64_t N, int64_t K) {
  const Rows8Type* t = rows8_type(wtype);
  if (!t || !rowdot_q8_tier(active_tier()).reads_rows8 || N <= 0 || N % 8 || K <= 0 ||
      K % (32 * t->unit_blocks))
    return {};
  return {t->layout,
          uint64_t(N / 8) * uint64_t(K / 32 / t->unit_blocks) * uint64_t(t->packed_bytes), t->name};
}

bool pack_q16_weight(uint32_t layout, sy_dtype wtype, int64_t N, int64_t K, const void* src,
                     void* dst, uint64_t dst_bytes) {
  const sy::edge::WeightLayout want = q16_weight_layout(wtype, N, K);
  if (layout == 0 || want.id != layout || want.bytes != dst_bytes) return false;
  pack_rows8(*rows8_type(wtype), static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), N,
             K);
  return true;
}

}  // namespace sy::cpu
