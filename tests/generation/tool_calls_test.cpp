// Tool calls (core/generation/tool_calls.hpp): Hermes <tool_call> blocks read back the same
// whether the text comes whole or a byte at a time; what is not a call stays text; and a
// conversation with tools, an assistant's tool_calls and a tool result renders through
// render_chat as transformers renders it (tests/fixtures/chat_templates/renderings.json, made by
// make_renderings.py) — the path serve takes for a request with tools.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/generation/tool_calls.hpp"
#include "support/rendering_time.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;

struct ToolCallRead {
  std::string content;
  std::vector<ToolCall> calls;
};

ToolCallRead read_in_pieces(const std::string& text, size_t piece,
                            ToolFormat format = ToolFormat::hermes) {
  ToolCallReader reader(format, 42);
  ToolCallRead out;
  for (size_t at = 0; at < text.size(); at += piece)
    reader.feed(text.substr(at, piece), out.content, out.calls);
  reader.finish(out.content, out.calls);
  return out;
}

TEST(ToolCalls, HermesBlocksReadTheSameWholeOrByteByByte) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
      "\"{\\\"tz\\\": \\\"CET\\\"}\"}\n</tool_call>";
  for (size_t piece : {size_t(1), size_t(2), size_t(5), size_t(1000)}) {
    const ToolCallRead r = read_in_pieces(text, piece);
    ASSERT_EQ(r.calls.size(), 2u) << piece;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Paris"}}));
    EXPECT_EQ(r.calls[1].name, "get_time");
    EXPECT_EQ(r.calls[1].arguments, "{\"tz\": \"CET\"}");  // a string argument, as written
    EXPECT_EQ(r.content, "Let me check.\n\n") << piece;
  }
  const ToolCallRead r = read_in_pieces(text, 1000);
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
  for (const ToolCall& c : r.calls) {
    EXPECT_EQ(c.id.rfind("call_", 0), 0u);
    EXPECT_EQ(c.id.size(), 5u + 24u);
  }
}

TEST(ToolCalls, WhatIsNotACallStaysText) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"no calls at all", "no calls at all"},
      {"<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>"},
      {"<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>"},
      {"<tool_call>[1, 2]</tool_call>x", "<tool_call>[1, 2]</tool_call>x"},
      {"cut <tool_call>{\"name\": \"f\", \"argu", "cut <tool_call>{\"name\": \"f\", \"argu"},
      {"a <tool_c", "a <tool_c"},
      {"</tool_call> stray", "</tool_call> stray"},
  };
  for (const auto& [text, content] : cases)
    for (size_t piece : {size_t(1), size_t(3), size_t(1000)}) {
      const ToolCallRead r = read_in_pieces(text, piece);
      EXPECT_TRUE(r.calls.empty()) << text;
      EXPECT_EQ(r.content, content) << text << " in pieces of " << piece;
    }
  const ToolCallRead bare = read_in_pieces("<tool_call>{\"name\": \"ping\"}</tool_call>", 1);
  ASSERT_EQ(bare.calls.size(), 1u);
  EXPECT_EQ(bare.calls[0].arguments, "{}");
}

// Llama 3.x: the whole answer is one {"name", "parameters"} object (after <|python_tag|> or
// not), read when it ends; any other answer streams as text from its first piece.
TEST(ToolCalls, Llama3JsonAnswersReadTheSameWholeOrByteByByte) {
  const std::string call = R"({"name": "get_weather", "parameters": {"city": "Paris"}})";
  for (const std::string& text :
       {call, " \n" + call, "<|python_tag|>" + call,
        std::string(R"({"name": "get_weather", "arguments": {"city": "Paris"}})")})
    for (size_t piece : {size_t(1), size_t(2), size_t(7), size_t(1000)}) {
      const ToolCallRead r = read_in_pieces(text, piece, ToolFormat::llama3_json);
      ASSERT_EQ(r.calls.size(), 1u) << text << " in pieces of " << piece;
      EXPECT_EQ(r.calls[0].name, "get_weather");
      EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Paris"}}));
      EXPECT_EQ(r.content, "") << text;
    }
  for (const std::string& text :
       {std::string("The weather is fine."), std::string(R"({"answer": 42})"), call + "; " + call,
        std::string(R"({"name": "f", "parameters": )"), std::string("<|pyt")})
    for (size_t piece : {size_t(1), size_t(3), size_t(1000)}) {
      const ToolCallRead r = read_in_pieces(text, piece, ToolFormat::llama3_json);
      EXPECT_TRUE(r.calls.empty()) << text;
      EXPECT_EQ(r.content, text) << text << " in pieces of " << piece;
    }
  // Text streams at once: the first piece that is not blank decides.
  ToolCallReader reader(ToolFormat::llama3_json, 1);
  std::string content;
  std::vector<ToolCall> calls;
  reader.feed(" The", content, calls);
  EXPECT_EQ(content, " The");
  reader.feed("{", content, calls);
  EXPECT_EQ(content, " The{");
}

// Mistral's two forms: text before [TOOL_CALLS] streams, the calls are read when the answer
// ends (every one well formed, or all of it is content), and their ids are 9 alphanumerics.
TEST(ToolCalls, MistralCallsReadTheSameWholeOrByteByByte) {
  const std::string nemo =
      R"(Checking. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": )"
      R"("a1B2c3D4e"}, {"name": "add", "arguments": {"a": 1, "b": 2}}])";
  const std::string v11 =
      R"(Checking. [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]add[CALL_ID]x1y2z3w4v)"
      R"([ARGS]{"a": 1, "b": 2})";
  for (const auto& [text, format] :
       {std::pair{nemo, ToolFormat::mistral_json}, std::pair{v11, ToolFormat::mistral_args}})
    for (size_t piece : {size_t(1), size_t(4), size_t(1000)}) {
      const ToolCallRead r = read_in_pieces(text, piece, format);
      ASSERT_EQ(r.calls.size(), 2u) << text << " in pieces of " << piece;
      EXPECT_EQ(r.calls[0].name, "get_weather");
      EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Paris"}}));
      EXPECT_EQ(r.calls[1].name, "add");
      EXPECT_EQ(json::parse(r.calls[1].arguments), json({{"a", 1}, {"b", 2}}));
      EXPECT_EQ(r.content, "Checking. ");
      for (const ToolCall& c : r.calls) {
        EXPECT_EQ(c.id.size(), 9u);
        EXPECT_EQ(c.id.find_first_not_of(
                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
                  std::string::npos);
      }
    }
  for (const auto& [text, format] :
       {std::pair{std::string("[TOOL_CALLS][{\"name\": 3}]"), ToolFormat::mistral_json},
        std::pair{std::string("[TOOL_CALLS][{\"name\": \"f\""), ToolFormat::mistral_json},
        std::pair{std::string("[TOOL_CALLS]f[ARGS]not json"), ToolFormat::mistral_args},
        std::pair{std::string("plain [TOOL_CA"), ToolFormat::mistral_args}})
    for (size_t piece : {size_t(1), size_t(1000)}) {
      const ToolCallRead r = read_in_pieces(text, piece, format);
      EXPECT_TRUE(r.calls.empty()) << text;
      EXPECT_EQ(r.content, text) << text;
    }
  // v11's calls are read up to the one that is not well formed (max_tokens cut it).
  const ToolCallRead cut = read_in_pieces(R"([TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{"b": )",
                                          1, ToolFormat::mistral_args);
  ASSERT_EQ(cut.calls.size(), 1u);
  EXPECT_EQ(cut.calls[0].name, "f");
  EXPECT_EQ(cut.content, R"([TOOL_CALLS]g[ARGS]{"b": )");
}

const std::string kTemplates = std::string(SY_TEST_FIXTURES_DIR) + "/chat_templates/";

TEST(ToolCalls, FormatsAreKnownByTheTemplate) {
  GenerationSettings g;
  for (const auto& [file, format, renders] : std::vector<std::tuple<std::string, ToolFormat, bool>>{
           {"qwen3-0.6b.jinja", ToolFormat::hermes, true},
           {"qwen2.5-7b-instruct.jinja", ToolFormat::hermes, true},
           {"llama-3.1-8b-instruct.jinja", ToolFormat::llama3_json, true},
           {"llama-3.2-3b-instruct.jinja", ToolFormat::llama3_json, true},
           {"mistral-nemo-instruct-2407.jinja", ToolFormat::mistral_json, true},
           {"mistral-small-3.2-24b-instruct-2506.jinja", ToolFormat::mistral_args, true},
           {"gpt-oss-120b.jinja", ToolFormat::harmony, true},
           {"smollm2-135m-instruct.jinja", ToolFormat::none, false}}) {
    g.chat_template = test::file_contents(kTemplates + file);
    ASSERT_FALSE(g.chat_template->empty()) << file;
    EXPECT_EQ(tool_format(g), format) << file;
    EXPECT_EQ(template_renders_tools(g), renders) << file;
  }
}

TEST(ToolCalls, AToolConversationRendersAsTransformersRendersIt) {
  // Ordered: the tools' keys must reach the template in the order the client wrote them.
  const nlohmann::ordered_json fixtures =
      nlohmann::ordered_json::parse(test::file_contents(kTemplates + "renderings.json"));
  int checked = 0;
  for (const nlohmann::ordered_json& t : fixtures["templates"]) {
    const std::string file = t["file"];
    GenerationSettings g;
    g.chat_template = test::file_contents(kTemplates + file);
    if (tool_format(g) == ToolFormat::none) continue;
    g.chat_template_origin = file;
    g.special_tokens = t["special_tokens"];
    for (const nlohmann::ordered_json& c : t["cases"]) {
      if (c["name"] != "tool_turn") continue;
      ChatMessages messages;
      std::vector<nlohmann::ordered_json> fields;
      for (const nlohmann::ordered_json& m : c["messages"]) {
        messages.emplace_back(m["role"], m["content"]);
        nlohmann::ordered_json extra = nlohmann::ordered_json::object();
        for (const auto& [key, value] : m.items())
          if (key != "role" && key != "content") extra[key] = value;
        // As an OpenAI client sends them: arguments as JSON text. The Hermes templates print
        // text as it is; for Llama's, prepare_tool_history makes the object back.
        if (!file.starts_with("qwen") && extra.contains("tool_calls"))
          for (auto& call : extra["tool_calls"])
            call["function"]["arguments"] = call["function"]["arguments"].dump();
        fields.push_back(extra);
      }
      prepare_tool_history(tool_format(g), fields);
      nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
      kwargs["tools"] = c["tools"];
      EXPECT_EQ(render_chat(g, messages, c["add_generation_prompt"], test::rendering_time(), kwargs,
                            &fields),
                c["output"].get<std::string>())
          << file;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7);
}

// A forced call's grammar takes the call exactly as the template writes it (the assistant turn
// of transformers' rendering), and nothing but one call.
TEST(ToolCalls, TheForcedCallGrammarTakesTheCallTheTemplateWrites) {
  const nlohmann::ordered_json fixtures =
      nlohmann::ordered_json::parse(test::file_contents(kTemplates + "renderings.json"));
  int checked = 0;
  for (const nlohmann::ordered_json& t : fixtures["templates"]) {
    const std::string file = t["file"];
    GenerationSettings g;
    g.chat_template = test::file_contents(kTemplates + file);
    const ToolFormat format = tool_format(g);
    // Harmony's history puts the recipient in the role header; its model writes it on the channel
    // (HarmonyToolCalls.AForcedCallIsHarmonysDocumentedForm).
    if (format == ToolFormat::none || format == ToolFormat::harmony) continue;
    for (const nlohmann::ordered_json& c : t["cases"]) {
      if (c["name"] != "tool_turn") continue;
      const std::string out = c["output"];
      // The assistant's call (the system prompt describes the format too): from its opening,
      // naming the fixture's function, to the end of its block (the turn's end token).
      const std::string head = R"({"name": "get_weather")";
      std::string open = head, close = "<|eot_id|>";
      if (format == ToolFormat::hermes) open = "<tool_call>\n" + head, close = "</tool_call>";
      if (format == ToolFormat::mistral_json) open = "[TOOL_CALLS][" + head, close = "</s>";
      if (format == ToolFormat::mistral_args) open = "[TOOL_CALLS]get_weather", close = "</s>";
      const size_t from = out.find(open);
      ASSERT_NE(from, std::string::npos) << file;
      size_t to = out.find(close, from);
      if (format == ToolFormat::hermes) to += close.size();
      const std::string written = out.substr(from, to - from);
      auto grammar = tool_call_grammar(format, c["tools"], "", true);
      GrammarState state(grammar);
      EXPECT_TRUE(state.feed(written) && state.accepting()) << file << ": " << written;
      // Several calls where the template writes several: Hermes blocks on their own lines,
      // v11's one after another; Llama's templates take one a turn.
      if (format != ToolFormat::mistral_json) {
        const std::string two = written + (format == ToolFormat::hermes ? "\n" : "") + written;
        GrammarState twice(grammar);
        EXPECT_EQ(twice.feed(two) && twice.accepting(), format != ToolFormat::llama3_json) << file;
      }
      GrammarState one_only(tool_call_grammar(format, c["tools"], "get_weather", true));
      EXPECT_TRUE(one_only.feed(written) && one_only.accepting()) << file;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6);
}

// A forced call on a <think> template: the thought may come first where the prompt lets the
// model think (optional), must be closed first where the prompt opened it (inside), and is not
// there where the prompt closed an empty block (none) — read from Qwen3's own renderings.
TEST(ToolCalls, AForcedCallMayFollowAThought) {
  GenerationSettings g;
  g.chat_template = test::file_contents(kTemplates + "qwen3-0.6b.jinja");
  const nlohmann::ordered_json fixtures =
      nlohmann::ordered_json::parse(test::file_contents(kTemplates + "renderings.json"));
  nlohmann::ordered_json tools;
  std::string thinking_prompt, no_thinking_prompt;
  for (const auto& t : fixtures["templates"])
    if (t["file"] == "qwen3-0.6b.jinja")
      for (const auto& c : t["cases"]) {
        if (c["name"] == "tool_turn") tools = c["tools"];
        if (c["name"] == "user") thinking_prompt = c["output"];
        if (c["name"] == "no_thinking") no_thinking_prompt = c["output"];
      }
  ASSERT_FALSE(thinking_prompt.empty() || no_thinking_prompt.empty() || tools.is_null());
  EXPECT_EQ(think_lead_for(g, thinking_prompt), ThinkLead::optional);
  EXPECT_EQ(think_lead_for(g, no_thinking_prompt), ThinkLead::none);
  EXPECT_EQ(think_lead_for(g, thinking_prompt + "<think>\n"), ThinkLead::inside);
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const std::string thought = "<think>\nThe user wants the weather: <b>call</b> it.\n</think>\n\n";
  auto takes = [&](ThinkLead lead, const std::string& text) {
    GrammarState state(tool_call_grammar(ToolFormat::hermes, tools, "", true, lead));
    return state.feed(text) && state.accepting();
  };
  EXPECT_TRUE(takes(ThinkLead::optional, thought + call));
  EXPECT_TRUE(takes(ThinkLead::optional, call));
  EXPECT_FALSE(takes(ThinkLead::optional, thought));  // a thought alone is not a call
  EXPECT_TRUE(takes(ThinkLead::inside, thought.substr(std::string("<think>").size()) + call));
  EXPECT_FALSE(takes(ThinkLead::inside, call));
  EXPECT_FALSE(takes(ThinkLead::none, thought + call));
  EXPECT_TRUE(takes(ThinkLead::none, call));
  GenerationSettings plain;
  plain.chat_template = test::file_contents(kTemplates + "smollm2-135m-instruct.jinja");
  EXPECT_EQ(think_lead_for(plain, thinking_prompt), ThinkLead::none);
}

}  // namespace
}  // namespace sy
