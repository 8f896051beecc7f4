// Internal to importer/: the table of every config key per family (config_keys.cpp).
#pragma once

#include <string>
#include <vector>

#include "core/importer/model_spec.hpp"

namespace sy::importer {

// SY207 naming the first key of the config object that is not listed for `model_type` (or is
// always refused: quantization_config, auto_map); `allowed` keys pass as without effect.
void check_config_keys(const ConfigReader& r, const std::string& model_type,
                       const std::vector<std::string>& allowed);

// docs/config-keys.md, exactly.
std::string render_config_keys_markdown();

}  // namespace sy::importer
