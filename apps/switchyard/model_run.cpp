#include "apps/switchyard/model_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"

namespace sy::cli {

using nlohmann::json;

std::optional<std::string> read_source(const std::string& path, std::string& why) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot read " + path;
    return std::nullopt;
  }
  ss << in.rdbuf();
  return ss.str();
}

WeightLoader with_progress(WeightLoader load, uint64_t total_bytes) {
  if (!isatty(2) || total_bytes < (uint64_t(256) << 20)) return load;
  auto done = std::make_shared<uint64_t>(0);
  WeightLoader::LoadFn counted = [load, total_bytes, done](const Value& v, void* dst) {
    std::optional<Error> err = load(v, dst);
    *done += uint64_t(v.bytes());
    double frac = std::min(1.0, double(*done) / double(total_bytes));
    int bar = int(frac * 30);
    std::fprintf(stderr, "\rloading weights [%s%s] %3.0f%%", std::string(size_t(bar), '#').c_str(),
                 std::string(size_t(30 - bar), ' ').c_str(), 100 * frac);
    if (frac >= 1.0) std::fprintf(stderr, "\n");
    return err;
  };
  return WeightLoader(counted, load.map);  // mapped weights are not read: nothing to wait for
}

namespace {

std::optional<int64_t> parse_size(const std::string& text) {
  size_t used = 0;
  double n = 0;
  try {
    n = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"K", 1024.0},
                                                          {"KiB", 1024.0},
                                                          {"M", 1048576.0},
                                                          {"MiB", 1048576.0},
                                                          {"G", 1073741824.0},
                                                          {"GiB", 1073741824.0},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9},
                                                          {"T", 1099511627776.0},
                                                          {"TiB", 1099511627776.0},
                                                          {"TB", 1e12}};
  for (const auto& [name, scale] : kUnits)
    if (unit == name && n >= 0) return int64_t(n * scale);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> apply_memory_options(const std::string& reserve,
                                                const std::vector<std::string>& caps,
                                                Policy& policy) {
  if (!reserve.empty()) {
    auto bytes = parse_size(reserve);
    if (!bytes)
      return "--memory-reserve takes a size such as 512MiB or 2GiB, not '" + reserve + "'";
    policy.memory_reserve = *bytes;
  }
  for (const auto& arg : caps) {
    std::stringstream ss(arg);
    for (std::string item; std::getline(ss, item, ',');) {
      const size_t eq = item.find('=');
      auto bytes = eq == std::string::npos ? std::nullopt : parse_size(item.substr(eq + 1));
      if (!bytes)
        return "--max-device-memory takes DEVICE=SIZE, e.g. cuda:0=8GiB, not '" + item + "'";
      policy.max_device_memory[memory_location(item.substr(0, eq))] = *bytes;
    }
  }
  return std::nullopt;
}

int fail(const char* command, const Error& e, bool as_json) {
  const ErrorInfo& info = error_info(e.code);
  if (as_json) {
    json err{{"code", code_text(e.code)}, {"name", info.name}, {"message", e.what()}};
    if (e.status)
      err["plugin_status"] =
          sy_status_name(sy_status(*e.status)) ? sy_status_name(sy_status(*e.status)) : "?";
    std::cout << json{{"status", "error"}, {"error", err}}.dump(2, ' ', false,
                                                                json::error_handler_t::replace)
              << "\n";
  } else {
    std::cerr << "switchyard " << command << ": error " << code_text(e.code) << " (" << info.name
              << "): " << e.what() << "\n";
  }
  return info.exit_code;
}

nlohmann::json segments_json(const Context& context) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : context.segment_forms())
    out.push_back({{"phase", f.phase},
                   {"plugin", f.plugin},
                   {"device", f.device},
                   {"ops", f.ops},
                   {"form", f.segment ? "segment" : "per_op"},
                   {"detail", f.form}});
  return out;
}

void print_segments(const Context& context) {
  for (const auto& f : context.segment_forms())
    std::printf("segment %s on %s, %zu ops: %s\n", f.plugin.c_str(), f.device.c_str(), f.ops,
                f.form.c_str());
}

}  // namespace sy::cli
