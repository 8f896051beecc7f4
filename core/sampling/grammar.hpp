// Grammars that constrain what a sequence may write: llama.cpp's GBNF (rules of literals,
// character classes, groups, alternatives and repetition), compiled to a context-free grammar
// over bytes, and the state of one sequence's walk through it.
//
// Why bytes: tokens are byte strings, and a byte-level BPE token may end inside a UTF-8
// character. A character class is compiled to the UTF-8 byte sequences of its code points
// (surrogates excluded), so every text the grammar takes is valid UTF-8, whichever way the
// tokens split it.
//
// The state is a set of stacks of positions in the grammar (llama.cpp's representation, and
// XGrammar's pushdown automaton): the top of each stack is a byte class the next byte must
// match, the entries below are where to go on when a rule ends; an empty stack means the text
// so far is a whole sentence of the grammar. A rule called last in an alternative does not
// grow the stack (a tail call), so repetition runs in constant space. Left recursion is refused
// when the grammar is compiled: it would expand forever.
//
// GBNF as written in llama.cpp's grammars/README.md:
//   name ::= alternatives          rule names are [a-zA-Z0-9-]+; `root` by default the start
//   "text"  [a-z\n]  [^"\\]  .     literal (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH),
//                                  character class (ranges, negation), any character
//   ( ... )  a | b                 grouping, alternatives
//   x*  x+  x?  x{m}  x{m,}  x{m,n}
//   # comment to the end of the line
// Depends on nothing else of the core.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sy {

// A grammar that cannot be compiled: where (GBNF: "line L, column C" of the text) and why.
class GrammarError : public std::runtime_error {
 public:
  GrammarError(std::string where, const std::string& message)
      : std::runtime_error(where + ": " + message), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// The UTF-8 bytes of code point `cp` (at most U+10FFFF; the caller excludes surrogates).
std::string utf8_bytes(uint32_t cp);

class Grammar {
 public:
  // Compiles GBNF text, starting at rule `root`. Throws GrammarError: a syntax error, a rule
  // used but not defined, a missing root, left recursion, a character out of Unicode.
  static std::shared_ptr<const Grammar> from_gbnf(std::string_view text,
                                                  std::string_view root = "root");

  const std::string& source() const { return source_; }  // the GBNF it was compiled from

  // A position in the compiled grammar (an index into its elements).
  using Position = uint32_t;
  // One element of an alternative: a byte class, a call of a rule, or the alternative's end.
  struct Element {
    enum class Kind : uint8_t { bytes, rule, end } kind;
    uint32_t index;  // bytes: into byte_sets(); rule: the rule's number
  };
  using ByteSet = std::array<uint64_t, 4>;  // bit b: byte b is taken

  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  // Each rule's alternatives, as the position of their first element.
  const std::vector<std::vector<Position>>& alternatives() const { return alternatives_; }
  uint32_t root() const { return root_; }
  // The optional tails of bounded repetitions x{m,n} (n − m > 1), each as its rules by count:
  // chain[k − 1] is opt_k ::= x opt_{k−1} | ε (opt_1 ::= x | ε), so a position in opt_k has k
  // more x to go at most. Token masks use them to treat counts beyond any token's reach alike.
  const std::vector<std::vector<uint32_t>>& bounded_chains() const { return chains_; }

  static bool has(const ByteSet& set, unsigned char b) { return (set[b >> 6] >> (b & 63)) & 1; }

 private:
  friend class GbnfCompiler;
  std::string source_;
  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::vector<Position>> alternatives_;
  std::vector<std::vector<uint32_t>> chains_;
  uint32_t root_ = 0;
};

// Where one sequence stands in a grammar: the canonical (sorted, duplicate-free) set of stacks.
// Each stack lists positions from the bottom; its back is a byte element. Cheap to copy and
// compare, so it is also the key of the token-mask cache (token_mask.hpp).
class GrammarState {
 public:
  using Stack = std::vector<Grammar::Position>;

  // At the start of the grammar's root rule.
  explicit GrammarState(std::shared_ptr<const Grammar> grammar);

  // Takes one byte; false (and the state unchanged) when no stack can.
  bool feed(unsigned char byte);
  // Takes the bytes of a text; false (and the state as before the text) when one is refused.
  bool feed(std::string_view text);
  // The text so far is a whole sentence of the grammar (it may still go on).
  bool accepting() const;
  // No byte can come next.
  bool finished() const;

  const std::vector<Stack>& stacks() const { return stacks_; }
  const Grammar& grammar() const { return *grammar_; }
  bool operator==(const GrammarState& o) const { return stacks_ == o.stacks_; }

  // Every stack reached from `stack` by calling rules until a byte element is on top (an empty
  // stack: the grammar may end there), appended to `out`.
  static void expand(const Grammar& g, Stack stack, std::vector<Stack>& out);

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
};

}  // namespace sy
