// importer/ — Hugging Face config.json → Switchyard decoder graph.
//
// Offers: import_hf_config() (from a file) and import_hf_config_json() (from parsed JSON), which
// turn the config of a supported decoder (supported_model_types(): llama, mistral, qwen2, qwen3,
// smollm3, gemma2, gemma3 / gemma3_text, gpt_oss) into a Graph in one of two KV layouts: paged,
// one validated "step" phase over up to max_batch_tokens tokens of up to max_sequences sequences
// with KV pools of blocks; or contiguous, "prefill" (S = max_batch_tokens) and "decode" (one
// token against KV caches of `context` rows) with the fused decode-attention alternatives a
// fused kernel may take. Nothing is loaded:
// the graph is what the planner needs (op kinds, shapes, dtypes, attributes), named by the
// convention of docs/graph-format.md ("Imported graphs"), which the executor relies on.
//
// Every key of the config is honoured, refused by name (SY207) or known to be without effect
// (config_keys.cpp, rendered as docs/config-keys.md); the rope is computed as transformers does
// (rope_config.cpp). Every config is checked before anything is sized: missing or mistyped fields,
// absurd sizes and element counts that would overflow are Error Errc::bad_config (SY207) naming the
// file and the field; an unsupported model_type is Errc::unknown_model_type (SY208) listing the
// supported ones. Depends on graph/.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/graph/graph.hpp"

namespace sy {

struct ImportOptions {
  // The KV layout, and with it the phases (graph.hpp's KvLayout): paged for plugins of ABI
  // 1.5 (any mix of sequences per step), contiguous for older ones (one sequence).
  KvLayout kv_layout = KvLayout::paged;
  // Tokens a step takes, T, in [1, 10^7]: paged, of every sequence together; contiguous, the
  // prefill phase's length S = min(T, context) (the import caps it: a step fills the cache).
  int64_t max_batch_tokens = 512;
  int64_t context = 4096;  // tokens per sequence (contiguous: C, rows of each cache), [1, 10^7]
  // Paged: sequences a step may hold (S, [1, 10^5]), tokens whose logits it may compute (R; 0
  // = max_sequences), rows per KV block (a multiple of 16 up to 1024) and blocks per pool (an
  // upper bound; 0 = max_sequences · ceil(context / kv_block_size)).
  int64_t max_sequences = 1;
  int64_t max_outputs = 0;
  int64_t kv_block_size = 16;
  int64_t kv_blocks = 0;
  int64_t batch = 1;  // contiguous: B, in [1, 10^6]
  // Dtype of weights and activations: "" = the config's torch_dtype (bf16 when it has none);
  // else "bf16"/"f16"/"f32" or "bfloat16"/"float16"/"float32".
  std::string dtype_override;
  // Config keys to accept as without effect although the importer does not know them
  // (--allow-config-key); every other unknown key is SY207.
  std::vector<std::string> allowed_config_keys;
  // Contiguous: prefill computes the logits of every prompt position, [B, S, V]. Off (the
  // default), a `slice` takes the last position's hidden state before the final norm, so the
  // head computes [B, 1, V]: what generation needs, without S·V logits of memory and time.
  // (Paged graphs compute the logits of the tokens a step asks for: max_outputs.)
  bool every_position_logits = false;
  // Weights stored in another dtype than the model's (a GGUF file's quantized matrices), by
  // importer value name ("l0.q_proj", "embed_tokens"); the rest take the model's dtype. Only
  // block-quantized dtypes are meaningful here (a matmul's b, an embedding's table).
  std::map<std::string, sy_dtype> weight_dtypes;
};

// Reads and imports `config_path`; throws Error (SY201 for JSON syntax, with line:column;
// SY207 bad config; SY208 unknown model_type).
Graph import_hf_config(const std::string& config_path, const ImportOptions& options = {});
// Imports an already parsed config; `file` names it in errors and in Graph::source.
Graph import_hf_config_json(const nlohmann::json& config, const std::string& file,
                            const ImportOptions& options = {});
// The model_type values the importer reads, in a stable order.
std::vector<std::string> supported_model_types();

// docs/config-keys.md: every config key per family, honoured, refused or without effect.
std::string config_keys_markdown();

}  // namespace sy
