// Every adaptation the planner can emit (core/planner/adaptation.hpp) runs: for each kind, a
// plugin set and a model where the planner emits it, planned, executed, and compared with a plan
// that needs no adaptation. A new kind without a scenario here fails the suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/executor/model_weights.hpp"
#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "core/weights/weights.hpp"
#include "support/sequence_runner.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;

using test::kSetsDir;

// The logits of a prompt and `steps` greedy decode steps, and the tokens chosen.
struct Generation {
  std::vector<std::vector<float>> logits;
  std::vector<int64_t> tokens;
};

struct Run {
  Graph graph;
  Plan plan;
};

Run plan_for(const fs::path& model, const Registry& reg, const Inventory& inv, const Policy& policy,
             int64_t prompt_len) {
  ImportOptions opts;
  opts.max_batch_tokens = prompt_len;
  opts.context = 64;
  LayoutPlan lp = test::plan_single(
      [&](const ImportOptions& o) { return import_hf_config((model / "config.json").string(), o); },
      opts, reg, inv, policy);
  return {std::move(lp.graph), std::move(lp.plan)};
}

Generation generate(const Run& r, const Registry& reg, const Inventory& inv,
                    const SafetensorsFile& weights, const std::string& model_type,
                    const std::vector<int64_t>& prompt, int steps) {
  test::SequenceRunner session(r.graph, r.plan, reg, inv,
                               safetensors_weight_loader(weights, model_type));
  Generation g;
  g.logits.push_back(session.prefill(prompt));
  for (int i = 0; i < steps; ++i) {
    const auto& last = g.logits.back();
    g.tokens.push_back(int64_t(std::max_element(last.begin(), last.end()) - last.begin()));
    g.logits.push_back(session.decode(g.tokens.back()));
  }
  return g;
}

double max_abs_diff(const Generation& a, const Generation& b, double* scale) {
  double worst = 0;
  *scale = 0;
  for (size_t s = 0; s < a.logits.size(); ++s)
    for (size_t i = 0; i < a.logits[s].size(); ++i) {
      worst = std::max(worst, double(std::abs(a.logits[s][i] - b.logits[s][i])));
      *scale = std::max(*scale, double(std::abs(b.logits[s][i])));
    }
  return worst;
}

// A copy of the model whose sinks are -1e4: e^sink vanishes, as if the model had none.
void write_without_sinks(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const char* f : {"config.json", "tokenizer.json"}) fs::copy_file(from / f, to / f);
  SafetensorsFile file = SafetensorsFile::open((from / "model.safetensors").string());
  std::vector<std::vector<char>> data;
  std::vector<std::pair<TensorInfo, const void*>> tensors;
  for (const auto& t : file.tensors()) {
    data.emplace_back(static_cast<const char*>(file.data(t)),
                      static_cast<const char*>(file.data(t)) + t.bytes);
    if (t.name.ends_with(".sinks"))
      for (size_t i = 0; i < t.bytes / 4; ++i) {
        const float none = -1e4f;
        std::memcpy(data.back().data() + 4 * i, &none, 4);
      }
    tensors.push_back({t, data.back().data()});
  }
  write_safetensors((to / "model.safetensors").string(), tensors);
}

// sinks_via_lse: gpt-oss-style sinks on a plugin set whose only attention kernel (pinned with
// --attention flex) returns LSE and has no sinks; against cpu_onednn's native sinks.
void sinks_via_lse() {
  test::TempDir dir;
  const fs::path model = dir.path() / "sinks", plain = dir.path() / "no-sinks";
  auto made = test::run_switchyard("make-test-model " + model.string() + " --shape tiny-sinks");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::vector<int64_t> prompt = {84, 104, 101, 32, 113, 117, 105, 99, 107, 32, 98, 114};

  Registry lse_only = Registry::discover({{kSetsDir / "lse_only"}, "test"}, LoadOptions{});
  Inventory lse_inv = live_inventory(lse_only);
  Policy flex;
  flex.prefer = {kDLCPU};
  flex.attention = "flex";
  Run adapted = plan_for(model, lse_only, lse_inv, flex, int64_t(prompt.size()));
  ASSERT_TRUE(adapted.plan.ok()) << adapted.plan.error->message;
  int attention_ops = 0;
  for (const auto& phase : adapted.plan.phases)
    for (const auto& op : phase.ops) {
      if (op.op != SY_OP_ATTENTION) continue;
      ++attention_ops;
      EXPECT_EQ(op.plugin, "lse_attention") << op.id;
      ASSERT_EQ(op.adaptations.size(), 1u) << op.id;
      const Adaptation& a = op.adaptations[0];
      EXPECT_EQ(a.kind, AdaptationKind::sinks_via_lse);
      EXPECT_EQ(a.plugin + "/" + a.kernel, "cpu_onednn/sinks_from_lse");
      EXPECT_TRUE(a.lse_added);
      EXPECT_EQ(a.lse, op.id + ".lse");
    }
  EXPECT_EQ(attention_ops, 2 * int(adapted.plan.phases.size()));  // two layers per phase

  Registry native_reg = Registry::discover({{kSetsDir / "cpu_only"}, "test"}, LoadOptions{});
  Inventory native_inv = live_inventory(native_reg);
  Policy any;
  any.prefer = {kDLCPU};
  Run native = plan_for(model, native_reg, native_inv, any, int64_t(prompt.size()));
  ASSERT_TRUE(native.plan.ok()) << native.plan.error->message;
  for (const auto& phase : native.plan.phases)
    for (const auto& op : phase.ops) EXPECT_TRUE(op.adaptations.empty()) << op.id;

  SafetensorsFile weights = SafetensorsFile::open((model / "model.safetensors").string());
  const std::string type = "switchyard_sinks_test";
  Generation via_lse = generate(adapted, lse_only, lse_inv, weights, type, prompt, 12);
  Generation with_sinks = generate(native, native_reg, native_inv, weights, type, prompt, 12);
  EXPECT_EQ(via_lse.tokens, with_sinks.tokens);
  double scale = 0;
  // f32 throughout; the two attention kernels differ in summation order only.
  const double tol = 1e-4, diff = max_abs_diff(via_lse, with_sinks, &scale);
  EXPECT_LE(diff, tol * std::max(1.0, scale));

  // The comparison means something: without its sinks the model's logits move far more.
  write_without_sinks(model, plain);
  SafetensorsFile no_sinks = SafetensorsFile::open((plain / "model.safetensors").string());
  Run native_plain = plan_for(plain, native_reg, native_inv, any, int64_t(prompt.size()));
  Generation dropped = generate(native_plain, native_reg, native_inv, no_sinks, type, prompt, 12);
  EXPECT_GT(max_abs_diff(dropped, with_sinks, &scale), 50 * tol * std::max(1.0, scale));
}

// Runs the scenario of `kind`; false when it has none.
bool run_scenario(AdaptationKind kind) {
  switch (kind) {  // no default: a new kind is a -Wswitch warning here, and a failure below
    case AdaptationKind::sinks_via_lse: sinks_via_lse(); return true;
  }
  return false;
}

TEST(Adaptations, EveryKindThePlannerCanEmitRuns) {
  for (AdaptationKind kind : all_adaptation_kinds()) {
    SCOPED_TRACE(adaptation_kind_name(kind));
    EXPECT_TRUE(run_scenario(kind)) << "no scenario for adaptation " << adaptation_kind_name(kind);
  }
}

}  // namespace
}  // namespace sy
