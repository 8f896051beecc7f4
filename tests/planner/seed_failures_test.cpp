// The five failures other stacks hit mid-forward (DESIGN §1) plus the GQA one, reproduced at
// plan time from the CLI with real plugin sets, each in --strict and in auto mode.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors/error.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using test::kExampleModels;
using test::kH200Target;
// The CPU-only machine of the tests that need one, described rather than assumed: the live
// machine may have a GPU, and then cuda_flash serves flash attention.
const std::string kCpuOnly =
    " --target " + std::string(SY_TEST_EXAMPLES_DIR) + "/targets/cpu-laptop.json";
const std::string kPluginSets = test::kSetsDir.string();

struct Outcome {
  int exit_code;
  json plan;
};

Outcome plan_outcome(const std::string& args) {
  auto r = test::run_switchyard("plan " + args + " --json");
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return {r.exit_code, j};
}

// Strict: exit 3, the verbatim message first, then every candidate with all its reasons.
void expect_planning_error(const Outcome& o, const std::string& code, const std::string& verbatim) {
  EXPECT_EQ(o.exit_code, 3);
  ASSERT_EQ(o.plan["status"], "error") << o.plan.dump(2);
  EXPECT_EQ(o.plan["error"]["code"], code);
  std::string message = o.plan["error"]["message"];
  EXPECT_THAT(message, StartsWith(verbatim));
  for (const auto& c : o.plan["error"]["candidates"]) {
    std::string line = c["plugin"].get<std::string>() + "/" + c["kernel"].get<std::string>();
    EXPECT_THAT(message, HasSubstr(line));
    for (const auto& r : c["reasons"])
      EXPECT_THAT(message, HasSubstr(r["text"].get<std::string>()));
  }
}

// The first `kind` op of `phase`; a paged plan's one phase ("step") runs prefill and decode alike.
const json& first_op_of_kind(const json& plan, const std::string& phase, const std::string& kind) {
  for (const auto& p : plan["phases"])
    if (p["name"] == phase || p["name"] == "step")
      for (const auto& o : p["ops"])
        if (o["op"] == kind) return o;
  static const json none;
  return none;
}

bool has_fallback(const json& plan, const std::string& wanted) {
  for (const auto& p : plan["phases"])
    for (const auto& f : p["fallbacks"])
      if (f["wanted"] == wanted && !f["reason"].get<std::string>().empty()) return true;
  return false;
}

TEST(SeedFailures, FlashOnACpuOnlyMachine) {
  std::string model = kExampleModels + "llama-3.2-1b/config.json --attention flash" + kCpuOnly;
  expect_planning_error(plan_outcome(model + " --strict"), code_text(Errc::flash_attn_no_cpu),
                        "no cpu support for flash-attn");
  Outcome o = plan_outcome(model);
  ASSERT_EQ(o.exit_code, 0);
  const json& attn = first_op_of_kind(o.plan, "prefill", "attention");
  EXPECT_EQ(attn["plugin"], "cpu_onednn");
  EXPECT_EQ(attn["kernel"], "sdpa_attention");
  EXPECT_TRUE(has_fallback(o.plan, "family flash"));
}

TEST(SeedFailures, CandleShapedFlashOnACpuOnlyMachine) {
  std::string model = kExampleModels + "llama-3.2-1b/config.json --plugin-dir " + kPluginSets +
                      "/candle_flash --attention flash --strict";
  expect_planning_error(plan_outcome(model), code_text(Errc::flash_attn_no_cpu),
                        "no cpu support for flash-attn");
}

TEST(SeedFailures, FlashWithAnF32ModelOnTheH200) {
  std::string model = kExampleModels + "llama-3.2-1b/config.json --dtype f32 --target " +
                      kH200Target + " --attention flash";
  Outcome strict = plan_outcome(model + " --strict");
  expect_planning_error(strict, code_text(Errc::flash_attn_dtype),
                        "flash-attn is only supported for f16/bf16 (F32)");
  Outcome o = plan_outcome(model);
  ASSERT_EQ(o.exit_code, 0);
  EXPECT_EQ(first_op_of_kind(o.plan, "prefill", "attention")["family"], "sdpa");
  EXPECT_TRUE(has_fallback(o.plan, "family flash"));
  // The CPU attention on a GPU box forces copies, and they are in the plan with their bytes.
  EXPECT_FALSE(o.plan["phases"][0]["copies"].empty());
  EXPECT_GT(o.plan["phases"][0]["copies"][0]["bytes"].get<int64_t>(), 0);
}

TEST(SeedFailures, SinksOnCpuWithFlexOnly) {
  std::string model =
      kExampleModels + "gpt-oss-20b/config.json --plugin-dir " + kPluginSets + "/flex_like";
  expect_planning_error(
      plan_outcome(model + " --strict"), code_text(Errc::sinks_flex_cpu),
      "Attention sinks cannot be run on CPU with flex attention. Please switch to a "
      "different device, e.g. CUDA");
  expect_planning_error(plan_outcome(model), code_text(Errc::sinks_flex_cpu),
                        "Attention sinks cannot be run on CPU");  // auto: no legal kernel
}

TEST(SeedFailures, SinksOnCpuServedByCpuOnednn) {
  Outcome o = plan_outcome(kExampleModels + "gpt-oss-20b/config.json --plugin-dir " + kPluginSets +
                           "/flex_like --plugin-dir " + kPluginSets + "/cpu_only");
  ASSERT_EQ(o.exit_code, 0) << o.plan.dump(2).substr(0, 2000);
  const json& attn = first_op_of_kind(o.plan, "prefill", "attention");
  EXPECT_EQ(attn["plugin"], "cpu_onednn");
  bool flex_refused_for_sinks = false;
  for (const auto& c : attn["rejected"])
    if (c["plugin"] == "flex_like" && c["device"] == "cpu:0")
      for (const auto& r : c["reasons"]) flex_refused_for_sinks |= r["required"] == "sinks";
  EXPECT_TRUE(flex_refused_for_sinks);
}

TEST(SeedFailures, SinksServedOnCudaThroughLse) {
  Outcome o = plan_outcome(kExampleModels + "gpt-oss-20b/config.json --plugin-dir " + kPluginSets +
                           "/flex_like --target " + kH200Target);
  ASSERT_EQ(o.exit_code, 0);
  const json& attn = first_op_of_kind(o.plan, "prefill", "attention");
  EXPECT_EQ(attn["device"], "cuda:0");
  EXPECT_EQ(attn["kernel"], "flex_attention_cuda");
  EXPECT_THAT(attn["rule"].get<std::string>(), HasSubstr("LSE"));
  // The adaptation is data: completed on the same device by a sinks_from_lse kernel.
  ASSERT_EQ(attn["adaptations"].size(), 1u) << attn.dump(2);
  const json& a = attn["adaptations"][0];
  EXPECT_EQ(a["kind"], "sinks_via_lse");
  EXPECT_EQ(a["apply"]["device"], "cuda:0");
  EXPECT_EQ(a["apply"]["plugin"], "flex_like");
  EXPECT_EQ(a["apply"]["kernel"], "sinks_from_lse_cuda");
  EXPECT_EQ(a["lse_added"], true);
  EXPECT_EQ(a["output_locations"], json::array({"cuda:0"}));
}

TEST(SeedFailures, HostOnlyFusedDecodeWithProjectionsOnCuda) {
  std::string model = kExampleModels + "smollm3-3b/config.json --target " + kH200Target +
                      " --attention fused_decode --prefer cuda,cpu";
  Outcome strict = plan_outcome(model + " --strict");
  expect_planning_error(strict, code_text(Errc::expected_cpu_storage), "Expected CPU storage");
  // Every reason, not only the first: the dtype and each device-resident operand.
  int residency = 0;
  for (const auto& c : strict.plan["error"]["candidates"])
    for (const auto& r : c["reasons"]) residency += r["constraint"] == "residency";
  EXPECT_GE(residency, 4);
  Outcome o = plan_outcome(model);
  ASSERT_EQ(o.exit_code, 0);
  EXPECT_TRUE(o.plan["phases"][1]["fusions_used"].empty());
  EXPECT_TRUE(has_fallback(o.plan, "fused_decode"));
  EXPECT_EQ(first_op_of_kind(o.plan, "decode", "attention")["device"], "cuda:0");
}

TEST(SeedFailures, FusedDecodeUsedWhenEverythingIsOnTheHost) {
  Outcome o = plan_outcome(kExampleModels +
                           "smollm3-3b/config.json --dtype f32 --attention fused_decode --strict" +
                           kCpuOnly);
  ASSERT_EQ(o.exit_code, 0) << o.plan.dump().substr(0, 2000);
  EXPECT_EQ(o.plan["phases"][1]["fusions_used"].size(), 36u);
  EXPECT_EQ(first_op_of_kind(o.plan, "decode", "fused_decode_attention")["device"], "cpu:0");
}

TEST(SeedFailures, KvCacheOnCudaWithAHostOnlyWriter) {
  Outcome o = plan_outcome(kExampleModels + "llama-3.2-1b/config.json --target " + kH200Target +
                           " --plugin-dir " + kPluginSets + "/cpu_only --kv-cache-device cuda");
  expect_planning_error(o, code_text(Errc::expected_cpu), "Expected CPU");
  EXPECT_EQ(o.plan["error"]["op"], "l0.k_append");
}

// candle's two failures with quantized SmolLM3 (`Expected CPU storage`, `Expected CPU`), from a
// quantized SmolLM3 GGUF as llama.cpp's converter and llama-quantize's Q4_K_M mix make them
// (tests/fixtures/parity/smollm3_gguf_q4_k_m, whose numbers the parity tests check).
const std::string kSmolLM3Gguf =
    std::string(SY_TEST_FIXTURES_DIR) + "/parity/smollm3_gguf_q4_k_m/model.gguf";

TEST(SeedFailures, QuantizedSmolLM3GgufHostOnlyFusedDecodeIsExpectedCpuStorage) {
  // bf16 activations: the norms and attention (head dim 64) go to cuda:0, the quantized
  // projections stay on the host (cuda_flash has no quantized matmul), and the host-only fused
  // block would read the normed hidden state and write the KV caches in device memory.
  std::string model = kSmolLM3Gguf + " --target " + kH200Target +
                      " --attention fused_decode --dtype bf16 --context 64 --max-batch-tokens 16";
  Outcome strict = plan_outcome(model + " --strict");
  expect_planning_error(strict, code_text(Errc::expected_cpu_storage), "Expected CPU storage");
  Outcome o = plan_outcome(model);
  ASSERT_EQ(o.exit_code, 0) << o.plan.dump().substr(0, 2000);
  EXPECT_TRUE(has_fallback(o.plan, "fused_decode"));
  EXPECT_EQ(first_op_of_kind(o.plan, "decode", "attention")["device"], "cuda:0");
  // The file leaves the NoPE layers unsaid: the plan states the convention it follows.
  EXPECT_THAT(o.plan["conventions"].dump(), HasSubstr("every 4th layer"));
}

TEST(SeedFailures, QuantizedSmolLM3GgufKvCacheOnCudaWithAHostOnlyWriter) {
  Outcome o =
      plan_outcome(kSmolLM3Gguf + " --target " + kH200Target + " --plugin-dir " + kPluginSets +
                   "/cpu_only --kv-cache-device cuda --context 64 --max-batch-tokens 16");
  expect_planning_error(o, code_text(Errc::expected_cpu), "Expected CPU");
  EXPECT_EQ(o.plan["error"]["op"], "l0.k_append");
}

TEST(SeedFailures, GqaModelOnAKernelWithoutGqa) {
  std::string model =
      kExampleModels + "llama-3.2-1b/config.json --plugin-dir " + kPluginSets + "/no_gqa";
  expect_planning_error(plan_outcome(model + " --strict"), code_text(Errc::kv_repeat),
                        "only kv-repeat = 1 is supported");
  expect_planning_error(plan_outcome(model), code_text(Errc::kv_repeat),
                        "only kv-repeat = 1 is supported");
}

TEST(SeedFailures, HumanOutputAndExplain) {
  auto r = test::run_switchyard("plan " + kExampleModels +
                                "llama-3.2-1b/config.json --attention flash --strict" + kCpuOnly);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.out, HasSubstr("error " + code_text(Errc::flash_attn_no_cpu)));
  auto e = test::run_switchyard("plan " + kExampleModels +
                                "llama-3.2-1b/config.json --explain l0.attn" + kCpuOnly);
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_THAT(e.out, HasSubstr("cuda_flash/flash_attention"));
  EXPECT_THAT(e.out, HasSubstr("chosen: cpu_onednn/sdpa_attention"));
}

}  // namespace
}  // namespace sy
