// The step as one call (plugin_api.h, the segments extension): the host hands cpu_onednn the
// run of ops it serves once, and each step calls it once. Each kernel was prepared through
// check's own test when the segment was (segment_edge.hpp); a step then runs the kernels in
// order on the tensors the host passes, without the per-call argument checks of execute — the
// host checked the step's metadata where it built it (docs/abi.md, "Segments").
//
// Why: op by op, every one of a step's calls (515 for SmolLM2) crosses the ABI and is checked
// on both sides; on a two-core Zen 3 that cost a one-sequence SmolLM2 Q4_K_M decode step 7 %
// (docs/cpu-tiers.md, "The step as one segment"). The kernels, their order and their OpenMP
// regions are the same either way, so the results are too, bit for bit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cpu_kernel.hpp"
#include "cxx_edge/segment_edge.hpp"

namespace sy::cpu {

class CpuSegment {
 public:
  explicit CpuSegment(sy::edge::SegmentSpec<CpuKernel>&& spec);
  // Runs the entries in order: a kernel on its operands from `tensors` (the step's table, at
  // the step's extents), an upload as a copy of its bytes (host memory on both sides). Every
  // kernel has run when it returns, so no counter is set: nothing is enqueued or waited for.
  // Throws StatusError naming the entry whose kernel failed; the entries before it have run.
  void run(const DLTensor* const* tensors, size_t count, const sy_step_info& step,
           sy::edge::SegmentCounters& counters);
  // What the plugin made of the segment, for the plan's segment line.
  const std::string& form() const { return form_; }

 private:
  sy::edge::SegmentSpec<CpuKernel> spec_;
  std::string form_;
  // One entry's operands, sized at prepare: a decode step allocates nothing (allocation_test),
  // and a segment, like its context, runs one step at a time.
  std::vector<const DLTensor*> in_, out_;
};

}  // namespace sy::cpu
