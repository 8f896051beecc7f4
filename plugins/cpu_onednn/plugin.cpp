// cpu_onednn: the ABI edge. init is this plugin's; every other slot is the plugin kit's shared
// C++ edge (cxx_edge/plugin_edge.hpp). Nothing is printed.
#include <omp.h>

#include <cstdlib>
#include <string>

#include "cpu_device.hpp"
#include "cxx_edge/plugin_edge.hpp"
#include "cxx_edge/segment_edge.hpp"
#include "kernel_table.hpp"
#include "rowdot/weight_layout.hpp"

struct sy_plugin {
  using Impl = sy::cpu::CpuKernel;
  using Context = sy::cpu::CpuContext;
  static constexpr const char* kName = "cpu_onednn";
  static const sy::cpu::Kernels& kernels() { return sy::cpu::kernels(); }
  // The step as one call (the segments extension): the kit runs the prepared kernels in order,
  // without execute's per-call checks. Op by op, each of a step's calls (515 for SmolLM2)
  // crosses the ABI and is checked on both sides: 7 % of a one-sequence SmolLM2 Q4_K_M decode
  // step on a two-core Zen 3 (docs/cpu-tiers.md, "The step as one segment"). The kernels, their
  // order and their OpenMP regions are op by op's, so the results are too, bit for bit.
  using Segment = sy::edge::InOrderSegment<Impl>;
  std::unique_ptr<Segment> make_segment(sy::edge::SegmentSpec<Impl>&& spec) {
    size_t kernels = 0;
    for (const auto& e : spec.entries) kernels += e.kind == SY_SEGMENT_ENTRY_KERNEL;
    const std::string form = "cpu_onednn runs its " + std::to_string(kernels) +
                             " kernels in order, one call of the host a step";
    return std::make_unique<Segment>(std::move(spec), form, false);
  }

  const sy_device_desc* const* device_list(size_t* count, const char** no_devices_reason) const {
    *count = 1;
    *no_devices_reason = nullptr;
    return devices;
  }
  sy_status ready(uint32_t index, sy_error_buffer* err) const {
    if (index == 0) return SY_STATUS_OK;
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "device %u does not exist (one CPU)", index);
  }
  sy_status context(size_t, uint32_t, Context& ctx, sy_error_buffer*) const {
    ctx = context_;
    return SY_STATUS_OK;
  }
  // The weight-layouts extension's packing (rowdot/weight_layout.hpp): matmul_q16's layouts.
  static sy_status pack_weight(const sy_pack_weight_args& a, sy_error_buffer* err) {
    const sy_tensor_desc& d = *a.desc;
    if (d.ndim == 2 && d.shape && sy_tensor_layout(&d) == 0 &&
        sy::cpu::pack_q16_weight(a.layout, d.dtype, d.shape[0], d.shape[1], a.src, a.dst,
                                 a.dst_bytes))
      return SY_STATUS_OK;
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT,
                   "cpu_onednn: layout %u is not one this tier names for a %s weight of this "
                   "shape in %llu bytes",
                   a.layout, sy_dtype_name(d.dtype) ? sy_dtype_name(d.dtype) : "?",
                   (unsigned long long)a.dst_bytes);
  }

  sy::cpu::CpuDevice cpu;
  Context context_;
  sy_device_desc device{};
  const sy_device_desc* devices[1] = {&device};
  sy::edge::HostLog log;
};

namespace {

using Edge = sy::edge::Edge<sy_plugin>;

// The host info sy_plugin_entry received: init logs through it only under a host older than
// ABI 1.2, whose init arguments do not carry it.
const sy_host_info* g_entry_host = nullptr;

sy_status plugin_init(sy_init_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(sy_plugin::kName, err, [&] {
    if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args is NULL or undersized");
    auto* p = new sy_plugin();
    p->log.bind(args, g_entry_host);
    p->cpu = sy::cpu::detect_cpu();
    int threads = std::atoi(sy::edge::init_option(args, "num_threads", "0").c_str());
    if (threads <= 0 || threads > p->cpu.cores) threads = p->cpu.cores;
    p->context_.num_threads = threads;
    omp_set_num_threads(threads);  // oneDNN's runtime is OpenMP: one count for both
    sy_device_desc& d = p->device;
    d.struct_size = sizeof(d);
    d.name = p->cpu.name.c_str();
    d.device_type = kDLCPU;
    d.device_id = 0;
    d.arch = p->cpu.isa.c_str();
    d.memory_bytes = p->cpu.memory_bytes;
    d.compute_units = p->cpu.cores;
    d.available = 1;
    d.memory_is_host = 1;
    if (!p->cpu.tier_note.empty()) p->log(SY_LOG_WARN, p->cpu.tier_note);
    p->log(SY_LOG_DEBUG, "cpu " + p->cpu.name + ", " + std::to_string(p->cpu.cores) +
                             " cores, isa " + p->cpu.isa + ", " + std::to_string(threads) +
                             " threads");
    args->plugin = p;
    return SY_STATUS_OK;
  });
}

// The weight-layouts extension, then the segments extension (make_segment).
const sy_weight_layout_extension kLayouts = [] {
  sy_weight_layout_extension e = sy::edge::LayoutEdge<sy_plugin>::extension();
  e.header.next = sy::edge::SegmentEdge<sy_plugin>::extension();
  return e;
}();

sy_plugin_api make_api() {
  sy_plugin_api api{};
  api.struct_size = sizeof(sy_plugin_api);
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = sy_plugin::kName;
  api.plugin_version = "0.1.0";
  api.init = plugin_init;
  Edge::fill(api);
  api.extensions = &kLayouts.header;
  return api;
}

const sy_plugin_api kApi = make_api();

}  // namespace

extern "C" SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  g_entry_host = host;
  return &kApi;
}
