// `switchyard conformance` as a plugin author runs it: the built-in plugins and an honest test
// plugin pass; test plugins that each break one promise fail with that promise's verdict
// (tests/plugins/test_plugin.c), exit 9, and the CLI survives the one that segfaults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;
const std::string kConformanceDir = SY_TEST_CONFORMANCE_DIR;

struct Result {
  int exit_code;
  json report;
};

Result conformance(const std::string& plugin, const std::string& extra = "") {
  auto r = test::run_switchyard("conformance " + plugin + " --json " + extra);
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return {r.exit_code, j};
}

std::vector<std::string> verdicts(const json& report) {
  std::vector<std::string> v;
  for (const auto& f : report["failures"]) v.push_back(f["verdict"]);
  return v;
}

TEST(Conformance, CpuOnednnPassesAndRunsEveryKernelAgainstTheReference) {
  Result r = conformance((test::kPluginDir / "cpu_onednn.so").string());
  EXPECT_EQ(r.exit_code, 0) << r.report.dump(2).substr(0, 3000);
  EXPECT_EQ(r.report["status"], "pass");
  EXPECT_EQ(r.report["kernels"].size(), 20u);
  for (const auto& k : r.report["kernels"]) {
    EXPECT_EQ(k["verdict"], "pass") << k;
    EXPECT_GT(k["executed"].get<int>(), 0) << k["kernel"] << " ran no case against the reference";
  }
  EXPECT_EQ(r.report["hash"].get<std::string>().size(), 16u);
}

TEST(Conformance, TheReferencePluginAndAnHonestPluginPass) {
  EXPECT_EQ(conformance("reference").exit_code, 0);
  Result honest = conformance(kConformanceDir + "/honest_add.so");
  EXPECT_EQ(honest.exit_code, 0) << honest.report.dump(2);
  EXPECT_GT(honest.report["kernels"][0]["executed"].get<int>(), 0);
}

// Each broken plugin fails with its own verdict, naming the kernel and the case.
TEST(Conformance, EachBrokenPromiseHasItsVerdict) {
  for (auto [plugin, verdict] :
       {std::pair{"wrong_numbers", "wrong_numbers"},
        std::pair{"prepare_disagrees", "prepare_disagrees"},
        std::pair{"accepts_outside", "accepts_outside"}, std::pair{"writes_stdout", "wrote_output"},
        std::pair{"segfaults", "crashed"}, std::pair{"shared_scratch", "not_thread_safe"}}) {
    SCOPED_TRACE(plugin);
    Result r = conformance(kConformanceDir + "/" + plugin + ".so");
    EXPECT_EQ(r.exit_code, 9);
    EXPECT_EQ(r.report["status"], "fail");
    ASSERT_FALSE(r.report["failures"].empty());
    EXPECT_THAT(verdicts(r.report), ::testing::Contains(verdict));
    EXPECT_EQ(r.report["failures"][0]["kernel"], "add_f32");
    EXPECT_FALSE(r.report["failures"][0]["case"].get<std::string>().empty());
  }
}

TEST(Conformance, ACrashNamesTheSignalAndTheCase) {
  Result r = conformance(kConformanceDir + "/segfaults.so");
  ASSERT_EQ(r.report["failures"].size(), 1u);
  EXPECT_THAT(r.report["failures"][0]["detail"].get<std::string>(),
              ::testing::HasSubstr("signal 11"));
  auto text = test::run_switchyard("conformance " + kConformanceDir + "/segfaults.so");
  EXPECT_EQ(text.exit_code, 9);
  EXPECT_THAT(text.out, ::testing::HasSubstr("crashed: add_f32 [f32 [3,17]]"));
}

TEST(Conformance, KernelFilterQuickAndBadArguments) {
  Result one = conformance("cpu_onednn", "--kernel rms_norm --quick");
  EXPECT_EQ(one.exit_code, 0);
  ASSERT_EQ(one.report["kernels"].size(), 1u);
  EXPECT_EQ(one.report["kernels"][0]["kernel"], "rms_norm");
  auto missing = test::run_switchyard("conformance /nonexistent/plugin.so");
  EXPECT_EQ(missing.exit_code, 5);
  EXPECT_THAT(missing.err, ::testing::HasSubstr("no plugin /nonexistent/plugin.so"));
  auto broken = test::run_switchyard("conformance " + std::string(SY_TEST_BROKEN_DIR) +
                                     "/no_entry.so --json");
  EXPECT_EQ(broken.exit_code, 5);
  EXPECT_THAT(broken.out, ::testing::HasSubstr("\"load_error\""));
}

}  // namespace
}  // namespace sy
