// Manifest comparison, and the real plugins' manifests matching their declarations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/plugin/loader.hpp"
#include "core/plugin/manifest.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;

json sample() {
  return json::parse(R"({"schema": "switchyard.plugin-manifest/1", "name": "p",
    "plugin_version": "1", "library": "p.so", "abi_version": "1.1",
    "kernels": [{"kernel": "k", "dtypes": ["f32"]}, {"kernel": "j", "dtypes": ["f16"]}]})");
}

TEST(ManifestDifferences, IdenticalHasNone) {
  EXPECT_TRUE(manifest_differences(sample(), sample()).empty());
}

TEST(ManifestDifferences, NamesKernelAndFieldOfEachDrift) {
  json runtime = sample();
  runtime["kernels"][0]["dtypes"] = {"f32", "bf16"};
  runtime["kernels"].push_back({{"kernel", "new"}});
  runtime["abi_version"] = "1.0";
  auto diffs = manifest_differences(sample(), runtime);
  ASSERT_EQ(diffs.size(), 3u);
  EXPECT_THAT(diffs[0], ::testing::HasSubstr("abi_version"));
  EXPECT_THAT(diffs[1], ::testing::HasSubstr("kernel 'k' dtypes"));
  EXPECT_THAT(diffs[2], ::testing::HasSubstr("kernel 'new' is declared by the plugin"));
}

TEST(ManifestDifferences, KernelMissingFromPlugin) {
  json runtime = sample();
  runtime["kernels"].erase(1);
  auto diffs = manifest_differences(sample(), runtime);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_THAT(diffs[0], ::testing::HasSubstr("'j' is in the manifest but not declared"));
}

TEST(ManifestPath, SitsBesideTheLibrary) {
  EXPECT_EQ(manifest_path_for("/a/b/cpu_onednn.so"), "/a/b/cpu_onednn.json");
}

// The build generated these manifests; loading with the manifest stage on proves they agree.
TEST(ShippedManifests, MatchTheirPlugins) {
  std::vector<std::string> names = {"cpu_onednn"};
  if (test::kHaveCudaPlugin) names.push_back("cuda_flash");
  for (const auto& name : names) {
    auto out = load_plugin(test::kPluginDir / (name + ".so"), LoadOptions{});
    ASSERT_TRUE(out.plugin) << name << ": " << out.diagnostic->reason;
    auto file = read_manifest(test::kPluginDir / (name + ".json"));
    ASSERT_TRUE(file.error.empty()) << file.error;
    EXPECT_EQ(file.json["name"], name);
    EXPECT_EQ(file.json["kernels"].size(), out.plugin->kernels().size());
  }
}

}  // namespace
}  // namespace sy
