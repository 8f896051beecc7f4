// gpt-oss's harmony output read into its messages: channels, recipients, the answer from
// `final`, and markers recognised by token id only. The transcripts are written by hand in the
// format OpenAI's harmony documentation gives; the tokenizer is the o200k-style fixture with
// gpt-oss's harmony control tokens added, the template gpt-oss-120b's own.
#include "core/generation/harmony.hpp"

#include "core/generation/reasoning.hpp"
#include "core/generation/tool_calls.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;

using test::kFixturesDir;

// The o200k-style tokenizer with gpt-oss's control tokens (ids past its vocabulary).
Tokenizer harmony_tokenizer() {
  json doc = json::parse(test::file_contents(kFixturesDir / "tokenizer/o200k_style.json"));
  int64_t id = 1000;
  for (const char* t : {"<|return|>", "<|constrain|>", "<|channel|>", "<|message|>", "<|call|>"})
    doc["added_tokens"].push_back({{"id", id++},
                                   {"content", t},
                                   {"single_word", false},
                                   {"lstrip", false},
                                   {"rstrip", false},
                                   {"normalized", false},
                                   {"special", true}});
  return Tokenizer::from_document(doc, "o200k_style.json + harmony");
}

GenerationSettings gpt_oss_settings(const Tokenizer& tok) {
  GenerationSettings g;
  g.chat_template = test::file_contents(kFixturesDir / "chat_templates/gpt-oss-120b.jinja");
  g.eos_ids = {*tok.token_id("<|return|>"), *tok.token_id("<|call|>")};
  return g;
}

// Runs `generated` (the text after the prompt's "<|start|>assistant") through the stop rule
// and the reader, token by token, as run --chat does; returns the streamed text per channel.
struct HarmonyRead {
  std::vector<HarmonyMessage> messages;
  std::string answer, reasoning, streamed_final, streamed_other;
};
HarmonyRead run(const std::string& generated, std::span<const TextSpan> text_only = {}) {
  const Tokenizer tok = harmony_tokenizer();
  const GenerationSettings g = gpt_oss_settings(tok);
  auto markers = harmony_markers(tok, g);
  EXPECT_TRUE(markers);
  HarmonyRead r;
  HarmonyReader reader(*markers, [&](const std::string& channel, const std::string& text) {
    (channel == "final" ? r.streamed_final : r.streamed_other) += text;
  });
  StopRule stop(g.eos_ids, {});
  for (int64_t id : tok.encode(generated, text_only)) {
    std::string emit;
    const bool eos = stop.feed(id, tok.decode_token(id), emit) != StopRule::Reason::none;
    reader.feed(id, emit);
    if (eos) break;
  }
  reader.feed(-1, stop.flush());
  reader.finish();
  r.messages = reader.messages();
  r.answer = reader.answer();
  r.reasoning = reader.reasoning();
  return r;
}

TEST(Harmony, OnlyAModelWithTheTokensAndATemplateThatWritesChannelsSpeaksIt) {
  const Tokenizer tok = harmony_tokenizer();
  GenerationSettings g = gpt_oss_settings(tok);
  auto m = harmony_markers(tok, g);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->channel, *tok.token_id("<|channel|>"));
  EXPECT_EQ(m->start, 670);
  g.chat_template = test::file_contents(kFixturesDir / "chat_templates/qwen3-0.6b.jinja");
  EXPECT_FALSE(harmony_markers(tok, g));
  g.chat_template.reset();
  EXPECT_FALSE(harmony_markers(tok, g));
  const Tokenizer plain = Tokenizer::load((kFixturesDir / "tokenizer/o200k_style.json").string());
  EXPECT_FALSE(harmony_markers(plain, gpt_oss_settings(tok)));
}

TEST(Harmony, TheAnswerIsTheFinalChannelAndTheAnalysisIsKeptApart) {
  HarmonyRead r =
      run("<|channel|>analysis<|message|>User asks 2+2. Simple: 4.<|end|>"
          "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "assistant");
  EXPECT_EQ(r.messages[0].channel, "analysis");
  EXPECT_EQ(r.messages[0].content, "User asks 2+2. Simple: 4.");
  EXPECT_TRUE(r.messages[0].complete);
  EXPECT_EQ(r.messages[1].channel, "final");
  EXPECT_EQ(r.messages[1].content, "2 + 2 = 4.");
  EXPECT_TRUE(r.messages[1].complete);  // <|return|>, an EOS id, closes it
  EXPECT_EQ(r.answer, "2 + 2 = 4.");
  EXPECT_EQ(r.reasoning, "User asks 2+2. Simple: 4.");
  EXPECT_EQ(r.streamed_final, r.answer);
  EXPECT_EQ(r.streamed_other, r.reasoning);
}

TEST(Harmony, AToolCallNamesItsRecipientAndContentType) {
  HarmonyRead r =
      run("<|channel|>analysis<|message|>Need weather.<|end|>"
          "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
          "<|message|>{\"city\": \"Paris\"}<|call|>");
  ASSERT_EQ(r.messages.size(), 2u);
  const HarmonyMessage& call = r.messages[1];
  EXPECT_EQ(call.channel, "commentary");
  EXPECT_EQ(call.recipient, "functions.get_weather");
  EXPECT_EQ(call.content_type, "json");
  EXPECT_EQ(call.content, "{\"city\": \"Paris\"}");
  EXPECT_TRUE(call.complete);
  EXPECT_EQ(r.answer, "");  // no final message: nothing for the user yet
  // The recipient may also stand in the role header.
  HarmonyRead h =
      run("<|start|>assistant to=functions.lookup<|channel|>commentary<|message|>{}<|call|>");
  ASSERT_EQ(h.messages.size(), 2u);
  EXPECT_EQ(h.messages[1].recipient, "functions.lookup");
  EXPECT_EQ(h.messages[1].channel, "commentary");
}

TEST(Harmony, MarkersAreTokensNotText) {
  // The final answer quotes "<|channel|>" as text (its bytes, not the control token).
  const std::string gen = "<|channel|>final<|message|>write <|channel|> here<|return|>";
  const size_t quoted = gen.find("write ");
  const TextSpan span{quoted, std::string("write <|channel|> here").size()};
  HarmonyRead r = run(gen, std::span<const TextSpan>(&span, 1));
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.answer, "write <|channel|> here");
}

TEST(Harmony, PlainTextWithoutTheFormatIsTheAnswer) {
  HarmonyRead r = run("Just an answer, no channels.");
  EXPECT_EQ(r.answer, "Just an answer, no channels.");
  EXPECT_EQ(r.streamed_final + r.streamed_other, r.answer);
  // Cut off inside the analysis (max tokens): no answer, the reasoning so far.
  HarmonyRead cut = run("<|channel|>analysis<|message|>Thinking about");
  EXPECT_EQ(cut.answer, "");
  EXPECT_EQ(cut.reasoning, "Thinking about");
  EXPECT_FALSE(cut.messages.back().complete);
}

// The split a served chat of gpt-oss takes: a message to functions.NAME is a tool call, given
// whole when its <|call|> comes, never content; analysis is reasoning; a call cut before its
// end is content (shown, not dropped). The format is harmony's for tools too.
TEST(Harmony, MessagesToAFunctionAreToolCallsNotContent) {
  const Tokenizer tok = harmony_tokenizer();
  const GenerationSettings g = gpt_oss_settings(tok);
  EXPECT_EQ(tool_format(g), ToolFormat::harmony);
  auto split_of = [&](const std::string& generated) {
    auto split = reasoning_split_for(tok, g, "<|start|>assistant");
    EXPECT_NE(split, nullptr);
    ReasoningSplit::Parts parts;
    for (int64_t id : tok.encode(generated)) split->feed(id, tok.decode_token(id), parts);
    split->finish(parts);
    return parts;
  };
  const ReasoningSplit::Parts called = split_of(
      "<|channel|>analysis<|message|>Need weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"city\": \"Paris\"}<|call|>");
  EXPECT_EQ(called.reasoning, "Need weather.");
  EXPECT_EQ(called.content, "");
  ASSERT_EQ(called.calls.size(), 1u);
  EXPECT_EQ(called.calls[0].first, "get_weather");
  EXPECT_EQ(called.calls[0].second, "{\"city\": \"Paris\"}");
  const ReasoningSplit::Parts cut =
      split_of("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"ci");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "{\"ci");
  // The reader gives harmony's calls their ids, and passes text through.
  ToolCallReader reader(ToolFormat::harmony, 3);
  std::string content;
  std::vector<ToolCall> calls;
  reader.feed("plain", content, calls);
  reader.add("get_weather", "{}", calls);
  reader.finish(content, calls);
  EXPECT_EQ(content, "plain");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_TRUE(calls[0].id.starts_with("call_"));
}

// A forced call on gpt-oss: harmony's documented form (the recipient on the commentary channel),
// after an analysis or not, is a sentence of the call grammar; a final answer is not. The
// markers the grammar may take as tokens are harmony's control tokens.
TEST(Harmony, AForcedCallIsHarmonysDocumentedForm) {
  const Tokenizer tok = harmony_tokenizer();
  const GenerationSettings g = gpt_oss_settings(tok);
  const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "parameters": {"type": "object", "properties": {"city":
      {"type": "string"}}, "required": ["city"]}}}])");
  auto grammar = tool_call_grammar(ToolFormat::harmony, tools, "", true,
                                   think_lead_for(g, "<|start|>assistant"));
  auto takes = [&](const std::string& text) {
    GrammarState state(grammar);
    return state.feed(text) && state.accepting();
  };
  const std::string call =
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"city\": \"Paris\"}";
  EXPECT_TRUE(takes(call));
  EXPECT_TRUE(takes("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant" + call));
  EXPECT_FALSE(takes("<|channel|>final<|message|>It is sunny."));
  EXPECT_FALSE(takes(call + "<|end|>"));  // its end is <|call|>, an end of sequence
  // The same text through the reader is the call.
  HarmonyRead r = run("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant" +
                      call + "<|call|>");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].recipient, "functions.get_weather");
  const std::vector<int64_t> markers = tool_call_markers(ToolFormat::harmony, tok);
  for (const char* m : {"<|channel|>", "<|message|>", "<|constrain|>"})
    EXPECT_NE(std::find(markers.begin(), markers.end(), *tok.token_id(m)), markers.end()) << m;
}

}  // namespace
}  // namespace sy
