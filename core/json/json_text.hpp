// json/ — JSON text read with errors a person can act on: every parser failure (syntax, a
// number too large for any type, bad UTF-8) becomes an Error naming the file and the line and
// column where the parser stopped. Graphs, model configs, target profiles, tokenizers and
// safetensors headers are all read through it. Depends on errors/ and nlohmann-json.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/errors/error.hpp"

namespace sy {

// Parses `text`; throws Error SY201 at "file:line:column" (or at "file" when the parser gave
// no position).
nlohmann::json parse_json_text(const std::string& text, const std::string& file);

// "line:column" (1-based) of byte `offset` of `text`.
std::string line_column(const std::string& text, size_t offset);

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), or npos. JSON text must be UTF-8
// (RFC 8259, section 8.1).
size_t first_invalid_utf8(std::string_view text);

// Where byte `offset` of the JSON text `text` lies, as a request field's path:
// `messages[1].content` for a byte inside that string, `tools[0]` between its members; "" at the
// top level. Read from the text before `offset` alone, so it works where the rest does not parse.
std::string json_path_at(const std::string& text, size_t offset);

}  // namespace sy
