#include "rowdot/weight_layout.hpp"

#include <emmintrin.h>

#include <cstring>

#include "tier/cpu_tier.hpp"

namespace sy::cpu {
namespace {

// A type packed 8 rows interleaved: its stored block's f16 header fields, whether a 32-bit
// mask of fifth bits follows them (q5_0, q5_1), and its quant bytes.
struct Rows8Type {
  sy_dtype dtype;
  uint32_t layout;
  int64_t header_fields;
  bool fifth_bits;
  int64_t quant_bytes;
  const char* name;
};

constexpr Rows8Type kRows8Types[] = {
    {SY_DTYPE_Q4_0, kLayoutQ4_0Rows8, 1, false, 16, "q4_0, 8 rows interleaved"},
    {SY_DTYPE_Q4_1, kLayoutQ4_1Rows8, 2, false, 16, "q4_1, 8 rows interleaved"},
    {SY_DTYPE_Q8_0, kLayoutQ8_0Rows8, 1, false, 32, "q8_0, 8 rows interleaved"},
    {SY_DTYPE_IQ4_NL, kLayoutIq4_NLRows8, 1, false, 16, "iq4_nl, 8 rows interleaved"},
    {SY_DTYPE_Q5_0, kLayoutQ5_0Rows8, 1, true, 16, "q5_0, 8 rows interleaved"},
    {SY_DTYPE_Q5_1, kLayoutQ5_1Rows8, 2, true, 16, "q5_1, 8 rows interleaved"}};

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

// A q5 block's fifth bits (bit i: element i's) as the packed form reads them: the even
// elements' bits in the low 16 (bit j: element 2j's), the odd elements' in the high 16.
uint32_t fifth_bits_by_parity(const uint8_t* qh) {
  uint32_t bits = 0, out = 0;
  std::memcpy(&bits, qh, 4);  // little-endian, as GGUF stores it
  for (int j = 0; j < 16; ++j) {
    out |= ((bits >> (2 * j)) & 1u) << j;
    out |= ((bits >> (2 * j + 1)) & 1u) << (16 + j);
  }
  return out;
}

int64_t block_bytes(const Rows8Type& t) {
  return 2 * t.header_fields + (t.fifth_bits ? 4 : 0) + t.quant_bytes;
}

void pack_rows8(const Rows8Type& t, const uint8_t* src, uint8_t* dst, int64_t N, int64_t K) {
  const int64_t blocks = K / 32, block = block_bytes(t);
  const int64_t row_bytes = blocks * block;
  for (int64_t g = 0; g < N / 8; ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* out = dst + (g * blocks + b) * 8 * block;
      for (int r = 0; r < 8; ++r) {
        const uint8_t* in = src + (8 * g + r) * row_bytes + b * block;
        for (int64_t f = 0; f < t.header_fields; ++f)
          std::memcpy(out + 16 * f + 2 * r, in + 2 * f, 2);
        const uint8_t* quants = in + 2 * t.header_fields;
        uint8_t* chunks = out + 16 * t.header_fields;
        if (t.fifth_bits) {
          const uint32_t bits = fifth_bits_by_parity(quants);
          std::memcpy(chunks + 4 * r, &bits, 4);
          quants += 4, chunks += 32;
        }
        for (int64_t j = 0; j < t.quant_bytes / 2; ++j)
          std::memcpy(chunks + 16 * j + 2 * r, quants + 2 * j, 2);
      }
    }
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

}  // namespace

int64_t rows8_stored_block_bytes(uint32_t layout) {
  const Rows8Type* t = rows8_type_of(layout);
  return t ? block_bytes(*t) : 0;
}

void unpack_rows8_block(uint32_t layout, const uint8_t* packed, uint8_t* stored) {
  const Rows8Type* t = rows8_type_of(layout);
  if (!t) return;
  const int64_t block = block_bytes(*t);
  for (int r = 0; r < 8; ++r) {
    uint8_t* out = stored + r * block;
    for (int64_t f = 0; f < t->header_fields; ++f)
      std::memcpy(out + 2 * f, packed + 16 * f + 2 * r, 2);
    if (t->fifth_bits) {
      uint32_t bits = 0;
      std::memcpy(&bits, packed + 16 * t->header_fields + 4 * r, 4);
      bits = fifth_bits_in_order(bits);
      std::memcpy(out + 2 * t->header_fields, &bits, 4);
    }
  }
  // The quants: per 8 chunks, an 8 × 8 transpose of 16-bit words (chunk j's word r is row r's
  // word j). SSE2 is every x86-64's, so this base-flags file may use it.
  const uint8_t* chunks = packed + 16 * t->header_fields + (t->fifth_bits ? 32 : 0);
  const int64_t at = 2 * t->header_fields + (t->fifth_bits ? 4 : 0);
  for (int64_t half = 0; half < t->quant_bytes / 16; ++half) {
    __m128i v[8], u[8];
    for (int j = 0; j < 8; ++j)
      v[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(chunks + 16 * (8 * half + j)));
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
        _mm_storeu_si128(reinterpret_cast<__m128i*>(stored + r * block + at + 16 * half),
                         _mm_unpacklo_epi64(a, b));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(stored + (r + 1) * block + at + 16 * half),
                         _mm_unpackhi_epi64(a, b));
      }
  }
}

sy::edge::WeightLayout q16_weight_layout(sy_dtype wtype, int64_t N, int64_t K) {
  const Rows8Type* t = rows8_type(wtype);
  if (!t || !rowdot_q8_tier(active_tier()).reads_rows8 || N <= 0 || N % 8 || K <= 0 || K % 32)
    return {};
  return {t->layout, uint64_t(N) * uint64_t(K / 32) * uint64_t(block_bytes(*t)), t->name};
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
