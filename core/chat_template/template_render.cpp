// Runs a parsed template (template_syntax.hpp) with Jinja's semantics: a for loop's body is a
// scope of its own per iteration (a `set` inside does not leak out, hence templates'
// namespace()), if blocks are not; macros see their arguments and the template's top level;
// an undefined name is falsy and prints nothing, but using it as an object is an error.
// Bounded: a step budget, a macro depth and an output size, so no template hangs the host.
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "core/chat_template/template_syntax.hpp"
#include "core/errors/error.hpp"

namespace sy::chat {
namespace {

constexpr int64_t kMaxSteps = 1'000'000;
constexpr int kMaxMacroDepth = 64;
constexpr size_t kMaxOutput = size_t(16) << 20;
constexpr int64_t kMaxRange = 100'000;

struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;
};

enum class Flow { normal, brk, cont };

class Renderer {
 public:
  Renderer(const Program& p, std::time_t now) : program_(p), now_(now) {}

  std::string run(const nlohmann::ordered_json& context) {
    if (!context.is_object()) fail(0, "the context must be an object");
    for (const auto& [k, v] : context.items()) root_.vars[k] = from_json(v);
    std::string out;
    if (exec(program_.body, root_, out) != Flow::normal)
      fail(0, "{% break %} or {% continue %} outside a for loop");
    return out;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(Errc::chat_template, what, program_.origin + ":" + std::to_string(line));
  }

  void step(int line) {
    if (++steps_ > kMaxSteps)
      fail(line, "the template did not finish within " + std::to_string(kMaxSteps) + " steps");
  }

  // ---- statements ----------------------------------------------------------------------------

  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const Node& n : body) {
      Flow f = exec(n, scope, out);
      if (f != Flow::normal) return f;
      if (out.size() > kMaxOutput) fail(n.line, "the rendered prompt passed 16 MiB");
    }
    return Flow::normal;
  }

  Flow exec(const Node& n, Scope& scope, std::string& out) {
    step(n.line);
    switch (n.kind) {
      case Node::Kind::text: out += n.text; return Flow::normal;
      case Node::Kind::output: out += str(eval(*n.expr, scope)); return Flow::normal;
      case Node::Kind::branch:
        for (size_t k = 0; k < n.conds.size(); ++k)
          if (!n.conds[k] || truthy(eval(*n.conds[k], scope))) return exec(n.bodies[k], scope, out);
        return Flow::normal;
      case Node::Kind::loop: return loop(n, scope, out);
      case Node::Kind::assign: assign(n, scope); return Flow::normal;
      case Node::Kind::macro: {
        Value m;
        m.kind = Value::Kind::macro;
        m.macro = &n;
        scope.vars[n.name] = m;
        return Flow::normal;
      }
      case Node::Kind::brk: return Flow::brk;
      case Node::Kind::cont: return Flow::cont;
      case Node::Kind::sequence: return exec(n.bodies[0], scope, out);
    }
    return Flow::normal;
  }

  Flow loop(const Node& n, Scope& scope, std::string& out) {
    List all = iterate(eval(*n.expr, scope), n.line);
    List items;
    for (Value& v : all) {
      step(n.line);
      if (n.cond) {
        Scope probe{{}, &scope};
        bind_targets(n, v, probe);
        if (!truthy(eval(*n.cond, probe))) continue;
      }
      items.push_back(std::move(v));
    }
    const int64_t len = int64_t(items.size());
    for (int64_t k = 0; k < len; ++k) {
      step(n.line);
      Scope iteration{{}, &scope};
      bind_targets(n, items[size_t(k)], iteration);
      Dict loop;
      auto field = [&](const char* name, Value v) { loop.emplace_back(Value::string(name), v); };
      field("index", Value::integer(k + 1));
      field("index0", Value::integer(k));
      field("revindex", Value::integer(len - k));
      field("revindex0", Value::integer(len - k - 1));
      field("first", Value::boolean(k == 0));
      field("last", Value::boolean(k == len - 1));
      field("length", Value::integer(len));
      field("depth", Value::integer(1));
      field("depth0", Value::integer(0));
      field("previtem", k > 0 ? items[size_t(k - 1)] : Value::undefined("loop.previtem"));
      field("nextitem", k + 1 < len ? items[size_t(k + 1)] : Value::undefined("loop.nextitem"));
      iteration.vars["loop"] = Value::make_dict(std::move(loop));
      Flow f = exec(n.bodies[0], iteration, out);
      if (f == Flow::brk) break;
    }
    if (len == 0 && n.bodies.size() > 1) return exec(n.bodies[1], scope, out);
    return Flow::normal;
  }

  void bind_targets(const Node& n, const Value& item, Scope& scope) {
    if (n.targets.size() == 1) {
      scope.vars[n.targets[0]] = item;
      return;
    }
    List parts = iterate(item, n.line);
    if (parts.size() != n.targets.size())
      fail(n.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                       std::to_string(n.targets.size()) + " loop variables");
    for (size_t k = 0; k < parts.size(); ++k) scope.vars[n.targets[k]] = parts[k];
  }

  void assign(const Node& n, Scope& scope) {
    Value v;
    if (n.expr) {
      v = eval(*n.expr, scope);
    } else {
      std::string text;
      if (exec(n.bodies[0], scope, text) != Flow::normal)
        fail(n.line, "{% break %} inside a {% set %} block");
      v = Value::string(std::move(text));
    }
    if (n.attr.empty()) {
      scope.vars[n.targets[0]] = std::move(v);
      return;
    }
    Value target = lookup(n.targets[0], scope);
    if (target.kind != Value::Kind::ns)
      fail(n.line, "cannot set an attribute of '" + n.targets[0] + "', which is a " +
                       type_name(target) + ", not a namespace()");
    for (auto& [name, value] : target.ns->attrs)
      if (name == n.attr) {
        value = std::move(v);
        return;
      }
    target.ns->attrs.emplace_back(n.attr, std::move(v));
  }

  // ---- expressions ---------------------------------------------------------------------------

  Value lookup(const std::string& name, Scope& scope) const {
    for (const Scope* s = &scope; s; s = s->parent)
      if (auto it = s->vars.find(name); it != s->vars.end()) return it->second;
    if (is_global_function(name)) {  // defined, so `strftime_now is defined` holds
      Value f;
      f.kind = Value::Kind::function;
      f.s = name;
      return f;
    }
    return Value::undefined(name);
  }

  List iterate(const Value& v, int line) {
    switch (v.kind) {
      case Value::Kind::undefined:
      case Value::Kind::list:
      case Value::Kind::dict:
      case Value::Kind::string: {
        CallArgs none;
        return *apply_filter("list", v, none).list;
      }
      default: fail(line, std::string("'") + type_name(v) + "' object is not iterable");
    }
  }

  Value eval(const Expr& e, Scope& scope) {
    step(e.line);
    try {
      return eval_unchecked(e, scope);
    } catch (const RenderFailure& f) {
      fail(e.line, f.message);
    }
  }

  Value eval_unchecked(const Expr& e, Scope& scope) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::literal: return e.value;
      case K::name: return lookup(e.name, scope);
      case K::list: {
        List l;
        for (const auto& k : e.kids) l.push_back(eval(*k, scope));
        return Value::make_list(std::move(l));
      }
      case K::dict: {
        Dict d;
        for (size_t k = 0; k + 1 < e.kids.size(); k += 2)
          d.emplace_back(eval(*e.kids[k], scope), eval(*e.kids[k + 1], scope));
        return Value::make_dict(std::move(d));
      }
      case K::attr: return attribute(eval(*e.kids[0], scope), e.name);
      case K::item: return item(eval(*e.kids[0], scope), eval(*e.kids[1], scope));
      case K::slice: return slice(e, scope);
      case K::call: return call(e, scope);
      case K::filter: return apply_filter(e.name, eval(*e.kids[0], scope), args(e, scope));
      case K::test:
        return Value::boolean(apply_test(e.name, eval(*e.kids[0], scope), args(e, scope)) !=
                              e.negated);
      case K::unary: return unary(e.name, eval(*e.kids[0], scope));
      case K::binary: return binary(e, scope);
      case K::cond:
        if (truthy(eval(*e.kids[0], scope))) return eval(*e.kids[1], scope);
        return e.kids[2] ? eval(*e.kids[2], scope) : Value::undefined("");
    }
    return Value::undefined("");
  }

  CallArgs args(const Expr& e, Scope& scope) {
    CallArgs a;
    for (const Arg& arg : e.args) {
      Value v = eval(*arg.value, scope);
      if (arg.name.empty())
        a.positional.push_back(std::move(v));
      else
        a.named.emplace_back(arg.name, std::move(v));
    }
    return a;
  }

  static Value attribute(const Value& obj, const std::string& name) {
    switch (obj.kind) {
      case Value::Kind::undefined:
        render_fail("'" + obj.s + "' is undefined, so it has no attribute '" + name + "'");
      case Value::Kind::dict:
        if (const Value* v = obj.find(name)) return *v;
        return Value::undefined(name);
      case Value::Kind::ns:
        for (const auto& [n, v] : obj.ns->attrs)
          if (n == name) return v;
        return Value::undefined(name);
      default: return Value::undefined(name);
    }
  }

  static Value item(const Value& obj, const Value& key) {
    switch (obj.kind) {
      case Value::Kind::undefined:
        render_fail("'" + obj.s + "' is undefined, so it has no item " + repr(key));
      case Value::Kind::dict:
        if (const Value* v = obj.find(key)) return *v;
        return Value::undefined(str(key));
      case Value::Kind::ns: return attribute(obj, str(key));
      case Value::Kind::list:
      case Value::Kind::string: {
        if (key.kind != Value::Kind::integer && key.kind != Value::Kind::boolean)
          return Value::undefined(str(key));
        List items = *apply_filter("list", obj, CallArgs{}).list;
        int64_t k = key.kind == Value::Kind::boolean ? key.b : key.i;
        if (k < 0) k += int64_t(items.size());
        if (k < 0 || k >= int64_t(items.size())) return Value::undefined(str(key));
        return items[size_t(k)];
      }
      default: return Value::undefined(str(key));
    }
  }

  Value slice(const Expr& e, Scope& scope) {
    Value obj = eval(*e.kids[0], scope);
    if (obj.is_undefined()) render_fail("'" + obj.s + "' is undefined, so it cannot be sliced");
    if (obj.kind != Value::Kind::list && obj.kind != Value::Kind::string)
      return Value::undefined("slice");
    List items = *apply_filter("list", obj, CallArgs{}).list;
    const int64_t n = int64_t(items.size());
    auto part = [&](int k, bool& given) -> int64_t {
      given = false;
      if (!e.kids[size_t(k)]) return 0;
      Value v = eval(*e.kids[size_t(k)], scope);
      if (v.kind == Value::Kind::none) return 0;
      if (v.kind != Value::Kind::integer) render_fail("slice indices must be integers");
      given = true;
      return v.i;
    };
    bool has_start, has_stop, has_step;
    int64_t start = part(1, has_start), stop = part(2, has_stop), stride = part(3, has_step);
    if (!has_step) stride = 1;
    if (stride == 0) render_fail("slice step cannot be zero");
    auto clamp = [&](int64_t v, bool given, int64_t dflt, int64_t lo, int64_t hi) {
      if (!given) return dflt;
      if (v < 0) v += n;
      return std::max(lo, std::min(v, hi));
    };
    List out;
    if (stride > 0) {
      int64_t b = clamp(start, has_start, 0, 0, n), s = clamp(stop, has_stop, n, 0, n);
      for (int64_t k = b; k < s; k += stride) out.push_back(items[size_t(k)]);
    } else {
      int64_t b = clamp(start, has_start, n - 1, -1, n - 1),
              s = clamp(stop, has_stop, -1, -1, n - 1);
      for (int64_t k = b; k > s; k += stride) out.push_back(items[size_t(k)]);
    }
    if (obj.is_string()) {
      std::string s;
      for (const Value& v : out) s += v.s;
      return Value::string(std::move(s));
    }
    return Value::make_list(std::move(out));
  }

  Value call(const Expr& e, Scope& scope) {
    const Expr& callee = *e.kids[0];
    if (callee.kind == Expr::Kind::attr) {
      Value obj = eval(*callee.kids[0], scope);
      return call_method(obj, callee.name, args(e, scope));
    }
    Value fn = callee.kind == Expr::Kind::name ? lookup(callee.name, scope) : eval(callee, scope);
    if (fn.kind == Value::Kind::macro) return call_macro(*fn.macro, args(e, scope), e.line);
    if (fn.kind == Value::Kind::function) return call_global(fn.s, args(e, scope), e.line);
    render_fail(std::string("a ") + type_name(fn) + " is not callable");
  }

  Value call_macro(const Node& m, const CallArgs& a, int line) {
    if (depth_ >= kMaxMacroDepth)
      fail(line, "macro calls nested deeper than " + std::to_string(kMaxMacroDepth));
    if (a.positional.size() > m.targets.size())
      fail(line, "macro '" + m.name + "' takes " + std::to_string(m.targets.size()) +
                     " arguments, got " + std::to_string(a.positional.size()));
    Scope local{{}, &root_};
    for (const auto& [name, v] : a.named)
      if (std::find(m.targets.begin(), m.targets.end(), name) == m.targets.end())
        fail(line, "macro '" + m.name + "' has no parameter '" + name + "'");
    for (size_t k = 0; k < m.targets.size(); ++k) {
      const Value* v = a.get(k, m.targets[k].c_str());
      if (k >= a.positional.size()) {
        v = nullptr;
        for (const auto& [name, x] : a.named)
          if (name == m.targets[k]) v = &x;
      }
      local.vars[m.targets[k]] = v               ? *v
                                 : m.defaults[k] ? eval(*m.defaults[k], local)
                                                 : Value::undefined(m.targets[k]);
    }
    ++depth_;
    std::string out;
    Flow f = exec(m.bodies[0], local, out);
    --depth_;
    if (f != Flow::normal) fail(line, "{% break %} or {% continue %} outside a for loop");
    return Value::string(std::move(out));
  }

  Value call_global(const std::string& name, const CallArgs& a, int line) {
    if (name == "raise_exception") {
      const Value* msg = a.get(0, "message");
      fail(line, "the template refused the conversation: " + (msg ? str(*msg) : std::string()));
    }
    if (name == "strftime_now") {
      const Value* fmt = a.get(0, "format");
      if (!fmt || !fmt->is_string()) render_fail("strftime_now() needs a format string");
      std::tm tm{};
      localtime_r(&now_, &tm);
      char buf[256];
      size_t n = std::strftime(buf, sizeof buf, fmt->s.c_str(), &tm);
      return Value::string(std::string(buf, n));
    }
    if (name == "namespace" || name == "dict") {
      Dict d;
      if (const Value* init = a.get(0, "")) {
        if (init->kind != Value::Kind::dict) render_fail(name + "() takes a dict or keywords");
        d = *init->dict;
      }
      for (const auto& [k, v] : a.named) d.emplace_back(Value::string(k), v);
      if (name == "dict") return Value::make_dict(std::move(d));
      Value ns;
      ns.kind = Value::Kind::ns;
      ns.ns = std::make_shared<Namespace>();
      for (auto& [k, v] : d) ns.ns->attrs.emplace_back(str(k), v);
      return ns;
    }
    if (name == "range") {
      auto num = [&](size_t k) {
        const Value& v = a.positional[k];
        if (v.kind != Value::Kind::integer) render_fail("range() takes integers");
        return v.i;
      };
      if (a.positional.empty() || a.positional.size() > 3)
        render_fail("range() takes 1 to 3 integers");
      int64_t start = a.positional.size() > 1 ? num(0) : 0;
      int64_t stop = a.positional.size() > 1 ? num(1) : num(0);
      int64_t stride = a.positional.size() > 2 ? num(2) : 1;
      if (stride == 0) render_fail("range() step cannot be zero");
      List out;
      for (int64_t k = start; stride > 0 ? k < stop : k > stop; k += stride) {
        if (int64_t(out.size()) >= kMaxRange) render_fail("range() longer than 100000");
        out.push_back(Value::integer(k));
      }
      return Value::make_list(std::move(out));
    }
    fail(line, "'" + name + "' is undefined");
  }

  static Value unary(const std::string& op, const Value& v) {
    if (op == "not") return Value::boolean(!truthy(v));
    if (v.is_undefined()) render_fail("'" + v.s + "' is undefined");
    if (v.kind == Value::Kind::number) return Value::number(op == "-" ? -v.f : v.f);
    if (v.kind == Value::Kind::integer || v.kind == Value::Kind::boolean) {
      int64_t x = v.kind == Value::Kind::boolean ? v.b : v.i;
      return Value::integer(op == "-" ? -x : x);
    }
    render_fail("bad operand type for unary " + op + ": '" + type_name(v) + "'");
  }

  Value binary(const Expr& e, Scope& scope) {
    const std::string& op = e.name;
    Value a = eval(*e.kids[0], scope);
    if (op == "and") return truthy(a) ? eval(*e.kids[1], scope) : a;
    if (op == "or") return truthy(a) ? a : eval(*e.kids[1], scope);
    Value b = eval(*e.kids[1], scope);
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "in" || op == "not in") return Value::boolean(contains(b, a) == (op == "in"));
    if (op == "~") return Value::string(str(a) + str(b));
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      bool ok = true;
      bool lt = op == "<" || op == ">=" ? less(a, b, ok) : less(b, a, ok);
      if (!ok)
        render_fail("'" + op + "' not supported between '" + type_name(a) + "' and '" +
                    type_name(b) + "'");
      return Value::boolean(op == "<" || op == ">" ? lt : !lt);
    }
    return arithmetic(op, a, b);
  }

  static bool contains(const Value& container, const Value& x) {
    switch (container.kind) {
      case Value::Kind::string:
        if (!x.is_string())
          render_fail(std::string("'in <string>' requires a string, not ") + type_name(x));
        return container.s.find(x.s) != std::string::npos;
      case Value::Kind::list:
        for (const Value& v : *container.list)
          if (equal(v, x)) return true;
        return false;
      case Value::Kind::dict: return container.find(x) != nullptr;
      case Value::Kind::undefined: return false;
      default:
        render_fail(std::string("argument of type '") + type_name(container) + "' is not iterable");
    }
  }

  static Value arithmetic(const std::string& op, const Value& a, const Value& b) {
    for (const Value* v : {&a, &b})
      if (v->is_undefined()) render_fail("'" + v->s + "' is undefined");
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value::string(a.s + b.s);
      if (a.kind == Value::Kind::list && b.kind == Value::Kind::list) {
        List l = *a.list;
        l.insert(l.end(), b.list->begin(), b.list->end());
        return Value::make_list(std::move(l));
      }
    }
    if (op == "*" && (a.is_string() || a.kind == Value::Kind::list) &&
        (b.kind == Value::Kind::integer))
      return repeat(a, b.i);
    if (!a.is_numeric() || !b.is_numeric())
      render_fail("unsupported operand types for " + op + ": '" + type_name(a) + "' and '" +
                  type_name(b) + "'");
    const bool ints = a.kind != Value::Kind::number && b.kind != Value::Kind::number;
    if (ints && op != "/" && op != "**") {
      int64_t x = a.kind == Value::Kind::boolean ? a.b : a.i;
      int64_t y = b.kind == Value::Kind::boolean ? b.b : b.i;
      int64_t r = 0;
      if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::integer(r);
      if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::integer(r);
      if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::integer(r);
      if (op == "//" || op == "%") {
        if (y == 0) render_fail("integer division or modulo by zero");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
        return Value::integer(op == "//" ? q : m);
      }
      render_fail("integer overflow in " + op);
    }
    const double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") {
      if (ints && y >= 0 && std::pow(x, y) < 9e15)
        return Value::integer(int64_t(std::llround(std::pow(x, y))));
      return Value::number(std::pow(x, y));
    }
    if (y == 0) render_fail("division by zero");
    if (op == "/") return Value::number(x / y);
    if (op == "//") return Value::number(std::floor(x / y));
    return Value::number(x - std::floor(x / y) * y);  // %
  }

  static Value repeat(const Value& v, int64_t n) {
    if (n <= 0) return v.is_string() ? Value::string("") : Value::make_list({});
    if (n > 100'000) render_fail("repetition by more than 100000");
    if (v.is_string()) {
      std::string s;
      for (int64_t k = 0; k < n; ++k) s += v.s;
      return Value::string(std::move(s));
    }
    List l;
    for (int64_t k = 0; k < n; ++k) l.insert(l.end(), v.list->begin(), v.list->end());
    return Value::make_list(std::move(l));
  }

  const Program& program_;
  std::time_t now_;
  Scope root_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

std::string render_template(const Program& program, const nlohmann::ordered_json& context,
                            std::time_t now) {
  return Renderer(program, now).run(context);
}

}  // namespace sy::chat
