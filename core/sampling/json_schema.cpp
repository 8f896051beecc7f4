// JSON Schema → GBNF (json_schema.hpp).
#include "core/sampling/json_schema.hpp"

#include <cstdio>
#include <map>
#include <set>
#include <vector>

namespace sy {
namespace {

using Json = nlohmann::ordered_json;

// ---- GBNF text ----

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string gbnf_code_point(uint32_t cp) {
  char buf[16];
  if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
    return std::string(1, char(cp));
  if (cp < 0x80)
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp <= 0xFFFF)
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

// {m,n} (n < 0: unbounded) as GBNF, after an item.
std::string repeat(int64_t m, int64_t n) {
  if (m == 0 && n < 0) return "*";
  if (m == 1 && n < 0) return "+";
  if (m == 0 && n == 1) return "?";
  if (m == n) return "{" + std::to_string(m) + "}";
  return "{" + std::to_string(m) + "," + (n < 0 ? "" : std::to_string(n)) + "}";
}

std::string pointer_token(const std::string& key) {  // RFC 6901 escaping
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// The rules a generated grammar may call, with their bodies and what they call.
struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> needs;
};
const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> kAll = {
      {"ws", R"(( " " | "\n" [ \t]{0,20} )?)", {}},
      {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,19} ))", {}},
      {"number",
       R"("-"? ( "0" | [1-9] [0-9]{0,19} ) ( "." [0-9]{1,20} )? ( [eE] [-+]? [0-9]{1,2} )?)",
       {}},
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
      {"value",
       "object | array | string | number | boolean | null",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object",
       R"("{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}")",
       {"ws", "string", "value"}},
      {"array", R"("[" ws ( value ws ( "," ws value ws )* )? "]")", {"ws", "value"}},
      {"date",
       R"([0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ))",
       {}},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"uuid",
       R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})",
       {}},
  };
  return kAll;
}

const std::set<std::string>& annotations() {
  static const std::set<std::string> kAll = {"title",    "description", "default",  "examples",
                                             "$schema",  "$id",         "$comment", "deprecated",
                                             "readOnly", "writeOnly",   "$defs",    "definitions"};
  return kAll;
}

// Keywords we refuse, with why (the rest of the unknown ones get a generic reason).
const std::map<std::string, std::string>& refused() {
  static const std::map<std::string, std::string> kAll = {
      {"oneOf", "exactly-one-of cannot be enforced while writing (use anyOf)"},
      {"not", "a negated schema cannot be enforced while writing"},
      {"if", "conditional schemas are not served"},
      {"then", "conditional schemas are not served"},
      {"else", "conditional schemas are not served"},
      {"minimum", "numeric bounds are not served"},
      {"maximum", "numeric bounds are not served"},
      {"exclusiveMinimum", "numeric bounds are not served"},
      {"exclusiveMaximum", "numeric bounds are not served"},
      {"multipleOf", "multipleOf is not served"},
      {"uniqueItems", "unique items cannot be enforced by a grammar"},
      {"prefixItems", "tuples (prefixItems) are not served"},
      {"contains", "contains is not served"},
      {"patternProperties", "patternProperties is not served"},
      {"propertyNames", "propertyNames is not served"},
      {"minProperties", "minProperties is not served"},
      {"maxProperties", "maxProperties is not served"},
      {"dependentRequired", "dependentRequired is not served"},
      {"dependentSchemas", "dependentSchemas is not served"},
      {"unevaluatedProperties", "unevaluatedProperties is not served"},
      {"unevaluatedItems", "unevaluatedItems is not served"},
      {"contentEncoding", "contentEncoding is not served"},
      {"contentMediaType", "contentMediaType is not served"},
  };
  return kAll;
}

const std::set<std::string>& served() {
  static const std::set<std::string> kAll = {"type",       "enum",      "const",
                                             "anyOf",      "allOf",     "$ref",
                                             "properties", "required",  "additionalProperties",
                                             "items",      "minItems",  "maxItems",
                                             "minLength",  "maxLength", "pattern",
                                             "format"};
  return kAll;
}

}  // namespace

class JsonGrammarBuilder::SchemaCompiler {
 public:
  SchemaCompiler() {
    for (const Primitive& p : primitives()) names_.insert(p.name);
    names_.insert("root");
  }

  std::string add(const Json& schema, const std::string& hint) {
    root_ = &schema;
    ++scope_;
    const std::string body = visit(schema, "", hint);
    return add_rule(hint, body);
  }

  void rule(const std::string& name, const std::string& body) {
    if (names_.count(name) && (name != "root" || root_taken_))
      throw std::logic_error("JsonGrammarBuilder: rule `" + name + "` exists");
    root_taken_ = root_taken_ || name == "root";
    names_.insert(name);
    rules_.emplace_back(name, body);
  }

  std::string gbnf() const {
    std::string out;
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    for (const Primitive& p : primitives())
      if (needed_.count(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& ptr, const std::string& message) {
    throw SchemaError(ptr, message);
  }

  std::string need(const std::string& name) {
    if (needed_.insert(name).second)
      for (const Primitive& p : primitives())
        if (name == p.name)
          for (const char* dep : p.needs) need(dep);
    return name;
  }

  // A fresh rule name from a hint (GBNF names: letters, digits, '-').
  std::string fresh(const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (base.empty()) base = "rule";
    if (base.size() > 48) base.resize(48);
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = base + "-" + std::to_string(i);
    names_.insert(name);
    return name;
  }
  std::string add_rule(const std::string& hint, const std::string& body) {
    const std::string name = fresh(hint);
    rules_.emplace_back(name, body);
    return name;
  }

  void check_keywords(const Json& s, const std::string& ptr) {
    for (const auto& [key, value] : s.items()) {
      if (annotations().count(key) || served().count(key)) continue;
      const auto why = refused().find(key);
      fail(ptr + "/" + pointer_token(key),
           "keyword `" + key + "` is not served: " +
               (why != refused().end() ? why->second
                                       : std::string("it is not a keyword of the served subset "
                                                     "(docs/serve.md)")));
    }
  }

  // `s` may hold only annotations besides `keyword`.
  void alone(const Json& s, const std::string& ptr, const std::string& keyword) {
    for (const auto& [key, value] : s.items())
      if (key != keyword && !annotations().count(key))
        fail(ptr + "/" + pointer_token(key),
             "`" + key + "` beside `" + keyword + "` is not served");
  }

  std::string visit(const Json& s, const std::string& ptr, const std::string& hint) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(ptr, "the false schema admits no value");
      return need("value");
    }
    if (!s.is_object()) fail(ptr, "a schema must be an object or a boolean");
    check_keywords(s, ptr);
    if (s.contains("$ref")) {
      alone(s, ptr, "$ref");
      return reference(s["$ref"], ptr + "/$ref");
    }
    if (s.contains("const")) {
      alone(s, ptr, "const");
      return gbnf_literal(s["const"].dump());
    }
    if (s.contains("enum")) return enumeration(s, ptr);
    if (s.contains("anyOf")) return any_of(s, ptr, hint);
    if (s.contains("allOf")) {
      alone(s, ptr, "allOf");
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1)
        fail(ptr + "/allOf", "allOf is served with exactly one schema");
      return visit(all[0], ptr + "/allOf/0", hint);
    }
    return typed(s, ptr, hint);
  }

  std::string enumeration(const Json& s, const std::string& ptr) {
    for (const auto& [key, value] : s.items())
      if (key != "enum" && key != "type" && !annotations().count(key))
        fail(ptr + "/" + pointer_token(key), "`" + key + "` beside `enum` is not served");
    const Json& values = s["enum"];
    if (!values.is_array() || values.empty()) fail(ptr + "/enum", "enum must be a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < values.size(); ++i)
      out += (i ? " | " : " ") + gbnf_literal(values[i].dump());
    return out + " )";
  }

  std::string any_of(const Json& s, const std::string& ptr, const std::string& hint) {
    alone(s, ptr, "anyOf");
    const Json& branches = s["anyOf"];
    if (!branches.is_array() || branches.empty())
      fail(ptr + "/anyOf", "anyOf must be a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < branches.size(); ++i)
      out += (i ? " | " : " ") + visit(branches[i], ptr + "/anyOf/" + std::to_string(i),
                                       hint + "-" + std::to_string(i));
    return out + " )";
  }

  std::string reference(const Json& ref, const std::string& ptr) {
    if (!ref.is_string()) fail(ptr, "$ref must be a string");
    const std::string target = ref.get<std::string>();
    if (target.empty() || target[0] != '#')
      fail(ptr, "$ref `" + target + "`: only references within the schema (#…) are served");
    const std::string key = std::to_string(scope_) + target;  // refs are per added schema
    if (const auto known = refs_.find(key); known != refs_.end()) return known->second;
    const std::string pointer = target.substr(1);
    const Json* found = nullptr;
    try {
      found = &root_->at(Json::json_pointer(pointer));
    } catch (const std::exception&) {
      fail(ptr, "$ref `" + target + "` points at nothing in the schema");
    }
    const size_t slash = pointer.rfind('/');
    const std::string name =
        fresh(slash == std::string::npos ? "root-ref" : pointer.substr(slash + 1));
    refs_[key] = name;
    const size_t at = rules_.size();
    rules_.emplace_back(name, "");  // reserved first: the schema may refer to itself
    rules_[at].second = visit(*found, pointer, name);
    return name;
  }

  std::string typed(const Json& s, const std::string& ptr, const std::string& hint) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& one : t) {
          if (!one.is_string()) fail(ptr + "/type", "type must name types");
          types.push_back(one.get<std::string>());
        }
      } else {
        fail(ptr + "/type", "type must be a type's name or a non-empty list of them");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") ||
               s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
               s.contains("maxLength")) {
      types.push_back("string");
    } else {
      return need("value");
    }
    std::string out = types.size() > 1 ? "(" : "";
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string& t = types[i];
      out += i ? " | " : "";
      if (t == "null" || t == "boolean" || t == "integer" || t == "number")
        out += need(t);
      else if (t == "string")
        out += string(s, ptr, hint);
      else if (t == "array")
        out += array(s, ptr, hint);
      else if (t == "object")
        out += object(s, ptr, hint);
      else
        fail(ptr + "/type", "`" + t + "` is not a JSON Schema type");
    }
    return out + (types.size() > 1 ? " )" : "");
  }

  static int64_t count(const Json& s, const char* key, int64_t absent, const std::string& ptr) {
    if (!s.contains(key)) return absent;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000)
      fail(ptr + "/" + key, std::string(key) + " must be an integer in [0, 10000]");
    return v.get<int64_t>();
  }

  std::string string(const Json& s, const std::string& ptr, const std::string& hint) {
    const int64_t lo = count(s, "minLength", 0, ptr), hi = count(s, "maxLength", -1, ptr);
    if (hi >= 0 && hi < lo) fail(ptr + "/maxLength", "maxLength is below minLength");
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      const Json& f = s["format"];
      const std::string name = f.is_string() ? f.get<std::string>() : "";
      if (name != "date" && name != "time" && name != "date-time" && name != "uuid")
        fail(ptr + "/format", "format `" + (f.is_string() ? name : f.dump()) +
                                  "` is not served (date, time, date-time and uuid are)");
      if (s.contains("pattern") || lengths)
        fail(ptr + "/format", "format beside pattern, minLength or maxLength is not served");
      return "\"\\\"\" " + need(name) + " \"\\\"\"";
    }
    if (s.contains("pattern")) {
      if (lengths) fail(ptr + "/pattern", "pattern beside minLength or maxLength is not served");
      if (!s["pattern"].is_string()) fail(ptr + "/pattern", "pattern must be a string");
      return add_rule(hint + "-pattern",
                      pattern(s["pattern"].get<std::string>(), ptr + "/pattern"));
    }
    if (!lengths) return need("string");
    need("char");
    return "\"\\\"\" char" + repeat(lo, hi) + " \"\\\"\"";
  }

  std::string array(const Json& s, const std::string& ptr, const std::string& hint) {
    const int64_t lo = count(s, "minItems", 0, ptr), hi = count(s, "maxItems", -1, ptr);
    if (hi >= 0 && hi < lo) fail(ptr + "/maxItems", "maxItems is below minItems");
    if (s.contains("items") && s["items"].is_array())
      fail(ptr + "/items", "items as a list (a tuple) is not served");
    const std::string item =
        s.contains("items") ? visit(s["items"], ptr + "/items", hint + "-item") : need("value");
    need("ws");
    if (hi == 0) return "\"[\" ws \"]\"";
    const std::string more = "( ws \",\" ws " + item + " )";
    const std::string rest = more + repeat(lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1);
    if (lo == 0)
      return add_rule(hint + "-array", "\"[\" ws ( " + item + " " + rest + " ws )? \"]\"");
    return add_rule(hint + "-array", "\"[\" ws " + item + " " + rest + " ws \"]\"");
  }

  std::string object(const Json& s, const std::string& ptr, const std::string& hint) {
    need("ws");
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) fail(ptr + "/properties", "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) fail(ptr + "/required", "required must be a list of names");
      for (const Json& name : r) {
        if (!name.is_string()) fail(ptr + "/required", "required must be a list of names");
        if (!props.contains(name.get<std::string>()))
          fail(ptr + "/required",
               "`" + name.get<std::string>() + "` is required but not among the properties");
        required.insert(name.get<std::string>());
      }
    }
    const Json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (extra && !extra->is_boolean() && !extra->is_object())
      fail(ptr + "/additionalProperties", "additionalProperties must be a boolean or a schema");
    if (props.empty()) {
      if (extra && extra->is_boolean() && !extra->get<bool>()) return "\"{\" ws \"}\"";
      if (!extra || extra->is_boolean()) return need("object");
      const std::string value = visit(*extra, ptr + "/additionalProperties", hint + "-value");
      const std::string kv = need("string") + " ws \":\" ws " + value;
      return add_rule(hint + "-map",
                      "\"{\" ws ( " + kv + " ( ws \",\" ws " + kv + " )* ws )? \"}\"");
    }
    // first_i: properties i… with none written yet; after_i: with one written (a comma first).
    std::vector<std::string> keys, values;
    for (const auto& [key, sub] : props.items()) {
      keys.push_back(key);
      values.push_back(visit(sub, ptr + "/properties/" + pointer_token(key), hint + "-" + key));
    }
    std::string first = "\"\"", after = "\"\"";
    for (size_t k = keys.size(); k-- > 0;) {
      const std::string kv = gbnf_literal(Json(keys[k]).dump()) + " ws \":\" ws " + values[k];
      const bool optional = !required.count(keys[k]);
      const std::string a =
          add_rule(hint + "-after-" + keys[k],
                   "ws \",\" ws " + kv + " " + after + (optional ? " | " + after : ""));
      const std::string f =
          add_rule(hint + "-from-" + keys[k], kv + " " + after + (optional ? " | " + first : ""));
      after = a;
      first = f;
    }
    return add_rule(hint + "-object", "\"{\" ws " + first + " ws \"}\"");
  }

  std::string pattern(const std::string& regex, const std::string& ptr);

  const Json* root_ = nullptr;
  int scope_ = 0;
  bool root_taken_ = false;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_, needed_;
  std::map<std::string, std::string> refs_;
};

namespace {

// ---- pattern: an ECMA 262 subset → GBNF of the JSON string's bytes ----

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalise(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r)
    if (!out.empty() && x.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  return out;
}
Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalise(r)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return out;
}
// Without what a JSON string cannot hold unescaped: '"', '\' and controls. Generated strings
// do not escape, so a class keeps what it can write as is (a stricter language).
Ranges writable(const Ranges& r) {
  Ranges out;
  for (auto [lo, hi] : normalise(r)) {
    for (uint32_t bad : {uint32_t('"'), uint32_t('\\')}) {
      if (lo <= bad && bad <= hi) {
        if (lo < bad) out.emplace_back(std::max<uint32_t>(lo, 0x20), bad - 1);
        lo = bad + 1;
      }
    }
    lo = std::max<uint32_t>(lo, 0x20);
    if (lo <= hi) out.emplace_back(lo, hi);
  }
  Ranges cleaned;
  for (const auto& x : out)
    if (x.first <= x.second) cleaned.push_back(x);
  return normalise(cleaned);
}

class PatternCompiler {
 public:
  PatternCompiler(const std::string& regex, const std::string& ptr) : re_(regex), ptr_(ptr) {}

  std::string compile() {
    bool start = false, end = false;
    std::string body = re_;
    if (!body.empty() && body[0] == '^') {
      start = true;
      body.erase(0, 1);
    }
    if (!body.empty() && body.back() == '$') {
      size_t slashes = 0;
      for (size_t i = body.size() - 1; i-- > 0 && body[i] == '\\';) ++slashes;
      if (slashes % 2 == 0) {
        end = true;
        body.pop_back();
      }
    }
    re_ = body;
    const std::string inner = alternatives();
    if (pos_ < re_.size()) fail("`)` closes no group");
    return std::string("\"\\\"\" ") + (start ? "" : "char* ") + "( " + inner + " )" +
           (end ? "" : " char*") + " \"\\\"\"";
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw SchemaError(ptr_, "pattern `" + original() + "`: " + why);
  }
  std::string original() const { return re_; }
  bool more() const { return pos_ < re_.size(); }
  char peek() const { return more() ? re_[pos_] : '\0'; }

  std::string alternatives() {
    std::string out = sequence();
    while (peek() == '|') {
      ++pos_;
      out += " | " + sequence();
    }
    return out;
  }
  std::string sequence() {
    std::string out;
    while (more() && peek() != '|' && peek() != ')') {
      std::string atom = this->atom();
      atom += quantifier();
      out += (out.empty() ? "" : " ") + atom;
    }
    return out.empty() ? "\"\"" : out;
  }
  std::string quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{') {
      const size_t close = re_.find('}', pos_);
      if (close == std::string::npos) fail("`{` opens no repetition");
      const std::string inside = re_.substr(pos_ + 1, close - pos_ - 1);
      const size_t comma = inside.find(',');
      auto num = [&](const std::string& t) -> int64_t {
        if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 5)
          fail("`{" + inside + "}` is not a repetition this subset serves");
        return std::stoll(t);
      };
      const int64_t m = num(comma == std::string::npos ? inside : inside.substr(0, comma));
      const int64_t n = comma == std::string::npos   ? m
                        : comma + 1 == inside.size() ? -1
                                                     : num(inside.substr(comma + 1));
      if (n >= 0 && n < m) fail("a repetition's maximum is below its minimum");
      pos_ = close + 1;
      q = repeat(m, n);
    } else {
      return "";
    }
    if (peek() == '?')
      ++pos_;  // lazy: the same language
    else if (peek() == '+')
      fail("possessive quantifiers are not served");
    return q;
  }

  std::string atom() {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (re_.compare(pos_, 2, "?:") == 0) {
          pos_ += 2;
        } else if (re_.compare(pos_, 2, "?<") == 0 && pos_ + 2 < re_.size() &&
                   re_[pos_ + 2] != '=' && re_[pos_ + 2] != '!') {
          const size_t close = re_.find('>', pos_);
          if (close == std::string::npos) fail("a named group is not closed");
          pos_ = close + 1;
        } else {
          fail("lookaround and other (?…) groups are not served");
        }
      }
      std::string inner = alternatives();
      if (peek() != ')') fail("a group is not closed");
      ++pos_;
      return "( " + inner + " )";
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      return emit(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '^' || c == '$') fail("anchors are served only at the pattern's ends");
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier follows nothing");
    if (c == '\\') {
      Ranges r;
      if (escape(r, false)) return emit(r);
      return literal(r[0].first);
    }
    return literal(code_point());
  }

  uint32_t code_point() {
    const unsigned char c = static_cast<unsigned char>(re_[pos_]);
    const int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + size_t(n) > re_.size()) fail("the pattern is not valid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (int i = 1; i < n; ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(re_[pos_ + size_t(i)]) & 0x3F);
    pos_ += size_t(n);
    return cp;
  }

  // An escape at pos_: a class (true, its ranges in `r`) or one character (false, r = {c, c}).
  bool escape(Ranges& r, bool in_class) {
    ++pos_;
    if (!more()) fail("the pattern ends in `\\`");
    const char e = re_[pos_++];
    const Ranges digit = {{'0', '9'}}, word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
                 space = {
                     {' ', ' '}, {'\t', '\r'}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}};
    switch (e) {
      case 'd': r = digit; return true;
      case 'D': r = complement(digit); return true;
      case 'w': r = word; return true;
      case 'W': r = complement(word); return true;
      case 's': r = space; return true;
      case 'S': r = complement(space); return true;
      case 'n': r = {{'\n', '\n'}}; return false;
      case 'r': r = {{'\r', '\r'}}; return false;
      case 't': r = {{'\t', '\t'}}; return false;
      case 'f': r = {{'\f', '\f'}}; return false;
      case 'v': r = {{'\v', '\v'}}; return false;
      case 'x':
      case 'u': {
        const size_t digits = e == 'x' ? 2 : 4;
        if (pos_ + digits > re_.size()) fail("`\\" + std::string(1, e) + "` needs hex digits");
        const std::string hex = re_.substr(pos_, digits);
        if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
          fail("`\\" + std::string(1, e) + "` needs hex digits");
        pos_ += digits;
        const auto v = uint32_t(std::stoul(hex, nullptr, 16));
        r = {{v, v}};
        return false;
      }
      case 'b':
        if (in_class) {
          r = {{'\b', '\b'}};
          return false;
        }
        fail("word boundaries (\\b) are not served");
      case 'B': fail("word boundaries (\\B) are not served");
      default:
        if (e >= '1' && e <= '9') fail("back-references are not served");
        if (std::isalnum(static_cast<unsigned char>(e)))
          fail("the escape `\\" + std::string(1, e) + "` is not served");
        r = {{uint32_t(e), uint32_t(e)}};
        return false;
    }
  }

  std::string char_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      Ranges one;
      bool is_class = false;
      if (peek() == '\\') {
        is_class = escape(one, true);
      } else {
        const uint32_t cp = code_point();
        one = {{cp, cp}};
      }
      if (!is_class && peek() == '-' && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi;
        if (peek() == '\\') {
          if (escape(hi, true)) fail("a range cannot end in a class escape");
        } else {
          const uint32_t cp = code_point();
          hi = {{cp, cp}};
        }
        if (hi[0].first < one[0].first) fail("a range of a class ends before it starts");
        one = {{one[0].first, hi[0].first}};
      }
      r.insert(r.end(), one.begin(), one.end());
    }
    if (peek() != ']') fail("a class is not closed");
    ++pos_;
    return emit(negated ? complement(r) : r);
  }

  // A class of code points, as a GBNF class of those a JSON string holds unescaped.
  std::string emit(const Ranges& r) {
    const Ranges w = writable(r);
    if (w.empty()) fail("a class takes only characters that JSON must escape");
    std::string out = "[";
    for (const auto& [lo, hi] : w) {
      out += gbnf_code_point(lo);
      if (hi != lo) out += "-" + gbnf_code_point(hi);
    }
    return out + "]";
  }

  // One character, as its JSON-escaped bytes when it must be escaped.
  std::string literal(uint32_t cp) {
    std::string bytes;
    switch (cp) {
      case '"': bytes = "\\\""; break;
      case '\\': bytes = "\\\\"; break;
      case '\n': bytes = "\\n"; break;
      case '\r': bytes = "\\r"; break;
      case '\t': bytes = "\\t"; break;
      case '\b': bytes = "\\b"; break;
      case '\f': bytes = "\\f"; break;
      default:
        if (cp < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          bytes = buf;
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
          fail("a surrogate is not a character");
        } else {
          bytes = utf8_bytes(cp);
        }
    }
    return gbnf_literal(bytes);
  }

  std::string re_;
  std::string ptr_;
  size_t pos_ = 0;
};

}  // namespace

std::string JsonGrammarBuilder::SchemaCompiler::pattern(const std::string& regex,
                                                        const std::string& ptr) {
  need("char");
  return PatternCompiler(regex, ptr).compile();
}

JsonGrammarBuilder::JsonGrammarBuilder() : compiler_(std::make_unique<SchemaCompiler>()) {}
JsonGrammarBuilder::~JsonGrammarBuilder() = default;
std::string JsonGrammarBuilder::add(const nlohmann::ordered_json& schema, const std::string& hint) {
  return compiler_->add(schema, hint);
}
void JsonGrammarBuilder::rule(const std::string& name, const std::string& body) {
  compiler_->rule(name, body);
}
std::string JsonGrammarBuilder::gbnf() const {
  return compiler_->gbnf();
}
std::string JsonGrammarBuilder::literal(std::string_view bytes) {
  return gbnf_literal(bytes);
}

std::string json_schema_gbnf(const nlohmann::ordered_json& schema) {
  JsonGrammarBuilder b;
  b.rule("root", b.add(schema, "schema"));
  return b.gbnf();
}

std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema) {
  const std::string gbnf = json_schema_gbnf(schema);
  try {
    return Grammar::from_gbnf(gbnf);
  } catch (const GrammarError& e) {
    // What the compiler writes always parses; a rule that reaches itself before any byte is a
    // schema that refers to itself before a value starts.
    throw SchemaError("", std::string("the schema cannot be written as a grammar: ") + e.what());
  }
}

std::shared_ptr<const Grammar> json_object_grammar() {
  static const std::shared_ptr<const Grammar> kObject =
      json_schema_grammar(nlohmann::ordered_json{{"type", "object"}});
  return kObject;
}

}  // namespace sy
