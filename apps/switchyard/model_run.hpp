// What the commands that run a model (`run`, `perplexity`) share: reading a text argument or
// file, a progress line while weights load, and an Error reported as text or as the --json
// error object with its documented exit code.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/errors/error.hpp"
#include "core/executor/context.hpp"
#include "core/executor/weight_loader.hpp"
#include "core/planner/planner.hpp"
#include "core/runtime/runtime.hpp"

namespace sy::cli {

// The contents of `path` ("-" is standard input); nullopt with `why` set when it cannot be read.
std::optional<std::string> read_source(const std::string& path, std::string& why);

// `load`, drawing a progress bar on a terminal's stderr when there is enough to wait for.
WeightLoader with_progress(WeightLoader load, uint64_t total_bytes);

// --memory-reserve SIZE and --max-device-memory LOC=SIZE (repeatable, or comma-separated) into
// `policy`. SIZE: bytes, or a number with K, M, G, KiB, MiB, GiB, KB, MB, GB; LOC: a device
// id (cuda:0), or host / cpu / cpu:N for host memory. Returns the usage error, if any.
std::optional<std::string> apply_memory_options(const std::string& reserve,
                                                const std::vector<std::string>& caps,
                                                Policy& policy);

// Prints `e` ("switchyard COMMAND: error SYxxx (name): ..." on stderr, or {"status": "error"}
// on stdout as JSON) and returns its exit code.
int fail(const char* command, const Error& e, bool as_json);

// The form each segment of the plan took in `context`: a JSON array of {phase, plugin, device,
// ops, form ("segment" or "per_op"), detail}, and the same as lines ("segment PLUGIN on DEVICE,
// N ops: DETAIL") on stdout. `bench batch` and `run --profile` report them.
nlohmann::json segments_json(const Context& context);
void print_segments(const Context& context);

}  // namespace sy::cli
