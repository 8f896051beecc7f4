// ConformanceReport as JSON (the --json output and the isolated run's pipe format).
#include "core/conformance/conformance.hpp"

namespace sy {

using nlohmann::json;

json ConformanceReport::to_json() const {
  json ks = json::array(), fs = json::array();
  for (const ConformanceKernel& k : kernels) {
    int failed = 0;
    for (const ConformanceFailure& f : failures) failed += f.kernel == k.kernel;
    ks.push_back({{"kernel", k.kernel},
                  {"op", k.op},
                  {"cases_inside", k.inside},
                  {"cases_outside", k.outside},
                  {"narrowed", k.narrowed},
                  {"executed", k.executed},
                  {"packed", k.packed},
                  {"verdict", failed ? "fail" : "pass"}});
  }
  for (const ConformanceFailure& f : failures)
    fs.push_back({{"verdict", f.verdict},
                  {"kernel", f.kernel},
                  {"case", f.case_label},
                  {"detail", f.detail}});
  json j = {{"plugin", plugin},
            {"path", path},
            {"sha256", sha256},
            {"version", version},
            {"abi", std::to_string(abi_major) + "." + std::to_string(abi_minor)},
            {"executed", executed},
            {"kernels", ks},
            {"failures", fs},
            {"seconds", seconds},
            {"status", passed() ? "pass" : "fail"}};
  if (!load_error.empty()) j["load_error"] = load_error;
  return j;
}

ConformanceReport ConformanceReport::from_json(const json& j) {
  ConformanceReport r;
  r.plugin = j.value("plugin", "");
  r.path = j.value("path", "");
  r.sha256 = j.value("sha256", "");
  r.version = j.value("version", "");
  const std::string abi = j.value("abi", "0.0");
  r.abi_major = uint32_t(std::stoul(abi.substr(0, abi.find('.'))));
  r.abi_minor = uint32_t(std::stoul(abi.substr(abi.find('.') + 1)));
  r.executed = j.value("executed", false);
  r.load_error = j.value("load_error", "");
  r.seconds = j.value("seconds", 0.0);
  for (const json& k : j.value("kernels", json::array()))
    r.kernels.push_back({k.value("kernel", ""), k.value("op", ""), k.value("cases_inside", 0),
                         k.value("cases_outside", 0), k.value("narrowed", 0),
                         k.value("executed", 0), k.value("packed", 0)});
  for (const json& f : j.value("failures", json::array()))
    r.failures.push_back({f.value("verdict", ""), f.value("kernel", ""), f.value("case", ""),
                          f.value("detail", "")});
  return r;
}

}  // namespace sy
