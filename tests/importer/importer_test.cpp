// The Hugging Face config importer: every example config imports into two validated phases
// with the naming the executor relies on; architecture specifics (NoPE layers, Gemma's window
// pattern, gpt-oss sinks and windows, decode fusions); and every malformed config is an
// Error with its catalog code and the field's name, never a crash.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include "core/importer/importer.hpp"
#include "support/graph_lookup.hpp"

namespace sy {
namespace {

using nlohmann::json;
using test::kExamplesDir;

std::string model_config(const std::string& name) {
  return (kExamplesDir / "models" / name / "config.json").string();
}

const Phase& phase(const Graph& g, const std::string& name) {
  for (const auto& p : g.phases)
    if (p.name == name) return p;
  throw std::runtime_error("no phase " + name);
}

// Op kinds of layer `layer`, by op id suffix ("q_proj", "attn", ...).
std::map<std::string, sy_op_kind> layer_ops(const Phase& p, int layer) {
  std::map<std::string, sy_op_kind> out;
  std::string prefix = "l" + std::to_string(layer) + ".";
  for (const auto& n : p.nodes)
    if (n.layer == layer) {
      EXPECT_EQ(n.id.rfind(prefix, 0), 0u) << n.id;
      out[n.id.substr(prefix.size())] = n.op;
    }
  return out;
}

using test::attr;
using test::node;
using test::value;

// The contiguous layout's prefill and decode phases (plugins before ABI 1.5).
ImportOptions contiguous() {
  ImportOptions o;
  o.kv_layout = KvLayout::contiguous;
  return o;
}

json llama_tiny() {
  return {{"model_type", "llama"},    {"hidden_size", 64},        {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 128},
          {"vocab_size", 256},        {"torch_dtype", "float32"}};
}

struct Example {
  const char* folder;
  int64_t layers, per_layer_ops;
};
constexpr Example kImportedExamples[] = {
    {"llama-3.2-1b", 16, 17},    {"smollm3-3b", 36, 17},  // 15 on NoPE layers
    {"qwen3-0.6b", 28, 19},      {"gemma-3-1b", 26, 21},
    {"gpt-oss-20b", 24, 21},     {"qwen2.5-0.5b", 24, 20},  // + q/k/v bias adds
    {"mistral-7b-v0.1", 32, 17}, {"gemma-2-2b-it", 26, 19}};

TEST(Importer, EveryExampleConfigImportsIntoTwoValidPhases) {
  for (const auto& ex : kImportedExamples) {
    SCOPED_TRACE(ex.folder);
    Graph g = import_hf_config(model_config(ex.folder), contiguous());
    ASSERT_EQ(g.phases.size(), 2u);
    EXPECT_EQ(g.phases[0].name, "prefill");
    EXPECT_EQ(g.phases[1].name, "decode");
    EXPECT_EQ(g.name, ex.folder);
    for (auto p : g.phases) EXPECT_NO_THROW(validate(p, "again"));
    // The serialized graph is a graph file the parser accepts.
    Graph back = parse_graph(to_json(g).dump(), "roundtrip.json");
    EXPECT_EQ(back.phases.size(), 2u);
    EXPECT_EQ(back.phases[1].fusions.size(), g.phases[1].fusions.size());
    for (const auto& p : g.phases) {
      EXPECT_EQ(layer_ops(p, 0).size(), size_t(ex.per_layer_ops)) << p.name;
      EXPECT_EQ(layer_ops(p, int(ex.layers) - 1).size(),
                size_t(ex.per_layer_ops - (std::string(ex.folder) == "smollm3-3b" ? 2 : 0)))
          << p.name;
      EXPECT_TRUE(layer_ops(p, int(ex.layers)).empty());
    }
  }
}

// Prefill slices the last position before the final norm unless every position is asked for.
TEST(Importer, PrefillComputesTheLastPositionsLogitsUnlessAskedForAll) {
  ImportOptions o = contiguous();
  o.batch = 2;
  o.max_batch_tokens = 7;
  o.context = 100;
  using S = std::vector<int64_t>;
  Graph last = import_hf_config(model_config("llama-3.2-1b"), o);
  const Phase& pre = phase(last, "prefill");
  const Node& slice = node(pre, "last_position");
  EXPECT_EQ(slice.op, SY_OP_SLICE);
  EXPECT_EQ(value(pre, slice.inputs[0]).shape, (S{2, 7, 2048}));
  EXPECT_EQ(slice.outputs, std::vector<std::string>{"last_hidden"});
  EXPECT_EQ(node(pre, "final_norm").inputs[0], "last_hidden");
  EXPECT_EQ(value(pre, "next_token").shape, (S{2, 1}));
  EXPECT_EQ(phase(last, "decode").node("last_position"), nullptr);
  o.every_position_logits = true;
  Graph all = import_hf_config(model_config("llama-3.2-1b"), o);
  EXPECT_EQ(phase(all, "prefill").node("last_position"), nullptr);
  EXPECT_EQ(value(phase(all, "prefill"), "logits").shape, (S{2, 7, 128256}));
  o.max_batch_tokens = 1;  // one position: nothing to cut
  EXPECT_EQ(
      phase(import_hf_config(model_config("llama-3.2-1b"), o), "prefill").node("last_position"),
      nullptr);
}

TEST(Importer, ValuesFollowTheNamingConvention) {
  ImportOptions o = contiguous();
  o.batch = 2;
  o.max_batch_tokens = 7;
  o.context = 100;
  Graph g = import_hf_config(model_config("llama-3.2-1b"), o);
  const Phase &pre = phase(g, "prefill"), &dec = phase(g, "decode");
  using S = std::vector<int64_t>;
  EXPECT_EQ(value(pre, "tokens").shape, (S{2, 7}));
  EXPECT_EQ(value(pre, "tokens").dtype, SY_DTYPE_I64);
  EXPECT_EQ(value(pre, "tokens").kind, ValueKind::input);
  EXPECT_EQ(value(pre, "positions").shape, (S{2, 7}));
  EXPECT_EQ(value(pre, "cache_position").shape, (S{1}));
  EXPECT_EQ(pre.value("kv_len"), nullptr);
  EXPECT_EQ(value(dec, "kv_len").shape, (S{2}));
  EXPECT_EQ(value(dec, "kv_len").dtype, SY_DTYPE_I64);
  EXPECT_EQ(value(dec, "tokens").shape, (S{2, 1}));
  EXPECT_EQ(value(pre, "embed_tokens").shape, (S{128256, 2048}));
  EXPECT_EQ(value(pre, "embed_tokens").dtype, SY_DTYPE_BF16);
  EXPECT_EQ(value(pre, "l3.input_layernorm").shape, (S{2048}));
  EXPECT_EQ(value(pre, "l3.q_proj").shape, (S{32 * 64, 2048}));
  EXPECT_EQ(value(pre, "l3.k_proj").shape, (S{8 * 64, 2048}));
  EXPECT_EQ(value(pre, "l3.v_proj").shape, (S{8 * 64, 2048}));
  EXPECT_EQ(value(pre, "l3.o_proj").shape, (S{2048, 32 * 64}));
  EXPECT_EQ(value(pre, "l3.post_attention_layernorm").shape, (S{2048}));
  EXPECT_EQ(value(pre, "l3.gate_proj").shape, (S{8192, 2048}));
  EXPECT_EQ(value(pre, "l3.up_proj").shape, (S{8192, 2048}));
  EXPECT_EQ(value(pre, "l3.down_proj").shape, (S{2048, 8192}));
  EXPECT_EQ(value(pre, "norm").shape, (S{2048}));
  EXPECT_EQ(pre.value("lm_head"), nullptr);  // tied: the head reads embed_tokens
  EXPECT_EQ(node(pre, "lm_head").inputs[1], "embed_tokens");
  for (const Phase* p : {&pre, &dec}) {
    const Value& cache = value(*p, "l3.k_cache");
    EXPECT_EQ(cache.kind, ValueKind::kv_cache);
    EXPECT_EQ(cache.shape, (S{2, 100, 8, 64}));
    EXPECT_EQ(value(*p, "l3.v_cache").shape, cache.shape);
    EXPECT_EQ(value(*p, "next_token").dtype, SY_DTYPE_I64);
    EXPECT_EQ(value(*p, "logits").shape, (S{2, 1, 128256}));  // the last position only
    EXPECT_EQ(node(*p, "l3.k_append").outputs, std::vector<std::string>{"l3.k_cache"});
    EXPECT_EQ(node(*p, "l3.k_append").inputs[1], "cache_position");
    for (const auto& n : p->nodes) {
      if (n.id.rfind("l3.", 0) == 0) {
        EXPECT_EQ(n.layer, 3) << n.id;
      }
    }
  }
  // Prefill attends over the fresh k/v; decode over the caches with the kv_len input.
  const Node& pa = node(pre, "l3.attn");
  EXPECT_EQ(pa.inputs, (std::vector<std::string>{"l3.q_rot", "l3.k_rot", "l3.v"}));
  EXPECT_EQ(attr<int64_t>(pa, "causal", 0), 1);
  EXPECT_EQ(attr<int64_t>(pa, "kv_len_input", 0), 0);
  const Node& da = node(dec, "l3.attn");
  EXPECT_EQ(da.inputs,
            (std::vector<std::string>{"l3.q_rot", "l3.k_cache", "l3.v_cache", "kv_len"}));
  EXPECT_EQ(attr<int64_t>(da, "kv_len_input", 0), 1);
  EXPECT_EQ(attr<int64_t>(da, "window_left", -1), -1);
  EXPECT_FALSE(std::any_of(da.attrs.begin(), da.attrs.end(),
                           [](const Attr& a) { return a.name == "scale"; }));
  const Node& rope = node(dec, "l3.q_rope");
  EXPECT_EQ(attr<double>(rope, "rope_theta", 0), 500000.0);
  EXPECT_EQ(attr<int64_t>(rope, "rotary_dim", 0), 64);
  EXPECT_EQ(attr<std::string>(rope, "rope_style", ""), "neox");
  EXPECT_EQ(attr<double>(node(dec, "l3.input_layernorm"), "eps", 0), 1e-5);
}

TEST(Importer, DecodeAttentionReadsTheCacheAfterItsAppend) {
  Graph g = import_hf_config_json(llama_tiny(), "tiny.json", contiguous());
  for (const auto& p : g.phases) {
    auto pos = [&](const std::string& id) {
      for (size_t i = 0; i < p.nodes.size(); ++i)
        if (p.nodes[i].id == id) return i;
      return p.nodes.size();
    };
    for (int l = 0; l < 2; ++l) {
      std::string L = "l" + std::to_string(l) + ".";
      EXPECT_LT(pos(L + "k_append"), pos(L + "attn")) << p.name;
      EXPECT_LT(pos(L + "v_append"), pos(L + "attn")) << p.name;
    }
  }
}

TEST(Importer, SmolLM3HasNoRopeOnEveryFourthLayer) {
  Graph g = import_hf_config(model_config("smollm3-3b"), contiguous());
  for (const auto& p : g.phases)
    for (int l = 0; l < 36; ++l) {
      bool nope = (l + 1) % 4 == 0;  // 3, 7, 11, ...
      auto ops = layer_ops(p, l);
      EXPECT_EQ(ops.count("q_rope"), nope ? 0u : 1u) << p.name << " layer " << l;
      EXPECT_EQ(ops.count("k_rope"), nope ? 0u : 1u) << p.name << " layer " << l;
      if (nope) {
        EXPECT_EQ(node(p, "l" + std::to_string(l) + ".attn").inputs[0],
                  "l" + std::to_string(l) + ".q");
      }
    }
  // Without no_rope_layers the interval decides; with it, the list does.
  json c = llama_tiny();
  c["model_type"] = "smollm3";
  c["num_hidden_layers"] = 6;
  c["no_rope_layer_interval"] = 3;
  Graph h = import_hf_config_json(c, "s.json", contiguous());
  for (int l = 0; l < 6; ++l)
    EXPECT_EQ(layer_ops(h.phases[1], l).count("q_rope"), (l + 1) % 3 == 0 ? 0u : 1u) << l;
  c["no_rope_layers"] = {0, 1, 1, 1, 1, 0};
  Graph k = import_hf_config_json(c, "s.json", contiguous());
  EXPECT_EQ(layer_ops(k.phases[1], 0).count("q_rope"), 0u);
  EXPECT_EQ(layer_ops(k.phases[1], 2).count("q_rope"), 1u);
  EXPECT_EQ(layer_ops(k.phases[1], 5).count("q_rope"), 0u);
}

TEST(Importer, Qwen3NormsQueriesAndKeysOverTheHeadDimension) {
  Graph g = import_hf_config(model_config("qwen3-0.6b"), contiguous());
  const Phase& p = phase(g, "decode");
  EXPECT_EQ(value(p, "l0.q_norm").shape, std::vector<int64_t>{128});
  EXPECT_EQ(value(p, "l0.k_norm").shape, std::vector<int64_t>{128});
  EXPECT_EQ(node(p, "l0.q_norm").op, SY_OP_RMS_NORM);
  EXPECT_EQ(node(p, "l0.q_rope").inputs[0], "l0.q_normed");
  EXPECT_EQ(node(p, "l0.k_rope").inputs[0], "l0.k_normed");
  EXPECT_EQ(value(p, "l0.q_proj").shape, (std::vector<int64_t>{16 * 128, 1024}));
}

TEST(Importer, Gemma3WindowPatternNormsAndScaling) {
  Graph g = import_hf_config(model_config("gemma-3-1b"), contiguous());
  const Phase& p = phase(g, "decode");
  for (int l = 0; l < 26; ++l) {
    const Node& a = node(p, "l" + std::to_string(l) + ".attn");
    bool global = (l + 1) % 6 == 0;  // 5, 11, 17, 23
    EXPECT_EQ(attr<int64_t>(a, "window_left", -1), global ? -1 : 511) << l;
    EXPECT_EQ(attr<double>(node(p, "l" + std::to_string(l) + ".q_rope"), "rope_theta", 0),
              global ? 1e6 : 1e4)
        << l;
  }
  auto ops = layer_ops(p, 0);
  for (const char* norm :
       {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
        "post_feedforward_layernorm", "q_norm", "k_norm"}) {
    ASSERT_EQ(ops.count(norm), 1u) << norm;
    EXPECT_EQ(attr<double>(node(p, std::string("l0.") + norm), "weight_offset", 0), 1.0) << norm;
  }
  EXPECT_EQ(attr<double>(node(p, "final_norm"), "weight_offset", 0), 1.0);
  EXPECT_EQ(ops.at("act"), SY_OP_GELU_MUL);
  EXPECT_EQ(attr<std::string>(node(p, "l0.act"), "approximate", ""), "tanh");
  EXPECT_EQ(node(p, "embed_scale").op, SY_OP_MUL);
  // sqrt(H), a constant of the graph (H = 1152 for gemma-3-1b).
  const Value& scale = value(p, "embed_scale");
  EXPECT_EQ(scale.kind, ValueKind::constant);
  ASSERT_EQ(scale.data.size(), size_t(scale.shape[0]));
  for (double x : scale.data) ASSERT_DOUBLE_EQ(x, std::sqrt(double(scale.shape[0])));
  EXPECT_EQ(node(p, "l0.input_layernorm").inputs[0], "embeddings_scaled");
  // query_pre_attn_scalar 256 = head_dim: the natural scale, so no attribute.
  EXPECT_EQ(attr<double>(node(p, "l0.attn"), "scale", -1), -1);
  EXPECT_TRUE(p.fusions.empty());

  // The multimodal form: text_config nested, dtype at the top; layer_types wins over the
  // pattern; a query_pre_attn_scalar other than head_dim sets the scale.
  json c = json::parse(std::ifstream(model_config("gemma-3-1b")));
  json text = c;
  text.erase("torch_dtype");
  text["query_pre_attn_scalar"] = 144;
  text["num_hidden_layers"] = 3;
  text["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  json outer = {{"model_type", "gemma3"}, {"torch_dtype", "float32"}, {"text_config", text}};
  Graph m = import_hf_config_json(outer, "gemma3.json", contiguous());
  const Phase& d = phase(m, "decode");
  EXPECT_EQ(value(d, "l0.q_proj").dtype, SY_DTYPE_F32);
  EXPECT_EQ(attr<int64_t>(node(d, "l0.attn"), "window_left", -1), -1);
  EXPECT_EQ(attr<int64_t>(node(d, "l1.attn"), "window_left", -1), 511);
  EXPECT_DOUBLE_EQ(attr<double>(node(d, "l0.attn"), "scale", 0), 1.0 / 12.0);
}

TEST(Importer, GptOssHasSinksAlternatingWindowsBiasesAndEveryExpert) {
  Graph g = import_hf_config(model_config("gpt-oss-20b"), contiguous());
  for (const auto& p : g.phases) {
    SCOPED_TRACE(p.name);
    for (int l = 0; l < 24; ++l) {
      std::string L = "l" + std::to_string(l) + ".";
      const Node& a = node(p, L + "attn");
      ASSERT_GE(a.inputs.size(), 4u);
      EXPECT_EQ(a.inputs[3], L + "sinks");
      const Value& s = value(p, L + "sinks");
      EXPECT_EQ(s.dtype, SY_DTYPE_F32);
      EXPECT_EQ(s.shape, std::vector<int64_t>{64});
      EXPECT_EQ(s.kind, ValueKind::weight);
      EXPECT_EQ(attr<int64_t>(a, "window_left", -1), l % 2 == 0 ? 127 : -1) << l;
    }
    using S = std::vector<int64_t>;
    EXPECT_EQ(value(p, "l0.q_proj_bias").shape, (S{64, 64}));
    EXPECT_EQ(value(p, "l0.k_proj_bias").shape, (S{8, 64}));
    EXPECT_EQ(value(p, "l0.o_proj_bias").shape, (S{2880}));
    EXPECT_EQ(node(p, "l0.q_bias").op, SY_OP_ADD);
    EXPECT_EQ(value(p, "l0.router").shape, (S{32, 2880}));
    EXPECT_EQ(value(p, "l0.router_bias").shape, (S{32}));
    // The router: top 4 of the 32 logits, softmaxed over those 4.
    const Node& router = node(p, "l0.router_topk");
    EXPECT_EQ(router.op, SY_OP_MOE_ROUTER);
    EXPECT_EQ(router.inputs, (std::vector<std::string>{"l0.router_logits_b"}));
    EXPECT_EQ(attr<int64_t>(router, "top_k", 0), 4);
    EXPECT_EQ(value(p, "l0.expert_ids").dtype, SY_DTYPE_I32);
    EXPECT_EQ(value(p, "l0.expert_weights").dtype, SY_DTYPE_F32);
    // Every expert, in mxfp4 as the quantization_config says; biases in the model's dtype.
    const Node& experts = node(p, "l0.experts");
    EXPECT_EQ(experts.op, SY_OP_MOE_EXPERTS);
    ASSERT_EQ(experts.inputs.size(), 9u);
    EXPECT_EQ(experts.inputs[0], "l0.mlp_norm");
    EXPECT_EQ(value(p, "l0.experts.gate_proj").shape, (S{32, 2880, 2880}));
    EXPECT_EQ(value(p, "l0.experts.up_proj").shape, (S{32, 2880, 2880}));
    EXPECT_EQ(value(p, "l0.experts.down_proj").shape, (S{32, 2880, 2880}));
    EXPECT_EQ(value(p, "l0.experts.down_proj").dtype, SY_DTYPE_MXFP4);
    EXPECT_EQ(value(p, "l0.experts.gate_proj_bias").shape, (S{32, 2880}));
    EXPECT_EQ(value(p, "l0.experts.gate_proj_bias").dtype, SY_DTYPE_BF16);
    EXPECT_EQ(attr<std::string>(experts, "expert_activation", ""), "swiglu_limit");
    EXPECT_DOUBLE_EQ(attr<double>(experts, "swiglu_limit", 0), 7.0);
    EXPECT_DOUBLE_EQ(attr<double>(experts, "swiglu_alpha", 0), 1.702);  // GptOssConfig's default
    EXPECT_EQ(value(p, "lm_head").shape, (S{201088, 2880}));            // not tied
    EXPECT_EQ(value(p, "embed_tokens").dtype, SY_DTYPE_BF16);           // no torch_dtype: bf16
    EXPECT_TRUE(p.fusions.empty());
  }
}

// Qwen3-MoE (the parity fixture's config, which transformers saved): unbiased router and
// experts of moe_intermediate_size with silu, q/k norms; decoder_sparse_step and mlp_only_layers
// give layers a dense MLP of intermediate_size instead.
TEST(Importer, Qwen3MoeHasExpertsWhereTheConfigSaysAndDenseLayersElsewhere) {
  const auto path = std::filesystem::path(SY_TEST_FIXTURES_DIR) / "parity/qwen3_moe/config.json";
  json c = json::parse(std::ifstream(path));
  using S = std::vector<int64_t>;
  {
    Graph g = import_hf_config_json(c, path.string(), contiguous());
    const Phase& p = phase(g, "decode");
    for (int l = 0; l < 2; ++l) {
      const std::string L = "l" + std::to_string(l) + ".";
      const Node& experts = node(p, L + "experts");
      EXPECT_EQ(experts.inputs.size(), 6u);  // no biases
      EXPECT_EQ(attr<std::string>(experts, "expert_activation", ""), "silu");
      EXPECT_EQ(value(p, L + "experts.gate_proj").shape, (S{8, 32, 64}));
      EXPECT_EQ(value(p, L + "experts.down_proj").shape, (S{8, 64, 32}));
      EXPECT_EQ(value(p, L + "router").shape, (S{8, 64}));
      EXPECT_EQ(p.value(L + "router_bias"), nullptr);
      EXPECT_EQ(attr<int64_t>(node(p, L + "router_topk"), "top_k", 0), 2);
      EXPECT_NE(p.value(L + "q_norm"), nullptr);
    }
  }
  for (auto [edit, dense_layer] :
       {std::pair{json{{"mlp_only_layers", {1}}}, 1}, {json{{"decoder_sparse_step", 2}}, 0}}) {
    json e = c;
    e.update(edit);
    SCOPED_TRACE(edit.dump());
    Graph g = import_hf_config_json(e, path.string(), contiguous());
    const Phase& p = phase(g, "decode");
    const std::string dense = "l" + std::to_string(dense_layer) + ".";
    const std::string sparse = "l" + std::to_string(1 - dense_layer) + ".";
    EXPECT_EQ(p.node(dense + "experts"), nullptr);
    EXPECT_EQ(value(p, dense + "gate_proj").shape, (S{128, 64}));  // intermediate_size
    EXPECT_NE(p.node(sparse + "experts"), nullptr);
  }
  for (auto [field, bad] : {std::pair{"norm_topk_prob", json(false)},
                            {"use_sliding_window", json(true)},
                            {"num_experts_per_tok", json(9)},
                            {"mlp_only_layers", json{2}},
                            {"hidden_act", json("gelu")}}) {
    json e = c;
    e[field] = bad;
    try {
      import_hf_config_json(e, "bad/config.json", contiguous());
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& err) {
      EXPECT_EQ(err.code, Errc::bad_config);
      EXPECT_NE(std::string(err.what()).find(field), std::string::npos) << err.what();
    }
  }
}

// swiglu_alpha and swiglu_limit are read from the config, not assumed; an unquantized config
// declares the experts in the model's dtype.
TEST(Importer, GptOssReadsTheSwiGluClampAndTheExpertsDtype) {
  json c = json::parse(std::ifstream(model_config("gpt-oss-20b")));
  c["num_hidden_layers"] = 2;
  c["layer_types"] = {"sliding_attention", "full_attention"};
  c["swiglu_alpha"] = 1.25;
  c["swiglu_limit"] = 3.5;
  c.erase("quantization_config");
  Graph g = import_hf_config_json(c, "gpt-oss/config.json", contiguous());
  const Node& experts = node(g.phases[0], "l1.experts");
  EXPECT_DOUBLE_EQ(attr<double>(experts, "swiglu_alpha", 0), 1.25);
  EXPECT_DOUBLE_EQ(attr<double>(experts, "swiglu_limit", 0), 3.5);
  EXPECT_EQ(value(g.phases[0], "l1.experts.gate_proj").dtype, SY_DTYPE_BF16);
}

TEST(Importer, DecodeFusionsOnlyWhereTheFusedKernelComputesTheSameThing) {
  for (const char* folder : {"llama-3.2-1b", "smollm3-3b"}) {
    SCOPED_TRACE(folder);
    Graph g = import_hf_config(model_config(folder), contiguous());
    const Phase& d = phase(g, "decode");
    EXPECT_TRUE(phase(g, "prefill").fusions.empty());
    int64_t layers = std::string(folder) == "smollm3-3b" ? 36 : 16;
    ASSERT_EQ(d.fusions.size(), size_t(layers));
    for (const auto& f : d.fusions) {
      const Node& n = f.fused;
      EXPECT_EQ(f.group, n.id);
      EXPECT_EQ(n.op, SY_OP_FUSED_DECODE_ATTENTION);
      std::string L = "l" + std::to_string(n.layer) + ".";
      EXPECT_EQ(n.id, L + "decode_attention");
      // Llama 3.2's rope is llama3-scaled: its frequency table is the fused block's input 5.
      std::vector<std::string> inputs = {L + "attn_norm", L + "q_proj", L + "k_proj", L + "v_proj",
                                         "cache_position"};
      if (std::string(folder) == "llama-3.2-1b") inputs.push_back("rope_inv_freq");
      EXPECT_EQ(n.inputs, inputs);
      EXPECT_EQ(n.outputs,
                (std::vector<std::string>{L + "attn_out", L + "k_cache", L + "v_cache"}));
      for (const auto& v : n.inputs) EXPECT_NE(d.value(v), nullptr) << v;
      for (const auto& id : f.replaces) EXPECT_NE(d.node(id), nullptr) << id;
      bool nope = std::string(folder) == "smollm3-3b" && (n.layer + 1) % 4 == 0;
      EXPECT_EQ(attr<int64_t>(n, "rope", -1), nope ? 0 : 1);
      EXPECT_EQ(f.replaces.size(), nope ? 6u : 8u);
      EXPECT_EQ(attr<int64_t>(n, "causal", 0), 1);
      EXPECT_EQ(attr<int64_t>(n, "window_left", 0), -1);
      EXPECT_EQ(attr<int64_t>(n, "rotary_dim", 0),
                64 * (std::string(folder) == "smollm3-3b" ? 2 : 1));
    }
  }
  for (const char* folder : {"qwen3-0.6b", "gpt-oss-20b", "gemma-3-1b"})
    EXPECT_TRUE(
        phase(import_hf_config(model_config(folder), contiguous()), "decode").fusions.empty())
        << folder;
  ImportOptions batch2 = contiguous();
  batch2.batch = 2;
  EXPECT_TRUE(
      phase(import_hf_config(model_config("llama-3.2-1b"), batch2), "decode").fusions.empty());
}

TEST(Importer, DtypeOverrideAndOptions) {
  ImportOptions o = contiguous();
  o.dtype_override = "f32";
  Graph g = import_hf_config(model_config("qwen3-0.6b"), o);
  EXPECT_EQ(value(g.phases[0], "l0.q_proj").dtype, SY_DTYPE_F32);
  EXPECT_EQ(value(g.phases[0], "tokens").dtype, SY_DTYPE_I64);
  // A model folder stands for its config.json.
  EXPECT_EQ(import_hf_config((kExamplesDir / "models" / "qwen3-0.6b").string()).name, "qwen3-0.6b");

  auto expect_bad = [](const ImportOptions& bad, const std::string& word) {
    try {
      import_hf_config_json(llama_tiny(), "tiny.json", bad);
      ADD_FAILURE() << "accepted " << word;
    } catch (const Error& e) {
      EXPECT_EQ(e.code, Errc::bad_config);
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  ImportOptions b = contiguous();
  b.batch = 0;
  expect_bad(b, "batch");
  b = contiguous();
  b.context = 10'000'001;
  expect_bad(b, "context");
  b = contiguous();
  b.max_batch_tokens = -3;
  expect_bad(b, "max_batch_tokens");
  // A contiguous step fills at most the cache: more than the context is capped, and recorded
  // for the plan to say (the paged layout's budget, which the planner may try first, is larger).
  b = contiguous();
  b.max_batch_tokens = 5000;
  const Graph capped = import_hf_config_json(llama_tiny(), "tiny.json", b);
  EXPECT_EQ(capped.bounds.max_batch_tokens, b.context);
  EXPECT_EQ(capped.bounds.max_batch_tokens_asked, 5000);
  EXPECT_EQ(
      import_hf_config_json(llama_tiny(), "tiny.json", contiguous()).bounds.max_batch_tokens_asked,
      0);
  b = contiguous();
  b.dtype_override = "int4";
  expect_bad(b, "dtype_override");
  // Each size is fine on its own, the logits are not: checked, not overflowed.
  b = contiguous();
  b.batch = 1'000'000;
  b.context = 10'000'000;
  b.max_batch_tokens = 10'000'000;
  json big = llama_tiny();
  big["vocab_size"] = 10'000'000;
  try {
    import_hf_config_json(big, "big.json", b);
    ADD_FAILURE() << "accepted a graph of more than 2^50 elements";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_config);
    EXPECT_NE(std::string(e.what()).find("2^50"), std::string::npos) << e.what();
  }
}

TEST(Importer, UnknownModelTypeListsTheSupportedOnes) {
  json c = llama_tiny();
  c["model_type"] = "mamba";
  try {
    import_hf_config_json(c, "m.json", {});
    FAIL() << "accepted mamba";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::unknown_model_type);
    std::string what = e.what();
    EXPECT_NE(what.find("mamba"), std::string::npos);
    EXPECT_NE(what.find("m.json"), std::string::npos);
    for (const auto& t : supported_model_types()) EXPECT_NE(what.find(t), std::string::npos) << t;
  }
  auto types = supported_model_types();
  for (const char* t : {"llama", "qwen3", "smollm3", "gemma3", "gemma3_text", "gpt_oss"})
    EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << t;
}

// A config edit and the field the error must name.
struct BadCase {
  const char* name;
  json (*edit)(json);
  const char* field;
};

const BadCase kBadConfigs[] = {
    {"missing hidden_size",
     [](json c) {
       c.erase("hidden_size");
       return c;
     },
     "hidden_size"},
    {"missing model_type",
     [](json c) {
       c.erase("model_type");
       return c;
     },
     "model_type"},
    {"zero heads",
     [](json c) {
       c["num_attention_heads"] = 0;
       return c;
     },
     "num_attention_heads"},
    {"heads not divisible",
     [](json c) {
       c["num_key_value_heads"] = 3;
       return c;
     },
     "num_key_value_heads"},
    {"more kv heads than heads",
     [](json c) {
       c["num_key_value_heads"] = 8;
       return c;
     },
     "num_key_value_heads"},
    {"negative size",
     [](json c) {
       c["intermediate_size"] = -5;
       return c;
     },
     "intermediate_size"},
    {"zero intermediate",
     [](json c) {
       c["intermediate_size"] = 0;
       return c;
     },
     "intermediate_size"},
    {"10^12 layers",
     [](json c) {
       c["num_hidden_layers"] = int64_t(1'000'000'000'000);
       return c;
     },
     "num_hidden_layers"},
    {"1001 layers",
     [](json c) {
       c["num_hidden_layers"] = 1001;
       return c;
     },
     "num_hidden_layers"},
    {"uint64 max layers",
     [](json c) {
       c["num_hidden_layers"] = std::numeric_limits<uint64_t>::max();
       return c;
     },
     "num_hidden_layers"},
    {"string where number expected",
     [](json c) {
       c["hidden_size"] = "2048";
       return c;
     },
     "hidden_size"},
    {"float size",
     [](json c) {
       c["hidden_size"] = 64.5;
       return c;
     },
     "hidden_size"},
    {"bool size",
     [](json c) {
       c["vocab_size"] = true;
       return c;
     },
     "vocab_size"},
    {"null required",
     [](json c) {
       c["vocab_size"] = nullptr;
       return c;
     },
     "vocab_size"},
    {"vocab over 10^7",
     [](json c) {
       c["vocab_size"] = 10'000'001;
       return c;
     },
     "vocab_size"},
    {"hidden over 10^6",
     [](json c) {
       c["hidden_size"] = 1'000'001;
       return c;
     },
     "hidden_size"},
    {"absurd head_dim",
     [](json c) {
       c["head_dim"] = 100'000;
       c["num_attention_heads"] = 100;
       return c;
     },
     "head_dim"},
    {"hidden not divisible by heads",
     [](json c) {
       c["num_attention_heads"] = 6;
       c["num_key_value_heads"] = 6;
       return c;
     },
     "head_dim"},
    {"model_type not a string",
     [](json c) {
       c["model_type"] = 7;
       return c;
     },
     "model_type"},
    {"unknown torch_dtype",
     [](json c) {
       c["torch_dtype"] = "int8";
       return c;
     },
     "torch_dtype"},
    {"negative eps",
     [](json c) {
       c["rms_norm_eps"] = -1e-6;
       return c;
     },
     "rms_norm_eps"},
    {"string rope_theta",
     [](json c) {
       c["rope_theta"] = "big";
       return c;
     },
     "rope_theta"},
    {"odd rotary dim",
     [](json c) {
       c["partial_rotary_factor"] = 0.1;
       return c;
     },
     "partial_rotary_factor"},
    {"tie not a bool",
     [](json c) {
       c["tie_word_embeddings"] = "yes";
       return c;
     },
     "tie_word_embeddings"},
    {"layer_types wrong length",
     [](json c) {
       c["layer_types"] = {"full_attention"};
       return c;
     },
     "layer_types"},
    {"layer_types unknown entry",
     [](json c) {
       c["model_type"] = "qwen2";
       c["layer_types"] = {"full_attention", "chunked_attention"};
       return c;
     },
     "layer_types[1]"},
    {"sliding without window",
     [](json c) {
       c["model_type"] = "qwen2";
       c["layer_types"] = {"full_attention", "sliding_attention"};
       return c;
     },
     "sliding_window"},
    {"smollm3 bad no_rope_layers",
     [](json c) {
       c["model_type"] = "smollm3";
       c["no_rope_layers"] = {1, 2};
       return c;
     },
     "no_rope_layers[1]"},
    {"gemma3 without text_config",
     [](json c) {
       c["model_type"] = "gemma3";
       return c;
     },
     "text_config"},
    {"gemma3 text_config field",
     [](json c) {
       json t = c;
       t["hidden_size"] = -1;
       return json{{"model_type", "gemma3"}, {"text_config", t}};
     },
     "text_config.hidden_size"},
    {"gpt_oss without experts",
     [](json c) {
       c["model_type"] = "gpt_oss";
       c["experts_per_token"] = 2;
       return c;
     },
     "num_local_experts"},
    {"gpt_oss quantized by another method",
     [](json c) {
       c["model_type"] = "gpt_oss";
       c["num_local_experts"] = 4;
       c["num_experts_per_tok"] = 2;
       c["quantization_config"] = {{"quant_method", "gptq"}};
       return c;
     },
     "quantization_config.quant_method"},
    {"gpt_oss mxfp4 with experts left unquantized",
     [](json c) {
       c["model_type"] = "gpt_oss";
       c["num_local_experts"] = 4;
       c["num_experts_per_tok"] = 2;
       c["quantization_config"] = {{"quant_method", "mxfp4"},
                                   {"modules_to_not_convert", {"model.layers.*.mlp.experts"}}};
       return c;
     },
     "quantization_config.modules_to_not_convert"},
    {"gpt_oss swiglu_limit 0",
     [](json c) {
       c["model_type"] = "gpt_oss";
       c["num_local_experts"] = 4;
       c["num_experts_per_tok"] = 2;
       c["swiglu_limit"] = 0;
       return c;
     },
     "swiglu_limit"},
    {"gpt_oss more active experts than experts",
     [](json c) {
       c["model_type"] = "gpt_oss";
       c["num_local_experts"] = 4;
       c["num_experts_per_tok"] = 5;
       return c;
     },
     "num_experts_per_tok"},
};

TEST(Importer, MalformedConfigsAreBadConfigErrorsNamingTheField) {
  for (const auto& bc : kBadConfigs) {
    SCOPED_TRACE(bc.name);
    try {
      import_hf_config_json(bc.edit(llama_tiny()), "bad/config.json", {});
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code, Errc::bad_config) << e.what();
      EXPECT_NE(std::string(e.what()).find(bc.field), std::string::npos) << e.what();
      EXPECT_NE(e.where.find("bad/config.json"), std::string::npos) << e.where;
    }
  }
  for (json not_object : {json::array({1, 2}), json("llama"), json(3), json(nullptr)}) {
    try {
      import_hf_config_json(not_object, "x.json", {});
      ADD_FAILURE() << "accepted " << not_object.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.code, Errc::bad_config);
      EXPECT_NE(std::string(e.what()).find("object"), std::string::npos) << e.what();
    }
  }
}

TEST(Importer, UnreadableOrInvalidFiles) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "sy_importer_test";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  try {
    import_hf_config(write("syntax.json", "{\n  \"model_type\": \"llama\",\n  oops\n}"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::json_syntax);
    EXPECT_NE(e.where.find("syntax.json:3:"), std::string::npos) << e.where;
  }
  try {
    import_hf_config(write("array.json", "[]"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_config);
  }
  try {
    import_hf_config((dir / "missing.json").string());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_config);
  }
  std::filesystem::remove_all(dir);
}

// Many small random edits of a real config: each imports or is an Error, nothing else.
TEST(Importer, RandomEditsNeverCrash) {
  json base = json::parse(std::ifstream(model_config("gpt-oss-20b")));
  base["num_hidden_layers"] = 2;  // small graphs: hundreds of imports
  base["layer_types"] = {"sliding_attention", "full_attention"};
  const json values[] = {json(nullptr),
                         json(-1),
                         json(0),
                         json(1),
                         json(3),
                         json(1e300),
                         json(-0.5),
                         json("x"),
                         json::array(),
                         json::object(),
                         json(true),
                         json(std::numeric_limits<int64_t>::max()),
                         json(std::numeric_limits<uint64_t>::max())};
  std::vector<std::string> keys;
  for (const auto& [k, v] : base.items()) keys.push_back(k);
  size_t imported = 0, refused = 0;
  for (const auto& key : keys)
    for (const auto& v : values) {
      json c = base;
      c[key] = v;
      ImportOptions small = contiguous();
      small.max_batch_tokens = 4;
      small.context = 8;
      try {
        import_hf_config_json(c, "fuzz.json", small);
        ++imported;
      } catch (const Error& e) {
        EXPECT_TRUE(e.code == Errc::bad_config || e.code == Errc::unknown_model_type)
            << e.code << " " << e.what();
        ++refused;
      }
    }
  EXPECT_GT(imported, 0u);
  EXPECT_GT(refused, 0u);
}

TEST(Importer, HandWrittenExampleGraphsLoad) {
  Graph tiny = load_graph_file((kExamplesDir / "graphs" / "tiny_decoder_decode.json").string());
  ASSERT_EQ(tiny.phases.size(), 1u);
  EXPECT_EQ(tiny.phases[0].name, "decode");
  EXPECT_EQ(tiny.phases[0].fusions.size(), 2u);
  EXPECT_EQ(tiny.phases[0].nodes.size(), 2u * 17 + 4);
  Graph sinks = load_graph_file((kExamplesDir / "graphs" / "attention_sinks.json").string());
  ASSERT_EQ(sinks.phases.size(), 1u);
  const Node& a = sinks.phases[0].nodes.at(0);
  EXPECT_EQ(a.op, SY_OP_ATTENTION);
  EXPECT_TRUE(op_desc(sinks.phases[0], a).required_features() & SY_FEATURE_BIT(SY_FEATURE_SINKS));
}

}  // namespace
}  // namespace sy
