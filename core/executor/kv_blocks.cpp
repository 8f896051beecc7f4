#include "core/executor/kv_blocks.hpp"

#include <algorithm>
#include <stdexcept>

namespace sy {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

// Tokens a sequence's record holds before it grows: a decode step then appends in place.
constexpr int64_t kReservedTokens = int64_t(1) << 16;

}  // namespace

const char* grow_status_name(KvBlocks::GrowStatus s) {
  switch (s) {
    case KvBlocks::GrowStatus::ok: return "ok";
    case KvBlocks::GrowStatus::pool_full: return "pool_full";
    case KvBlocks::GrowStatus::context_full: return "context_full";
  }
  return "?";
}

KvBlocks::KvBlocks(int64_t blocks, int64_t block_tokens, int64_t context)
    : block_tokens_(block_tokens), context_(context) {
  if (blocks < 1 || block_tokens < 1 || context < 1 || blocks > INT32_MAX / 2)
    throw std::invalid_argument("KvBlocks: blocks, block_tokens and context must be positive");
  blocks_.resize(size_t(blocks));
  tokens_.resize(size_t(blocks * block_tokens));
  free_.reserve(size_t(blocks));
  for (int64_t b = blocks; b-- > 0;) free_.push_back(int32_t(b));  // block 0 is taken first
  size_t buckets = 1;
  while (buckets < size_t(2 * blocks)) buckets *= 2;
  buckets_.assign(buckets, -1);
}

KvBlocks::Sequence KvBlocks::make_sequence() const {
  Sequence s;
  s.tokens.reserve(size_t(std::min(context_, kReservedTokens)));
  s.blocks.reserve(
      size_t((std::min(context_, kReservedTokens) + block_tokens_ - 1) / block_tokens_));
  return s;
}

KvBlocks::SeqId KvBlocks::add() {
  seqs_.emplace(next_id_, make_sequence());
  return next_id_++;
}

void KvBlocks::remove(SeqId id) {
  Sequence& s = seqs_.at(id);
  for (int32_t b : s.blocks) drop(b);
  promised_ -= s.promised;
  seqs_.erase(id);
}

void KvBlocks::promise(SeqId id, int64_t blocks) {
  Sequence& s = seqs_.at(id);
  promised_ += blocks - s.promised;
  s.promised = blocks;
}

KvBlocks::SeqId KvBlocks::fork(SeqId id) {
  Sequence copy = make_sequence();
  const Sequence& from = seqs_.at(id);
  copy.blocks = from.blocks;
  copy.tokens.assign(from.tokens.begin(), from.tokens.end());
  copy.length = from.length;
  for (int32_t b : copy.blocks) hold(b);
  seqs_.emplace(next_id_, std::move(copy));
  return next_id_++;
}

void KvBlocks::truncate(SeqId id, int64_t length) {
  Sequence& s = seqs_.at(id);
  if (length < 0 || length > s.length)
    throw std::invalid_argument("KvBlocks::truncate: length outside [0, sequence length]");
  const size_t keep = size_t((length + block_tokens_ - 1) / block_tokens_);
  while (s.blocks.size() > keep) {
    drop(s.blocks.back());
    s.blocks.pop_back();
  }
  // A cut inside a full block it alone holds: that block will be written again.
  if (length % block_tokens_ != 0 && !s.blocks.empty()) {
    const int32_t last = s.blocks.back();
    if (blocks_[size_t(last)].indexed && blocks_[size_t(last)].refs == 1) unindex(last);
  }
  s.length = length;
  s.tokens.resize(size_t(length));
}

int64_t KvBlocks::reuse_prefix(SeqId id, std::span<const int64_t> tokens) {
  Sequence& s = seqs_.at(id);
  if (s.length != 0)
    throw std::invalid_argument("KvBlocks::reuse_prefix: the sequence is not empty");
  int32_t parent = -1;
  const size_t bt = size_t(block_tokens_);
  // Whole blocks only, and at least one token left to compute.
  for (size_t i = 0; tokens.size() > 0 && (i + 1) * bt <= tokens.size() - 1; ++i) {
    const int32_t b = find_indexed(parent, tokens.subspan(i * bt, bt));
    if (b < 0) break;
    hold(b);
    s.blocks.push_back(b);
    parent = b;
  }
  s.length = int64_t(s.blocks.size()) * block_tokens_;
  s.tokens.assign(tokens.begin(), tokens.begin() + s.length);
  return s.length;
}

void KvBlocks::reserve(std::span<const Grow> grows, Reservation& r) {
  r.ok = false;
  r.status.assign(grows.size(), GrowStatus::ok);
  r.needed.assign(grows.size(), 0);
  r.copies.clear();
  r.undo.clear();
  int64_t remaining = available_blocks();
  bool ok = true;
  for (size_t i = 0; i < grows.size(); ++i) {
    const Sequence& s = seqs_.at(grows[i].seq);
    const int64_t length = s.length + grows[i].count;
    if (length > context_) {
      r.status[i] = GrowStatus::context_full;
      ok = false;
      continue;
    }
    r.needed[i] = (length + block_tokens_ - 1) / block_tokens_ - int64_t(s.blocks.size());
    // Writing into a shared, partial last block: the sequence gets its own copy first.
    if (grows[i].count > 0 && s.length % block_tokens_ != 0 &&
        blocks_[size_t(s.blocks.back())].refs > 1)
      ++r.needed[i];
    if (r.needed[i] > remaining) {
      r.status[i] = GrowStatus::pool_full;
      ok = false;
      continue;
    }
    remaining -= r.needed[i];
  }
  if (!ok) return;
  for (size_t i = 0; i < grows.size(); ++i) {
    Sequence& s = seqs_.at(grows[i].seq);
    Undo undo{grows[i].seq, s.blocks.size(), -1};
    // The blocks its length needs, counted again: a copy planned above may no longer be needed
    // (the other holders of a block shared by several forks copied it first in this loop, and
    // the last one keeps it), and it must not leave this one an extra block.
    const int64_t length = s.length + grows[i].count;
    int64_t n = (length + block_tokens_ - 1) / block_tokens_ - int64_t(s.blocks.size());
    if (grows[i].count > 0 && s.length % block_tokens_ != 0 &&
        blocks_[size_t(s.blocks.back())].refs > 1) {
      const int32_t shared = s.blocks.back(), own = take_block();
      r.copies.push_back({shared, own, s.length % block_tokens_});
      undo.replaced = shared;
      drop(shared);
      s.blocks.back() = own;
    }
    for (; n > 0; --n) s.blocks.push_back(take_block());
    r.undo.push_back(undo);
  }
  r.ok = true;
}

void KvBlocks::release(const Reservation& r) {
  if (!r.ok) return;
  for (const Undo& u : r.undo) {
    Sequence& s = seqs_.at(u.seq);
    while (s.blocks.size() > u.blocks) {
      drop(s.blocks.back());
      s.blocks.pop_back();
    }
    if (u.replaced >= 0) {
      drop(s.blocks.back());
      hold(u.replaced);
      s.blocks.back() = u.replaced;
    }
  }
}

void KvBlocks::commit(SeqId id, std::span<const int64_t> tokens) {
  Sequence& s = seqs_.at(id);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  s.length += int64_t(tokens.size());
  index_full_blocks(s);
}

int32_t KvBlocks::take_block() {
  if (free_.empty()) {
    if (lru_head_ < 0) throw std::logic_error("KvBlocks: no block to take (reserve counts them)");
    unindex(lru_head_);  // evicted: its tokens no longer match anything; it joins free_
  }
  const int32_t b = free_.back();
  free_.pop_back();
  blocks_[size_t(b)].refs = 1;
  return b;
}

void KvBlocks::hold(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (blk.refs == 0 && blk.in_lru) lru_erase(b);
  ++blk.refs;
}

void KvBlocks::drop(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (--blk.refs > 0) return;
  if (blk.indexed)
    lru_push(b);  // most recently used last
  else
    free_.push_back(b);
}

void KvBlocks::lru_push(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  blk.lru_prev = lru_tail_;
  blk.lru_next = -1;
  if (lru_tail_ >= 0)
    blocks_[size_t(lru_tail_)].lru_next = b;
  else
    lru_head_ = b;
  lru_tail_ = b;
  blk.in_lru = true;
  ++cached_;
}

void KvBlocks::lru_erase(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  (blk.lru_prev >= 0 ? blocks_[size_t(blk.lru_prev)].lru_next : lru_head_) = blk.lru_next;
  (blk.lru_next >= 0 ? blocks_[size_t(blk.lru_next)].lru_prev : lru_tail_) = blk.lru_prev;
  blk.lru_prev = blk.lru_next = -1;
  blk.in_lru = false;
  --cached_;
}

// Out of the index, with every block indexed after it (their chains pass through it, and its
// id will stand for other tokens once it is reused). An unheld block goes back to the free list.
void KvBlocks::unindex(int32_t b) {
  Block& blk = blocks_[size_t(b)];
  if (!blk.indexed) return;
  int32_t* link = &buckets_[size_t(blk.hash & (buckets_.size() - 1))];
  while (*link != b) link = &blocks_[size_t(*link)].chain;
  *link = blk.chain;
  blk.chain = -1;
  blk.indexed = false;
  blk.parent = -1;
  if (blk.refs == 0) {
    if (blk.in_lru) lru_erase(b);
    free_.push_back(b);
  }
  for (size_t c = 0; c < blocks_.size(); ++c)  // rare (an eviction): a scan is enough
    if (blocks_[c].indexed && blocks_[c].parent == b) unindex(int32_t(c));
}

void KvBlocks::index_full_blocks(Sequence& s) {
  const size_t bt = size_t(block_tokens_), full = size_t(s.length / block_tokens_);
  for (size_t i = 0; i < full && i < s.blocks.size(); ++i) {
    const int32_t b = s.blocks[i];
    if (blocks_[size_t(b)].indexed) continue;
    const int32_t parent = i == 0 ? -1 : s.blocks[i - 1];
    if (parent >= 0 && !blocks_[size_t(parent)].indexed) return;  // its chain is not indexed
    std::span<const int64_t> toks(s.tokens.data() + i * bt, bt);
    if (find_indexed(parent, toks) >= 0) continue;  // another block holds these tokens already
    Block& blk = blocks_[size_t(b)];
    blk.indexed = true;
    blk.parent = parent;
    std::copy(toks.begin(), toks.end(), tokens_.begin() + long(size_t(b) * bt));
    blk.hash = hash_of(parent < 0 ? kFnvOffset : blocks_[size_t(parent)].hash, toks);
    int32_t& head = buckets_[size_t(blk.hash & (buckets_.size() - 1))];
    blk.chain = head;
    head = b;
  }
}

std::span<const int64_t> KvBlocks::block_tokens_of(int32_t b) const {
  return {tokens_.data() + size_t(b) * size_t(block_tokens_), size_t(block_tokens_)};
}

uint64_t KvBlocks::hash_of(uint64_t parent_hash, std::span<const int64_t> tokens) const {
  uint64_t h = parent_hash;
  for (int64_t t : tokens)
    for (int k = 0; k < 8; ++k) h = (h ^ ((uint64_t(t) >> (8 * k)) & 0xff)) * kFnvPrime;
  return h;
}

// The indexed block after `parent` (-1: a first block) holding exactly `tokens`, or -1. The
// hash only narrows the search: parent and tokens are compared.
int32_t KvBlocks::find_indexed(int32_t parent, std::span<const int64_t> tokens) const {
  const uint64_t h = hash_of(parent < 0 ? kFnvOffset : blocks_[size_t(parent)].hash, tokens);
  for (int32_t b = buckets_[size_t(h & (buckets_.size() - 1))]; b >= 0;
       b = blocks_[size_t(b)].chain) {
    const Block& blk = blocks_[size_t(b)];
    if (blk.hash != h || blk.parent != parent) continue;
    std::span<const int64_t> held = block_tokens_of(b);
    if (std::equal(tokens.begin(), tokens.end(), held.begin(), held.end())) return b;
  }
  return -1;
}

}  // namespace sy
