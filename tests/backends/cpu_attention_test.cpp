// cpu_onednn sdpa attention against the double-precision reference, over a grid of dtypes,
// masks, GQA ratios, sinks, softcap, head dims and lengths, through the real plugin's ABI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "support/attention_reference.hpp"
#include "support/cpu_tiers.hpp"
#include "support/expected.hpp"
#include "support/host_tensor.hpp"
#include "support/paged_attention_case.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using test::AttentionProblem;
using test::HostTensor;

// Tolerances against the double reference, per dtype. f32: the kernel's exp2 polynomial
// (~1e-7 relative) and f32 accumulation over at most a few hundred keys. bf16: inputs are
// exact in both, but probabilities are rounded to bf16 (2^-9 relative) before P·V and the
// output is stored as bf16 (2^-9 relative of |o| ≤ 1).
struct Tolerance {
  double out, lse;
};
constexpr Tolerance kF32Tol{2e-5, 2e-5};
constexpr Tolerance kBf16Tol{1.2e-2, 1e-4};

struct Case {
  sy_dtype dtype = SY_DTYPE_F32;
  int64_t B = 1, Sq = 8, Skv = 8, Hq = 4, Hkv = 4, D = 64;
  bool causal = false, sinks = false, lse = true;
  int64_t window = -1;
  double softcap = 0, scale = 0;
  std::vector<int64_t> kv_len;  // empty: no kv_len input

  std::string name() const {
    std::ostringstream s;
    s << sy_dtype_name(dtype) << "_B" << B << "_Sq" << Sq << "_Skv" << Skv << "_H" << Hq << "x"
      << Hkv << "_D" << D << (causal ? "_causal" : "") << (window >= 0 ? "_win" : "")
      << (sinks ? "_sinks" : "") << (softcap > 0 ? "_softcap" : "") << (lse ? "_lse" : "")
      << (kv_len.empty() ? "" : "_kvlen");
    return s.str();
  }
};

class CpuAttention : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto out = load_plugin(test::kPluginDir / "cpu_onednn.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = out.plugin.release();
  }
  static void TearDownTestSuite() { delete plugin_; }

  static OpDesc op_for(const Case& c) {
    OpDesc op;
    op.op = SY_OP_ATTENTION;
    op.inputs = {{c.dtype, {c.B, c.Sq, c.Hq, c.D}, SY_MEMORY_HOST},
                 {c.dtype, {c.B, c.Skv, c.Hkv, c.D}, SY_MEMORY_HOST},
                 {c.dtype, {c.B, c.Skv, c.Hkv, c.D}, SY_MEMORY_HOST}};
    if (c.sinks) op.inputs.push_back({SY_DTYPE_F32, {c.Hq}, SY_MEMORY_HOST});
    if (!c.kv_len.empty()) {
      op.inputs.push_back({SY_DTYPE_I64, {c.B}, SY_MEMORY_HOST});
      op.set(SY_ATTR_KV_LEN_INPUT, int64_t{1});
    }
    op.outputs = {{c.dtype, {c.B, c.Sq, c.Hq, c.D}, SY_MEMORY_HOST}};
    if (c.lse) op.outputs.push_back({SY_DTYPE_F32, {c.B, c.Hq, c.Sq}, SY_MEMORY_HOST});
    if (c.causal) op.set(SY_ATTR_CAUSAL, int64_t{1});
    if (c.window >= 0) op.set(SY_ATTR_WINDOW_LEFT, c.window);
    if (c.softcap > 0) op.set(SY_ATTR_SOFTCAP, c.softcap);
    if (c.scale != 0) op.set(SY_ATTR_SCALE, c.scale);
    return op;
  }

  // Runs the plugin's kernel on `p`'s data (converted to the case's dtype, and the reference
  // takes the converted values) and returns o and lse.
  static test::AttentionResult run(const Case& c, AttentionProblem& p) {
    OpDesc op = op_for(c);
    size_t kernel = 0;
    auto prepared = prepare_kernel(*plugin_, kernel, 0, op);
    EXPECT_TRUE(prepared) << test::why(prepared);
    if (!prepared) return {};
    HostTensor q(c.dtype, op.inputs[0].shape), k(c.dtype, op.inputs[1].shape),
        v(c.dtype, op.inputs[2].shape), sinks(SY_DTYPE_F32, {c.Hq}), kv(SY_DTYPE_I64, {c.B}),
        o(c.dtype, op.outputs[0].shape), lse(SY_DTYPE_F32, {c.B, c.Hq, c.Sq});
    p.q = q.set(p.q);
    p.k = k.set(p.k);
    p.v = v.set(p.v);
    std::vector<const DLTensor*> ins = {q.dl(), k.dl(), v.dl()}, outs = {o.dl()};
    if (c.sinks) {
      p.sinks = sinks.set(p.sinks);
      ins.push_back(sinks.dl());
    }
    if (!c.kv_len.empty()) {
      kv.set(std::vector<double>(c.kv_len.begin(), c.kv_len.end()));
      ins.push_back(kv.dl());
    }
    if (c.lse) outs.push_back(lse.dl());
    auto err = (*prepared)->execute(ins, outs);
    EXPECT_FALSE(err) << test::why(err);
    return {o.get(), c.lse ? lse.get() : std::vector<double>{}};
  }

  static AttentionProblem problem(const Case& c, unsigned seed) {
    std::mt19937 rng(seed);
    AttentionProblem p{c.B, c.Sq, c.Skv, c.Hq, c.Hkv, c.D};
    p.causal = c.causal;
    p.window = c.window;
    p.softcap = c.softcap;
    p.scale = c.scale;
    p.q = test::uniform(size_t(c.B * c.Sq * c.Hq * c.D), rng, -2, 2);
    p.k = test::uniform(size_t(c.B * c.Skv * c.Hkv * c.D), rng, -2, 2);
    p.v = test::uniform(size_t(c.B * c.Skv * c.Hkv * c.D), rng);
    if (c.sinks) p.sinks = test::uniform(size_t(c.Hq), rng, -1, 3);
    p.kv_len = c.kv_len;
    return p;
  }

  static void expect_matches(const Case& c, unsigned seed = 1) {
    AttentionProblem p = problem(c, seed);
    test::AttentionResult got = run(c, p);
    test::AttentionResult want = test::reference_attention(p);
    Tolerance tol = c.dtype == SY_DTYPE_F32 ? kF32Tol : kBf16Tol;
    ASSERT_EQ(got.o.size(), want.o.size()) << c.name();
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < want.o.size(); ++i)
      if (std::abs(got.o[i] - want.o[i]) > worst) worst = std::abs(got.o[i] - want.o[i]), at = i;
    EXPECT_LE(worst, tol.out) << c.name() << " o[" << at << "] " << got.o[at] << " vs "
                              << want.o[at];
    if (!c.lse) return;
    for (size_t i = 0; i < want.lse.size(); ++i) {
      if (std::isinf(want.lse[i])) {
        EXPECT_TRUE(std::isinf(got.lse[i]) && got.lse[i] < 0) << c.name() << " lse[" << i << "]";
        continue;
      }
      ASSERT_NEAR(got.lse[i], want.lse[i], tol.lse * std::max(1.0, std::abs(want.lse[i])))
          << c.name() << " lse[" << i << "]";
    }
  }

  static Plugin* plugin_;
};
Plugin* CpuAttention::plugin_ = nullptr;

// The grid: every dtype × head dim × length pair × GQA ratio, with the semantic features
// rotated through so that each appears on and off, alone and together, across the grid.
std::vector<Case> grid() {
  struct Lengths {
    int64_t sq, skv;
  };
  const Lengths lengths[] = {{1, 1}, {1, 77}, {13, 13}, {5, 100}, {50, 50}, {130, 130}, {37, 200}};
  const int64_t heads[][2] = {{4, 4}, {8, 2}, {8, 1}};  // GQA ratio 1, 4, 8
  std::vector<Case> out;
  int k = 0;
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16})
    for (int64_t d : {64, 80, 128, 256})
      for (const auto& len : lengths)
        for (const auto& h : heads) {
          if (d == 256 && len.skv > 100) continue;  // keeps the reference's cost in check
          Case c;
          c.dtype = dt;
          c.D = d;
          c.Sq = len.sq;
          c.Skv = len.skv;
          c.Hq = h[0];
          c.Hkv = h[1];
          int bits = k++;
          c.causal = bits & 1;
          c.window = (bits >> 1) & 1 ? 17 : -1;
          c.sinks = (bits >> 2) & 1;
          c.softcap = (bits >> 3) & 1 ? 20.0 : 0.0;
          c.B = (bits % 5 == 0) ? 3 : 1;
          c.lse = (bits % 7) != 3;
          c.scale = (bits % 11 == 5) ? 0.3 : 0.0;
          out.push_back(c);
        }
  return out;
}

// One sequence, one KV head: the kernel splits the KV range across threads and merges the
// splits with their LSEs.
TEST_F(CpuAttention, DecodeWithKvSplitsMatches) {
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16}) {
    Case c;
    c.dtype = dt;
    c.Sq = 1;
    c.Skv = 2000;
    c.Hq = 8;
    c.Hkv = 1;
    c.D = 128;
    c.causal = true;
    c.sinks = true;
    expect_matches(c);
  }
}

TEST_F(CpuAttention, KvLenInputMasksTheCacheTail) {
  Case c;
  c.B = 3;
  c.Sq = 4;
  c.Skv = 100;
  c.Hq = 8;
  c.Hkv = 2;
  c.causal = true;
  c.kv_len = {60, 100, 4};
  expect_matches(c);
  c.kv_len = {0, 10, 99};  // an empty cache gives o = 0 and lse = -inf
  c.Sq = 1;
  expect_matches(c);
}

TEST_F(CpuAttention, KvLenBeyondTheCacheIsInvalidArgument) {
  Case c;
  c.B = 1;
  c.kv_len = {9};
  OpDesc op = op_for(c);
  auto prepared = prepare_kernel(*plugin_, 0, 0, op);
  ASSERT_TRUE(prepared) << test::why(prepared);
  HostTensor q(c.dtype, op.inputs[0].shape), k(c.dtype, op.inputs[1].shape),
      v(c.dtype, op.inputs[2].shape), kv(SY_DTYPE_I64, {1}), o(c.dtype, op.outputs[0].shape),
      lse(SY_DTYPE_F32, op.outputs[1].shape);
  kv.set({9});
  std::vector<const DLTensor*> ins = {q.dl(), k.dl(), v.dl(), kv.dl()}, outs = {o.dl(), lse.dl()};
  auto err = (*prepared)->execute(ins, outs);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->status, SY_STATUS_INVALID_ARGUMENT) << err->what();
  EXPECT_EQ(err->message.rfind("INVALID_ARGUMENT", 0), 0u) << err->what();
  EXPECT_NE(err->message.find("kv_len[0] = 9"), std::string::npos) << err->what();
}

// LSE is what lets two halves of the KV range be merged into the whole.
TEST_F(CpuAttention, LseMergesTwoHalvesIntoTheFullResult) {
  Case full;
  full.Sq = 6;
  full.Skv = 90;
  full.Hq = 8;
  full.Hkv = 2;
  AttentionProblem p = problem(full, 7);
  test::AttentionResult whole = run(full, p);

  Case half = full;
  half.Skv = 45;
  test::AttentionResult parts[2];
  for (int s = 0; s < 2; ++s) {
    AttentionProblem h = p;
    h.Skv = 45;
    h.k.assign(p.k.begin() + s * 45 * 2 * 64, p.k.begin() + (s + 1) * 45 * 2 * 64);
    h.v.assign(p.v.begin() + s * 45 * 2 * 64, p.v.begin() + (s + 1) * 45 * 2 * 64);
    parts[s] = run(half, h);
  }
  for (int64_t h = 0; h < 8; ++h)
    for (int64_t i = 0; i < 6; ++i) {
      double l0 = parts[0].lse[h * 6 + i], l1 = parts[1].lse[h * 6 + i];
      double lse = std::max(l0, l1) + std::log1p(std::exp(-std::abs(l0 - l1)));
      EXPECT_NEAR(lse, whole.lse[h * 6 + i], 1e-5);
      for (int64_t d = 0; d < 64; ++d) {
        size_t at = size_t((i * 8 + h) * 64 + d);
        double merged = parts[0].o[at] * std::exp(l0 - lse) + parts[1].o[at] * std::exp(l1 - lse);
        ASSERT_NEAR(merged, whole.o[at], 1e-5);
      }
    }
}

// A kernel with LSE serves sinks: o' = o · exp(lse − logaddexp(lse, s)).
TEST_F(CpuAttention, SinkFromLseEqualsNativeSinks) {
  Case plain;
  plain.Sq = 9;
  plain.Skv = 31;
  plain.causal = true;
  Case native = plain;
  native.sinks = true;
  AttentionProblem p = problem(native, 3);
  test::AttentionResult with_sinks = run(native, p);
  test::AttentionResult without = run(plain, p);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t i = 0; i < 9; ++i) {
      double lse = without.lse[h * 9 + i], s = p.sinks[h];
      double both = std::max(lse, s) + std::log1p(std::exp(-std::abs(lse - s)));
      for (int64_t d = 0; d < 64; ++d) {
        size_t at = size_t((i * 4 + h) * 64 + d);
        ASSERT_NEAR(without.o[at] * std::exp(lse - both), with_sinks.o[at], 1e-5);
      }
      EXPECT_NEAR(with_sinks.lse[h * 9 + i], lse, 1e-6);  // LSE excludes the sink
    }
}

// The planner's sinks_via_lse adaptation, on the kernels it uses: attention without sinks but
// with LSE, then the plugin's sinks_from_lse kernel rescaling o in place, equals the same
// attention with native sinks and the double reference with sinks — f32 and bf16 outputs, GQA,
// a window, a batch whose second sequence has rows with no key (o stays 0, lse = -inf).
TEST_F(CpuAttention, SinksFromLseKernelEqualsNativeSinks) {
  size_t sinks_kernel = 0;
  while (plugin_->kernels()[sinks_kernel].op != SY_OP_SINKS_FROM_LSE) ++sinks_kernel;
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16}) {
    Case plain;
    plain.dtype = dt;
    plain.B = 2, plain.Sq = 9, plain.Skv = 31, plain.Hq = 8, plain.Hkv = 2;
    plain.causal = true;
    plain.window = 12;
    plain.kv_len = {31, 5};
    Case native = plain;
    native.sinks = true;
    SCOPED_TRACE(native.name());
    AttentionProblem p = problem(native, 5);
    test::AttentionResult with_sinks = run(native, p);  // stores p's inputs as the kernel saw them
    test::AttentionResult want = test::reference_attention(p);
    test::AttentionResult without = run(plain, p);

    HostTensor o(dt, {plain.B, plain.Sq, plain.Hq, plain.D}), sinks(SY_DTYPE_F32, {plain.Hq}),
        lse(SY_DTYPE_F32, {plain.B, plain.Hq, plain.Sq});
    o.set(without.o);
    lse.set(without.lse);
    sinks.set(p.sinks);
    OpDesc op;
    op.op = SY_OP_SINKS_FROM_LSE;
    op.inputs = {lse.desc(), sinks.desc()};
    op.outputs = {o.desc()};
    auto k = prepare_kernel(*plugin_, sinks_kernel, 0, op);
    ASSERT_TRUE(k) << test::why(k);
    std::vector<const DLTensor*> ins = {lse.dl(), sinks.dl()}, outs = {o.dl()};
    auto err = (*k)->execute(ins, outs);
    ASSERT_FALSE(err) << test::why(err);

    const Tolerance tol = dt == SY_DTYPE_F32 ? kF32Tol : kBf16Tol;
    std::vector<double> got = o.get();
    double worst_native = 0, worst_reference = 0, sink_effect = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst_native = std::max(worst_native, std::abs(got[i] - with_sinks.o[i]));
      worst_reference = std::max(worst_reference, std::abs(got[i] - want.o[i]));
      sink_effect = std::max(sink_effect, std::abs(without.o[i] - want.o[i]));
    }
    EXPECT_LE(worst_native, tol.out);
    EXPECT_LE(worst_reference, tol.out);
    EXPECT_GT(sink_effect, 20 * tol.out) << "the sinks must change o for this test to mean much";
    // Rows of sequence 1 before its first key: nothing to attend to, o stays exactly 0.
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t x = 0; x < plain.Hq * plain.D; ++x)
        ASSERT_EQ(got[size_t(((plain.Sq + i) * plain.Hq) * plain.D + x)], 0.0) << i;
  }
}

// Every tier's blocks (cpu_tier.hpp) meet the same reference: the whole grid, every feature
// at once, and a decode that splits the keys across threads.
class CpuAttentionTier : public CpuAttention, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    SY_SKIP_UNLESS_CPU_TIER(GetParam());
    tier_.emplace(GetParam());
  }
  // The paged attention of step `st` (its bounds a few tokens and a sequence beyond it) against
  // its reference: "" when every row is within the dtype's tolerance, else the first that is not.
  std::string paged_mismatch(const test::PagedAttentionStep& st, const test::PagedAttentionCase& c,
                             int D) {
    test::PagedAttentionOp p(st, c, D, SY_MEMORY_HOST, 5, 1);
    auto k = prepare_kernel(*plugin_, 0, 0, p.op);
    if (!k) return "prepare: " + test::why(k);
    std::vector<const DLTensor*> ins, outs;
    for (HostTensor* t : p.inputs()) ins.push_back(t->dl());
    for (HostTensor* t : p.outputs()) outs.push_back(t->dl());
    if (auto err = (*k)->execute(ins, outs)) return "execute: " + test::why(err);
    const bool bf16 = c.dtype == SY_DTYPE_BF16;
    return st.mismatch(p.o.get(), p.lse_values(), bf16 ? 1.2e-2 : 2e-5, bf16 ? 1e-4 : 1e-5);
  }
  std::optional<test::ScopedCpuTier> tier_;
};

TEST_P(CpuAttentionTier, GridAgainstDoubleReference) {
  for (const Case& c : grid()) {
    SCOPED_TRACE(c.name());
    expect_matches(c);
    if (HasFatalFailure()) return;
  }
}

TEST_P(CpuAttentionTier, EveryFeatureAtOnceAndDecodeSplits) {
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16}) {
    Case c;
    c.dtype = dt;
    c.B = 3;
    c.Sq = 70;
    c.Skv = 150;
    c.Hq = 16;
    c.Hkv = 2;
    c.D = 96;
    c.causal = c.sinks = true;
    c.window = 40;
    c.softcap = 15;
    c.scale = 0.2;
    expect_matches(c);
    Case d;
    d.dtype = dt;
    d.Sq = 1;
    d.Skv = 700;
    d.Hq = 9;
    d.Hkv = 3;
    d.D = 64;
    d.causal = true;
    d.kv_len = {555};
    expect_matches(d);
  }
}

// The decode path (at most 16 query rows per KV head: every KV head walked together, scores
// kept per (head, row) lane, blocks of 16 keys, the next block prefetched) at every row count
// its tiles split differently, head dims its column tiles and bf16 loads split differently,
// rows of 4 KiB (a head's rows a page apart), partial blocks, splits and masked blocks.
TEST_P(CpuAttentionTier, DecodeRowCountsHeadDimsAndCacheFills) {
  struct Heads {
    int64_t sq, hq, hkv;
  };
  const Heads heads[] = {{1, 8, 8},  {1, 9, 3},  {1, 32, 8}, {1, 64, 8},
                         {2, 40, 5}, {3, 12, 4}, {1, 6, 1},  {16, 2, 2}};
  int k = 0;
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16})
    for (const Heads& h : heads)
      for (int64_t d : {64, 80, 128}) {
        Case c;
        c.dtype = dt;
        c.Sq = h.sq;
        c.Hq = h.hq;
        c.Hkv = h.hkv;
        c.D = d;
        c.Skv = k % 3 == 0 ? 37 : 613;
        c.causal = true;
        c.B = k % 4 == 1 ? 2 : 1;
        if (k % 2 == 0) c.kv_len.assign(size_t(c.B), c.Skv - 1 - k % 17);
        c.window = k % 5 == 2 ? 100 : -1;
        c.softcap = k % 7 == 3 ? 30.0 : 0.0;
        c.sinks = k % 3 == 1;
        ++k;
        SCOPED_TRACE(c.name());
        expect_matches(c, unsigned(k));
        if (HasFatalFailure()) return;
      }
}

// The paged form over sequences long enough for several key groups of every tier (the amx
// tier's groups are 64 keys): prefill chunks beside decode rows with a window and sinks, and a
// decode of three, in f32 and bf16, with blocks of 16 (read in place) and of 4 (copied), against
// the double reference; the keys outside every row's window are NaN in the pool.
TEST_P(CpuAttentionTier, PagedOverManyKeyGroupsAgainstDoubleReference) {
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16})
    for (int bs : {16, 4})
      for (bool decode : {false, true}) {
        test::PagedAttentionCase c;
        c.dtype = dt;
        c.BS = bs;
        c.q_lens = decode ? std::vector<int>{1, 1, 1} : std::vector<int>{37, 9, 1, 1};
        c.lens = decode ? std::vector<int>{700, 129, 2} : std::vector<int>{150, 49, 300, 70};
        c.Hq = 8, c.Hkv = 2;
        c.sinks = true;
        if (!decode) c.window = 90;
        SCOPED_TRACE(std::string(sy_dtype_name(dt)) + " BS " + std::to_string(bs) +
                     (decode ? " decode" : " prefill"));
        const int D = 64;
        test::PagedAttentionStep st(c, D, 9);
        // Keys no row sees (before the window of a sequence's first query) become NaN: a kernel
        // that multiplies them, even by p = 0, shows it.
        for (int sq = 0; c.window >= 0 && sq < st.S; ++sq) {
          const int hidden = c.lens[size_t(sq)] - c.q_lens[size_t(sq)] - c.window;
          for (int j = 0; j < hidden; ++j)
            for (HostTensor* pool : {st.k_pool.get(), st.v_pool.get()}) {
              const int64_t row =
                  (int64_t(st.table[size_t(sq * st.MB + j / bs)]) * bs + j % bs) * c.Hkv * D;
              auto* bytes = static_cast<uint8_t*>(pool->bytes());
              for (int64_t e = 0; e < c.Hkv * D; ++e) {
                if (dt == SY_DTYPE_BF16) {
                  const uint16_t nan = 0x7fc0;
                  std::memcpy(bytes + 2 * (row + e), &nan, 2);
                } else {
                  const float nan = std::nanf("");
                  std::memcpy(bytes + 4 * (row + e), &nan, 4);
                }
              }
            }
        }
        EXPECT_EQ(paged_mismatch(st, c, D), "");
      }
}

// Decode steps whose rows take each sequence's KV heads in one item (a key's rows of every head
// read together), with enough key chunks or sequences for that at up to 8 threads: one long
// sequence split by key chunk (with a window of 700 it sees 4 chunks: together on one thread
// only), many short ones, and short ones beside two prefill chunks (which keep an item per KV
// head); f32 and bf16 (widened head by head), head dims
// of 4 and 5 chunks of 16, against the double reference.
TEST_P(CpuAttentionTier, PagedDecodeItemsOfEveryKvHeadAgainstDoubleReference) {
  std::vector<int> short_lens;
  for (int s = 0; s < 40; ++s) short_lens.push_back(1 + (s * 97) % 600);
  struct Step {
    const char* name;
    std::vector<int> q_lens, lens;
    int window;
  };
  std::vector<Step> steps = {{"one long sequence", {1}, {8300}, -1},
                             {"one long sequence, a window", {1}, {8300}, 700},
                             {"40 sequences", std::vector<int>(40, 1), short_lens, -1}};
  Step mixed{"36 sequences and 2 prefills", std::vector<int>(36, 1),
             std::vector<int>(short_lens.begin(), short_lens.begin() + 36), 300};
  mixed.q_lens.insert(mixed.q_lens.end(), {20, 33});
  mixed.lens.insert(mixed.lens.end(), {150, 420});
  steps.push_back(mixed);
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16})
    for (int D : {64, 80})
      for (const Step& step : steps) {
        test::PagedAttentionCase c;
        c.dtype = dt;
        c.q_lens = step.q_lens, c.lens = step.lens;
        c.Hq = 9, c.Hkv = 3;
        c.sinks = true;
        c.window = step.window;
        SCOPED_TRACE(std::string(sy_dtype_name(dt)) + " D " + std::to_string(D) + ", " + step.name);
        test::PagedAttentionStep st(c, D, 11);
        EXPECT_EQ(paged_mismatch(st, c, D), "");
      }
}

INSTANTIATE_TEST_SUITE_P(Tiers, CpuAttentionTier, ::testing::ValuesIn(test::cpu_tiers()),
                         test::tier_test_name);

}  // namespace
}  // namespace sy
