// Importer weight value names -> Hugging Face checkpoint tensor names (see weights.hpp).
#include <initializer_list>
#include <string_view>

#include "core/weights/weights.hpp"

namespace sy {
namespace {

struct Family {
  const char* prefix;   // of the decoder's modules
  const char* lm_head;  // the untied output projection
  bool qk_norm, gemma;  // q_norm/k_norm; Gemma's feed-forward norms
};

std::optional<Family> family(const std::string& model_type) {
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2" ||
      model_type == "smollm3" || model_type == "switchyard_sinks_test" || model_type == "gpt_oss")
    return Family{"model.", "lm_head.weight", false, false};
  if (model_type == "gemma2") return Family{"model.", "lm_head.weight", false, true};
  if (model_type == "qwen3" || model_type == "qwen3_moe")
    return Family{"model.", "lm_head.weight", true, false};
  if (model_type == "gemma3_text") return Family{"model.", "lm_head.weight", true, true};
  if (model_type == "gemma3")  // Gemma3ForConditionalGeneration checkpoints
    return Family{"language_model.model.", "language_model.lm_head.weight", true, true};
  return std::nullopt;
}

template <typename Set>
bool one_of(std::string_view s, const Set& set) {
  for (std::string_view x : set)
    if (s == x) return true;
  return false;
}
bool one_of(std::string_view s, std::initializer_list<std::string_view> set) {
  return one_of<std::initializer_list<std::string_view>>(s, set);
}

constexpr std::string_view kAttn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
constexpr std::string_view kMlp[] = {"gate_proj", "up_proj", "down_proj"};

}  // namespace

std::optional<std::string> hf_tensor_name(const std::string& model_type,
                                          const std::string& value_name) {
  auto f = family(model_type);
  if (!f) return std::nullopt;
  const std::string prefix = f->prefix;
  if (value_name == "embed_tokens") return prefix + "embed_tokens.weight";
  if (value_name == "norm") return prefix + "norm.weight";
  if (value_name == "lm_head") return std::string(f->lm_head);

  // "l{i}.<what>": i in decimal, no sign, no leading zero.
  std::string_view v = value_name;
  if (v.size() < 3 || v[0] != 'l') return std::nullopt;
  size_t dot = v.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view layer = v.substr(1, dot - 1), what = v.substr(dot + 1);
  if (layer.empty() || layer.size() > 9 || (layer.size() > 1 && layer[0] == '0'))
    return std::nullopt;
  for (char c : layer)
    if (c < '0' || c > '9') return std::nullopt;
  const std::string base = prefix + "layers." + std::string(layer) + ".";

  if (one_of(what, {"input_layernorm", "post_attention_layernorm"}) ||
      (f->gemma && one_of(what, {"pre_feedforward_layernorm", "post_feedforward_layernorm"})))
    return base + std::string(what) + ".weight";
  if (one_of(what, kAttn) || (f->qk_norm && one_of(what, {"q_norm", "k_norm"})))
    return base + "self_attn." + std::string(what) + ".weight";
  const bool gpt_oss = model_type == "gpt_oss";
  if (what == "sinks" && (gpt_oss || model_type == "switchyard_sinks_test"))  // no suffix
    return base + "self_attn.sinks";
  if (gpt_oss && what == "router") return base + "mlp.router.weight";
  if (gpt_oss && what == "router_bias") return base + "mlp.router.bias";
  if (model_type == "qwen3_moe" && what == "router") return base + "mlp.gate.weight";
  if (what.starts_with("experts.")) return std::nullopt;  // read_hf_experts
  if (one_of(what, kMlp)) return base + "mlp." + std::string(what) + ".weight";
  constexpr std::string_view kBias = "_bias";
  if (what.size() > kBias.size() && what.substr(what.size() - kBias.size()) == kBias) {
    std::string_view module = what.substr(0, what.size() - kBias.size());
    if (one_of(module, kAttn)) return base + "self_attn." + std::string(module) + ".bias";
    if (one_of(module, kMlp)) return base + "mlp." + std::string(module) + ".bias";
  }
  return std::nullopt;
}

}  // namespace sy
