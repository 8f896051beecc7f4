// cuda_flash: the ABI edge. Loads and answers `check` on any machine; devices appear only
// where a driver and a GPU do. init, device memory and synchronize are this plugin's; the
// kernel slots and the segments extension are the plugin kit's shared C++ edge (segment.hpp
// is what this plugin does with a segment). Every entry point is guarded; nothing is printed.
// Device memory is cudaMalloc'd on the device's ordinal; kernels and copies go to the device's
// stream (device_queue.hpp), copies complete on return, kernels asynchronously until
// `synchronize`.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cublas_loader.hpp"
#include "cuda_devices.hpp"
#include "cuda_kernel.hpp"
#include "cxx_edge/segment_edge.hpp"
#include "device_queue.hpp"
#include "kernel_table.hpp"
#include "segment.hpp"

struct sy_plugin {
  using Impl = sy::cuda::CudaKernel;
  using Context = sy::cuda::CudaContext;
  using Segment = sy::cuda::CudaSegment;
  static constexpr const char* kName = "cuda_flash";
  static const sy::cuda::Kernels& kernels() { return sy::cuda::kernels(); }

  const sy_device_desc* const* device_list(size_t* count, const char** no_devices_reason) const {
    *count = device_list_.size();
    *no_devices_reason = devices.empty() ? discovery.no_devices_reason.c_str() : nullptr;
    return device_list_.data();
  }
  // UNAVAILABLE with the discovery reason when the plugin has no device, INVALID_ARGUMENT for
  // an index past the list; OK otherwise.
  sy_status ready(uint32_t index, sy_error_buffer* err) const {
    if (devices.empty())
      return sy_fail(err, SY_STATUS_UNAVAILABLE, "%s: no CUDA device: %s", kName,
                     discovery.no_devices_reason.c_str());
    if (index >= devices.size())
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "%s: device %u does not exist (%zu devices)",
                     kName, index, devices.size());
    return SY_STATUS_OK;
  }
  // The device's ordinal and queue; cuBLAS, loaded on the first matmul prepare.
  sy_status context(size_t kernel, uint32_t index, Context& ctx, sy_error_buffer* err) {
    ctx.ordinal = ordinal(index);
    ctx.queue = &queue(index);
    if (kernels().entries[kernel].envelope->op != SY_OP_MATMUL) return SY_STATUS_OK;
    std::string why = cublas.load();
    if (!why.empty()) return sy_fail(err, SY_STATUS_UNAVAILABLE, "%s: %s", kName, why.c_str());
    ctx.cublas = &cublas;
    return SY_STATUS_OK;
  }
  int ordinal(uint32_t index) const { return discovery.devices[index].ordinal; }
  // Device `index`'s queue, made on first use (a stream makes the device's context, which a
  // plugin that only declares never needs). Throws StatusError.
  sy::cuda::DeviceQueue& queue(uint32_t index) {
    std::lock_guard<std::mutex> lock(queues_mutex);
    if (queues.size() < devices.size()) queues.resize(devices.size());
    if (!queues[index]) queues[index] = std::make_unique<sy::cuda::DeviceQueue>(ordinal(index));
    return *queues[index];
  }
  std::unique_ptr<Segment> make_segment(sy::edge::SegmentSpec<Impl>&& spec) {
    return std::make_unique<Segment>(std::move(spec), queue(spec.device_index));
  }

  sy::cuda::Discovery discovery;
  std::vector<sy_device_desc> devices;
  std::vector<const sy_device_desc*> device_list_;
  sy::cuda::Cublas cublas;  // loaded on the first matmul prepare
  sy::edge::HostLog log;
  std::mutex queues_mutex;
  std::vector<std::unique_ptr<sy::cuda::DeviceQueue>> queues;  // per device, made on first use
};

namespace {

using Edge = sy::edge::Edge<sy_plugin>;
constexpr const char* kName = sy_plugin::kName;

// The host info sy_plugin_entry received: init logs through it only under a host older than
// ABI 1.2, whose init arguments do not carry it.
const sy_host_info* g_entry_host = nullptr;

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
  for (const auto& d : p.devices) p.device_list_.push_back(&d);
}

sy_status plugin_init(sy_init_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args is NULL or undersized");
    auto p = std::make_unique<sy_plugin>();
    p->log.bind(args, g_entry_host);
    p->discovery = sy::cuda::discover_devices();
    describe_devices(*p);
    if (p->devices.empty())
      p->log(SY_LOG_INFO, "no CUDA devices: " + p->discovery.no_devices_reason);
    args->plugin = p.release();
    return SY_STATUS_OK;
  });
}

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

sy_status plugin_alloc(sy_alloc_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_ALLOC_ARGS_SIZE_MINOR_0 || !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_alloc_args is NULL or undersized");
    args->data = nullptr;
    if (sy_status s = args->plugin->ready(args->device_index, err); s != SY_STATUS_OK) return s;
    // cudaMalloc aligns to at least 256 bytes.
    if (args->alignment > 256 || (args->alignment & (args->alignment - 1)) != 0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                     "%s: alignment %llu is not a power of two up to 256", kName,
                     (unsigned long long)args->alignment);
    cudaError_t e = cudaSetDevice(args->plugin->ordinal(args->device_index));
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
  if (cudaSetDevice(p->ordinal(device_index)) == cudaSuccess) cudaFree(data);
  cudaGetLastError();  // never fails; nothing to report to
}

sy_status plugin_copy(sy_copy_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_COPY_ARGS_SIZE_MINOR_0 || !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_copy_args is NULL or undersized");
    if (sy_status s = args->plugin->ready(args->device_index, err); s != SY_STATUS_OK) return s;
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
    // On the device's stream, after its enqueued work, complete on return (docs/abi.md).
    sy::cuda::DeviceQueue& q = args->plugin->queue(args->device_index);
    std::lock_guard<std::mutex> lock(q.mutex());
    sy::cuda::use_device(q.ordinal());
    q.copy(args->dst, args->src, args->size_bytes, kind);
    return SY_STATUS_OK;
  });
}

#if SY_ABI_COMPAT_MINOR >= 2
void plugin_free_device_memory(sy_free_memory_args* args) {
  if (args && args->struct_size >= SY_FREE_MEMORY_ARGS_SIZE_MINOR_2)
    plugin_free_memory(args->plugin, args->device_index, args->data);
}

// Kernels and copies go to the device's stream without waiting (check_launch); this is where
// the host waits for them, and where a fault of an enqueued kernel is reported.
sy_status plugin_synchronize(sy_synchronize_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_SYNCHRONIZE_ARGS_SIZE_MINOR_2 || !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_synchronize_args is NULL or undersized");
    if (sy_status s = args->plugin->ready(args->device_index, err); s != SY_STATUS_OK) return s;
    sy::cuda::DeviceQueue& q = args->plugin->queue(args->device_index);
    std::lock_guard<std::mutex> lock(q.mutex());
    sy::cuda::use_device(q.ordinal());
    q.wait();
    return SY_STATUS_OK;
  });
}
#endif

constexpr sy_plugin_api make_api() {
  sy_plugin_api api{};
  api.struct_size = sizeof(sy_plugin_api);
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = kName;
  api.plugin_version = "0.1.0";
  api.init = plugin_init;
  Edge::fill(api);
  api.alloc = plugin_alloc;
  api.free_memory = plugin_free_memory;
  api.copy = plugin_copy;
#if SY_ABI_COMPAT_MINOR >= 2
  api.free_device_memory = plugin_free_device_memory;
  api.synchronize = plugin_synchronize;
#endif
  return api;
}

sy_plugin_api kApi = [] {
  sy_plugin_api api = make_api();
  api.extensions = sy::edge::SegmentEdge<sy_plugin>::extension();
  return api;
}();

}  // namespace

extern "C" SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  g_entry_host = host;
  return &kApi;
}
