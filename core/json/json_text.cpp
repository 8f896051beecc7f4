#include "core/json/json_text.hpp"

namespace sy {

std::string line_column(const std::string& text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n')
      ++line, col = 1;
    else
      ++col;
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& file) {
  using nlohmann::json;
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(Errc::json_syntax, std::string("invalid JSON: ") + e.what(),
                file + ":" + line_column(text, e.byte == 0 ? 0 : e.byte - 1));
  } catch (const json::exception& e) {  // e.g. a number too large for any JSON number type
    throw Error(Errc::json_syntax, std::string("invalid JSON: ") + e.what(), file);
  }
}

}  // namespace sy
