#include "core/plugin/verification.hpp"

#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

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

std::string file_sha256(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "";
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) return "";
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), std::streamsize(buf.size())) || in.gcount() > 0) {
    if (EVP_DigestUpdate(ctx.get(), buf.data(), size_t(in.gcount())) != 1) return "";
    if (in.eof()) break;
  }
  if (in.bad()) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &length) != 1) return "";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

PluginVerification read_verification(const std::filesystem::path& library,
                                     const std::vector<std::string>& kernels,
                                     const std::string& sha256) {
  PluginVerification v;
  v.sha256 = sha256.empty() ? file_sha256(library) : sha256;
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
  if (!j.contains("sha256") && j.contains("hash"))
    return all(report.string() +
               " is keyed by the FNV-1a 64 `hash` of earlier versions, which does not tell a "
               "build from a forged one: run `switchyard conformance --output` again");
  const auto field = j.find("sha256");
  const std::string reported =
      field != j.end() && field->is_string() ? field->get<std::string>() : "";
  if (reported.empty()) return all(report.string() + " has no sha256 of the library it checked");
  if (v.sha256.empty()) return all(library.string() + " could not be read to compute its SHA-256");
  if (reported != v.sha256)
    return all(report.string() + " is of another build (its sha256 differs)");
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
