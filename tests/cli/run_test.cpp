// `switchyard run` and `make-test-model` as a user runs them: text out, figures, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors/error.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.path() / "model";
    auto r = test::run_switchyard("make-test-model " + model_.string() + " --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  test::CommandResult run(const std::string& args) {
    return test::run_switchyard("run " + model_.string() + " " + args);
  }
  test::TempDir dir_;
  fs::path model_;
};

TEST_F(RunCli, GeneratesTextAndReportsSpeeds) {
  auto r = run("--prompt 'the cat' --max-tokens 8 --json --profile");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["generated_tokens"], 8);
  EXPECT_GT(j["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0);
  EXPECT_TRUE(j["profile"]["decode"]["ops"].is_array());
  EXPECT_THAT(r.err, HasSubstr("the cat"));  // the text streams to stderr under --json
  // Greedy decoding is deterministic.
  auto again = run("--prompt 'the cat' --max-tokens 8 --json");
  EXPECT_EQ(json::parse(again.out)["generated_ids"], j["generated_ids"]);
}

TEST_F(RunCli, PromptLongerThanTheContextIsExitFour) {
  auto r = run("--prompt 'a long prompt here' --max-tokens 4 --context 8");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr(code_text(Errc::prompt_too_long)));
}

TEST_F(RunCli, MissingWeightsIsExitFour) {
  fs::remove(model_ / "model.safetensors");
  auto r = run("--prompt hi --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr(code_text(Errc::bad_weights)));
}

TEST_F(RunCli, TruncatedWeightsIsExitFour) {
  fs::resize_file(model_ / "model.safetensors", fs::file_size(model_ / "model.safetensors") / 2);
  auto r = run("--prompt hi --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr(code_text(Errc::bad_weights)));
}

TEST_F(RunCli, ConfigThatDisagreesWithTheWeightsIsExitFour) {
  json c = json::parse(std::ifstream(model_ / "config.json"));
  c["intermediate_size"] = 96;  // the checkpoint has 128
  std::ofstream(model_ / "config.json") << c.dump();
  auto r = run("--prompt hi --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("shape"));
}

TEST_F(RunCli, CorruptTokenizerIsExitFour) {
  std::ofstream(model_ / "tokenizer.json") << "{\"model\": 3}";
  auto r = run("--prompt hi --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr(code_text(Errc::bad_tokenizer)));
}

TEST_F(RunCli, TokenIdOutsideTheModelsVocabularyIsExitFour) {
  json c = json::parse(std::ifstream(model_ / "config.json"));
  c["vocab_size"] = 100;  // the tokenizer has 270 tokens: 'z' (id 122) is outside
  std::ofstream(model_ / "config.json") << c.dump();
  auto r = run("--prompt zzz --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("outside the model's vocabulary"));
}

}  // namespace
}  // namespace sy
