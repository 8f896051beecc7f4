// One step of a Context: the batch checked against the bounds and the sequences, KV memory
// reserved all or nothing, the step's inputs written by role, the plan's ops run, the logits
// of the tokens that asked for them read back.
#include <algorithm>

#include "core/executor/context_impl.hpp"

namespace sy {
namespace {

using context_detail::bad_batch;

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

// Checks the batch before anything runs, and finds its sequences (scratch.groups), in order.
// Nothing is changed on failure.
void Context::Impl::check_batch(const Batch& batch, const KvBlocks& kv, const StepBounds& b,
                                int64_t vocab) {
  const bool paged = b.kv_layout == KvLayout::paged;
  std::vector<Group>& groups = scratch.groups;
  groups.clear();
  if (batch.tokens.empty()) throw bad_batch("it holds no token");
  if (paged && int64_t(batch.size()) > b.max_batch_tokens)
    throw bad_batch("it holds " + str(int64_t(batch.size())) + " tokens; the plan takes at most " +
                    str(b.max_batch_tokens) + " per step (--max-batch-tokens)");
  int64_t outputs = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchToken& t = batch.tokens[i];
    auto where = [&] { return "token " + str(int64_t(i)) + " (sequence " + str(t.seq) + ")"; };
    if (!kv.has(t.seq)) throw bad_batch(where() + ": the sequence does not exist");
    if (t.token < 0 || t.token >= vocab)
      throw bad_batch(where() + ": id " + str(t.token) + " is outside the vocabulary [0, " +
                      str(vocab) + ")");
    if (groups.empty() || groups.back().seq != t.seq) {
      for (const Group& g : groups)
        if (g.seq == t.seq)
          throw bad_batch(where() + ": the sequence's tokens are not consecutive in the batch");
      groups.push_back({t.seq, i, 0});
    }
    const int64_t next = kv.length(t.seq) + int64_t(groups.back().count);
    if (t.position != next)
      throw bad_batch(where() + ": position " + str(t.position) +
                      " is not the sequence's next one, " + str(next));
    ++groups.back().count;
    outputs += t.logits ? 1 : 0;
  }
  if (paged && int64_t(groups.size()) > b.max_sequences)
    throw bad_batch("it holds " + str(int64_t(groups.size())) +
                    " sequences; the plan takes at most " + str(b.max_sequences) +
                    " per step (--max-sequences)");
  if (!paged && groups.size() > 1)
    throw bad_batch("it holds " + str(int64_t(groups.size())) +
                    " sequences; the plan's contiguous KV cache holds one");
  if (paged && outputs > b.max_outputs)
    throw bad_batch("it asks for the logits of " + str(outputs) +
                    " tokens; the plan computes at "
                    "most " +
                    str(b.max_outputs) + " per step");
}

StepResult Context::decode(const Batch& batch) {
  impl_->check_batch(batch, kv_, bounds(), vocab());
  Impl::StepScratch& scratch = impl_->scratch;
  const std::vector<Impl::Group>& groups = scratch.groups;
  scratch.grows.clear();
  for (const auto& g : groups) scratch.grows.push_back({g.seq, int64_t(g.count)});
  const int64_t available = kv_.available_blocks();
  KvBlocks::Reservation& r = scratch.reservation;
  kv_.reserve(scratch.grows, r);
  if (!r.ok) {
    StepResult out;
    for (size_t i = 0; i < groups.size(); ++i) {
      const SeqId seq = groups[i].seq;
      const int64_t length = kv_.length(seq) + int64_t(groups[i].count);
      if (r.status[i] == KvBlocks::GrowStatus::context_full)
        out.refused.push_back(
            {seq, Error(Errc::prompt_too_long, "sequence " + str(seq) + " would hold " +
                                                   str(length) + " tokens, past its context of " +
                                                   str(kv_.context()) + " tokens")});
      else if (r.status[i] == KvBlocks::GrowStatus::pool_full)
        out.refused.push_back(
            {seq, Error(Errc::kv_pool_full,
                        "sequence " + str(seq) + " needs KV blocks for " + str(length) +
                            " tokens; the pool's " + str(kv_.total_blocks()) + " blocks of " +
                            str(kv_.block_tokens()) + " tokens have " + str(available) +
                            " free or reusable, and the sequences before it in the batch take "
                            "the rest")});
    }
    return out;
  }
  logits_rows_ = 0;
  impl_->pending = {};
  try {
    if (layout() == KvLayout::paged)
      impl_->run_paged(batch, r, kv_, logits_rows_);
    else
      impl_->run_contiguous(batch, kv_.length(groups.front().seq), logits_rows_);
  } catch (...) {
    kv_.release(r);
    logits_rows_ = 0;
    throw;
  }
  std::vector<int64_t>& tokens = scratch.tokens;
  for (const auto& g : groups) {
    tokens.clear();
    for (size_t i = g.first; i < g.first + g.count; ++i) tokens.push_back(batch.tokens[i].token);
    kv_.commit(g.seq, tokens);
  }
  return {true, {}};
}

// The KV rows a copy-on-write gives a sequence: its shared last block's rows, in every pool.
void Context::Impl::copy_blocks(const std::vector<KvBlocks::BlockCopy>& copies,
                                int64_t block_tokens) {
  for (auto& [key, b] : caches) {
    const int64_t per_block = b.bytes / blocks, row = per_block / block_tokens;
    for (const auto& c : copies)
      memory.copy(b, b, c.rows * row, c.from * per_block, c.to * per_block);
  }
}

// The paged step's metadata (scratch), checked once here where it was built, before any kernel
// sees it: a segment uses it without reading it back (plugin_api.h, "Segments"). A violation is
// the executor's own bug. Returns the step's extents.
sy_step_info Context::Impl::check_metadata(int64_t T, int64_t MB, int64_t BS, int64_t NB,
                                           int64_t outputs) const {
  const std::vector<int64_t>&starts = scratch.starts, &lens = scratch.lens,
        &table = scratch.blocks_of, &slots = scratch.slots;
  const int64_t S = int64_t(lens.size());
  sy_step_info step{sizeof(sy_step_info), T, S, outputs, 0, 0};
  if (starts.size() != size_t(S + 1) || starts.front() != 0 || starts.back() != T ||
      table.size() != size_t(S * MB))
    throw plan_bug("built step metadata of the wrong extents");
  for (int64_t s = 0; s < S; ++s) {
    const int64_t q = starts[size_t(s + 1)] - starts[size_t(s)], L = lens[size_t(s)];
    if (q < 1 || q > L || L > MB * BS)
      throw plan_bug("built a sequence of " + std::to_string(q) + " queries and length " +
                     std::to_string(L));
    for (int64_t b = 0; b < (L + BS - 1) / BS; ++b)
      if (table[size_t(s * MB + b)] < 0 || table[size_t(s * MB + b)] >= NB)
        throw plan_bug("built a block table entry outside the pool");
    step.max_query_len = std::max(step.max_query_len, q);
    step.max_kv_len = std::max(step.max_kv_len, L);
  }
  for (int64_t i = 0; i < T; ++i)
    if (slots[size_t(i)] < 0 || slots[size_t(i)] >= NB * BS)
      throw plan_bug("built a KV slot outside the pool");
  return step;
}

// One sequence in a contiguous cache: `tokens` of it, `outputs` logits rows, `keys` held after.
sy_step_info Context::Impl::step_of(int64_t tokens, int64_t outputs, int64_t keys) {
  return {sizeof(sy_step_info), tokens, 1, outputs, tokens, keys};
}

void Context::Impl::run_paged(const Batch& batch, const KvBlocks::Reservation& r,
                              const KvBlocks& kv, size_t& logits_rows) {
  copy_blocks(r.copies, kv.block_tokens());
  PhaseRun& run = phases.at("step");
  const int64_t T = int64_t(batch.size()), BS = kv.block_tokens();
  const Value* table = graph().find(*run.phase, ValueRole::block_table);
  const int64_t MB = table->shape[1];
  const size_t count = batch.size();
  std::vector<int64_t>&tokens = scratch.tokens, &positions = scratch.positions,
  &slots = scratch.slots, &starts = scratch.starts, &lens = scratch.lens,
  &blocks_of = scratch.blocks_of, &rows = scratch.rows;
  tokens.resize(count);
  positions.resize(count);
  slots.resize(count);
  for (auto* v : {&starts, &lens, &blocks_of, &rows}) v->clear();
  for (int64_t i = 0; i < T; ++i) {
    const BatchToken& t = batch.tokens[size_t(i)];
    if (i == 0 || batch.tokens[size_t(i) - 1].seq != t.seq) {
      const std::vector<int32_t>& held = kv.blocks(t.seq);
      starts.push_back(i);
      lens.push_back(t.position);  // the sequence's length before the step; its tokens add on
      for (int64_t j = 0; j < MB; ++j)
        blocks_of.push_back(j < int64_t(held.size()) ? held[size_t(j)] : 0);
    }
    const std::vector<int32_t>& held = kv.blocks(t.seq);
    tokens[size_t(i)] = t.token;
    positions[size_t(i)] = t.position;
    slots[size_t(i)] = int64_t(held[size_t(t.position / BS)]) * BS + t.position % BS;
    ++lens.back();
    if (t.logits) rows.push_back(i);
  }
  const int64_t S = int64_t(starts.size());
  starts.push_back(T);
  logits_rows = rows.size();
  if (rows.empty()) rows.push_back(T - 1);  // a step computes one row at least; not read
  const sy_step_info step = check_metadata(T, MB, BS, kv.total_blocks(), int64_t(rows.size()));
  set_extents(T, S, int64_t(rows.size()));
  set_input(run, ValueRole::token_ids, tokens);
  set_input(run, ValueRole::positions, positions);
  set_input(run, ValueRole::slot_mapping, slots);
  set_input(run, ValueRole::query_start, starts);
  set_input(run, ValueRole::seq_lens, lens);
  set_input(run, ValueRole::block_table, blocks_of);
  set_input(run, ValueRole::output_rows, rows);
  run_phase(run, step);
  pending = {&run, int64_t(logits_rows)};  // read when asked for (Context::logits, greedy_token)
}

// One sequence in a contiguous cache: a prompt of exactly the prefill phase's length from
// position 0 runs as one prefill (when the logits it asks for are ones that phase computes);
// anything else runs token by token through the decode phase.
void Context::Impl::run_contiguous(const Batch& batch, int64_t length, size_t& logits_rows) {
  const int64_t n = int64_t(batch.size());
  PhaseRun& prefill = phases.at("prefill");
  const int64_t prefill_len = graph().bounds.max_batch_tokens;
  const int64_t prefill_rows = prefill.logits->shape[prefill.logits->shape.size() - 2];
  bool only_last = true;
  for (int64_t i = 0; i + 1 < n; ++i) only_last = only_last && !batch.tokens[size_t(i)].logits;
  if (length == 0 && n == prefill_len && (only_last || prefill_rows == n)) {
    std::vector<int64_t>&tokens = scratch.tokens, &positions = scratch.positions;
    tokens.resize(batch.size());
    positions.resize(batch.size());
    for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = batch.tokens[size_t(i)].token;
    for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = i;
    const int64_t zero = 0;
    set_input(prefill, ValueRole::token_ids, tokens);
    set_input(prefill, ValueRole::positions, positions);
    set_input(prefill, ValueRole::cache_position, std::span<const int64_t>(&zero, 1));
    run_phase(prefill, step_of(n, prefill_rows, n));
    for (int64_t i = 0; i < n; ++i)
      if (batch.tokens[size_t(i)].logits)
        read_logits(prefill, prefill_rows == n ? i : 0, 1, logits_out, logits_rows++);
    return;
  }
  PhaseRun& decode = phases.at("decode");
  for (int64_t i = 0; i < n; ++i) {
    const BatchToken& t = batch.tokens[size_t(i)];
    const int64_t kv_len = t.position + 1;
    set_input(decode, ValueRole::token_ids, std::span<const int64_t>(&t.token, 1));
    set_input(decode, ValueRole::positions, std::span<const int64_t>(&t.position, 1));
    set_input(decode, ValueRole::cache_position, std::span<const int64_t>(&t.position, 1));
    set_input(decode, ValueRole::kv_len, std::span<const int64_t>(&kv_len, 1));
    run_phase(decode, step_of(1, 1, kv_len));
    if (t.logits) read_logits(decode, 0, 1, logits_out, logits_rows++);
  }
}

}  // namespace sy
