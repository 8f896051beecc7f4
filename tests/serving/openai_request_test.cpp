// The OpenAI request parser: every field served, accepted at its neutral value, or refused by
// name (SY501 "field: detail"). The expected values are OpenAI's documented request shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "core/errors/errors.hpp"
#include "core/sampling/json_schema.hpp"
#include "core/serving/openai_request.hpp"

namespace sy {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

CompletionRequest chat(const std::string& body) {
  return parse_completion_request(body, RequestKind::chat);
}

// The SY501 message a body gets (empty when it parses).
std::string request_refusal(const std::string& body, RequestKind kind = RequestKind::chat) {
  try {
    parse_completion_request(body, kind);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_request) << e.what();
    return e.what();
  }
}

const std::string kHello = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(OpenAiRequest, ServesEveryDocumentedChatField) {
  const CompletionRequest r = chat(R"({"model": "m", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": "c", "name": "bot"}],
    "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "seed": 11,
    "stop": ["x", "y"], "stream": true, "stream_options": {"include_usage": true},
    "ignore_eos": true})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].first, "system");  // OpenAI's developer role is the system turn
  EXPECT_EQ(r.messages[1].second, "ab");
  EXPECT_EQ(r.messages[2].first, "assistant");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.seed, 11u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos);
}

TEST(OpenAiRequest, DefaultsAreOpenAisAndMaxTokensIsLeftToTheServer) {
  const CompletionRequest r = chat("{" + kHello + "}");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FALSE(r.model.has_value());
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 1.0);
  EXPECT_DOUBLE_EQ(r.sampling.top_p, 1.0);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
}

TEST(OpenAiRequest, CompletionTakesTextOrTokenIds) {
  auto r = parse_completion_request(R"({"prompt": "Once", "stop": "\n", "max_tokens": 3})",
                                    RequestKind::completion);
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  r = parse_completion_request(R"({"prompt": [1, 2, 3]})", RequestKind::completion);
  EXPECT_EQ(r.prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_THAT(request_refusal(R"({"prompt": ["a", "b"]})", RequestKind::completion),
              StartsWith("prompt: "));
  EXPECT_THAT(request_refusal(R"({"prompt": [1, -2]})", RequestKind::completion),
              StartsWith("prompt[1]"));
  EXPECT_THAT(request_refusal(R"({"messages": []})", RequestKind::completion),
              StartsWith("prompt: "));
}

TEST(OpenAiRequest, NeutralValuesAreAcceptedOthersRefusedByName) {
  EXPECT_EQ(request_refusal("{" + kHello +
                            R"(, "n": 1, "presence_penalty": 0, "frequency_penalty": 0.0,
                       "logit_bias": {}, "user": "u1", "logprobs": false, "tools": [],
                       "tool_choice": "none", "response_format": {"type": "text"}})"),
            "");
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"best_of", "2"}, {"echo", "true"}})
    EXPECT_THAT(request_refusal("{" + kHello + ", \"" + field + "\": " + value + "}"),
                StartsWith(field + ": is not served at "))
        << field;
}

TEST(OpenAiRequest, NChoicesAreServedUpToSixteen) {
  const std::string body = "{" + kHello + R"(, "n": 3})";
  EXPECT_EQ(parse_completion_request(body, RequestKind::chat).n, 3);
  EXPECT_EQ(parse_completion_request("{" + kHello + "}", RequestKind::chat).n, 1);
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "n": 17})"),
              StartsWith("n: must be in [1, 16], is 17"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "n": 0})"), StartsWith("n: must be in [1, 16]"));
  EXPECT_THAT(request_refusal(R"({"prompt": "x", "best_of": 3})", RequestKind::completion),
              StartsWith("best_of: is not served at 3"));
}

// OpenAI's shapes: chat's `logprobs: true` with `top_logprobs` in [0, 20], which needs it;
// the legacy completion's `logprobs: N` in [0, 20] (vLLM's bound; OpenAI's was 5).
TEST(OpenAiRequest, LogprobsTakeEachEndpointsShape) {
  EXPECT_EQ(chat("{" + kHello + "}").logprobs, -1);
  EXPECT_EQ(chat("{" + kHello + R"(, "logprobs": false})").logprobs, -1);
  EXPECT_EQ(chat("{" + kHello + R"(, "logprobs": true})").logprobs, 0);
  EXPECT_EQ(chat("{" + kHello + R"(, "logprobs": true, "top_logprobs": 20})").logprobs, 20);
  EXPECT_EQ(chat("{" + kHello + R"(, "logprobs": true, "top_logprobs": null})").logprobs, 0);
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "top_logprobs": 2})"),
              StartsWith("top_logprobs: needs logprobs: true"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "logprobs": true, "top_logprobs": 21})"),
              StartsWith("top_logprobs: "));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "logprobs": 3})"), StartsWith("logprobs: "));
  const auto completion = [](const std::string& rest) {
    return parse_completion_request(R"({"prompt": "x")" + rest + "}", RequestKind::completion);
  };
  EXPECT_EQ(completion("").logprobs, -1);
  EXPECT_EQ(completion(R"(, "logprobs": 0)").logprobs, 0);
  EXPECT_EQ(completion(R"(, "logprobs": 5)").logprobs, 5);
  EXPECT_THAT(request_refusal(R"({"prompt": "x", "logprobs": true})", RequestKind::completion),
              StartsWith("logprobs: "));
  EXPECT_THAT(request_refusal(R"({"prompt": "x", "top_logprobs": 2})", RequestKind::completion),
              StartsWith("top_logprobs: is not a field"));
  EXPECT_EQ(sampling_options(completion(R"(, "logprobs": 4)"), 8, 100, 1).logprobs, 4);
}

// response_format: text (the default), json_object and json_schema hold the answer to a
// grammar; a schema keyword that is not served is refused naming its place in the request;
// llama-server's `grammar` is GBNF, its errors located; both at once are refused.
TEST(OpenAiRequest, ResponseFormatAndGrammarBecomeTheAnswersGrammar) {
  EXPECT_EQ(chat("{" + kHello + "}").grammar, nullptr);
  EXPECT_EQ(chat("{" + kHello + R"(, "response_format": {"type": "text"}})").grammar, nullptr);
  const CompletionRequest r =
      chat("{" + kHello + R"(, "response_format": {"type": "json_object"}})");
  EXPECT_EQ(r.grammar, json_object_grammar());
  EXPECT_EQ(sampling_options(r, 8, 100, 1).grammar, json_object_grammar());
  const std::string schema =
      R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
         "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}})";
  const CompletionRequest s = chat("{" + kHello + schema);
  ASSERT_NE(s.grammar, nullptr);
  EXPECT_EQ(s.constraint, "json_schema");
  EXPECT_EQ(chat("{" + kHello + schema).grammar, s.grammar);  // one grammar per schema text
  GrammarState state(s.grammar);
  EXPECT_TRUE(state.feed(R"({"n": 12})") && state.finished());
  EXPECT_THAT(
      request_refusal("{" + kHello +
                      R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "p",
                 "schema": {"properties": {"a": {"items": [{"oneOf": []}]}}}}}})"),
      StartsWith("response_format.json_schema.schema.properties.a.items: items as a list"));
  EXPECT_THAT(
      request_refusal("{" + kHello +
                      R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "p",
                 "schema": {"anyOf": [{"type": "string"}, {"format": "email"}]}}}})"),
      StartsWith("response_format.json_schema.schema.anyOf[1].format: format `email`"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "response_format": {"type": "json_schema"}})"),
              StartsWith("response_format.json_schema: must be an object"));
  EXPECT_THAT(
      request_refusal(
          "{" + kHello +
          R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})"),
      StartsWith("response_format.json_schema.name: is missing"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "response_format": {"type": "xml"}})"),
              StartsWith("response_format.type: must be text, json_object or json_schema"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "response_format": "json"})"),
              StartsWith("response_format: must be an object"));
  const CompletionRequest g = chat("{" + kHello + R"(, "grammar": "root ::= [0-9]+"})");
  ASSERT_NE(g.grammar, nullptr);
  EXPECT_EQ(g.constraint, "grammar");
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "grammar": "root ::= x"})"),
              StartsWith("grammar: line 1, column 10: rule `x` is not defined"));
  EXPECT_THAT(request_refusal(
                  "{" + kHello +
                  R"(, "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})"),
              StartsWith("grammar: and response_format json_object cannot both"));
}

// chat_template_kwargs reach the template as they were sent; the request's own variables
// cannot be overridden through them.
TEST(OpenAiRequest, ChatTemplateKwargsAreTheTemplatesVariables) {
  const CompletionRequest r = chat(
      "{" + kHello + R"(, "chat_template_kwargs": {"enable_thinking": false, "x": [1, "a"]}})");
  EXPECT_EQ(r.template_kwargs.dump(), R"({"enable_thinking":false,"x":[1,"a"]})");
  EXPECT_TRUE(chat("{" + kHello + "}").template_kwargs.empty());
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "chat_template_kwargs": {"messages": []}})"),
              StartsWith("chat_template_kwargs.messages: "));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "chat_template_kwargs": true})"),
              StartsWith("chat_template_kwargs: must be an object"));
  EXPECT_THAT(
      request_refusal(R"({"prompt": "x", "chat_template_kwargs": {}})", RequestKind::completion),
      StartsWith("chat_template_kwargs: is not a field"));
}

// The sampler's parameters are served (core/sampling/): read into SamplingParams, and out of
// range refused naming the field by SamplingParams::validate().
TEST(OpenAiRequest, PenaltiesMinPAndLogitBiasAreServedAndCheckedByTheSampler) {
  const CompletionRequest r = parse_completion_request(
      "{" + kHello +
          R"(, "presence_penalty": 0.5, "frequency_penalty": -1, "repeat_penalty": 1.3,
              "min_p": 0.05, "logit_bias": {"5": 10, "17": -100}})",
      RequestKind::chat);
  EXPECT_DOUBLE_EQ(r.sampling.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(r.sampling.frequency_penalty, -1);
  EXPECT_DOUBLE_EQ(r.sampling.repetition_penalty, 1.3);
  EXPECT_DOUBLE_EQ(r.sampling.min_p, 0.05);
  auto bias = r.sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int64_t, double>>{{5, 10.0}, {17, -100.0}}));
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"presence_penalty", "2.5"},
                                                        {"frequency_penalty", "-3"},
                                                        {"repetition_penalty", "0"},
                                                        {"min_p", "1.5"},
                                                        {"logit_bias", R"({"5": 101})"},
                                                        {"logit_bias", R"([1, 2])"},
                                                        {"logit_bias.x", R"({"x": 1})"}}) {
    const std::string key = field.substr(0, field.find('.'));
    EXPECT_THAT(request_refusal("{" + kHello + ", \"" + key + "\": " + value + "}"),
                StartsWith(field))
        << field << " " << value;
  }
  // The vocabulary is the server's: an id past it is refused when the engine's options are made.
  const CompletionRequest far =
      parse_completion_request("{" + kHello + R"(, "logit_bias": {"900": 1}})", RequestKind::chat);
  EXPECT_NO_THROW(sampling_options(far, 8, 1000, 1));
  try {
    sampling_options(far, 8, 900, 1);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.message, StartsWith("logit_bias"));
  }
  const SamplingOptions o = sampling_options(r, 8, 1000, 77);
  EXPECT_EQ(o.seed, 77u);  // no seed in the request: the server's
  EXPECT_EQ(o.max_tokens, 8);
  EXPECT_DOUBLE_EQ(o.presence_penalty, 0.5);
}

TEST(OpenAiRequest, UnknownFieldsAreRefusedNotIgnored) {
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "temprature": 0.2})"),
              StartsWith("temprature: is not a field"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "stream": true, "stream_options": {"x": 1}})"),
              StartsWith("stream_options.x"));
}

TEST(OpenAiRequest, WrongTypesAndRangesNameTheField) {
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "max_tokens": "5"})"),
              StartsWith("max_tokens: must be an integer, is a string"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "max_tokens": 0})"),
              StartsWith("max_tokens: must be"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "temperature": 3})"), StartsWith("temperature"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "top_p": 0})"), StartsWith("top_p"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "stream": "yes"})"), StartsWith("stream: "));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "stop": ["a", "b", "c", "d", "e"]})"),
              StartsWith("stop: "));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "stream_options": {"include_usage": true}})"),
              StartsWith("stream_options: is only for stream: true"));
}

TEST(OpenAiRequest, MessagesAreCheckedOneByOne) {
  EXPECT_THAT(request_refusal("{}"), StartsWith("messages: is missing"));
  EXPECT_THAT(request_refusal(R"({"messages": {}})"),
              StartsWith("messages: must be a non-empty array"));
  EXPECT_THAT(request_refusal(R"({"messages": [{"role": "user", "content": "a"}, {"role": "robot",
                                        "content": "b"}]})"),
              StartsWith("messages[1].role: must be"));
  EXPECT_THAT(request_refusal(R"({"messages": [{"content": "a"}]})"),
              StartsWith("messages[0].role: is missing"));
  EXPECT_THAT(request_refusal(R"({"messages": [{"role": "user"}]})"),
              StartsWith("messages[0].content: is missing"));
  EXPECT_THAT(
      request_refusal(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
      StartsWith("messages[0].content[0]: only text parts"));
  EXPECT_THAT(request_refusal(R"({"messages": [{"role": "user", "content": "",
                                        "tool_calls": []}]})"),
              StartsWith("messages[0].tool_calls: is not served"));
  EXPECT_THAT(request_refusal(R"({"messages": [{"role": "assistant", "content": null,
                                        "tool_calls": [{"type": "function", "function": {}}]}]})"),
              StartsWith("messages[0].tool_calls[0].function.name: must be a string"));
}

// Tools as OpenAI sends them: function tools given to the template, a tool-using history (an
// assistant's tool_calls with null content, tool results) carried per message; tool_choice
// auto, none, required and a named function served, the schemas a forced call needs checked
// here (a keyword not served refused at its place), parallel_tool_calls false only where the
// grammar holds the answer to one call.
TEST(OpenAiRequest, ToolsAndAToolHistoryAreServed) {
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
          "strict": true}}])";
  const std::string history = R"("messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "21 C"}])";
  const CompletionRequest r = chat("{" + history + ", " + tools + "}");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1], (std::pair<std::string, std::string>{"assistant", ""}));
  EXPECT_EQ(r.messages[2], (std::pair<std::string, std::string>{"tool", "21 C"}));
  ASSERT_EQ(r.message_fields.size(), 3u);
  EXPECT_TRUE(r.message_fields[0].empty());
  EXPECT_EQ(r.message_fields[1]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.message_fields[2]["tool_call_id"], "call_1");
  EXPECT_EQ(chat("{" + history + ", " + tools + R"(, "tool_choice": "auto",
                 "parallel_tool_calls": true})")
                .tools.size(),
            1u);
  EXPECT_TRUE(chat("{" + history + ", " + tools + R"(, "tool_choice": "none"})").tools.empty());
  const CompletionRequest required =
      chat("{" + kHello + ", " + tools + R"(, "tool_choice": "required"})");
  EXPECT_EQ(required.tool_choice, ToolChoice::required);
  EXPECT_TRUE(required.parallel_tool_calls);
  const CompletionRequest named =
      chat("{" + kHello + ", " + tools + R"(, "parallel_tool_calls": false,
           "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})");
  EXPECT_EQ(named.tool_choice, ToolChoice::function);
  EXPECT_EQ(named.tool_name, "get_weather");
  EXPECT_FALSE(named.parallel_tool_calls);
  EXPECT_THAT(
      request_refusal("{" + kHello + ", " + tools +
                      R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})"),
      StartsWith("tool_choice.function.name: no tool is named \"f\""));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "tool_choice": "required"})"),
              StartsWith("tool_choice: asks for a call, but the request has no tools"));
  EXPECT_THAT(request_refusal("{" + kHello + ", " + tools + R"(, "tool_choice": "sometimes"})"),
              StartsWith("tool_choice: must be auto, none, required or"));
  EXPECT_THAT(request_refusal("{" + kHello + ", " + tools + R"(, "parallel_tool_calls": false})"),
              StartsWith("parallel_tool_calls: false is served with tool_choice required"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "tool_choice": "required", "tools": [{"type":
                      "function", "function": {"name": "f", "parameters": {"type": "object",
                      "properties": {"n": {"type": "integer", "maximum": 3}}}}}]})"),
              StartsWith("tools[0].function.parameters.properties.n.maximum: keyword `maximum`"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "tools": [{"type": "code_interpreter"}]})"),
              StartsWith("tools[0].type: must be function"));
  EXPECT_THAT(request_refusal("{" + kHello + R"(, "tools": [{"type": "function", "function":
                      {"name": "f", "parameters": "x"}}]})"),
              StartsWith("tools[0].function.parameters: must be a JSON schema object"));
  EXPECT_THAT(request_refusal(R"({"prompt": "x", "tools": []})", RequestKind::completion),
              StartsWith("tools: is not a field"));
}

TEST(OpenAiRequest, MalformedBodiesAreBadRequestsNotExceptionsOfJson) {
  EXPECT_THAT(request_refusal("{\"messages\": [}"), StartsWith("body: is not valid JSON"));
  EXPECT_THAT(request_refusal("[1, 2]"), StartsWith("body: must be a JSON object, is an array"));
  EXPECT_THAT(request_refusal(""), StartsWith("body: is not valid JSON"));
  // A number beyond a double is json's out_of_range, not its parse_error (found by fuzzing).
  EXPECT_THAT(request_refusal(R"({"messages": 55e55555})"), StartsWith("body: is not valid JSON"));
  // Bytes that are not UTF-8 are refused at the field they are in.
  EXPECT_THAT(request_refusal(std::string("{\"messages\": \"\xff\"}")),
              StartsWith("messages: is not valid UTF-8 (byte 14 of the body"));
  EXPECT_THAT(request_refusal(std::string("{") + kHello + ", \"stop\": [\"a\", \"\xc0\xaf\"]}"),
              StartsWith("stop[1]: is not valid UTF-8"));
  EXPECT_THAT(request_refusal(std::string("\xef\xbb\xbf{}\xff")),
              StartsWith("body: is not valid UTF-8"));
}

}  // namespace
}  // namespace sy
