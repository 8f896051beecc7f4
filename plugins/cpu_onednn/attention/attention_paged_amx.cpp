// The paged attention on the amx tier: bf16 rows with their QKᵀ and PV on AMX tiles (the amx
// blocks' products, attention_amx.cpp), the softmax row by row on AVX-512 with the group's keys
// in lanes. f32, a softcap, and a head dim the tiles do not divide run the avx512 loops, chosen
// at prepare (paged_attention_tier), so that they split by key chunk as on the avx512 tier.
//
// Batch-invariant as the other tiers (attention_paged.hpp), by its own arithmetic: a row visits
// its sequence's keys in groups of kGroup aligned to absolute positions, keys read in place from
// the pool where a tile of 16 lies in one block. Per group: the tile product gives each score in
// a fixed order over D; the row's scores (its own, transposed out of the tile) are scaled,
// masked to −inf outside the row's [lo, hi], their max and the sum of 2^(s − m) taken by fixed
// reductions; PV adds each key's p·v in the tile's fixed order. A group only other rows see
// leaves a row as it was (α = 1 is skipped, p = 0 adds nothing), so a row's result depends on
// its own q, position and keys only: one row decoding alone and the same row in a prefill agree
// bit for bit.
#include <cstring>

#include "attention/attention_blocks.hpp"
#include "attention/attention_paged_loops.hpp"
#include "cpu_kernel.hpp"
#include "tier/exp2_avx512.hpp"
#include "tier/transpose16_avx512.hpp"

namespace sy::cpu {
namespace {

constexpr int kGroup = 64;  // keys per group: two tile steps of PV

int round16(int64_t x) {
  return int((x + 15) / 16 * 16);
}

// The tier's scratch for an item of up to `rows` rows, in this order (each 64-byte aligned).
struct AmxScratch {
  const void** q_rows;
  char* qt;
  float *s, *srow, *m, *l, *alpha, *o;
  uint32_t* pr;  // P as rows of bf16 key pairs [Mp][kBlockKeys / 2]
  int32_t *lo, *hi;
  uint16_t *kb, *vb;
  char* pv;
};

size_t align64(size_t b) {
  return (b + 63) / 64 * 64;
}

// Lays the scratch out (with `base` nullptr: only counts the bytes).
size_t layout(int64_t rows, int64_t D, char* base, AmxScratch* out) {
  const BlockKernels& k = amx_block_kernels(true);
  const int Mp = round16(rows);
  size_t at = 0;
  auto take = [&](size_t bytes) {
    char* p = base ? base + at : nullptr;
    at += align64(bytes);
    return p;
  };
  AmxScratch w{};
  w.q_rows = reinterpret_cast<const void**>(take(sizeof(void*) * size_t(rows)));
  w.qt = take(k.qt_bytes(Mp, int(D)));
  w.s = reinterpret_cast<float*>(take(sizeof(float) * kGroup * size_t(Mp)));
  w.srow = reinterpret_cast<float*>(take(sizeof(float) * kGroup * size_t(Mp)));
  w.pr = reinterpret_cast<uint32_t*>(take(sizeof(uint32_t) * size_t(kBlockKeys / 2) * Mp));
  for (float** p : {&w.m, &w.l, &w.alpha}) *p = reinterpret_cast<float*>(take(4 * size_t(Mp)));
  w.o = reinterpret_cast<float*>(take(sizeof(float) * size_t(rows * D)));
  for (int32_t** p : {&w.lo, &w.hi}) *p = reinterpret_cast<int32_t*>(take(4 * size_t(Mp)));
  for (uint16_t** p : {&w.kb, &w.vb})
    *p = reinterpret_cast<uint16_t*>(take(2 * size_t(kGroup * D)));
  w.pv = take(k.pv_scratch_bytes(Mp, int(D)));
  if (out) *out = w;
  return at;
}

size_t extra_bytes(int64_t rows, int64_t D) {
  return layout(rows, D, nullptr, nullptr);
}

// Group j0's keys in tiles of 16 for the products. A tile of one pool block (BS a multiple of 16)
// whose keys all come at or after `first` is read in place, its rows after `last` too (they are
// in the block; the softmax masks them). Any other tile is copied, keys outside [first, last]
// zero: a key before `first` is multiplied with p = 0, and must not be another sequence's NaN.
struct GroupTiles {
  const uint16_t* k[kGroup / 16];
  const uint16_t* v[kGroup / 16];
  int64_t k_stride[kGroup / 16], v_stride[kGroup / 16];
};

GroupTiles group_tiles(const PagedAttentionArgs& a, const PagedItem& it, int64_t j0, int64_t first,
                       int64_t last, const AmxScratch& w) {
  const int64_t D = a.D, kv_row = a.Hkv * a.D;
  auto row_at = [&](int64_t j) {
    return (int64_t(it.table[j / a.BS]) * a.BS + j % a.BS) * kv_row + it.hk * D;
  };
  const auto* kp = static_cast<const uint16_t*>(a.k_pool);
  const auto* vp = static_cast<const uint16_t*>(a.v_pool);
  GroupTiles g;
  for (int t = 0; j0 + 16 * t <= last; ++t) {
    const int64_t start = j0 + 16 * t;
    if (a.BS % 16 == 0 && start >= first) {
      g.k[t] = kp + row_at(start), g.v[t] = vp + row_at(start);
      g.k_stride[t] = g.v_stride[t] = kv_row;
      continue;
    }
    uint16_t* kt = w.kb + 16 * t * D;
    uint16_t* vt = w.vb + 16 * t * D;
    std::memset(kt, 0, 2 * size_t(16 * D));
    std::memset(vt, 0, 2 * size_t(16 * D));
    for (int64_t j = std::max(first, start); j <= std::min(last, start + 15); ++j) {
      std::memcpy(kt + (j - start) * D, kp + row_at(j), 2 * size_t(D));
      std::memcpy(vt + (j - start) * D, vp + row_at(j), 2 * size_t(D));
    }
    g.k[t] = kt, g.v[t] = vt;
    g.k_stride[t] = g.v_stride[t] = D;
  }
  return g;
}

// One row's online softmax over a group's n keys (keys j0.., lanes of 16; past n masked): the
// scores scaled to base 2, −inf outside [lo, hi]; m, l updated; alpha the factor o takes; the
// probabilities written as bf16 key pairs at p (32 words: zero past n).
void row_softmax(const float* s, int n, int64_t j0, int32_t lo, int32_t hi, float scale, float& m,
                 float& l, float& alpha, uint32_t* p) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 mul = _mm512_set1_ps(scale * kLog2e);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 v[kGroup / 16], mx = neg_inf;
  for (int c = 0; c < kGroup / 16; ++c) {
    const __m512i key = _mm512_add_epi32(_mm512_set1_epi32(int32_t(j0) + 16 * c), lanes);
    const __mmask16 ok = _mm512_cmpge_epi32_mask(key, _mm512_set1_epi32(lo)) &
                         _mm512_cmple_epi32_mask(key, _mm512_set1_epi32(hi)) &
                         _mm512_cmplt_epi32_mask(key, _mm512_set1_epi32(int32_t(j0) + n));
    v[c] = _mm512_mask_blend_ps(ok, neg_inf,
                                _mm512_mul_ps(_mm512_maskz_loadu_ps(ok, s + 16 * c), mul));
    mx = _mm512_max_ps(mx, v[c]);
  }
  const float m_new = std::max(m, _mm512_reduce_max_ps(mx));
  const float base = m_new == -__builtin_inff() ? 0.f : m_new;
  alpha = _mm512_cvtss_f32(exp2_ps(_mm512_set1_ps(m - base)));
  __m512 sum = _mm512_setzero_ps();
  for (int c = 0; c < kGroup / 16; ++c) {
    v[c] = exp2_ps(_mm512_sub_ps(v[c], _mm512_set1_ps(base)));
    sum = _mm512_add_ps(sum, v[c]);
  }
  for (int c = 0; c < kGroup / 16; c += 2)
    _mm512_storeu_si512(p + 8 * c, (__m512i)_mm512_cvtne2ps_pbh(v[c + 1], v[c]));
  l = l * alpha + _mm512_reduce_add_ps(sum);
  m = m_new;
}

// The rows of an item of one KV head (operands paged_amx_tiles_take: paged_attention_tier sends
// the others to the avx512 loops).
void head_rows(const PagedAttentionArgs& a, const PagedItem& it, const PagedScratch& scratch) {
  const BlockKernels& k = amx_block_kernels(true);
  const int64_t D = a.D;
  const int rows = int(paged_item_rows(it)), Mp = round16(rows);
  AmxScratch w;
  layout(rows, D, scratch.extra, &w);
  int64_t lo_all = it.L, hi_all = -1;
  for (int r = 0; r < Mp; ++r) {
    w.m[r] = -__builtin_inff(), w.l[r] = 0.f;
    if (r >= rows) {
      w.lo[r] = 0, w.hi[r] = -1;  // padding: sees nothing
      continue;
    }
    const PagedRow row = paged_row(a, it, r);
    int64_t lo, hi;
    visible_keys(a, it, row.t, lo, hi);
    w.lo[r] = int32_t(lo), w.hi[r] = int32_t(hi);
    lo_all = std::min(lo_all, lo), hi_all = std::max(hi_all, hi);
    w.q_rows[r] = static_cast<const uint16_t*>(a.q) + ((it.first + row.t) * a.Hq + row.head) * D;
  }
  std::memset(w.o, 0, sizeof(float) * size_t(rows * D));
  std::memset(w.pr, 0, sizeof(uint32_t) * size_t(kBlockKeys / 2) * Mp);  // padding rows stay 0
  k.pack_q(w.q_rows, rows, Mp, int(D), w.qt);
  for (int64_t j0 = lo_all / kGroup * kGroup; hi_all >= lo_all && j0 <= hi_all; j0 += kGroup) {
    const int64_t first = std::max(lo_all, j0), last = std::min(hi_all, j0 + kGroup - 1);
    const int n = int(last - j0 + 1);
    const GroupTiles g = group_tiles(a, it, j0, first, last, w);
    amx_scores_tiles(w.qt, g.k, g.k_stride, n, Mp, int(D), w.s);
    // Each row's scores out of the tiles' transposed layout, keys in lanes.
    for (int kt = 0; 16 * kt < n; ++kt)
      for (int r0 = 0; r0 < rows; r0 += 16)
        transpose16(reinterpret_cast<const uint32_t*>(w.s) + size_t(16 * kt) * Mp + r0, Mp,
                    reinterpret_cast<uint32_t*>(w.srow) + size_t(r0) * kGroup + 16 * kt, kGroup);
    for (int r = 0; r < rows; ++r)
      row_softmax(w.srow + size_t(r) * kGroup, n, j0, w.lo[r], w.hi[r], a.scale, w.m[r], w.l[r],
                  w.alpha[r], w.pr + size_t(r) * (kBlockKeys / 2));
    amx_pv_rows(w.pr, g.v, g.v_stride, n, rows, Mp, int(D), w.alpha, w.o, w.pv);
  }
  for (int r = 0; r < rows; ++r) {  // the softmax keeps m in base 2
    const float m = w.m[r] == -__builtin_inff() ? w.m[r] : w.m[r] * kLn2;
    const PagedRow row = paged_row(a, it, r);
    finish_row(a, it.first + row.t, row.head, m, w.l[r], w.o + r * D);
  }
}

// An item's KV heads one after another: the tiles take one head's keys at a time.
void rows(const PagedAttentionArgs& a, const PagedItem& it, const PagedScratch& scratch) {
  for (int64_t h = 0; h < it.hk_count; ++h) {
    PagedItem head = it;
    head.hk = it.hk + h;
    head.hk_count = 1;
    head_rows(a, head, scratch);
  }
}

}  // namespace

const PagedAttentionTier& paged_attention_amx() {
  // No combine: the tiles' rows take every key in one pass, so this tier's items are never split
  // by key chunk.
  static const PagedAttentionTier tier = {"amx", paged_attention_avx512().lanes, rows, extra_bytes,
                                          nullptr};
  return tier;
}

}  // namespace sy::cpu
