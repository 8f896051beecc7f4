// The reference plugin (plugins/reference/) against the independent double references of the
// tests: a whole llama decoder run through it alone (f32 weights, and a GGUF's Q8_0 / Q4_1 ones)
// gives support/llama_reference.hpp's logits; its attention, over a grid of every feature, gives
// support/attention_reference.hpp's o and lse; run-time errors write nothing; and it is off the
// default plugin search path, so no plan picks it unless its folder is named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/gguf_model/gguf_model.hpp"
#include "core/importer/importer.hpp"
#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "support/attention_reference.hpp"
#include "support/expected.hpp"
#include "support/host_tensor.hpp"
#include "support/sequence_runner.hpp"
#include "support/test_paths.hpp"
#include "support/tiny_gguf.hpp"

namespace sy {
namespace {

using nlohmann::json;
using test::HostTensor;
const std::filesystem::path kReferenceDir = SY_TEST_REFERENCE_DIR;

// Activations are stored as f32 between ops, so each op's output is rounded once: the logits
// agree with the all-double reference to a few f32 ulps of the largest one.
void expect_close_to_reference(const std::vector<float>& got, const test::LlamaReference::Mat& want,
                               const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, scale)) << what << " logit " << i;
}

// A 5-token prefill and 3 decode steps through `load`'s weights, on the reference plugin alone.
void run_model(const nlohmann::json& config, const ImportOptions& base, const WeightLoader& load,
               test::LlamaReference ref) {
  Registry reg = Registry::discover({{kReferenceDir}, "test"}, LoadOptions{});
  ASSERT_NE(reg.find("reference"), nullptr);
  ImportOptions opts = base;
  opts.max_batch_tokens = 5;
  opts.context = 16;
  const Inventory inv = live_inventory(reg);
  Policy policy;
  policy.prefer = {kDLCPU};
  const LayoutPlan lp = test::plan_single(
      [&](const ImportOptions& o) { return import_hf_config_json(config, "tiny.json", o); }, opts,
      reg, inv, policy);
  const Graph& graph = lp.graph;
  const Plan& plan = lp.plan;
  ASSERT_TRUE(plan.ok()) << plan.error->message;
  test::SequenceRunner session(graph, plan, reg, inv, load);
  test::LlamaReference::Mat want;
  const std::vector<int64_t> prompt = {5, 17, 99, 3, 42};
  for (int64_t t : prompt) want = ref.step(t);
  expect_close_to_reference(session.prefill(prompt), want, "prefill");
  for (int64_t t : {7, 88, 120})
    expect_close_to_reference(session.decode(t), ref.step(t), "decode of " + std::to_string(t));
}

TEST(ReferencePlugin, ALlamaDecoderThroughItAloneGivesTheDoubleReferencesLogits) {
  auto load = [](const Value& v, void* dst) -> std::optional<Error> {
    auto* out = static_cast<float*>(dst);
    for (int64_t i = 0; i < v.bytes() / 4; ++i) out[i] = float(test::hashed_weight(v.name, i));
    return std::nullopt;
  };
  run_model(test::kShape.config(), {}, load, test::LlamaReference());
}

TEST(ReferencePlugin, AGgufModelsQuantizedWeightsThroughItAlone) {
  const test::TinyGguf tiny(test::Storage::quantized);
  const std::string bytes = tiny.w.bytes();
  const GgufFile file = GgufFile::parse(reinterpret_cast<const unsigned char*>(bytes.data()),
                                        bytes.size(), "tiny.gguf");
  const GgufModel model = describe_gguf(file);
  ImportOptions opts;
  opts.weight_dtypes = model.weight_dtypes;
  run_model(model.config, opts, gguf_weight_loader(file, model),
            test::LlamaReference(
                test::kShape, [&](const std::string& n, int64_t i) { return tiny.weight(n, i); }));
}

class ReferenceKernels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto out = load_plugin(kReferenceDir / "reference.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = out.plugin.release();
  }
  static void TearDownTestSuite() { delete plugin_; }
  static size_t kernel(const std::string& name) {
    for (size_t i = 0; i < plugin_->kernels().size(); ++i)
      if (plugin_->kernels()[i].kernel == name) return i;
    throw std::runtime_error("no kernel " + name);
  }
  static Plugin* plugin_;
};
Plugin* ReferenceKernels::plugin_ = nullptr;

// Every attention feature, alone and together, against the independent reference (f32 storage;
// the plugin computes in double and rounds o once).
TEST_F(ReferenceKernels, AttentionGridMatchesTheIndependentReference) {
  struct Case {
    int64_t B, Sq, Skv, Hq, Hkv, D;
    bool causal, sinks;
    int64_t window;
    double softcap, scale;
    std::vector<int64_t> kv_len;
  };
  const std::vector<Case> cases = {
      {1, 7, 7, 4, 4, 32, false, false, -1, 0, 0, {}},
      {1, 7, 7, 4, 2, 32, true, false, -1, 0, 0, {}},
      {2, 5, 9, 6, 2, 16, true, true, 3, 0, 0, {9, 6}},
      {1, 1, 12, 8, 1, 64, true, true, -1, 30.0, 0.2, {}},
      {2, 3, 8, 2, 2, 8, true, false, -1, 0, 0, {0, 2}},  // a row with no key: o 0, lse −∞
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uni(-1.5, 1.5);
  for (const Case& c : cases) {
    SCOPED_TRACE("B" + std::to_string(c.B) + " Sq" + std::to_string(c.Sq));
    OpDesc op;
    op.op = SY_OP_ATTENTION;
    op.inputs = {{SY_DTYPE_F32, {c.B, c.Sq, c.Hq, c.D}, SY_MEMORY_HOST},
                 {SY_DTYPE_F32, {c.B, c.Skv, c.Hkv, c.D}, SY_MEMORY_HOST},
                 {SY_DTYPE_F32, {c.B, c.Skv, c.Hkv, c.D}, SY_MEMORY_HOST}};
    if (c.sinks) op.inputs.push_back({SY_DTYPE_F32, {c.Hq}, SY_MEMORY_HOST});
    if (!c.kv_len.empty()) {
      op.inputs.push_back({SY_DTYPE_I64, {c.B}, SY_MEMORY_HOST});
      op.set(SY_ATTR_KV_LEN_INPUT, int64_t{1});
    }
    op.outputs = {{SY_DTYPE_F32, {c.B, c.Sq, c.Hq, c.D}, SY_MEMORY_HOST},
                  {SY_DTYPE_F32, {c.B, c.Hq, c.Sq}, SY_MEMORY_HOST}};
    op.set(SY_ATTR_CAUSAL, int64_t{c.causal});
    op.set(SY_ATTR_WINDOW_LEFT, c.window);
    if (c.softcap > 0) op.set(SY_ATTR_SOFTCAP, c.softcap);
    if (c.scale != 0) op.set(SY_ATTR_SCALE, c.scale);
    auto prepared = prepare_kernel(*plugin_, kernel("attention"), 0, op);
    ASSERT_TRUE(prepared) << test::why(prepared);
    test::AttentionProblem p{c.B, c.Sq,     c.Skv,    c.Hq,      c.Hkv,
                             c.D, c.causal, c.window, c.softcap, c.scale};
    HostTensor q(SY_DTYPE_F32, op.inputs[0].shape), k(SY_DTYPE_F32, op.inputs[1].shape),
        v(SY_DTYPE_F32, op.inputs[2].shape), sinks(SY_DTYPE_F32, {c.Hq}), len(SY_DTYPE_I64, {c.B}),
        o(SY_DTYPE_F32, op.outputs[0].shape), lse(SY_DTYPE_F32, op.outputs[1].shape);
    auto fill = [&](HostTensor& t) {
      std::vector<double> x(size_t(t.elements()));
      for (double& e : x) e = uni(rng);
      return t.set(x);
    };
    p.q = fill(q);
    p.k = fill(k);
    p.v = fill(v);
    std::vector<const DLTensor*> ins = {q.dl(), k.dl(), v.dl()};
    if (c.sinks) p.sinks = fill(sinks), ins.push_back(sinks.dl());
    if (!c.kv_len.empty()) {
      len.set(std::vector<double>(c.kv_len.begin(), c.kv_len.end()));
      p.kv_len = c.kv_len;
      ins.push_back(len.dl());
    }
    ASSERT_FALSE((*prepared)->execute(ins, std::vector<const DLTensor*>{o.dl(), lse.dl()}));
    const test::AttentionResult want = test::reference_attention(p);
    const std::vector<double> got_o = o.get(), got_lse = lse.get();
    for (size_t i = 0; i < want.o.size(); ++i) ASSERT_NEAR(got_o[i], want.o[i], 1e-6) << "o " << i;
    for (size_t i = 0; i < want.lse.size(); ++i) {
      if (std::isinf(want.lse[i])) {
        EXPECT_TRUE(std::isinf(got_lse[i]) && got_lse[i] < 0) << "lse " << i;
        continue;
      }
      ASSERT_NEAR(got_lse[i], want.lse[i], 1e-5) << "lse " << i;
    }
  }
}

// An operand list for PreparedKernel::execute.
using Dl = std::vector<const DLTensor*>;

// An id outside the table and rows past the cache are INVALID_ARGUMENT, and nothing is written.
TEST_F(ReferenceKernels, RunTimeErrorsAreInvalidArgumentAndWriteNothing) {
  OpDesc emb;
  emb.op = SY_OP_EMBEDDING;
  emb.inputs = {{SY_DTYPE_F32, {4, 8}, SY_MEMORY_HOST}, {SY_DTYPE_I64, {3}, SY_MEMORY_HOST}};
  emb.outputs = {{SY_DTYPE_F32, {3, 8}, SY_MEMORY_HOST}};
  auto e = prepare_kernel(*plugin_, kernel("embedding"), 0, emb);
  ASSERT_TRUE(e) << test::why(e);
  HostTensor table(SY_DTYPE_F32, {4, 8}), ids(SY_DTYPE_I64, {3}), rows(SY_DTYPE_F32, {3, 8});
  table.set(std::vector<double>(32, 1.0));
  ids.set({0, 3, 4});
  rows.set(std::vector<double>(24, 7.0));
  auto err = (*e)->execute(Dl{table.dl(), ids.dl()}, Dl{rows.dl()});
  ASSERT_TRUE(err);
  EXPECT_EQ(err->status, SY_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(err->what(), ::testing::HasSubstr("id 4 at position 2"));
  EXPECT_EQ(rows.get(), std::vector<double>(24, 7.0));

  OpDesc app;
  app.op = SY_OP_KV_CACHE_APPEND;
  app.inputs = {{SY_DTYPE_F32, {1, 3, 2, 4}, SY_MEMORY_HOST}, {SY_DTYPE_I64, {1}, SY_MEMORY_HOST}};
  app.outputs = {{SY_DTYPE_F32, {1, 8, 2, 4}, SY_MEMORY_HOST}};
  auto a = prepare_kernel(*plugin_, kernel("kv_cache_append"), 0, app);
  ASSERT_TRUE(a) << test::why(a);
  HostTensor r(SY_DTYPE_F32, {1, 3, 2, 4}), pos(SY_DTYPE_I64, {1}),
      cache(SY_DTYPE_F32, {1, 8, 2, 4});
  r.set(std::vector<double>(24, 1.0));
  cache.set(std::vector<double>(64, 5.0));
  pos.set({6});  // rows 6, 7, 8 of a cache of 8
  err = (*a)->execute(Dl{r.dl(), pos.dl()}, Dl{cache.dl()});
  ASSERT_TRUE(err);
  EXPECT_EQ(err->status, SY_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(cache.get(), std::vector<double>(64, 5.0));
  pos.set({5});
  ASSERT_FALSE((*a)->execute(Dl{r.dl(), pos.dl()}, Dl{cache.dl()}));
  const std::vector<double> c = cache.get();
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], i >= 40 ? 1.0 : 5.0) << i;
}

TEST(ReferencePlugin, IsOffTheDefaultSearchPathAndListedWhenNamed) {
  auto plain = test::run_switchyard("caps --json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const auto& k : json::parse(plain.out)) EXPECT_NE(k["plugin"], "reference");
  auto named = test::run_switchyard("--plugin-dir " + kReferenceDir.string() + " caps --json");
  ASSERT_EQ(named.exit_code, 0) << named.err;
  std::set<std::string> ops;
  for (const auto& k : json::parse(named.out)) ops.insert(k["op"].get<std::string>());
  EXPECT_EQ(ops.size(), size_t(SY_OP_COUNT)) << "every vocabulary op";
}

}  // namespace
}  // namespace sy
