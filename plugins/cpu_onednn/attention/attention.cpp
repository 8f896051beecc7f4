// sdpa attention on the CPU: the flash-attention algorithm (tiles, online softmax) with
// bottom-right causal alignment, sliding window, GQA, sinks, softcap, LSE output, and KV
// splitting with LSE merging when one sequence alone would not fill the cores.
//
// Work item = (batch, KV head, block of query positions, KV split). Its rows are the query
// heads of that KV head times the query positions, so K and V are read once per group.
// Decoding (at most kRowAlign rows per KV head) takes its own path, process_decode: one item is
// (batch, KV split) over every KV head at once, so the cache is read in address order
// (DecodeBlock in attention_blocks.hpp).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "attention/attention_blocks.hpp"
#include "tier/cpu_tier.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"
#include "switchyard/plugin_api.h"

namespace sy::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

// 64-byte aligned, zeroed scratch.
std::unique_ptr<char, AlignedFree> aligned_bytes(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64 + 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return std::unique_ptr<char, AlignedFree>(static_cast<char*>(p));
}

int round_up(int x, int m) {
  return (x + m - 1) / m * m;
}

// Each K/V row of one KV head sits in its own 4 KiB page once Hkv·D·size >= 4 KiB, where the
// hardware prefetchers stop; asking for the next block's rows ahead keeps decode streaming.
void prefetch_rows(const char* first, int n, int64_t stride_bytes, int64_t row_bytes) {
  for (int j = 0; j < n; ++j)
    for (int64_t b = 0; b < row_bytes; b += 64)
      __builtin_prefetch(first + j * stride_bytes + b, 0, 1);
}

struct Geometry {
  int64_t B, Sq, Skv, Hq, Hkv, D;
  int group;   // query heads per KV head
  int bq;      // query positions per item
  int nqb;     // query blocks
  int heads;   // KV heads per item: 1, or all of them when decoding (see plan())
  int block;   // keys per block, at most kBlockKeys
  int nsplit;  // KV splits per item at most (a run may use fewer: splits_)
  int max_rows, max_rows_padded;
  bool decode;  // few query rows: the DecodeBlock path
  int lanes;    // decoding: a score row's length (DecodeBlock::lanes)
};

struct Semantics {
  bool causal = false;
  int64_t window = -1;
  float scale = 1.f, softcap = 0.f;
  bool sinks = false, lse = false, kv_len_input = false;
};

// Per-thread scratch, sized once at prepare: no allocation on the execute path. Running state
// is per KV head of the item (`heads` copies).
struct Workspace {
  std::unique_ptr<char, AlignedFree> qt, s, o, pv, m, l, alpha, lo, hi;
  std::vector<const void*> rows;
  size_t qt_stride = 0;  // bytes between the heads' packed queries
  // Decoding (DecodeBlock): f32 queries [H][R][D], scores [kDecodeKeys][lanes], and the
  // softmax state and valid key range per lane.
  std::unique_ptr<char, AlignedFree> dq, ds, dm, dl, dalpha, dlo, dhi;
};

// One item's rows and their valid key ranges (identical for every KV head of the item).
struct Rows {
  int64_t i0;
  int bq, M, Mp;
  int32_t jmin, jmax, all_lo, all_hi;
};

class AttentionKernel final : public CpuKernel {
 public:
  AttentionKernel(const sy::edge::OpCopy& op, const CpuContext& ctx) : threads_(ctx.num_threads) {
    const auto& q = op.inputs[0].shape;
    const auto& k = op.inputs[1].shape;
    bf16_ = op.inputs[0].dtype == SY_DTYPE_BF16;
    esize_ = bf16_ ? 2 : 4;
    blocks_ = &block_kernels(active_tier(), bf16_);
    g_ = {q[0], q[1], k[1], q[2],  k[2], q[3], int(q[2] / k[2]), 0, 0, 1, blocks_->block_keys,
          1,    0,    0,    false, 0};
    sem_.causal = op.int_attr(SY_ATTR_CAUSAL, 0) != 0;
    sem_.window = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
    double scale = op.float_attr(SY_ATTR_SCALE, 0.0);
    sem_.scale = float(scale != 0.0 ? scale : 1.0 / std::sqrt(double(g_.D)));
    sem_.softcap = float(op.float_attr(SY_ATTR_SOFTCAP, 0.0));
    sem_.kv_len_input = op.int_attr(SY_ATTR_KV_LEN_INPUT, 0) != 0;
    sem_.sinks = op.has(SY_FEATURE_SINKS);
    sem_.lse = op.outputs.size() > 1;
    decode_blocks_ = &decode_kernels(active_tier(), bf16_);
    plan();
    allocate();
    kv_len_.assign(size_t(g_.B), g_.Skv);
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    std::fill(kv_len_.begin(), kv_len_.end(), g_.Skv);
    if (sem_.kv_len_input) read_kv_len(in[sem_.sinks ? 4 : 3], kv_len_);
    const int64_t* kv_len = kv_len_.data();
    const float* sinks = sem_.sinks ? data_of<float>(in[3]) : nullptr;
    float* lse = sem_.lse ? data_of<float>(out[1]) : nullptr;
    // A short fill of a long cache (decoding early in a long context) needs fewer splits than
    // the cache's capacity planned for; each split costs a work item and a merge.
    splits_ = int(std::min<int64_t>(g_.nsplit,
                                    splits_for(*std::max_element(kv_len_.begin(), kv_len_.end()))));
    const int64_t head_groups = g_.Hkv / g_.heads;
    const int64_t items = g_.B * head_groups * g_.nqb * splits_;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_) if (items > 1)
    for (int64_t it = 0; it < items; ++it) {
      Workspace& ws = ws_[omp_get_thread_num()];
      // Largest query blocks first: under a causal mask they carry the most keys.
      int64_t split = it % splits_, rest = it / splits_;
      int64_t qb = g_.nqb - 1 - rest % g_.nqb;
      rest /= g_.nqb;
      int64_t hg = rest % head_groups, b = rest / head_groups;
      if (g_.decode)
        process_decode(ws, in, out, sinks, lse, kv_len[b], b, split);
      else
        process(ws, in, out, sinks, lse, kv_len[b], b, hg * g_.heads, qb, split);
    }
    if (splits_ > 1) merge_splits(out, sinks, lse);
  }

 private:
  // The most splits worth making of `keys` keys: each at least 4 full blocks.
  int64_t splits_for(int64_t keys) const {
    return std::max<int64_t>(1, keys / (4 * int64_t(blocks_->block_keys)));
  }

  void plan() {
    g_.bq = int(std::min<int64_t>(g_.Sq, std::max(1, 96 / g_.group)));
    g_.nqb = int((g_.Sq + g_.bq - 1) / g_.bq);
    g_.max_rows = g_.bq * g_.group;
    g_.max_rows_padded = round_up(g_.max_rows, kRowAlign);
    int64_t want = 4 * int64_t(threads_);
    // Decoding (few query rows): one item walks every KV head in step (process_decode); the
    // KV range is split so every thread has items.
    if (g_.nqb == 1 && g_.max_rows <= kRowAlign) {
      g_.decode = true;
      g_.heads = int(g_.Hkv);
      g_.block = kDecodeKeys;
      g_.lanes = round_up(int(g_.Hkv) * g_.max_rows + 3, kRowAlign);
      g_.nsplit = int(std::min<int64_t>((want + g_.B - 1) / g_.B, splits_for(g_.Skv)));
      return;
    }
    // Otherwise split the KV range only when the items alone cannot keep every thread busy.
    int64_t base = g_.B * g_.Hkv * g_.nqb;
    if (base < want) {
      g_.nsplit = int(std::min<int64_t>((want + base - 1) / base, splits_for(g_.Skv)));
    }
  }

  void allocate() {
    int Mp = g_.max_rows_padded, M = g_.max_rows, D = int(g_.D), H = g_.heads;
    ws_.resize(threads_);
    for (auto& w : ws_) {
      w.qt_stride = (blocks_->qt_bytes(Mp, D) + 63) / 64 * 64;
      w.qt = aligned_bytes(w.qt_stride * H);
      w.s = aligned_bytes(sizeof(float) * size_t(g_.block) * Mp);
      w.o = aligned_bytes(sizeof(float) * size_t(H) * M * D);
      w.pv = aligned_bytes(blocks_->pv_scratch_bytes(Mp, D));
      for (auto* p : {&w.m, &w.l, &w.alpha}) *p = aligned_bytes(4 * size_t(H) * Mp);
      for (auto* p : {&w.lo, &w.hi}) *p = aligned_bytes(4 * size_t(Mp));
      w.rows.resize(M);
      if (g_.decode) {
        w.dq = aligned_bytes(sizeof(float) * size_t(H) * M * D);
        w.ds = aligned_bytes(sizeof(float) * size_t(kDecodeKeys) * g_.lanes);
        for (auto* p : {&w.dm, &w.dl, &w.dalpha, &w.dlo, &w.dhi})
          *p = aligned_bytes(4 * size_t(g_.lanes));
      }
    }
    if (g_.nsplit > 1) {
      size_t parts = size_t(g_.B * g_.Hkv * g_.nqb * g_.nsplit);
      part_o_ = aligned_bytes(sizeof(float) * parts * M * D);
      part_m_ = aligned_bytes(sizeof(float) * parts * M);
      part_l_ = aligned_bytes(sizeof(float) * parts * M);
    }
  }

  void read_kv_len(const DLTensor* t, std::vector<int64_t>& kv_len) const {
    const int64_t* v = data_of<int64_t>(t);
    for (int64_t b = 0; b < g_.B; ++b) {
      if (v[b] < 0 || v[b] > g_.Skv)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "kv_len[" + std::to_string(b) + "] = " + std::to_string(v[b]) +
                                        " is outside [0, " + std::to_string(g_.Skv) +
                                        "] (the KV tensors' length)");
      kv_len[b] = v[b];
    }
  }

  // Valid keys of query position qi: [lo, hi], bottom-right aligned to kv_len.
  void key_range(int64_t qi, int64_t L, int32_t& lo, int32_t& hi) const {
    int64_t diag = qi + L - g_.Sq;
    int64_t h = sem_.causal ? std::min(diag, L - 1) : L - 1;
    int64_t l = sem_.window >= 0 ? std::max<int64_t>(0, diag - sem_.window) : 0;
    lo = int32_t(l);
    hi = int32_t(h);
  }

  Rows rows_of(Workspace& ws, int64_t L, int64_t qb) const {
    Rows r{qb * g_.bq, 0, 0, 0, INT32_MAX, -1, -1, INT32_MAX};
    r.bq = int(std::min<int64_t>(g_.bq, g_.Sq - r.i0));
    r.M = r.bq * g_.group;
    r.Mp = round_up(r.M, kRowAlign);
    auto* lo = reinterpret_cast<int32_t*>(ws.lo.get());
    auto* hi = reinterpret_cast<int32_t*>(ws.hi.get());
    for (int i = 0; i < r.bq; ++i) {
      int32_t a, z;
      key_range(r.i0 + i, L, a, z);
      for (int g = 0; g < g_.group; ++g) lo[i * g_.group + g] = a, hi[i * g_.group + g] = z;
      r.jmin = std::min(r.jmin, a);
      r.jmax = std::max(r.jmax, z);
      r.all_lo = std::max(r.all_lo, a);
      r.all_hi = std::min(r.all_hi, z);
    }
    for (int x = r.M; x < r.Mp; ++x) lo[x] = 0, hi[x] = -1;
    return r;
  }

  float* head_state(const std::unique_ptr<char, AlignedFree>& p, int h, size_t per_head) const {
    return reinterpret_cast<float*>(p.get()) + size_t(h) * per_head;
  }

  void process(Workspace& ws, const DLTensor* const* in, const DLTensor* const* out,
               const float* sinks, float* lse, int64_t L, int64_t b, int64_t hkv0, int64_t qb,
               int64_t split) {
    const int D = int(g_.D), group = g_.group, H = g_.heads;
    Rows r = rows_of(ws, L, qb);
    auto [begin, end] = split_range(r, split);
    const char* q = data_of<char>(in[0]);
    const size_t MD = size_t(g_.max_rows) * D, MP = size_t(g_.max_rows_padded);
    for (int h = 0; h < H; ++h) {
      std::fill(head_state(ws.m, h, MP), head_state(ws.m, h, MP) + r.Mp, kNegInf);
      std::fill(head_state(ws.l, h, MP), head_state(ws.l, h, MP) + r.Mp, 0.f);
      std::memset(head_state(ws.o, h, MD), 0, sizeof(float) * size_t(r.M) * D);
      if (begin >= end) continue;
      for (int i = 0; i < r.bq; ++i)
        for (int g = 0; g < group; ++g)
          ws.rows[i * group + g] =
              q + esize_ * size_t(((b * g_.Sq + r.i0 + i) * g_.Hq + (hkv0 + h) * group + g) * D);
      blocks_->pack_q(ws.rows.data(), r.M, r.Mp, D, ws.qt.get() + h * ws.qt_stride);
    }
    const char* k = data_of<char>(in[1]);
    const char* v = data_of<char>(in[2]);
    const int64_t stride = g_.Hkv * g_.D;  // elements between consecutive keys of one head
    const int64_t key_bytes = int64_t(esize_) * stride;
    for (int64_t j0 = begin; j0 < end; j0 += g_.block) {
      int n = int(std::min<int64_t>(g_.block, end - j0));
      size_t base = esize_ * size_t(((b * g_.Skv + j0) * g_.Hkv + hkv0) * D);
      if (blocks_->prefetch_next && j0 + g_.block < end) {  // the next block, ahead of use
        int next = int(std::min<int64_t>(g_.block, end - j0 - g_.block));
        int64_t bytes = int64_t(esize_) * H * D;
        prefetch_rows(k + base + g_.block * key_bytes, next, key_bytes, bytes);
        prefetch_rows(v + base + g_.block * key_bytes, next, key_bytes, bytes);
      }
      bool masked = !(j0 >= r.all_lo && j0 + n - 1 <= r.all_hi);
      for (int h = 0; h < H; ++h) {
        size_t offset = base + esize_ * size_t(h) * D;
        auto* s = reinterpret_cast<float*>(ws.s.get());
        blocks_->scores(ws.qt.get() + h * ws.qt_stride, k + offset, stride, n, r.M, r.Mp, D, s);
        SoftmaxBlock sb{s,
                        n,
                        r.Mp,
                        sem_.scale,
                        sem_.softcap,
                        masked,
                        int(j0),
                        reinterpret_cast<int32_t*>(ws.lo.get()),
                        reinterpret_cast<int32_t*>(ws.hi.get()),
                        head_state(ws.m, h, MP),
                        head_state(ws.l, h, MP),
                        head_state(ws.alpha, h, MP)};
        blocks_->softmax(sb);
        blocks_->pv(s, v + offset, stride, n, r.M, r.Mp, D, sb.alpha, head_state(ws.o, h, MD),
                    ws.pv.get());
      }
    }
    emit(ws, out, sinks, lse, b, hkv0, r, qb, split);
  }

  // Decoding: every KV head of sequence b over this split's keys, kDecodeKeys at a time
  // (DecodeBlock). Leaves o, m and l in the per-head layout `process` leaves them in.
  void process_decode(Workspace& ws, const DLTensor* const* in, const DLTensor* const* out,
                      const float* sinks, float* lse, int64_t L, int64_t b, int64_t split) {
    const Rows r = rows_of(ws, L, 0);
    auto [begin, end] = split_range(r, split);
    start_decode_lanes(ws, r.M);
    pack_decode_queries(ws, data_of<char>(in[0]), b);
    DecodeBlock db = decode_block(ws, r.M);
    const int64_t key_bytes = int64_t(esize_) * db.stride;
    for (int64_t j0 = begin; j0 < end; j0 += kDecodeKeys) {
      size_t base = esize_ * size_t((b * g_.Skv + j0) * db.stride);
      const char* k = data_of<char>(in[1]) + base;
      const char* v = data_of<char>(in[2]) + base;
      db.k = k, db.v = v;
      db.n = int(std::min<int64_t>(kDecodeKeys, end - j0));
      // The next block's K rows during these scores, its V rows during this pv: all heads of a
      // key are adjacent, so each is one contiguous region.
      int64_t next = std::min<int64_t>(kDecodeKeys, end - j0 - db.n);
      db.prefetch[0] = k + db.n * key_bytes;
      db.prefetch[1] = v + db.n * key_bytes;
      db.prefetch_lines[0] = db.prefetch_lines[1] = next * key_bytes / 64;
      decode_blocks_->scores(db);
      bool masked = !(j0 >= r.all_lo && j0 + db.n - 1 <= r.all_hi);
      SoftmaxBlock sb{db.s,
                      db.n,
                      db.lanes,
                      sem_.scale,
                      sem_.softcap,
                      masked,
                      int(j0),
                      reinterpret_cast<int32_t*>(ws.dlo.get()),
                      reinterpret_cast<int32_t*>(ws.dhi.get()),
                      reinterpret_cast<float*>(ws.dm.get()),
                      reinterpret_cast<float*>(ws.dl.get()),
                      reinterpret_cast<float*>(ws.dalpha.get())};
      blocks_->softmax(sb);
      decode_blocks_->pv(db);
    }
    finish_decode_lanes(ws, r.M);
    emit(ws, out, sinks, lse, b, 0, r, 0, split);
  }

  // Empty softmax state and output for every (head, row) lane; each lane's valid key range is
  // its row's (rows_of), and the padding lanes have none.
  void start_decode_lanes(Workspace& ws, int R) const {
    const int H = g_.heads;
    auto* m = reinterpret_cast<float*>(ws.dm.get());
    auto* l = reinterpret_cast<float*>(ws.dl.get());
    auto* lo = reinterpret_cast<int32_t*>(ws.dlo.get());
    auto* hi = reinterpret_cast<int32_t*>(ws.dhi.get());
    const auto* row_lo = reinterpret_cast<const int32_t*>(ws.lo.get());
    const auto* row_hi = reinterpret_cast<const int32_t*>(ws.hi.get());
    for (int x = 0; x < g_.lanes; ++x) {
      m[x] = kNegInf, l[x] = 0.f;
      lo[x] = x < H * R ? row_lo[x % R] : 0;
      hi[x] = x < H * R ? row_hi[x % R] : -1;
    }
    std::memset(ws.o.get(), 0, sizeof(float) * size_t(H) * R * g_.D);
  }

  DecodeBlock decode_block(Workspace& ws, int R) const {
    DecodeBlock db{};
    db.q = reinterpret_cast<const float*>(ws.dq.get());
    db.stride = g_.Hkv * g_.D;
    db.H = g_.heads, db.R = R, db.D = int(g_.D), db.lanes = g_.lanes;
    db.s = reinterpret_cast<float*>(ws.ds.get());
    db.alpha = reinterpret_cast<const float*>(ws.dalpha.get());
    db.o = reinterpret_cast<float*>(ws.o.get());  // [H][R][D]: process's head_state layout
    return db;
  }

  // The output back in natural element order and the lanes' (max, sum) into the per-head
  // layout emit reads.
  void finish_decode_lanes(Workspace& ws, int R) const {
    const int H = g_.heads;
    // The queries are no longer needed: their buffer is the permutation's scratch.
    unsplit_rows(reinterpret_cast<float*>(ws.o.get()), size_t(H) * R, ws.dq.get());
    const auto* m = reinterpret_cast<const float*>(ws.dm.get());
    const auto* l = reinterpret_cast<const float*>(ws.dl.get());
    const size_t MP = size_t(g_.max_rows_padded);
    for (int h = 0; h < H; ++h)
      for (int x = 0; x < R; ++x) {
        head_state(ws.m, h, MP)[x] = m[h * R + x];
        head_state(ws.l, h, MP)[x] = l[h * R + x];
      }
  }

  // Element e of a row in the decode blocks' order (DecodeKernels::split_group).
  int split_index(int e) const {
    const int G = decode_blocks_->split_group;
    if (G == 0) return e;
    int i = e % G, half = G / 2;
    return e - i + (i < half ? 2 * i : 2 * (i - half) + 1);
  }

  // Sequence b's query rows, head by head, widened to f32 in the blocks' order: [H][R][D].
  void pack_decode_queries(Workspace& ws, const char* q, int64_t b) const {
    const int D = int(g_.D), group = g_.group;
    auto* dst = reinterpret_cast<float*>(ws.dq.get());
    for (int64_t h = 0; h < g_.Hkv; ++h)
      for (int64_t i = 0; i < g_.Sq; ++i)
        for (int g = 0; g < group; ++g) {
          size_t src = size_t(((b * g_.Sq + i) * g_.Hq + h * group + g) * D);
          float* row = dst + (size_t(h) * g_.max_rows + i * group + g) * D;
          for (int d = 0; d < D; ++d) {
            size_t from = src + size_t(split_index(d));
            row[d] = bf16_ ? sy_bf16_to_f32(reinterpret_cast<const uint16_t*>(q)[from])
                           : reinterpret_cast<const float*>(q)[from];
          }
        }
  }

  // Output rows from the blocks' order back to natural order, through `scratch` (>= D floats).
  void unsplit_rows(float* o, size_t rows, void* scratch) const {
    if (decode_blocks_->split_group == 0) return;
    const int D = int(g_.D);
    auto* tmp = static_cast<float*>(scratch);
    for (size_t r = 0; r < rows; ++r) {
      float* row = o + r * D;
      for (int d = 0; d < D; ++d) tmp[split_index(d)] = row[d];
      std::memcpy(row, tmp, sizeof(float) * D);
    }
  }

  // This split's share of the rows' key range, in whole blocks: [begin, end).
  std::pair<int64_t, int64_t> split_range(const Rows& r, int64_t split) const {
    int64_t begin = r.jmin, end = r.jmax + 1;
    if (splits_ > 1 && end > begin) {
      int64_t blocks = (end - begin + g_.block - 1) / g_.block;
      int64_t per = (blocks + splits_ - 1) / splits_;
      begin = r.jmin + split * per * g_.block;
      end = std::min<int64_t>(end, begin + per * g_.block);
    }
    return {begin, end};
  }

  // Writes an item's heads: normalised output (one split), or its part for merge_splits.
  void emit(Workspace& ws, const DLTensor* const* out, const float* sinks, float* lse, int64_t b,
            int64_t hkv0, const Rows& r, int64_t qb, int64_t split) {
    const size_t MD = size_t(g_.max_rows) * g_.D, MP = size_t(g_.max_rows_padded);
    for (int h = 0; h < g_.heads; ++h) {
      const float* o = head_state(ws.o, h, MD);
      const float* m = head_state(ws.m, h, MP);
      const float* l = head_state(ws.l, h, MP);
      int64_t hkv = hkv0 + h;
      if (splits_ == 1) {
        finalize(out, sinks, lse, b, hkv, r.i0, r.bq, o, m, l);
        continue;
      }
      size_t part = size_t(((b * g_.Hkv + hkv) * g_.nqb + qb) * splits_ + split);
      std::memcpy(part_ptr(part_o_, part * MD), o, sizeof(float) * size_t(r.M) * g_.D);
      std::memcpy(part_ptr(part_m_, part * g_.max_rows), m, sizeof(float) * r.M);
      std::memcpy(part_ptr(part_l_, part * g_.max_rows), l, sizeof(float) * r.M);
    }
  }

  static float* part_ptr(const std::unique_ptr<char, AlignedFree>& p, size_t offset) {
    return reinterpret_cast<float*>(p.get()) + offset;
  }

  // Normalises rows (sink in the denominator, counted once) and writes o and lse.
  void finalize(const DLTensor* const* out, const float* sinks, float* lse, int64_t b, int64_t hkv,
                int64_t i0, int bq, const float* o, const float* m, const float* l) const {
    const int D = int(g_.D), group = g_.group;
    for (int i = 0; i < bq; ++i)
      for (int g = 0; g < group; ++g) {
        int r = i * group + g;
        int64_t h = hkv * group + g, qi = i0 + i;
        float denom = l[r];
        if (sinks && l[r] > 0.f) denom += std::exp2(sinks[h] * kLog2e - m[r]);
        float inv = denom > 0.f ? 1.f / denom : 0.f;
        size_t dst = size_t(((b * g_.Sq + qi) * g_.Hq + h) * D);
        const float* src = o + size_t(r) * D;
        if (bf16_) {
          uint16_t* od = data_of<uint16_t>(out[0]) + dst;
          for (int d = 0; d < D; ++d) od[d] = sy_f32_to_bf16(src[d] * inv);
        } else {
          float* od = data_of<float>(out[0]) + dst;
          for (int d = 0; d < D; ++d) od[d] = src[d] * inv;
        }
        if (lse)
          lse[(b * g_.Hq + h) * g_.Sq + qi] =
              l[r] > 0.f ? (m[r] + std::log2(l[r])) * kLn2 : kNegInf;
      }
  }

  // Merges the KV splits of every (batch, KV head, query block) with their (max, sum) pairs.
  void merge_splits(const DLTensor* const* out, const float* sinks, float* lse) {
    const int64_t groups = g_.B * g_.Hkv * g_.nqb;
    const bool parallel = groups * splits_ * g_.max_rows * g_.D >= kParallelWork;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_) if (parallel)
    for (int64_t it = 0; it < groups; ++it) {
      Workspace& ws = ws_[omp_get_thread_num()];
      int64_t qb = it % g_.nqb, hkv = (it / g_.nqb) % g_.Hkv, b = it / (g_.nqb * g_.Hkv);
      int64_t i0 = qb * g_.bq;
      int bq = int(std::min<int64_t>(g_.bq, g_.Sq - i0));
      int M = bq * g_.group, D = int(g_.D);
      auto* m = reinterpret_cast<float*>(ws.m.get());
      auto* l = reinterpret_cast<float*>(ws.l.get());
      auto* o = reinterpret_cast<float*>(ws.o.get());
      size_t first = size_t(it) * splits_;
      for (int r = 0; r < M; ++r) {
        float mx = kNegInf;
        for (int s = 0; s < splits_; ++s)
          mx = std::max(mx, part_ptr(part_m_, (first + s) * g_.max_rows)[r]);
        float base = mx == kNegInf ? 0.f : mx, sum = 0.f;
        float* orow = o + size_t(r) * D;
        std::fill(orow, orow + D, 0.f);
        for (int s = 0; s < splits_; ++s) {
          size_t part = first + s;
          float w = std::exp2(part_ptr(part_m_, part * g_.max_rows)[r] - base);
          sum += w * part_ptr(part_l_, part * g_.max_rows)[r];
          const float* po = part_ptr(part_o_, (part * g_.max_rows + r) * D);
          for (int d = 0; d < D; ++d) orow[d] += w * po[d];
        }
        m[r] = mx;
        l[r] = sum;
      }
      finalize(out, sinks, lse, b, hkv, i0, bq, o, m, l);
    }
  }

  int threads_;
  bool bf16_ = false;
  size_t esize_ = 4;
  Geometry g_{};
  Semantics sem_;
  const BlockKernels* blocks_ = nullptr;
  const DecodeKernels* decode_blocks_ = nullptr;
  std::vector<Workspace> ws_;
  std::unique_ptr<char, AlignedFree> part_o_, part_m_, part_l_;
  std::vector<int64_t> kv_len_;  // per sequence, refilled by each run (no allocation there)
  int splits_ = 1;               // KV splits this run, <= g_.nsplit
};

}  // namespace

std::unique_ptr<CpuKernel> make_attention(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  if (op.int_attr(SY_ATTR_PAGED, 0)) return make_paged_attention(op, ctx);
  return std::make_unique<AttentionKernel>(op, ctx);
}

}  // namespace sy::cpu
