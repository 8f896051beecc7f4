// Token masks from a grammar state by a walk of the vocabulary's trie (token_mask.hpp).
#include "core/sampling/token_mask.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace sy {

TokenTable::TokenTable(std::vector<std::string> bytes, std::vector<bool> control)
    : bytes_(std::move(bytes)), control_(std::move(control)) {
  control_.resize(bytes_.size(), true);
  std::vector<int32_t> ids;
  for (size_t id = 0; id < bytes_.size(); ++id)
    if (!control_[id] && !bytes_[id].empty()) ids.push_back(int32_t(id));
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] < bytes_[size_t(b)] ||
           (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
  });
  nodes_.emplace_back();
  build(0, ids, 0, ids.size(), 0);
}

// ids[lo, hi) share their first `depth` bytes (sorted, so the ones that end there come first).
void TokenTable::build(uint32_t node, std::vector<int32_t>& ids, size_t lo, size_t hi,
                       size_t depth) {
  auto len = [&](size_t i) { return bytes_[size_t(ids[i])].size(); };
  auto at = [&](size_t i) { return static_cast<uint8_t>(bytes_[size_t(ids[i])][depth]); };
  nodes_[node].ends_begin = uint32_t(ends_.size());
  while (lo < hi && len(lo) == depth) ends_.push_back(ids[lo++]);
  nodes_[node].ends_end = uint32_t(ends_.size());
  // The children first, side by side, then each one's subtree.
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t i = lo; i < hi;) {
    size_t j = i + 1;
    while (j < hi && at(j) == at(i)) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  const uint32_t first = uint32_t(nodes_.size());
  nodes_[node].child_begin = first;
  nodes_[node].child_end = first + uint32_t(groups.size());
  for (const auto& [a, b] : groups) {
    Node child;
    child.byte = at(a);
    nodes_.push_back(child);
  }
  for (size_t k = 0; k < groups.size(); ++k)
    build(first + uint32_t(k), ids, groups[k].first, groups[k].second, depth + 1);
}

size_t GrammarMasks::StateHash::operator()(const std::vector<GrammarState::Stack>& stacks) const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const auto& s : stacks) {
    mix(s.size() | (uint64_t(1) << 40));
    for (Grammar::Position p : s) mix(p);
  }
  return size_t(h);
}

int32_t GrammarMasks::link(Grammar::Position position, int32_t below) {
  arena_.push_back({position, below});
  return int32_t(arena_.size() - 1);
}

// As GrammarState::expand, on arena links: every stack with a byte class on top (or −1, the
// empty stack) that `stack` reaches by calling rules.
void GrammarMasks::expand(int32_t stack, std::vector<int32_t>& out) {
  const Grammar& g = *grammar_;
  const Grammar::Position p = arena_[size_t(stack)].position;
  const Grammar::Element e = g.elements()[p];
  if (e.kind == Grammar::Element::Kind::bytes) {
    out.push_back(stack);
  } else if (e.kind == Grammar::Element::Kind::end) {
    const int32_t below = arena_[size_t(stack)].below;
    if (below < 0)
      out.push_back(-1);
    else
      expand(below, out);
  } else {
    const int32_t below = arena_[size_t(stack)].below;
    const int32_t base =
        g.elements()[p + 1].kind == Grammar::Element::Kind::end ? below : link(p + 1, below);
    for (Grammar::Position alt : g.alternatives()[e.index]) expand(link(alt, base), out);
  }
}

void GrammarMasks::walk(uint32_t node, size_t depth, std::vector<uint64_t>& bits) {
  const Grammar& g = *grammar_;
  const TokenTable& t = *table_;
  if (alive_.size() < depth + 2) alive_.resize(depth + 2);
  const uint32_t begin = t.nodes()[node].child_begin, end = t.nodes()[node].child_end;
  for (uint32_t c = begin; c < end; ++c) {
    const uint8_t byte = t.nodes()[c].byte;
    const size_t mark = arena_.size();
    std::vector<int32_t> next = std::move(alive_[depth + 1]);
    next.clear();
    for (int32_t s : alive_[depth]) {
      if (s < 0) continue;
      const Grammar::Position p = arena_[size_t(s)].position;
      if (!Grammar::has(g.byte_sets()[g.elements()[p].index], byte)) continue;
      expand(link(p + 1, arena_[size_t(s)].below), next);
    }
    if (!next.empty()) {
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      for (uint32_t i = t.nodes()[c].ends_begin; i < t.nodes()[c].ends_end; ++i) {
        const auto id = size_t(t.ends()[i]);
        bits[id >> 6] |= uint64_t(1) << (id & 63);
      }
      alive_[depth + 1] = std::move(next);
      walk(c, depth + 1, bits);
      next = std::move(alive_[depth + 1]);
    }
    alive_[depth + 1] = std::move(next);
    arena_.resize(mark);
  }
}

GrammarMasks::GrammarMasks(std::shared_ptr<const Grammar> grammar,
                           std::shared_ptr<const TokenTable> table)
    : grammar_(std::move(grammar)), table_(std::move(table)) {
  const Grammar& g = *grammar_;
  canonical_.resize(g.elements().size());
  for (size_t p = 0; p < canonical_.size(); ++p) canonical_[p] = Grammar::Position(p);
  size_t longest = 0;
  for (int64_t id = 0; id < table_->size(); ++id)
    if (!table_->control(id)) longest = std::max(longest, table_->bytes(id).size());
  const size_t reach = longest + 1;  // opt_reach: reach more to go, one past any token
  // Rules that can match the empty text: the repeated item must take a byte, or a token could
  // pass any number of counts.
  std::vector<bool> nullable(g.alternatives().size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nullable.size(); ++r) {
      if (nullable[r]) continue;
      for (Grammar::Position p : g.alternatives()[r]) {
        Grammar::Position q = p;
        while (g.elements()[q].kind == Grammar::Element::Kind::rule &&
               nullable[g.elements()[q].index])
          ++q;
        if (g.elements()[q].kind == Grammar::Element::Kind::end) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  for (const std::vector<uint32_t>& chain : g.bounded_chains()) {
    if (chain.size() <= reach) continue;
    const Grammar::Element one = g.elements()[g.alternatives()[chain[0]][0]];
    if (one.kind == Grammar::Element::Kind::end ||
        (one.kind == Grammar::Element::Kind::rule && nullable[one.index]))
      continue;
    const std::vector<Grammar::Position>& to = g.alternatives()[chain[reach - 1]];
    for (size_t k = reach + 1; k <= chain.size(); ++k) {
      const std::vector<Grammar::Position>& from = g.alternatives()[chain[k - 1]];
      for (size_t a = 0; a < from.size() && a < to.size(); ++a)
        for (Grammar::Position o = 0;; ++o) {
          canonical_[from[a] + o] = to[a] + o;
          if (g.elements()[from[a] + o].kind == Grammar::Element::Kind::end) break;
        }
    }
    merges_ = true;
  }
}

std::vector<GrammarState::Stack> GrammarMasks::canonical_stacks(const GrammarState& state) const {
  std::vector<GrammarState::Stack> stacks = state.stacks();
  if (!merges_) return stacks;
  for (GrammarState::Stack& s : stacks)
    for (Grammar::Position& p : s) p = canonical_[p];
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  return stacks;
}

const std::vector<uint64_t>& GrammarMasks::allowed(const GrammarState& state) {
  std::vector<GrammarState::Stack> key = canonical_stacks(state);
  if (const auto hit = cache_.find(key); hit != cache_.end()) return hit->second;
  if (cache_.size() >= kMaxCached) cache_.clear();
  std::vector<uint64_t> bits((size_t(table_->size()) + 63) / 64, 0);
  arena_.clear();
  alive_.resize(2);
  alive_[0].clear();
  for (const GrammarState::Stack& s : key) {
    int32_t h = -1;
    for (Grammar::Position p : s) h = link(p, h);
    alive_[0].push_back(h);
  }
  walk(0, 0, bits);
  return cache_.emplace(std::move(key), std::move(bits)).first->second;
}

int64_t GrammarConstraint::mask(std::span<float> logits, std::span<const int64_t> eos) {
  const std::vector<uint64_t>& bits = masks_->allowed(state_);
  const float none = -std::numeric_limits<float>::infinity();
  std::vector<std::pair<int64_t, float>> kept_eos;
  if (state_.accepting())
    for (int64_t id : eos)
      if (id >= 0 && size_t(id) < logits.size()) kept_eos.emplace_back(id, logits[size_t(id)]);
  // A word of 64 ids at a time: all refused (structure: most words) is one fill, all allowed
  // (inside a string: most words) one count; only mixed words go id by id, without branches.
  int64_t left = 0;
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = w < bits.size() ? bits[w] : 0;
    float* row = logits.data() + w * 64;
    const size_t len = std::min<size_t>(64, n - w * 64);
    if (word == 0) {
      std::fill(row, row + len, none);
      continue;
    }
    int64_t kept = 0;
    for (size_t j = 0; j < len; ++j) {
      const bool ok = (word >> j) & 1;
      const float v = ok ? row[j] : none;
      row[j] = v;
      kept += v != none;
    }
    left += kept;
  }
  for (const auto& [id, value] : kept_eos)
    if (logits[size_t(id)] == none && value != none) {
      logits[size_t(id)] = value;
      ++left;
    }
  return left;
}

void GrammarConstraint::accept(int64_t id) {
  const TokenTable& t = *masks_->table();
  if (id < 0 || id >= t.size() || t.control(id)) return;
  state_.feed(t.bytes(id));
}

}  // namespace sy
