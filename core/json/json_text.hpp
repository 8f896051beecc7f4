// json/ — JSON text read with errors a person can act on: every parser failure (syntax, a
// number too large for any type, bad UTF-8) becomes an Error naming the file and the line and
// column where the parser stopped. Graphs, model configs, target profiles, tokenizers and
// safetensors headers are all read through it. Depends on errors/ and nlohmann-json.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "core/errors/error.hpp"

namespace sy {

// Parses `text`; throws Error SY201 at "file:line:column" (or at "file" when the parser gave
// no position).
nlohmann::json parse_json_text(const std::string& text, const std::string& file);

// "line:column" (1-based) of byte `offset` of `text`.
std::string line_column(const std::string& text, size_t offset);

}  // namespace sy
