// registry/ — every plugin discovered on the search path, loaded or not, with its devices
// and kernel envelopes: the inventory the CLI lists and the planner plans against.
//
// Discovery never stops at a bad plugin: each failure (a whole directory refused, a file
// that fails a load stage, a duplicate name) becomes a record with its diagnostic.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/plugin/loader.hpp"

namespace sy {

struct PluginRecord {
  std::filesystem::path path;
  std::string name;                          // known once the entry table was read
  std::unique_ptr<Plugin> plugin;            // set when loaded
  std::optional<LoadDiagnostic> diagnostic;  // set when it failed
  bool loaded() const { return plugin != nullptr; }
};

struct SearchPath {
  std::vector<std::filesystem::path> dirs;
  std::string source;  // "--plugin-dir", "SWITCHYARD_PLUGIN_PATH" or "default"
};

// The directories to search: --plugin-dir values if any, else SWITCHYARD_PLUGIN_PATH (a
// colon list) if set, else `<executable dir>/../lib/switchyard/plugins`. Each level
// replaces the next, so a user can always say exactly which plugins take part.
SearchPath plugin_search_path(const std::vector<std::string>& cli_dirs, const char* env_value,
                              const std::filesystem::path& executable);

class Registry {
 public:
  static Registry discover(const SearchPath& search, const LoadOptions& options);

  const SearchPath& search_path() const { return search_; }
  const std::vector<PluginRecord>& records() const { return records_; }
  // The loaded plugin called `name`, or nullptr.
  const Plugin* find(const std::string& name) const;
  // The record (loaded or failed) whose plugin name or file stem is `name`, or nullptr.
  const PluginRecord* find_record(const std::string& name) const;

 private:
  void scan_directory(const std::filesystem::path& dir, const LoadOptions& options);
  void add(const std::filesystem::path& file, const LoadOptions& options);

  SearchPath search_;
  std::vector<PluginRecord> records_;
};

}  // namespace sy
