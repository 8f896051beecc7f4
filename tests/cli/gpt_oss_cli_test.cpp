// gpt-oss through the CLI as a user runs it: `switchyard run` on the tiny gpt-oss in its three
// forms (bf16 safetensors, MXFP4 safetensors, GGUF) answers with transformers' greedy ids
// (tests/fixtures/parity/make_gpt_oss.py recorded them); its plan names the expert ops of each
// layer and states what a GGUF file leaves unsaid; broken files and configs are refused by name.
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

const fs::path kFixtures = fs::path(SY_TEST_FIXTURES_DIR) / "parity";

json expected(const std::string& folder) {
  return json::parse(std::ifstream(kFixtures / folder / "expected.json"));
}

class GptOssRun : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(GptOssRun, GreedyIdsAreTransformers) {
  const auto [folder, model] = GetParam();
  const json want = expected(folder);
  auto r = test::run_switchyard("run " + (kFixtures / folder / model).string() +
                                " --prompt 'Sinks on the CPU' --max-tokens 24 --ignore-eos "
                                "--context 64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["prompt_tokens"], want["prompt"].size());  // the byte tokenizer: id = byte
  EXPECT_EQ(out["generated_ids"], want["greedy"]);
}

INSTANTIATE_TEST_SUITE_P(Formats, GptOssRun,
                         ::testing::Values(std::pair{"gpt_oss", ""}, std::pair{"gpt_oss_mxfp4", ""},
                                           std::pair{"gpt_oss_gguf", "model.gguf"}),
                         [](const auto& info) { return std::string(info.param.first); });

TEST(GptOssPlan, ExpertOpsAreNamedPerLayerAndGgufConventionsAreStated) {
  auto r = test::run_switchyard("plan " + (kFixtures / "gpt_oss_gguf" / "model.gguf").string() +
                                " --json");
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
  auto hf = test::run_switchyard("plan " + (kFixtures / "gpt_oss_mxfp4").string() + " --json");
  ASSERT_EQ(hf.exit_code, 0) << hf.err;
  EXPECT_TRUE(json::parse(hf.out)["conventions"].empty());
}

class GptOssBadInput : public ::testing::Test {
 protected:
  // A copy of a fixture folder to break.
  fs::path copy(const std::string& folder) {
    const fs::path to = dir_.path() / folder;
    fs::copy(kFixtures / folder, to, fs::copy_options::recursive);
    return to;
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
  const fs::path m = copy("gpt_oss_gguf");
  const fs::path file = m / "model.gguf";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The last tensor the fixture writer adds is blk.1.ffn_down_exps.weight (mxfp4, at the end of
  // the file): its last block's scale sits 17 bytes before the end.
  bytes[bytes.size() - 17] = char(0xFF);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  auto r = test::run_switchyard("run " + file.string() + " --prompt 'x' --max-tokens 1");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SY302"));
  EXPECT_THAT(r.err, HasSubstr("blk.1.ffn_down_exps.weight' holds the E8M0 scale 0xFF"));
}

// A GGUF whose expert_count disagrees with its expert tensors: SY302 naming the tensor.
TEST_F(GptOssBadInput, ExpertTensorsOfAnotherCountAreRefusedByName) {
  const fs::path m = copy("gpt_oss_gguf");
  const fs::path file = m / "model.gguf";
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // gpt-oss.expert_count (u32 8) -> 4: every stacked expert tensor now has twice the experts.
  const std::string key = "gpt-oss.expert_count";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t value = at + key.size() + 4;  // after the key, its u32 value type
  ASSERT_EQ(bytes[value], 8);
  bytes[value] = 4;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  auto r = test::run_switchyard("run " + file.string() + " --prompt 'x' --max-tokens 1");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("SY302"));
  EXPECT_THAT(r.err, HasSubstr("tensor 'blk."));  // the router's or an expert tensor
}

}  // namespace
}  // namespace sy
