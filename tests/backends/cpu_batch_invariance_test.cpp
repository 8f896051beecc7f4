// cpu_onednn's batch invariance (docs/cpu-tiers.md), kernel by kernel on every tier: a row's
// output is bit-identical whatever else is in the execute and wherever the row sits.
//   - matmul with b [N, K] (rowdot.hpp), every weight dtype, f32 and bf16 activations: the rows
//     of one execute of 70 rows (the panel path, prepared for up to 96: varlen) against each row
//     run alone (the decode path) and against a run of 5 rows starting elsewhere;
//   - the paged attention: one sequence's rows alone, then in a step with two other sequences
//     before it (its queries at other offsets of q), with GQA, sinks, a window, softcap and lse,
//     in f32 and bf16; and a decode row of it against the same row inside a prefill.
// That the values are right is conformance's (against the reference plugin) and cpu_quant's.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>

#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "support/cpu_tiers.hpp"
#include "support/expected.hpp"
#include "support/host_tensor.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using test::HostTensor;

class BatchInvariance : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    auto out = load_plugin(test::kPluginDir / "cpu_onednn.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = out.plugin.release();
  }
  static void TearDownTestSuite() { delete plugin_; }
  void SetUp() override {
    SY_SKIP_UNLESS_CPU_TIER(GetParam());
    tier_.emplace(GetParam());
  }

  // The op's kernel: `name`, or the first of its op that is not the fused decode block.
  static std::unique_ptr<PreparedKernel> prepare(const OpDesc& op, const std::string& name = "") {
    for (size_t i = 0; i < plugin_->kernels().size(); ++i)
      if (plugin_->kernels()[i].op == op.op && plugin_->kernels()[i].family != "fused_decode" &&
          (name.empty() || plugin_->kernels()[i].kernel == name)) {
        auto k = prepare_kernel(*plugin_, i, 0, op);
        EXPECT_TRUE(k) << test::why(k);
        return k ? std::move(*k) : nullptr;
      }
    return nullptr;
  }
  static void run(PreparedKernel& k, std::vector<DLTensor*> in, std::vector<DLTensor*> out) {
    std::vector<const DLTensor*> ins(in.begin(), in.end()), outs(out.begin(), out.end());
    auto err = k.execute(ins, outs);
    ASSERT_FALSE(err) << test::why(err);
  }

  static Plugin* plugin_;
  std::optional<test::ScopedCpuTier> tier_;
};
Plugin* BatchInvariance::plugin_ = nullptr;

// The fixture's helpers, for the test bodies shared as free functions.
struct BatchInvarianceAccess : BatchInvariance {
  using BatchInvariance::prepare;
  using BatchInvariance::run;
};

// Random weights: floats in [-1, 1], or block bytes with sane half scales.
void fill_weights(HostTensor& w, std::mt19937& rng) {
  std::uniform_real_distribution<double> uni(-1, 1);
  if (!sy_dtype_is_blocked(w.dtype())) {
    std::vector<double> v(size_t(w.elements()));
    for (double& x : v) x = uni(rng);
    w.set(v);
    return;
  }
  auto* b = static_cast<uint8_t*>(w.bytes());
  for (size_t i = 0; i < w.size_bytes(); ++i) b[i] = uint8_t(rng());
  const size_t bb = sy_dtype_block_bytes(w.dtype());
  auto half = [&](size_t at, float v) {
    const uint16_t h = test::to_f16(v);
    std::memcpy(b + at, &h, 2);
  };
  for (size_t at = 0; at + bb <= w.size_bytes(); at += bb) {
    const float d = 0.004f * float(1 + rng() % 5);
    if (w.dtype() == SY_DTYPE_Q6_K)
      half(at + 208, d * 0.1f);
    else if (w.dtype() == SY_DTYPE_Q3_K)
      half(at + 108, d * 0.1f);
    else if (w.dtype() == SY_DTYPE_Q2_K)
      half(at + 80, d), half(at + 82, d * 0.5f);
    else if (w.dtype() == SY_DTYPE_Q4_1 || w.dtype() == SY_DTYPE_Q5_1 ||
             w.dtype() == SY_DTYPE_Q4_K || w.dtype() == SY_DTYPE_Q5_K)
      half(at, d), half(at + 2, d * 0.5f);
    else
      half(at, d);
  }
}

// Rows [first, first + count) of a row-major [rows, width] tensor's bytes.
std::vector<uint8_t> rows_of(HostTensor& t, int64_t first, int64_t count, int64_t width) {
  const size_t row = size_t(width) * sy_dtype_size(t.dtype());
  const auto* p = static_cast<const uint8_t*>(t.bytes()) + size_t(first) * row;
  return std::vector<uint8_t>(p, p + size_t(count) * row);
}

// The rows of one execute of 70 against each alone and a step of 5 elsewhere, for `kernel`.
void matmul_rows_alone_and_together(const std::string& kernel,
                                    const std::vector<sy_dtype>& weights) {
  const int64_t kBound = 96, kRows = 70, K = 512, N = 40;
  std::mt19937 rng(5);
  for (sy_dtype act : {SY_DTYPE_F32, SY_DTYPE_BF16})
    for (sy_dtype wt : weights) {
      if (!sy_dtype_is_blocked(wt) && wt != act) continue;  // float weights are x's dtype
      SCOPED_TRACE(kernel + ": x " + sy_dtype_name(act) + ", w " + sy_dtype_name(wt));
      OpDesc op;
      op.op = SY_OP_MATMUL;
      op.inputs = {{act, {kBound, K}, SY_MEMORY_HOST, 1u}, {wt, {N, K}, SY_MEMORY_HOST}};
      op.outputs = {{act, {kBound, N}, SY_MEMORY_HOST, 1u}};
      op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
      auto k = BatchInvarianceAccess::prepare(op, kernel);
      ASSERT_TRUE(k);
      HostTensor x(act, {kRows, K}), w(wt, {N, K}), y(act, {kRows, N});
      fill_weights(x, rng);
      fill_weights(w, rng);
      BatchInvarianceAccess::run(*k, {x.dl(), w.dl()}, {y.dl()});
      for (int64_t r : {int64_t(0), int64_t(1), int64_t(33), kRows - 1}) {  // alone
        HostTensor x1(act, {1, K}), y1(act, {1, N});
        std::memcpy(x1.bytes(), rows_of(x, r, 1, K).data(), x1.size_bytes());
        BatchInvarianceAccess::run(*k, {x1.dl(), w.dl()}, {y1.dl()});
        EXPECT_EQ(rows_of(y1, 0, 1, N), rows_of(y, r, 1, N)) << "row " << r << " alone";
      }
      HostTensor x5(act, {5, K}), y5(act, {5, N});  // rows 61..65, a block of 5 elsewhere
      std::memcpy(x5.bytes(), rows_of(x, 61, 5, K).data(), x5.size_bytes());
      BatchInvarianceAccess::run(*k, {x5.dl(), w.dl()}, {y5.dl()});
      EXPECT_EQ(rows_of(y5, 0, 5, N), rows_of(y, 61, 5, N)) << "rows 61..65 as a step of 5";
    }
}

TEST_P(BatchInvariance, MatmulRowsDoNotDependOnTheirCompany) {
  matmul_rows_alone_and_together(
      "matmul", {SY_DTYPE_F32, SY_DTYPE_BF16, SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, SY_DTYPE_Q4_1,
                 SY_DTYPE_Q5_0, SY_DTYPE_Q5_1, SY_DTYPE_IQ4_NL, SY_DTYPE_IQ4_XS, SY_DTYPE_Q2_K,
                 SY_DTYPE_Q3_K, SY_DTYPE_Q4_K, SY_DTYPE_Q5_K, SY_DTYPE_Q6_K});
}

// The activation_q16 matmul (--numerics auto, the default): 70 rows take the amx tier's tiles, a
// row alone the vnni tiers' 8-row form, 5 rows the 4-row form; every path shares one arithmetic per
// output (rowdot_q8.hpp).
TEST_P(BatchInvariance, MatmulQ16RowsDoNotDependOnTheirCompany) {
  matmul_rows_alone_and_together(
      "matmul_q16",
      {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, SY_DTYPE_Q4_1, SY_DTYPE_Q5_0, SY_DTYPE_Q5_1, SY_DTYPE_Q4_K,
       SY_DTYPE_Q5_K, SY_DTYPE_Q6_K, SY_DTYPE_IQ4_NL, SY_DTYPE_IQ4_XS});
}

// The paged attention of sequences packed along T. Sequence `lens[s]` keys long, its last
// `q_lens[s]` the step's queries; blocks of 4 rows in a pool of 24, numbered backwards.
struct PagedStep {
  std::vector<int32_t> q_lens, lens;
};

struct PagedSetup {
  sy_dtype dt;
  int64_t Hq = 4, Hkv = 2, D = 64;
  int64_t bound_T = 48, bound_S = 4, NB = 24, BS = 4, MB = 8;
  int64_t window = 13;
};

OpDesc paged_op(const PagedSetup& p) {
  OpDesc op;
  op.op = SY_OP_ATTENTION;
  op.inputs = {{p.dt, {1, p.bound_T, p.Hq, p.D}, SY_MEMORY_HOST, 2u},
               {p.dt, {p.NB, p.BS, p.Hkv, p.D}, SY_MEMORY_HOST},
               {p.dt, {p.NB, p.BS, p.Hkv, p.D}, SY_MEMORY_HOST},
               {SY_DTYPE_F32, {p.Hq}, SY_MEMORY_HOST},
               {SY_DTYPE_I32, {p.bound_S + 1}, SY_MEMORY_HOST, 1u},
               {SY_DTYPE_I32, {p.bound_S}, SY_MEMORY_HOST, 1u},
               {SY_DTYPE_I32, {p.bound_S, p.MB}, SY_MEMORY_HOST, 1u}};
  op.outputs = {{p.dt, {1, p.bound_T, p.Hq, p.D}, SY_MEMORY_HOST, 2u},
                {SY_DTYPE_F32, {1, p.Hq, p.bound_T}, SY_MEMORY_HOST, 4u}};
  op.set(SY_ATTR_PAGED, int64_t{1});
  op.set(SY_ATTR_CAUSAL, int64_t{1});
  op.set(SY_ATTR_WINDOW_LEFT, p.window);
  op.set(SY_ATTR_SOFTCAP, 30.0);
  return op;
}

// Runs one step; returns o's and lse's values of sequence `which`'s rows. Every sequence s uses
// blocks {s·MB, …} of the pool, so the pool (filled once) holds each sequence's keys.
std::pair<std::vector<uint8_t>, std::vector<float>> paged_run(PreparedKernel& k,
                                                              const PagedSetup& p,
                                                              HostTensor& q_all, HostTensor& k_pool,
                                                              HostTensor& v_pool, HostTensor& sinks,
                                                              const std::vector<int>& seqs,
                                                              const PagedStep& step, int which) {
  int64_t T = 0;
  for (int s : seqs) T += step.q_lens[size_t(s)];
  const int64_t S = int64_t(seqs.size());
  HostTensor q(p.dt, {1, T, p.Hq, p.D}), starts(SY_DTYPE_I32, {S + 1}), lens(SY_DTYPE_I32, {S}),
      table(SY_DTYPE_I32, {S, p.MB}), o(p.dt, {1, T, p.Hq, p.D}), lse(SY_DTYPE_F32, {1, p.Hq, T});
  const size_t row = size_t(p.Hq * p.D) * sy_dtype_size(p.dt);
  auto* qs = static_cast<int32_t*>(starts.bytes());
  int64_t at = 0, mine = 0;
  qs[0] = 0;
  for (int64_t i = 0; i < S; ++i) {
    const int s = seqs[size_t(i)];
    // Sequence s's queries are rows [s·16, s·16 + q_len) of q_all.
    std::memcpy(static_cast<uint8_t*>(q.bytes()) + size_t(at) * row,
                static_cast<uint8_t*>(q_all.bytes()) + size_t(s * 16) * row,
                size_t(step.q_lens[size_t(s)]) * row);
    if (s == which) mine = at;
    at += step.q_lens[size_t(s)];
    qs[i + 1] = int32_t(at);
    static_cast<int32_t*>(lens.bytes())[i] = step.lens[size_t(s)];
    for (int64_t b = 0; b < p.MB; ++b)
      static_cast<int32_t*>(table.bytes())[i * p.MB + b] = int32_t(p.NB - 1 - (s * p.MB + b));
  }
  std::vector<DLTensor*> in = {q.dl(),      k_pool.dl(), v_pool.dl(), sinks.dl(),
                               starts.dl(), lens.dl(),   table.dl()};
  std::vector<const DLTensor*> ins(in.begin(), in.end());
  std::vector<const DLTensor*> outs = {o.dl(), lse.dl()};
  auto err = k.execute(ins, outs);
  EXPECT_FALSE(err) << test::why(err);
  const int64_t n = step.q_lens[size_t(which)];
  std::vector<uint8_t> out(static_cast<uint8_t*>(o.bytes()) + size_t(mine) * row,
                           static_cast<uint8_t*>(o.bytes()) + size_t(mine + n) * row);
  std::vector<float> l;
  for (int64_t h = 0; h < p.Hq; ++h)
    for (int64_t t = 0; t < n; ++t) l.push_back(static_cast<float*>(lse.bytes())[h * T + mine + t]);
  return {out, l};
}

TEST_P(BatchInvariance, PagedAttentionRowsDoNotDependOnTheirCompany) {
  std::mt19937 rng(9);
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16}) {
    SCOPED_TRACE(sy_dtype_name(dt));
    PagedSetup p{dt};
    auto k = prepare(paged_op(p));
    ASSERT_TRUE(k);
    HostTensor q_all(dt, {1, 48, p.Hq, p.D}), k_pool(dt, {p.NB, p.BS, p.Hkv, p.D}),
        v_pool(dt, {p.NB, p.BS, p.Hkv, p.D}), sinks(SY_DTYPE_F32, {p.Hq});
    for (HostTensor* t : {&q_all, &k_pool, &v_pool, &sinks}) fill_weights(*t, rng);
    // Sequence 2: 23 keys, of which the last 11 are this step's queries (a prefill chunk after
    // a cached prefix); sequences 0 and 1 other prompts and a decode row.
    const PagedStep step{{9, 1, 11}, {17, 30, 23}};
    const auto alone = paged_run(*k, p, q_all, k_pool, v_pool, sinks, {2}, step, 2);
    const auto batched = paged_run(*k, p, q_all, k_pool, v_pool, sinks, {0, 1, 2}, step, 2);
    EXPECT_EQ(alone.first, batched.first) << "o of sequence 2: alone vs after two others";
    EXPECT_EQ(alone.second, batched.second) << "lse of sequence 2";
    // Its last query as a decode row (the others of the chunk already cached) is the same row.
    const PagedStep decode{{9, 1, 1}, {17, 30, 23}};
    HostTensor shifted(dt, {1, 48, p.Hq, p.D});  // row 2·16 + 10 moved to 2·16
    const size_t row = size_t(p.Hq * p.D) * sy_dtype_size(dt);
    std::memcpy(shifted.bytes(), q_all.bytes(), shifted.size_bytes());
    std::memcpy(static_cast<uint8_t*>(shifted.bytes()) + 32 * row,
                static_cast<uint8_t*>(q_all.bytes()) + 42 * row, row);
    const auto last = paged_run(*k, p, shifted, k_pool, v_pool, sinks, {0, 2}, decode, 2);
    EXPECT_EQ(std::vector<uint8_t>(alone.first.end() - long(row), alone.first.end()), last.first)
        << "the chunk's last row vs the same query decoded";
    for (int64_t h = 0; h < p.Hq; ++h)
      EXPECT_EQ(alone.second[size_t(h * 11 + 10)], last.second[size_t(h)]) << "lse, head " << h;
  }
}

// Sequences longer than a key chunk (attention_paged.hpp: 256 keys), no window: a decode row
// with few others is split across threads by key chunk, its partials folded afterwards; in a
// fuller step, or as the last row of a prefill chunk, one thread folds its chunks in turn. The
// same bits every way.
TEST_P(BatchInvariance, PagedAttentionRowsSplitByKeyChunkAreTheRowsWhole) {
  std::mt19937 rng(11);
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16}) {
    SCOPED_TRACE(sy_dtype_name(dt));
    PagedSetup p{dt};
    p.BS = 16, p.MB = 40, p.NB = 4 * 40, p.window = -1;  // up to 640 keys a sequence
    auto k = prepare(paged_op(p));
    ASSERT_TRUE(k);
    HostTensor q_all(dt, {1, 64, p.Hq, p.D}),  // 16 rows for each of 4 sequences
        k_pool(dt, {p.NB, p.BS, p.Hkv, p.D}), v_pool(dt, {p.NB, p.BS, p.Hkv, p.D}),
        sinks(SY_DTYPE_F32, {p.Hq});
    for (HostTensor* t : {&q_all, &k_pool, &v_pool, &sinks}) fill_weights(*t, rng);
    // Sequence 2: 600 keys (three chunks, the last partial), its last 11 this step's queries.
    const PagedStep chunk{{9, 1, 11, 1}, {300, 513, 600, 257}};
    const auto prefill = paged_run(*k, p, q_all, k_pool, v_pool, sinks, {2}, chunk, 2);
    const PagedStep decode{{1, 1, 1, 1}, {300, 513, 600, 257}};
    HostTensor shifted(dt, {1, 64, p.Hq, p.D});  // row 2·16 + 10 moved to 2·16
    const size_t row = size_t(p.Hq * p.D) * sy_dtype_size(dt);
    std::memcpy(shifted.bytes(), q_all.bytes(), shifted.size_bytes());
    std::memcpy(static_cast<uint8_t*>(shifted.bytes()) + 32 * row,
                static_cast<uint8_t*>(q_all.bytes()) + 42 * row, row);
    const auto alone = paged_run(*k, p, shifted, k_pool, v_pool, sinks, {2}, decode, 2);
    const auto full = paged_run(*k, p, shifted, k_pool, v_pool, sinks, {0, 1, 2, 3}, decode, 2);
    EXPECT_EQ(alone.first, full.first) << "o of the decode row: alone vs in a full step";
    EXPECT_EQ(alone.second, full.second) << "lse of the decode row";
    EXPECT_EQ(std::vector<uint8_t>(prefill.first.end() - long(row), prefill.first.end()),
              alone.first)
        << "the prefill chunk's last row vs the same query decoded alone";
    for (int64_t h = 0; h < p.Hq; ++h)
      EXPECT_EQ(prefill.second[size_t(h * 11 + 10)], alone.second[size_t(h)]) << "lse, head " << h;
  }
}

// A decode row of a sequence of 34 key chunks, alone in its step: split by chunk, each item
// reading the key rows of every KV head (attention_paged.cpp takes them together where the step
// has 4 items a thread, here at up to 8 threads); as the last row of a prefill chunk, an item
// per KV head folds the chunks in turn. The same bits both ways.
TEST_P(BatchInvariance, PagedAttentionDecodeRowReadingEveryKvHeadIsTheRowWhole) {
  std::mt19937 rng(13);
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16}) {
    SCOPED_TRACE(sy_dtype_name(dt));
    PagedSetup p{dt};
    p.BS = 16, p.MB = 530, p.NB = 530, p.bound_S = 1, p.window = -1;  // up to 8480 keys
    auto k = prepare(paged_op(p));
    ASSERT_TRUE(k);
    HostTensor q_all(dt, {1, 16, p.Hq, p.D}), k_pool(dt, {p.NB, p.BS, p.Hkv, p.D}),
        v_pool(dt, {p.NB, p.BS, p.Hkv, p.D}), sinks(SY_DTYPE_F32, {p.Hq});
    for (HostTensor* t : {&q_all, &k_pool, &v_pool, &sinks}) fill_weights(*t, rng);
    const PagedStep chunk{{11}, {8450}}, decode{{1}, {8450}};
    const auto prefill = paged_run(*k, p, q_all, k_pool, v_pool, sinks, {0}, chunk, 0);
    HostTensor shifted(dt, {1, 16, p.Hq, p.D});  // row 10 moved to row 0
    const size_t row = size_t(p.Hq * p.D) * sy_dtype_size(dt);
    std::memcpy(shifted.bytes(), q_all.bytes(), shifted.size_bytes());
    std::memcpy(shifted.bytes(), static_cast<uint8_t*>(q_all.bytes()) + 10 * row, row);
    const auto alone = paged_run(*k, p, shifted, k_pool, v_pool, sinks, {0}, decode, 0);
    EXPECT_EQ(std::vector<uint8_t>(prefill.first.end() - long(row), prefill.first.end()),
              alone.first)
        << "the prefill chunk's last row vs the same query decoded alone";
    for (int64_t h = 0; h < p.Hq; ++h)
      EXPECT_EQ(prefill.second[size_t(h * 11 + 10)], alone.second[size_t(h)]) << "lse, head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiers, BatchInvariance, ::testing::ValuesIn(test::cpu_tiers()),
                         test::tier_test_name);

}  // namespace
}  // namespace sy
