// cpu_onednn: the ABI edge. Every entry point is guarded; nothing is printed.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cpu_device.hpp"
#include "kernel_table.hpp"

struct sy_plugin {
  sy::cpu::CpuDevice cpu;
  sy::cpu::CpuContext context;
  sy_device_desc device{};
  const sy_device_desc* device_list[1] = {&device};
};

struct sy_kernel {
  std::unique_ptr<sy::edge::OpCopy> op;
  std::unique_ptr<sy::cpu::CpuKernel> impl;
};

namespace {

constexpr const char* kName = "cpu_onednn";
sy::edge::HostLog g_log;

sy_status plugin_init(sy_init_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_init_args, plugin))
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args is NULL or undersized");
    auto* p = new sy_plugin();
    p->cpu = sy::cpu::detect_cpu();
    int threads = std::atoi(sy::edge::init_option(args, "num_threads", "0").c_str());
    if (threads <= 0 || threads > p->cpu.cores) threads = p->cpu.cores;
    p->context.num_threads = threads;
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
    g_log(SY_LOG_DEBUG, "cpu " + p->cpu.name + ", " + std::to_string(p->cpu.cores) +
                            " cores, isa " + p->cpu.isa + ", " + std::to_string(threads) +
                            " threads");
    args->plugin = p;
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
  args->devices = args->plugin->device_list;
  args->num_devices = 1;
  args->no_devices_reason = nullptr;
  return SY_STATUS_OK;
}

sy_status plugin_get_kernels(sy_get_kernels_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_get_kernels_args, num_kernels))
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_kernels_args is NULL or undersized");
  args->kernels = sy::cpu::kernel_envelopes(&args->num_kernels);
  return SY_STATUS_OK;
}

sy_status plugin_check(sy_check_args* args, sy_error_buffer* err) {
  size_t count = 0;
  const sy::edge::KernelEntry* table = sy::cpu::kernel_table(&count);
  return sy::edge::check_against_table(kName, table, count, args, err);
}

sy_status plugin_prepare(sy_prepare_args* args, sy_error_buffer* err) {
  return sy::edge::guarded(kName, err, [&] {
    if (!args || args->struct_size < SY_STRUCT_SIZE_MIN(sy_prepare_args, kernel) || !args->op ||
        !args->plugin)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_prepare_args is NULL or undersized");
    if (args->device_index != 0)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "device %u does not exist (one CPU)",
                     args->device_index);
    size_t count = 0;
    const sy::edge::KernelEntry* table = sy::cpu::kernel_table(&count);
    if (args->kernel_index >= count)
      return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "kernel index %u out of range",
                     args->kernel_index);
    // The same test `check` runs: the dispatcher cannot drift from the declaration.
    const sy::edge::KernelEntry& k = table[args->kernel_index];
    if (sy_status s = sy::edge::refuse_unless_accepted(k, &args->plugin->device, args->op, err);
        s != SY_STATUS_OK)
      return s;
    auto kernel = std::make_unique<sy_kernel>();
    kernel->op = std::make_unique<sy::edge::OpCopy>(*args->op);
    kernel->impl = sy::cpu::kernel_factory(args->kernel_index)(*kernel->op, args->plugin->context);
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
  return api;
}

constexpr sy_plugin_api kApi = make_api();

}  // namespace

extern "C" SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  g_log.bind(host);
  return &kApi;
}
