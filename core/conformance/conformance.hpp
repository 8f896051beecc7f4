// conformance/ — `switchyard conformance PLUGIN`: does a plugin do what it declares? Its report,
// saved beside the plugin, is what core/plugin/verification.hpp reads as verified claims.
//
// For every kernel envelope of the plugin it generates operators inside the envelope (each
// dtype, the features the op kind can use, edge sizes) and a few just outside (a dtype, a
// feature or a head dim the envelope lacks), and checks that:
//   - check accepts inside (a refusal there is reported as "narrowed", not a failure: check may
//     narrow) and refuses outside ("accepts_outside" otherwise);
//   - prepare agrees with check ("prepare_disagrees");
//   - execute on the plugin's host-memory device gives the reference plugin's outputs within the
//     dtype's tolerance ("wrong_numbers", "execute_failed");
//   - execute refuses bad arguments (NULL data, a wrong rank) with an error ("bad_arguments");
//   - two prepared kernels run at once on two threads give the same results as alone
//     ("not_thread_safe");
//   - a weight packed in each layout the kernel names (ABI 1.10) gives the same results bit for
//     bit as the stored one ("packed_differs", "layout_failed"), and another layout is refused
//     by check and by pack_weight ("accepts_foreign_layout", "packs_unknown_layout");
//   - the plugin writes nothing to stdout or stderr ("wrote_output");
// and the whole run happens in a child process, so a plugin that crashes is a verdict
// ("crashed", naming the case it was in), never a dead CLI.
//
// Tolerances per dtype (|got − want| <= atol + rtol·|want|): f32 1e-4 / 1e-4, f16 2e-3 /
// 2e-3, bf16 2e-2 / 2e-2; integer outputs (argmax) exactly. Depends on plugin/, capability/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/plugin/verification.hpp"

namespace sy {

struct ConformanceOptions {
  std::filesystem::path reference;  // the reference plugin's .so
  std::string kernel;               // only this kernel ("" = all)
  bool quick = false;               // fewer shapes per kernel
  uint32_t seed = 1;
};

struct ConformanceFailure {
  std::string verdict;  // "accepts_outside", "wrong_numbers", ... (conformance.hpp)
  std::string kernel;   // "" for the plugin as a whole
  std::string case_label;
  std::string detail;
};

struct ConformanceKernel {
  std::string kernel, op;
  int inside = 0, outside = 0, narrowed = 0, executed = 0;
  int packed = 0;  // cases also run on a weight in a packed layout the kernel named
};

struct ConformanceReport {
  std::string path, plugin, version, sha256;  // sha256: of the library file, 64 hex digits
  uint32_t abi_major = 0, abi_minor = 0;
  bool executed = false;  // the plugin has a host-memory device to run on
  std::string load_error;
  std::vector<ConformanceKernel> kernels;
  std::vector<ConformanceFailure> failures;
  double seconds = 0;

  bool passed() const { return load_error.empty() && failures.empty(); }
  nlohmann::json to_json() const;
  static ConformanceReport from_json(const nlohmann::json& j);
};

// Runs the checks in this process (the plugin may crash it: use run_conformance_isolated).
ConformanceReport run_conformance(const std::filesystem::path& plugin,
                                  const ConformanceOptions& options);

// Runs them in a child process with stdout and stderr captured: a crash or any byte the plugin
// writes becomes a failure in the report.
ConformanceReport run_conformance_isolated(const std::filesystem::path& plugin,
                                           const ConformanceOptions& options);

}  // namespace sy
