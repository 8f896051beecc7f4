// The CLI's documented exit codes (also in `switchyard --help` and the README).
#pragma once

namespace sy::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // an unexpected internal error
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitNoPlan = 3;       // no legal plan exists
inline constexpr int kExitBadInput = 4;     // a model, graph or config file is invalid
inline constexpr int kExitPluginError = 5;  // a plugin the user asked for failed to load

inline constexpr const char* kExitCodeHelp =
    "Exit codes: 0 success, 1 internal error, 2 usage error, 3 no legal plan,\n"
    "            4 bad input, 5 a plugin the user asked for failed to load.\n";

}  // namespace sy::cli
