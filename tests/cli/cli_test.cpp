// The CLI as a user runs it: listings, --json shapes, exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;
using test::run_switchyard;
using ::testing::HasSubstr;

json parse_stdout(const test::CommandResult& r) {
  EXPECT_NO_THROW(json::parse(r.out)) << r.out;
  return json::parse(r.out, nullptr, false);
}

const json* by_name(const json& plugins, const std::string& name) {
  for (const auto& p : plugins)
    if (p["name"] == name) return &p;
  return nullptr;
}

TEST(CliPlugins, DefaultFolderHasCpuLoadedWithOneAvailableDevice) {
  auto r = run_switchyard("plugins --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = parse_stdout(r);
  const json* cpu = by_name(j, "cpu_onednn");
  ASSERT_TRUE(cpu) << j.dump(2);
  EXPECT_EQ((*cpu)["status"], "loaded");
  EXPECT_EQ((*cpu)["abi_version"], "1.10");
  EXPECT_EQ((*cpu)["abi_negotiated"], "1.10");
  if (SY_TEST_HAVE_CUDA_PLUGIN) {  // both built-in plugins speak ABI 1.10
    const json* cuda = by_name(j, "cuda_flash");
    ASSERT_TRUE(cuda) << j.dump(2);
    EXPECT_EQ((*cuda)["status"], "loaded");
    EXPECT_EQ((*cuda)["abi_version"], "1.10");
    EXPECT_EQ((*cuda)["abi_negotiated"], "1.10");
  }
  ASSERT_EQ((*cpu)["devices"].size(), 1u);
  EXPECT_EQ((*cpu)["devices"][0]["type"], "cpu");
  EXPECT_EQ((*cpu)["devices"][0]["available"], true);
  for (const char* key : {"name", "type", "arch", "available"})
    EXPECT_TRUE((*cpu)["devices"][0].contains(key)) << key;
}

TEST(CliPlugins, CudaPluginLoadsEvenWithoutAGpu) {
  if (!test::kHaveCudaPlugin) GTEST_SKIP() << "nvcc was not found at configure time";
  json j = parse_stdout(run_switchyard("plugins --json"));
  const json* cuda = by_name(j, "cuda_flash");
  ASSERT_TRUE(cuda) << j.dump(2);
  EXPECT_EQ((*cuda)["status"], "loaded");
  if ((*cuda)["devices"].empty()) {
    ASSERT_TRUE(cuda->contains("devices_reason"));
    EXPECT_FALSE((*cuda)["devices_reason"].get<std::string>().empty());
  }
}

TEST(CliPlugins, BrokenFolderListsOneDiagnosticPerPluginAndExitsZero) {
  auto r = run_switchyard("plugins --json --plugin-dir " + test::kBrokenDir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = parse_stdout(r);
  std::map<std::string, std::string> expected = {
      {"no_entry", "entry"},         {"abi_major_new", "abi"}, {"abi_major_old", "abi"},
      {"small_table", "abi"},        {"init_fails", "init"},   {"manifest_drift", "manifest"},
      {"lying_check", "capability"}, {"not_a_plugin", "open"}, {"missing_dep", "open"}};
  for (const auto& [name, stage] : expected) {
    const json* p = by_name(j, name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ((*p)["status"], "failed") << name;
    EXPECT_EQ((*p)["stage"], stage) << name;
    EXPECT_FALSE((*p)["reason"].get<std::string>().empty()) << name;
  }
  EXPECT_EQ((*by_name(j, "good_neighbor"))["status"], "loaded");
  EXPECT_EQ((*by_name(j, "zero_devices"))["devices_reason"], "test: no test hardware attached");
  // The failures are also logged, on stderr only: stdout stayed pure JSON.
  EXPECT_THAT(r.err, HasSubstr("failed at stage"));
}

TEST(CliPlugins, HumanTableShowsStageAndReason) {
  auto r = run_switchyard("plugins --plugin-dir " + test::kBrokenDir.string());
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("stage abi: plugin ABI 2.10, host accepts ABI 1.0..10"));
  EXPECT_THAT(r.out, HasSubstr("stage capability:"));
}

TEST(CliPlugins, EnvironmentSearchPath) {
  auto r = run_switchyard("plugins --json", "SWITCHYARD_PLUGIN_PATH=" + test::kGoodDir.string());
  json j = parse_stdout(r);
  EXPECT_EQ(j.size(), 11u);
  EXPECT_TRUE(by_name(j, "good_minor0"));
  EXPECT_TRUE(by_name(j, "good_minor2"));
  EXPECT_TRUE(by_name(j, "good_minor3"));
  EXPECT_TRUE(by_name(j, "good_minor4"));
  EXPECT_TRUE(by_name(j, "good_minor5"));
  EXPECT_TRUE(by_name(j, "good_minor6"));
  EXPECT_TRUE(by_name(j, "good_minor7"));
  EXPECT_TRUE(by_name(j, "good_minor8"));
  EXPECT_TRUE(by_name(j, "good_minor9"));
  EXPECT_TRUE(by_name(j, "good_minor10"));
  EXPECT_FALSE(by_name(j, "cpu_onednn"));
}

TEST(CliExitCodes, NamedPluginThatFailedExitsFive) {
  auto r = run_switchyard("plugins --plugin init_fails --plugin-dir " + test::kBrokenDir.string());
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_THAT(r.err, HasSubstr("init_fails"));
  EXPECT_EQ(run_switchyard("caps --plugin nonexistent").exit_code, 5);
  EXPECT_EQ(run_switchyard("caps --plugin cpu_onednn").exit_code, 0);
}

TEST(CliExitCodes, UsageErrorsExitTwo) {
  EXPECT_EQ(run_switchyard("frobnicate").exit_code, 2);
  EXPECT_EQ(run_switchyard("plugins --no-such-flag").exit_code, 2);
  EXPECT_EQ(run_switchyard("--log-level loud plugins").exit_code, 2);
  EXPECT_EQ(run_switchyard("").exit_code, 2);
}

TEST(CliExitCodes, HelpAndVersion) {
  auto v = run_switchyard("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_THAT(v.out, HasSubstr("plugin ABI 1.10"));
  auto h = run_switchyard("--help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_THAT(h.out, HasSubstr("Exit codes"));
  EXPECT_EQ(run_switchyard("caps --help").exit_code, 0);
}

TEST(CliCaps, JsonEnvelopesHaveTheDocumentedKeys) {
  auto r = run_switchyard("caps --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = parse_stdout(r);
  bool saw_sdpa = false;
  for (const auto& k : j) {
    for (const char* key :
         {"plugin", "kernel", "op", "family", "device_type", "dtypes", "features", "limits"})
      EXPECT_TRUE(k.contains(key)) << key << " in " << k.dump();
    if (k["kernel"] == "sdpa_attention") {
      saw_sdpa = true;
      EXPECT_THAT(k["features"], ::testing::Contains("sinks"));
      EXPECT_THAT(k["features"], ::testing::Contains("lse"));
    }
  }
  EXPECT_TRUE(saw_sdpa);
}

TEST(CliDevices, JsonListsTheCpu) {
  auto r = run_switchyard("devices --json --log-level debug");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = parse_stdout(r);
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j[0]["plugin"], "cpu_onednn");
  EXPECT_THAT(r.err, HasSubstr("[cpu_onednn]"));  // plugin logs reach the host's logger
}

TEST(CliManifest, WritesTheSameManifestTheBuildShipped) {
  test::TempDir tmp;
  auto out = tmp.path() / "m.json";
  auto r = run_switchyard("manifest " + (test::kPluginDir / "cpu_onednn.so").string() +
                          " --output " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream a(out), b(test::kPluginDir / "cpu_onednn.json");
  EXPECT_EQ(json::parse(a), json::parse(b));
  auto bad = run_switchyard("manifest " + (test::kBrokenDir / "no_entry.so").string() +
                            " --output " + (tmp.path() / "x.json").string());
  EXPECT_EQ(bad.exit_code, 5);
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "x.json"));  // no partial write
}

// ---- bench: a kernel's time and, from the same run, the ceilings it is divided by ---------

TEST(CliBench, AttentionOnCpuReportsRatiosToCeilingsMeasuredInTheSameRun) {
  auto r = run_switchyard(
      "bench attention --q-len 64 --kv-len 96 --heads 4 --kv-heads 2 --head-dim 64 --causal "
      "--repeats 3 --warmup 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = parse_stdout(r);
  EXPECT_EQ(j["kernel"], "cpu_onednn/sdpa_attention");
  EXPECT_GT(j["ms_median"].get<double>(), 0.0);
  ASSERT_GT(j["machine_gemm_gflops"].get<double>(), 0.0);
  ASSERT_GT(j["machine_bandwidth_gbps"].get<double>(), 0.0);
  // The ratio is the kernel's figure over the ceiling, not a number of its own.
  EXPECT_NEAR(j["ratio_gemm"].get<double>(),
              j["gflops"].get<double>() / j["machine_gemm_gflops"].get<double>(), 1e-9);
  // On the host, also a read of one buffer of the KV's size, with the KV rate over it.
  ASSERT_GT(j["read_gbps"].get<double>(), 0.0);
  EXPECT_NEAR(j["ratio_read"].get<double>(), j["gbps"].get<double>() / j["read_gbps"].get<double>(),
              1e-9);
  // Useful work counts only unmasked pairs: causal, bottom-right, 64 rows over 96 keys.
  double pairs = 0;
  for (int i = 0; i < 64; ++i) pairs += 96 - 64 + i + 1;
  double flops = 4.0 * 4 * 64 * pairs;
  EXPECT_NEAR(j["gflops"].get<double>(), flops / (j["ms_median"].get<double>() * 1e-3) / 1e9,
              1e-6 * j["gflops"].get<double>());
}

TEST(CliBench, AttentionOnCudaRunsOnTheGpuOrSaysWhyNot) {
  if (!test::kHaveCudaPlugin) GTEST_SKIP() << "nvcc was not found at configure time";
  json plugins = parse_stdout(run_switchyard("plugins --json"));
  const json* cuda = by_name(plugins, "cuda_flash");
  ASSERT_TRUE(cuda);
  auto r = run_switchyard(
      "bench attention --device cuda --dtype bf16 --q-len 1 --kv-len 4096 --heads 8 "
      "--kv-heads 2 --head-dim 128 --repeats 3 --json");
  if ((*cuda)["devices"].empty()) {
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_THAT(r.err, HasSubstr("cuda_flash/flash_attention: no device: " +
                                 (*cuda)["devices_reason"].get<std::string>()));
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = parse_stdout(r);
  EXPECT_EQ(j["kernel"], "cuda_flash/flash_attention");
  EXPECT_EQ(j["machine_bandwidth_kind"], "device_copy");
  EXPECT_GT(j["machine_gemm_gflops"].get<double>(), 0.0);
  EXPECT_GT(j["machine_bandwidth_gbps"].get<double>(), 0.0);
  EXPECT_EQ(j["ratio_of"], "machine_bandwidth_gbps");
  // The KV is in device memory: no host read was measured, and none is reported as 0.
  EXPECT_TRUE(j["read_gbps"].is_null()) << j.dump();
  EXPECT_TRUE(j["ratio_read"].is_null()) << j.dump();
}

}  // namespace
}  // namespace sy
