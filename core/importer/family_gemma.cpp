// Gemma 2 and Gemma 3 text decoders (model_type gemma2, gemma3_text, or the text_config of a
// gemma3 config), with the defaults of Gemma2Config / Gemma3TextConfig: four rms_norms per layer
// with weight_offset 1 (y = x̂·(1 + w)), gelu_mul with the tanh approximation, embeddings
// scaled by sqrt(hidden_size), attention scale query_pre_attn_scalar^-0.5, and sliding-window
// layers interleaved with global ones. Gemma 2 adds attention and final logit softcapping and
// alternates sliding and global layers; Gemma 3 adds q_norm/k_norm, slides five layers of six,
// and gives sliding layers a rope of their own.
#include <cmath>

#include "core/importer/model_spec.hpp"

namespace sy::importer {
namespace {

// A softcap the family defaults to: 0 (none) when the config says null.
double softcap(const ConfigReader& r, const char* field) {
  if (r.explicitly_null(field) || !r.has(field)) return 0;
  double v = r.number(field, 0, 1e9);
  if (v <= 0) r.fail(field, "must be positive, or null for none");
  return v;
}

// Sliding layers from layer_types, else every layer whose (index + 1) is not a multiple of the
// pattern (Gemma 2: 2, so even layers slide; Gemma 3: sliding_window_pattern, 6).
void read_windows(const ConfigReader& r, bool gemma2, ModelSpec& m) {
  if (read_layer_types(r, m)) return;
  int64_t pattern = 2;
  if (!gemma2) {
    const char* key =
        r.has("sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
    pattern = r.size(key, 1, 1000, 6);
  }
  int64_t window = r.size("sliding_window", 1, int64_t(1) << 31);
  for (int64_t i = 0; i < m.layers; ++i)
    if ((i + 1) % pattern != 0) m.layer[size_t(i)].window_left = window - 1;
}

}  // namespace

ModelSpec read_gemma(const ConfigReader& base, const std::string& model_type) {
  const bool gemma2 = model_type == "gemma2";
  // The config classes' defaults: real configs (e.g. gemma-3-4b-it's text_config) omit fields.
  const ConfigReader r = gemma2 ? base.with_defaults({{"vocab_size", 256000},
                                                      {"num_attention_heads", 8},
                                                      {"num_key_value_heads", 4},
                                                      {"head_dim", 256},
                                                      {"query_pre_attn_scalar", 256},
                                                      {"sliding_window", 4096},
                                                      {"attn_logit_softcapping", 50.0},
                                                      {"final_logit_softcapping", 30.0}})
                                : base.with_defaults({{"vocab_size", 262208},
                                                      {"num_attention_heads", 8},
                                                      {"num_key_value_heads", 4},
                                                      {"head_dim", 256},
                                                      {"query_pre_attn_scalar", 256},
                                                      {"sliding_window", 4096}});
  ModelSpec m;
  m.model_type = model_type;
  CommonDefaults d;
  d.tie_embeddings = true;
  read_common(r, d, m);
  read_activation(r, "hidden_activation", "gelu_pytorch_tanh", m);
  m.gemma = true;
  m.qk_norm = !gemma2;
  if (r.boolean("use_bidirectional_attention", false))
    r.fail("use_bidirectional_attention",
           "true makes attention bidirectional (an encoder); Switchyard imports causal decoders");

  double scalar = r.number("query_pre_attn_scalar", 0, 1e12);
  if (scalar <= 0) r.fail("query_pre_attn_scalar", "must be positive");
  double scale = 1.0 / std::sqrt(scalar), natural = 1.0 / std::sqrt(double(m.head_dim));
  m.scale = std::abs(scale - natural) > 1e-9 * natural ? scale : 0.0;
  m.softcap = softcap(r, "attn_logit_softcapping");
  m.final_softcap = softcap(r, "final_logit_softcapping");

  read_windows(r, gemma2, m);
  if (gemma2)
    read_rope(r, 10000, m);
  else
    read_rope_by_layer_type(r, 1'000'000, 10000, m);
  return m;
}

}  // namespace sy::importer
