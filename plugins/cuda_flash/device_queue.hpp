// One device's work queue: a non-blocking stream every kernel and copy of the plugin goes to
// (the legacy default stream would serialise with every other library in the process and
// cannot be captured), the lock that keeps one thread's enqueue, wait or capture whole, and the
// cuBLAS workspace (a captured cuBLAS call must not allocate).
//
// This thread's counts of launches and of waits for a device let a segment report what one
// step did (sy_execute_segment_args): every launch goes through check_launch (cuda_kernel.hpp),
// every wait through DeviceQueue::wait or copy, or count_blocking_wait.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace sy::cuda {

struct WorkCounts {
  uint64_t launches = 0;
  uint64_t blocking_waits = 0;
};
WorkCounts& thread_work();
inline void count_blocking_wait() {
  ++thread_work().blocking_waits;
}

class DeviceQueue {
 public:
  static constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;  // cuBLAS's Hopper advice

  // Makes `ordinal` current and creates the stream and the cuBLAS workspace. Throws StatusError.
  explicit DeviceQueue(int ordinal);
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  // Held while enqueuing, waiting or capturing on the stream: a capture must never take
  // another thread's launch, nor a wait hit a capturing stream.
  std::mutex& mutex() { return mutex_; }
  void* blas_workspace() const { return blas_workspace_; }

  // Waits for everything enqueued (a blocking wait). Caller holds mutex(). Throws StatusError.
  void wait();
  // Copies `bytes`, after everything enqueued, complete on return (a blocking wait). Caller
  // holds mutex(). Throws StatusError.
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);

 private:
  int ordinal_;
  cudaStream_t stream_ = nullptr;
  void* blas_workspace_ = nullptr;
  std::mutex mutex_;
};

}  // namespace sy::cuda
