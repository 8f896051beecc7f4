// Where the build put the things tests load, and a runner for the CLI.
#pragma once

#include <filesystem>
#include <string>

namespace sy::test {

inline const std::filesystem::path kGoodDir = SY_TEST_GOOD_DIR;
inline const std::filesystem::path kBrokenDir = SY_TEST_BROKEN_DIR;
inline const std::filesystem::path kPluginDir = SY_TEST_PLUGIN_DIR;
inline constexpr bool kHaveCudaPlugin = SY_TEST_HAVE_CUDA_PLUGIN;
// The source tree's examples/ and tests/fixtures/, and the built plugin sets (tests/plugins).
inline const std::filesystem::path kExamplesDir = SY_TEST_EXAMPLES_DIR;
inline const std::filesystem::path kFixturesDir = SY_TEST_FIXTURES_DIR;
inline const std::filesystem::path kSetsDir = SY_TEST_SETS_DIR;
// The example model configs' folder (with its trailing slash) and the H200 target, as the
// planner tests pass them to `switchyard plan`.
inline const std::string kExampleModels = (kExamplesDir / "models/").string();
inline const std::string kH200Target = (kExamplesDir / "targets/h200.json").string();

struct CommandResult {
  int exit_code = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

// The whole of a file the test reads (a fixture, a doc, a file a command wrote), byte for byte;
// throws std::runtime_error naming the path when it cannot be opened, so a missing fixture fails
// the test by name rather than as an empty text.
std::string file_contents(const std::filesystem::path& path);

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
