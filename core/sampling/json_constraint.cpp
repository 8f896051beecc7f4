#include "core/sampling/json_constraint.hpp"

#include <cmath>
#include <limits>

namespace sy {
namespace {

constexpr const char* kLiterals[] = {"true", "false", "null"};

bool blank(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool digit(unsigned char c) {
  return c >= '0' && c <= '9';
}
bool hex(unsigned char c) {
  return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

bool JsonMachine::feed(unsigned char c) {
  const JsonMachine before = *this;
  if (step(c)) return true;
  *this = before;
  return false;
}

bool JsonMachine::end_value() {
  if (depth_ == 0) {
    state_ = State::done;
    return true;
  }
  state_ = State::after;
  return true;
}

// A number ends at the first byte that cannot extend it; that byte is then read as what
// follows the value.
bool JsonMachine::end_number(unsigned char c) {
  if (depth_ == 0) {  // a top-level number (not object_only): whitespace ends it
    if (!blank(c)) return false;
    state_ = State::done;
    blanks_ = 1;
    return true;
  }
  end_value();
  return step(c);
}

bool JsonMachine::step(unsigned char c) {
  const bool ws = blank(c);
  switch (state_) {
    case State::value:
    case State::array_first:
    case State::object_key:
    case State::key:
    case State::colon:
    case State::after:
    case State::done:
      if (ws) {
        if (blanks_ >= kMaxBlanks) return false;
        ++blanks_;
        return true;
      }
      blanks_ = 0;
      break;
    default: break;
  }
  switch (state_) {
    case State::done: return false;
    case State::value:
      if (depth_ == 0 && object_only_ && c != '{') return false;
      if (c == '{' || c == '[') {
        if (depth_ >= kMaxDepth) return false;
        in_object_[depth_++] = c == '{';
        state_ = c == '{' ? State::object_key : State::array_first;
        return true;
      }
      if (c == '"') {
        key_string_ = false;
        state_ = State::string;
        return true;
      }
      if (c == '-') return state_ = State::minus, true;
      if (c == '0') return state_ = State::zero, true;
      if (c >= '1' && c <= '9') return state_ = State::integer, true;
      for (uint8_t i = 0; i < 3; ++i)
        if (c == kLiterals[i][0]) {
          literal_ = i, literal_at_ = 1, state_ = State::literal;
          return true;
        }
      return false;
    case State::array_first:
      if (c == ']') {
        --depth_;
        return end_value();
      }
      state_ = State::value;
      return step(c);
    case State::object_key:
    case State::key:
      if (c == '}' && state_ == State::object_key) {
        --depth_;
        return end_value();
      }
      if (c != '"') return false;
      key_string_ = true;
      state_ = State::string;
      return true;
    case State::colon:
      if (c != ':') return false;
      state_ = State::value;
      return true;
    case State::after:
      if (c == ',') {
        state_ = in_object_[depth_ - 1] ? State::key : State::value;
        return true;
      }
      if (c == (in_object_[depth_ - 1] ? '}' : ']')) {
        --depth_;
        return end_value();
      }
      return false;
    case State::string:
      if (utf8_left_ > 0) {
        if ((c & 0xC0) != 0x80) return false;
        --utf8_left_;
        return true;
      }
      if (c == '"') {
        if (key_string_) return state_ = State::colon, true;
        return end_value();
      }
      if (c == '\\') return state_ = State::escape, true;
      if (c < 0x20) return false;
      if (c < 0x80) return true;
      if (c >= 0xC2 && c <= 0xDF) return utf8_left_ = 1, true;
      if (c >= 0xE0 && c <= 0xEF) return utf8_left_ = 2, true;
      if (c >= 0xF0 && c <= 0xF4) return utf8_left_ = 3, true;
      return false;
    case State::escape:
      if (c == 'u') return state_ = State::hex1, true;
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
          c == 't')
        return state_ = State::string, true;
      return false;
    case State::hex1:
    case State::hex2:
    case State::hex3:
    case State::hex4:
      if (!hex(c)) return false;
      state_ = state_ == State::hex4 ? State::string : State(uint8_t(state_) + 1);
      return true;
    case State::minus:
      if (c == '0') return state_ = State::zero, true;
      if (c >= '1' && c <= '9') return state_ = State::integer, true;
      return false;
    case State::zero:
      if (c == '.') return state_ = State::dot, true;
      if (c == 'e' || c == 'E') return state_ = State::exponent, true;
      return end_number(c);
    case State::integer:
      if (digit(c)) return true;
      if (c == '.') return state_ = State::dot, true;
      if (c == 'e' || c == 'E') return state_ = State::exponent, true;
      return end_number(c);
    case State::dot:
      if (!digit(c)) return false;
      return state_ = State::fraction, true;
    case State::fraction:
      if (digit(c)) return true;
      if (c == 'e' || c == 'E') return state_ = State::exponent, true;
      return end_number(c);
    case State::exponent:
      if (c == '+' || c == '-') return state_ = State::exponent_sign, true;
      if (digit(c)) return state_ = State::exponent_digits, true;
      return false;
    case State::exponent_sign:
      if (!digit(c)) return false;
      return state_ = State::exponent_digits, true;
    case State::exponent_digits:
      if (digit(c)) return true;
      return end_number(c);
    case State::literal: {
      const char* word = kLiterals[literal_];
      if (c != static_cast<unsigned char>(word[literal_at_])) return false;
      if (word[++literal_at_] == '\0') return end_value();
      return true;
    }
  }
  return false;
}

int64_t JsonConstraint::mask(std::span<float> logits) const {
  const float none = -std::numeric_limits<float>::infinity();
  const TokenTable& t = *table_;
  // The machine after each first byte, and whether it took it.
  JsonMachine after[256] = {};
  bool first_ok[256];
  for (int c = 0; c < 256; ++c) {
    after[c] = machine_;
    first_ok[c] = !machine_.complete() && after[c].step(static_cast<unsigned char>(c));
  }
  int64_t left = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (logits[id] == none) continue;
    const std::string* bytes = id < t.bytes.size() ? &t.bytes[id] : nullptr;
    bool ok = bytes && !t.control[id] && !bytes->empty() &&
              first_ok[static_cast<unsigned char>((*bytes)[0])];
    if (ok && bytes->size() > 1) {
      JsonMachine m = after[static_cast<unsigned char>((*bytes)[0])];
      for (size_t i = 1; i < bytes->size() && ok; ++i)
        ok = !m.complete() && m.step(static_cast<unsigned char>((*bytes)[i]));
    }
    if (ok)
      ++left;
    else
      logits[id] = none;
  }
  return left;
}

void JsonConstraint::accept(int64_t id) {
  for (unsigned char c : table_->bytes[size_t(id)]) machine_.feed(c);
}

}  // namespace sy
