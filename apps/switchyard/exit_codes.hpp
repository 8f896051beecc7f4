// The CLI's documented exit codes (also in `switchyard --help` and the README).
#pragma once

#include "core/errors/errors.hpp"

namespace sy::cli {

// The values are the catalog's (core/errors/errors.hpp), which owns them.
inline constexpr int kExitOk = exit_code::kOk;
inline constexpr int kExitFailure = exit_code::kInternal;          // an internal error, SY301
inline constexpr int kExitUsage = exit_code::kUsage;               // bad command line
inline constexpr int kExitNoPlan = exit_code::kNoPlan;             // no legal plan exists
inline constexpr int kExitBadInput = exit_code::kBadInput;         // invalid model, graph, config
inline constexpr int kExitPluginError = exit_code::kPluginFailed;  // a named plugin failed to load
inline constexpr int kExitOutOfMemory = exit_code::kOutOfMemory;   // SY305
inline constexpr int kExitDeviceLost = exit_code::kDeviceLost;     // SY306
inline constexpr int kExitPluginBug = exit_code::kPluginBug;       // SY307
inline constexpr int kExitNonconformant = exit_code::kNonconformant;  // conformance failed

inline constexpr const char* kExitCodeHelp =
    "Exit codes: 0 success, 1 internal error, 2 usage error, 3 no legal plan,\n"
    "            4 bad input, 5 a plugin the user asked for failed to load,\n"
    "            6 out of memory, 7 a device became unavailable,\n"
    "            8 a plugin failed internally, 9 a plugin failed conformance.\n";

}  // namespace sy::cli
