// GBNF grammars (core/sampling/grammar.hpp) against std::regex on the same languages, their
// UTF-8 classes against the UTF-8 rules, their errors, and the token masks (token_mask.hpp):
// the trie walk against feeding every token's bytes to a copy of the state.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>
#include <set>

#include "core/sampling/grammar.hpp"
#include "core/sampling/json_schema.hpp"
#include "core/sampling/token_mask.hpp"

namespace sy {
namespace {

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarState s(g);
  return s.feed(text) && s.accepting();
}

std::string random_text(std::mt19937& rng, const std::string& alphabet, size_t max_len) {
  std::string s;
  for (size_t n = rng() % (max_len + 1); n > 0; --n) s += alphabet[rng() % alphabet.size()];
  return s;
}

TEST(Gbnf, TakesTheLanguageTheSameRegexTakes) {
  const auto g = Grammar::from_gbnf(R"(
    # a greeting, then one to three names
    root     ::= greeting ( "," ws name ){1,3} "!"?
    greeting ::= "hi" | "hello"
    ws       ::= [ \t]*
    name     ::= [A-Z] [a-z]+
  )");
  const std::regex re(R"(^(hi|hello)(,[ \t]*[A-Z][a-z]+){1,3}!?$)");
  std::mt19937 rng(3);
  int taken = 0;
  const std::vector<std::string> parts = {"hi", "hello", ",", " ", "\t", "Ann",
                                          "Bo", "b",     "!", "X", "he", "lo"};
  for (int n = 0; n < 4000; ++n) {
    std::string text;
    if (n % 2) {  // a sentence, then perhaps one piece more or less
      text = rng() % 2 ? "hi" : "hello";
      for (size_t k = 1 + rng() % 3; k > 0; --k)
        text += "," + std::string(rng() % 3, ' ') + (rng() % 2 ? "Ann" : "Bo");
      if (rng() % 2) text += "!";
      if (rng() % 2) text.insert(rng() % text.size(), parts[rng() % parts.size()]);
    } else {
      for (size_t k = rng() % 9; k > 0; --k) text += parts[rng() % parts.size()];
    }
    const bool want = std::regex_match(text, re);
    EXPECT_EQ(accepts(g, text), want) << text;
    taken += want;
  }
  EXPECT_GT(taken, 100);  // both verdicts are exercised
}

TEST(Gbnf, ClassesAreUtf8AndNeverSplitACharacterWrongly) {
  const auto g = Grammar::from_gbnf(R"(root ::= [^a-z"]+ "." [\u00e9-\u00ea] .)");
  EXPECT_TRUE(accepts(g, "A\xc3\x89\xe6\x97\xa5\xf0\x9f\x98\x80.\xc3\xa9x"));  // AÉ日😀.éx
  EXPECT_TRUE(accepts(g, "Z.\xc3\xaa\xe2\x82\xac"));                           // Z.ê€
  EXPECT_FALSE(accepts(g, "a.\xc3\xa9x"));                                     // a is excluded
  EXPECT_FALSE(accepts(g, "Z.\xc3\xabx"));                                     // ë is outside
  GrammarState s(g);
  EXPECT_FALSE(s.feed(std::string("\xff")));          // never a UTF-8 byte
  EXPECT_FALSE(s.feed(std::string("\xed\xa0\x80")));  // a surrogate
  EXPECT_FALSE(s.feed(std::string("\xc0\xaf")));      // an overlong '/'
  EXPECT_TRUE(s.feed(std::string("\xc3")));           // half of É: taken, not yet whole
  EXPECT_FALSE(s.accepting());
  EXPECT_FALSE(s.feed('.'));
  EXPECT_TRUE(s.feed(std::string("\x89.\xc3\xa9")));
  EXPECT_FALSE(s.accepting());  // `.` still needs its character
}

TEST(Gbnf, RefusesBrokenGrammarsSayingWhere) {
  auto error = [](const std::string& text) -> std::string {
    try {
      Grammar::from_gbnf(text);
    } catch (const GrammarError& e) {
      return e.what();
    }
    return "compiled";
  };
  EXPECT_EQ(error("root ::= \"a\" b\n"), "line 1, column 14: rule `b` is not defined");
  EXPECT_EQ(error("x ::= \"a\""), "grammar: there is no rule `root` to start from");
  EXPECT_EQ(error("root ::= \"a\n"), "line 1, column 10: the literal is not closed");
  EXPECT_EQ(error("root ::= [a-"), "line 1, column 10: the character class is not closed");
  EXPECT_EQ(error("root ::= \"a\"{3,1}"),
            "line 1, column 13: the repetition's maximum is below its minimum");
  EXPECT_EQ(error("root ::= \"\\q\""), "line 1, column 11: unknown escape `\\q`");
  EXPECT_EQ(error("root ::= x \"a\" | \"b\"\nx ::= \"\"? root"),
            "line 1, column 1: rule `root` is left-recursive (it can reach itself before reading "
            "a character)");
  EXPECT_EQ(error("root ::= \"a\"\nroot ::= \"b\""),
            "line 2, column 1: rule `root` is defined twice");
  EXPECT_EQ(error("root ::= ( \"a\" "), "line 1, column 10: the group is not closed");
  EXPECT_EQ(error("root ::= \"a\"{20000}"), "line 1, column 13: repetitions are bounded at 10000");
}

// A rule that repeats by calling itself last does not grow the stacks: 10000 items, stacks of
// constant height (llama.cpp's grammars grow here).
TEST(Gbnf, RepetitionRunsInConstantSpace) {
  const auto g = Grammar::from_gbnf("root ::= item* \"end\"\nitem ::= \"ab\" | \"c\"\n");
  GrammarState s(g);
  size_t tallest = 0;
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(s.feed(i % 3 ? "ab" : "c"));
    for (const auto& stack : s.stacks()) tallest = std::max(tallest, stack.size());
  }
  EXPECT_LE(tallest, 3u);
  EXPECT_TRUE(s.feed("end"));
  EXPECT_TRUE(s.finished());
}

// The mask a state gets from the trie walk is exactly the tokens whose bytes it takes (a copy of
// the state fed each token), for states reached along random texts of two grammars, and the
// cache gives the same masks again.
TEST(TokenMask, TheTrieWalkAllowsExactlyTheTokensTheStateTakes) {
  std::mt19937 rng(17);
  const std::string alphabet = "{}[]\",:0123456789-.eEtrufalsn \nab\\\xc3\xa9";
  std::vector<std::string> vocab = {"{", "}", "\"", "\":", "\": ", "true", "null", "<|eos|>"};
  for (int i = 0; i < 3000; ++i) vocab.push_back(random_text(rng, alphabet, 6));
  std::vector<bool> control(vocab.size(), false);
  control[7] = true;
  auto table = std::make_shared<TokenTable>(vocab, control);
  const auto schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "a": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
      "b": {"enum": ["x", "yy", 1.5, null]}, "c": {"type": "string"}}, "required": ["b"]})");
  // Long bounded repetitions (a string's maxLength, a GBNF count): their counts beyond the
  // longest token (12 bytes here) share masks, which must still be exactly the brute force's.
  const auto bounded = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "s": {"type": "string", "maxLength": 60}, "t": {"type": "array", "items":
      {"type": "integer"}, "maxItems": 40}}, "required": ["s", "t"]})");
  const auto counted = Grammar::from_gbnf("root ::= \"\\\"\" [a-e ]{0,50} \"\\\"\" [0-9]{2,40}");
  for (const auto& grammar : {json_object_grammar(), json_schema_grammar(schema),
                              json_schema_grammar(bounded), counted}) {
    GrammarMasks masks(grammar, table);
    const bool long_counts = grammar == counted || grammar == json_schema_grammar(bounded);
    if (long_counts) {
      EXPECT_TRUE(masks.merges_counts());
    }
    std::set<std::vector<GrammarState::Stack>> visited;
    for (int walk = 0; walk < (long_counts ? 6 : 15); ++walk) {
      GrammarState state(grammar);
      for (int step = 0; step < (long_counts ? 60 : 30) && !state.finished(); ++step) {
        visited.insert(state.stacks());
        const std::vector<uint64_t> bits = masks.allowed(state);
        std::vector<int64_t> allowed, expected;
        for (int64_t id = 0; id < table->size(); ++id) {
          if ((bits[size_t(id) >> 6] >> (id & 63)) & 1) allowed.push_back(id);
          GrammarState copy = state;
          if (!control[size_t(id)] && !vocab[size_t(id)].empty() && copy.feed(vocab[size_t(id)]))
            expected.push_back(id);
        }
        ASSERT_EQ(allowed, expected) << "walk " << walk << " step " << step;
        EXPECT_EQ(masks.allowed(state), bits);  // from the cache
        if (allowed.empty()) break;
        ASSERT_TRUE(state.feed(vocab[size_t(allowed[rng() % allowed.size()])]));
      }
    }
    if (long_counts)  // count-down states beyond every token's reach shared their masks
      EXPECT_LT(masks.cached(), visited.size());
    else
      EXPECT_GT(masks.cached(), 15u);  // walks come back to states
  }
}

// GrammarConstraint: masked logits are −inf exactly off the mask; an end-of-sequence id stays
// only where the text is whole and may go on ("12" of a number); a finished grammar is complete.
TEST(TokenMask, TheConstraintKeepsEosOnlyWhereTheTextIsWhole) {
  auto table = std::make_shared<TokenTable>(std::vector<std::string>{"1", "2", "x", "<eos>", ";"},
                                            std::vector<bool>{false, false, false, true, false});
  auto masks = std::make_shared<GrammarMasks>(Grammar::from_gbnf("root ::= [0-9]+ \";\"?"), table);
  GrammarConstraint c(masks);
  const std::vector<int64_t> eos = {3};
  auto left = [&] {
    std::vector<float> logits(5, 1.f);
    c.mask(logits, eos);
    std::vector<int> ids;
    for (size_t i = 0; i < logits.size(); ++i)
      if (!std::isinf(logits[i])) ids.push_back(int(i));
    return ids;
  };
  EXPECT_EQ(left(), (std::vector<int>{0, 1}));
  c.accept(0);
  EXPECT_EQ(left(), (std::vector<int>{0, 1, 3, 4}));  // "1" is whole: EOS may end it
  EXPECT_FALSE(c.complete());
  c.accept(4);
  EXPECT_TRUE(c.complete());
}

}  // namespace
}  // namespace sy
