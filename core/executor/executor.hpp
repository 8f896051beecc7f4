// executor/ — runs a plan. Offers Session: buffers for every value where the plan put it
// (allocated once, reused by every step), every op's kernel prepared once through its plugin,
// the plan's copies between memories, the prefill phase then decode steps, and per-op timings.
// A kernel failure at run time is a RunError naming the op, plugin and status: it means the
// planner or a plugin's `check` let through something the kernel cannot do.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/graph/graph.hpp"
#include "core/planner/planner.hpp"
#include "core/plugin/kernel.hpp"

namespace sy {

struct RunError : std::runtime_error {
  RunError(std::string code_, const std::string& what)
      : std::runtime_error(what), code(std::move(code_)) {}
  std::string code;  // catalog code, e.g. SY301
};

// Fills `dst` (host memory, value.bytes() bytes, value.dtype) with weight `value`; returns an
// error text, empty on success.
using WeightLoader = std::function<std::string(const Value& value, void* dst)>;

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
  // Prepares every op of every phase and loads every weight. Throws RunError.
  Session(const Graph& graph, const Plan& plan, const Registry& registry,
          const Inventory& inventory, const WeightLoader& load);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs the prefill phase on `tokens` (exactly the graph's prompt length) and returns the
  // logits of the last position (valid until the next call).
  const std::vector<float>& prefill(const std::vector<int64_t>& tokens);
  // One decode step for `token` at the next position; returns its logits (valid until the next
  // call). Allocates nothing: every buffer was sized when the session was made.
  const std::vector<float>& decode(int64_t token);

  int64_t position() const { return position_; }
  int64_t context() const { return context_; }
  const StepProfile& profile(const std::string& phase) const;
  // Bytes of every buffer the session allocated, per memory location.
  std::map<std::string, int64_t> memory_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t position_ = 0, context_ = 0;
};

}  // namespace sy
