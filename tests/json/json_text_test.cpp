// core/json's UTF-8 check and field paths. The UTF-8 reference is nlohmann-json's own lexer,
// which refuses ill-formed UTF-8 inside a string (RFC 3629's table); the paths are checked
// against what the parsed document holds at the same place.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/json/json_text.hpp"

namespace sy {
namespace {

using nlohmann::json;

bool lexer_accepts(const std::string& bytes) {
  try {
    return json::parse("\"" + bytes + "\"").is_string();
  } catch (const json::parse_error&) {
    return false;
  }
}

TEST(JsonText, Utf8CheckAgreesWithTheJsonLexer) {
  // The edges of RFC 3629's table: overlongs, surrogates, above U+10FFFF, truncations.
  const char* cases[] = {"a",
                         "\xC2\x80",
                         "\xC1\xBF",
                         "\xE0\x9F\xBF",
                         "\xE0\xA0\x80",
                         "\xED\x9F\xBF",
                         "\xED\xA0\x80",
                         "\xEF\xBF\xBF",
                         "\xF0\x8F\xBF\xBF",
                         "\xF0\x90\x80\x80",
                         "\xF4\x8F\xBF\xBF",
                         "\xF4\x90\x80\x80",
                         "\xF5\x80\x80\x80",
                         "\xC2",
                         "\xE2\x82",
                         "\x80",
                         "\xFF",
                         "x\xE2\x82\xAC y"};
  for (const char* c : cases)
    EXPECT_EQ(first_invalid_utf8(c) == std::string::npos, lexer_accepts(c))
        << testing::PrintToString(std::string(c));
  // Random strings of printable ASCII (no quote or backslash) and high bytes.
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (int n = std::uniform_int_distribution<int>(1, 8)(rng); n > 0; --n) {
      int b = std::uniform_int_distribution<int>(0x20, 0x1FF)(rng);
      if (b > 0xFF) b = 0x80 + (b & 0x3F);  // continuation bytes, often
      if (b == '"' || b == '\\') b = 'q';
      s += char(b);
    }
    const bool ours = first_invalid_utf8(s) == std::string::npos;
    accepted += ours;
    ASSERT_EQ(ours, lexer_accepts(s)) << testing::PrintToString(s);
  }
  EXPECT_GT(accepted, 100);  // both kinds were drawn
  EXPECT_EQ(first_invalid_utf8("ab\xE2\x82\xAC\xFF"), 5u);
}

TEST(JsonText, PathsNameTheFieldAByteIsIn) {
  const std::string text = R"({"model": "m", "messages": [{"role": "user", "content": "hello"},)"
                           R"( {"role": "assistant", "content": ["a", {"text": "bcd"}]}], "n": 1})";
  const json doc = json::parse(text);
  auto at = [&](const std::string& needle) { return json_path_at(text, text.find(needle)); };
  EXPECT_EQ(at("ello"), "messages[0].content");
  EXPECT_EQ(doc["messages"][0]["content"], "hello");
  EXPECT_EQ(at("cd\""), "messages[1].content[1].text");
  EXPECT_EQ(doc["messages"][1]["content"][1]["text"], "bcd");
  EXPECT_EQ(at("a\""), "messages[1].content[0]");
  EXPECT_EQ(at("1}"), "n");
  EXPECT_EQ(at(", \"n\""), "");                      // between the top level's members
  EXPECT_EQ(at(", {\"role\": \"a"), "messages[1]");  // after an element: the next one
  EXPECT_EQ(json_path_at(text, 0), "");
}

}  // namespace
}  // namespace sy
