// The paged form of attention (ABI 1.5, docs/abi.md "Varlen and paged"): every sequence's query
// rows packed along T, keys and values in a pool of blocks named by per-sequence block tables.
//
// Batch-invariant by construction: each query row is computed on its own, by one arithmetic that
// depends only on the row (its q, its position, its sequence's keys), never on the other rows of
// the step, how they are grouped into work items or threads. A row visits its sequence's keys
// block by block of the pool (BS keys, aligned to absolute positions), the keys it may see in each
// (causal, sliding window; never past the sequence's length: the pool is not zeroed); per block:
// scores (a lane-wise dot over D in the tier's lanes, summed by a fixed tree, times the scale, then
// softcap), the online softmax (block max, e^(m − m'), e^(s − m') per key, their sum by halving)
// and the values (o · α, then + p·v key by key, fused multiply-add where the tier has one).
// Sinks join the final denominator only; lse is the log-sum-exp of the row's scores.
//
// Keys are taken in chunks of kKeyChunk absolute positions: each chunk's softmax runs from a
// fresh state, and the chunks are folded into the row's total in order (paged_fold). So a
// sequence with few KV heads can be split across threads by chunk (an item per chunk, its
// state kept as a partial, the partials folded in order afterwards) with the same arithmetic,
// bit for bit, as one thread taking every chunk: whether a row is split depends on its company,
// its result does not.
#pragma once

#include <cstdint>

#include "tier/cpu_tier.hpp"

namespace sy::cpu {

struct PagedAttentionArgs {
  const void* q;       // [T, Hq, D], f32 or bf16
  const void* k_pool;  // [NB, BS, Hkv, D], q's dtype
  const void* v_pool;
  const float* sinks;  // [Hq], or nullptr
  void* o;             // [T, Hq, D], q's dtype
  float* lse;          // [Hq, T], or nullptr
  bool bf16;
  int64_t T, Hq, Hkv, D, BS;
  bool causal;
  int64_t window;  // keys older than position − window are hidden; < 0: none
  float scale, softcap;
};

// The keys of a chunk (above): a multiple of every tier's lanes, so no group of L keys straddles
// two chunks.
inline constexpr int64_t kKeyChunk = 256;

// Query rows [t0, t1) of one sequence (of its q_len, the last q_len positions of its L keys)
// for the query heads [g0, g1) of the groups of KV heads hk .. hk + hk_count − 1.
struct PagedItem {
  const int32_t* table;  // the sequence's block table row
  int64_t first;         // the sequence's first query row in q
  int64_t q_len, L, hk, t0, t1, g0, g1;
  // Not null: only key chunk `chunk` is taken, and each row's state after it goes here instead
  // of the output: m, l, then o [Dp] (PagedAttentionTier::combine finishes the rows).
  float* partial = nullptr;
  int64_t chunk = 0;
  // KV heads taken together: a key's rows of consecutive heads lie side by side in the pool, so
  // an item of them all reads a group of keys' rows as one run where the group lies in one
  // block.
  int64_t hk_count = 1;
};

// The item's rows: KV head by KV head, in each token by token, in each query head by head.
inline int64_t paged_item_rows(const PagedItem& it) {
  return it.hk_count * (it.t1 - it.t0) * (it.g1 - it.g0);
}

// Row r of the item: its token t (in the sequence's queries: t0 ≤ t < t1) and query head.
struct PagedRow {
  int64_t t, head;
};
inline PagedRow paged_row(const PagedAttentionArgs& a, const PagedItem& it, int64_t r) {
  const int64_t heads = it.g1 - it.g0, per_kv_head = (it.t1 - it.t0) * heads;
  const int64_t in_head = r % per_kv_head, hk = it.hk + r / per_kv_head;
  return {it.t0 + in_head / heads, hk * (a.Hq / a.Hkv) + it.g0 + in_head % heads};
}

// The floats a split item's partial takes per row.
inline int64_t paged_partial_floats(int64_t Dp) {
  return Dp + 2;
}

// One thread's scratch, allocated at prepare (Dp: D rounded up to the tier's lanes L; R: the
// most rows an item has). The pads past D stay zero.
struct PagedScratch {
  float* q;        // [R][Dp]
  float* o;        // [R][Dp]
  float* m;        // [R]
  float* l;        // [R]
  int64_t* range;  // [R][2]: the row's first and last visible key
  float* kb;       // [L][Dp]: a group's keys of one KV head as f32, where not read in place
  float* vb;       // [L][Dp]: its values
  char* extra;     // the tier's own (PagedAttentionTier::extra_bytes), 64-byte aligned
  float* to;       // [R][Dp]: the rows' totals over the chunks folded so far
  float* tm;       // [R]
  float* tl;       // [R]
};

struct PagedAttentionTier {
  const char* name;
  int lanes;
  void (*rows)(const PagedAttentionArgs& a, const PagedItem& item, const PagedScratch& w);
  // Optional: the bytes of PagedScratch::extra an item of up to `rows` rows of D needs.
  size_t (*extra_bytes)(int64_t rows, int64_t D);
  // Optional: folds the partials of `count` items that split one item's rows by key chunk (in
  // chunk order) and finishes the rows. Without it the tier's items are never split.
  void (*combine)(const PagedAttentionArgs& a, const PagedItem* items, int64_t count,
                  const PagedScratch& w);
};

// Whether the amx tier's tiles take attention of these operands: bf16 rows, a head dim of whole
// tile steps (32), no softcap.
inline bool paged_amx_tiles_take(const PagedAttentionArgs& a) {
  return a.bf16 && a.D % 32 == 0 && !(a.softcap > 0.f);
}

// The loops `tier` runs attention of these operands with (the shape fields of `a`: bf16, D,
// softcap). On the amx tier, what its tiles do not take runs the avx512 loops, chosen here at
// prepare so that the step splits their items by key chunk as it does on that tier.
const PagedAttentionTier& paged_attention_tier(const TierChoice& tier, const PagedAttentionArgs& a);
const PagedAttentionTier& paged_attention_portable();
const PagedAttentionTier& paged_attention_avx2();
const PagedAttentionTier& paged_attention_avx512();
// bf16 on AMX tiles (attention_paged_amx.cpp), for operands paged_amx_tiles_take.
const PagedAttentionTier& paged_attention_amx();

}  // namespace sy::cpu
