// Byte-level BPE from tokenizer.json: loading and checks, the added-token split, the
// pre-tokenizer stages (Split regexes through PCRE2, split_regex.hpp), BPE with a rank heap,
// and decoding.
#include "core/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "core/errors/error.hpp"
#include "core/json/json_text.hpp"
#include "core/tokenizer/split_regex.hpp"

namespace sy {

namespace {

using nlohmann::json;

struct CodeRange {
  uint32_t lo, hi;
};
#include "core/tokenizer/unicode_table.inc"

// ---- Unicode classes ------------------------------------------------------------------------

template <size_t N>
bool in_ranges(const CodeRange (&ranges)[N], uint32_t cp) {
  auto it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                             [](uint32_t c, const CodeRange& r) { return c < r.lo; });
  return it != std::begin(ranges) && cp <= std::prev(it)->hi;
}

constexpr uint32_t kInvalidByte = 0xFFFFFFFFu;  // a byte that is not part of valid UTF-8

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return cp != kInvalidByte && in_ranges(kLetterRanges, cp);
}
bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return cp != kInvalidByte && in_ranges(kNumberRanges, cp);
}
// White_Space (Rust's char::is_whitespace): an added token's lstrip/rstrip.
bool is_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}
// \w of Rust's regex crate (Alphabetic, M, Nd, Pc, Join_Control), with L and Nl standing in for
// Alphabetic (which also holds a few hundred symbols such as circled letters).
bool is_word_char(uint32_t cp) {
  return is_letter(cp) || cp == 0x200C || cp == 0x200D ||
         (cp != kInvalidByte && in_ranges(kWordExtraRanges, cp));
}

struct CodePoint {
  uint32_t cp;
  uint32_t offset;  // byte offset in the piece
};

// At s[i]: the length of the valid UTF-8 sequence there, with its code point in `cp`; or 0,
// with `bad` the length of the maximal invalid subpart there (at least 1).
size_t utf8_at(std::string_view s, size_t i, uint32_t& cp, size_t& bad) {
  auto b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    cp = b;
    return 1;
  }
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2, cp = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3, cp = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    bad = 1;
    return 0;
  }
  size_t k = 1;
  for (; k <= need && i + k < s.size(); ++k) {
    auto c = static_cast<uint8_t>(s[i + k]);
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
    cp = (cp << 6) | (c & 0x3F);
  }
  if (k == need + 1) return k;
  bad = k;
  return 0;
}

// Decodes UTF-8; every byte that is not part of a valid sequence is one kInvalidByte.
std::vector<CodePoint> code_points(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t bad = 0, len = utf8_at(s, i, cp, bad);
    out.push_back({len ? cp : kInvalidByte, static_cast<uint32_t>(i)});
    i += len ? len : 1;
  }
  return out;
}

// Appends `s` with every maximal invalid UTF-8 subpart replaced by U+FFFD, as Rust's
// String::from_utf8_lossy does.
void append_lossy(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t bad = 0, len = utf8_at(s, i, cp, bad);
    if (len)
      out.append(s.substr(i, len));
    else
      out.append("\xEF\xBF\xBD");
    i += len ? len : bad;
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// ---- the ByteLevel alphabet (GPT-2's bytes_to_unicode) --------------------------------------

struct ByteAlphabet {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_utf8;
  std::unordered_map<uint32_t, uint8_t> cp_to_byte;
  ByteAlphabet() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      byte_to_cp[b] = printable ? b : next++;
      append_utf8(byte_to_utf8[b], byte_to_cp[b]);
      cp_to_byte[byte_to_cp[b]] = static_cast<uint8_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

std::string byte_level(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += alphabet().byte_to_utf8[static_cast<uint8_t>(c)];
  return out;
}

// A token's bytes as the ByteLevel decoder gives them: every character mapped back to its
// byte, or, when one character is outside the alphabet, the token's own UTF-8 unchanged.
std::string byte_level_decode(const std::string& token) {
  std::string out;
  for (const CodePoint& c : code_points(token)) {
    auto it = alphabet().cp_to_byte.find(c.cp);
    if (it == alphabet().cp_to_byte.end()) return token;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

// ---- the pre-tokenizer stages ------------------------------------------------------------

// Digits: numbers (char::is_numeric, i.e. \p{N}) one by one, or in runs; the rest in runs.
void split_digits(bool individual, const std::string& piece, std::vector<std::string>& out) {
  std::vector<CodePoint> cps = code_points(piece);
  for (size_t i = 0; i < cps.size();) {
    bool num = is_number(cps[i].cp);
    size_t j = i + 1;
    if (!(num && individual))
      while (j < cps.size() && is_number(cps[j].cp) == num) ++j;
    size_t end = j < cps.size() ? cps[j].offset : piece.size();
    out.emplace_back(piece, cps[i].offset, end - cps[i].offset);
    i = j;
  }
}

// `text` with every `from` replaced by `to` (nothing when `from` is empty).
std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  for (size_t at = 0;;) {
    const size_t hit = text.find(from, at);
    out.append(text.substr(at, hit - at));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    at = hit + from.size();
  }
}

// A byte's token in a SentencePiece vocabulary: "<0x0A>".
std::string byte_fallback_token(int b) {
  static const char* kHex = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

struct Stage {
  enum Kind { split, digits, byte_level, metaspace } kind;
  std::shared_ptr<const SplitRegex> regex;  // split, or byte_level with use_regex (GPT-2's)
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  bool individual_digits = false;
  bool add_prefix_space = false;
  bool use_regex = false;
  // metaspace: spaces become `replacement`; prepend it to every piece (always) or to the text's
  // first (first); split the text before each replacement.
  std::string replacement;
  enum Prepend { never, first, always } prepend = never;
  bool split_on_replacement = false;
};

// A normalizer step (tokenizer.json `normalizer`): Replace of a literal, or Prepend.
struct NormalizerStep {
  enum Kind { replace, prepend } kind;
  std::string pattern, content;  // replace: every `pattern` becomes `content`; prepend: content
};

// What the decoder of a SentencePiece-style BPE does, in tokenizers' order Replace, ByteFallback,
// Fuse, Strip: `mark` back to a space, <0xNN> tokens to their bytes, then up to strip_left /
// strip_right spaces off the whole text.
struct CharDecoder {
  std::string mark;  // "" when the decoder replaces nothing
  bool byte_fallback = false;
  int strip_left = 0, strip_right = 0;
};

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = false;
};

struct MergeRule {
  int32_t rank;
  int64_t new_id;
};

uint64_t pair_key(int64_t a, int64_t b) {
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b);
}

// Ids must fit the merge key (32 bits) and a dense id table.
constexpr int64_t kMaxId = (int64_t{1} << 28) - 1;

// ---- loading --------------------------------------------------------------------------------

class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    throw Error(Errc::bad_tokenizer,
                "tokenizer " + file_ +
                    " is invalid: " + (field.empty() ? reason : "field '" + field + "': " + reason),
                field.empty() ? file_ : file_ + ":" + field);
  }

  const json& need(const json& obj, const char* key, const std::string& path) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) fail(path + key, "missing");
    return *it;
  }
  const json* find(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  bool flag(const json& obj, const char* key, const std::string& path, bool fallback) const {
    const json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(path + key, "must be true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::string str(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  std::string type_of(const json& obj, const std::string& path) const {
    if (!obj.is_object()) fail(path, "must be an object, got " + obj.dump());
    return str(need(obj, "type", path + "."), path + ".type");
  }
  int64_t id(const json& v, const std::string& field) const {
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(kMaxId)) || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > kMaxId)
      fail(field, "must be a token id in [0, " + std::to_string(kMaxId) + "], got " + v.dump());
    return v.get<int64_t>();
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

std::string json_quoted(const std::string& s) {
  return json(s).dump();
}

}  // namespace

struct Tokenizer::Impl {
  std::string file;
  std::unordered_map<std::string, int64_t> vocab;      // model vocabulary
  std::unordered_map<std::string, int64_t> added_ids;  // added tokens by content
  std::vector<std::string> token_text;                 // by id, as in the file
  std::vector<std::string> token_bytes;                // by id, as the ByteLevel decoder gives
  std::vector<bool> has_token;                         // by id
  std::unordered_map<uint64_t, MergeRule> merges;      // (left id, right id) -> rule
  std::array<int64_t, 256> byte_id{};                  // id of each byte's character, -1: none
  // A SentencePiece-style BPE (no ByteLevel pre-tokenizer): symbols are characters; with
  // byte_fallback a character without a token becomes its bytes' <0xNN> tokens.
  bool is_byte_level = true;
  bool byte_fallback = false;
  std::array<int64_t, 256> fallback_id{};  // id of <0xNN>, -1: none
  std::vector<NormalizerStep> normalizer;
  CharDecoder char_decoder;
  std::optional<int64_t> unk_id;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::vector<int64_t> special_prefix, special_suffix;  // the post_processor's, one sequence
  std::vector<Stage> stages;
  std::vector<AddedToken> added;
  // Added tokens by first byte, longest first: [0] matched on the raw text, [1] after
  // normalisation (tokens with normalized=true), as the reference does.
  std::array<std::array<std::vector<size_t>, 256>, 2> added_by_byte;
  bool any_added[2] = {false, false};

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;  // piece -> ids
  static constexpr size_t kCacheEntries = 65536, kCachedPieceBytes = 256;

  // `text` starts at byte `base` of what encode() was given; an added token marked special
  // (a control token) is not matched where it would overlap one of `text_only` (absolute).
  void encode_text(std::string_view text, int pass, std::vector<int64_t>& ids,
                   std::span<const TextSpan> text_only = {}, size_t base = 0) const;
  void match_added(std::string_view text, int pass, std::vector<int64_t>& ids,
                   std::span<const TextSpan> text_only, size_t base) const;
  void encode_pieces(std::string_view text, bool first, std::vector<int64_t>& ids) const;
  std::string normalize(std::string_view text) const;
  void bpe(const std::string& piece, std::vector<int64_t>& ids) const;
  void bpe_uncached(const std::string& piece, std::vector<int64_t>& ids) const;
  [[noreturn]] void unknown_id(int64_t id) const;
};

namespace {

// tokenizers' SplitDelimiterBehavior, as tokenizer.json spells it.
// A regex matching `text` literally: every ASCII punctuation and space escaped for PCRE2.
std::string literal_regex(std::string_view text) {
  std::string regex;
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c)))
      regex += '\\';
    regex += c;
  }
  return regex;
}

SplitBehavior split_behavior(const Loader& L, const json* j, const std::string& field) {
  static const std::pair<const char*, SplitBehavior> kNames[] = {
      {"Removed", SplitBehavior::removed},
      {"Isolated", SplitBehavior::isolated},
      {"MergedWithPrevious", SplitBehavior::merged_with_previous},
      {"MergedWithNext", SplitBehavior::merged_with_next},
      {"Contiguous", SplitBehavior::contiguous}};
  for (const auto& [name, b] : kNames)
    if (j && *j == name) return b;
  L.fail(field,
         "must be Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous, got " +
             (j ? j->dump() : std::string("nothing")));
}

Stage parse_stage(const Loader& L, const json& j, const std::string& path) {
  std::string type = L.type_of(j, path);
  Stage st{};
  if (type == "ByteLevel") {
    st.kind = Stage::byte_level;
    st.add_prefix_space = L.flag(j, "add_prefix_space", path + ".", false);
    st.use_regex = L.flag(j, "use_regex", path + ".", true);
    if (st.use_regex)
      st.regex = std::make_shared<const SplitRegex>(std::string(kTokenizerGpt2Pattern), L.file(),
                                                    path + ".use_regex");
  } else if (type == "Split") {
    st.kind = Stage::split;
    const json& pat = L.need(j, "pattern", path + ".");
    std::string regex;
    if (pat.is_object() && pat.contains("Regex")) {
      regex = L.str(pat["Regex"], path + ".pattern.Regex");
    } else if (pat.is_object() && pat.contains("String")) {  // a literal, matched as one
      regex = literal_regex(L.str(pat["String"], path + ".pattern.String"));
    } else {
      L.fail(path + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}, got " + pat.dump());
    }
    st.regex = std::make_shared<const SplitRegex>(regex, L.file(), path + ".pattern");
    st.behavior = split_behavior(L, L.find(j, "behavior"), path + ".behavior");
    st.invert = L.flag(j, "invert", path + ".", false);
  } else if (type == "Digits") {
    st.kind = Stage::digits;
    st.individual_digits = L.flag(j, "individual_digits", path + ".", false);
  } else if (type == "Metaspace") {
    st.kind = Stage::metaspace;
    st.replacement = L.str(L.need(j, "replacement", path + "."), path + ".replacement");
    if (code_points(st.replacement).size() != 1)
      L.fail(path + ".replacement", "must be one character, got " + json_quoted(st.replacement));
    const json* scheme = L.find(j, "prepend_scheme");
    const std::string how = scheme ? L.str(*scheme, path + ".prepend_scheme")
                            : L.flag(j, "add_prefix_space", path + ".", true) ? "always"
                                                                              : "never";
    if (how == "always")
      st.prepend = Stage::always;
    else if (how == "first")
      st.prepend = Stage::first;
    else if (how == "never")
      st.prepend = Stage::never;
    else
      L.fail(path + ".prepend_scheme", "must be always, first or never, got " + json_quoted(how));
    st.split_on_replacement = L.flag(j, "split", path + ".", true);
    if (st.split_on_replacement)
      st.regex = std::make_shared<const SplitRegex>(literal_regex(st.replacement), L.file(),
                                                    path + ".replacement");
  } else {
    L.fail(path + ".type", "unsupported pre-tokenizer " + json_quoted(type) +
                               " (Switchyard reads ByteLevel, Split, Digits and Metaspace)");
  }
  return st;
}

void parse_pre_tokenizer(const Loader& L, const json& root, Tokenizer::Impl& t) {
  const json* pre = L.find(root, "pre_tokenizer");
  if (!pre) {  // a SentencePiece-style BPE over the normalized text as one piece
    t.is_byte_level = false;
    return;
  }
  std::string type = L.type_of(*pre, "pre_tokenizer");
  if (type == "Sequence") {
    const json& list = L.need(*pre, "pretokenizers", "pre_tokenizer.");
    if (!list.is_array()) L.fail("pre_tokenizer.pretokenizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      t.stages.push_back(
          parse_stage(L, list[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]"));
  } else {
    t.stages.push_back(parse_stage(L, *pre, "pre_tokenizer"));
  }
  // ByteLevel, when there is one, comes last: it makes the symbols bytes. Without one the BPE
  // is SentencePiece-style, over characters.
  t.is_byte_level = !t.stages.empty() && t.stages.back().kind == Stage::byte_level;
  for (size_t i = 0; i + 1 < t.stages.size(); ++i)
    if (t.stages[i].kind == Stage::byte_level)
      L.fail("pre_tokenizer", "may hold one ByteLevel pre-tokenizer, last, got " + pre->dump());
}

void parse_normalizer(const Loader& L, const json& root, Tokenizer::Impl& t) {
  const json* norm = L.find(root, "normalizer");
  if (!norm) return;
  auto step = [&](const json& j, const std::string& path) {
    std::string type = L.type_of(j, path);
    if (type == "NFC") return;  // accepted and not applied: see tokenizer.hpp
    if (type == "Prepend") {
      t.normalizer.push_back({NormalizerStep::prepend, "",
                              L.str(L.need(j, "prepend", path + "."), path + ".prepend")});
    } else if (type == "Replace") {
      const json& pat = L.need(j, "pattern", path + ".");
      if (!pat.is_object() || !pat.contains("String"))
        L.fail(path + ".pattern", "must be {\"String\": ...} (a literal), got " + pat.dump());
      NormalizerStep r{NormalizerStep::replace, L.str(pat["String"], path + ".pattern.String"),
                       L.str(L.need(j, "content", path + "."), path + ".content")};
      if (r.pattern.empty()) L.fail(path + ".pattern.String", "must not be empty");
      t.normalizer.push_back(std::move(r));
    } else {
      L.fail(path + ".type", "unsupported normalizer " + json_quoted(type) +
                                 " (Switchyard reads NFC, Prepend, Replace and Sequence)");
    }
  };
  if (L.type_of(*norm, "normalizer") == "Sequence") {
    const json& list = L.need(*norm, "normalizers", "normalizer.");
    if (!list.is_array()) L.fail("normalizer.normalizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      step(list[i], "normalizer.normalizers[" + std::to_string(i) + "]");
  } else {
    step(*norm, "normalizer");
  }
}

void parse_model(const Loader& L, const json& root, Tokenizer::Impl& t) {
  const json& model = L.need(root, "model", "");
  std::string type = L.type_of(model, "model");
  if (type != "BPE")
    L.fail("model.type", "must be \"BPE\" (byte-level BPE), got " + json_quoted(type));
  if (const json* d = L.find(model, "dropout"); d && !(d->is_number() && d->get<double>() == 0))
    L.fail("model.dropout", "must be null: BPE dropout is for training, got " + d->dump());
  t.byte_fallback = L.flag(model, "byte_fallback", "model.", false);
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json* a = L.find(model, affix); a && *a != "")
      L.fail(std::string("model.") + affix, "must be null or \"\", got " + a->dump());
  t.ignore_merges = L.flag(model, "ignore_merges", "model.", false);
  t.fuse_unk = L.flag(model, "fuse_unk", "model.", false);

  const json& vocab = L.need(model, "vocab", "model.");
  if (!vocab.is_object()) L.fail("model.vocab", "must be an object of token: id");
  t.vocab.reserve(vocab.size());
  for (const auto& [token, v] : vocab.items()) t.vocab[token] = L.id(v, "model.vocab." + token);

  if (const json* unk = L.find(model, "unk_token")) {
    std::string u = L.str(*unk, "model.unk_token");
    auto it = t.vocab.find(u);
    if (it == t.vocab.end())
      L.fail("model.unk_token", json_quoted(u) + " is not in the vocabulary");
    t.unk_id = it->second;
  }

  const json& merges = L.need(model, "merges", "model.");
  if (!merges.is_array()) L.fail("model.merges", "must be an array");
  if (merges.size() > size_t(INT32_MAX)) L.fail("model.merges", "too many merges");
  t.merges.reserve(merges.size());
  std::string a, b, ab;  // reused: a quarter of a million merges (Gemma's) allocate nothing each
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto field = [r] { return "model.merges[" + std::to_string(r) + "]"; };
    const json& m = merges[r];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        L.fail(field(), "must be two tokens separated by one space, got " + m.dump());
      a.assign(s, 0, sp);
      b.assign(s, sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get_ref<const std::string&>();
      b = m[1].get_ref<const std::string&>();
    } else {
      L.fail(field(), "must be \"a b\" or [\"a\", \"b\"], got " + m.dump());
    }
    ab.assign(a).append(b);
    auto ia = t.vocab.find(a), ib = t.vocab.find(b), iab = t.vocab.find(ab);
    if (ia == t.vocab.end()) L.fail(field(), json_quoted(a) + " is not in the vocabulary");
    if (ib == t.vocab.end()) L.fail(field(), json_quoted(b) + " is not in the vocabulary");
    if (iab == t.vocab.end())
      L.fail(field(), "the merged " + json_quoted(ab) + " is not in the vocabulary");
    // The first rule for a pair wins, as in the reference.
    t.merges.emplace(pair_key(ia->second, ib->second),
                     MergeRule{static_cast<int32_t>(r), iab->second});
  }

  for (int b = 0; b < 256; ++b) {
    auto it = t.vocab.find(alphabet().byte_to_utf8[b]);
    t.byte_id[b] = it == t.vocab.end() ? -1 : it->second;
    it = t.vocab.find(byte_fallback_token(b));
    t.fallback_id[b] = it == t.vocab.end() ? -1 : it->second;
  }
}

void parse_added_tokens(const Loader& L, const json& root, Tokenizer::Impl& t) {
  const json* list = L.find(root, "added_tokens");
  if (!list) return;
  if (!list->is_array()) L.fail("added_tokens", "must be an array");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string path = "added_tokens[" + std::to_string(i) + "]";
    const json& j = (*list)[i];
    if (!j.is_object()) L.fail(path, "must be an object, got " + j.dump());
    AddedToken a;
    a.id = L.id(L.need(j, "id", path + "."), path + ".id");
    a.content = L.str(L.need(j, "content", path + "."), path + ".content");
    if (a.content.empty()) L.fail(path + ".content", "must not be empty");
    a.special = L.flag(j, "special", path + ".", false);
    a.single_word = L.flag(j, "single_word", path + ".", false);
    a.lstrip = L.flag(j, "lstrip", path + ".", false);
    a.rstrip = L.flag(j, "rstrip", path + ".", false);
    a.normalized = L.flag(j, "normalized", path + ".", !a.special);
    t.added_ids[a.content] = a.id;
    t.added.push_back(std::move(a));
  }
  for (size_t k = 0; k < t.added.size(); ++k) {
    int pass = t.added[k].normalized ? 1 : 0;
    t.added_by_byte[pass][static_cast<uint8_t>(t.added[k].content[0])].push_back(k);
    t.any_added[pass] = true;
  }
  for (auto& by_byte : t.added_by_byte)
    for (auto& bucket : by_byte)
      std::stable_sort(bucket.begin(), bucket.end(), [&](size_t x, size_t y) {
        return t.added[x].content.size() > t.added[y].content.size();
      });
}

// The special tokens a TemplateProcessing `single` template puts around the sequence.
void template_processing(const Loader& L, const json& p, const std::string& path,
                         Tokenizer::Impl& t) {
  const json& single = L.need(p, "single", path + ".");
  if (!single.is_array()) L.fail(path + ".single", "must be an array");
  const json* specials = L.find(p, "special_tokens");
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = path + ".single[" + std::to_string(i) + "]";
    const json& piece = single[i];
    if (!piece.is_object()) L.fail(at, "must be an object");
    if (const json* seq = L.find(piece, "Sequence")) {
      if (!seq->is_object() || seq->value("id", "") != "A")
        L.fail(at, "a single-sequence template holds Sequence A only");
      if (seen_sequence) L.fail(at, "Sequence A appears twice");
      seen_sequence = true;
      continue;
    }
    const json* sp = L.find(piece, "SpecialToken");
    if (!sp || !sp->is_object() || !sp->contains("id"))
      L.fail(at, "must be a Sequence or a SpecialToken");
    const std::string name = L.str((*sp)["id"], at + ".SpecialToken.id");
    if (!specials || !specials->is_object() || !specials->contains(name))
      L.fail(path + ".special_tokens", "has no entry for " + json_quoted(name));
    const json& ids = L.need((*specials)[name], "ids", path + ".special_tokens." + name + ".");
    if (!ids.is_array()) L.fail(path + ".special_tokens." + name + ".ids", "must be an array");
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        L.fail(path + ".special_tokens." + name + ".ids", "must hold token ids");
      (seen_sequence ? t.special_suffix : t.special_prefix).push_back(id.get<int64_t>());
    }
  }
  if (!seen_sequence) L.fail(path + ".single", "has no Sequence A");
}

// post_processor: what encoding with special tokens adds around one sequence. ByteLevel adds
// nothing (offsets only); TemplateProcessing, BertProcessing and RobertaProcessing add their
// special tokens; Sequence chains them.
void parse_post_processor(const Loader& L, const json& p, const std::string& path,
                          Tokenizer::Impl& t) {
  const std::string type = L.type_of(p, path);
  if (type == "ByteLevel") return;
  if (type == "TemplateProcessing") return template_processing(L, p, path, t);
  if (type == "Sequence") {
    const json& list = L.need(p, "processors", path + ".");
    if (!list.is_array()) L.fail(path + ".processors", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_post_processor(L, list[i], path + ".processors[" + std::to_string(i) + "]", t);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const json& pair = L.need(p, key, path + ".");
      if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer())
        L.fail(path + "." + key, "must be [token, id]");
      (std::string(key) == "cls" ? t.special_prefix : t.special_suffix)
          .push_back(pair[1].get<int64_t>());
    }
    return;
  }
  L.fail(path + ".type", "unsupported post_processor " + json_quoted(type) +
                             " (Switchyard reads ByteLevel, TemplateProcessing, BertProcessing, "
                             "RobertaProcessing and Sequence)");
}

void parse_decoder(const Loader& L, const json& root, Tokenizer::Impl& t) {
  const json* dec = L.find(root, "decoder");
  if (!dec) L.fail("decoder", "missing");
  std::string type = L.type_of(*dec, "decoder");
  if (t.is_byte_level) {
    if (type != "ByteLevel")
      L.fail("decoder.type", "unsupported decoder " + json_quoted(type) +
                                 " for a byte-level BPE (Switchyard reads ByteLevel)");
    return;
  }
  if (type == "ByteLevel")
    L.fail("pre_tokenizer",
           "has no ByteLevel pre-tokenizer (last), which the ByteLevel decoder "
           "reads back");
  // A SentencePiece-style BPE: Metaspace, or tokenizers' Sequence of Replace(mark, " "),
  // ByteFallback, Fuse and Strip(" ") in that order (each optional but Fuse before Strip).
  CharDecoder& d = t.char_decoder;
  if (type == "Metaspace") {
    d.mark = L.str(L.need(*dec, "replacement", "decoder."), "decoder.replacement");
    const json* scheme = L.find(*dec, "prepend_scheme");
    const bool prepends =
        scheme ? *scheme != "never" : L.flag(*dec, "add_prefix_space", "decoder.", true);
    d.strip_left = prepends ? 1 : 0;
    return;
  }
  const json one = json::array({*dec});
  const json& list = type == "Sequence" ? L.need(*dec, "decoders", "decoder.") : one;
  if (!list.is_array()) L.fail("decoder.decoders", "must be an array");
  const std::vector<std::string> order = {"Replace", "ByteFallback", "Fuse", "Strip"};
  size_t next = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path =
        type == "Sequence" ? "decoder.decoders[" + std::to_string(i) + "]" : std::string("decoder");
    const std::string kind = L.type_of(list[i], path);
    size_t at = std::find(order.begin(), order.end(), kind) - order.begin();
    if (at == order.size() || at < next)
      L.fail(path + ".type", "unsupported decoder " + json_quoted(kind) +
                                 " here (a SentencePiece-style BPE's decoder is Replace, "
                                 "ByteFallback, Fuse, Strip in that order, or Metaspace)");
    next = at + 1;
    if (kind == "Replace") {
      const json& pat = L.need(list[i], "pattern", path + ".");
      if (!pat.is_object() || !pat.contains("String") ||
          L.str(L.need(list[i], "content", path + "."), path + ".content") != " ")
        L.fail(path, "must replace a literal with \" \", got " + list[i].dump());
      d.mark = L.str(pat["String"], path + ".pattern.String");
    } else if (kind == "Strip") {
      if (L.str(L.need(list[i], "content", path + "."), path + ".content") != " ")
        L.fail(path + ".content", "must be \" \"");
      for (auto [key, into] :
           {std::pair{"start", &d.strip_left}, std::pair{"stop", &d.strip_right}}) {
        const json& n = L.need(list[i], key, path + ".");
        // Either signedness: a parsed text stores 1 as unsigned, a built document (a GGUF
        // vocabulary's) as signed.
        if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 64)
          L.fail(path + "." + key, "must be a small count, got " + n.dump());
        *into = int(n.get<int64_t>());
      }
    } else if (kind == "ByteFallback") {
      d.byte_fallback = true;
    }
  }
  if (d.strip_left + d.strip_right > 0 && std::find_if(list.begin(), list.end(), [](const json& j) {
                                            return j.value("type", "") == "Fuse";
                                          }) == list.end())
    L.fail("decoder", "strips without Fuse before it (a Strip of each token) is not supported");
}

}  // namespace

Tokenizer Tokenizer::parse(const std::string& json_text, const std::string& file) {
  json root;
  try {
    root = parse_json_text(json_text, file);
  } catch (const Error& e) {
    throw Error(Errc::bad_tokenizer, "tokenizer " + file + " is invalid: " + e.message, e.where);
  }
  return from_document(root, file);
}

Tokenizer Tokenizer::from_document(const json& root, const std::string& file) {
  Loader L(file);
  if (!root.is_object()) L.fail("", "not a tokenizer.json: the top level must be an object");
  auto t = std::make_shared<Impl>();
  t->file = file;
  parse_pre_tokenizer(L, root, *t);
  parse_model(L, root, *t);
  if (t->is_byte_level && t->byte_fallback)
    L.fail("model.byte_fallback",
           "must be false with a ByteLevel pre-tokenizer (every byte has "
           "a token)");
  // Byte fallback spells a character without a token as its bytes' <0xNN> tokens; a vocabulary
  // without all 256 would leave some text with no ids at all.
  if (t->byte_fallback)
    for (int b = 0; b < 256; ++b)
      if (t->fallback_id[b] < 0)
        L.fail("model.byte_fallback", "is true, but the vocabulary has no " +
                                          byte_fallback_token(b) +
                                          " token (byte fallback needs "
                                          "all 256, <0x00> to <0xFF>)");
  parse_normalizer(L, root, *t);
  parse_added_tokens(L, root, *t);
  parse_decoder(L, root, *t);
  if (const json* post = L.find(root, "post_processor"))
    parse_post_processor(L, *post, "post_processor", *t);

  int64_t size = 0;
  for (const auto& [token, id] : t->vocab) size = std::max(size, id + 1);
  for (const AddedToken& a : t->added) size = std::max(size, a.id + 1);
  t->token_text.resize(size);
  t->token_bytes.resize(size);
  t->has_token.assign(size, false);
  std::unordered_map<int64_t, int> fallback_byte;  // <0xNN> ids, when the decoder reads them
  if (t->char_decoder.byte_fallback)
    for (int b = 0; b < 256; ++b)
      if (t->fallback_id[b] >= 0) fallback_byte[t->fallback_id[b]] = b;
  auto set = [&](int64_t id, const std::string& text) {
    t->token_text[id] = text;
    if (t->is_byte_level) {
      t->token_bytes[id] = byte_level_decode(text);
    } else if (auto it = fallback_byte.find(id); it != fallback_byte.end()) {
      t->token_bytes[id] = std::string(1, char(it->second));
    } else {
      t->token_bytes[id] = replace_all(text, t->char_decoder.mark, " ");
    }
    t->has_token[id] = true;
  };
  for (const auto& [token, id] : t->vocab) set(id, token);
  for (const AddedToken& a : t->added)
    set(a.id, a.content);  // added tokens win, as in the reference
  return Tokenizer(std::move(t));
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(Errc::bad_tokenizer, "tokenizer " + path + " is invalid: cannot read the file",
                path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

// ---- encoding -------------------------------------------------------------------------------

std::string Tokenizer::Impl::normalize(std::string_view text) const {
  std::string out(text);
  for (const NormalizerStep& step : normalizer)
    if (step.kind == NormalizerStep::replace)
      out = replace_all(out, step.pattern, step.content);
    else if (!out.empty())  // tokenizers' Prepend leaves an empty text empty
      out = step.content + out;
  return out;
}

void Tokenizer::Impl::encode_text(std::string_view text, int pass, std::vector<int64_t>& ids,
                                  std::span<const TextSpan> text_only, size_t base) const {
  if (pass == 2) return encode_pieces(text, base == 0, ids);  // (NFC is not applied)
  if (pass == 1 && !normalizer.empty()) {
    // Matched and cut in the normalized text, whose offsets are not the caller's: a protected
    // span anywhere in this segment protects all of it.
    const std::string normalized = normalize(text);
    bool touched = false;
    for (const TextSpan& t : text_only)
      touched |= base < t.offset + t.size && t.offset < base + text.size();
    const TextSpan all{base, normalized.size()};
    return match_added(normalized, pass, ids,
                       touched ? std::span<const TextSpan>(&all, 1) : std::span<const TextSpan>{},
                       base);
  }
  if (!any_added[pass]) return encode_text(text, pass + 1, ids, text_only, base);
  match_added(text, pass, ids, text_only, base);
}

void Tokenizer::Impl::match_added(std::string_view text, int pass, std::vector<int64_t>& ids,
                                  std::span<const TextSpan> text_only, size_t base) const {
  auto protected_at = [&](size_t start, size_t size) {
    for (const TextSpan& t : text_only)
      if (base + start < t.offset + t.size && t.offset < base + start + size) return true;
    return false;
  };
  const auto& buckets = added_by_byte[pass];
  size_t done = 0;  // text before this is encoded
  size_t pos = 0;   // where the search for the next match resumes
  auto word_char = [](std::string_view s, bool last) {
    std::vector<CodePoint> cps = code_points(s);
    if (cps.empty()) return false;
    uint32_t c = last ? cps.back().cp : cps.front().cp;
    return is_word_char(c);
  };
  while (pos < text.size()) {
    const AddedToken* hit = nullptr;
    size_t start = pos;
    for (; start < text.size() && !hit; ++start)
      for (size_t k : buckets[static_cast<uint8_t>(text[start])])
        if (text.compare(start, added[k].content.size(), added[k].content) == 0 &&
            !(added[k].special && protected_at(start, added[k].content.size()))) {
          hit = &added[k];
          break;
        }
    if (!hit) break;
    --start;
    size_t stop = start + hit->content.size();
    pos = stop;
    if (hit->single_word) {
      // Only in the middle of nothing: not right after or before a word character.
      size_t a = start >= 4 ? start - 4 : 0;
      bool before = start > 0 && word_char(text.substr(a, start - a), true);
      bool after = stop < text.size() && word_char(text.substr(stop, 4), false);
      if (before || after) continue;
    }
    if (hit->lstrip) {
      std::vector<CodePoint> cps = code_points(text.substr(done, start - done));
      size_t k = cps.size();
      while (k > 0 && is_space(cps[k - 1].cp)) --k;
      start = done + (k < cps.size() ? cps[k].offset : start - done);
    }
    if (hit->rstrip) {
      std::vector<CodePoint> cps = code_points(text.substr(stop));
      size_t k = 0;
      while (k < cps.size() && is_space(cps[k].cp)) ++k;
      stop += k < cps.size() ? cps[k].offset : text.size() - stop;
    }
    if (start > done)
      encode_text(text.substr(done, start - done), pass + 1, ids, text_only, base + done);
    ids.push_back(hit->id);
    done = stop;
    pos = std::max(pos, stop);
  }
  if (done < text.size()) encode_text(text.substr(done), pass + 1, ids, text_only, base + done);
}

void Tokenizer::Impl::encode_pieces(std::string_view text, bool first,
                                    std::vector<int64_t>& ids) const {
  std::vector<std::string> pieces{std::string(text)}, next;
  for (const Stage& st : stages) {
    next.clear();
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string& p = pieces[i];
      switch (st.kind) {
        case Stage::metaspace: {
          p = replace_all(p, " ", st.replacement);
          const bool prepend =
              st.prepend == Stage::always || (st.prepend == Stage::first && first && i == 0);
          if (prepend && !p.starts_with(st.replacement)) p.insert(0, st.replacement);
          if (st.regex)
            st.regex->split(p, SplitBehavior::merged_with_next, false, next);
          else
            next.push_back(std::move(p));
          break;
        }
        case Stage::split: st.regex->split(p, st.behavior, st.invert, next); break;
        case Stage::digits: split_digits(st.individual_digits, p, next); break;
        case Stage::byte_level:
          if (st.add_prefix_space && p.front() != ' ') p.insert(p.begin(), ' ');
          if (st.use_regex)
            st.regex->split(p, SplitBehavior::isolated, false, next);
          else
            next.push_back(std::move(p));
          break;
      }
    }
    pieces.swap(next);
  }
  for (const std::string& p : pieces) bpe(p, ids);
}

void Tokenizer::Impl::bpe(const std::string& piece, std::vector<int64_t>& ids) const {
  if (piece.size() > kCachedPieceBytes) return bpe_uncached(piece, ids);
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (auto it = cache.find(piece); it != cache.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> out;
  bpe_uncached(piece, out);
  ids.insert(ids.end(), out.begin(), out.end());
  std::lock_guard<std::mutex> lock(cache_mutex);
  if (cache.size() >= kCacheEntries) cache.clear();
  cache.emplace(piece, std::move(out));
}

// Merges the lowest-ranked adjacent pair first (leftmost among equals), like the reference:
// a heap of candidate merges over a linked list of symbols; stale entries are skipped.
void Tokenizer::Impl::bpe_uncached(const std::string& piece, std::vector<int64_t>& ids) const {
  if (ignore_merges) {
    if (auto it = vocab.find(is_byte_level ? byte_level(piece) : piece); it != vocab.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int64_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  auto add = [&](int64_t id) {
    if (id < 0) {
      if (!unk_id) return;  // dropped, as the reference does without an unk token
      if (fuse_unk && !sym.empty() && sym.back().id == *unk_id) return;
      id = *unk_id;
    }
    int k = static_cast<int>(sym.size());
    sym.push_back({id, k - 1, k + 1, true});
  };
  if (is_byte_level) {
    for (char ch : piece) add(byte_id[static_cast<uint8_t>(ch)]);
  } else {  // characters; one without a token as its bytes' <0xNN> (byte_fallback), or unk
    const std::vector<CodePoint> cps = code_points(piece);
    for (size_t i = 0; i < cps.size(); ++i) {
      const size_t end = i + 1 < cps.size() ? cps[i + 1].offset : piece.size();
      const std::string ch = piece.substr(cps[i].offset, end - cps[i].offset);
      if (auto it = vocab.find(ch); it != vocab.end()) {
        add(it->second);
        continue;
      }
      bool all = byte_fallback;
      for (char b : ch) all = all && fallback_id[static_cast<uint8_t>(b)] >= 0;
      if (!all) {
        add(-1);
        continue;
      }
      for (char b : ch) add(fallback_id[static_cast<uint8_t>(b)]);
    }
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Cand {
    int32_t rank;
    int pos;
    int64_t new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int left) {
    int right = sym[left].next;
    if (left < 0 || right < 0) return;
    auto it = merges.find(pair_key(sym[left].id, sym[right].id));
    if (it != merges.end()) heap.push({it->second.rank, left, it->second.new_id});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    auto it = merges.find(pair_key(left.id, sym[left.next].id));
    if (it == merges.end() || it->second.rank != c.rank || it->second.new_id != c.new_id)
      continue;  // the pair changed since this candidate was pushed
    Symbol& right = sym[left.next];
    right.alive = false;
    left.id = c.new_id;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
}

void Tokenizer::Impl::unknown_id(int64_t id) const {
  throw Error(Errc::bad_tokenizer,
              "tokenizer " + file + " is invalid: no token has id " + std::to_string(id) +
                  " (ids run from 0 to " + std::to_string(int64_t(token_text.size()) - 1) +
                  "); do the model and the tokenizer belong together?",
              file);
}

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  if (!text.empty()) impl_->encode_text(text, 0, ids);
  return ids;
}

std::vector<int64_t> Tokenizer::encode(std::string_view text,
                                       std::span<const TextSpan> text_only) const {
  std::vector<int64_t> ids;
  if (!text.empty()) impl_->encode_text(text, 0, ids, text_only);
  return ids;
}

std::vector<int64_t> Tokenizer::control_ids() const {
  std::vector<int64_t> out;
  for (const AddedToken& a : impl_->added)
    if (a.special) out.push_back(a.id);
  return out;
}

bool Tokenizer::has_token(int64_t id) const {
  return id >= 0 && id < int64_t(impl_->has_token.size()) && impl_->has_token[size_t(id)];
}

std::string Tokenizer::decode_token(int64_t id) const {
  if (id < 0 || id >= int64_t(impl_->has_token.size()) || !impl_->has_token[id])
    impl_->unknown_id(id);
  return impl_->token_bytes[id];
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (int64_t id : ids) bytes += decode_token(id);
  std::string out;
  out.reserve(bytes.size());
  append_lossy(out, bytes);
  if (!impl_->is_byte_level) {  // the decoder's Strip, on the fused text
    const CharDecoder& d = impl_->char_decoder;
    size_t left = 0, right = out.size();
    for (int i = 0; i < d.strip_left && left < right && out[left] == ' '; ++i) ++left;
    for (int i = 0; i < d.strip_right && right > left && out[right - 1] == ' '; ++i) --right;
    out = out.substr(left, right - left);
  }
  return out;
}

int64_t Tokenizer::vocab_size() const {
  return static_cast<int64_t>(impl_->token_text.size());
}

std::optional<int64_t> Tokenizer::token_id(std::string_view token) const {
  std::string t(token);
  if (auto it = impl_->added_ids.find(t); it != impl_->added_ids.end()) return it->second;
  if (auto it = impl_->vocab.find(t); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

const std::vector<int64_t>& Tokenizer::special_prefix() const {
  return impl_->special_prefix;
}
const std::vector<int64_t>& Tokenizer::special_suffix() const {
  return impl_->special_suffix;
}

const std::string& Tokenizer::file() const {
  return impl_->file;
}

nlohmann::json byte_level_bpe_document(const nlohmann::json& vocab, const nlohmann::json& merges,
                                       const std::vector<AddedTokenSpec>& added,
                                       const nlohmann::json& pre_tokenizer, bool ignore_merges) {
  using nlohmann::json;
  json tokens = json::array();
  for (const AddedTokenSpec& t : added)
    tokens.push_back({{"id", t.id},
                      {"content", t.content},
                      {"single_word", false},
                      {"lstrip", false},
                      {"rstrip", false},
                      {"normalized", t.normalized},
                      {"special", t.special}});
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", true},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", tokens},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

}  // namespace sy
