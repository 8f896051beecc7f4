// Gemma 3 text decoders (model_type gemma3_text, or the text_config of a gemma3 config):
// four rms_norms per layer with weight_offset 1 (y = x̂·(1 + w)), q_norm/k_norm, gelu_mul with
// the tanh approximation, embeddings scaled by sqrt(hidden_size), attention scale
// query_pre_attn_scalar^-0.5, and sliding-window layers (with their own rope base,
// rope_local_base_freq) interleaved with global ones.
#include <cmath>

#include "core/importer/model_spec.hpp"

namespace sy::importer {

ModelSpec read_gemma3(const ConfigReader& base, const std::string& model_type) {
  // Gemma3TextConfig's defaults: gemma3 text_configs (e.g. gemma-3-4b-it) omit these fields.
  const ConfigReader r = base.with_defaults({{"vocab_size", 262208},
                                             {"num_attention_heads", 8},
                                             {"num_key_value_heads", 4},
                                             {"head_dim", 256},
                                             {"query_pre_attn_scalar", 256},
                                             {"sliding_window", 4096},
                                             {"sliding_window_pattern", 6},
                                             {"rope_local_base_freq", 10000.0}});
  ModelSpec m;
  m.model_type = model_type;
  CommonDefaults d;
  d.tie_embeddings = true;
  d.rope_theta = 1'000'000;
  read_common(r, d, m);
  read_activation(r, "hidden_activation", "gelu_pytorch_tanh", m);
  m.gemma = true;
  m.qk_norm = true;

  double scalar = r.number("query_pre_attn_scalar", 0, 1e12);
  if (scalar <= 0) r.fail("query_pre_attn_scalar", "must be positive");
  double scale = 1.0 / std::sqrt(scalar), natural = 1.0 / std::sqrt(double(m.head_dim));
  m.scale = std::abs(scale - natural) > 1e-9 * natural ? scale : 0.0;

  double local_theta = r.number("rope_local_base_freq", 0, 1e12);
  if (local_theta <= 0) r.fail("rope_local_base_freq", "must be positive");
  if (!read_layer_types(r, m)) {
    // Every `sliding_window_pattern`-th layer is global, the others slide.
    int64_t pattern = r.size("sliding_window_pattern", 1, 1000);
    int64_t window = r.size("sliding_window", 1, int64_t(1) << 31);
    for (int64_t i = 0; i < m.layers; ++i)
      if ((i + 1) % pattern != 0) m.layer[i].window_left = window - 1;
  }
  for (auto& l : m.layer)
    if (l.window_left >= 0) l.rope_theta = local_theta;
  return m;
}

}  // namespace sy::importer
