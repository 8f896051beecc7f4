#include "core/json/json_text.hpp"

#include <vector>

namespace sy {

std::string line_column(const std::string& text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n')
      ++line, col = 1;
    else
      ++col;
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

size_t first_invalid_utf8(std::string_view text) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = b[i];
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the second byte's range (the first byte narrows it)
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || b[i + 1] < lo || b[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (b[i + k] < 0x80 || b[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string_view::npos;
}

namespace {

// Follows the containers the SAX parser opens: the stack at the point the text stops is the
// path to the value being read there.
class PathTracker : public nlohmann::json::json_sax_t {
 public:
  std::string path() const {
    std::string out;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      const bool top = i + 1 == frames_.size();
      if (f.array) {
        out += "[" + std::to_string(top ? f.next : f.next - 1) + "]";
      } else if (!(top && f.between)) {
        out += (out.empty() ? "" : ".") + f.key;
      }
    }
    return out;
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t& k) override {
    frames_.back().key = k;
    frames_.back().between = false;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool array = false;
    int64_t next = 0;     // an array's: the index of the element that begins next
    std::string key;      // an object's: its last key
    bool between = true;  // an object's: no key read since its last value
  };
  // A value began (a container) or ended (a scalar) inside the innermost container.
  void element() {
    if (frames_.empty()) return;
    if (frames_.back().array)
      ++frames_.back().next;
    else
      frames_.back().between = true;
  }
  bool value() {
    element();
    return true;
  }
  bool open(bool array) {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().next;
    frames_.push_back({array, 0, "", true});
    return true;
  }
  bool close() {
    frames_.pop_back();
    if (!frames_.empty() && !frames_.back().array) frames_.back().between = true;
    return true;
  }
  std::vector<Frame> frames_;
};

}  // namespace

std::string json_path_at(const std::string& text, size_t offset) {
  PathTracker tracker;
  nlohmann::json::sax_parse(text.substr(0, std::min(offset, text.size())), &tracker);
  return tracker.path();
}

nlohmann::json parse_json_text(const std::string& text, const std::string& file) {
  using nlohmann::json;
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(Errc::json_syntax, std::string("invalid JSON: ") + e.what(),
                file + ":" + line_column(text, e.byte == 0 ? 0 : e.byte - 1));
  } catch (const json::exception& e) {  // e.g. a number too large for any JSON number type
    throw Error(Errc::json_syntax, std::string("invalid JSON: ") + e.what(), file);
  }
}

}  // namespace sy
