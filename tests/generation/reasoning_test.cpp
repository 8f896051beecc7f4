// The reasoning split (core/generation/reasoning.hpp): <think>…</think> text cut into reasoning
// and content the same way whether it arrives whole or a byte at a time (tags split across
// tokens), for prompts that leave the tag open or not; and which models get a split, by their
// real templates (tests/fixtures/chat_templates: Qwen3's and SmolLM3's mark it, SmolLM2's not).
#include <gtest/gtest.h>

#include "core/generation/reasoning.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using Parts = ReasoningSplit::Parts;

Parts split_in_pieces(const std::string& text, bool inside, size_t piece) {
  auto split = think_split(inside);
  Parts out;
  for (size_t at = 0; at < text.size(); at += piece) split->feed(0, text.substr(at, piece), out);
  split->finish(out);
  return out;
}

struct ReasoningCase {
  std::string text;
  bool inside;
  std::string reasoning, content;
};

TEST(Reasoning, ThinkTagsSplitTheSameWholeOrByteByByte) {
  const std::vector<ReasoningCase> cases{
      {"<think>\nGreet them.\n</think>\n\nHello!", false, "\nGreet them.\n", "Hello!"},
      {"\n<think>a</think>b", false, "a", "b"},  // blanks before the tag
      {"Greet them.\n</think>\n\nHello!", true, "Greet them.\n", "Hello!"},
      {"Hello <think>not a thought</think>", false, "", "Hello <think>not a thought</think>"},
      {"<think>cut off by max_tokens", false, "cut off by max_tokens", ""},
      {"</thi", true, "</thi", ""},  // a tag never finished is text
      {"<thinking>", false, "", "<thinking>"},
      {"", false, "", ""},
      {"  \n", false, "", "  \n"},
      {"<think></think>", false, "", ""},
  };
  for (const ReasoningCase& c : cases)
    for (size_t piece : {size_t(1), size_t(2), size_t(3), size_t(1000)}) {
      const Parts p = split_in_pieces(c.text, c.inside, piece);
      EXPECT_EQ(p.reasoning, c.reasoning) << "'" << c.text << "' in pieces of " << piece;
      EXPECT_EQ(p.content, c.content) << "'" << c.text << "' in pieces of " << piece;
    }
}

TEST(Reasoning, TextThatMayBeATagIsHeldBackUntilItIsNot) {
  auto split = think_split(true);
  Parts out;
  split->feed(0, "thought </th", out);
  EXPECT_EQ(out.reasoning, "thought ");  // "</th" may be the closing tag
  split->feed(0, "ree", out);
  EXPECT_EQ(out.reasoning, "thought </three");
  split->feed(0, "</think>Hi", out);
  EXPECT_EQ(out.content, "Hi");
}

std::string chat_template_fixture(const std::string& name) {
  return test::file_contents(std::string(SY_TEST_FIXTURES_DIR) + "/chat_templates/" + name);
}

TEST(Reasoning, ModelsWhoseTemplatesMarkThinkingGetTheSplit) {
  // A byte-level vocabulary without harmony's markers.
  const Tokenizer tok = Tokenizer::parse(
      R"({"version": "1.0", "added_tokens": [], "normalizer": null,
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
          "post_processor": null, "decoder": {"type": "ByteLevel"},
          "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})",
      "tiny.json");
  GenerationSettings g;
  g.chat_template = chat_template_fixture("qwen3-0.6b.jinja");
  ASSERT_FALSE(g.chat_template->empty());
  EXPECT_NE(reasoning_split_for(tok, g, "<|im_start|>assistant\n"), nullptr);
  g.chat_template = chat_template_fixture("smollm3-3b.jinja");
  EXPECT_NE(reasoning_split_for(tok, g, "<|im_start|>assistant\n"), nullptr);
  g.chat_template = chat_template_fixture("smollm2-135m-instruct.jinja");
  EXPECT_EQ(reasoning_split_for(tok, g, "<|im_start|>assistant\n"), nullptr);
  g.chat_template.reset();
  EXPECT_EQ(reasoning_split_for(tok, g, ""), nullptr);
  // Where the prompt ends inside an opened tag, the answer starts as reasoning.
  g.chat_template = chat_template_fixture("qwen3-0.6b.jinja");
  Parts open, closed;
  auto a = reasoning_split_for(tok, g, "<|im_start|>assistant\n<think>\n");
  a->feed(0, "x</think>y", open);
  a->finish(open);
  EXPECT_EQ(open.reasoning, "x");
  EXPECT_EQ(open.content, "y");
  auto b = reasoning_split_for(tok, g, "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  b->feed(0, "x</think>y", closed);
  b->finish(closed);
  EXPECT_EQ(closed.content, "x</think>y");
}

}  // namespace
}  // namespace sy
