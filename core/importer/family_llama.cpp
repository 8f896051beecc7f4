// Llama-shaped decoders: llama, qwen3 (q_norm/k_norm over the head dimension) and smollm3
// (NoPE: no rotary embedding on every fourth layer). Defaults are those of the transformers
// config classes (LlamaConfig, Qwen3Config, SmolLM3Config). And Switchyard's own test
// architecture switchyard_sinks_test: a llama with gpt-oss's learnable attention sinks (one f32
// logit per query head, "model.layers.N.self_attn.sinks") and a dense MLP, which no Hugging Face
// class has: `make-test-model --shape tiny-sinks` writes one, so sinks run end to end.
#include <string>

#include "core/importer/model_spec.hpp"

namespace sy::importer {
namespace {

// SmolLM3: `no_rope_layers[i] == 0` means layer i has no rope; without the list, every
// `no_rope_layer_interval`-th layer (i + 1 divisible by it) has none.
void read_nope_layers(const ConfigReader& r, ModelSpec& m) {
  if (const auto* flags = r.array("no_rope_layers", static_cast<size_t>(m.layers))) {
    for (size_t i = 0; i < flags->size(); ++i) {
      const auto& f = (*flags)[i];
      bool valid = f.is_boolean() || (f.is_number_integer() && (f == 0 || f == 1));
      if (!valid)
        r.fail("no_rope_layers[" + std::to_string(i) + "]", "must be 0 or 1, got " + f.dump());
      m.layer[i].rope = f.is_boolean() ? f.get<bool>() : f.get<int64_t>() != 0;
    }
    return;
  }
  int64_t interval = r.size("no_rope_layer_interval", 1, 1'000'000, 4);
  for (int64_t i = 0; i < m.layers; ++i) m.layer[i].rope = (i + 1) % interval != 0;
}

// Qwen3 without `layer_types`: with use_sliding_window, layers from max_window_layers on slide.
void read_qwen3_windows(const ConfigReader& r, ModelSpec& m) {
  if (read_layer_types(r, m) || !r.boolean("use_sliding_window", false)) return;
  int64_t window = r.size("sliding_window", 1, int64_t(1) << 31);
  int64_t first = r.size("max_window_layers", 0, 1000, m.layers);
  for (int64_t i = first; i < m.layers; ++i) m.layer[i].window_left = window - 1;
}

}  // namespace

ModelSpec read_llama_family(const ConfigReader& r, const std::string& model_type) {
  ModelSpec m;
  m.model_type = model_type;
  CommonDefaults d;
  if (model_type == "qwen3") {
    d.head_dim = 128;
  } else if (model_type == "smollm3") {
    d.tie_embeddings = true;
    d.rope_theta = 2'000'000;
  }
  read_common(r, d, m);
  read_activation(r, "hidden_act", "silu", m);
  m.mlp_bias = r.boolean("mlp_bias", false);
  if (model_type == "qwen3") {
    m.qk_norm = true;
    read_qwen3_windows(r, m);
  } else {
    read_layer_types(r, m);
  }
  if (model_type == "smollm3") read_nope_layers(r, m);
  m.sinks = model_type == "switchyard_sinks_test";
  return m;
}

}  // namespace sy::importer
