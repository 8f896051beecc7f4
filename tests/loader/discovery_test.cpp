// The plugin search path: --plugin-dir, then SWITCHYARD_PLUGIN_PATH, then the default.
#include <gtest/gtest.h>

#include "core/registry/registry.hpp"

namespace sy {
namespace {

TEST(SearchPath, DefaultIsRelativeToTheExecutable) {
  auto sp = plugin_search_path({}, nullptr, "/opt/sy/bin/switchyard");
  EXPECT_EQ(sp.source, "default");
  ASSERT_EQ(sp.dirs.size(), 1u);
  EXPECT_EQ(sp.dirs[0], "/opt/sy/lib/switchyard/plugins");
}

TEST(SearchPath, EnvironmentReplacesDefaultAndSkipsEmptyItems) {
  auto sp = plugin_search_path({}, "/a::/b:", "/opt/sy/bin/switchyard");
  EXPECT_EQ(sp.source, "SWITCHYARD_PLUGIN_PATH");
  EXPECT_EQ(sp.dirs, (std::vector<std::filesystem::path>{"/a", "/b"}));
}

TEST(SearchPath, CommandLineReplacesEnvironment) {
  auto sp = plugin_search_path({"/c", "/d"}, "/a", "/opt/sy/bin/switchyard");
  EXPECT_EQ(sp.source, "--plugin-dir");
  EXPECT_EQ(sp.dirs, (std::vector<std::filesystem::path>{"/c", "/d"}));
}

TEST(SearchPath, EmptyEnvironmentMeansDefault) {
  EXPECT_EQ(plugin_search_path({}, "", "/x/bin/switchyard").source, "default");
}

}  // namespace
}  // namespace sy
