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

// A plugin's run-time answer reaches the user as its own documented code and exit code: the
// `failing` set's rms_norm (chosen over cpu_onednn's, it is cheaper) answers OUT_OF_MEMORY,
// UNAVAILABLE or INTERNAL.
TEST_F(RunCli, PluginFailuresAtRunTimeHaveTheirOwnCodesAndExitCodes) {
  const std::string set = std::string(SY_TEST_SETS_DIR) + "/failing";
  struct Expect {
    const char* status;
    Errc code;
    int exit_code;
    const char* words;
  };
  for (const Expect& e :
       {Expect{"out_of_memory", Errc::device_out_of_memory, 6, "no scratch memory"},
        Expect{"unavailable", Errc::device_lost, 7, "went away"},
        Expect{"internal", Errc::plugin_internal, 8, "a simulated bug"}}) {
    SCOPED_TRACE(e.status);
    auto r = test::run_switchyard(
        "--plugin-dir " + set + " run " + model_.string() + " --prompt hi --max-tokens 2",
        std::string("SWITCHYARD_TEST_FAIL_STATUS=") + e.status);
    EXPECT_EQ(r.exit_code, e.exit_code) << r.err;
    EXPECT_THAT(r.err, HasSubstr("error " + code_text(e.code)));
    EXPECT_THAT(r.err, HasSubstr(e.words));
    EXPECT_THAT(r.err, HasSubstr("failing_norm"));  // the plugin is named
    auto j = test::run_switchyard(
        "--plugin-dir " + set + " run " + model_.string() + " --prompt hi --max-tokens 2 --json",
        std::string("SWITCHYARD_TEST_FAIL_STATUS=") + e.status);
    json out = json::parse(j.out, nullptr, false);
    ASSERT_TRUE(out.is_object()) << j.out;
    EXPECT_EQ(out["error"]["code"], code_text(e.code));
    EXPECT_EQ(out["error"]["plugin_status"],
              std::string(e.status) == "out_of_memory" ? "OUT_OF_MEMORY"
              : std::string(e.status) == "unavailable" ? "UNAVAILABLE"
                                                       : "INTERNAL");
  }
}

// Sinks through LSE, end to end from the CLI: a plugin set whose only attention kernel has LSE
// and no sinks gives the tokens cpu_onednn's native sinks give, and the plan says how.
TEST(RunSinks, SinksViaLseGiveTheTokensOfNativeSinks) {
  test::TempDir dir;
  const std::string model = (dir.path() / "sinks").string();
  auto made = test::run_switchyard("make-test-model " + model + " --shape tiny-sinks");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::string lse_only = "--plugin-dir " + std::string(SY_TEST_SETS_DIR) + "/lse_only ";
  const std::string prompt = " --prompt 'The quick brown fox' --max-tokens 24 --json";
  auto via = test::run_switchyard(lse_only + "run " + model + " --attention flex" + prompt);
  ASSERT_EQ(via.exit_code, 0) << via.err;
  auto native = test::run_switchyard("run " + model + prompt);
  ASSERT_EQ(native.exit_code, 0) << native.err;
  json a = json::parse(via.out), b = json::parse(native.out);
  EXPECT_EQ(a["generated_ids"].size(), 24u);
  EXPECT_EQ(a["generated_ids"], b["generated_ids"]);
  EXPECT_NE(a["plan_hash"], b["plan_hash"]);

  auto plan = test::run_switchyard(lse_only + "plan " + model + " --attention flex --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  json p = json::parse(plan.out);
  int adapted = 0;
  for (const auto& phase : p["phases"])
    for (const auto& op : phase["ops"])
      if (op["op"] == "attention") {
        ASSERT_EQ(op["adaptations"].size(), 1u) << op.dump(2);
        EXPECT_EQ(op["adaptations"][0]["kind"], "sinks_via_lse");
        EXPECT_EQ(op["adaptations"][0]["apply"]["kernel"], "sinks_from_lse");
        ++adapted;
      }
  EXPECT_EQ(adapted, 4);
}

}  // namespace
}  // namespace sy
