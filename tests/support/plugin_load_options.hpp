// LoadOptions for tests that load plugins in-process, built as the CLI and the host API build
// theirs: SWITCHYARD_NUM_THREADS, when set, reaches the plugins' init as `num_threads`. The TSan
// preset sets it to 1, so no OpenMP team of libgomp (not instrumented: its barriers are
// invisible to TSan) runs between the ops a test's threads check.
#pragma once

#include <cstdlib>

#include "core/plugin/loader.hpp"

namespace sy::test {

inline LoadOptions plugin_load_options() {
  LoadOptions options;
  if (const char* threads = std::getenv("SWITCHYARD_NUM_THREADS"); threads && *threads)
    options.init_options.emplace_back("num_threads", threads);
  return options;
}

}  // namespace sy::test
