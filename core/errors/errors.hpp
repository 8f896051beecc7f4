// errors/ — the documented error catalog: the one table in the code that says, for every error
// Switchyard reports, its stable code (SY001...), its name, its message template, what it means,
// how to fix it and the CLI exit code it maps to.
//
// Offers: Errc and Error (error.hpp: the one error type of the core), the exit codes,
// ErrorInfo, error_catalog() (the table, in code order), find_error() (by code or name)
// and render_errors_markdown() (the exact text of docs/errors.md, which a test keeps in step;
// regenerate it with `build/bin/switchyard errors --markdown > docs/errors.md`). Depends on
// nothing else in core/ (the ABI's status names only).
//
// Codes are stable: never renumber or reuse one; add new codes at the end of their series.
// Series: SY0xx no legal plan, SY1xx plugin load failures, SY2xx bad input, SY3xx run time.
// Messages are templates: `{op}`, `{path}`... stand for the detail filled in when the error is
// reported; the rest of the text is verbatim (users search for it), with Switchyard's own detail
// (candidates, refusals, reasons) after it.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/errors/error.hpp"

namespace sy {

// The `switchyard` exit codes, owned here because every catalog entry maps to one.
namespace exit_code {
inline constexpr int kOk = 0;
inline constexpr int kInternal = 1;       // an internal error, or SY301 (a planner/plugin bug)
inline constexpr int kUsage = 2;          // a bad command line
inline constexpr int kNoPlan = 3;         // SY0xx
inline constexpr int kBadInput = 4;       // SY2xx, SY302-SY304
inline constexpr int kPluginFailed = 5;   // SY1xx, for a plugin the user asked for
inline constexpr int kOutOfMemory = 6;    // SY305
inline constexpr int kDeviceLost = 7;     // SY306
inline constexpr int kPluginBug = 8;      // SY307
inline constexpr int kNonconformant = 9;  // `switchyard conformance`: the plugin failed a check
}  // namespace exit_code

struct ErrorInfo {
  Errc errc;
  const char* code;     // "SY004", the code_text() of errc
  const char* name;     // "sinks_flex_cpu", [a-z0-9_]+
  const char* message;  // the message template, verbatim
  const char* meaning;  // one paragraph: what went wrong
  const char* fix;      // what to do about it
  int exit_code;        // the `switchyard` exit code (exit_code:: above)
};

// Every documented error, in code order.
std::span<const ErrorInfo> error_catalog();

// The entry of `code` (every Errc has one).
const ErrorInfo& error_info(Errc code);

// The entry whose code (case-insensitive: "sy004" finds SY004) or name is `code_or_name`;
// nullptr when there is none.
const ErrorInfo* find_error(std::string_view code_or_name);

// A short description of a CLI exit code that catalog entries use ("no legal plan").
const char* error_exit_code_meaning(int exit_code);

// docs/errors.md, exactly.
std::string render_errors_markdown();

}  // namespace sy
