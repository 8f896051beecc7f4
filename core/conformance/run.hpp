// The in-process run with hooks the isolated run sets (internal to conformance/).
#pragma once

#include <functional>
#include <string>

#include "core/conformance/conformance.hpp"

namespace sy::conformance {

struct Hooks {
  std::function<std::string()> new_output;           // bytes written since the last call
  std::function<void(const std::string&)> progress;  // the case about to run
};

ConformanceReport run_with(const std::filesystem::path& plugin, const ConformanceOptions& options,
                           const Hooks& hooks);

}  // namespace sy::conformance
