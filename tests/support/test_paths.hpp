// Where the build put the things tests load, and a runner for the CLI.
#pragma once

#include <filesystem>
#include <string>

namespace sy::test {

inline const std::filesystem::path kGoodDir = SY_TEST_GOOD_DIR;
inline const std::filesystem::path kBrokenDir = SY_TEST_BROKEN_DIR;
inline const std::filesystem::path kPluginDir = SY_TEST_PLUGIN_DIR;
inline constexpr bool kHaveCudaPlugin = SY_TEST_HAVE_CUDA_PLUGIN;

struct CommandResult {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

// Runs `switchyard ARGS` (through the shell, after ENV assignments if any).
CommandResult run_switchyard(const std::string& args, const std::string& env = "");

// A fresh empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace sy::test
