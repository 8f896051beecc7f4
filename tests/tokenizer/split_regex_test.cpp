// Split pre-tokenizers through PCRE2 against PyPI `tokenizers` (Oniguruma): the pieces of a
// corpus with Unicode, digits, code, whitespace runs and emoji, for the patterns of the
// tokenizers users have and for every behaviour. Expected pieces: tests/fixtures/tokenizer/
// split_cases.json, written by make_split_cases.py with the reference.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/errors/error.hpp"
#include "core/tokenizer/split_regex.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy {
namespace {

nlohmann::json split_cases() {
  std::ifstream in(std::string(SY_TEST_FIXTURES_DIR) + "/tokenizer/split_cases.json");
  return nlohmann::json::parse(in);
}

SplitBehavior behavior_named(const std::string& name) {
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  return SplitBehavior::isolated;
}

TEST(SplitRegex, EveryPatternCutsTheCorpusAsTheReferenceDoes) {
  const nlohmann::json j = split_cases();
  const auto& corpus = j.at("corpus");
  ASSERT_GE(j.at("cases").size(), 15u);
  for (const auto& c : j.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const SplitRegex regex(c.at("regex").get<std::string>(), "split_cases.json", "regex");
    for (size_t i = 0; i < corpus.size(); ++i) {
      std::vector<std::string> got;
      regex.split(corpus[i].get<std::string>(), behavior_named(c.at("behavior")),
                  c.at("invert").get<bool>(), got);
      EXPECT_EQ(got, c.at("pieces")[i].get<std::vector<std::string>>())
          << "corpus[" << i << "] " << corpus[i].dump();
    }
  }
}

// Bytes that are not UTF-8 never match; they stay between the matches, so nothing is lost.
TEST(SplitRegex, InvalidUtf8StaysInTheGaps) {
  const SplitRegex regex(std::string(kTokenizerGpt2Pattern), "t", "f");
  const std::string text = "ab\xff\xfe cd \xc3";
  std::vector<std::string> pieces;
  regex.split(text, SplitBehavior::isolated, false, pieces);
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(pieces.front(), "ab");
}

TEST(SplitRegex, APatternPcre2RejectsIsSY303NamingTheFieldAndOffset) {
  try {
    SplitRegex bad("(?i:'s|\\p{Nope}+", "tok.json", "pre_tokenizer.pattern");
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code, Errc::bad_tokenizer);
    const std::string what = e.what();
    EXPECT_NE(what.find("tok.json"), std::string::npos) << what;
    EXPECT_NE(what.find("pre_tokenizer.pattern"), std::string::npos) << what;
    EXPECT_NE(what.find("at offset"), std::string::npos) << what;
  }
}

// An empty match is skipped, not looped on.
TEST(SplitRegex, EmptyMatchesAdvance) {
  const SplitRegex regex("x*", "t", "f");
  const auto m = regex.matches("axxbx");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].begin, 1u);
  EXPECT_EQ(m[0].end, 3u);
  EXPECT_EQ(m[1].begin, 4u);
}

}  // namespace
}  // namespace sy
