// cuda_flash: the ABI edge. Loads and answers `check` on any machine; devices appear only
// where a driver and a GPU do. Every entry point is guarded; nothing is printed.
#include <memory>
#include <string>
#include <vector>

#include "cuda_devices.hpp"
#include "kernel_table.hpp"

struct sy_plugin {
  sy::cuda::Discovery discovery;
  std::vector<sy_device_desc> devices;
  std::vector<const sy_device_desc*> device_list;
};

namespace {

constexpr const char* kName = "cuda_flash";
sy::edge::HostLog g_log;

void describe_devices(sy_plugin& p) {
  p.devices.reserve(p.discovery.devices.size());
  for (size_t i = 0; i < p.discovery.devices.size(); ++i) {
    const sy::cuda::CudaDevice& c = p.discovery.devices[i];
    sy_device_desc d{};
    d.struct_size = sizeof(d);
    d.name = c.name.c_str();
    d.device_type = kDLCUDA;
    d.device_id = static_cast<int32_t>(i);
    d.arch = c.arch.c_str();
    d.memory_bytes = c.memory_bytes;
    d.compute_units = c.multiprocessors;
    d.available = 1;  // an old architecture is listed; its kernels refuse it with the reason
    d.memory_is_host = 0;
    p.devices.push_back(d);
  }
  for (const auto& d : p.devices) p.device_list.push_back(&d);
}

sy_status plugin_init(sy_init_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_init_args, plugin))
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args is NULL or undersized");
    auto p = std::make_unique<sy_plugin>();
    p->discovery = sy::cuda::discover_devices();
    describe_devices(*p);
    if (p->devices.empty())
      g_log(SY_LOG_INFO, "no CUDA devices: " + p->discovery.no_devices_reason);
    args->plugin = p.release();
    return SY_STATUS_OK;
  });
}

void plugin_shutdown(sy_plugin* p) {
  delete p;
}

sy_status plugin_get_devices(sy_get_devices_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_get_devices_args, no_devices_reason) ||
      !args->plugin)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_devices_args is NULL or undersized");
  sy_plugin* p = args->plugin;
  args->devices = p->device_list.data();
  args->num_devices = p->device_list.size();
  args->no_devices_reason = p->devices.empty() ? p->discovery.no_devices_reason.c_str() : nullptr;
  return SY_STATUS_OK;
}

sy_status plugin_get_kernels(sy_get_kernels_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_get_kernels_args, num_kernels))
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_kernels_args is NULL or undersized");
  args->kernels = sy::cuda::kernel_envelopes(&args->num_kernels);
  return SY_STATUS_OK;
}

sy_status plugin_check(sy_check_args* args, sy_error_buffer* err) {
  size_t count = 0;
  const sy::edge::KernelEntry* table = sy::cuda::kernel_table(&count);
  return sy::edge::check_against_table(kName, table, count, args, err);
}

constexpr sy_plugin_api make_api() {
  sy_plugin_api api{};
  api.struct_size = sizeof(sy_plugin_api);
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = kName;
  api.plugin_version = "0.1.0";
  api.init = plugin_init;
  api.shutdown = plugin_shutdown;
  api.get_devices = plugin_get_devices;
  api.get_kernels = plugin_get_kernels;
  api.check = plugin_check;
  return api;
}

constexpr sy_plugin_api kApi = make_api();

}  // namespace

extern "C" SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  g_log.bind(host);
  return &kApi;
}
