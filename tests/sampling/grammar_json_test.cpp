// json_object's grammar (core/sampling/json_schema.hpp's json_object_grammar(), walked by
// grammar.hpp) against nlohmann::json's parser, an implementation of RFC 8259 no one here wrote:
// a text the grammar reads whole and calls complete is one nlohmann accepts (and an object); a
// valid object is read whole, every prefix of it accepted along the way; texts broken at one
// byte — by hand and at random — are refused as nlohmann refuses them.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>

#include "core/sampling/json_schema.hpp"

namespace sy {
namespace {

using nlohmann::json;

// How far the machine reads `text`: its length when every byte is taken.
size_t read_until_refused(const std::string& text, GrammarState& m) {
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.feed(static_cast<unsigned char>(text[i]))) return i;
  return text.size();
}

GrammarState object_state() {
  return GrammarState(json_object_grammar());
}

bool machine_accepts(const std::string& text) {
  GrammarState m = object_state();
  return read_until_refused(text, m) == text.size() && m.finished();
}

// nlohmann's verdict: nullopt where it has none on the grammar — a number too large for a
// double (1e7532) stops it before the rest is read (RFC 8259 section 9 leaves ranges to
// parsers, and Python reads it as inf).
std::optional<bool> reference_verdict(const std::string& text) {
  // Numbers beyond the grammar's documented bounds (json_schema.hpp: 20 digits, exponents of 2)
  // are outside what it writes by design.
  static const std::regex beyond(R"([eE][-+]?[0-9]{3}|[0-9]{21})");
  if (std::regex_search(text, beyond)) return std::nullopt;
  try {
    return json::parse(text).is_object();
  } catch (const json::out_of_range&) {
    return std::nullopt;
  } catch (const json::parse_error&) {
    return false;
  }
}
bool reference_accepts(const std::string& text) {
  return reference_verdict(text).value();
}

// A random JSON value of nesting at most `depth`, as nlohmann writes it (compact or indented).
json random_value(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 0 ? 7 : 5);
  switch (kind(rng)) {
    case 0: return nullptr;
    case 1: return bool(rng() & 1);
    case 2: return int64_t(rng() % 2000000) - 1000000;
    case 3: return std::ldexp(double(int64_t(rng() % 100000) - 50000), int(rng() % 40) - 20);
    case 4: {
      std::string s;
      const char* pool[] = {"a", " ", "\"", "\\", "\n", "é", "日本", "😀", "\t", "/", "x"};
      for (int i = int(rng() % 6); i > 0; --i) s += pool[rng() % 11];
      return s;
    }
    case 5: return std::string();
    case 6: {
      json a = json::array();
      for (int i = int(rng() % 4); i > 0; --i) a.push_back(random_value(rng, depth - 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = int(rng() % 4); i > 0; --i)
        o["k" + std::to_string(rng() % 100)] = random_value(rng, depth - 1);
      return o;
    }
  }
}

TEST(JsonObjectGrammar, ReadsEveryValidObjectWholeAndCallsItComplete) {
  std::mt19937 rng(11);
  for (int n = 0; n < 400; ++n) {
    json doc = json::object();
    for (int i = int(rng() % 5); i > 0; --i) doc["f" + std::to_string(i)] = random_value(rng, 4);
    const std::string text = n % 2 ? doc.dump() : doc.dump(2);
    ASSERT_TRUE(reference_accepts(text));
    GrammarState m = object_state();
    for (size_t i = 0; i < text.size(); ++i) {
      ASSERT_FALSE(m.finished()) << text << " complete before byte " << i;
      ASSERT_TRUE(m.feed(static_cast<unsigned char>(text[i]))) << text << " refused at " << i;
    }
    EXPECT_TRUE(m.finished()) << text;
  }
}

TEST(JsonObjectGrammar, BrokenTextsAreRefusedAsTheReferenceRefusesThem) {
  const std::vector<std::string> texts{R"({"a": 01})",
                                       R"({"a": 1.})",
                                       R"({"a": .5})",
                                       R"({"a": -})",
                                       R"({"a": +1})",
                                       R"({"a": 1e})",
                                       R"({"a": tru})",
                                       R"({"a": nul})",
                                       R"({a: 1})",
                                       R"({"a" 1})",
                                       R"({"a": 1,})",
                                       R"({"a": [1,]})",
                                       R"({"a": [,1]})",
                                       R"({"a": "\x"})",
                                       R"({"a": "\u12g4"})",
                                       "{\"a\": \"\x01\"}",
                                       "{\"a\": \"\xff\"}",
                                       "{\"a\": \"\xc3\"}",
                                       R"({"a": 1}})",
                                       R"([1, 2])",
                                       R"("text")",
                                       R"(1)",
                                       R"({"a": NaN})",
                                       R"({"a": Infinity})",
                                       R"({} {})",
                                       R"({"a": [}])",
                                       R"({"a": {]})",
                                       R"({"a":1 "b":2})",
                                       R"({"a": 1.5e+})",
                                       R"({"a": -0.0e-7})",
                                       R"({"a": [[], {}, "", 0]})",
                                       R"({})",
                                       R"({ "a" : [ true , false , null ] })"};
  for (const std::string& t : texts) EXPECT_EQ(machine_accepts(t), reference_accepts(t)) << t;
  // Random one-byte changes of valid objects: complete only when the reference accepts.
  std::mt19937 rng(5);
  const std::string alphabet = "{}[]\",:.-+eE0123456789 \ntrufalsn\\/u\xc3\xa9";
  int refused = 0, unjudged = 0;
  for (int n = 0; n < 3000; ++n) {
    json doc = json::object();
    for (int i = int(rng() % 4) + 1; i > 0; --i)
      doc["f" + std::to_string(i)] = random_value(rng, 3);
    std::string text = doc.dump();
    // Inside the text: the grammar writes no blanks around the object, which RFC 8259 allows.
    text[1 + rng() % (text.size() - 2)] = alphabet[rng() % alphabet.size()];
    const std::optional<bool> want = reference_verdict(text);
    if (!want) {
      ++unjudged;
      continue;
    }
    EXPECT_EQ(machine_accepts(text), *want) << text;
    refused += !*want;
  }
  EXPECT_GT(refused, 1000);  // the changes broke most of them: the comparison has teeth
  EXPECT_LT(unjudged, 100);  // and the reference judged nearly all
}

// Between tokens, at most one space, or a newline and 20 spaces or tabs (llama.cpp's bound): a
// model cannot spin in whitespace.
TEST(JsonObjectGrammar, BoundsWhitespace) {
  GrammarState m = object_state();
  EXPECT_EQ(read_until_refused("{  ", m), 2u);
  GrammarState indented = object_state();
  const std::string text = "{\n" + std::string(20, ' ');
  EXPECT_EQ(read_until_refused(text, indented), text.size());
  EXPECT_FALSE(indented.feed(' '));
  EXPECT_TRUE(indented.feed('}'));
  EXPECT_TRUE(indented.finished());
}

}  // namespace
}  // namespace sy
