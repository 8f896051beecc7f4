// Planner properties through the core API: determinism, copies, KV-cache placement, no
// transfers, bad policies and inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using test::kExampleModels;
using test::kH200Target;

class Planner : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry(Registry::discover({{test::kPluginDir}, "test"}, LoadOptions{}));
  }
  static void TearDownTestSuite() { delete registry_; }
  static Plan plan(const std::string& model, const Inventory& inv, Policy policy = {},
                   const std::string& dtype = "") {
    if (policy.prefer.empty()) policy.prefer = {kDLCUDA, kDLCPU};
    ImportOptions opts;
    opts.kv_layout = KvLayout::contiguous;  // layout-independent planning (paged: plan_test)
    opts.max_batch_tokens = 64;
    opts.context = 256;
    opts.dtype_override = dtype;
    return plan_graph(import_hf_config(kExampleModels + model + "/config.json", opts), *registry_,
                      inv, policy);
  }
  static Registry* registry_;
};
Registry* Planner::registry_ = nullptr;

TEST_F(Planner, IsDeterministic) {
  Inventory inv = load_target(kH200Target);
  Plan a = plan("gpt-oss-20b", inv), b = plan("gpt-oss-20b", inv);
  ASSERT_TRUE(a.ok()) << a.error->message;
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(to_json(a).dump(), to_json(b).dump());
  EXPECT_NE(a.hash, plan("llama-3.2-1b", inv).hash);
}

TEST_F(Planner, GptOssOnTheH200RunsAttentionOnCudaFlash) {
  Plan p = plan("gpt-oss-20b", load_target(kH200Target));
  ASSERT_TRUE(p.ok()) << p.error->message;
  for (const auto& phase : p.phases)
    for (const auto& o : phase.ops)
      if (o.op == SY_OP_ATTENTION) {
        EXPECT_EQ(o.plugin, "cuda_flash") << o.id;
        EXPECT_EQ(o.device, "cuda:0") << o.id;
      }
  // Caches live where their attention runs.
  for (const auto& [value, device] : p.phases[1].kv_caches) EXPECT_EQ(device, "cuda:0") << value;
}

// Every family the importer reads plans for the H200 target with its GEMMs on the GPU; where
// attention lands is the plan's to say (and `plan --explain` shows why).
TEST_F(Planner, EveryFamilyPlansForTheH200) {
  for (const char* model : {"llama-3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b", "smollm3-3b",
                            "mistral-7b-v0.1", "gemma-2-2b-it", "gemma-3-1b", "gpt-oss-20b"}) {
    SCOPED_TRACE(model);
    Plan p = plan(model, load_target(kH200Target));
    ASSERT_TRUE(p.ok()) << p.error->message;
    for (const auto& phase : p.phases)
      for (const auto& o : phase.ops)
        if (o.op == SY_OP_MATMUL) {
          EXPECT_EQ(o.device, "cuda:0") << o.id;
        }
  }
}

TEST_F(Planner, CopiesWhereProducerAndConsumerMemoryDiffer) {
  // f32: flash refuses it, so attention runs on the CPU between CUDA matmuls.
  Plan p = plan("llama-3.2-1b", load_target(kH200Target), {}, "f32");
  ASSERT_TRUE(p.ok()) << p.error->message;
  const PhasePlan& prefill = p.phases[0];
  std::set<std::string> directions;
  for (const auto& c : prefill.copies) {
    directions.insert(c.from + "->" + c.to);
    EXPECT_GT(c.bytes, 0);
  }
  EXPECT_TRUE(directions.count("cuda:0->host"));
  EXPECT_TRUE(directions.count("host->cuda:0"));
  for (const auto& [value, device] : prefill.kv_caches) EXPECT_EQ(device, "host") << value;
}

// Without transfers the GPU box can still run the f32 model, but only where no copy is
// needed: the tokens start on the host, so everything stays there.
TEST_F(Planner, NoTransfersGivesACopyFreePlan) {
  Policy policy;
  policy.transfers = false;
  Plan p = plan("llama-3.2-1b", load_target(kH200Target), policy, "f32");
  ASSERT_TRUE(p.ok()) << p.error->message;
  for (const auto& phase : p.phases) {
    EXPECT_TRUE(phase.copies.empty()) << phase.name;
    for (const auto& o : phase.ops) EXPECT_EQ(o.device, "cpu:0") << o.id;
  }
}

TEST_F(Planner, PreferCpuKeepsEverythingOnTheHost) {
  Policy policy;
  policy.prefer = {kDLCPU, kDLCUDA};
  policy.prefer_given = true;
  Plan p = plan("qwen3-0.6b", load_target(kH200Target), policy);
  ASSERT_TRUE(p.ok()) << p.error->message;
  for (const auto& phase : p.phases) {
    EXPECT_TRUE(phase.copies.empty());
    for (const auto& o : phase.ops) EXPECT_EQ(o.device, "cpu:0") << o.id;
  }
}

TEST_F(Planner, StrictPreferOfAMissingDeviceIsDeviceUnavailable) {
  Policy policy;
  policy.prefer = {kDLCUDA, kDLCPU};
  policy.prefer_given = true;
  policy.strict = true;
  Inventory cpu_only = load_target(std::string(SY_TEST_EXAMPLES_DIR) + "/targets/cpu-laptop.json");
  Plan p = plan("llama-3.2-1b", cpu_only, policy);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error->code, Errc::device_unavailable);
}

TEST(PlannerTargets, BadTargetProfilesAreInputErrors) {
  test::TempDir dir;
  auto write = [&](const std::string& text) {
    auto f = dir.path() / "t.json";
    std::ofstream(f) << text;
    return f.string();
  };
  for (
      const std::string& text :
      {std::string("{"), std::string("{\"schema\": \"nope\"}"),
       std::string(R"({"schema": "switchyard.target/1", "devices": []})"),
       std::string(R"({"schema": "switchyard.target/1", "devices": [{"type": "tpu"}]})"),
       std::string(
           R"({"schema": "switchyard.target/1", "devices": [{"type": "cuda", "memory_bytes": "x"}]})")}) {
    try {
      load_target(write(text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code, Errc::bad_target) << text;
    }
  }
}

// One attention op with sinks over graph inputs and a sinks weight.
Graph sinks_attention_graph() {
  Phase p;
  p.name = "prefill";
  p.values = {{"q", SY_DTYPE_F32, {1, 4, 2, 16}, ValueKind::input},
              {"k", SY_DTYPE_F32, {1, 4, 2, 16}, ValueKind::input},
              {"v", SY_DTYPE_F32, {1, 4, 2, 16}, ValueKind::input},
              {"sinks", SY_DTYPE_F32, {2}, ValueKind::weight},
              {"o", SY_DTYPE_F32, {1, 4, 2, 16}, ValueKind::activation}};
  p.nodes = {{"attn", SY_OP_ATTENTION, {"q", "k", "v", "sinks"}, {"o"}, {}, 0}};
  validate(p, "sinks.json");
  Graph g;
  g.name = "sinks";
  g.phases.push_back(p);
  return g;
}

// A kernel with LSE is no use for sinks when no plugin can complete them on its device: the
// candidate is refused with that reason, not planned into a run that would fail.
TEST(PlannerAdaptations, SinksViaLseNeedACompletingKernelOnTheSameDevice) {
  test::TempDir dir;
  for (const char* f : {"lse_attention.so", "lse_attention.json"})
    std::filesystem::copy_file(std::filesystem::path(SY_TEST_SETS_DIR) / "lse_only" / f,
                               dir.path() / f);
  Registry alone = Registry::discover({{dir.path()}, "test"}, LoadOptions{});
  ASSERT_TRUE(alone.find("lse_attention"));
  Policy policy;
  policy.prefer = {kDLCPU};
  Plan p = plan_graph(sinks_attention_graph(), alone, live_inventory(alone), policy);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error->code, Errc::no_kernel_for_op);
  EXPECT_EQ(p.failure.op, "attn");
  ASSERT_EQ(p.failure.candidates.size(), 1u);
  std::vector<std::string> constraints;
  for (const auto& r : p.failure.candidates[0].reasons) constraints.push_back(r.constraint);
  EXPECT_EQ(constraints, (std::vector<std::string>{"feature", "sinks_via_lse"}));
  EXPECT_THAT(p.error->message, ::testing::HasSubstr("no sinks_from_lse kernel on cpu:0"));

  // With cpu_onednn beside it, the same kernel serves the op, completed by cpu_onednn.
  Registry both = Registry::discover(
      {{std::filesystem::path(SY_TEST_SETS_DIR) / "lse_only"}, "test"}, LoadOptions{});
  policy.attention = "flex";
  Plan q = plan_graph(sinks_attention_graph(), both, live_inventory(both), policy);
  ASSERT_TRUE(q.ok()) << q.error->message;
  const PlannedOp& op = q.phases[0].ops[0];
  EXPECT_EQ(op.plugin, "lse_attention");
  ASSERT_EQ(op.adaptations.size(), 1u);
  EXPECT_EQ(op.adaptations[0].plugin, "cpu_onednn");
  EXPECT_EQ(op.adaptations[0].input_locations, (std::vector<std::string>{"host", "host"}));
}

}  // namespace
}  // namespace sy
