// The filters, tests and methods chat templates use, with the Python / Jinja behaviour the
// reference renders with. A name the parser accepts and this file does not implement cannot
// exist: the lists below are the ones is_filter() and friends answer from.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "core/chat_template/template_syntax.hpp"

namespace sy::chat {

void render_fail(std::string message) {
  throw RenderFailure{std::move(message)};
}

const Value* CallArgs::get(size_t index, const char* name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [n, v] : named)
    if (n == name) return &v;
  return nullptr;
}

namespace {

// ---- Python string helpers ------------------------------------------------------------------

// str.isspace() code points (Unicode White_Space plus the separators Python adds).
bool is_py_space(const std::string& cp) {
  static const std::vector<std::string> kSpaces = {" ",
                                                   "\t",
                                                   "\n",
                                                   "\r",
                                                   "\v",
                                                   "\f",
                                                   "\x1c",
                                                   "\x1d",
                                                   "\x1e",
                                                   "\x1f",
                                                   "\xc2\x85",
                                                   "\xc2\xa0",
                                                   "\xe1\x9a\x80",
                                                   "\xe2\x80\x80",
                                                   "\xe2\x80\x81",
                                                   "\xe2\x80\x82",
                                                   "\xe2\x80\x83",
                                                   "\xe2\x80\x84",
                                                   "\xe2\x80\x85",
                                                   "\xe2\x80\x86",
                                                   "\xe2\x80\x87",
                                                   "\xe2\x80\x88",
                                                   "\xe2\x80\x89",
                                                   "\xe2\x80\x8a",
                                                   "\xe2\x80\xa8",
                                                   "\xe2\x80\xa9",
                                                   "\xe2\x80\xaf",
                                                   "\xe2\x81\x9f",
                                                   "\xe3\x80\x80"};
  return std::find(kSpaces.begin(), kSpaces.end(), cp) != kSpaces.end();
}

// str.strip / lstrip / rstrip: whitespace, or any code point of `chars`.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<std::string> cps = code_points(s);
  std::vector<std::string> set;
  if (chars && chars->kind != Value::Kind::none) {
    if (!chars->is_string()) render_fail("strip() takes a string of characters");
    set = code_points(chars->s);
  }
  auto drop = [&](const std::string& cp) {
    return set.empty() && !(chars && chars->is_string())
               ? is_py_space(cp)
               : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && drop(cps[b])) ++b;
  if (right)
    while (e > b && drop(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

std::vector<std::string> split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->kind == Value::Kind::none) {  // runs of whitespace, none empty
    std::string cur;
    bool in_word = false;
    std::vector<std::string> cps = code_points(s);
    for (size_t k = 0; k < cps.size(); ++k) {
      if (is_py_space(cps[k])) {
        if (in_word) out.push_back(cur), cur.clear(), in_word = false;
        continue;
      }
      if (!in_word && maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        std::string rest;
        for (size_t j = k; j < cps.size(); ++j) rest += cps[j];
        out.push_back(strip(rest, nullptr, false, true));
        return out;
      }
      in_word = true;
      cur += cps[k];
    }
    if (in_word) out.push_back(cur);
    return out;
  }
  if (!sep->is_string()) render_fail("split() takes a string separator");
  if (sep->s.empty()) render_fail("split(): empty separator");
  size_t from = 0;
  while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
    size_t at = s.find(sep->s, from);
    if (at == std::string::npos) break;
    out.push_back(s.substr(from, at - from));
    from = at + sep->s.size();
  }
  out.push_back(s.substr(from));
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  if (from.empty()) render_fail("replace() of an empty string is not supported");
  std::string out;
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out += s.substr(pos, at - pos) + to;
    pos = at + from.size();
    ++n;
  }
  return out + s.substr(pos);
}

// ASCII case mapping: the templates' literals and roles are ASCII (a documented approximation).
std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = char(c - 32);
  return s;
}
std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c + 32);
  return s;
}
std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = char(out[0] - 32);
  return out;
}
std::string title(const std::string& s) {
  std::string out = s;
  bool prev_alpha = false;
  for (char& c : out) {
    bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (alpha) c = prev_alpha ? char(std::tolower(c)) : char(std::toupper(c));
    prev_alpha = alpha;
  }
  return out;
}

const std::string& need_string(const Value& v, const char* what) {
  if (!v.is_string()) render_fail(std::string(what) + " needs a string, got " + type_name(v));
  return v.s;
}

int64_t need_int(const Value* v, const char* what, int64_t fallback) {
  if (!v || v->kind == Value::Kind::none) return fallback;
  if (v->kind == Value::Kind::integer) return v->i;
  if (v->kind == Value::Kind::boolean) return v->b;
  render_fail(std::string(what) + " needs an integer, got " + type_name(*v));
}

// for x in v: a list's items, a dict's keys, a string's characters.
List items_of(const Value& v, const char* what) {
  switch (v.kind) {
    case Value::Kind::undefined: return {};
    case Value::Kind::list: return *v.list;
    case Value::Kind::dict: {
      List keys;
      for (const auto& kv : *v.dict) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::string: {
      List chars;
      for (auto& cp : code_points(v.s)) chars.push_back(Value::string(cp));
      return chars;
    }
    default: render_fail(std::string(what) + ": '" + type_name(v) + "' object is not iterable");
  }
}

Value dict_items(const Value& d) {
  List out;
  for (const auto& [k, v] : *d.dict) out.push_back(Value::make_list({k, v}));
  return Value::make_list(std::move(out));
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::undefined: return 0;
    case Value::Kind::string: return int64_t(code_points(v.s).size());
    case Value::Kind::list: return int64_t(v.list->size());
    case Value::Kind::dict: return int64_t(v.dict->size());
    case Value::Kind::ns: return int64_t(v.ns->attrs.size());
    default: render_fail(std::string("object of type '") + type_name(v) + "' has no len()");
  }
}

// ---- tests -----------------------------------------------------------------------------------

using TestFn = std::function<bool(const Value&, const CallArgs&)>;

const Value& arg0(const CallArgs& a, const char* test) {
  const Value* v = a.get(0, "value");
  if (!v) render_fail(std::string("test '") + test + "' needs an argument");
  return *v;
}

const std::map<std::string, TestFn>& tests() {
  using K = Value::Kind;
  static const std::map<std::string, TestFn> t = {
      {"defined", [](const Value& x, const CallArgs&) { return !x.is_undefined(); }},
      {"undefined", [](const Value& x, const CallArgs&) { return x.is_undefined(); }},
      {"none", [](const Value& x, const CallArgs&) { return x.kind == K::none; }},
      {"boolean", [](const Value& x, const CallArgs&) { return x.kind == K::boolean; }},
      {"true", [](const Value& x, const CallArgs&) { return x.kind == K::boolean && x.b; }},
      {"false", [](const Value& x, const CallArgs&) { return x.kind == K::boolean && !x.b; }},
      {"integer", [](const Value& x, const CallArgs&) { return x.kind == K::integer; }},
      {"float", [](const Value& x, const CallArgs&) { return x.kind == K::number; }},
      {"number", [](const Value& x, const CallArgs&) { return x.is_numeric(); }},
      {"string", [](const Value& x, const CallArgs&) { return x.is_string(); }},
      {"mapping", [](const Value& x, const CallArgs&) { return x.kind == K::dict; }},
      {"iterable",
       [](const Value& x, const CallArgs&) {
         return x.kind == K::list || x.kind == K::dict || x.kind == K::string ||
                x.kind == K::undefined;
       }},
      {"sequence",
       [](const Value& x, const CallArgs&) {
         return x.kind == K::list || x.kind == K::dict || x.kind == K::string;
       }},
      {"callable",
       [](const Value& x, const CallArgs&) { return x.kind == K::macro || x.kind == K::function; }},
      {"even", [](const Value& x, const CallArgs&) { return need_int(&x, "even", 0) % 2 == 0; }},
      {"odd", [](const Value& x, const CallArgs&) { return need_int(&x, "odd", 0) % 2 != 0; }},
      {"divisibleby",
       [](const Value& x, const CallArgs& a) {
         int64_t d = need_int(&arg0(a, "divisibleby"), "divisibleby", 1);
         if (d == 0) render_fail("divisibleby 0");
         return need_int(&x, "divisibleby", 0) % d == 0;
       }},
      {"equalto", [](const Value& x, const CallArgs& a) { return equal(x, arg0(a, "equalto")); }},
      {"eq", [](const Value& x, const CallArgs& a) { return equal(x, arg0(a, "eq")); }},
      {"ne", [](const Value& x, const CallArgs& a) { return !equal(x, arg0(a, "ne")); }},
      {"sameas",
       [](const Value& x, const CallArgs& a) {
         const Value& y = arg0(a, "sameas");
         return x.kind == y.kind && (x.kind == K::none || x.kind == K::undefined ||
                                     (x.kind == K::boolean && x.b == y.b) || equal(x, y));
       }},
      {"in",
       [](const Value& x, const CallArgs& a) {
         const Value& c = arg0(a, "in");
         if (c.is_string()) return c.s.find(need_string(x, "in")) != std::string::npos;
         for (const Value& v : items_of(c, "in"))
           if (equal(v, x)) return true;
         return false;
       }},
      {"lower", [](const Value& x, const CallArgs&) { return x.is_string() && lower(x.s) == x.s; }},
      {"upper", [](const Value& x, const CallArgs&) { return x.is_string() && upper(x.s) == x.s; }},
  };
  return t;
}

// ---- filters ---------------------------------------------------------------------------------

using FilterFn = std::function<Value(const Value&, const CallArgs&)>;

// select / reject / selectattr / rejectattr.
Value select(const Value& x, const CallArgs& a, bool keep, bool by_attr) {
  size_t first = 0;
  std::string attr;
  if (by_attr) {
    const Value* name = a.get(0, "attribute");
    if (!name || !name->is_string()) render_fail("selectattr/rejectattr need an attribute name");
    attr = name->s;
    first = 1;
  }
  std::string test;
  CallArgs rest;
  if (const Value* t = a.get(first, "test")) {
    test = need_string(*t, "select");
    if (!is_test(test)) render_fail("test '" + test + "' is not supported");
    rest.positional.assign(a.positional.begin() + std::min(a.positional.size(), first + 1),
                           a.positional.end());
  }
  List out;
  for (const Value& item : items_of(x, "select")) {
    Value subject = item;
    if (by_attr) {
      const Value* v = item.find(attr);
      subject = v ? *v : Value::undefined(attr);
    }
    bool pass = test.empty() ? truthy(subject) : apply_test(test, subject, rest);
    if (pass == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

Value tojson(const Value& x, const CallArgs& a) {
  JsonOptions o;
  if (const Value* indent = a.get(0, "indent"); indent && indent->kind != Value::Kind::none) {
    o.indent = int(need_int(indent, "tojson indent", -1));
    if (o.indent < 0) o.indent = 0;
  }
  for (const auto& [name, v] : a.named) {
    if (name == "indent") continue;
    if (name == "sort_keys") {
      o.sort_keys = truthy(v);
    } else if (name == "ensure_ascii") {
      o.ensure_ascii = truthy(v);
    } else if (name == "separators") {
      if (v.kind != Value::Kind::list || v.list->size() != 2 || !(*v.list)[0].is_string() ||
          !(*v.list)[1].is_string())
        render_fail("tojson separators must be a pair of strings");
      o.item_separator = (*v.list)[0].s;
      o.key_separator = (*v.list)[1].s;
    } else {
      render_fail("tojson has no argument '" + name + "'");
    }
  }
  std::string out;
  if (!to_json_text(x, o, out))
    render_fail(std::string("tojson: a ") + type_name(x) + " holding " +
                (x.is_undefined() ? "an undefined value" : "something JSON cannot hold"));
  return Value::string(std::move(out));
}

Value join(const Value& x, const CallArgs& a) {
  std::string sep;
  if (const Value* s = a.get(0, "d")) sep = need_string(*s, "join separator");
  const Value* attr = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : items_of(x, "join")) {
    const Value* v = &item;
    if (attr) {
      v = item.find(str(*attr));
      if (!v) render_fail("join: an item has no attribute " + str(*attr));
    }
    out += (first ? "" : sep) + str(*v);
    first = false;
  }
  return Value::string(std::move(out));
}

const std::map<std::string, FilterFn>& filters() {
  using K = Value::Kind;
  static const std::map<std::string, FilterFn> f = {
      {"trim",
       [](const Value& x, const CallArgs& a) {
         return Value::string(strip(str(x), a.get(0, "chars"), true, true));
       }},
      {"length", [](const Value& x, const CallArgs&) { return Value::integer(length(x)); }},
      {"count", [](const Value& x, const CallArgs&) { return Value::integer(length(x)); }},
      {"tojson", tojson},
      {"join", join},
      {"items",
       [](const Value& x, const CallArgs&) {
         if (x.is_undefined()) return Value::make_list({});
         if (x.kind != K::dict) render_fail(std::string("items needs a dict, got ") + type_name(x));
         return dict_items(x);
       }},
      {"list",
       [](const Value& x, const CallArgs&) { return Value::make_list(items_of(x, "list")); }},
      {"first",
       [](const Value& x, const CallArgs&) {
         List l = items_of(x, "first");
         return l.empty() ? Value::undefined("first") : l.front();
       }},
      {"last",
       [](const Value& x, const CallArgs&) {
         List l = items_of(x, "last");
         return l.empty() ? Value::undefined("last") : l.back();
       }},
      {"reverse",
       [](const Value& x, const CallArgs&) {
         if (x.is_string()) {
           std::vector<std::string> cps = code_points(x.s);
           std::string out;
           for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
           return Value::string(out);
         }
         List l = items_of(x, "reverse");
         std::reverse(l.begin(), l.end());
         return Value::make_list(std::move(l));
       }},
      {"unique",
       [](const Value& x, const CallArgs&) {
         List out;
         for (const Value& v : items_of(x, "unique"))
           if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equal(o, v); }))
             out.push_back(v);
         return Value::make_list(std::move(out));
       }},
      {"upper", [](const Value& x, const CallArgs&) { return Value::string(upper(str(x))); }},
      {"lower", [](const Value& x, const CallArgs&) { return Value::string(lower(str(x))); }},
      {"capitalize",
       [](const Value& x, const CallArgs&) { return Value::string(capitalize(str(x))); }},
      {"title", [](const Value& x, const CallArgs&) { return Value::string(title(str(x))); }},
      {"string", [](const Value& x, const CallArgs&) { return Value::string(str(x)); }},
      {"replace",
       [](const Value& x, const CallArgs& a) {
         const Value *from = a.get(0, "old"), *to = a.get(1, "new");
         if (!from || !to) render_fail("replace needs the old and the new string");
         return Value::string(replace_all(str(x), need_string(*from, "replace"),
                                          need_string(*to, "replace"),
                                          need_int(a.get(2, "count"), "replace count", -1)));
       }},
      {"default",
       [](const Value& x, const CallArgs& a) {
         const Value* d = a.get(0, "default_value");
         const Value* boolean = a.get(1, "boolean");
         bool use = x.is_undefined() || (boolean && truthy(*boolean) && !truthy(x));
         return use ? (d ? *d : Value::string("")) : x;
       }},
      {"int",
       [](const Value& x, const CallArgs&) {
         if (x.kind == K::number) return Value::integer(int64_t(x.f));
         if (x.is_numeric()) return Value::integer(need_int(&x, "int", 0));
         if (x.is_string()) {
           try {
             return Value::integer(std::stoll(x.s));
           } catch (...) {
             return Value::integer(0);
           }
         }
         return Value::integer(0);
       }},
      {"float",
       [](const Value& x, const CallArgs&) {
         if (x.is_numeric()) return Value::number(x.as_double());
         if (x.is_string()) {
           try {
             return Value::number(std::stod(x.s));
           } catch (...) {
             return Value::number(0);
           }
         }
         return Value::number(0);
       }},
      {"abs",
       [](const Value& x, const CallArgs&) {
         if (x.kind == K::number) return Value::number(std::fabs(x.f));
         int64_t v = need_int(&x, "abs", 0);
         return Value::integer(v < 0 ? -v : v);
       }},
      {"map",
       [](const Value& x, const CallArgs& a) {
         List out;
         const Value* attr = nullptr;
         for (const auto& [n, v] : a.named)
           if (n == "attribute") attr = &v;
         std::string filter;
         CallArgs rest;
         if (!attr) {
           const Value* name = a.get(0, "");
           if (!name) render_fail("map needs attribute= or a filter name");
           filter = need_string(*name, "map");
           if (!is_filter(filter)) render_fail("filter '" + filter + "' is not supported");
           rest.positional.assign(a.positional.begin() + 1, a.positional.end());
         }
         for (const Value& item : items_of(x, "map")) {
           if (attr) {
             const Value* v = item.find(str(*attr));
             out.push_back(v ? *v : Value::undefined(str(*attr)));
           } else {
             out.push_back(apply_filter(filter, item, rest));
           }
         }
         return Value::make_list(std::move(out));
       }},
      {"select", [](const Value& x, const CallArgs& a) { return select(x, a, true, false); }},
      {"reject", [](const Value& x, const CallArgs& a) { return select(x, a, false, false); }},
      {"selectattr", [](const Value& x, const CallArgs& a) { return select(x, a, true, true); }},
      {"rejectattr", [](const Value& x, const CallArgs& a) { return select(x, a, false, true); }},
  };
  return f;
}

// ---- methods ---------------------------------------------------------------------------------

using MethodFn = std::function<Value(const Value&, const CallArgs&)>;

bool affix(const Value& self, const CallArgs& a, bool prefix) {
  const std::string& s = need_string(self, prefix ? "startswith" : "endswith");
  const Value* p = a.get(0, "prefix");
  if (!p) render_fail("startswith/endswith need an argument");
  List options = p->kind == Value::Kind::list ? *p->list : List{*p};
  for (const Value& o : options) {
    const std::string& x = need_string(o, prefix ? "startswith" : "endswith");
    if (x.size() <= s.size() && (prefix ? s.compare(0, x.size(), x) == 0
                                        : s.compare(s.size() - x.size(), x.size(), x) == 0))
      return true;
  }
  return false;
}

const std::map<std::string, MethodFn>& methods() {
  using K = Value::Kind;
  auto strip_method = [](bool l, bool r) {
    return [l, r](const Value& self, const CallArgs& a) {
      return Value::string(strip(need_string(self, "strip"), a.get(0, "chars"), l, r));
    };
  };
  static const std::map<std::string, MethodFn> m = {
      {"strip", strip_method(true, true)},
      {"lstrip", strip_method(true, false)},
      {"rstrip", strip_method(false, true)},
      {"split",
       [](const Value& self, const CallArgs& a) {
         List out;
         for (auto& piece : split(need_string(self, "split"), a.get(0, "sep"),
                                  need_int(a.get(1, "maxsplit"), "split maxsplit", -1)))
           out.push_back(Value::string(piece));
         return Value::make_list(std::move(out));
       }},
      {"startswith",
       [](const Value& self, const CallArgs& a) { return Value::boolean(affix(self, a, true)); }},
      {"endswith",
       [](const Value& self, const CallArgs& a) { return Value::boolean(affix(self, a, false)); }},
      {"upper", [](const Value& self,
                   const CallArgs&) { return Value::string(upper(need_string(self, "upper"))); }},
      {"lower", [](const Value& self,
                   const CallArgs&) { return Value::string(lower(need_string(self, "lower"))); }},
      {"title", [](const Value& self,
                   const CallArgs&) { return Value::string(title(need_string(self, "title"))); }},
      {"capitalize",
       [](const Value& self, const CallArgs&) {
         return Value::string(capitalize(need_string(self, "capitalize")));
       }},
      {"replace",
       [](const Value& self, const CallArgs& a) {
         const Value *from = a.get(0, "old"), *to = a.get(1, "new");
         if (!from || !to) render_fail("replace() needs the old and the new string");
         return Value::string(replace_all(
             need_string(self, "replace"), need_string(*from, "replace"),
             need_string(*to, "replace"), need_int(a.get(2, "count"), "replace count", -1)));
       }},
      {"find",
       [](const Value& self, const CallArgs& a) {
         const Value* sub = a.get(0, "sub");
         if (!sub) render_fail("find() needs an argument");
         size_t at = need_string(self, "find").find(need_string(*sub, "find"));
         if (at == std::string::npos) return Value::integer(-1);
         return Value::integer(int64_t(code_points(self.s.substr(0, at)).size()));
       }},
      {"items",
       [](const Value& self, const CallArgs&) {
         if (self.kind != K::dict) render_fail(std::string("items() of a ") + type_name(self));
         return dict_items(self);
       }},
      {"keys",
       [](const Value& self, const CallArgs&) {
         if (self.kind != K::dict) render_fail(std::string("keys() of a ") + type_name(self));
         return Value::make_list(items_of(self, "keys"));
       }},
      {"values",
       [](const Value& self, const CallArgs&) {
         if (self.kind != K::dict) render_fail(std::string("values() of a ") + type_name(self));
         List out;
         for (const auto& kv : *self.dict) out.push_back(kv.second);
         return Value::make_list(std::move(out));
       }},
      {"get",
       [](const Value& self, const CallArgs& a) {
         if (self.kind != K::dict) render_fail(std::string("get() of a ") + type_name(self));
         const Value* key = a.get(0, "key");
         if (!key) render_fail("get() needs a key");
         const Value* v = self.find(*key);
         const Value* d = a.get(1, "default");
         return v ? *v : d ? *d : Value::none();
       }},
  };
  return m;
}

}  // namespace

bool is_filter(const std::string& name) {
  return filters().count(name) || name == "d";
}
bool is_test(const std::string& name) {
  return tests().count(name) || name == "==" || name == "!=";
}
bool is_method(const std::string& name) {
  return methods().count(name) > 0;
}
bool is_global_function(const std::string& name) {
  return name == "namespace" || name == "range" || name == "dict" || name == "raise_exception" ||
         name == "strftime_now";
}

Value apply_filter(const std::string& name, const Value& x, const CallArgs& args) {
  auto it = filters().find(name == "d" ? "default" : name);
  if (it == filters().end()) render_fail("filter '" + name + "' is not supported");
  return it->second(x, args);
}

bool apply_test(const std::string& name, const Value& x, const CallArgs& args) {
  auto it = tests().find(name == "==" ? "eq" : name == "!=" ? "ne" : name);
  if (it == tests().end()) render_fail("test '" + name + "' is not supported");
  return it->second(x, args);
}

Value call_method(const Value& obj, const std::string& name, const CallArgs& args) {
  if (obj.is_undefined()) render_fail("'" + obj.s + "' is undefined (calling its " + name + "())");
  auto it = methods().find(name);
  if (it == methods().end()) render_fail("method '" + name + "' is not supported");
  return it->second(obj, args);
}

}  // namespace sy::chat
