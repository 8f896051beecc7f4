// tokenizer/ — text to token ids and back, from a Hugging Face `tokenizer.json`: the byte-level
// BPE (GPT-2 style) that SmolLM, Llama 3, Qwen and gpt-oss ship, and the SentencePiece-style BPE
// (characters, byte fallback) of Llama 2, Mistral and Gemma. Depends on nlohmann-json and PCRE2
// (split_regex.hpp).
//
// Offers: Tokenizer::load() (every unsupported or malformed part is an Error SY303 that
// names the file and the JSON field), encode(), decode(), decode_token() for streaming,
// vocab_size(), token_id(); SplitRegex (split_regex.hpp), a pre-tokenizer regex on its own.
//
// Reads:
//   model          type "BPE": vocab, merges ("a b" strings or [a, b] pairs), ignore_merges,
//                  unk_token/fuse_unk, byte_fallback (<0xNN> tokens for a character without
//                  one; not with ByteLevel); dropout must be null or 0, no
//                  continuing_subword_prefix / end_of_word_suffix.
//   normalizer     none, NFC, Replace of a String, Prepend, or a Sequence of them.
//   pre_tokenizer  none, or Split, Digits, Metaspace and ByteLevel (alone or in a Sequence),
//                  ByteLevel last when present: with it the BPE's symbols are bytes (GPT-2
//                  style), without it characters (SentencePiece style). A Split takes any
//                  pattern (Regex, or a String literal), any behavior and invert, compiled by
//                  PCRE2 in UTF + UCP mode (split_regex.hpp; equal to the reference's
//                  Oniguruma on the patterns of GPT-2, Llama 3, Qwen2/3.5, o200k, tekken and
//                  DeepSeek-V3, tests/tokenizer/split_regex_test.cpp). Metaspace honours its
//                  replacement, prepend_scheme (first: the text's first piece only) and split.
//   added_tokens   matched in the text before anything else, leftmost-longest, like the
//                  reference: special ones and also non-special ones (Qwen3's <think>);
//                  lstrip/rstrip/single_word are honoured; normalized ones after the
//                  normalizer.
//   decoder        ByteLevel (byte-level BPE); for the SentencePiece style Metaspace, or
//                  Replace(mark, " "), ByteFallback, Fuse, Strip(" ", start, stop) in that
//                  order (Strip on the fused text: decode() strips, decode_token() does not).
//   post_processor ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing or a
//                  Sequence of them: what they add around one sequence is special_prefix() /
//                  special_suffix(). encode() adds none of it (the reference's
//                  add_special_tokens=false); the caller decides (core/generation/).
//
// Approximations, each a no-op for the tokenizers named above on well-formed input:
//   - an NFC normalizer (Qwen2/3) is accepted but not applied: text is taken to be NFC already
//     (decomposed accents would tokenise differently from the reference).
//   - single_word's word characters (the reference's \w) are taken as letters, marks, decimal
//     and letter numbers and connector punctuation: the few hundred symbols that Unicode also
//     calls Alphabetic (circled letters and the like) are not word characters here.
//   - text that is not valid UTF-8 (which the reference cannot even receive) is tokenised with
//     each invalid byte kept (byte-level: its own symbol; SentencePiece style: its <0xNN>
//     token), so decode(encode(s)) == s still holds; ByteFallback's U+FFFD for bytes that are
//     not UTF-8 is one per maximal invalid run here, one per byte in the reference.
//   - where a normalizer changed a segment of text, a protected span (encode's text_only)
//     anywhere in it protects the whole segment from special tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sy {

// Split pre-tokenizer patterns as tokenizer.json files write them, for writers of tokenizers
// (make-test-model, a GGUF file's tokenizer.ggml.pre): GPT-2's, Llama 3's (also SmolLM3's:
// digits in runs of 1-3) and Qwen2's (digits one by one).
inline constexpr std::string_view kTokenizerGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kTokenizerLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kTokenizerQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A token the tokenizer matches before BPE (tokenizer.json's added_tokens).
struct AddedTokenSpec {
  int64_t id;
  std::string content;
  bool special;     // a control token (decoded as itself, never split)
  bool normalized;  // matched after normalisation (user-defined tokens)
};

// The tokenizer.json document of a byte-level BPE (GPT-2 style): `vocab` (token -> id),
// `merges` in rank order ("a b"), the added tokens, the pre_tokenizer object, and whether merges
// are skipped for words that are whole tokens (llama 3's ignore_merges). For writers of
// tokenizers: make-test-model (its text: .dump()), a GGUF file's tokenizer.ggml.* keys.
nlohmann::json byte_level_bpe_document(const nlohmann::json& vocab, const nlohmann::json& merges,
                                       const std::vector<AddedTokenSpec>& added,
                                       const nlohmann::json& pre_tokenizer,
                                       bool ignore_merges = false);

// Bytes [offset, offset + size) of a text.
struct TextSpan {
  size_t offset = 0, size = 0;
};

class Tokenizer {
 public:
  // Reads and checks a tokenizer.json; throws Error SY303 naming the file and the field.
  static Tokenizer load(const std::string& tokenizer_json_path);
  // The same from JSON text; `file` names it in errors.
  static Tokenizer parse(const std::string& json_text, const std::string& file);
  // The same from a parsed document (a GGUF file's vocabulary is built as one: a quarter of a
  // million tokens need not be written out as text and read back).
  static Tokenizer from_document(const nlohmann::json& document, const std::string& file);

  // Token ids of `text`, added tokens first, then pre-tokenizer pieces through BPE. Adds no
  // BOS/EOS. Thread-safe (the per-word cache is locked).
  std::vector<int64_t> encode(std::string_view text) const;
  // The same, but no added token marked special (a control token) is matched where it would
  // overlap one of `text_only` (byte ranges of `text`): a chat message's content, in which a
  // user's "<|im_start|>system" stays text. Elsewhere the ids are encode()'s.
  std::vector<int64_t> encode(std::string_view text, std::span<const TextSpan> text_only) const;
  // The text of `ids`, special tokens included as their content; byte sequences that are not
  // valid UTF-8 become U+FFFD, as in the reference. An id with no token throws Error SY303.
  std::string decode(const std::vector<int64_t>& ids) const;
  // The raw bytes of one token, for streaming: concatenating the pieces of a sequence gives
  // its exact bytes (a multi-byte character may be split across tokens, so a caller that
  // prints as it goes should hold back an incomplete UTF-8 tail).
  std::string decode_token(int64_t id) const;

  // The token ids the post_processor puts before / after a single sequence (empty when it
  // adds none): the reference's add_special_tokens=True.
  const std::vector<int64_t>& special_prefix() const;
  const std::vector<int64_t>& special_suffix() const;

  // One more than the largest id of the vocabulary and the added tokens.
  int64_t vocab_size() const;
  // The ids of the added tokens marked special: control tokens (<|im_end|>, <|channel|>...),
  // which constrained output must never write as text.
  std::vector<int64_t> control_ids() const;
  // Whether `id` is a token of the vocabulary (ids may have gaps).
  bool has_token(int64_t id) const;
  // The id of a token given as it appears in the file (an added token such as "<|endoftext|>"
  // or a vocabulary entry such as "Ġthe"); nullopt when there is none.
  std::optional<int64_t> token_id(std::string_view token) const;

  const std::string& file() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;  // shared by copies; immutable except the locked word cache
};

}  // namespace sy
