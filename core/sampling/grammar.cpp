// GBNF → a byte-level grammar (grammar.hpp), and the walk of its stacks.
#include "core/sampling/grammar.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace sy {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 10000;  // x{m,n}: m and n − m, so a grammar stays a few MiB at most

// ---- the parsed text ----

struct Item;
using Sequence = std::vector<Item>;
using Alternatives = std::vector<Sequence>;
struct Item {
  enum class Kind { literal, char_class, rule, group } kind;
  std::string text;                                   // literal: its bytes; rule: its name
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // char_class: code points, inclusive
  bool negated = false;
  Alternatives group;
  int min = 1, max = 1;  // max −1: unbounded
  size_t at = 0;         // offset in the text, for errors
};

// Code point ranges → UTF-8: each sequence is one byte range per byte (RE2's and Rust
// regex-syntax's split: first by encoded length, then until every continuation byte spans
// 80–BF or a single prefix).
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

}  // namespace

std::string utf8_bytes(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

namespace {

void utf8_split(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  if (lo > hi) return;
  if (lo < 0xD800 && hi > 0xDFFF) {  // surrogates are not characters
    utf8_split(lo, 0xD7FF, out);
    utf8_split(0xE000, hi, out);
    return;
  }
  if (lo >= 0xD800 && hi <= 0xDFFF) return;
  if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
  if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
  if (lo > hi) return;
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= edge && hi > edge) {
      utf8_split(lo, edge, out);
      utf8_split(edge + 1, hi, out);
      return;
    }
  const std::string a = utf8_bytes(lo), b = utf8_bytes(hi);
  for (size_t i = 1; i < a.size(); ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_split(lo, lo | m, out);
        utf8_split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_split(lo, (hi & ~m) - 1, out);
        utf8_split(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteRanges seq;
  for (size_t i = 0; i < a.size(); ++i) seq.emplace_back(uint8_t(a[i]), uint8_t(b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

// Parses GBNF and lowers it to the flat element table of a Grammar.
class GbnfCompiler {
 public:
  explicit GbnfCompiler(std::string_view text) : text_(text) {}

  std::shared_ptr<const Grammar> compile(std::string_view root_name) {
    parse();
    const auto root = names_.find(std::string(root_name));
    if (root == names_.end())
      throw GrammarError("grammar",
                         "there is no rule `" + std::string(root_name) + "` to start from");
    for (const auto& [name, at] : order_) lower_rule(name);
    auto g = std::make_shared<Grammar>();
    g->source_ = std::string(text_);
    g->root_ = root->second;
    flatten(*g);
    refuse_left_recursion(*g);
    g->chains_ = std::move(chains_);
    return g;
  }

 private:
  // ---- parsing ----
  [[noreturn]] void fail(size_t at, const std::string& message) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i)
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    throw GrammarError("line " + std::to_string(line) + ", column " + std::to_string(column),
                       message);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }
  void skip_blank() {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  std::string name() {
    const size_t start = pos_;
    while (!at_end() && name_char(peek())) ++pos_;
    if (pos_ == start) fail(pos_, "a rule name was expected");
    return std::string(text_.substr(start, pos_ - start));
  }
  // A rule starts here: `name ::=`.
  bool rule_head() const {
    size_t p = pos_;
    while (p < text_.size() && name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  void parse() {
    skip_blank();
    while (!at_end()) {
      const size_t at = pos_;
      std::string n = name();
      skip_blank();
      if (text_.substr(pos_, 3) != "::=") fail(pos_, "`::=` was expected after `" + n + "`");
      pos_ += 3;
      if (names_.count(n)) fail(at, "rule `" + n + "` is defined twice");
      names_[n] = uint32_t(order_.size());
      order_.emplace_back(n, at);
      parsed_.push_back(alternatives(false));
      skip_blank();
    }
    if (order_.empty()) fail(0, "the grammar has no rules");
  }

  Alternatives alternatives(bool nested) {
    Alternatives alts;
    alts.push_back(sequence(nested));
    while (peek() == '|') {
      ++pos_;
      alts.push_back(sequence(nested));
    }
    return alts;
  }

  Sequence sequence(bool nested) {
    Sequence seq;
    for (;;) {
      skip_blank();
      if (at_end() || peek() == '|' || (nested && peek() == ')')) break;
      if (!nested && rule_head()) break;
      seq.push_back(item(nested));
    }
    return seq;
  }

  Item item(bool nested) {
    Item it;
    it.at = pos_;
    const char c = peek();
    if (c == '"') {
      ++pos_;
      it.kind = Item::Kind::literal;
      while (peek() != '"') {
        if (at_end()) fail(it.at, "the literal is not closed");
        const size_t at = pos_;
        const uint32_t cp = character();
        if (cp > kMaxCodePoint) fail(at, "the character is beyond Unicode");
        it.text += text_[at] == '\\' ? utf8_bytes(cp) : std::string(text_.substr(at, pos_ - at));
      }
      ++pos_;
    } else if (c == '[') {
      ++pos_;
      it.kind = Item::Kind::char_class;
      if (peek() == '^') {
        it.negated = true;
        ++pos_;
      }
      while (peek() != ']') {
        if (at_end()) fail(it.at, "the character class is not closed");
        const uint32_t lo = character();
        uint32_t hi = lo;
        if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
          ++pos_;
          hi = character();
        }
        if (hi < lo) fail(it.at, "a range of the class ends before it starts");
        if (hi > kMaxCodePoint) fail(it.at, "the class reaches beyond Unicode");
        it.ranges.emplace_back(lo, hi);
      }
      ++pos_;
    } else if (c == '.') {
      ++pos_;
      it.kind = Item::Kind::char_class;
      it.ranges.emplace_back(0, kMaxCodePoint);
    } else if (c == '(') {
      ++pos_;
      it.kind = Item::Kind::group;
      it.group = alternatives(true);
      skip_blank();
      if (peek() != ')') fail(it.at, "the group is not closed");
      ++pos_;
    } else if (name_char(c)) {
      it.kind = Item::Kind::rule;
      it.text = name();
    } else if (c == ')' && !nested) {
      fail(pos_, "`)` closes no group");
    } else {
      fail(pos_, std::string("unexpected `") + c + "`");
    }
    quantifier(it);
    return it;
  }

  void quantifier(Item& it) {
    const char c = peek();
    if (c == '*')
      it.min = 0, it.max = -1, ++pos_;
    else if (c == '+')
      it.min = 1, it.max = -1, ++pos_;
    else if (c == '?')
      it.min = 0, it.max = 1, ++pos_;
    else if (c == '{') {
      const size_t at = pos_++;
      it.min = number(at);
      it.max = it.min;
      if (peek() == ',') {
        ++pos_;
        it.max = peek() == '}' ? -1 : number(at);
      }
      if (peek() != '}') fail(at, "`}` was expected to end the repetition");
      ++pos_;
      if (it.max >= 0 && it.max < it.min) fail(at, "the repetition's maximum is below its minimum");
      if (it.min > kMaxRepeat || (it.max >= 0 && it.max - it.min > kMaxRepeat))
        fail(at, "repetitions are bounded at " + std::to_string(kMaxRepeat));
    }
  }

  int number(size_t at) {
    int64_t v = 0;
    const size_t start = pos_;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1000000) fail(at, "the repetition count is too large");
      ++pos_;
    }
    if (pos_ == start) fail(at, "a number was expected in the repetition");
    return int(v);
  }

  // One character of a literal or class: a UTF-8 sequence or an escape.
  uint32_t character() {
    const size_t at = pos_;
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return hex(2, at);
        case 'u': return hex(4, at);
        case 'U': return hex(8, at);
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '/':
        case '^':
        case '.': return uint32_t(e);
        default: fail(at, std::string("unknown escape `\\") + e + "`");
      }
    }
    int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + size_t(n) > text_.size()) fail(at, "the text is not valid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0xFF >> (n + 1));
    for (int i = 1; i < n; ++i) {
      const unsigned char k = static_cast<unsigned char>(text_[pos_ + size_t(i)]);
      if ((k & 0xC0) != 0x80) fail(at, "the text is not valid UTF-8");
      cp = (cp << 6) | (k & 0x3F);
    }
    pos_ += size_t(n);
    return cp;
  }

  uint32_t hex(int digits, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) fail(at, "the escape needs " + std::to_string(digits) + " hex digits");
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    return v;
  }

  // ---- lowering: each rule to alternatives of elements ----
  using Elements = std::vector<Grammar::Element>;

  uint32_t new_rule() {
    lowered_.emplace_back();
    return uint32_t(order_.size() + lowered_.size() - 1);
  }
  std::vector<Elements>& rule_alts(uint32_t rule) {
    return rule < order_.size() ? named_[rule] : lowered_[rule - order_.size()];
  }

  void lower_rule(const std::string& name) {
    const uint32_t id = names_.at(name);
    if (named_.size() < order_.size()) named_.resize(order_.size());
    std::vector<Elements> alts;
    for (const Sequence& seq : parsed_[id]) alts.push_back(lower_sequence(seq));
    named_[id] = std::move(alts);
  }

  Elements lower_sequence(const Sequence& seq) {
    Elements out;
    for (const Item& it : seq) {
      if (it.min == 1 && it.max == 1) {
        append_once(it, out);
        continue;
      }
      const Grammar::Element one = single(it);
      for (int i = 0; i < it.min; ++i) out.push_back(one);
      if (it.max < 0) {  // star ::= one star | ε
        const uint32_t star = new_rule();
        rule_alts(star) = {{one, rule_ref(star)}, {}};
        out.push_back(rule_ref(star));
      } else if (it.max > it.min) {  // opt_k ::= one opt_{k−1} | ε
        uint32_t inner = new_rule();
        rule_alts(inner) = {{one}, {}};
        std::vector<uint32_t> chain{inner};
        for (int k = 1; k < it.max - it.min; ++k) {
          const uint32_t outer = new_rule();
          rule_alts(outer) = {{one, rule_ref(inner)}, {}};
          inner = outer;
          chain.push_back(outer);
        }
        if (chain.size() > 1) chains_.push_back(std::move(chain));
        out.push_back(rule_ref(inner));
      }
    }
    return out;
  }

  static Grammar::Element rule_ref(uint32_t rule) { return {Grammar::Element::Kind::rule, rule}; }
  Grammar::Element bytes_ref(const Grammar::ByteSet& set) {
    auto [it, fresh] = set_index_.try_emplace(set, uint32_t(sets_.size()));
    if (fresh) sets_.push_back(set);
    return {Grammar::Element::Kind::bytes, it->second};
  }

  // The item once, as elements appended to `out`.
  void append_once(const Item& it, Elements& out) {
    if (it.kind == Item::Kind::literal) {
      for (unsigned char b : it.text) {
        Grammar::ByteSet s{};
        s[b >> 6] |= uint64_t(1) << (b & 63);
        out.push_back(bytes_ref(s));
      }
      return;
    }
    out.push_back(single(it));
  }

  // The item once, as one element (a byte class or a rule).
  Grammar::Element single(const Item& it) {
    switch (it.kind) {
      case Item::Kind::rule: {
        const auto found = names_.find(it.text);
        if (found == names_.end()) fail(it.at, "rule `" + it.text + "` is not defined");
        return rule_ref(found->second);
      }
      case Item::Kind::group: {
        const uint32_t r = new_rule();
        std::vector<Elements> alts;
        for (const Sequence& seq : it.group) alts.push_back(lower_sequence(seq));
        rule_alts(r) = std::move(alts);
        return rule_ref(r);
      }
      case Item::Kind::literal: {
        if (it.text.size() == 1) {
          Elements e;
          append_once(it, e);
          return e[0];
        }
        const uint32_t r = new_rule();
        Elements e;
        append_once(it, e);
        rule_alts(r) = {std::move(e)};
        return rule_ref(r);
      }
      case Item::Kind::char_class: return char_class(it);
    }
    fail(it.at, "unknown item");
  }

  Grammar::Element char_class(const Item& it) {
    // The code points taken, as sorted disjoint ranges.
    std::vector<std::pair<uint32_t, uint32_t>> r = it.ranges;
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& x : r)
      if (!merged.empty() && x.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, x.second);
      else
        merged.push_back(x);
    if (it.negated) {
      std::vector<std::pair<uint32_t, uint32_t>> rest;
      uint32_t next = 0;
      for (const auto& [lo, hi] : merged) {
        if (lo > next) rest.emplace_back(next, lo - 1);
        next = hi + 1;
      }
      if (next <= kMaxCodePoint) rest.emplace_back(next, kMaxCodePoint);
      merged = std::move(rest);
    }
    std::vector<ByteRanges> seqs;
    for (const auto& [lo, hi] : merged) utf8_split(lo, hi, seqs);
    if (seqs.empty()) fail(it.at, "the character class takes no character");
    auto set_of = [](std::pair<uint8_t, uint8_t> range) {
      Grammar::ByteSet s{};
      for (unsigned b = range.first; b <= range.second; ++b) s[b >> 6] |= uint64_t(1) << (b & 63);
      return s;
    };
    // One byte each (ASCII): a single class; otherwise a rule of the byte sequences, the
    // one-byte ones merged.
    Grammar::ByteSet ascii{};
    bool any_ascii = false;
    std::vector<Elements> alts;
    for (const ByteRanges& seq : seqs) {
      if (seq.size() == 1) {
        const auto s = set_of(seq[0]);
        for (int w = 0; w < 4; ++w) ascii[size_t(w)] |= s[size_t(w)];
        any_ascii = true;
        continue;
      }
      Elements e;
      for (const auto& range : seq) e.push_back(bytes_ref(set_of(range)));
      alts.push_back(std::move(e));
    }
    if (alts.empty()) return bytes_ref(ascii);
    if (any_ascii) alts.insert(alts.begin(), Elements{bytes_ref(ascii)});
    const uint32_t rule = new_rule();
    rule_alts(rule) = std::move(alts);
    return rule_ref(rule);
  }

  void flatten(Grammar& g) {
    const size_t rules = order_.size() + lowered_.size();
    g.alternatives_.resize(rules);
    for (uint32_t r = 0; r < rules; ++r)
      for (const Elements& alt : rule_alts(r)) {
        g.alternatives_[r].push_back(Grammar::Position(g.elements_.size()));
        g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
        g.elements_.push_back({Grammar::Element::Kind::end, 0});
      }
    g.byte_sets_ = sets_;
  }

  // A rule that can call itself before reading a byte would expand forever.
  void refuse_left_recursion(const Grammar& g) {
    const size_t rules = g.alternatives().size();
    std::vector<bool> nullable(rules, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules; ++r) {
        if (nullable[r]) continue;
        for (Grammar::Position p : g.alternatives()[r]) {
          bool all = true;
          for (; g.elements()[p].kind != Grammar::Element::Kind::end; ++p) {
            const auto& e = g.elements()[p];
            if (e.kind == Grammar::Element::Kind::bytes || !nullable[e.index]) {
              all = false;
              break;
            }
          }
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // Rules each rule may call before any byte.
    std::vector<std::vector<uint32_t>> left(rules);
    for (size_t r = 0; r < rules; ++r)
      for (Grammar::Position p : g.alternatives()[r])
        for (; g.elements()[p].kind == Grammar::Element::Kind::rule; ++p) {
          left[r].push_back(g.elements()[p].index);
          if (!nullable[g.elements()[p].index]) break;
        }
    std::vector<uint8_t> mark(rules, 0);  // 0 new, 1 on the path, 2 done
    std::function<void(uint32_t)> visit = [&](uint32_t r) {
      mark[r] = 1;
      for (uint32_t c : left[r]) {
        if (mark[c] == 1) {
          const uint32_t named = c < order_.size() ? c : r < order_.size() ? r : g.root();
          fail(order_[std::min<size_t>(named, order_.size() - 1)].second,
               "rule `" + order_[std::min<size_t>(named, order_.size() - 1)].first +
                   "` is left-recursive (it can reach itself before reading a character)");
        }
        if (mark[c] == 0) visit(c);
      }
      mark[r] = 2;
    };
    for (uint32_t r = 0; r < rules; ++r)
      if (mark[r] == 0) visit(r);
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::map<std::string, uint32_t> names_;
  std::vector<std::pair<std::string, size_t>> order_;  // named rules: name, offset
  std::vector<std::vector<uint32_t>> chains_;          // Grammar::bounded_chains()
  std::vector<Alternatives> parsed_;
  std::vector<std::vector<Elements>> named_, lowered_;
  std::vector<Grammar::ByteSet> sets_;
  std::map<Grammar::ByteSet, uint32_t> set_index_;
};

// Interned by text and root: requests with the same schema share one grammar while any holds
// it, and so share the engine's cache of its masks.
std::shared_ptr<const Grammar> Grammar::from_gbnf(std::string_view text, std::string_view root) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, std::weak_ptr<const Grammar>> interned;
  std::pair<std::string, std::string> key{std::string(text), std::string(root)};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (const auto it = interned.find(key); it != interned.end())
      if (auto alive = it->second.lock()) return alive;
  }
  std::shared_ptr<const Grammar> g = GbnfCompiler(text).compile(root);
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = interned.begin(); it != interned.end();)
    it = it->second.expired() ? interned.erase(it) : std::next(it);
  interned[std::move(key)] = g;
  return g;
}

void GrammarState::expand(const Grammar& g, Stack stack, std::vector<Stack>& out) {
  const Grammar::Position p = stack.back();
  const Grammar::Element& e = g.elements()[p];
  switch (e.kind) {
    case Grammar::Element::Kind::bytes: out.push_back(std::move(stack)); return;
    case Grammar::Element::Kind::end:
      stack.pop_back();
      if (stack.empty())
        out.emplace_back();
      else
        expand(g, std::move(stack), out);
      return;
    case Grammar::Element::Kind::rule: {
      stack.pop_back();
      // A call at the end of an alternative returns straight to its caller's caller.
      if (g.elements()[p + 1].kind != Grammar::Element::Kind::end) stack.push_back(p + 1);
      const auto& alts = g.alternatives()[e.index];
      for (size_t i = 0; i < alts.size(); ++i) {
        Stack s = i + 1 == alts.size() ? std::move(stack) : stack;
        s.push_back(alts[i]);
        expand(g, std::move(s), out);
      }
      return;
    }
  }
}

namespace {
void canonical(std::vector<GrammarState::Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}
}  // namespace

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  for (Grammar::Position alt : grammar_->alternatives()[grammar_->root()])
    expand(*grammar_, Stack{alt}, stacks_);
  canonical(stacks_);
}

bool GrammarState::feed(unsigned char byte) {
  std::vector<Stack> next;
  const Grammar& g = *grammar_;
  for (const Stack& s : stacks_) {
    if (s.empty() || !Grammar::has(g.byte_sets()[g.elements()[s.back()].index], byte)) continue;
    Stack moved = s;
    ++moved.back();
    expand(g, std::move(moved), next);
  }
  if (next.empty()) return false;
  canonical(next);
  stacks_ = std::move(next);
  return true;
}

bool GrammarState::feed(std::string_view text) {
  const std::vector<Stack> before = stacks_;
  for (char c : text)
    if (!feed(static_cast<unsigned char>(c))) {
      stacks_ = before;
      return false;
    }
  return true;
}

bool GrammarState::accepting() const {
  return !stacks_.empty() && stacks_.front().empty();  // sorted: the empty stack comes first
}

bool GrammarState::finished() const {
  return stacks_.size() == 1 && stacks_.front().empty();
}

}  // namespace sy
