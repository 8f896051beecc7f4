// The tiny llama of support/llama_reference.hpp as a GGUF file, written the way llama.cpp's
// converter writes a llama checkpoint: llama.* hyper-parameters, a byte-level BPE tokenizer with a
// chat template, tensors in GGUF order with attn_q / attn_k rows permuted for the interleaved
// rope. `values` keeps what the file holds in Hugging Face's order, for the reference.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "support/gguf_writer.hpp"
#include "support/llama_reference.hpp"

namespace sy::test {

inline const LlamaShape kShape;

enum class Storage { f32, f16, quantized };

// The tokenizer: three control tokens, the 94 printable ASCII bytes, the byte-level space 'Ġ',
// three merges, and filler tokens up to the model's vocabulary.
inline std::vector<std::string> vocabulary(int64_t size = kShape.vocab) {
  std::vector<std::string> t = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (char c = 33; c < 127; ++c) t.push_back(std::string(1, c));
  for (const char* s : {"\xC4\xA0", "he", "\xC4\xA0t", "\xC4\xA0the"}) t.push_back(s);
  while (int64_t(t.size()) < size) t.push_back("<extra_" + std::to_string(t.size()) + ">");
  return t;
}
inline int32_t token_id_of(char c) {
  return 3 + (c - 33);
}

// llama.cpp's permute() (convert_hf_to_gguf.py): GGUF row h·D + 2i + t holds Hugging Face row
// h·D + t·D/2 + i.
inline std::vector<float> permute_rows(const std::vector<float>& w, int64_t heads, int64_t k) {
  const int64_t d = int64_t(w.size()) / k / heads, half = d / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t t = 0; t < 2; ++t)
        std::copy_n(w.begin() + (h * d + t * half + i) * k, k,
                    out.begin() + (h * d + 2 * i + t) * k);
  return out;
}

// The file, and the values it holds in Hugging Face's order (what the reference computes with).
struct TinyGguf {
  GgufWriter w;
  std::map<std::string, std::vector<double>> values;

  LlamaShape shape;

  // `shape`'s vocabulary must be vocabulary()'s size or more (128 by default).
  explicit TinyGguf(Storage storage, LlamaShape s = kShape) : shape(s) {
    w.string("general.architecture", "llama").string("general.name", "tiny");
    w.u32("llama.embedding_length", shape.hidden).u32("llama.block_count", shape.layers);
    w.u32("llama.attention.head_count", shape.heads);
    w.u32("llama.attention.head_count_kv", shape.kv_heads);
    w.u32("llama.attention.key_length", shape.head_dim);
    w.u32("llama.attention.value_length", shape.head_dim);
    w.u32("llama.rope.dimension_count", shape.head_dim);
    w.u32("llama.feed_forward_length", shape.inter).u32("llama.context_length", 256);
    w.u32("llama.vocab_size", shape.vocab);
    w.f32("llama.attention.layer_norm_rms_epsilon", float(shape.eps));
    w.f32("llama.rope.freq_base", float(shape.theta));
    w.string("tokenizer.ggml.model", "gpt2").string("tokenizer.ggml.pre", "gpt2");
    const auto tokens = vocabulary(shape.vocab);
    std::vector<int32_t> types(tokens.size(), 1);
    types[0] = types[1] = types[2] = 3;
    w.strings("tokenizer.ggml.tokens", tokens).i32s("tokenizer.ggml.token_type", types);
    w.strings("tokenizer.ggml.merges", {"h e", "\xC4\xA0 t", "\xC4\xA0t he"});
    w.u32("tokenizer.ggml.bos_token_id", 1).u32("tokenizer.ggml.eos_token_id", 2);
    w.boolean("tokenizer.ggml.add_bos_token", false);
    w.string("tokenizer.chat_template",
             "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
             "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
    // A quantized file ties the head to its Q4_1 embedding (no output.weight), as SmolLM2's does.
    add("embed_tokens", "token_embd.weight", shape.vocab, shape.hidden, 0, storage);
    if (storage != Storage::quantized)
      add("lm_head", "output.weight", shape.vocab, shape.hidden, 0, storage);
    add("norm", "output_norm.weight", 1, shape.hidden, 0, Storage::f32);
    const int64_t qd = shape.heads * shape.head_dim, kvd = shape.kv_heads * shape.head_dim;
    for (int64_t l = 0; l < shape.layers; ++l) {
      const std::string p = "l" + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
      add(p + "input_layernorm", b + "attn_norm.weight", 1, shape.hidden, 0, Storage::f32);
      add(p + "post_attention_layernorm", b + "ffn_norm.weight", 1, shape.hidden, 0, Storage::f32);
      add(p + "q_proj", b + "attn_q.weight", qd, shape.hidden, shape.heads, storage);
      add(p + "k_proj", b + "attn_k.weight", kvd, shape.hidden, shape.kv_heads, storage);
      add(p + "v_proj", b + "attn_v.weight", kvd, shape.hidden, 0, storage);
      add(p + "o_proj", b + "attn_output.weight", shape.hidden, qd, 0, storage);
      add(p + "gate_proj", b + "ffn_gate.weight", shape.inter, shape.hidden, 0, storage);
      add(p + "up_proj", b + "ffn_up.weight", shape.inter, shape.hidden, 0, storage);
      add(p + "down_proj", b + "ffn_down.weight", shape.hidden, shape.inter, 0, storage);
    }
    if (storage == Storage::quantized) values["lm_head"] = values["embed_tokens"];
  }

  double weight(const std::string& name, int64_t i) const { return values.at(name)[size_t(i)]; }

 private:
  // A [rows, k] weight of hashed values (`permute_heads` > 0: llama's q/k row order in the
  // file). Quantized storage: attention Q8_0, the rest Q4_1.
  void add(const std::string& value, const std::string& tensor, int64_t rows, int64_t k,
           int64_t permute_heads, Storage storage) {
    std::vector<float> hf(size_t(rows * k));
    for (size_t i = 0; i < hf.size(); ++i) hf[i] = float(hashed_weight(value, int64_t(i)));
    const std::vector<float> file = permute_heads ? permute_rows(hf, permute_heads, k) : hf;
    std::vector<uint64_t> dims = {uint64_t(k)};
    if (rows > 1 || value == "embed_tokens") dims.push_back(uint64_t(rows));
    std::vector<double>& v = values[value];
    if (storage == Storage::f32) {
      w.tensor(tensor, dims, kGgmlF32, f32_bytes(file));
      v.assign(hf.begin(), hf.end());
    } else if (storage == Storage::f16) {
      std::string bytes;
      for (float x : file) {
        const uint16_t h = to_f16(x);
        bytes.append(reinterpret_cast<const char*>(&h), 2);
      }
      w.tensor(tensor, dims, kGgmlF16, bytes);
      for (float x : hf) v.push_back(from_f16(to_f16(x)));
    } else {
      // Quantization is per row, so permuting rows commutes with it.
      const bool attention =
          value.find("_proj") != std::string::npos && value.find("gate") == std::string::npos &&
          value.find("up_") == std::string::npos && value.find("down") == std::string::npos;
      w.tensor(tensor, dims, attention ? kGgmlQ8_0 : kGgmlQ4_1,
               attention ? quantize_q8_0(file) : quantize_q4_1(file));
      v = attention ? dequantize_q8_0(quantize_q8_0(hf)) : dequantize_q4_1(quantize_q4_1(hf));
    }
  }
};

}  // namespace sy::test
