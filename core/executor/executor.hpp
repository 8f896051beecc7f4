// executor/ — runs a plan. Offers Session: buffers for every value where the plan put it
// (allocated once, reused by every step), every op's kernel prepared once through its plugin,
// every adaptation the plan made performed (adaptation.hpp), the plan's copies between
// memories, the prefill phase then decode steps, and per-op timings.
//
// Failures are Errors naming the op, plugin and status: SY305 out of memory, SY306 a device or
// library gone, SY307 a plugin's internal failure, SY301 for a kernel that refuses what the
// plan gave it (the planner or a plugin's `check` let through something it cannot do), SY302
// for weights, SY304 for a full context.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/errors/error.hpp"
#include "core/graph/graph.hpp"
#include "core/planner/planner.hpp"
#include "core/plugin/kernel.hpp"

namespace sy {

// Fills `dst` (host memory, value.bytes() bytes, value.dtype) with weight `value`, or returns
// the Error (SY302) that prevented it.
using WeightLoader = std::function<std::optional<Error>(const Value& value, void* dst)>;

struct OpTiming {
  std::string key;  // "matmul @ cpu_onednn"
  double ms = 0;
  int64_t calls = 0;
};

struct StepProfile {
  double total_ms = 0, kernels_ms = 0, copies_ms = 0;
  std::vector<OpTiming> per_kind;
};

class Session {
 public:
  // Prepares every op of every phase and loads every weight. Throws Error.
  Session(const Graph& graph, const Plan& plan, const Registry& registry,
          const Inventory& inventory, const WeightLoader& load);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs the prefill phase on `tokens` (the graph's prompt length; a shorter prompt goes through
  // decode steps from position 0) and returns the logits of its last token (valid until the
  // next call).
  const std::vector<float>& prefill(const std::vector<int64_t>& tokens);
  // One decode step for `token` at the next position; returns its logits (valid until the next
  // call). Allocates nothing: every buffer was sized when the session was made.
  const std::vector<float>& decode(int64_t token);
  // Every position's logits from the last prefill() or decode() as float, [positions, vocab]
  // row-major: the whole prompt after a prefill() of the plan's prompt length, one row after
  // decode() (and after a shorter prompt, which ran as decode steps). It copies; for parity
  // checks against a reference, not for the generation loop.
  std::vector<float> every_position_logits() const;

  // Makes `position` (0 <= position <= position()) the next one decoded: the cache rows from
  // there on are overwritten as decoding goes on, and attention never reads past the step's
  // own. Drops a continuation, or sets a decode depth for a benchmark. Throws Error otherwise.
  void rewind(int64_t position);
  int64_t position() const { return position_; }
  int64_t context() const { return context_; }
  const StepProfile& profile(const std::string& phase) const;
  // Bytes the session allocated, per memory location ("host", "cuda:0"): weights, caches and
  // the activation arenas, as allocated (what the plan's memory table predicts).
  std::map<std::string, int64_t> memory_bytes() const;
  // Per device whose plugin reports free memory (ABI memory_info): how much the free memory
  // dropped while the session was made — its buffers plus whatever the kernels took at
  // prepare (their workspace) and the allocator's rounding. Measured by the plugin, not by us.
  const std::map<std::string, int64_t>& device_free_drop() const { return free_drop_; }
  // How much the process's resident anonymous memory (RssAnon) grew while the session was made:
  // its host buffers plus everything preparing kernels allocated and touched. Measured by the
  // kernel, not by us.
  int64_t host_resident_growth() const { return resident_growth_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::map<std::string, int64_t> free_drop_;
  int64_t resident_growth_ = 0;
  int64_t position_ = 0, context_ = 0;
};

}  // namespace sy
