// GGUF files through the CLI as a user runs them: `run` and `plan` take FILE.gguf like a model
// folder; on the H200 target a quantized model's matmuls go to the CPU with counted copies and the
// refusal of cuda_flash named (auto), or the plan fails with every reason (--strict); each kind
// of broken file exits 4 with SY302 naming what is wrong, and nothing crashes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_paths.hpp"
#include "support/tiny_gguf.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::Storage;
using test::TinyGguf;
using ::testing::HasSubstr;

using test::kH200Target;

class GgufCli : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_.path() / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  test::TempDir dir_;
};

TEST_F(GgufCli, RunsAFileLikeAModelFolder) {
  const std::string file = write("tiny.gguf", TinyGguf(Storage::quantized).w.bytes());
  auto r = test::run_switchyard("run " + file +
                                " --prompt 'hello the' --max-tokens 6 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["generated_tokens"], 6);
  EXPECT_EQ(j["prompt_tokens"], 5);  // the file's merges, no BOS (add_bos_token false)
  // --chat renders tokenizer.chat_template.
  auto chat = test::run_switchyard("run " + file + " --chat hi --max-tokens 2 --ignore-eos --json");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
}

const json* first_op_named(const json& plan, const std::string& name) {
  for (const auto& o : plan["phases"][0]["ops"])
    if (o["id"] == name) return &o;
  return nullptr;
}

TEST_F(GgufCli, QuantizedMatmulsOnTheH200GoToTheCpuWithTheRefusalNamed) {
  const std::string file = write("tiny.gguf", TinyGguf(Storage::quantized).w.bytes());
  const std::string args =
      "plan " + file + " --target " + kH200Target +
      " --dtype bf16 --max-batch-tokens 8 --context 64 --prefer cuda,cpu --json";
  auto r = test::run_switchyard(args);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  json plan = json::parse(r.out);
  const json* q = first_op_named(plan, "l0.q_proj");
  const json* norm = first_op_named(plan, "l0.input_layernorm");
  ASSERT_TRUE(q && norm) << plan.dump().substr(0, 2000);
  EXPECT_EQ((*q)["device"], "cpu:0");
  EXPECT_EQ((*norm)["device"], "cuda:0");  // what cuda_flash serves stays there
  int quantized_fallbacks = 0;
  for (const auto& f : plan["phases"][0]["fallbacks"])
    quantized_fallbacks += f["reason"].get<std::string>().find(
                               "dtype q8_0 of the weights (input 1) is outside the "
                               "kernel's dtypes") != std::string::npos;
  EXPECT_EQ(quantized_fallbacks, 2 * 4);              // q, k, v, o of each layer are Q8_0
  EXPECT_FALSE(plan["phases"][0]["copies"].empty());  // activations between cuda:0 and the host
  auto strict = test::run_switchyard(args + " --strict");
  EXPECT_EQ(strict.exit_code, 3);
  EXPECT_THAT(strict.out, HasSubstr("is outside the kernel's dtypes (f32,f16,bf16)"));
}

// A weight type of the vocabulary that no loaded plugin serves: the planner refuses before any
// weight is read, SY001 naming every candidate kernel and its dtype reason (not SY003, whose
// text is flash-attn's, nor SY302: the file is valid).
TEST_F(GgufCli, AWeightTypeNoPluginServesIsAPlannerRefusalNamingEveryCandidate) {
  const std::string file = write("tiny.gguf", TinyGguf(Storage::quantized).w.bytes());
  // candle_flash's generic CPU kernels take float weights and mxfp4 only.
  auto r = test::run_switchyard("plan " + file + " --plugin-dir " + std::string(SY_TEST_SETS_DIR) +
                                "/candle_flash" + " --max-batch-tokens 8 --context 64");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.out, HasSubstr("error SY001"));
  EXPECT_THAT(r.out, HasSubstr("candle_flash/embedding_cpu [generic] on cpu:0: dtype q4_1 of the "
                               "weights (input 0) is outside the kernel's weight dtypes (mxfp4)"));
}

// The seed case of candle's quantized SmolLM3, from a GGUF: a host-only quantized fused decode
// block pinned on a target where attention (head dim 64) and the KV caches go to cuda:0. With
// --strict the plan fails before any weight is read, SY005 `Expected CPU storage`, naming each
// device-resident operand; without, the block is a listed fallback and the plan runs unfused.
TEST_F(GgufCli, HostOnlyQuantizedFusedDecodeOnTheH200IsExpectedCpuStorage) {
  test::LlamaShape shape;
  shape.heads = 2;
  shape.kv_heads = 1;
  shape.head_dim = 64;
  const std::string file = write("tiny64.gguf", TinyGguf(Storage::quantized, shape).w.bytes());
  const std::string args =
      "plan " + file + " --target " + kH200Target +
      " --dtype bf16 --max-batch-tokens 8 --context 64 --attention fused_decode --json";
  auto strict = test::run_switchyard(args + " --strict");
  EXPECT_EQ(strict.exit_code, 3) << strict.err;
  const json e = json::parse(strict.out)["error"];
  EXPECT_EQ(e["code"], "SY005");
  EXPECT_THAT(e["message"].get<std::string>(), ::testing::StartsWith("Expected CPU storage"));
  EXPECT_THAT(e["message"].get<std::string>(),
              HasSubstr("cpu_onednn/fused_decode_attention [fused_decode] on cpu:0: the kernel "
                        "reads input 0 in host memory only, it is in device memory"));
  auto loose = test::run_switchyard(args);
  ASSERT_EQ(loose.exit_code, 0) << loose.err;
  const json plan = json::parse(loose.out);
  EXPECT_TRUE(plan["phases"][1]["fusions_used"].empty());
  bool listed = false;
  for (const auto& f : plan["phases"][1]["fallbacks"]) listed |= f["wanted"] == "fused_decode";
  EXPECT_TRUE(listed) << plan["phases"][1]["fallbacks"].dump().substr(0, 1000);
}

// Every broken file is exit 4, SY302, and the field or tensor.
TEST_F(GgufCli, BrokenFilesExit4NamingTheField) {
  const std::string good = TinyGguf(Storage::quantized).w.bytes();
  std::string bad_magic = good, too_new = good, bad_type = good;
  bad_magic.replace(0, 4, "GGUX");
  const uint32_t v4 = 4;
  std::memcpy(too_new.data() + 4, &v4, 4);
  TinyGguf out_of_bounds(Storage::f32), unknown_type(Storage::f32), no_arch(Storage::f32);
  no_arch.w.erase("general.architecture");
  struct Case {
    std::string name, bytes, needle;
  };
  // The first tensor's type field: the file's last tensor info holds its type 4 bytes before
  // its u64 offset; the tiny file's infos are written in `add` order, so patch the embedding's.
  const std::string embd = "token_embd.weight";
  size_t info = good.find(embd) + embd.size();
  std::memcpy(bad_type.data() + info + 4 + 2 * 8, "\x63\0\0\0", 4);  // ndim, 2 dims, type 99
  const std::vector<Case> cases = {
      {"truncated.gguf", good.substr(0, 2000), "truncated: metadata 'tokenizer.ggml.tokens'"},
      {"short.gguf", good.substr(0, good.size() - 100), "lie outside the file"},
      {"magic.gguf", bad_magic, "magic"},
      {"version.gguf", too_new, "version 4"},
      {"type.gguf", bad_type, "token_embd.weight"},
      {"arch.gguf", no_arch.w.bytes(), "general.architecture"},
  };
  for (const Case& c : cases) {
    const std::string file = write(c.name, c.bytes);
    for (const std::string& cmd : {"plan " + file, "run " + file + " --prompt hi"}) {
      auto r = test::run_switchyard(cmd);
      EXPECT_EQ(r.exit_code, 4) << cmd << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr("SY302")) << cmd;
      EXPECT_THAT(r.err, HasSubstr(c.needle)) << cmd << ": " << r.err;
    }
  }
}

}  // namespace
}  // namespace sy
