// What the commands that run a model (`run`, `perplexity`) share: reading a text argument or
// file, a progress line while weights load, and an Error reported as text or as the --json
// error object with its documented exit code.
#pragma once

#include <optional>
#include <string>

#include "core/errors/error.hpp"
#include "core/executor/executor.hpp"
#include "core/planner/planner.hpp"

namespace sy::cli {

// The contents of `path` ("-" is standard input); nullopt with `why` set when it cannot be read.
std::optional<std::string> read_source(const std::string& path, std::string& why);

// `load`, drawing a progress bar on a terminal's stderr when there is enough to wait for.
WeightLoader with_progress(WeightLoader load, uint64_t total_bytes);

// The policy of --prefer (comma-separated device types; empty: cuda, then cpu), --attention and
// --strict.
Policy run_policy(const std::string& prefer, const std::string& attention, bool strict);

// Prints `e` ("switchyard COMMAND: error SYxxx (name): ..." on stderr, or {"status": "error"}
// on stdout as JSON) and returns its exit code.
int fail(const char* command, const Error& e, bool as_json);

}  // namespace sy::cli
