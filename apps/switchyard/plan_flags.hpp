// The planning flags every command that plans a model shares (plan, run, perplexity, bench
// decode, bench batch): the bounds a plan is proved for (--max-batch-tokens, --max-sequences,
// --context, --kv-blocks), the dtype, and the policy (--prefer, --attention, --strict,
// --require-verified, memory caps). One definition, so the flags mean the same everywhere.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"

namespace sy::cli {

struct PlanFlags {
  std::string prefer, attention = "any", dtype, memory_reserve, numerics;
  std::vector<std::string> max_device_memory, allowed_config_keys;
  bool strict = false, require_verified = false;
  int64_t max_batch_tokens = 512, max_sequences = 1, context = 4096, kv_blocks = 0;

  // Adds the flags to `desc`, with the command's own defaults for --max-sequences and --context.
  void add(boost::program_options::options_description& desc, int64_t default_sequences,
           int64_t default_context);
  // The import options and the policy the flags ask for; the usage error when one is wrong.
  std::optional<std::string> apply(ImportOptions& options, Policy& policy) const;
};

}  // namespace sy::cli
