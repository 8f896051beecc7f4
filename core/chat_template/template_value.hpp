// Internal to chat_template/: the values a template computes with, with Python's semantics
// (Jinja evaluates templates as Python expressions): truthiness, equality and ordering,
// str() and repr(), and json.dumps() as transformers' tojson filter calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace sy::chat {

struct Value;
struct Node;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<Value, Value>>;  // insertion-ordered, as Python's dict
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
};

struct Value {
  enum class Kind : uint8_t {
    undefined,  // a name or key that is not there; `s` holds what was looked up
    none,
    boolean,
    integer,
    number,  // a Python float
    string,
    list,  // lists and tuples (the sandbox makes both immutable)
    dict,
    ns,        // namespace(): the one mutable object, through `set ns.attr = ...`
    macro,     // a {% macro %} of the template
    function,  // a global function (namespace, range...); `s` holds its name
  };
  Kind kind = Kind::undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<const List> list;
  std::shared_ptr<const Dict> dict;
  std::shared_ptr<Namespace> ns;
  const Node* macro = nullptr;

  static Value undefined(std::string what = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value make_list(List v);
  static Value make_dict(Dict v);

  bool is_undefined() const { return kind == Kind::undefined; }
  bool is_string() const { return kind == Kind::string; }
  bool is_numeric() const {
    return kind == Kind::boolean || kind == Kind::integer || kind == Kind::number;
  }
  double as_double() const;
  // The value under `key` of a dict, or nullptr.
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
};

// Python's names for the kinds, for messages: "str", "int", "list", "dict", "NoneType"...
const char* type_name(const Value& v);
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);
// a < b for numbers, strings (code point order) and lists; false with `ok` = false otherwise.
bool less(const Value& a, const Value& b, bool& ok);
// str(v): what {{ v }} prints (an undefined value prints nothing).
std::string str(const Value& v);
// repr(v), as Python writes it.
std::string repr(const Value& v);
// Python's float repr: the shortest text that reads back the same, "1.0", "1e-05", "inf".
std::string float_repr(double v);

struct JsonOptions {
  int indent = -1;  // < 0: one line
  bool sort_keys = false, ensure_ascii = false;
  std::string item_separator, key_separator;  // empty: json.dumps' defaults for the indent
};
// json.dumps(v, ...); false when v holds something JSON cannot (an undefined, a macro).
bool to_json_text(const Value& v, const JsonOptions& options, std::string& out);

// The template's inputs: JSON values, objects keeping their key order.
Value from_json(const nlohmann::ordered_json& j);

// UTF-8 helpers: code points of s (as their byte strings).
std::vector<std::string> code_points(const std::string& s);

}  // namespace sy::chat
