// Verified claims: what `switchyard conformance` found for this exact build of a plugin.
//
// A report saved beside the plugin as `<stem>.conformance.json` (conformance --output) is read
// when the plugin loads. It counts only when its `hash` is the library file's (FNV-1a 64,
// file_hash): a report of another build is stale. Each kernel is then
//   verified    the report lists it, no failure names it, and its cases ran (a report made
//               without the plugin's device checks declarations only: unverified);
//   failed      a failure names it (the planner never uses it, and says why);
//   unverified  no report, a stale one, or a report that does not list it.
// `plan --require-verified` uses verified kernels only.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace sy {

enum class Verification { unverified, verified, failed };
const char* verification_name(Verification v);

struct KernelVerification {
  Verification state = Verification::unverified;
  std::string why;  // "no conformance report", the first failure's verdict and case, ...
};

struct PluginVerification {
  std::filesystem::path report;  // empty when there is none
  std::map<std::string, KernelVerification> kernels;
  KernelVerification of(const std::string& kernel) const;
};

// The file's FNV-1a 64-bit hash as 16 hex digits (identifies a build, not a signature).
std::string file_hash(const std::filesystem::path& file);

// The report beside `library`, judged for `kernels`.
PluginVerification read_verification(const std::filesystem::path& library,
                                     const std::vector<std::string>& kernels);

}  // namespace sy
