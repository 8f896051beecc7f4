// An operator as the host describes it to kernels: an owning value (OpDesc) and the
// borrowed C view a plugin receives (AbiOpView).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "switchyard/plugin_api.h"

namespace sy {

struct TensorDesc {
  sy_dtype dtype = SY_DTYPE_F32;
  std::vector<int64_t> shape;  // upper bounds for the dims in dynamic_dims
  sy_memory_kind memory = SY_MEMORY_HOST;
  uint32_t dynamic_dims = 0;  // bit i: dim i varies per execute (ABI 1.5, sy_tensor_desc)
  // 0: stored; else a packed layout of the kernel's plugin (ABI 1.10, sy_tensor_desc.layout).
  uint32_t layout = 0;
};

struct Attr {
  std::string name;
  std::variant<int64_t, double, std::string> value;
};

// Operand order per op kind is the ABI's (docs/abi.md, "Operators"). For attention:
// inputs q [B,Sq,Hq,D], k [B,Skv,Hkv,D], v [B,Skv,Hkv,Dv], optional sinks [Hq];
// outputs o [B,Sq,Hq,Dv], optional lse [B,Hq,Sq] f32.
struct OpDesc {
  sy_op_kind op = SY_OP_COPY;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<Attr> attrs;

  std::optional<int64_t> int_attr(const std::string& name) const;
  std::optional<double> float_attr(const std::string& name) const;
  std::optional<std::string> string_attr(const std::string& name) const;
  void set(const std::string& name, std::variant<int64_t, double, std::string> value);

  // The dtype that selects a kernel: the first input's, except an embedding with a
  // block-quantized table: its output's (sy_op_dtype).
  sy_dtype dtype() const;
  // The features this operator uses, derived from attributes and shapes.
  uint64_t required_features() const;
  // Attention geometry; nullopt when the shapes are not attention-shaped.
  struct AttentionShape {
    int64_t batch, q_len, kv_len, q_heads, kv_heads, head_dim;
  };
  std::optional<AttentionShape> attention_shape() const;
};

// Borrowed ABI view of an OpDesc; valid while both live and the OpDesc is unchanged.
class AbiOpView {
 public:
  explicit AbiOpView(const OpDesc& op);
  AbiOpView(const AbiOpView&) = delete;
  AbiOpView& operator=(const AbiOpView&) = delete;
  const sy_op_desc* get() const { return &desc_; }

 private:
  std::vector<sy_tensor_desc> tensors_;
  std::vector<const sy_tensor_desc*> inputs_, outputs_;
  std::vector<sy_attr> attrs_;
  std::vector<const sy_attr*> attr_ptrs_;
  sy_op_desc desc_{};
};

}  // namespace sy
