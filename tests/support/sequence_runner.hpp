// One sequence of a Context, stepped the way tests of a single conversation do: a prompt from
// position 0 (every position's logits asked for when the plan computes that many), then one
// token at a time. Owns the Model and the Context.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/executor/context.hpp"
#include "core/runtime/runtime.hpp"

namespace sy::test {

// Plans what `import` makes of `base` the way the runtime does (plan_layouts: the paged layout
// when every kernel has its form, else, for one sequence, the contiguous one).
inline LayoutPlan plan_single(const std::function<Graph(const ImportOptions&)>& import,
                              const ImportOptions& base, const Registry& registry,
                              const Inventory& inventory, const Policy& policy) {
  auto by_layout = [&](KvLayout layout) {
    ImportOptions o = base;
    o.kv_layout = layout;
    return import(o);
  };
  return plan_layouts(by_layout, base.max_sequences, registry, inventory, policy);
}

class SequenceRunner {
 public:
  SequenceRunner(const Graph& graph, const Plan& plan, const Registry& registry,
                 const Inventory& inventory, const WeightLoader& load,
                 const ContextOptions& options = {})
      : model_(std::make_unique<Model>(graph, plan, registry, inventory, load)),
        context_(std::make_unique<Context>(*model_, options)),
        seq_(context_->add_sequence()) {}

  // Runs `tokens` from position 0 (the sequence starts over) and returns the last one's logits.
  const std::vector<float>& prefill(const std::vector<int64_t>& tokens) {
    context_->truncate_sequence(seq_, 0);
    const bool every = int64_t(tokens.size()) <= context_->bounds().max_outputs;
    const size_t vocab = size_t(context_->vocab());
    rows_.assign(every ? tokens.size() * vocab : 0, 0.f);
    run_tokens(*context_, seq_, tokens, every, [&](size_t i, const float* row) {
      if (every) std::copy(row, row + vocab, rows_.begin() + long(i * vocab));
      if (i + 1 == tokens.size()) last_.assign(row, row + vocab);
    });
    return last_;
  }
  // One token at the sequence's next position; its logits.
  const std::vector<float>& decode(int64_t token) {
    const size_t vocab = size_t(context_->vocab());
    run_tokens(*context_, seq_, std::span(&token, 1), false,
               [&](size_t, const float* row) { last_.assign(row, row + vocab); });
    rows_ = last_;
    return last_;
  }
  // Every position's logits of the last prefill ([positions, vocab]), or the last row.
  const std::vector<float>& every_position_logits() const { return rows_.empty() ? last_ : rows_; }
  int64_t position() const { return context_->sequence_length(seq_); }
  Model& model() { return *model_; }
  Context& context() { return *context_; }
  SeqId sequence() const { return seq_; }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<Context> context_;
  SeqId seq_;
  std::vector<float> last_, rows_;
};

}  // namespace sy::test
