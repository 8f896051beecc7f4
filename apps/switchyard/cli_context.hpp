// What every command shares: global options, logging set-up, plugin discovery.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/registry/registry.hpp"

namespace sy::cli {

struct GlobalOptions {
  std::vector<std::string> plugin_dirs;
  std::string log_level;  // empty: SWITCHYARD_LOG or "warn"
  std::string executable;
};

// Sets spdlog's default logger (stderr, so --json output stays clean) and its level.
// Returns an error text for an unknown level name.
std::optional<std::string> configure_logging(const std::string& level_flag);

// This program's path (for folders relative to the install, e.g. lib/switchyard/reference).
std::filesystem::path executable_path(const GlobalOptions& options);
// The plugin search path the options and environment describe.
SearchPath search_path(const GlobalOptions& options);
// Discovers plugins on that search path.
Registry discover_plugins(const GlobalOptions& options, const LoadOptions& load = {});

// LoadOptions carrying SWITCHYARD_NUM_THREADS to the plugins' init.
LoadOptions default_load_options();

}  // namespace sy::cli
