// A kernel prepared by a plugin for one operator, and the host-side validation every
// tensor passes before a kernel sees it (ABI rule 5).
#pragma once

#include <dlpack/dlpack.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/plugin/plugin.hpp"

namespace sy {

// Checks `t` against the description the kernel was prepared with: non-NULL data,
// dtype, rank, shape, compact row-major strides (or NULL), and the memory it lives in.
// Returns an empty string when valid, else what is wrong (naming `label`).
std::string validate_tensor(const DLTensor& t, const TensorDesc& desc, const DeviceInfo& device,
                            const std::string& label);

class PreparedKernel {
 public:
  PreparedKernel(const Plugin& plugin, sy_kernel* kernel, OpDesc op, DeviceInfo device);
  ~PreparedKernel();
  PreparedKernel(const PreparedKernel&) = delete;
  PreparedKernel& operator=(const PreparedKernel&) = delete;

  // Validates every tensor, then runs the kernel. Returns "" on success, else the
  // status and message (validation failures never reach the plugin).
  std::string execute(std::span<const DLTensor* const> inputs,
                      std::span<const DLTensor* const> outputs);
  const OpDesc& op() const { return op_; }

 private:
  const Plugin& plugin_;
  sy_kernel* kernel_;
  OpDesc op_;
  DeviceInfo device_;
};

struct PrepareResult {
  std::unique_ptr<PreparedKernel> kernel;
  std::string error;  // set on failure: status and message
};

// Prepares kernel `kernel_index` of `plugin` for `op` on its device `device_index`.
PrepareResult prepare_kernel(const Plugin& plugin, size_t kernel_index, uint32_t device_index,
                             const OpDesc& op);

}  // namespace sy
