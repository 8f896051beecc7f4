// Internal to chat_template/: the parsed template. parse_template() (template_parse.cpp) turns
// Jinja source into statements and expressions, refusing by name every construct outside the
// supported subset; render_template() (template_render.cpp) runs them.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat_template/template_value.hpp"

namespace sy::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string name;  // empty: positional
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    literal,  // value
    name,     // name
    list,     // items: kids
    dict,     // kids: key, value, key, value...
    attr,     // kids[0].name
    item,     // kids[0][kids[1]]
    slice,    // kids[0][kids[1]:kids[2]:kids[3]], absent parts null
    call,     // kids[0](args)
    filter,   // kids[0] | name(args)
    test,     // kids[0] is [not] name(args)
    unary,    // name: "not", "-", "+"; kids[0]
    binary,   // name: the operator; kids[0], kids[1]
    cond,     // kids[1] if kids[0] else kids[2] (null: undefined)
  };
  Kind kind = Kind::literal;
  int line = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> kids;
  std::vector<Arg> args;
  bool negated = false;
};

struct Node;
using Body = std::vector<Node>;

struct Node {
  enum class Kind {
    text,      // text
    output,    // {{ expr }}
    branch,    // if / elif / else: conds[i] (null for else) guards bodies[i]
    loop,      // for targets in expr [if cond]: bodies[0]; else: bodies[1]
    assign,    // set targets[0][.attr] = expr; with no expr, the rendered bodies[0]
    macro,     // macro name(params = defaults): bodies[0]
    brk,       // break
    cont,      // continue
    sequence,  // bodies[0], transparently ({% generation %})
  };
  Kind kind = Kind::text;
  int line = 0;
  std::string text, name, attr;
  ExprPtr expr, cond;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  std::vector<std::string> targets;  // loop variables; macro parameter names
  std::vector<ExprPtr> defaults;     // macro parameter defaults (null: none)
};

struct Program {
  std::string origin;  // for messages: where the template came from
  Body body;
};

// Throws Error (SY211) naming the construct and its line.
std::unique_ptr<Program> parse_template(std::string_view source, std::string origin);
std::string render_template(const Program& program, const nlohmann::ordered_json& context,
                            std::time_t now);

// The builtins the parser accepts by name (template_builtins.cpp).
bool is_filter(const std::string& name);
bool is_test(const std::string& name);
bool is_method(const std::string& name);
bool is_global_function(const std::string& name);

// A builtin's failure; the renderer adds where it happened.
struct RenderFailure {
  std::string message;
};
[[noreturn]] void render_fail(std::string message);

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  // Argument `index`, or the one called `name`, or nullptr.
  const Value* get(size_t index, const char* name) const;
};

Value apply_filter(const std::string& name, const Value& x, const CallArgs& args);
bool apply_test(const std::string& name, const Value& x, const CallArgs& args);
// obj.name(args) for str, dict and list methods.
Value call_method(const Value& obj, const std::string& name, const CallArgs& args);

}  // namespace sy::chat
