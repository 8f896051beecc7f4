#include "core/plugin/kernel.hpp"

#include "switchyard/tensor_check.h"

namespace sy {
std::optional<std::string> tensor_mismatch(const DLTensor& t, const TensorDesc& desc,
                                           const DeviceInfo& device, const std::string& label) {
  sy_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = desc.dtype;
  d.ndim = static_cast<int32_t>(desc.shape.size());
  d.shape = desc.shape.data();
  d.dynamic_dims = desc.dynamic_dims;
  char msg[256];
  if (!sy_tensor_matches(&t, &d, label.c_str(), msg, sizeof msg)) return msg;
  bool host = desc.memory == SY_MEMORY_HOST || device.memory_is_host;
  DLDeviceType want = host ? kDLCPU : device.type;
  if (t.device.device_type != want)
    return label + ": lives on device type " + std::to_string(t.device.device_type) +
           ", the kernel reads it from " + (host ? "host memory" : "device memory");
  return std::nullopt;
}

PreparedKernel::PreparedKernel(const Plugin& plugin, sy_kernel* kernel, OpDesc op,
                               DeviceInfo device)
    : plugin_(plugin), kernel_(kernel), op_(std::move(op)), device_(std::move(device)) {}

PreparedKernel::~PreparedKernel() {
  plugin_.release(kernel_);
}

std::optional<Error> PreparedKernel::execute(std::span<const DLTensor* const> inputs,
                                             std::span<const DLTensor* const> outputs) {
  // The host's own verdict, in the plugin's words: INVALID_ARGUMENT, never reaching it.
  auto refuse = [&](const std::string& what) {
    return Error(Errc::kernel_failed, "INVALID_ARGUMENT: " + what, plugin_.name())
        .with_status(SY_STATUS_INVALID_ARGUMENT);
  };
  if (inputs.size() != op_.inputs.size() || outputs.size() != op_.outputs.size())
    return refuse(std::to_string(inputs.size()) + " inputs and " + std::to_string(outputs.size()) +
                  " outputs, prepared for " + std::to_string(op_.inputs.size()) + " and " +
                  std::to_string(op_.outputs.size()));
  // Labelled only on a mismatch: every execute passes here.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (tensor_mismatch(*inputs[i], op_.inputs[i], device_, ""))
      return refuse(
          *tensor_mismatch(*inputs[i], op_.inputs[i], device_, "input " + std::to_string(i)));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (tensor_mismatch(*outputs[i], op_.outputs[i], device_, ""))
      return refuse(
          *tensor_mismatch(*outputs[i], op_.outputs[i], device_, "output " + std::to_string(i)));
  return execute_unchecked(inputs, outputs);
}

std::optional<Error> PreparedKernel::execute_unchecked(std::span<const DLTensor* const> inputs,
                                                       std::span<const DLTensor* const> outputs) {
  sy_execute_args args{};
  args.struct_size = sizeof(args);
  args.plugin = plugin_.instance();
  args.kernel = kernel_;
  args.inputs = inputs.data();
  args.num_inputs = inputs.size();
  args.outputs = outputs.data();
  args.num_outputs = outputs.size();
  ErrorText err;
  int status = plugin_.api().execute(&args, err.buffer());
  if (status == SY_STATUS_OK) return std::nullopt;
  return plugin_error(plugin_, status, err);
}

Expected<std::unique_ptr<PreparedKernel>> prepare_kernel(const Plugin& plugin, size_t kernel_index,
                                                         uint32_t device_index, const OpDesc& op) {
  if (!plugin.opened())
    return Error(Errc::kernel_failed,
                 "UNSUPPORTED: declared by its manifest only; the library was not opened",
                 plugin.name())
        .with_status(SY_STATUS_UNSUPPORTED);
  const sy_plugin_api& api = plugin.api();
  if (!api.prepare || !api.execute || !api.release)
    return Error(Errc::kernel_failed,
                 "UNSUPPORTED: the plugin declares kernels but cannot run them", plugin.name())
        .with_status(SY_STATUS_UNSUPPORTED);
  if (device_index >= plugin.devices().size())
    return Error(Errc::kernel_failed, "INVALID_ARGUMENT: no device " + std::to_string(device_index),
                 plugin.name())
        .with_status(SY_STATUS_INVALID_ARGUMENT);
  AbiOpView view(op);
  sy_prepare_args args{};
  args.struct_size = sizeof(args);
  args.plugin = plugin.instance();
  args.kernel_index = static_cast<uint32_t>(kernel_index);
  args.device_index = device_index;
  args.op = view.get();
  ErrorText err;
  int status = api.prepare(&args, err.buffer());
  if (status != SY_STATUS_OK) return plugin_error(plugin, status, err);
  if (!args.kernel)
    return Error(Errc::plugin_internal, "INTERNAL: prepare returned OK without a kernel",
                 plugin.name())
        .with_status(SY_STATUS_INTERNAL);
  return std::make_unique<PreparedKernel>(plugin, args.kernel, op, plugin.devices()[device_index]);
}

}  // namespace sy
