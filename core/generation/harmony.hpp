// OpenAI's harmony format, as gpt-oss writes its answers: messages of the form
//   <|start|>ROLE[ to=RECIPIENT]<|channel|>CHANNEL[ to=RECIPIENT][<|constrain|>TYPE]<|message|>
//   CONTENT<|end|>   (or <|return|> after the last answer, <|call|> after a tool call)
// on the channels `analysis` (the chain of thought), `commentary` (tool calls and preambles) and
// `final` (the answer for the user). The chat template writes the prompt's messages and ends
// with "<|start|>assistant", so the model's output starts inside a header.
//
// HarmonyReader splits the generated tokens into those messages as they stream: a marker is a
// token whose id is the marker's control token (so a user's or a model's *text* "<|channel|>"
// is never one), everything else is text of the part the reader is in. The answer is the
// content of the `final` messages; the callback streams every message's content.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/generation/generation.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy {

// The control tokens of harmony, by id.
struct HarmonyMarkers {
  int64_t start, end, message, channel, ret, call;
  std::optional<int64_t> constrain;
};

// The markers when the model speaks harmony: its tokenizer has <|start|>, <|end|>, <|message|>,
// <|channel|>, <|return|> and <|call|> as tokens and its chat template writes <|channel|>
// (gpt-oss). nullopt for every other model.
std::optional<HarmonyMarkers> harmony_markers(const Tokenizer& tok, const GenerationSettings& g);

struct HarmonyMessage {
  std::string role = "assistant";
  std::string channel;       // "analysis", "commentary", "final", or "" when the header named none
  std::string recipient;     // "functions.NAME" of a tool call (" to=…" in the header), else ""
  std::string content_type;  // after <|constrain|> ("json"), else ""
  std::string content;
  bool complete = false;  // its <|end|>, <|return|> or <|call|> was generated
};

class HarmonyReader {
 public:
  // `on_text(channel, text)` gets each message's content as it is generated (may be empty).
  using TextCallback = std::function<void(const std::string& channel, const std::string& text)>;
  explicit HarmonyReader(HarmonyMarkers markers, TextCallback on_text = {});

  // One generated token and the text the stop rule emitted with it (the token's own text last,
  // earlier held-back text before it); id -1 is held-back text flushed at the end.
  void feed(int64_t id, const std::string& emitted);
  // After the last token: a header never closed by <|channel|> or <|message|> (a model that
  // ignored the format and wrote plain text) becomes that message's content.
  void finish();

  const std::vector<HarmonyMessage>& messages() const { return messages_; }
  // The content of every `final` message, in order: what the user is answered.
  std::string answer() const;
  // The content of every `analysis` message, in order.
  std::string reasoning() const;

 private:
  enum class Part { role, channel, constrain, content, between };
  void text(const std::string& s);
  void marker(int64_t id);
  void header_done();

  HarmonyMarkers m_;
  TextCallback on_text_;
  std::vector<HarmonyMessage> messages_;
  Part part_ = Part::role;
  std::string header_;  // the role or channel text being read
};

}  // namespace sy
