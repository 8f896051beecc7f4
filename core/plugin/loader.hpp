// Loading one plugin through all its stages; see plugin.hpp for the folder's overview.
#pragma once

#include <spdlog/spdlog.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/plugin/plugin.hpp"

namespace sy {

struct LoadOptions {
  // Compare the plugin with the manifest beside it (off only for `switchyard manifest`,
  // which writes that manifest).
  bool require_manifest = true;
  // Probe `check` with operators outside each envelope and refuse a plugin that accepts.
  bool probe_capabilities = true;
  // Open the library in a child process first (load_probe.hpp), so a plugin that dies while
  // loading is a failed plugin, not a dead host.
  bool probe_load = true;
  // Take a plugin's declaration from the manifest beside it without opening the library
  // (planning for a target, `caps`); a library without a manifest is opened as usual.
  bool manifest_only = false;
  // Passed to the plugin's init as key/value options (e.g. num_threads).
  std::vector<std::pair<std::string, std::string>> init_options;
  // The file a plugin of this name was already loaded from, if any: a second one is refused
  // right after the abi stage, before its init (the registry supplies it).
  std::function<std::optional<std::filesystem::path>(const std::string& name)> loaded_from;
  // Where discovery and the loaded plugins log; null: core_logger().
  std::shared_ptr<spdlog::logger> logger;
};

// The logger of `options`: its own, or core_logger().
std::shared_ptr<spdlog::logger> logger_of(const LoadOptions& options);

struct LoadOutcome {
  std::unique_ptr<Plugin> plugin;            // set on success
  std::optional<LoadDiagnostic> diagnostic;  // set on failure
  std::string name;                          // the plugin's name once its table was read
};

LoadOutcome load_plugin(const std::filesystem::path& path, const LoadOptions& options);

// The ABI range this host speaks.
inline constexpr uint32_t kHostAbiMajor = SY_ABI_VERSION_MAJOR;
inline constexpr uint32_t kHostAbiMinor = SY_ABI_VERSION_MINOR;
inline constexpr uint32_t kHostAbiMinorMin = 0;  // ABI 1.0 plugins still load

// The logger the core writes through: the one registered as kCoreLoggerName (libswitchyard
// registers its own, silent unless the embedding program asks) or else spdlog's default (the
// CLI's, on stderr).
inline constexpr const char* kCoreLoggerName = "switchyard";
std::shared_ptr<spdlog::logger> core_logger();

}  // namespace sy
