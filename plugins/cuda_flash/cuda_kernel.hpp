// The plugin's kernel interface: every kernel is a CudaKernel built by a factory from the
// prepared operator (as cpu_onednn's CpuKernel); `run` receives tensors already validated
// against that operator, every operand in device memory of the kernel's device.
#pragma once

#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>

#include <memory>
#include <string>

#include "cxx_edge/cxx_edge.hpp"
#include "cxx_edge/op_copy.hpp"

namespace sy::cuda {

class Cublas;
class DeviceQueue;

struct CudaContext {
  int ordinal = 0;               // the CUDA device ordinal of the prepared device
  DeviceQueue* queue = nullptr;  // the device's stream and lock; owned by the plugin
  Cublas* cublas = nullptr;      // loaded lazily by the first matmul prepare; owned by the plugin
};

class CudaKernel {
 public:
  explicit CudaKernel(const CudaContext& ctx) : ctx_(ctx) {}
  virtual ~CudaKernel() = default;
  // Op by op (the kit's execute): enqueues on the device's stream under its lock and returns
  // without waiting (the plugin has `synchronize`). Throws sy::edge::StatusError.
  void run(const DLTensor* const* inputs, const DLTensor* const* outputs);
  // Enqueues the kernel's work on the device's stream; the caller holds the queue's lock.
  // Inputs and outputs in the ABI's operand order, validated against the prepared operator.
  // `step` is null op by op: the kernel validates what it reads, reading it back if it must.
  // Inside a segment it is the step's extents, and the host has validated the step's metadata
  // (plugin_api.h, "Segments"): nothing is read back. Throws sy::edge::StatusError.
  virtual void launch(const DLTensor* const* inputs, const DLTensor* const* outputs,
                      const sy_step_info* step) = 0;
  // What the kernel chose at prepare that a segment's form should name (empty: nothing beyond
  // the operator).
  virtual std::string form() const { return {}; }

 protected:
  cudaStream_t stream() const;
  CudaContext ctx_;
};

template <typename T>
T* data_of(const DLTensor* t) {
  return reinterpret_cast<T*>(static_cast<char*>(t->data) + t->byte_offset);
}

// Throws StatusError(INTERNAL) naming the call when `code` (a cudaError_t) is not success.
void check_cuda(int code, const char* call);
// After a launch: the launch's own error (a kernel's fault surfaces at the next copy or
// synchronize). Counts the launch (device_queue.hpp's thread_work).
void check_launch(const char* kernel);
// Makes `ordinal` current for this thread.
void use_device(int ordinal);

// Reads `bytes` of device memory at `src` back to the host: a blocking wait, for the op-by-op
// forms that validate what they read (never inside a segment). Caller holds the queue's lock.
void read_back(const CudaContext& ctx, void* dst, const void* src, size_t bytes);

// One factory per declared kernel (kernel_table.cpp pairs them with the envelopes).
std::unique_ptr<CudaKernel> make_flash_attention(const sy::edge::OpCopy& op,
                                                 const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_kv_cache_append(const sy::edge::OpCopy& op,
                                                 const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_matmul(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_embedding(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_rms_norm(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_rope(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_gated(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_add(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_softmax(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_argmax(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_copy(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_softcap(const sy::edge::OpCopy& op, const CudaContext& ctx);
std::unique_ptr<CudaKernel> make_slice(const sy::edge::OpCopy& op, const CudaContext& ctx);

}  // namespace sy::cuda
