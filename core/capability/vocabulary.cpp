#include "core/capability/vocabulary.hpp"

#include "switchyard/envelope_check.h"

namespace sy {
namespace {

template <typename Enum, typename NameFn>
std::optional<Enum> parse_by_name(std::string_view name, int count, NameFn name_of) {
  for (int i = 0; i < count; ++i) {
    const char* n = name_of(static_cast<Enum>(i));
    if (n && name == n) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

// Every DLPack device type that has a stable name (sy_device_type_name).
constexpr DLDeviceType kNamedDeviceTypes[] = {kDLCPU,    kDLCUDA,   kDLCUDAHost,
                                              kDLOpenCL, kDLVulkan, kDLMetal,
                                              kDLROCM,   kDLExtDev, kDLCUDAManaged};

}  // namespace

std::optional<sy_dtype> parse_dtype(std::string_view name) {
  return parse_by_name<sy_dtype>(name, SY_DTYPE_COUNT, sy_dtype_name);
}
std::optional<sy_op_kind> parse_op_kind(std::string_view name) {
  return parse_by_name<sy_op_kind>(name, SY_OP_COUNT, sy_op_kind_name);
}
std::optional<sy_feature> parse_feature(std::string_view name) {
  return parse_by_name<sy_feature>(name, SY_FEATURE_COUNT, sy_feature_name);
}
std::optional<sy_residency> parse_residency(std::string_view name) {
  return parse_by_name<sy_residency>(name, SY_RESIDENCY_COUNT, sy_residency_name);
}

std::string device_type_name(DLDeviceType type) {
  const char* n = sy_device_type_name(type);
  return n ? n : "device_type_" + std::to_string(static_cast<int>(type));
}

std::optional<DLDeviceType> parse_device_type(std::string_view name) {
  for (DLDeviceType t : kNamedDeviceTypes)
    if (name == sy_device_type_name(t)) return t;
  return std::nullopt;
}

std::vector<std::string> dtype_names(uint64_t mask) {
  std::vector<std::string> out;
  for (int i = 0; i < 64; ++i) {
    if (!(mask & SY_DTYPE_BIT(i))) continue;
    const char* n = sy_dtype_name(static_cast<sy_dtype>(i));
    out.push_back(n ? n : "dtype_" + std::to_string(i));
  }
  return out;
}

std::vector<std::string> feature_names(uint64_t mask) {
  std::vector<std::string> out;
  for (int i = 0; i < 64; ++i) {
    if (!(mask & SY_FEATURE_BIT(i))) continue;
    const char* n = sy_feature_name(static_cast<sy_feature>(i));
    out.push_back(n ? n : "feature_" + std::to_string(i));
  }
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

}  // namespace sy
