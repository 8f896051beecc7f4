#include "core/executor/model_weights.hpp"

#include <cstring>

namespace sy {

WeightLoader safetensors_weight_loader(const SafetensorsFile& file, const std::string& model_type) {
  // The file's own bytes when the tensor is the value exactly (dtype and element count; a
  // checkpoint's tensors are row-major as the graph's).
  auto map = [&file, model_type](const Value& v) -> const void* {
    std::optional<std::string> name = hf_tensor_name(model_type, v.name);
    const TensorInfo* t = name ? file.find(*name) : nullptr;
    if (!t || t->dtype != v.dtype) return nullptr;
    int64_t want = 1, have = 1;
    for (int64_t d : v.shape) want *= d;
    for (int64_t d : t->shape) have *= d;
    return want == have ? file.data(*t) : nullptr;
  };
  auto load = [&file, model_type](const Value& v, void* dst) -> std::optional<Error> {
    auto bad = [&](const std::string& what) {
      return Error(Errc::bad_weights, "weights file is invalid: " + what, file.path());
    };
    std::string expert_error;
    if (read_hf_experts(file, v.name, v.dtype, v.shape, dst, expert_error))
      return expert_error.empty() ? std::nullopt : std::optional<Error>(bad(expert_error));
    std::optional<std::string> name = hf_tensor_name(model_type, v.name);
    if (!name) return bad("no checkpoint name for weight '" + v.name + "'");
    const TensorInfo* t = file.find(*name);
    if (!t) return bad("tensor '" + *name + "' is missing");
    int64_t want = 1, have = 1;
    for (int64_t d : v.shape) want *= d;
    for (int64_t d : t->shape) have *= d;
    if (want != have)
      return bad("tensor '" + *name + "' has shape " + shape_text(t->shape) +
                 ", the config makes it " + shape_text(v.shape));
    const void* src = file.data(*t);
    if (t->dtype == v.dtype) {
      std::memcpy(dst, src, size_t(v.bytes()));
    } else if (t->dtype == SY_DTYPE_BF16 && v.dtype == SY_DTYPE_F32) {
      for (int64_t i = 0; i < want; ++i)
        static_cast<float*>(dst)[i] = sy_bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    } else if (t->dtype == SY_DTYPE_F32 && v.dtype == SY_DTYPE_BF16) {
      for (int64_t i = 0; i < want; ++i)
        static_cast<uint16_t*>(dst)[i] = sy_f32_to_bf16(static_cast<const float*>(src)[i]);
    } else {
      return bad("tensor '" + *name + "' is " + safetensors_dtype_name(t->dtype) +
                 ", the run needs " + sy_dtype_name(v.dtype));
    }
    return std::nullopt;
  };
  return WeightLoader(load, map);
}

}  // namespace sy
