// cuda_flash's segments on a GPU (skipped, saying why, where there is none): a bf16 tiny llama
// planned onto cuda:0 runs as one segment — fused launches, pinned uploads, a CUDA graph per
// decode bucket — and gives cpu_onednn's logits for the same tokens, for several sequences
// prefilled together and then decoded together (the graph path), with no blocking wait inside
// any step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/executor/context.hpp"
#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "support/hashed_weights.hpp"
#include "support/llama_reference.hpp"
#include "support/plugin_load_options.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

constexpr auto load_bf16 = test::load_hashed_weights;

struct Loaded {
  Graph graph;
  Plan plan;
  std::unique_ptr<Model> model;
  std::unique_ptr<Context> context;
};

std::unique_ptr<Loaded> open(const Registry& reg, const Inventory& inv, DLDeviceType device) {
  auto l = std::make_unique<Loaded>();
  ImportOptions o;
  o.kv_layout = KvLayout::paged;
  o.max_sequences = 4;
  o.max_batch_tokens = 64;
  o.max_outputs = 64;
  o.context = 96;
  o.dtype_override = "bf16";
  test::LlamaShape shape;
  shape.hidden = 128, shape.heads = 2, shape.kv_heads = 1, shape.head_dim = 64, shape.inter = 256;
  l->graph = import_hf_config_json(shape.config(), "tiny.json", o);
  Policy policy;
  policy.prefer = {device};
  l->plan = plan_graph(l->graph, reg, inv, policy);
  if (!l->plan.ok()) throw *l->plan.error;
  l->model = std::make_unique<Model>(l->graph, l->plan, reg, inv, load_bf16);
  l->context = std::make_unique<Context>(*l->model);
  return l;
}

TEST(CudaSegmentGpu, ManySequencesDecodedThroughGraphsGiveTheCpuPluginsLogits) {
  if (!test::kHaveCudaPlugin) GTEST_SKIP() << "nvcc was not found at configure time";
  Registry reg = Registry::discover({{test::kPluginDir}, "test"}, test::plugin_load_options());
  const Plugin* cuda = reg.find("cuda_flash");
  if (!cuda || cuda->devices().empty())
    GTEST_SKIP() << "no CUDA device: " << (cuda ? cuda->no_devices_reason() : "no plugin");
  const Inventory inv = live_inventory(reg);
  auto gpu = open(reg, inv, kDLCUDA);
  auto cpu = open(reg, inv, kDLCPU);
  const auto& segments = gpu->plan.phases.back().segments;
  ASSERT_EQ(segments.size(), 1u);
  ASSERT_TRUE(segments[0].segment) << segments[0].reason;
  const std::vector<SegmentForm> forms = gpu->context->segment_forms();
  ASSERT_EQ(forms.size(), 1u);
  EXPECT_NE(forms[0].form.find("gemv"), std::string::npos) << forms[0].form;
  EXPECT_NE(forms[0].form.find("rope_append"), std::string::npos) << forms[0].form;

  // Four prompts of different lengths in one step, then decode steps of all four: the same
  // tokens go to both contexts (the CPU's argmax), so a rounding difference cannot compound.
  // A batch names sequences 0..3 by index; run() maps them to each context's ids.
  std::vector<SeqId> g, c;
  for (int s = 0; s < 4; ++s) {
    g.push_back(gpu->context->add_sequence());
    c.push_back(cpu->context->add_sequence());
  }
  auto run = [&](const Batch& batch, bool graphs_expected) {
    Batch bg = batch, bc = batch;
    for (size_t i = 0; i < batch.size(); ++i) {
      const size_t s = size_t(batch.tokens[i].seq);
      bg.tokens[i].seq = g[s];
      bc.tokens[i].seq = c[s];
    }
    const StepProfile before = gpu->context->profile("step");
    ASSERT_TRUE(gpu->context->decode(bg).ran);
    ASSERT_TRUE(cpu->context->decode(bc).ran);
    const StepProfile& after = gpu->context->profile("step");
    EXPECT_EQ(after.blocking_waits, before.blocking_waits) << "a wait inside the step";
    if (graphs_expected) {
      EXPECT_EQ(after.graph_launches, before.graph_launches + 1);
    }
    ASSERT_EQ(gpu->context->logits_rows(), cpu->context->logits_rows());
    for (size_t r = 0; r < cpu->context->logits_rows(); ++r) {
      const float* x = gpu->context->logits(r);
      const float* y = cpu->context->logits(r);
      double scale = 0;
      for (int64_t i = 0; i < cpu->context->vocab(); ++i)
        scale = std::max(scale, std::abs(double(y[i])));
      for (int64_t i = 0; i < cpu->context->vocab(); ++i)
        ASSERT_NEAR(x[i], y[i], 0.03 * std::max(1.0, scale)) << "row " << r << " logit " << i;
    }
  };
  Batch prompts;
  for (int s = 0; s < 4; ++s)
    for (int i = 0; i < 3 + 5 * s; ++i)
      prompts.add((s * 31 + i * 7) % 128, i, SeqId(s), i == 2 + 5 * s);
  run(prompts, false);
  for (int step = 0; step < 6; ++step) {
    Batch d;
    for (int s = 0; s < 4; ++s) {
      const float* y = cpu->context->logits(size_t(s));
      const int64_t t = int64_t(std::max_element(y, y + cpu->context->vocab()) - y);
      d.add(t, cpu->context->sequence_length(c[size_t(s)]), SeqId(s), true);
    }
    run(d, true);
  }
}

}  // namespace
}  // namespace sy
