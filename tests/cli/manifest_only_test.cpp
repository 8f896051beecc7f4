// Manifest-only planning: for a described machine (`plan --target`) and for `caps`, plugins are
// taken from the manifests beside their libraries, which are not opened. A folder whose
// cuda_flash.so is garbage still plans attention onto cuda_flash for the H200 from its manifest,
// and the plan says where the declaration came from; `run`, which must execute, opens the
// library and fails at the open stage, saying so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

using test::kExampleModels;
using test::kH200Target;

class ManifestOnly : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::kHaveCudaPlugin) GTEST_SKIP() << "cuda_flash is not built (no nvcc)";
    fs::copy_file(test::kPluginDir / "cuda_flash.json", dir_.path() / "cuda_flash.json");
    std::ofstream(dir_.path() / "cuda_flash.so") << std::string(4096, '\x7f') << "not a library";
  }
  std::string sy(const std::string& args) {
    return "--plugin-dir " + dir_.path().string() + " " + args;
  }
  test::TempDir dir_;
};

TEST_F(ManifestOnly, AGarbageLibraryStillPlansForATargetFromItsManifest) {
  auto r = test::run_switchyard(
      sy("plan " + kExampleModels + "smollm3-3b/config.json --target " + kH200Target + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 2000) << r.err;
  const json plan = json::parse(r.out);
  EXPECT_EQ(plan["plugin_sources"]["cuda_flash"], "manifest");
  bool attention_on_cuda = false;
  for (const auto& op : plan["phases"][0]["ops"])
    if (op["op"] == "attention")
      attention_on_cuda |= op["plugin"] == "cuda_flash" && op["device"] == "cuda:0";
  EXPECT_TRUE(attention_on_cuda);
  auto text = test::run_switchyard(
      sy("plan " + kExampleModels + "smollm3-3b/config.json --target " + kH200Target));
  EXPECT_THAT(text.out, HasSubstr("plugins: cuda_flash (manifest)"));
}

TEST_F(ManifestOnly, DevicesOfATargetListThePluginsTheirManifestsDeclare) {
  auto r = test::run_switchyard(sy("devices --target " + kH200Target + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json devices = json::parse(r.out);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[1]["id"], "cuda:0");
  EXPECT_EQ(devices[1]["plugins"]["cuda_flash"]["source"], "manifest");
  EXPECT_GT(devices[1]["plugins"]["cuda_flash"]["kernels"].get<int>(), 0);
}

TEST_F(ManifestOnly, CapsReadsTheManifestWithoutOpeningTheLibrary) {
  auto r = test::run_switchyard(sy("caps --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json caps = json::parse(r.out);
  EXPECT_FALSE(caps.empty());
  for (const auto& k : caps) EXPECT_EQ(k["plugin"], "cuda_flash");
}

TEST_F(ManifestOnly, WhatMustExecuteOpensTheLibraryAndFailsAtTheOpenStage) {
  test::TempDir model;
  ASSERT_EQ(test::run_switchyard("make-test-model " + model.path().string()).exit_code, 0);
  auto run = test::run_switchyard(sy("run " + model.path().string() + " --prompt hi"));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_THAT(run.err, HasSubstr("cuda_flash.so failed at stage open"));
  auto plugins = test::run_switchyard(sy("plugins --plugin cuda_flash"));
  EXPECT_EQ(plugins.exit_code, 5);
  EXPECT_THAT(plugins.out, HasSubstr("stage open"));
}

}  // namespace
}  // namespace sy
