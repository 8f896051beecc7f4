// A segment as cuda_flash runs it (plugin_api.h, the segments extension): the entries'
// kernels prepared by the kit, grouped into launches by the fusion pass (segment_fusion.hpp),
// the step's uploads staged in pinned memory and copied on the device's stream, and decode
// steps replayed from a CUDA graph per bucket (segment_graphs.hpp). Nothing is read back and
// nothing waits for the device inside a step.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_kernel.hpp"
#include "cxx_edge/segment_edge.hpp"
#include "segment_fusion.hpp"
#include "segment_graphs.hpp"

namespace sy::cuda {

class DeviceQueue;

class CudaSegment {
 public:
  CudaSegment(sy::edge::SegmentSpec<CudaKernel>&& spec, DeviceQueue& queue);
  ~CudaSegment();
  CudaSegment(const CudaSegment&) = delete;
  CudaSegment& operator=(const CudaSegment&) = delete;

  // One step (the kit's execute_segment). Throws StatusError.
  void run(const DLTensor* const* tensors, size_t num_tensors, const sy_step_info& step,
           sy::edge::SegmentCounters& counters);
  const std::string& form() const { return form_; }

  // What prepare made of the entries (for tests and the form line).
  const std::vector<WorkItem>& work() const { return work_; }

 private:
  struct Upload {
    size_t entry;
    size_t offset;  // into the pinned staging
  };
  class Graphs;

  void check_tensors(const DLTensor* const* tensors, size_t n) const;
  void stage_uploads(const DLTensor* const* tensors);
  void enqueue(const DLTensor* const* tensors, const sy_step_info& step);
  void enqueue_item(const WorkItem& w, const DLTensor* const* tensors, const sy_step_info& step);
  void enqueue_entry(size_t e, const DLTensor* const* tensors, const sy_step_info& step);
  void enqueue_add_rms_norm(const WorkItem& w, const DLTensor* const* tensors);
  void enqueue_rope_append(const WorkItem& w, const DLTensor* const* tensors);
  bool enqueue_gemv(const WorkItem& w, const DLTensor* const* tensors);

  sy::edge::SegmentSpec<CudaKernel> spec_;
  DeviceQueue& queue_;
  std::vector<WorkItem> work_;
  std::vector<Upload> uploads_;
  void* staging_ = nullptr;       // pinned host memory for every upload at its bound
  cudaEvent_t staged_ = nullptr;  // recorded after the last step's work: staging may be rewritten
  bool staged_pending_ = false;
  std::unique_ptr<Graphs> graph_api_;
  std::unique_ptr<GraphCache> graphs_;
  std::vector<const DLTensor*> in_, out_;  // one entry's operands, reused
  std::string form_;
};

}  // namespace sy::cuda
