// Stable names of the ABI vocabulary, both directions, plus mask <-> list helpers.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/vocabulary.h"

namespace sy {

std::optional<sy_dtype> parse_dtype(std::string_view name);
std::optional<sy_op_kind> parse_op_kind(std::string_view name);
std::optional<sy_feature> parse_feature(std::string_view name);
std::optional<sy_residency> parse_residency(std::string_view name);

// "cpu", "cuda", ...; "device_type_<n>" for values without a name.
std::string device_type_name(DLDeviceType type);
std::optional<DLDeviceType> parse_device_type(std::string_view name);

std::vector<std::string> dtype_names(uint64_t mask);
std::vector<std::string> feature_names(uint64_t mask);
std::string join(const std::vector<std::string>& items, std::string_view sep = ",");

}  // namespace sy
