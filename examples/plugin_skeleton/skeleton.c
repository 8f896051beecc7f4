/*
 * The smallest useful Switchyard plugin, in C: one CPU device, one declared kernel (f32
 * elementwise mul), a check built from the envelope filters and the operator contract that the
 * plugin kit installs (switchyard/op_contract.h, linked through Switchyard::plugin_kit). It
 * declares only: prepare/execute are NULL, which the host reads as "cannot run", never as a
 * crash. skeleton_cxx.cpp is the same plugin in C++ on the kit's shared edge, and it runs.
 */
#include <stdlib.h>

#include "switchyard/op_contract.h"

struct sy_plugin {
  sy_device_desc device;
  const sy_device_desc* devices[1];
};

static const sy_kernel_envelope kMul = {sizeof(sy_kernel_envelope),
                                        "mul_f32",
                                        SY_OP_MUL,
                                        "generic",
                                        kDLCPU,
                                        SY_DTYPE_BIT(SY_DTYPE_F32),
                                        0,
                                        NULL,
                                        0,
                                        0,
                                        0,
                                        0,
                                        SY_RESIDENCY_DEVICE,
                                        NULL,
                                        0,
                                        1.0};
static const sy_kernel_envelope* const kKernels[] = {&kMul};

static sy_status init(sy_init_args* args, sy_error_buffer* err) {
  struct sy_plugin* p;
  if (!args || args->struct_size < SY_INIT_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_init_args undersized");
  p = (struct sy_plugin*)calloc(1, sizeof *p);
  if (!p) return sy_fail(err, SY_STATUS_OUT_OF_MEMORY, "out of memory");
  p->device.struct_size = sizeof p->device;
  p->device.name = "skeleton cpu";
  p->device.device_type = kDLCPU;
  p->device.arch = "generic";
  p->device.available = 1;
  p->device.memory_is_host = 1;
  p->devices[0] = &p->device;
  args->plugin = p;
  return SY_STATUS_OK;
}

static void shutdown(sy_plugin* p) {
  free(p);
}

static sy_status get_devices(sy_get_devices_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_DEVICES_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_devices_args undersized");
  args->devices = args->plugin->devices;
  args->num_devices = 1;
  return SY_STATUS_OK;
}

static sy_status get_kernels(sy_get_kernels_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_GET_KERNELS_ARGS_SIZE_MINOR_0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "sy_get_kernels_args undersized");
  args->kernels = kKernels;
  args->num_kernels = 1;
  return SY_STATUS_OK;
}

static sy_status check(sy_check_args* args, sy_error_buffer* err) {
  if (!args || args->struct_size < SY_CHECK_ARGS_SIZE_MINOR_0 || !args->op || !args->device ||
      args->kernel_index != 0)
    return sy_fail(err, SY_STATUS_INVALID_ARGUMENT, "bad sy_check_args");
  /* Every refusal counts: the envelope's, then the operator contract's (shapes, dtypes). */
  args->accepted =
      sy_envelope_check(&kMul, args->device, args->op, args->add_refusal, args->refusal_context) +
          (args->op->op == SY_OP_MUL
               ? sy_op_contract_check(args->op, args->add_refusal, args->refusal_context)
               : 0) ==
      0;
  return SY_STATUS_OK;
}

SY_EXPORT const sy_plugin_api* sy_plugin_entry(const sy_host_info* host) {
  static sy_plugin_api api;
  (void)host;
  api.struct_size = sizeof api;
  api.abi_major = SY_ABI_VERSION_MAJOR;
  api.abi_minor = SY_ABI_COMPAT_MINOR;
  api.plugin_name = "skeleton";
  api.plugin_version = "1.0.0";
  api.init = init;
  api.shutdown = shutdown;
  api.get_devices = get_devices;
  api.get_kernels = get_kernels;
  api.check = check;
  return &api;
}
