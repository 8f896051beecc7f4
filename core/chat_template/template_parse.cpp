// Jinja source → Program (template_syntax.hpp), with the lexing options transformers renders
// chat templates with: trim_blocks (the newline after a block or comment tag goes),
// lstrip_blocks (spaces and tabs before a block or comment tag that opens its line go), `-`
// and `+` on tags, and no trailing newline kept. Every construct outside the subset is refused
// here, before anything renders, naming it and its line.
#include <cstdlib>
#include <set>

#include "core/chat_template/template_syntax.hpp"
#include "core/errors/error.hpp"

namespace sy::chat {
namespace {

[[noreturn]] void fail(const std::string& origin, int line, const std::string& what) {
  throw Error(Errc::chat_template, what, origin + ":" + std::to_string(line));
}

// ---- lexing ---------------------------------------------------------------------------------

struct Token {
  enum class Kind { name, string, integer, number, op, end };
  Kind kind = Kind::end;
  std::string text;  // name, operator, or the unescaped string
  int64_t i = 0;
  double f = 0;
  int line = 0;
};

// One tag or text run of the source.
struct Piece {
  enum class Kind { text, output, statement };
  Kind kind;
  std::string text;
  std::vector<Token> tokens;  // for tags, ending with an `end` token
  int line;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& origin) : src_(src), origin_(origin) {}

  std::vector<Piece> run() {
    std::vector<Piece> out;
    bool strip_next = false, trim_newline = false;
    size_t pos = 0;
    while (pos <= src_.size()) {
      size_t open = find_tag(pos);
      std::string text(
          src_.substr(pos, (open == std::string_view::npos ? src_.size() : open) - pos));
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
      } else if (trim_newline && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      } else if (trim_newline && text.size() > 1 && text[0] == '\r' && text[1] == '\n') {
        text.erase(0, 2);
      }
      if (open == std::string_view::npos) {
        push_text(out, text, line_at(pos));
        break;
      }
      const char type = src_[open + 1];  // '{', '%' or '#'
      const char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
      const bool block_like = type == '%' || type == '#';
      if (mod == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (block_like && mod != '+') {
        lstrip_line(src_.substr(pos, open - pos), pos == 0 || src_[pos - 1] == '\n', text);
      }
      push_text(out, text, line_at(pos));
      size_t body = open + 2 + (mod == '-' || mod == '+' ? 1 : 0);
      char end_mod = '\0';
      size_t after;
      if (type == '#') {
        size_t close = src_.find("#}", body);
        if (close == std::string_view::npos)
          fail(origin_, line_at(open), "a comment is not closed with #}");
        end_mod = close > body && (src_[close - 1] == '-' || src_[close - 1] == '+')
                      ? src_[close - 1]
                      : '\0';
        after = close + 2;
      } else {
        Piece p{type == '{' ? Piece::Kind::output : Piece::Kind::statement, "", {}, line_at(open)};
        after = lex_tag(body, type == '{' ? '}' : '%', p.tokens, end_mod);
        out.push_back(std::move(p));
      }
      strip_next = end_mod == '-';
      trim_newline = !strip_next && block_like && end_mod != '+';
      pos = after;
    }
    return out;
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t k = from; k + 1 < src_.size(); ++k)
      if (src_[k] == '{' && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#'))
        return k;
    return std::string_view::npos;
  }

  int line_at(size_t pos) const {
    int line = 1;
    for (size_t k = 0; k < pos && k < src_.size(); ++k) line += src_[k] == '\n';
    return line;
  }

  // lstrip_blocks: spaces and tabs between the start of the tag's line and the tag go, when
  // nothing else stands there. Decided on the source text `raw` before the tag (`starts_line`:
  // it begins a line); removed from `text`, that run after trim_blocks and `-`.
  static void lstrip_line(std::string_view raw, bool starts_line, std::string& text) {
    size_t k = raw.find_last_not_of(" \t");
    const bool at_line_start = k == std::string_view::npos ? starts_line : raw[k] == '\n';
    if (!at_line_start) return;
    size_t run = raw.size() - (k == std::string_view::npos ? 0 : k + 1);
    text.erase(text.size() - std::min(run, text.size()));
  }

  static void push_text(std::vector<Piece>& out, std::string& text, int line) {
    if (text.empty()) return;
    std::string norm;  // Jinja's newline_sequence "\n"
    for (size_t k = 0; k < text.size(); ++k)
      if (!(text[k] == '\r' && k + 1 < text.size() && text[k + 1] == '\n')) norm += text[k];
    out.push_back({Piece::Kind::text, std::move(norm), {}, line});
  }

  // Tokens of a {{ }} or {% %} tag from `pos` to its close ("}}" / "%}"); returns the position
  // after the close and sets `end_mod` to its '-' / '+'.
  size_t lex_tag(size_t pos, char close, std::vector<Token>& toks, char& end_mod) {
    const int start_line = line_at(pos);
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size())
        fail(origin_, start_line, std::string("a tag is not closed with ") + close + "}");
      const int line = line_at(pos);
      // The close, possibly with a modifier.
      for (char m : {'-', '+', '\0'}) {
        if (m == '+' && close != '%') continue;  // only block tags take +
        size_t k = pos + (m ? 1 : 0);
        if ((m == '\0' || src_[pos] == m) && k < src_.size() &&
            src_.compare(k, 2, std::string{close, '}'}) == 0) {
          end_mod = m;
          toks.push_back({Token::Kind::end, "", 0, 0, line});
          return k + 2;
        }
      }
      const char c = src_[pos];
      Token t;
      t.line = line;
      if (is_name_start(c)) {
        size_t k = pos;
        while (k < src_.size() && is_name_char(src_[k])) ++k;
        t.kind = Token::Kind::name;
        t.text = std::string(src_.substr(pos, k - pos));
        pos = k;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t k = pos;
        bool is_float = false;
        while (k < src_.size() &&
               (std::isdigit(static_cast<unsigned char>(src_[k])) || src_[k] == '_'))
          ++k;
        if (k + 1 < src_.size() && src_[k] == '.' &&
            std::isdigit(static_cast<unsigned char>(src_[k + 1]))) {
          is_float = true;
          ++k;
          while (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) ++k;
        }
        if (k < src_.size() && (src_[k] == 'e' || src_[k] == 'E')) {
          size_t e = k + 1;
          if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
          if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
            is_float = true;
            k = e;
            while (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) ++k;
          }
        }
        std::string digits;
        for (size_t j = pos; j < k; ++j)
          if (src_[j] != '_') digits += src_[j];
        if (is_float) {
          t.kind = Token::Kind::number;
          t.f = std::strtod(digits.c_str(), nullptr);
        } else {
          t.kind = Token::Kind::integer;
          errno = 0;
          t.i = std::strtoll(digits.c_str(), nullptr, 10);
          if (errno == ERANGE)
            fail(origin_, line, "integer literal " + digits + " is out of range");
        }
        pos = k;
      } else if (c == '\'' || c == '"') {
        t.kind = Token::Kind::string;
        pos = lex_string(pos, t.text, line);
      } else {
        static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[",
                                           "]",  "{",  "}",  ".",  ",",  ":",  "|", "+", "-",
                                           "*",  "/",  "%",  "~",  "<",  ">",  "="};
        bool found = false;
        for (const char* op : kOps) {
          size_t n = std::char_traits<char>::length(op);
          if (src_.compare(pos, n, op) == 0) {
            t.kind = Token::Kind::op;
            t.text = op;
            pos += n;
            found = true;
            break;
          }
        }
        if (!found) fail(origin_, line, std::string("unexpected character '") + c + "' in a tag");
      }
      toks.push_back(std::move(t));
    }
  }

  // A Python string literal with its escapes (Jinja decodes them as "unicode-escape").
  size_t lex_string(size_t pos, std::string& out, int line) {
    const char q = src_[pos++];
    while (true) {
      if (pos >= src_.size()) fail(origin_, line, "a string literal is not closed");
      char c = src_[pos++];
      if (c == q) return pos;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= src_.size()) fail(origin_, line, "a string literal is not closed");
      char e = src_[pos++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos + n > src_.size())
            fail(origin_, line, "a truncated \\" + std::string(1, e) + " escape");
          uint32_t cp =
              uint32_t(std::strtoul(std::string(src_.substr(pos, n)).c_str(), nullptr, 16));
          pos += n;
          append_utf8(cp, out);
          break;
        }
        default:  // Python keeps an unknown escape as written
          out += '\\';
          out += e;
      }
    }
  }

  static void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string_view src_;
  const std::string& origin_;
};

// ---- expressions -----------------------------------------------------------------------------

class ExprParser {
 public:
  ExprParser(const std::vector<Token>& toks, const std::string& origin,
             const std::set<std::string>& macros)
      : t_(toks), origin_(origin), macros_(macros) {}

  const Token& peek(size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::Kind::end; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::op && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::name && peek(ahead).text == name;
  }
  const Token& next() { return t_[std::min(k_++, t_.size() - 1)]; }
  void expect_op(const char* op) {
    if (!is_op(op))
      fail(origin_, peek().line, std::string("expected '") + op + "', found " + describe(peek()));
    ++k_;
  }
  std::string expect_name(const char* what) {
    if (peek().kind != Token::Kind::name)
      fail(origin_, peek().line, std::string("expected ") + what + ", found " + describe(peek()));
    return next().text;
  }
  void expect_end() {
    if (!at_end())
      fail(origin_, peek().line, "unexpected " + describe(peek()) + " at the end of a tag");
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::Kind::end: return "the end of the tag";
      case Token::Kind::string: return "a string";
      case Token::Kind::integer:
      case Token::Kind::number: return "a number";
      default: return "'" + t.text + "'";
    }
  }

  ExprPtr expression() { return conditional(); }
  // The iterable of a for loop, whose `if` filters rather than chooses.
  ExprPtr expression_no_condition() { return or_expr(); }

  // `a, b` (a tuple) or one expression.
  ExprPtr tuple_or_expression() {
    ExprPtr first = expression();
    if (!is_op(",")) return first;
    auto list = make(Expr::Kind::list, first->line);
    list->kids.push_back(std::move(first));
    while (is_op(",")) {
      ++k_;
      if (at_end() || is_op(")")) break;
      list->kids.push_back(expression());
    }
    return list;
  }

 private:
  static ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::binary, a->line);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  ExprPtr conditional() {
    ExprPtr body = or_expr();
    while (is_name("if")) {
      ++k_;
      auto e = make(Expr::Kind::cond, body->line);
      e->kids.push_back(or_expr());
      e->kids.push_back(std::move(body));
      if (is_name("else")) {
        ++k_;
        e->kids.push_back(conditional());
      } else {
        e->kids.push_back(nullptr);
      }
      body = std::move(e);
    }
    return body;
  }
  ExprPtr or_expr() {
    ExprPtr left = and_expr();
    while (is_name("or")) {
      ++k_;
      left = binary("or", std::move(left), and_expr());
    }
    return left;
  }
  ExprPtr and_expr() {
    ExprPtr left = not_expr();
    while (is_name("and")) {
      ++k_;
      left = binary("and", std::move(left), not_expr());
    }
    return left;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      int line = next().line;
      auto e = make(Expr::Kind::unary, line);
      e->name = "not";
      e->kids.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr left = math1();
    int ops = 0;
    while (true) {
      std::string op;
      if (peek().kind == Token::Kind::op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++k_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        k_ += 2;
        op = "not in";
      } else {
        break;
      }
      if (++ops > 1) fail(origin_, left->line, "chained comparisons (a < b < c) are not supported");
      left = binary(op, std::move(left), math1());
    }
    return left;
  }
  ExprPtr math1() {
    ExprPtr left = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(op, std::move(left), concat());
    }
    return left;
  }
  ExprPtr concat() {
    ExprPtr left = math2();
    while (is_op("~")) {
      ++k_;
      left = binary("~", std::move(left), math2());
    }
    return left;
  }
  ExprPtr math2() {
    ExprPtr left = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(op, std::move(left), power());
    }
    return left;
  }
  ExprPtr power() {
    ExprPtr left = unary();
    while (is_op("**")) {
      ++k_;
      left = binary("**", std::move(left), unary());
    }
    return left;
  }
  ExprPtr unary(bool with_filter = true) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(Expr::Kind::unary, t.line);
      node->name = t.text;
      node->kids.push_back(unary(false));
    } else {
      node = primary();
    }
    node = postfix(std::move(node));
    if (with_filter) node = filters_and_tests(std::move(node));
    return node;
  }

  ExprPtr primary() {
    const Token& t = next();
    switch (t.kind) {
      case Token::Kind::string: {
        auto e = make(Expr::Kind::literal, t.line);
        std::string s = t.text;
        while (peek().kind == Token::Kind::string) s += next().text;  // adjacent literals join
        e->value = Value::string(std::move(s));
        return e;
      }
      case Token::Kind::integer: {
        auto e = make(Expr::Kind::literal, t.line);
        e->value = Value::integer(t.i);
        return e;
      }
      case Token::Kind::number: {
        auto e = make(Expr::Kind::literal, t.line);
        e->value = Value::number(t.f);
        return e;
      }
      case Token::Kind::name: {
        auto e = make(Expr::Kind::literal, t.line);
        if (t.text == "true" || t.text == "True") {
          e->value = Value::boolean(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value::boolean(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::none();
        } else {
          e->kind = Expr::Kind::name;
          e->name = t.text;
        }
        return e;
      }
      case Token::Kind::op:
        if (t.text == "(") {
          if (is_op(")")) {
            ++k_;
            return make(Expr::Kind::list, t.line);  // ()
          }
          ExprPtr inner = tuple_or_expression();
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          auto e = make(Expr::Kind::list, t.line);
          while (!is_op("]")) {
            e->kids.push_back(expression());
            if (!is_op(",")) break;
            ++k_;
          }
          expect_op("]");
          return e;
        }
        if (t.text == "{") {
          auto e = make(Expr::Kind::dict, t.line);
          while (!is_op("}")) {
            e->kids.push_back(expression());
            expect_op(":");
            e->kids.push_back(expression());
            if (!is_op(",")) break;
            ++k_;
          }
          expect_op("}");
          return e;
        }
        break;
      default: break;
    }
    fail(origin_, t.line, "unexpected " + describe(t) + " in an expression");
  }

  ExprPtr postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        ++k_;
        auto e = make(Expr::Kind::attr, node->line);
        if (peek().kind == Token::Kind::integer) {  // foo.0 is foo[0]
          e->kind = Expr::Kind::item;
          auto idx = make(Expr::Kind::literal, node->line);
          idx->value = Value::integer(next().i);
          e->kids.push_back(std::move(node));
          e->kids.push_back(std::move(idx));
        } else {
          e->name = expect_name("an attribute name");
          e->kids.push_back(std::move(node));
        }
        node = std::move(e);
      } else if (is_op("[")) {
        ++k_;
        node = subscript(std::move(node));
      } else if (is_op("(")) {
        node = call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj) {
    std::vector<ExprPtr> parts(3);
    size_t part = 0;
    bool sliced = false;
    while (!is_op("]")) {
      if (is_op(":")) {
        ++k_;
        sliced = true;
        if (++part > 2) fail(origin_, obj->line, "a slice has at most start:stop:step");
        continue;
      }
      if (parts[part])
        fail(origin_, obj->line, "unexpected " + describe(peek()) + " in a subscript");
      parts[part] = expression();
    }
    expect_op("]");
    if (!sliced) {
      if (!parts[0]) fail(origin_, obj->line, "an empty subscript []");
      auto e = make(Expr::Kind::item, obj->line);
      e->kids.push_back(std::move(obj));
      e->kids.push_back(std::move(parts[0]));
      return e;
    }
    auto e = make(Expr::Kind::slice, obj->line);
    e->kids.push_back(std::move(obj));
    for (auto& p : parts) e->kids.push_back(std::move(p));
    return e;
  }

  std::vector<Arg> call_args() {
    expect_op("(");
    std::vector<Arg> args;
    while (!is_op(")")) {
      Arg a;
      if (peek().kind == Token::Kind::name && is_op("=", 1)) {
        a.name = next().text;
        ++k_;
      } else if (!args.empty() && !args.back().name.empty()) {
        fail(origin_, peek().line, "a positional argument follows a keyword argument");
      }
      a.value = expression();
      args.push_back(std::move(a));
      if (!is_op(",")) break;
      ++k_;
    }
    expect_op(")");
    return args;
  }

  ExprPtr call(ExprPtr callee) {
    const int line = callee->line;
    if (callee->kind == Expr::Kind::name && !macros_.count(callee->name) &&
        !is_global_function(callee->name))
      fail(origin_, line,
           "calls '" + callee->name +
               "', which is neither a macro of the template nor a supported "
               "function (namespace, range, dict, raise_exception, strftime_now)");
    if (callee->kind == Expr::Kind::attr && !is_method(callee->name))
      fail(origin_, line, "method '" + callee->name + "' is not supported");
    auto e = make(Expr::Kind::call, line);
    e->kids.push_back(std::move(callee));
    e->args = call_args();
    return e;
  }

  ExprPtr filters_and_tests(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        ++k_;
        auto e = make(Expr::Kind::filter, node->line);
        e->name = expect_name("a filter name");
        if (!is_filter(e->name))
          fail(origin_, e->line, "filter '" + e->name + "' is not supported");
        e->kids.push_back(std::move(node));
        if (is_op("(")) e->args = call_args();
        node = std::move(e);
      } else if (is_name("is")) {
        ++k_;
        auto e = make(Expr::Kind::test, node->line);
        if (is_name("not")) {
          ++k_;
          e->negated = true;
        }
        e->name = expect_name("a test name");
        if (!is_test(e->name)) fail(origin_, e->line, "test '" + e->name + "' is not supported");
        e->kids.push_back(std::move(node));
        if (is_op("(")) {
          e->args = call_args();
        } else if (takes_bare_argument()) {
          Arg a;
          a.value = postfix(primary());
          e->args.push_back(std::move(a));
        }
        node = std::move(e);
      } else if (is_op("(")) {
        node = call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // `x is divisibleby 3`, `x is sameas false`: one bare argument, as Jinja reads it.
  bool takes_bare_argument() const {
    const Token& t = peek();
    if (t.kind == Token::Kind::string || t.kind == Token::Kind::integer ||
        t.kind == Token::Kind::number)
      return true;
    if (t.kind == Token::Kind::op) return t.text == "[" || t.text == "{";
    if (t.kind != Token::Kind::name) return false;
    static const std::set<std::string> kStops = {"else", "or", "and", "if", "is", "in", "not"};
    return !kStops.count(t.text);
  }

  const std::vector<Token>& t_;
  size_t k_ = 0;
  const std::string& origin_;
  const std::set<std::string>& macros_;
};

// ---- statements ------------------------------------------------------------------------------

class Parser {
 public:
  Parser(std::vector<Piece> pieces, const std::string& origin)
      : pieces_(std::move(pieces)), origin_(origin) {
    // Macros may be called before their definition's position in the text is rendered only if
    // defined earlier, but the parser accepts calls to any macro of the template.
    for (const Piece& p : pieces_)
      if (p.kind == Piece::Kind::statement && p.tokens.size() > 1 &&
          p.tokens[0].kind == Token::Kind::name && p.tokens[0].text == "macro" &&
          p.tokens[1].kind == Token::Kind::name)
        macros_.insert(p.tokens[1].text);
  }

  Body parse_all() {
    std::string stop;
    Body body = parse_body({}, stop);
    return body;
  }

 private:
  // Nodes until a statement whose keyword is in `ends` (returned in `stop`, its tokens
  // consumed up to after the keyword) or the end of the template.
  Body parse_body(const std::set<std::string>& ends, std::string& stop) {
    Body out;
    while (k_ < pieces_.size()) {
      const Piece& p = pieces_[k_];
      if (p.kind == Piece::Kind::text) {
        Node n;
        n.kind = Node::Kind::text;
        n.line = p.line;
        n.text = p.text;
        out.push_back(std::move(n));
        ++k_;
        continue;
      }
      if (p.kind == Piece::Kind::output) {
        ExprParser ep(p.tokens, origin_, macros_);
        Node n;
        n.kind = Node::Kind::output;
        n.line = p.line;
        n.expr = ep.tuple_or_expression();
        ep.expect_end();
        out.push_back(std::move(n));
        ++k_;
        continue;
      }
      if (p.tokens.empty() || p.tokens[0].kind != Token::Kind::name)
        fail(origin_, p.line, "a statement tag without a keyword");
      const std::string kw = p.tokens[0].text;
      if (ends.count(kw)) {
        stop = kw;
        return out;
      }
      out.push_back(statement(kw));
    }
    if (!ends.empty()) {
      std::string list;
      for (const auto& e : ends) list += (list.empty() ? "" : " or ") + e;
      fail(origin_, pieces_.empty() ? 1 : pieces_.back().line,
           "the template ends before {% " + list + " %}");
    }
    return out;
  }

  Node statement(const std::string& kw) {
    const Piece& p = pieces_[k_];
    ExprParser ep(p.tokens, origin_, macros_);
    ep.next();  // the keyword
    Node n;
    n.line = p.line;
    if (kw == "if") return branch(ep, n);
    if (kw == "for") return loop(ep, n);
    if (kw == "set") return assign(ep, n);
    if (kw == "macro") return macro(ep, n);
    if (kw == "break" || kw == "continue") {
      ep.expect_end();
      n.kind = kw == "break" ? Node::Kind::brk : Node::Kind::cont;
      ++k_;
      return n;
    }
    if (kw == "generation") {  // transformers' AssistantTracker: a marker, no output of its own
      ep.expect_end();
      ++k_;
      std::string stop;
      n.kind = Node::Kind::sequence;
      n.bodies.push_back(parse_body({"endgeneration"}, stop));
      ExprParser end(pieces_[k_].tokens, origin_, macros_);
      end.next();
      end.expect_end();
      ++k_;
      return n;
    }
    static const std::set<std::string> kKnown = {"elif",     "else",   "endif",        "endfor",
                                                 "endmacro", "endset", "endgeneration"};
    if (kKnown.count(kw)) fail(origin_, p.line, "{% " + kw + " %} without its opening statement");
    fail(origin_, p.line,
         "statement '" + kw +
             "' is not supported (the subset: if, for, set, "
             "macro, break, continue, generation)");
  }

  // After the keyword statement `kw` that ended a body: its tag must have nothing more.
  void close_tag() {
    ExprParser end(pieces_[k_].tokens, origin_, macros_);
    end.next();
    end.expect_end();
    ++k_;
  }

  Node branch(ExprParser& ep, Node& n) {
    n.kind = Node::Kind::branch;
    n.conds.push_back(ep.expression());
    ep.expect_end();
    ++k_;
    while (true) {
      std::string stop;
      n.bodies.push_back(parse_body({"elif", "else", "endif"}, stop));
      if (stop == "endif") {
        close_tag();
        return std::move(n);
      }
      ExprParser next(pieces_[k_].tokens, origin_, macros_);
      next.next();
      if (stop == "elif") {
        n.conds.push_back(next.expression());
      } else {
        n.conds.push_back(nullptr);
      }
      next.expect_end();
      ++k_;
      if (stop == "else") {
        std::string end;
        n.bodies.push_back(parse_body({"endif"}, end));
        close_tag();
        return std::move(n);
      }
    }
  }

  Node loop(ExprParser& ep, Node& n) {
    n.kind = Node::Kind::loop;
    n.targets.push_back(ep.expect_name("a loop variable"));
    while (ep.is_op(",")) {
      ep.next();
      n.targets.push_back(ep.expect_name("a loop variable"));
    }
    if (!ep.is_name("in")) fail(origin_, n.line, "expected 'in' in a for statement");
    ep.next();
    n.expr = ep.expression_no_condition();
    if (ep.is_name("if")) {
      ep.next();
      n.cond = ep.expression();
    }
    if (ep.is_name("recursive")) fail(origin_, n.line, "recursive for loops are not supported");
    ep.expect_end();
    ++k_;
    std::string stop;
    n.bodies.push_back(parse_body({"else", "endfor"}, stop));
    if (stop == "else") {
      close_tag();
      std::string end;
      n.bodies.push_back(parse_body({"endfor"}, end));
    }
    close_tag();
    return std::move(n);
  }

  Node assign(ExprParser& ep, Node& n) {
    n.kind = Node::Kind::assign;
    n.targets.push_back(ep.expect_name("a variable name"));
    if (ep.is_op(".")) {
      ep.next();
      n.attr = ep.expect_name("an attribute name");
    }
    if (ep.is_op(",")) fail(origin_, n.line, "assigning to several names at once is not supported");
    if (ep.is_op("=")) {
      ep.next();
      n.expr = ep.tuple_or_expression();
      ep.expect_end();
      ++k_;
      return std::move(n);
    }
    if (ep.is_op("|")) fail(origin_, n.line, "filtered block assignments are not supported");
    ep.expect_end();
    ++k_;
    std::string stop;
    n.bodies.push_back(parse_body({"endset"}, stop));
    close_tag();
    return std::move(n);
  }

  Node macro(ExprParser& ep, Node& n) {
    n.kind = Node::Kind::macro;
    n.name = ep.expect_name("a macro name");
    ep.expect_op("(");
    while (!ep.is_op(")")) {
      n.targets.push_back(ep.expect_name("a parameter name"));
      if (ep.is_op("=")) {
        ep.next();
        n.defaults.push_back(ep.expression());
      } else {
        n.defaults.push_back(nullptr);
      }
      if (!ep.is_op(",")) break;
      ep.next();
    }
    ep.expect_op(")");
    ep.expect_end();
    ++k_;
    std::string stop;
    n.bodies.push_back(parse_body({"endmacro"}, stop));
    close_tag();
    return std::move(n);
  }

  std::vector<Piece> pieces_;
  size_t k_ = 0;
  const std::string& origin_;
  std::set<std::string> macros_;
};

}  // namespace

std::unique_ptr<Program> parse_template(std::string_view source, std::string origin) {
  auto program = std::make_unique<Program>();
  program->origin = std::move(origin);
  // Jinja drops one trailing newline (keep_trailing_newline is off).
  if (source.size() >= 2 && source.substr(source.size() - 2) == "\r\n")
    source.remove_suffix(2);
  else if (!source.empty() && source.back() == '\n')
    source.remove_suffix(1);
  std::vector<Piece> pieces = Lexer(source, program->origin).run();
  program->body = Parser(std::move(pieces), program->origin).parse_all();
  return program;
}

}  // namespace sy::chat
