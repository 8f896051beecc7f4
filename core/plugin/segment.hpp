// A segment prepared by a plugin that takes them (plugin_api.h, SY_EXTENSION_TYPE_SEGMENTS):
// the run of consecutive kernel calls of a step that one plugin serves on one device, with the
// uploads into it, handed over once and executed once per step.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/errors/error.hpp"
#include "core/plugin/plugin.hpp"

namespace sy {

// One tensor of a segment's table and what the host needs of it (SY_SEGMENT_TENSOR_*).
struct SegmentTensor {
  TensorDesc desc;
  uint32_t flags = 0;
};

// One entry: a kernel call (kernel index into the plugin's kernels, its operator) or an upload
// (host tensor inputs[0] to device tensor outputs[0]); operands index the tensor table.
struct SegmentEntryDesc {
  sy_segment_entry_kind kind = SY_SEGMENT_ENTRY_KERNEL;
  size_t kernel_index = 0;
  OpDesc op;
  std::vector<uint32_t> inputs, outputs;
};

// What a step's executes did, summed (sy_execute_segment_args' outputs).
struct SegmentCounts {
  int64_t blocking_waits = 0, launches = 0, graph_launches = 0;
};

class PreparedSegment {
 public:
  PreparedSegment(const Plugin& plugin, sy_segment* segment, std::string form, size_t num_tensors);
  ~PreparedSegment();
  PreparedSegment(const PreparedSegment&) = delete;
  PreparedSegment& operator=(const PreparedSegment&) = delete;

  // Runs one step on the table's tensors (prepare's order, this step's extents), adding what
  // the plugin reports to `counts`. nullopt, or the Error of the plugin's status (SY305-SY307
  // with the status, SY301 for INVALID_ARGUMENT / UNSUPPORTED).
  std::optional<Error> execute(std::span<const DLTensor* const> tensors, const sy_step_info& step,
                               SegmentCounts& counts);
  // What the plugin said it made of the segment ("" when it said nothing).
  const std::string& form() const { return form_; }
  const Plugin& plugin() const { return plugin_; }

 private:
  const Plugin& plugin_;
  sy_segment* segment_;
  std::string form_;
  size_t num_tensors_;
};

// Hands the segment to the plugin. The Error the plugin answered: an UNSUPPORTED one means it
// will not take this segment (the caller runs the ops one by one and says why).
Expected<std::unique_ptr<PreparedSegment>> prepare_segment(
    const Plugin& plugin, uint32_t device_index, const std::vector<SegmentTensor>& tensors,
    const std::vector<SegmentEntryDesc>& entries);

}  // namespace sy
