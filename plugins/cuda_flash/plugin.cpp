// cuda_flash: the ABI edge. Loads and answers `check` on any machine; devices appear only
// where a driver and a GPU do. Every entry point is guarded; nothing is printed. Device
// memory is cudaMalloc'd on the device's ordinal; copies are synchronous cudaMemcpy.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cublas_loader.hpp"
#include "cuda_devices.hpp"
#include "cuda_kernel.hpp"
#include "kernel_table.hpp"

struct sy_plugin {
  sy::cuda::Discovery discovery;
  std::vector<sy_device_desc> devices;
  std::vector<const sy_device_desc*> device_list;
  sy::cuda::Cublas cublas;  // loaded on the first matmul prepare
};

struct sy_kernel {
  std::unique_ptr<sy::edge::OpCopy> op;
  std::unique_ptr<sy::cuda::CudaKernel> impl;
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

// UNAVAILABLE with the discovery reason when the plugin has no device, INVALID_ARGUMENT for
// an index past the list; OK otherwise.
sy_status check_device(const sy_plugin* p, uint32_t index, sy_error_buffer* err) {
  if (p->devices.empty())
    return sy_fail(err, SY_STATUS_UNAVAILABLE, "%s: no CUDA device: %s", kName,
                   p->discovery.no_devices_reason.c_str());
  if (index >= p->devices.size())
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: device %u does not exist (%zu devices)",
                   kName, index, p->devices.size());
  return SY_STATUS_OK;
}

int ordinal_of(const sy_plugin* p, uint32_t index) {
  return p->discovery.devices[index].ordinal;
}

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

sy_status plugin_prepare(sy_prepare_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_prepare_args, kernel) || !args->op ||
        !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_prepare_args is NULL or undersized");
    sy_plugin* p = args->plugin;
    if (sy_status s = check_device(p, args->device_index, err); s != SY_STATUS_OK) return s;
    size_t count = 0;
    const sy::edge::KernelEntry* table = sy::cuda::kernel_table(&count);
    if (args->kernel_index >= count)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "kernel index %u out of range",
                     args->kernel_index);
    // The same test `check` runs: the dispatcher cannot drift from the declaration.
    const sy::edge::KernelEntry& k = table[args->kernel_index];
    const sy_device_desc* device = &p->devices[args->device_index];
    if (sy_status s = sy::edge::refuse_unless_accepted(k, device, args->op, err); s != SY_STATUS_OK)
      return s;
    sy::cuda::CudaContext ctx;
    ctx.ordinal = ordinal_of(p, args->device_index);
    if (k.envelope->op == SY_OP_MATMUL) {
      std::string why = p->cublas.load();
      if (!why.empty()) return sy_fail(err, SY_STATUS_UNAVAILABLE, "%s: %s", kName, why.c_str());
      ctx.cublas = &p->cublas;
    }
    auto kernel = std::make_unique<sy_kernel>();
    kernel->op = std::make_unique<sy::edge::OpCopy>(*args->op);
    kernel->impl = sy::cuda::kernel_factory(args->kernel_index)(*kernel->op, ctx);
    args->kernel = kernel.release();
    return SY_STATUS_OK;
  });
}

sy_status plugin_execute(sy_execute_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_execute_args, num_outputs) ||
        !args->kernel)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_execute_args is NULL or undersized");
    if (sy_status s = sy::edge::validate_execute_args(*args->kernel->op, *args, err);
        s != SY_STATUS_OK)
      return s;
    args->kernel->impl->run(args->inputs, args->outputs);
    return SY_STATUS_OK;
  });
}

void plugin_release(sy_plugin*, sy_kernel* kernel) {
  delete kernel;
}

sy_status plugin_alloc(sy_alloc_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_alloc_args, data) || !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_alloc_args is NULL or undersized");
    args->data = nullptr;
    if (sy_status s = check_device(args->plugin, args->device_index, err); s != SY_STATUS_OK)
      return s;
    // cudaMalloc aligns to at least 256 bytes.
    if (args->alignment > 256 || (args->alignment & (args->alignment - 1)) != 0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                     "%s: alignment %llu is not a power of two up to 256", kName,
                     (unsigned long long)args->alignment);
    cudaError_t e = cudaSetDevice(ordinal_of(args->plugin, args->device_index));
    if (e != cudaSuccess)
      return sy_fail(err, SY_STATUS_UNAVAILABLE, "%s: cudaSetDevice: %s", kName,
                     cuda_text(e).c_str());
    void* data = nullptr;
    e = cudaMalloc(&data, args->size_bytes ? args->size_bytes : 1);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state of the runtime
      return sy_fail(
          err, e == cudaErrorMemoryAllocation ? SY_STATUS_OUT_OF_MEMORY : SY_STATUS_INTERNAL,
          "%s: cudaMalloc of %llu bytes on device %u: %s", kName,
          (unsigned long long)args->size_bytes, args->device_index, cuda_text(e).c_str());
    }
    args->data = data;
    return SY_STATUS_OK;
  });
}

void plugin_free_memory(sy_plugin* p, uint32_t device_index, void* data) {
  if (!p || !data || device_index >= p->devices.size()) return;
  if (cudaSetDevice(ordinal_of(p, device_index)) == cudaSuccess) cudaFree(data);
  cudaGetLastError();  // never fails; nothing to report to
}

sy_status plugin_copy(sy_copy_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_copy_args, size_bytes) || !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_copy_args is NULL or undersized");
    if (sy_status s = check_device(args->plugin, args->device_index, err); s != SY_STATUS_OK)
      return s;
    if (args->size_bytes == 0) return SY_STATUS_OK;
    if (!args->dst || !args->src)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: copy with a NULL pointer", kName);
    cudaMemcpyKind kind;
    switch (args->direction) {
      case SY_COPY_HOST_TO_DEVICE: kind = cudaMemcpyHostToDevice; break;
      case SY_COPY_DEVICE_TO_HOST: kind = cudaMemcpyDeviceToHost; break;
      case SY_COPY_DEVICE_TO_DEVICE: kind = cudaMemcpyDeviceToDevice; break;
      default:
        return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: unknown copy direction %d", kName,
                       int(args->direction));
    }
    cudaError_t e = cudaSetDevice(ordinal_of(args->plugin, args->device_index));
    if (e == cudaSuccess) e = cudaMemcpy(args->dst, args->src, args->size_bytes, kind);
    // cudaMemcpy returns before a device-to-device copy ends; the ABI's copy is complete on
    // return (docs/abi.md), so wait for it.
    if (e == cudaSuccess && kind == cudaMemcpyDeviceToDevice) e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
      return sy_fail(err, SY_STATUS_INTERNAL, "%s: cudaMemcpy of %llu bytes: %s", kName,
                     (unsigned long long)args->size_bytes, cuda_text(e).c_str());
    return SY_STATUS_OK;
  });
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
  api.prepare = plugin_prepare;
  api.execute = plugin_execute;
  api.release = plugin_release;
  api.alloc = plugin_alloc;
  api.free_memory = plugin_free_memory;
  api.copy = plugin_copy;
  return api;
}

constexpr sy_plugin_api kApi = make_api();

}  // namespace

extern "C" SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  g_log.bind(host);
  return &kApi;
}
