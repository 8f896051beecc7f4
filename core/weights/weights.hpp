// weights/ — model weights on disk: safetensors files, read through a read-only memory map and
// written for tools and tests, plus the mapping from the importer's weight value names
// (docs/graph-format.md, "Imported graphs") to the tensor names of Hugging Face checkpoints.
//
// Also offers GGUF files (gguf.hpp: GgufFile, the GGML type table, write_gguf), the read-only
// mapping both readers share (mapped_file.hpp) and the all-or-nothing file both writers write
// through (atomic_file.hpp).
//
// Offers: SafetensorsFile::open() (mmap PROT_READ/MAP_PRIVATE; the header is checked in full
// before any tensor is handed out, so no later access can read past the end of the file),
// write_safetensors() (atomic: temporary file + rename), hf_tensor_name().
//
// Every problem with a file being read is an Error with code Errc::bad_weights (SY302) whose
// `where` is the file and whose message names the tensor or field and what is wrong: file shorter
// than 8 bytes; header length past the end of the file or above 100 MiB; header not JSON or not an
// object; a tensor entry that is not an object, lacks or mistypes dtype/shape/data_offsets; a dtype
// other than F32, BF16, F16, I64, I32, U8; a negative dimension or an element/byte count that
// overflows 64 bits; data_offsets [begin, end) with end < begin, end past the data section, or end
// - begin not the tensor's byte size; two tensors whose bytes overlap; "__metadata__" that is not
// an object of strings. Gaps between tensors are accepted. A file truncated by someone else while
// it is mapped is not detected (the OS raises SIGBUS). Depends on errors/ and the ABI's dtype
// vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/errors/error.hpp"
#include "core/weights/mapped_file.hpp"
#include "switchyard/vocabulary.h"

namespace sy {

struct TensorInfo {
  std::string name;
  sy_dtype dtype = SY_DTYPE_F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the file (not of the data section)
  uint64_t bytes = 0;
};

// The header size limit of open() (the reference implementation's too).
inline constexpr uint64_t kSafetensorsMaxHeader = 100ull << 20;

// The safetensors dtype names this reader supports: "F32", "BF16", "F16", "I64", "I32", "U8".
std::optional<sy_dtype> safetensors_dtype(std::string_view name);
// The safetensors name of a supported dtype; nullptr for the others.
const char* safetensors_dtype_name(sy_dtype dtype);

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws Error (SY302) naming the file and what is wrong
  // (also when the file cannot be opened or mapped).
  static SafetensorsFile open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  // The tensor called `name`, or nullptr. The pointer lives as long as this object (moves
  // included).
  const TensorInfo* find(const std::string& name) const;
  // Every tensor, in the order of its data in the file.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The first byte of a tensor of this file (info.bytes bytes follow). A TensorInfo that does
  // not lie within the file is std::out_of_range.
  const void* data(const TensorInfo& info) const;
  // "__metadata__", empty when the file has none.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // of the whole file, in bytes

 private:
  SafetensorsFile() = default;

  std::string path_;
  MappedFile file_;
  const unsigned char* base_ = nullptr;  // file_'s bytes, size_ of them
  uint64_t size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// The safetensors tensor name of an importer weight value in a Hugging Face checkpoint of
// `model_type`: llama, qwen3, smollm3, gemma3_text ("model." prefix) and gemma3 (the multimodal
// checkpoint's "language_model.model." prefix). "embed_tokens" -> "model.embed_tokens.weight",
// "norm" -> "model.norm.weight", "lm_head" -> "lm_head.weight", "l{i}.input_layernorm" and
// "l{i}.post_attention_layernorm" -> "model.layers.{i}.<same>.weight", "l{i}.{q,k,v,o}_proj" ->
// "model.layers.{i}.self_attn.<same>.weight", "l{i}.{gate,up,down}_proj" ->
// "model.layers.{i}.mlp.<same>.weight", "l{i}.<proj>_bias" -> the same module's ".bias" (the
// importer's per-head [Hq,D] view of a [Hq·D] vector: same elements). Only qwen3 and Gemma have
// "l{i}.{q,k}_norm" (self_attn); only Gemma "l{i}.{pre,post}_feedforward_layernorm".
// switchyard_sinks_test (the test architecture of make-test-model) is llama's, plus
// "l{i}.sinks" -> "model.layers.{i}.self_attn.sinks" as gpt-oss names them.
// qwen3_moe: as qwen3, plus "l{i}.router" -> "model.layers.{i}.mlp.gate.weight"; its experts
// are read_hf_experts's.
// gpt_oss: as llama, plus "l{i}.sinks" -> "model.layers.{i}.self_attn.sinks", "l{i}.router" and
// "l{i}.router_bias" -> "model.layers.{i}.mlp.router.{weight,bias}", and "l{i}.o_proj_bias"; its
// stacked experts are stored in another layout (read_hf_experts), so they have no name here.
// nullopt for an unknown model_type, for values that are not in a checkpoint (Gemma's computed
// "embed_scale", caches, activations, inputs) and for any other name, including layer numbers with
// a sign or leading zeros.
std::optional<std::string> hf_tensor_name(const std::string& model_type,
                                          const std::string& value_name);

// Writes a safetensors file: the header (dtype, shape, data_offsets; "__metadata__" when
// `metadata` is not empty) padded with spaces so the data section starts 8-byte aligned, then
// the tensors back to back (the format's reference reader rejects holes). Tensors whose byte
// size is a multiple of 8 come first, in the given order, so each starts 8-byte aligned; the
// others follow by decreasing element size, so every tensor is at least aligned to its element.
// Each TensorInfo's offset is ignored; its bytes must equal elements × dtype size and the
// pointer must hold them (may be null when bytes is 0). Atomic: a temporary file in the same
// folder, flushed, then renamed over `path`. Bad arguments (unsupported dtype, negative
// dimension, byte count mismatch, duplicate or reserved name) are std::invalid_argument; I/O
// failures are std::runtime_error naming the file; either way `path` is left untouched.
// "[2, 3, 4]": a shape as the weight readers' messages print it.
std::string shape_text(const std::vector<int64_t>& shape);

// A mixture of experts' stacked weights, "l{i}.experts.{gate,up,down}_proj" and their "_bias",
// read from a Hugging Face checkpoint into `dst` as `dtype` and `shape` ([E, I, H] gate/up,
// [E, H, I] down, [E, I] / [E, H] biases). Qwen3-MoE's (and Mixtral-style) checkpoints hold one
// tensor per expert, "model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight" ([I, H],
// [H, I]), stacked here; that form is used whenever expert 0's tensor exists. gpt-oss's
// checkpoint stores gate and up interleaved along the last axis of
// "mlp.experts.gate_up_proj" [E, H, 2I] (gate at even columns; its bias the same way) and down
// as "mlp.experts.down_proj" [E, I, H], both transposed to ours, in bf16 or f32; or, MXFP4
// (transformers' Mxfp4Config), as "<name>_blocks" [E, rows, K/32, 16] and "<name>_scales"
// [E, rows, K/32] of u8, rows in our order but gate/up interleaved by row, and each block's
// nibbles in transformers' order (element 2j low, 2j + 1 high, of byte j), repacked here into
// GGUF's (mxfp4 in vocabulary.h). Returns false when `value_name` is not such a weight; else
// fills dst or sets `error` (a missing tensor, a wrong shape or dtype, an E8M0 scale of 0xFF).
bool read_hf_experts(const SafetensorsFile& file, const std::string& value_name, sy_dtype dtype,
                     const std::vector<int64_t>& shape, void* dst, std::string& error);

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<TensorInfo, const void*>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sy
