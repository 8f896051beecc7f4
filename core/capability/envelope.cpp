#include "core/capability/envelope.hpp"

#include "core/capability/vocabulary.hpp"
#include "switchyard/envelope_check.h"

namespace sy {
namespace {

std::string str_or_empty(const char* s) {
  return s ? s : "";
}

// Borrowed ABI view of an Envelope, for the shared C filters.
class AbiEnvelopeView {
 public:
  explicit AbiEnvelopeView(const Envelope& e) {
    desc_.struct_size = sizeof(desc_);
    desc_.kernel = e.kernel.c_str();
    desc_.op = e.op;
    desc_.family = e.family.c_str();
    desc_.device_type = e.device_type;
    desc_.dtypes = e.dtypes;
    desc_.features = e.features;
    desc_.head_dims = e.head_dims.data();
    desc_.num_head_dims = e.head_dims.size();
    desc_.head_dim_multiple = e.head_dim_multiple;
    desc_.head_dim_max = e.head_dim_max;
    desc_.max_gqa_ratio = e.max_gqa_ratio;
    desc_.default_residency = e.default_residency;
    desc_.operand_residency = e.operand_residency.data();
    desc_.num_operand_residency = e.operand_residency.size();
    desc_.cost_hint = e.cost_hint;
    desc_.weight_dtypes = e.weight_dtypes;
  }
  const sy_kernel_envelope* get() const { return &desc_; }

 private:
  sy_kernel_envelope desc_{};
};

void collect(void* context, const sy_refusal* r) {
  auto s = [](const char* p) { return std::string(p ? p : ""); };
  static_cast<std::vector<Refusal>*>(context)->push_back(
      {s(r->constraint), s(r->required), s(r->offered), s(r->text)});
}

}  // namespace

DeviceInfo DeviceInfo::from_abi(const sy_device_desc& d) {
  DeviceInfo out;
  out.name = str_or_empty(d.name);
  out.type = d.device_type;
  out.id = d.device_id;
  out.arch = str_or_empty(d.arch);
  out.memory_bytes = d.memory_bytes;
  out.compute_units = d.compute_units;
  out.available = d.available != 0;
  out.unavailable_reason = str_or_empty(d.unavailable_reason);
  out.memory_is_host = d.memory_is_host != 0;
  return out;
}

AbiDeviceView::AbiDeviceView(const DeviceInfo& d) {
  desc_.struct_size = sizeof(desc_);
  desc_.name = d.name.c_str();
  desc_.device_type = d.type;
  desc_.device_id = d.id;
  desc_.arch = d.arch.c_str();
  desc_.memory_bytes = d.memory_bytes;
  desc_.compute_units = d.compute_units;
  desc_.available = d.available ? 1 : 0;
  desc_.unavailable_reason = d.available ? nullptr : d.unavailable_reason.c_str();
  desc_.memory_is_host = d.memory_is_host ? 1 : 0;
}

uint64_t features_at_minor(uint64_t features, uint32_t minor) {
  if (minor >= 9) return features;
  features &= ~SY_FEATURE_BIT(SY_FEATURE_ACTIVATION_Q16);  // bit 18 meant nothing before 1.9
  if (minor >= 8) return features;
  features &= ~SY_FEATURE_BIT(SY_FEATURE_ACTIVATION_Q8);  // bit 17 meant nothing before 1.8
  if (minor >= 5) return features;
  return features & ~(SY_FEATURE_BIT(SY_FEATURE_VARLEN) | SY_FEATURE_BIT(SY_FEATURE_PAGED_KV));
}

std::optional<DeclaredNumerics> declared_numerics(uint64_t features) {
  for (const DeclaredNumerics& n : kDeclaredNumerics)
    if (features & SY_FEATURE_BIT(n.bit)) return n;
  return std::nullopt;
}

uint64_t dtypes_at_minor(uint64_t dtypes, uint32_t minor) {
  if (minor >= 7) return dtypes;
  if (minor == 6) return dtypes & (SY_DTYPE_BIT(SY_DTYPE_MXFP4) - 1);
  return dtypes & (SY_DTYPE_BIT(SY_DTYPE_Q5_0) - 1);
}

Envelope Envelope::from_abi(const sy_kernel_envelope& e, uint32_t minor) {
  Envelope out;
  out.kernel = str_or_empty(e.kernel);
  out.op = e.op;
  out.family = str_or_empty(e.family);
  out.device_type = e.device_type;
  out.dtypes = dtypes_at_minor(e.dtypes, minor);
  out.features = features_at_minor(e.features, minor);
  if (e.head_dims) out.head_dims.assign(e.head_dims, e.head_dims + e.num_head_dims);
  out.head_dim_multiple = e.head_dim_multiple;
  out.head_dim_max = e.head_dim_max;
  out.max_gqa_ratio = e.max_gqa_ratio;
  out.default_residency = e.default_residency;
  if (e.operand_residency)
    out.operand_residency.assign(e.operand_residency,
                                 e.operand_residency + e.num_operand_residency);
  out.cost_hint = e.cost_hint;
  if (minor >= 3 && e.struct_size >= SY_KERNEL_ENVELOPE_SIZE_MINOR_3)
    out.weight_dtypes = dtypes_at_minor(e.weight_dtypes, minor);
  return out;
}

sy_residency Envelope::residency_of(size_t operand) const {
  return operand < operand_residency.size() ? operand_residency[operand] : default_residency;
}

bool Envelope::accepts_head_dim(int64_t d) const {
  return sy_envelope_accepts_head_dim(AbiEnvelopeView(*this).get(), d) != 0;
}

std::string Envelope::head_dims_text() const {
  if (!head_dims.empty()) {
    std::vector<std::string> items;
    for (int32_t d : head_dims) items.push_back(std::to_string(d));
    return join(items);
  }
  std::string text =
      head_dim_multiple > 0 ? "multiple of " + std::to_string(head_dim_multiple) : "any";
  if (head_dim_max > 0) text += " up to " + std::to_string(head_dim_max);
  return text;
}

std::vector<Refusal> envelope_refusals(const Envelope& env, const OpDesc& op,
                                       const DeviceInfo& device) {
  std::vector<Refusal> out;
  AbiEnvelopeView e(env);
  AbiDeviceView d(device);
  AbiOpView o(op);
  sy_envelope_check(e.get(), d.get(), o.get(), collect, &out);
  return out;
}

}  // namespace sy
