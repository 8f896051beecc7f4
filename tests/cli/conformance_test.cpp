// `switchyard conformance` as a plugin author runs it: the built-in plugins and an honest test
// plugin pass; test plugins that each break one promise fail with that promise's verdict
// (tests/plugins/test_plugin.c), exit 9, and the CLI survives the one that segfaults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/cpu_tiers.hpp"
#include "support/sanitizer_build.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;
const std::string kConformanceDir = SY_TEST_CONFORMANCE_DIR;

struct Result {
  int exit_code;
  json report;
};

Result conformance(const std::string& plugin, const std::string& extra = "",
                   const std::string& env = "") {
  auto r = test::run_switchyard("conformance " + plugin + " --json " + extra, env);
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return {r.exit_code, j};
}

// coreutils' sha256sum of a file: a digest computed by code that is not ours.
std::string sha256sum(const std::filesystem::path& file) {
  FILE* pipe = ::popen(("sha256sum '" + file.string() + "'").c_str(), "r");
  if (!pipe) return "";
  char line[256] = {};
  const bool got = std::fgets(line, sizeof line, pipe) != nullptr;
  ::pclose(pipe);
  return got ? std::string(line).substr(0, 64) : "";
}

std::vector<std::string> verdicts(const json& report) {
  std::vector<std::string> v;
  for (const auto& f : report["failures"]) v.push_back(f["verdict"]);
  return v;
}

// On every instruction-set tier this CPU has (the child inherits SWITCHYARD_CPU_ISA): each
// tier has its own loops, the paged and varlen forms among them.
TEST(Conformance, CpuOnednnPassesAndRunsEveryKernelAgainstTheReference) {
  for (const std::string& tier : test::cpu_tiers()) {
    if (!test::cpu_tier_missing(tier).empty()) continue;
    SCOPED_TRACE("tier " + tier);
    test::ScopedCpuTier scoped(tier);
    Result r = conformance((test::kPluginDir / "cpu_onednn.so").string());
    EXPECT_EQ(r.exit_code, 0) << r.report.dump(2).substr(0, 3000);
    EXPECT_EQ(r.report["status"], "pass");
    EXPECT_EQ(r.report["kernels"].size(), 23u);
    for (const auto& k : r.report["kernels"]) {
      EXPECT_EQ(k["verdict"], "pass") << k;
      EXPECT_GT(k["executed"].get<int>(), 0) << k["kernel"] << " ran no case against the reference";
    }
    EXPECT_EQ(r.report["sha256"], sha256sum(test::kPluginDir / "cpu_onednn.so"));
  }
}

// Without a GPU here, cuda_flash's checks run against a described device and nothing executes;
// the report says so.
TEST(Conformance, CudaFlashsCpuTestablePartsPass) {
  if (!test::kHaveCudaPlugin) GTEST_SKIP() << "cuda_flash is not built (no nvcc)";
  Result r = conformance("cuda_flash");
  EXPECT_EQ(r.exit_code, 0) << r.report.dump(2).substr(0, 3000);
  EXPECT_GT(r.report["kernels"].size(), 10u);
  int outside = 0;
  for (const auto& k : r.report["kernels"]) outside += k["cases_outside"].get<int>();
  EXPECT_GT(outside, 0);
}

TEST(Conformance, TheReferencePluginAndAnHonestPluginPass) {
  EXPECT_EQ(conformance("reference").exit_code, 0);
  Result honest = conformance(kConformanceDir + "/honest_add.so");
  EXPECT_EQ(honest.exit_code, 0) << honest.report.dump(2);
  EXPECT_GT(honest.report["kernels"][0]["executed"].get<int>(), 0);
}

// Each broken plugin fails with its own verdict, naming the kernel and the case. Under
// ThreadSanitizer, shared_scratch's race is on purpose (it is what the verdict is about): TSan
// is told not to report it, so the child lives to be judged as a user's would be.
TEST(Conformance, EachBrokenPromiseHasItsVerdict) {
  for (auto [plugin, verdict] :
       {std::pair{"wrong_numbers", "wrong_numbers"},
        std::pair{"prepare_disagrees", "prepare_disagrees"},
        std::pair{"accepts_outside", "accepts_outside"}, std::pair{"writes_stdout", "wrote_output"},
        std::pair{"segfaults", "crashed"}, std::pair{"shared_scratch", "not_thread_safe"}}) {
    SCOPED_TRACE(plugin);
    const bool racy = std::string(plugin) == "shared_scratch";
    const std::string env =
        test::kSanitizerBuild && racy ? "TSAN_OPTIONS=\"$TSAN_OPTIONS:report_bugs=0\"" : "";
    Result r = conformance(kConformanceDir + "/" + plugin + ".so", "", env);
    EXPECT_EQ(r.exit_code, 9);
    EXPECT_EQ(r.report["status"], "fail");
    ASSERT_FALSE(r.report["failures"].empty());
    EXPECT_THAT(verdicts(r.report), ::testing::Contains(verdict));
    EXPECT_EQ(r.report["failures"][0]["kernel"], "add_f32");
    EXPECT_FALSE(r.report["failures"][0]["case"].get<std::string>().empty());
  }
}

// Under AddressSanitizer its SEGV handler would take the deliberate crash and exit instead of
// letting the signal kill the isolated child; handle_segv=0 gives the signal back to what the
// test checks (the crash is the test plugin's, on purpose).
TEST(Conformance, ACrashNamesTheSignalAndTheCase) {
  const std::string env =
      test::kSanitizerBuild ? "ASAN_OPTIONS=\"$ASAN_OPTIONS:handle_segv=0\"" : "";
  Result r = conformance(kConformanceDir + "/segfaults.so", "", env);
  ASSERT_EQ(r.report["failures"].size(), 1u);
  EXPECT_THAT(r.report["failures"][0]["detail"].get<std::string>(),
              ::testing::HasSubstr("signal 11"));
  auto text = test::run_switchyard("conformance " + kConformanceDir + "/segfaults.so", env);
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

// Verified claims: the build's own reports mark cpu_onednn's kernels verified; a report whose
// failure names a kernel makes the planner refuse it (SY010, the failure quoted); a report of
// another build, or none, leaves kernels unverified, which only --require-verified refuses.
class VerifiedClaims : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    for (const char* f : {"cpu_onednn.so", "cpu_onednn.json"})
      fs::copy_file(test::kPluginDir / f, dir_.path() / f);
  }
  void write_report(const std::string& hash, const json& failures) {
    json kernels = json::array();
    for (const char* k : {"rms_norm", "matmul", "embedding"}) kernels.push_back({{"kernel", k}});
    std::ofstream(dir_.path() / "cpu_onednn.conformance.json")
        << json{{"sha256", hash}, {"executed", true}, {"kernels", kernels}, {"failures", failures}};
  }
  test::CommandResult plan(const std::string& extra) {
    return test::run_switchyard("--plugin-dir " + dir_.path().string() + " plan " +
                                std::string(SY_TEST_EXAMPLES_DIR) +
                                "/models/llama-3.2-1b/config.json --prefer cpu --json " + extra);
  }
  std::string hash() {
    auto r = test::run_switchyard("conformance " + (dir_.path() / "cpu_onednn.so").string() +
                                  " --kernel rms_norm --quick --json");
    return json::parse(r.out)["sha256"];
  }
  // caps --json's cpu_onednn kernels in dir_: kernel name -> conformance {state, why, sha256}.
  std::map<std::string, json> caps() {
    auto r = test::run_switchyard("--plugin-dir " + dir_.path().string() + " caps --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, json> out;
    for (const auto& k : json::parse(r.out, nullptr, false))
      if (k["plugin"] == "cpu_onednn") out[k["kernel"]] = k["conformance"];
    return out;
  }
  test::TempDir dir_;
};

TEST_F(VerifiedClaims, TheBuildsReportsVerifyTheBuiltInKernels) {
  auto caps = test::run_switchyard("caps --json");
  ASSERT_EQ(caps.exit_code, 0);
  int verified = 0;
  for (const auto& k : json::parse(caps.out))
    if (k["plugin"] == "cpu_onednn") verified += k["conformance"]["state"] == "verified";
  EXPECT_EQ(verified, 23);
  auto plan = test::run_switchyard("plan " + std::string(SY_TEST_EXAMPLES_DIR) +
                                   "/models/llama-3.2-1b/config.json --require-verified --json");
  EXPECT_EQ(plan.exit_code, 0) << plan.out.substr(0, 2000);
}

TEST_F(VerifiedClaims, AKernelThatFailedIsNeverUsedAndThePlanSaysWhy) {
  write_report(hash(), json::array({{{"verdict", "wrong_numbers"},
                                     {"kernel", "rms_norm"},
                                     {"case", "f32 [3,64]"},
                                     {"detail", "output 0 off"}}}));
  auto r = plan("");
  EXPECT_EQ(r.exit_code, 3);
  const json e = json::parse(r.out)["error"];
  EXPECT_EQ(e["code"], "SY010");
  EXPECT_THAT(e["message"].get<std::string>(),
              ::testing::HasSubstr("kernel failed conformance: wrong_numbers [f32 [3,64]]"));
}

TEST_F(VerifiedClaims, UnverifiedKernelsAreUsedUnlessVerifiedOnesAreRequired) {
  write_report(std::string(64, '0'), json::array());  // another build's report
  EXPECT_EQ(plan("").exit_code, 0);
  auto strict = plan("--require-verified");
  EXPECT_EQ(strict.exit_code, 3);
  EXPECT_EQ(json::parse(strict.out)["error"]["code"], "SY010");
  EXPECT_THAT(strict.out, ::testing::HasSubstr("is of another build"));
  write_report(hash(), json::array());  // this build's: rms_norm, matmul and embedding verified
  auto partly = plan("--require-verified");
  EXPECT_EQ(partly.exit_code, 3);  // rope is not in the report
  EXPECT_THAT(partly.out, ::testing::HasSubstr("does not list it"));
}

// The report is keyed by the SHA-256 of the library's bytes: the build's own report verifies a
// copy of the library, and the same copy with one byte changed is another build.
TEST_F(VerifiedClaims, OneChangedByteOfTheLibraryTurnsItsKernelsUnverified) {
  namespace fs = std::filesystem;
  fs::copy_file(test::kPluginDir / "cpu_onednn.conformance.json",
                dir_.path() / "cpu_onednn.conformance.json");
  const fs::path library = dir_.path() / "cpu_onednn.so";
  const std::string digest = sha256sum(library);
  ASSERT_EQ(digest.size(), 64u);
  auto before = caps();
  ASSERT_EQ(before.size(), 23u);
  for (const auto& [kernel, c] : before) {
    EXPECT_EQ(c["state"], "verified") << kernel << ": " << c["why"];
    EXPECT_EQ(c["sha256"], digest);
  }
  auto plugins = test::run_switchyard("--plugin-dir " + dir_.path().string() + " plugins --json");
  ASSERT_EQ(plugins.exit_code, 0);
  EXPECT_EQ(json::parse(plugins.out)[0]["sha256"], digest);
  {
    std::fstream f(library, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);  // the section headers' last byte: caps opens no library
    const char last = char(f.get());
    f.seekp(-1, std::ios::end);
    f.put(char(last ^ 0x01));
  }
  ASSERT_NE(sha256sum(library), digest);
  for (const auto& [kernel, c] : caps()) {
    EXPECT_EQ(c["state"], "unverified") << kernel;
    EXPECT_THAT(c["why"].get<std::string>(), ::testing::HasSubstr("its sha256 differs"));
    EXPECT_EQ(c["sha256"], sha256sum(library));
  }
}

// A report from before SHA-256 (keyed by the FNV-1a 64 `hash`) verifies nothing, and says why.
TEST_F(VerifiedClaims, AnFnvKeyedReportReadsAsUnverifiedWithItsReason) {
  json kernels = json::array({{{"kernel", "rms_norm"}}});
  std::ofstream(dir_.path() / "cpu_onednn.conformance.json") << json{{"hash", "cbf29ce484222325"},
                                                                     {"executed", true},
                                                                     {"kernels", kernels},
                                                                     {"failures", json::array()}};
  const json rms = caps()["rms_norm"];
  EXPECT_EQ(rms["state"], "unverified");
  EXPECT_THAT(rms["why"].get<std::string>(), ::testing::HasSubstr("FNV-1a 64"));
  auto strict = plan("--require-verified");
  EXPECT_EQ(strict.exit_code, 3);
  EXPECT_THAT(strict.out, ::testing::HasSubstr("FNV-1a 64"));
}

}  // namespace
}  // namespace sy
