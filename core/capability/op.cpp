#include "core/capability/op.hpp"

#include <cmath>

#include "switchyard/envelope_check.h"

namespace sy {
namespace {

template <typename T>
std::optional<T> find_attr(const std::vector<Attr>& attrs, const std::string& name) {
  for (const auto& a : attrs)
    if (a.name == name && std::holds_alternative<T>(a.value)) return std::get<T>(a.value);
  return std::nullopt;
}

bool is_attention(sy_op_kind op) {
  return op == SY_OP_ATTENTION || op == SY_OP_FUSED_DECODE_ATTENTION;
}

// A scaled rope: the frequency table input (rope: input 2; fused decode: input 5) or an
// attention factor other than 1.
bool rope_scaled(const OpDesc& op, size_t table_input) {
  return op.inputs.size() > table_input ||
         op.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR).value_or(1.0) != 1.0;
}

uint64_t attention_features(const OpDesc& op) {
  uint64_t f = 0;
  if (op.int_attr(SY_ATTR_CAUSAL).value_or(0)) f |= SY_FEATURE_BIT(SY_FEATURE_CAUSAL);
  if (op.int_attr(SY_ATTR_WINDOW_LEFT).value_or(-1) >= 0)
    f |= SY_FEATURE_BIT(SY_FEATURE_SLIDING_WINDOW);
  if (op.float_attr(SY_ATTR_SOFTCAP).value_or(0.0) > 0.0) f |= SY_FEATURE_BIT(SY_FEATURE_SOFTCAP);
  // The operands before the trailing metadata: kv_len (kv_len_input), or the paged form's
  // query_start, seq_lens and block_table.
  const size_t metadata = op.int_attr(SY_ATTR_PAGED).value_or(0)          ? 3
                          : op.int_attr(SY_ATTR_KV_LEN_INPUT).value_or(0) ? 1
                                                                          : 0;
  size_t operands = op.inputs.size() >= metadata ? op.inputs.size() - metadata : 0;
  if (op.op == SY_OP_ATTENTION && operands > 3) f |= SY_FEATURE_BIT(SY_FEATURE_SINKS);
  if (op.op == SY_OP_ATTENTION && op.outputs.size() > 1) f |= SY_FEATURE_BIT(SY_FEATURE_LSE);
  if (op.op == SY_OP_FUSED_DECODE_ATTENTION && rope_scaled(op, 5))
    f |= SY_FEATURE_BIT(SY_FEATURE_ROPE_SCALED);
  if (auto s = op.attention_shape()) {
    if (s->kv_heads > 0 && s->q_heads != s->kv_heads) f |= SY_FEATURE_BIT(SY_FEATURE_GQA);
    if (s->q_len == 1 && s->kv_len > 1) f |= SY_FEATURE_BIT(SY_FEATURE_DECODE);
    if (s->batch > 1) f |= SY_FEATURE_BIT(SY_FEATURE_BATCH);
    double scale = op.float_attr(SY_ATTR_SCALE).value_or(0.0);
    double natural = s->head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(s->head_dim)) : 0.0;
    if (scale != 0.0 && std::abs(scale - natural) > 1e-6 * natural)
      f |= SY_FEATURE_BIT(SY_FEATURE_CUSTOM_SCALE);
  }
  return f;
}

uint64_t rope_features(const OpDesc& op) {
  uint64_t f = 0;
  if (rope_scaled(op, 2)) f |= SY_FEATURE_BIT(SY_FEATURE_ROPE_SCALED);
  std::string style = op.string_attr(SY_ATTR_ROPE_STYLE).value_or("neox");
  f |= SY_FEATURE_BIT(style == "interleaved" ? SY_FEATURE_ROPE_INTERLEAVED : SY_FEATURE_ROPE_NEOX);
  if (!op.inputs.empty() && !op.inputs[0].shape.empty()) {
    int64_t head_dim = op.inputs[0].shape.back();
    int64_t rotary = op.int_attr(SY_ATTR_ROTARY_DIM).value_or(head_dim);
    if (rotary < head_dim) f |= SY_FEATURE_BIT(SY_FEATURE_PARTIAL_ROTARY);
  }
  return f;
}

}  // namespace

std::optional<int64_t> OpDesc::int_attr(const std::string& name) const {
  return find_attr<int64_t>(attrs, name);
}
std::optional<double> OpDesc::float_attr(const std::string& name) const {
  return find_attr<double>(attrs, name);
}
std::optional<std::string> OpDesc::string_attr(const std::string& name) const {
  return find_attr<std::string>(attrs, name);
}

void OpDesc::set(const std::string& name, std::variant<int64_t, double, std::string> value) {
  for (auto& a : attrs)
    if (a.name == name) {
      a.value = std::move(value);
      return;
    }
  attrs.push_back({name, std::move(value)});
}

sy_dtype OpDesc::dtype() const {
  if (inputs.empty()) return SY_DTYPE_F32;
  AbiOpView view(*this);
  return sy_op_dtype(view.get());
}

std::optional<OpDesc::AttentionShape> OpDesc::attention_shape() const {
  if (!is_attention(op) || inputs.size() < 2) return std::nullopt;
  const auto& q = inputs[0].shape;
  const auto& k = inputs[1].shape;
  if (q.size() != 4 || k.size() != 4) return std::nullopt;
  if (op == SY_OP_ATTENTION && int_attr(SY_ATTR_PAGED).value_or(0)) {
    // The paged form: q packs every sequence's tokens [1, T, Hq, D], k is the block pool
    // [NB, BS, Hkv, D]; the sequences are the block table's rows (its last input).
    const auto& table = inputs.back().shape;
    const int64_t sequences = table.size() == 2 ? table[0] : 1;
    return AttentionShape{sequences, q[1], k[0] * k[1], q[2], k[2], q[3]};
  }
  return AttentionShape{q[0], q[1], k[1], q[2], k[2], q[3]};
}

// Varlen: some extent varies per execute. Paged: the block-pool form of the KV operands.
uint64_t extent_features(const OpDesc& op) {
  uint64_t f = 0;
  for (const auto* list : {&op.inputs, &op.outputs})
    for (const auto& t : *list)
      if (t.dynamic_dims) f |= SY_FEATURE_BIT(SY_FEATURE_VARLEN);
  if (op.int_attr(SY_ATTR_PAGED).value_or(0)) f |= SY_FEATURE_BIT(SY_FEATURE_PAGED_KV);
  return f;
}

uint64_t OpDesc::required_features() const {
  uint64_t f = extent_features(*this);
  if (is_attention(op)) return f | attention_features(*this);
  if (op == SY_OP_ROPE) return f | rope_features(*this);
  if (op == SY_OP_MATMUL && int_attr(SY_ATTR_TRANSPOSE_B).value_or(0))
    return f | SY_FEATURE_BIT(SY_FEATURE_TRANSPOSED_B);
  return f;
}

AbiOpView::AbiOpView(const OpDesc& op) {
  tensors_.reserve(op.inputs.size() + op.outputs.size());
  auto add_tensor = [&](const TensorDesc& t) {
    sy_tensor_desc d{};
    d.struct_size = sizeof(d);
    d.dtype = t.dtype;
    d.ndim = static_cast<int32_t>(t.shape.size());
    d.shape = t.shape.data();
    d.memory = t.memory;
    d.dynamic_dims = t.dynamic_dims;
    d.layout = t.layout;
    tensors_.push_back(d);
    return &tensors_.back();
  };
  for (const auto& t : op.inputs) inputs_.push_back(add_tensor(t));
  for (const auto& t : op.outputs) outputs_.push_back(add_tensor(t));

  attrs_.reserve(op.attrs.size());
  for (const auto& a : op.attrs) {
    sy_attr x{};
    x.struct_size = sizeof(x);
    x.name = a.name.c_str();
    if (auto* i = std::get_if<int64_t>(&a.value)) {
      x.type = SY_ATTR_INT;
      x.i = *i;
    } else if (auto* f = std::get_if<double>(&a.value)) {
      x.type = SY_ATTR_FLOAT;
      x.f = *f;
    } else {
      x.type = SY_ATTR_STRING;
      x.s = std::get<std::string>(a.value).c_str();
    }
    attrs_.push_back(x);
  }
  for (const auto& a : attrs_) attr_ptrs_.push_back(&a);

  desc_.struct_size = sizeof(desc_);
  desc_.op = op.op;
  desc_.inputs = inputs_.data();
  desc_.num_inputs = inputs_.size();
  desc_.outputs = outputs_.data();
  desc_.num_outputs = outputs_.size();
  desc_.attrs = attr_ptrs_.data();
  desc_.num_attrs = attr_ptrs_.size();
  desc_.required_features = op.required_features();
}

}  // namespace sy
