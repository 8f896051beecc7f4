#include "core/registry/registry.hpp"

#include "core/plugin/manifest.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

namespace sy {

namespace fs = std::filesystem;

SearchPath plugin_search_path(const std::vector<std::string>& cli_dirs, const char* env_value,
                              const fs::path& executable) {
  SearchPath sp;
  if (!cli_dirs.empty()) {
    sp.source = "--plugin-dir";
    for (const auto& d : cli_dirs) sp.dirs.emplace_back(d);
    return sp;
  }
  if (env_value && *env_value) {
    sp.source = "SWITCHYARD_PLUGIN_PATH";
    std::stringstream ss(env_value);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) sp.dirs.emplace_back(item);
    return sp;
  }
  sp.source = "default";
  sp.dirs.push_back(
      (executable.parent_path() / ".." / "lib" / "switchyard" / "plugins").lexically_normal());
  return sp;
}

Registry Registry::discover(const SearchPath& search, const LoadOptions& options) {
  Registry r;
  r.search_ = search;
  for (const auto& dir : search.dirs) r.scan_directory(dir, options);
  return r;
}

void Registry::scan_directory(const fs::path& dir, const LoadOptions& options) {
  auto refuse = [&](std::string reason, std::string hint) {
    logger_of(options)->warn("plugin directory {}: {}", dir.string(), reason);
    records_.push_back({dir, "", nullptr, LoadDiagnostic{dir, LoadStage::open, reason, hint}});
  };
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return refuse("plugin directory does not exist", "create it or fix the search path");
  // Anyone could drop code into a world-writable folder and have us run it.
  if (st.st_mode & S_IWOTH)
    return refuse("refused: plugin directory is world-writable", "chmod o-w " + dir.string());

  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".so") files.push_back(entry.path());
  if (ec) return refuse("cannot list directory: " + ec.message(), "check its permissions");
  std::sort(files.begin(), files.end());  // deterministic order, hence deterministic plans
  for (const auto& f : files) add(f, options);
}

void Registry::add(const fs::path& file, const LoadOptions& options) {
  LoadOptions with_names = options;
  with_names.loaded_from = [this](const std::string& name) -> std::optional<fs::path> {
    for (const auto& r : records_)
      if (r.loaded() && r.name == name) return r.path;
    return std::nullopt;
  };
  if (options.manifest_only) {
    const ManifestFile m = read_manifest(manifest_path_for(file));
    if (m.error.empty()) {
      try {
        std::unique_ptr<Plugin> p = Plugin::from_manifest(file, m.json);
        const std::string name = p->name();
        if (!find(name)) {
          logger_of(options)->debug("plugin {} declared by its manifest, not opened", name);
          records_.push_back({file, name, std::move(p), std::nullopt});
          return;
        }
      } catch (const Error& e) {
        records_.push_back({file, "", nullptr,
                            LoadDiagnostic{file, LoadStage::manifest, e.what(),
                                           "regenerate it: switchyard manifest " + file.string()}});
        return;
      }
    }
  }
  LoadOutcome out = load_plugin(file, with_names);
  PluginRecord rec{file, out.name, std::move(out.plugin), std::move(out.diagnostic)};
  if (rec.diagnostic)
    logger_of(options)->warn("plugin {} failed at stage {}: {}", file.string(),
                        load_stage_name(rec.diagnostic->stage), rec.diagnostic->reason);
  else
    logger_of(options)->debug("plugin {} loaded from {}", rec.name, file.string());
  records_.push_back(std::move(rec));
}

const Plugin* Registry::find(const std::string& name) const {
  for (const auto& r : records_)
    if (r.loaded() && r.name == name) return r.plugin.get();
  return nullptr;
}

const PluginRecord* Registry::find_record(const std::string& name) const {
  for (const auto& r : records_)
    if (r.loaded() && r.name == name) return &r;
  for (const auto& r : records_)
    if (r.name == name || r.path.stem() == name) return &r;
  return nullptr;
}

}  // namespace sy
