// A model's tool calls read back out of the text it generates, in the format its chat template
// writes them:
//   hermes       <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>, any number of
//                them (Qwen2.5, Qwen3, Hermes and the templates like them: the source writes
//                "<tool_call>"). The reader streams: text outside the blocks is content as soon
//                as it cannot be the start of a tag; a block becomes a call when its closing tag
//                arrives. A block whose body is not a JSON object with a string "name" (and
//                "arguments", an object or a string) stays in the content, as written; so does
//                a block never closed (max_tokens).
//   llama3_json  the whole answer is one {"name": NAME, "parameters": {...}} (Llama 3.1, 3.2,
//                3.3: the template writes '"parameters": ' after tool_call.name; one call a
//                turn, it refuses more), optionally after <|python_tag|>. An answer whose first
//                non-blank text is "{" (or the tag) is held until it ends, then read: one
//                object with a string "name" and "parameters" (or "arguments") is the call,
//                anything else the content, as written. Other answers stream as text.
//   mistral_json [TOOL_CALLS][{"name": NAME, "arguments": {...}, "id": ID}, ...] (Mistral Nemo
//                and the v3 templates: the source writes "[TOOL_CALLS][").
//   mistral_args [TOOL_CALLS]NAME[ARGS]{...}, once per call, [CALL_ID]ID before [ARGS] in the
//                history (Mistral Small 3.2, Devstral, Magistral: the source writes "[ARGS]").
//                For both Mistral forms, text before the first [TOOL_CALLS] streams; from it on
//                the answer is held until it ends, then read: the JSON array whole (every call
//                well formed, or all of it is content, as written), v11's calls up to the first
//                that is not well formed (one max_tokens cut), which is content from there on.
//                Their templates refuse ids that are not 9 alphanumerics, so the calls' ids
//                here are such.
//   harmony      gpt-oss: a message to functions.NAME is the call, its content the arguments
//                (reasoning.hpp's split finds them; the reader only gives them ids). A forced
//                call is harmony's documented form (the recipient on the commentary channel,
//                after an optional analysis), one call, ended by <|call|>.
// A template that writes calls in another form is refused by name when a request has tools,
// never answered with the call left in the text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memory>
#include <nlohmann/json.hpp>

#include "core/generation/generation.hpp"
#include "core/generation/reasoning.hpp"
#include "core/sampling/grammar.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy {

enum class ToolFormat { none, hermes, llama3_json, mistral_json, mistral_args, harmony };
// The format the model's chat template writes calls in; none when it writes none we read.
ToolFormat tool_format(const GenerationSettings& g);
// Whether the template renders a `tools` list at all.
bool template_renders_tools(const GenerationSettings& g);

// The grammar an answer is held to when it must call a tool (tool_choice required, or a named
// function): `format`'s call blocks and nothing else, each naming one of `tools` (only the
// function `only` when it is set) with arguments valid under that function's `parameters`
// schema (core/sampling/json_schema.hpp; none: any object). One call when `only` is set or
// `parallel` is false; otherwise one or more, and the end of sequence may follow any of them.
// `tools` as parse_completion_request checked them (their schemas compile). llama3_json
// templates take one call a turn, so its grammar is always one. `think`: a <think> template's
// thought may come first (reasoning.hpp's ThinkLead): `<think>…</think>` and blank lines, or,
// inside a block the prompt opened, the thought's rest and `</think>`; the thought is any text.
// Throws SchemaError (a pointer into `tools`), std::invalid_argument for ToolFormat::none.
std::shared_ptr<const Grammar> tool_call_grammar(ToolFormat format,
                                                 const nlohmann::ordered_json& tools,
                                                 const std::string& only, bool parallel,
                                                 ThinkLead think = ThinkLead::none);

// An earlier assistant turn's tool_calls as `format`'s template renders them best: Llama 3.x's
// and Mistral's write `arguments | tojson`, which would quote the JSON text OpenAI clients send,
// so for them an `arguments` string that parses as an object becomes that object (vLLM's
// convention; the transformers renderings the tests compare with take objects). Hermes
// templates print a string as it is: left alone. `fields`: per message, as
// parse_completion_request gives them.
void prepare_tool_history(ToolFormat format, std::vector<nlohmann::ordered_json>& fields);

// The format's call markers that `tokenizer` keeps as control tokens (Mistral's [TOOL_CALLS]
// and [ARGS], a Hermes tokenizer's <tool_call> when special): the ids a forced call's grammar
// must be allowed to take as their text (SamplingOptions::grammar_specials).
std::vector<int64_t> tool_call_markers(ToolFormat format, const Tokenizer& tokenizer);

struct ToolCall {
  std::string id;  // "call_" + 24 characters (Mistral's: 9 alphanumerics), unique in the reader
  std::string name;
  std::string arguments;  // JSON text, as OpenAI's function.arguments
};

class ToolCallReader {
 public:
  // `format`: hermes or llama3_json; `id_seed`: makes the calls' ids (a request's own random
  // number).
  ToolCallReader(ToolFormat format, uint64_t id_seed) : format_(format), seed_(id_seed) {}
  // Appends to `content` the text that is not a call, to `calls` each call completed.
  void feed(const std::string& text, std::string& content, std::vector<ToolCall>& calls);
  // After the last token: a held llama3_json answer is read; what else was held back is
  // content.
  void finish(std::string& content, std::vector<ToolCall>& calls);
  // A call the format marks by itself (harmony's recipients), given its id.
  void add(const std::string& name, const std::string& arguments, std::vector<ToolCall>& calls);

 private:
  void feed_hermes(std::string& content, std::vector<ToolCall>& calls);
  void feed_llama3(std::string& content);
  void feed_mistral(std::string& content);
  bool text_until(std::string_view tag, std::string& content);
  size_t read_mistral(std::string_view held, std::vector<ToolCall>& calls);
  ToolCall make_call(const nlohmann::json& j, const char* arguments_key);
  ToolFormat format_;
  std::string pending_;
  bool inside_ = false;  // hermes: within a block; mistral: past the first [TOOL_CALLS]
  enum class Lead { undecided, text, call } lead_ = Lead::undecided;  // llama3_json
  uint64_t seed_;
  int64_t made_ = 0;
};

}  // namespace sy
