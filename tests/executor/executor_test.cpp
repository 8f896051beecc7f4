// The executor against a plain double-precision forward pass of a llama decoder written here,
// independently of the plugins: prefill logits, several decode steps, and prefill-then-decode
// against a longer prefill (KV cache correctness).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "core/executor/executor.hpp"
#include "core/importer/importer.hpp"
#include "support/cpu_tiers.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

constexpr int64_t kHidden = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kInter = 96,
                  kVocab = 128, kContext = 24;
constexpr double kTheta = 10000.0, kEps = 1e-5;

nlohmann::json tiny_llama() {
  return {{"model_type", "llama"},
          {"hidden_size", kHidden},
          {"num_hidden_layers", kLayers},
          {"num_attention_heads", kHeads},
          {"num_key_value_heads", kKvHeads},
          {"head_dim", kHeadDim},
          {"intermediate_size", kInter},
          {"vocab_size", kVocab},
          {"rope_theta", kTheta},
          {"rms_norm_eps", kEps},
          {"max_position_embeddings", 256},
          {"torch_dtype", "float32"},
          {"tie_word_embeddings", false}};
}

// Deterministic weights by name: norms near 1, matrices small and random.
double weight(const std::string& name, int64_t i) {
  uint64_t h = std::hash<std::string>{}(name) ^ (uint64_t(i) * 0x9E3779B97F4A7C15ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  double u = double(h % 1000003) / 1000003.0 - 0.5;  // [-0.5, 0.5)
  bool norm = name.find("norm") != std::string::npos;
  return norm ? 1.0 + 0.2 * u : 0.35 * u;
}

std::optional<Error> load(const Value& v, void* dst) {
  if (v.dtype != SY_DTYPE_F32) return Error(Errc::bad_weights, "test weights are f32");
  auto* out = static_cast<float*>(dst);
  for (int64_t i = 0; i < v.bytes() / 4; ++i) out[i] = float(weight(v.name, i));
  return std::nullopt;
}

using Mat = std::vector<double>;

// y[n] = sum_k W[n][k] x[k], W stored [N, K] (Hugging Face layout).
Mat linear(const std::string& w, const Mat& x, int64_t n) {
  int64_t k = int64_t(x.size());
  Mat y(n, 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) y[r] += weight(w, r * k + c) * x[c];
  return y;
}

Mat rms_norm(const std::string& w, const Mat& x) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double inv = 1.0 / std::sqrt(ss / double(x.size()) + kEps);
  Mat y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * weight(w, int64_t(i));
  return y;
}

void rope(Mat& x, int64_t heads, int64_t pos) {
  int64_t half = kHeadDim / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i) {
      double freq = std::pow(kTheta, -2.0 * double(i) / double(kHeadDim));
      double c = std::cos(double(pos) * freq), s = std::sin(double(pos) * freq);
      double& a = x[h * kHeadDim + i];
      double& b = x[h * kHeadDim + i + half];
      double x1 = a, x2 = b;
      a = x1 * c - x2 * s;
      b = x2 * c + x1 * s;
    }
}

// The model, one token at a time, with its own KV cache.
class Reference {
 public:
  Mat step(int64_t token) {
    Mat x(kHidden);
    for (int64_t i = 0; i < kHidden; ++i) x[i] = weight("embed_tokens", token * kHidden + i);
    for (int64_t l = 0; l < kLayers; ++l) {
      std::string p = "l" + std::to_string(l) + ".";
      Mat h = rms_norm(p + "input_layernorm", x);
      Mat q = linear(p + "q_proj", h, kHeads * kHeadDim);
      Mat k = linear(p + "k_proj", h, kKvHeads * kHeadDim);
      Mat v = linear(p + "v_proj", h, kKvHeads * kHeadDim);
      rope(q, kHeads, pos_);
      rope(k, kKvHeads, pos_);
      keys_[l].push_back(k);
      values_[l].push_back(v);
      Mat attn(kHeads * kHeadDim, 0.0);
      for (int64_t hq = 0; hq < kHeads; ++hq) {
        int64_t hk = hq / (kHeads / kKvHeads);
        std::vector<double> s;
        double mx = -1e300;
        for (const auto& kk : keys_[l]) {
          double dot = 0;
          for (int64_t d = 0; d < kHeadDim; ++d)
            dot += q[hq * kHeadDim + d] * kk[hk * kHeadDim + d];
          s.push_back(dot / std::sqrt(double(kHeadDim)));
          mx = std::max(mx, s.back());
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j < s.size(); ++j)
          for (int64_t d = 0; d < kHeadDim; ++d)
            attn[hq * kHeadDim + d] += s[j] / sum * values_[l][j][hk * kHeadDim + d];
      }
      Mat o = linear(p + "o_proj", attn, kHidden);
      for (int64_t i = 0; i < kHidden; ++i) x[i] += o[i];
      Mat h2 = rms_norm(p + "post_attention_layernorm", x);
      Mat g = linear(p + "gate_proj", h2, kInter), u = linear(p + "up_proj", h2, kInter);
      for (int64_t i = 0; i < kInter; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      Mat d = linear(p + "down_proj", g, kHidden);
      for (int64_t i = 0; i < kHidden; ++i) x[i] += d[i];
    }
    ++pos_;
    return linear("lm_head", rms_norm("norm", x), kVocab);
  }

 private:
  int64_t pos_ = 0;
  std::vector<Mat> keys_[kLayers], values_[kLayers];
};

class Executor : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry(Registry::discover({{test::kPluginDir}, "test"}, LoadOptions{}));
  }
  static void TearDownTestSuite() { delete registry_; }

  struct Model {
    Graph graph;
    Inventory inventory;
    Plan plan;
    std::unique_ptr<Session> session;
  };
  static std::unique_ptr<Model> open(int64_t prompt_len, const Registry* reg = nullptr,
                                     std::vector<DLDeviceType> prefer = {kDLCUDA, kDLCPU}) {
    if (!reg) reg = registry_;
    auto m = std::make_unique<Model>();
    ImportOptions opts;
    opts.prompt_len = prompt_len;
    opts.context = kContext;
    m->graph = import_hf_config_json(tiny_llama(), "tiny.json", opts);
    m->inventory = live_inventory(*reg);
    Policy policy;
    policy.prefer = prefer;
    m->plan = plan_graph(m->graph, *reg, m->inventory, policy);
    EXPECT_TRUE(m->plan.ok()) << (m->plan.error ? m->plan.error->message : "");
    m->session = std::make_unique<Session>(m->graph, m->plan, *reg, m->inventory, load);
    return m;
  }
  static void expect_close(const std::vector<float>& got, const Mat& want,
                           const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double scale = 0;
    for (double w : want) scale = std::max(scale, std::abs(w));
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-4 * std::max(1.0, scale)) << what << " logit " << i;
  }
  // Prefill of a 5-token prompt and 4 decode steps against the double reference.
  static void expect_prefill_and_decode_match(std::vector<DLDeviceType> prefer) {
    const std::vector<int64_t> prompt = {5, 17, 99, 3, 42};
    auto m = open(int64_t(prompt.size()), nullptr, std::move(prefer));
    Reference ref;
    Mat want;
    for (int64_t t : prompt) want = ref.step(t);
    expect_close(m->session->prefill(prompt), want, "prefill");
    for (int64_t t : {7, 88, 1, 120}) {
      std::vector<float> got = m->session->decode(t);
      expect_close(got, ref.step(t), "decode of token " + std::to_string(t));
    }
  }
  static Registry* registry_;
};
Registry* Executor::registry_ = nullptr;

// f32 tolerance: 2e-4 of the largest logit — f32 accumulation through two layers of
// K ≤ 96 products and the attention kernel's f32 exp2 polynomial.
TEST_F(Executor, PrefillAndDecodeMatchTheDoubleReference) {
  expect_prefill_and_decode_match({kDLCUDA, kDLCPU});
}

// The same on every tier of cpu_onednn's kernels (cpu_tier.hpp) this CPU has.
class ExecutorTier : public Executor, public ::testing::WithParamInterface<std::string> {};

TEST_P(ExecutorTier, PrefillAndDecodeMatchTheDoubleReference) {
  SY_SKIP_UNLESS_CPU_TIER(GetParam());
  test::ScopedCpuTier tier(GetParam());
  expect_prefill_and_decode_match({kDLCPU});
}

INSTANTIATE_TEST_SUITE_P(Tiers, ExecutorTier, ::testing::ValuesIn(test::cpu_tiers()),
                         test::tier_test_name);

TEST_F(Executor, PrefillThenDecodeEqualsALongerPrefill) {
  auto short_model = open(4);
  short_model->session->prefill({9, 8, 7, 6});
  std::vector<float> stepped = short_model->session->decode(5);
  auto long_model = open(5);
  std::vector<float> whole = long_model->session->prefill({9, 8, 7, 6, 5});
  ASSERT_EQ(stepped.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(stepped[i], whole[i], 1e-4) << i;
}

// rms_norm on another device (test plugin, its own memory) and everything else on the CPU:
// the plan's copies move activations in and out, and the tokens are the CPU-only ones.
TEST_F(Executor, MixedPlanWithCopiesGivesTheSameTokens) {
  Registry mixed = Registry::discover(
      {{test::kPluginDir, std::string(SY_TEST_SETS_DIR) + "/remote_norm"}, "test"}, LoadOptions{});
  auto split = open(5, &mixed, {kDLExtDev, kDLCPU});
  int remote = 0;
  for (const auto& o : split->plan.phases[1].ops) remote += o.device == "ext_dev:0";
  EXPECT_EQ(remote, 2 * kLayers + 1);  // every rms_norm of the decode phase
  EXPECT_FALSE(split->plan.phases[1].copies.empty());
  auto cpu = open(5);
  const std::vector<int64_t> prompt = {11, 22, 33, 44, 55};
  std::vector<float> a = split->session->prefill(prompt), b = cpu->session->prefill(prompt);
  for (int step = 0; step < 12; ++step) {
    int64_t ta = std::max_element(a.begin(), a.end()) - a.begin();
    int64_t tb = std::max_element(b.begin(), b.end()) - b.begin();
    ASSERT_EQ(ta, tb) << "step " << step;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << "step " << step;
    a = split->session->decode(ta);
    b = cpu->session->decode(tb);
  }
}

TEST_F(Executor, DecodePastTheContextIsAnError) {
  auto m = open(kContext - 1);
  std::vector<int64_t> prompt(size_t(kContext - 1), 1);
  m->session->prefill(prompt);
  m->session->decode(2);  // fills the last slot
  try {
    m->session->decode(3);
    FAIL() << "decoded past the context";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::prompt_too_long);
  }
}

}  // namespace
}  // namespace sy
