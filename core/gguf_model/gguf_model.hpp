// gguf_model/ — a GGUF file as a model: the Hugging Face config.json its metadata stands for
// (so the importer's rules apply: every field honoured or refused), the dtypes of its quantized
// weights, the tokenizer.json and generation settings of its tokenizer.* keys, and a weight
// loader over its tensors. `switchyard plan|run|bench decode FILE.gguf` use it as they use a
// model folder.
//
// Every metadata key is honoured or refused by name: general.* is informational (alignment is
// the reader's); <arch>.* keys map to config fields (gguf_config.cpp lists them), and any other
// is SY207 unless --allow-config-key names it; tokenizer.* keys are the tokenizer's and the
// generation settings' (gguf_tokenizer.cpp). A missing or mistyped key the model needs is SY302
// naming the file and the key; an architecture outside llama, qwen2, qwen3, smollm3, gpt-oss is
// SY208 (smollm3: NoPE on every 4th layer, a stated convention as llama.cpp's and candle's)
// (gpt-oss: its layer pattern, SwiGLU clamp and yarn betas follow its released config, stated
// as the plan's conventions, since the converter does not write them); a tensor of
// a valid GGML type with no dtype in the vocabulary is SY212 naming the tensor and its type
// (SY302 is for malformed files).
//
// llama's converter (llama.cpp's convert_hf_to_gguf.py) permutes the rows of attn_q and attn_k
// (of llama and smollm3) for the interleaved rope; the loader puts them back in Hugging Face's
// order, so the graph is the checkpoint's (neox rope) and the fused and unfused paths stay one
// computation. Depends on weights/, importer/, tokenizer/, generation/, executor/.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/executor/weight_loader.hpp"
#include "core/generation/generation.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/weights/gguf.hpp"

namespace sy {

struct GgufModel {
  std::string architecture;  // general.architecture
  nlohmann::json config;     // the Hugging Face config.json the metadata stands for
  // Importer value name ("l0.q_proj", "embed_tokens") -> the block-quantized dtype it is stored
  // in (ImportOptions::weight_dtypes). Float tensors take the run's dtype, converted on load.
  std::map<std::string, sy_dtype> weight_dtypes;
  // What the file leaves unsaid and the config follows by convention (Graph::conventions).
  std::vector<std::string> conventions;
};

// The model a GGUF file describes. `allowed_keys` are metadata keys to accept as without effect
// although Switchyard does not know them (--allow-config-key).
GgufModel describe_gguf(const GgufFile& file, const std::vector<std::string>& allowed_keys = {});

// The tokenizer of tokenizer.ggml.* (model "gpt2": byte-level BPE; "llama": SentencePiece-style
// BPE), as the tokenizer.json document Tokenizer::parse reads. SY303 naming the key for anything
// else. gguf_tokenizer_json: the same as text.
nlohmann::json gguf_tokenizer_document(const GgufFile& file);
std::string gguf_tokenizer_json(const GgufFile& file);

// EOS ids (eos, eot, eom), the BOS a plain prompt starts with (add_bos_token), the chat
// template (tokenizer.chat_template) and the special tokens' texts.
GenerationSettings gguf_generation_settings(const GgufFile& file, const Tokenizer& tok);

// The tensor name of an importer weight value in a GGUF file of `architecture`
// ("l3.q_proj" -> "blk.3.attn_q.weight"), nullopt for values no GGUF file holds.
std::optional<std::string> gguf_tensor_name(const std::string& architecture,
                                            const std::string& value_name);

// Whether llama.cpp's converter permutes the rows of this weight value (attn_q and attn_k of
// llama and smollm3, `rank` 2), and that permutation: Hugging Face's rows of each of `heads`
// heads into GGUF's order (row h·D + 2i + t of the result is row h·D + t·D/2 + i), in place.
// The loader undoes it; a tool writing a GGUF file (make-test-model --format gguf) applies it.
bool gguf_rows_permuted(const std::string& architecture, const std::string& value_name,
                        size_t rank);
void gguf_permute_rows(uint8_t* data, int64_t rows, int64_t row_bytes, int64_t heads);

// A WeightLoader over `file`'s tensors (which must outlive it): shapes checked against the
// graph, quantized tensors copied as they are, float tensors converted to the graph's dtype,
// llama's attn_q / attn_k rows put back in Hugging Face's order.
WeightLoader gguf_weight_loader(const GgufFile& file, const GgufModel& model);

// Whether `path` is meant as a GGUF file: named *.gguf (then a bad magic is the reader's SY302,
// not a config.json's syntax error) or starting with the GGUF magic.
bool is_gguf_file(const std::string& path);

}  // namespace sy
