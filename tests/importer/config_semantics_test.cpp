// Every config key that changes the computation is honoured or refused by name (issue 12):
// rope parameters in both the transformers-5 and the classic form, the scaled rope types'
// frequency tables against transformers' formulas computed here in double, biases, windows,
// softcaps; refusals of rope types, of missing parameters, of unknown keys and of keys that
// belong to another family; and docs/config-keys.md generated from the importer's table.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/importer/importer.hpp"
#include "support/graph_lookup.hpp"

namespace sy {
namespace {

using nlohmann::json;

json tiny(const std::string& model_type) {
  return {{"model_type", model_type}, {"hidden_size", 64},        {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
          {"intermediate_size", 128}, {"vocab_size", 256},        {"torch_dtype", "float32"}};
}

// The phase that decodes: the paged layout's one step phase (the importer's default). By
// value: callers pass the temporary graph an import returns.
Phase decode(const Graph& g) {
  return g.phases.back();
}

using test::attr;
using test::node;

// The error importing `c` raises; fails the test when it imports.
Error config_refusal(const json& c, const ImportOptions& o = {}) {
  try {
    import_hf_config_json(c, "model/config.json", o);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "imported " << c.dump();
  return Error(Errc::bad_config, "");
}

void expect_config_refused(const json& c, const std::vector<std::string>& named) {
  Error e = config_refusal(c);
  EXPECT_EQ(e.code, Errc::bad_config) << e.what();
  for (const auto& s : named)
    EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
}

// The rope op's frequency table of layer `layer` (its input 2, a graph constant), empty when
// the rope is unscaled.
std::vector<double> table_of(const Phase& p, int layer) {
  const Node& rope = node(p, "l" + std::to_string(layer) + ".q_rope");
  if (rope.inputs.size() < 3) return {};
  const Value* v = p.value(rope.inputs[2]);
  EXPECT_NE(v, nullptr);
  EXPECT_EQ(v->kind, ValueKind::constant);
  EXPECT_EQ(v->dtype, SY_DTYPE_F32);
  return v->data;
}

std::vector<double> default_freqs(double base, int dim) {
  std::vector<double> f;
  for (int i = 0; i < dim / 2; ++i) f.push_back(std::pow(base, -2.0 * i / dim));
  return f;
}

void expect_table(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-6 * want[i]) << "inv_freq[" << i << "]";
}

TEST(ConfigSemantics, RopeThetaFromEitherForm) {
  json classic = tiny("llama");
  classic["rope_theta"] = 500000.0;
  json v5 = tiny("llama");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  for (const json& c : {classic, v5}) {
    const Phase p = decode(import_hf_config_json(c, "c.json"));
    EXPECT_EQ(attr<double>(node(p, "l0.q_rope"), SY_ATTR_ROPE_THETA), 500000.0) << c.dump();
    EXPECT_TRUE(table_of(p, 0).empty());
  }
}

// transformers' _compute_llama3_parameters, in double.
TEST(ConfigSemantics, Llama3ScalingIsTransformersTable) {
  json c = tiny("llama");
  c["rope_theta"] = 500000.0;
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  std::vector<double> want = default_freqs(500000.0, 16);
  const double low_wl = 64 / 1.0, high_wl = 64 / 4.0;
  for (double& f : want) {
    double wl = 2 * M_PI / f;
    if (wl > low_wl) {
      f /= 8.0;
    } else if (wl >= high_wl) {
      double smooth = (64 / wl - 1.0) / (4.0 - 1.0);
      f = (1 - smooth) * f / 8.0 + smooth * f;
    }
  }
  Graph g = import_hf_config_json(c, "c.json");
  expect_table(table_of(decode(g), 1), want);
  // The fused decode block (the contiguous layout's) takes the same table.
  ImportOptions contiguous;
  contiguous.kv_layout = KvLayout::contiguous;
  const Phase d = decode(import_hf_config_json(c, "c.json", contiguous));
  ASSERT_FALSE(d.fusions.empty());
  EXPECT_EQ(d.fusions[0].fused.inputs.back(), node(d, "l0.q_rope").inputs[2]);
}

TEST(ConfigSemantics, LinearScalingDividesEveryFrequency) {
  json c = tiny("llama");
  c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 10000.0}};
  std::vector<double> want = default_freqs(10000.0, 16);
  for (double& f : want) f /= 4.0;
  expect_table(table_of(decode(import_hf_config_json(c, "c.json")), 0), want);
}

// transformers' _compute_yarn_parameters (truncate on, beta_fast 32, beta_slow 1), in double.
TEST(ConfigSemantics, YarnTableAndAttentionFactor) {
  json c = tiny("qwen2");
  c["rope_parameters"] = {{"rope_type", "yarn"},
                          {"factor", 4.0},
                          {"rope_theta", 10000.0},
                          {"original_max_position_embeddings", 32}};
  const double base = 10000, factor = 4, dim = 16, orig = 32;
  auto corr = [&](double rot) {
    return dim * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(base));
  };
  double low = std::max(0.0, std::floor(corr(32))), high = std::min(dim - 1, std::ceil(corr(1)));
  if (low == high) high += 0.001;
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) {
    double pos = std::pow(base, 2.0 * i / dim);
    double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    want.push_back(1 / (factor * pos) * ramp + 1 / pos * (1 - ramp));
  }
  const Phase p = decode(import_hf_config_json(c, "c.json"));
  expect_table(table_of(p, 0), want);
  EXPECT_NEAR(*attr<double>(node(p, "l0.q_rope"), SY_ATTR_ROPE_ATTENTION_FACTOR),
              0.1 * std::log(4.0) + 1.0, 1e-12);
  // An explicit attention_factor wins.
  c["rope_parameters"]["attention_factor"] = 1.5;
  EXPECT_EQ(attr<double>(node(decode(import_hf_config_json(c, "c.json")), "l1.k_rope"),
                         SY_ATTR_ROPE_ATTENTION_FACTOR),
            1.5);
}

TEST(ConfigSemantics, Gemma3RopePerLayerType) {
  json c = tiny("gemma3_text");
  c["sliding_window"] = 8;
  c["layer_types"] = {"sliding_attention", "full_attention"};
  c["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  const Phase p = decode(import_hf_config_json(c, "c.json"));
  EXPECT_EQ(attr<double>(node(p, "l0.q_rope"), SY_ATTR_ROPE_THETA), 1e4);
  EXPECT_TRUE(table_of(p, 0).empty());
  std::vector<double> want = default_freqs(1e6, 16);
  for (double& f : want) f /= 8.0;
  expect_table(table_of(p, 1), want);
  EXPECT_EQ(attr<int64_t>(node(p, "l0.attn"), SY_ATTR_WINDOW_LEFT), 7);
  EXPECT_EQ(attr<int64_t>(node(p, "l1.attn"), SY_ATTR_WINDOW_LEFT).value_or(-1), -1);
}

TEST(ConfigSemantics, PartialRotaryFactorSetsTheRotaryDims) {
  json c = tiny("llama");
  c["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(attr<int64_t>(node(decode(import_hf_config_json(c, "c.json")), "l0.q_rope"),
                          SY_ATTR_ROTARY_DIM),
            8);
}

TEST(ConfigSemantics, RefusedRopeConfigsNameTheKey) {
  json dynamic = tiny("llama");
  dynamic["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  expect_config_refused(dynamic, {"rope_scaling.rope_type", "dynamic"});
  json longrope = tiny("qwen2");
  longrope["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 1e4}};
  expect_config_refused(longrope, {"rope_parameters.rope_type", "longrope"});
  json unknown_type = tiny("llama");
  unknown_type["rope_scaling"] = {{"type", "ntk-by-parts"}, {"factor", 2.0}};
  expect_config_refused(unknown_type, {"rope_scaling.rope_type", "ntk-by-parts"});
  json no_factor = tiny("mistral");
  no_factor["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e4}};
  expect_config_refused(no_factor, {"rope_parameters.factor", "linear"});
  json llama3_partial = tiny("llama");
  llama3_partial["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  expect_config_refused(llama3_partial, {"rope_scaling", "low_freq_factor"});
  json unknown_param = tiny("llama");
  unknown_param["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 1e4}, {"short_factor", json::array({1.0})}};
  expect_config_refused(unknown_param, {"rope_parameters.short_factor"});
}

TEST(ConfigSemantics, UnknownAndForeignKeysAreRefusedByName) {
  json c = tiny("llama");
  c["residual_multiplier"] = 0.22;  // granite's: changes the math
  Error e = config_refusal(c);
  EXPECT_EQ(e.code, Errc::bad_config);
  EXPECT_NE(std::string(e.what()).find("residual_multiplier"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("--allow-config-key residual_multiplier"), std::string::npos)
      << e.what();
  ImportOptions allow;
  allow.allowed_config_keys = {"residual_multiplier"};
  EXPECT_NO_THROW(import_hf_config_json(c, "c.json", allow));

  json softcap = tiny("llama");
  softcap["attn_logit_softcapping"] = 50.0;  // llama's graph has no softcap
  expect_config_refused(softcap, {"attn_logit_softcapping", "gemma2"});
  json quantized = tiny("qwen3");
  quantized["quantization_config"] = {{"quant_method", "awq"}};
  expect_config_refused(quantized, {"quantization_config", "quantized"});
  json remote = tiny("llama");
  remote["auto_map"] = {{"AutoModelForCausalLM", "modeling_x.X"}};
  expect_config_refused(remote, {"auto_map", "custom modeling code"});
  json bidirectional = tiny("gemma3_text");
  bidirectional["use_bidirectional_attention"] = true;
  expect_config_refused(bidirectional, {"use_bidirectional_attention"});
  json interleaved = tiny("llama");
  interleaved["rope_interleaved"] = true;
  expect_config_refused(interleaved, {"rope_interleaved"});
  json act = tiny("qwen2");
  act["hidden_act"] = "relu2";
  expect_config_refused(act, {"hidden_act", "relu2"});
  // Keys without effect pass.
  json meta = tiny("mistral");
  meta["architectures"] = {"MistralForCausalLM"};
  meta["transformers_version"] = "5.0.0";
  meta["attention_dropout"] = 0.0;
  meta["eos_token_id"] = 2;
  EXPECT_NO_THROW(import_hf_config_json(meta, "c.json"));
}

TEST(ConfigSemantics, Qwen2HasQkvBiasesAndNoOutputBias) {
  const Phase p = decode(import_hf_config_json(tiny("qwen2"), "c.json"));
  for (const char* b : {"l0.q_proj_bias", "l0.k_proj_bias", "l0.v_proj_bias"})
    EXPECT_NE(p.value(b), nullptr) << b;
  EXPECT_EQ(p.value("l0.o_proj_bias"), nullptr);
  EXPECT_EQ(p.value("l0.gate_proj_bias"), nullptr);
  // A plain llama has none; attention_bias and mlp_bias add them all.
  json c = tiny("llama");
  EXPECT_EQ(decode(import_hf_config_json(c, "c.json")).value("l0.q_proj_bias"), nullptr);
  c["attention_bias"] = true;
  c["mlp_bias"] = true;
  const Phase q = decode(import_hf_config_json(c, "c.json"));
  for (const char* b : {"l1.q_proj_bias", "l1.o_proj_bias", "l1.gate_proj_bias", "l1.up_proj_bias",
                        "l1.down_proj_bias"})
    EXPECT_NE(q.value(b), nullptr) << b;
}

TEST(ConfigSemantics, SlidingWindowsPerFamily) {
  auto windows = [](const json& c) {
    std::vector<int64_t> w;
    const Phase p = decode(import_hf_config_json(c, "c.json"));
    for (int l = 0; l < 2; ++l)
      w.push_back(attr<int64_t>(node(p, "l" + std::to_string(l) + ".attn"), SY_ATTR_WINDOW_LEFT)
                      .value_or(-1));
    return w;
  };
  using W = std::vector<int64_t>;
  json mistral = tiny("mistral");
  EXPECT_EQ(windows(mistral), (W{4095, 4095}));  // transformers' default
  mistral["sliding_window"] = 6;
  EXPECT_EQ(windows(mistral), (W{5, 5}));
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(windows(mistral), (W{-1, -1}));
  json qwen = tiny("qwen2");
  qwen["sliding_window"] = 6;
  EXPECT_EQ(windows(qwen), (W{-1, -1}));  // use_sliding_window defaults to false
  qwen["use_sliding_window"] = true;
  qwen["max_window_layers"] = 1;
  EXPECT_EQ(windows(qwen), (W{-1, 5}));
  json gemma2 = tiny("gemma2");
  gemma2["sliding_window"] = 6;
  EXPECT_EQ(windows(gemma2), (W{5, -1}));  // even layers slide
}

TEST(ConfigSemantics, Gemma2SoftcapsNormsAndScale) {
  json c = tiny("gemma2");
  c["attn_logit_softcapping"] = 50.0;
  c["final_logit_softcapping"] = 30.0;
  c["query_pre_attn_scalar"] = 64;
  const Graph g = import_hf_config_json(c, "c.json");
  for (const Phase& p : g.phases) {
    SCOPED_TRACE(p.name);
    EXPECT_EQ(attr<double>(node(p, "l0.attn"), SY_ATTR_SOFTCAP), 50.0);
    EXPECT_DOUBLE_EQ(*attr<double>(node(p, "l1.attn"), SY_ATTR_SCALE), 1.0 / 8.0);
    const Node& cap = node(p, "final_softcap");
    EXPECT_EQ(cap.op, SY_OP_SOFTCAP);
    EXPECT_EQ(attr<double>(cap, SY_ATTR_SOFTCAP), 30.0);
    EXPECT_EQ(cap.outputs[0], "logits");
    for (const char* norm : {"input_layernorm", "post_attention_layernorm",
                             "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      EXPECT_EQ(attr<double>(node(p, std::string("l0.") + norm), SY_ATTR_WEIGHT_OFFSET), 1.0)
          << norm;
    EXPECT_TRUE(p.fusions.empty());
  }
  // null softcaps mean none: no attribute, no op.
  c["attn_logit_softcapping"] = nullptr;
  c["final_logit_softcapping"] = nullptr;
  const Phase p = decode(import_hf_config_json(c, "c.json"));
  EXPECT_EQ(attr<double>(node(p, "l0.attn"), SY_ATTR_SOFTCAP).value_or(0), 0.0);
  EXPECT_EQ(p.node("final_softcap"), nullptr);
}

TEST(ConfigSemantics, ConfigKeysDocIsTheImportersTable) {
  std::ifstream in(std::filesystem::path(SY_TEST_DOCS_DIR) / "config-keys.md");
  ASSERT_TRUE(in) << "docs/config-keys.md is missing";
  std::stringstream doc;
  doc << in.rdbuf();
  EXPECT_EQ(doc.str(), config_keys_markdown())
      << "regenerate: build/bin/switchyard config-keys --markdown > docs/config-keys.md";
  for (const char* key : {"rope_parameters", "rope_scaling", "attn_logit_softcapping",
                          "max_window_layers", "query_pre_attn_scalar", "partial_rotary_factor"})
    EXPECT_NE(doc.str().find(std::string("`") + key + "`"), std::string::npos) << key;
}

}  // namespace
}  // namespace sy
