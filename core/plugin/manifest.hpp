// The plugin manifest: the JSON a plugin ships beside its .so, generated from the
// plugin's own declaration (`switchyard manifest`) so that it cannot drift. Schema in
// docs/abi.md, "Manifest".
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sy {

class Plugin;

inline constexpr const char* kManifestSchema = "switchyard.plugin-manifest/1";

// `dir/name.so` -> `dir/name.json`.
std::filesystem::path manifest_path_for(const std::filesystem::path& library);

nlohmann::json manifest_json(const Plugin& plugin);

struct ManifestFile {
  nlohmann::json json;
  std::string error;  // empty on success: "cannot read ...", "parse error at byte N: ..."
};
ManifestFile read_manifest(const std::filesystem::path& file);

// Human-readable differences, e.g. "kernel 'sdpa' dtypes: manifest [f32], plugin [f32,bf16]".
std::vector<std::string> manifest_differences(const nlohmann::json& on_disk,
                                              const nlohmann::json& runtime);

}  // namespace sy
