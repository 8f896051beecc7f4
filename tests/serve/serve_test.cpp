// `switchyard serve` driven over loopback HTTP as a client would: the OpenAI endpoints whole and
// streamed, refusals in OpenAI's error shape, prefix reuse, 64 concurrent streams, a client
// that hangs up, and SIGTERM under load. The references are independent of the server: the
// CLI's `run` (its own single-sequence path), the same request served alone by a fresh server,
// and the token counts a client can check itself.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "serve/serve_process.hpp"
#include "support/test_paths.hpp"

namespace sy::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kChat = "/v1/chat/completions";
const fs::path kSmolLM2 = fs::path(SY_TEST_MODEL_CACHE) / "SmolLM2-135M-Instruct.Q4_1.gguf";

// The seeded test model (its text is noise, but its ids are exact), made once for the suite.
class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto r = run_switchyard("make-test-model " + model().string() + " --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path model() { return dir_->path() / "model"; }
  static std::vector<std::string> args(std::vector<std::string> more = {}) {
    more.insert(more.begin(), {"--context", "1024"});
    return more;
  }
  static inline TempDir* dir_ = nullptr;
};

json chat_body(const std::string& content, int max_tokens, json extra = json::object()) {
  json b{{"messages", {{{"role", "user"}, {"content", content}}}},
         {"max_tokens", max_tokens},
         {"temperature", 0},
         {"ignore_eos", true},
         {"return_token_ids", true}};
  b.update(extra);
  return b;
}

std::vector<int64_t> ids_of(const json& j) {
  return j.get<std::vector<int64_t>>();
}

// `switchyard run --chat`'s greedy ids: a path with no server, no scheduler and one sequence.
std::vector<int64_t> run_chat_ids(const fs::path& model, const std::string& q, int n,
                                  const std::string& more = "") {
  auto r = run_switchyard("run " + model.string() + " --chat '" + q + "' --max-tokens " +
                          std::to_string(n) + " --json " + more);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ids_of(json::parse(r.out)["generated_ids"]);
}

TEST_F(Serve, ChatWholeAndStreamedAgreeWithRunChat) {
  ServeProcess s(model(), args());
  ASSERT_TRUE(s.started());
  const std::string q = "What is the capital of France?";
  const auto want = run_chat_ids(model(), q, 12, "--ignore-eos");
  Reply whole = post(s.port(), kChat, chat_body(q, 12).dump());
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const json& b = whole.body;
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["model"], "model");  // the folder's stem
  EXPECT_EQ(b["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ids_of(b["choices"][0]["token_ids"]), want);
  const int64_t prompt = b["usage"]["prompt_tokens"];
  EXPECT_EQ(prompt, int64_t(b["prompt_token_ids"].size()));
  EXPECT_EQ(b["usage"]["completion_tokens"], 12);
  EXPECT_EQ(b["usage"]["total_tokens"], prompt + 12);

  StreamReply st = post_stream(
      s.port(), kChat,
      chat_body(q, 12, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}).dump());
  ASSERT_EQ(st.status, 200);
  EXPECT_TRUE(st.done);
  ASSERT_GE(st.events.size(), 3u);
  EXPECT_EQ(st.events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(st.events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(st.token_ids(), want);
  EXPECT_EQ(st.text(), b["choices"][0]["message"]["content"]);
  EXPECT_EQ(st.finish_reason(), "length");
  ASSERT_NE(st.usage(), nullptr);
  EXPECT_EQ((*st.usage())["completion_tokens"], 12);
  EXPECT_EQ((*st.usage())["prompt_tokens"], prompt);
}

TEST_F(Serve, CompletionWholeAndStreamedAgreeWithRunPrompt) {
  ServeProcess s(model(), args());
  ASSERT_TRUE(s.started());
  auto r = run_switchyard("run " + model().string() +
                          " --prompt 'the cat sat' --max-tokens 10 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto want = ids_of(json::parse(r.out)["generated_ids"]);
  const json body{{"prompt", "the cat sat"},
                  {"max_tokens", 10},
                  {"temperature", 0},
                  {"ignore_eos", true},
                  {"return_token_ids", true}};
  Reply whole = post(s.port(), "/v1/completions", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(whole.body["object"], "text_completion");
  EXPECT_EQ(ids_of(whole.body["choices"][0]["token_ids"]), want);
  EXPECT_EQ(whole.body["choices"][0]["finish_reason"], "length");
  json streamed = body;
  streamed["stream"] = true;
  StreamReply st = post_stream(s.port(), "/v1/completions", streamed.dump());
  EXPECT_TRUE(st.done);
  EXPECT_EQ(st.token_ids(), want);
  EXPECT_EQ(st.text(), whole.body["choices"][0]["text"]);
  EXPECT_EQ(st.usage(), nullptr);  // not asked for
  // Token ids in, as OpenAI's prompt may be.
  json by_ids = body;
  by_ids["prompt"] = whole.body["prompt_token_ids"];
  Reply ids = post(s.port(), "/v1/completions", by_ids.dump());
  EXPECT_EQ(ids_of(ids.body["choices"][0]["token_ids"]), want);
}

// logprobs in OpenAI's shapes, whole and streamed: one entry per token of the answer; the
// greedy token is the first of its alternatives (greedy is the argmax of the distribution the
// log-probabilities are of); log-probabilities are <= 0, descending, of mass <= 1; the entries'
// bytes spell the answer, and a completion's text_offset counts them.
TEST_F(Serve, LogprobsDescribeEachTokenOfTheAnswer) {
  ServeProcess s(model(), args());
  ASSERT_TRUE(s.started());
  const json extra{{"logprobs", true}, {"top_logprobs", 3}};
  Reply whole = post(s.port(), kChat, chat_body("Name a colour.", 8, extra).dump());
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const json& content = whole.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 8u);
  std::string spelled;
  for (const json& e : content) {
    const json& top = e["top_logprobs"];
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(e["token"], top[0]["token"]);
    EXPECT_EQ(e["logprob"].get<double>(), top[0]["logprob"].get<double>());
    double mass = 0;
    for (size_t k = 0; k < top.size(); ++k) {
      EXPECT_LE(top[k]["logprob"].get<double>(), 0.0);
      if (k > 0) {
        EXPECT_GE(top[k - 1]["logprob"].get<double>(), top[k]["logprob"].get<double>());
      }
      mass += std::exp(top[k]["logprob"].get<double>());
    }
    EXPECT_LE(mass, 1.0 + 1e-9);
    for (const json& b : e["bytes"]) spelled += char(b.get<int>());
  }
  EXPECT_EQ(spelled, whole.body["choices"][0]["message"]["content"]);
  StreamReply st = post_stream(
      s.port(), kChat,
      chat_body("Name a colour.", 8, {{"stream", true}, {"logprobs", true}, {"top_logprobs", 3}})
          .dump());
  json streamed = json::array();
  for (const json& ev : st.events)
    if (ev.contains("choices") && !ev["choices"].empty() && ev["choices"][0].contains("logprobs") &&
        ev["choices"][0]["logprobs"].is_object())
      for (const json& e : ev["choices"][0]["logprobs"]["content"]) streamed.push_back(e);
  EXPECT_EQ(streamed, content);

  const json body{{"prompt", "the cat sat"},
                  {"max_tokens", 6},
                  {"temperature", 0},
                  {"ignore_eos", true},
                  {"logprobs", 2}};
  Reply c = post(s.port(), "/v1/completions", body.dump());
  ASSERT_EQ(c.status, 200) << c.raw;
  const json& lp = c.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u);
  std::string text;
  for (size_t i = 0; i < 6; ++i) {
    if (i > 0) {
      EXPECT_GE(lp["text_offset"][i], lp["text_offset"][i - 1]);
    }
    if (i == 0) {
      EXPECT_EQ(lp["text_offset"][i], 0);
    }
    text += lp["tokens"][i].get<std::string>();
    double best = -1e300;
    for (const auto& [t, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_EQ(best, lp["token_logprobs"][i].get<double>());
  }
  // A token that holds part of a UTF-8 character shows as U+FFFD (the completion shape has no
  // bytes); otherwise the tokens spell the text.
  if (text.find("\xEF\xBF\xBD") == std::string::npos) {
    EXPECT_EQ(text, c.body["choices"][0]["text"]);
  }
  // Unasked, a chat's choice has none.
  Reply plain = post(s.port(), kChat, chat_body("Name a colour.", 2).dump());
  EXPECT_FALSE(plain.body["choices"][0].contains("logprobs"));
}

// A template that marks thinking: chat_template_kwargs reach it (Qwen3's enable_thinking:
// false writes an empty <think></think> into the prompt), and text generated inside an open
// <think> is reasoning_content, whole and streamed, the answer's content what follows it.
TEST_F(Serve, ThinkingTemplatesGetReasoningContentAndTheirKwargs) {
  TempDir copy;
  const fs::path qwen3 = copy.path() / "qwen3", opened = copy.path() / "opened";
  for (const fs::path& to : {qwen3, opened}) fs::copy(model(), to);
  std::ifstream in(fs::path(SY_TEST_FIXTURES_DIR) / "chat_templates" / "qwen3-0.6b.jinja");
  std::ofstream(qwen3 / "chat_template.jinja") << in.rdbuf();
  // As DeepSeek-R1's and Qwen3-2507-Thinking's do, this template opens <think> itself.
  std::ofstream(opened / "chat_template.jinja")
      << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
         "{# the model closes it with </think> #}";
  {
    ServeProcess s(qwen3, args());
    ASSERT_TRUE(s.started());
    Reply thinking = post(s.port(), kChat, chat_body("hi", 4).dump());
    Reply not_thinking =
        post(s.port(), kChat,
             chat_body("hi", 4, {{"chat_template_kwargs", {{"enable_thinking", false}}}}).dump());
    ASSERT_EQ(not_thinking.status, 200) << not_thinking.raw;
    const json detok = post(s.port(), "/detokenize",
                            json{{"tokens", not_thinking.body["prompt_token_ids"]}}.dump())
                           .body;
    EXPECT_THAT(detok["content"].get<std::string>(), HasSubstr("<think>\n\n</think>\n\n"));
    EXPECT_GT(not_thinking.body["usage"]["prompt_tokens"], thinking.body["usage"]["prompt_tokens"]);
  }
  const std::string q = "Why is the sky blue?";
  // The reference: the same template's greedy text by `run`, which does not split it.
  auto r = run_switchyard("run " + opened.string() + " --chat '" + q +
                          "' --max-tokens 12 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = json::parse(r.out)["text"];
  ASSERT_EQ(text.find("</think>"), std::string::npos) << "the noise model wrote the tag";
  ServeProcess s(opened, args());
  ASSERT_TRUE(s.started());
  Reply whole = post(s.port(), kChat, chat_body(q, 12).dump());
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(whole.body["choices"][0]["message"]["reasoning_content"], text);
  EXPECT_EQ(whole.body["choices"][0]["message"]["content"], "");
  StreamReply st = post_stream(s.port(), kChat, chat_body(q, 12, {{"stream", true}}).dump());
  std::string streamed;
  for (const json& ev : st.events)
    if (ev.contains("choices") && !ev["choices"].empty() &&
        ev["choices"][0]["delta"].contains("reasoning_content"))
      streamed += ev["choices"][0]["delta"]["reasoning_content"].get<std::string>();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(st.text(), "");
  // The model's own test template marks nothing: no reasoning_content at all.
  ServeProcess plain(model(), args());
  ASSERT_TRUE(plain.started());
  Reply p = post(plain.port(), kChat, chat_body(q, 2).dump());
  EXPECT_FALSE(p.body["choices"][0]["message"].contains("reasoning_content"));
}

// Tools through a template that renders them (Qwen3's, Hermes <tool_call> blocks): the tools
// and a tool-using history reach the prompt as the template writes them; a template without
// tools, or with a call format not read back (Llama 3.1's bare JSON), is refused naming
// `tools` before anything runs. (The noise model writes no calls: reading them back is
// ToolCalls.*'s.)
TEST_F(Serve, ToolsReachTheTemplateOrAreRefusedByName) {
  TempDir copy;
  const fs::path qwen3 = copy.path() / "qwen3", llama = copy.path() / "llama",
                 gpt_oss = copy.path() / "gpt-oss", mistral = copy.path() / "mistral";
  const fs::path templates = fs::path(SY_TEST_FIXTURES_DIR) / "chat_templates";
  for (const auto& [to, file] :
       {std::pair{qwen3, "qwen3-0.6b.jinja"}, std::pair{llama, "llama-3.1-8b-instruct.jinja"},
        std::pair{gpt_oss, "gpt-oss-120b.jinja"},
        std::pair{mistral, "mistral-small-3.2-24b-instruct-2506.jinja"}}) {
    fs::copy(model(), to);
    std::ifstream in(templates / file);
    std::ofstream(to / "chat_template.jinja") << in.rdbuf();
  }
  // Ordered, as a client writes it: the template gets the keys in this order.
  const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  auto body = nlohmann::ordered_json::parse(chat_body("Weather in Paris?", 3).dump());
  body["tools"] = tools;
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "21 C"}});
  {
    ServeProcess s(qwen3, args());
    ASSERT_TRUE(s.started());
    Reply r = post(s.port(), kChat, body.dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    const std::string prompt =
        post(s.port(), "/detokenize", json{{"tokens", r.body["prompt_token_ids"]}}.dump())
            .body["content"];
    EXPECT_THAT(prompt, HasSubstr("<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
                                  "\"get_weather\""));
    EXPECT_THAT(prompt, HasSubstr("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                  "{\"city\": \"Paris\"}}\n</tool_call>"));
    EXPECT_THAT(prompt, HasSubstr("<tool_response>\n21 C\n</tool_response>"));
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
    EXPECT_FALSE(r.body["choices"][0]["message"].contains("tool_calls"));  // none written
  }
  {
    // Llama 3.x: the call's arguments, sent as JSON text, reach its template as the object its
    // `tojson` writes (transformers' rendering of the same conversation).
    ServeProcess s(llama, args());
    ASSERT_TRUE(s.started());
    Reply r = post(s.port(), kChat, body.dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    const std::string prompt =
        post(s.port(), "/detokenize", json{{"tokens", r.body["prompt_token_ids"]}}.dump())
            .body["content"];
    EXPECT_THAT(prompt, HasSubstr("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": "
                                  "\"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"
                                  "<|eot_id|>"));
    // A string is iterable to jinja: the template writes the tool's content through tojson.
    EXPECT_THAT(prompt, HasSubstr("<|start_header_id|>ipython<|end_header_id|>\n\n\"21 C\""));
  }
  {
    // Mistral's templates refuse ids that are not 9 alphanumerics, as transformers does; with
    // one (the ids this server gives Mistral's calls are such), the call is written in v11's form.
    ServeProcess s(mistral, {"--context", "4096"});  // its system prompt is long
    ASSERT_TRUE(s.started());
    Reply refused = post(s.port(), kChat, body.dump());
    EXPECT_EQ(refused.status, 400) << refused.raw;
    EXPECT_EQ(refused.body["error"]["code"], "SY211");
    EXPECT_THAT(refused.body["error"]["message"].get<std::string>(), HasSubstr("length 9"));
    auto nine = body;
    nine["messages"][1]["tool_calls"][0]["id"] = "a1B2c3D4e";
    nine["messages"][2]["tool_call_id"] = "a1B2c3D4e";
    Reply r = post(s.port(), kChat, nine.dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    const std::string prompt =
        post(s.port(), "/detokenize", json{{"tokens", r.body["prompt_token_ids"]}}.dump())
            .body["content"];
    EXPECT_THAT(prompt, HasSubstr("[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": "
                                  "\"Paris\"}"));
    EXPECT_THAT(prompt, HasSubstr("[TOOL_RESULTS]a1B2c3D4e[TOOL_CONTENT]21 C[/TOOL_RESULTS]"));
  }
  {
    // gpt-oss's template on a model without harmony's control tokens: nothing could mark a
    // call, so tools are refused by name (harmony's calls are HarmonyToolCalls' in the unit
    // tests, on a tokenizer that has them).
    ServeProcess s(gpt_oss, args());
    ASSERT_TRUE(s.started());
    Reply r = post(s.port(), kChat, body.dump());
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["param"], "tools");
    EXPECT_THAT(r.body["error"]["message"].get<std::string>(), HasSubstr("control tokens"));
  }
  {
    // A template that renders tools but writes calls in no form read back here.
    const fs::path other = copy.path() / "other";
    fs::copy(model(), other);
    std::ofstream(other / "chat_template.jinja")
        << "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
           "{% if tools %}{{ tools | tojson }}{% endif %}";
    ServeProcess s(other, args());
    ASSERT_TRUE(s.started());
    Reply r = post(s.port(), kChat, body.dump());
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body["error"]["param"], "tools");
    EXPECT_THAT(r.body["error"]["message"].get<std::string>(), HasSubstr("not read back yet"));
  }
  ServeProcess plain(model(), args());
  ASSERT_TRUE(plain.started());
  Reply r = post(plain.port(), kChat, body.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"], "tools");
  EXPECT_THAT(r.body["error"]["message"].get<std::string>(), HasSubstr("does not render tools"));
}

// The arguments `call` holds, checked against the two tools' schemas by hand; "" when they hold.
std::string bad_arguments(const json& call) {
  const std::string name = call["function"]["name"];
  json args;
  try {
    args = json::parse(call["function"]["arguments"].get<std::string>());
  } catch (const json::exception& e) {
    return std::string("arguments do not parse: ") + e.what();
  }
  if (!args.is_object()) return "arguments are not an object";
  if (name == "get_weather") {
    if (!args.contains("city") || (args["city"] != "Paris" && args["city"] != "Rome"))
      return "city is missing or not in its enum";
    for (const auto& [k, v] : args.items())
      if (k != "city" && !(k == "days" && v.is_number_integer())) return "stray or bad " + k;
    return "";
  }
  if (name == "add") {
    if (args.size() != 2 || !args.contains("a") || !args.contains("b") || !args["a"].is_number() ||
        !args["b"].is_number())
      return "add needs numbers a and b, and nothing else";
    return "";
  }
  return "no tool is named " + name;
}

// tool_choice required and a named function: whatever the (noise) model favours at
// temperature 1, the answer is tool calls whose arguments parse and hold to the function's
// schema; a named function is the one called, once; streamed deltas reassemble to the whole.
// For a Hermes template (Qwen3: calls may follow calls) and Llama 3.1's (one call a turn).
class ServeForcedCalls : public Serve, public ::testing::WithParamInterface<const char*> {};

TEST_P(ServeForcedCalls, HoldToTheFunctionsSchema) {
  const bool one_call = std::string(GetParam()).starts_with("llama");  // one a turn
  TempDir copy;
  const fs::path qwen3 = copy.path() / "model";
  fs::copy(model(), qwen3);
  {
    std::ifstream in(fs::path(SY_TEST_FIXTURES_DIR) / "chat_templates" / GetParam());
    std::ofstream(qwen3 / "chat_template.jinja") << in.rdbuf();
  }
  const auto tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"enum": ["Paris", "Rome"]}, "days": {"type": "integer"}},
      "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
      "required": ["a", "b"]}}}])");
  // Llama's prompt (tools written with indent 4) is 1406 tokens of the test model, Mistral
  // Small's (its default system prompt) 2475.
  ServeProcess s(qwen3, {"--context", "4096"});
  ASSERT_TRUE(s.started());
  int calls = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    const bool named = seed % 2 == 0;
    json body =
        chat_body("Weather in Paris?", 250,
                  {{"temperature", 1},
                   {"seed", seed},
                   {"tools", tools},
                   {"ignore_eos", false},
                   // Qwen3's: a noise model let to think first would think to max_tokens (the
                   // thought before a forced call is ToolCalls.AForcedCallMayFollowAThought's).
                   {"chat_template_kwargs", {{"enable_thinking", false}}}});
    if (named)
      body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "add"}}}};
    else
      body["tool_choice"] = "required";
    const Reply r = post(s.port(), kChat, body.dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    const json& choice = r.body["choices"][0];
    ASSERT_TRUE(choice["message"].contains("tool_calls")) << r.raw;
    const json& got = choice["message"]["tool_calls"];
    ASSERT_GE(got.size(), 1u);
    if (one_call) {
      ASSERT_EQ(got.size(), 1u);
    }
    if (named) {
      EXPECT_EQ(choice["finish_reason"], "tool_calls");
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0]["function"]["name"], "add");
    } else {  // calls may follow calls until an end of sequence, or max_tokens
      EXPECT_TRUE(choice["finish_reason"] == "tool_calls" || choice["finish_reason"] == "length");
    }
    for (const json& call : got) EXPECT_EQ(bad_arguments(call), "") << call.dump();
    calls += int(got.size());
    body["stream"] = true;
    const StreamReply st = post_stream(s.port(), kChat, body.dump());
    ASSERT_EQ(st.status, 200);
    json streamed = json::array();
    for (const json& e : st.events) {
      if (e["choices"].empty() || !e["choices"][0]["delta"].contains("tool_calls")) continue;
      for (const json& d : e["choices"][0]["delta"]["tool_calls"]) {
        const size_t i = d["index"];
        if (i == streamed.size())
          streamed.push_back(d);
        else
          streamed[i]["function"]["arguments"] =
              streamed[i]["function"]["arguments"].get<std::string>() +
              d["function"]["arguments"].get<std::string>();
      }
    }
    ASSERT_EQ(streamed.size(), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(streamed[i]["function"]["name"], got[i]["function"]["name"]);
      EXPECT_EQ(streamed[i]["function"]["arguments"], got[i]["function"]["arguments"]);
    }
  }
  EXPECT_GE(calls, 6);
}

INSTANTIATE_TEST_SUITE_P(Templates, ServeForcedCalls,
                         ::testing::Values("qwen3-0.6b.jinja", "llama-3.1-8b-instruct.jinja",
                                           "mistral-nemo-instruct-2407.jinja",
                                           "mistral-small-3.2-24b-instruct-2506.jinja"),
                         [](const auto& info) {
                           const std::string p = info.param;
                           return p.starts_with("qwen")           ? "Hermes"
                                  : p.starts_with("llama")        ? "Llama3Json"
                                  : p.starts_with("mistral-nemo") ? "MistralJson"
                                                                  : "MistralArgs";
                         });

// Batch invariance across samplers: grammar-constrained (a schema, a GBNF), penalised and plain
// requests, served together in one batch, each give the ids they give served alone (one at a
// time, on a fresh server), sampled at temperature 1 with seeds. (It found repetition_penalty
// counting only the uncached part of a prompt: the answer depended on the prefix cache.)
TEST_F(Serve, ConstrainedPenalisedAndPlainRequestsInOneBatchEachAsAlone) {
  const json schema = json::parse(R"({"type": "object", "properties": {"n": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
      "required": ["n", "tags"]})");
  std::vector<json> bodies;
  for (int i = 0; i < 8; ++i) {
    json b =
        chat_body("request " + std::to_string(i), 40, {{"temperature", 0}, {"ignore_eos", false}});
    if (i % 4 == 0)
      b["response_format"] = {{"type", "json_schema"},
                              {"json_schema", {{"name", "s"}, {"schema", schema}}}};
    else if (i % 4 == 1)
      b["grammar"] = "root ::= (\"yes\" | \"no\") (\", \" [a-z]{1,6})*";
    else if (i % 4 == 2)
      b.update({{"presence_penalty", 1.5},
                {"frequency_penalty", 0.7},
                {"repetition_penalty", 1.3},
                {"min_p", 0.05}});
    bodies.push_back(b);
  }
  std::vector<Reply> together{bodies.size()};
  {
    ServeProcess s(model(), args());
    ASSERT_TRUE(s.started());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < bodies.size(); ++i)
      clients.emplace_back([&, i] { together[i] = post(s.port(), kChat, bodies[i].dump()); });
    for (auto& t : clients) t.join();
    EXPECT_LT(metric(get(s.port(), "/metrics").raw, "switchyard_steps_total"), 8 * 40 / 2);
  }
  ServeProcess alone(model(), args());
  ASSERT_TRUE(alone.started());
  for (size_t i = 0; i < bodies.size(); ++i) {
    ASSERT_EQ(together[i].status, 200) << together[i].raw;
    const Reply r = post(alone.port(), kChat, bodies[i].dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(ids_of(r.body["choices"][0]["token_ids"]),
              ids_of(together[i].body["choices"][0]["token_ids"]))
        << "request " << i << " differs served alone";
    if (i % 4 == 0 && r.body["choices"][0]["finish_reason"] == "stop") {
      const json answer =
          json::parse(r.body["choices"][0]["message"]["content"].get<std::string>());
      EXPECT_TRUE(answer["n"].is_number_integer() && answer["tags"].is_array()) << answer;
    }
  }
}

TEST_F(Serve, AStopTextEndsTheAnswerBeforeIt) {
  ServeProcess s(model(), args());
  ASSERT_TRUE(s.started());
  const json body{
      {"prompt", "the cat sat"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  Reply free_run = post(s.port(), "/v1/completions", body.dump());
  ASSERT_EQ(free_run.status, 200);
  const std::string text = free_run.body["choices"][0]["text"];
  // A stop text cut from the middle of the free-running answer (one ASCII character: the test
  // model's text is mostly bytes of no character): the answer ends just before its first
  // occurrence.
  std::string stop;
  for (size_t i = text.size() / 3; i < text.size() && stop.empty(); ++i)
    if (isalnum((unsigned char)text[i])) stop = text.substr(i, 1);
  ASSERT_FALSE(stop.empty()) << "no ASCII letter or digit in " << text;
  json stopped_body = body;
  stopped_body["stop"] = json::array({"never-there", stop});
  Reply stopped = post(s.port(), "/v1/completions", stopped_body.dump());
  ASSERT_EQ(stopped.status, 200) << stopped.raw;
  EXPECT_EQ(stopped.body["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(stopped.body["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(stopped.body["usage"]["completion_tokens"].get<int>(), 24);
  stopped_body["stream"] = true;
  StreamReply st = post_stream(s.port(), "/v1/completions", stopped_body.dump());
  EXPECT_EQ(st.text(), text.substr(0, text.find(stop)));
  EXPECT_EQ(st.finish_reason(), "stop");
}

// The second turn of a conversation finds the first turn's blocks in the pool, and gives the
// same ids as a fresh server computing the whole conversation.
TEST_F(Serve, ASecondTurnReusesTheFirstTurnsCache) {
  ServeProcess s(model(), args());
  ASSERT_TRUE(s.started());
  Reply first = post(s.port(), kChat, chat_body("the cat sat", 20).dump());
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.header("X-Switchyard-Cached-Tokens"), "0");
  const int64_t first_prompt = first.body["usage"]["prompt_tokens"];
  json second_body = chat_body("and then?", 8);
  second_body["messages"] = {
      {{"role", "user"}, {"content", "the cat sat"}},
      {{"role", "assistant"}, {"content", first.body["choices"][0]["message"]["content"]}},
      {{"role", "user"}, {"content", "and then?"}}};
  Reply second = post(s.port(), kChat, second_body.dump());
  ASSERT_EQ(second.status, 200) << second.raw;
  const int64_t cached = std::stoll(second.header("X-Switchyard-Cached-Tokens"));
  EXPECT_EQ(second.body["usage"]["prompt_tokens_details"]["cached_tokens"], cached);
  // Whole blocks of 16 tokens: at least the first prompt's whole blocks are reused.
  EXPECT_GE(cached, first_prompt / 16 * 16);
  EXPECT_LT(cached, second.body["usage"]["prompt_tokens"].get<int64_t>());
  const std::string metrics = get(s.port(), "/metrics").raw;
  EXPECT_EQ(metric(metrics, "switchyard_prompt_tokens_cached_total"), double(cached));

  ServeProcess fresh(model(), args());
  ASSERT_TRUE(fresh.started());
  Reply alone = post(fresh.port(), kChat, second_body.dump());
  EXPECT_EQ(alone.header("X-Switchyard-Cached-Tokens"), "0");
  EXPECT_EQ(alone.body["prompt_token_ids"], second.body["prompt_token_ids"]);
  EXPECT_EQ(alone.body["choices"][0]["token_ids"], second.body["choices"][0]["token_ids"]);
}

// Each refusal: its status, OpenAI's error shape with the SY code, and the field named.
void expect_error(const Reply& r, int status, const std::string& code, const std::string& param,
                  const std::string& says) {
  EXPECT_EQ(r.status, status) << r.raw;
  ASSERT_TRUE(r.body.contains("error")) << r.raw;
  const json& e = r.body["error"];
  EXPECT_EQ(e["code"], code) << r.raw;
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr(says));
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.raw;
  }
}

TEST_F(Serve, BadInputGetsAnOpenAiErrorAndTheServerKeepsServing) {
  ServeProcess s(model(), args());
  ASSERT_TRUE(s.started());
  const int p = s.port();
  expect_error(post(p, kChat, "{\"messages\": [}"), 400, "SY501", "body", "not valid JSON");
  expect_error(post(p, kChat, chat_body("hi", 2, {{"max_tokens", "2"}}).dump()), 400, "SY501",
               "max_tokens", "must be an integer");
  expect_error(post(p, kChat, R"({"model": "model"})"), 400, "SY501", "messages", "is missing");
  expect_error(post(p, kChat, chat_body("hi", 2, {{"n", 17}}).dump()), 400, "SY501", "n",
               "must be in [1, 16]");
  expect_error(post(p, kChat, chat_body("hi", 2, {{"n", 9}}).dump()), 400, "SY501", "n",
               "--parallel 8");
  expect_error(post(p, kChat, chat_body("hi", 2, {{"frequency_penalty", 5}}).dump()), 400, "SY501",
               "frequency_penalty", "must be in [-2, 2]");
  expect_error(post(p, kChat, chat_body("hi", 2, {{"model", "gpt-4o"}}).dump()), 404, "SY502", "",
               "gpt-4o");
  expect_error(post(p, kChat, chat_body("hi", 5000).dump()), 400, "SY304", "",
               "exceed the context");
  expect_error(post(p, "/v1/embeddings", "{}"), 404, "SY501", "path", "not an endpoint");
  // Content that is not UTF-8: a 400 naming the field, not a 500.
  expect_error(post(p, kChat, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\xff\"}]}"),
               400, "SY501", "messages[0].content", "not valid UTF-8");
  // Over the 4 MiB body limit: refused before any of it is parsed.
  const std::string huge = chat_body(std::string(5 << 20, 'a'), 2).dump();
  expect_error(post(p, kChat, huge), 413, "SY501", "body", "larger than");
  // Still serving, and the refusals are counted by status.
  EXPECT_EQ(post(p, kChat, chat_body("hi", 2).dump()).status, 200);
  EXPECT_EQ(get(p, "/health").status, 200);
  const std::string m = get(p, "/metrics").raw;
  EXPECT_EQ(metric(m, R"(switchyard_requests_total{endpoint="/v1/chat/completions",status="400"})"),
            8);
  EXPECT_EQ(metric(m, R"(switchyard_requests_total{endpoint="/v1/chat/completions",status="200"})"),
            1);
}

TEST_F(Serve, AModelWithoutAChatTemplateRefusesChatsAndServesCompletions) {
  TempDir dir;
  fs::copy(model(), dir.path() / "model", fs::copy_options::recursive);
  std::ofstream(dir.path() / "model" / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  ServeProcess s(dir.path() / "model", args());
  ASSERT_TRUE(s.started());
  expect_error(post(s.port(), kChat, chat_body("hi", 2).dump()), 400, "SY211", "",
               "no chat template");
  const json completion{{"prompt", "hi"}, {"max_tokens", 2}};
  EXPECT_EQ(post(s.port(), "/v1/completions", completion.dump()).status, 200);
  // One access-log line per request: id, status, tokens, TTFT and total time (written after
  // the reply: a loaded machine's client can read the log before it).
  const std::string line =
      "request id=cmpl-[0-9a-f]+ /v1/completions status=200 prompt=[0-9]+ "
      "cached=[0-9]+ completion=2 finish=max_tokens ttft_ms=[0-9.]+ total_ms=[0-9.]+";
  const std::string log = s.log_with(line);
  EXPECT_THAT(log, HasSubstr("status=400 error=SY211"));
  EXPECT_THAT(log, ::testing::ContainsRegex(line));
}

TEST_F(Serve, AnApiKeyGuardsEverythingButHealth) {
  ServeProcess s(model(), args({"--api-key", "k3y"}));
  ASSERT_TRUE(s.started());
  const int p = s.port();
  expect_error(post(p, kChat, chat_body("hi", 2).dump()), 401, "SY503", "", "API key");
  expect_error(post(p, kChat, chat_body("hi", 2).dump(), {{"Authorization", "Bearer nope"}}), 401,
               "SY503", "", "API key");
  expect_error(get(p, "/metrics"), 401, "SY503", "", "API key");
  EXPECT_EQ(get(p, "/health").status, 200);
  EXPECT_EQ(post(p, kChat, chat_body("hi", 2).dump(), {{"Authorization", "Bearer k3y"}}).status,
            200);
  // Off loopback without a key: refused before anything listens.
  auto r = run_switchyard("serve " + model().string() + " --host 0.0.0.0 --port 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("give --api-key"));
}

TEST_F(Serve, ModelsPlanPluginsHealth) {
  // --prefer cpu: the plan's first op is cpu_onednn's also where a live GPU would take it.
  ServeProcess s(model(), args({"--alias", "tiny", "--prefer", "cpu"}));
  ASSERT_TRUE(s.started());
  Reply models = get(s.port(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body["data"][0]["id"], "tiny");
  Reply plan = get(s.port(), "/v1/plan");
  ASSERT_EQ(plan.status, 200);
  EXPECT_EQ(plan.body["kv_layout"], "paged");
  // Which plugin, kernel and device serves each op, and why the others did not.
  const json& op = plan.body["phases"].at(0)["ops"].at(0);
  EXPECT_EQ(op["plugin"], "cpu_onednn") << op.dump();
  EXPECT_EQ(op["device"], "cpu:0");
  EXPECT_TRUE(op["rejected"].is_array());
  Reply plugins = get(s.port(), "/v1/plugins");
  ASSERT_EQ(plugins.status, 200);
  EXPECT_TRUE(plugins.body.is_array());
  Reply health = get(s.port(), "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "ok");
  EXPECT_EQ(post(s.port(), kChat, chat_body("hi", 2, {{"model", "tiny"}}).dump()).status, 200);
}

TEST_F(Serve, APortInUseIsRefusedNotShared) {
  ServeProcess first(model(), args());
  ASSERT_TRUE(first.started());
  auto second =
      run_switchyard("serve " + model().string() + " --port " + std::to_string(first.port()));
  EXPECT_EQ(second.exit_code, 2);
  EXPECT_THAT(second.err, HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(first.port())));
}

// n choices of one prompt, served (that the prompt runs once and the forks share its blocks is
// EngineTest.ForksShareThePromptAndEachDecodesItsOwnTokens'): usage and the prompt-token counter
// count the prompt once. At temperature 0 the three are `run --chat`'s greedy
// ids; with a seed, choice i is the same request with n = 1 and seed + i (the path with no
// fork), so a seeded request is reproducible; streamed, each choice's deltas reassemble to
// the whole answer's choice.
TEST_F(Serve, NChoicesAreForksOfOnePrompt) {
  ServeProcess s(model(), args({"--parallel", "4"}));
  ASSERT_TRUE(s.started());
  const std::vector<int64_t> greedy = run_chat_ids(model(), "three answers", 12, "--context 1024");
  const Reply three = post(s.port(), kChat, chat_body("three answers", 12, {{"n", 3}}).dump());
  ASSERT_EQ(three.status, 200) << three.raw;
  ASSERT_EQ(three.body["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(three.body["choices"][i]["index"], i);
    EXPECT_EQ(ids_of(three.body["choices"][i]["token_ids"]), greedy) << "choice " << i;
  }
  EXPECT_EQ(three.body["usage"]["completion_tokens"], 36);
  const int64_t prompt = three.body["usage"]["prompt_tokens"].get<int64_t>();
  EXPECT_EQ(metric(get(s.port(), "/metrics").raw, "switchyard_prompt_tokens_total"), prompt);

  const json seeded = chat_body("three answers", 16, {{"n", 3}, {"temperature", 1}, {"seed", 40}});
  const Reply a = post(s.port(), kChat, seeded.dump());
  const Reply b = post(s.port(), kChat, seeded.dump());
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(b.status, 200) << b.raw;
  std::set<std::vector<int64_t>> distinct;
  for (int i = 0; i < 3; ++i) {
    const std::vector<int64_t> ids = ids_of(a.body["choices"][i]["token_ids"]);
    EXPECT_EQ(ids, ids_of(b.body["choices"][i]["token_ids"])) << "choice " << i;
    json alone = seeded;
    alone["n"] = 1;
    alone["seed"] = 40 + i;
    const Reply one = post(s.port(), kChat, alone.dump());
    ASSERT_EQ(one.status, 200);
    EXPECT_EQ(ids_of(one.body["choices"][0]["token_ids"]), ids) << "choice " << i;
    distinct.insert(ids);
  }
  EXPECT_EQ(distinct.size(), 3u) << "three seeds gave the same answer";

  json streamed = seeded;
  streamed["stream"] = true;
  const StreamReply st = post_stream(s.port(), kChat, streamed.dump());
  ASSERT_EQ(st.status, 200);
  EXPECT_TRUE(st.done);
  std::vector<std::vector<int64_t>> ids(3);
  std::vector<std::string> texts(3), finishes(3);
  for (const json& e : st.events)
    for (const json& c : e["choices"]) {
      const size_t i = c["index"].get<size_t>();
      ASSERT_LT(i, 3u);
      if (c.contains("token_ids"))
        for (const json& id : c["token_ids"]) ids[i].push_back(id.get<int64_t>());
      if (c["delta"].contains("content")) texts[i] += c["delta"]["content"].get<std::string>();
      if (!c["finish_reason"].is_null()) finishes[i] = c["finish_reason"];
    }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ids[size_t(i)], ids_of(a.body["choices"][i]["token_ids"])) << "choice " << i;
    EXPECT_EQ(texts[size_t(i)], a.body["choices"][i]["message"]["content"]) << "choice " << i;
    EXPECT_EQ(finishes[size_t(i)], "length");
  }
  const std::string m = get(s.port(), "/metrics").raw;
  EXPECT_EQ(metric(m, "switchyard_running_sequences"), 0);
  EXPECT_EQ(metric(m, "switchyard_kv_blocks_reserved"), 0);
  EXPECT_EQ(metric(m, "switchyard_kv_cache_usage_ratio"), 0);
}

// A raw TCP connection to the server, for what no HTTP client does on purpose: half a header,
// a body that never comes, a byte at a time.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(RawConnection&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  bool connected() const { return fd_ >= 0; }
  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
  }
  // Still open from the server's side: nothing to read and no end of stream.
  bool open_now() const {
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  // Reads until the server closes or `wait` passes; `closed` says which.
  std::string read_until_closed(std::chrono::milliseconds wait, bool& closed) {
    std::string got;
    const auto end = std::chrono::steady_clock::now() + wait;
    closed = false;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return got;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, int(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed = true;
        return got;
      }
      got.append(buf, size_t(n));
    }
  }

 private:
  int fd_ = -1;
};

// Each connection is a descriptor (here and in the server); Debian's default soft limit is 1024,
// the hard one far above. Returns how many connections the limit allows, up to 1000.
int raise_descriptor_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  getrlimit(RLIMIT_NOFILE, &r);
  return int(std::min<rlim_t>(1000, r.rlim_cur > 200 ? r.rlim_cur - 150 : 0));
}

// Clients that misbehave do not starve the others: a thousand connections, half idle and half
// stopped in the middle of a header, are held while /health, a whole answer and a stream are
// served; and they are still open after it (a server with a thread per connection would have
// served nothing until its read timeout closed them).
TEST_F(Serve, AThousandIdleOrSlowConnectionsDoNotStarveARealRequest) {
  // 1000, unless the hard descriptor limit is lower; 500 are still six times the worker threads
  // (--parallel 8 + --max-queue 64 + 16) a thread per connection would have.
  const int count = raise_descriptor_limit();
  ASSERT_GE(count, 500) << "RLIMIT_NOFILE's hard limit leaves too few descriptors";
  ServeProcess s(model(), args());
  ASSERT_TRUE(s.started());
  std::vector<RawConnection> idle;
  for (int i = 0; i < count; ++i) {
    idle.emplace_back(s.port());
    ASSERT_TRUE(idle.back().connected()) << "connection " << i;
    if (i % 2 == 1) {
      ASSERT_TRUE(
          idle.back().send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nCont"));
    }
  }
  EXPECT_EQ(get(s.port(), "/health").status, 200);
  const Reply whole = post(s.port(), kChat, chat_body("still served?", 8).dump());
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(whole.body["choices"][0]["token_ids"].size(), 8u);
  const StreamReply streamed =
      post_stream(s.port(), kChat, chat_body("and streamed?", 8, {{"stream", true}}).dump());
  EXPECT_EQ(streamed.status, 200);
  EXPECT_TRUE(streamed.done);
  EXPECT_EQ(streamed.token_ids().size(), 8u);
  int open = 0;
  for (const RawConnection& c : idle) open += c.open_now();
  EXPECT_EQ(open, count) << "the server closed some while the real requests were served";
}

// Each request has --http-timeout to arrive whole, however it trickles: half a header, a body
// that stops, and a header sent a byte every 200 ms are all closed at the deadline. A client that
// sends `Expect: 100-continue` (curl, for large bodies) is told to go on.
TEST_F(Serve, ARequestThatDoesNotArriveInTimeIsClosed) {
  ServeProcess s(model(), args({"--http-timeout", "1"}));
  ASSERT_TRUE(s.started());
  RawConnection half_header(s.port()), half_body(s.port()), trickle(s.port());
  ASSERT_TRUE(half_header.send("GET /health HTTP/1.1\r\nHost: x\r\n"));
  ASSERT_TRUE(half_body.send("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
  const std::string header = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n\r\n";
  bool trickle_closed = false;
  std::thread dripper([&] {
    for (char c : header) {
      if (!trickle.send(std::string(1, c))) {
        trickle_closed = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  bool closed = false;
  EXPECT_EQ(half_header.read_until_closed(std::chrono::seconds(20), closed), "");
  EXPECT_TRUE(closed) << "half a header held its connection";
  EXPECT_EQ(half_body.read_until_closed(std::chrono::seconds(20), closed), "");
  EXPECT_TRUE(closed) << "half a body held its connection";
  dripper.join();
  const std::string dripped = trickle.read_until_closed(std::chrono::seconds(20), closed);
  EXPECT_TRUE(trickle_closed || closed);
  EXPECT_EQ(dripped.find("200 OK"), std::string::npos)
      << "a header dripped over " << header.size() * 200 << " ms was served";

  RawConnection curl_like(s.port());
  const std::string body = R"({"content": "hello"})";
  ASSERT_TRUE(
      curl_like.send("POST /tokenize HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                     "Content-Type: application/json\r\nConnection: close\r\n"
                     "Content-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(curl_like.send(body));
  const std::string reply = curl_like.read_until_closed(std::chrono::seconds(20), closed);
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(reply, HasSubstr("\"tokens\""));
  EXPECT_EQ(get(s.port(), "/health").status, 200);
  // HEAD is GET without the body (a load balancer's probe).
  RawConnection head(s.port());
  ASSERT_TRUE(head.send("HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string head_reply = head.read_until_closed(std::chrono::seconds(20), closed);
  EXPECT_THAT(head_reply, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(head_reply, HasSubstr("Content-Length: 15\r\n"));
  EXPECT_EQ(head_reply.substr(head_reply.size() - 4), "\r\n\r\n");  // no body
}

// The first object named `key` anywhere in `j`, or null.
const json* find_key(const json& j, const std::string& key) {
  if (j.is_object() && j.contains(key)) return &j[key];
  if (j.is_structured())
    for (const auto& v : j)
      if (const json* f = find_key(v, key)) return f;
  return nullptr;
}

// The Gateway API Inference Extension's model-server protocol under load: the queue gauge rises
// past --parallel and comes back to 0, KV utilisation (0 to 1) is the held blocks over the pool
// and is 0 when nothing runs, and cache_config_info carries the plan's KV pool shape.
TEST_F(Serve, GatewayMetricsFollowTheQueueAndTheRunningSequences) {
  ServeProcess s(model(), args({"--parallel", "2", "--max-queue", "32"}));
  ASSERT_TRUE(s.started());
  const Reply plan = get(s.port(), "/v1/plan");
  const json* pool = find_key(plan.body, "kv_pool");
  ASSERT_NE(pool, nullptr) << plan.raw;
  const std::string info = "switchyard_cache_config_info{block_size=\"" +
                           std::to_string((*pool)["block_tokens"].get<int64_t>()) +
                           "\",num_gpu_blocks=\"" +
                           std::to_string((*pool)["blocks"].get<int64_t>()) + "\"}";
  struct Sample {
    double queued, running, usage, used, reserved, total;
  };
  std::vector<Sample> samples;
  std::atomic<int> clients_done{0};
  constexpr int kClients = 12;
  std::thread poller([&] {
    while (clients_done < kClients) {
      const std::string m = get(s.port(), "/metrics").raw;
      samples.push_back(
          {metric(m, "switchyard_queue_depth"), metric(m, "switchyard_running_sequences"),
           metric(m, "switchyard_kv_cache_usage_ratio"), metric(m, "switchyard_kv_blocks_used"),
           metric(m, "switchyard_kv_blocks_reserved"), metric(m, "switchyard_kv_blocks_total")});
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      EXPECT_EQ(post_stream(s.port(), kChat,
                            chat_body("load " + std::to_string(i), 64, {{"stream", true}}).dump())
                    .status,
                200);
      ++clients_done;
    });
  for (auto& t : clients) t.join();
  poller.join();
  ASSERT_FALSE(samples.empty());
  double most_queued = 0, most_usage = 0;
  for (const Sample& x : samples) {
    most_queued = std::max(most_queued, x.queued);
    most_usage = std::max(most_usage, x.usage);
    EXPECT_LE(x.running, 2);
    EXPECT_NEAR(x.usage, x.used / x.total, 1e-6);
    EXPECT_LE(x.used, x.reserved);  // held blocks are within the running requests' promises
    if (x.running == 0) {
      EXPECT_EQ(x.usage, 0);
    }
  }
  EXPECT_GT(most_queued, 2) << "the queue never passed --parallel in " << samples.size()
                            << " samples";
  EXPECT_GT(most_usage, 0);
  const std::string end = get(s.port(), "/metrics").raw;
  EXPECT_EQ(metric(end, "switchyard_queue_depth"), 0);
  EXPECT_EQ(metric(end, "switchyard_running_sequences"), 0);
  EXPECT_EQ(metric(end, "switchyard_kv_cache_usage_ratio"), 0);
  EXPECT_EQ(metric(end, info), 1) << end;
}

// 64 streams at once over --parallel 8: none lost or doubled, each the same ids as alone. Each
// answer is `shortest` to twice that many tokens long.
void load_and_compare(const fs::path& model, const std::vector<std::string>& args, int streams,
                      int shortest = 32) {
  ServeProcess s(model, args);
  ASSERT_TRUE(s.started());
  std::vector<StreamReply> replies{size_t(streams)};
  std::vector<json> bodies;
  int64_t want_tokens = 0;
  for (int i = 0; i < streams; ++i) {
    const int n = shortest + (i * 7) % (shortest + 1);
    want_tokens += n;
    bodies.push_back(chat_body(
        "request " + std::to_string(i) + ": tell me about number " + std::to_string(i * 37 % 101),
        n, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  }
  std::vector<std::thread> clients;
  for (int i = 0; i < streams; ++i)
    clients.emplace_back(
        [&, i] { replies[size_t(i)] = post_stream(s.port(), kChat, bodies[size_t(i)].dump()); });
  for (auto& t : clients) t.join();
  std::set<std::string> ids;
  for (int i = 0; i < streams; ++i) {
    const StreamReply& r = replies[size_t(i)];
    ASSERT_EQ(r.status, 200) << "request " << i << ": " << r.error << " after " << r.events.size()
                             << " events; the server's log:\n"
                             << s.log();
    EXPECT_TRUE(r.done) << i;
    ids.insert(r.events.at(0)["id"].get<std::string>());
    EXPECT_EQ(int64_t(r.token_ids().size()), bodies[size_t(i)]["max_tokens"].get<int64_t>()) << i;
    ASSERT_NE(r.usage(), nullptr);
    EXPECT_EQ((*r.usage())["completion_tokens"], bodies[size_t(i)]["max_tokens"]) << i;
  }
  EXPECT_EQ(ids.size(), size_t(streams));  // none answered twice under one id
  const std::string m = get(s.port(), "/metrics").raw;
  EXPECT_EQ(metric(m, R"(switchyard_requests_total{endpoint="/v1/chat/completions",status="200"})"),
            streams);
  EXPECT_EQ(metric(m, "switchyard_sequences_finished_total"), streams);
  EXPECT_EQ(metric(m, "switchyard_generated_tokens_total"), double(want_tokens));
  EXPECT_EQ(metric(m, "switchyard_time_to_first_token_seconds_count"), streams);
  EXPECT_EQ(metric(m, "switchyard_running_sequences"), 0);
  EXPECT_EQ(metric(m, "switchyard_kv_blocks_reserved"), 0);
  // Batched: far fewer steps than tokens.
  EXPECT_LT(metric(m, "switchyard_steps_total"), double(want_tokens) / 2);

  ServeProcess alone(model, args);
  ASSERT_TRUE(alone.started());
  for (int i = 0; i < streams; ++i) {
    json b = bodies[size_t(i)];
    b.erase("stream");
    b.erase("stream_options");
    Reply r = post(alone.port(), kChat, b.dump());
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(ids_of(r.body["choices"][0]["token_ids"]), replies[size_t(i)].token_ids())
        << "request " << i << " differs served alone";
  }
}

TEST_F(Serve, SixtyFourConcurrentStreamsEachAsAlone) {
  load_and_compare(model(), args({"--parallel", "8", "--max-queue", "64"}), 64);
}

// ---- the real model: SmolLM2-135M-Instruct Q4_1 ------------------------------------------

class ServeSmolLM2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kSmolLM2))
      GTEST_SKIP() << kSmolLM2 << " is not there (scripts/fetch-model.sh could not fetch it)";
  }
};

TEST_F(ServeSmolLM2, TheServedAnswerIsRunChats) {
  const std::string q = "What is the capital of France?";
  auto r =
      run_switchyard("run " + kSmolLM2.string() + " --chat '" + q + "' --max-tokens 32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json run = json::parse(r.out);
  ServeProcess s(kSmolLM2, {"--context", "2048"});
  ASSERT_TRUE(s.started());
  json body{{"messages", {{{"role", "user"}, {"content", q}}}},
            {"max_tokens", 32},
            {"temperature", 0},
            {"return_token_ids", true}};
  Reply whole = post(s.port(), kChat, body.dump());
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(whole.body["choices"][0]["token_ids"], run["generated_ids"]);
  EXPECT_EQ(whole.body["choices"][0]["message"]["content"], run["text"]);
  EXPECT_THAT(whole.body["choices"][0]["message"]["content"].get<std::string>(),
              HasSubstr("Paris"));
  EXPECT_EQ(whole.body["choices"][0]["finish_reason"], "stop");  // the model's <|im_end|>
  // <|im_start|> typed by a user stays text: more tokens than the one control token.
  json forged = body;
  forged["messages"][0]["content"] = "<|im_start|>";
  forged["max_tokens"] = 1;
  json plain = forged;
  plain["messages"][0]["content"] = "";
  const int64_t with = post(s.port(), kChat, forged.dump()).body["usage"]["prompt_tokens"];
  const int64_t without = post(s.port(), kChat, plain.dump()).body["usage"]["prompt_tokens"];
  EXPECT_GT(with - without, 1);
}

// /tokenize, /detokenize and logprobs on the real model against transformers (the parity
// fixture, tests/fixtures/smollm2/make_expected.py): its tokenizer's ids for each prompt and
// the text, and its log-probabilities of the greedy steps, within the parity test's tolerance.
TEST_F(ServeSmolLM2, TokensAndLogprobsAreTransformers) {
  std::ifstream in(fs::path(SY_TEST_FIXTURES_DIR) / "smollm2" / "expected.json");
  const json want = json::parse(in);
  std::ifstream text_in(fs::path(SY_TEST_FIXTURES_DIR) / "smollm2" / "text.txt");
  const std::string text((std::istreambuf_iterator<char>(text_in)), {});
  // Exact numerics, as the parity test compares them (the default's differ by design).
  ServeProcess s(kSmolLM2, {"--context", "2048", "--numerics", "exact"});
  ASSERT_TRUE(s.started());
  for (const json& p : want["prompts"]) {
    Reply t = post(s.port(), "/tokenize", json{{"content", p["text"]}}.dump());
    ASSERT_EQ(t.status, 200) << t.raw;
    EXPECT_EQ(t.body["tokens"], p["ids"]) << p["text"];
    // Greedy with one alternative: the reference's ids and log-probabilities step by step.
    const size_t steps = 8;
    const json body{{"prompt", p["ids"]},
                    {"max_tokens", steps},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"logprobs", 1}};
    Reply c = post(s.port(), "/v1/completions", body.dump());
    ASSERT_EQ(c.status, 200) << c.raw;
    const json& lp = c.body["choices"][0]["logprobs"]["token_logprobs"];
    ASSERT_EQ(lp.size(), steps);
    for (size_t i = 0; i < steps; ++i)
      EXPECT_NEAR(lp[i].get<double>(), p["greedy"][i]["logprob"].get<double>(), 2e-4)
          << p["text"] << " step " << i;
  }
  Reply t = post(s.port(), "/tokenize", json{{"content", text}}.dump());
  EXPECT_EQ(t.body["tokens"], want["text"]["ids"]);
  Reply d = post(s.port(), "/detokenize", json{{"tokens", want["text"]["ids"]}}.dump());
  ASSERT_EQ(d.status, 200) << d.raw;
  EXPECT_EQ(d.body["content"], text);
  // The chat fixture's rendered prompt holds control tokens, matched as llama-server matches
  // them; with_pieces spells it back.
  Reply pieces = post(s.port(), "/tokenize",
                      json{{"content", want["chat"]["rendered"]}, {"with_pieces", true}}.dump());
  std::string spelled;
  json ids = json::array();
  for (const json& e : pieces.body["tokens"]) {
    ids.push_back(e["id"]);
    spelled += e["piece"].get<std::string>();
  }
  EXPECT_EQ(ids, want["chat"]["ids"]);
  EXPECT_EQ(spelled, want["chat"]["rendered"]);
  // Bad input names the field.
  Reply bad = post(s.port(), "/detokenize", json{{"tokens", {1, 99999999}}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "tokens[1]");
  Reply unknown =
      post(s.port(), "/tokenize", json{{"content", "x"}, {"parse_special", true}}.dump());
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.body["error"]["param"], "parse_special");
  Reply models = get(s.port(), "/v1/models");
  EXPECT_EQ(models.body["data"][0]["max_model_len"], 2048);
}

// 64 streams over 8 slots, of 32 to 64 tokens each. Under the sanitizers 16 streams of 8 to 16
// tokens (SY_TEST_SERVE_STREAMS and SY_TEST_SERVE_TOKENS in their test preset): the same
// scheduler paths, admission, refills and a sequence's growth past a KV block included. At 64
// streams that was 7 of CI's minutes under ASan, and at 16 streams of 32 to 64 tokens 91 s of a
// serial test, most of it the streams replayed one at a time.
TEST_F(ServeSmolLM2, ManyConcurrentStreamsEachAsAlone) {
  const char* streams = std::getenv("SY_TEST_SERVE_STREAMS");
  const char* tokens = std::getenv("SY_TEST_SERVE_TOKENS");
  load_and_compare(kSmolLM2, {"--context", "1024", "--parallel", "8"},
                   streams ? std::atoi(streams) : 64, tokens ? std::atoi(tokens) : 32);
}

// A client that hangs up mid-stream: its sequence is cancelled at the next step and its
// reservation returns to the pool.
TEST_F(ServeSmolLM2, AClientThatHangsUpFreesItsBlocks) {
  ServeProcess s(kSmolLM2, {"--context", "2048"});
  ASSERT_TRUE(s.started());
  StreamReply cut = post_stream(
      s.port(), kChat, chat_body("Tell me a long story.", 1500, {{"stream", true}}).dump(), 3);
  EXPECT_FALSE(cut.done);
  std::string m;
  for (int i = 0; i < 200; ++i) {
    m = get(s.port(), "/metrics").raw;
    if (metric(m, "switchyard_sequences_cancelled_total") == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(metric(m, "switchyard_sequences_cancelled_total"), 1) << m;
  EXPECT_EQ(metric(m, "switchyard_running_sequences"), 0);
  EXPECT_EQ(metric(m, "switchyard_kv_blocks_reserved"), 0);
  EXPECT_LT(metric(m, "switchyard_generated_tokens_total"), 1500);
  EXPECT_EQ(post(s.port(), kChat, chat_body("hi", 4).dump()).status, 200);
}

TEST_F(ServeSmolLM2, AFullQueueIs429WithRetryAfter) {
  // One slot, no queue: while a long stream runs, the next request is refused at once.
  ServeProcess s(kSmolLM2, {"--context", "1024", "--parallel", "1", "--max-queue", "0"});
  ASSERT_TRUE(s.started());
  std::thread long_stream([&] {
    post_stream(s.port(), kChat, chat_body("x", 300, {{"stream", true}}).dump());
  });
  double running = 0;
  for (int i = 0; i < 400 && running != 1; ++i) {
    running = metric(get(s.port(), "/metrics").raw, "switchyard_running_sequences");
    if (running != 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(running, 1);
  Reply refused = post(s.port(), kChat, chat_body("y", 2).dump());
  expect_error(refused, 429, "SY504", "", "--max-queue 0");
  EXPECT_EQ(refused.header("Retry-After"), "1");
  EXPECT_EQ(get(s.port(), "/health").status, 200);  // a full server still answers /health
  long_stream.join();
  EXPECT_EQ(post(s.port(), kChat, chat_body("y", 2).dump()).status, 200);
}

TEST_F(ServeSmolLM2, SigtermDrainsInFlightStreamsRefusesNewOnesAndExitsZero) {
  ServeProcess s(kSmolLM2, {"--context", "1024", "--parallel", "4"});
  ASSERT_TRUE(s.started());
  std::vector<StreamReply> replies(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      replies[size_t(i)] = post_stream(
          s.port(), kChat,
          chat_body("Story number " + std::to_string(i), 96, {{"stream", true}}).dump());
    });
  // Every stream has its first tokens.
  for (int i = 0; i < 400; ++i) {
    if (metric(get(s.port(), "/metrics").raw, "switchyard_time_to_first_token_seconds_count") == 4)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The drain lasts as long as the streams do: under TSan on a 2-core Zen 3 the test took 192 s,
  // most of it past stop's default 120 s. The clients' own read timeout (300 s) bounds it.
  std::thread stopper([&] { EXPECT_EQ(s.stop(SIGTERM, std::chrono::seconds(300)), 0) << s.log(); });
  Reply health;
  for (int i = 0; i < 200 && health.status != 503; ++i) {
    health = get(s.port(), "/health");
    if (health.status != 503) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body["status"], "draining");
  expect_error(post(s.port(), kChat, chat_body("late", 4).dump()), 503, "SY505", "", "draining");
  for (auto& t : clients) t.join();
  stopper.join();
  for (const StreamReply& r : replies) {
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.token_ids().size(), 96u);
    EXPECT_EQ(r.finish_reason(), "length");
  }
  EXPECT_THAT(s.out(), HasSubstr("drained, exiting"));
}

}  // namespace
}  // namespace sy::test
