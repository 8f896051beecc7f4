// Python semantics for template values (template_value.hpp).
#include "core/chat_template/template_value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace sy::chat {

Value Value::undefined(std::string what) {
  Value v;
  v.s = std::move(what);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::none;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.kind = Kind::boolean;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.kind = Kind::integer;
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v;
  v.kind = Kind::number;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.kind = Kind::string;
  v.s = std::move(x);
  return v;
}
Value Value::make_list(List x) {
  Value v;
  v.kind = Kind::list;
  v.list = std::make_shared<const List>(std::move(x));
  return v;
}
Value Value::make_dict(Dict x) {
  Value v;
  v.kind = Kind::dict;
  v.dict = std::make_shared<const Dict>(std::move(x));
  return v;
}

double Value::as_double() const {
  switch (kind) {
    case Kind::boolean: return b ? 1 : 0;
    case Kind::integer: return double(i);
    case Kind::number: return f;
    default: return 0;
  }
}

const Value* Value::find(const Value& key) const {
  if (kind != Kind::dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (equal(k, key)) return &v;
  return nullptr;
}

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k.kind == Kind::string && k.s == key) return &v;
  return nullptr;
}

const char* type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "undefined";
    case Value::Kind::none: return "NoneType";
    case Value::Kind::boolean: return "bool";
    case Value::Kind::integer: return "int";
    case Value::Kind::number: return "float";
    case Value::Kind::string: return "str";
    case Value::Kind::list: return "list";
    case Value::Kind::dict: return "dict";
    case Value::Kind::ns: return "Namespace";
    case Value::Kind::macro: return "Macro";
    case Value::Kind::function: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return false;
    case Value::Kind::boolean: return v.b;
    case Value::Kind::integer: return v.i != 0;
    case Value::Kind::number: return v.f != 0;
    case Value::Kind::string: return !v.s.empty();
    case Value::Kind::list: return !v.list->empty();
    case Value::Kind::dict: return !v.dict->empty();
    case Value::Kind::ns:
    case Value::Kind::macro:
    case Value::Kind::function: return true;
  }
  return false;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_numeric() && b.is_numeric()) {
    if (a.kind != Value::Kind::number && b.kind != Value::Kind::number)
      return (a.kind == Value::Kind::boolean ? int64_t(a.b) : a.i) ==
             (b.kind == Value::Kind::boolean ? int64_t(b.b) : b.i);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.s == b.s;
    case Value::Kind::list:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Kind::dict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* other = b.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    case Value::Kind::ns: return a.ns == b.ns;
    case Value::Kind::macro: return a.macro == b.macro;
    case Value::Kind::function: return a.s == b.s;
    default: return false;
  }
}

bool less(const Value& a, const Value& b, bool& ok) {
  ok = true;
  if (a.is_numeric() && b.is_numeric()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.s < b.s;  // UTF-8 byte order is code point order
  if (a.kind == Value::Kind::list && b.kind == Value::Kind::list) {
    const List &x = *a.list, &y = *b.list;
    for (size_t k = 0; k < std::min(x.size(), y.size()); ++k) {
      if (equal(x[k], y[k])) continue;
      return less(x[k], y[k], ok);
    }
    return x.size() < y.size();
  }
  ok = false;
  return false;
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Python: the shortest round-trip digits, positional for exponents in [-4, 16).
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, end);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(size_t(-exp - 1), '0') + digits;
    } else if (size_t(exp) + 1 >= digits.size()) {
      out = digits + std::string(size_t(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, size_t(exp) + 1) + "." + digits.substr(size_t(exp) + 1);
    }
  } else {
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out = digits.substr(0, 1);
    if (digits.size() > 1) out.append(1, '.').append(digits, 1);
    out += eb;
  }
  return neg ? "-" + out : out;
}

namespace {

std::string repr_string(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += char(c);
    }
  }
  return out + q;
}

}  // namespace

std::string str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "";
    case Value::Kind::string: return v.s;
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return "";
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.b ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.i);
    case Value::Kind::number: return float_repr(v.f);
    case Value::Kind::string: return repr_string(v.s);
    case Value::Kind::list: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      return out + "]";
    }
    case Value::Kind::dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : *v.dict) {
        out += (first ? "" : ", ") + repr(k) + ": " + repr(x);
        first = false;
      }
      return out + "}";
    }
    case Value::Kind::ns: {
      std::string out = "<Namespace {";
      for (size_t k = 0; k < v.ns->attrs.size(); ++k)
        out += (k ? ", " : "") + repr_string(v.ns->attrs[k].first) + ": " +
               repr(v.ns->attrs[k].second);
      return out + "}>";
    }
    case Value::Kind::macro: return "<Macro>";
    case Value::Kind::function: return "<built-in function " + v.s + ">";
  }
  return "";
}

namespace {

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t k = 0; k < s.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char b[16];
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else if (c >= 0x80 && ensure_ascii) {
      // Decode one UTF-8 sequence; write it as \uXXXX (a surrogate pair above the BMP).
      int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      uint32_t cp = c & (0xFF >> (len + 1));
      for (int j = 1; j < len && k + 1 < s.size(); ++j) cp = (cp << 6) | (s[++k] & 0x3F);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(b, sizeof b, "\\u%04x", cp);
      }
      out += b;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

bool json_value(const Value& v, const JsonOptions& o, int level, std::string& out) {
  const std::string item_sep = !o.item_separator.empty() ? o.item_separator
                               : o.indent >= 0           ? ","
                                                         : ", ";
  const std::string key_sep = !o.key_separator.empty() ? o.key_separator : ": ";
  auto newline = [&](int lvl) {
    if (o.indent < 0) return;
    out += '\n';
    out.append(size_t(o.indent * lvl), ' ');
  };
  switch (v.kind) {
    case Value::Kind::none: out += "null"; return true;
    case Value::Kind::boolean: out += v.b ? "true" : "false"; return true;
    case Value::Kind::integer: out += std::to_string(v.i); return true;
    case Value::Kind::number:
      out += std::isnan(v.f)   ? "NaN"
             : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity")
                               : float_repr(v.f);
      return true;
    case Value::Kind::string: json_string(v.s, o.ensure_ascii, out); return true;
    case Value::Kind::list:
      if (v.list->empty()) {
        out += "[]";
        return true;
      }
      out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        if (!json_value((*v.list)[k], o, level + 1, out)) return false;
      }
      newline(level);
      out += "]";
      return true;
    case Value::Kind::dict: {
      if (v.dict->empty()) {
        out += "{}";
        return true;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* x, auto* y) { return str(x->first) < str(y->first); });
      out += "{";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(level + 1);
        const Value& key = items[k]->first;
        if (key.is_string())
          json_string(key.s, o.ensure_ascii, out);
        else if (key.kind == Value::Kind::none)
          out += "\"null\"";
        else if (key.kind == Value::Kind::boolean)
          out += key.b ? "\"true\"" : "\"false\"";
        else if (key.is_numeric())
          out.append(1, '"').append(repr(key)).append(1, '"');
        else
          return false;
        out += key_sep;
        if (!json_value(items[k]->second, o, level + 1, out)) return false;
      }
      newline(level);
      out += "}";
      return true;
    }
    default: return false;
  }
}

}  // namespace

bool to_json_text(const Value& v, const JsonOptions& options, std::string& out) {
  out.clear();
  return json_value(v, options, 0, out);
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return j.get<uint64_t>() > uint64_t(INT64_MAX) ? Value::number(j.get<double>())
                                                     : Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(from_json(e));
      return Value::make_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.emplace_back(Value::string(k), from_json(e));
      return Value::make_dict(std::move(d));
    }
    default: return Value::none();
  }
}

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    len = std::min(len, s.size() - k);
    out.push_back(s.substr(k, len));
    k += len;
  }
  return out;
}

}  // namespace sy::chat
