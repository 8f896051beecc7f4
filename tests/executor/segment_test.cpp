// Segments (plugin_api.h, the segments extension; DESIGN.md §12) without a GPU: the test plugin
// remote_reference (the reference kernels on a simulated device with its own memory, taking
// segments) against the double-precision llama forward pass, and what the plan and the context
// say of each segment. A plugin without the extension is driven op by op, and the plan says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "support/hashed_weights.hpp"
#include "support/llama_reference.hpp"
#include "support/plugin_load_options.hpp"
#include "support/sequence_runner.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

const std::filesystem::path kSegmentsDir = std::string(SY_TEST_SETS_DIR) + "/remote_reference";

constexpr auto load = test::load_hashed_weights;

struct Planned {
  Graph graph;
  Inventory inventory;
  Plan plan;
};

// The tiny llama, paged, for `sequences` sequences, under `policy` on the plugins of `dirs`.
Planned plan_tiny(const Registry& registry, Policy policy, int64_t sequences = 2) {
  Planned p;
  p.inventory = live_inventory(registry);
  ImportOptions o;
  o.kv_layout = KvLayout::paged;
  o.max_sequences = sequences;
  o.max_batch_tokens = 16;
  o.max_outputs = 16;
  o.context = 48;
  p.graph = import_hf_config_json(test::LlamaShape{}.config(), "tiny.json", o);
  p.plan = plan_graph(p.graph, registry, p.inventory, policy);
  return p;
}

Registry discover(std::vector<std::filesystem::path> dirs) {
  return Registry::discover({std::move(dirs), "test"}, test::plugin_load_options());
}

TEST(Segments, TheWholeStepIsOneSegmentAndMatchesTheDoubleReference) {
  Registry reg = discover({kSegmentsDir});
  ASSERT_TRUE(reg.find("remote_reference"));
  EXPECT_TRUE(reg.find("remote_reference")->takes_segments());
  Policy policy;
  policy.prefer = {kDLExtDev};
  Planned p = plan_tiny(reg, policy);
  ASSERT_TRUE(p.plan.ok()) << p.plan.error->message;
  const PhasePlan& step = p.plan.phases.back();
  ASSERT_EQ(step.segments.size(), 1u);
  const PlannedSegment& s = step.segments[0];
  EXPECT_TRUE(s.segment);
  EXPECT_EQ(s.plugin, "remote_reference");
  EXPECT_EQ(s.device, "ext_dev:0");
  EXPECT_EQ(s.count, step.ops.size());
  EXPECT_NE(s.reason.find("takes segments"), std::string::npos) << s.reason;
  const nlohmann::json j = to_json(p.plan);
  EXPECT_EQ(j["phases"].back()["segments"][0]["form"], "segment");
  EXPECT_EQ(j["phases"].back()["segments"][0]["ops"], step.ops.size());
  EXPECT_NE(render_plan(p.plan).find("as one segment"), std::string::npos);

  test::SequenceRunner run(p.graph, p.plan, reg, p.inventory, load);
  const std::vector<SegmentForm> forms = run.context().segment_forms();
  ASSERT_EQ(forms.size(), 1u);
  EXPECT_TRUE(forms[0].segment);
  EXPECT_EQ(forms[0].form.rfind("in order:", 0), 0u) << forms[0].form;  // the plugin's words

  test::LlamaReference ref;
  const std::vector<int64_t> prompt = {5, 17, 99, 3, 42};
  std::vector<double> want;
  for (int64_t t : prompt) want = ref.step(t);
  auto expect_close = [](const std::vector<float>& got, const std::vector<double>& w,
                         const std::string& what) {
    ASSERT_EQ(got.size(), w.size()) << what;
    for (size_t i = 0; i < w.size(); ++i)  // double kernels, f32 activations between ops
      ASSERT_NEAR(got[i], w[i], 1e-5 * std::max(1.0, std::abs(w[i]))) << what << " " << i;
  };
  expect_close(run.prefill(prompt), want, "prefill");
  for (int64_t t : {7, 88, 1}) expect_close(run.decode(t), ref.step(t), "decode");

  // One host call per step; the plugin's launch count is its entries (kernels and uploads),
  // every step; it never waited.
  const StepProfile& prof = run.context().profile("step");
  EXPECT_EQ(prof.kernel_calls, prof.steps);
  EXPECT_EQ(prof.blocking_waits, 0);
  const int64_t uploads = int64_t(step.copies.size());
  EXPECT_EQ(prof.launches, prof.steps * (int64_t(step.ops.size()) + uploads));
}

// The step's greedy ids are computed on the device beside its logits (greedy_ids, op argmax),
// and the host reads what it asks for, when it asks: nothing when a step has run; R ids (8 bytes
// each) for greedy_token; the R rows of the vocabulary only for logits. The ids are the first
// maxima of the double reference's logits, and of the logits the host then reads.
TEST(Segments, AGreedyStepReadsBackItsIdsAndTheLogitsOnlyWhenAsked) {
  Registry reg = discover({kSegmentsDir});
  Policy policy;
  policy.prefer = {kDLExtDev};
  Planned p = plan_tiny(reg, policy);
  ASSERT_TRUE(p.plan.ok()) << p.plan.error->message;
  test::SequenceRunner run(p.graph, p.plan, reg, p.inventory, load);
  Context& c = run.context();
  test::LlamaReference ref;
  const size_t vocab = size_t(c.vocab());
  const std::vector<int64_t> prompt = {5, 17, 99, 3, 42};
  Batch b;
  std::vector<std::vector<double>> want;
  for (size_t i = 0; i < prompt.size(); ++i) {
    b.add(prompt[i], int64_t(i), run.sequence(), true);
    want.push_back(ref.step(prompt[i]));
  }
  const int64_t before = c.profile("step").readback_bytes;
  ASSERT_TRUE(c.decode(b).ran);
  EXPECT_EQ(c.profile("step").readback_bytes, before) << "nothing is read before it is asked";
  for (size_t i = 0; i < prompt.size(); ++i) {
    const auto first_max = std::max_element(want[i].begin(), want[i].end()) - want[i].begin();
    EXPECT_EQ(c.greedy_token(i), first_max) << "row " << i;
  }
  EXPECT_EQ(c.greedy_token(prompt.size()), -1);
  const int64_t ids = c.profile("step").readback_bytes - before;
  EXPECT_EQ(ids, int64_t(prompt.size() * sizeof(int64_t))) << "the R ids, read once";
  for (size_t i = 0; i < prompt.size(); ++i) {
    const float* row = c.logits(i);
    EXPECT_EQ(std::max_element(row, row + vocab) - row, c.greedy_token(i)) << "row " << i;
  }
  EXPECT_EQ(c.profile("step").readback_bytes - before - ids,
            int64_t(prompt.size() * vocab * sizeof(float)))
      << "the logits rows, read once, after the ids";
}

// With the attention pinned to a family only cpu_onednn has, the step is cut: runs of the
// remote device around the CPU's attention, each its own segment (copies off the device end
// one), and the CPU's run a segment of cpu_onednn's. The tokens are those of the CPU alone.
TEST(Segments, ARunIsCutWhereAnotherPluginServesAnOp) {
  Registry mixed = discover({kSegmentsDir, test::kPluginDir});
  Policy policy;
  policy.prefer = {kDLExtDev, kDLCPU};
  policy.attention = "sdpa";
  Planned p = plan_tiny(mixed, policy, 1);
  ASSERT_TRUE(p.plan.ok()) << p.plan.error->message;
  const PhasePlan& step = p.plan.phases.back();
  size_t remote = 0, host = 0;
  for (const auto& s : step.segments) {
    EXPECT_TRUE(s.segment) << s.plugin << ": " << s.reason;
    (s.plugin == "remote_reference" ? remote : host) += 1;
    if (s.plugin != "remote_reference") {
      EXPECT_EQ(s.plugin, "cpu_onednn");
    }
  }
  EXPECT_GE(remote, 2u);
  EXPECT_GE(host, 1u);
  size_t covered = 0;
  for (const auto& s : step.segments) {
    EXPECT_EQ(s.first, covered);  // in order, each op in exactly one
    covered += s.count;
  }
  EXPECT_EQ(covered, step.ops.size());

  Registry cpu = discover({test::kPluginDir});
  Policy cpu_policy;
  cpu_policy.prefer = {kDLCPU};
  Planned q = plan_tiny(cpu, cpu_policy, 1);
  ASSERT_TRUE(q.plan.ok());
  test::SequenceRunner a(p.graph, p.plan, mixed, p.inventory, load);
  test::SequenceRunner b(q.graph, q.plan, cpu, q.inventory, load);
  std::vector<float> x = a.prefill({11, 22, 33, 44}), y = b.prefill({11, 22, 33, 44});
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t k = 0; k < x.size(); ++k) ASSERT_NEAR(x[k], y[k], 2e-4) << "step " << i;
    const int64_t t = int64_t(std::max_element(y.begin(), y.end()) - y.begin());
    x = a.decode(t);
    y = b.decode(t);
  }
}

// The reference plugin declares no segments extension.
TEST(Segments, APluginWithoutTheExtensionRunsOpByOpAndThePlanSaysWhy) {
  Registry ref = discover({SY_TEST_REFERENCE_DIR});
  ASSERT_TRUE(ref.find("reference"));
  EXPECT_FALSE(ref.find("reference")->takes_segments());
  Policy policy;
  policy.prefer = {kDLCPU};
  Planned p = plan_tiny(ref, policy);
  ASSERT_TRUE(p.plan.ok()) << p.plan.error->message;
  for (const auto& s : p.plan.phases.back().segments) {
    EXPECT_FALSE(s.segment);
    EXPECT_NE(s.reason.find("reference does not take segments"), std::string::npos) << s.reason;
  }
  test::SequenceRunner run(p.graph, p.plan, ref, p.inventory, load);
  run.prefill({1, 2, 3});
  const StepProfile& prof = run.context().profile("step");
  EXPECT_EQ(prof.kernel_calls, prof.steps * int64_t(p.plan.phases.back().ops.size()));
  EXPECT_EQ(prof.launches, 0);  // only segments report launches
}

// cpu_onednn takes the whole step as one segment (the kit's InOrderSegment): one host call a step,
// its logits near the double reference and equal bit for bit to the same kernels driven op by op
// (ContextOptions::time_each_op, what `run --profile` asks for), which time each op kind and
// say why they are not a segment.
TEST(Segments, CpuOnednnTakesTheStepAsOneSegmentAndOpByOpWhenEachOpIsTimed) {
  Registry cpu = discover({test::kPluginDir});
  ASSERT_TRUE(cpu.find("cpu_onednn"));
  EXPECT_TRUE(cpu.find("cpu_onednn")->takes_segments());
  Policy policy;
  policy.prefer = {kDLCPU};
  Planned p = plan_tiny(cpu, policy);
  ASSERT_TRUE(p.plan.ok()) << p.plan.error->message;
  const PhasePlan& step = p.plan.phases.back();
  ASSERT_EQ(step.segments.size(), 1u);
  EXPECT_TRUE(step.segments[0].segment);
  EXPECT_EQ(step.segments[0].count, step.ops.size());

  ContextOptions each_op;
  each_op.time_each_op = true;
  test::SequenceRunner one(p.graph, p.plan, cpu, p.inventory, load);
  test::SequenceRunner timed(p.graph, p.plan, cpu, p.inventory, load, each_op);
  const std::vector<SegmentForm> f1 = one.context().segment_forms(),
                                 f2 = timed.context().segment_forms();
  ASSERT_EQ(f1.size(), 1u);
  ASSERT_EQ(f2.size(), 1u);
  EXPECT_TRUE(f1[0].segment);
  EXPECT_NE(f1[0].form.find("cpu_onednn runs its"), std::string::npos) << f1[0].form;
  EXPECT_FALSE(f2[0].segment);
  EXPECT_NE(f2[0].form.find("each op is timed"), std::string::npos) << f2[0].form;

  test::LlamaReference ref;
  const std::vector<int64_t> prompt = {5, 17, 99, 3, 42};
  std::vector<double> want;
  for (int64_t t : prompt) want = ref.step(t);
  auto expect_same = [&](const std::vector<float>& a, const std::vector<float>& b,
                         const std::string& what) {
    ASSERT_EQ(a, b) << what;  // the same kernels in the same order
    ASSERT_EQ(a.size(), want.size()) << what;
    for (size_t i = 0; i < want.size(); ++i)  // f32 kernels against double
      ASSERT_NEAR(a[i], want[i], 2e-4 * std::max(1.0, std::abs(want[i]))) << what << " " << i;
  };
  expect_same(one.prefill(prompt), timed.prefill(prompt), "prefill");
  for (int64_t t : {7, 88, 1, 120}) {
    want = ref.step(t);
    const std::vector<float>& a = one.decode(t);
    expect_same(a, timed.decode(t), "decode " + std::to_string(t));
    // The step's last entry, op argmax, ran too: the greedy id is the logits' first maximum.
    EXPECT_EQ(one.context().greedy_token(0), std::max_element(a.begin(), a.end()) - a.begin());
  }
  const StepProfile &p1 = one.context().profile("step"), &p2 = timed.context().profile("step");
  EXPECT_EQ(p1.kernel_calls, p1.steps);
  ASSERT_EQ(p1.per_kind.size(), 1u);
  EXPECT_EQ(p1.per_kind[0].key, "segment @ cpu_onednn");
  EXPECT_EQ(p2.kernel_calls, p2.steps * int64_t(step.ops.size()));
  EXPECT_GT(p2.per_kind.size(), 5u);  // matmul, attention, rms_norm, rope, ... each its own
  EXPECT_EQ(p1.launches + p1.blocking_waits + p2.launches, 0);  // nothing is enqueued
}

}  // namespace
}  // namespace sy
