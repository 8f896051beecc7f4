// gpt-oss: GQA attention with q/k/v/o biases, learnable sinks (one f32 logit per query head),
// sliding-window layers alternating with full ones, and a mixture-of-experts MLP.
//
// The MoE MLP is not expressible in vocabulary v1 (no router top-k, no gather/scatter of
// tokens to experts). The graph models it as what planning needs to see: the router matmul
// [H -> num_local_experts] (its logits are left unconsumed), then the dense compute of the
// experts_per_token active experts as ordinary matmuls whose weights stack those experts,
// [experts_per_token * intermediate_size, H] for gate/up and [H, experts_per_token *
// intermediate_size] for down, with their biases. Same op kinds, dtypes and residency questions
// as the real thing; not its numerics (see docs/graph-format.md).
#include "core/importer/model_spec.hpp"

namespace sy::importer {

ModelSpec read_gpt_oss(const ConfigReader& r, const std::string& model_type) {
  ModelSpec m;
  m.model_type = model_type;
  CommonDefaults d;
  d.attention_bias = true;
  d.eps = 1e-5;
  d.head_dim = 64;
  read_common(r, d, m);
  read_activation(r, "hidden_act", "silu", m);
  m.sinks = true;

  m.experts = r.size("num_local_experts", 1, 100'000);
  const char* per_token =
      r.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token";
  m.experts_per_token = r.size(per_token, 1, m.experts);
  if (m.experts_per_token > int64_t(100'000'000) / m.intermediate)
    r.fail(per_token, "experts_per_token * intermediate_size exceeds 10^8");

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
