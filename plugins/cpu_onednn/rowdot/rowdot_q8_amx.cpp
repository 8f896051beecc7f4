// The amx form of rowdot_q8.hpp: many rows of x (a prefill, a step of many sequences) multiply
// on AMX-INT8 tiles; fewer rows, and q6_k's half-block scales, go the vnni way. Chosen on the amx
// tier of a CPU with AMX-INT8 (cpu_tier.cpp got tile state from the kernel).
//
// Per 16 weight rows (decoded once into bytes, scales and offsets) and 16 rows of x, block by
// block of 32: a tile product per digit of x gives the 16 × 16 exact integer sums Σ (254 · the
// high digit's plus the low's), then every output lane
// takes acc = fma(float(Σ), w_scale · d, acc) and off = fma(offset, s, off), and the result is
// acc + off: the arithmetic of every q8 path (rowdot_q8_loops.hpp), so a row's result is the
// same whichever way its step went (batch invariance).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "rowdot/rowdot_q8_vnni.hpp"
#include "tier/amx_tiles.hpp"
#include "tier/tier_scratch.hpp"

namespace sy::cpu {
namespace {

constexpr int kTile = 16;

// x's rows [16·t0, 16·t1) in the tile layout (q16_tile_x_bytes); rows past M are zeros.
void tile_x(const RowdotQ8Args& a, int64_t t0, int64_t t1, void* out) {
  const int64_t blocks = a.K / 32;
  auto* base = static_cast<uint8_t*>(out);
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* at = base + (t * blocks + b) * kQ16TileBlockBytes;
      auto* hi = reinterpret_cast<uint32_t*>(at);  // [8][16], then lo the same
      auto* lo = hi + 8 * kTile;
      auto* d = reinterpret_cast<float*>(at + 1024);
      float* s = d + kTile;
      for (int i = 0; i < kTile; ++i) {
        const int64_t m = t * kTile + i;
        if (m >= a.M) {
          for (int g = 0; g < 8; ++g) hi[g * kTile + i] = lo[g * kTile + i] = 0;
          d[i] = s[i] = 0.f;
          continue;
        }
        const Q16Block& xb = a.xq[m * blocks + b];
        for (int g = 0; g < 8; ++g) {
          std::memcpy(&hi[g * kTile + i], xb.hi + 4 * g, 4);
          std::memcpy(&lo[g * kTile + i], xb.lo + 4 * g, 4);
        }
        d[i] = xb.d;
        s[i] = xb.s;
      }
    }
}

// Stored block `from` of `row` (nullptr past N: zeros) as row r's block b of bytes, scale and
// coeff ([16][K], [16][blocks]).
template <class D>
void decode_block(const RowdotQ8Args& a, const uint8_t* row, int64_t from, int64_t b, int r,
                  uint8_t* bytes, float* scale, float* coeff) {
  const int64_t blocks = a.K / 32;
  float s0 = 0.f, s1 = 0.f, c = 0.f;
  __m256i v = _mm256_setzero_si256();
  if (row) D::at(row, from, v, s0, s1, c);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(bytes + r * a.K + 32 * b), v);
  scale[r * blocks + b] = s0;
  coeff[r * blocks + b] = c;
}

// 16 weight rows from n (zeros past N), decoded: bytes [16][K], scales and offsets [16][blocks].
// Weights packed 8 rows interleaved (the other forms' layout) are unpacked a unit at a time
// into their stored bytes first: the same bytes, so the same integers.
template <class D>
void decode_rows(const RowdotQ8Args& a, const uint8_t* w, int64_t row_bytes, int64_t n,
                 uint8_t* bytes, float* scale, float* coeff) {
  const int64_t blocks = a.K / 32;
  if (a.layout == 0) {
    for (int r = 0; r < kTile; ++r)
      for (int64_t b = 0; b < blocks; ++b)
        decode_block<D>(a, n + r < a.N ? w + (n + r) * row_bytes : nullptr, b, b, r, bytes, scale,
                        coeff);
    return;
  }
  // Packed: N is a multiple of 8, and n of 16 (the split's unit). A unit (a block, or a
  // super-block of 8) of each group is unpacked, then its blocks decoded from the stored bytes.
  const Rows8Unit unit = rows8_unit(a.layout);
  const int64_t units = blocks / unit.blocks;
  alignas(32) uint8_t stored[8 * 176];  // 8 stored units; the largest tiled, q5_k's, is 176 bytes
  for (int g = 0; g < 2; ++g)
    for (int64_t u = 0; u < units; ++u) {
      const bool here = n + 8 * g < a.N;
      if (here)
        unpack_rows8_unit(a.layout, w + ((n / 8 + g) * units + u) * unit.packed_bytes, stored);
      for (int64_t i = 0; i < unit.blocks; ++i)
        for (int r = 0; r < 8; ++r)
          decode_block<D>(a, here ? stored + r * unit.stored_bytes : nullptr, i,
                          u * unit.blocks + i, 8 * g + r, bytes, scale, coeff);
    }
}

// One tile of outputs: weight rows [n, n + 16) × x rows [16·t, 16·t + 16).
template <class D>
void tile_product(const RowdotQ8Args& a, const uint8_t* bytes, const float* scale,
                  const float* coeff, int64_t n, int64_t t) {
  const int64_t blocks = a.K / 32;
  const auto* xt = static_cast<const uint8_t*>(a.xt) + t * blocks * kQ16TileBlockBytes;
  __m512 acc[kTile], off[kTile];
  for (int r = 0; r < kTile; ++r) acc[r] = off[r] = _mm512_setzero_ps();
  alignas(64) int32_t sums_hi[kTile][kTile], sums_lo[kTile][kTile];
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* at = xt + b * kQ16TileBlockBytes;
    _tile_zero(0);
    _tile_zero(3);
    _tile_loadd(1, bytes + 32 * b, a.K);
    _tile_loadd(2, at, 64);
    _tile_loadd(4, at + 512, 64);
    if constexpr (D::kSigned) {
      _tile_dpbssd(0, 1, 2);
      _tile_dpbssd(3, 1, 4);
    } else {
      _tile_dpbusd(0, 1, 2);
      _tile_dpbusd(3, 1, 4);
    }
    _tile_stored(0, sums_hi, 64);
    _tile_stored(3, sums_lo, 64);
    const __m512 d = _mm512_loadu_ps(reinterpret_cast<const float*>(at + 1024));
    const __m512 s = _mm512_loadu_ps(reinterpret_cast<const float*>(at + 1024) + kTile);
    for (int r = 0; r < kTile; ++r) {
      const __m512i h = _mm512_load_si512(sums_hi[r]);
      const __m512i sum = _mm512_add_epi32(
          _mm512_sub_epi32(_mm512_slli_epi32(h, 8), _mm512_slli_epi32(h, 1)),  // 254 · hi
          _mm512_load_si512(sums_lo[r]));
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(scale[r * blocks + b]), d);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), dd, acc[r]);
      if constexpr (D::kOffset)
        off[r] = _mm512_fmadd_ps(_mm512_set1_ps(coeff[r * blocks + b]), s, off[r]);
    }
  }
  alignas(64) float out[kTile][kTile];
  for (int r = 0; r < kTile; ++r) _mm512_store_ps(out[r], _mm512_add_ps(acc[r], off[r]));
  for (int i = 0; i < kTile && t * kTile + i < a.M; ++i)
    for (int r = 0; r < kTile && n + r < a.N; ++r) {
      const int64_t at = (t * kTile + i) * a.N + n + r;
      if (a.y_bf16)
        static_cast<bf16_bits*>(a.y)[at] = from_f32<bf16_bits>(out[r][i]);
      else
        static_cast<float*>(a.y)[at] = out[r][i];
    }
}

template <class D>
void tile_columns(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  const int64_t blocks = a.K / 32, tiles = (a.M + kTile - 1) / kTile;
  const int64_t row_bytes = a.K / sy_dtype_block_elements(a.wtype) * sy_dtype_block_bytes(a.wtype);
  // This thread's decoded rows; sized by the first prefill, reused after.
  auto* bytes = static_cast<uint8_t*>(tier_scratch(ScratchSlot::q8_bytes, size_t(kTile * a.K)));
  auto* scale = static_cast<float*>(
      tier_scratch(ScratchSlot::q8_scale, sizeof(float) * size_t(kTile * blocks)));
  auto* coeff = static_cast<float*>(
      tier_scratch(ScratchSlot::q8_coeff, sizeof(float) * size_t(kTile * blocks)));
  const auto* w = static_cast<const uint8_t*>(a.w);
  // tmm0 and tmm3: C of x's high and low digits, 16 weight rows × 16 rows of x, int32; tmm1: A,
  // 16 weight rows × 32 bytes; tmm2 and tmm4: B of the two digits, 8 groups of 4 bytes × 16 rows.
  configure_tiles<5>({{16, 64}, {16, 32}, {8, 64}, {16, 64}, {8, 64}});
  for (int64_t n = n0; n < n1; n += kTile) {
    decode_rows<D>(a, w, row_bytes, n, bytes, scale, coeff);
    for (int64_t t = 0; t < tiles; ++t) tile_product<D>(a, bytes, scale, coeff, n, t);
  }
}

void columns(const RowdotQ8Args& a, int64_t n0, int64_t n1) {
  // q6_k has two scales per block of 32: it goes the vnni way at every M.
  bool tiled = false;
  if (a.xt && a.M >= kTile)
    with_q8_decoder<VnniQ8>(a.wtype, [&](auto d) {
      if constexpr (!decltype(d)::kHalves) {
        tile_columns<decltype(d)>(a, n0, n1);
        tiled = true;
      }
    });
  if (!tiled) q16_columns<VnniQ8, VnniMac>(a, n0, n1);
}

const RowdotQ8Tier kTier = {"q8_amx", q8_quantize<VnniQ8>, columns, tile_x, kTile, true};

}  // namespace

const RowdotQ8Tier& rowdot_q8_amx() {
  return kTier;
}

}  // namespace sy::cpu
