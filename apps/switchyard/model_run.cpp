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
  return [load, total_bytes, done](const Value& v, void* dst) {
    std::optional<Error> err = load(v, dst);
    *done += uint64_t(v.bytes());
    double frac = std::min(1.0, double(*done) / double(total_bytes));
    int bar = int(frac * 30);
    std::fprintf(stderr, "\rloading weights [%s%s] %3.0f%%", std::string(size_t(bar), '#').c_str(),
                 std::string(size_t(30 - bar), ' ').c_str(), 100 * frac);
    if (frac >= 1.0) std::fprintf(stderr, "\n");
    return err;
  };
}

Policy run_policy(const std::string& prefer, const std::string& attention, bool strict) {
  Policy policy;
  policy.attention = attention;
  policy.strict = strict;
  policy.prefer = {kDLCUDA, kDLCPU};
  if (!prefer.empty()) {
    policy.prefer.clear();
    std::stringstream ss(prefer);
    for (std::string item; std::getline(ss, item, ',');)
      if (auto t = parse_device_type(item)) policy.prefer.push_back(*t);
    policy.prefer_given = true;
  }
  return policy;
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

}  // namespace sy::cli
