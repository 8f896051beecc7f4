// `switchyard run` and `make-test-model` as a user runs them: text out, figures, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
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
using ::testing::Not;

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
  auto r = run("--prompt 'the cat' --max-tokens 8 --ignore-eos --json --profile");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["generated_tokens"], 8);
  EXPECT_GT(j["prefill_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0);
  // Every kernel of cpu_onednn serves the paged form: one step graph runs prefill and decode.
  EXPECT_EQ(j["kv_layout"], "paged");
  // --profile drives each op on its own, so the profile has a row per op kind, and says so.
  const json& ops = j["profile"]["step"]["ops"];
  ASSERT_TRUE(ops.is_array());
  bool matmul = false;
  for (const json& op : ops) matmul = matmul || op["op"] == "matmul @ cpu_onednn";
  EXPECT_TRUE(matmul) << ops;
  ASSERT_EQ(j["profile"]["segments"].size(), 1u);
  EXPECT_EQ(j["profile"]["segments"][0]["form"], "per_op");
  EXPECT_THAT(j["profile"]["segments"][0]["detail"].get<std::string>(),
              HasSubstr("each op is timed"));
  EXPECT_THAT(r.err, HasSubstr("the cat"));  // the text streams to stderr under --json
  // Greedy decoding is deterministic, and the step as one segment (no --profile) runs the same
  // kernels.
  auto again = run("--prompt 'the cat' --max-tokens 8 --ignore-eos --json");
  EXPECT_EQ(json::parse(again.out)["generated_ids"], j["generated_ids"]);
}

// The weights a decode step reads, from the safetensors header itself: every tensor once, but
// the embedding table only for the one row it looks up (the test model's head is untied).
double weight_bytes_per_step(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), std::streamsize(n));
  double bytes = 0;
  const json tensors = json::parse(header);
  for (const auto& [name, t] : tensors.items()) {
    if (name == "__metadata__") continue;
    const double size =
        double(t["data_offsets"][1].get<uint64_t>() - t["data_offsets"][0].get<uint64_t>());
    bytes += name == "model.embed_tokens.weight" ? size / t["shape"][0].get<double>() : size;
  }
  return bytes;
}

TEST_F(RunCli, JsonReportsTheDecodeBandwidthRatio) {
  auto r = run("--prompt 'the cat' --max-tokens 8 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  const double prompt = j["prompt_tokens"].get<double>();
  // 2 layers × (K, V) × the middle step's rows (prompt + 7 steps / 2 + 1) × Hkv 2 × D 16 × f32.
  const double kv = 2 * 2 * (prompt + 3 + 1) * 2 * 16 * 4;
  EXPECT_DOUBLE_EQ(j["decode_kv_bytes_per_step"].get<double>(), kv);
  EXPECT_DOUBLE_EQ(j["decode_bytes_per_step"].get<double>(),
                   weight_bytes_per_step(model_ / "model.safetensors") + kv);
  EXPECT_GT(j["machine_bandwidth_gbps"].get<double>(), 0);
  EXPECT_NEAR(j["decode_bandwidth_ratio"].get<double>(),
              j["decode_gbps"].get<double>() / j["machine_bandwidth_gbps"].get<double>(), 1e-9);
}

TEST_F(RunCli, BenchDecodeReportsEveryDepthAgainstTheCeilings) {
  auto r = test::run_switchyard("bench decode " + model_.string() +
                                " --prompt-len 8 --depths 0,4 --steps 2 --repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["decode"].size(), 2u);
  const double weights = weight_bytes_per_step(model_ / "model.safetensors");
  for (const auto& d : j["decode"]) {
    // The middle of 2 steps from depth d reads d + 2 rows of each of the 4 caches.
    const double kv = 4 * (d["depth"].get<double>() + 2) * 2 * 16 * 4;
    EXPECT_DOUBLE_EQ(d["kv_bytes"].get<double>(), kv) << d;
    EXPECT_DOUBLE_EQ(d["weight_bytes"].get<double>(), weights) << d;
    EXPECT_GT(d["tokens_per_s"].get<double>(), 0) << d;
    EXPECT_NEAR(d["ratio_triad"].get<double>(),
                d["gbps"].get<double>() / j["machine_bandwidth_gbps"].get<double>(), 1e-9);
  }
  EXPECT_GT(j["prefill"]["flops"].get<double>(), 0);
  EXPECT_GT(j["machine_gemm_f32_gflops"].get<double>(), 0);
  auto bad = test::run_switchyard("bench decode " + model_.string() + " --depths 0,x");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("--depths"));
}

// bench batch on the tiny model, whose vocabulary of 271 its prompts' ids must stay inside (they
// ran to 1000 and the first row failed with SY403): a row per count, and a step takes one host
// call for its one segment (cpu_onednn takes segments), with no blocking wait.
TEST_F(RunCli, BenchBatchReportsARowPerSequenceCount) {
  auto r = test::run_switchyard("bench batch " + model_.string() +
                                " --sequences 1,3 --prompt-len 20 --steps 4 --repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json j = json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  ASSERT_EQ(j["segments"].size(), 1u);
  EXPECT_EQ(j["segments"][0]["form"], "segment");
  for (size_t k = 0; k < 2; ++k) {
    const json& row = j["rows"][k];
    EXPECT_EQ(row["sequences"], k == 0 ? 1 : 3);
    EXPECT_GT(row["aggregate_tokens_per_s"].get<double>(), 0) << row;
    EXPECT_EQ(row["host_calls_per_step"], 1.0) << row;
    EXPECT_EQ(row["blocking_waits_per_step"].get<double>(), 0.0);
  }
  auto bad = test::run_switchyard("bench batch " + model_.string() + " --sequences 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("--sequences"));
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
  c["vocab_size"] = 100;  // the tokenizer has 271 tokens: 'z' (id 122) is outside
  std::ofstream(model_ / "config.json") << c.dump();
  auto r = run("--prompt zzz --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("outside the model's vocabulary"));
}

// --- generation as users expect it ------------------------------------------------------------

// Greedy ids of `args` (which must succeed).
std::vector<int64_t> ids_of(const test::CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  if (!j.is_object()) return {};
  return j["generated_ids"].get<std::vector<int64_t>>();
}

TEST_F(RunCli, StopsAtAnEosOfGenerationConfigUnlessIgnored) {
  const std::vector<int64_t> full =
      ids_of(run("--prompt 'the cat' --max-tokens 12 --ignore-eos --json"));
  ASSERT_EQ(full.size(), 12u);
  // Make the 5th token an EOS: generation must end there, its id reported, its text unprinted.
  const int64_t eos = full[4];
  const size_t first = size_t(std::find(full.begin(), full.end(), eos) - full.begin());
  std::ofstream(model_ / "generation_config.json") << json{{"eos_token_id", {eos}}}.dump();
  auto r = run("--prompt 'the cat' --max-tokens 12 --json");
  json j = json::parse(r.out);
  EXPECT_EQ(j["stop_reason"], "eos");
  EXPECT_EQ(j["generated_ids"].get<std::vector<int64_t>>(),
            std::vector<int64_t>(full.begin(), full.begin() + first + 1));
  EXPECT_THAT(j["eos_ids"].dump(), HasSubstr(std::to_string(eos)));
  auto ignored = run("--prompt 'the cat' --max-tokens 12 --ignore-eos --json");
  EXPECT_EQ(ids_of(ignored), full);
  EXPECT_EQ(json::parse(ignored.out)["stop_reason"], "max_tokens");
}

TEST_F(RunCli, StopTextEndsGenerationAndIsNotPrinted) {
  auto full = run("--prompt 'the cat' --max-tokens 16 --ignore-eos --json");
  const std::vector<int64_t> ids = ids_of(full);
  const std::string text = json::parse(full.out)["text"];
  // A stop text from what greedy produces anyway: a printable ASCII character after the start.
  size_t at = 1;
  while (at < text.size() && !(text[at] > ' ' && text[at] < 0x7f && text[at] != '\'')) ++at;
  ASSERT_LT(at, text.size()) << text;
  const std::string stop = text.substr(at, 1);
  auto r = run("--prompt 'the cat' --max-tokens 16 --ignore-eos --json --stop '" + stop + "'");
  json j = json::parse(r.out);
  EXPECT_EQ(j["stop_reason"], "stop_text");
  EXPECT_EQ(j["text"].get<std::string>().find(stop), std::string::npos) << j["text"];
  std::vector<int64_t> got = j["generated_ids"].get<std::vector<int64_t>>();
  ASSERT_LE(got.size(), ids.size());
  EXPECT_EQ(got, std::vector<int64_t>(ids.begin(), ids.begin() + got.size()));
  EXPECT_THAT(r.err, Not(HasSubstr(stop + "\n")));
}

TEST_F(RunCli, PromptFromAFileOrStandardInput) {
  const std::string prompt = "the cat sat on the mat, and then the cat sat again";
  std::ofstream(dir_.path() / "prompt.txt") << prompt;
  const auto want = ids_of(run("--prompt '" + prompt + "' --max-tokens 6 --ignore-eos --json"));
  EXPECT_EQ(ids_of(run("--prompt-file " + (dir_.path() / "prompt.txt").string() +
                       " --max-tokens 6 --ignore-eos --json")),
            want);
  EXPECT_EQ(ids_of(run("--prompt - --max-tokens 6 --ignore-eos --json < " +
                       (dir_.path() / "prompt.txt").string())),
            want);
  // A prompt far beyond any command line (200 kB) is read whole and measured against the context.
  std::ofstream(dir_.path() / "long.txt") << std::string(200'000, 'a');
  auto r = run("--prompt-file " + (dir_.path() / "long.txt").string() + " --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr(code_text(Errc::prompt_too_long)));
}

TEST_F(RunCli, ChatRendersTheModelsTemplateAndPrintsOnlyTheAnswer) {
  auto r = run("--chat 'What is the capital of France?' --max-tokens 4 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("capital")));  // the question is not echoed
  auto j = run("--chat 'What is the capital of France?' --max-tokens 4 --ignore-eos --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  // The SmolLM2 template's system turn, the user turn and the generation prompt, with each
  // <|im_start|> / <|im_end|> one token: 3 + 3 + 1 markers and the text between.
  const int64_t prompt_tokens = json::parse(j.out)["prompt_tokens"];
  auto plain = run("--prompt 'What is the capital of France?' --max-tokens 1 --json");
  EXPECT_GT(prompt_tokens, json::parse(plain.out)["prompt_tokens"].get<int64_t>() + 40);
  // --system replaces the template's default system turn: shorter here.
  auto sys =
      run("--chat 'What is the capital of France?' --system 'Be brief.' --max-tokens 1 --json");
  EXPECT_LT(json::parse(sys.out)["prompt_tokens"].get<int64_t>(), prompt_tokens);
}

TEST_F(RunCli, ChatWithoutATemplateOrWithAnUnsupportedOneIsExitFour) {
  std::ofstream(model_ / "tokenizer_config.json") << json{{"eos_token", "<|im_end|>"}}.dump();
  auto none = run("--chat hi --max-tokens 2");
  EXPECT_EQ(none.exit_code, 4);
  EXPECT_THAT(none.err, HasSubstr(code_text(Errc::chat_template)));
  EXPECT_THAT(none.err, HasSubstr("no chat template"));
  EXPECT_EQ(none.out, "");  // nothing printed as if it were an answer
  std::ofstream(model_ / "chat_template.jinja")
      << "{% for m in messages %}\n{{ m.content|wordwrap }}{% endfor %}";
  auto bad = run("--chat hi --max-tokens 2");
  EXPECT_EQ(bad.exit_code, 4);
  EXPECT_THAT(bad.err, HasSubstr("filter 'wordwrap' is not supported"));
  EXPECT_THAT(bad.err, HasSubstr("chat_template.jinja:2"));
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(run("--prompt hi --max-tokens 2").exit_code, 0);  // a plain prompt needs no template
  std::ofstream(model_ / "chat_template.jinja")
      << "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
         "{% endif %}{{ messages[0].content }}";
  auto refused = run("--chat hi --system x --max-tokens 2");
  EXPECT_EQ(refused.exit_code, 4);
  EXPECT_THAT(refused.err, HasSubstr("System role not supported"));
}

TEST_F(RunCli, PromptSourcesAreExclusive) {
  EXPECT_EQ(run("--prompt a --chat b").exit_code, 2);
  EXPECT_EQ(run("--system x --prompt y").exit_code, 2);
  EXPECT_EQ(run("--max-tokens 2").exit_code, 2);
  auto missing = run("--prompt-file /nonexistent/prompt.txt");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/prompt.txt"));
}

// The sampler's ranges are SamplingParams::validate()'s: a usage error naming the flag, nothing
// generated.
TEST_F(RunCli, SamplingFlagsOutOfRangeAreUsageErrorsNamingTheFlag) {
  for (const char* flag :
       {"--temperature -1", "--top-p 0", "--top-p nan", "--min-p 1.5", "--presence-penalty 3",
        "--frequency-penalty -2.5", "--repetition-penalty 0", "--top-k -2"}) {
    auto r = run(std::string("--prompt hi --max-tokens 2 ") + flag);
    EXPECT_EQ(r.exit_code, 2) << flag << r.err;
    const std::string name = std::string(flag).substr(0, std::string(flag).find(' '));
    EXPECT_THAT(r.err, HasSubstr(name + " ")) << flag;
  }
  EXPECT_EQ(run("--prompt hi --max-tokens 2 --min-p 0.1 --temperature 0.7 --repetition-penalty "
                "1.2 --presence-penalty 0.3 --frequency-penalty 0.4")
                .exit_code,
            0);
}

TEST_F(RunCli, ConfigSemanticsItCannotComputeAreExitFourNamingTheKey) {
  json c = json::parse(std::ifstream(model_ / "config.json"));
  json scaled = c;
  scaled["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  std::ofstream(model_ / "config.json") << scaled.dump();
  auto r = run("--prompt hi --max-tokens 2");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr(code_text(Errc::bad_config)));
  EXPECT_THAT(r.err, HasSubstr("rope_scaling.rope_type"));
  EXPECT_EQ(r.out, "");
  json unknown = c;
  unknown["logit_scale"] = 0.5;
  std::ofstream(model_ / "config.json") << unknown.dump();
  auto u = run("--prompt hi --max-tokens 2");
  EXPECT_EQ(u.exit_code, 4);
  EXPECT_THAT(u.err, HasSubstr("--allow-config-key logit_scale"));
  EXPECT_EQ(run("--prompt hi --max-tokens 2 --allow-config-key logit_scale").exit_code, 0);
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
  const std::string prompt = " --prompt 'The quick brown fox' --max-tokens 24 --ignore-eos --json";
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

// make-test-model --format gguf holds the folder form's model (same seed): run on either, the
// greedy ids are the same. bf16: the GGUF run computes in f32 on the bf16 weights (a GGUF file's
// floats take the run's dtype, f32 by default), so it is compared with the folder run in f32.
// The PyPI gguf reader's view of the file is tests/cli/make_test_model_gguf_test.py's.
TEST(MakeTestModelGguf, RunsTheModelOfTheFolderForm) {
  test::TempDir dir;
  const std::string args = " --prompt 'the cat sat' --max-tokens 16 --ignore-eos --json";
  for (const std::string dtype : {"f32", "bf16"}) {
    SCOPED_TRACE(dtype);
    const std::string folder = (dir.path() / ("folder-" + dtype)).string();
    const std::string gguf_dir = (dir.path() / ("gguf-" + dtype)).string();
    const std::string made = " --shape tiny --seed 5 --dtype " + dtype;
    ASSERT_EQ(test::run_switchyard("make-test-model " + folder + made).exit_code, 0);
    auto g = test::run_switchyard("make-test-model " + gguf_dir + made + " --format gguf");
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_THAT(g.out, HasSubstr("model.gguf"));
    EXPECT_FALSE(fs::exists(fs::path(gguf_dir) / "config.json"));
    auto a = test::run_switchyard("run " + folder + args + " --dtype f32");
    auto b = test::run_switchyard("run " + gguf_dir + "/model.gguf" + args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    const json ja = json::parse(a.out), jb = json::parse(b.out);
    EXPECT_EQ(ja["generated_ids"].size(), 16u);
    EXPECT_EQ(ja["generated_ids"], jb["generated_ids"]);
    EXPECT_EQ(ja["prompt_tokens"], jb["prompt_tokens"]);
  }
  auto sinks = test::run_switchyard("make-test-model " + (dir.path() / "s").string() +
                                    " --shape tiny-sinks --format gguf");
  EXPECT_EQ(sinks.exit_code, 2);
  EXPECT_THAT(sinks.err, HasSubstr("tiny-sinks"));
  EXPECT_FALSE(fs::exists(dir.path() / "s" / "model.gguf"));
}

}  // namespace
}  // namespace sy
