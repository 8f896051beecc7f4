// chat_template/ — a model's own chat template (Jinja, as Hugging Face tokenizers ship it)
// rendered into prompt text exactly as transformers' apply_chat_template renders it: the
// options of its sandboxed environment (trim_blocks, lstrip_blocks, loopcontrols, no trailing
// newline kept), its raise_exception() and strftime_now() globals and its tojson filter
// (json.dumps with ensure_ascii=False).
//
// No Debian package offers a Jinja engine for C++, so this folder implements the subset the
// real templates of the supported families use (docs/chat-templates.md lists it, and
// tests/chat_template/ compares renderings with transformers'): if/elif/else, for (with an
// `if` filter, `else`, loop.*, break and continue, two targets), set (also `ns.attr` and
// blocks), macro with defaults, comments and `-`/`+` whitespace control; literals, lists,
// dicts, attribute and item access, slices, the arithmetic, comparison, `in`, `~`, `and`,
// `or`, `not` and `a if c else b` operators; the filters, tests and str/dict methods of
// template_builtins.cpp; namespace(), range(), dict(), raise_exception(), strftime_now().
//
// Anything else is an Error (SY211, exit 4) naming the construct and the line, raised by
// parse() before anything is rendered: an unsupported statement, filter, test, method or
// function. render() raises the same code for what only running can find: a type error
// ("unsupported operand types for +: 'str' and 'int'"), an undefined value used as an object,
// the template's own raise_exception(), or a template that runs past its step budget.
// Never a wrong prompt. Depends on errors/.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sy {

namespace chat {
struct Program;
}

class ChatTemplate {
 public:
  // Parses `source`. `origin` names it in errors ("model/tokenizer_config.json:chat_template").
  // Throws Error SY211 naming the construct and its line.
  static ChatTemplate parse(std::string_view source, std::string origin);

  // The rendered text, with `context`'s members as the template's variables (messages,
  // add_generation_prompt, bos_token...). `now` is the time strftime_now() formats (local
  // time). Throws Error SY211.
  std::string render(const nlohmann::ordered_json& context, std::time_t now) const;

  const std::string& origin() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const chat::Program> p) : program_(std::move(p)) {}
  std::shared_ptr<const chat::Program> program_;  // immutable: copies share it
};

// The context transformers' apply_chat_template gives a template: `messages` (each without
// its null-valued keys), `tools` and `documents` (null unless `extra` sets them),
// `add_generation_prompt`, the tokenizer's special tokens that are set (bos_token,
// eos_token...; an unset one stays undefined), then `extra`'s members (template keyword
// arguments such as enable_thinking), which win over the special tokens.
nlohmann::ordered_json chat_context(
    const nlohmann::ordered_json& messages, bool add_generation_prompt,
    const nlohmann::ordered_json& special_tokens,
    const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

}  // namespace sy
