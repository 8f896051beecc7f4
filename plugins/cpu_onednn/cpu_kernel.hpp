// The plugin's kernel interface: every kernel is a CpuKernel built by a factory from the
// prepared operator; `run` receives tensors already validated against that operator.
#pragma once

#include <dlpack/dlpack.h>

#include <memory>

#include "cxx_edge/cxx_edge.hpp"
#include "cxx_edge/op_copy.hpp"

namespace sy::cpu {

// Head dims the attention blocks serve: a multiple of 16 up to 256 (the envelopes of the sdpa
// and fused decode kernels declare them).
inline constexpr int kAttentionHeadDimMultiple = 16;
inline constexpr int kAttentionHeadDimMax = 256;

struct CpuContext {
  int num_threads = 1;  // our loops and oneDNN use the same count
};

class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  // Inputs and outputs in the ABI's operand order for the op kind. Throws
  // sy::edge::StatusError for bad values only known at run time (e.g. cache overflow).
  virtual void run(const DLTensor* const* inputs, const DLTensor* const* outputs) = 0;
};

template <typename T>
T* data_of(const DLTensor* t) {
  return reinterpret_cast<T*>(static_cast<char*>(t->data) + t->byte_offset);
}

// Elements of `t` at this execute's extents: a kernel of a varlen operator (ABI 1.5) computes
// what the tensors hold, never the prepared bounds.
inline int64_t elements_of(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

}  // namespace sy::cpu
