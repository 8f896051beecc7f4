// A kernel prepared by a plugin for one operator, and the host-side validation every
// tensor passes before a kernel sees it (ABI rule 5).
#pragma once

#include <dlpack/dlpack.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/errors/error.hpp"
#include "core/plugin/plugin.hpp"

namespace sy {

// Checks `t` against the description the kernel was prepared with: non-NULL data,
// dtype, rank, shape, compact row-major strides (or NULL), and the memory it lives in.
// Returns what is wrong (naming `label`), nullopt when valid.
std::optional<std::string> tensor_mismatch(const DLTensor& t, const TensorDesc& desc,
                                           const DeviceInfo& device, const std::string& label);

class PreparedKernel {
 public:
  PreparedKernel(const Plugin& plugin, sy_kernel* kernel, OpDesc op, DeviceInfo device);
  ~PreparedKernel();
  PreparedKernel(const PreparedKernel&) = delete;
  PreparedKernel& operator=(const PreparedKernel&) = delete;

  // Validates every tensor, then runs the kernel. nullopt on success, else the Error: SY301
  // for a tensor that does not match (it never reaches the plugin) or an INVALID_ARGUMENT /
  // UNSUPPORTED answer, SY305-SY307 for OUT_OF_MEMORY, UNAVAILABLE and INTERNAL (status set).
  std::optional<Error> execute(std::span<const DLTensor* const> inputs,
                               std::span<const DLTensor* const> outputs);
  // The plugin's execute without the host's validation: what `switchyard conformance` uses to
  // see whether a plugin refuses bad tensors itself (any host may call it). Nothing else should.
  std::optional<Error> execute_unchecked(std::span<const DLTensor* const> inputs,
                                         std::span<const DLTensor* const> outputs);
  const OpDesc& op() const { return op_; }
  const Plugin& plugin() const { return plugin_; }

 private:
  const Plugin& plugin_;
  sy_kernel* kernel_;
  OpDesc op_;
  DeviceInfo device_;
};

// Prepares kernel `kernel_index` of `plugin` for `op` on its device `device_index`, or the
// Error the plugin answered (codes as for execute; the message starts with the status name).
Expected<std::unique_ptr<PreparedKernel>> prepare_kernel(const Plugin& plugin, size_t kernel_index,
                                                         uint32_t device_index, const OpDesc& op);

}  // namespace sy
