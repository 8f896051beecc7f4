// Llama-shaped decoders, with the defaults of their transformers config classes:
//   llama    LlamaConfig
//   mistral  MistralConfig: every layer slides over sliding_window keys (4096 when absent, none
//            when null)
//   qwen2    Qwen2Config: q/k/v biases (no o bias), sliding layers from max_window_layers on
//            when use_sliding_window
//   qwen3    Qwen3Config: q_norm/k_norm over the head dimension, windows as qwen2
//   smollm3  SmolLM3Config: NoPE (no rotary embedding on every fourth layer), the NoPE layers
//            slide when use_sliding_window
// and Switchyard's own test architecture switchyard_sinks_test: a llama with gpt-oss's learnable
// attention sinks (one f32 logit per query head, "model.layers.N.self_attn.sinks") and a dense
// MLP, which no Hugging Face class has: `make-test-model --shape tiny-sinks` writes one, so sinks
// run end to end.
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

// The window of sliding layers: sliding_window when use_sliding_window (transformers sets it to
// None otherwise, which makes even a "sliding_attention" layer attend to everything).
std::optional<int64_t> qwen_window(const ConfigReader& r) {
  if (!r.boolean("use_sliding_window", false)) return std::nullopt;
  if (!r.has("sliding_window")) return std::nullopt;
  return r.size("sliding_window", 1, int64_t(1) << 31);
}

void set_window(ModelSpec& m, size_t layer, int64_t window) {
  m.layer[layer].window_left = window - 1;
}

// Qwen2/Qwen3: layer_types when given, else sliding from max_window_layers on.
void read_qwen_windows(const ConfigReader& r, ModelSpec& m) {
  std::optional<int64_t> window = qwen_window(r);
  if (const auto* types = r.array("layer_types", static_cast<size_t>(m.layers))) {
    read_layer_types(r, m);  // validates the entries
    for (auto& l : m.layer) l.window_left = -1;
    for (size_t i = 0; i < types->size(); ++i)
      if ((*types)[i] == "sliding_attention" && window) set_window(m, i, *window);
    return;
  }
  if (!window) return;
  int64_t first = r.size("max_window_layers", 0, 1000, 28);
  for (int64_t i = first; i < m.layers; ++i) set_window(m, size_t(i), *window);
}

// SmolLM3: layer_types when given, else the NoPE layers slide when use_sliding_window.
void read_smollm3_windows(const ConfigReader& r, ModelSpec& m) {
  if (read_layer_types(r, m)) return;
  if (!r.boolean("use_sliding_window", false) || !r.has("sliding_window")) return;
  int64_t window = r.size("sliding_window", 1, int64_t(1) << 31);
  for (size_t i = 0; i < m.layer.size(); ++i)
    if (!m.layer[i].rope) set_window(m, i, window);
}

// Mistral: one window for every layer.
void read_mistral_window(const ConfigReader& r, ModelSpec& m) {
  if (r.explicitly_null("sliding_window")) return;  // Mistral v0.3: no window
  int64_t window = r.size("sliding_window", 1, int64_t(1) << 31, 4096);
  for (size_t i = 0; i < m.layer.size(); ++i) set_window(m, i, window);
}

// SmolLM2 configs (nanotron) carry rope_interleaved; transformers ignores it and rotates halves.
void refuse_interleaved_rope(const ConfigReader& r) {
  if (r.boolean("rope_interleaved", false))
    r.fail("rope_interleaved",
           "true asks for interleaved rope, which the Hugging Face llama "
           "classes (the checkpoint's reference) never apply");
}

}  // namespace

ModelSpec read_llama_family(const ConfigReader& r, const std::string& model_type) {
  ModelSpec m;
  m.model_type = model_type;
  CommonDefaults d;
  double theta = 10000;
  if (model_type == "qwen3") {
    d.head_dim = 128;
  } else if (model_type == "smollm3") {
    d.tie_embeddings = true;
    theta = 2'000'000;
  }
  read_common(r, d, m);
  read_activation(r, "hidden_act", "silu", m);
  refuse_interleaved_rope(r);
  if (model_type == "llama" || model_type == "smollm3" || model_type == "switchyard_sinks_test")
    m.mlp_bias = r.boolean("mlp_bias", false);
  if (model_type == "qwen2") {
    m.qkv_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
    m.o_bias = false;
    // Qwen2-VL's multimodal rope, carried false by text checkpoints' configs.
    if (r.boolean("use_mrope", false))
      r.fail("use_mrope", "true is refused: the multimodal rope (3-D positions) is not supported");
  }
  if (model_type == "qwen3") m.qk_norm = true;
  if (model_type == "smollm3") read_nope_layers(r, m);

  if (model_type == "qwen2" || model_type == "qwen3")
    read_qwen_windows(r, m);
  else if (model_type == "smollm3")
    read_smollm3_windows(r, m);
  else if (model_type == "mistral")
    read_mistral_window(r, m);
  else
    read_layer_types(r, m);  // llama has none; the sinks test model alternates
  m.sinks = model_type == "switchyard_sinks_test";
  read_rope(r, theta, m);
  return m;
}

}  // namespace sy::importer
