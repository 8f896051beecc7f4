// errors/ — the documented error catalog: the one table in the code that says, for every error
// Switchyard reports, its stable code (SY001...), its name, its message template, what it means,
// how to fix it and the CLI exit code it maps to.
//
// Offers: ErrorInfo, error_catalog() (the table, in code order), find_error() (by code or name)
// and render_errors_markdown() (the exact text of docs/errors.md, which a test keeps in step;
// regenerate it with `build/bin/switchyard errors --markdown > docs/errors.md`). Depends on
// nothing else in core/.
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

namespace sy {

struct ErrorInfo {
  const char* code;     // "SY004"
  const char* name;     // "sinks_flex_cpu", [a-z0-9_]+
  const char* message;  // the message template, verbatim
  const char* meaning;  // one paragraph: what went wrong
  const char* fix;      // what to do about it
  int exit_code;        // the `switchyard` exit code (apps/switchyard/exit_codes.hpp)
};

// Every documented error, in code order.
std::span<const ErrorInfo> error_catalog();

// The entry whose code (case-insensitive: "sy004" finds SY004) or name is `code_or_name`;
// nullptr when there is none.
const ErrorInfo* find_error(std::string_view code_or_name);

// A short description of a CLI exit code that catalog entries use ("no legal plan").
const char* error_exit_code_meaning(int exit_code);

// docs/errors.md, exactly.
std::string render_errors_markdown();

}  // namespace sy
