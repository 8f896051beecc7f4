// Every key a supported config may hold, and what the importer does with it: the one table
// behind both the check (a key not listed for the config's family is SY207 naming it, since
// Switchyard cannot know whether it changes the computation) and docs/config-keys.md (rendered
// from it; a test keeps the file in step).
#include "core/importer/config_keys.hpp"

#include <algorithm>
#include <array>
#include <sstream>

#include "core/importer/model_spec.hpp"

namespace sy::importer {
namespace {

// Families as bit sets.
enum : unsigned {
  kLlama = 1u << 0,
  kMistral = 1u << 1,
  kQwen2 = 1u << 2,
  kQwen3 = 1u << 3,
  kSmolLM3 = 1u << 4,
  kGemma2 = 1u << 5,
  kGemma3Text = 1u << 6,  // gemma3_text, and a gemma3 config's text_config
  kGemma3 = 1u << 7,      // the top level of a (multimodal) gemma3 config
  kGptOss = 1u << 8,
  kSinksTest = 1u << 9,
  kQwen3Moe = 1u << 10,
  kDecoders = kLlama | kMistral | kQwen2 | kQwen3 | kSmolLM3 | kGemma2 | kGemma3Text | kGptOss |
              kSinksTest | kQwen3Moe,
  kAll = kDecoders | kGemma3,
  kLlamaLike = kLlama | kMistral | kQwen2 | kQwen3 | kSmolLM3 | kSinksTest | kQwen3Moe,
  kMoe = kGptOss | kQwen3Moe,
  kGemma = kGemma2 | kGemma3Text,
};

struct FamilyName {
  const char* model_type;
  unsigned bit;
};
constexpr FamilyName kFamilyNames[] = {
    {"llama", kLlama},
    {"mistral", kMistral},
    {"qwen2", kQwen2},
    {"qwen3", kQwen3},
    {"smollm3", kSmolLM3},
    {"gemma2", kGemma2},
    {"gemma3_text", kGemma3Text},
    {"gemma3", kGemma3},
    {"gpt_oss", kGptOss},
    {"switchyard_sinks_test", kSinksTest},
    {"qwen3_moe", kQwen3Moe},
};

struct Key {
  const char* key;
  unsigned families;
  bool math;           // changes the computation: read and honoured (or refused by value)
  const char* effect;  // what the importer does with it
};

// Math keys first (honoured), then keys that do not change the computation.
constexpr Key kKeys[] = {
    {"model_type", kAll, true, "selects the family's importer"},
    {"hidden_size", kDecoders, true, "H"},
    {"num_hidden_layers", kDecoders, true, "layers"},
    {"num_attention_heads", kDecoders, true, "Hq"},
    {"num_key_value_heads", kDecoders, true, "Hkv (GQA)"},
    {"head_dim", kDecoders, true, "D (default H / Hq, or the family's)"},
    {"intermediate_size", kDecoders, true, "the MLP width"},
    {"vocab_size", kDecoders, true, "V"},
    {"rms_norm_eps", kDecoders, true, "eps of every rms_norm"},
    {"torch_dtype", kAll, true, "the weights' and activations' dtype (bfloat16, float16, float32)"},
    {"dtype", kAll, true, "as torch_dtype (transformers >= 4.56)"},
    {"tie_word_embeddings", kAll, true, "lm_head is embed_tokens"},
    {"hidden_act", kLlamaLike | kGptOss, true, "the MLP activation: silu, gelu, gelu_pytorch_tanh"},
    {"hidden_activation", kGemma, true, "the MLP activation (Gemma reads this, not hidden_act)"},
    {"hidden_act", kGemma, false,
     "ignored by transformers' Gemma classes, which read hidden_activation"},
    {"rope_theta", kDecoders, true, "rope base (transformers < 5; else inside rope_parameters)"},
    {"rope_parameters", kDecoders, true,
     "rope type default, linear, llama3 or yarn with its parameters (Gemma 3: one per layer "
     "type); dynamic, longrope and any unknown type or parameter refused"},
    {"rope_scaling", kDecoders, true,
     "as rope_parameters (transformers < 5; Gemma 3: global "
     "layers only)"},
    {"partial_rotary_factor", kDecoders, true, "rotary_dim = head_dim × factor"},
    {"original_max_position_embeddings", kDecoders, true, "llama3 / yarn pretraining length"},
    {"max_position_embeddings", kAll, true,
     "llama3 / yarn pretraining length when the rope gives none; otherwise no effect (the "
     "context is --context)"},
    {"attention_bias", kLlama | kQwen3 | kSmolLM3 | kGemma | kMoe | kSinksTest, true,
     "biases on q, k, v and o projections"},
    {"mlp_bias", kLlama | kSmolLM3 | kSinksTest, true, "biases on gate, up and down"},
    {"sliding_window", kMistral | kQwen2 | kQwen3 | kSmolLM3 | kGemma | kGptOss | kSinksTest, true,
     "W of sliding layers (window_left = W - 1); Mistral: every layer, 4096 when absent, none "
     "when null"},
    {"use_sliding_window", kQwen2 | kQwen3 | kSmolLM3, true,
     "false: no layer slides, whatever layer_types says"},
    {"max_window_layers", kQwen2 | kQwen3, true, "layers from this index on slide"},
    {"layer_types", kQwen2 | kQwen3 | kSmolLM3 | kGemma | kGptOss | kSinksTest, true,
     "full_attention / sliding_attention per layer"},
    {"use_mrope", kQwen2, true, "false; true (Qwen2-VL's multimodal rope) refused"},
    {"no_rope_layers", kSmolLM3, true, "0 = no rotary embedding on that layer (NoPE)"},
    {"no_rope_layer_interval", kSmolLM3, true, "every n-th layer NoPE, without no_rope_layers"},
    {"attn_logit_softcapping", kGemma, true, "attention softcap (null = none)"},
    {"final_logit_softcapping", kGemma, true, "logits = c·tanh(logits / c) (null = none)"},
    {"query_pre_attn_scalar", kGemma, true, "attention scale = scalar^-0.5"},
    {"sliding_window_pattern", kGemma3Text, true, "every n-th layer global (older configs)"},
    {"_sliding_window_pattern", kGemma3Text, true, "as sliding_window_pattern"},
    {"rope_local_base_freq", kGemma3Text, true, "rope base of sliding layers (older configs)"},
    {"use_bidirectional_attention", kGemma, true, "true refused: bidirectional attention"},
    {"rope_interleaved", kLlamaLike, true,
     "true refused (transformers never interleaves); SmolLM2's nanotron configs carry false"},
    {"num_local_experts", kMoe, true, "experts E: moe_experts' stacked [E, I, H] weights"},
    {"num_experts", kQwen3Moe, true, "as num_local_experts (Qwen3-MoE's name; default 128)"},
    {"num_experts_per_tok", kMoe, true, "moe_router's top_k (at most the experts, else refused)"},
    {"moe_intermediate_size", kQwen3Moe, true, "each expert's width I (default 768)"},
    {"norm_topk_prob", kQwen3Moe, true,
     "true: the chosen experts' softmax weights renormalised (moe_router); false refused"},
    {"decoder_sparse_step", kQwen3Moe, true,
     "layers whose (index + 1) is a multiple of it have experts; the others a dense MLP"},
    {"mlp_only_layers", kQwen3Moe, true, "layers with a dense MLP of intermediate_size"},
    {"use_sliding_window", kQwen3Moe, true, "false; true (a window on every layer) refused"},
    {"experts_per_token", kGptOss, true, "as num_experts_per_tok (read when that is absent)"},
    {"swiglu_alpha", kGptOss, true,
     "the experts' clamped SwiGLU (up + 1)·g·σ(alpha·g): alpha (default 1.702)"},
    {"swiglu_limit", kGptOss, true,
     "its clamp: gate ≤ limit, |up| ≤ limit (default 7.0; must be > 0)"},
    {"text_config", kGemma3, true, "the text decoder, imported as gemma3_text"},
    {"quantization_config", kGptOss, true,
     "quant_method mxfp4 (transformers' Mxfp4Config): the experts are mxfp4 blocks; another "
     "method, another field, or modules_to_not_convert naming the experts is refused; refused "
     "for every other family"},

    {"architectures", kAll, false, "the Python class name"},
    {"_name_or_path", kAll, false, "where the config came from"},
    {"_model_name_or_path", kAll, false, "where the config came from (transformers' GGUF loader)"},
    {"_commit_hash", kAll, false, "the Hub revision"},
    {"_attn_implementation", kAll, false, "transformers' attention kernel choice, same results"},
    {"_attn_implementation_autoset", kAll, false, "transformers' attention kernel choice"},
    {"attn_implementation", kAll, false, "transformers' attention kernel choice, same results"},
    {"base_model_tp_plan", kAll, false, "tensor-parallel sharding, same results"},
    {"base_model_pp_plan", kAll, false, "pipeline-parallel stages, same results"},
    {"unk_token_id", kAll, false, "token id, not used in generation"},
    {"transformers_version", kAll, false, "the writer's version"},
    {"bos_token_id", kAll, false, "generation: the BOS id"},
    {"eos_token_id", kAll, false, "generation: switchyard run stops at it"},
    {"pad_token_id", kAll, false, "padding, which one sequence never needs"},
    {"sep_token_id", kAll, false, "token id, not used by decoders"},
    {"decoder_start_token_id", kAll, false, "encoder-decoder token id"},
    {"attention_dropout", kAll, false, "training only"},
    {"initializer_range", kAll, false, "training only"},
    {"initializer_factor", kAll, false, "training only"},
    {"router_aux_loss_coef", kMoe, false, "training only"},
    {"output_router_logits", kMoe, false, "training output flag"},
    {"sliding_window", kQwen3Moe, false, "read only with use_sliding_window, which is false"},
    {"max_window_layers", kQwen3Moe, false,
     "in released Qwen3-MoE configs; transformers' Qwen3Moe classes do not read it"},
    {"pretraining_tp", kLlama | kSmolLM3, false,
     "tensor-parallel slicing at pretraining; the same products in transformers >= 5"},
    {"use_cache", kAll, false, "Switchyard always keeps a KV cache"},
    {"cache_implementation", kAll, false, "transformers' cache class"},
    {"is_llama_config", kAll, false, "nanotron marker (SmolLM2)"},
    {"transformers.js_config", kAll, false, "transformers.js options"},
    {"chunk_size_feed_forward", kAll, false, "memory chunking, same results"},
    {"id2label", kAll, false, "classification heads"},
    {"label2id", kAll, false, "classification heads"},
    {"problem_type", kAll, false, "classification heads"},
    {"finetuning_task", kAll, false, "metadata"},
    {"task_specific_params", kAll, false, "metadata"},
    {"tokenizer_class", kAll, false, "metadata"},
    {"prefix", kAll, false, "metadata"},
    {"is_encoder_decoder", kAll, false, "false for every supported family"},
    {"is_decoder", kAll, false, "metadata"},
    {"add_cross_attention", kAll, false, "false for every supported family"},
    {"cross_attention_hidden_size", kAll, false, "encoder-decoder only"},
    {"tie_encoder_decoder", kAll, false, "encoder-decoder only"},
    {"pruned_heads", kAll, false, "empty in released checkpoints"},
    {"output_attentions", kAll, false, "output flag"},
    {"output_hidden_states", kAll, false, "output flag"},
    {"output_scores", kAll, false, "output flag"},
    {"return_dict", kAll, false, "output flag"},
    {"return_dict_in_generate", kAll, false, "output flag"},
    {"torchscript", kAll, false, "export flag"},
    {"tf_legacy_loss", kAll, false, "training only"},
    {"use_bfloat16", kAll, false, "TPU training flag"},
    {"max_length", kAll, false, "generation default (use --max-tokens)"},
    {"min_length", kAll, false, "generation default"},
    {"do_sample", kAll, false, "generation default (use --temperature)"},
    {"early_stopping", kAll, false, "generation default"},
    {"num_beams", kAll, false, "generation default"},
    {"num_beam_groups", kAll, false, "generation default"},
    {"diversity_penalty", kAll, false, "generation default"},
    {"temperature", kAll, false, "generation default (use --temperature)"},
    {"top_k", kAll, false, "generation default (use --top-k)"},
    {"top_p", kAll, false, "generation default (use --top-p)"},
    {"typical_p", kAll, false, "generation default"},
    {"repetition_penalty", kAll, false, "generation default"},
    {"length_penalty", kAll, false, "generation default"},
    {"no_repeat_ngram_size", kAll, false, "generation default"},
    {"encoder_no_repeat_ngram_size", kAll, false, "generation default"},
    {"bad_words_ids", kAll, false, "generation default"},
    {"num_return_sequences", kAll, false, "generation default"},
    {"forced_bos_token_id", kAll, false, "generation default"},
    {"forced_eos_token_id", kAll, false, "generation default"},
    {"remove_invalid_values", kAll, false, "generation default"},
    {"exponential_decay_length_penalty", kAll, false, "generation default"},
    {"suppress_tokens", kAll, false, "generation default"},
    {"begin_suppress_tokens", kAll, false, "generation default"},
    {"initial_context_length", kGptOss, false,
     "in released gpt-oss configs; transformers' GptOssConfig does not read it"},
    {"max_window_layers", kSmolLM3, false,
     "in released SmolLM3 configs; transformers' SmolLM3 classes do not read it"},
    {"vision_config", kGemma3, false, "the vision tower: Switchyard imports the text decoder only"},
    {"mm_tokens_per_image", kGemma3, false, "vision input"},
    {"boi_token_index", kGemma3, false, "vision input"},
    {"eoi_token_index", kGemma3, false, "vision input"},
    {"image_token_index", kGemma3, false, "vision input"},
};

unsigned family_bit(const std::string& model_type) {
  for (const auto& f : kFamilyNames)
    if (model_type == f.model_type) return f.bit;
  return 0;
}

// The row of `key` for `family`, else any row of `key` (for the message), else nullptr.
const Key* find_key(const std::string& key, unsigned family) {
  const Key* any = nullptr;
  for (const auto& k : kKeys) {
    if (key != k.key) continue;
    if (k.families & family) return &k;
    any = &k;
  }
  return any;
}

std::string families_text(unsigned bits) {
  if (bits == kAll) return "all";
  std::string out;
  for (const auto& f : kFamilyNames)
    if (bits & f.bit) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  return out;
}

// Keys whose meaning calls for a refusal rather than "unknown".
const char* refusal_of(const std::string& key, unsigned family) {
  if (key == "quantization_config" && family != kGptOss)
    return "a quantized checkpoint (its weights are not the plain tensors this importer "
           "loads): convert it, or use the GGUF file";
  if (key == "auto_map") return "custom modeling code, whose computation Switchyard cannot know";
  return nullptr;
}

}  // namespace

void check_config_keys(const ConfigReader& r, const std::string& model_type,
                       const std::vector<std::string>& allowed) {
  const unsigned family = family_bit(model_type);
  for (const std::string& key : r.keys()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    if (const char* why = refusal_of(key, family)) r.fail(key, std::string("refused: ") + why);
    const Key* k = find_key(key, family);
    if (k && (k->families & family)) continue;
    r.fail(key, k ? "is not a key of " + model_type + " configs (it belongs to " +
                        families_text(k->families) +
                        "); Switchyard cannot tell what it would change"
                  : "is not a key Switchyard knows for " + model_type +
                        " configs; it may change the computation, so the config is refused "
                        "rather than run without it (docs/config-keys.md lists every key; "
                        "--allow-config-key " +
                        key + " accepts it as without effect)");
  }
}

std::string render_config_keys_markdown() {
  std::ostringstream md;
  md << "# Config keys, per family\n\n"
     << "<!-- Generated from the table in core/importer/config_keys.cpp; do not edit by hand.\n"
     << "     Regenerate: build/bin/switchyard config-keys --markdown > docs/config-keys.md -->\n\n"
     << "Every key a supported `config.json` may hold. A key that changes the computation is "
        "read and honoured,\nor refused (SY207) for a value Switchyard does not compute; a key "
        "not listed for the config's family\nis refused by name, since Switchyard cannot tell "
        "what it would change (`--allow-config-key KEY`,\nrepeatable, accepts one as without "
        "effect). `auto_map` is always refused, `quantization_config` but for gpt-oss.\n\n"
     << "## Keys that change the computation\n\n| key | families | what it does |\n|---|---|---|\n";
  for (const auto& k : kKeys)
    if (k.math)
      md << "| `" << k.key << "` | " << families_text(k.families) << " | " << k.effect << " |\n";
  md << "\n## Keys that do not\n\nAccepted and not used by the importer.\n\n"
     << "| key | families | why it does not matter |\n|---|---|---|\n";
  for (const auto& k : kKeys)
    if (!k.math)
      md << "| `" << k.key << "` | " << families_text(k.families) << " | " << k.effect << " |\n";
  return md.str();
}

}  // namespace sy::importer
