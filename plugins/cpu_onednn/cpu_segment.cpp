#include "cpu_segment.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace sy::cpu {

CpuSegment::CpuSegment(sy::edge::SegmentSpec<CpuKernel>&& spec) : spec_(std::move(spec)) {
  size_t kernels = 0, inputs = 0, outputs = 0;
  for (const auto& e : spec_.entries) {
    inputs = std::max(inputs, e.inputs.size());
    outputs = std::max(outputs, e.outputs.size());
    kernels += e.kind == SY_SEGMENT_ENTRY_KERNEL;
  }
  in_.resize(inputs);
  out_.resize(outputs);
  form_ = "cpu_onednn runs its " + std::to_string(kernels) +
          " kernels in order, one call of the host a step";
}

void CpuSegment::run(const DLTensor* const* tensors, size_t count, const sy_step_info&,
                     sy::edge::SegmentCounters&) {
  if (count != spec_.tensors.size())
    throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                std::to_string(count) + " tensors for a segment of " +
                                    std::to_string(spec_.tensors.size()));
  for (size_t i = 0; i < spec_.entries.size(); ++i) {
    const auto& e = spec_.entries[i];
    if (e.kind == SY_SEGMENT_ENTRY_UPLOAD) {
      const DLTensor *from = tensors[e.inputs[0]], *to = tensors[e.outputs[0]];
      std::memcpy(to->data, from->data,
                  sy_tensor_bytes(spec_.tensors[e.inputs[0]].dtype, from->ndim, from->shape));
      continue;
    }
    for (size_t k = 0; k < e.inputs.size(); ++k) in_[k] = tensors[e.inputs[k]];
    for (size_t k = 0; k < e.outputs.size(); ++k) out_[k] = tensors[e.outputs[k]];
    try {
      e.impl->run(in_.data(), out_.data());
    } catch (const sy::edge::StatusError& x) {
      throw sy::edge::StatusError(x.status, "entry " + std::to_string(i) + " (" +
                                                sy_op_kind_name(e.op->op) + "): " + x.what());
    }
  }
}

}  // namespace sy::cpu
