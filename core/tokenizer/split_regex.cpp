// PCRE2 behind SplitRegex: one compiled code per pattern (shared, immutable), match data per
// call, so that concurrent encodes never share PCRE2 state.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/tokenizer/split_regex.hpp"

#include <pcre2.h>

#include <algorithm>
#include <new>

#include "core/errors/error.hpp"

namespace sy {

struct SplitRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
  return n < 0 ? "PCRE2 error " + std::to_string(code)
               : std::string(reinterpret_cast<char*>(buffer));
}

// The length of the UTF-8 sequence starting with byte b (1 for a byte that starts none, so an
// invalid byte is stepped over alone).
size_t utf8_length(unsigned char b) {
  return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF8 ? 4 : 1;
}

}  // namespace

SplitRegex::SplitRegex(const std::string& pattern, const std::string& file,
                       const std::string& field)
    : pattern_(pattern), code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!code_->code)
    throw Error(Errc::bad_tokenizer,
                "tokenizer " + file + " is invalid: field '" + field + "': the regex " + pattern +
                    " does not compile: " + pcre2_message(error) + " at offset " +
                    std::to_string(offset),
                file + ":" + field);
  // Without a JIT (a CPU PCRE2 has none for) the interpreter gives the same matches, slower.
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

SplitRegex::~SplitRegex() = default;

std::vector<RegexMatch> SplitRegex::matches(std::string_view text) const {
  std::vector<RegexMatch> out;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  if (!data) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), at, 0, data.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)  // a resource limit on a pathological pattern: said, not dropped
      throw Error(
          Errc::bad_tokenizer,
          "the pre-tokenizer regex " + pattern_ + " failed on the text: " + pcre2_message(rc),
          "pre_tokenizer");
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(data.get());
    if (span[1] > span[0]) {
      out.push_back({size_t(span[0]), size_t(span[1])});
      at = span[1];
    } else {
      if (span[0] >= text.size()) break;
      at = span[0] + utf8_length(static_cast<unsigned char>(text[span[0]]));
    }
  }
  return out;
}

// tokenizers' NormalizedString::split: the spans of matches and gaps, folded by behaviour
// (each piece is marked removed or kept), then the kept non-empty ones.
void SplitRegex::split(std::string_view text, SplitBehavior behavior, bool invert,
                       std::vector<std::string>& out) const {
  struct Piece {
    size_t begin, end;
    bool match;
  };
  std::vector<Piece> spans;
  size_t prev = 0;
  for (const RegexMatch& m : matches(text)) {
    if (m.begin > prev) spans.push_back({prev, m.begin, invert});
    spans.push_back({m.begin, m.end, !invert});
    prev = m.end;
  }
  if (prev < text.size()) spans.push_back({prev, text.size(), invert});

  std::vector<Piece> kept;  // match: removed
  bool previous = false;
  switch (behavior) {
    case SplitBehavior::removed: kept = spans; break;
    case SplitBehavior::isolated:
      for (const Piece& p : spans) kept.push_back({p.begin, p.end, false});
      break;
    case SplitBehavior::contiguous:
      for (const Piece& p : spans) {
        if (p.match == previous && !kept.empty())
          kept.back().end = p.end;
        else
          kept.push_back({p.begin, p.end, false});
        previous = p.match;
      }
      break;
    case SplitBehavior::merged_with_previous:
      for (const Piece& p : spans) {
        if (p.match && !previous && !kept.empty())
          kept.back().end = p.end;
        else
          kept.push_back({p.begin, p.end, false});
        previous = p.match;
      }
      break;
    case SplitBehavior::merged_with_next:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous && !kept.empty())
          kept.back().begin = it->begin;
        else
          kept.push_back({it->begin, it->end, false});
        previous = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Piece& p : kept)
    if (!p.match && p.end > p.begin) out.emplace_back(text.substr(p.begin, p.end - p.begin));
}

}  // namespace sy
