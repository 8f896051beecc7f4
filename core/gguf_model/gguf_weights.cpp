// GGUF tensor names and the weight loader over a GGUF file.
#include <charconv>
#include <cstring>

#include "core/gguf_model/gguf_model.hpp"

namespace sy {
namespace {

// "l12.q_proj" -> (12, "q_proj"); nullopt for other names (no sign, no leading zero).
std::optional<std::pair<int64_t, std::string>> layer_of(const std::string& name) {
  if (name.size() < 4 || name[0] != 'l') return std::nullopt;
  size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 1 || (name[1] == '0' && dot > 2)) return std::nullopt;
  int64_t i = 0;
  auto [p, ec] = std::from_chars(name.data() + 1, name.data() + dot, i);
  if (ec != std::errc() || p != name.data() + dot) return std::nullopt;
  return std::make_pair(i, name.substr(dot + 1));
}

// Reads `count` floats of GGML type `t` at `src` into dst as `dtype` (f32, bf16 or f16), each
// plus `add` in f32 before it is rounded to `dtype` (a Gemma norm's w + 1 less 1).
bool convert_floats(const GgmlType& t, const void* src, int64_t count, sy_dtype dtype, void* dst,
                    float add = 0.0f) {
  const std::string n = t.name;
  auto load = [&](int64_t i) -> float {
    if (n == "F32") return static_cast<const float*>(src)[i];
    uint16_t h = static_cast<const uint16_t*>(src)[i];
    if (n == "BF16") return sy_bf16_to_f32(h);
    _Float16 f;
    std::memcpy(&f, &h, 2);
    return float(f);
  };
  if (n != "F32" && n != "BF16" && n != "F16") return false;
  for (int64_t i = 0; i < count; ++i) {
    const float x = load(i) + add;
    switch (dtype) {
      case SY_DTYPE_F32: static_cast<float*>(dst)[i] = x; break;
      case SY_DTYPE_BF16: static_cast<uint16_t*>(dst)[i] = sy_f32_to_bf16(x); break;
      case SY_DTYPE_F16: {
        _Float16 h = static_cast<_Float16>(x);
        std::memcpy(static_cast<uint16_t*>(dst) + i, &h, 2);
        break;
      }
      default: return false;
    }
  }
  return true;
}

// Moves the rows of each of `heads` heads of D rows: row from(r) of a head's rows becomes row r.
template <class From>
void move_head_rows(uint8_t* data, int64_t rows, int64_t row_bytes, int64_t heads, From from) {
  const int64_t d = rows / heads;
  std::vector<uint8_t> head(size_t(d * row_bytes));
  for (int64_t h = 0; h < heads; ++h) {
    uint8_t* base = data + h * d * row_bytes;
    std::memcpy(head.data(), base, head.size());
    for (int64_t r = 0; r < d; ++r)
      std::memcpy(base + r * row_bytes, head.data() + from(r, d / 2) * row_bytes,
                  size_t(row_bytes));
  }
}

// The rows of a llama attn_q / attn_k back in Hugging Face's order: HF row h·D + t·D/2 + i is
// GGUF row h·D + 2i + t (llama.cpp's permute()), for the `heads` heads of D rows each.
void unpermute_rows(uint8_t* data, int64_t rows, int64_t row_bytes, int64_t heads) {
  move_head_rows(data, rows, row_bytes, heads,
                 [](int64_t r, int64_t half) { return 2 * (r % half) + r / half; });
}

}  // namespace

// The names of a mixture of experts and gpt-oss's others beyond llama's (llama.cpp's converter,
// PyPI gguf's MODEL_TENSORS[GPT_OSS] and [QWEN3MOE]; qwen3moe has no biases, so those names are
// simply absent from its files).
std::optional<std::string> moe_tensor(const std::string& architecture, const std::string& what) {
  if (architecture == "gpt-oss")
    for (auto [w, tensor] : {std::pair{"post_attention_layernorm", "post_attention_norm.weight"},
                             {"o_proj_bias", "attn_output.bias"},
                             {"sinks", "attn_sinks.weight"}})
      if (what == w) return std::string(tensor);
  static const std::pair<const char*, const char*> kNames[] = {
      {"router", "ffn_gate_inp.weight"},
      {"router_bias", "ffn_gate_inp.bias"},
      {"experts.gate_proj", "ffn_gate_exps.weight"},
      {"experts.up_proj", "ffn_up_exps.weight"},
      {"experts.down_proj", "ffn_down_exps.weight"},
      {"experts.gate_proj_bias", "ffn_gate_exps.bias"},
      {"experts.up_proj_bias", "ffn_up_exps.bias"},
      {"experts.down_proj_bias", "ffn_down_exps.bias"},
  };
  for (const auto& [w, tensor] : kNames)
    if (what == w) return std::string(tensor);
  return std::nullopt;
}

std::optional<std::string> gguf_tensor_name(const std::string& architecture,
                                            const std::string& value_name) {
  // llama, qwen2, qwen3 and gemma share llama.cpp's tensor names; MoE and gemma add theirs.
  if (value_name == "embed_tokens") return "token_embd.weight";
  if (value_name == "lm_head") return "output.weight";
  if (value_name == "norm") return "output_norm.weight";
  auto layer = layer_of(value_name);
  if (!layer) return std::nullopt;
  const std::string blk = "blk." + std::to_string(layer->first) + ".";
  if (architecture == "gpt-oss" || architecture == "qwen3moe")
    if (auto t = moe_tensor(architecture, layer->second)) return blk + *t;
  if (architecture == "gemma2" ||
      architecture == "gemma3") {  // Gemma's four norms a layer (PyPI gguf's MODEL_TENSORS)
    if (layer->second == "post_attention_layernorm") return blk + "post_attention_norm.weight";
    if (layer->second == "pre_feedforward_layernorm") return blk + "ffn_norm.weight";
    if (layer->second == "post_feedforward_layernorm") return blk + "post_ffw_norm.weight";
  }
  static const std::pair<const char*, const char*> kNames[] = {
      {"input_layernorm", "attn_norm.weight"},
      {"post_attention_layernorm", "ffn_norm.weight"},
      {"q_proj", "attn_q.weight"},
      {"k_proj", "attn_k.weight"},
      {"v_proj", "attn_v.weight"},
      {"o_proj", "attn_output.weight"},
      {"gate_proj", "ffn_gate.weight"},
      {"up_proj", "ffn_up.weight"},
      {"down_proj", "ffn_down.weight"},
      {"q_norm", "attn_q_norm.weight"},
      {"k_norm", "attn_k_norm.weight"},
      {"q_proj_bias", "attn_q.bias"},
      {"k_proj_bias", "attn_k.bias"},
      {"v_proj_bias", "attn_v.bias"},
  };
  for (const auto& [what, tensor] : kNames)
    if (layer->second == what) return "blk." + std::to_string(layer->first) + "." + tensor;
  return std::nullopt;
}

namespace {

// The GGML type name that stores a value of `dtype` exactly, or nullptr.
const char* ggml_name_of(sy_dtype dtype) {
  switch (dtype) {
    case SY_DTYPE_F32: return "F32";
    case SY_DTYPE_F16: return "F16";
    case SY_DTYPE_BF16: return "BF16";
    case SY_DTYPE_Q8_0: return "Q8_0";
    case SY_DTYPE_Q4_0: return "Q4_0";
    case SY_DTYPE_Q4_1: return "Q4_1";
    case SY_DTYPE_Q4_K: return "Q4_K";
    case SY_DTYPE_Q5_K: return "Q5_K";
    case SY_DTYPE_Q6_K: return "Q6_K";
    case SY_DTYPE_Q5_0: return "Q5_0";
    case SY_DTYPE_Q5_1: return "Q5_1";
    case SY_DTYPE_IQ4_NL: return "IQ4_NL";
    case SY_DTYPE_IQ4_XS: return "IQ4_XS";
    case SY_DTYPE_Q2_K: return "Q2_K";
    case SY_DTYPE_Q3_K: return "Q3_K";
    case SY_DTYPE_MXFP4: return "MXFP4";
    default: return nullptr;
  }
}

// GGUF lists dims innermost first; the graph's shapes outermost first.
bool same_dims(const GgufTensor& t, const std::vector<int64_t>& shape) {
  if (t.dims.size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (int64_t(t.dims[i]) != shape[shape.size() - 1 - i]) return false;
  return true;
}
std::string dims_text(const GgufTensor& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) out += (i ? "," : "") + std::to_string(t.dims[i]);
  return out + "]";
}
std::string dims_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = shape.size(); i-- > 0;) out += std::to_string(shape[i]) + (i ? "," : "");
  return out + "]";
}

// A tensor of the value's rank has its rows (a [Hq, D] bias may view a GGUF [Hq·D] vector).
bool rows_match(const GgufTensor& t, const std::vector<int64_t>& shape) {
  return t.dims.size() != shape.size() || shape.size() < 2 || t.dims[0] == shape.back();
}

// The first mxfp4 block of `blocks` whose E8M0 scale is 0xFF (NaN), if any.
std::optional<uint64_t> nan_scale(const uint8_t* data, uint64_t blocks) {
  for (uint64_t b = 0; b < blocks; ++b)
    if (data[b * 17] == 0xFF) return b;
  return std::nullopt;
}

// llama.cpp's converter permutes the rows of attn_q and attn_k of llama and of the models it
// converts as llama (SmolLM3) (unpermute_rows).
bool rows_permuted(const std::string& arch, const Value& v) {
  return gguf_rows_permuted(arch, v.name, v.shape.size());
}

// Gemma's rms_norm weights, stored as w + 1 by the converter (read_gemma_common in
// gguf_config.cpp).
bool norm_plus_one(const std::string& arch, const Value& v) {
  return (arch == "gemma2" || arch == "gemma3") &&
         (v.name == "norm" || v.name.ends_with("layernorm") || v.name.ends_with(".q_norm") ||
          v.name.ends_with(".k_norm"));
}

}  // namespace

bool gguf_rows_permuted(const std::string& arch, const std::string& value_name, size_t rank) {
  return (arch == "llama" || arch == "smollm3") && rank == 2 &&
         (value_name.ends_with(".q_proj") || value_name.ends_with(".k_proj"));
}

void gguf_permute_rows(uint8_t* data, int64_t rows, int64_t row_bytes, int64_t heads) {
  move_head_rows(data, rows, row_bytes, heads,
                 [](int64_t r, int64_t half) { return (r % 2) * half + r / 2; });
}

WeightLoader gguf_weight_loader(const GgufFile& file, const GgufModel& model) {
  const int64_t heads = model.config["num_attention_heads"];
  const int64_t kv_heads = model.config.value("num_key_value_heads", heads);
  const std::string arch = model.architecture;
  // The file's own bytes, when they are the value exactly: same type, same element count in
  // rows of the same length, rows in order.
  auto map = [&file, arch](const Value& v) -> const void* {
    std::optional<std::string> name = gguf_tensor_name(arch, v.name);
    const GgufTensor* t = name ? file.find(*name) : nullptr;
    const char* type = ggml_name_of(v.dtype);
    if (!t || !type || t->type->name != std::string(type) || rows_permuted(arch, v) ||
        norm_plus_one(arch, v))
      return nullptr;
    if (int64_t(t->bytes) != v.bytes() || !rows_match(*t, v.shape) ||
        v.dtype == SY_DTYPE_MXFP4)  // mxfp4 is read once, for its scales (nan_scale)
      return nullptr;
    return file.data(*t);
  };
  auto load = [&file, arch, heads, kv_heads](const Value& v, void* dst) -> std::optional<Error> {
    auto bad = [&](const std::string& what) {
      return Error(Errc::bad_weights, "weights file is invalid: " + what, file.path());
    };
    std::optional<std::string> name = gguf_tensor_name(arch, v.name);
    if (!name) return bad("no GGUF tensor name for weight '" + v.name + "'");
    const GgufTensor* t = file.find(*name);
    if (!t) return bad("tensor '" + *name + "' is missing");
    int64_t want = 1;
    for (int64_t d : v.shape) want *= d;
    if (v.shape.size() == 3 && !same_dims(*t, v.shape))  // stacked experts: [E, rows, K]
      return bad("tensor '" + *name + "' has dims " + dims_text(*t) +
                 " (GGUF order), the config's expert_count and sizes make it " +
                 dims_text(v.shape));
    if (t->elements() != want || !rows_match(*t, v.shape))
      return bad("tensor '" + *name + "' holds " + std::to_string(t->elements()) +
                 " elements in rows of " + std::to_string(t->dims[0]) +
                 ", the model's config makes it " + std::to_string(want) + " in rows of " +
                 std::to_string(v.shape.back()));
    if (sy_dtype_is_blocked(v.dtype)) {
      if (int64_t(t->bytes) != v.bytes())
        return bad("tensor '" + *name + "' is " + t->type->name + ", the graph expects " +
                   sy_dtype_name(v.dtype));
      std::memcpy(dst, file.data(*t), size_t(t->bytes));
      if (v.dtype == SY_DTYPE_MXFP4)
        if (auto block = nan_scale(static_cast<const uint8_t*>(dst), t->bytes / 17))
          return bad("tensor '" + *name + "' holds the E8M0 scale 0xFF (NaN) in block " +
                     std::to_string(*block) + "; Switchyard refuses NaN weights");
    } else if (!convert_floats(*t->type, file.data(*t), want, v.dtype, dst,
                               norm_plus_one(arch, v) ? -1.0f : 0.0f)) {
      return bad("tensor '" + *name + "' is " + t->type->name + ", the run needs " +
                 sy_dtype_name(v.dtype));
    }
    if (rows_permuted(arch, v)) {
      const int64_t rows = v.shape[0], row_bytes = v.bytes() / rows;
      unpermute_rows(static_cast<uint8_t*>(dst), rows, row_bytes,
                     v.name.ends_with(".q_proj") ? heads : kv_heads);
    }
    return std::nullopt;
  };
  return WeightLoader(load, map);
}

}  // namespace sy
