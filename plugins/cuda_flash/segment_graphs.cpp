#include "segment_graphs.hpp"

#include "flash_shape.hpp"

namespace sy::cuda {

GraphCache::~GraphCache() {
  for (auto& [key, g] : graphs_)
    if (g.handle) api_.destroy(g.handle);
}

bool GraphCache::graphable(const sy_step_info& step) {
  return step.max_query_len == 1 && step.tokens == step.sequences && step.tokens >= 1 &&
         step.tokens <= kMaxTokens;
}

GraphKey GraphCache::key_of(const sy_step_info& step) {
  return {step.tokens, step.sequences, step.outputs, flash::kv_bucket(step.max_kv_len)};
}

bool GraphCache::run(const sy_step_info& step, uint64_t addresses,
                     const std::function<void()>& enqueue) {
  if (!enabled_ || !graphable(step)) {
    enqueue();
    return false;
  }
  Graph& g = graphs_[key_of(step)];
  if (g.failed) {
    enqueue();
    return false;
  }
  if (!g.handle || g.addresses != addresses) {
    if (g.handle) api_.destroy(g.handle);
    g.handle = 0;
    api_.begin_capture();
    try {
      enqueue();
    } catch (...) {
      api_.abort_capture();  // the stream leaves capture mode; the step's error stands
      throw;
    }
    g.handle = api_.end_capture();
    g.addresses = addresses;
    ++captures_;
    if (!g.handle) {
      g.failed = true;
      enqueue();
      return false;
    }
  }
  api_.launch(g.handle);
  return true;
}

}  // namespace sy::cuda
