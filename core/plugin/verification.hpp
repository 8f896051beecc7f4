// Verified claims: what `switchyard conformance` found for this exact build of a plugin.
//
// A report saved beside the plugin as `<stem>.conformance.json` (conformance --output) is read
// when the plugin loads. It counts only when its `sha256` is the SHA-256 of the library file's
// bytes (file_sha256): a report of another build is stale, and a report keyed by the FNV-1a 64
// `hash` of earlier versions reads as unverified (anyone can build a library with a given FNV
// hash; a SHA-256 collision is out of reach). The digest identifies a build; it is not a
// signature (docs/conformance.md). Each kernel is then
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
  std::string sha256;            // the library file's SHA-256, 64 hex digits ("" if unreadable)
  std::filesystem::path report;  // empty when there is none
  std::map<std::string, KernelVerification> kernels;
  KernelVerification of(const std::string& kernel) const;
};

// The SHA-256 of the file's bytes as 64 lowercase hex digits (OpenSSL's libcrypto); "" when
// the file cannot be read.
std::string file_sha256(const std::filesystem::path& file);

// The report beside `library`, judged for `kernels`; `sha256` is the library's digest when the
// caller has it ("" computes it).
PluginVerification read_verification(const std::filesystem::path& library,
                                     const std::vector<std::string>& kernels,
                                     const std::string& sha256 = "");

}  // namespace sy
