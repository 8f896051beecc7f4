// The block bookkeeping of a paged KV memory (no tensor is touched here; context_step.cpp moves
// the rows): which pool blocks each sequence holds, in order; blocks shared by sequences (a
// fork, a common prefix) with reference counts; and the full blocks of finished sequences, kept
// by their tokens as a prefix a later sequence starts from, until the pool needs them (least
// recently used first), as vLLM's prefix caching does.
//
// A full block is immutable once it is in the prefix index; a sequence writes only into its
// last, partial block or into new ones. When that partial block is shared (a fork), the next
// step gives the sequence a block of its own and asks the caller to copy the rows first
// (copy-on-write at the first block that differs).
//
// Steady state allocates nothing: the per-block state, the prefix index (hash chains through
// the blocks), the least-recently-used list and each block's tokens live in arrays sized when
// the pool is made; a reservation reuses the caller's vectors.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace sy {

class KvBlocks {
 public:
  using SeqId = int64_t;

  // A pool of `blocks` blocks of `block_tokens` rows; no sequence longer than `context`.
  KvBlocks(int64_t blocks, int64_t block_tokens, int64_t context);

  // A new, empty sequence.
  SeqId add();
  bool has(SeqId id) const { return seqs_.count(id) != 0; }
  // Drops the sequence; its full blocks stay in the prefix index while no one needs them.
  void remove(SeqId id);
  // A new sequence that shares every block of `id` (and its length and tokens).
  SeqId fork(SeqId id);
  // Keeps the first `length` tokens of the sequence (0 <= length <= its length).
  void truncate(SeqId id, int64_t length);
  int64_t length(SeqId id) const { return seqs_.at(id).length; }
  const std::vector<int64_t>& tokens(SeqId id) const { return seqs_.at(id).tokens; }
  // The sequence's pool blocks, in position order: ceil(length / block_tokens) of them.
  const std::vector<int32_t>& blocks(SeqId id) const { return seqs_.at(id).blocks; }
  // Attaches to the empty sequence `id` the longest prefix of `tokens` the index holds, in
  // whole blocks and leaving at least one token to compute (its logits are what the caller
  // wants); returns its length.
  int64_t reuse_prefix(SeqId id, std::span<const int64_t> tokens);

  // A step's demand: `count` new tokens for sequence `seq`.
  struct Grow {
    SeqId seq;
    int64_t count;
  };
  enum class GrowStatus { ok, pool_full, context_full };
  // A block whose rows the caller copies before the step writes (copy-on-write).
  struct BlockCopy {
    int32_t from, to;
    int64_t rows;  // the rows the sequence holds in it
  };
  // What a reservation changed, to undo it when the step does not run.
  struct Undo {
    SeqId seq;
    size_t blocks;     // the sequence's block count before
    int32_t replaced;  // the shared last block a copy replaced, or -1
  };
  struct Reservation {
    std::vector<GrowStatus> status;  // per Grow, in order
    bool ok = false;                 // every sequence got its blocks; otherwise nothing changed
    std::vector<BlockCopy> copies;
    std::vector<Undo> undo;
    std::vector<int64_t> needed;  // scratch
  };
  // Gives every sequence the blocks its new tokens need, all or nothing: when one cannot get
  // them (the pool is full: every block is held, none is a cached prefix to evict) or would
  // pass the context, nothing changes and `r.status` says which. Each sequence at most once.
  // `r` is the caller's, cleared and reused (no allocation once it has grown).
  void reserve(std::span<const Grow> grows, Reservation& r);
  // Undoes a reservation whose step did not run (its blocks go back to the pool).
  void release(const Reservation& r);
  // After the step ran: the sequence holds `tokens` more (as reserved); blocks they fill join
  // the prefix index.
  void commit(SeqId id, std::span<const int64_t> tokens);

  // Admission's ledger (a server admits a request only while every running one's promise and
  // its own fit the pool, so no running stream ever waits for a block): the sequence may grow
  // to `blocks` blocks. Bookkeeping only — reserve() still takes the blocks a step needs; the
  // promise lasts until the sequence is removed (or promised again).
  void promise(SeqId id, int64_t blocks);
  int64_t promised_blocks() const { return promised_; }

  int64_t block_tokens() const { return block_tokens_; }
  int64_t context() const { return context_; }
  int64_t total_blocks() const { return int64_t(blocks_.size()); }
  // Blocks no sequence holds: free, or a cached prefix the pool may evict.
  int64_t available_blocks() const { return int64_t(free_.size()) + cached_; }
  int64_t cached_blocks() const { return cached_; }
  int64_t used_blocks() const { return total_blocks() - available_blocks(); }
  size_t sequences() const { return seqs_.size(); }

 private:
  struct Block {
    int32_t refs = 0;
    bool indexed = false;  // in the prefix index (full, immutable)
    uint64_t hash = 0;
    int32_t parent = -1;  // the block before it in its sequence, when indexed
    int32_t chain = -1;   // the next block of its hash bucket
    int32_t lru_prev = -1, lru_next = -1;
    bool in_lru = false;  // cached and unheld: evictable
  };
  struct Sequence {
    std::vector<int32_t> blocks;
    std::vector<int64_t> tokens;
    int64_t length = 0;
    int64_t promised = 0;  // blocks promised at admission
  };

  int32_t take_block();  // a free block, or the least recently used cached one
  void hold(int32_t b);
  void drop(int32_t b);
  void unindex(int32_t b);
  void index_full_blocks(Sequence& s);
  void lru_push(int32_t b);
  void lru_erase(int32_t b);
  std::span<const int64_t> block_tokens_of(int32_t b) const;
  uint64_t hash_of(uint64_t parent_hash, std::span<const int64_t> tokens) const;
  int32_t find_indexed(int32_t parent, std::span<const int64_t> tokens) const;
  Sequence make_sequence() const;

  int64_t block_tokens_, context_;
  std::vector<Block> blocks_;
  std::vector<int64_t> tokens_;  // each indexed block's tokens, block_tokens_ per block
  std::vector<int32_t> free_;
  std::vector<int32_t> buckets_;           // hash % size -> first block of the chain, or -1
  int32_t lru_head_ = -1, lru_tail_ = -1;  // head = least recently used
  int64_t cached_ = 0;
  int64_t promised_ = 0;  // the sum of the sequences' promises
  std::map<SeqId, Sequence> seqs_;
  SeqId next_id_ = 0;
};

const char* grow_status_name(KvBlocks::GrowStatus s);

}  // namespace sy
