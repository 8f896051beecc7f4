// gpt-oss through the CLI as a user runs it: `switchyard run` on the tiny gpt-oss in its three
// forms (bf16 safetensors, MXFP4 safetensors, GGUF) and on the tiny SmolLM3 GGUF files answers
// with transformers' greedy ids (tests/fixtures/parity/make_gpt_oss.py and make_smollm3_gguf.py
// recorded them); its plan names the expert ops of each
// layer and states what a GGUF file leaves unsaid; broken files and configs are refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const fs::path kParityFixtures = test::kFixturesDir / "parity";

json expected(const std::string& folder) {
  return json::parse(std::ifstream(kParityFixtures / folder / "expected.json"));
}

// (fixture folder, model inside it or "", the text whose bytes are the recorded prompt)
struct TinyRun {
  const char* folder;
  const char* model;
  const char* prompt;
  const char* flags = "";  // the reference's dtype where it is not the file's default
};

// How ctest's output names a case's parameter (gtest would print its bytes).
void PrintTo(const TinyRun& t, std::ostream* os) {
  *os << t.folder << " " << t.flags;
}

class TinyCheckpointRun : public ::testing::TestWithParam<TinyRun> {};

TEST_P(TinyCheckpointRun, GreedyIdsAreTransformers) {
  const TinyRun t = GetParam();
  const json want = expected(t.folder);
  auto r = test::run_switchyard("run " + (kParityFixtures / t.folder / t.model).string() +
                                " --prompt '" + t.prompt +
                                "' --max-tokens 24 --ignore-eos --context 64 --json " + t.flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["prompt_tokens"], want["prompt"].size());  // the byte tokenizer: id = byte
  EXPECT_EQ(out["generated_ids"], want["greedy"]);
}

// gpt-oss in its three forms, and the SmolLM3 GGUF files (NoPE by convention, quantized).
INSTANTIATE_TEST_SUITE_P(
    Checkpoints, TinyCheckpointRun,
    ::testing::Values(TinyRun{"gpt_oss", "", "Sinks on the CPU"},
                      TinyRun{"gpt_oss_mxfp4", "", "Sinks on the CPU"},
                      TinyRun{"gpt_oss_gguf", "model.gguf", "Sinks on the CPU"},
                      // transformers ran in f32 on the file's BF16 values; the file's own
                      // default is bf16 activations (GgufDefaults below)
                      TinyRun{"smollm3_gguf_bf16", "model.gguf", "NoPE every fourth layer",
                              "--dtype f32"},
                      TinyRun{"smollm3_gguf_q8_0", "model.gguf", "NoPE every fourth layer"},
                      TinyRun{"smollm3_gguf_q4_k", "model.gguf", "NoPE every fourth layer"},
                      TinyRun{"smollm3_gguf_q4_k_m", "model.gguf", "NoPE every fourth layer"}),
    [](const auto& info) { return std::string(info.param.folder); });

// The contiguous layout (here asked for through the fused decode block; on a GPU machine the
// planner picks it where cuda_flash lacks a paged form) fills caches of `context` rows, so its
// step is capped at the context rather than refused for the default budget of 512 tokens, and
// the plan says so. A GPU machine's first run found the tiny checkpoints refused there (SY207).
TEST(ContiguousLayout, AStepIsCappedAtTheContextAndThePlanSaysSo) {
  const std::string model = (kParityFixtures / "smollm3_gguf_q8_0" / "model.gguf").string();
  const std::string flags = " --attention fused_decode --context 64 --json";
  auto p = test::run_switchyard("plan " + model + flags);
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const json plan = json::parse(p.out);
  EXPECT_EQ(plan["bounds"]["max_batch_tokens"], 64);
  EXPECT_THAT(plan["layout_rule"].get<std::string>(),
              HasSubstr("a step takes at most the context's 64 tokens, not the 512 asked for"));
  auto r = test::run_switchyard("run " + model + " --prompt 'NoPE every fourth layer'" +
                                " --max-tokens 24 --ignore-eos" + flags);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out)["generated_ids"], expected("smollm3_gguf_q8_0")["greedy"]);
}

// A BF16 file runs with bf16 activations by default, its weights read as stored, and the plan
// says so; --dtype f32 widens them (more KV bytes per position, more weight bytes). --prefer
// cpu: the host holds (and maps) the weights, also where a live GPU would take them.
TEST(GgufDefaults, ABf16FileRunsInBf16AndThePlanSaysSo) {
  const std::string model = (kParityFixtures / "smollm3_gguf_bf16" / "model.gguf").string();
  auto plan_json = [&](const std::string& flags) {
    auto r = test::run_switchyard("plan " + model + " --json --prefer cpu " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  };
  const json bf16 = plan_json(""), f32 = plan_json("--dtype f32");
  EXPECT_THAT(bf16["conventions"].dump(),
              HasSubstr("activations bf16: the file's projection weights are BF16"));
  const json& a = bf16["memory"]["locations"][0];
  const json& b = f32["memory"]["locations"][0];
  EXPECT_LT(a["kv_bytes_per_position"].get<int64_t>(), b["kv_bytes_per_position"].get<int64_t>());
  EXPECT_LT(a["weights_bytes"].get<int64_t>(), b["weights_bytes"].get<int64_t>());
  EXPECT_GT(a["weights_mapped_bytes"].get<int64_t>(), 0);  // read from the file as stored
}

TEST(GptOssPlan, ExpertOpsAreNamedPerLayerAndGgufConventionsAreStated) {
  auto r = test::run_switchyard(
      "plan " + (kParityFixtures / "gpt_oss_gguf" / "model.gguf").string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json plan = json::parse(r.out);
  std::vector<std::string> ids;
  for (const auto& op : plan["phases"][0]["ops"]) ids.push_back(op["id"]);
  for (const char* id : {"l0.router_topk", "l0.experts", "l1.router_topk", "l1.experts"})
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
  const std::string conventions = plan["conventions"].dump();
  EXPECT_THAT(conventions, HasSubstr("swiglu_limit 7.0"));
  EXPECT_THAT(conventions, HasSubstr("even layers"));
  EXPECT_THAT(conventions, HasSubstr("truncate false"));
  // A checkpoint's own config says all of it: no convention.
  auto hf =
      test::run_switchyard("plan " + (kParityFixtures / "gpt_oss_mxfp4").string() + " --json");
  ASSERT_EQ(hf.exit_code, 0) << hf.err;
  EXPECT_TRUE(json::parse(hf.out)["conventions"].empty());
}

// gpt-oss-20b (MXFP4 experts, about 13 GB) on one 8 GiB GPU, with plugins that serve every op
// on both devices (the flex_like set): the binding split moves experts first, layer by layer,
// and keeps every attention, norm and router on the GPU, with per-device totals; --strict
// refuses with the numbers.
TEST(GptOssPlan, TwentyBOnAnEightGigabyteGpuPutsExpertsOnTheHostFirst) {
  const std::string args = "plan " + std::string(SY_TEST_EXAMPLES_DIR) +
                           "/models/gpt-oss-20b --plugin-dir " + SY_TEST_SETS_DIR +
                           "/flex_like --target " + SY_TEST_EXAMPLES_DIR +
                           "/targets/gpu-8gb.json --json";
  auto r = test::run_switchyard(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json plan = json::parse(r.out);
  const std::string split = plan["memory"]["split"];
  EXPECT_THAT(split, HasSubstr("so the experts of layers 0-"));
  EXPECT_THAT(split, HasSubstr("their attention, norms and router, and every other unit, stay on "
                               "cuda:0"));
  int experts_on_host = 0, experts_on_gpu = 0;
  for (const auto& phase : plan["phases"])
    for (const auto& op : phase["ops"]) {
      const std::string kind = op["op"], device = op["device"];
      if (kind == "moe_experts") (device == "cpu:0" ? experts_on_host : experts_on_gpu)++;
      if (kind == "attention" || kind == "rms_norm" || kind == "moe_router") {
        EXPECT_EQ(device, "cuda:0") << op["id"];
      }
    }
  EXPECT_GT(experts_on_host, 0);
  EXPECT_GT(experts_on_gpu, 0);  // only as many layers' experts as it takes
  // Every expert counted: weights on both devices add up to the whole MXFP4 model.
  double weights = 0;
  for (const auto& l : plan["memory"]["locations"]) {
    weights += l["weights_bytes"].get<double>();
    EXPECT_TRUE(l["fits"].get<bool>()) << l["location"];
  }
  EXPECT_GT(weights, 12.5 * double(1ull << 30));
  auto strict = test::run_switchyard(args + " --strict");
  EXPECT_EQ(strict.exit_code, 3);
  EXPECT_THAT(strict.out, HasSubstr("SY011"));
  EXPECT_THAT(strict.out, HasSubstr("cuda:0 needs 13."));
}

class GptOssBadInput : public ::testing::Test {
 protected:
  // A copy of a fixture folder to break.
  fs::path copy(const std::string& folder) {
    const fs::path to = dir_.path() / folder;
    fs::copy(kParityFixtures / folder, to, fs::copy_options::recursive);
    return to;
  }
  static std::string read(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void write(const fs::path& file, const std::string& bytes) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  }
  test::TempDir dir_;
};

TEST_F(GptOssBadInput, TopKAboveTheExpertsIsTheConfigKeyNamed) {
  const fs::path m = copy("gpt_oss");
  json c = json::parse(std::ifstream(m / "config.json"));
  c["num_experts_per_tok"] = 9;
  std::ofstream(m / "config.json") << c.dump();
  auto r = test::run_switchyard("plan " + m.string());
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("SY207"));
  EXPECT_THAT(r.err, HasSubstr("num_experts_per_tok"));
}

// An E8M0 scale of 0xFF is NaN: refused when the weights load, naming the tensor and block.
TEST_F(GptOssBadInput, NanScaleIsRefusedByName) {
  const fs::path file = copy("gpt_oss_gguf") / "model.gguf";
  std::string bytes = read(file);
  // The last tensor the fixture writer adds is blk.1.ffn_down_exps.weight (mxfp4, at the end of
  // the file): its last block's scale sits 17 bytes before the end.
  bytes[bytes.size() - 17] = char(0xFF);
  write(file, bytes);
  auto r = test::run_switchyard("run " + file.string() + " --prompt 'x' --max-tokens 1");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SY302"));
  EXPECT_THAT(r.err, HasSubstr("blk.1.ffn_down_exps.weight' holds the E8M0 scale 0xFF"));
}

// A GGUF whose expert_count disagrees with its expert tensors: SY302 naming the tensor.
TEST_F(GptOssBadInput, ExpertTensorsOfAnotherCountAreRefusedByName) {
  const fs::path file = copy("gpt_oss_gguf") / "model.gguf";
  std::string bytes = read(file);
  // gpt-oss.expert_count (u32 8) -> 4: every stacked expert tensor now has twice the experts.
  const std::string key = "gpt-oss.expert_count";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t value = at + key.size() + 4;  // after the key, its u32 value type
  ASSERT_EQ(bytes[value], 8);
  bytes[value] = 4;
  write(file, bytes);
  auto r = test::run_switchyard("run " + file.string() + " --prompt 'x' --max-tokens 1");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SY302"));
  EXPECT_THAT(r.err, HasSubstr("tensor 'blk."));  // the router's or an expert tensor
}

}  // namespace
}  // namespace sy
