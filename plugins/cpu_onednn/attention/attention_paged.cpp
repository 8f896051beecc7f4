// The paged attention kernel (attention_paged.hpp): checks the step's metadata, splits the rows
// into items (sequence, KV head, up to kItemTokens query rows; fewer rows: one query head each;
// a decode row: every KV head of its sequence where the step has items enough) and runs the
// tier's loops on them across the threads. Every scratch buffer is allocated at prepare
// for the bounds.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention/attention_paged.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

constexpr int64_t kItemTokens = 16;

[[noreturn]] void invalid(const std::string& what) {
  throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT, "attention: " + what);
}

class PagedAttentionKernel final : public CpuKernel {
 public:
  PagedAttentionKernel(const sy::edge::OpCopy& op, const CpuContext& ctx) : ctx_(ctx) {
    const auto& q = op.inputs[0].shape;
    const auto& pool = op.inputs[1].shape;
    const size_t n = op.inputs.size();
    base_.bf16 = op.inputs[0].dtype == SY_DTYPE_BF16;
    base_.Hq = q[2];
    base_.D = q[3];
    base_.BS = pool[1];
    base_.Hkv = pool[2];
    base_.causal = op.int_attr(SY_ATTR_CAUSAL, 0) != 0;
    base_.window = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
    const double scale = op.float_attr(SY_ATTR_SCALE, 0.0);
    base_.scale = float(scale != 0.0 ? scale : 1.0 / std::sqrt(double(base_.D)));
    base_.softcap = float(op.float_attr(SY_ATTR_SOFTCAP, 0.0));
    tier_ = &paged_attention_tier(active_tier(), base_);
    sinks_ = n == 7;
    lse_ = op.outputs.size() > 1;
    const int64_t max_seqs = op.inputs[n - 2].shape[0];
    const int64_t group = base_.Hq / base_.Hkv, L = tier_->lanes;
    const int64_t Dp = (base_.D + L - 1) / L * L;
    // A step splits by key chunk only when it has fewer than 2 (sequence, KV head) pairs per
    // thread (at least 4: one core splits too, so it runs the arithmetic every machine runs),
    // each of one query row, so at most that many pairs' rows (a group's heads each) are split,
    // whether a sequence's KV heads are one item or one each.
    max_chunks_ = (op.inputs[n - 1].shape[1] * base_.BS + kKeyChunk - 1) / kKeyChunk;
    max_split_ = tier_->combine ? 2 * int64_t(std::max(ctx_.num_threads, 2)) : 0;
    max_items_ = base_.Hq * (q[1] / kItemTokens + max_seqs + 1) + max_split_ * max_chunks_;
    partial_floats_ = paged_partial_floats(Dp);
    partials_of(size_t(max_split_ * max_chunks_ * group * partial_floats_));
    splits_.resize(size_t(max_split_));
    rows_ = group * std::max(kItemTokens, base_.Hkv);  // 16 tokens of a group, or a token's heads
    // Every thread of this thread's team gets its scratch now, not in a step (which must not
    // allocate): which worker runs which item is the schedule's choice.
    const int64_t rows = rows_, D = base_.D;
    extra_ = tier_->extra_bytes ? tier_->extra_bytes(rows, D) : 0;
    const size_t extra = extra_;
#pragma omp parallel num_threads(ctx_.num_threads)
    scratch(rows, D, L, extra);
    items_of(max_items_);
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    PagedAttentionArgs a = base_;
    const int n = sinks_ ? 7 : 6;
    a.T = in[0]->shape[1];
    a.q = data_of<const void>(in[0]);
    a.k_pool = data_of<const void>(in[1]);
    a.v_pool = data_of<const void>(in[2]);
    a.sinks = sinks_ ? data_of<const float>(in[3]) : nullptr;
    a.o = data_of<void>(out[0]);
    a.lse = lse_ ? data_of<float>(out[1]) : nullptr;
    Item* items = items_of(max_items_);
    int64_t splits = 0;
    const int64_t count =
        make_items(in[n - 3], in[n - 2], in[n - 1], in[1]->shape[0], a.T, items, splits);
    const PagedAttentionTier& tier = *tier_;
    const Item* list = items;
    const int threads = count > 1 ? ctx_.num_threads : 1;
    const int64_t rows = rows_;
    const size_t extra = extra_;
#pragma omp parallel for num_threads(threads) schedule(dynamic)
    for (int64_t i = 0; i < count; ++i)
      tier.rows(a, list[i], scratch(rows, a.D, tier.lanes, extra));
    for (int64_t s = 0; s < splits; ++s)  // a few rows each: not worth a team
      tier.combine(a, list + splits_[size_t(s)].first, splits_[size_t(s)].count,
                   scratch(rows, a.D, tier.lanes, extra));
  }

 private:
  using Item = PagedItem;
  // This thread's list of at least `count` items.
  static Item* items_of(int64_t count) {
    thread_local std::vector<Item> items;
    if (items.size() < size_t(count)) items.resize(size_t(count));
    return items.data();
  }

  // This thread's buffer of at least `count` floats for the partials of split items: one for
  // every kernel the thread runs (a layer's kernel each), as the items are, not one per kernel.
  static float* partials_of(size_t count) {
    thread_local std::vector<float> partials;
    if (partials.size() < count) partials.resize(count);
    return partials.data();
  }

  // This thread's scratch for items of up to `rows` rows of D (attention_paged.hpp).
  static PagedScratch scratch(int64_t rows, int64_t D, int64_t L, size_t extra) {
    thread_local std::vector<float> f;
    thread_local std::vector<int64_t> range;
    thread_local std::vector<char> tier_bytes;
    if (tier_bytes.size() < extra + 64) tier_bytes.assign(extra + 64, 0);
    char* aligned = tier_bytes.data() + (64 - reinterpret_cast<uintptr_t>(tier_bytes.data()) % 64);
    const int64_t Dp = (D + L - 1) / L * L;
    const size_t need = size_t(3 * rows * Dp + 4 * rows + 2 * L * Dp);
    if (f.size() < need) f.assign(need, 0.f);
    if (range.size() < size_t(2 * rows)) range.assign(size_t(2 * rows), 0);
    float* q = f.data();
    float* o = q + rows * Dp;
    float* m = o + rows * Dp;
    float* l = m + rows;
    float* kb = l + rows;
    float* to = kb + 2 * L * Dp;
    float* tm = to + rows * Dp;
    return {q, o, m, l, range.data(), kb, kb + L * Dp, aligned, to, tm, tm + rows};
  }

  // Items [first, first + count) are one item's rows split by key chunk.
  struct Split {
    int64_t first, count;
  };

  // The step's (sequence, KV head, up to kItemTokens rows) pairs and its longest query, after
  // checking every entry of the metadata the step will read (nothing is written before):
  // query_start from 0 to T, non-decreasing; each sequence's queries within its length, its
  // length within its blocks; each block it reads inside the pool.
  std::pair<int64_t, int64_t> checked_pairs(const int32_t* starts, const int32_t* lens,
                                            const int32_t* table, int64_t S, int64_t MB,
                                            int64_t pool_blocks, int64_t T) const {
    const int64_t BS = base_.BS;
    if (starts[0] != 0 || starts[S] != T)
      invalid("query_start must begin at 0 and end at T = " + std::to_string(T) +
              ", not run from " + std::to_string(starts[0]) + " to " + std::to_string(starts[S]));
    int64_t pairs = 0, longest_query = 0;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t q_len = int64_t(starts[s + 1]) - starts[s], L = lens[s];
      if (q_len < 0 || q_len > L || L > MB * BS)
        invalid("sequence " + std::to_string(s) + " has " + std::to_string(q_len) +
                " query tokens and length " + std::to_string(L) +
                "; queries must fit its length, and its length its " + std::to_string(MB) +
                " blocks of " + std::to_string(BS));
      for (int64_t b = 0; b < (L + BS - 1) / BS; ++b)
        if (table[s * MB + b] < 0 || table[s * MB + b] >= pool_blocks)
          invalid("block table entry " + std::to_string(b) + " of sequence " + std::to_string(s) +
                  " names block " + std::to_string(table[s * MB + b]) + " of a pool of " +
                  std::to_string(pool_blocks));
      pairs += base_.Hkv * ((q_len + kItemTokens - 1) / kItemTokens);
      longest_query = std::max(longest_query, q_len);
    }
    return {pairs, longest_query};
  }

  // The first key chunk a decode row of a sequence of L keys sees (back to its window: the
  // older ones would be empty items) and how many it sees.
  std::pair<int64_t, int64_t> decode_chunks(int64_t L) const {
    const int64_t first_key = base_.window >= 0 ? std::max<int64_t>(0, L - 1 - base_.window) : 0;
    const int64_t first = first_key / kKeyChunk;
    return {first, L > 0 ? (L - 1) / kKeyChunk + 1 - first : 0};
  }

  // Whether each decode row's item takes every KV head of its sequence: it then reads each key
  // group's rows of every head, one run of the pool where the group lies in one block, which
  // the hardware prefetchers follow (one head's rows are short runs a stride apart). Taken
  // where the step still has 4 items a thread that way, so that the threads stay level (5
  // items on 2 threads lost more than the runs gained on the avx2 tier of an AMX Xeon,
  // docs/cpu-tiers.md), or on one thread. Same results either way.
  bool heads_together(const int32_t* starts, const int32_t* lens, int64_t S, bool by_chunk) const {
    if (ctx_.num_threads == 1) return true;
    int64_t items = 0;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t q_len = int64_t(starts[s + 1]) - starts[s];
      const int64_t chunks = decode_chunks(lens[s]).second;
      items += q_len == 1 ? (by_chunk && chunks > 1 ? chunks : 1)
                          : base_.Hkv * ((q_len + kItemTokens - 1) / kItemTokens);
    }
    return items >= 4 * int64_t(ctx_.num_threads);
  }

  // The items of this step, its metadata checked first (checked_pairs). `splits`: how many of
  // splits_ name items split by key chunk.
  int64_t make_items(const DLTensor* starts_t, const DLTensor* lens_t, const DLTensor* table_t,
                     int64_t pool_blocks, int64_t T, Item* items, int64_t& splits) {
    const int32_t* starts = data_of<const int32_t>(starts_t);
    const int32_t* lens = data_of<const int32_t>(lens_t);
    const int32_t* table = data_of<const int32_t>(table_t);
    const int64_t S = lens_t->shape[0], MB = table_t->shape[1];
    const int64_t group = base_.Hq / base_.Hkv;
    const auto [pairs, longest_query] = checked_pairs(starts, lens, table, S, MB, pool_blocks, T);
    // Fewer than 2 items a thread, each one query row (decode): a sequence longer than a key
    // chunk is split by chunk, its heads kept together (their keys read once). Same results.
    const bool by_chunk = pairs < max_split_ && longest_query <= 1;
    const bool together = heads_together(starts, lens, S, by_chunk);
    int64_t count = 0, partial = 0;
    const int64_t partial_capacity = max_split_ * max_chunks_ * group * partial_floats_;
    float* partials = partials_of(size_t(partial_capacity));
    splits = 0;
    const auto add = [&](const Item& item) {
      if (count == max_items_) invalid("more work items than prepared");
      items[count++] = item;
    };
    for (int64_t s = 0; s < S; ++s) {
      const int64_t q_len = int64_t(starts[s + 1]) - starts[s], L = lens[s];
      const auto [first_chunk, chunks] = decode_chunks(L);
      const int64_t hk_count = together && q_len == 1 ? base_.Hkv : 1;
      for (int64_t hk = 0; hk < base_.Hkv; hk += hk_count)
        for (int64_t t0 = 0; t0 < q_len; t0 += kItemTokens) {
          const int64_t t1 = std::min(q_len, t0 + kItemTokens);
          Item whole{table + s * MB, starts[s], q_len, L, hk, t0, t1, 0, group};
          whole.hk_count = hk_count;
          if (by_chunk && chunks > 1) {
            const int64_t floats = paged_item_rows(whole) * partial_floats_;
            if (partial + chunks * floats > partial_capacity)
              invalid("more split work than prepared");
            splits_[size_t(splits++)] = {count, chunks};
            for (int64_t c = 0; c < chunks; ++c, partial += floats) {
              Item item = whole;
              item.partial = partials + partial;
              item.chunk = first_chunk + c;
              add(item);
            }
            continue;
          }
          // Fewer (sequence, KV head) pairs than threads, and a few rows of one KV head: one
          // item per query head, so every thread has work (each then reads the group's keys
          // itself). With as many pairs as threads, a pair's heads stay one item and its keys
          // are read once: SmolLM2's 3 KV heads on 2 threads decoded 10-15 % faster at depth
          // 1024 that way than as 9 items of one head (docs/cpu-tiers.md).
          const int64_t split =
              hk_count == 1 && S * base_.Hkv < ctx_.num_threads && t1 - t0 < kItemTokens ? 1
                                                                                         : group;
          for (int64_t g0 = 0; g0 < group; g0 += split) {
            Item item = whole;
            item.g0 = g0, item.g1 = g0 + split;
            add(item);
          }
        }
    }
    return count;
  }

  const PagedAttentionTier* tier_ = nullptr;  // chosen for the operands at prepare
  CpuContext ctx_;
  PagedAttentionArgs base_{};
  bool sinks_ = false, lse_ = false;
  int64_t max_items_ = 0, rows_ = 0;  // the bounds' work items, and rows per item
  size_t extra_ = 0;                  // the tier's own scratch per thread
  // Splitting by key chunk: at most max_split_ items split, into at most max_chunks_ each;
  // their rows' partials (partial_floats_ per row) and where each split's items are.
  int64_t max_chunks_ = 0, max_split_ = 0, partial_floats_ = 0;
  std::vector<Split> splits_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_paged_attention(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  return std::make_unique<PagedAttentionKernel>(op, ctx);
}

}  // namespace sy::cpu
