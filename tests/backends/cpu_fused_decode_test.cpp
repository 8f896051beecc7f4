// cpu_onednn's fused_decode_attention through the real plugin's ABI, against a double-precision
// reference built from the separate steps the block replaces: the q/k/v projections, neox rope
// (partial rotary included), the cache write at `position`, and attention over keys
// 0…position (tests/support/attention_reference.hpp). Caches are checked whole after every
// step: the new row, and every other row untouched. Then positions outside the cache, and
// check() agreeing with prepare.
//
// Tolerances (f32, absolute, against the reference computed in double from the stored values;
// the largest differences seen over these tests were 6e-7 for cache rows and 1e-6 for o):
//   k/v cache rows: 4e-6. Each is an f32 dot product of H <= 200 terms (|w| <= 3/√H, |x| <= 1,
//     so entries are O(1) and the rounding of the sum a few 1e-7), then rotated with cos/sin
//     rounded to f32.
//   o: 2e-5, the sdpa kernel's own f32 tolerance (its exp2 polynomial and f32 accumulation
//     over <= 600 keys), which also covers the error of q and k above carried through scores
//     of O(1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "support/attention_reference.hpp"
#include "support/cpu_tiers.hpp"
#include "support/expected.hpp"
#include "support/host_tensor.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using test::HostTensor;

constexpr double kCacheTol = 4e-6;
constexpr double kFusedOutTol = 2e-5;
// bf16: q, k and v are rounded to bf16 after the projection and again after rope (as the
// unfused graph rounds each op's output), o once: a few bf16 ulps of values of magnitude ~1-3.
constexpr double kBf16CacheTol = 4e-2;
constexpr double kBf16OutTol = 2e-2;

struct FusedCase {
  sy_dtype dtype = SY_DTYPE_F32;   // x, the weights, o and the caches
  sy_dtype wdtype = SY_DTYPE_F32;  // the projections when block-quantized (q8_0, q4_1), else dtype
  int64_t H = 64, Hq = 4, Hkv = 4, D = 64, C = 37;
  int64_t rope = 1;
  int64_t rotary = 0;  // 0: no rotary_dim attribute (= D)
  double theta = 10000;
  int64_t window = -1;
  double scale = 0;               // 0: 1/sqrt(D)
  bool table = false;             // a scaled rope: inv_freq as input 5 (yarn-like, see below)
  double attention_factor = 1.0;  // on cos and sin

  int64_t rotary_dim() const { return rotary ? rotary : D; }
  sy_dtype weights() const { return sy_dtype_is_blocked(wdtype) ? wdtype : dtype; }
  std::string name() const {
    std::ostringstream s;
    s << sy_dtype_name(dtype)
      << (weights() != dtype ? std::string("_w") + sy_dtype_name(wdtype) : "") << "_H" << H << "_Hq"
      << Hq << "_Hkv" << Hkv << "_D" << D << "_C" << C;
    if (rope)
      s << "_rope" << rotary_dim() << "_theta" << theta;
    else
      s << "_nope";
    if (window >= 0) s << "_win" << window;
    if (scale != 0) s << "_scale" << scale;
    if (table) s << "_table";
    if (attention_factor != 1.0) s << "_factor" << attention_factor;
    return s.str();
  }
};

OpDesc fused_op(const FusedCase& c) {
  OpDesc op;
  op.op = SY_OP_FUSED_DECODE_ATTENTION;
  const sy_dtype F = c.dtype;
  const sy_dtype W = c.weights();
  op.inputs = {{F, {1, 1, c.H}, SY_MEMORY_HOST},
               {W, {c.Hq * c.D, c.H}, SY_MEMORY_HOST},
               {W, {c.Hkv * c.D, c.H}, SY_MEMORY_HOST},
               {W, {c.Hkv * c.D, c.H}, SY_MEMORY_HOST},
               {SY_DTYPE_I64, {1}, SY_MEMORY_HOST}};
  if (c.table) op.inputs.push_back({SY_DTYPE_F32, {c.rotary_dim() / 2}, SY_MEMORY_HOST});
  op.outputs = {{F, {1, 1, c.Hq, c.D}, SY_MEMORY_HOST},
                {F, {1, c.C, c.Hkv, c.D}, SY_MEMORY_HOST},
                {F, {1, c.C, c.Hkv, c.D}, SY_MEMORY_HOST}};
  op.set("rope", c.rope);
  op.set(SY_ATTR_ROPE_THETA, c.theta);
  if (c.rotary) op.set(SY_ATTR_ROTARY_DIM, c.rotary);
  op.set(SY_ATTR_CAUSAL, int64_t{1});
  op.set(SY_ATTR_WINDOW_LEFT, c.window);
  op.set(SY_ATTR_SCALE, c.scale);
  if (c.attention_factor != 1.0) op.set(SY_ATTR_ROPE_ATTENTION_FACTOR, c.attention_factor);
  return op;
}

// A table unlike θ^(−2i/R): the default frequencies, the upper half divided by 4 and a ramp
// between (the shape of a yarn table), so a kernel that ignored it would rotate differently.
std::vector<double> scaled_table(const FusedCase& c) {
  const int64_t half = c.rotary_dim() / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    double ramp = std::clamp((double(i) - half / 4.0) / (half / 2.0), 0.0, 1.0);
    f[size_t(i)] =
        std::pow(c.theta, -2.0 * double(i) / double(c.rotary_dim())) * (1 - ramp + ramp / 4.0);
  }
  return f;
}

// --- the reference, step by step, in double ----------------------------------------------

// y [rows] = W [rows, H] · x [H]
std::vector<double> project(const std::vector<double>& w, const std::vector<double>& x,
                            int64_t rows, int64_t H) {
  std::vector<double> y(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < H; ++i) y[r] += w[r * H + i] * x[i];
  return y;
}

// neox rope on every head of v [heads, D]: pairs (i, i + R/2) for i < R/2 rotated by
// position · inv_freq[i] (θ^(−2i/R) without a table), cos and sin times `factor`; dims R…
// pass through.
void rope_neox(std::vector<double>& v, int64_t heads, int64_t D, int64_t R, double theta,
               int64_t position, const std::vector<double>& table, double factor) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < R / 2; ++i) {
      double freq = table.empty() ? std::pow(theta, -2.0 * double(i) / double(R)) : table[i];
      double angle = double(position) * freq;
      double cs = factor * std::cos(angle), sn = factor * std::sin(angle);
      double a = v[h * D + i], b = v[h * D + i + R / 2];
      v[h * D + i] = a * cs - b * sn;
      v[h * D + i + R / 2] = b * cs + a * sn;
    }
}

// What the plugin is given, and the reference's caches.
struct State {
  std::vector<double> x, wq, wk, wv;  // as stored (f32 values)
  std::vector<double> kc, vc;         // the reference's caches [C, Hkv, D]
  std::vector<double> table;          // inv_freq as stored; empty without one
};

// One decode step of the reference: updates s.kc, s.vc and returns o [Hq, D].
std::vector<double> reference_step(const FusedCase& c, State& s, int64_t position) {
  std::vector<double> q = project(s.wq, s.x, c.Hq * c.D, c.H);
  std::vector<double> k = project(s.wk, s.x, c.Hkv * c.D, c.H);
  std::vector<double> v = project(s.wv, s.x, c.Hkv * c.D, c.H);
  if (c.rope) {
    rope_neox(q, c.Hq, c.D, c.rotary_dim(), c.theta, position, s.table, c.attention_factor);
    rope_neox(k, c.Hkv, c.D, c.rotary_dim(), c.theta, position, s.table, c.attention_factor);
  }
  const size_t row = size_t(c.Hkv * c.D);
  std::copy(k.begin(), k.end(), s.kc.begin() + position * row);
  std::copy(v.begin(), v.end(), s.vc.begin() + position * row);
  test::AttentionProblem p{};
  p.B = 1;
  p.Sq = 1;
  p.Skv = c.C;
  p.Hq = c.Hq;
  p.Hkv = c.Hkv;
  p.D = c.D;
  p.causal = true;
  p.window = c.window;
  p.scale = c.scale;
  p.q = q;
  p.k = s.kc;
  p.v = s.vc;
  p.kv_len = {position + 1};
  return test::reference_attention(p).o;
}

double worst_diff(const std::vector<double>& got, const std::vector<double>& want, size_t* at) {
  double worst = 0;
  *at = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= worst)) worst = std::abs(got[i] - want[i]), *at = i;
  return worst;
}

// --- the fixture ------------------------------------------------------------------------

class CpuFusedDecode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto out = load_plugin(test::kPluginDir / "cpu_onednn.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = out.plugin.release();
  }
  static void TearDownTestSuite() {
    delete plugin_;
    plugin_ = nullptr;
  }
  static size_t kernel() {
    for (size_t i = 0; i < plugin_->kernels().size(); ++i)
      if (plugin_->kernels()[i].kernel == "fused_decode_attention") return i;
    throw std::runtime_error("no fused_decode_attention kernel");
  }
  static CheckResult check(const OpDesc& op) {
    return plugin_->check(kernel(), plugin_->devices().at(0), op);
  }

  // A prepared block with its tensors, and the reference's state beside it.
  struct Block {
    FusedCase c;
    std::unique_ptr<PreparedKernel> kernel;
    HostTensor x, wq, wk, wv, pos, o, kc, vc, table;
    State s;
    std::mt19937 rng;

    explicit Block(const FusedCase& cs, unsigned seed)
        : c(cs),
          x(cs.dtype, {1, 1, cs.H}),
          wq(cs.weights(), {cs.Hq * cs.D, cs.H}),
          wk(cs.weights(), {cs.Hkv * cs.D, cs.H}),
          wv(cs.weights(), {cs.Hkv * cs.D, cs.H}),
          pos(SY_DTYPE_I64, {1}),
          o(cs.dtype, {1, 1, cs.Hq, cs.D}),
          kc(cs.dtype, {1, cs.C, cs.Hkv, cs.D}),
          vc(cs.dtype, {1, cs.C, cs.Hkv, cs.D}),
          table(SY_DTYPE_F32, {cs.rotary_dim() / 2}),
          rng(seed) {
      auto r = prepare_kernel(*plugin_, CpuFusedDecode::kernel(), 0, fused_op(c));
      EXPECT_TRUE(r) << c.name() << ": " << test::why(r);
      if (r) kernel = std::move(*r);
      // |w| <= 3/√H and |x| <= 1 make q and k entries O(1), so the softmax is not flat.
      const double a = 3.0 / std::sqrt(double(c.H));
      s.wq = wq.set(test::uniform(size_t(wq.elements()), rng, -a, a));
      s.wk = wk.set(test::uniform(size_t(wk.elements()), rng, -a, a));
      s.wv = wv.set(test::uniform(size_t(wv.elements()), rng, -a, a));
      // Rows not written yet hold earlier contents: the mask must hide those past position.
      s.kc = kc.set(test::uniform(size_t(kc.elements()), rng, -2, 2));
      s.vc = vc.set(test::uniform(size_t(vc.elements()), rng, -1, 1));
      if (c.table) s.table = table.set(scaled_table(c));
    }

    std::string run(int64_t position) {
      pos.set({double(position)});
      std::vector<const DLTensor*> ins = {x.dl(), wq.dl(), wk.dl(), wv.dl(), pos.dl()},
                                   outs = {o.dl(), kc.dl(), vc.dl()};
      if (c.table) ins.push_back(table.dl());
      return test::why(kernel->execute(ins, outs));
    }

    // A new token at `position`: runs the plugin and the reference, compares o and both
    // caches whole.
    void step(int64_t position) {
      SCOPED_TRACE(c.name() + " position " + std::to_string(position));
      s.x = x.set(test::uniform(size_t(c.H), rng, -1, 1));
      const std::vector<double> k_before = kc.get(), v_before = vc.get();
      ASSERT_EQ(run(position), "");
      std::vector<double> want = reference_step(c, s, position);
      size_t at;
      const bool bf16 = c.dtype == SY_DTYPE_BF16;
      double worst = worst_diff(o.get(), want, &at);
      EXPECT_LE(worst, bf16 ? kBf16OutTol : kFusedOutTol)
          << "o[" << at << "] " << o.get()[at] << " vs " << want[at];
      const int64_t row = c.Hkv * c.D;
      for (auto [got, ref, before, what] : {std::tuple{kc.get(), &s.kc, &k_before, "k_cache"},
                                            std::tuple{vc.get(), &s.vc, &v_before, "v_cache"}}) {
        worst = worst_diff(got, *ref, &at);
        EXPECT_LE(worst, bf16 ? kBf16CacheTol : kCacheTol)
            << what << "[" << at << "] (row " << int64_t(at) / row << ") " << got[at] << " vs "
            << (*ref)[at];
        // Every other row is bit-for-bit what it was.
        for (size_t i = 0; i < got.size(); ++i)
          if (int64_t(i) / row != position) {
            ASSERT_EQ(got[i], (*before)[i]) << what << "[" << i << "] changed";
          }
      }
    }
  };

  static Plugin* plugin_;
};
Plugin* CpuFusedDecode::plugin_ = nullptr;

// --- against the reference ----------------------------------------------------------------

TEST_F(CpuFusedDecode, GridAgainstStepByStepReference) {
  const int64_t heads[][2] = {{4, 4}, {8, 2}};
  struct Rope {
    int64_t rope, rotary;
    double theta;
  };
  const Rope ropes[] = {{1, 0, 10000}, {1, 32, 1e6}, {0, 0, 10000}};  // full, partial, NoPE
  unsigned seed = 1;
  int k = 0;
  for (int64_t H : {64, 200})
    for (const auto& h : heads)
      for (int64_t D : {64, 128})
        for (const Rope& r : ropes)
          for (int64_t window : {int64_t{-1}, int64_t{5}}) {
            FusedCase c;
            c.H = H;
            c.Hq = h[0];
            c.Hkv = h[1];
            c.D = D;
            c.rope = r.rope;
            c.rotary = r.rotary;
            c.theta = r.theta;
            c.window = window;
            c.scale = (k++ % 3 == 1) ? 0.2 : 0.0;
            Block b(c, seed++);
            ASSERT_TRUE(b.kernel);
            for (int64_t position : {0, 5, 36}) {
              b.step(position);
              if (HasFatalFailure()) return;
            }
          }
}

// A sequence decoded token by token: each step writes its row and attends over every row
// written so far (and, with the window, only the last few).
TEST_F(CpuFusedDecode, ConsecutivePositionsFillTheCache) {
  for (int64_t window : {int64_t{-1}, int64_t{3}}) {
    FusedCase c;
    c.H = 96;
    c.Hq = 8;
    c.Hkv = 2;
    c.D = 128;
    c.rotary = 64;
    c.window = window;
    Block b(c, 77);
    ASSERT_TRUE(b.kernel);
    for (int64_t position = 0; position < 12; ++position) {
      b.step(position);
      if (HasFatalFailure()) return;
    }
  }
}

// A scaled rope (llama3 / yarn / linear): the frequency table of input 5 and yarn's attention
// factor on cos and sin, as the importer emits them.
TEST_F(CpuFusedDecode, ScaledRopeTableAndAttentionFactor) {
  for (double factor : {1.0, 1.1386}) {
    for (int64_t rotary : {int64_t{0}, int64_t{32}}) {
      FusedCase c;
      c.Hq = 8;
      c.Hkv = 2;
      c.rotary = rotary;
      c.theta = 500000;
      c.table = true;
      c.attention_factor = factor;
      Block b(c, 31);
      ASSERT_TRUE(b.kernel);
      for (int64_t position : {0, 7, 36}) {
        b.step(position);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Prefill-then-decode: the last row of the cache is a legal position.
TEST_F(CpuFusedDecode, LastRowOfALongCache) {
  FusedCase c;
  c.H = 128;
  c.Hq = 8;
  c.Hkv = 2;
  c.D = 64;
  c.C = 600;  // long enough for the attention kernel to split the keys across threads
  Block b(c, 5);
  ASSERT_TRUE(b.kernel);
  b.step(599);
  b.step(300);
}

// Every tier's kernels (cpu_tier.hpp) behind the block meet the same reference.
class CpuFusedDecodeTier : public CpuFusedDecode,
                           public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    SY_SKIP_UNLESS_CPU_TIER(GetParam());
    tier_.emplace(GetParam());
  }
  // Decode steps at positions 0, 5 and 36 of a block for `c`, each against the reference.
  static void run_steps(const FusedCase& c, unsigned seed) {
    Block b(c, seed);
    ASSERT_TRUE(b.kernel);
    for (int64_t position : {0, 5, 36}) {
      b.step(position);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  std::optional<test::ScopedCpuTier> tier_;
};

// Block-quantized projections (as a GGUF model's): the reference projects with the values the
// test's GGUF quantizer stored, so the tolerances are the plain dtype's.
TEST_P(CpuFusedDecodeTier, QuantizedProjectionsMatchTheStepByStepReference) {
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16})
    for (sy_dtype wt : {SY_DTYPE_Q8_0, SY_DTYPE_Q4_1}) {
      FusedCase c;
      c.dtype = dt;
      c.wdtype = wt;
      c.H = 96;
      c.Hq = 6;
      c.Hkv = 2;
      c.D = 64;
      run_steps(c, 17);
      if (HasFatalFailure()) return;
    }
}

TEST_P(CpuFusedDecodeTier, MatchesTheStepByStepReference) {
  for (sy_dtype dt : {SY_DTYPE_F32, SY_DTYPE_BF16})
    for (int64_t H : {64, 200}) {  // 200: the projections' K has a vector tail
      FusedCase c;
      c.dtype = dt;
      c.H = H;
      c.Hq = 8;
      c.Hkv = 2;
      c.D = 128;
      c.rotary = 96;
      c.window = 5;
      run_steps(c, 9);
      if (HasFatalFailure()) return;
    }
}

// bf16 through the whole grid's geometry: heads, head dims, ropes, windows.
TEST_F(CpuFusedDecode, Bf16GridAgainstStepByStepReference) {
  unsigned seed = 100;
  for (int64_t D : {64, 128})
    for (int64_t rope : {0, 1})
      for (int64_t window : {int64_t{-1}, int64_t{5}}) {
        FusedCase c;
        c.dtype = SY_DTYPE_BF16;
        c.H = 96;
        c.Hq = 8;
        c.Hkv = 2;
        c.D = D;
        c.rope = rope;
        c.window = window;
        Block b(c, seed++);
        ASSERT_TRUE(b.kernel);
        for (int64_t position : {0, 7, 36}) {
          b.step(position);
          if (HasFatalFailure()) return;
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Tiers, CpuFusedDecodeTier, ::testing::ValuesIn(test::cpu_tiers()),
                         test::tier_test_name);

TEST_F(CpuFusedDecode, PositionOutsideTheCacheIsInvalidArgumentAndWritesNothing) {
  FusedCase c;
  c.Hq = 8;
  c.Hkv = 2;
  Block b(c, 3);
  ASSERT_TRUE(b.kernel);
  b.step(4);  // a valid step first: the caches hold written rows
  std::vector<double> o = b.o.get(), kc = b.kc.get(), vc = b.vc.get();
  for (int64_t position : {c.C, int64_t{-1}}) {
    std::string err = b.run(position);
    EXPECT_EQ(err.rfind("INVALID_ARGUMENT", 0), 0u) << err;
    EXPECT_NE(err.find("position " + std::to_string(position)), std::string::npos) << err;
    EXPECT_NE(err.find("0 to " + std::to_string(c.C - 1)), std::string::npos) << err;
    EXPECT_EQ(b.o.get(), o) << "a refused step writes nothing";
    EXPECT_EQ(b.kc.get(), kc) << "a refused step writes nothing";
    EXPECT_EQ(b.vc.get(), vc) << "a refused step writes nothing";
  }
  b.step(5);  // and the kernel still works
}

// --- check agrees with prepare ----------------------------------------------------------

struct Refused {
  std::string what;
  OpDesc op;
  std::vector<std::string> constraints;  // every refusal, in order
  std::string text;                      // part of the refusal's text (the first that has it)
};

std::vector<Refused> refused_fused_ops() {
  FusedCase c;
  c.Hq = 8;
  c.Hkv = 2;
  std::vector<Refused> out;
  {
    OpDesc op = fused_op(c);
    for (auto* list : {&op.inputs, &op.outputs})
      for (auto& t : *list)
        if (t.dtype == SY_DTYPE_F32) t.dtype = SY_DTYPE_F16;
    out.push_back({"f16", op, {"dtype"}, "dtype f16 is outside the kernel's dtypes (f32,bf16)"});
  }
  {
    OpDesc op = fused_op(c);
    op.inputs[1].dtype = SY_DTYPE_BF16;  // wq of another dtype than x: the operator contract
    op.outputs[2].dtype = SY_DTYPE_BF16;
    out.push_back({"mixed dtypes", op, {"dtype_match", "dtype_match"}, "wq is bf16 but x is f32"});
  }
  {
    OpDesc op = fused_op(c);
    op.inputs[1].memory = SY_MEMORY_DEVICE;  // wq in GPU memory: the `Expected CPU storage` case
    out.push_back({"device memory", op, {"residency"}, "host memory only"});
  }
  {
    OpDesc op = fused_op(c);
    op.inputs[0].shape[0] = 2;
    op.outputs[0].shape[0] = 2;
    op.outputs[1].shape[0] = op.outputs[2].shape[0] = 2;
    out.push_back({"batch 2", op, {"batch"}, "one sequence (batch 1)"});
  }
  {
    OpDesc op = fused_op(c);
    op.set(SY_ATTR_ROTARY_DIM, int64_t{33});
    out.push_back({"odd rotary_dim", op, {"rotary_dim"}, "rotary_dim is 33, must be even"});
    op.set(SY_ATTR_ROTARY_DIM, int64_t{66});
    out.push_back({"rotary_dim > D", op, {"rotary_dim"}, "between 2 and the head dim 64"});
  }
  {
    OpDesc op = fused_op(c);
    op.set(SY_ATTR_ROPE_STYLE, std::string("interleaved"));
    out.push_back({"interleaved", op, {"rope_style"}, "neox style only"});
  }
  {
    FusedCase d = c;
    d.D = 72;
    out.push_back({"head dim 72", fused_op(d), {"head_dim"}, "head dim 72"});
  }
  {
    OpDesc op = fused_op(c);
    op.inputs[2].shape = {2 * 64, 65};
    op.inputs[4].dtype = SY_DTYPE_I32;
    out.push_back({"wk and position",
                   op,
                   {"position", "shape_match"},
                   "position must be an i64 tensor of shape [1]"});
  }
  {
    OpDesc op = fused_op(c);
    op.set(SY_ATTR_SOFTCAP, 30.0);
    out.push_back({"softcap", op, {"feature", "softcap"}, "no softcap"});
  }
  return out;
}

TEST_F(CpuFusedDecode, CheckRefusesWhatPrepareRefusesWithEveryReason) {
  for (const Refused& r : refused_fused_ops()) {
    SCOPED_TRACE(r.what);
    CheckResult c = check(r.op);
    EXPECT_FALSE(c.error) << test::why(c.error);
    EXPECT_FALSE(c.accepted);
    std::vector<std::string> names;
    bool has_text = false;
    for (const auto& refusal : c.refusals) {
      names.push_back(refusal.constraint);
      EXPECT_FALSE(refusal.text.empty());
      has_text |= refusal.text.find(r.text) != std::string::npos;
    }
    EXPECT_EQ(names, r.constraints);
    EXPECT_TRUE(has_text) << "no refusal says \"" << r.text
                          << "\"; first: " << (c.refusals.empty() ? "" : c.refusals[0].text);

    auto p = prepare_kernel(*plugin_, kernel(), 0, r.op);
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().status, SY_STATUS_UNSUPPORTED);
    EXPECT_EQ(p.error().message.rfind("UNSUPPORTED", 0), 0u) << p.error().message;
    EXPECT_THAT(p.error().message, ::testing::HasSubstr(r.text));
  }
}

// The host-only reason names the operand and both memories: this is what the planner shows
// where other stacks fail mid-forward with `Expected CPU storage`.
TEST_F(CpuFusedDecode, DeviceMemoryRefusalNamesTheOperand) {
  FusedCase c;
  OpDesc op = fused_op(c);
  op.outputs[1].memory = SY_MEMORY_DEVICE;  // a k cache on the GPU
  CheckResult r = check(op);
  ASSERT_EQ(r.refusals.size(), 1u);
  EXPECT_EQ(r.refusals[0].constraint, "residency");
  EXPECT_EQ(r.refusals[0].required, "output 1 in device memory");
  EXPECT_EQ(r.refusals[0].offered, "output 1 in host memory");
  EXPECT_THAT(r.refusals[0].text, ::testing::HasSubstr("host memory only"));
}

TEST_F(CpuFusedDecode, CheckAcceptsWhatPrepareServes) {
  std::vector<FusedCase> cases(5);
  cases[1].Hq = 8, cases[1].Hkv = 2, cases[1].rotary = 32, cases[1].window = 128;
  cases[2].rope = 0, cases[2].rotary = 0, cases[2].D = 128;  // a SmolLM3 NoPE layer
  cases[3].D = 256, cases[3].Hq = 16, cases[3].Hkv = 1, cases[3].scale = 0.3;
  cases[4].D = 16, cases[4].C = 1;
  for (const FusedCase& c : cases) {
    SCOPED_TRACE(c.name());
    CheckResult r = check(fused_op(c));
    EXPECT_TRUE(r.accepted) << (r.refusals.empty() ? test::why(r.error) : r.refusals[0].text);
    auto p = prepare_kernel(*plugin_, kernel(), 0, fused_op(c));
    EXPECT_TRUE(p) << test::why(p);
  }
}

}  // namespace
}  // namespace sy
