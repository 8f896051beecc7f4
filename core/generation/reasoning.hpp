// A chat answer split, as it streams, into what the user is shown (`content`) and the model's
// reasoning (`reasoning`), where the model's own chat template marks them:
//   - harmony (gpt-oss, harmony.hpp): the `analysis` channel is reasoning; `final` and
//     `commentary` (tool preambles) are content; a message to `functions.NAME` is a tool call,
//     given whole (`calls`) when its <|call|> (or <|end|>) comes, never as content;
//   - <think>…</think> (Qwen3, SmolLM3, DeepSeek-R1 and the templates like them: the template's
//     source writes "</think>"): the text between the tags is reasoning, what follows the
//     closing tag (after its blank lines) is content. When the rendered prompt already ends
//     inside an opened <think> (templates that open it in the generation prompt), the answer
//     starts as reasoning. A closing tag never generated leaves everything as reasoning (a
//     thought cut off by max_tokens), an opening tag not at the start is content.
// The tags are matched in the text, so a tag split across tokens, or held back by the stop
// rule, is still found; text that may be the start of a tag is held back until it is not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/generation/generation.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy {

class ReasoningSplit {
 public:
  struct Parts {
    std::string content, reasoning;
    // Tool calls the format marks by itself (harmony's recipients): function name, arguments.
    std::vector<std::pair<std::string, std::string>> calls;
  };
  virtual ~ReasoningSplit() = default;
  // One generated token and the text the stop rule emitted with it; id -1 for text flushed at
  // the end. Appends what can be shown now to `out`.
  virtual void feed(int64_t id, const std::string& text, Parts& out) = 0;
  // After the last token: whatever was held back.
  virtual void finish(Parts& out) = 0;
};

// The split of a chat of this model, or null when its template marks no reasoning.
// `rendered_prompt`: the chat's prompt as the template rendered it.
std::unique_ptr<ReasoningSplit> reasoning_split_for(const Tokenizer& tok,
                                                    const GenerationSettings& g,
                                                    const std::string& rendered_prompt);

// The <think> split alone; `inside`: the prompt left a <think> open.
std::unique_ptr<ReasoningSplit> think_split(bool inside);

// How an answer of a <think> template may begin, for a grammar that must let the model think
// before what it holds (a forced tool call): none (no <think> template, harmony, or the prompt
// closed an empty block: thinking is off), optional (the answer may open a block), inside (the
// prompt opened one: the answer starts in the thought).
enum class ThinkLead { none, optional, inside };
ThinkLead think_lead_for(const GenerationSettings& g, const std::string& rendered_prompt);

}  // namespace sy
