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

#include <memory>
#include <nlohmann/json.hpp>

#include "core/generation/generation.hpp"
#include "core/sampling/grammar.hpp"

namespace sy {

enum class ToolFormat { none, hermes };
// The format the model's chat template writes calls in; none when it writes none we read.
ToolFormat tool_format(const GenerationSettings& g);
// Whether the template renders a `tools` list at all.
bool template_renders_tools(const GenerationSettings& g);

// The grammar an answer is held to when it must call a tool (tool_choice required, or a named
// function): `format`'s call blocks and nothing else, each naming one of `tools` (only the
// function `only` when it is set) with arguments valid under that function's `parameters`
// schema (core/sampling/json_schema.hpp; none: any object). One call when `only` is set or
// `parallel` is false; otherwise one or more, and the end of sequence may follow any of them.
// `tools` as parse_completion_request checked them (their schemas compile). Throws
// SchemaError (a pointer into `tools`), std::invalid_argument for ToolFormat::none.
std::shared_ptr<const Grammar> tool_call_grammar(ToolFormat format,
                                                 const nlohmann::ordered_json& tools,
                                                 const std::string& only, bool parallel);

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
