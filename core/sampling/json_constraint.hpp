// Output constrained to JSON (response_format json_object): at each step, every token whose
// bytes cannot continue a valid JSON text (RFC 8259: UTF-8, no control characters in strings,
// numbers, literals, nesting) is masked out before the sampler sees the logits, so what the
// model writes is always a prefix of a valid document, and the stream ends the moment the
// top-level value is complete. Control tokens (an added token marked special) are never
// allowed inside; an EOS is never needed.
//
// Bounds, so a model cannot loop forever inside the rules: at most 32 levels of nesting and 32
// bytes of whitespace in a row outside strings (llama.cpp's json grammar bounds its
// whitespace too).
//
// The mask is computed over the whole vocabulary each step: the machine after each of the 256
// possible first bytes is made once, a token whose first byte is refused costs a table look-up,
// and the others feed their remaining bytes to a copy (a few dozen bytes of state). A tokenizer
// trie and a per-state cache (XGrammar) are the next step, with JSON schemas.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace sy {

// An incremental recognizer of a JSON text's bytes.
class JsonMachine {
 public:
  static constexpr int kMaxDepth = 32, kMaxBlanks = 32;
  // `object_only`: the top-level value must be an object (OpenAI's json_object).
  explicit JsonMachine(bool object_only = true) : object_only_(object_only) {}
  // Feeds one byte; false (and the machine unchanged) when it cannot continue a valid text.
  bool feed(unsigned char c);
  // A whole top-level value has been read. (A top-level number is complete only once a byte
  // ends it; with object_only there is none.)
  bool complete() const { return state_ == State::done; }

 private:
  friend class JsonConstraint;  // steps copies it throws away, without feed()'s undo
  enum class State : uint8_t {
    value,        // a value must start (whitespace first)
    array_first,  // after '[': a value or ']'
    object_key,   // after '{': a key or '}'
    key,          // after ',' in an object: a key
    colon,        // after a key: ':'
    after,        // after a value in a container: ',' or the closer
    string,
    escape,
    hex1,
    hex2,
    hex3,
    hex4,
    minus,
    zero,
    integer,
    dot,
    fraction,
    exponent,
    exponent_sign,
    exponent_digits,
    literal,  // inside true / false / null
    done,
  };
  bool step(unsigned char c);
  bool end_value();  // a value ended: where the machine goes next
  bool end_number(unsigned char c);

  bool object_only_;
  State state_ = State::value;
  uint8_t depth_ = 0;
  bool key_string_ = false;               // the string being read is an object's key
  uint8_t utf8_left_ = 0;                 // continuation bytes the current character still needs
  uint8_t blanks_ = 0;                    // whitespace bytes in a row
  uint8_t literal_ = 0, literal_at_ = 0;  // which of true/false/null, and bytes read
  bool in_object_[kMaxDepth] = {};        // per level: object (true) or array
};

// The vocabulary as the constraint reads it: each token's bytes, and which ids are control
// tokens. Built once per model and shared.
struct TokenTable {
  std::vector<std::string> bytes;
  std::vector<bool> control;
};

class JsonConstraint {
 public:
  explicit JsonConstraint(std::shared_ptr<const TokenTable> table, bool object_only = true)
      : table_(std::move(table)), machine_(object_only) {}
  // Sets to -infinity every logit whose token cannot come next. Returns how many remain.
  int64_t mask(std::span<float> logits) const;
  // The token the sampler picked (one that mask() left).
  void accept(int64_t id);
  bool complete() const { return machine_.complete(); }

 private:
  std::shared_ptr<const TokenTable> table_;
  JsonMachine machine_;
};

}  // namespace sy
