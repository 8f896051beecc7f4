#include "apps/switchyard/cli_context.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>

namespace sy::cli {

std::optional<std::string> configure_logging(const std::string& level_flag) {
  auto logger = spdlog::stderr_color_mt("switchyard");
  logger->set_pattern("switchyard: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  std::string level = level_flag;
  if (level.empty()) {
    const char* env = std::getenv("SWITCHYARD_LOG");
    level = env && *env ? env : "warn";
  }
  auto parsed = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only "off" itself may mean off.
  if (parsed == spdlog::level::off && level != "off")
    return "unknown log level '" + level + "' (trace, debug, info, warn, error, critical, off)";
  spdlog::set_level(parsed);
  return std::nullopt;
}

LoadOptions default_load_options() {
  LoadOptions options;
  if (const char* threads = std::getenv("SWITCHYARD_NUM_THREADS"); threads && *threads)
    options.init_options.emplace_back("num_threads", threads);
  return options;
}

std::filesystem::path executable_path(const GlobalOptions& options) {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::absolute(options.executable) : exe;
}

SearchPath search_path(const GlobalOptions& options) {
  return plugin_search_path(options.plugin_dirs, std::getenv("SWITCHYARD_PLUGIN_PATH"),
                            executable_path(options));
}

Registry discover_plugins(const GlobalOptions& options, const LoadOptions& load) {
  return Registry::discover(search_path(options), load);
}

}  // namespace sy::cli
