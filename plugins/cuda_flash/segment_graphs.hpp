// When a segment replays a captured CUDA graph instead of launching its work: decode steps (one
// query per sequence), one graph per bucket of the step's extents, captured the first time the
// bucket is seen and again only when the tensor table's addresses changed. Plain C++ over a
// small interface (GraphApi), so the bucket logic is tested on any machine with a recording
// fake (tests/backends/cuda_segment_test.cpp); segment.cpp implements it on the CUDA runtime.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "switchyard/plugin_api.h"

namespace sy::cuda {

// The calls a graph needs. `handle` is the instantiated graph; 0 is none.
class GraphApi {
 public:
  virtual ~GraphApi() = default;
  virtual void begin_capture() = 0;
  // Ends the capture and instantiates it; 0 when the work could not be captured (the caller
  // then runs it eagerly, and does not try that bucket again).
  virtual uintptr_t end_capture() = 0;
  // Ends a capture whose enqueue failed, dropping what it took.
  virtual void abort_capture() = 0;
  virtual void launch(uintptr_t handle) = 0;
  virtual void destroy(uintptr_t handle) = 0;
};

// What a step's launch shapes depend on: tokens, sequences and outputs fix every extent, and
// the paged attention cuts its split-KV for the bucket of the longest sequence (flash_shape.hpp
// kv_bucket).
struct GraphKey {
  int64_t tokens = 0, sequences = 0, outputs = 0, kv_bucket = 0;
  bool operator<(const GraphKey& o) const {
    return std::tie(tokens, sequences, outputs, kv_bucket) <
           std::tie(o.tokens, o.sequences, o.outputs, o.kv_bucket);
  }
};

class GraphCache {
 public:
  static constexpr int64_t kMaxTokens = 256;  // larger decode steps run eagerly

  // `enabled` false: every step runs eagerly (SWITCHYARD_CUDA_GRAPHS=off, to measure the
  // launches a step takes without graphs).
  explicit GraphCache(GraphApi& api, bool enabled = true) : api_(api), enabled_(enabled) {}
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Whether a step of these extents is replayed from a graph: every sequence has one query.
  static bool graphable(const sy_step_info& step);
  static GraphKey key_of(const sy_step_info& step);

  // Runs the step: `enqueue` directly when it is not graphable (or its bucket would not
  // capture), else the bucket's graph, capturing `enqueue` into it first when the bucket is new
  // or `addresses` (a digest of the table's data pointers) changed. Returns true when a graph
  // was launched.
  bool run(const sy_step_info& step, uint64_t addresses, const std::function<void()>& enqueue);

  size_t captures() const { return captures_; }
  size_t graphs() const { return graphs_.size(); }

 private:
  struct Graph {
    uintptr_t handle = 0;
    uint64_t addresses = 0;
    bool failed = false;  // the work would not capture: this bucket runs eagerly
  };
  GraphApi& api_;
  bool enabled_;
  std::map<GraphKey, Graph> graphs_;
  size_t captures_ = 0;
};

}  // namespace sy::cuda
