// The executor against a plain double-precision forward pass of a llama decoder
// (support/llama_reference.hpp), written independently of the plugins: prefill logits, several
// decode steps, and prefill-then-decode against a longer prefill (KV cache correctness).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "core/runtime/runtime.hpp"
#include "support/cpu_tiers.hpp"
#include "support/hashed_weights.hpp"
#include "support/llama_reference.hpp"
#include "support/sequence_runner.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

constexpr int64_t kTinyLayers = 2, kTinyContext = 24;

using test::load_hashed_weights;

using Mat = test::LlamaReference::Mat;

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
    std::unique_ptr<test::SequenceRunner> session;
  };
  // The tiny llama planned for prompts of `prompt_len` tokens in one step (the paged layout
  // when every kernel has its form, else the contiguous one) and loaded.
  static std::unique_ptr<Model> open(int64_t prompt_len, const Registry* reg = nullptr,
                                     std::vector<DLDeviceType> prefer = {kDLCUDA, kDLCPU}) {
    if (!reg) reg = registry_;
    auto m = std::make_unique<Model>();
    m->inventory = live_inventory(*reg);
    Policy policy;
    policy.prefer = prefer;
    auto import = [&](KvLayout layout) {
      ImportOptions opts;
      opts.kv_layout = layout;
      opts.max_batch_tokens = prompt_len;
      opts.context = kTinyContext;
      return import_hf_config_json(test::LlamaShape{}.config(), "tiny.json", opts);
    };
    LayoutPlan lp = plan_layouts(import, 1, *reg, m->inventory, policy);
    m->graph = std::move(lp.graph);
    m->plan = std::move(lp.plan);
    EXPECT_TRUE(m->plan.ok()) << (m->plan.error ? m->plan.error->message : "");
    m->session = std::make_unique<test::SequenceRunner>(m->graph, m->plan, *reg, m->inventory,
                                                        load_hashed_weights);
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
    test::LlamaReference ref;
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
  for (const auto& o : split->plan.phases.back().ops) remote += o.device == "ext_dev:0";
  EXPECT_EQ(remote, 2 * kTinyLayers + 1);  // every rms_norm of the (decode) step
  EXPECT_FALSE(split->plan.phases.back().copies.empty());
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

// The plan's memory prediction against what the session took: on the CPU, the executor's own
// allocations (weights, caches, the activation arena); on a device with its own memory
// (remote_norm), the drop of the free memory the plugin itself reports, its kernels' workspace
// included. (The host heap's growth, kernels' private scratch and all, is checked on the real
// model, where the plugins' fixed overheads do not dwarf the weights: tests/cli/run_test.cpp.)
TEST_F(Executor, MemoryPredictionAgreesWithWhatTheSessionTook) {
  auto cpu = open(5, nullptr, {kDLCPU});  // the host's columns, also where a GPU is present
  const LocationMemory* host = cpu->plan.memory.find("host");
  ASSERT_TRUE(host);
  const double allocated = double(cpu->session->context().memory_bytes().at("host") +
                                  cpu->session->model().allocated_bytes().at("host"));
  EXPECT_NEAR(double(host->total() - host->workspace), allocated, 0.1 * allocated);

  Registry mixed = Registry::discover(
      {{test::kPluginDir, std::string(SY_TEST_SETS_DIR) + "/remote_norm"}, "test"}, LoadOptions{});
  auto split = open(5, &mixed, {kDLExtDev, kDLCPU});
  const LocationMemory* ext = split->plan.memory.find("ext_dev:0");
  ASSERT_TRUE(ext);
  EXPECT_GT(ext->workspace, 0);  // rms_norm_remote declares a double per row (ABI 1.4)
  EXPECT_GT(ext->activations, 0);
  ASSERT_TRUE(split->session->context().device_free_drop().count("ext_dev:0"));
  const double drop = double(split->session->context().device_free_drop().at("ext_dev:0") +
                             split->session->model().device_free_drop().at("ext_dev:0"));
  EXPECT_NEAR(double(ext->total()), drop, 0.1 * drop);
  std::printf(
      "memory: host predicted %lld, allocated %.0f; ext_dev:0 predicted %lld, free-memory "
      "drop %.0f\n",
      (long long)host->total(), allocated, (long long)ext->total(), drop);
}

// A measurement of nothing is reported as unchecked, never as an error of 0 that passes.
TEST(MemoryReport, NothingMeasuredIsAProblemNotAZeroError) {
  for (int64_t nothing : {int64_t(0), int64_t(-4096)}) {
    const nlohmann::json j = prediction_check(1 << 20, nothing);
    EXPECT_TRUE(j["error"].is_null()) << j.dump();
    ASSERT_TRUE(j.contains("problem")) << j.dump();
    EXPECT_NE(j["problem"].get<std::string>().find("nothing was measured"), std::string::npos);
  }
  EXPECT_DOUBLE_EQ(prediction_check(1100, 1000)["error"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(prediction_check(900, 1000)["error"].get<double>(), -0.1);
  EXPECT_FALSE(prediction_check(900, 1000).contains("problem"));
}

TEST_F(Executor, DecodePastTheContextIsAnError) {
  auto m = open(kTinyContext - 1);
  std::vector<int64_t> prompt(size_t(kTinyContext - 1), 1);
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
