// A mixture of experts' weights in a Hugging Face checkpoint, into the graph's stacked
// [E, rows, K] layout (weights.hpp, read_hf_experts): gpt-oss's stacked tensors de-interleaved
// and transposed, or one tensor per expert (Qwen3-MoE, Mixtral) stacked.
#include "core/weights/weights.hpp"
#include "switchyard/plugin_api.h"

namespace sy {
namespace {

// One expert value: its layer, which matrix, whether it is the bias.
struct ExpertName {
  std::string layer;  // the decimal layer number, as in the value name
  std::string what;   // gate_proj, up_proj or down_proj
  bool bias = false;
};

std::optional<ExpertName> parse(const std::string& value_name) {
  // "l{i}.experts.{gate,up,down}_proj[_bias]"
  constexpr std::string_view kMid = ".experts.";
  const size_t mid = value_name.find(kMid);
  if (value_name.size() < 2 || value_name[0] != 'l' || mid == std::string::npos || mid < 2)
    return std::nullopt;
  ExpertName n;
  n.layer = value_name.substr(1, mid - 1);
  for (char c : n.layer)
    if (c < '0' || c > '9') return std::nullopt;
  std::string rest = value_name.substr(mid + kMid.size());
  if (rest.ends_with("_bias")) {
    n.bias = true;
    rest.resize(rest.size() - 5);
  }
  if (rest != "gate_proj" && rest != "up_proj" && rest != "down_proj") return std::nullopt;
  n.what = rest;
  return n;
}

float element_f32(const void* src, sy_dtype dt, int64_t i) {
  if (dt == SY_DTYPE_F32) return static_cast<const float*>(src)[i];
  return sy_bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
}

void store(void* dst, sy_dtype dt, int64_t i, float v) {
  if (dt == SY_DTYPE_F32)
    static_cast<float*>(dst)[i] = v;
  else
    static_cast<uint16_t*>(dst)[i] = sy_f32_to_bf16(v);
}

class ExpertReader {
 public:
  ExpertReader(const SafetensorsFile& file, const ExpertName& n, sy_dtype dtype,
               const std::vector<int64_t>& shape, void* dst, std::string& error)
      : file_(file), n_(n), dtype_(dtype), shape_(shape), dst_(dst), error_(error) {
    base_ = "model.layers." + n.layer + ".mlp.experts.";
  }

  void read() {
    if (dtype_ == SY_DTYPE_MXFP4) return read_mxfp4();
    if (dtype_ != SY_DTYPE_F32 && dtype_ != SY_DTYPE_BF16)
      return fail("the run needs " + std::string(sy_dtype_name(dtype_)) +
                  " experts; a checkpoint's are bf16, f32 or mxfp4");
    if (file_.find(base_ + "0." + n_.what + ".weight")) return read_per_expert();
    if (n_.bias) return read_bias();
    read_matrix();
  }

 private:
  bool interleaved() const { return n_.what != "down_proj"; }
  std::string tensor_name(const char* suffix = "") const {
    return base_ + (interleaved() ? "gate_up_proj" : "down_proj") + suffix;
  }
  void fail(const std::string& what) { error_ = what; }

  // The tensor `name` with dtype among the float ones and `want` shape, or nullptr (error set).
  const TensorInfo* find(const std::string& name, const std::vector<int64_t>& want,
                         bool bytes = false) {
    const TensorInfo* t = file_.find(name);
    if (!t) {
      fail("tensor '" + name + "' is missing" +
           (file_.find(name + "_blocks") ? " (the file holds its mxfp4 blocks: the config lacks "
                                           "quantization_config)"
                                         : ""));
      return nullptr;
    }
    const bool ok_dtype =
        bytes ? t->dtype == SY_DTYPE_U8 : t->dtype == SY_DTYPE_F32 || t->dtype == SY_DTYPE_BF16;
    if (!ok_dtype) {
      fail("tensor '" + name + "' is " + safetensors_dtype_name(t->dtype) + ", expected " +
           (bytes ? "U8" : "BF16 or F32"));
      return nullptr;
    }
    if (t->shape != want) {
      fail("tensor '" + name + "' has shape " + shape_text(t->shape) + ", the config makes it " +
           shape_text(want));
      return nullptr;
    }
    return t;
  }

  // gate/up [E, I, H] from gate_up_proj [E, H, 2I] (gate at even columns); down [E, H, I] from
  // down_proj [E, I, H].
  void read_matrix() {
    const int64_t E = shape_[0], rows = shape_[1], K = shape_[2];
    const std::vector<int64_t> want =
        interleaved() ? std::vector<int64_t>{E, K, 2 * rows} : std::vector<int64_t>{E, K, rows};
    const TensorInfo* t = find(tensor_name(), want);
    if (!t) return;
    const void* src = file_.data(*t);
    const int64_t cols = want[2], parity = n_.what == "up_proj" ? 1 : 0;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < K; ++k) {
          const int64_t col = interleaved() ? 2 * r + parity : r;
          store(dst_, dtype_, (e * rows + r) * K + k,
                element_f32(src, t->dtype, (e * K + k) * cols + col));
        }
  }

  // One [rows, K] tensor per expert, "experts.{e}.{what}.weight" (or ".bias" [rows]), already
  // in the graph's row order: stacked.
  void read_per_expert() {
    const int64_t E = shape_[0], per = n_.bias ? shape_[1] : shape_[1] * shape_[2];
    const std::vector<int64_t> want =
        n_.bias ? std::vector<int64_t>{shape_[1]} : std::vector<int64_t>{shape_[1], shape_[2]};
    for (int64_t e = 0; e < E; ++e) {
      const std::string name =
          base_ + std::to_string(e) + "." + n_.what + (n_.bias ? ".bias" : ".weight");
      const TensorInfo* t = find(name, want);
      if (!t) return;
      const void* src = file_.data(*t);
      for (int64_t i = 0; i < per; ++i)
        store(dst_, dtype_, e * per + i, element_f32(src, t->dtype, i));
    }
  }

  // gate/up bias [E, I] from gate_up_proj_bias [E, 2I]; down's [E, H] as stored.
  void read_bias() {
    const int64_t E = shape_[0], n = shape_[1];
    const int64_t cols = interleaved() ? 2 * n : n, parity = n_.what == "up_proj" ? 1 : 0;
    const TensorInfo* t = find(tensor_name("_bias"), {E, cols});
    if (!t) return;
    const void* src = file_.data(*t);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < n; ++i)
        store(dst_, dtype_, e * n + i,
              element_f32(src, t->dtype, e * cols + (interleaved() ? 2 * i + parity : i)));
  }

  // Blocks [E, R, K/32, 16] and scales [E, R, K/32], R = 2I for gate_up (gate at even rows);
  // each block rewritten as e, then GGUF's nibbles: byte i holds elements i and i + 16.
  void read_mxfp4() {
    if (n_.bias) return fail("an expert bias is never mxfp4");
    const int64_t E = shape_[0], rows = shape_[1], K = shape_[2], nb = K / 32;
    const int64_t stored_rows = interleaved() ? 2 * rows : rows;
    const TensorInfo* blocks = find(tensor_name("_blocks"), {E, stored_rows, nb, 16}, true);
    if (!blocks) return;
    const TensorInfo* scales = find(tensor_name("_scales"), {E, stored_rows, nb}, true);
    if (!scales) return;
    const auto* bsrc = static_cast<const uint8_t*>(file_.data(*blocks));
    const auto* ssrc = static_cast<const uint8_t*>(file_.data(*scales));
    const int64_t parity = n_.what == "up_proj" ? 1 : 0;
    auto* out = static_cast<uint8_t*>(dst_);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t sr = e * stored_rows + (interleaved() ? 2 * r + parity : r);
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t scale = ssrc[sr * nb + b];
          if (scale == 0xFF)
            return fail("tensor '" + tensor_name("_scales") + "' holds the E8M0 scale 0xFF (NaN) " +
                        "at [" + std::to_string(e) + "," + std::to_string(sr % stored_rows) + "," +
                        std::to_string(b) + "]; Switchyard refuses NaN weights");
          const uint8_t* q = bsrc + (sr * nb + b) * 16;
          uint8_t* o = out + ((e * rows + r) * nb + b) * 17;
          o[0] = scale;
          auto nibble = [q](int i) { return (q[i / 2] >> (4 * (i % 2))) & 0x0f; };
          for (int i = 0; i < 16; ++i) o[1 + i] = uint8_t(nibble(i) | nibble(i + 16) << 4);
        }
      }
  }

  const SafetensorsFile& file_;
  const ExpertName& n_;
  sy_dtype dtype_;
  const std::vector<int64_t>& shape_;
  void* dst_;
  std::string& error_;
  std::string base_;
};

}  // namespace

bool read_hf_experts(const SafetensorsFile& file, const std::string& value_name, sy_dtype dtype,
                     const std::vector<int64_t>& shape, void* dst, std::string& error) {
  std::optional<ExpertName> n = parse(value_name);
  if (!n) return false;
  const size_t rank = n->bias ? 2 : 3;
  if (shape.size() != rank || (dtype == SY_DTYPE_MXFP4 && shape.back() % 32 != 0)) {
    error = "expert weight '" + value_name + "' has the unexpected shape " + shape_text(shape);
    return true;
  }
  ExpertReader(file, *n, dtype, shape, dst, error).read();
  return true;
}

}  // namespace sy
