// The JSON constraint (core/sampling/json_constraint.hpp) against nlohmann::json's parser, an
// implementation of RFC 8259 no one here wrote: a text the machine reads whole and calls
// complete is one nlohmann accepts (and an object); a valid object is read whole, every prefix
// of it accepted along the way; texts broken at one byte — by hand and at random — are refused
// no later than nlohmann refuses them. And the token mask: only tokens whose bytes continue a
// valid text survive, control tokens never.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "core/sampling/json_constraint.hpp"

namespace sy {
namespace {

using nlohmann::json;

// How far the machine reads `text`: its length when every byte is taken.
size_t read_until_refused(const std::string& text, JsonMachine& m) {
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.feed(static_cast<unsigned char>(text[i]))) return i;
  return text.size();
}

bool machine_accepts(const std::string& text) {
  JsonMachine m(true);
  return read_until_refused(text, m) == text.size() && m.complete();
}

// nlohmann's verdict: nullopt where it has none on the grammar — a number too large for a
// double (1e7532) stops it before the rest is read (RFC 8259 section 9 leaves ranges to
// parsers, and Python reads it as inf).
std::optional<bool> reference_verdict(const std::string& text) {
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

TEST(JsonConstraint, ReadsEveryValidObjectWholeAndCallsItComplete) {
  std::mt19937 rng(11);
  for (int n = 0; n < 400; ++n) {
    json doc = json::object();
    for (int i = int(rng() % 5); i > 0; --i) doc["f" + std::to_string(i)] = random_value(rng, 4);
    const std::string text = n % 2 ? doc.dump() : doc.dump(2);
    ASSERT_TRUE(reference_accepts(text));
    JsonMachine m(true);
    for (size_t i = 0; i < text.size(); ++i) {
      ASSERT_FALSE(m.complete()) << text << " complete before byte " << i;
      ASSERT_TRUE(m.feed(static_cast<unsigned char>(text[i]))) << text << " refused at " << i;
    }
    EXPECT_TRUE(m.complete()) << text;
  }
}

TEST(JsonConstraint, BrokenTextsAreRefusedAsTheReferenceRefusesThem) {
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
                                       R"( { "a" : [ true , false , null ] } )"};
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
    text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
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

TEST(JsonConstraint, BoundsNestingAndWhitespace) {
  JsonMachine deep(true);
  const std::string nest = "{\"a\":" + std::string(JsonMachine::kMaxDepth - 1, '[');
  EXPECT_EQ(read_until_refused(nest, deep), nest.size());
  EXPECT_FALSE(deep.feed('['));  // level 33
  JsonMachine blanks(true);
  EXPECT_EQ(read_until_refused("{" + std::string(JsonMachine::kMaxBlanks, ' '), blanks),
            size_t(1 + JsonMachine::kMaxBlanks));
  EXPECT_FALSE(blanks.feed(' '));
  EXPECT_TRUE(blanks.feed('}'));
}

TEST(JsonConstraint, TheMaskLeavesOnlyTokensThatContinueTheText) {
  auto table = std::make_shared<TokenTable>();
  table->bytes = {"{", "}", "\"a\"", ":", " 1", "1}", "}}", "<|end|>", "", "x", " "};
  table->control.assign(table->bytes.size(), false);
  table->control[7] = true;
  JsonConstraint c(table);
  auto allowed = [&] {
    std::vector<float> logits(table->bytes.size(), 0.f);
    c.mask(logits);
    std::vector<int> ids;
    for (size_t i = 0; i < logits.size(); ++i)
      if (!std::isinf(logits[i])) ids.push_back(int(i));
    return ids;
  };
  EXPECT_EQ(allowed(), (std::vector<int>{0, 10}));  // "{" or a blank; never the control token
  c.accept(0);
  EXPECT_EQ(allowed(), (std::vector<int>{1, 2, 10}));
  c.accept(2);
  c.accept(3);
  // A value: an object, a string, " 1", or "1}" (a number, then the close); not "}" or ":".
  EXPECT_EQ(allowed(), (std::vector<int>{0, 2, 4, 5, 10}));
  c.accept(5);
  EXPECT_TRUE(c.complete());
  EXPECT_TRUE(allowed().empty());  // nothing after the object
}

}  // namespace
}  // namespace sy
