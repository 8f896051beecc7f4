// Internal to importer/: the checked reading of a config (ConfigReader), the architecture-neutral
// description of a decoder it produces (ModelSpec), the per-family readers and the graph
// builder that turns a ModelSpec into phases.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/importer/importer.hpp"

namespace sy::importer {

// Reads fields of one config object with a path for errors ("config.json:text_config.head_dim").
// Every failure is Error Errc::bad_config naming the file and the field. `defaults` (an object)
// supplies values the Hugging Face config class would default to when the field is absent.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string file, std::string prefix,
               nlohmann::json defaults = nlohmann::json::object());
  // The same object with more defaults (the config's own values still win).
  ConfigReader with_defaults(const nlohmann::json& more) const;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const;
  // Present and not null (in the config or its defaults).
  bool has(const char* field) const;
  // The field's JSON (config or defaults), or nullptr when absent or null.
  const nlohmann::json* raw(const char* field) const { return find(field); }
  // Every key of the config object itself (not of its defaults).
  std::vector<std::string> keys() const;
  // The config has the field, with the value null (which may differ from the default).
  bool explicitly_null(const char* field) const;

  // An integer size in [lo, hi]; `fallback` when absent (required when no fallback).
  int64_t size(const char* field, int64_t lo, int64_t hi,
               std::optional<int64_t> fallback = std::nullopt) const;
  // A finite number in [lo, hi]; `fallback` when absent.
  double number(const char* field, double lo, double hi,
                std::optional<double> fallback = std::nullopt) const;
  bool boolean(const char* field, bool fallback) const;
  std::string string(const char* field) const;
  // An array of exactly `n` elements, or nullptr when absent.
  const nlohmann::json* array(const char* field, size_t n) const;

  const std::string& file() const { return file_; }
  // The path of this object's fields in the file ("" or "text_config.").
  const std::string& prefix() const { return prefix_; }
  std::string where(const std::string& field) const;

 private:
  const nlohmann::json* find(const char* field) const;
  const nlohmann::json& j_;
  std::string file_, prefix_;
  nlohmann::json defaults_;
};

// A layer's rotary embedding: theta^(-2i/R), or a scaled rope's frequency table (linear,
// llama3, yarn; f32 as transformers keeps it) and the factor on cos and sin.
struct RopeSpec {
  double theta = 10000;
  std::vector<float> inv_freq;  // empty: theta^(-2i/R)
  double attention_factor = 1.0;
  std::string table;  // the graph constant holding inv_freq, when there is one
};

struct LayerSpec {
  bool rope = true;  // false on SmolLM3's NoPE layers
  RopeSpec rope_spec;
  int64_t window_left = -1;  // keys before the query a sliding layer sees; -1 = full attention
  bool dense_mlp = false;    // a mixture-of-experts model's dense layer (Qwen3-MoE's mlp_only)
};

// One decoder, whatever family it came from.
struct ModelSpec {
  std::string model_type;  // as the config names it
  sy_dtype dtype = SY_DTYPE_BF16;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0,
          vocab = 0, rotary_dim = 0;
  double eps = 1e-6;
  double scale = 0;          // attention scale, 0 = 1/sqrt(head_dim)
  double softcap = 0;        // attention logit softcap, 0 = none
  double final_softcap = 0;  // logits = c·tanh(logits / c) (Gemma 2), 0 = none
  bool qk_norm = false, mlp_bias = false, sinks = false;
  bool qkv_bias = false, o_bias = false;  // attention_bias sets both; Qwen2 has q/k/v only
  bool tie_embeddings = false;
  bool gemma = false;   // four norms per layer, rms_norm weight_offset 1, embedding scaled
  std::string gelu;     // "" = silu_mul; else gelu_mul with this `approximate` ("tanh", "none")
  int64_t experts = 0;  // MoE: num_local_experts (0 = dense MLP)
  int64_t experts_per_token = 0;
  int64_t expert_intermediate = 0;  // each expert's width (Qwen3-MoE's moe_intermediate_size)
  bool router_bias = false;         // gpt-oss: a biased router
  bool expert_bias = false;         // gpt-oss: biased gate, up and down per expert
  // The experts' activation: gpt-oss's clamped SwiGLU (swiglu_alpha, swiglu_limit), else silu.
  bool swiglu_limit = false;
  double swiglu_alpha = 0, swiglu_limit_value = 0;
  // The dtype the checkpoint stores the expert matrices in when it differs from `dtype`
  // (quantization_config mxfp4); weight_dtypes of the import options still win.
  std::optional<sy_dtype> expert_dtype;
  std::vector<LayerSpec> layer;
};

// Family readers: fill a ModelSpec from a config object (already unwrapped from text_config).
ModelSpec read_llama_family(const ConfigReader& r, const std::string& model_type);
ModelSpec read_gemma(const ConfigReader& r, const std::string& model_type);  // gemma2, gemma3
ModelSpec read_gpt_oss(const ConfigReader& r, const std::string& model_type);
ModelSpec read_qwen3_moe(const ConfigReader& r, const std::string& model_type);

// Fields every family shares (sizes, heads, dtype, norms, biases), with the family's defaults.
// The rope is read afterwards (read_rope), once the layers' windows are known.
struct CommonDefaults {
  bool tie_embeddings = false, attention_bias = false;
  double eps = 1e-6;
  std::optional<int64_t> head_dim;  // when the family has a default head_dim
};
void read_common(const ConfigReader& r, const CommonDefaults& d, ModelSpec& m);

// rotary_dim = head_dim × partial_rotary_factor (from the rope dict when it has one, else the
// top-level key), even and at least 2.
void read_rotary_dim(const ConfigReader& r, std::optional<double> from_rope_dict, ModelSpec& m);
// One rope for every layer: rope_parameters / rope_scaling / rope_theta (rope_config.cpp).
void read_rope(const ConfigReader& r, double default_theta, ModelSpec& m);
// Gemma 3: a rope per layer type (rope_parameters.{full,sliding}_attention, or rope_theta with
// rope_scaling for full layers and rope_local_base_freq for sliding ones).
void read_rope_by_layer_type(const ConfigReader& r, double full_theta, double sliding_theta,
                             ModelSpec& m);
// Sliding layers from `layer_types` (an array of "full_attention"/"sliding_attention") when
// present; returns false when the config has none. Hugging Face's sliding_window W lets a query
// see W keys including itself, so window_left = W - 1.
bool read_layer_types(const ConfigReader& r, ModelSpec& m);

// The MLP activation from `field` (hidden_act / hidden_activation): silu, or a gelu variant.
void read_activation(const ConfigReader& r, const char* field, const char* fallback, ModelSpec& m);

// Builds both phases and validates them; throws Error.
Graph build_graph(const ModelSpec& m, const ImportOptions& o, const std::string& file);

}  // namespace sy::importer
