#include "core/executor/context.hpp"

#include <algorithm>
#include <cmath>

#include "core/executor/context_impl.hpp"

namespace sy {
namespace {

using context_detail::bad_batch;

// The pool blocks a context takes: asked, else the plan's budget, or fewer when less memory is
// left (at least one sequence's context); contiguous, one cache.
int64_t pool_blocks(const Model& model, const ContextOptions& options) {
  const StepBounds& b = model.graph().bounds;
  if (b.kv_layout != KvLayout::paged) return 1;
  int64_t bound = 0;
  for (const auto& v : model.graph().phases.front().values)
    if (is_kv_pool(v)) bound = v.shape[0];
  const int64_t per_sequence = (b.context + b.kv_block_size - 1) / b.kv_block_size;
  if (options.kv_blocks > 0) {
    if (options.kv_blocks > bound)
      throw Error(Errc::invalid_argument,
                  "kv_blocks " + std::to_string(options.kv_blocks) + " exceeds the " +
                      std::to_string(bound) +
                      " blocks the plan's kernels were prepared for (plan with --kv-blocks)");
    return options.kv_blocks;
  }
  int64_t blocks = model.plan().memory.kv_blocks > 0 ? model.plan().memory.kv_blocks : bound;
  const std::map<std::string, int64_t> left = model.memory_left();
  for (const auto& l : model.plan().memory.locations) {
    auto it = left.find(l.location);
    if (it == left.end() || l.kv_bytes_per_block <= 0) continue;
    const int64_t room = it->second - l.activations - l.workspace - kHostHugePage;
    blocks = std::min(blocks, std::max<int64_t>(0, room / l.kv_bytes_per_block));
  }
  return std::max(blocks, std::min(bound, per_sequence));  // too little is refused by reserve()
}

}  // namespace

Context::Context(const Model& model, const ContextOptions& options)
    : model_(model),
      kv_(pool_blocks(model, options),
          model.graph().bounds.kv_layout == KvLayout::paged ? model.graph().bounds.kv_block_size
                                                            : model.graph().bounds.context,
          model.graph().bounds.context) {
  const Graph& graph = model.graph();
  if (graph.bounds.max_batch_tokens <= 0 || !graph.find(ValueRole::token_ids))
    throw Error(Errc::bad_graph,
                "the graph has no step bounds or token ids: only imported decoders run",
                graph.source);
  const std::map<std::string, int64_t> free_before = device_free_memory(model.memory());
  const int64_t resident_before = resident_anonymous_bytes();
  impl_ = std::make_unique<Impl>(model, kv_.total_blocks(), options.time_each_op);
  const std::map<std::string, int64_t> need = impl_->needs();
  std::string what = "a context";
  if (graph.bounds.kv_layout == KvLayout::paged)
    what +=
        " with a KV pool of " + std::to_string(kv_.total_blocks()) + " blocks of " +
        std::to_string(kv_.block_tokens()) + " tokens (one sequence at its full context needs " +
        std::to_string((graph.bounds.context + kv_.block_tokens() - 1) / kv_.block_tokens()) + ")";
  model.reserve(need, what);
  impl_->reserved = need;
  const Plan& plan = model.plan();
  for (size_t i = 0; i < graph.phases.size() && i < plan.phases.size(); ++i) {
    const Phase& phase = graph.phases[i];
    Impl::PhaseRun& run = impl_->phases[phase.name];
    run.phase = &phase;
    std::map<ValueRole, std::string> output_locations;  // the logits' and greedy ids'
    impl_->prepare_phase(phase, plan.phases[i], run);
    for (const auto& planned : plan.phases[i].ops) {
      if (const Node* n = planned_node(phase, planned.id))
        for (size_t o = 0; o < n->outputs.size() && o < planned.output_locations.size(); ++o)
          if (const Value* v = phase.value(n->outputs[o]);
              v && (v->role == ValueRole::logits || v->role == ValueRole::greedy_ids))
            output_locations[v->role] = planned.output_locations[o];
    }
    impl_->bind_io(run, output_locations);
  }
  for (const auto& [loc, after] : device_free_memory(model.memory()))
    if (auto it = free_before.find(loc); it != free_before.end())
      free_drop_[loc] = it->second - after;
  resident_growth_ = resident_anonymous_bytes() - resident_before;
}

Context::~Context() = default;

SeqId Context::add_sequence() {
  return kv_.add();
}

int64_t Context::reuse_prefix(SeqId id, std::span<const int64_t> tokens) {
  if (!kv_.has(id)) throw bad_batch("sequence " + std::to_string(id) + " does not exist");
  if (kv_.length(id) != 0)
    throw bad_batch("sequence " + std::to_string(id) +
                    " is not empty: a prefix is reused only "
                    "by a new sequence");
  if (layout() != KvLayout::paged) return 0;
  return kv_.reuse_prefix(id, tokens);
}

void Context::remove_sequence(SeqId id) {
  if (!kv_.has(id)) throw bad_batch("sequence " + std::to_string(id) + " does not exist");
  kv_.remove(id);
}

void Context::promise_blocks(SeqId id, int64_t blocks) {
  if (!kv_.has(id)) throw bad_batch("sequence " + std::to_string(id) + " does not exist");
  kv_.promise(id, blocks);
}

SeqId Context::fork_sequence(SeqId id) {
  if (!kv_.has(id)) throw bad_batch("sequence " + std::to_string(id) + " does not exist");
  if (layout() != KvLayout::paged)
    throw Error(Errc::invalid_argument,
                "fork: a contiguous KV cache holds one sequence (the plan's layout is contiguous: "
                "some kernel lacks the paged form)");
  return kv_.fork(id);
}

void Context::truncate_sequence(SeqId id, int64_t length) {
  if (!kv_.has(id)) throw bad_batch("sequence " + std::to_string(id) + " does not exist");
  if (length < 0 || length > kv_.length(id))
    throw Error(Errc::invalid_argument, "truncate: length " + std::to_string(length) +
                                            " is outside [0, " + std::to_string(kv_.length(id)) +
                                            "], the sequence's tokens");
  kv_.truncate(id, length);
}

int64_t Context::sequence_length(SeqId id) const {
  if (!kv_.has(id)) throw bad_batch("sequence " + std::to_string(id) + " does not exist");
  return kv_.length(id);
}

const std::vector<int64_t>& Context::sequence_tokens(SeqId id) const {
  if (!kv_.has(id)) throw bad_batch("sequence " + std::to_string(id) + " does not exist");
  return kv_.tokens(id);
}

const float* Context::logits(size_t i) const {
  if (i >= logits_rows_) return nullptr;
  impl_->read_pending_logits();
  return impl_->logits_out.data() + i * size_t(vocab());
}

int64_t Context::greedy_token(size_t i) const {
  if (i >= logits_rows_) return -1;
  if (impl_->read_pending_ids()) return impl_->greedy_out[i];
  const float* row = logits(i);
  int64_t best = 0;  // op argmax's rule: the first maximum, a NaN above every number
  for (int64_t k = 1; k < vocab(); ++k)
    if (!std::isnan(row[best]) && (std::isnan(row[k]) || row[k] > row[best])) best = k;
  return best;
}

const StepProfile& Context::profile(const std::string& phase) const {
  Impl::PhaseRun& run = impl_->phases.at(phase);
  run.profile.per_kind.clear();
  for (const auto& [key, v] : run.per_kind)
    run.profile.per_kind.push_back({key, v.first, v.second});
  return run.profile;
}

std::vector<SegmentForm> Context::segment_forms() const {
  std::vector<SegmentForm> out;
  for (const Phase& phase : model_.graph().phases) {
    auto it = impl_->phases.find(phase.name);
    if (it != impl_->phases.end())
      out.insert(out.end(), it->second.forms.begin(), it->second.forms.end());
  }
  return out;
}

std::map<std::string, int64_t> Context::memory_bytes() const {
  std::map<std::string, int64_t> out;
  for (const auto* owned : {&impl_->caches, &impl_->arenas})
    for (const auto& [key, b] : *owned) out[b.location] += b.allocated;
  return out;
}

std::map<std::string, int64_t> Context::kv_bytes() const {
  std::map<std::string, int64_t> out;
  for (const auto& [key, b] : impl_->caches) out[b.location] += b.allocated;
  return out;
}

}  // namespace sy
