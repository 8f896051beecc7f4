// Memory through the CLI as a user meets it: `plan` prints the table and a binding split, fails
// with SY011 (exit 3) under --strict, takes --max-device-memory and --memory-reserve; `run
// --json` sets the prediction beside what the session took, on the test model and on the real
// SmolLM2 GGUF (where the growth of the process's resident anonymous memory, every plugin's
// private scratch included, is the measurement).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/sanitizer_build.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const std::string kLlama31 = test::kExampleModels + "llama-3.1-8b/config.json";
const std::string kOnGpu8 = " --target " + (test::kExamplesDir / "targets/gpu-8gb.json").string();
const std::string kOnH200 = " --target " + test::kH200Target;
const fs::path kSmolLM2 = fs::path(SY_TEST_MODEL_CACHE) / "SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(MemoryCli, Llama31OnOne8GiBGpuIsABindingSplitAndStrictIsSY011) {
  auto r = test::run_switchyard("plan " + kLlama31 + kOnGpu8);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("memory (predicted"));
  EXPECT_THAT(r.out, HasSubstr("binding split: cuda:0 needs"));
  auto j = json::parse(test::run_switchyard("plan " + kLlama31 + kOnGpu8 + " --json").out);
  EXPECT_FALSE(j["memory"]["split"].get<std::string>().empty());
  for (const auto& l : j["memory"]["locations"]) EXPECT_TRUE(l["fits"].get<bool>()) << l.dump();
  auto strict = test::run_switchyard("plan " + kLlama31 + kOnGpu8 + " --strict");
  EXPECT_EQ(strict.exit_code, 3);
  EXPECT_THAT(strict.out, HasSubstr("SY011 (does_not_fit)"));
  EXPECT_THAT(strict.out, HasSubstr("DOES NOT FIT"));
}

TEST(MemoryCli, OnTheH200ItFitsUnlessCapped) {
  auto fits = json::parse(test::run_switchyard("plan " + kLlama31 + kOnH200 + " --json").out);
  EXPECT_EQ(fits["status"], "ok");
  EXPECT_EQ(fits["memory"]["split"], "");
  auto capped = json::parse(
      test::run_switchyard("plan " + kLlama31 + kOnH200 + " --max-device-memory cuda:0=8GiB --json")
          .out);
  EXPECT_EQ(capped["status"], "ok");
  EXPECT_NE(capped["memory"]["split"], "");
  // Reserving all but 4 GiB of the H200's 131 GiB leaves too little for 15.5 GiB: a split too.
  auto reserved = json::parse(
      test::run_switchyard("plan " + kLlama31 + kOnH200 + " --memory-reserve 127GiB --json").out);
  EXPECT_NE(reserved["memory"]["split"], "");
  for (const char* bad : {" --max-device-memory cuda:0=lots", " --max-device-memory cuda:0",
                          " --memory-reserve -1G"}) {
    auto r = test::run_switchyard("plan " + kLlama31 + kOnH200 + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("memory")) << bad;
  }
}

// What `run --json` reports per location, and that the prediction holds within 10 %: the
// buffers against the allocator's own sizes, the whole against the resident memory.
void expect_memory_report(const json& run, bool resident_too) {
  ASSERT_TRUE(run.contains("memory")) << run.dump();
  const json& host = run["memory"]["host"];
  EXPECT_GT(host["predicted_bytes"].get<int64_t>(), 0);
  EXPECT_GT(host["buffers"]["allocated_bytes"].get<int64_t>(), 0) << host.dump();
  ASSERT_TRUE(host["buffers"]["error"].is_number()) << host.dump();
  EXPECT_LE(std::abs(host["buffers"]["error"].get<double>()), 0.10) << host.dump();
  ASSERT_TRUE(host.contains("measured")) << host.dump();
  EXPECT_GT(host["measured"]["bytes"].get<int64_t>(), 0);
  if (resident_too) {
    ASSERT_TRUE(host["measured"]["error"].is_number()) << host.dump();
    // 10 %, or 3 MiB where that is more: the bookkeeping of the prepared kernels and oneDNN's
    // generated code (about 2.2 MiB, any tier) are not in the plan (docs/memory.md). It weighs
    // where the weights are mapped and the rest is small (the amx tier: 20 MiB predicted).
    const double predicted = host["measured"]["predicted_bytes"].get<double>();
    const double measured = host["measured"]["bytes"].get<double>();
    EXPECT_LE(std::abs(predicted - measured), std::max(0.10 * measured, 3.0 * (1 << 20)))
        << host.dump();
  }
}

// The tensors' bytes a safetensors file holds, from its header as the format defines it
// (8-byte little-endian length, then JSON with each tensor's data_offsets): not our reader.
struct FileTensors {
  int64_t bytes = 0, count = 0;
};
FileTensors safetensors_tensors(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  std::string header(n, '\0');
  in.read(header.data(), std::streamsize(n));
  FileTensors t;
  const json tensors = json::parse(header);
  for (const auto& [name, entry] : tensors.items()) {
    if (name == "__metadata__") continue;
    t.bytes += entry["data_offsets"][1].get<int64_t>() - entry["data_offsets"][0].get<int64_t>();
    ++t.count;
  }
  return t;
}

// K and V of every layer for `context` tokens, from the config's numbers.
int64_t kv_bytes(const json& config, int64_t context, int64_t element_bytes) {
  const int64_t head_dim =
      config.contains("head_dim")
          ? config["head_dim"].get<int64_t>()
          : config["hidden_size"].get<int64_t>() / config["num_attention_heads"].get<int64_t>();
  return 2 * config["num_hidden_layers"].get<int64_t>() * context *
         config["num_key_value_heads"].get<int64_t>() * head_dim * element_bytes;
}

TEST(MemoryCli, RunJsonSetsThePredictionBesideTheMeasurement) {
  test::TempDir dir;
  const fs::path model = dir.path() / "model";
  ASSERT_EQ(test::run_switchyard("make-test-model " + model.string()).exit_code, 0);
  // --prefer cpu: the columns checked are the host's, also where a live GPU would take the model.
  auto r = test::run_switchyard("run " + model.string() +
                                " --prompt 'the cat' --max-tokens 4 --json --prefer cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json run = json::parse(r.out);
  expect_memory_report(run, false);
  // The prediction's columns against sums of our own: every tensor of the file (f32, each
  // rounded up to 64 bytes at most), and K and V of every layer for the default context of
  // 1024 (a whole number of 16-token blocks), f32, each cache rounded up to 64 bytes at most.
  const json& predicted = run["memory"]["host"]["predicted"];
  const FileTensors file = safetensors_tensors(model / "model.safetensors");
  ASSERT_GT(file.count, 0);
  EXPECT_GE(predicted["weights"].get<int64_t>(), file.bytes);
  EXPECT_LE(predicted["weights"].get<int64_t>(), file.bytes + 64 * file.count);
  std::ifstream config_file(model / "config.json");
  const json config = json::parse(config_file);
  const int64_t kv = kv_bytes(config, 1024, 4);
  const int64_t caches = 2 * config["num_hidden_layers"].get<int64_t>();
  EXPECT_GE(predicted["kv_cache"].get<int64_t>(), kv);
  EXPECT_LE(predicted["kv_cache"].get<int64_t>(), kv + 64 * caches);
}

// The real model: the resident memory the session took, oneDNN's scratchpads and matmul_q16's
// thread scratch included (not declared: docs/memory.md, "What no plan counts"), within 10 % of
// the plan — for a short prompt (one-token kernels) and a chat prompt (a few dozen rows).
TEST(MemoryCli, RealModelPredictionIsWithinTenPercentOfWhatIsResident) {
  if (!fs::exists(kSmolLM2))
    GTEST_SKIP() << kSmolLM2 << " is not there: scripts/fetch-model.sh could not fetch it";
  for (const char* prompt :
       {"--prompt 'The capital of France is'", "--chat 'What is the capital of France?'"}) {
    auto r =
        test::run_switchyard("run " + kSmolLM2.string() + " " + prompt + " --max-tokens 4 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json run = json::parse(r.out);
    expect_memory_report(run, !test::kSanitizerBuild);
    // SmolLM2-135M (the GGUF's llama.* keys): 30 layers, 3 KV heads of 64; f32 caches of the
    // default 1024 tokens, each under 2 MiB, so rounded up to 64 bytes at most.
    const json smollm2 = {{"num_hidden_layers", 30}, {"num_key_value_heads", 3}, {"head_dim", 64}};
    const int64_t kv = kv_bytes(smollm2, 1024, 4);
    const json& predicted = run["memory"]["host"]["predicted"];
    EXPECT_GE(predicted["kv_cache"].get<int64_t>(), kv);
    EXPECT_LE(predicted["kv_cache"].get<int64_t>(), kv + 64 * 60);
  }
  if (test::kSanitizerBuild)
    GTEST_SKIP() << "buffers and KV checked; the resident part is not: "
                 << test::kResidentUnderSanitizer;
}

}  // namespace
}  // namespace sy
