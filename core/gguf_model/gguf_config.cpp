// GGUF metadata -> a Hugging Face config.json, and the dtypes of the quantized weights.
#include <algorithm>
#include <cmath>

#include "core/gguf_model/gguf_model.hpp"

namespace sy {
namespace {

using nlohmann::json;

const std::vector<std::string> kArchitectures = {"llama",   "qwen2",  "qwen3",  "qwen3moe",
                                                 "smollm3", "gemma2", "gemma3", "gpt-oss"};

// The config's model_type of a GGUF architecture.
std::string model_type_of(const std::string& arch) {
  if (arch == "gpt-oss") return "gpt_oss";
  if (arch == "gemma3") return "gemma3_text";
  if (arch == "qwen3moe") return "qwen3_moe";
  return arch;
}

[[noreturn]] void bad_file(const GgufFile& f, const std::string& what) {
  throw Error(Errc::bad_weights, "weights file is invalid: " + what, f.path());
}

// Reads the <arch>.* keys; each one read is marked, so the rest can be refused by name.
class MetadataReader {
 public:
  MetadataReader(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  const GgufValue* find(const std::string& suffix) {
    const std::string key = arch_ + "." + suffix;
    used_.push_back(key);
    return f_.value(key);
  }
  // A required integer in [lo, hi]: SY302 naming the key when absent or of another kind.
  int64_t integer(const std::string& suffix, int64_t lo, int64_t hi) {
    auto v = optional_integer(suffix, lo, hi);
    if (!v) bad_file(f_, "metadata '" + arch_ + "." + suffix + "' is missing");
    return *v;
  }
  std::optional<int64_t> optional_integer(const std::string& suffix, int64_t lo, int64_t hi) {
    const GgufValue* v = find(suffix);
    if (!v) return std::nullopt;
    auto n = v->as_int();
    if (!n || *n < lo || *n > hi)
      bad_file(f_, "metadata '" + arch_ + "." + suffix + "' is " + v->type_text() +
                       (n ? " " + std::to_string(*n) : "") + ", not an integer in [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return n;
  }
  std::optional<double> number(const std::string& suffix) {
    const GgufValue* v = find(suffix);
    if (!v) return std::nullopt;
    auto n = v->as_number();
    if (!n || !std::isfinite(*n))
      bad_file(f_, "metadata '" + arch_ + "." + suffix + "' is " + v->type_text() +
                       ", not a finite number");
    return n;
  }
  std::optional<std::string> text(const std::string& suffix) {
    const GgufValue* v = find(suffix);
    if (!v) return std::nullopt;
    if (v->type != GgufType::string)
      bad_file(f_,
               "metadata '" + arch_ + "." + suffix + "' is " + v->type_text() + ", not a string");
    return v->s;
  }
  bool used(const std::string& key) const {
    return std::find(used_.begin(), used_.end(), key) != used_.end();
  }

 private:
  const GgufFile& f_;
  std::string arch_;
  std::vector<std::string> used_;
};

// llama.cpp's rope.scaling.* as transformers' rope_scaling.
void read_rope_scaling(MetadataReader& r, const GgufFile& f, const std::string& arch, json& c,
                       std::vector<std::string>& conventions) {
  auto type = r.text("rope.scaling.type");
  auto factor = r.number("rope.scaling.factor");
  auto original = r.optional_integer("rope.scaling.original_context_length", 1, int64_t(1) << 40);
  r.find("rope.scaling.finetuned");  // informational
  if (!type || *type == "none") {
    if (factor && *factor != 1.0)
      throw Error(Errc::bad_config,
                  "invalid model config: field '" + arch + ".rope.scaling.factor' is " +
                      std::to_string(*factor) + " without a rope.scaling.type",
                  f.path());
    return;
  }
  if (*type != "linear" && *type != "yarn")
    throw Error(Errc::bad_config,
                "invalid model config: field '" + arch + ".rope.scaling.type' is '" + *type +
                    "', not one Switchyard computes (none, linear, yarn)",
                f.path());
  json s = {{"rope_type", *type}, {"factor", factor.value_or(1.0)}};
  if (original) s["original_max_position_embeddings"] = *original;
  // What llama.cpp's converter writes of a yarn rope_scaling, when the config had it:
  // beta_fast, beta_slow, attention_factor (transformers' names), and an extrapolation factor
  // that transformers does not have (1 is what its yarn computes).
  auto beta_fast = r.number("rope.scaling.yarn_beta_fast");
  auto beta_slow = r.number("rope.scaling.yarn_beta_slow");
  auto attn_factor = r.number("rope.scaling.yarn_attn_factor");
  auto ext_factor = r.number("rope.scaling.yarn_ext_factor");
  if ((beta_fast || beta_slow || attn_factor || ext_factor) && *type != "yarn")
    throw Error(Errc::bad_config,
                "invalid model config: field '" + arch + ".rope.scaling.yarn_*' is set but " +
                    arch + ".rope.scaling.type is '" + *type + "', not yarn",
                f.path());
  if (ext_factor && *ext_factor != 1.0)
    throw Error(
        Errc::bad_config,
        "invalid model config: field '" + arch + ".rope.scaling.yarn_ext_factor' is " +
            std::to_string(*ext_factor) +
            "; Switchyard computes yarn as transformers does (an extrapolation factor of 1)",
        f.path());
  if (beta_fast) s["beta_fast"] = *beta_fast;
  if (beta_slow) s["beta_slow"] = *beta_slow;
  if (attn_factor) s["attention_factor"] = *attn_factor;
  if (arch == "gpt-oss" && *type == "yarn") {
    // gpt-oss's untruncated ramp is never written; its betas are by the converter when the
    // config has them (older files lack them).
    s["truncate"] = false;
    if (!beta_fast) s["beta_fast"] = 32.0;
    if (!beta_slow) s["beta_slow"] = 1.0;
    conventions.push_back(std::string("yarn rope with truncate false") +
                          (beta_fast && beta_slow ? "" : ", beta_fast 32 and beta_slow 1") +
                          ", as gpt-oss's config.json has them (the GGUF file does not record " +
                          (beta_fast && beta_slow ? "truncate)" : "them)"));
  }
  c["rope_scaling"] = s;
}

// gpt-oss's mixture of experts and its sliding layers. The converter records neither which
// layers slide nor the SwiGLU clamp: both follow gpt-oss's released config (as llama.cpp does).
void read_gpt_oss(MetadataReader& r, const GgufFile& f, json& c,
                  std::vector<std::string>& conventions) {
  const int64_t experts = r.integer("expert_count", 1, 1 << 20);
  c["num_local_experts"] = experts;
  c["num_experts_per_tok"] = r.integer("expert_used_count", 1, 1 << 20);
  if (auto width = r.optional_integer("expert_feed_forward_length", 1, int64_t(1) << 24);
      width && *width != c["intermediate_size"].get<int64_t>())
    throw Error(Errc::bad_config,
                "invalid model config: field 'gpt-oss.expert_feed_forward_length' is " +
                    std::to_string(*width) + " but feed_forward_length is " +
                    c["intermediate_size"].dump() + ": gpt-oss's experts are the MLP",
                f.path());
  const int64_t layers = c["num_hidden_layers"];
  json types = json::array();
  for (int64_t i = 0; i < layers; ++i)
    types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  c["swiglu_alpha"] = 1.702;
  c["swiglu_limit"] = 7.0;
  c["attention_bias"] = f.find("blk.0.attn_q.bias") != nullptr;
  conventions.push_back(
      "sliding attention on the even layers (0, 2, …), full on the odd ones: gpt-oss's "
      "layer_types, which the GGUF file does not record");
  conventions.push_back(
      "the experts' SwiGLU clamp swiglu_limit 7.0 and slope swiglu_alpha 1.702: gpt-oss's "
      "config values, which the GGUF file does not record");
}

// Qwen3-MoE: experts on every layer, their router renormalised, as llama.cpp's qwen3moe graph
// computes it (no key records either; Qwen3-30B-A3B's and -235B-A22B's configs say the same).
void read_qwen3moe(MetadataReader& r, json& c, std::vector<std::string>& conventions) {
  c["num_experts"] = r.integer("expert_count", 1, 1 << 20);
  c["num_experts_per_tok"] = r.integer("expert_used_count", 1, 1 << 20);
  c["moe_intermediate_size"] = r.integer("expert_feed_forward_length", 1, int64_t(1) << 24);
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = json::array();
  conventions.push_back(
      "experts on every layer (no dense layers) and the chosen experts' router weights "
      "renormalised (norm_topk_prob true), as llama.cpp computes qwen3moe and released "
      "Qwen3-MoE configs say; the GGUF file records neither");
}

// What both Gemmas' files leave unsaid. The attention scale, which no GGUF key records:
// head_dim^-0.5, except for the 27B sizes (Gemma 2: 46 layers, Gemma 3: 62), whose
// query_pre_attn_scalar is hidden / heads; this is llama.cpp's rule (llama-model.cpp,
// LLM_TYPE_27B) and each 27B config's value. And the norms' stored w + 1 (gguf_weights.cpp).
void read_gemma_common(const std::string& arch, json& c, std::vector<std::string>& conv) {
  const int64_t layers = c["num_hidden_layers"], hidden = c["hidden_size"];
  const int64_t heads = c["num_attention_heads"];
  const int64_t head_dim = c.value("head_dim", hidden / heads);
  const bool size_27b = layers == (arch == "gemma2" ? 46 : 62);
  c["query_pre_attn_scalar"] = size_27b ? hidden / heads : head_dim;
  conv.push_back(size_27b ? "attention scale (hidden / heads)^-0.5, the 27B size's "
                            "query_pre_attn_scalar, which the GGUF file does not record "
                            "(llama.cpp decides it by the layer count, as here)"
                          : "attention scale head_dim^-0.5 (query_pre_attn_scalar = head_dim, "
                            "as every size but 27B has it), which the GGUF file does not record "
                            "(llama.cpp assumes the same)");
  conv.push_back(
      "the rms_norm weights less 1: the converter stored Gemma's (1 + w) as w + 1; taken off at "
      "load, as transformers' GGUF loader does");
}

// Gemma 2: the converter writes both softcaps and the window; the rest is Gemma2Config's (and
// llama.cpp's) choice, stated in the plan.
void read_gemma2(MetadataReader& r, json& c, std::vector<std::string>& conventions) {
  read_gemma_common("gemma2", c, conventions);
  c["hidden_activation"] = "gelu_pytorch_tanh";
  auto attn_cap = r.number("attn_logit_softcapping");
  auto final_cap = r.number("final_logit_softcapping");
  c["attn_logit_softcapping"] = attn_cap.value_or(50.0);
  c["final_logit_softcapping"] = final_cap.value_or(30.0);
  auto window = r.optional_integer("attention.sliding_window", 1, int64_t(1) << 31);
  c["sliding_window"] = window.value_or(4096);
  const int64_t layers = c["num_hidden_layers"];
  json types = json::array();
  for (int64_t i = 0; i < layers; ++i)
    types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  c["layer_types"] = types;
  std::string unsaid = "sliding attention on the even layers (0, 2, …), gelu (tanh)";
  if (!c.contains("rope_theta")) unsaid += ", rope base 10000";
  if (!attn_cap) unsaid += ", attention softcap 50";
  if (!final_cap) unsaid += ", final logit softcap 30";
  if (!window) unsaid += ", a window of 4096";
  conventions.push_back(unsaid +
                        ": Gemma2Config's defaults, which the GGUF file does not record "
                        "(llama.cpp assumes the same)");
}

// Gemma 3: what the converter leaves unsaid is Gemma3TextConfig's (and llama.cpp's) choice,
// each stated in the plan. Its norms are stored with the 1 of Gemma's (1 + w) added; the loader
// takes it off again (gguf_weights.cpp), as transformers' GGUF loader does.
void read_gemma3(MetadataReader& r, json& c, std::vector<std::string>& conventions) {
  read_gemma_common("gemma3", c, conventions);
  c["sliding_window_pattern"] = 6;
  // Newer converters write the sliding layers' base; older files leave it to the default.
  auto local_base = r.number("rope.freq_base_swa");
  c["rope_local_base_freq"] = local_base.value_or(10000.0);
  c["hidden_activation"] = "gelu_pytorch_tanh";
  if (auto cap = r.number("final_logit_softcapping"))
    c["final_logit_softcapping"] = *cap;
  else
    c["final_logit_softcapping"] = nullptr;
  c["attn_logit_softcapping"] = nullptr;
  if (auto window = r.optional_integer("attention.sliding_window", 1, int64_t(1) << 31))
    c["sliding_window"] = *window;
  conventions.push_back(
      std::string("Gemma 3's sliding window on five layers of six (every 6th layer global)") +
      (local_base ? "" : ", local rope base 10000") + ", gelu (tanh), no attention softcap" +
      (c["final_logit_softcapping"].is_null() ? ", no final softcap" : "") +
      ": Gemma3TextConfig's defaults, which the GGUF file "
      "does not record (llama.cpp and transformers' GGUF loader assume the same)");
}

// Every other <arch>.* key is refused by name; general.* is informational; tokenizer.* is the
// tokenizer's (gguf_tokenizer.cpp).
void refuse_unread(const MetadataReader& r, const GgufFile& f, const std::string& arch,
                   const std::vector<std::string>& allowed) {
  for (const auto& [key, value] : f.metadata()) {
    if (key.starts_with("general.") || key.starts_with("tokenizer.")) continue;
    if (r.used(key) || std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    throw Error(Errc::bad_config,
                "invalid model config: field '" + key +
                    "' is not one Switchyard knows the effect "
                    "of for architecture " +
                    arch +
                    "; if it changes nothing, accept it with "
                    "--allow-config-key " +
                    key,
                f.path());
  }
}

json config_of(MetadataReader& r, const GgufFile& f, const std::string& arch,
               std::vector<std::string>& conventions) {
  json c;
  c["model_type"] = model_type_of(arch);
  c["torch_dtype"] = "float32";  // activations; the weights keep their GGUF types
  c["hidden_size"] = r.integer("embedding_length", 1, int64_t(1) << 20);
  c["num_hidden_layers"] = r.integer("block_count", 1, 10000);
  c["num_attention_heads"] = r.integer("attention.head_count", 1, 65536);
  c["intermediate_size"] = r.integer("feed_forward_length", 1, int64_t(1) << 24);
  if (auto kv = r.optional_integer("attention.head_count_kv", 1, 65536))
    c["num_key_value_heads"] = *kv;
  if (auto ctx = r.optional_integer("context_length", 1, int64_t(1) << 40))
    c["max_position_embeddings"] = *ctx;
  auto eps = r.number("attention.layer_norm_rms_epsilon");
  if (!eps) bad_file(f, "metadata '" + arch + ".attention.layer_norm_rms_epsilon' is missing");
  c["rms_norm_eps"] = *eps;
  if (auto theta = r.number("rope.freq_base")) c["rope_theta"] = *theta;
  const int64_t heads = c["num_attention_heads"], hidden = c["hidden_size"];
  auto key = r.optional_integer("attention.key_length", 1, 65536);
  auto value = r.optional_integer("attention.value_length", 1, 65536);
  if (key && value && *key != *value)
    bad_file(f, "metadata '" + arch + ".attention.key_length' " + std::to_string(*key) +
                    " differs from value_length " + std::to_string(*value));
  const int64_t head_dim = key.value_or(hidden / heads);
  if (key) c["head_dim"] = *key;
  if (auto rot = r.optional_integer("rope.dimension_count", 1, 65536); rot && *rot != head_dim)
    throw Error(Errc::bad_config,
                "invalid model config: field '" + arch + ".rope.dimension_count' is " +
                    std::to_string(*rot) + " but the head dim is " + std::to_string(head_dim) +
                    ": partial rotary is not part of " + arch,
                f.path());
  if (auto vocab = r.optional_integer("vocab_size", 1, int64_t(1) << 31))
    c["vocab_size"] = *vocab;
  else if (const GgufValue* t = f.value("tokenizer.ggml.tokens"); t && !t->strings.empty())
    c["vocab_size"] = int64_t(t->strings.size());
  if (arch == "gpt-oss") {
    read_gpt_oss(r, f, c, conventions);
  } else if (arch == "qwen3moe") {
    read_qwen3moe(r, c, conventions);
  } else {
    if (auto experts = r.optional_integer("expert_count", 0, 1 << 20); experts && *experts > 0)
      throw Error(Errc::bad_config,
                  "invalid model config: field '" + arch + ".expert_count' is " +
                      std::to_string(*experts) + ": mixture-of-experts " + arch +
                      " GGUF models are not supported",
                  f.path());
    r.find("expert_used_count");
  }
  if (arch == "gemma3") {
    read_gemma3(r, c, conventions);
  } else if (arch == "gemma2") {
    read_gemma2(r, c, conventions);
  } else if (auto window = r.optional_integer("attention.sliding_window", 1, int64_t(1) << 31)) {
    c["sliding_window"] = *window;
    if (arch != "gpt-oss") c["use_sliding_window"] = true;
  }
  read_rope_scaling(r, f, arch, c, conventions);
  if (arch == "smollm3") {
    // The converter does not write SmolLM3's no_rope_layers; llama.cpp and candle both take
    // every 4th layer as NoPE, which is what SmolLM3-3B's config says.
    c["no_rope_layer_interval"] = 4;
    conventions.push_back(
        "no rotary embedding (NoPE) on every 4th layer (3, 7, 11, …): SmolLM3's "
        "no_rope_layer_interval 4, which the GGUF file does not record (llama.cpp and candle "
        "assume the same)");
  }
  c["tie_word_embeddings"] = f.find("output.weight") == nullptr;
  if (f.find("rope_freqs.weight"))
    bad_file(f, "tensor 'rope_freqs.weight' (llama 3's rope frequency table) is not supported yet");
  return c;
}

std::optional<sy_dtype> quantized_dtype(const GgmlType& t) {
  const std::string n = t.name;
  if (n == "Q8_0") return SY_DTYPE_Q8_0;
  if (n == "Q4_0") return SY_DTYPE_Q4_0;
  if (n == "Q4_1") return SY_DTYPE_Q4_1;
  if (n == "Q4_K") return SY_DTYPE_Q4_K;
  if (n == "Q5_K") return SY_DTYPE_Q5_K;
  if (n == "Q6_K") return SY_DTYPE_Q6_K;
  if (n == "Q5_0") return SY_DTYPE_Q5_0;
  if (n == "Q5_1") return SY_DTYPE_Q5_1;
  if (n == "IQ4_NL") return SY_DTYPE_IQ4_NL;
  if (n == "IQ4_XS") return SY_DTYPE_IQ4_XS;
  if (n == "Q2_K") return SY_DTYPE_Q2_K;
  if (n == "Q3_K") return SY_DTYPE_Q3_K;
  if (n == "MXFP4") return SY_DTYPE_MXFP4;
  return std::nullopt;
}

bool is_float_type(const GgmlType& t) {
  const std::string n = t.name;
  return n == "F32" || n == "F16" || n == "BF16";
}

// The quantized dtype of every weight the model has, by importer value name; SY302 for a tensor
// of a type Switchyard serves neither as float nor as one of its quantized types.
std::map<std::string, sy_dtype> weight_dtypes_of(const GgufFile& f, const std::string& arch,
                                                 int64_t layers) {
  std::vector<std::string> names = {"embed_tokens", "lm_head", "norm"};
  for (int64_t i = 0; i < layers; ++i)
    for (const char* w : {"q_proj",
                          "k_proj",
                          "v_proj",
                          "o_proj",
                          "gate_proj",
                          "up_proj",
                          "down_proj",
                          "input_layernorm",
                          "post_attention_layernorm",
                          "pre_feedforward_layernorm",
                          "post_feedforward_layernorm",
                          "q_norm",
                          "k_norm",
                          "q_proj_bias",
                          "k_proj_bias",
                          "v_proj_bias",
                          "router",
                          "experts.gate_proj",
                          "experts.up_proj",
                          "experts.down_proj"})
      names.push_back("l" + std::to_string(i) + "." + w);
  std::map<std::string, sy_dtype> out;
  for (const std::string& name : names) {
    auto tensor_name = gguf_tensor_name(arch, name);
    const GgufTensor* t = tensor_name ? f.find(*tensor_name) : nullptr;
    if (!t) continue;
    if (auto q = quantized_dtype(*t->type)) {
      out[name] = *q;
    } else if (!is_float_type(*t->type)) {
      throw Error(Errc::weight_type_unsupported,
                  "tensor '" + t->name + "' is " + t->type->name +
                      ", a weight type with no dtype in Switchyard's vocabulary (served: F32, "
                      "F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, "
                      "IQ4_NL, IQ4_XS, MXFP4)",
                  f.path());
    }
  }
  return out;
}

// The activations' dtype a file of 16-bit float projection weights runs in, stated as a
// convention (the file does not say; llama.cpp keeps 16-bit weights 16-bit). BF16 weights: bf16,
// so they are read as stored (a BF16 file read as f32 reads twice the bytes per token). F16: f32,
// the weights widened at load (bf16 would round them). --dtype overrides either.
void float_file_dtype(const GgufFile& f, const std::string& arch, int64_t layers, json& config,
                      std::vector<std::string>& conventions) {
  std::map<std::string, int> types;
  for (int64_t i = 0; i < layers; ++i)
    for (const char* w :
         {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
      auto name = gguf_tensor_name(arch, "l" + std::to_string(i) + "." + w);
      if (const GgufTensor* t = name ? f.find(*name) : nullptr) types[t->type->name]++;
    }
  if (types.size() != 1) return;  // quantized, or a mix: activations stay f32
  const std::string type = types.begin()->first;
  if (type == "BF16") {
    config["torch_dtype"] = "bfloat16";
    conventions.push_back(
        "activations bf16: the file's projection weights are BF16, read as stored (16-bit "
        "weights stay 16-bit, as in llama.cpp; --dtype f32 widens them)");
  } else if (type == "F16") {
    conventions.push_back(
        "activations f32: the file's projection weights are F16, widened to f32 at load (never "
        "rounded to bf16; --dtype bf16 asks for that)");
  }
}

}  // namespace

GgufModel describe_gguf(const GgufFile& f, const std::vector<std::string>& allowed_keys) {
  const GgufValue* a = f.value("general.architecture");
  if (!a) bad_file(f, "metadata 'general.architecture' is missing");
  if (a->type != GgufType::string)
    bad_file(f, "metadata 'general.architecture' is " + a->type_text() + ", not a string");
  if (std::find(kArchitectures.begin(), kArchitectures.end(), a->s) == kArchitectures.end())
    throw Error(Errc::unknown_model_type,
                "GGUF architecture '" + a->s +
                    "' is not supported (supported: llama, qwen2, qwen3, qwen3moe, smollm3, "
                    "gemma2, gemma3, gpt-oss)",
                f.path());
  GgufModel m;
  m.architecture = a->s;
  MetadataReader r(f, m.architecture);
  m.config = config_of(r, f, m.architecture, m.conventions);
  refuse_unread(r, f, m.architecture, allowed_keys);
  m.weight_dtypes = weight_dtypes_of(f, m.architecture, m.config["num_hidden_layers"]);
  float_file_dtype(f, m.architecture, m.config["num_hidden_layers"], m.config, m.conventions);
  return m;
}

}  // namespace sy
