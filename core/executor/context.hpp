// A Context is one independent user of a Model (a server has one; a CLI run has one): every op of
// the plan prepared for it (its own kernels and activation arena, so contexts of one model run on
// different threads at once), and a KV memory of sequences. It is stepped with Batches: any mix
// of prefill chunks and decode tokens of many sequences, up to the plan's bounds.
//
// The KV memory follows the plan's layout (graph.hpp's KvLayout):
//  paged:      a pool of fixed-size blocks per cache (kv_blocks.hpp): sequences of any length up
//              to the context, forked, truncated, and continued from cached KV; full blocks of
//              finished sequences stay as a prefix later sequences reuse, until the pool needs
//              them. Blocks are never zeroed: attention never reads past a sequence's length.
//  contiguous: one cache of `context` rows, one sequence (plugins before ABI 1.5): a prompt of
//              exactly the prefill phase's length runs as one prefill, anything else token by
//              token through the decode phase.
//
// Not thread-safe: one thread at a time per Context. Failures are Errors: SY403 for a batch
// that breaks the bounds or its sequences' order (nothing runs, nothing is written), SY011
// when the context's memory does not fit, SY301/SY305-SY307 from kernels.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/executor/kv_blocks.hpp"
#include "core/executor/model.hpp"

namespace sy {

using SeqId = KvBlocks::SeqId;

// One step's tokens: each with its position in its sequence, the sequence, and whether its
// logits are wanted (llama.cpp's llama_batch). A sequence's tokens are consecutive in the batch,
// in position order, and start at the sequence's length.
struct BatchToken {
  int64_t token = 0;
  int64_t position = 0;
  SeqId seq = 0;
  bool logits = false;
};
struct Batch {
  std::vector<BatchToken> tokens;
  void add(int64_t token, int64_t position, SeqId seq, bool logits) {
    tokens.push_back({token, position, seq, logits});
  }
  void clear() { tokens.clear(); }
  size_t size() const { return tokens.size(); }
};

// A sequence the step could not take: the KV pool has no block for it (SY308) or it would pass
// its context (SY304). When any is refused, nothing ran and nothing was written: the caller
// drops or defers those sequences and steps again.
struct StepRefusal {
  SeqId seq = 0;
  Error error;
};
struct StepResult {
  bool ran = false;
  std::vector<StepRefusal> refused;
};

struct OpTiming {
  std::string key;  // "matmul @ cpu_onednn"
  double ms = 0;
  int64_t calls = 0;
};

// Summed over the steps of a phase. kernel_calls counts the host's calls of execute, one per
// kernel call op by op and one per segment; launches, graph_launches and blocking_waits are what
// the segments' plugins reported (plugin_api.h sy_execute_segment_args): device work enqueued,
// captured graphs replayed, and the times a plugin waited for its device inside a step.
// readback_bytes: what the host read of the steps' outputs, logits or greedy ids, as it asked
// for them (Context::logits, Context::greedy_token).
struct StepProfile {
  double total_ms = 0, kernels_ms = 0, copies_ms = 0;
  int64_t steps = 0;
  int64_t kernel_calls = 0, launches = 0, graph_launches = 0, blocking_waits = 0;
  int64_t readback_bytes = 0;
  std::vector<OpTiming> per_kind;
};

// The form a segment of the plan took in this context: handed over as one (and what the plugin
// said it made of it), or op by op and why.
struct SegmentForm {
  std::string phase, plugin, device;
  size_t ops = 0;
  bool segment = false;
  std::string form;
};

struct ContextOptions {
  // Blocks of each KV pool (paged); 0: the plan's budget, or fewer when less memory is left
  // (at least one sequence's context, else SY011).
  int64_t kv_blocks = 0;
  // Drive every op one by one, even where the plan hands a run of ops to its plugin as one
  // segment, so that the profile times each op (StepProfile::per_kind per op kind; `run
  // --profile`). Slower by the per-call cost segments save; segment_forms() says so.
  bool time_each_op = false;
};

class Context {
 public:
  // Prepares every op of the plan for this context and allocates its arena and KV memory.
  // Throws Error (SY011 when the memory left does not hold them, with the numbers).
  explicit Context(const Model& model, const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // ---- sequences ------------------------------------------------------------------------
  SeqId add_sequence();
  // Starts the empty sequence `id` from the longest prefix of `tokens` whose KV the memory
  // still holds (whole blocks, at least one token left to compute); returns that length, from
  // which the caller submits the rest. Contiguous: always 0.
  int64_t reuse_prefix(SeqId id, std::span<const int64_t> tokens);
  // Drops the sequence; its full blocks stay a reusable prefix until the pool needs them.
  void remove_sequence(SeqId id);
  // A new sequence sharing `id`'s KV (copy-on-write at the first block that differs).
  SeqId fork_sequence(SeqId id);
  // Keeps the first `length` tokens of the sequence.
  void truncate_sequence(SeqId id, int64_t length);
  bool has_sequence(SeqId id) const { return kv_.has(id); }
  // Admission's promise of `blocks` KV blocks to the sequence (KvBlocks::promise).
  void promise_blocks(SeqId id, int64_t blocks);
  int64_t sequence_length(SeqId id) const;
  const std::vector<int64_t>& sequence_tokens(SeqId id) const;

  // ---- steps ----------------------------------------------------------------------------
  // Runs one step of `batch`. Throws Error SY403 (nothing runs) for a batch that breaks the
  // bounds (max_batch_tokens, max_sequences, max_outputs), names a sequence that does not exist,
  // gives a sequence's tokens out of order or not at its next position, or holds an id outside
  // the vocabulary. Returns refusals (nothing ran) when a sequence cannot get KV memory.
  StepResult decode(const Batch& batch);
  // The logits of the i-th token of the last step that asked for them (vocab floats; valid
  // until the next step). Read from where the step computed them on the first call after the
  // step (all of its rows at once), not before: a step whose rows are all picked greedily
  // (greedy_token) reads none. The read fills a cache of the context, so, like decode, these
  // are for one thread at a time; a failed read throws Error (the device's) and may be retried.
  const float* logits(size_t i) const;
  // The id of the first maximum of logits(i) (a NaN counts as larger than any number, the first
  // NaN winning; op argmax). A paged step computes these where its logits are (the graph's
  // greedy_ids) and this reads the step's R ids, not R rows of the vocabulary; a contiguous one
  // takes the arg max of logits(i) here. -1 when i is not a row of the last step.
  int64_t greedy_token(size_t i) const;
  size_t logits_rows() const { return logits_rows_; }
  int64_t vocab() const { return model_.vocab(); }

  // ---- what it is -----------------------------------------------------------------------
  KvLayout layout() const { return model_.graph().bounds.kv_layout; }
  const StepBounds& bounds() const { return model_.graph().bounds; }
  int64_t context_length() const { return kv_.context(); }
  const KvBlocks& kv() const { return kv_; }
  const Model& model() const { return model_; }
  // Per phase ("step"; contiguous: "prefill", "decode"): time per op kind and the runtime's.
  const StepProfile& profile(const std::string& phase) const;
  // Every segment of the plan, per phase in order, and the form it took here.
  std::vector<SegmentForm> segment_forms() const;
  // Bytes this context allocated per location: KV memory and the activation arena.
  std::map<std::string, int64_t> memory_bytes() const;
  // The KV memory's bytes per location (a part of memory_bytes()).
  std::map<std::string, int64_t> kv_bytes() const;
  // What the context's making dropped each device's free memory by, and grew the process's
  // RssAnon by: its buffers plus what the kernels took at prepare. Measured, not computed.
  const std::map<std::string, int64_t>& device_free_drop() const { return free_drop_; }
  int64_t host_resident_growth() const { return resident_growth_; }

 private:
  struct Impl;
  const Model& model_;
  KvBlocks kv_;
  std::unique_ptr<Impl> impl_;
  size_t logits_rows_ = 0;
  std::map<std::string, int64_t> free_drop_;
  int64_t resident_growth_ = 0;
};

}  // namespace sy
