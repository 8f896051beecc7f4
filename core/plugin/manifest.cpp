#include "core/plugin/manifest.hpp"

#include <fstream>
#include <map>

#include "core/plugin/plugin.hpp"

namespace sy {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path manifest_path_for(const fs::path& library) {
  fs::path p = library;
  return p.replace_extension(".json");
}

json manifest_json(const Plugin& plugin) {
  json kernels = json::array();
  for (const auto& k : plugin.kernels()) kernels.push_back(to_json(k));
  json j{{"schema", kManifestSchema},
         {"name", plugin.name()},
         {"plugin_version", plugin.version()},
         {"library", plugin.path().filename().string()},
         {"abi_version",
          std::to_string(plugin.abi_major()) + "." + std::to_string(plugin.abi_minor())},
         {"kernels", kernels}};
  if (!plugin.extensions().empty()) j["extensions"] = plugin.extensions();
  return j;
}

ManifestFile read_manifest(const fs::path& file) {
  ManifestFile out;
  std::ifstream in(file);
  if (!in) {
    out.error = "no manifest " + file.filename().string() + " beside the library";
    return out;
  }
  try {
    out.json = json::parse(in);
  } catch (const json::parse_error& e) {
    out.error = "manifest " + file.filename().string() + " is not valid JSON: " + e.what();
    return out;
  }
  if (!out.json.is_object() || out.json.value("schema", "") != kManifestSchema)
    out.error = "manifest " + file.filename().string() + " does not declare schema \"" +
                kManifestSchema + "\"";
  return out;
}

std::vector<std::string> manifest_differences(const json& on_disk, const json& runtime) {
  std::vector<std::string> diffs;
  for (const char* key : {"name", "plugin_version", "library", "abi_version"}) {
    json a = on_disk.value(key, json()), b = runtime.value(key, json());
    if (a != b)
      diffs.push_back(std::string(key) + ": manifest " + a.dump() + ", plugin " + b.dump());
  }
  // Absent means none (manifests written before the extensions existed).
  json disk_ext = on_disk.value("extensions", json::array()),
       run_ext = runtime.value("extensions", json::array());
  if (disk_ext != run_ext)
    diffs.push_back("extensions: manifest " + disk_ext.dump() + ", plugin " + run_ext.dump());
  std::map<std::string, json> disk_kernels, run_kernels;
  for (const auto& k : on_disk.value("kernels", json::array()))
    disk_kernels[k.value("kernel", "")] = k;
  for (const auto& k : runtime.value("kernels", json::array()))
    run_kernels[k.value("kernel", "")] = k;
  for (const auto& [name, k] : run_kernels) {
    auto it = disk_kernels.find(name);
    if (it == disk_kernels.end()) {
      diffs.push_back("kernel '" + name + "' is declared by the plugin but not in the manifest");
      continue;
    }
    for (const auto& [field, value] : k.items()) {
      json other = it->second.value(field, json());
      if (other != value)
        diffs.push_back("kernel '" + name + "' " + field + ": manifest " + other.dump() +
                        ", plugin " + value.dump());
    }
  }
  for (const auto& [name, k] : disk_kernels)
    if (!run_kernels.count(name))
      diffs.push_back("kernel '" + name + "' is in the manifest but not declared by the plugin");
  return diffs;
}

}  // namespace sy
