// A pre-tokenizer's Split regex, compiled by PCRE2 (UTF and UCP, JIT where the CPU has it): any
// pattern a tokenizer.json or a GGUF `tokenizer.ggml.pre` brings (GPT-2, Llama 3, Qwen2, o200k,
// tekken, DeepSeek's, ...), with `\p{..}` classes, `(?i:..)` groups and lookaheads, instead of
// a few patterns recognised by their spelling and matched by hand.
//
// The reference (PyPI `tokenizers`) matches with Oniguruma; PCRE2 in UCP mode gives the same
// classes for these patterns (\s is White_Space, \p{L}/\p{N} the general categories, case-
// insensitive groups fold as Unicode does: U+017F matches 's'). Tested equal on a corpus of
// Unicode, digits, code, whitespace runs and emoji (tests/tokenizer/split_regex_test.cpp, its
// fixture made by tests/fixtures/tokenizer/make_split_cases.py).
//
// No hand-written fast path: the matchers this replaced encoded the Declaration of Independence
// (8 KB, the BPE cache warm) at 57-61 MB/s, PCRE2's JIT at 45-56 MB/s (AMD EPYC family 25
// model 17, one thread; an 8 KB prompt takes 0.17 ms), a cost no prompt's prefill notices.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sy {

// Bytes [begin, end) of a text that a regex matched.
struct RegexMatch {
  size_t begin = 0, end = 0;
};

// What a Split does with its matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

class SplitRegex {
 public:
  // Compiles `pattern`. A pattern PCRE2 rejects throws Error SY303 naming `file`, `field`, the
  // pattern and PCRE2's message with the offset it stopped at.
  SplitRegex(const std::string& pattern, const std::string& file, const std::string& field);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // The byte spans of every match in `text`, leftmost-first and non-overlapping, in order, as
  // Rust's find_iter gives them; an empty match is skipped (the search resumes one character
  // on). Bytes that are not valid UTF-8 never match (PCRE2_MATCH_INVALID_UTF): they stay in the
  // gaps between matches. Thread-safe.
  std::vector<RegexMatch> matches(std::string_view text) const;

  // `text` cut as tokenizers' Split cuts it: matches and the gaps between them (with `invert`,
  // the gaps are what matched), then `behavior`; empty pieces are dropped.
  void split(std::string_view text, SplitBehavior behavior, bool invert,
             std::vector<std::string>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
};

}  // namespace sy
