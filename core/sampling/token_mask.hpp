// Which tokens may come next under a grammar (grammar.hpp): the mask a constrained sequence's
// logits get before the sampler sees them.
//
// A mask is computed by walking a trie of the vocabulary's byte strings from the sequence's
// grammar state: a branch is left as soon as its bytes are refused, so a state that takes few
// bytes (after a key, between values) costs a few hundred trie nodes, and one that takes almost
// anything (inside a string) one walk of the trie. Masks are cached per grammar state
// (XGrammar's adaptive cache, keyed here by the whole state): a state a sequence comes back to —
// every character of a string, every item of an array, every request with the same schema —
// costs a hash look-up.
//
// Control tokens (added tokens marked special, ids the tokenizer lacks) are never allowed; the
// model's end-of-sequence ids are allowed exactly when the text so far is a whole sentence of
// the grammar. Depends on nothing else of the core.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/sampling/grammar.hpp"

namespace sy {

// The vocabulary as a constraint reads it: each token's bytes, which are control tokens, and a
// trie of the others. Built once per model and shared.
class TokenTable {
 public:
  TokenTable(std::vector<std::string> bytes, std::vector<bool> control);

  int64_t size() const { return int64_t(bytes_.size()); }
  const std::string& bytes(int64_t id) const { return bytes_[size_t(id)]; }
  bool control(int64_t id) const { return control_[size_t(id)]; }

  struct Node {
    uint32_t child_begin = 0, child_end = 0;  // children: nodes [begin, end), by byte
    uint32_t ends_begin = 0, ends_end = 0;    // tokens whose bytes end here: ends()[begin, end)
    uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0]: the root (no bytes)
  const std::vector<int32_t>& ends() const { return ends_; }

 private:
  void build(uint32_t node, std::vector<int32_t>& ids, size_t lo, size_t hi, size_t depth);
  std::vector<std::string> bytes_;
  std::vector<bool> control_;
  std::vector<Node> nodes_;
  std::vector<int32_t> ends_;
};

// One grammar's masks over one vocabulary, cached by state. Not thread-safe: it belongs to the
// engine that samples (one thread); sequences with the same grammar share it.
class GrammarMasks {
 public:
  GrammarMasks(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> table);

  // The tokens that may follow `state` (bit id set), without the end-of-sequence rule.
  const std::vector<uint64_t>& allowed(const GrammarState& state);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  // Whether some bounded repetition is longer than any token reaches, so that its counts
  // beyond that share one mask (the constructor's canonical positions).
  bool merges_counts() const { return merges_; }
  const std::shared_ptr<const TokenTable>& table() const { return table_; }
  size_t cached() const { return cache_.size(); }

  // At most this many masks are kept (a few dozen MiB for a 150k vocabulary); beyond, the cache
  // starts over: a long-lived server never grows without bound.
  static constexpr size_t kMaxCached = 2048;

 private:
  struct StateHash {
    size_t operator()(const std::vector<GrammarState::Stack>& stacks) const;
  };
  void walk(uint32_t node, size_t depth, std::vector<uint64_t>& bits);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTable> table_;
  // Each position's stand-in for masks: itself, or, inside a bounded repetition's tail with
  // more to go than the longest token has bytes (+1), the same place at that count. A token
  // takes at most one byte per repetition, so it cannot tell those counts apart: the states
  // that differ only there (a long string's count-down) share one walk and one cache entry.
  std::vector<Grammar::Position> canonical_;
  bool merges_ = false;
  std::vector<GrammarState::Stack> canonical_stacks(const GrammarState& state) const;
  std::unordered_map<std::vector<GrammarState::Stack>, std::vector<uint64_t>, StateHash> cache_;
  // The walk's stacks, as links of an arena (position, the link below; −1: none), shared between
  // the trie's branches; per depth, the stacks alive there (−1: the empty, accepting stack).
  struct Link {
    Grammar::Position position;
    int32_t below;
  };
  std::vector<Link> arena_;
  std::vector<std::vector<int32_t>> alive_;
  int32_t link(Grammar::Position position, int32_t below);
  void expand(int32_t stack, std::vector<int32_t>& out);
};

// One sequence's constraint: its grammar state and the shared masks.
class GrammarConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<GrammarMasks> masks)
      : masks_(std::move(masks)), state_(masks_->grammar()) {}

  // Sets to −infinity every logit whose token cannot come next; the `eos` ids stay when the
  // text so far is whole. Returns how many tokens remain.
  int64_t mask(std::span<float> logits, std::span<const int64_t> eos);
  // The token the sampler picked (one mask() left); an end-of-sequence id changes nothing.
  void accept(int64_t id);
  // No byte can follow: the constrained output is whole.
  bool complete() const { return state_.finished(); }
  const GrammarState& state() const { return state_; }

 private:
  std::shared_ptr<GrammarMasks> masks_;
  GrammarState state_;
};

}  // namespace sy
