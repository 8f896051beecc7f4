// gpt-oss: GQA attention with q/k/v/o biases, learnable sinks (one f32 logit per query head),
// sliding-window layers alternating with full ones, yarn rope, and a mixture-of-experts MLP: a
// biased router whose top experts_per_token logits are softmaxed (moe_router), then those
// experts' interleaved gate/up projections with biases, the clamped SwiGLU
// (up + 1)·g·σ(alpha·g), g = min(gate, limit), up clamped to ±limit, and the biased down
// projection, summed under the router's weights (moe_experts). MXFP4 checkpoints
// (quantization_config.quant_method "mxfp4") store the experts' three matrices as mxfp4 blocks.
#include "core/importer/model_spec.hpp"

namespace sy::importer {

namespace {

// quantization_config: only transformers' Mxfp4Config, whose experts are mxfp4 blocks. Its
// modules_to_not_convert may name the attention, router, embedding and head (never quantized
// here either); naming the experts would leave them unquantized, which no released checkpoint
// does, so it is refused rather than guessed.
void read_quantization(const ConfigReader& r, ModelSpec& m) {
  const nlohmann::json* q = r.raw("quantization_config");
  if (!q) return;
  if (!q->is_object()) r.fail("quantization_config", "must be an object");
  const ConfigReader qr(*q, r.file(), r.prefix() + "quantization_config.");
  for (const std::string& key : qr.keys())
    if (key != "quant_method" && key != "modules_to_not_convert")
      qr.fail(key.c_str(), "not a field of an mxfp4 quantization_config Switchyard honours");
  const std::string method = qr.string("quant_method");
  if (method != "mxfp4")
    qr.fail("quant_method",
            "'" + method + "' is not served (gpt-oss checkpoints are mxfp4 or unquantized)");
  if (const nlohmann::json* skip = qr.raw("modules_to_not_convert")) {
    if (!skip->is_array()) qr.fail("modules_to_not_convert", "must be an array of strings");
    for (const auto& s : *skip)
      if (!s.is_string() || s.get<std::string>().find("experts") != std::string::npos)
        qr.fail("modules_to_not_convert",
                "leaving the experts unquantized (or a non-string entry) is not served");
  }
  for (auto [field, size] :
       {std::pair{"hidden_size", m.hidden}, {"intermediate_size", m.intermediate}})
    if (size % 32 != 0)
      r.fail(field, std::to_string(size) +
                        " is not a multiple of 32: mxfp4 experts store their rows in blocks of 32");
  m.expert_dtype = SY_DTYPE_MXFP4;
}

}  // namespace

ModelSpec read_gpt_oss(const ConfigReader& r, const std::string& model_type) {
  ModelSpec m;
  m.model_type = model_type;
  CommonDefaults d;
  d.attention_bias = true;
  d.eps = 1e-5;
  d.head_dim = 64;
  read_common(r, d, m);
  read_activation(r, "hidden_act", "silu", m);
  if (!m.gelu.empty())
    r.fail("hidden_act", "gpt-oss's experts compute their clamped SwiGLU; a gelu is not theirs");
  m.sinks = true;

  m.experts = r.size("num_local_experts", 1, 100'000);
  const char* per_token =
      r.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
  m.experts_per_token = r.size(per_token, 1, 100'000);
  if (m.experts_per_token > m.experts)
    r.fail(per_token,
           "the router picks " + std::to_string(m.experts_per_token) +
               " experts per token out of num_local_experts = " + std::to_string(m.experts));
  m.expert_intermediate = m.intermediate;
  m.router_bias = m.expert_bias = true;
  m.swiglu_limit = true;
  m.swiglu_alpha = r.number("swiglu_alpha", -1e6, 1e6, 1.702);  // GptOssConfig's defaults
  m.swiglu_limit_value = r.number("swiglu_limit", 1e-6, 1e6, 7.0);
  read_quantization(r, m);

  if (!read_layer_types(r, m)) {
    // GptOssConfig's default: even layers slide, odd layers attend to everything.
    int64_t window = r.size("sliding_window", 1, int64_t(1) << 31, 128);
    for (int64_t i = 0; i < m.layers; i += 2) m.layer[i].window_left = window - 1;
  }
  // GptOssConfig's default rope, when the config names none: yarn, factor 32, untruncated.
  const bool named = r.has("rope_parameters") || r.has("rope_scaling");
  const ConfigReader rope = named
                                ? r
                                : r.with_defaults({{"rope_parameters",
                                                    {{"rope_type", "yarn"},
                                                     {"factor", 32.0},
                                                     {"beta_fast", 32.0},
                                                     {"beta_slow", 1.0},
                                                     {"truncate", false},
                                                     {"original_max_position_embeddings", 4096}}}});
  read_rope(rope, 150000, m);
  return m;
}

}  // namespace sy::importer
