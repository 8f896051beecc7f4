#include "core/plugin/verification.hpp"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace sy {

const char* verification_name(Verification v) {
  switch (v) {
    case Verification::verified: return "verified";
    case Verification::failed: return "failed";
    default: return "unverified";
  }
}

KernelVerification PluginVerification::of(const std::string& kernel) const {
  auto it = kernels.find(kernel);
  return it == kernels.end() ? KernelVerification{Verification::unverified, "no conformance report"}
                             : it->second;
}

std::string file_hash(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ uint8_t(buf[i])) * 0x100000001b3ull;
    if (in.eof()) break;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

PluginVerification read_verification(const std::filesystem::path& library,
                                     const std::vector<std::string>& kernels) {
  PluginVerification v;
  const std::filesystem::path report =
      library.parent_path() / (library.stem().string() + ".conformance.json");
  auto all = [&](const std::string& why) {
    for (const std::string& k : kernels) v.kernels[k] = {Verification::unverified, why};
    return v;
  };
  if (!std::filesystem::exists(report)) return all("no conformance report");
  v.report = report;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(report), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return all(report.string() + " is not a report");
  if (j.value("hash", "") != file_hash(library))
    return all(report.string() + " is of another build (its hash differs)");
  std::map<std::string, std::string> failed;
  for (const auto& f : j.value("failures", nlohmann::json::array()))
    if (f.is_object() && !failed.count(f.value("kernel", "")))
      failed[f.value("kernel", "")] =
          f.value("verdict", "") + " [" + f.value("case", "") + "]: " + f.value("detail", "");
  std::map<std::string, bool> listed;
  for (const auto& k : j.value("kernels", nlohmann::json::array()))
    if (k.is_object()) listed[k.value("kernel", "")] = true;
  const bool executed = j.value("executed", false);
  for (const std::string& k : kernels) {
    if (failed.count(k) || failed.count(""))
      v.kernels[k] = {Verification::failed, failed.count(k) ? failed[k] : failed[""]};
    else if (listed.count(k) && !executed)
      v.kernels[k] = {Verification::unverified,
                      report.string() + " checked declarations only: no device ran its kernels"};
    else if (listed.count(k))
      v.kernels[k] = {Verification::verified, report.string()};
    else
      v.kernels[k] = {Verification::unverified, report.string() + " does not list it"};
  }
  return v;
}

}  // namespace sy
