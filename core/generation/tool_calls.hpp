// A model's tool calls read back out of the text it generates, in the format its chat template
// writes them:
//   hermes  <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>, any number of them
//           (Qwen2.5, Qwen3, Hermes and the templates like them: the source writes
//           "<tool_call>").
// Other families (Llama 3.x's bare JSON, Mistral's [TOOL_CALLS], harmony's to=functions.NAME)
// are not read yet: a request with tools for them is refused by name, never answered with the
// call left in the text.
//
// The reader streams: text outside the blocks is content as soon as it cannot be the start of
// a tag; a block becomes a call when its closing tag arrives. A block whose body is not a JSON
// object with a string "name" (and "arguments", an object or a string) is not a call: it stays
// in the content, as written. A block never closed (max_tokens) is content too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/generation/generation.hpp"

namespace sy {

enum class ToolFormat { none, hermes };
// The format the model's chat template writes calls in; none when it writes none we read.
ToolFormat tool_format(const GenerationSettings& g);
// Whether the template renders a `tools` list at all.
bool template_renders_tools(const GenerationSettings& g);

struct ToolCall {
  std::string id;  // "call_" + 24 characters, unique within the reader
  std::string name;
  std::string arguments;  // JSON text, as OpenAI's function.arguments
};

class ToolCallReader {
 public:
  // `id_seed`: makes the calls' ids (a request's own random number).
  explicit ToolCallReader(uint64_t id_seed) : seed_(id_seed) {}
  // Appends to `content` the text that is not a call, to `calls` each call completed.
  void feed(const std::string& text, std::string& content, std::vector<ToolCall>& calls);
  // After the last token: what was held back is content.
  void finish(std::string& content);

 private:
  std::string pending_;
  bool inside_ = false;
  uint64_t seed_;
  int64_t made_ = 0;
};

}  // namespace sy
