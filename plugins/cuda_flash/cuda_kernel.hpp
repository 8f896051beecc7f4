// The plugin's kernel interface: every kernel is a CudaKernel built by a factory from the
// prepared operator (as cpu_onednn's CpuKernel); `run` receives tensors already validated
// against that operator, every operand in device memory of the kernel's device.
#pragma once

#include <dlpack/dlpack.h>

#include <memory>
#include <string>

#include "cxx_edge/cxx_edge.hpp"
#include "cxx_edge/op_copy.hpp"

namespace sy::cuda {

class Cublas;

struct CudaContext {
  int ordinal = 0;           // the CUDA device ordinal of the prepared device
  Cublas* cublas = nullptr;  // loaded lazily by the first matmul prepare; owned by the plugin
};

class CudaKernel {
 public:
  virtual ~CudaKernel() = default;
  // Inputs and outputs in the ABI's operand order. Launches on the legacy default stream and
  // returns without waiting (the plugin has `synchronize`; work stays in stream order). Throws
  // sy::edge::StatusError.
  virtual void run(const DLTensor* const* inputs, const DLTensor* const* outputs) = 0;
};

template <typename T>
T* data_of(const DLTensor* t) {
  return reinterpret_cast<T*>(static_cast<char*>(t->data) + t->byte_offset);
}

// Throws StatusError(INTERNAL) naming the call when `code` (a cudaError_t) is not success.
void check_cuda(int code, const char* call);
// After a launch: the launch's own error (a kernel's fault surfaces at the next copy or
// synchronize).
void check_launch(const char* kernel);
// Makes `ordinal` current for this thread.
void use_device(int ordinal);

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
